/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shaper study (delay instead of reject): GCRA with max_delay_ms over a simulated traffic,
 * each admitted request leaving at its arrival + delay_ms, measured against a perfect shaper.
 *
 *   perfect shaper  per key, a FIFO queue served at `limit` per `duration` with `burst + 1` at once,
 *                   that takes a request iff it would leave within max_delay of its arrival:
 *                   depart = max(arrival, last_departure_chain - burst * T), computed in doubles,
 *                   independently of the engine's integer arithmetic.
 *   peak            the most departures of one key within any window (t - duration, t].
 *   peak_bound      limit + burst: what a conforming departure stream may reach in one window.
 */
#ifndef SLUICE_SIM_SHAPE_H
#define SLUICE_SIM_SHAPE_H

#include <stdint.h>

#include "sim/sim.h"

typedef struct sl_sim_shape_result {
    uint64_t requests;
    uint64_t admitted;         /* by the engine, at once or delayed */
    uint64_t delayed;          /* admitted with delay_ms > 0 */
    uint64_t perfect_admitted; /* by the perfect shaper */
    uint64_t errors;
    int64_t max_delay_seen;    /* largest delay_ms answered (<= max_delay) */
    double mean_delay;         /* over the admitted */
    int64_t peak;              /* most departures of one key in any window */
    int64_t peak_bound;        /* limit + burst */
} sl_sim_shape_result;

/* Run the study over s's traffic with s's limit, duration and burst. 0 or a negative errno. */
int sl_sim_shape(const sl_sim *s, int64_t max_delay_ms, sl_sim_shape_result *res);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Traffic for the accuracy simulator: deterministic request streams on a virtual millisecond clock.
 *
 * A traffic is a time-ordered array of (t_ms, key) events, t relative to the start of the run,
 * plus the names of its keys. Every generator draws from its own seeded PRNG (xoshiro256**, seeded
 * through splitmix64), never from rand(), so one seed always gives the same stream, in any process,
 * on any machine, and several simulations can run side by side.
 *
 * Rates are per key: `rate` 100 with 10 keys is ten independent Poisson streams of 100 req/s each
 * (one stream of 1000 req/s whose events pick a key uniformly, which is the same process).
 *
 * Memory is bounded: a traffic never holds more than `max_events` events or SL_TRAFFIC_MAX_KEYS
 * keys; a generator or a replay that would exceed them fails with -E2BIG and leaves the traffic
 * empty.
 */
#ifndef SLUICE_SIM_TRAFFIC_H
#define SLUICE_SIM_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Most distinct keys one traffic may name (a replayed file cannot exhaust memory through keys). */
#define SL_TRAFFIC_MAX_KEYS (1u << 20)
/* Longest key accepted in a replayed file, bytes. */
#define SL_TRAFFIC_MAX_KEY_LEN 256
/* Default cap on events: 16 bytes each, so 160 MB at most. */
#define SL_TRAFFIC_DEFAULT_MAX_EVENTS ((size_t)10 * 1000 * 1000)

typedef struct sl_traffic_rng {
    uint64_t s[4];
} sl_traffic_rng;

void sl_traffic_rng_seed(sl_traffic_rng *r, uint64_t seed);
uint64_t sl_traffic_rng_next(sl_traffic_rng *r);
double sl_traffic_rng_unit(sl_traffic_rng *r);                 /* uniform in [0, 1) */
uint32_t sl_traffic_rng_below(sl_traffic_rng *r, uint32_t n);  /* uniform in [0, n), n > 0 */
double sl_traffic_rng_exp(sl_traffic_rng *r, double mean);     /* exponential with this mean */

typedef struct sl_traffic_event {
    int64_t t_ms;  /* milliseconds since the start of the run, >= 0, non-decreasing */
    uint32_t key;  /* index into keys[] */
    uint32_t pad;
} sl_traffic_event;

typedef struct sl_traffic {
    sl_traffic_event *ev;
    size_t n, cap;
    size_t max_events;
    char **keys;       /* nkeys NUL-terminated names */
    uint32_t nkeys;
    int64_t span_ms;   /* length of the run: every event has t_ms < span_ms */
} sl_traffic;

/* max_events 0 means SL_TRAFFIC_DEFAULT_MAX_EVENTS. */
void sl_traffic_init(sl_traffic *t, size_t max_events);
/* Drop events and keys (keeps max_events); the traffic can be generated into again. */
void sl_traffic_clear(sl_traffic *t);
void sl_traffic_free(sl_traffic *t);

/* Poisson arrivals at `rate` req/s per key for span_ms, keys named "k0".."k<keys-1>". */
int sl_traffic_poisson(sl_traffic *t, double rate, int64_t span_ms, uint32_t keys, uint64_t seed);

/* On/off: Poisson at `rate` per key during on_ms, silence during off_ms, repeating from t = 0
 * (starting "on"). The mean rate is rate * on_ms / (on_ms + off_ms). */
int sl_traffic_bursty(sl_traffic *t, double rate, int64_t on_ms, int64_t off_ms, int64_t span_ms,
                      uint32_t keys, uint64_t seed);

/* Evenly spaced: every key at t = floor(i * 1000 / rate) ms, i = 0, 1, ... (no randomness; the
 * case where a rate limiter's rounding shows, e.g. a leaky bucket under exactly 2/s). */
int sl_traffic_constant(sl_traffic *t, double rate, int64_t span_ms, uint32_t keys);

/* Poisson whose rate per key grows linearly from rate0 at t = 0 to rate1 at span_ms (thinning). */
int sl_traffic_ramp(sl_traffic *t, double rate0, double rate1, int64_t span_ms, uint32_t keys,
                    uint64_t seed);

/* The fixed window's worst case: for every other multiple B of `duration` in absolute time
 * (epoch_ms + t), `per_edge` requests per key at B - 1 and `per_edge` more at B. With per_edge
 * equal to the limit, a fixed window aligned to multiples of its duration admits 2 x limit within
 * 2 ms. */
int sl_traffic_edge(sl_traffic *t, int64_t per_edge, int64_t duration, int64_t epoch_ms,
                    int64_t span_ms, uint32_t keys);

/*
 * Replay a file: one event per line, "<t_ms> [<key>]" separated by blanks or a comma; '#' starts a
 * comment; blank lines are skipped. A missing key is "k0". Timestamps are integers in milliseconds
 * (absolute or relative: the run starts at the smallest); unsorted lines are sorted (stably).
 * On a malformed line returns -EINVAL with *err_line set to its number (1-based) and *err to a
 * static message.
 */
int sl_traffic_replay(sl_traffic *t, FILE *f, size_t *err_line, const char **err);

/* Mean rate actually generated, req/s per key, over the span. */
double sl_traffic_mean_rate(const sl_traffic *t);

#endif

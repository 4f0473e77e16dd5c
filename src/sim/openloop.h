/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The open-loop lab: Criteo's figures. The same offered traffic is fed to each estimator, and what
 * the estimator believes the trailing window holds is recorded against the true count, over time.
 * Nothing is rejected along the way, so every estimator sees every request (the closed-loop lab in
 * sim.h instead lets each limiter's decisions shape what it counts next).
 *
 * The estimators are the real engine (sluice/engine.h) on a virtual clock, one key of the traffic,
 * sampled at t = step, 2 step, ... up to the traffic's span (t relative to the epoch; a window at t
 * is (t - duration, t]). A sample feeds every request of the key dated at or before t, then reads
 * the estimator with a peek (hits 0) at t. What a column holds depends on its kind:
 *
 *   true      the number of requests of the key in (t - duration, t]: a perfect sliding window.
 *   COUNT     fixed_window, sliding_window:N, sliding_log, token_bucket: the estimator's own count
 *             of the trailing window, capacity - remaining from the peek, where capacity is what a
 *             peek at an untouched key reports. The engine runs with its limit raised above anything
 *             the count can reach (2 x the most requests in any window, + 2: an estimate weighs
 *             counts of at most window + one sub-window), so no request is refused and the limit
 *             plays no part in the count.
 *   BACKLOG   leaky_bucket, gcra: the requests in the bucket, arrivals minus what has drained at
 *             limit per duration. The rate is the run's limit; the bucket is made deeper than the
 *             key's request count, so nothing is refused. This is what the bucket measures: not a
 *             count of the window but a queue, zero under any load below the rate and growing
 *             without bound above it.
 *   ADMITTED  leaky_bucket, gcra with the run's limit and burst (closed loop, as sluiced runs
 *             them): the requests they let through in (t - duration, t]. A bucket's output per
 *             window is its view of the window; ideally min(offered, limit) in steady state.
 *
 * Errors are estimate - true over a range of samples: mean absolute error, the largest absolute
 * error, and the bias (the mean signed error). Memory: the key's request times (8 bytes each) and
 * one double per sample per column, the caller's.
 */
#ifndef SLUICE_SIM_OPENLOOP_H
#define SLUICE_SIM_OPENLOOP_H

#include <stddef.h>
#include <stdint.h>

#include "sim/sim.h"
#include "sim/traffic.h"

/* Most samples one series holds. */
#define SL_OPENLOOP_MAX_SAMPLES 1000000

typedef enum sl_openloop_kind {
    SL_OPENLOOP_COUNT = 0,
    SL_OPENLOOP_BACKLOG,
    SL_OPENLOOP_ADMITTED,
} sl_openloop_kind;

typedef struct sl_openloop_col {
    sl_sim_alg alg;
    sl_openloop_kind kind;
    char label[SL_SIM_LABEL_MAX + 12]; /* "fixed_window", "leaky_bucket_backlog", "gcra:99_admitted" */
} sl_openloop_col;

/* The columns for a list of algorithms: COUNT for the windows, the log and the token bucket;
 * BACKLOG then ADMITTED for leaky_bucket and gcra. 0 or -E2BIG (more than max). */
int sl_openloop_columns(const sl_sim_alg *algs, size_t n, sl_openloop_col *out, size_t max,
                        size_t *nout);

/* Samples in a series: span / step. 0 if step < 1. */
size_t sl_openloop_samples(const sl_traffic *t, int64_t step_ms);

/* The true count of `key` at every sample into out[sl_openloop_samples()]. 0 or -EINVAL. */
int sl_openloop_true(const sl_traffic *t, uint32_t key, int64_t duration, int64_t step_ms,
                     double *out);

/* Column c's series of `key` into out[sl_openloop_samples()] (p: limit, duration, burst, epoch).
 * 0, -EINVAL (bad key/step/params, or the engine refused a request: *err then names why), -E2BIG
 * (too many samples) or -ENOMEM. */
int sl_openloop_run(const sl_traffic *t, uint32_t key, const sl_sim_params *p,
                    const sl_openloop_col *c, int64_t step_ms, double *out, const char **err);

typedef struct sl_openloop_err {
    size_t n;          /* samples compared */
    double mean_true;  /* mean true count */
    double mean_est;   /* mean estimate */
    double mae;        /* mean |est - true| */
    double max_err;    /* largest |est - true| */
    double bias;       /* mean (est - true) */
} sl_openloop_err;

/* Compare est with truth over samples [from, to). */
void sl_openloop_error(const double *est, const double *truth, size_t from, size_t to,
                       sl_openloop_err *out);

#endif

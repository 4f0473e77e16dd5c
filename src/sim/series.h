/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CSV time series for the accuracy plots: for one key, the number of requests each limiter
 * admitted in the trailing window (t - duration, t], sampled every step, one column per limiter.
 * This is what Criteo's figures draw (a perfect sliding window against each algorithm).
 */
#ifndef SLUICE_SIM_SERIES_H
#define SLUICE_SIM_SERIES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/traffic.h"

/* Most rows one series writes. */
#define SL_SERIES_MAX_ROWS 1000000

/*
 * Write "t_s,<names[0]>,...,<names[ncols-1]>" and then a row for every t = step_ms, 2 step_ms, ...
 * up to the traffic's span: t in seconds, then for each column the count of requests of `key` that
 * dec[col][i] marks admitted with t_i in (t - duration, t]. 0, -EINVAL (bad key/step/duration),
 * -E2BIG (more than SL_SERIES_MAX_ROWS rows), -ENOMEM, or -EIO on a write error.
 */
int sl_series_write(FILE *f, const sl_traffic *t, uint32_t key, int64_t duration, int64_t step_ms,
                    size_t ncols, const char *const *names, const uint8_t *const *dec);

#endif

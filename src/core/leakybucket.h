/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LEAKY_BUCKET with Gubernator v2's semantics (docs/algorithms.md, "LEAKY_BUCKET"): a bucket of
 * `burst` (default `limit`) that refills continuously at limit/duration, with a fractional
 * remaining kept as a double exactly like Gubernator's float64.
 */
#ifndef SLUICE_CORE_LEAKYBUCKET_H
#define SLUICE_CORE_LEAKYBUCKET_H

#include <stdint.h>

#include "core/alg.h"

/* t: the decision time (created_at, or now); now: the server clock (Gregorian intervals). */
void sl_lb_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t, int64_t now,
                  sl_response *resp);

/* What the key holds at `now` (sl_alg_info_of, for eviction); st is a LEAKY_BUCKET. */
sl_alg_info sl_lb_info(const sl_state *st, int64_t now);

#endif

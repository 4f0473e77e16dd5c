/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SLIDING_LOG: the exact sliding window. The key keeps the timestamps of its admitted hits in a ring
 * of `limit` entries (a side buffer, 8 bytes per unit of limit, capped by max-log-limit); n hits are
 * admitted at t iff (admissions in (t - duration, t]) + n <= limit (docs/algorithms.md).
 */
#ifndef SLUICE_CORE_SLIDELOG_H
#define SLUICE_CORE_SLIDELOG_H

#include <stdint.h>

#include "core/alg.h"

/* t: the decision time (created_at, or now). */
void sl_slog_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                    sl_response *resp);

uint64_t sl_slog_side_bytes(const sl_state *st);
void sl_slog_release(sl_state *st);

/* What the key holds at `now` (sl_alg_info_of, for eviction); st is a SLIDING_LOG. */
sl_alg_info sl_slog_info(const sl_state *st, int64_t now);

#endif

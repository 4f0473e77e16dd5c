/* SPDX-License-Identifier: Apache-2.0 */
/*
 * FIXED_WINDOW and SLIDING_WINDOW (docs/algorithms.md): counters per window aligned to multiples of
 * the window length since the epoch; the sliding window estimates the last `duration` from the
 * current window(s) and the oldest one weighted by its remaining overlap (Criteo, Cloudflare), with
 * optional sub-windows kept in a side buffer.
 */
#ifndef SLUICE_CORE_WINDOW_H
#define SLUICE_CORE_WINDOW_H

#include <stdint.h>

#include "core/alg.h"

/* t: the decision time (created_at, or now). */
void sl_win_fixed_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                         sl_response *resp);
void sl_win_sliding_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                           sl_response *resp);

/* Side buffer of a SLIDING_WINDOW state (sub-windows > 1): bytes held, and freeing it. */
uint64_t sl_win_side_bytes(const sl_state *st);
void sl_win_release(sl_state *st);

/* What the key holds (sl_alg_info_of, for eviction); st is a FIXED_WINDOW / SLIDING_WINDOW that
 * has not expired. */
sl_alg_info sl_win_fixed_info(const sl_state *st);
sl_alg_info sl_win_sliding_info(const sl_state *st);

#endif

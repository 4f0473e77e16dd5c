/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TOKEN_BUCKET with Gubernator v2's semantics (docs/algorithms.md, "TOKEN_BUCKET"). Despite the
 * name it is a fixed window that starts at the key's first request: `limit` hits per `duration`,
 * all of it back when the item expires.
 */
#ifndef SLUICE_CORE_TOKENBUCKET_H
#define SLUICE_CORE_TOKENBUCKET_H

#include <stdint.h>

#include "core/alg.h"

/* t: the decision time (created_at, or now); now: the server clock (Gregorian intervals). */
void sl_tb_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t, int64_t now,
                  sl_response *resp);

/* What the key holds at `now` (sl_alg_info_of, for eviction); st is a TOKEN_BUCKET. */
sl_alg_info sl_tb_info(const sl_state *st);

#endif

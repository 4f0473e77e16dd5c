/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GCRA, the Generic Cell Rate Algorithm as Levee uses it (ITU-T I.371 virtual scheduling):
 * `limit` per `duration` spaced evenly, with Levee's `burst` = extra requests admitted at once
 * beyond one (docs/algorithms.md, "GCRA").
 */
#ifndef SLUICE_CORE_GCRA_H
#define SLUICE_CORE_GCRA_H

#include <stdint.h>

#include "core/alg.h"

/* t: the decision time (created_at, or now). */
void sl_gcra_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                    sl_response *resp);

/* What the key holds at `now` (sl_alg_info_of, for eviction); st is a GCRA. */
sl_alg_info sl_gcra_info(const sl_state *st, int64_t now);

#endif

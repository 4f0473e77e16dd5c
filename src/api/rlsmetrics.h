/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_rlsmetrics: what ShouldRateLimit decided, per domain and rule:
 *   sluice_rls_descriptors_total{domain,rule,outcome}
 * outcome: ok, over_limit, shadow_over_limit (shadow_mode: would have been rejected, answered
 * OK), unlimited, no_limit (no rule, or a replaced one). rule: the rule's name, else its path
 * ("key_value.key" under the domain), "" with no rule. domain: a configured domain's name;
 * requests for domains no file defines count under "_unknown" (the caller picks the domain, the
 * configuration the rules).
 *
 * Cardinality guard (as protect/who.h does for limit names): the first max_names distinct
 * (domain, rule) pairs get their own series, every later pair counts as domain="other",
 * rule="other". A pair is found by a scan of at most max_names hashes under one mutex per call.
 */
#ifndef SLUICE_API_RLSMETRICS_H
#define SLUICE_API_RLSMETRICS_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/metrics.h"

typedef enum sl_rls_outcome {
    SL_RLS_OK,
    SL_RLS_OVER_LIMIT,
    SL_RLS_SHADOW_OVER,
    SL_RLS_UNLIMITED,
    SL_RLS_NO_LIMIT,
    SL_RLS_NEAR_LIMIT, /* counted besides ok: admitted past the near-limit ratio (upstream's
                        * near_limit stat), so outcomes other than it sum to the descriptors */
    SL_RLS_OUTCOME_COUNT
} sl_rls_outcome;

const char *sl_rls_outcome_name(sl_rls_outcome o);

typedef struct sl_rlsmetrics sl_rlsmetrics;

#define SL_RLSMETRICS_UNKNOWN "_unknown"

/* max_names 0..1000 (0: every pair is "other"); metrics NULL: *out = NULL (counting is then a no-op). 0 or -errno. */
int sl_rlsmetrics_new(sl_metrics *metrics, uint32_t max_names, sl_rlsmetrics **out);
void sl_rlsmetrics_free(sl_rlsmetrics *m);

/* One call's outcomes: n descriptors, descriptor i under (domain, rule[i]) with outcome[i].
 * domain NULL = an unknown domain. Any thread. */
void sl_rlsmetrics_count(sl_rlsmetrics *m, const char *domain, size_t domain_len,
                         const char *const *rule, const uint8_t *outcome, size_t n);

#endif

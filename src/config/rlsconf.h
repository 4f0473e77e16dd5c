/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_rlsconf: envoyproxy/ratelimit's configuration format, parsed (libyaml, pure: text in, tree
 * out) and matched. One file is one domain:
 *
 *   domain: <name>
 *   descriptors:
 *     - key: <k>                 required
 *       value: <v>               optional; '*' in key_value is a wildcard (zero or more bytes)
 *       rate_limit:              optional
 *         unit: second|minute|hour|day|week|month|year
 *         unit_multiplier: <n>   (sluice's, as Envoy's API proposals name it: the window is n
 *                                 units, aligned to multiples of its length since the epoch)
 *         requests_per_unit: <n>
 *         unlimited: true        (no unit then)
 *         name: <rule name>
 *         replaces: [{name: <rule name>}, ...]
 *         algorithm: fixed_window|token_bucket|leaky_bucket|gcra|sliding_window   (sluice's)
 *         burst: <n>                                                               (sluice's)
 *       rate_limits:             (sluice's) a list of rate_limit blocks, in place of rate_limit:
 *         - {unit: second, requests_per_unit: 10}       all must pass; all are counted only if
 *         - {unit: hour, requests_per_unit: 1000}       all pass (the call gives back the others)
 *       shadow_mode: bool
 *       detailed_metric: bool
 *       descriptors: [...]       nested, same shape
 *
 * share_threshold: true on a wildcard descriptor makes every value it matches share one counter.
 * quota_mode: true is envoyproxy/ratelimit's soft limit (sl_rlsconf_rule.quota). value_to_metric
 * and metadata are accepted and ignored (envoyproxy/ratelimit's own, with no effect on decisions). Any other key is an
 * error, as envoyproxy/ratelimit's strict key check makes it.
 *
 * Matching (sl_rlsconf_match) follows envoyproxy/ratelimit's: per request entry, the child whose
 * key and value equal it; else the first wildcard child (in file order) whose key_value pattern
 * matches "key_value"; else the child with that key and no value. The limit of the node the LAST
 * entry lands on applies; a request with more entries than the tree has levels, or landing on a
 * node without rate_limit, gets none. A configuration is immutable once built and shared by
 * reference count between threads.
 */
#ifndef SLUICE_CONFIG_RLSCONF_H
#define SLUICE_CONFIG_RLSCONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RateLimitResponse.RateLimit.Unit's values (Envoy's rls.proto); WEEK is envoyproxy/ratelimit's. */
enum sl_rls_unit {
    SL_RLS_UNIT_UNKNOWN = 0,
    SL_RLS_UNIT_SECOND = 1,
    SL_RLS_UNIT_MINUTE = 2,
    SL_RLS_UNIT_HOUR = 3,
    SL_RLS_UNIT_DAY = 4,
    SL_RLS_UNIT_MONTH = 5,
    SL_RLS_UNIT_YEAR = 6,
    SL_RLS_UNIT_WEEK = 7,
    SL_RLS_UNIT_COUNT
};

/* The unit's length in ms as envoyproxy/ratelimit divides time (a month is 30 days, a year 365),
 * 0 for an unknown unit. */
int64_t sl_rls_unit_ms(int unit);

/* Most nesting levels of descriptors, files in a directory and bytes in one file. */
#define SL_RLSCONF_MAX_DEPTH 32
#define SL_RLSCONF_MAX_FILE ((size_t)4 << 20)

typedef struct sl_rlsconf_rule {
    uint32_t requests_per_unit;
    uint8_t unit;        /* sl_rls_unit */
    bool unlimited;
    bool shadow;         /* shadow_mode: decide and count, always answer OK */
    bool quota;          /* quota_mode: over its limit it reports (the descriptor's status says
                          * OVER_LIMIT) but rejects the call only when every quota-mode
                          * descriptor of the call is over, as envoyproxy/ratelimit decides */
    bool detailed;       /* detailed_metric */
    int32_t algorithm;   /* sl_algorithm; SL_FIXED_WINDOW unless the rule says */
    int64_t burst;
    const char *name;    /* NUL-terminated; "" = none */
    const char *const *replaces; /* names of rules this one replaces */
    size_t n_replaces;
    uint32_t unit_multiplier; /* >= 1: the window is unit x this */
    int64_t window_ms;   /* the unit's length times unit_multiplier; 0 when unlimited */
    /* the next block of the same descriptor's rate_limits: list, NULL after the last (and for a
     * single rate_limit:); it shares path, shadow and detailed with this one */
    const struct sl_rlsconf_rule *also;
    const char *path;    /* "key_value.key_value" under the domain, for metrics and logs */
    const char *file;
    int line;
} sl_rlsconf_rule;

typedef struct sl_rlsconf_node sl_rlsconf_node;
typedef struct sl_rlsconf_domain sl_rlsconf_domain;
typedef struct sl_rlsconf sl_rlsconf;

/* A request's entry (not NUL-terminated strings). */
typedef struct sl_rlsconf_entry {
    const char *key, *value;
    size_t key_len, value_len;
} sl_rlsconf_entry;

/* An empty configuration (no domains), reference count 1. 0 or -ENOMEM. */
int sl_rlsconf_new(sl_rlsconf **out);
/*
 * Parse one file's text (`file` names it in errors and in the rules) and add its domain. On a
 * malformed file or a domain another file already has: -EINVAL, "<file>: line N: <why>" in err,
 * and c unchanged as far as lookups go. -ENOMEM when out of memory.
 */
int sl_rlsconf_add(sl_rlsconf *c, const char *file, const char *text, size_t len, char *err,
                   size_t errlen);
void sl_rlsconf_ref(sl_rlsconf *c);
void sl_rlsconf_unref(sl_rlsconf *c); /* NULL is fine */

size_t sl_rlsconf_domains(const sl_rlsconf *c);
const sl_rlsconf_domain *sl_rlsconf_domain_find(const sl_rlsconf *c, const char *name, size_t len);
/* The rule for a descriptor's entries in domain d, or NULL (no limit). shared (may be NULL; n
 * slots): for each entry matched by a share_threshold wildcard, the pattern's value to count it
 * under instead of its own, else NULL. */
const sl_rlsconf_rule *sl_rlsconf_match(const sl_rlsconf_domain *d, const sl_rlsconf_entry *e,
                                        size_t n, const char **shared);
/* The domain's name (NUL-terminated) and its length. */
const char *sl_rlsconf_domain_name(const sl_rlsconf_domain *d, size_t *len);
/* Whether some descriptor of d has share_threshold (so that callers ask for `shared`). */
bool sl_rlsconf_domain_shares(const sl_rlsconf_domain *d);

#endif

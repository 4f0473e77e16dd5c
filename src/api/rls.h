/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Envoy's rate limit service (RLS v3): envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
 * as one more dialect on the client port. A RateLimitRequest becomes one engine item per
 * descriptor that matches a limit of the --rls-config-dir configuration (config/rlsconf.h), and
 * the batch's answers become a RateLimitResponse. Messages are read and written by hand over
 * wire/pbwire.h (field numbers from Envoy's published rls.proto and ratelimit.proto; reduced
 * copies for clients are in proto/envoy/).
 *
 * Items: name "rls:<domain>", unique_key "key=value|key=value..." (the request's entries, so a
 * rule whose key has no value counts each value apart, as envoyproxy/ratelimit does), limit
 * requests_per_unit, duration the unit (a month 30 days, a year 365), algorithm FIXED_WINDOW
 * with windows aligned to the epoch and over-limit hits draining the window (envoyproxy/
 * ratelimit's counting) unless the rule names another algorithm. hits: the descriptor's
 * hits_addend when set (0 = look without counting), else the request's, else 1.
 *
 * Answers per descriptor: no domain, no matching rule, or a rule replaced by another matched
 * one -> OK without current_limit; unlimited -> OK with limit_remaining 2^32-1; a limit -> its
 * code (OVER_LIMIT turned OK under shadow_mode), current_limit, limit_remaining and
 * duration_until_reset. overall_code is OVER_LIMIT when any descriptor is. An item the
 * engine or the cluster could not decide fails the call UNAVAILABLE (Envoy's failure_mode_deny
 * then decides). Errors of the request (INVALID_ARGUMENT): not protobuf, wrong wire types, text
 * that is not UTF-8, no domain, no descriptor, more than max_descriptors descriptors or
 * max_entries entries in one, a limit override with an unknown unit.
 */
#ifndef SLUICE_API_RLS_H
#define SLUICE_API_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide/batch.h"
#include "api/gubernator.h"
#include "api/rlsmetrics.h"
#include "base/buf.h"
#include "config/rlsconf.h"

#define SL_RLS_PATH "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
/* Kuadrant/limitador's service over the same messages: check before, charge after. */
#define SL_RLS_KUADRANT_CHECK_PATH "/kuadrant.service.ratelimit.v1.RateLimitService/CheckRateLimit"
#define SL_RLS_KUADRANT_REPORT_PATH "/kuadrant.service.ratelimit.v1.RateLimitService/Report"

/* What a call does with its hits. */
typedef enum sl_rls_mode {
    SL_RLS_SHOULD = 0, /* ShouldRateLimit: decide and count what is admitted (the rules' way) */
    SL_RLS_CHECK,      /* CheckRateLimit: would the hits pass? nothing is counted */
    SL_RLS_REPORT,     /* Report: charge the hits whatever the limit says (usage known after the
                        * fact, such as tokens); the call answers OK, statuses show the state */
} sl_rls_mode;
#define SL_RLS_NAME_PREFIX "rls:"

#define SL_RLS_HEADER_MAX 64 /* bytes of a response header's name, NUL included */

typedef struct sl_rls_config {
    size_t max_descriptors; /* most descriptors in one request; 0 = 1000 */
    size_t max_entries;     /* most entries in one descriptor; 0 = 64 */
    bool headers;           /* answer with RateLimit-Limit, -Remaining and -Reset */
    bool all_or_nothing;    /* a call is counted only if all its descriptors pass */
    bool quota_mode;        /* every limit in quota mode (envoyproxy/ratelimit's QUOTA_MODE) */
    bool dynamic_metadata;  /* answer with dynamic_metadata naming descriptors over or near */
    uint32_t near_permille; /* near its limit past this share of it, 1..1000 /1000; 0 = 800 */
    /* names of the three response headers; "" = RateLimit-Limit, -Remaining, -Reset */
    char header_limit[SL_RLS_HEADER_MAX], header_remaining[SL_RLS_HEADER_MAX],
        header_reset[SL_RLS_HEADER_MAX];
    uint32_t max_names;     /* (domain, rule) pairs with series of their own (api/rlsmetrics.h) */
} sl_rls_config;

/* A decoded RateLimitRequest; strings point into the message, arrays into the batch's arena. */
typedef struct sl_rls_desc {
    sl_rlsconf_entry *entries;
    size_t n;
    bool has_limit;      /* limit override */
    uint32_t limit_rpu;
    uint32_t limit_unit;
    bool has_hits;       /* hits_addend set (UInt64Value present) */
    uint64_t hits;
} sl_rls_desc;

typedef struct sl_rls_req {
    const char *domain;
    size_t domain_len;
    sl_rls_desc *descs;
    size_t n;
    uint32_t hits_addend;
} sl_rls_req;

/* Decode msg (the pure codec; the fuzz target). 0, or -EINVAL/-E2BIG with a static reason in
 * *err; -ENOMEM when the arena is full. */
int sl_rls_parse(const sl_rls_config *cfg, const uint8_t *msg, size_t len, sl_batch *b,
                 sl_rls_req *out, const char **err);

typedef struct sl_rls_call sl_rls_call;

/*
 * Decode msg and plan it against conf (may be NULL: no domain is known) into b (reset first):
 * the items to decide are b's unanswered ones. *call (in b's arena) holds a reference to conf
 * until sl_rls_end(). 0, or -errno with st set (INVALID_ARGUMENT, RESOURCE_EXHAUSTED).
 */
int sl_rls_begin(const sl_rls_config *cfg, sl_rlsconf *conf, const uint8_t *msg, size_t len,
                 sl_batch *b, sl_rls_call **call, sl_grpc_status *st);
/* The same for CheckRateLimit and Report (sl_rls_begin is SL_RLS_SHOULD). */
int sl_rls_begin_mode(const sl_rls_config *cfg, sl_rlsconf *conf, sl_rls_mode mode,
                      const uint8_t *msg, size_t len, sl_batch *b, sl_rls_call **call,
                      sl_grpc_status *st);
/* The RateLimitResponse for the decided batch (appended to out). 0; -EAGAIN with st set when an
 * item failed (answer st instead); -ENOMEM. */
int sl_rls_encode(const sl_rls_call *call, const sl_batch *b, int64_t now_ms, sl_buf *out,
                  sl_grpc_status *st);
/*
 * All or nothing, after the decision and before sl_rls_encode: in every group that holds a limit
 * which did not admit (a descriptor's rate_limits: blocks; the whole call with all_or_nothing),
 * the limits that admitted give their hits back. Their items are copied into gb (reset here, hits
 * negated) for the caller to hand where the call's items went, and the answer reports them with
 * what is left once the hits are back. The number of items in gb; 0: nothing to give back (or no
 * memory for it: the hits then stay taken). gb NULL: only the number, nothing marked. Between the decision and the give-back the hits are
 * held: a concurrent call can be refused by them for that one round trip (docs/envoy.md).
 */
size_t sl_rls_giveback(sl_rls_call *call, const sl_batch *b, sl_batch *gb);
/* The request's descriptors (the answer's statuses; the batch may hold more items: one per
 * rate_limits: block). */
size_t sl_rls_descriptors(const sl_rls_call *call);
/* Whether the call has a group of several limits at all (else sl_rls_giveback has nothing). */
bool sl_rls_may_give_back(const sl_rls_call *call);

/* Drop the call's reference to its configuration (NULL is fine). */
void sl_rls_end(sl_rls_call *call);

/* Count the decided call's descriptors in m (api/rlsmetrics.h; NULL is fine). */
void sl_rls_count(const sl_rls_call *call, const sl_batch *b, sl_rlsmetrics *m);

#endif

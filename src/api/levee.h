/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Levee's rate quotas for POST /attempt, independent of the network layer: header values in, an
 * HTTP answer out (api/answer.h: status, headers, body) that node/service.c renders. The
 * protections around them (priorities, leases, shedders, switches) are api/attempt.c's.
 *
 *   request headers  X-Resource (required), X-Prefix, X-Method, X-Req-Id (echoed)
 *   answers          200 accepted · 429 rejected · 500 failed (plain-text reason) · 400 malformed
 *   a 429 carries    Retry-After: <seconds>
 *                    RateLimit-Policy: "<quota>";q=<n>;w=<seconds>;sluice-burst=<b>, ...
 *                    RateLimit: "<quota>";r=<remaining>;t=<seconds>, ...
 *                    (draft-ietf-httpapi-ratelimit-headers, Structured Fields lists)
 *
 * The quotas that apply come from the snapshot (config/quota.h: lookup order, sublimits, group
 * size); each is decided by the engine with SL_GCRA, one engine key per quota bucket. A request
 * passes only if every quota that applies accepts it, and a rejected request consumes nothing:
 * the main quota is decided first (hits=1); if it rejects, the sub quota is never touched; if it
 * accepts and the sub quota then rejects, the main quota's hit is given back (hits=-1, which
 * moves GCRA's TAT back by exactly one emission interval). The end state is exactly that of a
 * request that was never made; the one imprecision is transient: between the take and the give
 * back (nanoseconds, same `now`) a concurrent request on the main bucket sees one hit more. A
 * peek-first scheme (hits=0 on both, then take) would cost a third engine call on every accepted
 * request and still need the give-back for races, so it buys nothing.
 *
 * docs/levee.md describes the model with worked examples.
 */
#ifndef SLUICE_API_LEVEE_H
#define SLUICE_API_LEVEE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/answer.h"
#include "decide/batch.h"
#include "config/quota.h"
#include "runtime/log.h"
#include "sluice/engine.h"

/* What happens to a request for which no quota applies (no key, no key_default, no subkey
 * quota). The values are those of sl_no_quota in config/config.h (--no-quota). */
typedef enum sl_levee_no_quota {
    SL_LEVEE_NO_QUOTA_ALLOW = 0, /* 200: fail open */
    SL_LEVEE_NO_QUOTA_DENY = 1,  /* 429 */
    SL_LEVEE_NO_QUOTA_ERROR = 2, /* 500 "no quota for resource" (default, as sluiced's --no-quota) */
} sl_levee_no_quota;

typedef struct sl_levee_config {
    sl_levee_no_quota no_quota;
    bool headers_on_accept;        /* also send RateLimit-Policy / RateLimit on 200 */
    uint32_t group_size;           /* 0: DF from the tree (Levee); N > 0: use N for every key */
    int64_t blocked_retry_after_s; /* Retry-After for rate-0 quotas and no-quota deny; 0 = 1 */
    const char *name;              /* engine namespace of Levee buckets; NULL = "levee" */
    sl_logger *log;                /* decisions at debug, failures at warn; may be NULL */
    int64_t max_delay_ms;          /* longest X-Max-Delay honoured (larger is cut); 0 = no delay */
} sl_levee_config;

void sl_levee_config_default(sl_levee_config *cfg);
/* "allow", "deny", "error" -> mode, or -EINVAL. */
int sl_levee_no_quota_from_name(const char *s);
const char *sl_levee_no_quota_name(sl_levee_no_quota m);

/* Header values; NULL (or length 0) = absent. Values are not copied. */
typedef struct sl_levee_request {
    const char *resource;
    size_t resource_len;
    const char *prefix;
    size_t prefix_len;
    const char *method;
    size_t method_len;
    const char *req_id;
    size_t req_id_len;
    const char *max_delay; /* X-Max-Delay: "250ms", "1s" or whole ms; delay instead of reject */
    size_t max_delay_len;
} sl_levee_request;

/* Longest quota name written into a header (longer names are cut): the headers are informative
 * and a resource name is client-controlled. */
#define SL_LEVEE_HEADER_NAME_MAX 200

/*
 * Decide one /attempt at `now_ms` and fill *out (always: reset, X-Req-Id, then as
 * sl_levee_decide). `snap` is the current quota snapshot (from sl_quotasrc_read); NULL or not
 * loaded yet gives 500. The answer may point into `req` (X-Req-Id), so use it before the
 * request's memory goes away.
 */
void sl_levee_attempt(const sl_levee_config *cfg, const sl_quota_snap *snap, sl_engine *e,
                      const sl_levee_request *req, int64_t now_ms, sl_answer *out);
/* The rate quotas' part of an answer that protections may have started (api/attempt.c): the
 * status, Retry-After and RateLimit headers, the body and the log fields; logs the decision. */
void sl_levee_decide(const sl_levee_config *cfg, const sl_quota_snap *snap, sl_engine *e,
                     const sl_levee_request *req, int64_t now_ms, sl_answer *out);

/*
 * The same decision made by a store elsewhere (--store redis: node/service.c hands the items to
 * redis/rstore.h): the quotas' hits go out at once as the items of a batch, and a rejection's
 * give-backs as a second round. The answer and the end state are sl_levee_decide's; the one
 * difference is that a sub quota's hit is taken (and given back) when the main quota rejects.
 *
 * sl_levee_plan_begin resets b and builds the items (the plan lives in b's arena): 1 = decide
 * b's items, then call sl_levee_plan_done; 0 = *out holds the answer (malformed, no quota,
 * blocked, out of memory: all as sl_levee_decide, logged). sl_levee_plan_done reads the answers:
 * 1 = b now holds the give-backs (decide them and call again), 0 = *out holds the rate quotas'
 * part of the answer (as sl_levee_decide leaves it: the caller started *out), logged.
 */
typedef struct sl_levee_plan sl_levee_plan;
int sl_levee_plan_begin(const sl_levee_config *cfg, const sl_quota_snap *snap,
                        const sl_levee_request *req, int64_t now_ms, sl_batch *b,
                        sl_levee_plan **plan, sl_answer *out);
int sl_levee_plan_done(const sl_levee_config *cfg, sl_levee_plan *plan,
                       const sl_levee_request *req, int64_t now_ms, sl_batch *b,
                       sl_answer *out);

/*
 * The engine's GCRA parameters for a normalised quota: limit per duration (ms) with
 * duration / limit = 1000 / rate exactly where the rate has up to six decimals (limit 0 for rate
 * 0), burst unchanged.
 */
void sl_levee_gcra_params(const sl_quota *q, int64_t *limit, int64_t *duration);

/* The RateLimit-Policy quota and window for a rate: q requests per w seconds, q / w = rate where
 * a window up to 1000 s makes that exact, else the nearest. */
void sl_levee_policy_window(double rate, int64_t *q, int64_t *w);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /attempt and /release under protection (see attempt.h): each check asks the ladder whether its
 * switch lets it run and whether its rejection stands, takes its lease from the protection
 * service, and writes its answer with the one answer builder.
 */
#include "api/attempt.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/gubprotect.h"
#include "protect/leaseid.h"
#include "protect/plan.h"

#define LIT(s) s, sizeof s - 1

typedef struct attempt {
    sl_protect *p;
    sl_answer *out;
    sl_plan plan; /* the ladder's walk: the switches read, what they did */
    const sl_levee_request *lr;
    uint64_t fleet_id, conc_id; /* leases held so far */
    int64_t now;
    bool routed;       /* the fleet lease is the owner's: given back by the caller */
    uint64_t giveback; /* routed: the fleet lease a later rejection gives back */
    /* the resource's concurrency lease routed to its key's owner: its answer (NULL: decided
     * here), the limit it was asked for and the switch's mode */
    const sl_response *conc_r;
    int64_t conc_limit;
    sl_killswitch_mode conc_mode;
    bool conc_routed, conc_local; /* conc_id is the owner's / of this node's fallback key */
    uint64_t conc_back;           /* conc_routed: the lease a later rejection gives back */
} attempt;

static int64_t ceil_s(int64_t ms)
{
    return ms <= 0 ? 1 : (ms + 999) / 1000;
}

/* A client-supplied name for a message: printable ASCII, at most 80 bytes. */
static void printable(char *dst, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap && i < 80; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[o++] = c >= 0x20 && c < 0x7f && c != '"' ? (char)c : '?';
    }
    if (n > 80 && o + 4 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = 0;
}

static void body_printf(sl_answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void body_printf(sl_answer *a, const char *fmt, ...)
{
    size_t mark = sl_answer_mark(a), len;
    va_list ap;
    va_start(ap, fmt);
    sl_answer_vprintf(a, fmt, ap);
    va_end(ap);
    const char *v = sl_answer_take(a, mark, &len);
    if (v)
        sl_answer_body(a, v, len);
}

static void answer_static(sl_answer *a, sl_answer_outcome o, const char *body)
{
    sl_answer_set(a, o, SL_LADDER_NONE);
    sl_answer_body(a, body, strlen(body));
}

static void answer_begin(sl_answer *out, const sl_levee_request *lr)
{
    sl_answer_reset(out);
    if (lr->req_id && lr->req_id_len)
        SL_ANSWER_HEADER_REF(out, "X-Req-Id", lr->req_id, lr->req_id_len);
}

/* A rejection by lim (429 or 503) with Retry-After, RateLimit-Policy (when q >= 0) and
 * RateLimit, the limiter's name as the policy's. */
static void reject(sl_answer *a, sl_answer_outcome o, sl_ladder_limiter lim, int64_t q,
                   int64_t retry_ms)
{
    const char *policy = sl_ladder_name(lim);
    size_t plen = strlen(policy);
    int64_t ra = ceil_s(retry_ms);
    sl_answer_set(a, o, lim);
    a->retry_after_ms = retry_ms > 0 ? retry_ms : 1000;
    size_t mark = sl_answer_mark(a);
    sl_answer_int(a, ra);
    SL_ANSWER_HEADER_FROM(a, "Retry-After", mark);
    if (q >= 0) {
        mark = sl_answer_mark(a);
        sl_answer_lit(a, LIT("\""));
        sl_answer_lit(a, policy, plen);
        sl_answer_lit(a, LIT("\";q="));
        sl_answer_int(a, q);
        SL_ANSWER_HEADER_FROM(a, "RateLimit-Policy", mark);
    }
    mark = sl_answer_mark(a);
    sl_answer_lit(a, LIT("\""));
    sl_answer_lit(a, policy, plen);
    sl_answer_lit(a, LIT("\";r=0;t="));
    sl_answer_int(a, ra);
    SL_ANSWER_HEADER_FROM(a, "RateLimit", mark);
}

/* What a rejection by lim that the ladder judged (`stands`, under mode m) leaves in who is
 * limited and the log: a shadow admission is logged (at most log_per_second lines), naming the
 * limit that would have rejected. Returns `stands`. */
static bool noted(attempt *t, sl_ladder_limiter lim, bool stands, sl_killswitch_mode m,
                  const char *what, size_t wlen)
{
    const sl_levee_request *lr = t->lr;
    if (stands) {
        sl_who_note(sl_protect_who(t->p), what, wlen,
                    lim == SL_LADDER_SHED || lim == SL_LADDER_FLEET ? SL_WHO_SHED : SL_WHO_REJECTED,
                    lr->resource, lr->resource_len, t->now);
        return true;
    }
    if (m == SL_KILLSWITCH_SHADOW)
        sl_who_note(sl_protect_who(t->p), what, wlen, SL_WHO_WOULD_REJECT, lr->resource,
                    lr->resource_len, t->now);
    if (m == SL_KILLSWITCH_SHADOW && sl_protect_log_ok(t->p, SL_LOG_INFO)) {
        char rid[SL_LOG_FIELD_BUF], res[SL_LOG_FIELD_BUF], lim_name[SL_LOG_FIELD_BUF];
        sl_log_info(sl_protect_cfg(t->p)->log,
                    "would_reject limiter=%s req_id=%s resource=%s limit=%s (shadow mode: "
                    "admitted)",
                    sl_ladder_name(lim), sl_log_field(rid, lr->req_id, lr->req_id_len),
                    sl_log_field(res, lr->resource, lr->resource_len),
                    sl_log_field(lim_name, what, wlen));
    }
    return false;
}

/* The ladder on a rejection by lim: true when it stands (see noted). */
static bool stands(attempt *t, sl_ladder_limiter lim, sl_killswitch_mode m, const char *what,
                   size_t wlen)
{
    return noted(t, lim, sl_ladder_rejects(&t->plan.ladder, lim, m), m, what, wlen);
}

/* A later check rejected (or failed): the leases taken before it go back. */
static void give_back(attempt *t, int64_t now)
{
    if (t->routed)
        t->giveback = t->fleet_id;
    else
        sl_protect_fleet_give(t->p, t->fleet_id, now);
    if (__builtin_expect(t->conc_routed, 0))
        t->conc_back = t->conc_id;
    else if (__builtin_expect(t->conc_local, 0))
        sl_protect_conc_give_local(t->p, t->lr->resource, t->lr->resource_len, t->conc_id, now);
    else
        sl_protect_conc_give(t->p, t->lr->resource, t->lr->resource_len, t->conc_id, now);
    t->fleet_id = t->conc_id = 0;
}

/* What the engine said to a lease: 0 held (*id set), 1 over its limit, -1 the engine failed
 * (answered 500, the leases held given back). */
static int took(attempt *t, const sl_response *r, uint64_t *id, int64_t now)
{
    if (r->error) {
        give_back(t, now);
        t->out->error = r->error;
        answer_static(t->out, SL_ANSWER_FAILED, "rate limiter error\n");
        return -1;
    }
    if (r->status == SL_OVER_LIMIT)
        return 1;
    *id = r->lease_id;
    return 0;
}

static sl_priority method_priority(const char *m, size_t n, sl_priority dflt)
{
    if (!m || !n)
        return dflt;
    if ((n == 3 && !strncasecmp(m, "GET", 3)) || (n == 4 && !strncasecmp(m, "HEAD", 4)) ||
        (n == 7 && !strncasecmp(m, "OPTIONS", 7)))
        return SL_PRIORITY_GET;
    return SL_PRIORITY_POST;
}

/* X-Sluice-Shadow and X-Sluice-Killswitch: the limiters a switch admitted through. */
static inline __attribute__((always_inline)) void ladder_headers(attempt *t)
{
    char tmp[96];
    size_t n, mark;
    if ((n = sl_ladder_list(t->plan.ladder.shadowed, tmp, sizeof tmp))) {
        mark = sl_answer_mark(t->out);
        sl_answer_lit(t->out, tmp, n);
        SL_ANSWER_HEADER_FROM(t->out, "X-Sluice-Shadow", mark);
    }
    if ((n = sl_ladder_list(t->plan.ladder.killed, tmp, sizeof tmp))) {
        mark = sl_answer_mark(t->out);
        sl_answer_lit(t->out, tmp, n);
        SL_ANSWER_HEADER_FROM(t->out, "X-Sluice-Killswitch", mark);
    }
}

/* X-Concurrency: renew with X-Lease-Id: the resource's lease lives its duration from now. No
 * rate quota is spent and no shedder asked: a renewal only keeps what is held. 200 renewed, 404
 * unknown or expired, 400 malformed or no concurrency limit for the resource. */
/* A lease named by X-Lease-Id: its concurrency and fleet ids and the resource it is held on (from
 * the id, else X-Resource, copied into lk->res). False after answering 400. */
typedef struct lease_ref {
    uint64_t conc, fleet;
    const char *key;
    size_t klen;
    char res[SL_QUOTA_MAX_KEY];
} lease_ref;

static bool lease_of(const char *id, size_t id_len, const char *resource, size_t resource_len,
                     const char *verb, lease_ref *lk, sl_answer *out)
{
    size_t rlen = 0;
    lk->conc = lk->fleet = 0;
    if (!id || !id_len) {
        answer_static(out, SL_ANSWER_MALFORMED, "missing X-Lease-Id header\n");
        return false;
    }
    if (sl_leaseid_parse(id, id_len, &lk->conc, &lk->fleet, lk->res, sizeof lk->res, &rlen)) {
        answer_static(out, SL_ANSWER_MALFORMED, "X-Lease-Id is not a lease id\n");
        return false;
    }
    lk->key = rlen ? lk->res : resource;
    lk->klen = rlen ? rlen : resource_len;
    if (lk->conc && (!lk->key || !lk->klen)) {
        sl_answer_set(out, SL_ANSWER_MALFORMED, SL_LADDER_NONE);
        body_printf(out, "X-Resource is required to %s this lease\n", verb);
        return false;
    }
    if (lk->conc && lk->klen > SL_QUOTA_MAX_KEY) {
        answer_static(out, SL_ANSWER_MALFORMED, "X-Resource is too long\n");
        return false;
    }
    return true;
}

/* 0: *out is the answer; SL_ATTEMPT_RENEW: routed->leases holds the renewal of the owner's
 * lease (routed->leases set: a cluster or a store; a lease of this node's fallback key is
 * renewed here). */
static int renew(sl_protect *p, int worker, const sl_attempt_req *req, int64_t now,
                 sl_attempt_fleet *routed, sl_answer *out)
{
    lease_ref lk;
    if (!lease_of(req->lease_id, req->lease_id_len, req->levee.resource, req->levee.resource_len,
                  "renew", &lk, out))
        return 0;
    if (!lk.conc) {
        answer_static(out, SL_ANSWER_MALFORMED, "X-Lease-Id holds no concurrency lease\n");
        return 0;
    }
    const char *key = lk.key;
    size_t klen = lk.klen;
    uint64_t conc = lk.conc;
    sl_killswitch_conc cc;
    if (!sl_killswitch_snap_concurrency(sl_protect_switches(p, worker), key, klen, &cc)) {
        answer_static(out, SL_ANSWER_MALFORMED, "no concurrency limit for this resource\n");
        return 0;
    }
    int rc;
    if (routed && routed->leases) {
        rc = sl_protect_conc_renew_local(p, key, klen, conc, cc.duration_ms, now);
        if (rc == 0) { /* not a lease of the fallback: the owner's */
            sl_gubprotect_lease l = {.res = key, .res_len = klen, .hits = 0,
                                     .duration_ms = cc.duration_ms, .lease = conc};
            rc = sl_gubprotect_lease_batch(p, routed->leases, &l, 1) ? -1 : 2;
        }
        if (rc == 2) {
            routed->fleet_item = -1;
            routed->conc_item = 0;
            return SL_ATTEMPT_RENEW;
        }
    } else {
        rc = sl_protect_conc_renew(p, key, klen, conc, cc.duration_ms, now);
    }
    if (rc < 0)
        answer_static(out, SL_ANSWER_FAILED, "rate limiter error\n");
    else if (rc == 0)
        answer_static(out, SL_ANSWER_NOT_FOUND,
                      "lease not found: it was released already or it expired\n");
    return 0;
}

void sl_attempt_renewed(const sl_attempt_req *req, const sl_attempt_fleet *st, sl_answer *out)
{
    const sl_response *r = &st->leases->resps[st->conc_item];
    answer_begin(out, &req->levee);
    if (r->error && !strcmp(r->error, sl_conc_err_not_found))
        answer_static(out, SL_ANSWER_NOT_FOUND,
                      "lease not found: it was released already or it expired\n");
    else if (r->error)
        answer_static(out, SL_ANSWER_FAILED, "rate limiter error\n");
}

/* The fleet's answer r to a lease of nc: 0 held (or admitted by a switch), 1 shed (answered
 * 503), -1 failed (answered 500). */
static int fleet_verdict(attempt *t, sl_killswitch_mode m, int64_t nc, const sl_response *r)
{
    int rc = took(t, r, &t->fleet_id, t->now);
    if (rc > 0 && stands(t, SL_LADDER_FLEET, m, LIT("fleet"))) {
        give_back(t, t->now); /* a concurrency lease taken in the same round trip */
        reject(t->out, SL_ANSWER_SHED, SL_LADDER_FLEET, nc, r->retry_after);
        body_printf(t->out,
                    "fleet capacity is reserved for critical calls: %lld non-critical calls in "
                    "flight; retry in %lld s\n",
                    (long long)nc, (long long)ceil_s(r->retry_after));
        return 1;
    }
    return rc < 0 ? -1 : 0;
}

/* This node's fleet lease (a node on its own: its share by the group size). As fleet_verdict. */
static int fleet_here(attempt *t, const sl_attempt_fleet *st)
{
    sl_response r;
    sl_protect_fleet_take(t->p, st->node_limit, st->duration_ms, t->now, &r);
    return fleet_verdict(t, st->mode, st->node_limit, &r);
}

/* The log line of a rejection by a protection, and the ladder's headers: every answer's end.
 * (Inlined, as decide_rest: the per-request path costs no call more than in one function.) */
static inline __attribute__((always_inline)) void finish(attempt *t)
{
    const sl_protect_config *pc = sl_protect_cfg(t->p);
    const sl_levee_request *lr = t->lr;
    sl_answer *out = t->out;
    if ((out->outcome == SL_ANSWER_REJECTED || out->outcome == SL_ANSWER_SHED) &&
        out->limiter != SL_LADDER_RATE && pc->log &&
        sl_log_budget_take(pc->log, NULL, SL_LOG_DEBUG)) {
        char rid[SL_LOG_FIELD_BUF], res[SL_LOG_FIELD_BUF];
        sl_log_debug(pc->log, "attempt req_id=%s resource=%s status=%d limiter=%s",
                     sl_log_field(rid, lr->req_id, lr->req_id_len),
                     sl_log_field(res, lr->resource, lr->resource_len), out->status,
                     sl_ladder_name(out->limiter));
    }
    ladder_headers(t);
}

/* The rate quotas' answer in *t->out through the ladder: true when the call goes on (admitted),
 * false when *t->out is the answer (the leases given back). */
static inline __attribute__((always_inline)) bool rate_verdict(attempt *t, const sl_killswitch_snap *ks,
                                                               sl_killswitch_mode m)
{
    sl_answer *out = t->out;
    if (out->outcome == SL_ANSWER_REJECTED) {
        sl_killswitch_mode qm = sl_ladder_mode(ks, out->quota, out->quota ? out->quota_len : 0);
        if (m > qm)
            qm = m;
        /* a key's switch covers its sublimits too: "api" switches "api/sublimit/DELETE" */
        static const char sub[] = "/sublimit/";
        for (size_t i = out->quota_len; out->quota && i >= sizeof sub - 1; i--)
            if (!memcmp(out->quota + i - (sizeof sub - 1), sub, sizeof sub - 1)) {
                sl_killswitch_mode km = sl_ladder_mode(ks, out->quota, i - (sizeof sub - 1));
                if (km > qm)
                    qm = km;
                break;
            }
        if (stands(t, SL_LADDER_RATE, qm, out->quota, out->quota ? out->quota_len : 0)) {
            give_back(t, t->now);
            char q[100];
            printable(q, sizeof q, out->quota ? out->quota : "", out->quota ? out->quota_len : 0);
            body_printf(out, "rate limit exceeded for \"%s\"; retry in %lld s\n", q,
                        (long long)ceil_s(out->retry_after_ms));
            return false;
        }
        out->retry_after_ms = 0; /* admitted by a switch */
    } else if (out->outcome != SL_ANSWER_ACCEPTED) {
        give_back(t, t->now);
        out->limiter = SL_LADDER_NONE;
        return false;
    }
    return true;
}

/* Admitted: 200 with the leases' id. */
static void admit(attempt *t)
{
    sl_answer *out = t->out;
    const sl_levee_request *lr = t->lr;
    sl_answer_set(out, SL_ANSWER_ACCEPTED, SL_LADDER_NONE);
    if (t->conc_id || t->fleet_id) {
        char tok[SL_LEASEID_MAX + 8];
        size_t n = sl_leaseid_format(tok, sizeof tok, t->conc_id, t->fleet_id, lr->resource,
                                     lr->resource_len);
        size_t mark = sl_answer_mark(out);
        sl_answer_lit(out, tok, n);
        SL_ANSWER_HEADER_FROM(out, "X-Lease-Id", mark);
    }
}

/* Levee's rate quotas are switched as a whole by the namespace's switch. */
static sl_killswitch_mode rate_mode(const sl_levee_config *lcfg, const sl_killswitch_snap *ks)
{
    const char *ns = lcfg && lcfg->name && lcfg->name[0] ? lcfg->name : "levee";
    return sl_ladder_mode(ks, ns, strlen(ns));
}

/* The state a store's decision of the rate quotas waits with (sl_attempt_store_done). */
static int park(const attempt *t, sl_attempt_fleet *st)
{
    st->ladder = t->plan.ladder;
    st->fleet_id = t->fleet_id;
    st->conc_id = t->conc_id;
    st->routed = t->routed;
    st->conc_routed = t->conc_routed;
    st->conc_local = t->conc_local;
    return SL_ATTEMPT_STORE;
}

/* The resource's concurrency limit's answer r to a lease of `limit`: 0 held (or admitted by a
 * switch), else *t->out is the answer (429, or 500 when the engine failed). */
static inline __attribute__((always_inline)) int
conc_verdict(attempt *t, const sl_response *r, sl_killswitch_mode m, int64_t limit,
             const char *res_print)
{
    int rc = took(t, r, &t->conc_id, t->now);
    if (rc < 0)
        return 1;
    if (rc > 0 && stands(t, SL_LADDER_CONC, m, LIT("concurrency"))) {
        give_back(t, t->now);
        reject(t->out, SL_ANSWER_REJECTED, SL_LADDER_CONC, limit, r->retry_after);
        body_printf(t->out,
                    "concurrency limit reached: %lld calls in flight for \"%s\"; retry in %lld "
                    "s\n",
                    (long long)limit, res_print, (long long)ceil_s(r->retry_after));
        return 1;
    }
    return 0;
}

/* After the shedders: the resource's concurrency limit, Levee's rate quotas, the lease id.
 * SL_ATTEMPT_STORE when the rate quotas went to st->store (st non-NULL with a store). */
static inline __attribute__((always_inline)) int
decide_rest(attempt *t, const sl_levee_config *lcfg, const sl_quota_snap *snap, bool acquire,
            sl_attempt_fleet *st)
{
    sl_protect *p = t->p;
    const sl_protect_config *pc = sl_protect_cfg(p);
    const sl_levee_request *lr = t->lr;
    sl_answer *out = t->out;
    const int64_t now = t->now;
    const uint32_t gs = lcfg ? lcfg->group_size : 0;
    const sl_killswitch_snap *ks = t->plan.ks;
    char res_print[100];
    printable(res_print, sizeof res_print, lr->resource, lr->resource_len);

    /* the resource's concurrency limit: the key owner's answer at hand (routed), or here */
    sl_plan_lease cl;
    if (__builtin_expect(t->conc_r != NULL, 0)) {
        if (conc_verdict(t, t->conc_r, t->conc_mode, t->conc_limit, res_print))
            return 0;
    } else if (acquire && !(st && st->leases) && /* routed: begin asked the ladder already */
               sl_plan_conc(&t->plan, lr->resource, lr->resource_len, &cl)) {
        int64_t limit = sl_protect_share(
            cl.limit, sl_protect_group_size(gs, snap, lr->resource, lr->resource_len));
        sl_response r;
        sl_protect_conc_take(p, lr->resource, lr->resource_len, limit, cl.duration_ms, now, &r);
        if (conc_verdict(t, &r, cl.mode, limit, res_print))
            return 0;
    }

    /* Levee's rate quotas: switched as a whole by the namespace, one by one by quota name */
    sl_killswitch_mode m = rate_mode(lcfg, ks);
    if (sl_ladder_runs(&t->plan.ladder, SL_LADDER_RATE, m)) {
        if (__builtin_expect(st && st->store, 0)) {
            if (sl_levee_plan_begin(lcfg, snap, lr, now, st->store, &st->plan, out))
                return park(t, st);
        } else {
            sl_levee_decide(lcfg, snap, pc->engine, lr, now, out);
        }
        if (!rate_verdict(t, ks, m))
            return 0;
    }
    admit(t);
    return 0;
}

/* How an /attempt asks (its X-Concurrency), once its headers are checked. */
enum { HOW_ANSWERED = -1, HOW_PLAIN, HOW_ACQUIRE, HOW_RENEW };

/* The request's priority (X-Priority, else by X-Method) and what it asks: HOW_ANSWERED after
 * answering 400 for a malformed header. */
static inline __attribute__((always_inline)) int
parse(const attempt *t, const sl_attempt_req *req, int *prio)
{
    const sl_levee_request *lr = t->lr;
    if (req->priority && req->priority_len) {
        *prio = sl_priority_from_name(req->priority, req->priority_len);
        if (*prio < 0) {
            answer_static(t->out, SL_ANSWER_MALFORMED,
                          "X-Priority must be critical, post, get or test\n");
            return HOW_ANSWERED;
        }
    } else {
        *prio = method_priority(lr->method, lr->method_len, sl_protect_cfg(t->p)->default_priority);
    }
    int how = HOW_PLAIN;
    if (req->concurrency && req->concurrency_len) {
        /* a renewal needs no resource check here: its lease id may carry the resource */
        if (req->concurrency_len == 5 && !strncasecmp(req->concurrency, "renew", 5))
            return HOW_RENEW;
        if (req->concurrency_len != 7 || strncasecmp(req->concurrency, "acquire", 7)) {
            answer_static(t->out, SL_ANSWER_MALFORMED,
                          "X-Concurrency must be 'acquire' or 'renew' (POST /release frees a "
                          "lease)\n");
            return HOW_ANSWERED;
        }
        how = HOW_ACQUIRE;
    }
    if (!lr->resource || lr->resource_len == 0) {
        answer_static(t->out, SL_ANSWER_MALFORMED, "missing X-Resource header\n");
        return HOW_ANSWERED;
    }
    if (lr->resource_len > SL_QUOTA_MAX_KEY) {
        answer_static(t->out, SL_ANSWER_MALFORMED, "X-Resource is too long\n");
        return HOW_ANSWERED;
    }
    return how;
}

/* The ladder's first steps: the global switch "*" (off: admitted as is) and the worker shedder
 * (503; it protects sluiced itself, so it comes before anything that costs more). True when
 * *t->out is the answer. */
static inline __attribute__((always_inline)) bool shedders(attempt *t, int prio)
{
    if (!sl_plan_all(&t->plan))
        return true;
    sl_plan_verdict v = sl_plan_shed(&t->plan, prio);
    if (v == SL_PLAN_PASS ||
        !noted(t, SL_LADDER_SHED, v == SL_PLAN_REJECT,
               v == SL_PLAN_REJECT ? SL_KILLSWITCH_ENFORCE : SL_KILLSWITCH_SHADOW, LIT("shed")))
        return false;
    char why[200];
    sl_protect_shed_reason(t->p, t->plan.worker, (sl_priority)prio, why, sizeof why);
    reject(t->out, SL_ANSWER_SHED, SL_LADDER_SHED, -1, sl_protect_shed_retry_ms(t->p));
    body_printf(t->out, "%s\n", why);
    return true;
}

/* The fleet shedder: a non-critical acquire holds a fleet lease. Routed, the cluster's one
 * count at the fleet key's owner (*fleet: the caller takes it and resumes); else this node's,
 * taken here: nonzero when it shed or failed (*t->out the answer). */
static int fleet_step(attempt *t, const sl_levee_config *lcfg, const sl_quota_snap *snap,
                      int prio, bool acquire, const sl_attempt_fleet *routed,
                      sl_attempt_fleet *st, bool *fleet)
{
    sl_plan_lease fl;
    *fleet = false;
    if (!acquire || prio == SL_PRIORITY_CRITICAL || !sl_plan_fleet(&t->plan, &fl))
        return 0;
    const uint32_t gs = lcfg ? lcfg->group_size : 0;
    *st = (sl_attempt_fleet){
        .limit = fl.limit,
        .node_limit = sl_protect_fleet_limit(fl.fleet, sl_protect_group_size(gs, snap, NULL, 0)),
        .duration_ms = fl.duration_ms,
        .mode = fl.mode,
        .ladder = t->plan.ladder};
    if (!routed)
        return fleet_here(t, st);
    *fleet = true;
    return 0;
}

/* Routed (a cluster, a store): the resource's concurrency limit is one count at its key's owner
 * too, asked in the same round trip as the fleet lease. 1: *routed holds the leases to route
 * (sl_attempt_begin returns 1); 0: none to route; -1: *t->out is the answer (500). */
static int route_leases(attempt *t, bool acquire, bool fleet, sl_attempt_fleet *st,
                        sl_attempt_fleet *routed)
{
    const sl_levee_request *lr = t->lr;
    sl_plan_lease cl;
    bool conc = __builtin_expect(routed && routed->leases && acquire, 0) &&
                sl_plan_conc(&t->plan, lr->resource, lr->resource_len, &cl);
    if (!fleet && !conc)
        return 0;
    if (!fleet)
        *st = (sl_attempt_fleet){.ladder = t->plan.ladder};
    if (conc) {
        st->conc_limit = cl.limit;
        st->conc_duration_ms = cl.duration_ms;
        st->conc_mode = cl.mode;
    }
    st->ladder = t->plan.ladder;
    st->store = routed->store;
    st->leases = routed->leases;
    st->nodes = routed->nodes;
    st->fleet_item = fleet ? 0 : -1;
    st->conc_item = conc ? (fleet ? 1 : 0) : -1;
    if (st->leases) {
        sl_gubprotect_lease l[2] = {
            {.hits = 1, .limit = st->limit, .duration_ms = st->duration_ms},
            {.res = lr->resource, .res_len = lr->resource_len, .hits = 1,
             .limit = st->conc_limit, .duration_ms = st->conc_duration_ms}};
        if (sl_gubprotect_lease_batch(t->p, st->leases, fleet ? l : l + 1,
                                      (size_t)fleet + (size_t)conc)) {
            answer_static(t->out, SL_ANSWER_FAILED, "rate limiter error\n");
            return -1;
        }
    }
    *routed = *st;
    return 1;
}

/* The leases' steps and the rest of the ladder (decide_rest): what sl_attempt_begin returns,
 * 0 when *t->out is the answer. */
static inline __attribute__((always_inline)) int
leases(attempt *t, const sl_levee_config *lcfg, const sl_quota_snap *snap, int prio,
       bool acquire, sl_attempt_fleet *routed)
{
    sl_attempt_fleet st;
    bool fleet;
    if (fleet_step(t, lcfg, snap, prio, acquire, routed, &st, &fleet))
        return 0;
    int rc = route_leases(t, acquire, fleet, &st, routed);
    if (rc)
        return rc > 0 ? 1 : 0;
    if (decide_rest(t, lcfg, snap, acquire, routed)) {
        routed->local = false;
        return SL_ATTEMPT_STORE;
    }
    return 0;
}

int sl_attempt_begin(sl_protect *p, int worker, const sl_levee_config *lcfg,
                     const sl_quota_snap *snap, const sl_attempt_req *req, int64_t now,
                     sl_attempt_fleet *routed, sl_answer *out)
{
    attempt t = {.p = p, .out = out, .lr = &req->levee, .now = now};
    sl_plan_start(&t.plan, p, worker);
    answer_begin(out, t.lr);
    int prio;
    int how = parse(&t, req, &prio);
    if (how == HOW_RENEW) {
        if (renew(p, worker, req, now, routed, out))
            return SL_ATTEMPT_RENEW;
    } else if (how != HOW_ANSWERED && !shedders(&t, prio)) {
        int rc = leases(&t, lcfg, snap, prio, how == HOW_ACQUIRE, routed);
        if (rc)
            return rc;
    }
    finish(&t);
    return 0;
}

void sl_attempt_decide(sl_protect *p, int worker, const sl_levee_config *lcfg,
                       const sl_quota_snap *snap, const sl_attempt_req *req, int64_t now,
                       sl_answer *out)
{
    (void)sl_attempt_begin(p, worker, lcfg, snap, req, now, NULL, out);
}

int sl_attempt_resume(sl_protect *p, int worker, const sl_levee_config *lcfg,
                      const sl_quota_snap *snap, const sl_attempt_req *req,
                      sl_attempt_fleet *st, const sl_response *fleet, bool local,
                      int64_t now, sl_answer *out, uint64_t *giveback)
{
    attempt t = {.p = p, .out = out, .lr = &req->levee, .now = now, .routed = fleet != NULL};
    sl_plan_resume(&t.plan, p, worker, &st->ladder);
    answer_begin(out, t.lr);
    *giveback = 0;
    st->conc_back = 0;
    st->local = fleet && local;
    if (st->local)
        SL_ANSWER_HEADER_REF(out, "X-Fleet", "local", 5);
    sl_response cr;
    if (st->leases && st->conc_item >= 0) {
        /* the key owner's answer to the concurrency lease, or this node's share's */
        st->conc_local = sl_gubprotect_conc_taken(
            p, st->leases, (size_t)st->conc_item, t.lr->resource, t.lr->resource_len,
            &st->conc_limit, st->conc_duration_ms, st->nodes, now, &cr);
        if (st->conc_local)
            SL_ANSWER_HEADER_REF(out, "X-Concurrency-Source", "local", 5);
        t.conc_r = &cr;
        t.conc_limit = st->conc_limit;
        t.conc_mode = st->conc_mode;
        t.conc_local = st->conc_local;
        t.conc_routed = !st->conc_local;
        if (!cr.error && cr.status == SL_UNDER_LIMIT)
            t.conc_id = cr.lease_id; /* given back if the fleet sheds */
    }
    int rc = 0;
    if (st->fleet_item >= 0)
        rc = fleet ? fleet_verdict(&t, st->mode, st->limit, fleet) : fleet_here(&t, st);
    if (!rc && decide_rest(&t, lcfg, snap, true, st))
        return SL_ATTEMPT_STORE;
    finish(&t);
    *giveback = t.giveback;
    st->conc_back = t.conc_back;
    return 0;
}

int sl_attempt_store_done(sl_protect *p, int worker, const sl_levee_config *lcfg,
                          const sl_attempt_req *req, sl_attempt_fleet *st, int64_t now,
                          sl_answer *out, uint64_t *giveback)
{
    *giveback = 0;
    attempt t = {.p = p, .out = out, .lr = &req->levee, .now = now, .fleet_id = st->fleet_id,
                 .conc_id = st->conc_id, .routed = st->routed, .conc_routed = st->conc_routed,
                 .conc_local = st->conc_local};
    sl_plan_resume(&t.plan, p, worker, &st->ladder);
    answer_begin(out, t.lr);
    st->conc_back = 0;
    if (st->local)
        SL_ANSWER_HEADER_REF(out, "X-Fleet", "local", 5);
    if (st->conc_local)
        SL_ANSWER_HEADER_REF(out, "X-Concurrency-Source", "local", 5);
    if (sl_levee_plan_done(lcfg, st->plan, t.lr, now, st->store, out))
        return 1;
    if (rate_verdict(&t, t.plan.ks, rate_mode(lcfg, t.plan.ks)))
        admit(&t);
    finish(&t);
    *giveback = t.giveback;
    st->conc_back = t.conc_back;
    return 0;
}

/* The phases of sl_attempt_start / _step: what the batch handed on holds. */
enum { PHASE_LEASES, PHASE_RENEW, PHASE_STORE };

int sl_attempt_start(sl_protect *p, int worker, const sl_levee_config *lcfg,
                     const sl_quota_snap *snap, const sl_attempt_req *req, sl_batch *batch,
                     bool store, int nodes, int64_t now, sl_attempt_fleet *st, sl_answer *out)
{
    st->store = store ? batch : NULL;
    st->leases = batch; /* the fleet's and the resource's leases: one round trip */
    st->nodes = nodes;
    st->conc_back = 0; /* (a renewal's step gives nothing back) */
    int rc = sl_attempt_begin(p, worker, lcfg, snap, req, now, st, out);
    if (rc == SL_ATTEMPT_STORE) {
        st->phase = PHASE_STORE;
        return SL_ATTEMPT_DO_STORE;
    }
    if (rc && st->leases) {
        st->phase = rc == SL_ATTEMPT_RENEW ? PHASE_RENEW : PHASE_LEASES;
        return SL_ATTEMPT_DO_ROUTE;
    }
    if (rc) { /* a node on its own: the fleet lease is this node's, of its share */
        uint64_t back;
        (void)sl_attempt_resume(p, worker, lcfg, snap, req, st, NULL, false, now, out, &back);
    }
    return SL_ATTEMPT_DO_SEND;
}

int sl_attempt_step(sl_protect *p, int worker, const sl_levee_config *lcfg,
                    const sl_quota_snap *snap, const sl_attempt_req *req, sl_attempt_fleet *st,
                    int nodes, int64_t now, sl_answer *out, uint64_t *giveback)
{
    *giveback = 0;
    bool store;
    if (st->phase == PHASE_RENEW) {
        sl_attempt_renewed(req, st, out);
        return SL_ATTEMPT_DO_SEND;
    } else if (st->phase == PHASE_STORE) {
        store = sl_attempt_store_done(p, worker, lcfg, req, st, now, out, giveback) != 0;
    } else {
        /* the owners answered the leases: the fleet's (or this node's share decides it, when
         * the owner could not), and the concurrency lease's in sl_attempt_resume */
        sl_response r;
        bool fleet = st->fleet_item >= 0, local = false; /* else the concurrency lease alone */
        if (fleet)
            local = sl_gubprotect_fleet_taken(p, st->leases, (size_t)st->fleet_item, &st->limit,
                                              st->duration_ms, nodes, now, &r);
        store = sl_attempt_resume(p, worker, lcfg, snap, req, st, fleet ? &r : NULL, local, now,
                                  out, giveback) == SL_ATTEMPT_STORE;
    }
    if (!store)
        return SL_ATTEMPT_DO_SEND;
    st->phase = PHASE_STORE;
    return SL_ATTEMPT_DO_STORE;
}

sl_batch *sl_attempt_giveback(sl_protect *p, const sl_attempt_req *req,
                              const sl_attempt_fleet *st, uint64_t giveback, int64_t now)
{
    if (!giveback && !st->conc_back)
        return NULL;
    return sl_gubprotect_lease_release(p, giveback, req->levee.resource, req->levee.resource_len,
                                       st->conc_back, now);
}

void sl_attempt_release_answer(const sl_attempt_release_req *req, int conc_rc, int fleet_rc,
                               sl_answer *out)
{
    sl_answer_reset(out);
    if (req->req_id && req->req_id_len)
        SL_ANSWER_HEADER_REF(out, "X-Req-Id", req->req_id, req->req_id_len);
    if (conc_rc < 0 || fleet_rc < 0)
        answer_static(out, SL_ANSWER_FAILED, "rate limiter error\n");
    else if (conc_rc <= 0 && fleet_rc <= 0)
        answer_static(out, SL_ANSWER_NOT_FOUND,
                      "lease not found: it was released already or it expired\n");
}

uint64_t sl_attempt_release_begin(sl_protect *p, const sl_attempt_release_req *req, int64_t now,
                                  bool routed, int *conc_rc, sl_answer *out)
{
    sl_answer_reset(out);
    if (req->req_id && req->req_id_len)
        SL_ANSWER_HEADER_REF(out, "X-Req-Id", req->req_id, req->req_id_len);
    *conc_rc = 0;
    lease_ref lk;
    if (!lease_of(req->lease_id, req->lease_id_len, req->resource, req->resource_len, "release",
                  &lk, out))
        return 0;
    *conc_rc = sl_protect_conc_give(p, lk.key, lk.klen, lk.conc, now);
    int fleet_rc = 0;
    if (lk.fleet) {
        /* a lease of this node's share goes back here; the owner's, routed, by the caller */
        fleet_rc = routed ? sl_protect_fleet_give_local(p, lk.fleet, now)
                          : sl_protect_fleet_give(p, lk.fleet, now);
        if (routed && fleet_rc == 0)
            return lk.fleet;
    }
    sl_attempt_release_answer(req, *conc_rc, fleet_rc, out);
    return 0;
}

int sl_attempt_release_route(sl_protect *p, const sl_attempt_release_req *req, int64_t now,
                             sl_attempt_fleet *st, int *conc_rc, sl_answer *out)
{
    sl_answer_reset(out);
    if (req->req_id && req->req_id_len)
        SL_ANSWER_HEADER_REF(out, "X-Req-Id", req->req_id, req->req_id_len);
    *conc_rc = 0;
    st->fleet_item = st->conc_item = -1;
    st->local = false;
    lease_ref lk;
    if (!lease_of(req->lease_id, req->lease_id_len, req->resource, req->resource_len, "release",
                  &lk, out))
        return 0;
    /* a lease of this node's fallback keys goes back here, the owners' in one batch */
    sl_gubprotect_lease l[2];
    size_t n = 0;
    int fleet_rc = 0;
    if (lk.fleet && !(fleet_rc = sl_protect_fleet_give_local(p, lk.fleet, now))) {
        st->fleet_item = (int)n;
        l[n++] = (sl_gubprotect_lease){.hits = -1, .duration_ms = 1, .lease = lk.fleet};
    }
    if (lk.conc && !(*conc_rc = sl_protect_conc_give_local(p, lk.key, lk.klen, lk.conc, now))) {
        st->conc_item = (int)n;
        l[n++] = (sl_gubprotect_lease){.res = lk.key, .res_len = lk.klen, .hits = -1,
                                       .duration_ms = 1, .lease = lk.conc};
    }
    st->local = fleet_rc > 0;
    if (n && fleet_rc >= 0 && *conc_rc >= 0) {
        if (!sl_gubprotect_lease_batch(p, st->leases, l, n))
            return 1;
        fleet_rc = -1;
    }
    sl_attempt_release_answer(req, *conc_rc, fleet_rc, out);
    return 0;
}

void sl_attempt_release_done(sl_protect *p, const sl_attempt_release_req *req,
                             const sl_attempt_fleet *st, int conc_rc, sl_answer *out)
{
    int fleet_rc = st->local ? 1 : 0;
    if (st->fleet_item >= 0)
        fleet_rc = sl_gubprotect_fleet_released(p, &st->leases->resps[st->fleet_item]);
    if (st->conc_item >= 0)
        conc_rc = sl_gubprotect_fleet_released(p, &st->leases->resps[st->conc_item]);
    sl_attempt_release_answer(req, conc_rc, fleet_rc, out);
}

void sl_attempt_release(sl_protect *p, const sl_attempt_release_req *req, int64_t now,
                        sl_answer *out)
{
    int conc_rc;
    (void)sl_attempt_release_begin(p, req, now, false, &conc_rc, out);
}

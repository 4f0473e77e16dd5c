/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Levee's /attempt decision (see levee.h for the contract and docs/levee.md for the model): the
 * quota lookup, the engine calls with their give-back on a later rejection (or the same calls
 * as the items of a batch a store decides: sl_levee_plan_*), and the answer with its Retry-After
 * and RateLimit header fields.
 */
#include "api/levee.h"

#include "config/opt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void sl_levee_config_default(sl_levee_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->no_quota = SL_LEVEE_NO_QUOTA_ERROR;
    cfg->blocked_retry_after_s = 1;
    cfg->max_delay_ms = 30000;
}

/* X-Max-Delay: whole ms ("250"), or a duration ("250ms", "1s"); -1 if neither. Cut to max_ms. */
static int64_t parse_max_delay(const char *s, size_t n, int64_t max_ms)
{
    char tmp[32];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    int64_t v;
    if (sl_opt_parse_int(tmp, &v) == 0) {
        if (v < 0)
            return -1;
    } else {
        int64_t ns;
        if (sl_opt_parse_duration(tmp, &ns) || ns < 0)
            return -1;
        v = ns / 1000000;
    }
    return v > max_ms ? max_ms : v;
}

int sl_levee_no_quota_from_name(const char *s)
{
    if (!s)
        return -EINVAL;
    if (!strcasecmp(s, "allow"))
        return SL_LEVEE_NO_QUOTA_ALLOW;
    if (!strcasecmp(s, "deny"))
        return SL_LEVEE_NO_QUOTA_DENY;
    if (!strcasecmp(s, "error"))
        return SL_LEVEE_NO_QUOTA_ERROR;
    return -EINVAL;
}

const char *sl_levee_no_quota_name(sl_levee_no_quota m)
{
    switch (m) {
    case SL_LEVEE_NO_QUOTA_DENY: return "deny";
    case SL_LEVEE_NO_QUOTA_ERROR: return "error";
    default: return "allow";
    }
}

/* Is v a whole number, up to the rounding of a decimal rate read from JSON? */
static bool near_integer(double v)
{
    double r = nearbyint(v);
    return fabs(v - r) <= 1e-9 * (r > 1 ? r : 1);
}

void sl_levee_gcra_params(const sl_quota *q, int64_t *limit, int64_t *duration)
{
    double r = q->rate;
    if (!(r > 0)) {
        *limit = 0;
        *duration = 1000;
        return;
    }
    /* limit / duration(ms) = rate / 1000: scale both by the power of ten that makes the limit
     * whole, so that T = duration / limit is exact in the engine's integer arithmetic. */
    int64_t scale = 1;
    for (; scale < 1000000; scale *= 10)
        if (r * (double)scale >= 1 && near_integer(r * (double)scale))
            break;
    double l = nearbyint(r * (double)scale);
    *limit = l < 1 ? 1 : (int64_t)l;
    *duration = 1000 * scale;
}

void sl_levee_policy_window(double rate, int64_t *q, int64_t *w)
{
    if (!(rate > 0)) {
        *q = 0;
        *w = 1;
        return;
    }
    for (int64_t win = 1; win <= 1000; win++) {
        double v = rate * (double)win;
        if (v >= 1 && near_integer(v)) {
            *q = (int64_t)nearbyint(v);
            *w = win;
            return;
        }
    }
    if (rate >= 1) {
        *q = (int64_t)nearbyint(rate);
        *w = 1;
    } else {
        double win = nearbyint(1 / rate);
        *q = 1;
        *w = win > 2147483647.0 ? 2147483647 : (int64_t)win;
    }
}

/* ---------------------------------------------------------------- the answer */

#define LIT(s) s, sizeof s - 1

/* Keep the deciding quota's name (for logs) in the answer's own buffer: the lookup it came
 * from lives on this function's stack. */
static void set_quota_name(sl_answer *r, const char *name, size_t len)
{
    if (len > SL_LEVEE_HEADER_NAME_MAX)
        len = SL_LEVEE_HEADER_NAME_MAX;
    size_t mark = sl_answer_mark(r);
    sl_answer_lit(r, name, len);
    r->quota = sl_answer_take(r, mark, &r->quota_len);
    if (!r->quota)
        r->quota_len = 0;
}

static void retry_after_header(sl_answer *r, int64_t seconds)
{
    size_t mark = sl_answer_mark(r);
    sl_answer_int(r, seconds);
    SL_ANSWER_HEADER_FROM(r, "Retry-After", mark);
}

/* One quota as decided (or not) for this request. */
typedef struct decided {
    const sl_quota_match *m;
    bool have;          /* resp is meaningful */
    bool rejected;
    sl_response resp;
} decided;

static int64_t ceil_s(int64_t ms)
{
    return ms <= 0 ? 0 : (ms + 999) / 1000;
}

static void rate_headers(sl_answer *r, const decided *d, size_t n, int64_t now_ms,
                         int64_t retry_after_s)
{
    /* RateLimit-Policy: every quota that applies */
    size_t mark = sl_answer_mark(r);
    for (size_t i = 0; i < n; i++) {
        int64_t q, w;
        sl_levee_policy_window(d[i].m->quota.rate, &q, &w);
        if (i)
            sl_answer_lit(r, LIT(", "));
        sl_answer_sf_string(r, d[i].m->name, d[i].m->name_len, SL_LEVEE_HEADER_NAME_MAX);
        sl_answer_lit(r, LIT(";q="));
        sl_answer_int(r, q);
        sl_answer_lit(r, LIT(";w="));
        sl_answer_int(r, w);
        sl_answer_lit(r, LIT(";sluice-burst="));
        sl_answer_int(r, d[i].m->quota.burst);
    }
    if (sl_strbuf_error(&r->text)) /* full: no RateLimit either */
        return;
    SL_ANSWER_HEADER_FROM(r, "RateLimit-Policy", mark);
    /* RateLimit: the quotas whose state this request saw */
    mark = sl_answer_mark(r);
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        if (!d[i].have)
            continue;
        int64_t rem, t;
        if (d[i].rejected) {
            rem = 0;
            t = retry_after_s; /* the same moment as Retry-After, as the draft asks */
        } else {
            rem = d[i].resp.remaining < 0 ? 0 : d[i].resp.remaining;
            t = ceil_s(d[i].resp.reset_time - now_ms);
        }
        if (any)
            sl_answer_lit(r, LIT(", "));
        sl_answer_sf_string(r, d[i].m->name, d[i].m->name_len, SL_LEVEE_HEADER_NAME_MAX);
        sl_answer_lit(r, LIT(";r="));
        sl_answer_int(r, rem);
        sl_answer_lit(r, LIT(";t="));
        sl_answer_int(r, t);
        any = true;
    }
    if (any)
        SL_ANSWER_HEADER_FROM(r, "RateLimit", mark);
}

static void finish(sl_answer *r, sl_answer_outcome o, const char *body)
{
    sl_answer_set(r, o, o == SL_ANSWER_REJECTED ? SL_LADDER_RATE : SL_LADDER_NONE);
    sl_answer_body(r, body, body ? strlen(body) : 0);
}

static void log_decision(const sl_levee_config *cfg, const sl_levee_request *q,
                         const sl_answer *r)
{
    sl_log_level lvl = r->outcome == SL_ANSWER_FAILED ? SL_LOG_WARN : SL_LOG_DEBUG;
    /* one line per request: under the logger's per-request budget, client fields made safe */
    if (!cfg->log || !sl_log_budget_take(cfg->log, NULL, lvl))
        return;
    char rid[SL_LOG_FIELD_BUF], res[SL_LOG_FIELD_BUF], pfx[SL_LOG_FIELD_BUF],
        meth[SL_LOG_FIELD_BUF], quota[SL_LOG_FIELD_BUF];
    sl_log_write(cfg->log, lvl,
                 "attempt req_id=%s resource=%s prefix=%s method=%s status=%d outcome=%s "
                 "quota=%s level=%d retry_after_ms=%lld%s%.*s%s%s",
                 sl_log_field(rid, q->req_id, q->req_id_len),
                 sl_log_field(res, q->resource, q->resource_len),
                 sl_log_field(pfx, q->prefix, q->prefix_len),
                 sl_log_field(meth, q->method, q->method_len), r->status,
                 sl_answer_outcome_name(r->outcome), sl_log_field(quota, r->quota, r->quota_len),
                 r->level, (long long)r->retry_after_ms, r->body ? " reason=" : "",
                 (int)(r->body_len ? (r->body_len - 1 > 256 ? 256 : r->body_len - 1) : 0),
                 r->body ? r->body : "", r->error ? " error=" : "", r->error ? r->error : "");
}

static void fill_request(sl_request *rq, const char *name, size_t name_len,
                         const sl_quota_match *m, int64_t hits, int64_t max_delay)
{
    memset(rq, 0, sizeof *rq);
    rq->name = name;
    rq->name_len = name_len;
    rq->unique_key = m->bucket;
    rq->unique_key_len = m->bucket_len;
    rq->hits = hits;
    sl_levee_gcra_params(&m->quota, &rq->limit, &rq->duration);
    rq->burst = m->quota.burst;
    rq->algorithm = SL_GCRA;
    rq->max_delay_ms = max_delay;
}

void sl_levee_attempt(const sl_levee_config *cfg, const sl_quota_snap *snap, sl_engine *e,
                      const sl_levee_request *req, int64_t now_ms, sl_answer *out)
{
    sl_answer_reset(out);
    if (req->req_id && req->req_id_len)
        SL_ANSWER_HEADER_REF(out, "X-Req-Id", req->req_id, req->req_id_len);
    sl_levee_decide(cfg, snap, e, req, now_ms, out);
}

/* One request's quotas and what was decided about them: on the stack of sl_levee_decide, or in
 * a batch's arena between the steps of a store's decision. */
struct sl_levee_plan {
    sl_quota_lookup lk;
    decided d[2];
    int64_t max_delay, blocked_s;
    const char *base;
    size_t base_len;
    char subname[SL_MAX_NAME_LEN];
    size_t subname_len;
    unsigned taken;     /* quotas whose hit was taken (bit i: quota i) */
    int rejected;       /* the first quota that rejected, or -1 */
    const char *fail;   /* an engine's (store's) error */
    int item[2];        /* the store's batch item of quota i, or -1 */
    bool giving;        /* the store's batch holds the give-backs */
};

/* Check the request and look its quotas up: true when they are to be decided, false when *r is
 * the answer already (malformed, not loaded, no quota). */
static bool prepare(const sl_levee_config *cfg, const sl_quota_snap *snap,
                    const sl_levee_request *req, struct sl_levee_plan *pl, sl_answer *r)
{
    if (!req->resource || req->resource_len == 0) {
        finish(r, SL_ANSWER_MALFORMED, "missing X-Resource header\n");
        return false;
    }
    if (!snap || !snap->loaded) {
        finish(r, SL_ANSWER_FAILED, "quotas not loaded yet\n");
        return false;
    }
    pl->max_delay = 0;
    if (__builtin_expect(req->max_delay != NULL, 0)) {
        pl->max_delay = parse_max_delay(req->max_delay, req->max_delay_len, cfg->max_delay_ms);
        if (pl->max_delay < 0) {
            finish(r, SL_ANSWER_MALFORMED,
                   "X-Max-Delay must be whole milliseconds or a duration such as 250ms\n");
            return false;
        }
    }
    sl_quota_lookup *lk = &pl->lk;
    int rc = sl_quota_lookup_request(snap->tree, req->resource, req->resource_len, req->prefix,
                                     req->prefix_len, req->method, req->method_len,
                                     cfg->group_size, lk);
    if (rc) {
        finish(r, SL_ANSWER_MALFORMED, "X-Resource, X-Prefix and X-Method are too long\n");
        return false;
    }
    pl->blocked_s = cfg->blocked_retry_after_s > 0 ? cfg->blocked_retry_after_s : 1;
    r->n_quotas = lk->n;
    if (lk->n == 0) {
        switch (cfg->no_quota) {
        case SL_LEVEE_NO_QUOTA_DENY:
            r->retry_after_ms = pl->blocked_s * 1000;
            retry_after_header(r, pl->blocked_s);
            finish(r, SL_ANSWER_REJECTED, NULL);
            break;
        case SL_LEVEE_NO_QUOTA_ERROR:
            finish(r, SL_ANSWER_FAILED, "no quota for resource\n");
            break;
        default:
            finish(r, SL_ANSWER_ACCEPTED, NULL);
        }
        return false;
    }
    if (lk->has_main)
        r->level = lk->m[0].level;

    pl->base = cfg->name && cfg->name[0] ? cfg->name : "levee";
    pl->base_len = strlen(pl->base);
    size_t bl = pl->base_len;
    if (bl > sizeof pl->subname - 4)
        bl = sizeof pl->subname - 4;
    memcpy(pl->subname, pl->base, bl);
    memcpy(pl->subname + bl, ".sub", 4);
    pl->subname_len = bl + 4;
    pl->taken = 0;
    pl->rejected = -1;
    pl->fail = NULL;
    for (size_t i = 0; i < lk->n; i++) {
        pl->d[i].m = &lk->m[i];
        pl->d[i].have = false;
        pl->d[i].rejected = false;
    }
    return true;
}

/* Quota i's engine request (its bucket in the main or the sub namespace). */
static void quota_request(const struct sl_levee_plan *pl, size_t i, int64_t hits,
                          int64_t max_delay, sl_request *rq)
{
    const sl_quota_match *m = pl->d[i].m;
    if (m->source == SL_QUOTA_FROM_SUBLIMIT || m->source == SL_QUOTA_FROM_SUBKEY_DEFAULT)
        fill_request(rq, pl->subname, pl->subname_len, m, hits, max_delay);
    else
        fill_request(rq, pl->base, pl->base_len, m, hits, max_delay);
}

/* Rate 0 blocks quota i's bucket: no state to ask the engine about. */
static void blocked(struct sl_levee_plan *pl, size_t i)
{
    pl->d[i].rejected = true;
    pl->d[i].have = true;
    pl->d[i].resp.retry_after = pl->blocked_s * 1000;
    pl->rejected = (int)i;
}

/* What the engine said to quota i's hit. */
static void took(struct sl_levee_plan *pl, size_t i, const sl_response *resp)
{
    pl->d[i].resp = *resp;
    if (resp->error) {
        pl->fail = resp->error;
        return;
    }
    pl->d[i].have = true;
    if (resp->status == SL_OVER_LIMIT) {
        pl->d[i].rejected = true;
        pl->rejected = (int)i;
    } else {
        pl->taken |= 1u << i;
    }
}

/* The answer once every quota was decided (and what a failure took given back). */
static void conclude(const sl_levee_config *cfg, const struct sl_levee_plan *pl, int64_t now_ms,
                     sl_answer *r)
{
    const sl_quota_lookup *lk = &pl->lk;
    if (pl->fail) {
        set_quota_name(r, lk->m[0].name, lk->m[0].name_len);
        r->error = pl->fail;
        finish(r, SL_ANSWER_FAILED, "rate limiter error\n");
        return;
    }
    if (pl->rejected >= 0) {
        const decided *rj = &pl->d[pl->rejected];
        r->retry_after_ms = rj->resp.retry_after > 0 ? rj->resp.retry_after : 1;
        int64_t ra = ceil_s(r->retry_after_ms);
        retry_after_header(r, ra);
        rate_headers(r, pl->d, lk->n, now_ms, ra);
        set_quota_name(r, rj->m->name, rj->m->name_len);
        finish(r, SL_ANSWER_REJECTED, NULL);
        return;
    }
    if (cfg->headers_on_accept)
        rate_headers(r, pl->d, lk->n, now_ms, 0);
    if (__builtin_expect(pl->max_delay > 0, 0)) {
        /* every quota reserved its slot; the request goes when the last of them is due */
        int64_t delay = 0;
        for (size_t i = 0; i < lk->n; i++)
            if (pl->d[i].have && pl->d[i].resp.delay_ms > delay)
                delay = pl->d[i].resp.delay_ms;
        if (delay > 0) {
            size_t mark = sl_answer_mark(r);
            sl_answer_int(r, delay);
            SL_ANSWER_HEADER_FROM(r, "X-Delay-Ms", mark);
        }
    }
    set_quota_name(r, lk->m[0].name, lk->m[0].name_len);
    finish(r, SL_ANSWER_ACCEPTED, NULL);
}

void sl_levee_decide(const sl_levee_config *cfg, const sl_quota_snap *snap, sl_engine *e,
                     const sl_levee_request *req, int64_t now_ms, sl_answer *out)
{
    struct sl_levee_plan pl;
    if (!prepare(cfg, snap, req, &pl, out))
        goto done;
    for (size_t i = 0; i < pl.lk.n && pl.rejected < 0 && !pl.fail; i++) {
        if (!(pl.d[i].m->quota.rate > 0)) {
            blocked(&pl, i);
            continue;
        }
        sl_request rq;
        sl_response resp;
        quota_request(&pl, i, 1, pl.max_delay, &rq);
        sl_engine_decide(e, &rq, &resp, now_ms);
        took(&pl, i, &resp);
    }
    if (pl.rejected >= 0 || pl.fail) {
        /* Give back what was taken, so that a request that does not pass costs nothing. */
        for (size_t i = 0; i < pl.lk.n; i++) {
            if (!(pl.taken & (1u << i)))
                continue;
            sl_request rq;
            quota_request(&pl, i, -1, 0, &rq);
            sl_response back;
            sl_engine_decide(e, &rq, &back, now_ms);
            if (!back.error)
                pl.d[i].resp = back;
        }
    }
    conclude(cfg, &pl, now_ms, out);
done:
    log_decision(cfg, req, out);
}

/* ---------------------------------------------------------------- in a store */

int sl_levee_plan_begin(const sl_levee_config *cfg, const sl_quota_snap *snap,
                        const sl_levee_request *req, int64_t now_ms, sl_batch *b,
                        sl_levee_plan **plan, sl_answer *out)
{
    (void)now_ms;
    sl_batch_reset(b);
    struct sl_levee_plan *pl = sl_batch_alloc(b, sizeof *pl);
    *plan = pl;
    if (!pl || sl_batch_alloc_items(b, 2)) {
        finish(out, SL_ANSWER_FAILED, "out of memory\n");
        log_decision(cfg, req, out);
        return 0;
    }
    if (!prepare(cfg, snap, req, pl, out)) {
        log_decision(cfg, req, out);
        return 0;
    }
    /* Every quota up to the first of rate 0 (the engine would not look past it) is asked at
     * once; a later quota's hit taken after an earlier one rejected is given back as well. */
    b->n = 0;
    for (size_t i = 0; i < pl->lk.n; i++) {
        pl->item[i] = -1;
        if (!(pl->d[i].m->quota.rate > 0))
            break;
        pl->item[i] = (int)b->n;
        quota_request(pl, i, 1, pl->max_delay, &b->reqs[b->n++]);
    }
    pl->giving = false;
    if (b->n == 0) { /* the main quota blocks: nothing to ask */
        blocked(pl, 0);
        conclude(cfg, pl, now_ms, out);
        log_decision(cfg, req, out);
        return 0;
    }
    return 1;
}

int sl_levee_plan_done(const sl_levee_config *cfg, sl_levee_plan *pl, const sl_levee_request *req,
                       int64_t now_ms, sl_batch *b, sl_answer *out)
{
    const sl_quota_lookup *lk = &pl->lk;
    out->n_quotas = lk->n;
    if (lk->has_main)
        out->level = lk->m[0].level;
    if (!pl->giving) {
        /* the hits' answers, read in the engine's order */
        unsigned later = 0; /* hits taken after a rejection: seen by no answer */
        for (size_t i = 0; i < lk->n; i++) {
            int k = pl->item[i];
            if (pl->rejected >= 0 || pl->fail) {
                if (k >= 0 && !b->resps[k].error && b->resps[k].status != SL_OVER_LIMIT)
                    later |= 1u << i;
                continue;
            }
            if (k < 0)
                blocked(pl, i);
            else
                took(pl, i, &b->resps[k]);
        }
        if (pl->rejected >= 0 || pl->fail)
            pl->taken |= later;
        else
            pl->taken = 0;
        if (pl->taken) {
            /* give back every hit taken: the same items with hits -1, the others answered */
            b->n_answered = 0;
            for (size_t i = 0; i < lk->n; i++) {
                int k = pl->item[i];
                if (k < 0)
                    continue;
                if (pl->taken & (1u << i)) {
                    quota_request(pl, i, -1, 0, &b->reqs[k]);
                    b->answered[k] = 0;
                    memset(&b->resps[k], 0, sizeof b->resps[k]);
                } else {
                    b->answered[k] = 1;
                    b->n_answered++;
                }
            }
            pl->giving = true;
            return 1;
        }
    } else {
        /* the give-backs' answers: the state a rejection's headers show */
        for (size_t i = 0; i < lk->n; i++) {
            int k = pl->item[i];
            if (k >= 0 && (pl->taken & (1u << i)) && !b->resps[k].error && pl->d[i].have)
                pl->d[i].resp = b->resps[k];
        }
    }
    conclude(cfg, pl, now_ms, out);
    log_decision(cfg, req, out);
    return 0;
}

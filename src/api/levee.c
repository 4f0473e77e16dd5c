/*
 * Levee's /attempt decision (see levee.h for the contract and docs/levee.md for the model): the
 * quota lookup, the engine calls with their give-back on a later rejection, and the answer with
 * its Retry-After and RateLimit header fields.
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

void sl_levee_decide(const sl_levee_config *cfg, const sl_quota_snap *snap, sl_engine *e,
                     const sl_levee_request *req, int64_t now_ms, sl_answer *out)
{
    sl_answer *r = out;
    if (!req->resource || req->resource_len == 0) {
        finish(r, SL_ANSWER_MALFORMED, "missing X-Resource header\n");
        goto done;
    }
    if (!snap || !snap->loaded) {
        finish(r, SL_ANSWER_FAILED, "quotas not loaded yet\n");
        goto done;
    }
    int64_t max_delay = 0;
    if (__builtin_expect(req->max_delay != NULL, 0)) {
        max_delay = parse_max_delay(req->max_delay, req->max_delay_len, cfg->max_delay_ms);
        if (max_delay < 0) {
            finish(r, SL_ANSWER_MALFORMED,
                   "X-Max-Delay must be whole milliseconds or a duration such as 250ms\n");
            goto done;
        }
    }

    sl_quota_lookup lk;
    int rc = sl_quota_lookup_request(snap->tree, req->resource, req->resource_len, req->prefix,
                                     req->prefix_len, req->method, req->method_len,
                                     cfg->group_size, &lk);
    if (rc) {
        finish(r, SL_ANSWER_MALFORMED, "X-Resource, X-Prefix and X-Method are too long\n");
        goto done;
    }
    int64_t blocked_s = cfg->blocked_retry_after_s > 0 ? cfg->blocked_retry_after_s : 1;
    r->n_quotas = lk.n;
    if (lk.n == 0) {
        switch (cfg->no_quota) {
        case SL_LEVEE_NO_QUOTA_DENY:
            r->retry_after_ms = blocked_s * 1000;
            retry_after_header(r, blocked_s);
            finish(r, SL_ANSWER_REJECTED, NULL);
            break;
        case SL_LEVEE_NO_QUOTA_ERROR:
            finish(r, SL_ANSWER_FAILED, "no quota for resource\n");
            break;
        default:
            finish(r, SL_ANSWER_ACCEPTED, NULL);
        }
        goto done;
    }
    if (lk.has_main)
        r->level = lk.m[0].level;

    const char *base = cfg->name && cfg->name[0] ? cfg->name : "levee";
    char subname[SL_MAX_NAME_LEN];
    size_t base_len = strlen(base);
    if (base_len > sizeof subname - 4)
        base_len = sizeof subname - 4;
    memcpy(subname, base, base_len);
    memcpy(subname + base_len, ".sub", 4);
    size_t subname_len = base_len + 4;

    decided d[2];
    size_t taken = 0; /* quotas whose hit was taken (in order) */
    int rejected = -1;
    const char *fail = NULL;
    for (size_t i = 0; i < lk.n; i++) {
        const sl_quota_match *m = &lk.m[i];
        bool is_sub = m->source == SL_QUOTA_FROM_SUBLIMIT || m->source == SL_QUOTA_FROM_SUBKEY_DEFAULT;
        d[i].m = m;
        d[i].have = false;
        d[i].rejected = false;
        if (rejected >= 0 || fail)
            continue;
        if (!(m->quota.rate > 0)) {
            /* rate 0 blocks the bucket: no state to ask the engine about */
            d[i].rejected = true;
            d[i].have = true;
            d[i].resp.retry_after = blocked_s * 1000;
            rejected = (int)i;
            continue;
        }
        sl_request rq;
        if (is_sub)
            fill_request(&rq, subname, subname_len, m, 1, max_delay);
        else
            fill_request(&rq, base, strlen(base), m, 1, max_delay);
        sl_engine_decide(e, &rq, &d[i].resp, now_ms);
        if (d[i].resp.error) {
            fail = d[i].resp.error;
            continue;
        }
        d[i].have = true;
        if (d[i].resp.status == SL_OVER_LIMIT) {
            d[i].rejected = true;
            rejected = (int)i;
        } else {
            taken = i + 1;
        }
    }
    if (rejected >= 0 || fail) {
        /* Give back what was taken, so that a request that does not pass costs nothing. */
        for (size_t i = 0; i < taken; i++) {
            const sl_quota_match *m = d[i].m;
            bool is_sub = m->source == SL_QUOTA_FROM_SUBLIMIT ||
                          m->source == SL_QUOTA_FROM_SUBKEY_DEFAULT;
            sl_request rq;
            if (is_sub)
                fill_request(&rq, subname, subname_len, m, -1, 0);
            else
                fill_request(&rq, base, strlen(base), m, -1, 0);
            sl_response back;
            sl_engine_decide(e, &rq, &back, now_ms);
            if (!back.error)
                d[i].resp = back;
        }
    }
    if (fail) {
        set_quota_name(r, lk.m[0].name, lk.m[0].name_len);
        r->error = fail;
        finish(r, SL_ANSWER_FAILED, "rate limiter error\n");
        goto done;
    }
    if (rejected >= 0) {
        const decided *rj = &d[rejected];
        r->retry_after_ms = rj->resp.retry_after > 0 ? rj->resp.retry_after : 1;
        int64_t ra = ceil_s(r->retry_after_ms);
        retry_after_header(r, ra);
        rate_headers(r, d, lk.n, now_ms, ra);
        set_quota_name(r, rj->m->name, rj->m->name_len);
        finish(r, SL_ANSWER_REJECTED, NULL);
        goto done;
    }
    if (cfg->headers_on_accept)
        rate_headers(r, d, lk.n, now_ms, 0);
    if (__builtin_expect(max_delay > 0, 0)) {
        /* every quota reserved its slot; the request goes when the last of them is due */
        int64_t delay = 0;
        for (size_t i = 0; i < lk.n; i++)
            if (d[i].have && d[i].resp.delay_ms > delay)
                delay = d[i].resp.delay_ms;
        if (delay > 0) {
            size_t mark = sl_answer_mark(r);
            sl_answer_int(r, delay);
            SL_ANSWER_HEADER_FROM(r, "X-Delay-Ms", mark);
        }
    }
    set_quota_name(r, lk.m[0].name, lk.m[0].name_len);
    finish(r, SL_ANSWER_ACCEPTED, NULL);
done:
    log_decision(cfg, req, r);
}

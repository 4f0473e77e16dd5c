/*
 * Protection on the request path (see protect.h and docs/protection.md).
 *
 * Leases of /attempt. The resource's concurrency limit and the fleet are CONCURRENCY keys of the
 * local engine: "<ns>.conc"/<resource> with the resource's limit, and "<ns>.fleet"/noncritical
 * with (1 - reserve) * capacity, both divided by the resource's group size as Levee divides its
 * rate quotas (each of DF limiters sees 1/DF of the traffic). Critical calls take no fleet lease:
 * the fleet shedder never sheds them, and the reserve is what they use.
 *
 * The lease id a client gets (X-Lease-Id) names both leases and, when it fits, the resource, so
 * that POST /release needs nothing else:
 *
 *     <conc id: 16 hex> "." <fleet id: 16 hex> [ "." <resource, percent-encoded> ]
 *
 * with 16 zeros for "no such lease". The resource is left out when the id would pass 120 bytes
 * (clients keep 127); /release then needs X-Resource. Over gRPC the item's metadata "lease_id" is
 * the engine's id alone, or "<conc>.<fleet>" when the fleet shedder also took a lease.
 *
 * Order of the checks and why: the kill switch "*" first (nothing else runs); the worker shedder
 * next (it protects sluiced itself, so it must cost the least); then the fleet, the concurrency
 * limit and last the rate quotas, so that a rejection by a later check gives back the leases of
 * the earlier ones (one engine call each) and a rate quota is never charged for a call that does
 * not run.
 */
#include "api/protect.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "core/concurrency.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define CT_TEXT "text/plain; charset=utf-8"
#define FLEET_KEY "noncritical"
#define TOKEN_MAX 120
#define ZERO_ID "0000000000000000"

#define META_PRIORITY "priority"
#define META_LEASE "lease_id"
#define META_KILLSWITCH "killswitch"
#define META_SHADOW "shadow"
#define META_REASON "reason"
#define META_REQ_ID "req_id"

enum { LIM_RATE, LIM_CONC, LIM_FLEET, LIM_SHED, LIM_ALL, LIM_COUNT };
static const char *const lim_names[LIM_COUNT] = {"rate", "concurrency", "fleet", "shed", "all"};
enum { EV_REJECTED, EV_WOULD_REJECT, EV_KILLSWITCH, EV_COUNT };
static const char *const ev_names[EV_COUNT] = {"rejected", "would_reject", "killswitch"};
enum { LS_ACQUIRED, LS_RELEASED, LS_NOT_FOUND, LS_COUNT };
static const char *const ls_names[LS_COUNT] = {"acquired", "released", "not_found"};

typedef struct pworker {
    sl_protect *p;
    int index;
    sl_shed shed;
    sl_killswitch_reader reader;
    uv_loop_t *loop;
    uv_timer_t timer;
    bool timer_on;
    bool metrics_ok;    /* the loop's idle-time metric is available */
    uint64_t last_ns;   /* uv_hrtime() of the previous sample */
    uint64_t last_idle; /* uv_metrics_idle_time() then */
} __attribute__((aligned(64))) pworker;

struct sl_protect {
    sl_protect_config cfg;
    const char *ns;
    char conc_name[SL_MAX_NAME_LEN];
    size_t conc_name_len;
    char fleet_name[SL_MAX_NAME_LEN];
    size_t fleet_name_len;
    pworker *w;
    int nw; /* workers + 1 */
    sl_metrics_counter *events[LIM_COUNT][EV_COUNT];
    sl_metrics_counter *leases[LS_COUNT];
    _Atomic int64_t log_second;
    _Atomic int64_t log_count;
};

const char *sl_protect_outcome_name(sl_protect_outcome o)
{
    static const char *const n[SL_PROTECT_OUTCOME_COUNT] = {
        "accepted", "rejected", "shed", "failed", "malformed", "not_found"};
    return (unsigned)o < SL_PROTECT_OUTCOME_COUNT ? n[o] : "unknown";
}

void sl_protect_config_default(sl_protect_config *c)
{
    memset(c, 0, sizeof *c);
    c->shed = true;
    sl_shedder_options_default(&c->shed_opts);
    c->shed_interval_ms = 100;
    c->default_priority = SL_PRIORITY_CRITICAL;
    c->log_per_second = 20;
}

static pworker *wk(sl_protect *p, int worker)
{
    if (worker < 0 || worker >= p->nw - 1)
        worker = p->nw - 1;
    return &p->w[worker];
}

static void count(sl_protect *p, int lim, int ev)
{
    sl_metrics_counter_inc(p->events[lim][ev]);
}

/* At most log_per_second lines of would-reject and shed logging per second. */
static bool log_ok(sl_protect *p, sl_log_level lvl)
{
    if (!p->cfg.log || !sl_log_enabled(p->cfg.log, lvl))
        return false;
    int64_t sec = sl_mono_ns() / 1000000000;
    int64_t cur = atomic_load_explicit(&p->log_second, memory_order_relaxed);
    if (cur != sec &&
        atomic_compare_exchange_strong_explicit(&p->log_second, &cur, sec, memory_order_relaxed,
                                                memory_order_relaxed))
        atomic_store_explicit(&p->log_count, 0, memory_order_relaxed);
    return atomic_fetch_add_explicit(&p->log_count, 1, memory_order_relaxed) <
           p->cfg.log_per_second;
}

static const sl_killswitch_snap *switches(pworker *w)
{
    return w->p->cfg.switches ? sl_killswitch_read(w->p->cfg.switches, &w->reader) : NULL;
}

/* The switch of a name combined with the global one: the stronger wins. */
static sl_killswitch_mode mode_of(const sl_killswitch_snap *s, const char *name, size_t len)
{
    if (sl_killswitch_snap_quiet(s))
        return SL_KILLSWITCH_ENFORCE;
    sl_killswitch_mode g = sl_killswitch_snap_global(s);
    sl_killswitch_mode m = sl_killswitch_snap_mode(s, name, len);
    return g > m ? g : m;
}

static int64_t ceil_s(int64_t ms)
{
    return ms <= 0 ? 1 : (ms + 999) / 1000;
}

/* ---------------------------------------------------------------- leases in the engine */

static void lease_req(sl_request *q, const char *name, size_t nl, const char *key, size_t kl,
                      int64_t hits, int64_t limit, int64_t duration, uint64_t lease)
{
    memset(q, 0, sizeof *q);
    q->name = name;
    q->name_len = nl;
    q->unique_key = key;
    q->unique_key_len = kl;
    q->hits = hits;
    q->limit = limit;
    q->duration = duration;
    q->algorithm = SL_CONCURRENCY;
    q->lease_id = lease;
}

static void take_lease(sl_protect *p, const char *name, size_t nl, const char *key, size_t kl,
                       int64_t limit, int64_t duration, int64_t now, sl_response *r)
{
    sl_request q;
    lease_req(&q, name, nl, key, kl, 1, limit, duration, 0);
    sl_engine_decide(p->cfg.engine, &q, r, now);
    if (!r->error && r->status == SL_UNDER_LIMIT)
        sl_metrics_counter_inc(p->leases[LS_ACQUIRED]);
}

/* 1 released, 0 not found, -1 another error. */
static int give_lease(sl_protect *p, const char *name, size_t nl, const char *key, size_t kl,
                      uint64_t lease, int64_t now)
{
    if (!lease)
        return 0;
    sl_request q;
    sl_response r;
    lease_req(&q, name, nl, key, kl, -1, 0, 1, lease);
    sl_engine_decide(p->cfg.engine, &q, &r, now);
    if (!r.error) {
        sl_metrics_counter_inc(p->leases[LS_RELEASED]);
        return 1;
    }
    if (r.error == sl_conc_err_not_found) {
        sl_metrics_counter_inc(p->leases[LS_NOT_FOUND]);
        return 0;
    }
    return -1;
}

static int give_fleet(sl_protect *p, uint64_t lease, int64_t now)
{
    return give_lease(p, p->fleet_name, p->fleet_name_len, FLEET_KEY, sizeof FLEET_KEY - 1, lease,
                      now);
}

/* Levee's group size for a resource (factor/key/<R>, factor/default, or the override). */
static uint32_t group_size(const sl_levee_config *lcfg, const sl_quota_snap *snap, const char *res,
                           size_t len)
{
    if (lcfg && lcfg->group_size)
        return lcfg->group_size;
    if (!snap || !snap->tree)
        return 1;
    uint32_t f;
    if (res && len) {
        sl_quota_path pk = {.kind = SL_QUOTA_FACTOR_KEY, .key = res, .key_len = len};
        if (sl_quota_tree_get_factor(snap->tree, &pk, &f) && f > 0)
            return f;
    }
    sl_quota_path pd = {.kind = SL_QUOTA_FACTOR_DEFAULT};
    if (sl_quota_tree_get_factor(snap->tree, &pd, &f) && f > 0)
        return f;
    return 1;
}

/* One limiter's share of a limit: floor(v / DF), at least 1 unless v is 0. */
static int64_t share(int64_t v, uint32_t df)
{
    if (v <= 0)
        return 0;
    int64_t s = v / (int64_t)(df ? df : 1);
    return s < 1 ? 1 : s;
}

static int64_t fleet_noncritical(const sl_killswitch_fleet *f, uint32_t df)
{
    double v = floor((1.0 - f->reserve) * (double)share(f->capacity, df) + 1e-9);
    return v < 0 ? 0 : (int64_t)v;
}

/* ---------------------------------------------------------------- lease tokens */

static bool token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '~' || c == '/' || c == ':' || c == '@' || c == '+' || c == '-';
}

/* "<conc>.<fleet>[.<resource>]" into out (NUL-terminated); returns its length. */
static size_t token_format(char *out, size_t cap, uint64_t conc, uint64_t fleet, const char *res,
                           size_t rlen)
{
    char a[SL_CONC_ID_HEX + 1], b[SL_CONC_ID_HEX + 1];
    sl_conc_format_id(conc, a);
    sl_conc_format_id(fleet, b);
    int n = snprintf(out, cap, "%s.%s", a, b);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (!conc || !res || !rlen || len >= cap)
        return len;
    size_t limit = cap - 1 < TOKEN_MAX ? cap - 1 : TOKEN_MAX;
    size_t need = len + 1;
    for (size_t i = 0; i < rlen; i++)
        need += token_char((unsigned char)res[i]) ? 1 : 3;
    if (need > limit)
        return len; /* too long to carry: /release needs X-Resource */
    static const char hex[] = "0123456789ABCDEF";
    out[len++] = '.';
    for (size_t i = 0; i < rlen; i++) {
        unsigned char c = (unsigned char)res[i];
        if (token_char(c)) {
            out[len++] = (char)c;
        } else {
            out[len++] = '%';
            out[len++] = hex[c >> 4];
            out[len++] = hex[c & 15];
        }
    }
    out[len] = 0;
    return len;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int parse_id16(const char *s, uint64_t *id)
{
    if (!memcmp(s, ZERO_ID, SL_CONC_ID_HEX)) {
        *id = 0;
        return 0;
    }
    return sl_conc_parse_id(s, SL_CONC_ID_HEX, id);
}

/* Parse "<conc>", "<conc>.<fleet>" or "<conc>.<fleet>.<resource>" (res: decoded into resbuf,
 * *rlen 0 when absent). 0 or -EINVAL. */
static int token_parse(const char *s, size_t n, uint64_t *conc, uint64_t *fleet, char *resbuf,
                       size_t rescap, size_t *rlen)
{
    *conc = *fleet = 0;
    *rlen = 0;
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n < SL_CONC_ID_HEX || parse_id16(s, conc))
        return -EINVAL;
    if (n == SL_CONC_ID_HEX)
        return *conc ? 0 : -EINVAL;
    if (n < 2 * SL_CONC_ID_HEX + 1 || s[SL_CONC_ID_HEX] != '.' ||
        parse_id16(s + SL_CONC_ID_HEX + 1, fleet))
        return -EINVAL;
    if (!*conc && !*fleet)
        return -EINVAL;
    size_t off = 2 * SL_CONC_ID_HEX + 1;
    if (n == off)
        return 0;
    if (s[off] != '.' || n == off + 1 || !*conc)
        return -EINVAL;
    size_t o = 0;
    for (size_t i = off + 1; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -EINVAL;
            int h = hexval(s[i + 1]), l = hexval(s[i + 2]);
            if (h < 0 || l < 0)
                return -EINVAL;
            c = (char)(h << 4 | l);
            i += 2;
        } else if (!token_char((unsigned char)c)) {
            return -EINVAL;
        }
        if (o >= rescap)
            return -EINVAL;
        resbuf[o++] = c;
    }
    *rlen = o;
    return 0;
}

/* ---------------------------------------------------------------- answers */

typedef struct hb {
    char *buf;
    size_t cap, used;
} hb;

/* printf into the response buffer; NULL when it is full (the header is then left out). */
static const char *hb_printf(hb *h, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static const char *hb_printf(hb *h, size_t *len, const char *fmt, ...)
{
    if (h->used >= h->cap)
        return NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(h->buf + h->used, h->cap - h->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= h->cap - h->used)
        return NULL;
    const char *s = h->buf + h->used;
    h->used += (size_t)n + 1;
    *len = (size_t)n;
    return s;
}

typedef struct answer {
    sl_protect *p;
    sl_protect_response *out;
    hb h;
    sl_levee_header mine[SL_PROTECT_MAX_HEADERS];
    size_t nmine;
    bool levee_ran;
    bool shadow[LIM_COUNT], killed[LIM_COUNT];
} answer;

static void add(answer *a, const char *name, const char *value, size_t len)
{
    if (!value || a->nmine == SL_PROTECT_MAX_HEADERS)
        return;
    a->mine[a->nmine++] = (sl_levee_header){name, strlen(name), value, len};
}

static void addf(answer *a, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void addf(answer *a, const char *name, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return;
    size_t len;
    const char *v = hb_printf(&a->h, &len, "%s", tmp);
    add(a, name, v, len);
}

static void set_status(answer *a, sl_protect_outcome o, const char *limiter)
{
    static const int status[SL_PROTECT_OUTCOME_COUNT] = {200, 429, 503, 500, 400, 404};
    static const int code[SL_PROTECT_OUTCOME_COUNT] = {
        SL_GRPC_OK, SL_GRPC_RESOURCE_EXHAUSTED, SL_GRPC_UNAVAILABLE, SL_GRPC_INTERNAL,
        SL_GRPC_INVALID_ARGUMENT, SL_GRPC_NOT_FOUND};
    static const sl_levee_outcome lo[SL_PROTECT_OUTCOME_COUNT] = {
        SL_LEVEE_ACCEPTED, SL_LEVEE_REJECTED, SL_LEVEE_REJECTED, SL_LEVEE_FAILED,
        SL_LEVEE_MALFORMED, SL_LEVEE_MALFORMED};
    a->out->outcome = o;
    a->out->status = status[o];
    a->out->grpc_code = code[o];
    a->out->levee_outcome = lo[o];
    a->out->limiter = limiter;
}

static void set_body_static(answer *a, const char *body)
{
    a->out->body = body;
    a->out->body_len = strlen(body);
    a->out->content_type = CT_TEXT;
}

static void set_bodyf(answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_bodyf(answer *a, const char *fmt, ...)
{
    char tmp[400];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len;
    const char *v = hb_printf(&a->h, &len, "%s", tmp);
    if (v) {
        a->out->body = v;
        a->out->body_len = len;
        a->out->content_type = CT_TEXT;
    }
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

static void malformed(answer *a, const char *body)
{
    set_status(a, SL_PROTECT_MALFORMED, NULL);
    set_body_static(a, body);
}

static void failed(answer *a, const char *body)
{
    set_status(a, SL_PROTECT_FAILED, NULL);
    set_body_static(a, body);
}

/* 429 / 503 with Retry-After, RateLimit-Policy (when q >= 0) and RateLimit. */
static void limit_headers(answer *a, const char *policy, int64_t q, int64_t retry_ms)
{
    int64_t ra = ceil_s(retry_ms);
    a->out->retry_after_ms = retry_ms > 0 ? retry_ms : 1000;
    addf(a, "Retry-After", "%lld", (long long)ra);
    if (q >= 0)
        addf(a, "RateLimit-Policy", "\"%s\";q=%lld", policy, (long long)q);
    addf(a, "RateLimit", "\"%s\";r=0;t=%lld", policy, (long long)ra);
}

static const char *class_list(uint32_t level, char *buf, size_t cap)
{
    static const sl_priority order[3] = {SL_PRIORITY_TEST, SL_PRIORITY_GET, SL_PRIORITY_POST};
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < 3; i++) {
        double f = sl_shed_fraction_at(level, order[i]);
        if (f <= 0)
            break;
        int n = snprintf(buf + o, cap - o, "%s%s %.0f%%", o ? ", " : "", sl_priority_name(order[i]),
                         f * 100);
        if (n < 0 || (size_t)n >= cap - o)
            break;
        o += (size_t)n;
    }
    return buf;
}

static int64_t shed_retry_ms(const sl_protect *p)
{
    /* the time the level needs to fall one step: asking sooner finds it unchanged */
    int64_t ms = p->cfg.shed_opts.lower_after_ms;
    return ms > 1000 ? ms : 1000;
}

/* ---------------------------------------------------------------- /attempt */

static sl_priority method_priority(const char *m, size_t n, sl_priority dflt)
{
    if (!m || !n)
        return dflt;
    if ((n == 3 && !strncasecmp(m, "GET", 3)) || (n == 4 && !strncasecmp(m, "HEAD", 4)) ||
        (n == 7 && !strncasecmp(m, "OPTIONS", 7)))
        return SL_PRIORITY_GET;
    return SL_PRIORITY_POST;
}

static void note_shadow(answer *a, int lim, const sl_levee_request *lr, const char *what,
                        size_t wlen)
{
    a->shadow[lim] = true;
    count(a->p, lim, EV_WOULD_REJECT);
    if (log_ok(a->p, SL_LOG_INFO))
        sl_log_info(a->p->cfg.log,
                    "would_reject limiter=%s req_id=%.*s resource=%.*s limit=%.*s (shadow mode: "
                    "admitted)",
                    lim_names[lim], (int)(lr->req_id_len > 128 ? 128 : lr->req_id_len),
                    lr->req_id ? lr->req_id : "",
                    (int)(lr->resource_len > 256 ? 256 : lr->resource_len),
                    lr->resource ? lr->resource : "", (int)(wlen > 256 ? 256 : wlen),
                    what ? what : "");
}

static void note_killed(answer *a, int lim)
{
    a->killed[lim] = true;
    count(a->p, lim, EV_KILLSWITCH);
}

/* Comma-separated names of the limiters flagged in f[]. */
static const char *lim_list(answer *a, const bool *f, size_t *len)
{
    char tmp[96] = "";
    size_t o = 0;
    for (int i = 0; i < LIM_COUNT; i++) {
        if (!f[i])
            continue;
        int n = snprintf(tmp + o, sizeof tmp - o, "%s%s", o ? ", " : "",
                         i == LIM_ALL ? "*" : lim_names[i]);
        if (n > 0 && (size_t)n < sizeof tmp - o)
            o += (size_t)n;
    }
    if (!o)
        return NULL;
    return hb_printf(&a->h, len, "%s", tmp);
}

/* Put the final header list together: Levee's (X-Req-Id and its rate headers) or X-Req-Id, then
 * ours, then the shadow and kill-switch notes. */
static void finish(answer *a, const char *req_id, size_t req_id_len)
{
    sl_protect_response *out = a->out;
    out->n_headers = 0;
    if (a->levee_ran) {
        for (size_t i = 0; i < out->levee.n_headers && out->n_headers < SL_PROTECT_MAX_HEADERS; i++)
            out->headers[out->n_headers++] = out->levee.headers[i];
    } else if (req_id && req_id_len) {
        out->headers[out->n_headers++] = (sl_levee_header){"X-Req-Id", 8, req_id, req_id_len};
    }
    size_t len;
    const char *v;
    if ((v = lim_list(a, a->shadow, &len)))
        add(a, "X-Sluice-Shadow", v, len);
    if ((v = lim_list(a, a->killed, &len)))
        add(a, "X-Sluice-Killswitch", v, len);
    for (size_t i = 0; i < a->nmine && out->n_headers < SL_PROTECT_MAX_HEADERS; i++)
        out->headers[out->n_headers++] = a->mine[i];
}

static void reset(sl_protect_response *out)
{
    out->status = 0;
    out->outcome = SL_PROTECT_ACCEPTED;
    out->levee_outcome = SL_LEVEE_ACCEPTED;
    out->grpc_code = SL_GRPC_OK;
    out->limiter = NULL;
    out->body = NULL;
    out->body_len = 0;
    out->content_type = NULL;
    out->n_headers = 0;
    out->retry_after_ms = 0;
    out->levee.n_headers = 0;
}

void sl_protect_attempt(sl_protect *p, int worker, const sl_levee_config *lcfg,
                        const sl_quota_snap *snap, const sl_protect_attempt_req *req,
                        int64_t now, sl_protect_response *out)
{
    reset(out);
    answer a = {.p = p, .out = out, .h = {out->buf, sizeof out->buf, 0}};
    pworker *w = wk(p, worker);
    const sl_levee_request *lr = &req->levee;
    uint64_t fleet_id = 0, conc_id = 0;
    char res_print[100];

    int prio;
    if (req->priority && req->priority_len) {
        prio = sl_priority_from_name(req->priority, req->priority_len);
        if (prio < 0) {
            malformed(&a, "X-Priority must be critical, post, get or test\n");
            goto done;
        }
    } else {
        prio = method_priority(lr->method, lr->method_len, p->cfg.default_priority);
    }
    bool acquire = false;
    if (req->concurrency && req->concurrency_len) {
        const char *c = req->concurrency;
        size_t n = req->concurrency_len;
        if (n != 7 || strncasecmp(c, "acquire", 7)) {
            malformed(&a, "X-Concurrency must be 'acquire' (POST /release frees a lease)\n");
            goto done;
        }
        acquire = true;
    }
    if (!lr->resource || lr->resource_len == 0) {
        malformed(&a, "missing X-Resource header\n");
        goto done;
    }
    if (lr->resource_len > SL_QUOTA_MAX_KEY) {
        malformed(&a, "X-Resource is too long\n");
        goto done;
    }
    printable(res_print, sizeof res_print, lr->resource, lr->resource_len);

    const sl_killswitch_snap *ks = switches(w);
    if (sl_killswitch_snap_global(ks) == SL_KILLSWITCH_KILLED) {
        note_killed(&a, LIM_ALL);
        set_status(&a, SL_PROTECT_ACCEPTED, NULL);
        goto done;
    }

    /* the worker shedder */
    if (p->cfg.shed && prio != SL_PRIORITY_CRITICAL) {
        sl_killswitch_mode m = mode_of(ks, "shed", 4);
        if (m == SL_KILLSWITCH_KILLED) {
            note_killed(&a, LIM_SHED);
        } else if (!sl_shed_admit(&w->shed, (sl_priority)prio)) {
            if (m == SL_KILLSWITCH_SHADOW) {
                note_shadow(&a, LIM_SHED, lr, "shed", 4);
            } else {
                char cls[96];
                uint32_t level = sl_shed_level_milli(&w->shed);
                int64_t ms = shed_retry_ms(p);
                set_status(&a, SL_PROTECT_SHED, "shed");
                limit_headers(&a, "shed", -1, ms);
                set_bodyf(&a, "sluiced is overloaded and sheds %s traffic (%s); retry in %lld s\n",
                          sl_priority_name((sl_priority)prio),
                          class_list(level, cls, sizeof cls), (long long)ceil_s(ms));
                goto done;
            }
        }
    }

    /* the fleet shedder: non-critical acquisitions hold a fleet lease */
    const sl_killswitch_fleet *fl = sl_killswitch_snap_fleet(ks);
    if (acquire && prio != SL_PRIORITY_CRITICAL && fl) {
        sl_killswitch_mode m = mode_of(ks, "fleet", 5);
        if (m == SL_KILLSWITCH_KILLED) {
            note_killed(&a, LIM_FLEET);
        } else {
            int64_t nc = fleet_noncritical(fl, group_size(lcfg, snap, NULL, 0));
            sl_response r;
            take_lease(p, p->fleet_name, p->fleet_name_len, FLEET_KEY, sizeof FLEET_KEY - 1, nc,
                       fl->duration_ms, now, &r);
            if (r.error) {
                out->levee.error = r.error;
                failed(&a, "rate limiter error\n");
                goto done;
            }
            if (r.status == SL_OVER_LIMIT) {
                if (m == SL_KILLSWITCH_SHADOW) {
                    note_shadow(&a, LIM_FLEET, lr, "fleet", 5);
                } else {
                    set_status(&a, SL_PROTECT_SHED, "fleet");
                    limit_headers(&a, "fleet", nc, r.retry_after);
                    set_bodyf(&a,
                              "fleet capacity is reserved for critical calls: %lld non-critical "
                              "calls in flight; retry in %lld s\n",
                              (long long)nc, (long long)ceil_s(r.retry_after));
                    goto done;
                }
            } else {
                fleet_id = r.lease_id;
            }
        }
    }

    /* the resource's concurrency limit */
    sl_killswitch_conc cc;
    if (acquire && sl_killswitch_snap_concurrency(ks, lr->resource, lr->resource_len, &cc)) {
        sl_killswitch_mode m = mode_of(ks, "concurrency", 11);
        if (m == SL_KILLSWITCH_KILLED) {
            note_killed(&a, LIM_CONC);
        } else {
            int64_t limit = share(cc.limit, group_size(lcfg, snap, lr->resource, lr->resource_len));
            sl_response r;
            take_lease(p, p->conc_name, p->conc_name_len, lr->resource, lr->resource_len, limit,
                       cc.duration_ms, now, &r);
            if (r.error) {
                give_fleet(p, fleet_id, now);
                fleet_id = 0;
                out->levee.error = r.error;
                failed(&a, "rate limiter error\n");
                goto done;
            }
            if (r.status == SL_OVER_LIMIT) {
                if (m == SL_KILLSWITCH_SHADOW) {
                    note_shadow(&a, LIM_CONC, lr, "concurrency", 11);
                } else {
                    give_fleet(p, fleet_id, now);
                    fleet_id = 0;
                    set_status(&a, SL_PROTECT_REJECTED, "concurrency");
                    limit_headers(&a, "concurrency", limit, r.retry_after);
                    set_bodyf(&a,
                              "concurrency limit reached: %lld calls in flight for \"%s\"; retry "
                              "in %lld s\n",
                              (long long)limit, res_print, (long long)ceil_s(r.retry_after));
                    goto done;
                }
            } else {
                conc_id = r.lease_id;
            }
        }
    }

    /* Levee's rate quotas */
    const char *ns = lcfg && lcfg->name && lcfg->name[0] ? lcfg->name : "levee";
    sl_killswitch_mode m = mode_of(ks, ns, strlen(ns));
    if (m == SL_KILLSWITCH_KILLED) {
        note_killed(&a, LIM_RATE);
    } else {
        sl_levee_attempt(lcfg, snap, p->cfg.engine, lr, now, &out->levee);
        a.levee_ran = true;
        const sl_levee_response *r = &out->levee;
        if (r->outcome == SL_LEVEE_REJECTED) {
            sl_killswitch_mode qm = mode_of(ks, r->quota, r->quota ? r->quota_len : 0);
            if (m > qm)
                qm = m;
            if (qm == SL_KILLSWITCH_KILLED) {
                note_killed(&a, LIM_RATE);
            } else if (qm == SL_KILLSWITCH_SHADOW) {
                note_shadow(&a, LIM_RATE, lr, r->quota, r->quota_len);
            } else {
                give_fleet(p, fleet_id, now);
                give_lease(p, p->conc_name, p->conc_name_len, lr->resource, lr->resource_len,
                           conc_id, now);
                fleet_id = conc_id = 0;
                char q[100];
                printable(q, sizeof q, r->quota ? r->quota : "", r->quota ? r->quota_len : 0);
                set_status(&a, SL_PROTECT_REJECTED, "rate");
                out->retry_after_ms = r->retry_after_ms;
                set_bodyf(&a, "rate limit exceeded for \"%s\"; retry in %lld s\n", q,
                          (long long)ceil_s(r->retry_after_ms));
                goto done;
            }
        } else if (r->outcome != SL_LEVEE_ACCEPTED) {
            give_fleet(p, fleet_id, now);
            give_lease(p, p->conc_name, p->conc_name_len, lr->resource, lr->resource_len, conc_id,
                       now);
            fleet_id = conc_id = 0;
            set_status(&a, r->outcome == SL_LEVEE_MALFORMED ? SL_PROTECT_MALFORMED
                                                            : SL_PROTECT_FAILED, NULL);
            out->body = r->body;
            out->body_len = r->body_len;
            out->content_type = r->content_type;
            goto done;
        }
    }

    set_status(&a, SL_PROTECT_ACCEPTED, NULL);
    if (conc_id || fleet_id) {
        char tok[TOKEN_MAX + 8];
        size_t n = token_format(tok, sizeof tok, conc_id, fleet_id, lr->resource,
                                lr->resource_len);
        size_t len;
        const char *v = hb_printf(&a.h, &len, "%.*s", (int)n, tok);
        add(&a, "X-Lease-Id", v, len);
    }
done:
    if (out->outcome == SL_PROTECT_REJECTED || out->outcome == SL_PROTECT_SHED) {
        int lim = !out->limiter ? LIM_RATE
                  : !strcmp(out->limiter, "shed") ? LIM_SHED
                  : !strcmp(out->limiter, "fleet") ? LIM_FLEET
                  : !strcmp(out->limiter, "concurrency") ? LIM_CONC
                                                          : LIM_RATE;
        count(p, lim, EV_REJECTED);
        if (lim != LIM_RATE && p->cfg.log && sl_log_enabled(p->cfg.log, SL_LOG_DEBUG))
            sl_log_debug(p->cfg.log, "attempt req_id=%.*s resource=%.*s status=%d limiter=%s",
                         (int)(lr->req_id_len > 128 ? 128 : lr->req_id_len),
                         lr->req_id ? lr->req_id : "",
                         (int)(lr->resource_len > 256 ? 256 : lr->resource_len),
                         lr->resource ? lr->resource : "", out->status, out->limiter);
    }
    finish(&a, lr->req_id, lr->req_id_len);
}

void sl_protect_release(sl_protect *p, int worker, const sl_levee_config *lcfg,
                        const sl_quota_snap *snap, const sl_protect_release_req *req,
                        int64_t now, sl_protect_response *out)
{
    (void)worker;
    (void)lcfg;
    (void)snap;
    reset(out);
    answer a = {.p = p, .out = out, .h = {out->buf, sizeof out->buf, 0}};
    uint64_t conc = 0, fleet = 0;
    char res[SL_QUOTA_MAX_KEY];
    size_t rlen = 0;
    if (!req->lease_id || !req->lease_id_len) {
        malformed(&a, "missing X-Lease-Id header\n");
        goto done;
    }
    if (token_parse(req->lease_id, req->lease_id_len, &conc, &fleet, res, sizeof res, &rlen)) {
        malformed(&a, "X-Lease-Id is not a lease id\n");
        goto done;
    }
    const char *key = rlen ? res : req->resource;
    size_t klen = rlen ? rlen : req->resource_len;
    if (conc && (!key || !klen)) {
        malformed(&a, "X-Resource is required to release this lease\n");
        goto done;
    }
    if (conc && klen > SL_QUOTA_MAX_KEY) {
        malformed(&a, "X-Resource is too long\n");
        goto done;
    }
    int released = 0, errors = 0;
    int rc = give_fleet(p, fleet, now);
    released += rc > 0;
    errors += rc < 0;
    rc = give_lease(p, p->conc_name, p->conc_name_len, key, klen, conc, now);
    released += rc > 0;
    errors += rc < 0;
    if (errors) {
        failed(&a, "rate limiter error\n");
    } else if (released) {
        set_status(&a, SL_PROTECT_ACCEPTED, NULL);
    } else {
        set_status(&a, SL_PROTECT_NOT_FOUND, NULL);
        set_body_static(&a, "lease not found: it was released already or it expired\n");
    }
done:
    finish(&a, req->req_id, req->req_id_len);
}

/* ---------------------------------------------------------------- Gubernator batches */

enum { F_SHADOW = 1 };

struct sl_protect_call {
    size_t n;
    uint64_t *fleet; /* fleet lease per item, 0 = none */
    uint8_t *flags;
};

static sl_protect_call *call_state(sl_batch *b, sl_protect_call **call)
{
    if (*call)
        return *call;
    sl_protect_call *c = sl_batch_alloc(b, sizeof *c);
    uint64_t *fleet = sl_batch_alloc(b, b->n * sizeof *fleet + 1);
    uint8_t *flags = sl_batch_alloc(b, b->n + 1);
    if (!c || !fleet || !flags)
        return NULL;
    memset(fleet, 0, b->n * sizeof *fleet);
    memset(flags, 0, b->n);
    c->n = b->n;
    c->fleet = fleet;
    c->flags = flags;
    *call = c;
    return c;
}

static void answer_item(sl_batch *b, size_t i, sl_status status, int64_t limit, int64_t remaining,
                        int64_t reset_time)
{
    sl_batch_answer(b, i, NULL);
    sl_response *r = &b->resps[i];
    r->status = status;
    r->limit = limit;
    r->remaining = remaining;
    r->reset_time = reset_time;
}

static const char ERR_PRIORITY[] = "metadata 'priority' must be critical, post, get or test";
static const char ERR_LEASE[] = "metadata 'lease_id' is not a lease id";
static const char ERR_NOMEM[] = "out of memory";

static void log_item_shadow(sl_protect *p, const sl_batch *b, size_t i, int lim)
{
    if (!log_ok(p, SL_LOG_INFO))
        return;
    const sl_request *q = &b->reqs[i];
    const char *rid = sl_batch_meta_get(&b->req_meta[i], META_REQ_ID);
    sl_log_info(p->cfg.log,
                "would_reject limiter=%s req_id=%s name=%.*s unique_key=%.*s (shadow mode: "
                "admitted)",
                lim_names[lim], rid ? rid : "", (int)(q->name_len > 256 ? 256 : q->name_len),
                q->name ? q->name : "", (int)(q->unique_key_len > 256 ? 256 : q->unique_key_len),
                q->unique_key ? q->unique_key : "");
}

int sl_protect_batch_begin(sl_protect *p, int worker, sl_batch *b, bool peer, int64_t now,
                           sl_protect_call **call, sl_protect_verdict *v)
{
    *call = NULL;
    v->shed = false;
    v->retry_after_s = 0;
    v->message[0] = 0;
    pworker *w = wk(p, worker);

    if (peer) {
        /* the entry node applied everything else; only the lease ids matter here */
        for (size_t i = 0; i < b->n; i++) {
            sl_request *q = &b->reqs[i];
            if (b->answered[i] || q->algorithm != SL_CONCURRENCY || q->hits >= 0)
                continue;
            const char *t = sl_batch_meta_get(&b->req_meta[i], META_LEASE);
            if (!t || (strlen(t) >= SL_CONC_ID_HEX && !parse_id16(t, &q->lease_id)))
                continue; /* without one, the engine says a release needs it */
            sl_batch_answer(b, i, ERR_LEASE);
        }
        return 0;
    }

    const sl_killswitch_snap *ks = switches(w);
    const bool quiet = sl_killswitch_snap_quiet(ks);
    const sl_killswitch_mode global = sl_killswitch_snap_global(ks);

    /* priorities: each item's, and the call's (its most important item's) for the shedder */
    int call_prio = SL_PRIORITY_COUNT;
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        const char *pm = sl_batch_meta_get(&b->req_meta[i], META_PRIORITY);
        int pr = p->cfg.default_priority;
        if (pm) {
            pr = sl_priority_from_name(pm, strlen(pm));
            if (pr < 0) {
                sl_batch_answer(b, i, ERR_PRIORITY);
                continue;
            }
        }
        if (pr < call_prio)
            call_prio = pr;
    }
    if (call_prio == SL_PRIORITY_COUNT)
        call_prio = p->cfg.default_priority;

    bool shed_shadow = false;
    if (p->cfg.shed && call_prio != SL_PRIORITY_CRITICAL && global != SL_KILLSWITCH_KILLED) {
        sl_killswitch_mode m = mode_of(ks, "shed", 4);
        if (m == SL_KILLSWITCH_KILLED) {
            count(p, LIM_SHED, EV_KILLSWITCH);
        } else if (!sl_shed_admit(&w->shed, (sl_priority)call_prio)) {
            if (m == SL_KILLSWITCH_SHADOW) {
                count(p, LIM_SHED, EV_WOULD_REJECT);
                shed_shadow = true;
            } else {
                count(p, LIM_SHED, EV_REJECTED);
                char cls[96];
                int64_t ms = shed_retry_ms(p);
                v->shed = true;
                v->retry_after_s = ceil_s(ms);
                snprintf(v->message, sizeof v->message,
                         "sluiced is overloaded and sheds %s traffic (%s); retry in %lld s",
                         sl_priority_name((sl_priority)call_prio),
                         class_list(sl_shed_level_milli(&w->shed), cls, sizeof cls),
                         (long long)v->retry_after_s);
                return 1;
            }
        }
    }

    const sl_killswitch_fleet *fl = sl_killswitch_snap_fleet(ks);
    sl_killswitch_mode fleet_mode = fl ? mode_of(ks, "fleet", 5) : SL_KILLSWITCH_ENFORCE;
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        sl_request *q = &b->reqs[i];
        sl_meta *rm = &b->resp_meta[i];
        const bool conc = q->algorithm == SL_CONCURRENCY;

        if (conc && q->hits < 0) {
            /* a release always runs, whatever the switches say: it only frees capacity */
            const char *t = sl_batch_meta_get(&b->req_meta[i], META_LEASE);
            uint64_t c = 0, f = 0;
            char dummy[1];
            size_t dl;
            if (!t)
                continue; /* without one, the engine says a release needs it */
            if (token_parse(t, strlen(t), &c, &f, dummy, 0, &dl)) {
                sl_batch_answer(b, i, ERR_LEASE);
                continue;
            }
            if (f)
                give_fleet(p, f, now);
            if (!c) { /* only a fleet lease was held */
                answer_item(b, i, SL_UNDER_LIMIT, q->limit, q->limit, now);
                continue;
            }
            q->lease_id = c;
            continue;
        }

        sl_killswitch_mode m = quiet ? SL_KILLSWITCH_ENFORCE : mode_of(ks, q->name, q->name_len);
        if (m == SL_KILLSWITCH_KILLED) {
            answer_item(b, i, SL_UNDER_LIMIT, q->limit, q->limit, now);
            sl_batch_meta_add_ref(b, rm, META_KILLSWITCH, "on");
            count(p, global == SL_KILLSWITCH_KILLED ? LIM_ALL : conc ? LIM_CONC : LIM_RATE,
                  EV_KILLSWITCH);
            continue;
        }
        if (m == SL_KILLSWITCH_SHADOW || (q->behavior & SL_SHADOW) || shed_shadow) {
            sl_protect_call *c = call_state(b, call);
            if (!c) {
                sl_batch_answer(b, i, ERR_NOMEM);
                continue;
            }
            c->flags[i] |= F_SHADOW;
            if (shed_shadow)
                sl_batch_meta_add_ref(b, rm, META_SHADOW, "shed");
        }

        if (conc && q->hits > 0 && fl && fleet_mode != SL_KILLSWITCH_KILLED) {
            const char *pm = sl_batch_meta_get(&b->req_meta[i], META_PRIORITY);
            int pr = pm ? sl_priority_from_name(pm, strlen(pm)) : (int)p->cfg.default_priority;
            if (pr == SL_PRIORITY_CRITICAL)
                continue;
            int64_t nc = fleet_noncritical(fl, 1);
            sl_response r;
            take_lease(p, p->fleet_name, p->fleet_name_len, FLEET_KEY, sizeof FLEET_KEY - 1, nc,
                       fl->duration_ms, now, &r);
            if (r.error) {
                sl_batch_answer(b, i, r.error);
                continue;
            }
            if (r.status == SL_OVER_LIMIT) {
                if (fleet_mode == SL_KILLSWITCH_SHADOW) {
                    count(p, LIM_FLEET, EV_WOULD_REJECT);
                    log_item_shadow(p, b, i, LIM_FLEET);
                    sl_batch_meta_add_ref(b, rm, META_SHADOW, "fleet");
                    continue;
                }
                count(p, LIM_FLEET, EV_REJECTED);
                answer_item(b, i, SL_OVER_LIMIT, nc, 0, r.reset_time);
                sl_batch_meta_add_ref(b, rm, META_REASON,
                                      "shed: fleet capacity is reserved for critical calls");
                continue;
            }
            sl_protect_call *c = call_state(b, call);
            if (!c) {
                give_fleet(p, r.lease_id, now);
                sl_batch_answer(b, i, ERR_NOMEM);
                continue;
            }
            c->fleet[i] = r.lease_id;
        } else if (conc && q->hits > 0 && fl && fleet_mode == SL_KILLSWITCH_KILLED) {
            count(p, LIM_FLEET, EV_KILLSWITCH);
        }
    }
    return 0;
}

/* "lease_id" for an item: the engine's id (here or from the owner's answer) and the fleet's. */
static void set_lease_meta(sl_batch *b, size_t i, uint64_t fleet)
{
    uint64_t c = b->resps[i].lease_id;
    if (!c) {
        const char *t = sl_batch_meta_get(&b->resp_meta[i], META_LEASE);
        if (t && strlen(t) == SL_CONC_ID_HEX)
            parse_id16(t, &c);
    }
    if (!c && !fleet)
        return;
    char tok[2 * SL_CONC_ID_HEX + 2];
    if (fleet)
        token_format(tok, sizeof tok, c, fleet, NULL, 0);
    else
        sl_conc_format_id(c, tok);
    sl_batch_meta_set(b, &b->resp_meta[i], META_LEASE, tok);
}

void sl_protect_batch_end(sl_protect *p, int worker, sl_protect_call *call, sl_batch *b,
                          bool peer, int64_t now)
{
    (void)worker;
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        sl_response *r = &b->resps[i];
        const sl_request *q = &b->reqs[i];
        const bool conc = q->algorithm == SL_CONCURRENCY;
        if (peer) {
            if (r->lease_id)
                set_lease_meta(b, i, 0);
            continue;
        }
        uint64_t fleet = call && i < call->n ? call->fleet[i] : 0;
        if (r->error) {
            give_fleet(p, fleet, now);
            continue;
        }
        if (r->status == SL_OVER_LIMIT) {
            int lim = conc ? LIM_CONC : LIM_RATE;
            if (call && i < call->n && (call->flags[i] & F_SHADOW)) {
                r->status = SL_UNDER_LIMIT;
                sl_batch_meta_set(b, &b->resp_meta[i], META_SHADOW, lim_names[lim]);
                count(p, lim, EV_WOULD_REJECT);
                log_item_shadow(p, b, i, lim);
            } else {
                count(p, lim, EV_REJECTED);
                sl_batch_meta_add_ref(b, &b->resp_meta[i], META_REASON,
                                      conc ? "concurrency limit reached: too many calls in flight"
                                           : "rate limit exceeded");
                give_fleet(p, fleet, now);
                fleet = 0;
            }
        }
        if (conc && q->hits > 0)
            set_lease_meta(b, i, fleet);
    }
}

/* ---------------------------------------------------------------- the worker shedder */

static void shed_moved(pworker *w, int moved, double util)
{
    sl_protect *p = w->p;
    if (!moved || !p->cfg.log)
        return;
    char cls[96];
    uint32_t level = sl_shed_level_milli(&w->shed);
    sl_log_write(p->cfg.log, moved > 0 ? SL_LOG_WARN : SL_LOG_INFO,
                 "worker shed level %s worker=%d level=%.3f utilization=%.2f shedding=\"%s\"",
                 moved > 0 ? "raised" : "lowered", w->index, level / 1000.0, util,
                 level ? class_list(level, cls, sizeof cls) : "nothing");
}

int sl_protect_observe(sl_protect *p, int worker, int64_t now_ms, double utilization)
{
    pworker *w = wk(p, worker);
    int moved = sl_shed_observe(&w->shed, now_ms, utilization);
    shed_moved(w, moved, utilization);
    return moved;
}

double sl_protect_shed_level(sl_protect *p, int worker)
{
    return sl_shed_level_milli(&wk(p, worker)->shed) / 1000.0;
}

static void on_tick(uv_timer_t *t)
{
    pworker *w = t->data;
    uint64_t now = uv_hrtime();
    uint64_t idle = uv_metrics_idle_time(w->loop);
    if (w->last_ns && now > w->last_ns) {
        double elapsed = (double)(now - w->last_ns);
        double busy = 1.0 - (double)(idle - w->last_idle) / elapsed;
        if (busy < 0)
            busy = 0;
        if (busy > 1)
            busy = 1;
        int moved = sl_shed_observe(&w->shed, (int64_t)(now / 1000000), busy);
        shed_moved(w, moved, sl_shed_util(&w->shed));
    }
    w->last_ns = now;
    w->last_idle = idle;
}

void sl_protect_worker_start(sl_protect *p, int worker, uv_loop_t *loop)
{
    pworker *w = wk(p, worker);
    if (!p->cfg.shed || w->timer_on || worker < 0 || worker >= p->nw - 1)
        return;
    int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rc) {
        sl_log_warn(p->cfg.log, "worker shedder off worker=%d: no loop idle time (%s)", worker,
                    uv_strerror(rc));
        return;
    }
    w->loop = loop;
    w->last_ns = 0;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    uint64_t ms = p->cfg.shed_interval_ms > 0 ? (uint64_t)p->cfg.shed_interval_ms : 100;
    uv_timer_start(&w->timer, on_tick, ms, ms);
    uv_unref((uv_handle_t *)&w->timer); /* never keeps a stopping loop alive */
    w->timer_on = true;
}

void sl_protect_worker_stop(sl_protect *p, int worker)
{
    pworker *w = wk(p, worker);
    if (w->timer_on && worker >= 0 && worker < p->nw - 1) {
        uv_timer_stop(&w->timer);
        uv_close((uv_handle_t *)&w->timer, NULL);
        w->timer_on = false;
    }
    sl_killswitch_reader_release(&w->reader);
}

/* ---------------------------------------------------------------- admin */

static void admin_json(sl_protect_admin_response *out, int status, json_t *j)
{
    out->status = status;
    out->content_type = "application/json";
    out->body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    out->body_len = out->body ? strlen(out->body) : 0;
    json_decref(j);
}

static void admin_error(sl_protect_admin_response *out, int status, const char *msg)
{
    admin_json(out, status, json_pack("{s:s}", "error", msg));
}

static int list_switch(void *ud, const char *name, size_t len, sl_killswitch_mode mode, bool admin)
{
    json_array_append_new(ud, json_pack("{s:s%,s:s,s:s}", "name", name, len, "mode",
                                        sl_killswitch_mode_name(mode), "origin",
                                        admin ? "admin" : "source"));
    return 0;
}

static int list_conc(void *ud, const char *key, size_t len, const sl_killswitch_conc *c)
{
    json_array_append_new(ud, json_pack("{s:s%,s:I,s:I}", "key", len ? key : "default",
                                        len ? len : 7, "limit", (json_int_t)c->limit,
                                        "duration_ms", (json_int_t)c->duration_ms));
    return 0;
}

void sl_protect_admin(sl_protect *p, const char *method, const uint8_t *body, size_t len,
                      sl_protect_admin_response *out)
{
    memset(out, 0, sizeof *out);
    sl_killswitch *ks = p->cfg.switches;
    if (!ks) {
        admin_error(out, 503, "no switchboard on this node");
        return;
    }
    if (!strcmp(method, "POST")) {
        json_error_t jerr;
        json_t *j = json_loadb((const char *)body, len, 0, &jerr);
        json_t *jn = j ? json_object_get(j, "name") : NULL;
        json_t *jon = j ? json_object_get(j, "on") : NULL;
        json_t *jm = j ? json_object_get(j, "mode") : NULL;
        int mode = -EINVAL;
        if (jon && json_is_boolean(jon) && !jm)
            mode = json_is_true(jon) ? SL_KILLSWITCH_KILLED : SL_KILLSWITCH_ENFORCE;
        else if (jm && json_is_string(jm) && !jon)
            mode = sl_killswitch_parse_mode(json_string_value(jm), json_string_length(jm));
        if (!j || !json_is_object(j) || !jn || !json_is_string(jn) || mode < 0) {
            json_decref(j);
            admin_error(out, 400,
                        "expected {\"name\": \"N\", \"on\": true|false} or {\"name\": \"N\", "
                        "\"mode\": \"on\"|\"shadow\"|\"off\"}");
            return;
        }
        int rc = sl_killswitch_set(ks, json_string_value(jn), json_string_length(jn),
                                   (sl_killswitch_mode)mode);
        if (rc) {
            json_decref(j);
            admin_error(out, rc == -ENOSPC ? 507 : 400,
                        rc == -ENOSPC ? "too many switches" : "bad switch name");
            return;
        }
        admin_json(out, 200, json_pack("{s:O,s:s,s:s}", "name", jn, "mode",
                                       sl_killswitch_mode_name((sl_killswitch_mode)mode), "origin",
                                       "admin"));
        json_decref(j);
        return;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        admin_error(out, 405, "use GET or POST");
        return;
    }
    sl_killswitch_status st;
    sl_killswitch_status_get(ks, &st);
    json_t *sw = json_array(), *cc = json_array(), *shed = json_array();
    sl_killswitch_visit(ks, list_switch, NULL, sw);
    sl_killswitch_visit(ks, NULL, list_conc, cc);
    for (int i = 0; i < p->nw - 1; i++)
        json_array_append_new(shed, json_pack("{s:i,s:f,s:f}", "worker", i, "level",
                                              sl_shed_level_milli(&p->w[i].shed) / 1000.0,
                                              "utilization", sl_shed_util(&p->w[i].shed)));
    json_t *fleet = json_null();
    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    const sl_killswitch_fleet *f = sl_killswitch_snap_fleet(s);
    if (f)
        fleet = json_pack("{s:I,s:f,s:I}", "capacity", (json_int_t)f->capacity, "reserve",
                          f->reserve, "duration_ms", (json_int_t)f->duration_ms);
    sl_killswitch_reader_release(&r);
    admin_json(out, 200,
               json_pack("{s:s,s:b,s:b,s:o,s:o,s:o,s:o}", "source",
                         sl_killswitch_source_name(st.source), "loaded", st.loaded, "connected",
                         st.connected, "switches", sw, "concurrency", cc, "fleet", fleet, "shed",
                         shed));
}

/* ---------------------------------------------------------------- lifecycle and metrics */

static void collect_level(void *arg, sl_metrics_sink *sink)
{
    sl_protect *p = arg;
    for (int i = 0; i < p->nw - 1; i++) {
        char wbuf[16];
        snprintf(wbuf, sizeof wbuf, "%d", i);
        const char *v[1] = {wbuf};
        sl_metrics_sink_emit(sink, v, 1, sl_shed_level_milli(&p->w[i].shed) / 1000.0);
    }
}

static void collect_util(void *arg, sl_metrics_sink *sink)
{
    sl_protect *p = arg;
    for (int i = 0; i < p->nw - 1; i++) {
        char wbuf[16];
        snprintf(wbuf, sizeof wbuf, "%d", i);
        const char *v[1] = {wbuf};
        double u = sl_shed_util(&p->w[i].shed);
        sl_metrics_sink_emit(sink, v, 1, u < 0 ? 0 : u);
    }
}

static void collect_shed_calls(void *arg, sl_metrics_sink *sink)
{
    sl_protect *p = arg;
    sl_shedder_stats sum = {0};
    for (int i = 0; i < p->nw; i++) {
        sl_shedder_stats st;
        sl_shed_stats(&p->w[i].shed, &st);
        for (int c = 0; c < SL_PRIORITY_COUNT; c++) {
            sum.admitted[c] += st.admitted[c];
            sum.shed[c] += st.shed[c];
        }
    }
    for (int c = 0; c < SL_PRIORITY_COUNT; c++) {
        const char *v[2] = {sl_priority_name((sl_priority)c), "shed"};
        sl_metrics_sink_emit(sink, v, 2, (double)sum.shed[c]);
        v[1] = "admitted";
        sl_metrics_sink_emit(sink, v, 2, (double)sum.admitted[c]);
    }
}

static int register_metrics(sl_protect *p)
{
    sl_metrics *m = p->cfg.metrics;
    if (!m)
        return 0;
    sl_metrics_family *f;
    int rc = sl_metrics_counter_family(
        m, "sluice_protect_events_total",
        "Protection events by limiter (rate, concurrency, fleet, shed, all): rejected (429/503 or "
        "OVER_LIMIT), would_reject (shadow mode: admitted), killswitch (admitted by a switch).",
        "limiter,event", &f);
    if (rc)
        return rc;
    for (int l = 0; l < LIM_COUNT; l++)
        for (int e = 0; e < EV_COUNT; e++) {
            const char *v[2] = {lim_names[l], ev_names[e]};
            p->events[l][e] = sl_metrics_counter_get(f, v, 2);
        }
    rc = sl_metrics_counter_family(m, "sluice_leases_total",
                                   "Concurrency and fleet leases taken and given back by /attempt, "
                                   "/release and the fleet shedder (not_found: already released "
                                   "or expired).",
                                   "event", &f);
    if (rc)
        return rc;
    for (int e = 0; e < LS_COUNT; e++) {
        const char *v[1] = {ls_names[e]};
        p->leases[e] = sl_metrics_counter_get(f, v, 1);
    }
    if ((rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_shed_level",
                                   "Worker shed level, 0..3: test traffic is shed first (0..1), "
                                   "then get (1..2), then post (2..3); critical never.",
                                   "worker", collect_level, p)))
        return rc;
    if ((rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_worker_utilization",
                                   "Busy fraction of each worker loop (smoothed), the signal of "
                                   "the worker shedder.",
                                   "worker", collect_util, p)))
        return rc;
    return sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_shed_calls_total",
                                "Calls seen by the worker shedder, by priority and outcome.",
                                "priority,outcome", collect_shed_calls, p);
}

int sl_protect_new(const sl_protect_config *cfg, sl_protect **out)
{
    if (!cfg || !out || !cfg->engine)
        return -EINVAL;
    if (cfg->shed && sl_shedder_options_check(&cfg->shed_opts, NULL))
        return -EINVAL;
    sl_protect *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cfg = *cfg;
    if (p->cfg.shed_interval_ms <= 0)
        p->cfg.shed_interval_ms = 100;
    if (p->cfg.log_per_second <= 0)
        p->cfg.log_per_second = 20;
    p->ns = cfg->name && cfg->name[0] ? cfg->name : "levee";
    int n1 = snprintf(p->conc_name, sizeof p->conc_name, "%s.conc", p->ns);
    int n2 = snprintf(p->fleet_name, sizeof p->fleet_name, "%s.fleet", p->ns);
    if (n1 < 0 || (size_t)n1 >= sizeof p->conc_name || n2 < 0 ||
        (size_t)n2 >= sizeof p->fleet_name) {
        free(p);
        return -EINVAL;
    }
    p->conc_name_len = (size_t)n1;
    p->fleet_name_len = (size_t)n2;
    p->nw = (cfg->workers > 0 ? cfg->workers : 1) + 1;
    size_t bytes = (size_t)p->nw * sizeof *p->w;
    p->w = aligned_alloc(64, bytes);
    if (!p->w) {
        free(p);
        return -ENOMEM;
    }
    memset(p->w, 0, bytes);
    for (int i = 0; i < p->nw; i++) {
        p->w[i].p = p;
        p->w[i].index = i;
        sl_shed_init(&p->w[i].shed, &p->cfg.shed_opts);
    }
    atomic_init(&p->log_second, 0);
    atomic_init(&p->log_count, 0);
    int rc = register_metrics(p);
    if (rc) {
        sl_protect_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void sl_protect_free(sl_protect *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nw; i++)
        sl_killswitch_reader_release(&p->w[i].reader);
    free(p->w);
    free(p);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client-proxy (see proxy.h). Structure:
 *
 *   sl_proxy ── health[]: one slot per limiter name ever seen (down flag, metric series), shared
 *      │                  by the workers with relaxed atomics
 *      └─ worker[w] ── its copy of the topology (rebuilt when the version moves): a picker over
 *                      the ALIVE names, one sl_peer (persistent h2c) per limiter, the round-robin
 *                      counters, the in-flight count, its quota reader; worker 0 also the probe
 *
 * A request: resource -> hash -> DF (factor tree) -> group (HRW top-DF, down members replaced by
 * the next by HRW) -> member (round robin per resource) -> sl_peer_http -> relay. A failed call
 * marks its limiter down and goes once more to the group without it.
 *
 * The round-robin counters are a fixed table indexed by the resource hash (RR_SLOTS per worker):
 * bounded memory whatever the number of resources; two resources sharing a slot restart its count
 * (the slot remembers whose it is), which only costs evenness while both are busy.
 */
#include "levee/proxy.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/peer.h"
#include "cluster/picker.h"
#include "sluice/clock.h"

#define RR_SLOTS 4096
#define MAX_FWD_HEADERS 64
#define NAME_BYTES 4096     /* lowercased request header names of one forwarded call */
#define MAX_TRIES 2
#define MAX_ANSWER_BYTES ((size_t)64 << 10) /* a limiter's /attempt answer body (a line or two) */

enum { O_ACCEPTED, O_REJECTED, O_ERROR, O_FAILED, O_COUNT };
static const char *const outcome_names[O_COUNT] = {"accepted", "rejected", "error", "failed"};
enum { R_OVERLOAD, R_NO_LIMITER, R_COUNT };
static const char *const reject_names[R_COUNT] = {"overload", "no_limiter"};

typedef struct health {
    char name[SL_TOPOLOGY_MAX_NAME];
    char addr[SL_TOPOLOGY_MAX_ADDR];     /* as last seen, for the log */
    _Atomic int down;
    sl_metrics_counter *req[O_COUNT];
    sl_metrics_counter *failovers;
} health;

typedef struct wlim {
    sl_member mb;              /* as the topology had it */
    int h;                     /* health slot */
    sl_peer *peer;
    bool probing;
} wlim;

typedef struct rr_slot {
    uint64_t hash;
    uint32_t n;
} rr_slot;

typedef struct pworker {
    sl_proxy *px;
    uv_loop_t *loop;
    int idx;
    bool started;
    bool stopping;                       /* worker_stop is closing the connections */
    uint64_t version;
    size_t n;
    wlim lim[SL_TOPOLOGY_MAX_MEMBERS];
    sl_picker *picker;                   /* over the ALIVE names */
    size_t pick2lim[SL_TOPOLOGY_MAX_MEMBERS];
    sl_quotasrc_reader qr;
    uint32_t inflight;
    uv_timer_t probe;
    bool probe_init;
    rr_slot rr[RR_SLOTS];
} pworker;

struct sl_proxy {
    sl_proxy_config cfg;
    pthread_mutex_t mu;                  /* health slot assignment */
    size_t nhealth;
    health hs[SL_TOPOLOGY_MAX_MEMBERS];
    sl_metrics_family *req_family, *fo_family;
    sl_metrics_counter *rejected[R_COUNT];
    pworker *w;
};

typedef struct fcall {
    pworker *w;
    sl_exchange *ex;
    uint64_t hash;
    uint32_t df;
    int tries;
    size_t lim;                          /* the limiter of this try (index into w->lim) */
    int h;                               /* its health slot: stays right if w->lim is rebuilt */
    int failed;                          /* the health slot of the limiter that failed, or -1 */
} fcall;

/* ---- group selection -------------------------------------------------------------------------- */

typedef bool (*down_fn)(void *ud, size_t picker_index);

/* The df members for hash: HRW top order, skipping members down_fn says are down; when fewer
 * than df are up, the best down ones fill the group. */
static size_t pick_group(const sl_picker *pk, uint64_t hash, size_t df, down_fn is_down, void *ud,
                         size_t *out)
{
    size_t n = sl_picker_count(pk);
    if (df > n)
        df = n;
    if (!df)
        return 0;
    size_t order[SL_TOPOLOGY_MAX_MEMBERS];
    size_t got = sl_picker_group(pk, hash, df, order), k = 0;
    for (size_t i = 0; i < got && !is_down(ud, order[i]); i++)
        k++;
    if (k == df) { /* the usual case: nobody in the group is down */
        memcpy(out, order, df * sizeof *out);
        return df;
    }
    got = sl_picker_group(pk, hash, n, order); /* every member, best first */
    k = 0;
    for (size_t i = 0; i < got && k < df; i++)
        if (!is_down(ud, order[i]))
            out[k++] = order[i];
    for (size_t i = 0; i < got && k < df; i++)
        if (is_down(ud, order[i]))
            out[k++] = order[i];
    return k;
}

typedef struct names_ud {
    const sl_picker *pk;
    const char *const *names;
    const bool *down;
    size_t n;
} names_ud;

static size_t name_index(const names_ud *u, size_t pi)
{
    const char *a = sl_picker_addr(u->pk, pi);
    for (size_t i = 0; i < u->n; i++)
        if (strcmp(u->names[i], a) == 0)
            return i;
    return 0;
}

static bool names_down(void *ud, size_t pi)
{
    names_ud *u = ud;
    return u->down && u->down[name_index(u, pi)];
}

size_t sl_proxy_group(const char *const *names, const bool *down, size_t n, uint64_t hash,
                      size_t df, size_t *out)
{
    sl_picker *pk;
    if (n == 0 || n > SL_TOPOLOGY_MAX_MEMBERS ||
        sl_picker_new(SL_PICKER_KIND_HRW, 1, names, n, &pk))
        return 0;
    names_ud u = {pk, names, down, n};
    size_t k = pick_group(pk, hash, df, names_down, &u, out);
    for (size_t i = 0; i < k; i++)
        out[i] = name_index(&u, out[i]);
    sl_picker_free(pk);
    return k;
}

uint32_t sl_proxy_factor(const sl_quota_tree *t, const char *res, size_t len)
{
    uint32_t df = 0;
    sl_quota_path key = {.kind = SL_QUOTA_FACTOR_KEY, .key = res, .key_len = len};
    sl_quota_path def = {.kind = SL_QUOTA_FACTOR_DEFAULT};
    if (t && len && sl_quota_tree_get_factor(t, &key, &df) && df)
        return df;
    if (t && sl_quota_tree_get_factor(t, &def, &df) && df)
        return df;
    return 1;
}

/* ---- health --------------------------------------------------------------------------------- */

/* The health slot of a name, made on first sight (its metric series with it, and the address
 * its log lines name). -1 when full. */
static int health_slot(sl_proxy *p, const char *name, const char *addr)
{
    pthread_mutex_lock(&p->mu);
    int r = -1;
    for (size_t i = 0; i < p->nhealth; i++)
        if (strcmp(p->hs[i].name, name) == 0) {
            r = (int)i;
            break;
        }
    if (r < 0 && p->nhealth < SL_TOPOLOGY_MAX_MEMBERS) {
        health *h = &p->hs[p->nhealth];
        snprintf(h->name, sizeof h->name, "%.*s", (int)sizeof h->name - 1, name);
        snprintf(h->addr, sizeof h->addr, "%.*s", (int)sizeof h->addr - 1, addr);
        for (int o = 0; o < O_COUNT && p->req_family; o++) {
            const char *v[2] = {name, outcome_names[o]};
            h->req[o] = sl_metrics_counter_get(p->req_family, v, 2);
        }
        if (p->fo_family) {
            const char *v[1] = {name};
            h->failovers = sl_metrics_counter_get(p->fo_family, v, 1);
        }
        r = (int)p->nhealth++;
    }
    pthread_mutex_unlock(&p->mu);
    return r;
}

static bool lim_down(const sl_proxy *p, const wlim *l)
{
    return l->h >= 0 && atomic_load_explicit(&p->hs[l->h].down, memory_order_relaxed);
}

/* Mark health slot h down or up; a change is logged (one line per change, not per request). */
static void set_down(sl_proxy *p, int h, bool down, int err)
{
    if (h < 0)
        return;
    health *hs = &p->hs[h];
    int was = atomic_exchange_explicit(&hs->down, down, memory_order_relaxed);
    if (was == (int)down || !p->cfg.log)
        return;
    if (down)
        sl_log_warn(p->cfg.log, "proxy: limiter %s (%s) down: %s; its share moves to the next by HRW",
                    hs->name, hs->addr, strerror(-err));
    else
        sl_log_info(p->cfg.log, "proxy: limiter %s (%s) up again", hs->name, hs->addr);
}

static void count(health *h, int o)
{
    if (h && h->req[o])
        sl_metrics_counter_inc(h->req[o]);
}

static bool worker_down(void *ud, size_t pi)
{
    pworker *w = ud;
    return lim_down(w->px, &w->lim[w->pick2lim[pi]]);
}

/* ---- topology ------------------------------------------------------------------------------- */

static int new_peer(pworker *w, wlim *l)
{
    sl_peer_config pc = {.loop = w->loop, .addr = l->mb.service,
                         .connect_timeout_ms = w->px->cfg.timeout_ms,
                         .backoff_max_ms = w->px->cfg.probe_interval_ms,
                         .max_msg = MAX_ANSWER_BYTES, .tls = w->px->cfg.tls};
    return sl_peer_new(&pc, &l->peer);
}

/* The topology moved: take its members again, keep the connections of limiters that stay. */
static void refresh(pworker *w)
{
    sl_proxy *p = w->px;
    static _Thread_local sl_member m[SL_TOPOLOGY_MAX_MEMBERS];
    uint64_t ver;
    size_t n = sl_topology_copy(p->cfg.topology, m, SL_TOPOLOGY_MAX_MEMBERS, &ver);
    wlim next[SL_TOPOLOGY_MAX_MEMBERS];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].status == SL_MEMBER_DEAD)
            continue;
        wlim *l = &next[k];
        memset(l, 0, sizeof *l);
        l->mb = m[i];
        l->h = health_slot(p, l->mb.name, l->mb.service);
        for (size_t j = 0; j < w->n; j++)
            if (w->lim[j].peer && !strcmp(w->lim[j].mb.name, l->mb.name) &&
                !strcmp(w->lim[j].mb.service, l->mb.service)) {
                l->peer = w->lim[j].peer; /* keep the connection */
                l->probing = w->lim[j].probing;
                w->lim[j].peer = NULL;
            }
        if (!l->peer && new_peer(w, l))
            continue;
        k++;
    }
    sl_peer *gone[SL_TOPOLOGY_MAX_MEMBERS];
    size_t ngone = 0;
    for (size_t j = 0; j < w->n; j++)
        if (w->lim[j].peer)
            gone[ngone++] = w->lim[j].peer;
    memcpy(w->lim, next, k * sizeof *next);
    w->n = k;
    const char *alive[SL_TOPOLOGY_MAX_MEMBERS];
    size_t na = 0;
    for (size_t i = 0; i < k; i++)
        if (w->lim[i].mb.status == SL_MEMBER_ALIVE)
            alive[na++] = w->lim[i].mb.name;
    sl_picker *pk = NULL;
    if (sl_picker_new(SL_PICKER_KIND_HRW, 1, alive, na, &pk) == 0) {
        sl_picker_free(w->picker);
        w->picker = pk;
        for (size_t pi = 0; pi < sl_picker_count(pk); pi++)
            for (size_t i = 0; i < k; i++)
                if (!strcmp(sl_picker_addr(pk, pi), w->lim[i].mb.name))
                    w->pick2lim[pi] = i;
    }
    w->version = ver;
    /* Last, with the new list in place: the calls in flight on a limiter that left fail with
     * -ECANCELED here and go once more to the new list. */
    for (size_t j = 0; j < ngone; j++)
        sl_peer_close(gone[j]);
}

/* ---- forwarding ----------------------------------------------------------------------------- */

static void on_answer(void *ud, const sl_peer_http_result *res);

static void respond_text(sl_exchange *ex, int status, const char *msg)
{
    sl_exchange_respond_simple(ex, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* The limiter for this try: the group's next member, round robin per resource. */
static bool choose(fcall *c)
{
    pworker *w = c->w;
    if (!w->picker || sl_picker_count(w->picker) == 0)
        return false;
    size_t g[SL_TOPOLOGY_MAX_MEMBERS];
    size_t k = pick_group(w->picker, c->hash, c->df, worker_down, w, g);
    if (k > 1 && c->failed >= 0) { /* a retry: never the one that just failed */
        size_t j = 0;
        for (size_t i = 0; i < k; i++)
            if (w->lim[w->pick2lim[g[i]]].h != c->failed)
                g[j++] = g[i];
        k = j;
    }
    if (!k)
        return false;
    rr_slot *s = &w->rr[c->hash & (RR_SLOTS - 1)];
    if (s->hash != c->hash) {
        s->hash = c->hash;
        s->n = 0;
    }
    c->lim = w->pick2lim[g[s->n++ % k]];
    c->h = w->lim[c->lim].h;
    return true;
}

/* Send the request to c->lim. 0, or the negative errno of a call that could not start. */
static int forward(fcall *c)
{
    pworker *w = c->w;
    const sl_http_request *rq = sl_exchange_request(c->ex);
    sl_h2c_field f[MAX_FWD_HEADERS];
    char names[NAME_BYTES];
    size_t nf = 0, used = 0;
    for (size_t i = 0; i < rq->nheaders && nf < MAX_FWD_HEADERS; i++) {
        const sl_http_header *h = &rq->headers[i];
        if (sl_http_hop_header(h->name, h->name_len) || sl_http_name_eq(h->name, h->name_len, "host") ||
            sl_http_name_eq(h->name, h->name_len, "content-length") ||
            h->name_len + used > sizeof names)
            continue;
        for (size_t j = 0; j < h->name_len; j++)
            names[used + j] = (char)tolower((unsigned char)h->name[j]);
        f[nf++] = (sl_h2c_field){names + used, h->name_len, h->value, h->value_len};
        used += h->name_len;
    }
    sl_buf body;
    sl_buf_init(&body, 0);
    if (rq->body_len && sl_buf_append(&body, rq->body, rq->body_len)) {
        sl_buf_free(&body);
        return -ENOMEM;
    }
    int rc = sl_peer_http(w->lim[c->lim].peer, "POST", "/attempt", f, nf, &body,
                          w->px->cfg.timeout_ms, on_answer, c);
    sl_buf_free(&body);
    if (rc == 0)
        w->inflight++;
    return rc;
}

/* Start (or restart) the call; on no limiter or a call that cannot start, fail over or answer. */
static void start(fcall *c)
{
    pworker *w = c->w;
    while (c->tries < MAX_TRIES) {
        c->tries++;
        if (!choose(c))
            break;
        int rc = forward(c);
        if (rc == 0)
            return;
        health *h = c->h >= 0 ? &w->px->hs[c->h] : NULL;
        count(h, O_FAILED);
        if (rc != -ENOMEM && rc != -EINVAL) {
            set_down(w->px, c->h, true, rc);
            if (h && h->failovers && c->tries < MAX_TRIES)
                sl_metrics_counter_inc(h->failovers);
        }
        c->failed = c->h;
    }
    if (w->px->rejected[R_NO_LIMITER])
        sl_metrics_counter_inc(w->px->rejected[R_NO_LIMITER]);
    respond_text(c->ex, 500, "no limiter answered\n");
    free(c);
}

static int outcome_of(int status)
{
    return status == 200 ? O_ACCEPTED : status == 429 ? O_REJECTED : O_ERROR;
}

static void on_answer(void *ud, const sl_peer_http_result *res)
{
    fcall *c = ud;
    pworker *w = c->w;
    w->inflight--;
    health *h = c->h >= 0 ? &w->px->hs[c->h] : NULL;
    if (res->err) {
        count(h, O_FAILED);
        if (res->err != -ECANCELED) { /* -ECANCELED: it left the topology, or we stop */
            set_down(w->px, c->h, true, res->err);
            if (h && h->failovers && c->tries < MAX_TRIES && sl_exchange_alive(c->ex))
                sl_metrics_counter_inc(h->failovers);
        }
        c->failed = c->h;
        if (w->stopping || !sl_exchange_alive(c->ex))
            c->tries = MAX_TRIES; /* shutting down, or nobody waits */
        start(c);
        return;
    }
    count(h, outcome_of(res->status));
    sl_http_header hd[SL_PEER_HTTP_MAX_FIELDS];
    size_t nh = 0;
    for (size_t i = 0; i < res->nfields; i++) {
        const sl_h2c_field *f = &res->fields[i];
        if (f->name_len && f->name[0] == ':')
            continue;
        if (sl_http_hop_header(f->name, f->name_len) || sl_http_name_eq(f->name, f->name_len, "date") ||
            sl_http_name_eq(f->name, f->name_len, "content-length"))
            continue;
        hd[nh++] = (sl_http_header){f->name, f->name_len, f->value, f->value_len};
    }
    sl_http_response r = {.status = res->status, .headers = hd, .nheaders = nh,
                          .body = res->body, .body_len = res->len};
    if (res->status < 200 || res->status > 599)
        respond_text(c->ex, 500, "limiter answered an invalid status\n");
    else
        sl_exchange_respond(c->ex, &r);
    free(c);
}

static void attempt(sl_proxy *p, sl_exchange *ex, const sl_http_request *rq)
{
    pworker *w = &p->w[sl_exchange_worker(ex)];
    if (sl_topology_version(p->cfg.topology) != w->version)
        refresh(w);
    if (w->inflight >= p->cfg.max_inflight) {
        if (p->rejected[R_OVERLOAD])
            sl_metrics_counter_inc(p->rejected[R_OVERLOAD]);
        respond_text(ex, 503, "proxy overloaded: too many calls to limiters in flight\n");
        return;
    }
    fcall *c = calloc(1, sizeof *c);
    if (!c) {
        respond_text(ex, 503, "out of memory\n");
        return;
    }
    const sl_http_header *res = sl_http_header_find(rq, "x-resource");
    const char *rs = res ? res->value : "";
    size_t rl = res ? res->value_len : 0;
    c->w = w;
    c->ex = ex;
    c->failed = -1;
    c->h = -1;
    c->hash = sl_picker_hash(NULL, rs, rl); /* only which limiter takes the call: public */
    const sl_quota_snap *snap = p->cfg.quotas ? sl_quotasrc_read(p->cfg.quotas, &w->qr) : NULL;
    c->df = sl_proxy_factor(snap ? snap->tree : NULL, rs, rl);
    start(c);
}

void sl_proxy_handle(void *ud, sl_exchange *ex)
{
    sl_proxy *p = ud;
    const sl_http_request *rq = sl_exchange_request(ex);
    if (!rq->grpc && sl_http_path_is(rq, "/attempt") && rq->method_len == 4 &&
        memcmp(rq->method, "POST", 4) == 0 && sl_exchange_loop(ex) &&
        sl_exchange_worker(ex) < p->cfg.workers && p->w[sl_exchange_worker(ex)].started) {
        attempt(p, ex, rq);
        return;
    }
    p->cfg.fallback(p->cfg.fallback_ud, ex);
}

/* ---- probing (worker 0) --------------------------------------------------------------------- */

typedef struct probe {
    pworker *w;
    char name[SL_TOPOLOGY_MAX_NAME];
} probe;

static wlim *lim_by_name(pworker *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->lim[i].mb.name, name))
            return &w->lim[i];
    return NULL;
}

static void on_probe(void *ud, const sl_peer_http_result *res)
{
    probe *pr = ud;
    wlim *l = lim_by_name(pr->w, pr->name);
    if (l) {
        l->probing = false;
        if (res->err == 0 && res->status == 200)
            set_down(pr->w->px, l->h, false, 0);
    }
    free(pr);
}

static void probe_tick(uv_timer_t *t)
{
    pworker *w = t->data;
    if (sl_topology_version(w->px->cfg.topology) != w->version)
        refresh(w);
    for (size_t i = 0; i < w->n; i++) {
        wlim *l = &w->lim[i];
        if (!lim_down(w->px, l) || l->probing)
            continue;
        probe *pr = calloc(1, sizeof *pr);
        if (!pr)
            return;
        pr->w = w;
        memcpy(pr->name, l->mb.name, sizeof pr->name);
        if (sl_peer_http(l->peer, "GET", "/v1/LiveCheck", NULL, 0, NULL, w->px->cfg.timeout_ms,
                         on_probe, pr) == 0)
            l->probing = true;
        else
            free(pr);
    }
}

/* ---- metrics and lifecycle ------------------------------------------------------------------ */

static void collect_up(void *arg, sl_metrics_sink *sink)
{
    sl_proxy *p = arg;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->nhealth; i++) {
        const char *v[1] = {p->hs[i].name};
        sl_metrics_sink_emit(sink, v, 1, atomic_load(&p->hs[i].down) ? 0 : 1);
    }
    pthread_mutex_unlock(&p->mu);
}

static int register_metrics(sl_proxy *p)
{
    sl_metrics *m = p->cfg.metrics;
    if (!m)
        return 0;
    int rc;
    sl_metrics_family *rj;
    if ((rc = sl_metrics_counter_family(m, "sluice_proxy_requests_total",
                                        "/attempt calls relayed to limiters by limiter and outcome "
                                        "(accepted 200, rejected 429, error other status, failed: "
                                        "no answer)",
                                        "limiter,outcome", &p->req_family)) ||
        (rc = sl_metrics_counter_family(m, "sluice_proxy_failovers_total",
                                        "/attempt calls sent to another limiter after this one failed",
                                        "limiter", &p->fo_family)) ||
        (rc = sl_metrics_counter_family(m, "sluice_proxy_rejected_total",
                                        "/attempt calls the proxy answered itself (overload 503, "
                                        "no_limiter 500)",
                                        "reason", &rj)) ||
        (rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_proxy_limiter_up",
                                   "1 while the proxy sends to this limiter, 0 while it is marked down",
                                   "limiter", collect_up, p)))
        return rc;
    for (int r = 0; r < R_COUNT; r++) {
        const char *v[1] = {reject_names[r]};
        p->rejected[r] = sl_metrics_counter_get(rj, v, 1);
    }
    return 0;
}

int sl_proxy_new(const sl_proxy_config *cfg, sl_proxy **out)
{
    *out = NULL;
    if (!cfg->topology || !cfg->fallback || cfg->workers < 1)
        return -EINVAL;
    sl_proxy *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cfg = *cfg;
    if (p->cfg.timeout_ms <= 0)
        p->cfg.timeout_ms = 1000;
    if (p->cfg.probe_interval_ms <= 0)
        p->cfg.probe_interval_ms = 500;
    if (!p->cfg.max_inflight)
        p->cfg.max_inflight = 10000;
    pthread_mutex_init(&p->mu, NULL);
    p->w = calloc((size_t)cfg->workers, sizeof *p->w);
    int rc = p->w ? register_metrics(p) : -ENOMEM;
    if (rc) {
        sl_proxy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void sl_proxy_worker_start(sl_proxy *p, int worker, uv_loop_t *loop)
{
    if (!p || worker < 0 || worker >= p->cfg.workers)
        return;
    pworker *w = &p->w[worker];
    w->px = p;
    w->loop = loop;
    w->idx = worker;
    w->started = true;
    refresh(w);
    if (worker == 0) {
        uv_timer_init(loop, &w->probe);
        w->probe.data = w;
        w->probe_init = true;
        uv_timer_start(&w->probe, probe_tick, (uint64_t)p->cfg.probe_interval_ms,
                       (uint64_t)p->cfg.probe_interval_ms);
    }
}

void sl_proxy_worker_stop(sl_proxy *p, int worker)
{
    if (!p || worker < 0 || worker >= p->cfg.workers)
        return;
    pworker *w = &p->w[worker];
    if (!w->started)
        return;
    if (w->probe_init) {
        uv_timer_stop(&w->probe);
        uv_close((uv_handle_t *)&w->probe, NULL);
        w->probe_init = false;
    }
    w->stopping = true;
    for (size_t i = 0; i < w->n; i++) {
        sl_peer *pe = w->lim[i].peer;
        w->lim[i].peer = NULL;
        sl_peer_close(pe); /* calls in flight: -ECANCELED, answered 500 */
    }
    w->n = 0;
    w->stopping = false;
    sl_picker_free(w->picker);
    w->picker = NULL;
    sl_quotasrc_reader_release(&w->qr);
    w->started = false;
}

void sl_proxy_free(sl_proxy *p)
{
    if (!p)
        return;
    free(p->w);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

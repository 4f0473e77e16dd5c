/*
 * The Redis store (see rstore.h): per worker loop, one hiredis async connection on that loop (the
 * libuv adapter), the items of each call sent as EVALSHA commands of up to --redis-batch-items
 * items of one algorithm each, answers matched back by the callback's chunk record, and the
 * connection's health: connect and reply deadlines, reconnection
 * with backoff over the address list, NOSCRIPT reloads.
 *
 * Deadlines. hiredis 0.14 (Debian 12) has no timeouts of its own, so one timer per worker ticks
 * a few times per --redis-timeout: a connection still not up, or with commands in flight and no
 * answer, for longer than the timeout is freed, which answers every command in flight with no
 * reply (error or fail-open) - replies come in order, so a connection whose oldest command is
 * stuck is stuck for all of them. The same tick makes the connection again when its backoff is
 * over.
 *
 * Ownership of the hiredis context: hiredis frees it itself after a failed connect (on_connect
 * with an error) or a lost connection (on_disconnect); sluice frees it for a deadline or at worker
 * stop, never from inside one of its callbacks. w->ac is cleared first in every case, so a
 * callback run by the freeing sees a worker without a connection.
 */
#include "store/rstore.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
/* the adapter is a header of static functions (one of them named on_close) */
#include <hiredis/adapters/libuv.h>

#include "base/file.h"
#include "core/concurrency.h"
#include "sluice/clock.h"
#include "store/rscript.h"

#define DEFAULT_TIMEOUT_MS 1000
#define DEFAULT_MARGIN_MS 60000
#define DEFAULT_BATCH_ITEMS 100
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define TICK_MIN_MS 10
#define TICK_MAX_MS 250
#define PASSWORD_MAX 4096
#define ADDR_MAX 256

static const char err_unavailable[] = "redis store unavailable";
static const char err_failed[] = "redis store: the command failed";
static const char err_nomem[] = "out of memory";

typedef struct wk wk;
typedef struct pend pend;

/* One script call: n items of one algorithm, p->idx[first .. first + n - 1]. */
typedef struct chunk {
    pend *p;
    uint32_t first;
    uint32_t n;
    int32_t alg;
    bool eval; /* sent as EVAL (after a NOSCRIPT): a second NOSCRIPT is an error */
} chunk;

struct pend {
    wk *w;
    sl_batch *b;
    int64_t now;
    sl_rstore_done_cb done;
    void *ud;
    size_t out;    /* script calls in flight, plus one while submit runs */
    uint32_t *idx; /* the items sent, in request order, chunk after chunk */
    chunk *ch;
};

typedef struct raddr {
    char host[ADDR_MAX];
    int port;
} raddr;

struct wk {
    sl_rstore *r;
    int idx;
    uv_loop_t *loop;
    redisAsyncContext *ac;
    bool connected;
    bool started;
    bool stopping;
    uv_timer_t timer;
    size_t addr;            /* the address used or tried last */
    int64_t backoff_ms;
    int64_t next_try_ms;    /* mono ms: the next connect attempt, when ac == NULL */
    int64_t conn_start_ms;  /* mono ms the connect began */
    int64_t progress_ms;    /* mono ms of the last reply, or of the send that found none out */
    size_t inflight;        /* commands sent and not answered, items and others */
    bool wrong_server;      /* a READONLY / LOADING / MASTERDOWN answer: leave it at the next tick */
    sl_rscript_cmd cmd;     /* the command being built (reused) */
    sl_log_budget log_budget;  /* items failed: one line a second */
    sl_log_budget conn_budget; /* connection events: one line a second */
    _Atomic uint64_t items, errors, fail_open, reloads, connects, disconnects;
};

struct sl_rstore {
    sl_rstore_config cfg;
    sl_engine_config ecfg;
    raddr *addrs;
    size_t n_addrs;
    char *user;
    char *password;
    uint32_t batch_items;
    int nworkers;
    wk *wk;
};

static int64_t mono_ms(void)
{
    return sl_mono_ns() / 1000000;
}

static void cinc(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* ---- items ---------------------------------------------------------------------------------- */

static void pend_release(pend *p)
{
    if (--p->out == 0) {
        p->done(p->ud, p->b);
        free(p);
    }
}

/* Redis could not decide item i: the local engine does under --fail-open, else an error. */
static void unavailable(wk *w, sl_batch *b, size_t i, int64_t now, const char *why)
{
    sl_rstore *r = w->r;
    if (r->cfg.fail_open && r->cfg.engine) {
        sl_engine_decide(r->cfg.engine, &b->reqs[i], &b->resps[i], now);
        sl_batch_meta_add_ref(b, &b->resp_meta[i], "fail_open", why); /* as the router marks */
        cinc(&w->fail_open);
    } else {
        memset(&b->resps[i], 0, sizeof b->resps[i]);
        b->resps[i].error = why;
        cinc(&w->errors);
    }
    if (r->cfg.log && sl_log_budget_take(r->cfg.log, &w->log_budget, SL_LOG_WARN))
        sl_log_write(r->cfg.log, SL_LOG_WARN, "redis store: %s (worker %d)%s", why, w->idx,
                     r->cfg.fail_open ? "; deciding locally (fail-open)" : "");
}

static void chunk_reply(redisAsyncContext *ac, void *reply, void *priv);

/* A script's number: an integer reply, or a decimal string of at most 20 characters. */
static bool reply_int(const redisReply *e, long long *out)
{
    if (e->type == REDIS_REPLY_INTEGER) {
        *out = e->integer;
        return true;
    }
    if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 20)
        return false;
    char buf[24];
    memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    char *end;
    errno = 0;
    *out = strtoll(buf, &end, 10);
    return *end == '\0' && errno == 0;
}

/* CONCURRENCY's sixth answer: the lease taken, in hex, or "0" (*v is set to 0: no delay). */
static bool reply_lease(const redisReply *e, uint64_t *lease, long long *v)
{
    *v = 0;
    *lease = 0;
    if (e->type != REDIS_REPLY_STRING)
        return false;
    if (e->len == 1 && e->str[0] == '0')
        return true;
    return sl_conc_parse_id(e->str, e->len, lease) == 0;
}

/* Send one script call. 0, or a negative errno (not sent: no connection, no memory). */
static int send_chunk(wk *w, chunk *c, bool eval)
{
    pend *p = c->p;
    if (!w->ac) /* connecting is fine: hiredis sends what was queued once the connect is done */
        return -ENOTCONN;
    int rc = sl_rscript_cmd_build(&w->cmd, c->alg, eval, p->b->reqs, p->idx + c->first, c->n,
                                  p->now, &w->r->ecfg, w->r->cfg.key_margin_ms);
    if (rc)
        return rc;
    c->eval = eval;
    if (redisAsyncCommandArgv(w->ac, chunk_reply, c, w->cmd.argc, w->cmd.argv, w->cmd.argvlen) !=
        REDIS_OK)
        return -ENOTCONN;
    if (w->inflight++ == 0)
        w->progress_ms = mono_ms();
    return 0;
}

static void chunk_failed(wk *w, chunk *c, const char *why)
{
    pend *p = c->p;
    for (uint32_t k = 0; k < c->n; k++)
        unavailable(w, p->b, p->idx[c->first + k], p->now, why);
}

static void chunk_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    chunk *c = priv;
    pend *p = c->p;
    wk *w = p->w;
    redisReply *rp = reply;
    (void)ac;
    if (w->inflight)
        w->inflight--;
    if (rp)
        w->progress_ms = mono_ms();
    sl_batch *b = p->b;
    if (!rp) {
        chunk_failed(w, c, err_unavailable);
    } else if (rp->type == REDIS_REPLY_ERROR) {
        if (!c->eval && strncmp(rp->str, "NOSCRIPT", 8) == 0) {
            cinc(&w->reloads);
            if (send_chunk(w, c, true) == 0)
                return; /* still in flight */
            chunk_failed(w, c, err_unavailable);
        } else {
            if (w->r->cfg.log && sl_log_budget_take(w->r->cfg.log, &w->log_budget, SL_LOG_WARN))
                sl_log_write(w->r->cfg.log, SL_LOG_WARN, "redis store: %.200s", rp->str);
            if (!strncmp(rp->str, "READONLY", 8) || !strncmp(rp->str, "LOADING", 7) ||
                !strncmp(rp->str, "MASTERDOWN", 10)) {
                w->wrong_server = true; /* not from inside hiredis's callback: tick() drops it */
                chunk_failed(w, c, err_unavailable);
            } else {
                chunk_failed(w, c, err_failed);
            }
        }
    } else if (rp->type != REDIS_REPLY_ARRAY ||
               rp->elements != (size_t)c->n * SL_RSCRIPT_ANSWER) {
        chunk_failed(w, c, err_failed);
    } else {
        for (uint32_t k = 0; k < c->n; k++) {
            size_t i = p->idx[c->first + k];
            long long v[SL_RSCRIPT_ANSWER];
            bool ok = true;
            redisReply **e = rp->element + k * SL_RSCRIPT_ANSWER;
            uint64_t lease = 0;
            for (size_t j = 0; ok && j < SL_RSCRIPT_ANSWER; j++) /* strings: int64 past 2^53 */
                ok = c->alg == SL_CONCURRENCY && j == 5 ? reply_lease(e[j], &lease, &v[j])
                                                        : reply_int(e[j], &v[j]);
            const sl_request *q = &b->reqs[i];
            int64_t t = q->created_at != 0 ? q->created_at : p->now;
            if (!ok || sl_rscript_answer(v, SL_RSCRIPT_ANSWER, t, &w->r->ecfg, &b->resps[i]))
                unavailable(w, b, i, p->now, err_failed);
            else if (!b->resps[i].error)
                b->resps[i].lease_id = lease;
        }
    }
    pend_release(p);
}

static void flush_chunk(wk *w, pend *p, chunk *c)
{
    if (c->n == 0)
        return;
    int rc = send_chunk(w, c, false);
    if (rc == 0) {
        p->out++;
        for (uint32_t k = 0; k < c->n; k++)
            cinc(&w->items);
    } else {
        chunk_failed(w, c, rc == -ENOMEM ? err_nomem : err_unavailable);
    }
}

void sl_rstore_submit(sl_rstore *r, int worker, sl_batch *b, int64_t now_ms,
                      sl_rstore_done_cb done, void *ud)
{
    wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
    size_t n = b->n;
    pend *p = malloc(sizeof *p + n * (sizeof(uint32_t) + sizeof(chunk)) + sizeof(chunk));
    if (!p) {
        for (size_t i = 0; i < n; i++)
            if (!b->answered[i]) {
                memset(&b->resps[i], 0, sizeof b->resps[i]);
                b->resps[i].error = err_nomem;
            }
        done(ud, b);
        return;
    }
    p->w = w;
    p->b = b;
    p->now = now_ms;
    p->done = done;
    p->ud = ud;
    p->out = 1;
    p->ch = (chunk *)(p + 1);
    p->idx = (uint32_t *)(p->ch + n + 1);
    /* consecutive items of one algorithm share a script call (up to --redis-batch-items), so a
     * key repeated across algorithms is still decided in request order */
    size_t nch = 0, nidx = 0;
    chunk *c = &p->ch[0];
    *c = (chunk){.p = p, .first = 0, .n = 0, .alg = -1};
    for (size_t i = 0; i < n; i++) {
        if (b->answered[i])
            continue;
        const sl_request *q = &b->reqs[i];
        const char *err = sl_request_validate(q, &r->ecfg);
        if (!err && q->created_at != 0)
            err = sl_request_check_time(q, &r->ecfg, now_ms);
        sl_rscript_args a;
        if (!err)
            err = sl_rscript_args_of(&a, q, now_ms, &r->ecfg, r->cfg.key_margin_ms);
        if (err) {
            memset(&b->resps[i], 0, sizeof b->resps[i]);
            b->resps[i].error = err;
            continue;
        }
        if (c->n && (c->alg != q->algorithm || c->n >= r->batch_items)) {
            flush_chunk(w, p, c);
            c = &p->ch[++nch];
            *c = (chunk){.p = p, .first = (uint32_t)nidx, .n = 0};
        }
        c->alg = q->algorithm;
        p->idx[nidx++] = (uint32_t)i;
        c->n++;
    }
    flush_chunk(w, p, c);
    pend_release(p);
}

/* ---- the connection ------------------------------------------------------------------------- */

static void schedule_retry(wk *w)
{
    w->next_try_ms = mono_ms() + w->backoff_ms;
    w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->backoff_ms * 2;
    if (w->r->n_addrs > 1)
        w->addr = (w->addr + 1) % w->r->n_addrs;
}

static void lost(wk *w, const char *why)
{
    w->ac = NULL;
    w->inflight = 0;
    if (w->connected)
        cinc(&w->disconnects);
    w->connected = false;
    sl_rstore *r = w->r;
    if (!w->stopping) {
        if (r->cfg.log && sl_log_budget_take(r->cfg.log, &w->conn_budget, SL_LOG_WARN))
            sl_log_write(r->cfg.log, SL_LOG_WARN, "redis store: %s:%d: %s (worker %d)",
                         r->addrs[w->addr].host, r->addrs[w->addr].port, why, w->idx);
        schedule_retry(w);
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    wk *w = ac->data;
    if (!w || w->ac != ac)
        return;
    if (status != REDIS_OK) {
        lost(w, ac->errstr[0] ? ac->errstr : "connect failed"); /* hiredis frees ac */
        return;
    }
    w->connected = true;
    w->backoff_ms = BACKOFF_MIN_MS;
    w->progress_ms = mono_ms();
    cinc(&w->connects);
    if (w->r->cfg.log)
        sl_log_info(w->r->cfg.log, "redis store: connected to %s:%d (worker %d)",
                    w->r->addrs[w->addr].host, w->r->addrs[w->addr].port, w->idx);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    wk *w = ac->data;
    if (!w || w->ac != ac)
        return;
    (void)status;
    lost(w, ac->errstr[0] ? ac->errstr : "connection closed");
}

static void on_auth(redisAsyncContext *ac, void *reply, void *priv)
{
    wk *w = priv;
    redisReply *rp = reply;
    if (w->inflight)
        w->inflight--;
    if (rp && rp->type == REDIS_REPLY_ERROR && w->r->cfg.log)
        sl_log_error(w->r->cfg.log, "redis store: AUTH: %.200s", rp->str);
    (void)ac;
}

static void try_connect(wk *w)
{
    sl_rstore *r = w->r;
    const raddr *a = &r->addrs[w->addr];
    redisAsyncContext *ac = redisAsyncConnect(a->host, a->port);
    if (!ac) {
        schedule_retry(w);
        return;
    }
    if (ac->err || redisLibuvAttach(ac, w->loop) != REDIS_OK) {
        if (r->cfg.log && sl_log_budget_take(r->cfg.log, &w->conn_budget, SL_LOG_WARN))
            sl_log_write(r->cfg.log, SL_LOG_WARN, "redis store: %s:%d: %s", a->host, a->port,
                         ac->err ? ac->errstr : "cannot watch the socket");
        redisAsyncFree(ac);
        schedule_retry(w);
        return;
    }
    ac->data = w;
    w->ac = ac;
    w->connected = false;
    w->wrong_server = false;
    w->conn_start_ms = mono_ms();
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    /* queued before the connect completes; they go out first */
    if (r->password) {
        const char *argv[3] = {"AUTH", r->user ? r->user : r->password, r->password};
        size_t len[3] = {4, strlen(argv[1]), strlen(r->password)};
        if (redisAsyncCommandArgv(ac, on_auth, w, r->user ? 3 : 2, argv, len) == REDIS_OK)
            w->inflight++;
    }
    for (int alg = 0; alg < SL_ALGORITHM_COUNT; alg++) {
        const sl_rscript *s = sl_rscript_of(alg);
        if (!s)
            continue;
        const char *argv[3] = {"SCRIPT", "LOAD", s->src};
        size_t len[3] = {6, 4, s->len};
        if (redisAsyncCommandArgv(ac, on_auth, w, 3, argv, len) == REDIS_OK)
            w->inflight++;
    }
    if (w->inflight)
        w->progress_ms = mono_ms();
}

/* Free the worker's context from outside hiredis: commands in flight are answered without a
 * reply, and no callback of this context sees it as the worker's any more. */
static void drop(wk *w, const char *why)
{
    redisAsyncContext *ac = w->ac;
    lost(w, why);
    if (ac) {
        ac->data = NULL;  /* on_connect/on_disconnect: not ours any more */
        redisAsyncFree(ac);
    }
}

static void tick(uv_timer_t *t)
{
    wk *w = t->data;
    int64_t now = mono_ms();
    int64_t limit = w->r->cfg.timeout_ms;
    if (!w->ac) {
        if (now >= w->next_try_ms)
            try_connect(w);
        return;
    }
    if (!w->connected && now - w->conn_start_ms > limit)
        drop(w, "connect timed out");
    else if (w->connected && w->inflight && now - w->progress_ms > limit)
        drop(w, "no answer within --redis-timeout");
    else if (w->wrong_server)
        drop(w, "this server cannot take writes (a replica, or loading): trying the next address");
}

void sl_rstore_worker_start(sl_rstore *r, int worker, uv_loop_t *loop)
{
    if (worker < 0 || worker >= r->nworkers)
        return;
    wk *w = &r->wk[worker];
    w->loop = loop;
    w->started = true;
    w->stopping = false;
    w->backoff_ms = BACKOFF_MIN_MS;
    w->addr = 0; /* the list is an order of preference (failover), not a set of equals */
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    int64_t every = r->cfg.timeout_ms / 4;
    every = every < TICK_MIN_MS ? TICK_MIN_MS : every > TICK_MAX_MS ? TICK_MAX_MS : every;
    uv_timer_start(&w->timer, tick, (uint64_t)every, (uint64_t)every);
    try_connect(w);
}

void sl_rstore_worker_stop(sl_rstore *r, int worker)
{
    if (worker < 0 || worker >= r->nworkers)
        return;
    wk *w = &r->wk[worker];
    if (!w->started)
        return;
    w->stopping = true;
    if (w->ac)
        drop(w, "worker stopping");
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, NULL);
    w->started = false;
}

/* ---- construction, stats ------------------------------------------------------------------- */

static int parse_addr(const char *s, raddr *a)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return -EINVAL;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']')
        h++, hl -= 2;
    if (hl == 0 || hl >= sizeof a->host)
        return -EINVAL;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535)
        return -EINVAL;
    memcpy(a->host, h, hl);
    a->host[hl] = '\0';
    a->port = (int)port;
    return 0;
}

static void collect(void *arg, sl_metrics_sink *sink, size_t off)
{
    sl_rstore *r = arg;
    uint64_t sum = 0;
    for (int i = 0; i < r->nworkers; i++)
        sum += atomic_load_explicit((_Atomic uint64_t *)((char *)&r->wk[i] + off),
                                    memory_order_relaxed);
    sl_metrics_sink_emit(sink, NULL, 0, (double)sum);
}

#define COLLECTOR(field)                                                                           \
    static void collect_##field(void *arg, sl_metrics_sink *sink)                                  \
    {                                                                                              \
        collect(arg, sink, offsetof(wk, field));                                                   \
    }
COLLECTOR(items)
COLLECTOR(errors)
COLLECTOR(fail_open)
COLLECTOR(reloads)
COLLECTOR(disconnects)

static void register_metrics(sl_rstore *r, sl_metrics *m)
{
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_items_total",
                         "Requests sent to the Redis store", NULL, collect_items, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_errors_total",
                         "Requests answered with an error because Redis failed them", NULL,
                         collect_errors, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_fail_open_total",
                         "Requests decided locally because Redis failed them (--fail-open)", NULL,
                         collect_fail_open, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_script_reloads_total",
                         "Scripts sent again after a NOSCRIPT answer", NULL, collect_reloads, r);
    sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_redis_disconnects_total",
                         "Connections to Redis lost or closed for a timeout", NULL,
                         collect_disconnects, r);
}

int sl_rstore_new(const sl_rstore_config *cfg, sl_rstore **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cfg || cfg->n_addrs == 0 || cfg->workers < 1) {
        snprintf(err, errlen, "redis store: no address (--redis-addrs)");
        return -EINVAL;
    }
    sl_rstore *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->cfg = *cfg;
    if (r->cfg.timeout_ms <= 0)
        r->cfg.timeout_ms = DEFAULT_TIMEOUT_MS;
    if (r->cfg.key_margin_ms <= 0)
        r->cfg.key_margin_ms = DEFAULT_MARGIN_MS;
    if (cfg->engine_cfg)
        r->ecfg = *cfg->engine_cfg;
    else
        sl_engine_config_default(&r->ecfg);
    r->batch_items = cfg->batch_items > 0 ? (uint32_t)cfg->batch_items : DEFAULT_BATCH_ITEMS;
    r->nworkers = cfg->workers;
    r->addrs = calloc(cfg->n_addrs, sizeof *r->addrs);
    r->wk = calloc((size_t)cfg->workers, sizeof *r->wk);
    int rc = -ENOMEM;
    if (!r->addrs || !r->wk)
        goto fail;
    r->n_addrs = cfg->n_addrs;
    for (size_t i = 0; i < cfg->n_addrs; i++)
        if (parse_addr(cfg->addrs[i], &r->addrs[i])) {
            snprintf(err, errlen, "redis store: address '%s' is not host:port", cfg->addrs[i]);
            rc = -EINVAL;
            goto fail;
        }
    if (cfg->password_file && cfg->password_file[0]) {
        size_t len;
        rc = sl_file_read(cfg->password_file, PASSWORD_MAX, SL_FILE_REGULAR, &r->password, &len,
                          err, errlen);
        if (rc)
            goto fail;
        while (len && (r->password[len - 1] == '\n' || r->password[len - 1] == '\r'))
            r->password[--len] = '\0';
        if (cfg->user && cfg->user[0] && !(r->user = strdup(cfg->user))) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    r->cfg.user = NULL;
    r->cfg.password_file = NULL;
    r->cfg.addrs = NULL;
    for (int i = 0; i < r->nworkers; i++) {
        r->wk[i].r = r;
        r->wk[i].idx = i;
        r->wk[i].log_budget.per_second = 1;
        r->wk[i].conn_budget.per_second = 1;
    }
    if (cfg->metrics)
        register_metrics(r, cfg->metrics);
    *out = r;
    return 0;
fail:
    sl_rstore_free(r);
    return rc;
}

void sl_rstore_free(sl_rstore *r)
{
    if (!r)
        return;
    free(r->addrs);
    for (int i = 0; r->wk && i < r->nworkers; i++)
        sl_rscript_cmd_free(&r->wk[i].cmd);
    free(r->wk);
    free(r->user);
    if (r->password) {
        explicit_bzero(r->password, strlen(r->password));
        free(r->password);
    }
    free(r);
}

void sl_rstore_stats_get(sl_rstore *r, sl_rstore_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < r->nworkers; i++) {
        wk *w = &r->wk[i];
        out->items += atomic_load_explicit(&w->items, memory_order_relaxed);
        out->errors += atomic_load_explicit(&w->errors, memory_order_relaxed);
        out->fail_open += atomic_load_explicit(&w->fail_open, memory_order_relaxed);
        out->reloads += atomic_load_explicit(&w->reloads, memory_order_relaxed);
        out->connects += atomic_load_explicit(&w->connects, memory_order_relaxed);
        out->disconnects += atomic_load_explicit(&w->disconnects, memory_order_relaxed);
    }
}

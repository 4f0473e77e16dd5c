/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store's per-request path (see rstore.h; its state in rstore_int.h): a call's items
 * checked and cut into script calls (chunks) of up to --redis-batch-items items of one algorithm
 * (and, with --redis-cluster, one slot), each sent as one EVALSHA on its connection - the server's,
 * or its slot's master's - and the answers matched back by the callback's chunk record. Items
 * submitted on a worker during one turn of its loop share the worker's open chunk across calls
 * (sent by an idle handle before the loop polls again), so concurrent one-item calls cost Redis one
 * script run per turn, not one each; a key's items still go out in arrival order. The
 * scripts' numbers read into responses, NOSCRIPT answered by the same call as EVAL, MOVED / ASK
 * followed once, calls failed by a failover parked until a new topology gives their slot another
 * master (or their deadline passes), and what Redis could not decide answered with a per-item
 * error or, under --fail-open, by the local engine. The connections themselves (connect,
 * deadlines, reconnection, topology) are redis/rstorectl.c's.
 */
#include "redis/rstore.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "core/concurrency.h"
#include "redis/rscript.h"
#include "redis/rslots.h"
#include "redis/rstore_int.h"

static const char err_unavailable[] = "redis store unavailable";
static const char err_failed[] = "redis store: the command failed";
static const char err_nomem[] = "out of memory";

/* ---- items ---------------------------------------------------------------------------------- */

/* Most spare chunks a worker keeps for reuse (each holds --redis-batch-items entries). */
#define CHUNK_SPARE_MAX 16

static void pend_release(pend *p)
{
    if (--p->out == 0) {
        p->done(p->ud, p->b);
        free(p);
    }
}

static chunk *chunk_get(wk *w)
{
    chunk *c = w->spare;
    if (c) {
        w->spare = c->parked;
        w->n_spare--;
    } else {
        uint32_t cap = w->r->batch_items;
        c = malloc(sizeof *c + cap * (sizeof(centry) + sizeof(sl_rscript_item)));
        if (!c)
            return NULL;
        c->cap = cap;
        c->it = (sl_rscript_item *)(c->e + cap);
    }
    c->w = w;
    c->n = 0;
    c->alg = -1;
    c->slot = 0;
    c->eval = c->redirected = c->asking = false;
    c->failed_on = 0;
    c->deadline_ms = INT64_MAX;
    c->parked = NULL;
    return c;
}

/* c's items are answered: each call whose last item it held is done; c is kept or freed. */
static void chunk_done(wk *w, chunk *c)
{
    for (uint32_t k = 0; k < c->n; k++)
        pend_release(c->e[k].p);
    if (w->n_spare < CHUNK_SPARE_MAX) {
        c->parked = w->spare;
        w->spare = c;
        w->n_spare++;
    } else {
        free(c);
    }
}

void sl_rstorewk_free_spare(wk *w)
{
    while (w->spare) {
        chunk *c = w->spare;
        w->spare = c->parked;
        free(c);
    }
    w->n_spare = 0;
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

static void chunk_reply(sl_rconn *ac, void *reply, void *priv);

/* The connection a chunk goes to: the server's, or with --redis-cluster its slot's master's
 * (NULL: no master known for it, or no connection made to it yet). */
static conn *route(wk *w, const chunk *c)
{
    if (!w->r->cfg.cluster)
        return &w->main;
    if (!w->tbl || w->tbl->owner[c->slot] == SL_RSLOTS_NONE) {
        w->need_refresh = true;
        return NULL;
    }
    return w->node[w->tbl->owner[c->slot]];
}

/* Send one script call on cn (ASKING before it with `asking`). 0, or a negative errno (not sent:
 * no connection, no memory). */
static int send_chunk(wk *w, conn *cn, chunk *c, bool eval, bool asking)
{
    if (!cn || !cn->ac) /* connecting is fine: sl_rconn sends what was queued once connected */
        return -ENOTCONN;
    int rc = sl_rscript_cmd_build(&w->cmd, c->alg, eval, c->it, c->n, &w->r->ecfg,
                                  w->r->cfg.key_margin_ms);
    if (rc)
        return rc;
    c->eval = eval;
    c->asking = asking;
    if (asking) {
        const char *argv[1] = {"ASKING"};
        size_t len[1] = {6};
        if ((rc = sl_rconn_command(cn->ac, sl_rstorewk_on_aux, NULL, 1, argv, len)) != 0)
            return rc;
        cn->inflight++;
    }
    /* -ENOTCONN (the connection is going), -ENOBUFS (--redis-max-queued), -ENOMEM: only the
     * first is a topology matter (park); the others fail the items now */
    if ((rc = sl_rconn_command(cn->ac, chunk_reply, c, w->cmd.argc, w->cmd.argv,
                               w->cmd.argvlen)) != 0)
        return rc;
    if (cn->inflight++ == 0)
        cn->progress_ms = mono_ms();
    return 0;
}

/* Every item of c answered with `why` (or decided locally under --fail-open), and c done. */
static void chunk_failed(wk *w, chunk *c, const char *why)
{
    for (uint32_t k = 0; k < c->n; k++)
        unavailable(w, c->e[k].p->b, c->e[k].i, c->e[k].p->now, why);
    chunk_done(w, c);
}

/* A MOVED or ASK answer to c from cn: the table learns it, and c goes to the node named, once.
 * true when c is in flight again. */
static bool redirect(wk *w, conn *cn, chunk *c, const char *err, size_t len)
{
    sl_rslots_redirect rd;
    if (!w->r->cfg.cluster || !w->tbl || c->redirected || !cn ||
        sl_rslots_redirect_parse(err, len, &rd) == SL_RSLOTS_OTHER)
        return false;
    cinc(&w->redirects);
    bool refresh;
    int idx = sl_rslots_redirect_apply(w->tbl, &rd, cn->a.host, mono_ms(), &refresh);
    if (refresh)
        w->need_refresh = true;
    if (idx < 0)
        return false;
    if (!w->node[idx]) {
        const sl_rslots_node *n = &w->tbl->node[idx];
        if (!(w->node[idx] = sl_rstorewk_conn_new(w, n->host, n->port)))
            return false;
    }
    c->redirected = true;
    return send_chunk(w, w->node[idx], c, c->eval, rd.kind == SL_RSLOTS_ASK) == 0;
}

/* --redis-cluster: c failed for the topology's sake (its master lost or timed out, CLUSTERDOWN,
 * TRYAGAIN, READONLY, no master known for its slot): keep it until a topology read later gives
 * its slot another master, and send it there once (sl_rstorewk_sweep_parked), or fail it at its
 * calls' earliest deadline. true when parked (its items still counted in their calls' out). */
static bool park(wk *w, conn *from, chunk *c)
{
    if (!w->r->cfg.cluster || c->redirected || w->stopping || !w->started ||
        mono_ms() >= c->deadline_ms)
        return false;
    c->failed_on = from ? from->id : 0;
    c->parked = w->parked;
    w->parked = c;
    w->need_refresh = true;
    return true;
}

/* The parked calls: past their deadline, failed; with a new topology (`fresh`), those whose
 * slot has another master now (or whose old one is unknown) sent to it, once. */
void sl_rstorewk_sweep_parked(wk *w, bool fresh, bool all)
{
    chunk *list = w->parked;
    w->parked = NULL;
    int64_t now = mono_ms();
    while (list) {
        chunk *c = list;
        list = c->parked;
        conn *to = fresh ? route(w, c) : NULL;
        if (all || now >= c->deadline_ms) {
            chunk_failed(w, c, err_unavailable);
        } else if (to && (c->failed_on == 0 || to->id != c->failed_on)) {
            c->redirected = true;
            if (send_chunk(w, to, c, c->eval, false))
                chunk_failed(w, c, err_unavailable);
        } else {
            c->parked = w->parked;
            w->parked = c;
        }
    }
}

static void chunk_reply(sl_rconn *ac, void *reply, void *priv)
{
    chunk *c = priv;
    wk *w = c->w;
    conn *cn = sl_rconn_data(ac); /* NULL: the connection is being freed by sluice */
    redisReply *rp = reply;
    if (cn && cn->inflight)
        cn->inflight--;
    if (cn && rp)
        cn->progress_ms = mono_ms();
    if (!rp) {
        if (park(w, cn, c))
            return; /* for the next topology (the script may have run: then hits count twice) */
        chunk_failed(w, c, err_unavailable);
    } else if (rp->type == REDIS_REPLY_ERROR) {
        if (!c->eval && strncmp(rp->str, "NOSCRIPT", 8) == 0) {
            cinc(&w->reloads);
            if (send_chunk(w, cn, c, true, c->asking) == 0)
                return; /* still in flight (after ASKING again if it was sent after an ASK) */
            chunk_failed(w, c, err_unavailable);
        } else if (redirect(w, cn, c, rp->str, rp->len)) {
            return; /* still in flight, on the node named */
        } else {
            if (w->r->cfg.log && sl_log_budget_take(w->r->cfg.log, &w->log_budget, SL_LOG_WARN))
                sl_log_write(w->r->cfg.log, SL_LOG_WARN, "redis store: %.200s", rp->str);
            bool cluster_err = !strncmp(rp->str, "CLUSTERDOWN", 11) ||
                               !strncmp(rp->str, "TRYAGAIN", 8) || !strncmp(rp->str, "MOVED", 5) ||
                               !strncmp(rp->str, "ASK", 3);
            if (!strncmp(rp->str, "READONLY", 8) || !strncmp(rp->str, "LOADING", 7) ||
                !strncmp(rp->str, "MASTERDOWN", 10)) {
                if (park(w, cn, c)) /* cluster: a master turned replica, a failover */
                    return;
                if (cn && !w->r->cfg.cluster)
                    cn->wrong_server = true; /* not from inside the reply's callback: tick() */
                chunk_failed(w, c, err_unavailable);
            } else if (cluster_err && w->r->cfg.cluster) {
                /* the master is alive and stays the slot's: again after the next topology read */
                if (park(w, NULL, c))
                    return;
                w->need_refresh = true;
                chunk_failed(w, c, err_unavailable);
            } else {
                chunk_failed(w, c, err_failed);
            }
        }
    } else if (rp->type != REDIS_REPLY_STRING ||
               rp->len != (size_t)c->n * sl_rscript_answer_size(c->alg)) {
        chunk_failed(w, c, err_failed);
    } else { /* one string: the items' binary records (rscript.h) */
        for (uint32_t k = 0; k < c->n; k++) {
            pend *p = c->e[k].p;
            sl_batch *b = p->b;
            size_t i = c->e[k].i;
            const sl_request *q = &b->reqs[i];
            int64_t t = q->created_at != 0 ? q->created_at : p->now;
            if (sl_rscript_answer_read(c->alg, rp->str, rp->len, k, t, &w->r->ecfg,
                                       &b->resps[i]))
                unavailable(w, b, i, p->now, err_failed);
            else
                sl_overcache_learn(&w->over, q, p->now, &b->resps[i]);
        }
        chunk_done(w, c);
    }
}

/* Send the worker's open chunk (or park it, or fail its items). */
static void flush_open(wk *w)
{
    chunk *c = w->open;
    if (!c)
        return;
    w->open = NULL;
    conn *cn = route(w, c);
    int rc = send_chunk(w, cn, c, false, false);
    if (rc == 0 || (rc == -ENOTCONN && park(w, cn, c))) {
        for (uint32_t k = 0; k < c->n; k++)
            cinc(&w->items);
    } else {
        chunk_failed(w, c, rc == -ENOMEM ? err_nomem : err_unavailable);
    }
}

static void on_flush(uv_idle_t *h)
{
    wk *w = h->data;
    uv_idle_stop(h);
    flush_open(w);
}

void sl_rstorewk_open_start(wk *w)
{
    uv_idle_init(w->loop, &w->flush);
    w->flush.data = w;
}

void sl_rstorewk_open_stop(wk *w)
{
    chunk *c = w->open;
    w->open = NULL;
    if (c)
        chunk_failed(w, c, err_unavailable);
    uv_idle_stop(&w->flush);
    uv_close((uv_handle_t *)&w->flush, NULL);
}

/* The slot of req's key (--redis-cluster). */
static uint16_t slot_of(const sl_request *q)
{
    char key[SL_RSCRIPT_KEY_MAX];
    size_t n = sl_rscript_key(key, q);
    return (uint16_t)sl_rslots_key_slot(key, n);
}

void sl_rstore_submit(sl_rstore *r, int worker, sl_batch *b, int64_t now_ms,
                      sl_batch_done_cb done, void *ud)
{
    wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
    size_t n = b->n;
    pend *p = malloc(sizeof *p);
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
    p->deadline_ms = r->cfg.cluster ? mono_ms() + r->cfg.timeout_ms : 0;
    /* consecutive items of one algorithm (and slot, in a cluster) share a script call (up to
     * --redis-batch-items), with the items submitted before them in this turn of the loop, so a
     * key repeated across algorithms or calls is still decided in arrival order: a key's calls
     * all go to its slot's connection, in order */
    const bool cluster = r->cfg.cluster;
    for (size_t i = 0; i < n; i++) {
        if (b->answered[i])
            continue;
        const sl_request *q = &b->reqs[i];
        const char *err = sl_request_validate(q, &r->ecfg);
        if (!err && q->created_at != 0)
            err = sl_request_check_time(q, &r->ecfg, now_ms);
        if (!err) /* the check only: the arguments are written when the call is built */
            err = sl_rscript_args_of(NULL, q, now_ms, &r->ecfg, r->cfg.key_margin_ms, 0);
        if (!err && sl_overcache_answer(&w->over, q, now_ms, &b->resps[i])) {
            cinc(&w->over_hits); /* known over its limit: no round trip */
            continue;
        }
        chunk *c = w->open;
        uint16_t slot = cluster && !err ? slot_of(q) : 0;
        while (!err && c && (c->alg != q->algorithm || c->n >= c->cap || c->slot != slot)) {
            flush_open(w); /* a failure answers calls whose done may submit: a new open chunk */
            c = w->open;
        }
        if (!err && !c) {
            if ((c = w->open = chunk_get(w))) {
                c->alg = q->algorithm;
                c->slot = slot;
            } else {
                err = err_nomem;
            }
        }
        if (err) {
            memset(&b->resps[i], 0, sizeof b->resps[i]);
            b->resps[i].error = err;
            continue;
        }
        c->e[c->n] = (centry){.p = p, .i = (uint32_t)i};
        c->it[c->n] = (sl_rscript_item){.req = q, .now = now_ms, .lease = sl_rscript_new_lease(q)};
        c->n++;
        p->out++;
        if (p->deadline_ms < c->deadline_ms)
            c->deadline_ms = p->deadline_ms;
    }
    if (w->open) {
        if (w->started && !w->stopping)
            uv_idle_start(&w->flush, on_flush); /* before the loop next polls */
        else
            flush_open(w);
    }
    pend_release(p);
}

/* ---- the store as a decider (decide/decider.h) -------------------------------------------- */

/* Adapters from the decider's untyped object to the store: each is a tail call. */
static void dec_submit(void *self, int worker, sl_batch *b, int64_t now_ms, sl_batch_done_cb done,
                       void *ud)
{
    sl_rstore_submit(self, worker, b, now_ms, done, ud);
}

static void dec_worker_start(void *self, int worker, struct uv_loop_s *loop)
{
    sl_rstore_worker_start(self, worker, loop);
}

static void dec_worker_stop(void *self, int worker)
{
    sl_rstore_worker_stop(self, worker);
}

static const sl_decider_ops rstore_ops = {.name = "redis", .submit = dec_submit,
                                          .worker_start = dec_worker_start,
                                          .worker_stop = dec_worker_stop};

sl_decider sl_rstore_decider(sl_rstore *r)
{
    return (sl_decider){.ops = &rstore_ops, .self = r};
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router, forwarding half (see router.h and docs/cluster.md): the per-request path. The control
 * half - construction, publishing peer lists, worker start and stop, peer identity, hand-off
 * glue, health and counters - is routerctl.c; the state both share is router_int.h.
 *
 * Standalone (discovery none): every item is decided by the local engine, in request order, with
 * the engine's batch entry point when no item was pre-answered. Nothing else runs.
 *
 * Cluster. A "view" (cluster/view.c) is one peer list turned into a picker, shared read-only by
 * the workers and reference-counted; a new list makes a new view, published under a mutex and
 * posted to every worker loop, which swaps it in on its own thread - so each worker routes a whole
 * batch with one consistent view and no lock. Per worker and per remote peer there is a
 * persistent HTTP/2 connection (peer.c) and a batcher; one timerfd per worker (libuv timers have
 * millisecond resolution, --batch-wait is 500 us) fires when the earliest batch is due.
 *
 * An item's journey:
 *   owner == self                 engine now; GLOBAL: noted for broadcast
 *   GLOBAL, owner elsewhere       answered from the local copy now (global.c), hits queued
                                   for the GLOBAL sync (globalsync.c)
 *   otherwise                     queued on the owner's batcher -> one GetPeerRateLimits call
 *                                 for up to batch-limit items -> answers copied back, "owner" set
 * A call that fails retries its items on the new owner if the view changed since they were sent
 * (at most MAX_ATTEMPTS times); otherwise each item gets an error - or, with --fail-open, a local
 * decision marked in its metadata. Deadlines are --batch-timeout: nothing waits forever.
 *
 * A submit's record ("pend") counts the items still out; the last answer runs `done`.
 *
 * The GLOBAL sync's sender lives in globalsync.c, one per worker; it asks this file for owners
 * and peers (the view and connections stay here) and reports its calls' outcomes here, so peer
 * health, the peer-call metrics and error counts cover every call.
 */
#include "cluster/router_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "cluster/picker.h"
#include "core/store.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define MAX_ATTEMPTS 3
#define META_OWNER "owner"
#define META_FAIL_OPEN "fail_open"

/* ---- small helpers -------------------------------------------------------------------------- */

static void set_owner(sl_batch *b, size_t i, const char *addr, bool copy)
{
    if (copy)
        sl_batch_meta_set(b, &b->resp_meta[i], META_OWNER, addr);
    else
        sl_batch_meta_add_ref(b, &b->resp_meta[i], META_OWNER, addr);
}

static pend *pend_get(wk *w, sl_batch *b, sl_batch_done_cb done, void *ud)
{
    pend *p = w->free_pends;
    if (p) {
        w->free_pends = p->next;
        w->nfree_pends--;
    } else if (!(p = malloc(sizeof *p))) {
        return NULL;
    }
    p->next = NULL;
    p->w = w;
    p->b = b;
    p->done = done;
    p->ud = ud;
    p->outstanding = 1; /* the submit itself, until it has routed every item */
    return p;
}

static void pend_item_done(pend *p)
{
    if (--p->outstanding)
        return;
    wk *w = p->w;
    sl_batch_done_cb done = p->done;
    void *ud = p->ud;
    sl_batch *b = p->b;
    if (w->nfree_pends < 256) {
        p->next = w->free_pends;
        w->free_pends = p;
        w->nfree_pends++;
    } else {
        free(p);
    }
    done(ud, b);
}

static const char *fmt_error(sl_batch *b, size_t i, const char *addr, const char *why)
{
    const sl_request *q = &b->reqs[i];
    char buf[512];
    snprintf(buf, sizeof buf, "while fetching rate limit '%.*s_%.*s' from peer %s: %s",
             (int)(q->name_len > 128 ? 128 : q->name_len), q->name,
             (int)(q->unique_key_len > 128 ? 128 : q->unique_key_len), q->unique_key, addr, why);
    const char *s = sl_batch_strndup(b, buf, strlen(buf));
    return s ? s : "error while fetching rate limit from peer";
}

static void note_peer(sl_view *v, size_t vidx, uint64_t version, int err)
{
    if (!v || v->version != version || vidx >= v->n)
        return;
    atomic_store(&v->health[vidx].err, err);
    if (err)
        atomic_store(&v->health[vidx].failed_at, sl_wall_ms());
}

/* ---- batch timer (timerfd: libuv timers tick in milliseconds) -------------------------------- */

static void flush_peer(wk *w, wpeer *wp);

static void arm_batch_timer(wk *w, int64_t deadline_ns)
{
    if (w->tfd < 0 || deadline_ns >= w->tfd_armed)
        return;
    w->tfd_armed = deadline_ns;
    if (deadline_ns < 1)
        deadline_ns = 1; /* an absolute time of zero would disarm it */
    struct itimerspec its = {0};
    its.it_value.tv_sec = deadline_ns / 1000000000;
    its.it_value.tv_nsec = deadline_ns % 1000000000;
    timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void sl_routerwk_on_timer(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    wk *w = h->data;
    uint64_t ticks;
    while (read(w->tfd, &ticks, sizeof ticks) > 0) {
    }
    w->tfd_armed = INT64_MAX;
    int64_t now = sl_mono_ns();
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < w->npeers; i++) {
        wpeer *wp = w->peers[i];
        if (!wp)
            continue;
        if (sl_batcher_due(&wp->q, now))
            flush_peer(w, wp);
        int64_t d = sl_batcher_deadline(&wp->q);
        if (d < next)
            next = d;
    }
    if (next != INT64_MAX)
        arm_batch_timer(w, next);
}

/* ---- routing -------------------------------------------------------------------------------- */

static void decide_here(wk *w, sl_batch *b, size_t i, uint64_t h, int64_t now)
{
    sl_router *r = w->r;
    sl_request *q = &b->reqs[i];
    sl_engine_decide(r->engine, q, &b->resps[i], now);
    set_owner(b, i, r->advertise, false);
    cinc(&w->c_local, 1);
    if ((q->behavior & SL_GLOBAL) && q->hits != 0 && !b->resps[i].error && w->v && w->v->n > 1)
        sl_globalsync_decided(w->gsync, h, q, now);
}

static void route(wk *w, pend *p, size_t i, uint32_t attempts, int64_t now, int64_t mono)
{
    sl_router *r = w->r;
    sl_view *v = w->v;
    sl_batch *b = p->b;
    sl_request *q = &b->reqs[i];
    uint64_t h = sl_picker_key_hash(sl_engine_key_ids(r->engine), q->name, q->name_len,
                                    q->unique_key, q->unique_key_len);
    size_t o = sl_picker_owner(v->picker, h);
    if (o == SIZE_MAX || (long)o == v->self || !w->peers[o]) {
        decide_here(w, b, i, h, now);
        return;
    }
    const char *owner_addr = sl_picker_addr(v->picker, o);
    if (q->behavior & SL_GLOBAL) {
        const char *err = sl_request_validate(q, r->has_ecfg ? &r->ecfg : NULL);
        if (err) {
            memset(&b->resps[i], 0, sizeof b->resps[i]);
            b->resps[i].error = err;
            return;
        }
        int rc = sl_globalsync_hit(w->gsync, h, q, now, &b->resps[i]);
        if (rc == 0 || rc == -ENOMEM) {
            set_owner(b, i, owner_addr, true);
            return;
        }
        /* -ENOSPC: the table is full; forward it like any other request */
    }
    if (q->created_at == 0)
        q->created_at = now; /* the owner decides at the time the request arrived here */
    wpeer *wp = w->peers[o];
    sl_batcher_item it = {.owner = p, .idx = (uint32_t)i, .attempts = attempts};
    int rc = sl_batcher_add(&wp->q, &it, mono);
    if (rc < 0) {
        memset(&b->resps[i], 0, sizeof b->resps[i]);
        b->resps[i].error = "out of memory";
        return;
    }
    p->outstanding++;
    if (rc == 1) {
        flush_peer(w, wp);
    } else if (q->behavior & SL_NO_BATCHING) {
        if (!wp->urgent) {
            wp->urgent = true;
            wp->next_urgent = w->urgent;
            w->urgent = wp;
        }
    } else {
        arm_batch_timer(w, sl_batcher_deadline(&wp->q));
    }
}

static void flush_urgent(wk *w)
{
    while (w->urgent) {
        wpeer *wp = w->urgent;
        w->urgent = wp->next_urgent;
        wp->urgent = false;
        wp->next_urgent = NULL;
        flush_peer(w, wp);
    }
}

/* Item failed at its peer (or could not be sent): retry, fail open, or answer the error. */
static void item_failed(wk *w, const sl_batcher_item *it, uint64_t version, const char *addr,
                        const char *why)
{
    sl_router *r = w->r;
    pend *p = it->owner;
    sl_batch *b = p->b;
    size_t i = it->idx;
    int64_t now = sl_wall_ms();
    if (!w->stopping && w->v && w->v->version != version && it->attempts + 1 < MAX_ATTEMPTS) {
        /* the owner may have moved: route it again with the current list */
        cinc(&w->c_retries, 1);
        sl_metrics_counter_inc(r->pm.retries);
        route(w, p, i, it->attempts + 1, now, sl_mono_ns());
    } else if (r->cfg.fail_open && !w->stopping) {
        sl_request *q = &b->reqs[i];
        sl_engine_decide(r->engine, q, &b->resps[i], now);
        set_owner(b, i, addr, true);
        sl_batch_meta_set(b, &b->resp_meta[i], META_FAIL_OPEN, why);
        cinc(&w->c_fail_open, 1);
        sl_metrics_counter_inc(r->pm.fail_open);
    } else {
        memset(&b->resps[i], 0, sizeof b->resps[i]);
        b->resps[i].error = fmt_error(b, i, addr, why);
    }
    pend_item_done(p);
}

static void copy_answer(wk *w, const sl_batcher_item *it, size_t k, const char *addr,
                        int64_t now)
{
    pend *p = it->owner;
    sl_batch *b = p->b;
    size_t i = it->idx;
    const sl_response *src = &w->scratch.resps[k];
    sl_response *dst = &b->resps[i];
    *dst = *src;
    if (src->error) {
        dst->error = sl_batch_strndup(b, src->error, strlen(src->error));
        if (!dst->error)
            dst->error = "out of memory";
    } else if (dst->status == SL_OVER_LIMIT && dst->reset_time > now) {
        /* PeersV1 carries no retry_after: the reset time is the safe answer */
        dst->retry_after = dst->reset_time - now;
    }
    const sl_meta *m = &w->scratch.resp_meta[k];
    for (uint32_t j = 0; j < m->n; j++)
        sl_batch_meta_set(b, &b->resp_meta[i], m->kv[j].key, m->kv[j].val);
    set_owner(b, i, addr, true);
    pend_item_done(p);
}

static void observe_call(sl_router *r, int kind, bool ok, int64_t t0)
{
    sl_metrics_counter_inc(ok ? r->pm.calls_ok[kind] : r->pm.calls_err[kind]);
    sl_metrics_histogram_observe(r->pm.call_seconds, sl_mono_ns() - t0);
}

static void on_forward_done(void *ud, const sl_peer_result *res)
{
    pcall *c = ud;
    wk *w = c->w;
    sl_router *r = w->r;
    wpeer *wp = c->wp;
    int64_t now = sl_wall_ms();
    if (res->err == 0 && res->grpc_status == SL_GRPC_OK) {
        sl_grpc_status st;
        sl_batch_reset(&w->scratch);
        int rc = sl_batch_alloc_items(&w->scratch, c->n);
        if (!rc)
            rc = sl_peerwire_decode_resp(r->cfg.max_msg, res->msg, res->len, &w->scratch, NULL,
                                            c->n, &st);
        if (rc == 0) {
            observe_call(r, SL_PEERMETRICS_FORWARD, true, c->t0);
            note_peer(w->v, c->vidx, c->version, 0);
            for (size_t k = 0; k < c->n; k++)
                copy_answer(w, &c->items[k], k, wp->addr, now);
        } else {
            observe_call(r, SL_PEERMETRICS_FORWARD, false, c->t0);
            cinc(&w->c_errors, 1);
            note_peer(w->v, c->vidx, c->version, -EPROTO);
            const char *why = rc == -ENOMEM ? "out of memory" : "bad answer from peer";
            for (size_t k = 0; k < c->n; k++) {
                sl_batcher_item it = c->items[k];
                it.attempts = MAX_ATTEMPTS; /* the peer answered: do not send it again */
                item_failed(w, &it, c->version, wp->addr, why);
            }
        }
    } else {
        observe_call(r, SL_PEERMETRICS_FORWARD, false, c->t0);
        cinc(&w->c_errors, 1);
        note_peer(w->v, c->vidx, c->version, res->err ? res->err : -EIO);
        char why[300];
        if (res->err)
            snprintf(why, sizeof why, "%s", res->message);
        else
            snprintf(why, sizeof why, "%s: %s", sl_grpc_code_name(res->grpc_status)
                     ? sl_grpc_code_name(res->grpc_status) : "UNKNOWN", res->message);
        for (size_t k = 0; k < c->n; k++)
            item_failed(w, &c->items[k], c->version, wp->addr, why);
    }
    free(c);
    flush_urgent(w);
}

static int ensure_idx(wk *w, size_t n)
{
    if (w->idxcap < n) {
        size_t *p = realloc(w->idx, n * sizeof *p);
        if (!p)
            return -ENOMEM;
        w->idx = p;
        w->idxcap = n;
    }
    return 0;
}

/* Encode items[0..n) (runs of one pend each) as one framed GetPeerRateLimitsReq. */
static int encode_forward(wk *w, const sl_batcher_item *items, size_t n, sl_buf *out)
{
    if (ensure_idx(w, n))
        return -ENOMEM;
    size_t mark;
    int rc = sl_grpc_frame_begin(out, &mark);
    /* a repeated field's entries may be written in several pieces: concatenating the encodings
     * of each pend's subset is one valid message */
    for (size_t s = 0; !rc && s < n;) {
        pend *p = items[s].owner;
        size_t e = s;
        while (e < n && items[e].owner == p) {
            w->idx[e - s] = items[e].idx;
            e++;
        }
        rc = sl_peerwire_encode_req(p->b, w->idx, e - s, out);
        s = e;
    }
    if (!rc)
        rc = sl_grpc_frame_end(out, mark);
    return rc;
}

static void send_forward(wk *w, wpeer *wp, const sl_batcher_item *items, size_t n)
{
    sl_router *r = w->r;
    pcall *c = malloc(sizeof *c + n * sizeof *items);
    if (!c) {
        for (size_t k = 0; k < n; k++) {
            sl_batcher_item it = items[k];
            it.attempts = MAX_ATTEMPTS;
            item_failed(w, &it, w->v->version, wp->addr, "out of memory");
        }
        return;
    }
    memset(c, 0, sizeof *c);
    c->w = w;
    c->wp = wp;
    c->version = w->v->version;
    c->vidx = wp->vidx;
    c->n = n;
    c->t0 = sl_mono_ns();
    memcpy(c->items, items, n * sizeof *items);
    sl_buf out;
    sl_buf_init(&out, 0);
    int rc = encode_forward(w, items, n, &out);
    const char *why = "out of memory";
    if (!rc) {
        rc = sl_peer_call(wp->conn, SL_PEERWIRE_PATH_GET_PEER_RATE_LIMITS, &out,
                          r->batch_timeout_ms, on_forward_done, c);
        if (rc)
            why = rc == -ECONNREFUSED ? "connection refused"
                  : rc == -ETIMEDOUT  ? "connect timed out"
                                      : "peer unreachable";
    }
    sl_buf_free(&out);
    cinc(&w->c_forwarded, n);
    sl_metrics_counter_add(r->pm.items, n);
    cinc(&w->c_calls, 1);
    if (rc) {
        observe_call(r, SL_PEERMETRICS_FORWARD, false, c->t0);
        cinc(&w->c_errors, 1);
        note_peer(w->v, c->vidx, c->version, rc);
        for (size_t k = 0; k < n; k++)
            item_failed(w, &c->items[k], c->version, wp->addr, why);
        free(c);
    }
}

static void flush_peer(wk *w, wpeer *wp)
{
    while (sl_batcher_len(&wp->q)) {
        size_t n = sl_batcher_take(&wp->q, w->take, w->r->batch_limit);
        send_forward(w, wp, w->take, n);
    }
}

/* ---- what the GLOBAL sync asks of the view --------------------------------------------------- */

static void gs_peer(const wk *w, const wpeer *wp, sl_globalsync_peer *out)
{
    out->conn = wp->conn;
    out->addr = wp->addr;
    out->vidx = wp->vidx;
    out->version = w->v->version;
}

static bool gs_has_view(void *ud)
{
    const wk *w = ud;
    return w->v != NULL;
}

static bool gs_owner(void *ud, uint64_t h, sl_globalsync_peer *out)
{
    const wk *w = ud;
    sl_view *v = w->v;
    size_t o = sl_picker_owner(v->picker, h);
    if (o == SIZE_MAX || (long)o == v->self || !w->peers[o])
        return false;
    gs_peer(w, w->peers[o], out);
    return true;
}

static size_t gs_slots(void *ud)
{
    const wk *w = ud;
    return w->npeers;
}

static bool gs_peer_at(void *ud, size_t i, sl_globalsync_peer *out)
{
    const wk *w = ud;
    if (i >= w->npeers || !w->peers[i])
        return false;
    gs_peer(w, w->peers[i], out);
    return true;
}

static void gs_call_done(void *ud, int method, const sl_globalsync_peer *p, int64_t t0, int err)
{
    wk *w = ud;
    int kind = method == SL_GLOBALSYNC_HITS ? SL_PEERMETRICS_GHITS : SL_PEERMETRICS_BCAST;
    observe_call(w->r, kind, err == 0, t0);
    note_peer(w->v, p->vidx, p->version, err);
    if (err)
        cinc(&w->c_errors, 1);
}

const sl_globalsync_ops sl_routerwk_gsync_ops = {
    .has_view = gs_has_view,
    .owner = gs_owner,
    .slots = gs_slots,
    .peer = gs_peer_at,
    .call_done = gs_call_done,
};

/* ---- views on workers ----------------------------------------------------------------------- */

static wpeer *wpeer_new(wk *w, const char *addr)
{
    sl_router *r = w->r;
    wpeer *wp = calloc(1, sizeof *wp);
    if (!wp)
        return NULL;
    wp->addr = strdup(addr);
    sl_peer_config pc = {
        .loop = w->loop,
        .addr = addr,
        .connect_timeout_ms = r->batch_timeout_ms < 1000 ? r->batch_timeout_ms : 1000,
        .max_msg = r->cfg.max_msg,
        .tls = r->cfg.peer_tls,
        .source_ip = r->source_ip,
        .sig = r->cfg.peer_sig,
        .sender = r->advertise,
    };
    if (!wp->addr || sl_peer_new(&pc, &wp->conn)) {
        free(wp->addr);
        free(wp);
        return NULL;
    }
    sl_batcher_init(&wp->q, r->batch_limit, r->cfg.batch_wait_ns);
    return wp;
}

/* Retire a peer that left the list: its queued items go to their new owners, its calls in
 * flight fail (and retry on the new view), then it is freed. */
void sl_routerwk_retire_peer(wk *w, wpeer *wp)
{
    sl_batcher_item it;
    int64_t now = sl_wall_ms();
    while (sl_batcher_len(&wp->q)) {
        sl_batcher_take(&wp->q, &it, 1);
        pend *p = it.owner;
        if (w->stopping) {
            sl_batch *b = p->b;
            memset(&b->resps[it.idx], 0, sizeof b->resps[it.idx]);
            b->resps[it.idx].error = "shutting down";
        } else {
            route(w, p, it.idx, it.attempts + 1, now, sl_mono_ns());
        }
        pend_item_done(p);
    }
    if (wp->urgent) {
        for (wpeer **pp = &w->urgent; *pp; pp = &(*pp)->next_urgent)
            if (*pp == wp) {
                *pp = wp->next_urgent;
                break;
            }
    }
    sl_peer_close(wp->conn); /* runs the failed calls' callbacks now */
    sl_batcher_free(&wp->q);
    free(wp->addr);
    free(wp);
}

void sl_routerwk_apply_view(wk *w, sl_view *nv)
{
    sl_router *r = w->r;
    sl_view *old = w->v;
    wpeer **oldp = w->peers;
    size_t oldn = w->npeers;
    wpeer **np = calloc(nv->n ? nv->n : 1, sizeof *np);
    if (!np) {
        sl_view_unref(nv);
        return; /* keep the old list; the next change tries again */
    }
    for (size_t i = 0; i < nv->n; i++) {
        if ((long)i == nv->self)
            continue;
        const char *a = sl_picker_addr(nv->picker, i);
        for (size_t k = 0; k < oldn; k++)
            if (oldp[k] && strcmp(oldp[k]->addr, a) == 0) {
                np[i] = oldp[k];
                oldp[k] = NULL;
                break;
            }
        if (!np[i] && !(np[i] = wpeer_new(w, a)))
            sl_log_error(r->log, "cannot create a client for peer %s", a);
        if (np[i])
            np[i]->vidx = i;
    }
    w->v = nv;
    w->peers = np;
    w->npeers = nv->n;
    cinc(&w->c_views, 1);
    for (size_t k = 0; k < oldn; k++)
        if (oldp[k])
            sl_routerwk_retire_peer(w, oldp[k]);
    free(oldp);
    sl_view_unref(w->prev);
    w->prev = old; /* a node that just left may still push its keys here (TransferKeys) */
    flush_urgent(w);
    /* Hand-off: keys held here that another node owns now go to it (a leaving node: all keys). */
    if (w->id == 0 && r->handoff && old && nv->n > 0 &&
        (nv->self >= 0 || atomic_load(&r->leaving))) {
        sl_view_ref(nv);
        sl_handoff_begin(r->handoff, nv->picker, nv->self, nv);
    }
}

/* ---- API ------------------------------------------------------------------------------------ */

static void decide_local(sl_router *r, sl_batch *b, int64_t now_ms)
{
    sl_decider_decide_local(r->engine, b, now_ms);
}

void sl_router_submit(sl_router *r, int worker, sl_batch *b, int64_t now_ms, sl_batch_done_cb done,
                      void *ud)
{
    if (!r->cluster) {
        decide_local(r, b, now_ms);
        done(ud, b);
        return;
    }
    wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
    sl_view *v = w->v;
    if (!v || v->n == 0 || (v->n == 1 && v->self == 0) || w->stopping) {
        /* alone: the standalone path, plus the owner's name */
        decide_local(r, b, now_ms);
        for (size_t i = 0; i < b->n; i++)
            if (!b->answered[i])
                set_owner(b, i, r->advertise, false);
        cinc(&w->c_local, b->n - b->n_answered);
        done(ud, b);
        return;
    }
    pend *p = pend_get(w, b, done, ud);
    if (!p) {
        for (size_t i = 0; i < b->n; i++)
            if (!b->answered[i]) {
                memset(&b->resps[i], 0, sizeof b->resps[i]);
                b->resps[i].error = "out of memory";
            }
        done(ud, b);
        return;
    }
    int64_t mono = sl_mono_ns(); /* one clock read per call, not per item */
    for (size_t i = 0; i < b->n; i++)
        if (!b->answered[i])
            route(w, p, i, 0, now_ms, mono);
    flush_urgent(w);
    pend_item_done(p);
}

void sl_router_peer_rate_limits(sl_router *r, int worker, sl_batch *b, int64_t now_ms,
                                sl_batch_done_cb done, void *ud)
{
    decide_local(r, b, now_ms);
    if (r->cluster) {
        wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
        cinc(&w->c_local, b->n - b->n_answered);
        sl_globalsync_peer_batch(w->gsync, b, now_ms);
    }
    done(ud, b);
}

void sl_router_update_globals(sl_router *r, int worker, const sl_peerwire_global *g, size_t n,
                              int64_t now_ms)
{
    if (!r->cluster)
        return;
    wk *w = &r->wk[worker < 0 || worker >= r->nworkers ? 0 : worker];
    sl_globalsync_update(w->gsync, g, n, now_ms);
}

/* ---- the router as a decider (decide/decider.h) ------------------------------------------- */

/* Adapters from the decider's untyped object to the router: each is a tail call. */
static void dec_submit(void *self, int worker, sl_batch *b, int64_t now_ms, sl_batch_done_cb done,
                       void *ud)
{
    sl_router_submit(self, worker, b, now_ms, done, ud);
}

static void dec_peer_submit(void *self, int worker, sl_batch *b, int64_t now_ms,
                            sl_batch_done_cb done, void *ud)
{
    sl_router_peer_rate_limits(self, worker, b, now_ms, done, ud);
}

static void dec_worker_start(void *self, int worker, struct uv_loop_s *loop)
{
    sl_router_worker_start(self, worker, loop);
}

static void dec_worker_stop(void *self, int worker)
{
    sl_router_worker_stop(self, worker);
}

static const sl_decider_ops router_ops = {.name = "router", .submit = dec_submit,
                                          .worker_start = dec_worker_start,
                                          .worker_stop = dec_worker_stop};
static const sl_decider_ops peer_ops = {.name = "peers", .submit = dec_peer_submit,
                                        .worker_start = dec_worker_start,
                                        .worker_stop = dec_worker_stop};

sl_decider sl_router_decider(sl_router *r)
{
    return (sl_decider){.ops = &router_ops, .self = r};
}

sl_decider sl_router_peer_decider(sl_router *r)
{
    return (sl_decider){.ops = &peer_ops, .self = r};
}

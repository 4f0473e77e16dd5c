/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GLOBAL sync on one worker (see globalsync.h and docs/cluster.md).
 *
 * Two libuv timers drive the sends: the hits timer is armed when global.c's "hits waiting" list
 * goes from empty to non-empty, the broadcast timer when the "touched" list does; either list
 * reaching --global-batch-limit keys sends at once. A send takes up to batch-limit keys from
 * global.c as requests, groups the hits by owner (the owner may be this node after a peer-list
 * change: then the hits are applied here, as an owner would) and makes one call per owner; a
 * broadcast peeks at the engine for each key's state and sends the same UpdatePeerGlobals message
 * to every other peer. Calls that fail lose their data: the next sync carries fresher state.
 */
#include "cluster/globalsync.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/picker.h"
#include "core/store.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define EXPIRE_MS 1000
#define EXPIRE_WORK 4096

struct sl_globalsync {
    sl_globalsync_config cfg;
    bool started, stopping;
    uv_timer_t hits_timer, bcast_timer, expire_timer;
    sl_batch scratch;           /* decoding owners' answers */
    sl_batch gs;                /* the keys of one send or broadcast */
    /* counters, written by the worker only */
    _Atomic uint64_t c_local_answers, c_sends, c_broadcasts, c_updates;
};

/* One call in flight. HITS keeps the keys it sent, to apply the owner's answers as updates. */
typedef struct gcall {
    sl_globalsync *s;
    int method;
    sl_globalsync_peer peer;    /* addr points at the copy below */
    int64_t t0;
    size_t n;
    char *addr;
    char *keys;                 /* joined "name_unique\0" keys, then key_off, dur, alg */
    size_t *key_off;
    int32_t *alg;
    int64_t *dur;
} gcall;

static inline void cinc(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

int sl_globalsync_new(const sl_globalsync_config *cfg, sl_globalsync **out)
{
    sl_globalsync *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->cfg = *cfg;
    sl_batch_init(&s->scratch, 0);
    sl_batch_init(&s->gs, 0);
    *out = s;
    return 0;
}

static void send_hits(sl_globalsync *s);
static void send_broadcasts(sl_globalsync *s);

static void on_hits_timer(uv_timer_t *t)
{
    send_hits(t->data);
}

static void on_bcast_timer(uv_timer_t *t)
{
    send_broadcasts(t->data);
}

static void on_expire_timer(uv_timer_t *t)
{
    sl_globalsync *s = t->data;
    sl_global_expire(s->cfg.global, sl_wall_ms(), EXPIRE_WORK);
}

void sl_globalsync_start(sl_globalsync *s, uv_loop_t *loop)
{
    uv_timer_init(loop, &s->hits_timer);
    uv_timer_init(loop, &s->bcast_timer);
    uv_timer_init(loop, &s->expire_timer);
    s->hits_timer.data = s->bcast_timer.data = s->expire_timer.data = s;
    if (s->cfg.expire)
        uv_timer_start(&s->expire_timer, on_expire_timer, EXPIRE_MS, EXPIRE_MS);
    s->started = true;
}

void sl_globalsync_stop(sl_globalsync *s)
{
    if (!s->started || s->stopping)
        return;
    s->stopping = true;
    uv_close((uv_handle_t *)&s->hits_timer, NULL);
    uv_close((uv_handle_t *)&s->bcast_timer, NULL);
    uv_close((uv_handle_t *)&s->expire_timer, NULL);
}

void sl_globalsync_free(sl_globalsync *s)
{
    if (!s)
        return;
    sl_batch_free(&s->scratch);
    sl_batch_free(&s->gs);
    free(s);
}

/* Act on sl_global_hit / sl_global_touch's signals: send now, or arm the sync timer. */
static void on_signals(sl_globalsync *s, int sig, bool hits)
{
    if (!sig || !s->started || s->stopping)
        return;
    if (sig & SL_GLOBAL_FULL) {
        if (hits)
            send_hits(s);
        else
            send_broadcasts(s);
        return;
    }
    uv_timer_t *t = hits ? &s->hits_timer : &s->bcast_timer;
    if (!uv_is_active((uv_handle_t *)t))
        uv_timer_start(t, hits ? on_hits_timer : on_bcast_timer,
                       (uint64_t)(s->cfg.sync_wait_ns / 1000000), 0);
}

/* Hits from peers were applied here: their senders waited up to a sync interval already, so the
 * new state goes out after a tenth of one (coalescing what arrives meanwhile, and bounding
 * broadcasts to ten per interval) rather than after another whole interval. */
static void broadcast_soon(sl_globalsync *s)
{
    if (!s->started || s->stopping)
        return;
    uint64_t delay = (uint64_t)(s->cfg.sync_wait_ns / 10000000);
    if (delay < 1)
        delay = 1;
    if (uv_is_active((uv_handle_t *)&s->bcast_timer) &&
        uv_timer_get_due_in(&s->bcast_timer) <= delay)
        return;
    uv_timer_start(&s->bcast_timer, on_bcast_timer, delay, 0);
}

int sl_globalsync_hit(sl_globalsync *s, uint64_t key_hash, const sl_request *q, int64_t now,
                      sl_response *resp)
{
    int sig = 0;
    int rc = sl_global_hit(s->cfg.global, key_hash, q, now, resp, &sig);
    if (rc == 0 || rc == -ENOMEM) {
        cinc(&s->c_local_answers, 1);
        sl_metrics_counter_inc(s->cfg.m_local_answers);
        on_signals(s, sig, true);
    }
    return rc;
}

void sl_globalsync_decided(sl_globalsync *s, uint64_t key_hash, const sl_request *q, int64_t now)
{
    int sig = 0;
    if (sl_global_touch(s->cfg.global, key_hash, q, now, &sig) == 0)
        on_signals(s, sig, false);
}

void sl_globalsync_peer_batch(sl_globalsync *s, const sl_batch *b, int64_t now)
{
    bool touched = false;
    for (size_t i = 0; i < b->n; i++) {
        const sl_request *q = &b->reqs[i];
        if (b->answered[i] || !(q->behavior & SL_GLOBAL) || q->hits == 0 || b->resps[i].error)
            continue;
        int sig = 0;
        uint64_t h = sl_picker_key_hash(sl_engine_key_ids(s->cfg.engine), q->name, q->name_len,
                                        q->unique_key, q->unique_key_len);
        if (sl_global_touch(s->cfg.global, h, q, now, &sig) == 0) {
            touched = true;
            if (sig & SL_GLOBAL_FULL)
                on_signals(s, sig, false);
        }
    }
    if (touched)
        broadcast_soon(s);
}

void sl_globalsync_update(sl_globalsync *s, const sl_peerwire_global *g, size_t n, int64_t now)
{
    for (size_t k = 0; k < n; k++)
        sl_global_update(s->cfg.global, sl_picker_hash(sl_engine_key_ids(s->cfg.engine), g[k].key, g[k].key_len), g[k].key,
                         g[k].key_len, &g[k].resp, g[k].algorithm, g[k].duration, now);
    cinc(&s->c_updates, n);
    sl_metrics_counter_add(s->cfg.m_updates, n);
}

static void gcall_free(gcall *c)
{
    if (c) {
        free(c->addr);
        free(c->keys);
        free(c);
    }
}

static gcall *gcall_new(sl_globalsync *s, int method, const sl_globalsync_peer *p)
{
    gcall *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (!(c->addr = strdup(p->addr))) {
        free(c);
        return NULL;
    }
    c->s = s;
    c->method = method;
    c->peer = *p;
    c->peer.addr = c->addr;
    c->t0 = sl_mono_ns();
    return c;
}

/* Call the peer; on a failure to start the call, report it and free c. */
static void gcall_send(gcall *c, const char *path, sl_buf *msg, sl_peer_cb done)
{
    sl_globalsync *s = c->s;
    int rc = sl_peer_call(c->peer.conn, path, msg, s->cfg.call_timeout_ms, done, c);
    if (rc) {
        s->cfg.ops->call_done(s->cfg.ud, c->method, &c->peer, c->t0, rc);
        gcall_free(c);
    }
}

/* ---- hits to owners -------------------------------------------------------------------------- */

static void on_hits_done(void *ud, const sl_peer_result *res)
{
    gcall *c = ud;
    sl_globalsync *s = c->s;
    bool ok = res->err == 0 && res->grpc_status == SL_GRPC_OK;
    if (ok) {
        sl_grpc_status st;
        sl_batch_reset(&s->scratch);
        ok = sl_batch_alloc_items(&s->scratch, c->n) == 0 &&
             sl_peerwire_decode_resp(s->cfg.max_msg, res->msg, res->len, &s->scratch, NULL, c->n,
                                        &st) == 0;
        /* the owner's answer is its state after our hits: the freshest copy there is */
        int64_t now = sl_wall_ms();
        for (size_t k = 0; ok && k < c->n; k++) {
            const char *key = c->keys + c->key_off[k];
            size_t len = c->key_off[k + 1] - c->key_off[k] - 1;
            sl_global_update(s->cfg.global, sl_picker_hash(sl_engine_key_ids(s->cfg.engine), key, len),
                             key, len,
                             &s->scratch.resps[k], c->alg[k], c->dur[k], now);
        }
    }
    s->cfg.ops->call_done(s->cfg.ud, SL_GLOBALSYNC_HITS, &c->peer, c->t0,
                          ok ? 0 : res->err ? res->err : -EIO);
    if (!ok)
        sl_log_warn(s->cfg.log, "GLOBAL hits to %s failed: %s", c->addr, res->message);
    gcall_free(c);
}

/* The key of a request as Gubernator joins it: name "_" unique_key, NUL-terminated at
 * dst[return]. */
static size_t join_key(char *dst, const sl_request *q)
{
    memcpy(dst, q->name, q->name_len);
    dst[q->name_len] = '_';
    memcpy(dst + q->name_len + 1, q->unique_key, q->unique_key_len);
    size_t len = q->name_len + 1 + q->unique_key_len;
    dst[len] = '\0';
    return len;
}

typedef struct owner_idx {
    size_t k;
    sl_globalsync_peer p;
} owner_idx;

static int cmp_owner(const void *a, const void *b)
{
    const owner_idx *x = a, *y = b;
    if (x->p.vidx != y->p.vidx)
        return x->p.vidx < y->p.vidx ? -1 : 1;
    return x->k < y->k ? -1 : x->k > y->k;
}

/* Send the items s->gs.reqs[ks[0..n).k] (one owner) as GLOBAL hits; idx: room for n. */
static void send_hits_to(sl_globalsync *s, const owner_idx *ks, size_t n, size_t *idx)
{
    sl_batch *gs = &s->gs;
    gcall *c = gcall_new(s, SL_GLOBALSYNC_HITS, &ks[0].p);
    size_t klen = 0;
    for (size_t j = 0; j < n; j++) {
        const sl_request *q = &gs->reqs[ks[j].k];
        klen += q->name_len + 1 + q->unique_key_len + 1;
    }
    klen = (klen + 7) & ~(size_t)7; /* the arrays after the keys stay aligned */
    if (c)
        c->keys = malloc(klen + (n + 1) * sizeof(size_t) + n * (sizeof(int32_t) + sizeof(int64_t)));
    if (!c || !c->keys) {
        gcall_free(c);
        return; /* hits lost: bounded, and the next sync carries new ones */
    }
    c->key_off = (size_t *)(c->keys + klen);
    c->dur = (int64_t *)(c->key_off + n + 1);
    c->alg = (int32_t *)(c->dur + n);
    size_t off = 0;
    for (size_t j = 0; j < n; j++) {
        const sl_request *q = &gs->reqs[ks[j].k];
        c->key_off[j] = off;
        off += join_key(c->keys + off, q) + 1;
        c->alg[j] = q->algorithm;
        c->dur[j] = q->duration;
        idx[j] = ks[j].k;
    }
    c->key_off[n] = off;
    c->n = n;
    sl_buf out;
    sl_buf_init(&out, 0);
    size_t mark;
    int rc = sl_grpc_frame_begin(&out, &mark);
    if (!rc)
        rc = sl_peerwire_encode_req(gs, idx, n, &out);
    if (!rc)
        rc = sl_grpc_frame_end(&out, mark);
    cinc(&s->c_sends, 1);
    if (rc) {
        s->cfg.ops->call_done(s->cfg.ud, SL_GLOBALSYNC_HITS, &c->peer, c->t0, rc);
        gcall_free(c);
    } else {
        gcall_send(c, SL_PEERWIRE_PATH_GET_PEER_RATE_LIMITS, &out, on_hits_done);
    }
    sl_buf_free(&out);
}

static void send_hits(sl_globalsync *s)
{
    const sl_globalsync_ops *ops = s->cfg.ops;
    if (!ops->has_view(s->cfg.ud))
        return;
    int64_t now = sl_wall_ms();
    owner_idx *ks = NULL;
    size_t *idx = NULL;
    for (;;) {
        sl_batch *gs = &s->gs;
        sl_batch_reset(gs);
        int n = sl_global_take_hits(s->cfg.global, gs, s->cfg.batch_limit);
        if (n <= 0)
            break;
        owner_idx *nk = realloc(ks, (size_t)n * sizeof *ks);
        if (nk)
            ks = nk;
        size_t *ni = nk ? realloc(idx, (size_t)n * sizeof *idx) : NULL;
        if (ni)
            idx = ni;
        if (!nk || !ni) {
            free(ks);
            free(idx);
            return; /* out of memory: these hits are lost, later ones are not */
        }
        size_t m = 0;
        for (int k = 0; k < n; k++) {
            sl_request *q = &gs->reqs[k];
            uint64_t h = sl_picker_key_hash(sl_engine_key_ids(s->cfg.engine), q->name, q->name_len,
                                        q->unique_key, q->unique_key_len);
            if (!ops->owner(s->cfg.ud, h, &ks[m].p)) {
                /* we own it now (the list changed): apply the hits here, as an owner would */
                sl_response resp;
                q->behavior |= SL_DRAIN_OVER_LIMIT;
                sl_engine_decide(s->cfg.engine, q, &resp, now);
                if (!resp.error)
                    sl_globalsync_decided(s, h, q, now);
                continue;
            }
            ks[m++].k = (size_t)k;
        }
        qsort(ks, m, sizeof *ks, cmp_owner);
        for (size_t b = 0; b < m;) {
            size_t e = b;
            while (e < m && ks[e].p.vidx == ks[b].p.vidx)
                e++;
            send_hits_to(s, ks + b, e - b, idx);
            b = e;
        }
    }
    free(ks);
    free(idx);
}

/* ---- broadcasts to every peer ---------------------------------------------------------------- */

static void on_bcast_done(void *ud, const sl_peer_result *res)
{
    gcall *c = ud;
    sl_globalsync *s = c->s;
    bool ok = res->err == 0 && res->grpc_status == SL_GRPC_OK;
    s->cfg.ops->call_done(s->cfg.ud, SL_GLOBALSYNC_BROADCAST, &c->peer, c->t0,
                          ok ? 0 : res->err ? res->err : -EIO);
    if (!ok)
        sl_log_debug(s->cfg.log, "GLOBAL broadcast to %s failed: %s", c->addr, res->message);
    gcall_free(c);
}

/* Send one framed UpdatePeerGlobals message to every remote peer. */
static void broadcast_msg(sl_globalsync *s, const sl_buf *msg)
{
    const sl_globalsync_ops *ops = s->cfg.ops;
    size_t slots = ops->slots(s->cfg.ud);
    for (size_t i = 0; i < slots; i++) {
        sl_globalsync_peer p;
        if (!ops->peer(s->cfg.ud, i, &p))
            continue;
        gcall *c = gcall_new(s, SL_GLOBALSYNC_BROADCAST, &p);
        sl_buf copy;
        sl_buf_init(&copy, 0);
        if (!c || sl_buf_append(&copy, msg->data, msg->len)) {
            gcall_free(c);
            sl_buf_free(&copy);
            continue;
        }
        cinc(&s->c_broadcasts, 1);
        gcall_send(c, SL_PEERWIRE_PATH_UPDATE_PEER_GLOBALS, &copy, on_bcast_done);
        sl_buf_free(&copy);
    }
}

static void send_broadcasts(sl_globalsync *s)
{
    if (!s->cfg.ops->has_view(s->cfg.ud))
        return;
    int64_t now = sl_wall_ms();
    sl_peerwire_global *g = NULL;
    for (;;) {
        sl_batch *gs = &s->gs;
        sl_batch_reset(gs);
        int n = sl_global_take_touched(s->cfg.global, gs, s->cfg.batch_limit);
        if (n <= 0)
            break;
        sl_peerwire_global *ng = realloc(g, (size_t)n * sizeof *g);
        if (!ng)
            break;
        g = ng;
        for (int k = 0; k < n; k++) {
            sl_request *q = &gs->reqs[k];
            q->hits = 0;
            q->created_at = 0;
            q->behavior &= ~(SL_GLOBAL | SL_RESET_REMAINING);
            memset(&g[k], 0, sizeof g[k]);
            sl_engine_decide(s->cfg.engine, q, &g[k].resp, now);
            char *key = sl_batch_alloc(gs, q->name_len + 1 + q->unique_key_len + 1);
            g[k].key = key ? key : "";
            g[k].key_len = key ? join_key(key, q) : 0;
            g[k].algorithm = q->algorithm;
            g[k].duration = q->duration;
            g[k].created_at = now;
        }
        sl_buf msg;
        sl_buf_init(&msg, 0);
        size_t mark;
        int rc = sl_grpc_frame_begin(&msg, &mark);
        if (!rc)
            rc = sl_peerwire_encode_globals(g, (size_t)n, &msg);
        if (!rc)
            rc = sl_grpc_frame_end(&msg, mark);
        if (!rc)
            broadcast_msg(s, &msg);
        sl_buf_free(&msg);
    }
    free(g);
}

void sl_globalsync_stats_get(sl_globalsync *s, sl_globalsync_stats *out)
{
    out->local_answers = atomic_load(&s->c_local_answers);
    out->sends = atomic_load(&s->c_sends);
    out->broadcasts = atomic_load(&s->c_broadcasts);
    out->updates = atomic_load(&s->c_updates);
}

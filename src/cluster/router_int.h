/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The router's internal state, shared by its two halves and by nothing else: cluster/router.c
 * (forwarding, the per-request path: routing, batching, peer calls, a worker's view swap) and
 * cluster/routerctl.c (construction, publishing peer lists, worker lifecycle, peer identity,
 * hand-off glue, health, counters). The public API is cluster/router.h.
 *
 * Per worker (wk) and per remote peer (wpeer) there is a persistent HTTP/2 connection and a
 * batcher; a submit's record (pend) counts the items still out; a forwarding call in flight is a
 * pcall. Everything in a wk is touched only on its worker's loop thread, but the counters.
 */
#ifndef SLUICE_CLUSTER_ROUTER_INT_H
#define SLUICE_CLUSTER_ROUTER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "cluster/batcher.h"
#include "cluster/global.h"
#include "cluster/globalsync.h"
#include "cluster/handoff.h"
#include "cluster/members.h"
#include "cluster/peer.h"
#include "cluster/peermetrics.h"
#include "cluster/router.h"
#include "cluster/view.h"

typedef struct wk wk;

typedef struct wpeer {
    char *addr;
    sl_peer *conn;
    sl_batcher q;
    bool urgent;                /* a NO_BATCHING item waits: send at the end of this submit */
    struct wpeer *next_urgent;
    size_t vidx;                /* index in the worker's sl_view */
} wpeer;

typedef struct pend {
    struct pend *next;
    wk *w;
    sl_batch *b;
    sl_batch_done_cb done;
    void *ud;
    size_t outstanding;
} pend;

/* A forwarding call in flight. */
typedef struct pcall {
    wk *w;
    wpeer *wp;                  /* alive until every call on its connection ended */
    uint64_t version;
    size_t vidx;
    int64_t t0;
    size_t n;
    sl_batcher_item items[];
} pcall;

struct wk {
    sl_router *r;
    int id;
    uv_loop_t *loop;
    bool started, stopping;
    sl_view *v;
    sl_view *prev;                 /* the list before v: its members may still hand keys over */
    wpeer **peers;              /* by view index; NULL at self */
    size_t npeers;
    wpeer *urgent;
    int tfd;
    uv_poll_t tpoll;
    int64_t tfd_armed;
    sl_globalsync *gsync;
    pend *free_pends;
    size_t nfree_pends;
    sl_batch scratch;           /* decoding peers' answers */
    size_t *idx;
    size_t idxcap;
    sl_batcher_item *take;
    /* counters, written by this worker only */
    _Atomic uint64_t c_local, c_forwarded, c_calls, c_errors, c_retries, c_fail_open;
    _Atomic uint64_t c_views;
    char pad[64];
};

struct sl_router {
    sl_engine *engine;
    bool cluster;
    sl_router_config cfg;
    char *advertise;
    char source_ip[64];         /* advertise's IP when numeric and specified: peer calls come
                                   from it (peers judge PeersV1 callers by source IP) */
    char **peers;               /* static list copy */
    char *dns_name, *dns_server, *prefix;
    char **etcd_eps;
    sl_engine_config ecfg;
    bool has_ecfg;
    sl_logger *log;
    sl_global *global;
    wk *wk;
    int nworkers;
    sl_server *server;
    sl_members *members;
    pthread_mutex_t vmu;
    sl_view *latest;
    uint64_t next_version;
    int64_t batch_timeout_ms;
    size_t batch_limit;
    /* metrics (NULL when no registry) */
    sl_peermetrics pm;
    /* hand-off (cluster/handoff.h), on worker 0 */
    sl_handoff *handoff;
    _Atomic bool leaving, leave_done;
};

/* A counter written by one thread only, read by any. */
static inline void cinc(_Atomic uint64_t *c, uint64_t n)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* What routerctl.c asks of the forwarding half (router.c), on worker w's loop thread. */

/* The GLOBAL sync sender's questions about owners and peers (one sender per worker, ud = wk). */
extern const sl_globalsync_ops sl_routerwk_gsync_ops;
/* The batch timerfd's poll callback (handle data = wk). */
void sl_routerwk_on_timer(uv_poll_t *h, int status, int events);
/* Swap in view nv (its reference is taken): connections to peers kept, made or retired, the
 * previous view kept for former members, hand-off begun on worker 0. */
void sl_routerwk_apply_view(wk *w, sl_view *nv);
/* Retire a peer that left the list or at worker stop (its items re-routed or failed). */
void sl_routerwk_retire_peer(wk *w, wpeer *wp);

#endif

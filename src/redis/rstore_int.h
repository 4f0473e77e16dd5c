/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store's internal state, shared by its two halves and by nothing else: redis/rstore.c
 * (the per-request path: items cut into script calls, submit, replies, NOSCRIPT, MOVED / ASK,
 * parked calls, per-item errors or fail-open) and redis/rstorectl.c (the connections and the
 * module's control: connect, deadlines, reconnection with backoff, the per-master connection
 * table and topology refreshes, worker start and stop, construction, counters). The public API
 * is redis/rstore.h.
 *
 * Per worker loop (wk) there is one Redis connection (conn, over a redis/rconn.h sl_rconn), or
 * with --redis-cluster one per master plus a seed; a submit's record (pend) counts its items still
 * out, in script calls (chunk) that may hold the items of several submits.
 * Everything in a wk is touched only on its worker's loop thread, but the counters.
 */
#ifndef SLUICE_REDIS_RSTORE_INT_H
#define SLUICE_REDIS_RSTORE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "tls/tls.h"
#include "sluice/clock.h"
#include "redis/rconn.h"
#include "redis/rscript.h"
#include "redis/overcache.h"
#include "redis/rslots.h"
#include "redis/rstore.h"

#define ADDR_MAX 256

typedef struct wk wk;
typedef struct pend pend;
typedef struct conn conn;

/* An item of a script call: its call's record and its index in the call's batch. */
typedef struct centry {
    pend *p;
    uint32_t i;
} centry;

/* One script call: n items of one algorithm (and, with --redis-cluster, of one slot), from one
 * call or from several: the items submitted on a worker while a loop iteration runs share script
 * calls (the worker's open chunk, sent before the loop next polls), so that concurrent small calls
 * cost Redis one script run, not one each. */
typedef struct chunk {
    wk *w;
    uint32_t n;
    uint32_t cap;          /* --redis-batch-items */
    int32_t alg;
    uint16_t slot;         /* with --redis-cluster: the slot of every key of the call */
    bool eval;             /* sent as EVAL (after a NOSCRIPT): a second NOSCRIPT is an error */
    bool redirected;       /* sent again after a MOVED / ASK or a new topology: once only */
    bool asking;           /* sent after ASKING (an ASK answer): so is its EVAL after a NOSCRIPT */
    uint32_t failed_on;    /* parked: the id of the connection it failed on (0: unknown) */
    int64_t deadline_ms;   /* --redis-cluster: the earliest deadline of its calls */
    struct chunk *parked;  /* the worker's list of parked chunks, or of spare ones */
    sl_rscript_item *it;   /* cap: the items as the script call takes them */
    centry e[];            /* cap: whose answers they are */
} chunk;

/* A submit's record: answered (done) when its last item is. */
struct pend {
    wk *w;
    sl_batch *b;
    int64_t now;
    sl_batch_done_cb done;
    void *ud;
    size_t out;    /* items in script calls (open, in flight or parked), plus one while submit runs */
    int64_t deadline_ms; /* --redis-cluster: mono ms after which a parked call fails */
};

typedef struct raddr {
    char host[ADDR_MAX];
    int port;
} raddr;

/* One Redis connection: the standalone server's, or (--redis-cluster) one master's or the
 * seed's the topology is asked from. sl_rconn_data(ac) points here while ac is this one's. */
struct conn {
    wk *w;
    uint32_t id;            /* --redis-cluster: unique in its worker, never 0 */
    raddr a;
    sl_rconn *ac;           /* the connection (NULL: none, next_try_ms says when) */
    bool connected;
    bool wrong_server;      /* a READONLY / LOADING / MASTERDOWN answer: leave it at the next tick */
    bool retired;           /* not in the topology any more: freed at the next tick */
    bool slots_asked;       /* a CLUSTER SLOTS is queued on it */
    conn *next_old;         /* the worker's list of retired connections */
    int64_t backoff_ms;
    int64_t next_try_ms;    /* mono ms: the next connect attempt, when ac == NULL */
    int64_t conn_start_ms;  /* mono ms the connect began */
    int64_t progress_ms;    /* mono ms of the last reply, or of the send that found none out */
    size_t inflight;        /* commands sent and not answered, items and others */
};

struct wk {
    sl_rstore *r;
    int idx;
    uv_loop_t *loop;
    bool started;
    bool stopping;
    uv_timer_t timer;
    size_t addr;            /* the address (or seed) used or tried last */
    conn main;              /* standalone: the connection */
    /* --redis-sentinel: the connection to a sentinel (moving along addrs), the master's address
     * asked of it at start, when main is lost or refused writes, and each second */
    conn sentinel;
    bool master_asking;     /* a SENTINEL get-master-addr-by-name is out */
    bool need_master;       /* ask at the next tick */
    int64_t master_asked_ms;
    /* --redis-cluster */
    sl_rslots *tbl;         /* the topology (NULL until the first one) */
    sl_rslots *next;        /* where a CLUSTER SLOTS reply is read into */
    conn *node[SL_RSLOTS_NODES_MAX]; /* one per master, by tbl's node index */
    conn *seed;             /* asked for the topology while no master is connected */
    conn *old;              /* retired, freed at the next tick */
    bool need_refresh;
    chunk *parked;          /* calls waiting for a new topology (park()) */
    uint32_t conn_ids;      /* the last conn id given */
    bool refreshing;
    int64_t refresh_start_ms;
    sl_rscript_cmd cmd;     /* the command being built (reused) */
    chunk *open;            /* the script call being filled by this loop iteration's submits */
    uv_idle_t flush;        /* sends `open` at the loop's next turn (started while it is set) */
    chunk *spare;           /* chunks kept for reuse (at most CHUNK_SPARE_MAX) */
    size_t n_spare;
    sl_log_budget log_budget;  /* items failed: one line a second */
    sl_log_budget conn_budget; /* connection events: one line a second */
    _Atomic uint64_t items, errors, fail_open, reloads, connects, disconnects;
    _Atomic uint64_t redirects, refreshes;
    sl_overcache over;      /* keys known over their limit (--redis-over-limit-cache) */
    _Atomic uint64_t over_hits; /* items answered from it */
    sl_rconn_stats rstats;  /* replies past --redis-max-reply, TLS failures */
};

struct sl_rstore {
    sl_rstore_config cfg;
    sl_engine_config ecfg;
    raddr *addrs;
    size_t n_addrs;
    char *user;
    char *password;
    sl_overcache_shared *over; /* what the workers' over-limit caches share (NULL: off) */
    sl_tls_slot *tls;       /* --redis-tls: the client context, replaced by a reload (NULL:
                               plain TCP) */
    char *tls_ca, *tls_cert, *tls_key; /* the files it is read from (NULL: not given) */
    char *tls_server_name;  /* NULL: each address's host */
    char *sentinel_master;  /* --redis-sentinel: the master's name (NULL: no sentinel) */
    uint32_t batch_items;
    int nworkers;
    wk *wk;
};

static inline int64_t mono_ms(void)
{
    return sl_mono_ns() / 1000000;
}

static inline void cinc(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* redis/rstorectl.c: a new connection to host:port, connecting (NULL: no memory). */
conn *sl_rstorewk_conn_new(wk *w, const char *host, int port);
/* redis/rstorectl.c: the callback of a command whose answer only counts as progress (AUTH,
 * SCRIPT LOAD, ASKING); priv, if not NULL, names it in an error line. */
void sl_rstorewk_on_aux(sl_rconn *ac, void *reply, void *priv);
/* redis/rstore.c: the parked calls swept (see there): failed past their deadline (or `all`),
 * sent again after a new topology (`fresh`). */
void sl_rstorewk_sweep_parked(wk *w, bool fresh, bool all);
/* redis/rstore.c: worker start (the flush handle), stop (the open call's items failed or, under
 * --fail-open, decided locally; the handle closed) and the spare chunks freed. */
void sl_rstorewk_open_start(wk *w);
void sl_rstorewk_open_stop(wk *w);
void sl_rstorewk_free_spare(wk *w);

#endif

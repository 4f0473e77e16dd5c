/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store (--store redis): where a node's items are decided when their state lives in
 * Redis instead of the node's memory. Every worker loop has its own Redis connection on that loop
 * (redis/rconn.h: plain TCP or TLS, hiredis's reader for the replies); consecutive items of one
 * algorithm become one EVALSHA of its script (redis/rscript.h), whether they come from one call
 * or from several submitted in one turn of the loop, and every script call of the turn goes out
 * in one write and comes back in order (pipelined).
 *
 * Faults: an item whose connection is down, or goes down or times out (--redis-timeout) with the
 * item in flight, gets a per-item error, or with fail_open is decided by the local engine instead
 * (counted, logged at most once a second). A connection that fails, or whose server answers that
 * it cannot take writes (READONLY, LOADING, MASTERDOWN: a replica, or a master still loading), is
 * made again with backoff (100 ms doubling to 5 s) on the next address of the list, so Redis
 * coming back, or a replica promoted, is used without a restart.
 *
 * Redis Cluster (cfg.cluster): the addresses are seed nodes; each worker reads the topology from
 * them and keeps a connection per master; a call's items go to their slots' masters (one script
 * call never spans two slots), MOVED / ASK answers are followed once, a call failed by the
 * topology (master lost, CLUSTERDOWN, READONLY) is sent once more to its slot's next master if one
 * comes within --redis-timeout of the call (else per-item errors), and the topology is read
 * again on MOVED, on a master lost or timed out and on CLUSTERDOWN / READONLY (a failover), at most
 * every cluster_refresh_ms per worker (redis/rslots.h does the routing).
 *
 * Lifecycle: sl_rstore_new, then per worker (server hooks, on the worker thread)
 * sl_rstore_worker_start / sl_rstore_worker_stop, sl_rstore_free after the server stopped.
 * sl_rstore_submit runs on worker `worker`'s thread and calls `done` there, once, possibly before
 * it returns.
 */
#ifndef SLUICE_REDIS_RSTORE_H
#define SLUICE_REDIS_RSTORE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "decide/batch.h"
#include "decide/decider.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "sluice/engine.h"

typedef struct sl_rstore sl_rstore;

typedef struct sl_rstore_config {
    sl_engine *engine;                  /* fail-open decisions (not owned) */
    const sl_engine_config *engine_cfg; /* validation bounds; NULL = defaults */
    const char *const *addrs;           /* "ip:port" (v6 as [ip]:port; no names); tried in
                                           turn */
    size_t n_addrs;
    const char *user;                   /* "" or NULL: AUTH <password> only */
    const char *password_file;          /* "" or NULL: no AUTH */
    int64_t timeout_ms;                 /* connect and reply deadline; 0 = 1000 */
    int64_t key_margin_ms;              /* keys live this long past their state's expiry; 0 =
                                           60000 (covers clock differences between nodes) */
    int64_t batch_items;                /* most items in one script call; 0 = 100 */
    bool fail_open;
    bool cluster;                       /* Redis Cluster: addrs are seed nodes, the topology is
                                           read from them (CLUSTER SLOTS) and followed */
    const char *sentinel_master;        /* Redis Sentinel: addrs are sentinels, asked for this
                                           master's address (and again when it is lost, turns
                                           replica, or each second); NULL or "": no sentinel */
    int64_t cluster_refresh_ms;         /* least time between two topology reads by a worker;
                                           0 = 100 */
    size_t max_reply_bytes;             /* a longer reply closes its connection; 0 = 64 MiB */
    size_t max_queued_bytes;            /* commands waiting to be written per connection (more:
                                           per-item errors); 0 = 64 MiB */
    bool tls;                           /* TLS to Redis */
    const char *tls_ca;                 /* the CA bundle Redis's certificate must chain to; NULL
                                           or "": the system's trust store */
    const char *tls_cert, *tls_key;     /* a client certificate (tls-auth-clients); NULL: none */
    const char *tls_server_name;        /* the name Redis's certificate must carry; NULL or "":
                                           each address's IP */
    uint32_t over_limit_cache;          /* entries per worker of the over-limit cache
                                           (redis/overcache.h); 0 = off */
    int workers;
    sl_logger *log;                     /* may be NULL */
    sl_metrics *metrics;                /* may be NULL */
} sl_rstore_config;

/* 0 or a negative errno, with a reason in err (an address that is not ip:port, an unreadable
 * password file, TLS files that do not load). */
int sl_rstore_new(const sl_rstore_config *cfg, sl_rstore **out, char *err, size_t errlen);
void sl_rstore_free(sl_rstore *r);

/* SIGHUP: the TLS files read again; connections made from now on use them, open ones keep theirs.
 * 0, 1 without TLS (nothing to read), or a negative errno with the reason in err (the current
 * context kept). Any thread. */
int sl_rstore_reload_tls(sl_rstore *r, char *err, size_t errlen);

void sl_rstore_worker_start(sl_rstore *r, int worker, uv_loop_t *loop);
/* Closes the worker's connection; items in flight are answered (error or fail-open) first. */
void sl_rstore_worker_stop(sl_rstore *r, int worker);

/* Decide every item of b that is not already answered (b->answered[i]). */
void sl_rstore_submit(sl_rstore *r, int worker, sl_batch *b, int64_t now_ms,
                      sl_batch_done_cb done, void *ud);

/* The store as a decider (decide/decider.h): submit is sl_rstore_submit, the worker hooks
 * sl_rstore_worker_start / _stop. It points at r, which must outlive it. */
sl_decider sl_rstore_decider(sl_rstore *r);

typedef struct sl_rstore_stats {
    uint64_t items;       /* items sent to Redis */
    uint64_t errors;      /* items answered with an error because Redis failed them */
    uint64_t fail_open;   /* items decided by the local engine because Redis failed them */
    uint64_t reloads;     /* scripts sent again after NOSCRIPT */
    uint64_t connects;    /* connections made (the first ones included) */
    uint64_t disconnects; /* connections lost or closed for a timeout */
    uint64_t redirects;   /* MOVED / ASK answers followed (--redis-cluster) */
    uint64_t refreshes;   /* cluster topologies read (--redis-cluster), the first included */
    uint64_t oversized;   /* connections closed for a reply past max_reply_bytes */
    uint64_t tls_failures; /* TLS handshakes or sessions to Redis that failed */
    uint64_t over_limit_cached; /* items answered by the over-limit cache, not sent */
} sl_rstore_stats;

void sl_rstore_stats_get(sl_rstore *r, sl_rstore_stats *out);

#endif

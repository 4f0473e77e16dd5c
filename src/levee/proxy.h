/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_proxy: Levee's client-proxy. It answers POST /attempt like a limiter does, but decides
 * nothing itself: for each request's resource (X-Resource) it takes the resource's group of DF
 * limiters by rendezvous hashing (HRW top-DF over the names of the ALIVE limiters of the topology,
 * levee/topology.h; DF from the etcd `factor` tree, live: factor/key/<R>, else factor/default,
 * else 1) and sends the request to the next member of that group, round robin, over persistent
 * h2c connections (cluster/peer.h, one per limiter and worker). Each limiter enforces quota/DF,
 * so the group as a whole admits the quota: Levee's "sieving of flows". The limiter's answer is
 * relayed as it came (status, headers, body).
 *
 * Failures. A call that fails (connect refused, reset, GOAWAY then refused, --proxy-timeout) marks
 * its limiter down on every worker; the request is sent once more, to the group as it is without
 * that limiter (the next one by HRW takes its place), and answered 500 when that fails too.
 * Worker 0 probes down limiters every --proxy-probe-interval (GET /v1/LiveCheck) and marks one
 * up again when it answers 200. At most --proxy-max-inflight calls per worker are in flight;
 * beyond, 503 at once. Everything that is not POST /attempt goes to `fallback` (the node's
 * service: /metrics, health).
 *
 * Metrics: sluice_proxy_requests_total{limiter,outcome}, sluice_proxy_failovers_total{limiter},
 * sluice_proxy_limiter_up{limiter}, sluice_proxy_rejected_total{reason}.
 */
#ifndef SLUICE_LEVEE_PROXY_H
#define SLUICE_LEVEE_PROXY_H

#include <stdint.h>
#include <uv.h>

#include "config/quotasrc.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "net/exchange.h"
#include "levee/topology.h"

typedef struct sl_proxy sl_proxy;

typedef struct sl_proxy_config {
    sl_topology *topology;     /* the limiters; not owned, outlives the proxy */
    sl_quotasrc *quotas;       /* the factor tree; NULL: every DF is 1 */
    sl_metrics *metrics;       /* may be NULL */
    sl_logger *log;            /* may be NULL */
    int workers;
    int64_t timeout_ms;        /* one call to a limiter, connect included */
    int64_t probe_interval_ms;
    uint32_t max_inflight;     /* per worker */
    struct sl_tls_slot *tls;   /* calls to the limiters over TLS (the peers' options: each
                                  limiter's certificate must name its address); NULL = h2c */
    sl_http_handler fallback;  /* what is not POST /attempt */
    void *fallback_ud;
} sl_proxy_config;

int sl_proxy_new(const sl_proxy_config *cfg, sl_proxy **out);
/* After every worker stopped. NULL is ignored. */
void sl_proxy_free(sl_proxy *p);

/* The sl_http_handler of the client port (ud = the proxy). */
void sl_proxy_handle(void *ud, sl_exchange *ex);
/* On the worker's thread, when its loop starts / is about to stop (closes its connections; calls
 * in flight are answered 500). */
void sl_proxy_worker_start(sl_proxy *p, int worker, uv_loop_t *loop);
void sl_proxy_worker_stop(sl_proxy *p, int worker);

/* Group selection, exposed for tests. Names of the ALIVE limiters in `names`, `down[i]` true for
 * a limiter marked down locally: the DF members for the resource hash (HRW best first, down ones
 * replaced by the next by HRW; when all candidates are down, the best ones all the same) into
 * out[], indexes into names. Returns how many (min(df, n)). */
size_t sl_proxy_group(const char *const *names, const bool *down, size_t n, uint64_t hash,
                      size_t df, size_t *out);
/* The DF of a resource in a quota tree (factor/key/<R>, else factor/default, else 1). */
uint32_t sl_proxy_factor(const sl_quota_tree *t, const char *res, size_t len);

#endif

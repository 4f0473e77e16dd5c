/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_feed: the observer feed, how a client-proxy learns its limiters from the overlay. A thread subscribes to one
 * observer's topology stream (gRPC sluice.levee.v1.Topology/Watch over h2c, levee/observer.h) and
 * feeds the proxy's topology (levee/topology.h) with the members whose role is "limiter":
 * alive and suspect -> ALIVE (a suspect keeps its keys until it is declared dead), left ->
 * LEAVING (no new traffic at once: the limiter is draining), dead -> DEAD. A full view replaces
 * the list (members not in it are removed).
 *
 * Observers come from --observers, else from etcd's registrations (<prefix>/observer/<NAME>,
 * their "service" address; read again on every round, so an observer added later is found). An
 * observer that closes the stream, refuses it, or stays silent longer than --observer-timeout
 * (it sends a heartbeat every --observer-heartbeat) is left for the next one in the list. When
 * no observer has delivered an update for --observer-retry-window, the follower gives up:
 * on_fatal runs once (sluiced then exits with an error) and the thread ends; the topology keeps
 * its last state meanwhile, so requests are answered while the proxy looks for an observer.
 *
 * Metrics: sluice_proxy_observer_connected (gauge, 0/1), sluice_proxy_observer_reconnects_total,
 * sluice_proxy_observer_updates_total.
 */
#ifndef SLUICE_LEVEE_FEED_H
#define SLUICE_LEVEE_FEED_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "ctlplane/etcd.h"
#include "runtime/log.h"
#include "runtime/metrics.h"
#include "levee/topology.h"
#include "wire/topowire.h"

typedef struct sl_feed sl_feed;

typedef struct sl_feed_config {
    sl_topology *topology;        /* fed; not owned */
    const char *const *observers; /* host:port; may be empty when etcd is given */
    size_t n_observers;
    const sl_etcd_config *etcd;   /* NULL: --observers only */
    const char *prefix;
    int64_t timeout_ms;           /* silence before an observer is left */
    int64_t retry_window_ms;      /* no update for this long: give up */
    void (*on_fatal)(void *ud, const char *why);
    void *fatal_ud;
    sl_metrics *metrics;          /* may be NULL */
    sl_logger *log;               /* may be NULL */
} sl_feed_config;

int sl_feed_start(const sl_feed_config *cfg, sl_feed **out);
/* sluiced's options: --observers, else the observers in etcd (--storage-addrs),
 * --observer-timeout, --observer-retry-window. */
int sl_feed_start_options(const sl_options *o, sl_topology *t, sl_metrics *m, sl_logger *log,
                            void (*on_fatal)(void *ud, const char *why), void *ud,
                            sl_feed **out);
/* Stop the thread (within ~100 ms) and free. NULL is ignored. */
void sl_feed_free(sl_feed *f);

/* Apply one decoded update to the topology (limiters only; exposed for tests). The number of
 * changes made. */
size_t sl_feed_apply(sl_topology *t, const sl_topowire_update *u,
                       const sl_topowire_member *m);

#endif

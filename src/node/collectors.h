/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's own metric series that are read at render time from the stats structs the engine,
 * the server (and its TLS layer) and the Graphite bridge already keep, so that their hot paths
 * count nothing twice: keys and store bytes, removals, item errors, decisions by algorithm and
 * status, connections, HTTP requests, protocol errors, bytes, TLS handshakes and events, Graphite
 * pushes and connection state, gossip members, probes, suspicions, packets, drops and bytes
 * (docs/operations.md lists them).
 *
 * One table row per family (collectors.c); the node registers each source's rows once the
 * source exists. The sources must outlive the registry's last render.
 */
#ifndef SLUICE_NODE_COLLECTORS_H
#define SLUICE_NODE_COLLECTORS_H

#include <stdbool.h>

#include "gossip/gossipnode.h"
#include "runtime/metrics.h"
#include "net/server.h"
#include "node/graphite.h"
#include "sluice/engine.h"

/* Rows in the table (checked where it is defined). */
#define SL_COLLECTORS_ROWS 20

/* The collectors' arguments: zero it, keep it where the registry can reach it until freed. */
typedef struct sl_collectors {
    struct {
        const void *fam;   /* the table row */
        void *src;         /* its source: engine, server, graphite bridge or gossip node */
    } rows[SL_COLLECTORS_ROWS];
} sl_collectors;

/* Register the engine's families (keys, store bytes, removals, item errors, decisions). 0 or a
 * negative errno. */
int sl_collectors_engine(sl_collectors *c, sl_metrics *m, sl_engine *e);
/* The server's (connections, requests, protocol errors, bytes) and, with tls, its TLS layer's. */
int sl_collectors_server(sl_collectors *c, sl_metrics *m, sl_server *s, bool tls);
/* The Graphite bridge's (pushes, connected). */
int sl_collectors_graphite(sl_collectors *c, sl_metrics *m, sl_graphite *g);
/* sluice_build_info{version,commit} and the process_* family of Prometheus' client libraries
 * (CPU seconds, resident and virtual memory, open and max fds, start time), read from /proc at
 * render time. */
int sl_collectors_process(sl_metrics *m);
/* The gossip overlay's (members by status, probes, suspicions, packets, drops, bytes, LHM). */
int sl_collectors_gossip(sl_collectors *c, sl_metrics *m, sl_gossipnode *g);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's metric families (docs/operations.md): calls to peers by method and result, their
 * latency, forwarded items, retries, fail-open answers, GLOBAL local answers and updates, peer
 * list changes and size, and the hand-off's keys and bytes. This file registers them once and
 * holds their handles; the router (cluster/router.c) bumps them directly, with no call between.
 */
#ifndef SLUICE_CLUSTER_PEERMETRICS_H
#define SLUICE_CLUSTER_PEERMETRICS_H

#include "runtime/metrics.h"

/* Peer-call methods: forwarding, then the GLOBAL sync's (SL_GLOBALSYNC_* + 1). */
enum { SL_PEERMETRICS_FORWARD, SL_PEERMETRICS_GHITS, SL_PEERMETRICS_BCAST, SL_PEERMETRICS_METHODS };

/* Every handle is NULL when there is no registry (the metrics calls accept NULL). */
typedef struct sl_peermetrics {
    sl_metrics_counter *calls_ok[SL_PEERMETRICS_METHODS], *calls_err[SL_PEERMETRICS_METHODS];
    sl_metrics_histogram *call_seconds;
    sl_metrics_counter *items, *retries, *fail_open, *global_local, *updates, *views;
    sl_metrics_gauge *peers;
    sl_metrics_counter *handoff_sent, *handoff_failed, *handoff_bytes;
} sl_peermetrics;

/* Register the families in m (NULL: leave pm zeroed) and fill pm's handles. */
void sl_peermetrics_register(sl_peermetrics *pm, sl_metrics *m);

#endif

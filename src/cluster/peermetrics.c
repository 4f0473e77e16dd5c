/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster's metric families (see peermetrics.h): registration and the peer-call method labels.
 */
#include "cluster/peermetrics.h"

static const char *const method_names[SL_PEERMETRICS_METHODS] = {
    "GetPeerRateLimits", "GetPeerRateLimits.global", "UpdatePeerGlobals"};

void sl_peermetrics_register(sl_peermetrics *pm, sl_metrics *m)
{
    if (!m)
        return;
    sl_metrics_family *calls = NULL;
    if (sl_metrics_counter_family(m, "sluice_peer_calls_total",
                                  "Calls made to peers, by method and result", "method,result",
                                  &calls) == 0) {
        for (int i = 0; i < SL_PEERMETRICS_METHODS; i++) {
            const char *ok[2] = {method_names[i], "ok"};
            const char *err[2] = {method_names[i], "error"};
            pm->calls_ok[i] = sl_metrics_counter_get(calls, ok, 2);
            pm->calls_err[i] = sl_metrics_counter_get(calls, err, 2);
        }
    }
    sl_metrics_counter_new(m, "sluice_peer_forwarded_items_total",
                           "Requests forwarded to their owner", &pm->items);
    sl_metrics_counter_new(m, "sluice_peer_retries_total",
                           "Forwarded requests sent again after a membership change",
                           &pm->retries);
    sl_metrics_counter_new(m, "sluice_peer_fail_open_total",
                           "Requests decided locally because their owner failed (--fail-open)",
                           &pm->fail_open);
    sl_metrics_counter_new(m, "sluice_global_local_answers_total",
                           "GLOBAL requests answered from the local copy", &pm->global_local);
    sl_metrics_counter_new(m, "sluice_global_updates_total",
                           "GLOBAL owner states received (broadcasts and answers)",
                           &pm->updates);
    sl_metrics_counter_new(m, "sluice_membership_changes_total", "Peer lists applied",
                           &pm->views);
    sl_metrics_gauge_new(m, "sluice_cluster_peers", "Peers in the current list (this node too)",
                         &pm->peers);
    sl_metrics_family *ho = NULL;
    if (sl_metrics_counter_family(m, "sluice_handoff_keys_total",
                                  "Key states handed to their new owner on a list change or leave",
                                  "result", &ho) == 0) {
        const char *sent[1] = {"sent"}, *failed[1] = {"failed"};
        pm->handoff_sent = sl_metrics_counter_get(ho, sent, 1);
        pm->handoff_failed = sl_metrics_counter_get(ho, failed, 1);
    }
    sl_metrics_counter_new(m, "sluice_handoff_bytes_total",
                           "Bytes of key state records taken by new owners", &pm->handoff_bytes);
    const double b[] = {SL_METRICS_LATENCY_BUCKETS};
    sl_metrics_histogram_new(m, "sluice_peer_call_seconds", "Latency of calls to peers", b,
                             SL_METRICS_LATENCY_NBUCKETS, 1e9, &pm->call_seconds);
}

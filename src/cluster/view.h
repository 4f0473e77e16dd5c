/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer views: one peer list turned into a picker, with the peers' health slots and the IPs their
 * calls come from. A view is immutable once built (only its health slots and reference count
 * change), reference-counted, and shared read-only by the router's worker loops: each worker
 * routes a whole batch with one view and no lock (cluster/router.c publishes and swaps them).
 *
 * Peer identity lives here too: whether a caller's address or a verified certificate's names
 * belong to a member of a view (how PeersV1 is kept to peers, node/service.c via router.h).
 *
 * The struct is open so the router's per-request path reads the picker and self index directly,
 * with no call in between.
 */
#ifndef SLUICE_CLUSTER_VIEW_H
#define SLUICE_CLUSTER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "auth/addr.h"
#include "cluster/picker.h"

typedef struct sl_view_health {
    _Atomic int err;            /* 0, or the negative errno of the last failed call */
    _Atomic int64_t failed_at;  /* wall ms */
} sl_view_health;

typedef struct sl_view {
    _Atomic int refs;
    uint64_t version;           /* set by the publisher */
    sl_picker *picker;
    size_t n;                   /* peers in the list */
    long self;                  /* our index, or -1 when we are not in the list */
    sl_view_health *health;     /* by index */
    sl_addr_ip *ips;            /* the peers' IPs (names resolved when the view was built) */
    size_t nips, capips;
} sl_view;

/* Build a view over addrs with picker kind `picker` (sl_peer_picker) and `replicas`; `self_addr`
 * finds our index. resolve false leaves names out of the IPs (never blocks, for a loop thread).
 * One reference; NULL when out of memory or the picker cannot be built. */
sl_view *sl_view_new(int picker, unsigned replicas, const char *self_addr,
                     const char *const *addrs, size_t n, bool resolve);
/* Take / drop a reference (any thread); the last drop frees. NULL is ignored by unref. */
void sl_view_ref(sl_view *v);
void sl_view_unref(sl_view *v);

/* Whether sa has the IP of a member of v; false for NULL v or sa. */
bool sl_view_has_ip(const sl_view *v, const struct sockaddr *sa);
/* Whether a certificate's names (sl_exchange_peer_identity's list) name the host of a member of
 * v (sl_addr_names_host); false for NULL v. */
bool sl_view_names(const sl_view *v, const char *names);

#endif

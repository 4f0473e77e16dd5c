/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership sources: where the peer list comes from (--discovery), behind one interface so that
 * more (SWIM gossip) can join later. A source calls `on_change` with the
 * whole current list - sorted, without duplicates - whenever it differs from the last one it
 * reported (the first list always counts as a change). The router turns each list into a picker
 * and hands it to its worker loops; nothing restarts.
 *
 *   static  --peers, reported once, from sl_members_start().
 *   dns     the A and AAAA records of --dns-name, resolved every --dns-period on a thread of the
 *           source's own. Peers listen on the port of --dns-name "name:port" or, without one, on
 *           the port of this node's advertise address (every node listens on the same port, as
 *           with a Kubernetes headless service). --dns-server IP:PORT sends the queries to that
 *           server instead of the system resolver (tests use a small DNS server of their own). A
 *           failed lookup keeps the last list; an empty answer is a list of no peers.
 *   etcd    this node puts <prefix>/peers/<advertise-addr> under a lease of --peer-lease-ttl and
 *           keeps it alive (every TTL/3); one thread watches <prefix>/peers/ and reports every
 *           change. A node that dies leaves when its lease expires; sl_members_stop() revokes the
 *           lease, so a graceful stop leaves at once.
 *   k8s     the ready endpoints of a Service's EndpointSlices (or ready pods by label), listed
 *           and watched through the Kubernetes API on a thread of ctlplane/k8s.c.
 *   gossip  the "service=" address in the metadata of every alive or suspect limiter of the SWIM
 *           overlay (gossip/gossipnode.c, which the node starts with --gossip-addr; "role=" is
 *           limiter or absent); dead and left members drop out. Reported on the gossip thread.
 *
 * on_change runs on the source's thread (static: the caller's) and must not block for long.
 */
#ifndef SLUICE_CLUSTER_MEMBERS_H
#define SLUICE_CLUSTER_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "ctlplane/k8s.h"
#include "ctlplane/etcd.h"
#include "runtime/log.h"

typedef struct sl_members sl_members;

typedef void (*sl_members_fn)(void *ud, const char *const *addrs, size_t n);

/* Source kinds: the values of sl_discovery (config.h). */
enum { SL_MEMBERS_NONE = 0, SL_MEMBERS_STATIC = 1, SL_MEMBERS_DNS = 2, SL_MEMBERS_ETCD = 3,
       SL_MEMBERS_K8S = 4, SL_MEMBERS_GOSSIP = 5 };

struct sl_gossipnode;

/* Most peers a source reports (more are dropped with a warning). */
#define SL_MEMBERS_MAX 4096

typedef struct sl_members_config {
    int kind;
    const char *advertise_addr;        /* this node's peer address ("host:port") */
    /* static */
    const char *const *peers;
    size_t n_peers;
    /* dns */
    const char *dns_name;              /* "name" or "name:port" */
    const char *dns_server;            /* "IPv4:port", or NULL/"" for the system resolver */
    int64_t dns_period_ms;             /* 0 = 5000 */
    /* etcd */
    const char *const *etcd_endpoints; /* "http://127.0.0.1:2379" */
    size_t n_etcd_endpoints;
    const char *prefix;                /* storage prefix, e.g. "/sluice" */
    int64_t lease_ttl_ms;              /* 0 = 5000; rounded up to whole seconds (etcd's unit) */
    int64_t etcd_timeout_ms;           /* unary etcd calls; 0 = 2000 */
    sl_etcd_tls etcd_tls;              /* etcd over https:// */
    const sl_k8s_config *k8s;          /* k8s (copied by the source) */
    struct sl_gossipnode *gossip;      /* gossip: the node's overlay (not owned) */
    sl_logger *log;                    /* may be NULL */
    sl_members_fn on_change;
    void *ud;
} sl_members_config;

/* Start the source. 0 or a negative errno (-EINVAL: bad configuration). For etcd, the node is
 * registered and the first list reported before this returns, unless etcd is unreachable: then
 * the source keeps trying in the background and returns 0. */
int sl_members_start(const sl_members_config *cfg, sl_members **out);

/* Stop: a graceful leave (etcd: revoke the lease, which deletes our key), join the threads, free.
 * No on_change runs after this returns. */
void sl_members_stop(sl_members *m);

/* Changes reported so far. */
uint64_t sl_members_changes(const sl_members *m);

/*
 * Parse a DNS answer: append "address:port" for every A (type 1) or AAAA (28) record in msg into
 * out[] (strings malloc'd; the caller frees them), at most max. Returns the number appended or
 * -EPROTO for a malformed message, and then appends nothing. (Exposed for tests.)
 */
int sl_members_parse_dns(const uint8_t *msg, size_t len, uint16_t port, char **out, size_t max);

#endif

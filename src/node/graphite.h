/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graphite bridge: pushes a node's metrics registry to a Graphite (carbon) collector in the
 * plaintext protocol with tags, for infrastructures that collect by push rather than by scraping
 * GET /metrics (Levee's --graphite-addr). Every `period` a thread of its own renders the registry
 * with sl_metrics_render_graphite() (one line per series,
 * `<prefix>.<name>;<label>=<value>...;instance=<id> <value> <unix seconds>`) and sends it:
 *
 *   UDP  one sendto() per datagram; lines are packed whole into datagrams of at most
 *        max_datagram bytes (1400 by default: one Ethernet frame with room for IP and UDP headers,
 *        never fragmented); a line longer than that cannot be sent whole and is dropped (counted).
 *        UDP is fire-and-forget: a push counts as done when every datagram left the socket.
 *   TCP  one connection kept open across pushes. Before each push a readable socket (a collector
 *        never writes, so readable means it closed or reset) is replaced by a new connection, and a
 *        send that fails before any byte left is retried once on a new connection: a restarted
 *        collector loses no push. While the collector is down, connection attempts are spaced by an
 *        exponential backoff with jitter (backoff_min_ms doubling to backoff_max_ms, at most one
 *        attempt per push); pushes in between are counted as failures, not queued (every push
 *        carries the current value of every series, so the next one makes up for a lost one).
 *
 * Sockets are blocking with timeouts (SO_SNDTIMEO bounds connect and every send); the thread waits
 * for the next period on a condition variable, and sl_graphite_stop() wakes it and shuts the open
 * socket down (which aborts a blocking connect or send at once), so stopping takes milliseconds
 * whatever the collector does. Host names are resolved on the bridge's thread at each (re)connect
 * (TCP) or after a failed send (UDP); a stop during a DNS lookup waits for the resolver.
 *
 * There is no global state: each node starts its own bridge, which reads the registry it was
 * given. The registry, and whatever its collectors read, must outlive sl_graphite_stop().
 */
#ifndef SLUICE_NODE_GRAPHITE_H
#define SLUICE_NODE_GRAPHITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/log.h"
#include "runtime/metrics.h"

typedef enum sl_graphite_proto {
    SL_GRAPHITE_TCP = 0, /* the default without a suffix, as carbon's plaintext listener */
    SL_GRAPHITE_UDP = 1,
} sl_graphite_proto;

/* Longest host part of an address. */
#define SL_GRAPHITE_HOST_MAX 256

typedef struct sl_graphite_config {
    const char *addr;          /* "host:port[/udp|/tcp]", "[v6]:port/udp"; NULL or "" = off */
    int64_t period_ms;         /* between pushes; <= 0 = 10000 */
    const char *prefix;        /* put before every name ("sluice" -> sluice.<name>); NULL = none */
    const char *const *tags;   /* NULL-terminated name, value pairs added to every series, e.g.
                                * {"instance", id, NULL}; copied */
    sl_metrics *metrics;       /* required when addr is set */
    sl_logger *log;            /* may be NULL */
    int64_t timeout_ms;        /* connect and send timeout; <= 0 = 2000 */
    int64_t backoff_min_ms;    /* TCP reconnect backoff; <= 0 = 1000 */
    int64_t backoff_max_ms;    /* <= 0 = 60000 */
    size_t max_datagram;       /* UDP payload bound; 0 = 1400 (at least 64) */
} sl_graphite_config;

typedef struct sl_graphite_stats {
    uint64_t pushes;           /* periods whose lines were all sent */
    uint64_t failures;         /* periods not (or not fully) sent: collector down, send error, ... */
    uint64_t lines;            /* lines sent */
    uint64_t bytes;            /* bytes sent */
    uint64_t datagrams;        /* UDP datagrams sent */
    uint64_t dropped_lines;    /* UDP: lines longer than max_datagram, never sent */
    uint64_t connects;         /* TCP connections established */
    uint64_t connect_errors;   /* TCP connection attempts that failed (spaced by the backoff) */
    bool connected;            /* TCP: a connection is open; UDP: the socket is ready */
    int64_t last_push_ms;      /* wall clock of the last complete push; 0 = none yet */
    char last_error[160];      /* "" when the last push went through */
} sl_graphite_stats;

typedef struct sl_graphite sl_graphite;

/*
 * Parse "host:port[/udp|/tcp]" (no suffix = TCP). host is a name, an IPv4 address or "[v6]"
 * (written into `host` without brackets), port 1..65535. 0 or -EINVAL.
 */
int sl_graphite_parse_addr(const char *addr, char *host, size_t hostlen, uint16_t *port,
                           sl_graphite_proto *proto);

/*
 * Start pushing. With an empty or NULL address nothing starts: returns 0 with *out NULL. Errors:
 * -EINVAL (bad address, no registry), -ENOMEM, or a pthread error. The first push happens one
 * period after the start.
 */
int sl_graphite_start(const sl_graphite_config *cfg, sl_graphite **out);

/* Stop the thread (promptly: see above) and free everything. NULL is ignored. No last push. */
void sl_graphite_stop(sl_graphite *g);

/* A copy of the counters (any thread). */
void sl_graphite_stats_get(sl_graphite *g, sl_graphite_stats *out);

/* The transport in use ("udp" / "tcp"). */
const char *sl_graphite_proto_name(sl_graphite_proto p);

#endif

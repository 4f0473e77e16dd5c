/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gossipnode: the I/O driver of the SWIM membership (gossip/swim.c) for a node. It owns one
 * thread with its own libuv loop, a UDP socket and a TCP listener on --gossip-addr (the same
 * ip:port), and a timer set to the protocol's next deadline. Datagrams carry probes and gossip;
 * the TCP side carries the push/pull exchange, one length-prefixed message each way per
 * connection (u32 big-endian length, then the message), with a deadline. With a key ring
 * (gossip/keyring.c) every datagram and stream message is sealed with AES-256-GCM, naming this
 * node as its sender with the time, and a replay guard refuses what is old or seen before.
 *
 * Gossip is authenticated by default: without a key ring the node starts only on a loopback
 * address (a development cluster on one machine, with a warning) or with `insecure` (logged, and
 * every packet taken is counted as unauthenticated). Packets that do not authenticate are counted
 * and, per source, rate-limited before any decryption is tried; a push/pull connection takes one
 * of the max_streams slots only once its first frame has authenticated (until then it is one of
 * as many pending connections, each within the same deadline). Every member's address and
 * metadata are checked (gossip/swimmeta.h: a numeric ip:port service, bounded sizes) before the
 * protocol merges a packet.
 *
 * Consumers (--discovery gossip in cluster/members.c, later an observer or a proxy) either
 * subscribe to changes or take a snapshot of the member table:
 *   - sl_gossipnode_subscribe(): fn(ud, member, old_status) for every member present at once
 *     (old_status -1, on the caller's thread), then for every change on the gossip thread. fn runs
 *     with the node's lock held: it must not call sl_gossipnode_* and must not block.
 *   - sl_gossipnode_members(): a copy of the table, from any thread.
 * A member's metadata holds "service=<advertise-addr>" and "role=<role>" lines (gossip/swimmeta.h).
 *
 * sl_gossipnode_stop() leaves gracefully: it announces LEFT, keeps gossiping for a few gossip
 * intervals (at most 1 s) so the news spreads, then closes the sockets and joins the thread; the
 * table and the stats stay readable (a /metrics render during the drain) until _free.
 */
#ifndef SLUICE_GOSSIP_GOSSIPNODE_H
#define SLUICE_GOSSIP_GOSSIPNODE_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "runtime/log.h"
#include "gossip/swim.h"

typedef struct sl_gossipnode sl_gossipnode;

typedef struct sl_gossipnode_config {
    const char *addr;               /* --gossip-addr "ip:port" (numeric), bound and advertised */
    const char *name;               /* --gossip-name; NULL/"" = addr */
    const char *const *seeds;       /* --gossip-seeds */
    size_t n_seeds;
    const char *keyring_file;       /* --gossip-keyring-file; NULL/"" = no key ring: allowed only
                                     * on a loopback addr, or with insecure */
    int insecure;                   /* --gossip-insecure: no key ring on any address */
    uint64_t replay_window_ms;      /* --gossip-replay-window: sealed packets' age; 0 = 30000 */
    const uint8_t *meta;            /* our metadata (gossip/swimmeta.h) */
    size_t meta_len;
    sl_swim_config tun;             /* tunables; its name, addr, meta and callbacks are ignored */
    int64_t stream_timeout_ms;      /* one push/pull exchange; 0 = 5000 */
    unsigned max_streams;           /* push/pull connections open at once; 0 = 32 */
    sl_logger *log;                 /* may be NULL */
} sl_gossipnode_config;

/* Bind, join the seeds, start the thread. 0, or a negative errno with a reason in err. */
int sl_gossipnode_start(const sl_gossipnode_config *cfg, sl_gossipnode **out, char *err,
                        size_t errlen);
/* sluiced's --gossip-* options: nothing (0, *out NULL) without --gossip-addr; else the metadata
 * "service=<advertise-addr>", "role=limiter|proxy", the seeds (--gossip-seeds, then the observers
 * registered in etcd with --storage-addrs: gossip/gossipseeds.h) and the tunables, started. */
int sl_gossipnode_start_options(const sl_options *o, sl_logger *log, sl_gossipnode **out,
                                char *err, size_t errlen);
/* Leave gracefully and stop the thread (at most ~1 s); the table and stats stay readable until
 * sl_gossipnode_free. Idempotent; NULL is a no-op. */
void sl_gossipnode_stop(sl_gossipnode *g);
/* Stop (if not yet) and free. NULL is a no-op. */
void sl_gossipnode_free(sl_gossipnode *g);

typedef void (*sl_gossipnode_fn)(void *ud, const sl_swim_member *m, int old_status);
/* At most SL_GOSSIPNODE_MAX_SUBS subscribers: 0 or -ENOSPC. */
#define SL_GOSSIPNODE_MAX_SUBS 8
int sl_gossipnode_subscribe(sl_gossipnode *g, sl_gossipnode_fn fn, void *ud);
/* After this returns, fn is not running and will not run again. */
void sl_gossipnode_unsubscribe(sl_gossipnode *g, sl_gossipnode_fn fn, void *ud);

typedef struct sl_gossipnode_member {
    char name[SL_SWIM_MAX_NAME + 1];
    char addr[SL_SWIM_MAX_NAME + 1];
    uint8_t meta[SL_SWIM_MAX_META];
    size_t meta_len;
    sl_member_status status;
    uint32_t incarnation;
    int is_self;
} sl_gossipnode_member;

/* A copy of the member table into *out (free() it): the count, or -ENOMEM. *version, if not NULL,
 * gets the table's version (sl_swim_version) of the copy. */
int sl_gossipnode_members(sl_gossipnode *g, sl_gossipnode_member **out, uint64_t *version);
void sl_gossipnode_stats(sl_gossipnode *g, sl_swim_stats *out);
/* Read --gossip-keyring-file again (SIGHUP): 0, or a negative errno (the old ring stays). */
int sl_gossipnode_reload_keyring(sl_gossipnode *g, char *err, size_t errlen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_topology: the set of limiters a client-proxy sends to — a versioned list of members, each
 * with a name (its identity in HRW: the same name gets the same keys on every proxy), a service
 * address (host:port of its /attempt port) and a status. Today the list comes from
 * --proxy-limiters (sl_topology_parse); later a gossip or observer feed calls the same
 * add / remove / set-status functions as members join, leave and die, and the proxy follows
 * without a restart.
 *
 * Only ALIVE members take traffic: a LEFT limiter still answers what it has but gets nothing
 * new (a graceful stop), a DEAD one nothing at all. Every change that alters the list bumps the
 * version; readers (the proxy's worker loops) compare the version they built from with
 * sl_topology_version() — one atomic load per request — and copy the list again only when it
 * moved. Writers and readers may be on any thread (a mutex guards the list; the version is
 * atomic).
 */
#ifndef SLUICE_LEVEE_TOPOLOGY_H
#define SLUICE_LEVEE_TOPOLOGY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "base/member.h"

#define SL_TOPOLOGY_MAX_MEMBERS 256
/* Names and addresses are taken shorter than these (one byte under what an sl_member holds). */
#define SL_TOPOLOGY_MAX_NAME 64
#define SL_TOPOLOGY_MAX_ADDR 128

/* A limiter is an sl_member: name, service address, status; role is "". Its status is
 * SL_MEMBER_ALIVE, SL_MEMBER_LEFT (leaving: draining, no new traffic) or SL_MEMBER_DEAD. */
typedef struct sl_topology {
    pthread_mutex_t mu;
    _Atomic uint64_t version;   /* 1 after init; +1 per change */
    size_t n;
    sl_member m[SL_TOPOLOGY_MAX_MEMBERS];
} sl_topology;

void sl_topology_init(sl_topology *t);
void sl_topology_destroy(sl_topology *t);

/* Add a member, or update the address and status of the one with that name (the version moves
 * only when something changed). 0, -EINVAL (empty or too long name/address), -ENOSPC (full). */
int sl_topology_add(sl_topology *t, const char *name, const char *addr, sl_member_status st);
/* Remove by name: 0, or -ENOENT. */
int sl_topology_remove(sl_topology *t, const char *name);
/* Change a member's status: 0 (the version moves only when the status did), or -ENOENT. */
int sl_topology_set_status(sl_topology *t, const char *name, sl_member_status st);

/* The current version (any thread, lock-free). */
static inline uint64_t sl_topology_version(const sl_topology *t)
{
    return atomic_load_explicit(&t->version, memory_order_acquire);
}
/* Copy the members (at most cap) into out; returns how many there are and sets *version to the
 * version they belong to. */
size_t sl_topology_copy(sl_topology *t, sl_member *out, size_t cap, uint64_t *version);

/* Fill t from "name=host:port" items (--proxy-limiters), all ALIVE. A name given twice, an item
 * without '=' or a bad address is an error: 0 or -EINVAL with *bad pointing at the item. */
int sl_topology_parse(sl_topology *t, char *const *items, size_t n, const char **bad);

/* Make t hold exactly the "name=host:port" items (a static list read again, e.g. on SIGHUP):
 * members not listed are removed, listed ones added or their address updated (all ALIVE), in one
 * change (one version step, none when nothing changed). On a bad item (as sl_topology_parse)
 * nothing changes: -EINVAL with *bad set; -ENOMEM. *changed says whether the list moved. */
int sl_topology_sync(sl_topology *t, char *const *items, size_t n, const char **bad,
                     bool *changed);

#endif

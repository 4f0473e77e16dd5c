/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_member: a cluster member as every layer that keeps one sees it — the SWIM table
 * (gossip/swim.h), the gossip discovery's limiters (cluster/members.c), the observer's topology
 * updates (wire/topowire.h, levee/observer.c) and the client-proxy's limiter set
 * (levee/topology.h): its name, its service address, its role and its status. Here, in base,
 * the one layer all of them may include: gossip's protocol files use base only, and wire (the
 * observer's codec) may not use gossip. A place with more fields of its own embeds the record.
 *
 * The status numbers are the ones both wires carry (gossip's status byte, gossip/swimwire.h, and
 * MemberStatus in proto/levee_topology.proto); each codec asserts so at compile time, so a change
 * here cannot move a wire value silently. The order matters too: SWIM treats every status from
 * DEAD on as gone.
 */
#ifndef SLUICE_BASE_MEMBER_H
#define SLUICE_BASE_MEMBER_H

#include <stdbool.h>

#define SL_MEMBER_MAX_NAME 64   /* a gossip name (SWIM's cap), the identity in HRW */
#define SL_MEMBER_MAX_ADDR 128  /* a service address, "host:port" */
#define SL_MEMBER_MAX_ROLE 16   /* limiter, observer, proxy */

typedef enum sl_member_status {
    SL_MEMBER_ALIVE = 0,
    SL_MEMBER_SUSPECT = 1,  /* missed its probes; keeps its keys until declared dead */
    SL_MEMBER_DEAD = 2,
    SL_MEMBER_LEFT = 3,     /* announced a graceful leave: draining, no new traffic */
} sl_member_status;

#define SL_MEMBER_NSTATUS 4

typedef struct sl_member {
    char name[SL_MEMBER_MAX_NAME + 1];
    char service[SL_MEMBER_MAX_ADDR + 1];  /* "" when it has none */
    char role[SL_MEMBER_MAX_ROLE + 1];     /* "" when unknown */
    sl_member_status status;
} sl_member;

/* "alive", "suspect", "dead", "left" (the /metrics labels and the logs' words), or "unknown". */
const char *sl_member_status_name(sl_member_status st);
/* Alive or suspect: still a member (a suspect keeps its share until it is declared dead). */
static inline bool sl_member_status_live(sl_member_status st)
{
    return st == SL_MEMBER_ALIVE || st == SL_MEMBER_SUSPECT;
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_topowire: the observer's topology stream on the wire (proto/levee_topology.proto,
 * sluice.levee.v1.TopologyUpdate), as pure functions over buffers: the observer encodes one
 * update per change, the client-proxy decodes them. The decoder is written for hostile input:
 * every string has a fixed cap, the member count is capped by the caller's array, unknown
 * fields are skipped, and a malformed message is refused whole (-EINVAL), never half applied.
 */
#ifndef SLUICE_WIRE_TOPOWIRE_H
#define SLUICE_WIRE_TOPOWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define SL_TOPOWIRE_MAX_NAME 64     /* the gossip layer's name cap (SL_SWIM_MAX_NAME) */
#define SL_TOPOWIRE_MAX_ROLE 16
#define SL_TOPOWIRE_MAX_ADDR 128

typedef enum sl_topowire_status {
    SL_TOPOWIRE_ALIVE = 0,
    SL_TOPOWIRE_SUSPECT = 1,
    SL_TOPOWIRE_DEAD = 2,
    SL_TOPOWIRE_LEFT = 3,
} sl_topowire_status;

typedef struct sl_topowire_member {
    char name[SL_TOPOWIRE_MAX_NAME + 1];
    char role[SL_TOPOWIRE_MAX_ROLE + 1];
    char service[SL_TOPOWIRE_MAX_ADDR + 1];
    char gossip[SL_TOPOWIRE_MAX_ADDR + 1];
    sl_topowire_status status;
    uint32_t incarnation;
} sl_topowire_member;

typedef struct sl_topowire_update {
    uint64_t version;
    bool full;
    size_t n;                       /* members decoded into the caller's array */
} sl_topowire_update;

/* Append one update, gRPC-framed (5-byte prefix), to out. Strings longer than their cap are
 * cut. 0 or -ENOMEM / -EMSGSIZE. */
int sl_topowire_encode(sl_buf *out, uint64_t version, bool full, const sl_topowire_member *m,
                       size_t n);

/* Decode one TopologyUpdate message (without the gRPC prefix) into *u and members[0..cap).
 * 0; -EINVAL malformed (truncated, bad wire type, a string over its cap, a status out of range);
 * -E2BIG more than cap members. */
int sl_topowire_decode(const uint8_t *p, size_t n, sl_topowire_update *u,
                       sl_topowire_member *members, size_t cap);

const char *sl_topowire_status_name(sl_topowire_status st);

#endif

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
#include "base/member.h"

#define SL_TOPOWIRE_MAX_NAME SL_MEMBER_MAX_NAME /* the gossip layer's name cap */
#define SL_TOPOWIRE_MAX_ROLE SL_MEMBER_MAX_ROLE
#define SL_TOPOWIRE_MAX_ADDR SL_MEMBER_MAX_ADDR

/* A Member: the record (name, service, role, status: MemberStatus goes on the wire as its
 * sl_member_status number, the same numbering) and what only the stream carries. */
typedef struct sl_topowire_member {
    sl_member mb;
    char gossip[SL_TOPOWIRE_MAX_ADDR + 1];
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

#endif

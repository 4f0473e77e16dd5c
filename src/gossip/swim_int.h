/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The SWIM state shared by the module's two halves and by nothing else: gossip/swimtable.c (the
 * member table, the rules that merge news about a member, suspicion, and the dissemination queue
 * whose updates ride on every datagram) and gossip/swim.c (the protocol: construction, the probe
 * round with ping-req relays and Lifeguard's health multiplier, receiving, timers, push/pull,
 * join and leave). The public API is gossip/swim.h.
 *
 * A member (mem) is one row of the table: its status, incarnation, suspicion timer and its place
 * in the dissemination queue; s->v holds every member (ourselves included) in probe order, the
 * name map finds them by name, s->bcq holds those with an update queued.
 */
#ifndef SLUICE_GOSSIP_SWIM_INT_H
#define SLUICE_GOSSIP_SWIM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/strmap.h"
#include "gossip/swim.h"

/* Relayed probes (PING_REQ) waiting for the target's ack: bounded, the rest are dropped. */
#define SL_SWIM_MAX_RELAYS 64
/* Distinct confirmations of a suspicion we remember (Lifeguard needs K, k indirect probes). */
#define MAX_CONFIRM 16
#define NONE ((size_t)-1)

typedef struct mem {
    char name[SL_SWIM_MAX_NAME + 1];
    char addr[SL_SWIM_MAX_NAME + 1];
    uint8_t meta[SL_SWIM_MAX_META];
    size_t meta_len;
    uint8_t status;
    uint32_t inc;
    size_t idx;             /* position in s->v */
    uint64_t since;         /* when the status last changed */
    /* suspicion */
    uint64_t susp_start, susp_deadline;
    unsigned n_confirm;
    uint64_t confirm[MAX_CONFIRM]; /* name hashes of who suspects it */
    /* dissemination */
    size_t bc_pos;          /* position in s->bcq, or NONE */
    unsigned bc_sent;
    char bc_from[SL_SWIM_MAX_NAME + 1];
} mem;

typedef struct relay {
    int used;
    uint32_t seq, orig_seq;
    char requester[SL_SWIM_MAX_NAME + 1];
    uint64_t nack_at;
} relay;

struct sl_swim {
    sl_swim_config c;
    mem *self;
    mem **v;                /* every member, ourselves included */
    size_t n;
    sl_strmap byname;       /* name -> mem* */
    mem **bcq;              /* members with a queued update */
    size_t nbc;
    unsigned count[SL_MEMBER_NSTATUS]; /* members by status, ourselves included */
    uint64_t rng;
    uint32_t seq;
    uint64_t version;
    unsigned lhm;
    int leaving;
    /* the probe under way */
    struct {
        int active, acked, indirect_sent;
        char target[SL_SWIM_MAX_NAME + 1];
        uint32_t seq;
        unsigned nacks_expected, nacks;
        uint64_t timeout_at, end_at;
    } probe;
    size_t probe_pos;
    uint64_t next_probe_at, next_gossip_at, next_pp_at, next_join_at, next_reap_at;
    uint64_t next_stranger_pp_at; /* push/pull with a prober we do not know: once a period */
    relay relays[SL_SWIM_MAX_RELAYS];
    char **seeds;
    size_t nseeds;
    sl_swim_stats st;
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
};

/* --- small helpers, inline: both halves use them */

static inline uint64_t rnd(sl_swim *s)
{
    /* xorshift64* */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 0x2545F4914F6CDD1Dull;
}

static inline mem *find(const sl_swim *s, const char *name, size_t len)
{
    sl_strmap_ent *e = sl_strmap_find(&s->byname, 0, name, len);
    return e ? *(mem **)sl_strmap_val(e) : NULL;
}

static inline unsigned live_count(const sl_swim *s)
{
    return s->count[SL_MEMBER_ALIVE] + s->count[SL_MEMBER_SUSPECT];
}

static inline uint64_t scaled(const sl_swim *s, uint32_t ms)
{
    return (uint64_t)ms * (s->lhm + 1);
}

static inline void lhm_add(sl_swim *s, int d)
{
    int v = (int)s->lhm + d;
    if (v < 0)
        v = 0;
    if (v > (int)s->c.lhm_max)
        v = (int)s->c.lhm_max;
    s->lhm = (unsigned)v;
}

/* --- the member table and dissemination (swimtable.c) */

/* The member's status changed (or its address or metadata): bump the version, tell on_change. */
void sl_swimint_changed(sl_swim *s, mem *m, int old);
/* Set a member's status, keeping the counts by status; `since` is `now` on a change. */
void sl_swimint_set_status(sl_swim *s, mem *m, uint8_t st, uint64_t now);
/* Queue m's current state for piggybacking (`from` names the accuser of a suspicion, or ""). */
void sl_swimint_queue(sl_swim *s, mem *m, const char *from);
/* m's state as a wire update, `from` as its accuser. */
void sl_swimint_to_update(const mem *m, const char *from, sl_swimwire_update *u);
/* Append queued updates (not `skip`'s) to a datagram of `len` bytes; returns the new length. */
size_t sl_swimint_piggyback(sl_swim *s, uint8_t *buf, size_t len, const mem *skip);
/* Add an alive member from an update; NULL when the table is full or out of memory. */
mem *sl_swimint_add_member(sl_swim *s, const sl_swimwire_update *u, uint64_t now);
/* Remove and free a member (dead or left for long enough). */
void sl_swimint_remove_member(sl_swim *s, mem *m);
/* Suspect m at `inc`, accused by `from` (a confirmation when already suspect at `inc`). */
void sl_swimint_suspect(sl_swim *s, mem *m, uint32_t inc, const char *from, size_t from_len,
                        uint64_t now);
/* Where a message came from: the datagram's source address (NULL for a stream, which is never
 * first-hand), and the name that speaks (the sealed sender, else the message's source field; may
 * be empty). */
typedef struct sl_swimint_origin {
    const char *from;
    const char *name;
    size_t name_len;
} sl_swimint_origin;
/* Merge every update a message carries: 0, or -EBADMSG when check_member refused one (then none
 * is merged, and the drop is counted). */
int sl_swimint_apply_all(sl_swim *s, const sl_swimwire_msg *msg, const sl_swimint_origin *o,
                         uint64_t now);

#endif

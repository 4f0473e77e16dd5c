/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swim: SWIM membership with Lifeguard's refinements, as a sans-I/O state machine. It reads no
 * clock and owns no socket: the caller passes `now` (ms) to every call, feeds it received packets
 * (sl_swim_recv for datagrams, sl_swim_recv_stream for the push/pull exchange over a stream) and
 * sends what it asks for through two callbacks. So one process can run a 100-node cluster over a
 * fake transport on a virtual clock (tests/unit/gossip), and the daemon runs it over libuv.
 *
 * What it does (Das, Gupta, Motivala 2002; Dadgar, Phillips, Currey 2018 "Lifeguard"):
 *   - failure detection: every probe period, ping the next member of a shuffled round; no ack
 *     within the probe timeout -> ask k others to ping it (PING_REQ); no ack, direct or relayed, by
 *     the end of the period -> the member is suspect.
 *   - suspicion: a suspect member becomes dead when its suspicion timer runs out, unless it refutes
 *     by announcing itself alive with a higher incarnation number. A probe of a suspect member
 *     carries its suspicion, so it hears it even if every gossiped copy missed it. The timer
 *     starts at max = beta * min and shrinks towards min = alpha * log10(N) * probe interval as
 *     independent members confirm the suspicion (Lifeguard's dynamic suspicion: after C of K
 *     expected confirmations, max - (max - min) * log(C + 1) / log(K + 1)).
 *   - local health (Lifeguard's LHM): a saturating counter 0..lhm_max that goes up when our own
 *     probe fails, when a relay sends no NACK back, and when we have to refute a suspicion of
 *     ourselves, and down when a probe succeeds; the probe interval and timeout are multiplied by
 *     (LHM + 1), so a node that is itself slow stops accusing healthy ones.
 *   - dissemination: every change about a member is queued once (a newer one replaces it) and
 *     piggybacked on pings, acks and gossip packets, at most lambda * ceil(log10(N + 1)) times,
 *     least-sent first; every gossip interval a gossip packet goes to `fanout` random members.
 *   - anti-entropy: every push/pull interval, a full-state exchange over a stream with one random
 *     member (a dead one too, so that both halves of a healed partition find each other again);
 *     joining is a push/pull to each seed, repeated while no member answers; a ping from a member
 *     we do not know (its join missed us) starts a push/pull with it, at most once a period.
 *   - graceful leave: sl_swim_leave() announces LEFT with a higher incarnation.
 *   - trust: a member contradicts any news about itself that differs from its own state (an ALIVE
 *     with another address or metadata, a SUSPECT, DEAD or LEFT at any incarnation) by announcing
 *     itself at a higher incarnation. Incarnations saturate at UINT32_MAX instead of wrapping; at
 *     UINT32_MAX, where no higher number is left to refute with, news about a member at
 *     UINT32_MAX changes it only first-hand: an ALIVE or LEFT that the member itself sent (the
 *     datagram came from the update's own address, and its source or sealed sender is the
 *     member), while second-hand SUSPECT/DEAD/LEFT at UINT32_MAX is ignored and each node relies
 *     on its own probes (its own failed probe still suspects, and its suspicion still kills). So
 *     a forged DEAD at 0xFFFFFFFF cannot lock a live member out: it answers first-hand.
 *     PING_REQ relays only to a member we know, at the address we know; a ping from a stranger
 *     is answered with a push of our own record only, never the whole table.
 *
 * A member has a unique name, an address ("ip:port": where its datagrams and stream go), an
 * opaque metadata blob (up to SL_SWIM_MAX_META bytes; sluiced puts its service address and role
 * there) and a status. The table is bounded (max_members); dead and left members are kept for
 * dead_keep_ms (so that late news about them cannot resurrect them) and then forgotten.
 *
 * Consumers read the table with sl_swim_member_count/_at/_find and subscribe with on_change; the
 * table's version (sl_swim_version) counts changes, for observers that stream a view.
 * Not thread-safe: one owner (the driver's loop) calls everything.
 */
#ifndef SLUICE_GOSSIP_SWIM_H
#define SLUICE_GOSSIP_SWIM_H

#include <stddef.h>
#include <stdint.h>

#include "base/member.h"
#include "gossip/swimwire.h"

#define SL_SWIM_MAX_NAME SL_SWIMWIRE_MAX_NAME
#define SL_SWIM_MAX_META SL_SWIMWIRE_MAX_META

/* A member as consumers see it; the strings stay valid until the next call into the swim. */
typedef struct sl_swim_member {
    const char *name;
    const char *addr;
    const uint8_t *meta;
    size_t meta_len;
    sl_member_status status;
    uint32_t incarnation;
    int is_self;
} sl_swim_member;

/* Why a received packet was dropped (sl_swim_stats.dropped[]). */
typedef enum {
    SL_SWIM_DROP_MALFORMED,  /* the codec refused it */
    SL_SWIM_DROP_OVERSIZE,   /* over the datagram or stream cap */
    SL_SWIM_DROP_VERSION,    /* another protocol version */
    SL_SWIM_DROP_WRONG_NODE, /* a ping for another name (an address reused by a new node) */
    SL_SWIM_DROP_UNEXPECTED, /* an ack nobody waits for, a PULL outside an exchange, ... */
    SL_SWIM_DROP_QUEUE_FULL, /* a relay request when SL_SWIM_MAX_RELAYS are pending */
    SL_SWIM_DROP_TABLE_FULL, /* a new member when the table holds max_members */
    SL_SWIM_DROP_DECRYPT,    /* for the driver: a packet no key of the ring opens */
    SL_SWIM_DROP_META,       /* an update whose address or metadata check_member refused */
    SL_SWIM_DROP_UNKNOWN_TARGET, /* a PING_REQ for a member we do not know at that address */
    SL_SWIM_DROP_SENDER,     /* a packet whose source is not its sealed sender */
    SL_SWIM_DROP_REPLAY,     /* for the driver: a sealed packet seen before */
    SL_SWIM_DROP_STALE,      /* for the driver: a sealed packet outside the replay window */
    SL_SWIM_DROP_RATE_LIMITED, /* for the driver: unauthenticated packets over a source's rate */
    SL_SWIM_DROP_NREASONS
} sl_swim_drop;

const char *sl_swim_drop_name(sl_swim_drop d);

typedef struct sl_swim_stats {
    uint64_t probes_sent, probes_failed;       /* direct probes, and those ending in suspicion */
    uint64_t indirect_probes_sent, nacks_received;
    uint64_t suspicions, refutations;          /* suspicions raised here; refutations of ourselves */
    uint64_t deaths;                           /* members this node declared dead */
    uint64_t packets_sent, packets_received, bytes_sent, bytes_received;
    uint64_t pushpulls_sent, pushpulls_received;
    uint64_t updates_sent, updates_received;
    uint64_t dropped[SL_SWIM_DROP_NREASONS];
    uint64_t unauthenticated;                  /* packets taken without a key ring (driver) */
    uint64_t refuted_news;                     /* news about ourselves that we contradicted */
    unsigned members[SL_MEMBER_NSTATUS];       /* by sl_member_status, ourselves included */
    unsigned lhm;                              /* the local health multiplier now */
} sl_swim_stats;

typedef struct sl_swim_callbacks {
    void *ctx;
    /* send one datagram to addr (the driver may drop it: SWIM expects loss) */
    void (*send)(void *ctx, const char *addr, const uint8_t *p, size_t len);
    /* open a stream to addr, send p, and feed the answer to sl_swim_recv_stream (or nothing if
     * the exchange fails) */
    void (*send_stream)(void *ctx, const char *addr, const uint8_t *p, size_t len);
    /* a member appeared (old_status < 0) or changed status, address or metadata */
    void (*on_change)(void *ctx, const sl_swim_member *m, int old_status);
    /* optional: whether a member's address and metadata are acceptable (0) or not (< 0); a packet
     * carrying one update that is not is dropped whole (SL_SWIM_DROP_META). NULL: opaque. */
    int (*check_member)(void *ctx, const char *addr, size_t addr_len, const uint8_t *meta,
                        size_t meta_len);
} sl_swim_callbacks;

typedef struct sl_swim_config {
    const char *name;              /* unique in the cluster; 1..64 printable ASCII */
    const char *addr;              /* where others reach us, "ip:port" */
    const uint8_t *meta;
    size_t meta_len;
    uint32_t probe_interval_ms;    /* 1000: the base probe period */
    uint32_t probe_timeout_ms;     /* 500: direct ack deadline (before LHM scaling) */
    uint32_t indirect_probes;      /* 3: k members asked to probe for us */
    uint32_t retransmit_mult;      /* 4: lambda, an update goes out lambda * ceil(log10(N+1)) times */
    uint32_t suspicion_min_mult;   /* 4: alpha, min timeout = alpha * max(1, log10 N) * interval */
    uint32_t suspicion_max_mult;   /* 6: beta, max timeout = beta * min timeout */
    uint32_t lhm_max;              /* 8: the local health multiplier's ceiling */
    uint32_t gossip_interval_ms;   /* 200 */
    uint32_t gossip_fanout;        /* 3 */
    uint32_t pushpull_interval_ms; /* 30000; UINT32_MAX = never (joining still pushes) */
    uint32_t dead_keep_ms;         /* 300000: how long dead and left members are remembered */
    uint32_t max_members;          /* 1024 */
    size_t max_stream_bytes;       /* 1 MiB: a push/pull exchange, each way */
    uint64_t seed;                 /* random choices (probe order, relays, gossip targets) */
    sl_swim_callbacks cb;
} sl_swim_config;

typedef struct sl_swim sl_swim;

/* Fill the defaults above into the zero fields of *c. */
void sl_swim_config_defaults(sl_swim_config *c);
/* 0 and *out, or -EINVAL (bad name/addr/meta; a reason in err) or -ENOMEM. Zero tunables get
 * their defaults. */
int sl_swim_new(const sl_swim_config *c, uint64_t now_ms, sl_swim **out, char *err, size_t errlen);
void sl_swim_free(sl_swim *s);

/* Ask the seeds ("ip:port" each) for their state; repeated every probe interval while we know no
 * other member. Replaces an earlier seed list. 0 or -ENOMEM / -EINVAL. */
int sl_swim_join(sl_swim *s, const char *const *seeds, size_t n, uint64_t now_ms);
/* Run timers: probes, suspicion timeouts, gossip, push/pull, reaping. Call at least every
 * sl_swim_next_deadline(). */
void sl_swim_tick(sl_swim *s, uint64_t now_ms);
/* The earliest time sl_swim_tick has something to do. */
uint64_t sl_swim_next_deadline(const sl_swim *s);
/* A datagram from address `from`. Bad ones are dropped and counted, never fatal. */
void sl_swim_recv(sl_swim *s, const char *from, const uint8_t *p, size_t len, uint64_t now_ms);
/* The same for a datagram the driver opened with its key ring: `sender` is the sealed (so
 * authenticated) sender's name; a packet whose source field names someone else is dropped
 * (SL_SWIM_DROP_SENDER). */
void sl_swim_recv_sealed(sl_swim *s, const char *from, const char *sender, const uint8_t *p,
                         size_t len, uint64_t now_ms);
/* A stream message (PUSH or PULL, whole). A PUSH is answered with our PULL through `reply`
 * (called at most once, within this call); returns 0, or a negative errno if it was dropped. */
int sl_swim_recv_stream(sl_swim *s, const char *from, const uint8_t *p, size_t len,
                        uint64_t now_ms,
                        void (*reply)(void *rctx, const uint8_t *p, size_t len), void *rctx);
/* Count a packet the driver dropped before the protocol saw it (undecryptable, over a cap). */
void sl_swim_count_drop(sl_swim *s, sl_swim_drop why);
/* Count a packet the driver passed on without authenticating it (no key ring). */
void sl_swim_count_unauthenticated(sl_swim *s);
/* Leave gracefully: announce LEFT to fanout members now and on later gossip; the caller keeps
 * ticking for a short while (a few gossip intervals) before it stops. */
void sl_swim_leave(sl_swim *s, uint64_t now_ms);
/* Replace our metadata (a new incarnation, gossiped). 0 or -EINVAL. */
int sl_swim_set_meta(sl_swim *s, const uint8_t *meta, size_t len, uint64_t now_ms);

size_t sl_swim_member_count(const sl_swim *s);
/* The i-th member (any order, stable until the table changes). 0 or -ENOENT. */
int sl_swim_member_at(const sl_swim *s, size_t i, sl_swim_member *out);
int sl_swim_member_find(const sl_swim *s, const char *name, sl_swim_member *out);
/* Counts every change to the table (status, address, metadata, a member added or forgotten). */
uint64_t sl_swim_version(const sl_swim *s);
void sl_swim_get_stats(const sl_swim *s, sl_swim_stats *out);
/* Our own name and incarnation. */
const char *sl_swim_name(const sl_swim *s);
uint32_t sl_swim_incarnation(const sl_swim *s);

#endif

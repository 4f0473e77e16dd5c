/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bound on buffered request bytes across every connection of a server (--max-request-memory).
 *
 * Each connection already has its own budgets (conn_buffer_bytes, max_body_bytes), but ten thousand
 * connections each holding 8 MiB of unfinished bodies would hold 80 GiB. One sl_reqmem, owned by
 * the server object and shared by its workers (no process-wide state: several servers in one
 * process each have theirs), counts the request bytes the exchanges of all its connections hold,
 * from the first header byte appended to an exchange's arena until the exchange is released.
 *
 * The count is one atomic, but a worker does not touch it per byte: each worker's context holds a
 * local account (sl_reqmem_acct) that takes credit from the shared count in chunks of
 * SL_REQMEM_CHUNK and gives it back when it holds two chunks more than it uses, so the atomic moves
 * only when a worker's holding changes by about 64 KiB. The shared count is therefore the sum of
 * what the workers use plus their spare credit: never below the exact sum, at most
 * slack = accounts * 2 * SL_REQMEM_CHUNK above it.
 *
 * The count is over when it passes limit + slack, so that only an exact sum above the limit can
 * make it so (spare credit alone never does). Over, requests bringing a body larger than
 * SL_REQMEM_SMALL_BODY are answered 503 (gRPC: RESOURCE_EXHAUSTED) by h1.c/h2.c (small ones, a
 * good client's, go on: they hold next to nothing, and the connections that hold the bytes are
 * the ones closed), and the workers close their connections holding the most
 * request bytes, among those holding at least limit / open connections (on a read or a tick:
 * server.c), until the count is below 7/8 of the limit, so that new requests find room again.
 * The bound holds to within the slack (128 KiB per worker) and what arrives before the next read
 * or tick acts; both events are counted here.
 */
#ifndef SLUICE_NET_REQMEM_H
#define SLUICE_NET_REQMEM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The text of the 503 / RESOURCE_EXHAUSTED answer. */
#define SL_REQMEM_REFUSED_TEXT "server busy: buffered request bytes at --max-request-memory\n"

#define SL_REQMEM_CHUNK ((size_t)64 * 1024)
/* Over the bound, requests with a body up to this still go on (a good client's calls are small);
 * larger ones are refused. Each connection holding at least limit / connections is closable. */
#define SL_REQMEM_SMALL_BODY ((size_t)16 * 1024)
/* The default's floor and fraction of physical memory (sl_reqmem_default). */
#define SL_REQMEM_MIN_DEFAULT ((uint64_t)64 << 20)
#define SL_REQMEM_PHYS_FRACTION 8

typedef struct sl_reqmem {
    _Atomic uint64_t used;     /* credit taken by the workers' accounts, bytes */
    uint64_t limit;            /* 0: unbounded (counted, never refused) */
    uint64_t slack;            /* spare credit the accounts may hold together */
    _Atomic uint64_t refused;  /* requests answered 503 / RESOURCE_EXHAUSTED for the bound */
    _Atomic uint64_t closed;   /* connections closed for holding the most when over */
    _Atomic uint64_t peak;     /* highest `used` seen */
} sl_reqmem;

/* One worker's account (in its sl_http_ctx): touched by that worker's thread only. */
typedef struct sl_reqmem_acct {
    sl_reqmem *m;   /* NULL: nothing shared (tests, fuzzers, the admin listener) */
    size_t used;    /* bytes held by this worker's exchanges */
    size_t credit;  /* bytes taken from m->used */
} sl_reqmem_acct;

typedef struct sl_reqmem_stats {
    uint64_t limit, used, peak, refused, closed;
} sl_reqmem_stats;

/* accounts: how many sl_reqmem_acct will share it (the server's workers). */
void sl_reqmem_init(sl_reqmem *m, uint64_t limit, unsigned accounts);

/* The default limit for a machine with phys_bytes of memory: phys_bytes / 8, at least 64 MiB.
 * phys_bytes 0 reads the machine's (sysconf). */
uint64_t sl_reqmem_default(uint64_t phys_bytes);

/* Charge / release n bytes to a worker's account (the shared count moves by whole chunks: the
 * out-of-line halves, sl_reqmem_take / sl_reqmem_give, only when the credit runs out or two
 * chunks are spare). */
void sl_reqmem_take(sl_reqmem_acct *a);
void sl_reqmem_give(sl_reqmem_acct *a);
static inline void sl_reqmem_charge(sl_reqmem_acct *a, size_t n)
{
    a->used += n;
    if (a->used > a->credit && a->m)
        sl_reqmem_take(a);
}
static inline void sl_reqmem_release(sl_reqmem_acct *a, size_t n)
{
    a->used = n > a->used ? 0 : a->used - n;
    if (a->credit - a->used > 2 * SL_REQMEM_CHUNK && a->m)
        sl_reqmem_give(a);
}

/* True when the shared count is above limit + slack (a relaxed load: callers may be a chunk
 * late). */
static inline bool sl_reqmem_over(const sl_reqmem *m)
{
    return m && m->limit &&
           atomic_load_explicit(&m->used, memory_order_relaxed) > m->limit + m->slack;
}

/* True while the count is above 7/8 of the limit (+ slack): where closing connections stops,
 * so that new requests find room again before the bound is reached. */
static inline bool sl_reqmem_above_low(const sl_reqmem *m)
{
    return m && m->limit &&
           atomic_load_explicit(&m->used, memory_order_relaxed) >
               m->limit - m->limit / 8 + m->slack;
}

void sl_reqmem_count_refused(sl_reqmem *m);
void sl_reqmem_count_closed(sl_reqmem *m);
void sl_reqmem_stats_get(const sl_reqmem *m, sl_reqmem_stats *out);

#endif

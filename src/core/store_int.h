/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The key store's internals, shared by the files of the store module and by nothing else:
 * core/store.c (the table, eviction, expiry, decisions) and core/storeio.c (export and import, the
 * walk that state hand-off and snapshots use). The layout and the rules behind it (slot format,
 * shard cache lines, locking) are described at the top of store.c; sl_store's public interface is
 * core/store.h. Everything here is static inline or hidden, so that splitting the module costs the
 * decision path nothing.
 */
#ifndef SL_CORE_STORE_INT_H
#define SL_CORE_STORE_INT_H

#include "core/store.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_slot {
    uint64_t hash; /* 0 = empty */
    uint64_t meta; /* expire_at << 16 | lru stamp */
    sl_state st;
} sl_slot;

_Static_assert(sizeof(sl_slot) == 64, "a slot is one cache line");

#define SLOT_ALIGN 64
#define EXP_MAX (((int64_t)1 << 47) - 1)
#define EXP_MIN (-((int64_t)1 << 47))

typedef struct sl_shard {
    /* Line 0, the only one a decision on a held key writes: with two threads deciding on random
     * keys, a shard's line moves between cores on about every other decision, so everything the
     * hot path writes shares the lock's line. Decision counts are 32-bit here and folded into the
     * 64-bit totals of line 2 before they can wrap. */
    uint32_t lock;
    uint32_t count;     /* keys held (stored atomically: evict_elsewhere() reads it unlocked) */
    uint32_t recent[SL_ALGORITHM_COUNT][2];
    /* Line 1: read on every decision, written only when the table changes shape. */
    sl_slot *tab;       /* written atomically: sl_store_prefetch() reads it unlocked */
    uint32_t cap;       /* slots in tab; idem */
    uint32_t grow_at;   /* an insert at this count grows the table (or evicts, at cap_max) */
    uint32_t limit;     /* most keys held */
    uint32_t cap_max;
    uint32_t evict_hand;
    uint32_t expire_hand;
    uint64_t side_bytes;
    uint64_t evictions, expirations, errors;
    /* Lines 2-4. */
    uint64_t decisions[SL_ALGORITHM_COUNT][2];
    uint64_t collections; /* keys removed by sl_store_collect() for idleness */
    uint64_t evictions_limited; /* evicted while at their limit (sl_alg_info_of LIMITED) */
    uint32_t limited_unit; /* stamp unit + 1 of a full scan that found only limited keys; 0 none */
} __attribute__((aligned(64))) sl_shard;

_Static_assert(offsetof(sl_shard, tab) == 64,
               "what a decision writes must stay within the shard's first cache line");

/* Folding threshold for the 32-bit decision counts. */
#define RECENT_FOLD (1u << 31)

struct sl_store {
    sl_shard *shards;
    uint64_t mask;
    unsigned nshards;
    size_t max_keys;
    uint64_t shard_mem;                   /* bytes a shard may hold (table + side buffers); 0 any */
    sl_alg_config alg;
    int64_t expiry_grace; /* ms: the sweeps keep a key this long past its expiry */
    unsigned expire_next;                 /* next shard sl_store_expire() starts at (atomic) */
    pthread_mutex_t collect_mu;           /* sl_store_collect()'s cursor: */
    unsigned collect_shard;               /*   shard being walked */
    uint32_t collect_pos;                 /*   next slot in it */
    _Alignas(64) size_t nkeys;            /* keys held + inserts in progress (atomic) */
    char pad[64 - sizeof(size_t)];
};

/* Contended shard lock: spins with backoff, then yields (store.c). Hidden: called directly, never
 * through the PLT. */
__attribute__((visibility("hidden"))) void sl_store_lock_slow(sl_shard *sh);

static inline void shard_lock(sl_shard *sh)
{
    if (__builtin_expect(__atomic_exchange_n(&sh->lock, 1, __ATOMIC_ACQUIRE), 0))
        sl_store_lock_slow(sh);
}

static inline bool shard_trylock(sl_shard *sh)
{
    return !__atomic_load_n(&sh->lock, __ATOMIC_RELAXED) &&
           !__atomic_exchange_n(&sh->lock, 1, __ATOMIC_ACQUIRE);
}

static inline void shard_unlock(sl_shard *sh)
{
    __atomic_store_n(&sh->lock, 0, __ATOMIC_RELEASE);
}

static inline int64_t meta_expire(uint64_t meta)
{
    int64_t v = (int64_t)meta >> 16; /* arithmetic shift (gcc, clang) restores the sign */
    return v == EXP_MAX ? INT64_MAX : v == EXP_MIN ? INT64_MIN : v;
}

#endif

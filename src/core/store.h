/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's key store: a fixed number of shards, each an open-addressing hash table of 64-byte
 * slots (key hash, expiry + LRU stamp, algorithm state) behind its own lock. The store never sees
 * key strings: callers hash (name, unique_key) with a per-engine seed and pass the 64-bit hash
 * (engine.c). The store runs the algorithm (core/alg.h) on a key's state with the key's shard
 * locked, so decisions on one key are linearizable and decisions on other shards run in parallel.
 *
 * Bounded memory: at most `max_keys` keys in total and at most `max_bytes` bytes of tables and side
 * buffers (each shard keeps within its share, evicting in the same order, refusing a new key whose
 * buffer alone cannot fit); a table grows x2 up to a per-shard maximum
 * derived from max_keys; a full shard evicts an information-free key if it finds one, else an
 * approximately least recently used key not at its limit, and a key at its limit last.
 * The layout and its reasons are described at the top of store.c.
 */
#ifndef SLUICE_CORE_STORE_H
#define SLUICE_CORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/alg.h"
#include "sluice/engine.h"

typedef struct sl_store sl_store;

typedef struct sl_store_config {
    size_t max_keys;        /* > 0: hard cap on keys held */
    uint64_t max_bytes;     /* cap on tables + side buffers, split evenly over the shards; 0 none */
    unsigned shards;        /* power of two, >= 1; reduced when max_keys is too small for it */
    sl_alg_config alg;      /* passed to sl_alg_decide() */
    /* The sweeps (sl_store_expire, sl_store_collect) remove a key only this long after its
     * expiry: a request stamped up to this far in the past (created_at within max-clock-skew) is
     * still decided in the key's window. 0: at its expiry. */
    int64_t expiry_grace_ms;
} sl_store_config;

/* Most shards a store accepts (a shard costs a few hundred bytes plus its table). */
#define SL_STORE_MAX_SHARDS 65536u

/* The error of a new key whose side buffer alone exceeds a shard's share of max_bytes. */
extern const char sl_store_err_memory[];

/* 0, -EINVAL (max_keys 0, shards not a power of two or too many) or -ENOMEM. */
int sl_store_new(const sl_store_config *cfg, sl_store **out);
/* Frees every table and every side buffer (sl_alg_release). NULL is ignored. */
void sl_store_free(sl_store *s);

/* Shards actually used (cfg->shards, or fewer for a small max_keys). */
unsigned sl_store_shards(const sl_store *s);

/*
 * Decide `req` for the key with `hash`, at `now` (epoch ms): find the key (a key found expired by
 * sl_alg_expired() is reset, counting an expiration), run sl_alg_decide(), and keep, create or
 * remove the key according to the state it leaves (SL_ALG_NONE = no key). A new key is decided on a
 * scratch state first and only inserted when the algorithm kept state, so an error on a new key
 * evicts nothing and leaves nothing behind. Fills *resp. The request must have passed
 * sl_request_validate(). Never allocates for an existing key.
 */
void sl_store_decide(sl_store *s, uint64_t hash, const sl_request *req, int64_t now,
                     sl_response *resp);

/* Hint that `hash` will be decided soon: prefetches its shard header and home slot. Takes no lock
 * (a stale table pointer only makes the prefetch useless, never unsafe). */
void sl_store_prefetch(const sl_store *s, uint64_t hash);

/*
 * Run fn on the key's state with its shard locked, as sl_store_decide() does with the algorithm:
 * the state is SL_ALG_NONE for a key that is absent or expired; fn may change the state and
 * *expire_at; leaving SL_ALG_NONE removes the key (side buffers must then already be released).
 * For state that arrives from elsewhere (peers, tests). Returns true if the key is held afterwards.
 * Decision counters are not touched.
 */
typedef void (*sl_store_fn)(sl_state *st, int64_t *expire_at, void *ctx);
bool sl_store_update(sl_store *s, uint64_t hash, int64_t now, sl_store_fn fn, void *ctx);

/* Copy a held, unexpired key's state and expiry without touching its LRU stamp. */
bool sl_store_get(sl_store *s, uint64_t hash, int64_t now, sl_state *st, int64_t *expire_at);

/* Remove a key (releasing its side buffer). True if it was held (expired or not). */
bool sl_store_remove(sl_store *s, uint64_t hash);

/* Active expiry: examine at most max_work slots (spread over the shards from a rotating start,
 * each shard resuming where its cursor stopped) and remove the expired keys. Returns the number
 * removed. */
size_t sl_store_expire(sl_store *s, int64_t now, size_t max_work);

/*
 * Idle collection: examine at most max_work slots, continuing one walk over every shard's table in
 * order from where the previous call stopped, and remove each key that has expired (counted as an
 * expiration), has not been accessed for at least idle_ms (a collection; idle_ms <= 0: none), or
 * is information-free (sl_alg_info_of) and has not been accessed for at least free_idle_ms (a
 * collection; free_idle_ms <= 0: none). Idleness is judged from the LRU stamp, never early, at most 1.024 s late, and not
 * beyond 18.6 hours (see store.c). Returns the number removed; *pass_done (may be NULL) is set when
 * the walk reached the end of the last shard in this call: every slot has been examined since the
 * previous pass ended. A call never goes past the end of a pass. Calls are serialised by a mutex.
 */
size_t sl_store_collect(sl_store *s, int64_t now, int64_t idle_ms, int64_t free_idle_ms,
                        size_t max_work, bool *pass_done);

/* Fill keys, capacity, bytes, evictions, expirations, collections, errors (from sl_alg_decide)
 * and decisions; every field is overwritten. Locks each shard briefly, one at a time. */
void sl_store_stats(sl_store *s, sl_engine_stats *out);

/* --- introspection for tests ------------------------------------------------------------------ */

/* Position of the key in its shard's table, or -1. */
long sl_store_position(sl_store *s, uint64_t hash);
/* Home slot the key probes from in its shard's table. */
long sl_store_home(sl_store *s, uint64_t hash);
/* Shard index of a hash. */
unsigned sl_store_shard_of(const sl_store *s, uint64_t hash);
/* Per-shard key limit and current table capacity. */
void sl_store_shard_info(sl_store *s, unsigned shard, size_t *keys, size_t *capacity,
                         size_t *key_limit, size_t *max_capacity);
/* Verify the table invariants (every key reachable from its home without crossing an empty slot,
 * counts, load <= 0.8, total <= max_keys): 0 or -EINVAL. */
int sl_store_check(sl_store *s);

/* --- state transfer (snapshots, hand-off; store.c's last section) ----------------------------- */

/* Where an export walk stands: start at {0, 0}; the walk is over when shard == sl_store_shards(). */
typedef struct sl_store_cursor {
    unsigned shard;
    uint32_t pos;
} sl_store_cursor;

/* Called with the key's shard locked: must not call into the store. Return false to stop the walk
 * before this key (it is offered again by the next call), e.g. when an output buffer is full. */
typedef bool (*sl_store_export_fn)(uint64_t hash, int64_t expire_at, const sl_state *st,
                                   void *ctx);

/*
 * Offer every held, unexpired key to fn, examining at most max_work slots per call from *cur
 * (one shard lock held at a time, for at most max_work slots). Returns the slots examined; the
 * walk is complete when cur->shard reaches sl_store_shards(s). A walk concurrent with inserts may
 * miss a key inserted or moved meanwhile, or offer one twice.
 */
size_t sl_store_export(sl_store *s, sl_store_cursor *cur, int64_t now, size_t max_work,
                       sl_store_export_fn fn, void *ctx);

/*
 * Insert or merge a key's state that arrived from elsewhere (a snapshot, a peer), taking ownership
 * of st's side buffer (st is left SL_ALG_NONE): a key not held takes it (evicting as any new key
 * does); a held one keeps the more restrictive of the two (sl_keystate_merge). An expired or
 * SL_ALG_NONE st is dropped. Returns true if the key is held afterwards.
 */
bool sl_store_import(sl_store *s, uint64_t hash, int64_t now, sl_state *st, int64_t expire_at);

/* The store of an engine, and the seed its key hashes are taken with (engine.c): what a snapshot
 * needs to be loaded by an engine that hashes keys the same way. */
struct sl_engine;
sl_store *sl_engine_store(struct sl_engine *e);
uint64_t sl_engine_hash_seed(const struct sl_engine *e);

/* The cluster-wide id of a key: XXH3-64 of name + "_" + unique_key (Gubernator's hash key), what
 * pickers place on the ring (cluster/picker.h), what hand-off sends (TransferKeys) and, through
 * a keyed permutation, a clustered engine's store hash. The key is held by its id alone, so two
 * keys with one id share state: with a public function a client could compute keys whose id
 * equals another's (for XXH3 of 9 to 16 bytes with a known seed, directly). So the id is keyed
 * with a secret every node of the cluster shares (--cluster-hash-secret-file): XXH3 with a
 * 192-byte secret derived from it, unknown to clients. Without one (sl_key_ids unkeyed) the id is
 * XXH3-64 with the public SL_KEY_ID_SEED, as before: compatible, and collidable. Every node of a
 * cluster must use the same secret, as it must the same picker and replicas. */
#define SL_KEY_ID_SEED 0x736c756963652121ULL
#define SL_KEY_IDS_SECRET_SIZE 192
/* The shortest secret material accepted (bytes). */
#define SL_KEY_IDS_MIN_MATERIAL 16
typedef struct sl_key_ids {
    bool keyed;
    uint64_t fingerprint; /* of the derived secret, to compare nodes' configurations in logs */
    unsigned char secret[SL_KEY_IDS_SECRET_SIZE];
} sl_key_ids;
/* Derive the id key from secret material (len >= SL_KEY_IDS_MIN_MATERIAL; len 0: unkeyed, the
 * public seed). -EINVAL for a shorter one. */
int sl_key_ids_init(sl_key_ids *k, const void *material, size_t len);
/* The id of (name, unique_key); k NULL is unkeyed. */
uint64_t sl_key_id(const sl_key_ids *k, const char *name, size_t name_len, const char *key,
                   size_t key_len);
/* The same of an already joined name + "_" + unique_key. */
uint64_t sl_key_id_joined(const sl_key_ids *k, const char *joined, size_t len);
/* The key ids a clustered engine uses (unkeyed until set); set copies k, before any decision
 * (the node does it right after sl_engine_new, before loading a snapshot). */
const sl_key_ids *sl_engine_key_ids(const struct sl_engine *e);
void sl_engine_set_key_ids(struct sl_engine *e, const sl_key_ids *k);
/* With sl_engine_config.cluster_keys: the store hash of a key id and back (a bijection). */
uint64_t sl_engine_hash_of_id(const struct sl_engine *e, uint64_t id);
uint64_t sl_engine_id_of_hash(const struct sl_engine *e, uint64_t hash);

#endif

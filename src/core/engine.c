/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's entry points (include/sluice/engine.h): validate a request, hash its key, and let
 * the key store (store.c) run the algorithm on the key's state under the key's shard lock. The
 * engine keeps nothing global: everything lives in the sl_engine, so several engines (several
 * nodes in one test process) never share state.
 *
 * Key hash: XXH3-64 of the name seeded with the engine's seed, then XXH3-64 of unique_key seeded
 * with that. Chaining keeps (name, key) pairs apart without a separator that a name or key could
 * contain ("a_b"+"c" vs "a"+"b_c" collide when concatenated) and without copying the strings. The
 * seed is random per engine unless configured, so that clients cannot precompute keys that pile up
 * in one shard or probe sequence (XXH3 is not a cryptographic PRF; this raises the bar, it is not a
 * proof). With cluster_keys the hash is instead a keyed permutation of the cluster-wide key id
 * (see "cluster keys" below), the id keyed with the cluster's secret when it has one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/strmap.h"
#include "core/alg.h"
#include "core/concurrency.h"
#include "core/store.h"
#include "sluice/clock.h"
#include "sluice/engine.h"

#define XXH_INLINE_ALL /* the hash is on the hot path: let it inline */
#include <xxhash.h>

#define DEFAULT_MAX_KEYS 1000000
#define DEFAULT_SHARDS 64

/* Batches are hashed in chunks of this many items (the hashes live on the stack) and each item's
 * slot is prefetched this many items before it is decided: enough to cover a DRAM miss with the
 * ~20-40 ns of work per decision, few enough that the lines are still in L1 when used. */
#define BATCH_CHUNK 64
#define PREFETCH_AHEAD 8

struct sl_engine {
    sl_store *store;
    sl_engine_config cfg; /* with the shard count and seed actually used */
    sl_conc_ids lease_ids; /* CONCURRENCY lease ids: unique and unguessable per engine */
    uint64_t perm_k0, perm_k1, perm_inv1, perm_inv2; /* cluster_keys' permutation (below) */
    sl_key_ids key_ids; /* cluster_keys: how key ids are computed (core/store.h) */
    _Alignas(64) uint64_t errors; /* validation failures (atomic; not on the decision path) */
    char pad[64 - sizeof(uint64_t)];
};

/* --- cluster keys ----------------------------------------------------------------------------
 * With cluster_keys, the store hash is perm(id) where id is the cluster-wide key id (the picker's
 * hash of name + "_" + unique_key) and perm a permutation of 64-bit words keyed by the engine's
 * seed: xor a key, multiply by an odd constant, fold the high half into the low half, twice, xor
 * another key. Every step is invertible, so a node can recover the id of each key it holds and
 * find its owner (hand-off), while the shard and slot of a key still depend on a secret: a client
 * that knows the id function cannot aim keys at one shard without the seed. Collisions of ids are
 * collisions of store hashes; finding a key whose id equals a given key's is a 64-bit second
 * preimage. */
#define PERM_M1 UINT64_C(0x9e3779b97f4a7c15)
#define PERM_M2 UINT64_C(0xbf58476d1ce4e5b9)

static uint64_t odd_inverse(uint64_t m)
{
    uint64_t x = m; /* Newton: each step doubles the correct low bits (3 -> 96) */
    for (int i = 0; i < 5; i++)
        x *= 2 - m * x;
    return x;
}

void sl_engine_config_default(sl_engine_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_keys = DEFAULT_MAX_KEYS;
    cfg->max_memory = 0; /* keys only: sluiced sets --max-memory (SL_DEFAULT_MAX_MEMORY) */
    cfg->shards = DEFAULT_SHARDS;
    cfg->max_log_limit = SL_ALG_DEFAULT_MAX_LOG_LIMIT;
    cfg->max_sub_windows = SL_ALG_DEFAULT_MAX_SUB_WINDOWS;
    cfg->max_concurrency_limit = SL_CONC_DEFAULT_MAX_LIMIT;
    cfg->hash_seed = 0;
    cfg->max_count = SL_DEFAULT_MAX_COUNT;
    cfg->max_duration_ms = SL_DEFAULT_MAX_DURATION_MS;
    cfg->max_clock_skew_ms = 0;
}

int sl_engine_new(const sl_engine_config *cfg, sl_engine **out)
{
    if (!cfg || !out)
        return -EINVAL;
    *out = NULL;
    sl_engine *e = NULL;
    if (posix_memalign((void **)&e, 64, sizeof *e))
        return -ENOMEM;
    memset(e, 0, sizeof *e);
    e->cfg = *cfg;
    if (!e->cfg.shards)
        e->cfg.shards = DEFAULT_SHARDS;
    if (!e->cfg.hash_seed)
        e->cfg.hash_seed = sl_strmap_seed(e);
    sl_conc_ids_init(&e->lease_ids, 0);
    e->perm_k0 = XXH3_64bits_withSeed("perm0", 5, e->cfg.hash_seed);
    e->perm_k1 = XXH3_64bits_withSeed("perm1", 5, e->cfg.hash_seed);
    e->perm_inv1 = odd_inverse(PERM_M1);
    e->perm_inv2 = odd_inverse(PERM_M2);
    sl_store_config sc = {
        .max_keys = e->cfg.max_keys,
        .max_bytes = e->cfg.max_memory,
        .shards = e->cfg.shards,
        .alg = {.max_log_limit = e->cfg.max_log_limit, .max_sub_windows = e->cfg.max_sub_windows,
                .max_concurrency_limit = e->cfg.max_concurrency_limit,
                .max_count = e->cfg.max_count,
                .lease_ids = &e->lease_ids},
        .expiry_grace_ms = e->cfg.max_clock_skew_ms,
    };
    int rc = sl_store_new(&sc, &e->store);
    if (rc) {
        free(e);
        return rc;
    }
    e->cfg.shards = sl_store_shards(e->store);
    *out = e;
    return 0;
}

void sl_engine_free(sl_engine *e)
{
    if (!e)
        return;
    sl_store_free(e->store);
    free(e);
}

static inline uint64_t seeded_hash(uint64_t seed, const char *name, size_t name_len,
                                   const char *key, size_t key_len)
{
    return XXH3_64bits_withSeed(key, key_len, XXH3_64bits_withSeed(name, name_len, seed));
}

static inline uint64_t perm(const sl_engine *e, uint64_t x)
{
    x ^= e->perm_k0;
    x *= PERM_M1;
    x ^= x >> 32;
    x *= PERM_M2;
    x ^= x >> 32;
    return x ^ e->perm_k1;
}

static inline uint64_t perm_inverse(const sl_engine *e, uint64_t y)
{
    y ^= e->perm_k1;
    y ^= y >> 32;
    y *= e->perm_inv2;
    y ^= y >> 32;
    y *= e->perm_inv1;
    return y ^ e->perm_k0;
}

int sl_key_ids_init(sl_key_ids *k, const void *material, size_t len)
{
    memset(k, 0, sizeof *k);
    if (!len)
        return 0;
    if (!material || len < SL_KEY_IDS_MIN_MATERIAL)
        return -EINVAL;
    if (XXH3_generateSecret(k->secret, sizeof k->secret, material, len) != XXH_OK)
        return -EINVAL;
    k->keyed = true;
    k->fingerprint = XXH3_64bits(k->secret, sizeof k->secret);
    return 0;
}

uint64_t sl_key_id_joined(const sl_key_ids *k, const char *joined, size_t len)
{
    if (k && k->keyed)
        return XXH3_64bits_withSecret(joined, len, k->secret, sizeof k->secret);
    return XXH3_64bits_withSeed(joined, len, SL_KEY_ID_SEED);
}

uint64_t sl_key_id(const sl_key_ids *k, const char *name, size_t name_len, const char *key,
                   size_t key_len)
{
    /* most keys are short: join them on the stack and hash once; the streaming state gives the
     * same value for longer ones */
    char buf[256];
    if (name_len + 1 + key_len <= sizeof buf) {
        if (name_len)
            memcpy(buf, name, name_len);
        buf[name_len] = '_';
        if (key_len)
            memcpy(buf + name_len + 1, key, key_len);
        return sl_key_id_joined(k, buf, name_len + 1 + key_len);
    }
    XXH3_state_t st;
    memset(&st, 0, sizeof st); /* XXH3_INITSTATE, and quiets gcc's maybe-uninitialized */
    if (k && k->keyed)
        XXH3_64bits_reset_withSecret(&st, k->secret, sizeof k->secret);
    else
        XXH3_64bits_reset_withSeed(&st, SL_KEY_ID_SEED);
    XXH3_64bits_update(&st, name, name_len);
    XXH3_64bits_update(&st, "_", 1);
    XXH3_64bits_update(&st, key, key_len);
    return XXH3_64bits_digest(&st);
}

const sl_key_ids *sl_engine_key_ids(const sl_engine *e)
{
    return &e->key_ids;
}

void sl_engine_set_key_ids(sl_engine *e, const sl_key_ids *k)
{
    e->key_ids = *k;
}

uint64_t sl_engine_hash_of_id(const sl_engine *e, uint64_t id)
{
    return perm(e, id);
}

uint64_t sl_engine_id_of_hash(const sl_engine *e, uint64_t hash)
{
    return perm_inverse(e, hash);
}

static inline uint64_t key_hash(const sl_engine *e, const char *name, size_t name_len,
                                const char *key, size_t key_len)
{
    if (e->cfg.cluster_keys)
        return perm(e, sl_key_id(&e->key_ids, name, name_len, key, key_len));
    return seeded_hash(e->cfg.hash_seed, name, name_len, key, key_len);
}

static void fail(sl_engine *e, sl_response *resp, const char *err)
{
    memset(resp, 0, sizeof *resp);
    resp->error = err;
    __atomic_fetch_add(&e->errors, 1, __ATOMIC_RELAXED);
}

void sl_engine_decide(sl_engine *e, const sl_request *req, sl_response *resp, int64_t now_ms)
{
    const char *err = sl_request_validate(req, &e->cfg);
    if (!err && __builtin_expect(req->created_at != 0, 0))
        err = sl_request_check_time(req, &e->cfg, now_ms);
    if (err) {
        fail(e, resp, err);
        return;
    }
    uint64_t h = key_hash(e, req->name, req->name_len, req->unique_key,
                          req->unique_key_len);
    /* Alone, a decision cannot hide its cache miss behind others' work, but fetching the few
     * lines its probe may need at once, rather than one after the other, still saves ~10%. */
    sl_store_prefetch(e->store, h);
    sl_store_decide(e->store, h, req, now_ms, resp);
}

void sl_engine_decide_batch(sl_engine *e, const sl_request *reqs, sl_response *resps, size_t n,
                            int64_t now_ms)
{
    uint64_t hash[BATCH_CHUNK];
    bool ok[BATCH_CHUNK];
    for (size_t base = 0; base < n; base += BATCH_CHUNK) {
        size_t m = n - base < BATCH_CHUNK ? n - base : BATCH_CHUNK;
        const sl_request *rq = reqs + base;
        sl_response *rs = resps + base;
        /* Pass 1: validate and hash everything, prefetching the first slots. Failed items change
         * nothing, so answering them out of order is the same as in order. */
        for (size_t i = 0; i < m; i++) {
            const char *err = sl_request_validate(&rq[i], &e->cfg);
            if (!err && __builtin_expect(rq[i].created_at != 0, 0))
                err = sl_request_check_time(&rq[i], &e->cfg, now_ms);
            ok[i] = !err;
            if (err) {
                fail(e, &rs[i], err);
                continue;
            }
            hash[i] = key_hash(e, rq[i].name, rq[i].name_len, rq[i].unique_key,
                               rq[i].unique_key_len);
            if (i < PREFETCH_AHEAD)
                sl_store_prefetch(e->store, hash[i]);
        }
        /* Pass 2: decide in order, keeping PREFETCH_AHEAD slots in flight. */
        for (size_t i = 0; i < m; i++) {
            if (i + PREFETCH_AHEAD < m && ok[i + PREFETCH_AHEAD])
                sl_store_prefetch(e->store, hash[i + PREFETCH_AHEAD]);
            if (ok[i])
                sl_store_decide(e->store, hash[i], &rq[i], now_ms, &rs[i]);
        }
    }
}

size_t sl_engine_expire(sl_engine *e, int64_t now_ms, size_t max_work)
{
    return sl_store_expire(e->store, now_ms, max_work);
}

size_t sl_engine_collect_idle(sl_engine *e, int64_t now_ms, int64_t idle_ms, size_t max_work,
                              bool *pass_done)
{
    return sl_store_collect(e->store, now_ms, idle_ms, -1, max_work, pass_done);
}

size_t sl_engine_collect(sl_engine *e, int64_t now_ms, int64_t idle_ms, int64_t free_idle_ms,
                         size_t max_work, bool *pass_done)
{
    return sl_store_collect(e->store, now_ms, idle_ms, free_idle_ms, max_work, pass_done);
}

bool sl_engine_remove(sl_engine *e, const char *name, size_t name_len, const char *key,
                      size_t key_len)
{
    return sl_store_remove(e->store, key_hash(e, name, name_len, key, key_len));
}

void sl_engine_stats_get(sl_engine *e, sl_engine_stats *out)
{
    sl_store_stats(e->store, out);
    out->errors += __atomic_load_n(&e->errors, __ATOMIC_RELAXED);
}

sl_store *sl_engine_store(sl_engine *e)
{
    return e->store;
}

uint64_t sl_engine_hash_seed(const sl_engine *e)
{
    return e->cfg.hash_seed;
}

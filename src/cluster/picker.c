/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer pickers (see picker.h): a consistent-hash ring with virtual nodes, and rendezvous hashing.
 *
 * Hashes are XXH3-64 with SL_PICKER_SEED. A ring point of peer `a` number `i` hashes the address
 * bytes followed by the 4 little-endian bytes of i, so points depend on the address alone. An HRW
 * score mixes the key hash with a per-peer hash through a 64-bit finalizer (Murmur3's fmix64): one
 * multiply chain per peer instead of hashing the key N times, and the finalizer's avalanche keeps
 * the per-peer scores independent (a plain XOR would rank peers identically for many keys).
 */
#include "cluster/picker.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "core/store.h"

typedef struct ring_point {
    uint64_t hash;
    uint32_t peer;
} ring_point;

struct sl_picker {
    int kind;
    size_t n;
    char **addrs;           /* sorted, unique */
    uint64_t *peer_hash;    /* HRW: per-peer hash */
    ring_point *points;     /* ring: sorted by hash */
    size_t npoints;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_point(const void *a, const void *b)
{
    const ring_point *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    /* equal hashes (astronomically rare): order by peer so every node breaks the tie alike */
    return x->peer < y->peer ? -1 : x->peer > y->peer;
}

static uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

void sl_picker_free(sl_picker *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->addrs[i]);
    free(p->addrs);
    free(p->peer_hash);
    free(p->points);
    free(p);
}

static int build_ring(sl_picker *p, unsigned replicas)
{
    p->npoints = p->n * replicas;
    if (p->npoints == 0)
        return 0;
    p->points = malloc(p->npoints * sizeof *p->points);
    if (!p->points)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < p->n; i++) {
        size_t len = strlen(p->addrs[i]);
        char buf[512 + 4];
        if (len > 512)
            len = 512; /* addresses are short; a bound keeps the buffer on the stack */
        memcpy(buf, p->addrs[i], len);
        for (unsigned r = 0; r < replicas; r++) {
            buf[len] = (char)(r & 0xff);
            buf[len + 1] = (char)((r >> 8) & 0xff);
            buf[len + 2] = (char)((r >> 16) & 0xff);
            buf[len + 3] = (char)((r >> 24) & 0xff);
            p->points[k].hash = XXH3_64bits_withSeed(buf, len + 4, SL_PICKER_SEED);
            p->points[k].peer = (uint32_t)i;
            k++;
        }
    }
    qsort(p->points, p->npoints, sizeof *p->points, cmp_point);
    return 0;
}

int sl_picker_new(int kind, unsigned replicas, const char *const *addrs, size_t n,
                  sl_picker **out)
{
    *out = NULL;
    if (kind != SL_PICKER_KIND_RING && kind != SL_PICKER_KIND_HRW)
        return -EINVAL;
    if (kind == SL_PICKER_KIND_RING && (replicas < 1 || replicas > 65536))
        return -EINVAL;
    if (n > SL_PICKER_MAX_PEERS)
        return -EINVAL;
    sl_picker *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->kind = kind;
    if (n) {
        p->addrs = calloc(n, sizeof *p->addrs);
        if (!p->addrs)
            goto nomem;
        for (size_t i = 0; i < n; i++) {
            if (!addrs[i]) {
                p->n = i;
                sl_picker_free(p);
                return -EINVAL;
            }
            p->addrs[i] = strdup(addrs[i]);
            if (!p->addrs[i]) {
                p->n = i;
                goto nomem;
            }
        }
        p->n = n;
        qsort(p->addrs, n, sizeof *p->addrs, cmp_str);
        size_t w = 1;
        for (size_t i = 1; i < n; i++) {
            if (strcmp(p->addrs[i], p->addrs[w - 1]) == 0)
                free(p->addrs[i]);
            else
                p->addrs[w++] = p->addrs[i];
        }
        p->n = w;
    }
    p->peer_hash = calloc(p->n ? p->n : 1, sizeof *p->peer_hash);
    if (!p->peer_hash)
        goto nomem;
    for (size_t i = 0; i < p->n; i++)
        p->peer_hash[i] = XXH3_64bits_withSeed(p->addrs[i], strlen(p->addrs[i]), SL_PICKER_SEED);
    if (kind == SL_PICKER_KIND_RING && build_ring(p, replicas))
        goto nomem;
    *out = p;
    return 0;
nomem:
    sl_picker_free(p);
    return -ENOMEM;
}

int sl_picker_kind(const sl_picker *p)
{
    return p->kind;
}

size_t sl_picker_count(const sl_picker *p)
{
    return p->n;
}

const char *sl_picker_addr(const sl_picker *p, size_t i)
{
    return i < p->n ? p->addrs[i] : NULL;
}

long sl_picker_find(const sl_picker *p, const char *addr)
{
    if (!addr || p->n == 0)
        return -1;
    char *const *hit = bsearch(&addr, p->addrs, p->n, sizeof *p->addrs, cmp_str);
    return hit ? (long)(hit - p->addrs) : -1;
}

uint64_t sl_picker_hash(const struct sl_key_ids *ids, const char *key, size_t len)
{
    return sl_key_id_joined(ids, key, len); /* the engine's cluster key id: one function */
}

uint64_t sl_picker_key_hash(const struct sl_key_ids *ids, const char *name, size_t name_len,
                            const char *key, size_t key_len)
{
    return sl_key_id(ids, name, name_len, key, key_len);
}

_Static_assert(SL_PICKER_SEED == SL_KEY_ID_SEED, "the picker's hash is the engine's key id");

static inline uint64_t hrw_score(const sl_picker *p, size_t i, uint64_t key_hash)
{
    return fmix64(key_hash ^ p->peer_hash[i]);
}

size_t sl_picker_owner(const sl_picker *p, uint64_t key_hash)
{
    if (p->n == 0)
        return SIZE_MAX;
    if (p->n == 1)
        return 0;
    if (p->kind == SL_PICKER_KIND_HRW) {
        size_t best = 0;
        uint64_t bs = hrw_score(p, 0, key_hash);
        for (size_t i = 1; i < p->n; i++) {
            uint64_t s = hrw_score(p, i, key_hash);
            if (s > bs) {
                bs = s;
                best = i;
            }
        }
        return best;
    }
    /* first point with hash >= key_hash, wrapping to the first point */
    size_t lo = 0, hi = p->npoints;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->points[mid].hash < key_hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == p->npoints)
        lo = 0;
    return p->points[lo].peer;
}

size_t sl_picker_group(const sl_picker *p, uint64_t key_hash, size_t df, size_t *out)
{
    if (df > p->n)
        df = p->n;
    if (df == 0)
        return 0;
    /* partial selection: keep the df best in out[], sorted by score (df is small) */
    uint64_t scores[64];
    uint64_t *sc = df <= 64 ? scores : malloc(df * sizeof *sc);
    if (!sc)
        return 0;
    size_t have = 0;
    for (size_t i = 0; i < p->n; i++) {
        uint64_t s = hrw_score(p, i, key_hash);
        if (have == df && s <= sc[have - 1])
            continue;
        size_t pos = have < df ? have++ : df - 1;
        while (pos > 0 && sc[pos - 1] < s) {
            sc[pos] = sc[pos - 1];
            out[pos] = out[pos - 1];
            pos--;
        }
        sc[pos] = s;
        out[pos] = i;
    }
    if (sc != scores)
        free(sc);
    return have;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_strmap: a bounded open-addressing hash map keyed by byte strings, with fixed-size value slots.
 *
 * Linear probing, load factor at most 1/2, and backward-shift deletion (no tombstones): maps fed by
 * etcd see routine deletes, and tombstones would slowly lengthen every probe of a hot lookup. Each
 * slot is an sl_strmap_ent header followed by `value_size` bytes of the caller's value
 * (sl_strmap_val), so a lookup is one hash and a short run of compares, with no allocation and no
 * pointer to chase for the value.
 *
 * A key is (tag, a, b): a small caller-defined namespace `tag` (an entry kind) and the bytes of a
 * then b. The two parts let a composite key ("resource", "method") be looked up without first
 * joining it; ("ab","c") and ("a","bc") are different keys. Pass b = NULL, blen = 0 for a plain
 * key. Keys are copied (one allocation per entry, NUL-terminated for convenience).
 *
 * Entries are bounded by max_entries; a map is not thread-safe (publish a clone to readers).
 * Errors: 0 or a negative errno. The lookup is static inline: it sits on the request path.
 */
#ifndef SLUICE_BASE_STRMAP_H
#define SLUICE_BASE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <xxhash.h>

typedef struct sl_strmap_ent {
    uint64_t hash; /* 0: the slot is empty */
    char *key;     /* a's bytes then b's, NUL-terminated; owned by the map */
    uint32_t len;  /* length of part a */
    uint32_t len2; /* length of part b */
    uint32_t tag;
} sl_strmap_ent;

typedef struct sl_strmap {
    unsigned char *slots; /* cap slots of `stride` bytes: an sl_strmap_ent, then the value */
    size_t stride;
    size_t value_size;
    size_t cap;           /* a power of two, or 0 before the first insert */
    size_t count;
    size_t max;           /* most entries */
    uint64_t seed;
} sl_strmap;

/* Offset of the value inside a slot (suitably aligned for any type). */
#define SL_STRMAP_VALUE_OFF \
    ((sizeof(sl_strmap_ent) + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * \
     _Alignof(max_align_t))

/* An empty map (allocates nothing yet). max_entries: most entries (0 = SIZE_MAX / 4); seed keys
 * the hash: sl_strmap_seed() for every map whose keys a client chooses or probes with, so that
 * nobody can compute keys that pile up in one probe sequence. */
void sl_strmap_init(sl_strmap *m, size_t value_size, size_t max_entries, uint64_t seed);
/* A random seed (getrandom; before the kernel has entropy, the clock, the salt's address and a
 * counter mixed), never 0: one per table, not per process, so tables of several nodes in one
 * process differ too. Also the seed of the other hash tables keyed by client input (the engine's
 * store, the GLOBAL table). */
uint64_t sl_strmap_seed(const void *salt);
/* Free the keys and the slots; the map is empty again (and reusable). */
void sl_strmap_free(sl_strmap *m);
/* Remove every entry, keeping the slots. */
void sl_strmap_clear(sl_strmap *m);
/* A deep copy into *dst (which must not hold a map). 0 or -ENOMEM (dst is then empty). */
int sl_strmap_clone(const sl_strmap *src, sl_strmap *dst);

static inline size_t sl_strmap_count(const sl_strmap *m)
{
    return m->count;
}

/* The value of an entry (value_size bytes). */
static inline void *sl_strmap_val(const sl_strmap_ent *e)
{
    return (unsigned char *)e + SL_STRMAP_VALUE_OFF;
}

/* The key's hash (never 0). */
static inline uint64_t sl_strmap_hash(const sl_strmap *m, uint32_t tag, const char *a, size_t alen,
                                      const char *b, size_t blen)
{
    uint64_t h = XXH3_64bits_withSeed(a, alen, m->seed + (uint64_t)tag * 0x9E3779B97F4A7C15ull);
    if (blen)
        h = XXH3_64bits_withSeed(b, blen, h ^ 0x5bd1e995u);
    return h ? h : 1;
}

static inline sl_strmap_ent *sl_strmap_slot(const sl_strmap *m, size_t i)
{
    return (sl_strmap_ent *)(m->slots + i * m->stride);
}

/* The entry for (tag, a, b), or NULL. Never allocates. */
static inline sl_strmap_ent *sl_strmap_find2(const sl_strmap *m, uint32_t tag, const char *a,
                                             size_t alen, const char *b, size_t blen)
{
    if (m->count == 0)
        return NULL;
    uint64_t h = sl_strmap_hash(m, tag, a, alen, b, blen);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        sl_strmap_ent *e = sl_strmap_slot(m, i);
        if (!e->hash)
            return NULL;
        if (e->hash == h && e->tag == tag && e->len == alen && e->len2 == blen &&
            (alen == 0 || memcmp(e->key, a, alen) == 0) &&
            (blen == 0 || memcmp(e->key + alen, b, blen) == 0))
            return e;
    }
}

static inline sl_strmap_ent *sl_strmap_find(const sl_strmap *m, uint32_t tag, const char *k,
                                            size_t len)
{
    return sl_strmap_find2(m, tag, k, len, NULL, 0);
}

/*
 * Insert (tag, a, b) or find it: 0 and the entry in *out (when out is not NULL). A new entry's
 * value is a copy of *val (zeros when val is NULL); an existing entry's value is overwritten by
 * *val unless val is NULL. -ENOSPC when the map already holds max_entries, -EINVAL for a part
 * longer than UINT32_MAX, -ENOMEM. Entry pointers are valid until the next insert or removal.
 */
int sl_strmap_put2(sl_strmap *m, uint32_t tag, const char *a, size_t alen, const char *b,
                   size_t blen, const void *val, sl_strmap_ent **out);
int sl_strmap_put(sl_strmap *m, uint32_t tag, const char *k, size_t len, const void *val,
                  sl_strmap_ent **out);

/* Remove an entry found in m (backward shift: a later entry may move into its slot). */
void sl_strmap_remove_ent(sl_strmap *m, sl_strmap_ent *e);
/* Remove (tag, a, b); true if it was there. */
bool sl_strmap_remove2(sl_strmap *m, uint32_t tag, const char *a, size_t alen, const char *b,
                       size_t blen);
bool sl_strmap_remove(sl_strmap *m, uint32_t tag, const char *k, size_t len);

/* Iterate: start with *pos = 0; returns the next entry (slot order) or NULL at the end. The map
 * must not change during the walk. */
sl_strmap_ent *sl_strmap_next(const sl_strmap *m, size_t *pos);

#endif

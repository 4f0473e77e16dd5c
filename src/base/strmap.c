/* SPDX-License-Identifier: Apache-2.0 */
/* Open-addressing string map with backward-shift deletion (see strmap.h). */
#include "base/strmap.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

uint64_t sl_strmap_seed(const void *salt)
{
    static _Atomic uint64_t calls;
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t mix[3] = {(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                           (uint64_t)(uintptr_t)salt, ++calls};
        seed = XXH3_64bits(mix, sizeof mix);
    }
    return seed ? seed : 1;
}

void sl_strmap_init(sl_strmap *m, size_t value_size, size_t max_entries, uint64_t seed)
{
    size_t a = _Alignof(max_align_t);
    m->slots = NULL;
    m->value_size = value_size;
    m->stride = (SL_STRMAP_VALUE_OFF + value_size + a - 1) / a * a;
    m->cap = 0;
    m->count = 0;
    m->max = max_entries ? max_entries : SIZE_MAX / 4;
    m->seed = seed;
}

void sl_strmap_clear(sl_strmap *m)
{
    for (size_t i = 0; i < m->cap; i++) {
        sl_strmap_ent *e = sl_strmap_slot(m, i);
        if (e->hash) {
            free(e->key);
            e->hash = 0;
            e->key = NULL;
        }
    }
    m->count = 0;
}

void sl_strmap_free(sl_strmap *m)
{
    sl_strmap_clear(m);
    free(m->slots);
    m->slots = NULL;
    m->cap = 0;
}

/* Put a slot whose key is already owned into the first free slot of its run. */
static void place(unsigned char *slots, size_t cap, size_t stride, const void *slot)
{
    const sl_strmap_ent *src = slot;
    size_t mask = cap - 1;
    for (size_t i = src->hash & mask;; i = (i + 1) & mask) {
        unsigned char *d = slots + i * stride;
        if (!((sl_strmap_ent *)d)->hash) {
            memcpy(d, slot, stride);
            return;
        }
    }
}

static int grow(sl_strmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    if (ncap > SIZE_MAX / m->stride)
        return -ENOMEM;
    unsigned char *ns = calloc(ncap, m->stride);
    if (!ns)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        const sl_strmap_ent *e = sl_strmap_slot(m, i);
        if (e->hash)
            place(ns, ncap, m->stride, e);
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

int sl_strmap_put2(sl_strmap *m, uint32_t tag, const char *a, size_t alen, const char *b,
                   size_t blen, const void *val, sl_strmap_ent **out)
{
    if (alen > UINT32_MAX || blen > UINT32_MAX)
        return -EINVAL;
    sl_strmap_ent *e = sl_strmap_find2(m, tag, a, alen, b, blen);
    if (e) {
        if (val)
            memcpy(sl_strmap_val(e), val, m->value_size);
        if (out)
            *out = e;
        return 0;
    }
    if (m->count >= m->max)
        return -ENOSPC;
    /* keep the load factor at most 1/2 so that probes stay short */
    if ((m->count + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc)
            return rc;
    }
    char *key = malloc(alen + blen + 1);
    if (!key)
        return -ENOMEM;
    if (alen)
        memcpy(key, a, alen);
    if (blen)
        memcpy(key + alen, b, blen);
    key[alen + blen] = '\0';
    uint64_t h = sl_strmap_hash(m, tag, a, alen, b, blen);
    size_t mask = m->cap - 1, i = h & mask;
    while (sl_strmap_slot(m, i)->hash)
        i = (i + 1) & mask;
    e = sl_strmap_slot(m, i);
    e->hash = h;
    e->key = key;
    e->len = (uint32_t)alen;
    e->len2 = (uint32_t)blen;
    e->tag = tag;
    if (val)
        memcpy(sl_strmap_val(e), val, m->value_size);
    else
        memset(sl_strmap_val(e), 0, m->value_size);
    m->count++;
    if (out)
        *out = e;
    return 0;
}

int sl_strmap_put(sl_strmap *m, uint32_t tag, const char *k, size_t len, const void *val,
                  sl_strmap_ent **out)
{
    return sl_strmap_put2(m, tag, k, len, NULL, 0, val, out);
}

void sl_strmap_remove_ent(sl_strmap *m, sl_strmap_ent *e)
{
    free(e->key);
    m->count--;
    size_t mask = m->cap - 1;
    size_t hole = (size_t)((unsigned char *)e - m->slots) / m->stride;
    /* backward shift: pull later members of the run into the hole when that keeps them
     * reachable from their home slot, i.e. when home is not in the cyclic range (hole, j] */
    for (size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
        sl_strmap_ent *ej = sl_strmap_slot(m, j);
        if (!ej->hash)
            break;
        size_t home = ej->hash & mask;
        bool in_range = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            memcpy(sl_strmap_slot(m, hole), ej, m->stride);
            hole = j;
        }
    }
    memset(sl_strmap_slot(m, hole), 0, m->stride);
}

bool sl_strmap_remove2(sl_strmap *m, uint32_t tag, const char *a, size_t alen, const char *b,
                       size_t blen)
{
    sl_strmap_ent *e = sl_strmap_find2(m, tag, a, alen, b, blen);
    if (!e)
        return false;
    sl_strmap_remove_ent(m, e);
    return true;
}

bool sl_strmap_remove(sl_strmap *m, uint32_t tag, const char *k, size_t len)
{
    return sl_strmap_remove2(m, tag, k, len, NULL, 0);
}

sl_strmap_ent *sl_strmap_next(const sl_strmap *m, size_t *pos)
{
    for (size_t i = *pos; i < m->cap; i++) {
        sl_strmap_ent *e = sl_strmap_slot(m, i);
        if (e->hash) {
            *pos = i + 1;
            return e;
        }
    }
    *pos = m->cap;
    return NULL;
}

int sl_strmap_clone(const sl_strmap *src, sl_strmap *dst)
{
    *dst = *src;
    dst->slots = NULL;
    dst->cap = 0;
    dst->count = 0;
    if (!src->cap)
        return 0;
    dst->slots = calloc(src->cap, src->stride);
    if (!dst->slots)
        return -ENOMEM;
    dst->cap = src->cap;
    for (size_t i = 0; i < src->cap; i++) {
        const sl_strmap_ent *s = sl_strmap_slot(src, i);
        if (!s->hash)
            continue;
        size_t n = (size_t)s->len + s->len2;
        char *key = malloc(n + 1);
        if (!key) {
            sl_strmap_free(dst);
            return -ENOMEM;
        }
        memcpy(key, s->key, n + 1);
        sl_strmap_ent *d = sl_strmap_slot(dst, i);
        memcpy(d, s, src->stride);
        d->key = key;
        dst->count++;
    }
    return 0;
}

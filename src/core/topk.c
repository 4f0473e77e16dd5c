/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The space-saving top-K with halving decay (see topk.h): slot lookup by a 64-bit hash then the
 * bytes, replacement of the smallest slot, lazy halving per elapsed half-life, and the sorted
 * listing.
 */
#include "core/topk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sl_topk_init(sl_topk *t, size_t capacity, int64_t half_life_ms, int64_t now_ms)
{
    memset(t, 0, sizeof *t);
    if (capacity == 0 || capacity > SL_TOPK_MAX_CAPACITY || half_life_ms < 0)
        return -EINVAL;
    t->slots = calloc(capacity, sizeof *t->slots);
    if (!t->slots)
        return -ENOMEM;
    t->capacity = capacity;
    t->half_life_ms = half_life_ms;
    t->epoch_ms = now_ms;
    return 0;
}

void sl_topk_free(sl_topk *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

uint64_t sl_topk_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static void decay(sl_topk *t, int64_t now_ms)
{
    if (t->half_life_ms <= 0 || now_ms - t->epoch_ms < t->half_life_ms)
        return;
    int64_t halvings = (now_ms - t->epoch_ms) / t->half_life_ms;
    t->epoch_ms += halvings * t->half_life_ms;
    unsigned shift = halvings >= 64 ? 64 : (unsigned)halvings;
    for (size_t i = 0; i < t->capacity; i++) {
        sl_topk_slot *s = &t->slots[i];
        s->count = shift >= 64 ? 0 : s->count >> shift;
        s->error = shift >= 64 ? 0 : s->error >> shift;
        if (s->count == 0) {
            s->error = 0;
            s->key_len = 0;
        }
    }
}

void sl_topk_add(sl_topk *t, const char *key, size_t len, uint64_t n, int64_t now_ms)
{
    if (!t->slots || n == 0)
        return;
    decay(t, now_ms);
    if (len > SL_TOPK_KEY_MAX)
        len = SL_TOPK_KEY_MAX;
    uint64_t h = sl_topk_hash(key, len);
    sl_topk_slot *min = NULL;
    for (size_t i = 0; i < t->capacity; i++) {
        sl_topk_slot *s = &t->slots[i];
        if (s->count && s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0) {
            s->count = s->count + n < s->count ? UINT64_MAX : s->count + n;
            return;
        }
        if (!min || s->count < min->count)
            min = s;
    }
    /* not held: take the smallest slot (a free one has count 0 and no error) */
    min->error = min->count;
    min->count = min->count + n < min->count ? UINT64_MAX : min->count + n;
    min->hash = h;
    min->key_len = (uint16_t)len;
    memcpy(min->key, key, len);
}

static int entry_cmp(const void *a, const void *b)
{
    const sl_topk_entry *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->error != y->error)
        return x->error < y->error ? -1 : 1;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

size_t sl_topk_list(sl_topk *t, sl_topk_entry *out, size_t max, int64_t now_ms)
{
    if (!t->slots)
        return 0;
    decay(t, now_ms);
    /* keep the best max held slots in out, sorted by insertion (bounded by capacity * max) */
    size_t n = 0;
    for (size_t i = 0; i < t->capacity; i++) {
        const sl_topk_slot *s = &t->slots[i];
        if (!s->count)
            continue;
        sl_topk_entry e = {s->key, s->key_len, s->count, s->error};
        if (n < max) {
            out[n++] = e;
        } else if (max && entry_cmp(&e, &out[max - 1]) < 0) {
            out[max - 1] = e;
        } else {
            continue;
        }
        /* insertion step: move the new entry up to its place */
        for (size_t j = n - 1; j > 0 && entry_cmp(&out[j], &out[j - 1]) < 0; j--) {
            sl_topk_entry tmp = out[j];
            out[j] = out[j - 1];
            out[j - 1] = tmp;
        }
    }
    return n;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounded top-K of keys (space-saving, Metwally et al.): who is rejected, who a shadow limiter
 * would reject, who is shed. It keeps `capacity` slots, each a key (cut at SL_TOPK_KEY_MAX
 * bytes), a count and the overestimate it may carry. A key already held is counted in its slot;
 * a new key takes the slot with the smallest count, inherits that count as its error and adds
 * its own. Any key whose true count exceeds total/capacity is guaranteed to be held, and a held
 * key's count is at most `error` above its true count.
 *
 * Decay: every `half_life_ms` of the caller's clock, every count and error is halved (lazily,
 * on the next add or list), so the ranking follows the last few half-lives rather than the
 * whole life of the process; a slot whose count reaches 0 is freed. Time going backwards is
 * ignored. A half-life of 0 means no decay.
 *
 * Memory is allocated once, by sl_topk_init; an add is a bounded scan of the slots (capacity is
 * at most SL_TOPK_MAX_CAPACITY) with no allocation. Not thread-safe: the caller locks.
 */
#ifndef SLUICE_CORE_TOPK_H
#define SLUICE_CORE_TOPK_H

#include <stddef.h>
#include <stdint.h>

#define SL_TOPK_KEY_MAX 128
#define SL_TOPK_MAX_CAPACITY 1024

typedef struct sl_topk_slot {
    uint64_t hash;
    uint64_t count; /* 0 = free */
    uint64_t error;
    uint16_t key_len;
    char key[SL_TOPK_KEY_MAX];
} sl_topk_slot;

typedef struct sl_topk {
    sl_topk_slot *slots;
    size_t capacity;
    int64_t half_life_ms;
    int64_t epoch_ms; /* start of the current half-life */
} sl_topk;

/* One held key, as listed. key points into the sketch: valid until the next add. */
typedef struct sl_topk_entry {
    const char *key;
    size_t key_len;
    uint64_t count;
    uint64_t error;
} sl_topk_entry;

/* The hash the sketch files keys under (FNV-1a: keys are short and tables small; any fair spread
 * will do), for callers that keep small tables of names the same way. */
uint64_t sl_topk_hash(const char *s, size_t n);

/* 0, -EINVAL (capacity 0 or above SL_TOPK_MAX_CAPACITY, negative half-life) or -ENOMEM. */
int sl_topk_init(sl_topk *t, size_t capacity, int64_t half_life_ms, int64_t now_ms);
void sl_topk_free(sl_topk *t);

/* Count n events of key (n >= 1) at now_ms. */
void sl_topk_add(sl_topk *t, const char *key, size_t len, uint64_t n, int64_t now_ms);

/* Up to max held keys, the largest count first (ties: smaller error first, then key order);
 * decays first. Returns how many were written. */
size_t sl_topk_list(sl_topk *t, sl_topk_entry *out, size_t max, int64_t now_ms);

#endif

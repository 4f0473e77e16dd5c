/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_batcher: the queue of items waiting to be forwarded to one peer (BATCHING, Gubernator's
 * default behaviour). Items collect until the batch holds `limit` items - then it goes at once -
 * or until `wait` has passed since its first item. Pure bookkeeping over a caller's clock: the
 * router owns the timer and the sending, so the timing rules are tested on a virtual clock.
 *
 * An item names a pending call (`owner`) and the index of one request in it; the batcher never
 * looks inside. One batcher per (worker loop, peer): used by one thread.
 */
#ifndef SLUICE_CLUSTER_BATCHER_H
#define SLUICE_CLUSTER_BATCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_batcher_item {
    void *owner;       /* the pending call the request belongs to */
    uint32_t idx;      /* its index in that call's batch */
    uint32_t attempts; /* sends so far (a retry after a membership change counts one more) */
} sl_batcher_item;

typedef struct sl_batcher {
    sl_batcher_item *items;
    size_t n, cap;
    size_t limit;        /* items per batch, >= 1 */
    int64_t wait_ns;     /* longest an item waits for company, >= 0 */
    int64_t deadline_ns; /* when the current batch is due; INT64_MAX when empty */
} sl_batcher;

void sl_batcher_init(sl_batcher *b, size_t limit, int64_t wait_ns);
void sl_batcher_free(sl_batcher *b);

/* Queue an item arriving at now_ns. Returns 1 when the batch is now full (take it at once), 0
 * when it waits until sl_batcher_deadline(), -ENOMEM. The first item of a batch sets the deadline
 * to now_ns + wait_ns. */
int sl_batcher_add(sl_batcher *b, const sl_batcher_item *it, int64_t now_ns);

size_t sl_batcher_len(const sl_batcher *b);
int64_t sl_batcher_deadline(const sl_batcher *b);
/* Full, or its deadline has come. */
bool sl_batcher_due(const sl_batcher *b, int64_t now_ns);

/* Move up to min(max, limit) items, oldest first, into out[]; returns how many. Items left behind
 * (only when more than a batch was queued) are due at once. */
size_t sl_batcher_take(sl_batcher *b, sl_batcher_item *out, size_t max);

#endif

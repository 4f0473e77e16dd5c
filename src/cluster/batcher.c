/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batcher (see batcher.h): a growable array of items and one deadline.
 */
#include "cluster/batcher.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

void sl_batcher_init(sl_batcher *b, size_t limit, int64_t wait_ns)
{
    memset(b, 0, sizeof *b);
    b->limit = limit ? limit : 1;
    b->wait_ns = wait_ns > 0 ? wait_ns : 0;
    b->deadline_ns = INT64_MAX;
}

void sl_batcher_free(sl_batcher *b)
{
    free(b->items);
    b->items = NULL;
    b->n = b->cap = 0;
    b->deadline_ns = INT64_MAX;
}

int sl_batcher_add(sl_batcher *b, const sl_batcher_item *it, int64_t now_ns)
{
    if (sl_grow(&b->items, &b->cap, b->n, 1, 16, 0))
        return -ENOMEM;
    b->items[b->n++] = *it;
    if (b->n == 1)
        b->deadline_ns = now_ns > INT64_MAX - b->wait_ns ? INT64_MAX : now_ns + b->wait_ns;
    return b->n >= b->limit ? 1 : 0;
}

size_t sl_batcher_len(const sl_batcher *b)
{
    return b->n;
}

int64_t sl_batcher_deadline(const sl_batcher *b)
{
    return b->n ? b->deadline_ns : INT64_MAX;
}

bool sl_batcher_due(const sl_batcher *b, int64_t now_ns)
{
    return b->n > 0 && (b->n >= b->limit || now_ns >= b->deadline_ns);
}

size_t sl_batcher_take(sl_batcher *b, sl_batcher_item *out, size_t max)
{
    size_t k = b->n < max ? b->n : max;
    if (k > b->limit)
        k = b->limit;
    memcpy(out, b->items, k * sizeof *out);
    b->n -= k;
    if (b->n) {
        memmove(b->items, b->items + k, b->n * sizeof *b->items);
        b->deadline_ns = INT64_MIN; /* they have waited already */
    } else {
        b->deadline_ns = INT64_MAX;
        /* a burst can leave a large array behind: give it back */
        if (b->cap > 4096) {
            free(b->items);
            b->items = NULL;
            b->cap = 0;
        }
    }
    return k;
}

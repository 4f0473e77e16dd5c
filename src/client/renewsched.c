/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lease renewer's schedule (client/renewsched.h): a fixed table of slots, each a held lease
 * with its next due time. A handle is (generation << 32) | (slot + 1). Scans are linear over the
 * table: it is bounded (sl_client_renewer_options.max_leases) and scanned only when a renewal is
 * due, at most a few times per lease and duration.
 */
#include "client/renewsched.h"

#include <errno.h>
#include <stdlib.h>

#define MAX_CAP 65536
#define MIN_RETRY_MS 10

int sl_renewsched_init(sl_renewsched *s, size_t cap)
{
    s->slots = NULL;
    s->cap = s->used = 0;
    if (cap == 0 || cap > MAX_CAP)
        return -EINVAL;
    s->slots = calloc(cap, sizeof *s->slots);
    if (!s->slots)
        return -ENOMEM;
    s->cap = cap;
    return 0;
}

void sl_renewsched_free(sl_renewsched *s)
{
    free(s->slots);
    s->slots = NULL;
    s->cap = s->used = 0;
}

static sl_renew_slot *slot_of(const sl_renewsched *s, uint64_t h)
{
    uint64_t idx = (h & 0xffffffffu);
    if (idx == 0 || idx > s->cap)
        return NULL;
    sl_renew_slot *sl = &s->slots[idx - 1];
    if (sl->state == SL_RENEW_FREE || sl->removed || sl->gen != (uint32_t)(h >> 32))
        return NULL;
    return sl;
}

static void slot_free(sl_renewsched *s, sl_renew_slot *sl)
{
    uint32_t gen = sl->gen + 1;
    *sl = (sl_renew_slot){.gen = gen};
    s->used--;
}

int sl_renewsched_add(sl_renewsched *s, int64_t now, int64_t duration_ms, uint64_t *h)
{
    if (duration_ms < 2 || !h)
        return -EINVAL;
    if (s->used == s->cap)
        return -ENOSPC;
    for (size_t i = 0; i < s->cap; i++) {
        sl_renew_slot *sl = &s->slots[i];
        if (sl->state != SL_RENEW_FREE)
            continue;
        sl->state = SL_RENEW_HELD;
        sl->removed = false;
        sl->interval_ms = duration_ms / 2;
        sl->retry_ms = duration_ms / 8 > MIN_RETRY_MS ? duration_ms / 8 : MIN_RETRY_MS;
        sl->due_ms = now + sl->interval_ms;
        sl->renewals = sl->failures = 0;
        s->used++;
        *h = ((uint64_t)sl->gen << 32) | (uint64_t)(i + 1);
        return 0;
    }
    return -ENOSPC; /* not reached: used < cap */
}

int sl_renewsched_remove(sl_renewsched *s, uint64_t h)
{
    sl_renew_slot *sl = slot_of(s, h);
    if (!sl)
        return -ENOENT;
    if (sl->state == SL_RENEW_INFLIGHT)
        sl->removed = true; /* its renewal completes into nothing */
    else
        slot_free(s, sl);
    return 0;
}

const sl_renew_slot *sl_renewsched_get(const sl_renewsched *s, uint64_t h)
{
    return slot_of(s, h);
}

size_t sl_renewsched_take_due(sl_renewsched *s, int64_t now, uint64_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->cap && n < max; i++) {
        sl_renew_slot *sl = &s->slots[i];
        if (sl->state != SL_RENEW_HELD || sl->due_ms > now)
            continue;
        sl->state = SL_RENEW_INFLIGHT;
        out[n++] = ((uint64_t)sl->gen << 32) | (uint64_t)(i + 1);
    }
    return n;
}

void sl_renewsched_done(sl_renewsched *s, uint64_t h, int64_t now, int outcome)
{
    uint64_t idx = h & 0xffffffffu;
    if (idx == 0 || idx > s->cap)
        return;
    sl_renew_slot *sl = &s->slots[idx - 1];
    if (sl->gen != (uint32_t)(h >> 32) || sl->state != SL_RENEW_INFLIGHT)
        return;
    if (sl->removed) {
        slot_free(s, sl);
        return;
    }
    if (outcome == 0) {
        sl->state = SL_RENEW_HELD;
        sl->renewals++;
        sl->due_ms = now + sl->interval_ms;
    } else if (outcome == -ENOENT) {
        sl->state = SL_RENEW_LOST;
    } else {
        sl->state = SL_RENEW_HELD;
        sl->failures++;
        sl->due_ms = now + sl->retry_ms;
    }
}

int64_t sl_renewsched_next_due(const sl_renewsched *s)
{
    int64_t next = INT64_MAX;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].state == SL_RENEW_HELD && s->slots[i].due_ms < next)
            next = s->slots[i].due_ms;
    return next;
}

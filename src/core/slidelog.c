/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SLIDING_LOG: one timestamp per admitted hit, in a ring of exactly `limit` slots.
 *
 * Why a ring of `limit` is enough: entries at or before t - duration are dead and are dropped
 * before deciding, and n hits are admitted only if live + n <= limit, so live entries never exceed
 * the ring. Timestamps are appended in order (a request dated before the newest entry is counted at
 * the newest entry's time: created_at comes from clients and the ring must stay sorted), so the
 * oldest entry is at `head` and pruning is a pop from the front.
 *
 A limit change resizes the ring to the new limit, but never below the live entries: a lowered
 * limit keeps the larger ring (no decision admits anything meanwhile) until enough entries have
 * aged out or been given back, then shrinks, so the log stays exact and its memory stays below the
 * largest limit the key was given. Negative hits remove the newest entries (the most recent
 * admissions are given back). Work per request is O(hits + expired entries), amortised O(1) per
 * admitted hit; a resize copies the live entries once.
 */
#include "core/slidelog.h"

#include <stdlib.h>

#include "core/satmath.h"

typedef struct ring {
    int64_t *ts;
    int64_t cap, head, len;
} ring;

static int64_t *at(const ring *r, int64_t i) /* i-th oldest live entry */
{
    int64_t j = r->head + i;
    if (j >= r->cap)
        j -= r->cap;
    return &r->ts[j];
}

static void prune(ring *r, int64_t horizon) /* drop entries <= horizon */
{
    while (r->len > 0 && r->ts[r->head] <= horizon) {
        r->head = r->head + 1 == r->cap ? 0 : r->head + 1;
        r->len--;
    }
}

static void push(ring *r, int64_t t, int64_t n) /* caller guarantees len + n <= cap */
{
    for (int64_t i = 0; i < n; i++) {
        r->len++;
        *at(r, r->len - 1) = t;
    }
}

uint64_t sl_slog_side_bytes(const sl_state *st)
{
    if (st->algorithm == SL_SLIDING_LOG && st->u.log.ring)
        return (uint64_t)st->u.log.cap * sizeof(int64_t);
    return 0;
}

void sl_slog_release(sl_state *st)
{
    if (st->algorithm == SL_SLIDING_LOG)
        free(st->u.log.ring);
    st->u.log.ring = NULL;
}

void sl_slog_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                    sl_response *resp)
{
    const int64_t L = req->limit, D = req->duration, n = req->hits;
    bool same = st->algorithm == SL_SLIDING_LOG && !(req->behavior & SL_RESET_REMAINING);
    ring r = {0};
    if (same) {
        r.ts = st->u.log.ring;
        r.cap = st->u.log.cap;
        r.head = st->u.log.head;
        r.len = st->u.log.len;
        if (r.len > 0 && t < *at(&r, r.len - 1))
            t = *at(&r, r.len - 1);
    }
    const int64_t horizon = sl_sat_sub(t, D);
    prune(&r, horizon);

    /* What the key holds after this decision, before touching memory: live count and newest. */
    int64_t live = r.len;
    bool over = false;
    int64_t add = 0, drop = 0;
    if (n > 0) {
        if (n <= L - live) {
            add = n;
        } else {
            over = true;
            if (req->behavior & SL_DRAIN_OVER_LIMIT)
                add = L - live > 0 ? L - live : 0;
        }
    } else if (n < 0) {
        drop = n == INT64_MIN || -n > live ? live : -n;
    }
    const int64_t final_len = live + add - drop; /* <= max(live, L): never above the ring */

    /* Resize or create the ring before changing anything, so that a failed allocation is a no-op:
     * a new key gets `limit` slots; a raised limit grows the ring; a lowered one shrinks it once
     * the live entries fit. */
    bool resize = final_len > 0 && (!same || r.cap < L || (r.cap > L && final_len <= L));
    if (resize) {
        int64_t *ts = malloc((size_t)L * sizeof(int64_t));
        if (!ts) {
            sl_response err = {.error = sl_alg_err_nomem};
            *resp = err;
            return;
        }
        int64_t kept = r.len - drop;
        for (int64_t i = 0; i < kept; i++)
            ts[i] = *at(&r, i);
        if (!same)
            sl_alg_release(st); /* another algorithm's state, or a reset */
        else
            free(st->u.log.ring);
        r.ts = ts;
        r.cap = L;
        r.head = 0;
        r.len = kept;
        drop = 0;
    }
    r.len -= drop;
    push(&r, t, add);

    resp->status = over ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
    resp->limit = L;
    resp->remaining = L - r.len > 0 ? L - r.len : 0;
    int64_t newest_end = r.len > 0 ? sl_sat_add(*at(&r, r.len - 1), D) : t;
    resp->reset_time = newest_end;
    if (over) {
        int64_t when;
        if (n > L) {
            when = newest_end; /* never fits: time until empty */
        } else {
            /* n fit once len - (L - n) of the oldest entries have aged out. */
            int64_t i = r.len - (L - n) - 1;
            when = i < 0 ? t : sl_sat_add(*at(&r, i), D);
        }
        resp->retry_after = sl_max64(0, sl_sat_sub(when, t));
    }

    if (r.len == 0) {
        sl_alg_release(st);
        return;
    }
    st->algorithm = SL_SLIDING_LOG;
    st->status = 0;
    st->aux16 = 0;
    st->aux32 = 0;
    st->u.log.cap = r.cap;
    st->u.log.duration = D;
    st->u.log.ring = r.ts;
    st->u.log.head = r.head;
    st->u.log.len = r.len;
    *expire_at = newest_end == INT64_MAX ? newest_end : newest_end - 1;
}

/* Live entries (after now - duration) decide: none is a fresh key, `cap` of them (the limit, or
 * more while a lowered limit drains) refuse the next hit. Reads the ring from its oldest entry. */
sl_alg_info sl_slog_info(const sl_state *st, int64_t now)
{
    ring r = {st->u.log.ring, st->u.log.cap, st->u.log.head, st->u.log.len};
    const int64_t horizon = sl_sat_sub(now, st->u.log.duration);
    int64_t dead = 0;
    while (dead < r.len && *at(&r, dead) <= horizon)
        dead++;
    int64_t live = r.len - dead;
    if (live <= 0)
        return SL_INFO_FREE;
    return live >= r.cap ? SL_INFO_LIMITED : SL_INFO_HOLDS;
}

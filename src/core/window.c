/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Window counters.
 *
 * FIXED_WINDOW counts hits in [k*D, (k+1)*D) (or in the Gregorian interval holding t) and admits n
 * hits iff count + n <= limit. It can admit 2 x limit across a window edge; it costs 40 bytes.
 * With SL_COUNT_OVER_LIMIT every hit counts, admitted or not, and the key is over its limit while
 * count > limit (so a look, n = 0, after a rejection still answers OVER_LIMIT), as
 * envoyproxy/ratelimit counts in Redis.
 *
 * SLIDING_WINDOW divides the window D into S sub-windows of w = D/S ms (S = 1: the classic
 * two-window estimate), aligned to multiples of w. With c0 the current sub-window's count, c1..cS the
 * previous ones (cS the oldest) and e = t - start of the current sub-window, the hits in the last D
 * ms are estimated as
 *         est = c0 + c1 + ... + c(S-1) + cS * (w - e) / w
 * (the oldest sub-window counts for the part of it still inside (t - D, t]). n hits are admitted iff
 * est + n <= limit, decided exactly on integers (multiplied through by w, in 128 bits).
 * remaining = limit - (c0 + ... + c(S-1)) - ceil(cS * (w - e) / w), floored at 0.
 * A count stays in the estimate until its sub-window has slid out: reset_time is the end of the
 * sub-window after the one where the newest non-zero count becomes the oldest.
 *
 * Time never goes backwards for a key: a request dated before the key's current window counts in
 * that window (created_at comes from clients). Times before SL_TIME_MIN are clamped to it.
 */
#include "core/window.h"

#include <stdlib.h>

#include "core/gregorian.h"
#include "core/satmath.h"

/* ---- FIXED_WINDOW -------------------------------------------------------------------------- */

static bool fixed_gregorian(const sl_request *req)
{
    return (req->behavior & SL_DURATION_IS_GREGORIAN) != 0;
}

static const char *fixed_window(const sl_request *req, int64_t t, int64_t *start, int64_t *end)
{
    if (fixed_gregorian(req))
        return sl_greg_interval(t, req->duration, start, end);
    *start = sl_sat_mul(sl_floor_div(t, req->duration), req->duration);
    *end = sl_sat_add(*start, req->duration);
    return NULL;
}

void sl_win_fixed_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                         sl_response *resp)
{
    const int64_t L = req->limit, n = req->hits;
    const uint16_t greg = fixed_gregorian(req) ? 1 : 0;
    int64_t start, end;

    if ((resp->error = fixed_window(req, t, &start, &end)))
        return;
    bool same = st->algorithm == SL_FIXED_WINDOW && st->u.fw.duration == req->duration &&
                st->aux16 == greg && !(req->behavior & SL_RESET_REMAINING);
    if (!same)
        sl_alg_release(st);
    int64_t count = 0;
    if (same) {
        if (t < st->u.fw.window_start) {
            t = st->u.fw.window_start;
            fixed_window(req, t, &start, &end);
        }
        if (start == st->u.fw.window_start)
            count = st->u.fw.count;
    }

    bool over = false;
    if (req->behavior & SL_COUNT_OVER_LIMIT) {
        count = n >= 0 ? sl_sat_add(count, n) : (count + n < 0 ? 0 : count + n);
        over = count > L;
    } else if (n > 0) {
        if (n <= L - count) { /* count <= L here, or the test below fails: no overflow */
            count += n;
        } else {
            over = true;
            if ((req->behavior & SL_DRAIN_OVER_LIMIT) && count < L)
                count = L;
        }
    } else if (n < 0) {
        count = count + n < 0 ? 0 : count + n; /* count >= 0, n < 0: no overflow */
    }

    resp->status = over ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
    resp->limit = L;
    resp->remaining = count >= L ? 0 : L - count;
    resp->reset_time = end;
    resp->retry_after = over ? sl_max64(0, sl_sat_sub(end, t)) : 0;

    if (count == 0) {
        sl_alg_release(st);
        return;
    }
    st->algorithm = SL_FIXED_WINDOW;
    st->status = 0;
    st->aux16 = greg;
    st->aux32 = 0;
    st->u.fw.limit = L;
    st->u.fw.duration = req->duration;
    st->u.fw.window_start = start;
    st->u.fw.count = count;
    *expire_at = end == INT64_MAX ? end : end - 1;
}

/* ---- SLIDING_WINDOW ------------------------------------------------------------------------ */

typedef struct sw_view {
    int64_t S, w;
    int64_t k;       /* index of the current sub-window: floor(t / w) */
    int64_t *ring;   /* ring[j mod S] = count of sub-window j, for j in [k-S, k-1] */
} sw_view;

static int64_t slot(const sw_view *v, int64_t j)
{
    int64_t r = j % v->S;
    return r < 0 ? r + v->S : r;
}

/* Count of the sub-window i back from the current one (i in 1..S). */
static int64_t *prev_count(const sw_view *v, int64_t i)
{
    return &v->ring[slot(v, v->k - i)];
}

/* Move the current sub-window from k to k2 >= k. */
static void advance(sw_view *v, int64_t *cur, int64_t k2)
{
    if (k2 == v->k)
        return;
    if ((uint64_t)k2 - (uint64_t)v->k > (uint64_t)v->S) { /* k2 >= k: the unsigned gap is exact */
        for (int64_t i = 0; i < v->S; i++)
            v->ring[i] = 0;
    } else {
        v->ring[slot(v, v->k)] = *cur;
        for (int64_t j = v->k + 1; j < k2; j++)
            v->ring[slot(v, j)] = 0;
    }
    *cur = 0;
    v->k = k2;
}

/* Sum of the counts that weigh fully (c0 .. c(S-1)) and the oldest one (cS). */
static void sums(const sw_view *v, int64_t cur, sl_i128 *full, int64_t *oldest)
{
    sl_i128 f = cur;
    for (int64_t i = 1; i < v->S; i++)
        f += *prev_count(v, i);
    *full = f;
    *oldest = *prev_count(v, v->S);
}

/* ceil(cS * (w - e) / w): the oldest sub-window's share. */
static sl_i128 oldest_share(int64_t oldest, int64_t w, int64_t e)
{
    return sl_ceil_div128((sl_i128)oldest * (w - e), w);
}

/* Earliest time >= t at which n hits (1 <= n <= L) pass if nothing else arrives (see the file
 * comment): walk the segments between sub-window boundaries; in segment s the counts have shifted s
 * places, the full part is c0 + .. + c(S-1-s) and the decaying one is c(S-s). */
static int64_t sliding_retry(const sw_view *v, int64_t cur, int64_t L, int64_t n, int64_t e)
{
    const int64_t S = v->S, w = v->w;
    sl_i128 full;
    int64_t oldest;
    sums(v, cur, &full, &oldest);
    for (int64_t s = 0; s <= S; s++) {
        if (s > 0) {
            /* shift: c(S-s) moves out of the full part into the decaying slot */
            int64_t leaving = S - s == 0 ? cur : *prev_count(v, S - s);
            full -= leaving;
            oldest = leaving;
        }
        int64_t e0 = s == 0 ? e : 0;
        sl_i128 room = (sl_i128)L - full - n; /* what the decaying part may still weigh */
        if (room < 0)
            continue;
        int64_t at;
        if (oldest == 0) {
            at = e0;
        } else {
            /* need oldest * (w - e') <= room * w */
            sl_i128 maxleft = room * w / oldest; /* largest allowed w - e' */
            sl_i128 need = (sl_i128)w - maxleft;
            at = need > e0 ? (int64_t)need : e0;
        }
        if (at < w)
            return sl_sat_add(sl_sat_mul(sl_sat_add(v->k, s), w), at);
    }
    return sl_sat_mul(sl_sat_add(v->k, S + 1), w);
}

uint64_t sl_win_side_bytes(const sl_state *st)
{
    if (st->algorithm == SL_SLIDING_WINDOW && st->aux32 > 1 && st->u.sw.ring)
        return (uint64_t)st->aux32 * sizeof(int64_t);
    return 0;
}

void sl_win_release(sl_state *st)
{
    if (st->algorithm == SL_SLIDING_WINDOW && st->aux32 > 1)
        free(st->u.sw.ring);
    st->u.sw.ring = NULL;
}

void sl_win_sliding_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                           sl_response *resp)
{
    const int64_t L = req->limit, n = req->hits, D = req->duration;
    const int64_t S = req->sub_windows > 1 ? req->sub_windows : 1;
    const int64_t w = D / S; /* validation: D > 0, D % S == 0 */
    if (t < SL_TIME_MIN)
        t = SL_TIME_MIN;

    bool same = st->algorithm == SL_SLIDING_WINDOW && st->u.sw.duration == D &&
                (int64_t)st->aux32 == S && !(req->behavior & SL_RESET_REMAINING);
    sw_view v = {.S = S, .w = w};
    int64_t cur = 0, single = 0;
    int64_t *fresh_ring = NULL;

    if (same) {
        v.ring = S > 1 ? st->u.sw.ring : &st->u.sw.prev;
        v.k = st->u.sw.window_start / w;
        if (t < st->u.sw.window_start)
            t = st->u.sw.window_start;
        cur = st->u.sw.cur;
        advance(&v, &cur, sl_floor_div(t, w));
    } else {
        /* Fresh: decide on all-zero counts; the ring is only allocated if state is kept. */
        v.ring = &single;
        v.S = 1;
        v.k = sl_floor_div(t, w);
    }
    const int64_t e = t - v.k * w;

    sl_i128 full;
    int64_t oldest;
    sums(&v, cur, &full, &oldest);
    sl_i128 share = oldest_share(oldest, w, e);
    bool over = false;
    if (n > 0) {
        /* full + n <= L first, so that the products below stay under 2^127 */
        if (full + n <= L && (full + n) * w + (sl_i128)oldest * (w - e) <= (sl_i128)L * w) {
            cur += n; /* cur <= full <= L - n */
        } else {
            over = true;
            sl_i128 room = (sl_i128)L - full - share;
            if ((req->behavior & SL_DRAIN_OVER_LIMIT) && room > 0)
                cur += (int64_t)room; /* fills the estimate up to the limit */
        }
    } else if (n < 0) {
        /* Give back the most recent hits first: the current sub-window, then backwards. */
        uint64_t give = n == INT64_MIN ? (uint64_t)1 << 63 : (uint64_t)-n;
        uint64_t take = (uint64_t)cur < give ? (uint64_t)cur : give;
        cur -= (int64_t)take;
        give -= take;
        for (int64_t i = 1; i <= v.S && give > 0; i++) {
            int64_t *c = prev_count(&v, i);
            take = (uint64_t)*c < give ? (uint64_t)*c : give;
            *c -= (int64_t)take;
            give -= take;
        }
    }
    sums(&v, cur, &full, &oldest);
    share = oldest_share(oldest, w, e);

    /* reset: the newest non-zero sub-window j back slides fully out at (k - j + S + 1) * w. */
    int64_t newest = -1;
    if (cur > 0)
        newest = 0;
    for (int64_t i = 1; i <= v.S && newest < 0; i++)
        if (*prev_count(&v, i) > 0)
            newest = i;

    resp->status = over ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
    resp->limit = L;
    sl_i128 rem = (sl_i128)L - full - share;
    resp->remaining = rem <= 0 ? 0 : (int64_t)rem;
    int64_t end = newest < 0 ? t : sl_sat_mul(sl_sat_add(v.k - newest, S + 1), w);
    resp->reset_time = end;
    if (over) {
        int64_t at = n > L ? end : sliding_retry(&v, cur, L, n, e);
        resp->retry_after = sl_max64(0, sl_sat_sub(at, t));
    }

    if (newest < 0) {
        sl_alg_release(st);
        return;
    }
    if (!same) {
        if (S > 1) {
            fresh_ring = calloc((size_t)S, sizeof(int64_t));
            if (!fresh_ring) {
                sl_response err = {.error = sl_alg_err_nomem};
                *resp = err;
                return; /* nothing was changed yet */
            }
        }
        sl_alg_release(st);
        st->algorithm = SL_SLIDING_WINDOW;
        st->status = 0;
        st->aux16 = 0;
        st->aux32 = (uint32_t)S;
        st->u.sw.limit = L;
        st->u.sw.duration = D;
        if (S > 1)
            st->u.sw.ring = fresh_ring;
        else
            st->u.sw.prev = 0;
    }
    st->u.sw.limit = L;
    st->u.sw.window_start = v.k * w;
    st->u.sw.cur = cur;
    *expire_at = end == INT64_MAX ? end : end - 1;
}

/* ---- what a key holds (eviction order) ------------------------------------------------------- */

/* An unexpired fixed window always holds information: the algorithm drops a window with no hits
 * (count 0) and the key expires when its window ends, which sl_alg_info_of() judges first. */
sl_alg_info sl_win_fixed_info(const sl_state *st)
{
    return st->u.fw.count > 0 && st->u.fw.count >= st->u.fw.limit ? SL_INFO_LIMITED
                                                                   : SL_INFO_HOLDS;
}

/* The counts of the current and previous sub-windows: all zero is a fresh key; their sum at the
 * limit is counted as limited (the weighted estimate can only be lower, so this errs towards
 * keeping the key). */
sl_alg_info sl_win_sliding_info(const sl_state *st)
{
    int64_t sum = st->u.sw.cur;
    if (st->aux32 > 1) {
        if (st->u.sw.ring)
            for (uint32_t j = 0; j < st->aux32; j++)
                sum = sl_sat_add(sum, st->u.sw.ring[j]);
    } else {
        sum = sl_sat_add(sum, st->u.sw.prev);
    }
    if (sum <= 0)
        return SL_INFO_FREE;
    return sum >= st->u.sw.limit ? SL_INFO_LIMITED : SL_INFO_HOLDS;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GCRA (ITU-T I.371, virtual scheduling algorithm) with exact integer time.
 *
 * The key keeps one number, the theoretical arrival time TAT: when the next request would be due if
 * requests came exactly at the rate. With emission interval T = duration / limit and tolerance
 * tau = burst * T, a request of n hits arriving at t is conforming iff
 *         max(TAT, t) + (n - 1) * T  <=  t + tau
 * (its last hit may come at most tau early) and then TAT = max(TAT, t) + n * T. So a full key admits
 * burst + 1 hits at once, then one every T.
 *
 * Exactness: T is rarely a whole number of ms (or ns: 3 per second is 333333333.3 ns), and a
 * truncated T admits slightly too much, forever, drifting further with every request. Instead all
 * times are counted in units of 1/limit ms, where T is exactly `duration` units: TAT is stored as
 * whole ms plus a remainder in 1/limit ms (tat, tat_frac), and every computation is done on 128-bit
 * integers, in which t * limit, burst * duration and their sums all fit (each term < 2^126; the
 * stored ms saturate at INT64_MAX). Nothing is rounded except the answers given to the client:
 * retry_after and reset_time round up to the next whole millisecond.
 *
 * Delay instead of reject (req->max_delay_ms > 0): a request that does not conform now but would at
 * t + w, w <= max_delay, is admitted as if it had arrived at t + w: the test then holds with equality
 * or better, base at t + w is still TAT (TAT - (t + w) = (b + 1 - n) T >= 0), so TAT advances by n T
 * exactly as for an admission then, and the answer carries delay_ms = ceil(w) <= max_delay. The slot
 * is reserved in TAT, so the next request queues behind it and no slot is given twice.
 *
 * Idle keys cost nothing: a key whose TAT is not after t is full, the same as an absent key, and the
 * state is released (the store then drops the key). expire_at is the last millisecond before TAT.
 */
#include "core/gcra.h"

#include "core/satmath.h"

/* Store TAT (in 1/limit ms units) into the state, saturating the whole-ms part. */
static void store_tat(sl_state *st, sl_i128 x, int64_t limit)
{
    sl_i128 ms = sl_floor_div128(x, limit);
    if (ms > (sl_i128)INT64_MAX) {
        st->u.gcra.tat = INT64_MAX;
        st->u.gcra.tat_frac = 0;
    } else {
        st->u.gcra.tat = (int64_t)ms;
        st->u.gcra.tat_frac = (int64_t)(x - ms * limit);
    }
}

/* The stored TAT in units of 1/limit ms of the request's limit. When the limit changed, the
 * remainder is converted rounding up (TAT is a time; it keeps its place within a unit). */
static sl_i128 load_tat(const sl_state *st, int64_t limit)
{
    sl_i128 frac = st->u.gcra.tat_frac;
    if (st->u.gcra.limit != limit)
        frac = sl_ceil_div128(frac * limit, st->u.gcra.limit);
    return (sl_i128)st->u.gcra.tat * limit + frac;
}

void sl_gcra_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                    sl_response *resp)
{
    const int64_t L = req->limit, D = req->duration, b = req->burst;
    const int64_t n = req->hits;

    if (st->algorithm != SL_GCRA)
        sl_alg_release(st);
    if (L == 0) {
        /* Rate 0 (Levee: "nothing passes"): deny every hit; the state, if any, is left alone. */
        resp->status = n > 0 ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
        resp->limit = 0;
        resp->remaining = 0;
        resp->reset_time = t;
        return;
    }
    if (req->behavior & SL_RESET_REMAINING)
        sl_alg_release(st); /* full again: as if the key were new */

    /* Negative times (before 1970) are clamped so that every 128-bit term stays below 2^126. */
    const int64_t tc = t < 0 ? 0 : t;
    const sl_i128 ts = (sl_i128)tc * L;    /* t in 1/L ms */
    const sl_i128 Tu = D;                  /* T in 1/L ms */
    const sl_i128 cap = ((sl_i128)b + 1) * Tu; /* tau + T: how far TAT may run ahead of t */
    sl_i128 x = st->algorithm == SL_GCRA ? load_tat(st, L) : ts;
    sl_i128 base = x > ts ? x : ts;
    bool over = false;

    if (n > 0) {
        /* Conforming iff base + (n-1)T <= t + tau, i.e. base - t <= (b + 1 - n) T. */
        if ((sl_i128)n > (sl_i128)b + 1 || base - ts > ((sl_i128)b + 1 - n) * Tu) {
            over = true;
            if (req->max_delay_ms > 0 && (sl_i128)n <= (sl_i128)b + 1) {
                /* the wait until it conforms, in 1/L ms; within max_delay: reserve its slot */
                sl_i128 w = base - ts - ((sl_i128)b + 1 - n) * Tu;
                if (w <= (sl_i128)req->max_delay_ms * L) {
                    over = false; /* TAT advances below, as for an admission at t + w */
                    resp->delay_ms = sl_sat_i128(sl_ceil_div128(w, L));
                }
            }
        }
        if (over) {
            if (req->behavior & SL_DRAIN_OVER_LIMIT) {
                sl_i128 full = ts + cap; /* nothing left: TAT at t + tau + T */
                if (x < full)
                    x = full;
            }
        } else {
            x = base + (sl_i128)n * Tu;
        }
    } else if (n < 0 && x > ts) {
        /* Give back |n| hits: move TAT back, never before t (a key cannot be fuller than full). */
        sl_i128 back = -(sl_i128)n * Tu;
        x = x - back > ts ? x - back : ts;
    }

    resp->status = over ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
    resp->limit = sl_sat_add(b, 1);
    if (x <= ts) {
        resp->remaining = resp->limit;
        resp->reset_time = tc;
    } else {
        sl_i128 left = cap - (x - ts); /* in T units: admissions still possible now, times T */
        resp->remaining = left <= 0 ? 0 : sl_sat_i128(left / Tu);
        resp->reset_time = sl_sat_i128(sl_ceil_div128(x, L));
    }
    if (over) {
        if ((sl_i128)n > (sl_i128)b + 1) {
            resp->retry_after = sl_sat_sub(resp->reset_time, tc); /* never fits: time until full */
        } else {
            sl_i128 b2 = x > ts ? x : ts;
            sl_i128 wait = b2 - ts - ((sl_i128)b + 1 - n) * Tu; /* > 0 in 1/L ms */
            resp->retry_after = wait <= 0 ? 0 : sl_sat_i128(sl_ceil_div128(wait, L));
        }
    }

    if (x <= ts) {
        sl_alg_release(st);
        return;
    }
    st->algorithm = SL_GCRA;
    st->status = 0;
    st->aux16 = 0;
    st->aux32 = 0;
    store_tat(st, x, L);
    st->u.gcra.limit = L;
    st->u.gcra.duration = D;
    st->u.gcra.burst = b;
    *expire_at = sl_sat_sub(sl_sat_i128(sl_ceil_div128(x, L)), 1);
}

/* TAT <= now is a full key (what a fresh one holds); one more hit conforms iff TAT - now <= tau
 * (base + 0 * T <= t + tau), so beyond that the key refuses the next hit. */
sl_alg_info sl_gcra_info(const sl_state *st, int64_t now)
{
    const int64_t L = st->u.gcra.limit;
    if (L <= 0)
        return SL_INFO_FREE;
    const int64_t tc = now < 0 ? 0 : now;
    const sl_i128 x = load_tat(st, L), ts = (sl_i128)tc * L;
    if (x <= ts)
        return SL_INFO_FREE;
    return x - ts > (sl_i128)st->u.gcra.burst * st->u.gcra.duration ? SL_INFO_LIMITED
                                                                     : SL_INFO_HOLDS;
}

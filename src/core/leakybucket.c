/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LEAKY_BUCKET, answering case by case what Gubernator v2's leakyBucket() answers (algorithms.go).
 *
 * State: remaining (a double), limit, duration, burst and updated_at, the time of the last leak.
 * Per request: rate = duration / limit ms per hit; leak = (t - updated_at) / rate; the leak is added
 * (fraction included) and updated_at moved only once a whole hit has leaked, then remaining is
 * clamped to burst when its integer part exceeds burst. The integer part of remaining is what the
 * client sees and what hits are compared against. Kept as in Gubernator, because they change
 * answers:
 *   - hits > remaining is rejected without consuming (DRAIN_OVER_LIMIT empties instead);
 *   - hits equal to the integer part of remaining empties the bucket, fraction included, and so
 *     does a peek when less than one hit remains (the only case where a peek changes state);
 *   - a burst change refills to the new burst if it exceeds the integer remaining;
 *   - RESET_REMAINING refills to burst, then applies the hits;
 *   - reset_time = t + (limit - remaining) * trunc(rate), which is in the past when remaining
 *     exceeds limit (burst > limit, negative hits);
 *   - the item's ExpireAt moves to t + duration on every request with hits != 0 (not on peeks).
 * The double arithmetic is IEEE-754 like Go's; conversions to int64 truncate like Go's and saturate
 * where Go's are undefined (docs/algorithms.md, "Bad input").
 */
#include "core/leakybucket.h"

#include "core/gregorian.h"
#include "core/satmath.h"

typedef struct lb_params {
    int64_t burst;
    double rate;       /* ms per hit; +inf when limit is 0 (nothing ever leaks) */
    int64_t rate_ms;   /* int64(rate), what Gubernator multiplies reset_time with */
    int64_t duration;  /* ms until a hit's item expires (to the interval's end when Gregorian) */
} lb_params;

static const char *params_of(const sl_request *req, int64_t now, lb_params *p)
{
    p->burst = req->burst == 0 ? req->limit : req->burst;
    int64_t d = req->duration;
    p->duration = req->duration;
    if (req->behavior & SL_DURATION_IS_GREGORIAN) {
        int64_t expire;
        const char *err = sl_greg_duration(now, req->duration, &d);
        if (err || (err = sl_greg_expiration(now, req->duration, &expire)))
            return err;
        p->duration = sl_sat_sub(expire, now);
    }
    p->rate = (double)d / (double)req->limit;
    p->rate_ms = req->limit == 0 ? 0 : sl_f2i(p->rate);
    return NULL;
}

/* Gubernator: createdAt + (limit - remaining) * int64(rate). With limit 0 (rate +inf) it
 * multiplies by Go's int64(+Inf), a garbage value; the bucket never refills, so t is the answer. */
static int64_t reset_time(int64_t t, int64_t limit, int64_t remaining, const lb_params *p)
{
    return sl_sat_add(t, sl_sat_mul(sl_sat_sub(limit, remaining), p->rate_ms));
}

/* The integer remaining the bucket would show at time t2 (the leak and clamp of a decision). */
static int64_t remaining_at(const sl_state *st, int64_t t2, const lb_params *p)
{
    double r = st->u.lb.remaining;
    double leak = (double)sl_sat_sub(t2, st->u.lb.updated_at) / p->rate;
    if (sl_f2i(leak) > 0)
        r += leak;
    if (sl_f2i(r) > p->burst)
        r = (double)p->burst;
    return sl_f2i(r);
}

/* ms from t until `hits` would pass: until enough has leaked, or until the item expires and comes
 * back full, whichever is first. When hits exceed the burst no wait helps; the answer is then the
 * time until the bucket is full (0 if it is). */
static int64_t retry_after(const sl_state *st, int64_t expire_at, int64_t hits, int64_t t,
                           const lb_params *p)
{
    int64_t want = hits;
    if (hits > p->burst) {
        if (sl_f2i(st->u.lb.remaining) >= p->burst)
            return 0; /* already full: waiting cannot help */
        want = p->burst;
    }
    int64_t best = sl_sat_add(expire_at, 1); /* an expired item comes back full (burst) */
    double need = (double)want - st->u.lb.remaining;
    if (need < 1.0)
        need = 1.0; /* Gubernator leaks only whole hits */
    double when = (double)st->u.lb.updated_at + need * p->rate;
    if (when < 9223372036854775808.0) {
        int64_t cand = sl_max64(t, sl_f2i(ceil(when)));
        /* The double estimate can be a millisecond early or late: step to the exact answer. */
        for (int i = 0; i < 4 && cand > t && remaining_at(st, cand - 1, p) >= want; i++)
            cand--;
        for (int i = 0; i < 4 && cand < INT64_MAX && remaining_at(st, cand, p) < want; i++)
            cand++;
        if (remaining_at(st, cand, p) >= want && cand < best)
            best = cand;
    }
    return sl_max64(0, sl_sat_sub(best, t));
}

static void init_item(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                      const lb_params *p, sl_response *resp)
{
    int64_t remaining = sl_sat_sub(p->burst, req->hits);
    st->algorithm = SL_LEAKY_BUCKET;
    st->status = SL_UNDER_LIMIT;
    st->aux16 = (req->behavior & SL_DURATION_IS_GREGORIAN) ? 1 : 0; /* for sl_lb_info() */
    st->aux32 = 0;
    st->u.lb.remaining = (double)remaining;
    st->u.lb.limit = req->limit;
    st->u.lb.duration = p->duration;
    st->u.lb.updated_at = t;
    st->u.lb.burst = p->burst;
    *expire_at = sl_sat_add(t, p->duration);

    resp->status = SL_UNDER_LIMIT;
    resp->limit = req->limit;
    resp->remaining = remaining;
    resp->reset_time = reset_time(t, req->limit, remaining, p);
    if (req->hits > p->burst) {
        /* Unlike the token bucket, a new leaky bucket asked for too much starts empty. */
        resp->status = SL_OVER_LIMIT;
        resp->remaining = 0;
        resp->reset_time = reset_time(t, req->limit, 0, p);
        st->u.lb.remaining = 0;
        resp->retry_after = retry_after(st, *expire_at, req->hits, t, p);
    }
}

void sl_lb_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t, int64_t now,
                  sl_response *resp)
{
    lb_params p;
    if ((resp->error = params_of(req, now, &p)))
        return;
    if (st->algorithm != SL_LEAKY_BUCKET) {
        sl_alg_release(st); /* another algorithm's state: start fresh */
        init_item(st, expire_at, req, t, &p, resp);
        return;
    }

    if (req->behavior & SL_RESET_REMAINING)
        st->u.lb.remaining = (double)p.burst;
    if (st->u.lb.burst != p.burst) {
        if (p.burst > sl_f2i(st->u.lb.remaining))
            st->u.lb.remaining = (double)p.burst;
        st->u.lb.burst = p.burst;
    }
    st->u.lb.limit = req->limit;
    st->u.lb.duration = req->duration;
    st->aux16 = (req->behavior & SL_DURATION_IS_GREGORIAN) ? 1 : 0;

    if (req->hits != 0)
        *expire_at = sl_sat_add(t, p.duration);

    double leak = (double)sl_sat_sub(t, st->u.lb.updated_at) / p.rate;
    if (sl_f2i(leak) > 0) {
        st->u.lb.remaining += leak;
        st->u.lb.updated_at = t;
    }
    if (sl_f2i(st->u.lb.remaining) > p.burst)
        st->u.lb.remaining = (double)p.burst;

    int64_t rem = sl_f2i(st->u.lb.remaining);
    resp->limit = req->limit;
    resp->remaining = rem;
    resp->status = SL_UNDER_LIMIT;
    resp->reset_time = reset_time(t, req->limit, rem, &p);

    if (rem == 0 && req->hits > 0) {
        resp->status = SL_OVER_LIMIT;
    } else if (rem == req->hits) {
        st->u.lb.remaining = 0;
        resp->remaining = 0;
        resp->reset_time = reset_time(t, req->limit, 0, &p);
    } else if (req->hits > rem) {
        resp->status = SL_OVER_LIMIT;
        if (req->behavior & SL_DRAIN_OVER_LIMIT) {
            st->u.lb.remaining = 0;
            resp->remaining = 0;
        }
    } else if (req->hits != 0) {
        st->u.lb.remaining -= (double)req->hits;
        resp->remaining = sl_f2i(st->u.lb.remaining);
        resp->reset_time = reset_time(t, req->limit, resp->remaining, &p);
    }
    if (resp->status == SL_OVER_LIMIT)
        resp->retry_after = retry_after(st, *expire_at, req->hits, t, &p);
}

/* The bucket at `now`: leaked back to its burst is what a fresh bucket holds; below one whole hit
 * refuses the next one. The leak is computed as a decision would (rate = duration / limit); for a
 * Gregorian bucket (aux16 = 1: duration is an interval code) no leak is assumed, which can only
 * make the key look fuller of information than it is, never less. */
sl_alg_info sl_lb_info(const sl_state *st, int64_t now)
{
    double r = st->u.lb.remaining;
    if (!st->aux16 && st->u.lb.limit > 0 && st->u.lb.duration > 0) {
        double leak = (double)sl_sat_sub(now, st->u.lb.updated_at) * (double)st->u.lb.limit /
                      (double)st->u.lb.duration;
        if (sl_f2i(leak) > 0)
            r += leak;
    }
    int64_t rem = sl_f2i(r);
    if (rem >= st->u.lb.burst)
        return SL_INFO_FREE;
    return rem < 1 ? SL_INFO_LIMITED : SL_INFO_HOLDS;
}

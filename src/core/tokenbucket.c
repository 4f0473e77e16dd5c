/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TOKEN_BUCKET, answering case by case what Gubernator v2's tokenBucket() answers (algorithms.go),
 * with the arithmetic made saturating. Gubernator's item is (status, limit, duration, remaining,
 * created_at) plus the cache's ExpireAt, which is our *expire_at: the bucket refills only by expiring
 * (ExpireAt < now), so reset_time is ExpireAt.
 *
 * The Gubernator rules worth knowing, all kept:
 *   - hits > remaining is rejected without consuming anything (a smaller request can still pass),
 *     unless DRAIN_OVER_LIMIT, which empties the bucket;
 *   - a hit on an empty bucket makes the status sticky: every answer says OVER_LIMIT until the item
 *     expires or is reset, even a peek, even after the limit grows;
 *   - a limit change adds the difference to remaining (floored at 0);
 *   - RESET_REMAINING refills an existing bucket and answers without applying the hits, with
 *     reset_time 0;
 *   - negative hits add to remaining, past the limit if asked to.
 * One deliberate difference: when a duration change makes the item already expired, Gubernator
 * renews it but answers (and tests "already at the limit") with the remaining it copied before the
 * renewal; sluice answers from the renewed bucket and clears the sticky status, since the renewal is
 * a new window (docs/algorithms.md lists this with the other deviations).
 */
#include "core/tokenbucket.h"

#include "core/gregorian.h"
#include "core/satmath.h"

static bool gregorian(const sl_request *req)
{
    return (req->behavior & SL_DURATION_IS_GREGORIAN) != 0;
}

/* The retry hint: a token bucket only refills by expiring, at expire_at + 1. */
static int64_t retry_after(int64_t expire_at, int64_t t)
{
    return sl_max64(0, sl_sat_sub(sl_sat_add(expire_at, 1), t));
}

static void init_item(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t,
                      int64_t now, sl_response *resp)
{
    int64_t expire = sl_sat_add(t, req->duration);
    if (gregorian(req) && (resp->error = sl_greg_expiration(now, req->duration, &expire)))
        return;

    st->algorithm = SL_TOKEN_BUCKET;
    st->status = SL_UNDER_LIMIT;
    st->aux16 = 0;
    st->aux32 = 0;
    st->u.tb.limit = req->limit;
    st->u.tb.duration = req->duration;
    st->u.tb.remaining = sl_sat_sub(req->limit, req->hits);
    st->u.tb.created_at = t;
    *expire_at = expire;

    resp->status = SL_UNDER_LIMIT;
    resp->limit = req->limit;
    resp->remaining = st->u.tb.remaining;
    resp->reset_time = expire;
    if (req->hits > req->limit) {
        /* A new bucket asked for more than it holds: rejected, nothing consumed. */
        resp->status = SL_OVER_LIMIT;
        resp->remaining = req->limit;
        st->u.tb.remaining = req->limit;
        resp->retry_after = retry_after(expire, t);
    }
}

void sl_tb_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t t, int64_t now,
                  sl_response *resp)
{
    if (st->algorithm != SL_TOKEN_BUCKET) {
        if (gregorian(req) && sl_greg_check(req->duration)) {
            resp->error = sl_greg_check(req->duration);
            return;
        }
        sl_alg_release(st); /* another algorithm's state: start fresh */
        init_item(st, expire_at, req, t, now, resp);
        return;
    }
    if (gregorian(req) && (resp->error = sl_greg_check(req->duration)))
        return;

    if (req->behavior & SL_RESET_REMAINING) {
        st->u.tb.remaining = req->limit;
        st->u.tb.limit = req->limit;
        st->status = SL_UNDER_LIMIT;
        resp->status = SL_UNDER_LIMIT;
        resp->limit = req->limit;
        resp->remaining = req->limit;
        resp->reset_time = 0;
        return;
    }

    if (st->u.tb.limit != req->limit) {
        /* Both limits are >= 0, so the difference cannot overflow; the sum can. */
        st->u.tb.remaining = sl_sat_add(st->u.tb.remaining, req->limit - st->u.tb.limit);
        if (st->u.tb.remaining < 0)
            st->u.tb.remaining = 0;
        st->u.tb.limit = req->limit;
    }

    if (st->u.tb.duration != req->duration) {
        int64_t expire = sl_sat_add(st->u.tb.created_at, req->duration);
        if (gregorian(req))
            sl_greg_expiration(now, req->duration, &expire); /* checked above */
        if (expire <= t) {
            /* The new duration has already run out: renew the item as a new window. */
            if (gregorian(req))
                sl_greg_expiration(t, req->duration, &expire);
            else
                expire = sl_sat_add(t, req->duration);
            st->u.tb.created_at = t;
            st->u.tb.remaining = st->u.tb.limit;
            st->status = SL_UNDER_LIMIT;
        }
        *expire_at = expire;
        st->u.tb.duration = req->duration;
    }

    resp->status = st->status;
    resp->limit = req->limit;
    resp->remaining = st->u.tb.remaining;
    resp->reset_time = *expire_at;

    if (req->hits == 0) {
        /* peek: reports the sticky status */
    } else if (st->u.tb.remaining == 0 && req->hits > 0) {
        resp->status = SL_OVER_LIMIT;
        st->status = SL_OVER_LIMIT;
    } else if (st->u.tb.remaining == req->hits) {
        st->u.tb.remaining = 0;
        resp->remaining = 0;
    } else if (req->hits > st->u.tb.remaining) {
        resp->status = SL_OVER_LIMIT;
        if (req->behavior & SL_DRAIN_OVER_LIMIT) {
            st->u.tb.remaining = 0;
            resp->remaining = 0;
        }
    } else {
        st->u.tb.remaining = sl_sat_sub(st->u.tb.remaining, req->hits);
        resp->remaining = st->u.tb.remaining;
    }
    if (resp->status == SL_OVER_LIMIT)
        resp->retry_after = retry_after(*expire_at, t);
}

/* Full (remaining >= limit, status not sticky) is what a fresh bucket holds; empty or sticky
 * OVER_LIMIT refuses the next hit. Expiry is judged by the caller. */
sl_alg_info sl_tb_info(const sl_state *st)
{
    if (st->status == SL_OVER_LIMIT || st->u.tb.remaining <= 0)
        return SL_INFO_LIMITED;
    return st->u.tb.remaining >= st->u.tb.limit ? SL_INFO_FREE : SL_INFO_HOLDS;
}

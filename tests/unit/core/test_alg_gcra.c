/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GCRA: Levee's vectors (burst b admits b + 1 at once, then one per T), exactness over long runs
 * (no drift, whatever remainder duration/limit leaves), and the cases every algorithm shares: peek,
 * negative hits, DRAIN_OVER_LIMIT, RESET_REMAINING, limit changes, expiry when full, rate 0; and
 * delay instead of reject (max_delay_ms): exact reservations, never over max_delay or the rate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "alg_harness.h"

#define T0 INT64_C(1700000000000)

static sl_request gcra(int64_t hits, int64_t limit, int64_t duration, int64_t burst)
{
    sl_request r = ah_req(SL_GCRA, hits, limit, duration);
    r.burst = burst;
    return r;
}

static void test_levee_vector(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 1, 1000, 4);
    for (int i = 0; i < 5; i++) {
        sl_response r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.limit, 5);
        assert_int_equal(r.remaining, 4 - i);
        assert_int_equal(r.retry_after, 0);
        assert_int_equal(r.reset_time, T0 + 1000 * (i + 1));
    }
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.retry_after, 1000);
    assert_int_equal(r.reset_time, T0 + 5000);
    ah_advance(&h, 999);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 1);
    ah_advance(&h, 1);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 0);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 1000);
    /* Idle until full: the key expires (TAT <= now) and reads as new. */
    ah_advance(&h, 5000);
    sl_request peek = gcra(0, 1, 1000, 4);
    r = ah_decide(&h, &peek);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_time, h.now);
    ah_free(&h);
}

/* Requests every ms for an hour at 3/s: exactly 3 * 3600 + burst pass (b + 1 at t = 0, then one
 * every 333.3 ms up to, not including, the hour). */
static int64_t admitted_every_ms(int64_t limit, int64_t duration, int64_t burst, int64_t span)
{
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, limit, duration, burst);
    int64_t n = 0;
    for (int64_t t = 0; t < span; t++) {
        h.now = T0 + t;
        sl_response r = ah_decide(&h, &q);
        if (r.status == SL_UNDER_LIMIT)
            n++;
    }
    ah_free(&h);
    return n;
}

static void test_no_drift_hour(void **state)
{
    (void)state;
    const int64_t hour = INT64_C(3600000), minute = 60000;
    assert_int_equal(admitted_every_ms(3, 1000, 7, hour), 3 * 3600 + 7);
    assert_int_equal(admitted_every_ms(3, 1000, 1, 20 * minute), 3 * 1200 + 1);
    assert_int_equal(admitted_every_ms(7, 3000, 2, 20 * minute), 7 * 400 + 2);
    /* 1000 per minute: 60 ms apart */
    assert_int_equal(admitted_every_ms(1000, 60000, 10, 10 * minute), 10000 + 10);
    /* Burst 0 is I.371 with zero tolerance: a request one fraction of a ms after TAT finds the key
     * full, and the next TAT counts from it, so a client on a 1 ms grid gets one every
     * ceil(333.3) = 334 ms. That is the algorithm, not drift: tau absorbs such jitter. */
    assert_int_equal(admitted_every_ms(3, 1000, 0, hour), (hour + 333) / 334);
    assert_int_equal(admitted_every_ms(1000, 60000, 0, 10 * minute), 10000); /* T whole: exact */
}

/* Exact spacing at T = 1000/3 ms, burst 1: after the two at t = 0, the k-th request is due at
 * k * 1000 / 3 ms; one millisecond before its due time (when that is not a whole ms) it is refused
 * with retry_after 1, at the due ms it passes. Over an hour, so that a truncated T would have
 * drifted by whole milliseconds. */
static void test_exact_spacing(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 3, 1000, 1);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    for (int64_t k = 1; k <= 3 * 3600; k++) {
        int64_t due = (k * 1000 + 2) / 3; /* ceil(k * 1000 / 3) */
        if ((k * 1000) % 3 != 0) {
            h.now = T0 + due - 1;
            sl_response r = ah_decide(&h, &q);
            assert_int_equal(r.status, SL_OVER_LIMIT);
            assert_int_equal(r.retry_after, 1);
        }
        h.now = T0 + due;
        sl_response r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
    }
    ah_free(&h);
}

/* A rate far above one per ms (0.7 per ns): 700000 hits each ms pass forever, 700001 never. A
 * truncated nanosecond T (1 ns instead of 1.43) would admit 43% too much. */
static void test_high_rate(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(700000, 700000000, 1000, 699999);
    sl_request more = gcra(700001, 700000000, 1000, 699999);
    for (int i = 0; i < 100000; i++) {
        sl_response r = ah_decide(&h, &more);
        assert_int_equal(r.status, SL_OVER_LIMIT);
        r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.remaining, 0);
        r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_OVER_LIMIT);
        assert_int_equal(r.retry_after, 1);
        ah_advance(&h, 1);
    }
    ah_free(&h);
}

static void test_batch_hits(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(3, 10, 1000, 4); /* T = 100 ms, 5 at once */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    sl_response r = ah_decide(&h, &q); /* needs TAT - tau + 2T <= t: 100 ms short */
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.retry_after, 100);
    q.hits = 2;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    /* more than b + 1 can never pass: retry_after is the time until full */
    q.hits = 6;
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 500);
    assert_int_equal(r.reset_time, T0 + 500);
    ah_advance(&h, 500);
    assert_true(sl_alg_expired(h.expire_at, h.now)); /* full again: the key is gone */
    q.hits = 5;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    ah_free(&h);
}

static void test_peek_and_new_key(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request peek = gcra(0, 10, 1000, 4);
    sl_response r = ah_decide(&h, &peek);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.limit, 5);
    assert_int_equal(r.reset_time, T0);
    assert_false(ah_held(&h)); /* a peek creates nothing */
    sl_request one = gcra(1, 10, 1000, 4);
    AH_EXPECT(&h, &one, SL_UNDER_LIMIT, 4);
    sl_state before = h.st;
    int64_t exp = h.expire_at;
    ah_advance(&h, 30);
    r = ah_decide(&h, &peek);
    assert_int_equal(r.remaining, 4);
    assert_int_equal(r.reset_time, T0 + 100);
    assert_memory_equal(&before, &h.st, sizeof(before));
    assert_int_equal(exp, h.expire_at);
    assert_int_equal(h.expire_at, T0 + 99);
    /* too big on a new key: refused, nothing kept */
    alg_h g;
    ah_init(&g, T0);
    sl_request big = gcra(6, 10, 1000, 4);
    r = ah_decide(&g, &big);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 0);
    assert_false(ah_held(&g));
    ah_free(&h);
    ah_free(&g);
}

static void test_negative_hits(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(5, 10, 1000, 4);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    q.hits = -2;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    q.hits = -100; /* never fuller than full */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    assert_false(ah_held(&h));
    q.hits = INT64_MIN;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    ah_free(&h);
}

static void test_drain_and_reset(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(2, 10, 1000, 4);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 3);
    q.hits = 4;
    q.behavior = SL_DRAIN_OVER_LIMIT;
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_time, T0 + 500);
    assert_int_equal(r.retry_after, 400); /* 4 hits fit once TAT - T <= t: 400 ms */
    q.hits = 1;
    q.behavior = 0;
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 100);
    q.behavior = SL_RESET_REMAINING;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 4);
    ah_free(&h);
}

static void test_limit_change(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(3, 3, 1000, 2); /* T = 333.3 ms: TAT = T0 + 1000 */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    /* 6 per s: T = 166.6, capacity 3: TAT - t = 1000 = 6 T, capacity window 3 T: nothing left */
    sl_request q6 = gcra(1, 6, 1000, 2);
    sl_response r = ah_decide(&h, &q6);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 667); /* TAT - tau = 1000 - 333.3 ms away */
    /* duration change: 3 per 100 ms, tolerance 66.6 ms: TAT stays at T0 + 1000 */
    sl_request fast = gcra(1, 3, 100, 2);
    r = ah_decide(&h, &fast);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 934);
    ah_advance(&h, 1000);
    AH_EXPECT(&h, &fast, SL_UNDER_LIMIT, 2);
    ah_free(&h);
}

static void test_rate_zero(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 0, 1000, 10);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.limit, 0);
    assert_false(ah_held(&h));
    q.hits = 0;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    ah_free(&h);
}

static void test_created_at_and_backwards_time(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 1, 1000, 0);
    q.created_at = T0 + 5000; /* a client ahead of us */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    assert_int_equal(h.expire_at, T0 + 5999);
    q.created_at = 0;
    sl_response r = ah_decide(&h, &q); /* at T0 the TAT is 6 s away */
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 6000);
    ah_free(&h);
}

/* Delay instead of reject: 3 per second (T = 333.3 ms, not a whole ms), burst 0, callers willing to
 * wait 1 s. Each answer's delay is exact (ceil of the conforming time), never above max_delay, and
 * the slots reserved are distinct: admission k leaves at k * T, never two in one slot. */
static void test_delay_reserves_exact_slots(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 3, 1000, 0);
    q.max_delay_ms = 1000;
    int64_t prev_leave = -1;
    for (int k = 0; k < 4; k++) {
        sl_response r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        /* slot k conforms at k * 1000 / 3 ms */
        int64_t want = (k * 1000 + 2) / 3;
        assert_int_equal(r.delay_ms, want);
        assert_true(r.delay_ms <= q.max_delay_ms);
        assert_true(r.delay_ms > prev_leave);
        prev_leave = r.delay_ms;
        assert_int_equal(r.retry_after, 0);
    }
    /* the fifth would wait 1333.3 ms > 1000: rejected; retry_after keeps its meaning (when it
     * would conform with no wait) */
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.delay_ms, 0);
    assert_int_equal(r.retry_after, 1334);
    /* a rejection reserved nothing: after 334 ms the next caller gets slot 4 at 1333.3 ms */
    ah_advance(&h, 334);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.delay_ms, 1000); /* ceil(1333.33 - 334) = 1000 */
    ah_free(&h);
}

/* Over a long run on a virtual clock, callers arriving at 10x the rate and willing to wait 200 ms:
 * every admission's departure (arrival + delay) is at or after its exact slot, departures never
 * exceed the rate over any window (b + 1 = 2 per T at most), and delay never exceeds max_delay. */
static void test_delay_long_run_shapes(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 7, 1000, 1); /* T = 142.857 ms, burst 1 */
    q.max_delay_ms = 200;
    int64_t leave[4096];
    int nl = 0;
    for (int i = 0; i < 20000 && nl < 4096; i++) {
        sl_response r = ah_decide(&h, &q);
        if (r.status == SL_UNDER_LIMIT) {
            assert_true(r.delay_ms >= 0 && r.delay_ms <= 200);
            leave[nl++] = h.now + r.delay_ms;
        } else {
            assert_int_equal(r.delay_ms, 0);
        }
        ah_advance(&h, 14);
    }
    assert_true(nl > 1000);
    /* departures are in order and any 1000 ms holds at most 7 + 2 (rate plus burst, rounding) */
    for (int i = 1; i < nl; i++)
        assert_true(leave[i] >= leave[i - 1]);
    for (int i = 0; i + 9 < nl; i++)
        assert_true(leave[i + 9] - leave[i] >= 1000);
    /* admitted exactly the rate: over 280 s, 7/s, + b + 1 at once, + what 200 ms of lookahead
     * reserves */
    int64_t span = h.now - T0;
    assert_true(nl <= span * 7 / 1000 + 2 + 2);
    assert_true(nl >= span * 7 / 1000 - 2);
    ah_free(&h);
}

/* max_delay does not change a conforming answer, a request that can never fit (n > b + 1), or a
 * peek. */
static void test_delay_leaves_others_alone(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = gcra(1, 1, 1000, 0);
    q.max_delay_ms = 5000;
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.delay_ms, 0);
    sl_request big = gcra(3, 1, 1000, 0);
    big.max_delay_ms = 100000;
    r = ah_decide(&h, &big);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.delay_ms, 0);
    sl_request peek = gcra(0, 1, 1000, 0);
    peek.max_delay_ms = 5000;
    r = ah_decide(&h, &peek);
    assert_int_equal(r.delay_ms, 0);
    assert_int_equal(r.remaining, 0);
    /* just past max_delay: rejected; exactly at it: admitted */
    sl_request q2 = gcra(1, 1, 1000, 0);
    q2.max_delay_ms = 999;
    r = ah_decide(&h, &q2);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    q2.max_delay_ms = 1000;
    r = ah_decide(&h, &q2);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.delay_ms, 1000);
    ah_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levee_vector),
        cmocka_unit_test(test_no_drift_hour),
        cmocka_unit_test(test_exact_spacing),
        cmocka_unit_test(test_high_rate),
        cmocka_unit_test(test_batch_hits),
        cmocka_unit_test(test_peek_and_new_key),
        cmocka_unit_test(test_negative_hits),
        cmocka_unit_test(test_drain_and_reset),
        cmocka_unit_test(test_limit_change),
        cmocka_unit_test(test_rate_zero),
        cmocka_unit_test(test_created_at_and_backwards_time),
        cmocka_unit_test(test_delay_reserves_exact_slots),
        cmocka_unit_test(test_delay_long_run_shapes),
        cmocka_unit_test(test_delay_leaves_others_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

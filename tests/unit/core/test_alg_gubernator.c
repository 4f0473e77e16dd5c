/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TOKEN_BUCKET and LEAKY_BUCKET against Gubernator v2: every sequence of Gubernator's
 * functional_test.go for the two buckets, replayed on a virtual clock with the values Gubernator's
 * tests assert (where Gubernator only asserts "reset_time != 0", the exact value is asserted here),
 * plus the cases its code decides without a test of its own: sticky OVER_LIMIT, a changed duration,
 * burst changes, created_at, algorithm switches, the fractional remaining, retry_after.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "alg_harness.h"
#include "core/gregorian.h"

/* 2023-11-14 22:13:20 UTC, a whole second, so Gubernator's seconds-based asserts are exact. */
#define T0 INT64_C(1700000000000)
#define SEC INT64_C(1000)

static sl_request tb(int64_t hits, int64_t limit, int64_t duration)
{
    return ah_req(SL_TOKEN_BUCKET, hits, limit, duration);
}

static sl_request lb(int64_t hits, int64_t limit, int64_t duration)
{
    return ah_req(SL_LEAKY_BUCKET, hits, limit, duration);
}

/* ---- TOKEN_BUCKET ---------------------------------------------------------------------------- */

static void test_over_the_limit(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    const int64_t want_rem[] = {1, 0, 0};
    const int want_st[] = {SL_UNDER_LIMIT, SL_UNDER_LIMIT, SL_OVER_LIMIT};
    for (int i = 0; i < 3; i++) {
        sl_request q = tb(1, 2, 9 * SEC);
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.status, want_st[i]);
        assert_int_equal(r.remaining, want_rem[i]);
        assert_int_equal(r.limit, 2);
        assert_int_equal(r.reset_time, T0 + 9 * SEC);
    }
    ah_free(&h);
}

static void test_multiple_async(void **state)
{
    (void)state;
    alg_h a, b;
    ah_init(&a, T0);
    ah_init(&b, T0);
    sl_request q1 = tb(1, 2, 9 * SEC), q2 = tb(5, 10, 9 * SEC);
    AH_EXPECT(&a, &q1, SL_UNDER_LIMIT, 1);
    AH_EXPECT(&b, &q2, SL_UNDER_LIMIT, 5);
    ah_free(&a);
    ah_free(&b);
}

static void test_token_bucket(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(1, 2, 5);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_time, T0 + 5);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    ah_advance(&h, 100);
    r = ah_decide(&h, &q); /* the item expired: a new bucket */
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_time, T0 + 105);
    assert_int_equal(h.expirations, 1);
    ah_free(&h);
}

/* Expiry boundary: Gubernator's IsExpired is ExpireAt < now, so the item still exists at ExpireAt. */
static void test_token_bucket_expiry_boundary(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(2, 2, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    assert_int_equal(h.expire_at, T0 + 1000);
    h.now = T0 + 1000;
    sl_request one = tb(1, 2, 1000);
    sl_response r = ah_decide(&h, &one);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 1);
    h.now = T0 + 1001;
    AH_EXPECT(&h, &one, SL_UNDER_LIMIT, 1);
    ah_free(&h);
}

static void test_token_bucket_gregorian(void **state)
{
    (void)state;
    alg_h h;
    const int64_t now = INT64_C(1573430430100); /* 2019-11-11 00:00:30.100 UTC */
    ah_init(&h, now);
    struct { int64_t hits, rem; int st; int64_t sleep; } steps[] = {
        {1, 59, SL_UNDER_LIMIT, 0}, {1, 58, SL_UNDER_LIMIT, 0}, {58, 0, SL_UNDER_LIMIT, 0},
        {1, 0, SL_OVER_LIMIT, 61 * SEC}, {0, 60, SL_UNDER_LIMIT, 0},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        sl_request q = tb(steps[i].hits, 60, SL_GREGORIAN_MINUTES);
        q.behavior = SL_DURATION_IS_GREGORIAN;
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.status, steps[i].st);
        assert_int_equal(r.remaining, steps[i].rem);
        assert_int_equal(r.limit, 60);
        /* the end of the minute: 00:00:59.999, then (after 61 s) 00:01:59.999 */
        assert_int_equal(r.reset_time, i < 4 ? INT64_C(1573430459999) : INT64_C(1573430519999));
        ah_advance(&h, steps[i].sleep);
    }
    ah_free(&h);
}

static void test_gregorian_week_and_invalid(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    for (int a = SL_TOKEN_BUCKET; a <= SL_LEAKY_BUCKET; a++) {
        sl_request q = ah_req(a, 1, 10, SL_GREGORIAN_WEEKS);
        q.behavior = SL_DURATION_IS_GREGORIAN;
        sl_response r = ah_decide(&h, &q);
        assert_string_equal(r.error,
                            "`Duration = GregorianWeeks` not yet supported; consider making a PR!`");
        assert_false(ah_held(&h));
        q.duration = 99;
        r = ah_decide(&h, &q);
        assert_string_equal(r.error, "behavior DURATION_IS_GREGORIAN is set; but `Duration` is not "
                                     "a valid gregorian interval");
        /* sl_alg_decide re-checks, even if validation were skipped */
        sl_alg_decide(&h.st, &h.expire_at, &q, h.now, NULL, &r);
        assert_non_null(r.error);
        assert_false(ah_held(&h));
    }
    /* An existing bucket is not touched by an invalid request either. */
    sl_request ok = tb(1, 10, 1000);
    AH_EXPECT(&h, &ok, SL_UNDER_LIMIT, 9);
    sl_request bad = tb(1, 10, SL_GREGORIAN_WEEKS);
    bad.behavior = SL_DURATION_IS_GREGORIAN;
    assert_non_null(ah_decide(&h, &bad).error);
    AH_EXPECT(&h, &ok, SL_UNDER_LIMIT, 8);
    ah_free(&h);
}

static void test_token_bucket_negative_hits(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    const int64_t hits[] = {-1, -1, 4, -1}, rem[] = {3, 4, 0, 1};
    for (int i = 0; i < 4; i++) {
        sl_request q = tb(hits[i], 2, 5);
        sl_response r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.remaining, rem[i]);
        assert_int_equal(r.limit, 2);
        assert_true(r.reset_time != 0);
    }
    ah_free(&h);
}

static void drain_over_limit(int32_t algorithm)
{
    alg_h h;
    ah_init(&h, T0);
    const int64_t hits[] = {0, 1, 100, 0}, rem[] = {10, 9, 0, 0};
    const int st[] = {SL_UNDER_LIMIT, SL_UNDER_LIMIT, SL_OVER_LIMIT, SL_UNDER_LIMIT};
    for (int i = 0; i < 4; i++) {
        sl_request q = ah_req(algorithm, hits[i], 10, 30 * SEC);
        q.behavior = SL_DRAIN_OVER_LIMIT;
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.status, st[i]);
        assert_int_equal(r.remaining, rem[i]);
        assert_int_equal(r.limit, 10);
        assert_true(r.reset_time != 0);
    }
    ah_free(&h);
}

static void test_drain_over_limit(void **state)
{
    (void)state;
    drain_over_limit(SL_TOKEN_BUCKET);
    drain_over_limit(SL_LEAKY_BUCKET);
}

static void more_than_available(int32_t algorithm)
{
    alg_h h;
    ah_init(&h, T0);
    struct { int64_t hits, rem; int st; } steps[] = {
        {1000, 1000, SL_UNDER_LIMIT}, {1500, 1000, SL_OVER_LIMIT}, {500, 500, SL_UNDER_LIMIT},
        {400, 100, SL_UNDER_LIMIT},   {100, 0, SL_UNDER_LIMIT},    {1, 0, SL_OVER_LIMIT},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        sl_request q = ah_req(algorithm, steps[i].hits, 2000, 1000);
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        if (algorithm == SL_TOKEN_BUCKET && r.status == SL_OVER_LIMIT)
            assert_int_equal(r.retry_after, 1001);
        assert_int_equal(r.status, steps[i].st);
        assert_int_equal(r.remaining, steps[i].rem);
        assert_int_equal(r.limit, 2000);
    }
    ah_free(&h);
}

static void test_request_more_than_available(void **state)
{
    (void)state;
    more_than_available(SL_TOKEN_BUCKET);
    more_than_available(SL_LEAKY_BUCKET);
}

static void test_missing_fields(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(1, 10, 0);
    sl_response r = ah_decide(&h, &q);
    assert_null(r.error);
    assert_int_equal(r.status, SL_UNDER_LIMIT);

    alg_h h2;
    ah_init(&h2, T0);
    q = tb(1, 0, 10000);
    r = ah_decide(&h2, &q);
    assert_null(r.error);
    assert_int_equal(r.status, SL_OVER_LIMIT);

    q = tb(1, 5, 10000);
    q.name = "";
    q.name_len = 0;
    r = ah_decide(&h, &q);
    assert_string_equal(r.error, "field 'namespace' cannot be empty");
    assert_int_equal(r.status, SL_UNDER_LIMIT);

    q = tb(1, 5, 10000);
    q.unique_key = NULL;
    q.unique_key_len = 0;
    r = ah_decide(&h, &q);
    assert_string_equal(r.error, "field 'unique_key' cannot be empty");
    q.name_len = 0; /* both empty: Gubernator reports the key first */
    assert_string_equal(ah_decide(&h, &q).error, "field 'unique_key' cannot be empty");
    ah_free(&h);
    ah_free(&h2);
}

static void test_change_limit(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    struct { int32_t alg; int64_t limit, rem; } steps[] = {
        {SL_TOKEN_BUCKET, 100, 99}, {SL_TOKEN_BUCKET, 100, 98}, {SL_TOKEN_BUCKET, 10, 7},
        {SL_TOKEN_BUCKET, 10, 6},   {SL_TOKEN_BUCKET, 200, 195}, {SL_LEAKY_BUCKET, 100, 99},
        {SL_LEAKY_BUCKET, 10, 9},   {SL_LEAKY_BUCKET, 10, 8},
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        sl_request q = ah_req(steps[i].alg, 1, steps[i].limit, 9000);
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.remaining, steps[i].rem);
        assert_int_equal(r.limit, steps[i].limit);
        assert_true(r.reset_time != 0);
    }
    ah_free(&h);
}

static void test_reset_remaining(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    struct { int32_t behavior; int64_t rem; } steps[] = {
        {SL_BATCHING, 99}, {SL_BATCHING, 98}, {SL_RESET_REMAINING, 100}, {SL_BATCHING, 99},
    };
    for (size_t i = 0; i < 4; i++) {
        sl_request q = tb(1, 100, 9000);
        q.behavior = steps[i].behavior;
        sl_response r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.remaining, steps[i].rem);
        assert_int_equal(r.limit, 100);
        /* Gubernator answers a reset with reset_time 0 */
        assert_int_equal(r.reset_time, i == 2 ? 0 : T0 + 9000);
    }
    ah_free(&h);
}

/* TestGlobalRateLimitsPeerOverLimit's sequence on the owner: the status stays OVER_LIMIT. */
static void test_sticky_over_limit(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request one = tb(1, 2, 5 * 60 * SEC), peek = tb(0, 2, 5 * 60 * SEC);
    AH_EXPECT(&h, &one, SL_UNDER_LIMIT, 1);
    AH_EXPECT(&h, &one, SL_UNDER_LIMIT, 0);
    AH_EXPECT(&h, &one, SL_OVER_LIMIT, 0);
    AH_EXPECT(&h, &peek, SL_OVER_LIMIT, 0);
    /* Sticky even after the limit grows: the hit is consumed but the answer stays OVER_LIMIT. */
    sl_request more = tb(1, 5, 5 * 60 * SEC);
    sl_response r = ah_decide(&h, &more);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.retry_after, 5 * 60 * SEC + 1);
    /* "hits > remaining" does not make it sticky on its own. */
    alg_h g;
    ah_init(&g, T0);
    sl_request three = tb(3, 2, 1000), small = tb(0, 2, 1000);
    AH_EXPECT(&g, &three, SL_OVER_LIMIT, 2);
    AH_EXPECT(&g, &small, SL_UNDER_LIMIT, 2);
    /* A reset clears it. */
    sl_request rst = tb(1, 5, 5 * 60 * SEC);
    rst.behavior = SL_RESET_REMAINING;
    AH_EXPECT(&h, &rst, SL_UNDER_LIMIT, 5);
    AH_EXPECT(&h, &peek, SL_UNDER_LIMIT, 2); /* limit 5 -> 2: 5 + (2 - 5) */
    /* ... and so does expiry. */
    alg_h x;
    ah_init(&x, T0);
    sl_request q = tb(1, 1, 1000);
    AH_EXPECT(&x, &q, SL_UNDER_LIMIT, 0);
    AH_EXPECT(&x, &q, SL_OVER_LIMIT, 0);
    ah_advance(&x, 1001);
    AH_EXPECT(&x, &q, SL_UNDER_LIMIT, 0);
    ah_free(&h);
    ah_free(&g);
    ah_free(&x);
}

static void test_token_bucket_new_key_over(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(11, 10, 1000);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 10); /* nothing consumed */
    assert_int_equal(r.retry_after, 1001);
    assert_true(ah_held(&h)); /* Gubernator keeps the item */
    q.hits = 10;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    ah_free(&h);
}

static void test_token_bucket_created_at(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(1, 10, 1000);
    q.created_at = T0 - 400; /* made 400 ms ago: its window ends 400 ms early */
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.reset_time, T0 + 600);
    assert_int_equal(h.expire_at, T0 + 600);
    q.created_at = 0; /* 0 = now */
    r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 8);
    assert_int_equal(r.reset_time, T0 + 600);
    ah_free(&h);
}

static void test_token_bucket_peek_creates_item(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request peek = tb(0, 10, 1000), one = tb(1, 10, 1000);
    AH_EXPECT(&h, &peek, SL_UNDER_LIMIT, 10);
    assert_true(ah_held(&h)); /* the window starts at the peek, as in Gubernator */
    ah_advance(&h, 500);
    sl_response r = ah_decide(&h, &one);
    assert_int_equal(r.reset_time, T0 + 1000);
    ah_free(&h);
}

static void test_token_bucket_duration_change(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(4, 5, 10 * SEC);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    /* Longer: the window is recomputed from created_at, the count kept. */
    ah_advance(&h, 3 * SEC);
    q = tb(0, 5, 20 * SEC);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_time, T0 + 20 * SEC);
    assert_int_equal(h.expire_at, T0 + 20 * SEC);
    /* Shorter than what has elapsed: renewed as a new window, from now. */
    q = tb(1, 5, 2 * SEC);
    r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 4);
    assert_int_equal(r.reset_time, T0 + 5 * SEC);
    q = tb(4, 5, 2 * SEC);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    q = tb(1, 5, 2 * SEC);
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0); /* sticky from here */
    ah_advance(&h, 1500);
    q = tb(0, 5, 1 * SEC); /* created_at (T0 + 3 s) + 1 s <= now: renewed again */
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_UNDER_LIMIT); /* the renewal is a new window: not sticky */
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_time, T0 + 5500);
    ah_free(&h);
}

static void test_algorithm_switch(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = tb(3, 10, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 7);
    q = lb(1, 10, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 9);
    q = tb(1, 10, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 9);
    ah_free(&h);
}

/* ---- LEAKY_BUCKET ---------------------------------------------------------------------------- */

typedef struct lb_step {
    int64_t hits, rem;
    int st;
    int64_t sleep;
} lb_step;

static void leaky_sequence(const lb_step *steps, size_t n, int64_t burst)
{
    alg_h h;
    ah_init(&h, T0);
    for (size_t i = 0; i < n; i++) {
        sl_request q = lb(steps[i].hits, 10, 30 * SEC);
        q.burst = burst;
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.status, steps[i].st);
        assert_int_equal(r.remaining, steps[i].rem);
        assert_int_equal(r.limit, 10);
        /* Gubernator: now.Unix() + (limit - remaining) * 3 == reset_time / 1000 */
        assert_int_equal(r.reset_time, h.now + (10 - r.remaining) * 3 * SEC);
        /* in these sequences a refusal waits for exactly one hit to leak: 3 s */
        assert_int_equal(r.retry_after, r.status == SL_OVER_LIMIT ? 3 * SEC : 0);
        ah_advance(&h, steps[i].sleep);
    }
    ah_free(&h);
}

static void test_leaky_bucket(void **state)
{
    (void)state;
    const lb_step steps[] = {
        {1, 9, SL_UNDER_LIMIT, SEC},       {1, 8, SL_UNDER_LIMIT, SEC},
        {1, 7, SL_UNDER_LIMIT, 1500},      {0, 8, SL_UNDER_LIMIT, 3 * SEC},
        {0, 9, SL_UNDER_LIMIT, 0},         {9, 0, SL_UNDER_LIMIT, 0},
        {1, 0, SL_OVER_LIMIT, 3 * SEC},    {0, 1, SL_UNDER_LIMIT, 60 * SEC},
        {0, 10, SL_UNDER_LIMIT, 60 * SEC}, {10, 0, SL_UNDER_LIMIT, 29 * SEC},
        {9, 0, SL_UNDER_LIMIT, 3 * SEC},   {1, 0, SL_UNDER_LIMIT, SEC},
    };
    leaky_sequence(steps, sizeof(steps) / sizeof(steps[0]), 0);
}

static void test_leaky_bucket_with_burst(void **state)
{
    (void)state;
    const lb_step steps[] = {
        {1, 19, SL_UNDER_LIMIT, SEC},   {1, 18, SL_UNDER_LIMIT, SEC},
        {1, 17, SL_UNDER_LIMIT, 1500},  {0, 18, SL_UNDER_LIMIT, 3 * SEC},
        {0, 19, SL_UNDER_LIMIT, 0},     {19, 0, SL_UNDER_LIMIT, 0},
        {1, 0, SL_OVER_LIMIT, 3 * SEC},    {0, 1, SL_UNDER_LIMIT, 60 * SEC},
        {0, 20, SL_UNDER_LIMIT, SEC},
    };
    leaky_sequence(steps, sizeof(steps) / sizeof(steps[0]), 20);
}

static void test_leaky_bucket_negative_hits(void **state)
{
    (void)state;
    const lb_step steps[] = {
        {1, 9, SL_UNDER_LIMIT, 0},
        {-1, 10, SL_UNDER_LIMIT, 0},
        {10, 0, SL_UNDER_LIMIT, 0},
        {-1, 1, SL_UNDER_LIMIT, 0},
    };
    leaky_sequence(steps, sizeof(steps) / sizeof(steps[0]), 0);
}

static void test_leaky_bucket_gregorian(void **state)
{
    (void)state;
    alg_h h;
    const int64_t minute = INT64_C(1573430400000); /* 2019-11-11 00:00:00 UTC */
    ah_init(&h, minute + 100);
    const int64_t hits[] = {1, 1, 1}, rem[] = {59, 58, 58}, sleep[] = {500, 1200, 0};
    for (int i = 0; i < 3; i++) {
        sl_request q = lb(hits[i], 60, SL_GREGORIAN_MINUTES);
        q.behavior = SL_DURATION_IS_GREGORIAN;
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.remaining, rem[i]);
        assert_int_equal(r.limit, 60);
        /* rate = 60000 ms / 60 = 1000 ms per hit */
        assert_int_equal(r.reset_time, h.now + (60 - rem[i]) * 1000);
        assert_true(r.reset_time > (minute + 100) / 1000);
        /* the item lives until the end of the minute */
        assert_int_equal(h.expire_at, minute + 59999);
        ah_advance(&h, sleep[i]);
    }
    ah_free(&h);
}

static void test_leaky_bucket_gregorian_intervals(void **state)
{
    (void)state;
    /* 2019-02-10 12:00:00 UTC: February 2019 has 28 days, 2019 has 365. */
    const int64_t now = INT64_C(1549800000000);
    const struct { int64_t kind, len, end; } cases[] = {
        {SL_GREGORIAN_HOURS, 3600000, INT64_C(1549803599999)},
        {SL_GREGORIAN_DAYS, 86400000, INT64_C(1549843199999)},
        {SL_GREGORIAN_MONTHS, INT64_C(28) * 86400000, INT64_C(1551398399999)},
        {SL_GREGORIAN_YEARS, INT64_C(365) * 86400000, INT64_C(1577836799999)},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        alg_h h;
        ah_init(&h, now);
        sl_request q = lb(1, 100, cases[i].kind);
        q.behavior = SL_DURATION_IS_GREGORIAN;
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);
        assert_int_equal(r.remaining, 99);
        assert_int_equal(r.reset_time, now + cases[i].len / 100);
        assert_int_equal(h.expire_at, cases[i].end);
        /* one hit leaks back after len/100 ms */
        ah_advance(&h, cases[i].len / 100);
        sl_request peek = lb(0, 100, cases[i].kind);
        peek.behavior = SL_DURATION_IS_GREGORIAN;
        AH_EXPECT(&h, &peek, SL_UNDER_LIMIT, 100);
        ah_free(&h);
    }
}

static void test_leaky_bucket_div_bug(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lb(1, 2000, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1999);
    q.hits = 100; /* rate 0.5 ms per hit */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1899);
    ah_free(&h);
}

static void test_leaky_bucket_reset_remaining(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lb(7, 10, 30 * SEC);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 3);
    q.hits = 2;
    q.behavior = SL_RESET_REMAINING; /* refilled to burst, then the hits apply */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 8);
    ah_free(&h);
}

static void test_leaky_bucket_new_key_over(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lb(11, 10, 10 * SEC);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0); /* unlike the token bucket, it starts empty */
    assert_int_equal(r.reset_time, T0 + 10 * SEC);
    assert_int_equal(r.retry_after, 10 * SEC); /* 11 > burst: time until full */
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    ah_free(&h);
}

static void test_leaky_bucket_burst_change(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lb(5, 10, 10 * SEC);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    /* A burst above the remaining refills to the new burst (Gubernator). */
    q = lb(0, 10, 10 * SEC);
    q.burst = 20;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 20);
    /* Back to 10: clamped. */
    q.burst = 0;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 10);
    ah_free(&h);
}

/* The remaining is a double: fractions accumulate, and are dropped where Gubernator drops them. */
static void test_leaky_bucket_fraction(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lb(10, 10, 1000); /* 100 ms per hit */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    ah_advance(&h, 150); /* 1.5 leaked */
    q = lb(0, 10, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    assert_true(h.st.u.lb.remaining == 1.5);
    ah_advance(&h, 60); /* 0.6 more, not applied: less than one whole hit */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    ah_advance(&h, 40); /* 1.0 since the last leak: 2.5 */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    q.hits = 1; /* 2.5 - 1 = 1.5: the fraction stays */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    assert_true(h.st.u.lb.remaining == 1.5);
    q.hits = 1; /* hits == int(remaining): the bucket empties, fraction included */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    assert_true(h.st.u.lb.remaining == 0.0);

    /* A whole leak is materialised by a peek too; the answer is the same as without the peek. */
    alg_h g, g2;
    ah_init(&g, T0);
    ah_init(&g2, T0);
    sl_request a = lb(10, 10, 1000), peek = lb(0, 10, 1000), three = lb(3, 10, 1000);
    AH_EXPECT(&g, &a, SL_UNDER_LIMIT, 0);
    AH_EXPECT(&g2, &a, SL_UNDER_LIMIT, 0);
    ah_advance(&g, 150);
    AH_EXPECT(&g, &peek, SL_UNDER_LIMIT, 1);
    ah_advance(&g, 200);
    ah_advance(&g2, 350);
    AH_EXPECT(&g, &three, SL_UNDER_LIMIT, 0);
    AH_EXPECT(&g2, &three, SL_UNDER_LIMIT, 0);
    assert_true(g.st.u.lb.remaining == g2.st.u.lb.remaining);
    ah_free(&h);
    ah_free(&g);
    ah_free(&g2);
}

/* retry_after is exact: waiting that long lets the same request through, one ms less does not. */
static void test_leaky_bucket_retry_after(void **state)
{
    (void)state;
    const struct { int64_t limit, duration, burst, first, then; } cases[] = {
        {10, 30 * SEC, 0, 10, 1}, {10, 30 * SEC, 0, 10, 4}, {3, 1000, 0, 3, 2},
        {7, 1000, 20, 20, 6},     {2000, 1000, 0, 2000, 20}, {1, 60 * SEC, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        alg_h h;
        ah_init(&h, T0 + 17);
        sl_request q = lb(cases[i].first, cases[i].limit, cases[i].duration);
        q.burst = cases[i].burst;
        AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
        ah_advance(&h, 7);
        q.hits = cases[i].then;
        sl_response r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_OVER_LIMIT);
        assert_true(r.retry_after > 0);
        alg_h early = h;
        ah_advance(&early, r.retry_after - 1);
        q.hits = 0;
        sl_response p = ah_decide(&early, &q);
        assert_true(p.remaining < cases[i].then);
        ah_advance(&h, r.retry_after);
        q.hits = cases[i].then;
        r = ah_decide(&h, &q);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        ah_free(&h);
    }
}

/* Gubernator's GregorianExpiration vectors (interval_test.go). */
static void test_gregorian_expiration(void **state)
{
    (void)state;
    const struct { int64_t now, kind, want; } v[] = {
        {INT64_C(1573430400000), SL_GREGORIAN_MINUTES, INT64_C(1573430459999)},
        {INT64_C(1573430430000), SL_GREGORIAN_MINUTES, INT64_C(1573430459999)},
        {INT64_C(1573430400000), SL_GREGORIAN_HOURS, INT64_C(1573433999999)},
        {INT64_C(1573431601002), SL_GREGORIAN_HOURS, INT64_C(1573433999999)},
        {INT64_C(1573430400000), SL_GREGORIAN_DAYS, INT64_C(1573516799999)},
        {INT64_C(1573474209002), SL_GREGORIAN_DAYS, INT64_C(1573516799999)},
        {INT64_C(1572566400000), SL_GREGORIAN_MONTHS, INT64_C(1575158399999)},
        {INT64_C(1573509743000), SL_GREGORIAN_MONTHS, INT64_C(1575158399999)},
        {INT64_C(1546300800000), SL_GREGORIAN_MONTHS, INT64_C(1548979199999)},
        {INT64_C(1546300800000), SL_GREGORIAN_YEARS, INT64_C(1577836799999)},
        {INT64_C(1551473431000), SL_GREGORIAN_YEARS, INT64_C(1577836799999)},
        /* leap February, December -> January, before 1970 */
        {INT64_C(1582934400000), SL_GREGORIAN_MONTHS, INT64_C(1583020799999)},
        {INT64_C(1577750400000), SL_GREGORIAN_MONTHS, INT64_C(1577836799999)},
        {INT64_C(-1), SL_GREGORIAN_DAYS, INT64_C(-1)},
        {INT64_C(-86400001), SL_GREGORIAN_MONTHS, INT64_C(-1)},
        {INT64_C(-2208988800000), SL_GREGORIAN_YEARS, INT64_C(-2177452800001)},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        int64_t out = 0;
        assert_null(sl_greg_expiration(v[i].now, v[i].kind, &out));
        assert_int_equal(out, v[i].want);
    }
    int64_t out = 0;
    assert_string_equal(sl_greg_expiration(0, 99, &out), sl_greg_err_invalid);
    assert_string_equal(sl_greg_expiration(0, SL_GREGORIAN_WEEKS, &out), sl_greg_err_weeks);
    assert_null(sl_greg_duration(INT64_C(1582934400000), SL_GREGORIAN_MONTHS, &out));
    assert_int_equal(out, INT64_C(29) * 86400000);
    assert_null(sl_greg_duration(INT64_C(1582934400000), SL_GREGORIAN_YEARS, &out));
    assert_int_equal(out, INT64_C(366) * 86400000);
    /* Extremes saturate instead of overflowing. */
    assert_null(sl_greg_expiration(INT64_MAX, SL_GREGORIAN_YEARS, &out));
    assert_int_equal(out, INT64_MAX);
    assert_null(sl_greg_expiration(INT64_MIN, SL_GREGORIAN_MONTHS, &out));
    assert_true(out < 0);
    assert_null(sl_greg_expiration(INT64_MAX, SL_GREGORIAN_MINUTES, &out));
    assert_int_equal(out, INT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_over_the_limit),
        cmocka_unit_test(test_multiple_async),
        cmocka_unit_test(test_token_bucket),
        cmocka_unit_test(test_token_bucket_expiry_boundary),
        cmocka_unit_test(test_token_bucket_gregorian),
        cmocka_unit_test(test_gregorian_week_and_invalid),
        cmocka_unit_test(test_token_bucket_negative_hits),
        cmocka_unit_test(test_drain_over_limit),
        cmocka_unit_test(test_request_more_than_available),
        cmocka_unit_test(test_missing_fields),
        cmocka_unit_test(test_change_limit),
        cmocka_unit_test(test_reset_remaining),
        cmocka_unit_test(test_sticky_over_limit),
        cmocka_unit_test(test_token_bucket_new_key_over),
        cmocka_unit_test(test_token_bucket_created_at),
        cmocka_unit_test(test_token_bucket_peek_creates_item),
        cmocka_unit_test(test_token_bucket_duration_change),
        cmocka_unit_test(test_algorithm_switch),
        cmocka_unit_test(test_leaky_bucket),
        cmocka_unit_test(test_leaky_bucket_with_burst),
        cmocka_unit_test(test_leaky_bucket_negative_hits),
        cmocka_unit_test(test_leaky_bucket_gregorian),
        cmocka_unit_test(test_leaky_bucket_gregorian_intervals),
        cmocka_unit_test(test_leaky_bucket_div_bug),
        cmocka_unit_test(test_leaky_bucket_reset_remaining),
        cmocka_unit_test(test_leaky_bucket_new_key_over),
        cmocka_unit_test(test_leaky_bucket_burst_change),
        cmocka_unit_test(test_leaky_bucket_fraction),
        cmocka_unit_test(test_leaky_bucket_retry_after),
        cmocka_unit_test(test_gregorian_expiration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

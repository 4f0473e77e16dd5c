/* SPDX-License-Identifier: Apache-2.0 */
/*
 * FIXED_WINDOW and SLIDING_WINDOW: hand-computed values, the fixed window's 2 x limit across an
 * edge, and long random sequences replayed against a reference that keeps every admitted hit in a
 * plain list and recomputes the estimate from scratch (so the ring bookkeeping, jumps over idle
 * periods, negative hits and DRAIN are all checked), including retry_after and reset_time found by
 * brute force.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "alg_harness.h"
#include "core/satmath.h"

#define T0 INT64_C(1700000000000) /* a multiple of 1000 and of 250 */

static sl_request fw(int64_t hits, int64_t limit, int64_t duration)
{
    return ah_req(SL_FIXED_WINDOW, hits, limit, duration);
}

static sl_request sw(int64_t hits, int64_t limit, int64_t duration, int32_t sub)
{
    sl_request r = ah_req(SL_SLIDING_WINDOW, hits, limit, duration);
    r.sub_windows = sub;
    return r;
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ---- FIXED_WINDOW ---------------------------------------------------------------------------- */

static void test_fixed_basic(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0 + 250);
    sl_request q = fw(3, 5, 1000);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.limit, 5);
    assert_int_equal(r.reset_time, T0 + 1000);
    assert_int_equal(h.expire_at, T0 + 999);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.retry_after, 750);
    q.hits = 2;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    ah_advance(&h, 749);
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    ah_advance(&h, 1); /* T0 + 1000: a new window, the old key has expired */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 4);
    assert_int_equal(h.expirations, 1);
    /* peek, negative hits, drain, reset */
    sl_request peek = fw(0, 5, 1000);
    AH_EXPECT(&h, &peek, SL_UNDER_LIMIT, 4);
    q.hits = -3;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    assert_false(ah_held(&h)); /* nothing counted: no state */
    q.hits = 9;
    q.behavior = SL_DRAIN_OVER_LIMIT;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    q.hits = 1;
    q.behavior = SL_RESET_REMAINING;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 4);
    /* more than the limit can never pass: retry_after is the window's end */
    q.behavior = 0;
    q.hits = 6;
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, T0 + 2000 - h.now);
    ah_free(&h);
}

/* SL_COUNT_OVER_LIMIT, envoyproxy/ratelimit's counting: rejected hits count, and the key is over
 * while its count is above the limit (a look included); giving back brings it under again. */
static void test_fixed_count_over_limit(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0 + 10);
    sl_request q = fw(8, 10, 1000);
    q.behavior = SL_COUNT_OVER_LIMIT;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    q.hits = 5;
    sl_response r = ah_decide(&h, &q); /* 13 */
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.retry_after, 990);
    q.hits = 0;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    q.hits = -3; /* 10: at the limit, not over it */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    q.hits = INT64_MAX; /* saturates */
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    ah_advance(&h, 990); /* the next window starts from nothing */
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 9);
    ah_free(&h);
}

/* The adversarial edge: `limit` at the end of a window and `limit` at the start of the next all
 * pass, 2 x limit within 2 ms. */
static void test_fixed_edge(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0 + 999);
    sl_request q = fw(1, 100, 1000);
    for (int i = 0; i < 100; i++)
        AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 99 - i);
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    ah_advance(&h, 1);
    for (int i = 0; i < 100; i++)
        AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 99 - i);
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    ah_free(&h);
}

static void test_fixed_alignment_and_created_at(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, 1234567);
    sl_request q = fw(1, 10, 60000);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.reset_time, 1260000); /* multiples of the duration since the epoch */
    /* A request dated before the key's window counts in the current window. */
    q.created_at = 1000;
    r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 8);
    assert_int_equal(r.reset_time, 1260000);
    /* Negative epoch times: floor alignment. */
    alg_h g;
    ah_init(&g, -1);
    r = ah_decide(&g, &(sl_request){.name = "n", .name_len = 1, .unique_key = "k",
                                     .unique_key_len = 1, .algorithm = SL_FIXED_WINDOW,
                                     .hits = 1, .limit = 5, .duration = 1000});
    assert_int_equal(r.reset_time, 0);
    assert_int_equal(g.expire_at, -1);
    ah_free(&h);
    ah_free(&g);
}

static void test_fixed_gregorian(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, INT64_C(1549800000000)); /* 2019-02-10 12:00 UTC */
    sl_request q = fw(1, 3, SL_GREGORIAN_MONTHS);
    q.behavior = SL_DURATION_IS_GREGORIAN;
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.reset_time, INT64_C(1551398400000)); /* 2019-03-01 00:00 */
    q.hits = 2;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    h.now = INT64_C(1551398399999);
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    h.now = INT64_C(1551398400000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    q.duration = SL_GREGORIAN_WEEKS;
    assert_string_equal(ah_decide(&h, &q).error,
                        "`Duration = GregorianWeeks` not yet supported; consider making a PR!`");
    ah_free(&h);
}

/* ---- SLIDING_WINDOW: hand-computed ----------------------------------------------------------- */

static void test_sliding_classic(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0 + 500);
    sl_request q = sw(8, 10, 1000, 0);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    /* t = 1250: previous window 8 x 750/1000 = 6, current 0: 4 left */
    h.now = T0 + 1250;
    sl_request peek = sw(0, 10, 1000, 0);
    sl_response r = ah_decide(&h, &peek);
    assert_int_equal(r.remaining, 4);
    assert_int_equal(r.reset_time, T0 + 2000); /* the previous window slides out at 2000 */
    q.hits = 4;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    q.hits = 1;
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    /* 8 (1000 - e) / 1000 + 4 + 1 <= 10 from e = 375 */
    assert_int_equal(r.retry_after, 125);
    assert_int_equal(r.reset_time, T0 + 3000);
    h.now = T0 + 1374;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    h.now = T0 + 1375;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    /* t = 1300 (rounding): 8 x 700/1000 = 5.6 counts as 6 in remaining */
    alg_h g;
    ah_init(&g, T0 + 500);
    q.hits = 8;
    AH_EXPECT(&g, &q, SL_UNDER_LIMIT, 2);
    g.now = T0 + 1300;
    AH_EXPECT(&g, &peek, SL_UNDER_LIMIT, 4);
    q.hits = 4; /* 5.6 + 4 <= 10 */
    AH_EXPECT(&g, &q, SL_UNDER_LIMIT, 0);
    ah_free(&h);
    ah_free(&g);
}

static void test_sliding_sub_windows(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0 + 100);
    sl_request q = sw(4, 10, 1000, 4); /* w = 250 */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 6);
    assert_int_equal(sl_alg_side_bytes(&h.st), 4 * sizeof(int64_t));
    h.now = T0 + 300;
    q.hits = 3;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 3);
    h.now = T0 + 600;
    q.hits = 2;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    h.now = T0 + 800;
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    /* t = 1100: 1 + 2 + 3 full, the oldest (4, sub-window [0, 250)) x 150/250 = 2.4 */
    h.now = T0 + 1100;
    q.hits = 0;
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_time, T0 + 2000); /* sub-window [750, 1000) leaves at 2000 */
    q.hits = 1;
    r = ah_decide(&h, &q); /* 7 + 2.4 <= 10 */
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.reset_time, T0 + 2250);
    r = ah_decide(&h, &q); /* 8 + 2.4 > 10; fits once 4 (250 - e) <= 500: e >= 125 */
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 25);
    /* a long idle period clears everything */
    h.now = T0 + 100000;
    q.hits = 0;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 10);
    assert_false(ah_held(&h));
    assert_int_equal(h.expirations, 1);
    ah_free(&h);
}

static void test_sliding_params_change(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = sw(5, 10, 1000, 4);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    q.limit = 6; /* a limit change keeps the counts */
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    q.sub_windows = 5; /* a new shape starts afresh */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    assert_int_equal(sl_alg_side_bytes(&h.st), 5 * sizeof(int64_t));
    q.sub_windows = 1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    assert_int_equal(sl_alg_side_bytes(&h.st), 0);
    q.duration = 3000;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    /* validation */
    q.sub_windows = 7;
    assert_string_equal(ah_decide(&h, &q).error,
                        "field 'duration' must be a multiple of 'sub_windows'");
    q.sub_windows = SL_ALG_DEFAULT_MAX_SUB_WINDOWS + 1;
    q.duration = 1000 * q.sub_windows;
    assert_string_equal(ah_decide(&h, &q).error, "field 'sub_windows' exceeds max-sub-windows");
    h.cfg.max_sub_windows = 1000;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 5);
    q.sub_windows = -1;
    assert_string_equal(ah_decide(&h, &q).error, "field 'sub_windows' cannot be negative");
    ah_free(&h);
}

/* ---- random sequences against the reference ----------------------------------------------- */

#define MAXEV 4096

typedef struct ref_ev {
    int64_t t, hits; /* hits admitted at t (after give-backs) */
} ref_ev;

typedef struct ref {
    ref_ev ev[MAXEV];
    int n;
    int64_t last_t;
} ref;

/* Count of hits in absolute sub-window j. */
static int64_t ref_count(const ref *r, int64_t w, int64_t j)
{
    int64_t c = 0;
    for (int i = 0; i < r->n; i++)
        if (r->ev[i].t / w == j)
            c += r->ev[i].hits;
    return c;
}

/* est * w = full * w + oldest * (w - e), exactly as documented, from the raw events. */
static void ref_estimate(const ref *r, int64_t t, int64_t S, int64_t w, sl_i128 *full,
                         int64_t *oldest, int64_t *e)
{
    int64_t k = t / w;
    *e = t - k * w;
    sl_i128 f = 0;
    int64_t o = 0;
    for (int i = 0; i < r->n; i++) {
        int64_t j = r->ev[i].t / w;
        if (j > k - S && j <= k)
            f += r->ev[i].hits;
        else if (j == k - S)
            o += r->ev[i].hits;
    }
    *full = f;
    *oldest = o;
}

/* Drop events that can no longer weigh (time only moves forward in these sequences). */
static void ref_prune(ref *r, int64_t t, int64_t S, int64_t w)
{
    int m = 0;
    for (int i = 0; i < r->n; i++)
        if (r->ev[i].t / w >= t / w - S && r->ev[i].hits > 0)
            r->ev[m++] = r->ev[i];
    r->n = m;
}

static bool ref_fits(const ref *r, int64_t t, int64_t S, int64_t w, int64_t L, int64_t n)
{
    sl_i128 full;
    int64_t oldest, e;
    ref_estimate(r, t, S, w, &full, &oldest, &e);
    return full + n <= L && (full + n) * w + (sl_i128)oldest * (w - e) <= (sl_i128)L * w;
}

static void ref_add(ref *r, int64_t t, int64_t hits)
{
    assert_true(r->n < MAXEV);
    r->ev[r->n].t = t;
    r->ev[r->n].hits = hits;
    r->n++;
}

/* Give back: newest sub-windows first, within the last S + 1 sub-windows. */
static void ref_give_back(ref *r, int64_t t, int64_t S, int64_t w, int64_t give)
{
    int64_t k = t / w;
    for (int64_t j = k; j >= k - S && give > 0; j--) {
        for (int i = r->n - 1; i >= 0 && give > 0; i--) {
            if (r->ev[i].t / w != j)
                continue;
            int64_t take = r->ev[i].hits < give ? r->ev[i].hits : give;
            r->ev[i].hits -= take;
            give -= take;
        }
    }
}

static void random_sliding(int64_t L, int64_t D, int32_t S_req, int steps)
{
    const int64_t S = S_req > 1 ? S_req : 1, w = D / S;
    ref *r = calloc(1, sizeof(ref));
    assert_non_null(r);
    alg_h h;
    ah_init(&h, T0);
    h.cfg.max_sub_windows = 1000;
    int64_t t = 0;
    int overs = 0, unders = 0, retries = 0, gives = 0, drains = 0;
    for (int i = 0; i < steps; i++) {
        uint64_t x = rnd();
        if (x % 50 == 0)
            t += (int64_t)(rnd() % (uint64_t)(3 * D));
        else
            t += (int64_t)(rnd() % (uint64_t)(w / 2 + 1));
        h.now = T0 + t;
        int64_t n = (int64_t)(rnd() % 4) + 1;
        if (x % 13 == 0)
            n = -(int64_t)(rnd() % 3) - 1;
        else if (x % 17 == 0)
            n = 0;
        int32_t behavior = x % 29 == 0 ? SL_DRAIN_OVER_LIMIT : 0;
        sl_request q = sw(n, L, D, S_req);
        q.behavior = behavior;
        sl_response resp = ah_decide(&h, &q);
        assert_null(resp.error);

        const int64_t now = T0 + t;
        ref_prune(r, now, S, w);
        bool fits = n <= 0 || ref_fits(r, now, S, w, L, n);
        assert_int_equal(resp.status, fits ? SL_UNDER_LIMIT : SL_OVER_LIMIT);
        overs += n > 0 && !fits;
        unders += n > 0 && fits;
        gives += n < 0;
        drains += n > 0 && !fits && behavior;
        if (n > 0 && fits) {
            ref_add(r, now, n);
        } else if (n > 0) {
            sl_i128 full;
            int64_t oldest, e;
            ref_estimate(r, now, S, w, &full, &oldest, &e);
            sl_i128 room = L - full - ((sl_i128)oldest * (w - e) + w - 1) / w;
            if (behavior && room > 0)
                ref_add(r, now, (int64_t)room);
            /* retry_after: the first ms at which n fit. With no new hits the estimate never
             * grows, so "fits" is monotone in time and a binary search finds it. */
            if (n <= L) {
                int64_t lo = 0, hi = D + w;
                assert_true(ref_fits(r, now + hi, S, w, L, n));
                while (lo < hi) {
                    int64_t mid = lo + (hi - lo) / 2;
                    if (ref_fits(r, now + mid, S, w, L, n))
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                assert_int_equal(resp.retry_after, lo);
                retries += lo > 0;
                if (lo > 0)
                    assert_false(ref_fits(r, now + lo - 1, S, w, L, n));
            }
        } else if (n < 0) {
            ref_give_back(r, now, S, w, -n);
        }
        /* remaining and reset_time from the reference */
        sl_i128 full;
        int64_t oldest, e;
        ref_estimate(r, now, S, w, &full, &oldest, &e);
        sl_i128 rem = L - full - ((sl_i128)oldest * (w - e) + w - 1) / w;
        assert_int_equal(resp.remaining, rem < 0 ? 0 : (int64_t)rem);
        int64_t reset = now;
        for (int64_t j = now / w; j >= now / w - S; j--) {
            if (ref_count(r, w, j) > 0) {
                reset = (j + S + 1) * w;
                break;
            }
        }
        assert_int_equal(resp.reset_time, reset);
        assert_int_equal(ah_held(&h), reset != now);
    }
    /* the sequence must have exercised every path */
    assert_true(overs > steps / 20 && unders > steps / 20);
    assert_true(retries > 10 && gives > 10 && drains > 0);
    ah_free(&h);
    free(r);
}

static void test_sliding_random(void **state)
{
    (void)state;
    random_sliding(10, 1000, 0, 3000);
    random_sliding(10, 1000, 1, 3000);
    random_sliding(25, 1000, 4, 3000);
    random_sliding(7, 600, 6, 3000);
    random_sliding(100, 60000, 60, 1500);
    random_sliding(3, 900, 9, 3000);
}

/* ---- FIXED_WINDOW random against its (simple) reference ----------------------------------- */

static void test_fixed_random(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    const int64_t L = 12, D = 700;
    int64_t win = -1, count = 0, t = 0;
    for (int i = 0; i < 20000; i++) {
        t += (int64_t)(rnd() % 60);
        h.now = T0 + t;
        int64_t n = (int64_t)(rnd() % 7) - 2;
        sl_request q = fw(n, L, D);
        sl_response r = ah_decide(&h, &q);
        int64_t wnow = (T0 + t) / D;
        if (wnow != win) {
            win = wnow;
            count = 0;
        }
        bool over = n > 0 && count + n > L;
        if (n > 0 && !over)
            count += n;
        if (n < 0)
            count = count + n < 0 ? 0 : count + n;
        assert_int_equal(r.status, over ? SL_OVER_LIMIT : SL_UNDER_LIMIT);
        assert_int_equal(r.remaining, L - count);
        assert_int_equal(r.reset_time, (wnow + 1) * D);
        assert_int_equal(r.retry_after, over ? (wnow + 1) * D - (T0 + t) : 0);
    }
    ah_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_basic),
        cmocka_unit_test(test_fixed_edge),
        cmocka_unit_test(test_fixed_count_over_limit),
        cmocka_unit_test(test_fixed_alignment_and_created_at),
        cmocka_unit_test(test_fixed_gregorian),
        cmocka_unit_test(test_fixed_random),
        cmocka_unit_test(test_sliding_classic),
        cmocka_unit_test(test_sliding_sub_windows),
        cmocka_unit_test(test_sliding_params_change),
        cmocka_unit_test(test_sliding_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

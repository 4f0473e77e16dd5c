/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SLIDING_LOG: exactness against a reference holding every admission forever (decisions,
 * remaining, reset_time and retry_after must all agree, through limit changes that resize the ring,
 * negative hits and DRAIN), the property that no window ever holds more than the limit, the
 * max-log-limit error, memory accounting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "alg_harness.h"

#define T0 INT64_C(1700000000000)

static sl_request lg(int64_t hits, int64_t limit, int64_t duration)
{
    return ah_req(SL_SLIDING_LOG, hits, limit, duration);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_log_basic(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lg(2, 3, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    assert_int_equal(sl_alg_side_bytes(&h.st), 3 * sizeof(int64_t));
    ah_advance(&h, 400);
    q.hits = 1;
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_time, T0 + 1400);
    assert_int_equal(h.expire_at, T0 + 1399);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 600); /* the two at T0 leave at T0 + 1000 */
    q.hits = 3;
    r = ah_decide(&h, &q);
    assert_int_equal(r.retry_after, 1000); /* all three gone at T0 + 1400 */
    q.hits = 4;
    r = ah_decide(&h, &q);
    assert_int_equal(r.retry_after, 1000); /* never fits: time until empty */
    ah_advance(&h, 599);
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    ah_advance(&h, 1); /* T0 + 1000: (t - 1000, t] no longer holds T0 */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    /* negative hits give back the newest admissions */
    q.hits = -1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    q.hits = -5;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 3);
    assert_false(ah_held(&h));
    assert_int_equal(sl_alg_side_bytes(&h.st), 0);
    /* DRAIN fills the log; RESET empties it */
    q.hits = 9;
    q.behavior = SL_DRAIN_OVER_LIMIT;
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    q.hits = 1;
    q.behavior = SL_RESET_REMAINING;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 2);
    ah_free(&h);
}

static void test_log_limits(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lg(1, SL_ALG_DEFAULT_MAX_LOG_LIMIT + 1, 1000);
    assert_string_equal(ah_decide(&h, &q).error,
                        "field 'limit' exceeds max-log-limit for SLIDING_LOG (memory is 8 bytes "
                        "per unit of limit per key)");
    h.cfg.max_log_limit = 5;
    q.limit = 6;
    assert_non_null(ah_decide(&h, &q).error);
    q.limit = 5;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 4);
    q.limit = 0; /* limit 0: nothing passes; the live entry still counts until it leaves */
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    assert_true(ah_held(&h));
    ah_advance(&h, 1000);
    AH_EXPECT(&h, &q, SL_OVER_LIMIT, 0);
    assert_false(ah_held(&h));
    q.duration = 0;
    assert_non_null(ah_decide(&h, &q).error);
    ah_free(&h);
}

static void test_log_resize(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lg(1, 10, 1000);
    for (int i = 0; i < 8; i++) {
        AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 9 - i);
        ah_advance(&h, 10);
    }
    /* limit 10 -> 5 with 8 live: full; the ring keeps its 10 slots while 8 > 5 are live */
    q.limit = 5;
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(sl_alg_side_bytes(&h.st), 10 * sizeof(int64_t));
    /* 1 fits when 4 of (T0 .. T0 + 70) have left: at T0 + 30 + 1000 */
    assert_int_equal(r.retry_after, T0 + 1030 - h.now);
    /* give-backs count against the whole live log, not only what a 5-slot ring could hold */
    q.hits = -1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0); /* 7 live */
    assert_int_equal(sl_alg_side_bytes(&h.st), 10 * sizeof(int64_t));
    q.hits = -3;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1); /* 4 live: fits, shrunk */
    assert_int_equal(sl_alg_side_bytes(&h.st), 5 * sizeof(int64_t));
    q.hits = 1;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, T0 + 1000 - h.now); /* the oldest, T0, leaves */
    /* back up to 20: grown, the entries keep counting */
    q.limit = 20;
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 14);
    assert_int_equal(sl_alg_side_bytes(&h.st), 20 * sizeof(int64_t));
    ah_free(&h);
}

static void test_log_created_at_in_past(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request q = lg(1, 2, 1000);
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 1);
    q.created_at = T0 - 5000; /* counted at the newest entry's time, so it cannot escape */
    AH_EXPECT(&h, &q, SL_UNDER_LIMIT, 0);
    sl_response r = ah_decide(&h, &q);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.reset_time, T0 + 1000);
    ah_free(&h);
}

/* ---- random sequences: exact agreement with a list of every admission ------------------------ */

#define MAXADM 200000

static void random_log(int64_t D, int steps, bool change_limit)
{
    int64_t *adm = malloc(MAXADM * sizeof(int64_t)); /* admitted timestamps, in order */
    assert_non_null(adm);
    int64_t nadm = 0;
    alg_h h;
    ah_init(&h, T0);
    h.cfg.max_log_limit = 1000;
    int64_t L = 20, t = 0;
    int overs = 0, unders = 0, changes = 0;
    for (int i = 0; i < steps; i++) {
        uint64_t x = rnd();
        t += x % 40 == 0 ? (int64_t)(rnd() % (uint64_t)(2 * D)) : (int64_t)(rnd() % (D / 10 + 1));
        const int64_t now = T0 + t;
        h.now = now;
        if (change_limit && x % 97 == 0) {
            L = 1 + (int64_t)(rnd() % 40);
            changes++;
        }
        int64_t n = 1 + (int64_t)(rnd() % 3);
        if (x % 11 == 0)
            n = -1 - (int64_t)(rnd() % 3);
        else if (x % 19 == 0)
            n = 0;
        int32_t behavior = x % 31 == 0 ? SL_DRAIN_OVER_LIMIT : 0;
        sl_request q = lg(n, L, D);
        q.behavior = behavior;
        sl_response r = ah_decide(&h, &q);
        assert_null(r.error);

        /* live = admissions in (now - D, now] */
        int64_t first = nadm;
        while (first > 0 && adm[first - 1] > now - D)
            first--;
        int64_t live = nadm - first;
        bool fits = n <= 0 || live + n <= L;
        assert_int_equal(r.status, fits ? SL_UNDER_LIMIT : SL_OVER_LIMIT);
        overs += !fits;
        unders += n > 0 && fits;
        int64_t add = 0;
        if (n > 0 && fits)
            add = n;
        else if (n > 0 && behavior && L > live)
            add = L - live;
        for (int64_t k = 0; k < add; k++) {
            assert_true(nadm < MAXADM);
            adm[nadm++] = now;
        }
        if (n < 0) {
            int64_t drop = -n < live ? -n : live;
            nadm -= drop;
        }
        first = nadm;
        while (first > 0 && adm[first - 1] > now - D)
            first--;
        live = nadm - first;
        assert_int_equal(r.remaining, L - live > 0 ? L - live : 0);
        assert_int_equal(r.reset_time, live ? adm[nadm - 1] + D : now);
        if (!fits && n <= L) {
            /* n fit once live - (L - n) of the oldest live admissions have left */
            int64_t idx = first + live - (L - n) - 1;
            assert_int_equal(r.retry_after, idx < first ? 0 : adm[idx] + D - now);
        }
        /* never more than the limit in a window ending at an admission */
        if (add > 0 && !change_limit) {
            int64_t c = 0;
            for (int64_t k = nadm - 1; k >= 0 && adm[k] > now - D; k--)
                c++;
            assert_true(c <= L);
        }
    }
    assert_true(overs > steps / 20 && unders > steps / 20);
    if (change_limit)
        assert_true(changes > 5);
    ah_free(&h);
    free(adm);
}

static void test_log_random(void **state)
{
    (void)state;
    random_log(1000, 20000, false);
    random_log(60000, 20000, false);
    random_log(1000, 20000, true);
    random_log(7, 20000, true);
}

/* The sliding log never holds more than `limit` admissions in any window (t - D, t], checked over
 * every window edge, for a bursty stream. */
static void test_log_never_exceeds(void **state)
{
    (void)state;
    const int64_t L = 50, D = 1000;
    int64_t *adm = malloc(MAXADM * sizeof(int64_t));
    assert_non_null(adm);
    int64_t nadm = 0;
    alg_h h;
    ah_init(&h, T0);
    for (int64_t t = 0; t < 20000; t++) {
        h.now = T0 + t;
        int64_t n = (t % 997 < 20) ? 5 : (rnd() % 4 == 0 ? 1 : 0);
        if (!n)
            continue;
        sl_request q = lg(n, L, D);
        if (ah_decide(&h, &q).status == SL_UNDER_LIMIT)
            for (int64_t k = 0; k < n; k++)
                adm[nadm++] = T0 + t;
    }
    int64_t lo = 0;
    for (int64_t i = 0; i < nadm; i++) {
        while (adm[lo] <= adm[i] - D)
            lo++;
        assert_true(i - lo + 1 <= L);
    }
    assert_true(nadm > 20000 / D * L / 2);
    ah_free(&h);
    free(adm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_basic),
        cmocka_unit_test(test_log_limits),
        cmocka_unit_test(test_log_resize),
        cmocka_unit_test(test_log_created_at_in_past),
        cmocka_unit_test(test_log_random),
        cmocka_unit_test(test_log_never_exceeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bad and extreme input for every algorithm: each int64 field at INT64_MIN, INT64_MAX and around
 * 0, every combination, in multi-step sequences (so that extreme values also land in stored state
 * and meet ordinary ones). Nothing may crash or trip UBSan (the ASan build aborts on any undefined
 * behaviour), invalid input must give its error and change nothing (the harness checks), and valid
 * input must keep the shared invariants. Also: validation messages, names, the expiry rule,
 * release and memory accounting.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

#include "alg_harness.h"

static const int64_t vals[] = {
    INT64_MIN, INT64_MIN + 1, -1000, -1, 0, 1, 2, 7, 1000, 86400000, INT64_MAX - 1, INT64_MAX,
};
#define NV (sizeof(vals) / sizeof(vals[0]))

static const int64_t nows[] = {INT64_MIN, -1, 0, 1700000000000, INT64_MAX - 1, INT64_MAX};
#define NN (sizeof(nows) / sizeof(nows[0]))

static void test_extremes_all_algorithms(void **state)
{
    (void)state;
    uint64_t decided = 0, errors = 0;
    for (int32_t a = 0; a < SL_SLIDING_LOG + 1; a++) {
        for (size_t ni = 0; ni < NN; ni++) {
            for (size_t li = 0; li < NV; li++) {
                for (size_t di = 0; di < NV; di++) {
                    alg_h h;
                    ah_init(&h, nows[ni]);
                    h.cfg.max_log_limit = 1000;
                    h.cfg.max_sub_windows = 16;
                    /* a sequence over hits x burst x created_at, on one key */
                    for (size_t hi = 0; hi < NV; hi++) {
                        sl_request q = ah_req(a, vals[hi], vals[li], vals[di]);
                        q.burst = vals[(hi + li) % NV];
                        q.created_at = vals[(hi * 7 + di) % NV];
                        q.sub_windows = (int32_t)(hi % 5);
                        q.behavior = (int32_t)((hi & 1) ? SL_DRAIN_OVER_LIMIT : 0);
                        if (hi == 5)
                            q.behavior |= SL_RESET_REMAINING;
                        sl_response r = ah_decide(&h, &q);
                        decided++;
                        errors += r.error != NULL;
                        /* and the same with the other flags and a peek */
                        q.hits = 0;
                        r = ah_decide(&h, &q);
                        decided++;
                        if (vals[di] >= 0 && vals[di] <= 5) {
                            q.behavior = SL_DURATION_IS_GREGORIAN;
                            q.hits = vals[hi];
                            r = ah_decide(&h, &q);
                            decided++;
                        }
                    }
                    ah_free(&h);
                }
            }
        }
    }
    assert_true(decided > 100000);
    assert_true(errors > 1000 && errors < decided);
}

/* The same combinations for a key whose state already exists with ordinary values. */
static void test_extremes_on_existing_state(void **state)
{
    (void)state;
    for (int32_t a = 0; a < SL_SLIDING_LOG + 1; a++) {
        for (size_t hi = 0; hi < NV; hi++) {
            for (size_t xi = 0; xi < NV; xi++) {
                alg_h h;
                ah_init(&h, 1700000000000);
                h.cfg.max_sub_windows = 16;
                sl_request q = ah_req(a, 3, 10, 1000);
                q.sub_windows = 4;
                q.burst = 4;
                sl_response r = ah_decide(&h, &q);
                assert_null(r.error);
                q.hits = vals[hi];
                q.limit = vals[xi] < 0 || vals[xi] > 1000 ? 10 : vals[xi];
                q.created_at = vals[xi];
                r = ah_decide(&h, &q);
                q.created_at = 0;
                q.burst = vals[xi];
                r = ah_decide(&h, &q);
                h.now = vals[(hi + xi) % NV];
                r = ah_decide(&h, &q);
                ah_free(&h);
            }
        }
    }
}

static void expect_error(int32_t a, int64_t hits, int64_t limit, int64_t duration, int64_t burst,
                         int32_t behavior, int32_t sub, const char *msg)
{
    alg_h h;
    ah_init(&h, 1700000000000);
    sl_request q = ah_req(a, hits, limit, duration);
    q.burst = burst;
    q.behavior = behavior;
    q.sub_windows = sub;
    sl_response r = ah_decide(&h, &q);
    assert_non_null(r.error);
    assert_string_equal(r.error, msg);
    assert_false(ah_held(&h));
    /* the algorithms re-check: the same error when called without validation */
    if (a >= 0 && a < SL_ALGORITHM_COUNT) {
        sl_alg_decide(&h.st, &h.expire_at, &q, h.now, &h.cfg, &r);
        assert_string_equal(r.error, msg);
        assert_false(ah_held(&h));
    }
}

static void test_validation_messages(void **state)
{
    (void)state;
    for (int32_t a = 0; a < SL_CONCURRENCY; a++) {
        expect_error(a, 1, -1, 1000, 0, 0, 0, "field 'limit' cannot be negative");
        expect_error(a, 1, INT64_MIN, 1000, 0, 0, 0, "field 'limit' cannot be negative");
        expect_error(a, 1, 10, -1, 0, 0, 0, "field 'duration' cannot be negative");
        expect_error(a, 1, 10, 1000, -1, 0, 0, "field 'burst' cannot be negative");
    }
    for (int32_t a = SL_GCRA; a < SL_CONCURRENCY; a++)
        expect_error(a, 1, 10, 0, 0, 0, 0,
                     "field 'duration' must be positive for GCRA, FIXED_WINDOW, SLIDING_WINDOW "
                     "and SLIDING_LOG");
    expect_error(SL_GCRA, 1, 10, SL_GREGORIAN_DAYS, 0, SL_DURATION_IS_GREGORIAN, 0,
                 "behavior DURATION_IS_GREGORIAN is only supported by TOKEN_BUCKET, LEAKY_BUCKET "
                 "and FIXED_WINDOW");
    expect_error(SL_SLIDING_LOG, 1, 10, SL_GREGORIAN_DAYS, 0, SL_DURATION_IS_GREGORIAN, 0,
                 "behavior DURATION_IS_GREGORIAN is only supported by TOKEN_BUCKET, LEAKY_BUCKET "
                 "and FIXED_WINDOW");
    expect_error(SL_CONCURRENCY, 2, 10, 1000, 0, 0, 0,
                 "CONCURRENCY takes hits 1 (acquire a lease), -1 (release it) or 0 (peek)");
    expect_error(SL_CONCURRENCY, 1, 10, 0, 0, 0, 0,
                 "field 'duration' must be positive for CONCURRENCY (it is a lease's life)");
    expect_error(SL_CONCURRENCY, -1, 10, 1000, 0, 0, 0,
                 "a CONCURRENCY release (hits -1) needs the lease id (metadata 'lease_id')");
    expect_error(SL_CONCURRENCY, 1, 10, 1000, 0, SL_GLOBAL, 0,
                 "behavior GLOBAL is not supported by CONCURRENCY (a lease lives on the key's "
                 "owner)");
    expect_error(7, 1, 10, 1000, 0, 0, 0, "field 'algorithm' is not a known algorithm");
    expect_error(-1, 1, 10, 1000, 0, 0, 0, "field 'algorithm' is not a known algorithm");

    /* names */
    alg_h h;
    ah_init(&h, 0);
    static char big[SL_MAX_KEY_LEN + 2];
    memset(big, 'x', sizeof(big));
    sl_request q = ah_req(SL_TOKEN_BUCKET, 1, 10, 1000);
    q.name = big;
    q.name_len = SL_MAX_NAME_LEN;
    assert_null(ah_decide(&h, &q).error);
    q.name_len = SL_MAX_NAME_LEN + 1;
    assert_string_equal(ah_decide(&h, &q).error, "field 'name' is longer than 1024 bytes");
    q = ah_req(SL_TOKEN_BUCKET, 1, 10, 1000);
    q.unique_key = big;
    q.unique_key_len = SL_MAX_KEY_LEN + 1;
    assert_string_equal(ah_decide(&h, &q).error,
                        "field 'unique_key' is longer than 4096 bytes");
    q.unique_key_len = SL_MAX_KEY_LEN;
    assert_null(ah_decide(&h, &q).error);
    /* validate with a NULL engine config uses the defaults */
    q = ah_req(SL_SLIDING_LOG, 1, SL_ALG_DEFAULT_MAX_LOG_LIMIT, 1000);
    assert_null(sl_request_validate(&q, NULL));
    q.limit++;
    assert_non_null(sl_request_validate(&q, NULL));
    ah_free(&h);
}

static void test_names(void **state)
{
    (void)state;
    const char *want[] = {"TOKEN_BUCKET", "LEAKY_BUCKET", "GCRA", "FIXED_WINDOW",
                          "SLIDING_WINDOW", "SLIDING_LOG", "CONCURRENCY"};
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        assert_string_equal(sl_algorithm_name(a), want[a]);
        assert_int_equal(sl_algorithm_from_name(want[a], strlen(want[a])), a);
    }
    assert_int_equal(SL_TOKEN_BUCKET, 0);
    assert_int_equal(SL_LEAKY_BUCKET, 1);
    assert_int_equal(SL_GCRA, 2);
    assert_int_equal(SL_FIXED_WINDOW, 3);
    assert_int_equal(SL_SLIDING_WINDOW, 4);
    assert_int_equal(SL_SLIDING_LOG, 5);
    assert_int_equal(SL_CONCURRENCY, 6);
    assert_null(sl_algorithm_name(-1));
    assert_null(sl_algorithm_name(SL_ALGORITHM_COUNT));
    assert_int_equal(sl_algorithm_from_name("gcra", 4), SL_GCRA);
    assert_int_equal(sl_algorithm_from_name("Sliding_Window", 14), SL_SLIDING_WINDOW);
    assert_int_equal(sl_algorithm_from_name("GCRAX", 4), SL_GCRA); /* n bounds the string */
    assert_int_equal(sl_algorithm_from_name("GCR", 3), -1);
    assert_int_equal(sl_algorithm_from_name("GCRAX", 5), -1);
    assert_int_equal(sl_algorithm_from_name("", 0), -1);
    assert_int_equal(sl_algorithm_from_name(NULL, 0), -1);
}

static void test_expiry_rule_and_release(void **state)
{
    (void)state;
    assert_false(sl_alg_expired(1000, 999));
    assert_false(sl_alg_expired(1000, 1000));
    assert_true(sl_alg_expired(1000, 1001));
    assert_false(sl_alg_expired(INT64_MAX, INT64_MAX));
    assert_true(sl_alg_expired(INT64_MIN, INT64_MIN + 1));

    sl_state st;
    memset(&st, 0, sizeof(st));
    st.algorithm = SL_ALG_NONE;
    sl_alg_release(&st);
    assert_int_equal(st.algorithm, SL_ALG_NONE);
    assert_int_equal(sl_alg_side_bytes(&st), 0);

    /* a state copied elsewhere (as the store does from its scratch state) keeps working */
    alg_h h;
    ah_init(&h, 1700000000000);
    sl_request q = ah_req(SL_SLIDING_LOG, 1, 100, 1000);
    assert_null(ah_decide(&h, &q).error);
    alg_h moved;
    memcpy(&moved, &h, sizeof(h));
    memset(&h.st, 0xee, sizeof(h.st));
    sl_response r = ah_decide(&moved, &q);
    assert_int_equal(r.remaining, 98);
    assert_int_equal(sl_alg_side_bytes(&moved.st), 800);
    ah_free(&moved);
}

/* Switching algorithms frees the old side buffer (ASan's leak check would report it). */
static void test_switch_frees_side_buffers(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, 1700000000000);
    for (int round = 0; round < 3; round++) {
        for (int32_t a = 0; a <= SL_SLIDING_LOG; a++) {
            sl_request q = ah_req(a, 1, 50, 1000);
            q.sub_windows = 10;
            sl_response r = ah_decide(&h, &q);
            assert_null(r.error);
            assert_int_equal(h.st.algorithm, a);
            if (a == SL_SLIDING_WINDOW)
                assert_int_equal(sl_alg_side_bytes(&h.st), 80);
            else if (a == SL_SLIDING_LOG)
                assert_int_equal(sl_alg_side_bytes(&h.st), 400);
            else
                assert_int_equal(sl_alg_side_bytes(&h.st), 0);
        }
    }
    ah_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extremes_all_algorithms),
        cmocka_unit_test(test_extremes_on_existing_state),
        cmocka_unit_test(test_validation_messages),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_expiry_rule_and_release),
        cmocka_unit_test(test_switch_frees_side_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

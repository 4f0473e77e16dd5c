/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for impossible inputs at the engine's door (sl_request_validate and
 * sl_request_check_time, called by sl_engine_decide and sl_engine_decide_batch for every dialect):
 * created_at outside max-clock-skew around now, hits of INT64_MIN or beyond max-count, limit /
 * burst beyond max-count, duration beyond max-duration. Each gets its per-item error, changes
 * nothing and is counted in the engine's errors (sluice_item_errors_total); and every combination of
 * extreme values that passes gives answers that do not overflow (reset_time never negative,
 * remaining within max-count + 1, also after repeated give-backs on one key). All on virtual time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sluice/engine.h"

#define NOW ((int64_t)1700000000000)
#define SKEW ((int64_t)10000)

static sl_engine *engine_new(void)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = 10000;
    cfg.shards = 4;
    cfg.hash_seed = 42;
    cfg.max_clock_skew_ms = SKEW;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    return e;
}

static sl_request req(int32_t alg, int64_t hits, int64_t limit, int64_t duration)
{
    sl_request r;
    memset(&r, 0, sizeof r);
    r.name = "in";
    r.name_len = 2;
    r.unique_key = "k";
    r.unique_key_len = 1;
    r.algorithm = alg;
    r.hits = hits;
    r.limit = limit;
    r.duration = duration;
    return r;
}

/* The request fails with msg, and the key was not created (a peek finds it full). */
static void expect_error(sl_engine *e, const sl_request *q, const char *msg)
{
    sl_engine_stats before, after;
    sl_engine_stats_get(e, &before);
    sl_response r;
    sl_engine_decide(e, q, &r, NOW);
    assert_non_null(r.error);
    assert_string_equal(r.error, msg);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_time, 0);
    /* the batch path gives the same */
    sl_request qs[2] = {*q, req(SL_TOKEN_BUCKET, 1, 5, 1000)};
    qs[1].unique_key = "other";
    qs[1].unique_key_len = 5;
    sl_response rs[2];
    sl_engine_decide_batch(e, qs, rs, 2, NOW);
    assert_string_equal(rs[0].error, msg);
    assert_null(rs[1].error);
    sl_engine_stats_get(e, &after);
    assert_int_equal(after.errors, before.errors + 2);
    assert_int_equal(after.keys, before.keys + (before.keys == 0)); /* only "other" was added */
}

static void test_created_at_window(void **state)
{
    (void)state;
    sl_engine *e = engine_new();
    const char *msg = "field 'created_at' is further from the server's clock than max-clock-skew";
    const int64_t bad[] = {INT64_MIN, INT64_MIN + 1, -1, 1, NOW - SKEW - 1, NOW + SKEW + 1,
                           INT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_request q = req(SL_LEAKY_BUCKET, 1, 10, 1000);
        q.created_at = bad[i];
        expect_error(e, &q, msg);
    }
    /* at the edges of the window and 0 (= now): decided, as of created_at */
    const int64_t good[] = {NOW - SKEW, NOW + SKEW, 0};
    for (size_t i = 0; i < 3; i++) {
        sl_request q = req(SL_TOKEN_BUCKET, 1, 10, 1000);
        q.unique_key = i == 0 ? "a" : i == 1 ? "b" : "c";
        q.created_at = good[i];
        sl_response r;
        sl_engine_decide(e, &q, &r, NOW);
        assert_null(r.error);
        assert_int_equal(r.remaining, 9);
        assert_int_equal(r.reset_time, (good[i] ? good[i] : NOW) + 1000);
    }
    /* max_clock_skew_ms 0: any created_at (the library's default) */
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    assert_int_equal(cfg.max_clock_skew_ms, 0);
    sl_request q = req(SL_TOKEN_BUCKET, 1, 10, 1000);
    q.created_at = 5;
    assert_null(sl_request_check_time(&q, &cfg, NOW));
    sl_engine_free(e);
}

static void test_hits_out_of_range(void **state)
{
    (void)state;
    sl_engine *e = engine_new();
    const char *msg = "field 'hits' is out of range (more than max-count either way)";
    for (int32_t a = 0; a < SL_ALGORITHM_COUNT; a++) {
        if (a == SL_CONCURRENCY)
            continue; /* takes -1, 0, 1 only (its own message) */
        sl_request q = req(a, INT64_MIN, 10, 1000);
        expect_error(e, &q, msg);
        q.hits = -SL_DEFAULT_MAX_COUNT - 1;
        expect_error(e, &q, msg);
        q.hits = SL_DEFAULT_MAX_COUNT + 1;
        expect_error(e, &q, msg);
        q.hits = INT64_MAX;
        expect_error(e, &q, msg);
    }
    /* at the bound: accepted (a huge give-back, a refused huge take) */
    sl_request q = req(SL_LEAKY_BUCKET, -SL_DEFAULT_MAX_COUNT, 10, 1000);
    sl_response r;
    sl_engine_decide(e, &q, &r, NOW);
    assert_null(r.error);
    q.hits = SL_DEFAULT_MAX_COUNT;
    sl_engine_decide(e, &q, &r, NOW);
    assert_null(r.error);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    sl_engine_free(e);
}

static void test_limit_burst_duration_out_of_range(void **state)
{
    (void)state;
    sl_engine *e = engine_new();
    for (int32_t a = 0; a < SL_ALGORITHM_COUNT; a++) {
        sl_request q = req(a, 1, INT64_MAX, 1000);
        expect_error(e, &q, "field 'limit' exceeds max-count");
        q = req(a, 1, 10, 1000);
        q.burst = INT64_MAX;
        expect_error(e, &q, "field 'burst' exceeds max-count");
        q = req(a, 1, 10, INT64_MAX);
        expect_error(e, &q, "field 'duration' exceeds max-duration");
        q.duration = SL_DEFAULT_MAX_DURATION_MS + 1;
        expect_error(e, &q, "field 'duration' exceeds max-duration");
    }
    /* Gregorian durations are interval codes: not bounded by max-duration */
    sl_request q = req(SL_TOKEN_BUCKET, 1, 10, 1); /* GregorianMinutes */
    q.behavior = SL_DURATION_IS_GREGORIAN;
    sl_response r;
    sl_engine_decide(e, &q, &r, NOW);
    assert_null(r.error);
    sl_engine_free(e);
}

/* Whatever passes the bounds gives sane answers: the findings (negative reset_time,
 * remaining near INT64_MAX) cannot come back. */
static void test_accepted_extremes_give_sane_answers(void **state)
{
    (void)state;
    const int64_t M = SL_DEFAULT_MAX_COUNT;
    const int64_t counts[] = {-M, -1000, -1, 0, 1, 7, 1000, M - 1, M};
    const int64_t durs[] = {0, 1, 1000, 86400000, SL_DEFAULT_MAX_DURATION_MS};
    const int64_t created[] = {0, NOW - SKEW, NOW + SKEW};
    const size_t NC = sizeof counts / sizeof counts[0];
    sl_engine *e = engine_new();
    uint64_t decided = 0;
    for (int32_t a = 0; a < SL_ALGORITHM_COUNT; a++) {
        if (a == SL_CONCURRENCY)
            continue;
        for (size_t li = 0; li < NC; li++)
            for (size_t di = 0; di < sizeof durs / sizeof durs[0]; di++)
                for (size_t hi = 0; hi < NC; hi++) {
                    sl_request q = req(a, counts[hi], counts[li] < 0 ? 0 : counts[li], durs[di]);
                    q.burst = counts[(hi + li) % NC] < 0 ? 0 : counts[(hi + li) % NC];
                    q.created_at = created[(hi + di) % 3];
                    if (a == SL_SLIDING_LOG && q.limit > 1000)
                        q.limit = 1000;
                    sl_response r;
                    sl_engine_decide(e, &q, &r, NOW);
                    if (r.error)
                        continue;
                    decided++;
                    /* never before 1970; in the past only as Gubernator's leaky bucket is after
                     * a give-back (docs/algorithms.md) */
                    assert_true(r.reset_time >= 0);
                    if (a != SL_LEAKY_BUCKET)
                        assert_true(r.reset_time >= NOW - SKEW);
                    assert_true(r.remaining >= 0);
                    /* at most burst + |hits| (a leaky bucket reports a give-back before it
                     * clamps to its burst): far from INT64_MAX */
                    assert_true(r.remaining <= 2 * M + 1);
                    if (a != SL_LEAKY_BUCKET)
                        assert_true(r.remaining <= M + 1);
                    assert_true(r.limit <= M + 1);
                    assert_true(r.retry_after >= 0);
                }
    }
    assert_true(decided > 1000);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_created_at_window),
        cmocka_unit_test(test_hits_out_of_range),
        cmocka_unit_test(test_limit_burst_duration_out_of_range),
        cmocka_unit_test(test_accepted_extremes_give_sane_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

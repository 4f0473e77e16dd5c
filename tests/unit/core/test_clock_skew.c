/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for an owner whose clock runs ahead of the peer that stamped the requests (found by
 * the nemesis soak, tests/soak: one node's clock 3 s ahead made its token-bucket keys with a 4 s
 * duration start a new window every 1.6 s). The algorithms decide at the request's created_at and
 * set the key's expiry from it; the store must judge that expiry at the same time, not at its own
 * clock. Each case: requests stamped T, T+100, ... (the forwarding peer's clock) decided by an
 * engine whose now is T + skew; the limit holds within one duration of created_at, for skews
 * below, at and beyond the duration, and a window still ends when created_at passes its end.
 * Virtual time only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sluice/engine.h"

#define T0 ((int64_t)1700000000000)

static sl_engine *engine_new(void)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = 1000;
    cfg.shards = 2;
    cfg.hash_seed = 7;
    cfg.max_clock_skew_ms = 10000;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    return e;
}

static sl_request req(int32_t alg, int64_t created_at)
{
    sl_request r;
    memset(&r, 0, sizeof r);
    r.name = "skew";
    r.name_len = 4;
    r.unique_key = "k";
    r.unique_key_len = 1;
    r.algorithm = alg;
    r.hits = 1;
    r.limit = 4;
    r.duration = 4000;
    r.created_at = created_at;
    return r;
}

/* 40 requests, one every 100 ms of the stamping peer's clock (4 s: one duration), decided by an
 * owner skew ms ahead; returns how many were admitted. */
static int admitted_in_one_duration(int32_t alg, int64_t skew, int batch)
{
    sl_engine *e = engine_new();
    int n = 0;
    for (int i = 0; i < 40; i++) {
        int64_t stamped = T0 + i * 100;
        sl_request q = req(alg, stamped);
        sl_response r;
        if (batch)
            sl_engine_decide_batch(e, &q, &r, 1, stamped + skew);
        else
            sl_engine_decide(e, &q, &r, stamped + skew);
        assert_null(r.error);
        n += r.status == SL_UNDER_LIMIT;
    }
    sl_engine_free(e);
    return n;
}

static void test_token_bucket_owner_ahead(void **state)
{
    (void)state;
    const int64_t skews[] = {0, 1000, 2400, 3999, 4000, 6000, 9000};
    for (size_t i = 0; i < sizeof skews / sizeof skews[0]; i++) {
        /* before the fix: more than 4 from a skew of 1 s on, all 40 once it passes 4 s */
        assert_int_equal(admitted_in_one_duration(SL_TOKEN_BUCKET, skews[i], 0), 4);
        assert_int_equal(admitted_in_one_duration(SL_TOKEN_BUCKET, skews[i], 1), 4);
    }
}

static void test_leaky_bucket_owner_ahead(void **state)
{
    (void)state;
    /* limit 4 per 4 s: a full bucket (4) plus one leaked per second over the 3.9 s: at most 7 */
    const int64_t skews[] = {0, 2400, 6000, 9000};
    for (size_t i = 0; i < sizeof skews / sizeof skews[0]; i++)
        assert_in_range(admitted_in_one_duration(SL_LEAKY_BUCKET, skews[i], 0), 4, 7);
}

static void test_window_still_ends_at_created_at(void **state)
{
    (void)state;
    sl_engine *e = engine_new();
    sl_response r;
    for (int i = 0; i < 4; i++) {
        sl_request q = req(SL_TOKEN_BUCKET, T0 + i);
        sl_engine_decide(e, &q, &r, T0 + 3000 + i);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.reset_time, T0 + 4000);
    }
    sl_request q = req(SL_TOKEN_BUCKET, T0 + 3999);
    sl_engine_decide(e, &q, &r, T0 + 6999);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    /* stamped after the window's end: a new window, whatever the owner's clock says */
    q = req(SL_TOKEN_BUCKET, T0 + 4001);
    sl_engine_decide(e, &q, &r, T0 + 7001);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.reset_time, T0 + 8001);
    /* and without created_at the owner's own clock decides, as before */
    q = req(SL_TOKEN_BUCKET, 0);
    sl_engine_decide(e, &q, &r, T0 + 8002);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.reset_time, T0 + 12002);
    sl_engine_free(e);
}

/* The owner 3 s ahead, a 2 s duration: the periodic sweep (sl_engine_expire, at the owner's clock)
 * must not remove a window that is still live at the stamps of the requests deciding in it. */
static void test_sweep_keeps_a_window_live_at_created_at(void **state)
{
    (void)state;
    sl_engine *e = engine_new();
    int n = 0;
    for (int i = 0; i < 20; i++) { /* 2 s of requests, one every 100 ms, a sweep after each */
        int64_t stamped = T0 + i * 100;
        sl_request q = req(SL_TOKEN_BUCKET, stamped);
        q.duration = 2000;
        sl_response r;
        sl_engine_decide(e, &q, &r, stamped + 3000);
        assert_null(r.error);
        n += r.status == SL_UNDER_LIMIT;
        sl_engine_expire(e, stamped + 3000, 1000);
    }
    assert_int_equal(n, 4); /* before: every sweep ended the window, 20 admitted */
    /* and the sweep still removes the key once it is older than max-clock-skew past its end */
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 1);
    sl_engine_expire(e, T0 + 2000 + 10000 + 1, 1000);
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 0);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_bucket_owner_ahead),
        cmocka_unit_test(test_leaky_bucket_owner_ahead),
        cmocka_unit_test(test_window_still_ends_at_created_at),
        cmocka_unit_test(test_sweep_keeps_a_window_live_at_created_at),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

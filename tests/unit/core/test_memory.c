/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the store's byte cap (max-memory): side buffers are counted exactly, 15,000
 * SLIDING_LOG keys with a large limit stay within the cap (evicting, in eviction order), a key
 * whose buffer alone cannot fit gets a per-item error and changes nothing, a buffer that grows on
 * an existing key makes other keys leave, and tables stop growing at the cap. Virtual time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/store.h"
#include "sluice/engine.h"

#define T0 ((int64_t)1700000000000)
#define HOUR ((int64_t)3600 * 1000)
#define MIB ((uint64_t)1 << 20)

static sl_engine *engine_new(size_t max_keys, unsigned shards, uint64_t max_memory)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = max_keys;
    cfg.shards = shards;
    cfg.hash_seed = 9;
    cfg.max_memory = max_memory;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    return e;
}

static sl_response slog(sl_engine *e, const char *prefix, int k, int64_t hits, int64_t limit,
                        int64_t now)
{
    char key[48];
    int n = snprintf(key, sizeof key, "%s%d", prefix, k);
    sl_request rq = {.name = "mem", .name_len = 3, .unique_key = key, .unique_key_len = (size_t)n,
                     .hits = hits, .limit = limit, .duration = HOUR,
                     .algorithm = SL_SLIDING_LOG};
    sl_response r;
    sl_engine_decide(e, &rq, &r, now);
    return r;
}

static sl_engine_stats stats_of(sl_engine *e)
{
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    return st;
}

/* Issue 11: 15,000 SLIDING_LOG keys of limit 10,000 (80,000 bytes of log each: 1.2 GB uncapped)
 * against a 16 MiB cap: the store stays within it, keys are evicted, every request is answered. */
static void test_sliding_log_flood_stays_within_cap(void **state)
{
    (void)state;
    const uint64_t cap = 16 * MIB;
    sl_engine *e = engine_new(1000000, 16, cap);
    uint64_t max_bytes = 0;
    for (int k = 0; k < 15000; k++) {
        sl_response r = slog(e, "k", k, 1, 10000, T0 + k);
        assert_null(r.error);
        assert_int_equal(r.remaining, 9999);
        if (k % 500 == 0) {
            sl_engine_stats st = stats_of(e);
            if (st.bytes > max_bytes)
                max_bytes = st.bytes;
        }
    }
    sl_engine_stats st = stats_of(e);
    /* the cap covers tables and buffers; the store's own header (shards) comes on top */
    assert_true(st.bytes <= cap + 64 * 1024);
    assert_true(max_bytes <= cap + 64 * 1024);
    assert_true(st.keys >= 150); /* 16 MiB / 80 kB, less the tables */
    assert_true(st.keys < 210);
    assert_int_equal(st.keys + st.evictions + st.evictions_limited, 15000);
    assert_int_equal(st.errors, 0);
    sl_engine_free(e);
}

/* Exact accounting: bytes = tables + 8 bytes per unit of limit per live log, and back to tables
 * only when the keys go. */
static void test_exact_accounting(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 1, 64 * MIB);
    uint64_t base = stats_of(e).bytes;
    for (int k = 0; k < 10; k++)
        assert_null(slog(e, "a", k, 1, 1000, T0).error);
    assert_int_equal(stats_of(e).bytes, base + 10 * 1000 * 8);
    /* a raised limit resizes the log */
    assert_null(slog(e, "a", 0, 1, 3000, T0).error);
    assert_int_equal(stats_of(e).bytes, base + 9 * 1000 * 8 + 3000 * 8);
    /* giving the hits back empties the logs: the keys go */
    for (int k = 0; k < 10; k++)
        assert_null(slog(e, "a", k, -5, k == 0 ? 3000 : 1000, T0).error);
    assert_int_equal(stats_of(e).keys, 0);
    assert_int_equal(stats_of(e).bytes, base);
    sl_engine_free(e);
}

/* A key whose log alone exceeds its shard's share: a per-item error, nothing created or evicted. */
static void test_too_big_for_the_cap_is_an_error(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 1, 64 * 1024);
    for (int k = 0; k < 5; k++)
        assert_null(slog(e, "small", k, 1, 100, T0).error);
    sl_response r = slog(e, "big", 0, 1, 10000, T0);
    assert_non_null(r.error);
    assert_string_equal(r.error, sl_store_err_memory);
    assert_int_equal(r.remaining, 0);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 5);
    assert_int_equal(st.errors, 1);
    sl_engine_free(e);
}

/* Eviction under the byte cap keeps its order: logs at their limit survive a flood of logs that
 * hold a single hit, and a log that grows on an existing key makes others leave, never itself. */
static void test_memory_eviction_order(void **state)
{
    (void)state;
    sl_engine *e = engine_new(100000, 1, 1 * MIB);
    for (int k = 0; k < 5; k++)
        assert_int_equal(slog(e, "full", k, 2, 2, T0).status, SL_UNDER_LIMIT); /* at limit */
    for (int k = 0; k < 500; k++)
        assert_null(slog(e, "flood", k, 1, 1000, T0 + 2000 + k * 1000).error);
    for (int k = 0; k < 5; k++)
        assert_int_equal(slog(e, "full", k, 1, 2, T0 + 600000).status, SL_OVER_LIMIT);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.evictions_limited, 0);
    assert_true(st.bytes <= MIB + 64 * 1024);
    /* one key raises its limit from 1,000 to 10,000 (72 kB more log): the others make way */
    assert_null(slog(e, "grow", 0, 1, 1000, T0 + 700000).error);
    assert_null(slog(e, "grow", 0, 1, 10000, T0 + 700001).error);
    st = stats_of(e);
    assert_true(st.bytes <= MIB + 64 * 1024);
    assert_int_equal(slog(e, "grow", 0, 0, 10000, T0 + 700002).remaining, 9998);
    sl_engine_free(e);
}

/* Without side buffers the cap bounds the tables: they stop growing and keys are evicted. */
static void test_tables_stop_at_the_cap(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000000, 1, 256 * 1024);
    for (int k = 0; k < 20000; k++) {
        char key[16];
        int n = snprintf(key, sizeof key, "t%d", k);
        sl_request rq = {.name = "m", .name_len = 1, .unique_key = key,
                         .unique_key_len = (size_t)n, .hits = 1, .limit = 5, .duration = HOUR,
                         .algorithm = SL_TOKEN_BUCKET};
        sl_response r;
        sl_engine_decide(e, &rq, &r, T0 + k);
        assert_null(r.error);
    }
    sl_engine_stats st = stats_of(e);
    assert_true(st.bytes <= 256 * 1024 + 1024);
    assert_true(st.keys < 4096);
    assert_int_equal(st.keys + st.evictions, 20000);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sliding_log_flood_stays_within_cap),
        cmocka_unit_test(test_exact_accounting),
        cmocka_unit_test(test_too_big_for_the_cap_is_an_error),
        cmocka_unit_test(test_memory_eviction_order),
        cmocka_unit_test(test_tables_stop_at_the_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for what eviction may forget: the per-algorithm predicates of sl_alg_info_of()
 * (information-free = a fresh key's state, limited = the next hit is refused, holds = in between),
 * the store's eviction order (information-free first, then the oldest key not at its limit, a key at
 * its limit only when no other is left, counted apart), collection of information-free idle keys,
 * and an engine-level key flood that must not reset a held-over-limit key. All on virtual time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "alg_harness.h"
#include "core/alg.h"
#include "sluice/engine.h"

#define T0 ((int64_t)1700000000000)
#define HOUR ((int64_t)3600 * 1000)

static sl_alg_info info(const alg_h *h)
{
    if (!ah_held(h))
        return SL_INFO_FREE;
    return sl_alg_info_of(&h->st, h->expire_at, h->now);
}

/* ---------------------------------------------------------------- predicates */

static void test_token_bucket(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request r = ah_req(SL_TOKEN_BUCKET, 0, 3, 1000);
    ah_decide(&h, &r); /* a peek keeps a full item, as Gubernator does: nothing in it */
    assert_true(ah_held(&h));
    assert_int_equal(info(&h), SL_INFO_FREE);
    r.hits = 1;
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    r.hits = 2;
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    r.hits = 1;
    assert_int_equal(ah_decide(&h, &r).status, SL_OVER_LIMIT);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 1001); /* expired: the item is gone */
    assert_int_equal(info(&h), SL_INFO_FREE);
    ah_free(&h);
}

static void test_leaky_bucket(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request r = ah_req(SL_LEAKY_BUCKET, 10, 10, 1000); /* one hit leaks per 100 ms */
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 99);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 1); /* one whole hit leaked */
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    ah_advance(&h, 899);
    assert_int_equal(info(&h), SL_INFO_HOLDS); /* 9.99 leaked */
    ah_advance(&h, 1); /* full again at +1000, before the item expires */
    assert_false(sl_alg_expired(h.expire_at, h.now));
    assert_int_equal(info(&h), SL_INFO_FREE);
    ah_free(&h);
}

static void test_gcra(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request r = ah_req(SL_GCRA, 1, 10, 1000); /* T = 100 ms, burst 2: 3 at once */
    r.burst = 2;
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    r.hits = 2;
    assert_int_equal(ah_decide(&h, &r).status, SL_UNDER_LIMIT);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    r.hits = 1;
    assert_int_equal(ah_decide(&h, &r).status, SL_OVER_LIMIT);
    ah_advance(&h, 100); /* one emission interval: one hit conforms again */
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    assert_int_equal(ah_decide(&h, &r).status, SL_UNDER_LIMIT);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 299);
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    /* TAT <= now: full. The predicate says so from the state alone (not only by expiry). */
    assert_int_equal(sl_alg_info_of(&h.st, INT64_MAX, h.now + 1), SL_INFO_FREE);
    ah_free(&h);
}

static void test_fixed_window(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0 - T0 % 1000);
    sl_request r = ah_req(SL_FIXED_WINDOW, 1, 2, 1000);
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 1000); /* the window is over */
    assert_int_equal(info(&h), SL_INFO_FREE);
    ah_free(&h);
}

static void test_sliding_window(void **state)
{
    (void)state;
    for (int32_t S = 1; S <= 4; S += 3) {
        alg_h h;
        ah_init(&h, T0 - T0 % 1000);
        sl_request r = ah_req(SL_SLIDING_WINDOW, 1, 2, 1000);
        r.sub_windows = S;
        ah_decide(&h, &r);
        assert_int_equal(info(&h), SL_INFO_HOLDS);
        ah_decide(&h, &r);
        assert_int_equal(info(&h), SL_INFO_LIMITED);
        ah_advance(&h, 5000); /* every count has aged out */
        assert_int_equal(info(&h), SL_INFO_FREE);
        ah_free(&h);
    }
}

static void test_sliding_log(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request r = ah_req(SL_SLIDING_LOG, 1, 2, 1000);
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    ah_advance(&h, 500);
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 500); /* the first entry is dead: one free place */
    assert_int_equal(sl_alg_info_of(&h.st, INT64_MAX, h.now), SL_INFO_HOLDS);
    ah_advance(&h, 500); /* both dead */
    assert_int_equal(sl_alg_info_of(&h.st, INT64_MAX, h.now), SL_INFO_FREE);
    ah_free(&h);
}

static void test_concurrency(void **state)
{
    (void)state;
    alg_h h;
    ah_init(&h, T0);
    sl_request r = ah_req(SL_CONCURRENCY, 1, 2, 1000);
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_HOLDS);
    ah_advance(&h, 10);
    ah_decide(&h, &r);
    assert_int_equal(info(&h), SL_INFO_LIMITED);
    ah_advance(&h, 995); /* the first lease has lapsed */
    assert_int_equal(sl_alg_info_of(&h.st, INT64_MAX, h.now), SL_INFO_HOLDS);
    ah_advance(&h, 10);
    assert_int_equal(sl_alg_info_of(&h.st, INT64_MAX, h.now), SL_INFO_FREE);
    ah_free(&h);
}

/* ---------------------------------------------------------------- eviction order */

static sl_engine *engine_new(size_t max_keys, unsigned shards)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = max_keys;
    cfg.shards = shards;
    cfg.hash_seed = 777;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    return e;
}

/* A token-bucket decision of `hits` on key (prefix, k) with `limit` per hour. */
static sl_response tb(sl_engine *e, const char *prefix, int k, int64_t hits, int64_t limit,
                      int64_t now)
{
    char key[48];
    int n = snprintf(key, sizeof key, "%s%d", prefix, k);
    sl_request rq = {.name = "ev", .name_len = 2, .unique_key = key, .unique_key_len = (size_t)n,
                     .hits = hits, .limit = limit, .duration = HOUR,
                     .algorithm = SL_TOKEN_BUCKET};
    sl_response r;
    sl_engine_decide(e, &rq, &r, now);
    assert_null(r.error);
    return r;
}

static sl_engine_stats stats_of(sl_engine *e)
{
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    return st;
}

/* Limited keys, older than everything else, survive a flood of keys that hold information. */
static void test_limited_keys_outlive_older_flood(void **state)
{
    (void)state;
    sl_engine *e = engine_new(32, 1); /* one shard: the sample sees a good part of it */
    for (int k = 0; k < 8; k++)
        assert_int_equal(tb(e, "held", k, 1, 1, T0).status, SL_UNDER_LIMIT); /* now at limit */
    /* 2,000 distinct keys, one hit each of 100, over 2,000 virtual seconds */
    for (int k = 0; k < 2000; k++)
        tb(e, "flood", k, 1, 100, T0 + 5000 + (int64_t)k * 1000);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 32);
    assert_int_equal(st.evictions_limited, 0);
    assert_int_equal(st.evictions, 2000 - (32 - 8));
    /* every held key is still at its limit: none was reset */
    for (int k = 0; k < 8; k++)
        assert_int_equal(tb(e, "held", k, 1, 1, T0 + 2010000).status, SL_OVER_LIMIT);
    sl_engine_free(e);
}

/* Information-free keys (full buckets: peeks) go before older keys that hold information. */
static void test_free_keys_go_first(void **state)
{
    (void)state;
    sl_engine *e = engine_new(16, 1);
    for (int k = 0; k < 8; k++)
        tb(e, "used", k, 1, 100, T0); /* oldest, holding 1 hit each */
    for (int k = 0; k < 8; k++)
        tb(e, "peek", k, 0, 100, T0 + 10000); /* younger, full */
    for (int k = 0; k < 8; k++)
        tb(e, "new", k, 1, 100, T0 + 20000);
    /* the 8 used keys are still there, with their hit */
    for (int k = 0; k < 8; k++)
        assert_int_equal(tb(e, "used", k, 0, 100, T0 + 30000).remaining, 99);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 16);
    assert_int_equal(st.evictions + st.evictions_limited, 8);
    sl_engine_free(e);
}

/* When every key is at its limit, the store still takes new keys (the cap holds), evicting the
 * oldest limited key and counting it apart. */
static void test_all_limited_evicts_oldest_limited(void **state)
{
    (void)state;
    sl_engine *e = engine_new(16, 1);
    for (int k = 0; k < 16; k++)
        tb(e, "lim", k, 1, 1, T0 + (int64_t)k * 2000);
    tb(e, "new", 0, 1, 1, T0 + 40000);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 16);
    assert_int_equal(st.evictions_limited, 1);
    assert_int_equal(st.evictions, 0);
    /* the oldest went (and starts afresh); the others are still limited */
    assert_int_equal(tb(e, "lim", 1, 1, 1, T0 + 41000).status, SL_OVER_LIMIT);
    assert_int_equal(tb(e, "lim", 15, 1, 1, T0 + 41000).status, SL_OVER_LIMIT);
    assert_int_equal(tb(e, "lim", 0, 0, 1, T0 + 41000).remaining, 1);
    /* a second new key within the same second: no second whole-shard walk is needed to be right */
    tb(e, "new", 1, 1, 1, T0 + 41500);
    st = stats_of(e);
    assert_int_equal(st.keys, 16);
    assert_int_equal(st.evictions_limited + st.evictions, 3);
    sl_engine_free(e);
}

/* Collection of information-free keys: full buckets idle long enough go, keys that hold hits stay
 * however idle they are, and nothing is collected early. */
static void test_collect_free_keys(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 4);
    for (int k = 0; k < 100; k++) {
        tb(e, "peek", k, 0, 10, T0);
        tb(e, "used", k, 1, 10, T0);
    }
    bool done = false;
    assert_int_equal(sl_engine_collect(e, T0 + 5000, -1, 10000, 1u << 20, &done), 0);
    assert_true(done);
    assert_int_equal(sl_engine_collect(e, T0 + 12000, -1, 10000, 1u << 20, &done), 100);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 100);
    assert_int_equal(st.collections, 100);
    for (int k = 0; k < 100; k++)
        assert_int_equal(tb(e, "used", k, 0, 10, T0 + 13000).remaining, 9);
    sl_engine_free(e);
}

/* Issue 12's flood on one engine: 100 keys held over their limit (hit every second) against a
 * flood of distinct keys 40x the cap: 0 resets, the cap holds, the counters add up. */
static void test_key_flood_keeps_limited_keys(void **state)
{
    (void)state;
    const size_t cap = 5000;
    sl_engine *e = engine_new(cap, 8);
    int64_t now = T0;
    for (int k = 0; k < 100; k++)
        tb(e, "held", k, 5, 5, now);
    uint64_t flood = 0, resets = 0;
    for (int sec = 0; sec < 200; sec++) {
        now = T0 + 1000 + (int64_t)sec * 1000;
        for (int k = 0; k < 1000; k++)
            tb(e, "f", (int)flood++, 1, 1000, now + k % 1000);
        for (int k = 0; k < 100; k++)
            resets += tb(e, "held", k, 1, 5, now + 999).status != SL_OVER_LIMIT;
    }
    assert_int_equal(resets, 0);
    sl_engine_stats st = stats_of(e);
    assert_true(st.keys <= cap);
    assert_int_equal(st.evictions_limited, 0);
    assert_int_equal(st.keys + st.evictions + st.evictions_limited + st.expirations +
                         st.collections,
                     flood + 100);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_bucket),
        cmocka_unit_test(test_leaky_bucket),
        cmocka_unit_test(test_gcra),
        cmocka_unit_test(test_fixed_window),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_sliding_log),
        cmocka_unit_test(test_concurrency),
        cmocka_unit_test(test_limited_keys_outlive_older_flood),
        cmocka_unit_test(test_free_keys_go_first),
        cmocka_unit_test(test_all_limited_evicts_oldest_limited),
        cmocka_unit_test(test_collect_free_keys),
        cmocka_unit_test(test_key_flood_keeps_limited_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

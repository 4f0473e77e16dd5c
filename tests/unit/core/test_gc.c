/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for idle-key collection (gc-collect / gc-period): keys without hits for idle_ms go and
 * the others stay, never early whatever the phase of the 1.024 s stamp, expired keys count as
 * expirations, each call's work is bounded and pass_done marks a complete walk, the stamp's
 * horizon, collected keys start afresh, and collection concurrent with decisions keeps the table
 * invariants. All on virtual time: `now` is an argument. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alg.h"
#include "core/store.h"
#include "sluice/engine.h"

#define HOUR ((int64_t)3600 * 1000)
#define T0 ((int64_t)1700000000000) /* a realistic epoch-ms start */

/* ---------------------------------------------------------------- engine helpers */

static sl_engine *engine_new(size_t max_keys, unsigned shards)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = max_keys;
    cfg.shards = shards;
    cfg.hash_seed = 12345;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    return e;
}

/* One hit on key k of a one-hour token bucket of 100: the key does not expire for an hour. */
static sl_response hit(sl_engine *e, int k, int64_t now)
{
    char key[32];
    int n = snprintf(key, sizeof key, "k%d", k);
    sl_request rq = {.name = "gc", .name_len = 2, .unique_key = key, .unique_key_len = (size_t)n,
                     .hits = 1, .limit = 100, .duration = HOUR, .algorithm = SL_TOKEN_BUCKET};
    sl_response r;
    sl_engine_decide(e, &rq, &r, now);
    assert_null(r.error);
    return r;
}

/* Run a whole collection (calls until pass_done), bounded work per call; returns removed. */
static size_t collect_pass(sl_engine *e, int64_t now, int64_t idle_ms, size_t work, int *calls)
{
    size_t removed = 0;
    bool done = false;
    int n = 0;
    while (!done) {
        size_t r = sl_engine_collect_idle(e, now, idle_ms, work, &done);
        assert_true(r <= work);
        removed += r;
        assert_true(++n < 1000000);
    }
    if (calls)
        *calls = n;
    return removed;
}

static sl_engine_stats stats_of(sl_engine *e)
{
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    return st;
}

/* ---------------------------------------------------------------- tests */

static void test_idle_keys_go_active_keys_stay(void **state)
{
    (void)state;
    sl_engine *e = engine_new(100000, 16);
    for (int k = 0; k < 1000; k++)
        assert_int_equal(hit(e, k, T0).remaining, 99);
    /* 10 s later the even keys get another hit */
    for (int k = 0; k < 1000; k += 2)
        assert_int_equal(hit(e, k, T0 + 10000).remaining, 98);
    /* At +20 s with gc-collect 15 s: odd keys (idle 20 s) go, even keys (idle 10 s) stay. */
    assert_int_equal(collect_pass(e, T0 + 20000, 15000, 64, NULL), 500);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 500);
    assert_int_equal(st.collections, 500);
    assert_int_equal(st.expirations, 0);
    assert_int_equal(st.evictions, 0);
    /* The survivors kept their state; a collected key starts afresh (its count was forgotten). */
    assert_int_equal(hit(e, 0, T0 + 20000).remaining, 97);
    assert_int_equal(hit(e, 1, T0 + 20000).remaining, 99);
    /* A second pass at the same time finds nothing more. */
    assert_int_equal(collect_pass(e, T0 + 20000, 15000, 64, NULL), 0);
    sl_engine_free(e);
}

/* Whatever the phase of the access within the stamp's 1,024 ms unit, a key is never collected
 * before idle_ms have passed, and always within 1,024 ms after. */
static void test_never_early_at_most_one_unit_late(void **state)
{
    (void)state;
    for (int64_t idle = 1000; idle <= 100000; idle = idle * 7 + 13) {
        for (int64_t phase = 0; phase < 1024; phase += 97) {
            sl_engine *e = engine_new(1000, 1);
            int64_t t = T0 + phase;
            hit(e, 1, t);
            assert_int_equal(collect_pass(e, t + idle - 1, idle, 1000, NULL), 0);
            assert_int_equal(stats_of(e).keys, 1);
            assert_int_equal(collect_pass(e, t + idle + 1023, idle, 1000, NULL), 1);
            assert_int_equal(stats_of(e).keys, 0);
            sl_engine_free(e);
        }
    }
}

static void test_expired_keys_and_expired_only_mode(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 4);
    /* 10 keys of a 1 s window (expire at T0+1000) and 10 of an hour */
    for (int k = 0; k < 20; k++) {
        char key[16];
        int n = snprintf(key, sizeof key, "x%d", k);
        sl_request rq = {.name = "gc", .name_len = 2, .unique_key = key,
                         .unique_key_len = (size_t)n, .hits = 1, .limit = 5,
                         .duration = k < 10 ? 1000 : HOUR, .algorithm = SL_FIXED_WINDOW};
        sl_response r;
        sl_engine_decide(e, &rq, &r, T0);
        assert_null(r.error);
    }
    /* idle_ms <= 0: only expired keys go, and they count as expirations */
    assert_int_equal(collect_pass(e, T0 + 60000, 0, 7, NULL), 10);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 10);
    assert_int_equal(st.expirations, 10);
    assert_int_equal(st.collections, 0);
    assert_int_equal(collect_pass(e, T0 + 60000, -1, 7, NULL), 0);
    /* with an idle time the long-window keys go too, as collections */
    assert_int_equal(collect_pass(e, T0 + 60000, 30000, 7, NULL), 10);
    st = stats_of(e);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.collections, 10);
    sl_engine_free(e);
}

/* The stamp measures ages up to 2^16 units (18.6 h): longer idle times collect only expired keys;
 * a key idle 10 h goes with idle_ms 5 h. */
static void test_stamp_horizon(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 1);
    char key[] = "long";
    sl_request rq = {.name = "gc", .name_len = 2, .unique_key = key, .unique_key_len = 4,
                     .hits = 1, .limit = 5, .duration = 48 * HOUR, .algorithm = SL_TOKEN_BUCKET};
    sl_response r;
    sl_engine_decide(e, &rq, &r, T0);
    assert_int_equal(collect_pass(e, T0 + 20 * HOUR, 19 * HOUR, 1000, NULL), 0);
    assert_int_equal(stats_of(e).keys, 1);
    assert_int_equal(collect_pass(e, T0 + 10 * HOUR, 5 * HOUR, 1000, NULL), 1);
    assert_int_equal(stats_of(e).keys, 0);
    sl_engine_free(e);
}

/* Store level: each call examines at most max_work slots; pass_done comes exactly when the walk
 * has covered every slot of every shard once; the table invariants hold after every call. */
static void test_bounded_work_and_passes(void **state)
{
    (void)state;
    sl_store_config cfg = {.max_keys = 4096, .shards = 8,
                           .alg = {.max_log_limit = 1000, .max_sub_windows = 16}};
    sl_store *s;
    assert_int_equal(sl_store_new(&cfg, &s), 0);
    sl_request rq = {.hits = 1, .limit = 10, .duration = HOUR, .algorithm = SL_FIXED_WINDOW};
    uint64_t x = 99;
    for (int i = 0; i < 1500; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        sl_response r;
        sl_store_decide(s, x, &rq, i < 500 ? T0 : T0 + 50000, &r);
        assert_null(r.error);
    }
    sl_engine_stats st;
    sl_store_stats(s, &st);
    assert_int_equal(st.keys, 1500);
    size_t slots = st.capacity;

    /* nothing idle for 1 h: a pass examines every slot exactly once, max_work at a time */
    size_t calls = 0;
    bool done = false;
    while (!done) {
        assert_int_equal(sl_store_collect(s, T0 + 60000, HOUR, -1, 100, &done), 0);
        calls++;
        assert_true(calls <= slots);
    }
    assert_int_equal(calls, (slots + 99) / 100);

    /* The 500 keys last touched at T0 are idle 60 s at T0 + 60 s; the 1000 others 10 s. */
    size_t removed = 0;
    calls = 0;
    done = false;
    while (!done) {
        size_t r = sl_store_collect(s, T0 + 60000, 30000, -1, 100, &done);
        assert_true(r <= 100);
        removed += r;
        calls++;
        assert_int_equal(sl_store_check(s), 0);
    }
    assert_int_equal(removed, 500);
    /* removals re-examine their slot, so a pass takes up to removed / 100 calls more */
    assert_true(calls >= (slots + 99) / 100);
    assert_true(calls <= (slots + removed + 99) / 100 + 1);
    sl_store_stats(s, &st);
    assert_int_equal(st.keys, 1000);
    assert_int_equal(st.collections, 500);

    /* a call never runs into a second pass: with unbounded work it stops at the end of one */
    assert_int_equal(sl_store_collect(s, T0 + 60000, 30000, -1, 1u << 30, &done), 0);
    assert_true(done);
    /* max_work 0 does nothing and completes nothing */
    done = true;
    assert_int_equal(sl_store_collect(s, T0 + HOUR * 2, 1, -1, 0, &done), 0);
    assert_false(done);
    /* pass_done may be NULL */
    assert_int_equal(sl_store_collect(s, T0 + 70000, 15000, -1, 1u << 30, NULL), 1000);
    assert_int_equal(sl_store_check(s), 0);
    sl_store_free(s);
}

/* The store at its cap (LRU eviction) and collection together: memory stays bounded and evictions
 * and collections are both counted. */
static void test_cap_and_collection(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 8);
    for (int k = 0; k < 20000; k++)
        hit(e, k, T0 + k);
    sl_engine_stats st = stats_of(e);
    assert_true(st.keys <= 1000);
    assert_int_equal(st.evictions, 20000 - st.keys);
    size_t before = st.keys;
    assert_int_equal(collect_pass(e, T0 + 20000 + 120000, 60000, 100, NULL), before);
    st = stats_of(e);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.collections, before);
    sl_engine_free(e);
}

/* Collection from one thread while two others decide: the invariants hold and no key is lost
 * that was hit recently. */
typedef struct worker_arg {
    sl_engine *e;
    int base;
    volatile int *stop;
} worker_arg;

static void *decider(void *p)
{
    worker_arg *a = p;
    int64_t now = T0 + 100000;
    for (int round = 0; round < 1 || (!*a->stop && round < 200); round++)
        for (int k = 0; k < 500; k++)
            hit(a->e, a->base + k, now);
    return NULL;
}

static void test_concurrent_with_decisions(void **state)
{
    (void)state;
    sl_engine *e = engine_new(50000, 16);
    for (int k = 0; k < 5000; k++)
        hit(e, 10000 + k, T0); /* idle keys to collect */
    volatile int stop = 0;
    worker_arg a1 = {e, 0, &stop}, a2 = {e, 1000, &stop};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, decider, &a1);
    pthread_create(&t2, NULL, decider, &a2);
    size_t removed = 0;
    for (int pass = 0; pass < 3; pass++)
        removed += collect_pass(e, T0 + 100000, 50000, 32, NULL);
    stop = 1;
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(removed, 5000);
    sl_engine_stats st = stats_of(e);
    assert_int_equal(st.keys, 1000);
    assert_int_equal(st.collections, 5000);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_keys_go_active_keys_stay),
        cmocka_unit_test(test_never_early_at_most_one_unit_late),
        cmocka_unit_test(test_expired_keys_and_expired_only_mode),
        cmocka_unit_test(test_stamp_horizon),
        cmocka_unit_test(test_bounded_work_and_passes),
        cmocka_unit_test(test_cap_and_collection),
        cmocka_unit_test(test_concurrent_with_decisions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

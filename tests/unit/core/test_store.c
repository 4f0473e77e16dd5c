/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key store tests: probing and backward-shift deletion under forced collisions (crafted hashes),
 * growth, lazy and active expiry with bounded work, LRU eviction at the cap, the global key cap
 * across shards, and memory accounting. Keys are written through sl_store_update() with a test
 * callback, so these tests do not depend on any algorithm's arithmetic; a few use
 * sl_store_decide() with real algorithms for counters and side buffers. Virtual time only.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alg.h"
#include "core/store.h"

#define FAR_FUTURE ((int64_t)1 << 45)

static sl_store *store_new(size_t max_keys, unsigned shards)
{
    sl_store_config cfg = {.max_keys = max_keys, .shards = shards,
                           .alg = {.max_log_limit = 1000, .max_sub_windows = 16}};
    sl_store *s = NULL;
    assert_int_equal(sl_store_new(&cfg, &s), 0);
    assert_non_null(s);
    return s;
}

/* --- a test "algorithm": a fixed-window state tagged with a number, with a chosen expiry ---- */

typedef struct put_ctx {
    int64_t tag;
    int64_t expire_at;
    bool was_new;
    bool drop;      /* leave the state empty (= no key) */
} put_ctx;

static void put_fn(sl_state *st, int64_t *expire_at, void *ctx)
{
    put_ctx *c = ctx;
    c->was_new = st->algorithm == SL_ALG_NONE;
    if (c->drop) {
        sl_alg_release(st);
        return;
    }
    st->algorithm = SL_FIXED_WINDOW;
    st->u.fw.limit = c->tag;
    st->u.fw.duration = 1000;
    st->u.fw.window_start = 0;
    st->u.fw.count = 0;
    *expire_at = c->expire_at;
}

static void touch_fn(sl_state *st, int64_t *expire_at, void *ctx)
{
    (void)st, (void)expire_at;
    bool *was_new = ctx;
    *was_new = st->algorithm == SL_ALG_NONE;
    if (*was_new) { /* keep the key absent */
        sl_alg_release(st);
    }
}

static bool put(sl_store *s, uint64_t h, int64_t now, int64_t tag, int64_t expire_at)
{
    put_ctx c = {.tag = tag, .expire_at = expire_at};
    assert_true(sl_store_update(s, h, now, put_fn, &c));
    return c.was_new;
}

static void touch(sl_store *s, uint64_t h, int64_t now)
{
    bool was_new = true;
    assert_true(sl_store_update(s, h, now, touch_fn, &was_new));
    assert_false(was_new);
}

static int64_t tag_of(sl_store *s, uint64_t h, int64_t now)
{
    sl_state st;
    if (!sl_store_get(s, h, now, &st, NULL))
        return -1;
    assert_int_equal(st.algorithm, SL_FIXED_WINDOW);
    return st.u.fw.limit;
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void stats(sl_store *s, sl_engine_stats *st)
{
    sl_store_stats(s, st);
}

/* --- tests ----------------------------------------------------------------------------------- */

/* With 32 slots, home = hash >> 59: hashes sharing the top 5 bits collide on one home slot. */
static uint64_t at_home(unsigned home, unsigned k)
{
    return ((uint64_t)home << 59) | (k + 1);
}

static void test_collisions_and_backward_shift(void **state)
{
    (void)state;
    sl_store *s = store_new(1000, 1);
    size_t cap;
    sl_store_shard_info(s, 0, NULL, &cap, NULL, NULL);
    assert_int_equal(cap, 32);

    /* Five keys on home 5, then one on home 6 that lands after the cluster. */
    for (unsigned k = 0; k < 5; k++) {
        assert_true(put(s, at_home(5, k), 0, k, FAR_FUTURE));
        assert_int_equal(sl_store_home(s, at_home(5, k)), 5);
        assert_int_equal(sl_store_position(s, at_home(5, k)), 5 + k);
    }
    uint64_t h6 = at_home(6, 100);
    put(s, h6, 0, 100, FAR_FUTURE);
    assert_int_equal(sl_store_position(s, h6), 10);
    assert_int_equal(sl_store_check(s), 0);

    /* Updating a key finds it, never duplicates it. */
    assert_false(put(s, at_home(5, 3), 0, 33, FAR_FUTURE));
    assert_int_equal(tag_of(s, at_home(5, 3), 0), 33);

    /* Deleting the head pulls the whole cluster back by one, including the home-6 key. */
    assert_true(sl_store_remove(s, at_home(5, 0)));
    assert_false(sl_store_remove(s, at_home(5, 0)));
    for (unsigned k = 1; k < 5; k++)
        assert_int_equal(sl_store_position(s, at_home(5, k)), 5 + k - 1);
    assert_int_equal(sl_store_position(s, h6), 9);
    assert_int_equal(sl_store_check(s), 0);

    /* Deleting in the middle: keys after it move, keys before stay. */
    assert_true(sl_store_remove(s, at_home(5, 2)));
    assert_int_equal(sl_store_position(s, at_home(5, 1)), 5);
    assert_int_equal(sl_store_position(s, at_home(5, 3)), 6);
    assert_int_equal(sl_store_position(s, at_home(5, 4)), 7);
    assert_int_equal(sl_store_position(s, h6), 8);
    assert_int_equal(tag_of(s, at_home(5, 3), 0), 33);
    assert_int_equal(tag_of(s, at_home(5, 4), 0), 4);

    /* A key must never move before its home: removing the home-5 keys leaves h6 on slot 6. */
    sl_store_remove(s, at_home(5, 1));
    sl_store_remove(s, at_home(5, 3));
    sl_store_remove(s, at_home(5, 4));
    assert_int_equal(sl_store_position(s, h6), 6);
    assert_int_equal(sl_store_check(s), 0);

    /* Wrap-around: a cluster on the last slot continues at slot 0. */
    for (unsigned k = 0; k < 3; k++)
        put(s, at_home(31, k), 0, 200 + k, FAR_FUTURE);
    assert_int_equal(sl_store_position(s, at_home(31, 0)), 31);
    assert_int_equal(sl_store_position(s, at_home(31, 1)), 0);
    assert_int_equal(sl_store_position(s, at_home(31, 2)), 1);
    uint64_t h0 = at_home(0, 7); /* home 0, pushed to slot 2 by the wrapped cluster */
    put(s, h0, 0, 7, FAR_FUTURE);
    assert_int_equal(sl_store_position(s, h0), 2);
    assert_true(sl_store_remove(s, at_home(31, 0)));
    assert_int_equal(sl_store_position(s, at_home(31, 1)), 31);
    assert_int_equal(sl_store_position(s, at_home(31, 2)), 0);
    assert_int_equal(sl_store_position(s, h0), 1);
    assert_int_equal(sl_store_check(s), 0);

    /* Hash 0 is a valid key (stored as 1): it must not be mistaken for an empty slot. */
    put(s, 0, 0, 99, FAR_FUTURE);
    assert_int_equal(tag_of(s, 0, 0), 99);
    assert_true(sl_store_remove(s, 0));
    assert_int_equal(tag_of(s, 0, 0), -1);

    sl_engine_stats st;
    stats(s, &st);
    assert_int_equal(st.keys, 4); /* h6, two of the wrapped cluster, h0 */
    assert_int_equal(st.evictions, 0);
    sl_store_free(s);
}

static void test_growth(void **state)
{
    (void)state;
    /* One shard, 1000 keys: limit 1000, tables 32, 64, ..., 1024, then 1250 = 1.25 * 1000. */
    sl_store *s = store_new(1000, 1);
    size_t limit, cap_max, cap, keys;
    sl_store_shard_info(s, 0, NULL, NULL, &limit, &cap_max);
    assert_int_equal(limit, 1000);
    assert_int_equal(cap_max, 1250);
    uint64_t x = 1;
    uint64_t h[1000];
    size_t last_cap = 32;
    for (int i = 0; i < 1000; i++) {
        h[i] = splitmix(&x);
        assert_true(put(s, h[i], 0, i, FAR_FUTURE));
        sl_store_shard_info(s, 0, &keys, &cap, NULL, NULL);
        assert_int_equal(keys, i + 1);
        assert_true(cap == last_cap || cap == 2 * last_cap || cap == cap_max);
        assert_true(keys * 5 <= cap * 4); /* load <= 0.8 */
        last_cap = cap;
    }
    assert_int_equal(cap, 1250);
    assert_int_equal(sl_store_check(s), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(tag_of(s, h[i], 0), i);
    /* Remove every other key; the rest are still found. */
    for (int i = 0; i < 1000; i += 2)
        assert_true(sl_store_remove(s, h[i]));
    assert_int_equal(sl_store_check(s), 0);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(tag_of(s, h[i], 0), i % 2 ? i : -1);
    sl_engine_stats st;
    stats(s, &st);
    assert_int_equal(st.keys, 500);
    assert_int_equal(st.capacity, 1250);
    sl_store_free(s);
}

static void test_lazy_expiry(void **state)
{
    (void)state;
    sl_store *s = store_new(100, 1);
    put(s, 42, 0, 1, 1000);
    assert_int_equal(tag_of(s, 42, 500), 1);
    assert_int_equal(tag_of(s, 42, 5000), -1); /* expired: absent to readers... */
    sl_engine_stats st;
    stats(s, &st);
    assert_int_equal(st.keys, 1);               /* ...but only removed when touched */
    assert_int_equal(st.expirations, 0);

    /* Touching an expired key hands a fresh (NONE) state to the writer and counts an expiration. */
    put_ctx c = {.tag = 2, .expire_at = 9000};
    assert_true(sl_store_update(s, 42, 5000, put_fn, &c));
    assert_true(c.was_new);
    assert_int_equal(tag_of(s, 42, 5000), 2);
    stats(s, &st);
    assert_int_equal(st.keys, 1);
    assert_int_equal(st.expirations, 1);

    /* A writer that leaves an expired key empty removes it. */
    bool was_new = false;
    assert_false(sl_store_update(s, 42, 10000, touch_fn, &was_new));
    assert_true(was_new);
    stats(s, &st);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.expirations, 2);
    assert_int_equal(sl_store_check(s), 0);
    sl_store_free(s);
}

static void test_active_expiry_bounded(void **state)
{
    (void)state;
    sl_store *s = store_new(4096, 8);
    assert_int_equal(sl_store_shards(s), 8);
    uint64_t x = 7, h[400];
    for (int i = 0; i < 400; i++) {
        h[i] = splitmix(&x);
        put(s, h[i], 0, i, i % 2 ? FAR_FUTURE : 1000); /* even keys expire at 1000 */
    }
    /* Nothing has expired yet: a full sweep removes nothing. */
    assert_int_equal(sl_store_expire(s, 500, 1u << 20), 0);

    /* Bounded work: never more removals than slots examined. */
    size_t total = 0;
    int calls = 0;
    for (;;) {
        size_t r = sl_store_expire(s, 2000, 16);
        assert_true(r <= 16);
        total += r;
        calls++;
        assert_int_equal(sl_store_check(s), 0);
        if (total == 200)
            break;
        assert_true(calls < 1000); /* 8 shards x 64 slots: a few hundred calls at most */
    }
    assert_true(calls > 200 / 16);
    for (int i = 0; i < 400; i++)
        assert_int_equal(tag_of(s, h[i], 2000), i % 2 ? i : -1);
    sl_engine_stats st;
    stats(s, &st);
    assert_int_equal(st.keys, 200);
    assert_int_equal(st.expirations, 200);
    assert_int_equal(sl_store_expire(s, 2000, 0), 0);
    sl_store_free(s);
}

static void test_eviction_lru(void **state)
{
    (void)state;
    /* One shard of 16 keys: the LRU sample (16) covers the whole shard, so eviction is exact. */
    sl_store *s = store_new(16, 1);
    uint64_t h[64];
    uint64_t x = 99;
    for (int i = 0; i < 64; i++)
        h[i] = splitmix(&x);
    for (int i = 0; i < 16; i++)
        put(s, h[i], (int64_t)i * 2000, i, FAR_FUTURE);
    /* Key 0 is used again, so key 1 is now the least recently used. */
    touch(s, h[0], 40000);
    put(s, h[16], 50000, 16, FAR_FUTURE);
    assert_int_equal(tag_of(s, h[1], 50000), -1);
    assert_int_equal(tag_of(s, h[0], 50000), 0);
    for (int i = 2; i <= 16; i++)
        assert_int_equal(tag_of(s, h[i], 50000), i);
    sl_engine_stats st;
    stats(s, &st);
    assert_int_equal(st.keys, 16);
    assert_int_equal(st.evictions, 1);

    /* An expired key goes first, whatever its age, and counts as an expiration. */
    put(s, h[9], 52000, 9, 55000);
    put(s, h[17], 60000, 17, FAR_FUTURE);
    assert_int_equal(tag_of(s, h[9], 60000), -1);
    assert_int_equal(tag_of(s, h[2], 60000), 2); /* the oldest live key survived */
    stats(s, &st);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.expirations, 1);

    /* A flood of new keys: the count never passes the cap, every insert evicts one. */
    for (int i = 18; i < 64; i++) {
        put(s, h[i], 70000 + i * 2000, i, FAR_FUTURE);
        stats(s, &st);
        assert_int_equal(st.keys, 16);
        assert_int_equal(sl_store_check(s), 0);
    }
    assert_int_equal(st.evictions, 1 + (64 - 18));
    /* The survivors are the 16 most recent. */
    for (int i = 64 - 16; i < 64; i++)
        assert_int_equal(tag_of(s, h[i], 200000), i);
    sl_store_free(s);
}

static void test_new_key_without_state_evicts_nothing(void **state)
{
    (void)state;
    sl_store *s = store_new(16, 1);
    uint64_t x = 5;
    for (int i = 0; i < 16; i++)
        put(s, splitmix(&x), 0, i, FAR_FUTURE);
    put_ctx c = {.drop = true};
    assert_false(sl_store_update(s, 123456789, 1000, put_fn, &c));
    assert_true(c.was_new);
    sl_engine_stats st;
    stats(s, &st);
    assert_int_equal(st.keys, 16);
    assert_int_equal(st.evictions, 0);
    assert_int_equal(tag_of(s, 123456789, 1000), -1);
    sl_store_free(s);
}

static void test_global_cap_across_shards(void **state)
{
    (void)state;
    /* 8 shards for 200 keys: each shard may hold up to 50 (skew slack), the store 200. */
    sl_store *s = store_new(200, 8);
    assert_int_equal(sl_store_shards(s), 8);
    size_t limit, cap_max;
    sl_store_shard_info(s, 0, NULL, NULL, &limit, &cap_max);
    assert_int_equal(limit, 50);
    uint64_t x = 3;
    sl_engine_stats st;
    for (int i = 0; i < 5000; i++) {
        put(s, splitmix(&x), i, i, FAR_FUTURE);
        stats(s, &st);
        assert_true(st.keys <= 200);
        if (i % 97 == 0)
            assert_int_equal(sl_store_check(s), 0);
    }
    assert_int_equal(st.keys, 200);
    assert_int_equal(st.evictions, 5000 - 200);
    assert_true(st.capacity <= 8 * cap_max);
    assert_int_equal(sl_store_check(s), 0);
    sl_store_free(s);

    /* All keys in shard 0 until the store is full; a key for empty shard 1 must then evict
     * from shard 0 rather than exceed the cap. */
    s = store_new(32, 2);
    assert_int_equal(sl_store_shards(s), 2);
    sl_store_shard_info(s, 0, NULL, NULL, &limit, NULL);
    assert_int_equal(limit, 32);
    for (unsigned k = 0; k < 32; k++)
        put(s, ((uint64_t)(k + 1) << 32) | 0, k, k, FAR_FUTURE);
    size_t k0, k1;
    put(s, ((uint64_t)1 << 40) | 1, 100, 1000, FAR_FUTURE);
    sl_store_shard_info(s, 0, &k0, NULL, NULL, NULL);
    sl_store_shard_info(s, 1, &k1, NULL, NULL, NULL);
    assert_int_equal(k0, 31);
    assert_int_equal(k1, 1);
    stats(s, &st);
    assert_int_equal(st.keys, 32);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(sl_store_check(s), 0);
    sl_store_free(s);

    /* Few keys for many shards: the shard count shrinks so a shard holds >= 16 keys. */
    s = store_new(100, 64);
    assert_int_equal(sl_store_shards(s), 4);
    sl_store_free(s);
}

static void test_memory_accounting(void **state)
{
    (void)state;
    sl_store *s = store_new(200000, 64);
    sl_engine_stats st;
    stats(s, &st);
    uint64_t overhead = st.bytes - st.capacity * 64;
    assert_int_equal(st.capacity, 64 * 32);
    assert_true(overhead < 64 * 1024);

    /* 200k keys: tables + slack stay under 96 bytes per key. */
    uint64_t x = 11;
    for (int i = 0; i < 200000; i++)
        put(s, splitmix(&x), 0, i, FAR_FUTURE);
    stats(s, &st);
    assert_int_equal(st.keys, 200000);
    assert_int_equal(st.bytes, overhead + st.capacity * 64);
    assert_true((double)st.bytes / (double)st.keys <= 96.0);
    assert_int_equal(st.evictions, 0);
    sl_store_free(s);

    /* Side buffers (sliding log) are counted, and given back when keys go. */
    s = store_new(1000, 4);
    stats(s, &st);
    uint64_t base = st.bytes;
    sl_engine_config ecfg = {.max_keys = 1000, .shards = 4, .max_log_limit = 1000,
                             .max_sub_windows = 16};
    uint64_t side = 0;
    for (int i = 0; i < 10; i++) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", i);
        sl_request rq = {.name = "log", .name_len = 3, .unique_key = key, .unique_key_len = n,
                         .hits = 1, .limit = 100, .duration = 60000,
                         .algorithm = SL_SLIDING_LOG};
        assert_null(sl_request_validate(&rq, &ecfg));
        sl_response rs;
        sl_store_decide(s, 1000 + i, &rq, 1000, &rs);
        assert_null(rs.error);
        sl_state ks;
        assert_true(sl_store_get(s, 1000 + i, 1000, &ks, NULL));
        side += sl_alg_side_bytes(&ks);
    }
    assert_true(side > 0);
    stats(s, &st);
    assert_int_equal(st.bytes, base + side);
    assert_int_equal(st.decisions[SL_SLIDING_LOG][SL_UNDER_LIMIT], 10);
    for (int i = 0; i < 10; i++)
        assert_true(sl_store_remove(s, 1000 + i));
    stats(s, &st);
    assert_int_equal(st.bytes, base);
    assert_int_equal(st.keys, 0);
    /* Keys with side buffers left in the store are freed by sl_store_free (ASan checks). */
    sl_response rs;
    sl_request rq = {.name = "log", .name_len = 3, .unique_key = "x", .unique_key_len = 1,
                     .hits = 1, .limit = 100, .duration = 60000, .algorithm = SL_SLIDING_LOG};
    sl_store_decide(s, 77, &rq, 1000, &rs);
    assert_null(rs.error);
    sl_store_free(s);
}

static void test_bad_config(void **state)
{
    (void)state;
    sl_store *s = (sl_store *)1;
    sl_store_config cfg = {.max_keys = 0, .shards = 4};
    assert_int_equal(sl_store_new(&cfg, &s), -EINVAL);
    assert_null(s);
    cfg.max_keys = 10;
    cfg.shards = 3;
    assert_int_equal(sl_store_new(&cfg, &s), -EINVAL);
    cfg.shards = 0;
    assert_int_equal(sl_store_new(&cfg, &s), -EINVAL);
    cfg.shards = SL_STORE_MAX_SHARDS * 2;
    assert_int_equal(sl_store_new(&cfg, &s), -EINVAL);
    sl_store_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_collisions_and_backward_shift),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_lazy_expiry),
        cmocka_unit_test(test_active_expiry_bounded),
        cmocka_unit_test(test_eviction_lru),
        cmocka_unit_test(test_new_key_without_state_evicts_nothing),
        cmocka_unit_test(test_global_cap_across_shards),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

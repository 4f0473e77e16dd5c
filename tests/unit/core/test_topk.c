/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The space-saving top-K on a virtual clock: exact counts while the keys fit, the guarantee
 * (a key above total/capacity is held, its count at most `error` above the truth) under a skewed
 * stream with many more keys than slots, the listing order and its bound, long keys cut, halving
 * per half-life (and freeing of slots that reach 0), no decay with half-life 0, time going
 * backwards, and option checks.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/topk.h"

static void add(sl_topk *t, const char *k, uint64_t n, int64_t now)
{
    sl_topk_add(t, k, strlen(k), n, now);
}

static void test_exact_while_it_fits(void **state)
{
    (void)state;
    sl_topk t;
    assert_int_equal(sl_topk_init(&t, 4, 0, 0), 0);
    add(&t, "alice", 3, 0);
    add(&t, "bob", 5, 0);
    add(&t, "carol", 1, 0);
    add(&t, "alice", 4, 0);
    sl_topk_entry e[8];
    assert_int_equal(sl_topk_list(&t, e, 8, 0), 3);
    assert_int_equal(e[0].count, 7);
    assert_memory_equal(e[0].key, "alice", 5);
    assert_int_equal(e[0].key_len, 5);
    assert_int_equal(e[1].count, 5);
    assert_memory_equal(e[1].key, "bob", 3);
    assert_int_equal(e[2].count, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(e[i].error, 0);
    /* the listing is bounded by max and keeps the best */
    assert_int_equal(sl_topk_list(&t, e, 1, 0), 1);
    assert_memory_equal(e[0].key, "alice", 5);
    assert_int_equal(sl_topk_list(&t, e, 0, 0), 0);
    sl_topk_free(&t);
}

static void test_heavy_hitters_under_many_keys(void **state)
{
    (void)state;
    enum { CAP = 32, N = 20000 };
    sl_topk t;
    assert_int_equal(sl_topk_init(&t, CAP, 0, 0), 0);
    /* three heavy keys (20 %, 10 %, 5 %) among 2000 light ones, interleaved */
    uint64_t heavy[3] = {0, 0, 0};
    char k[32];
    for (int i = 0; i < N; i++) {
        if (i % 5 == 0) {
            add(&t, "heavy-a", 1, 0);
            heavy[0]++;
        } else if (i % 10 == 1) {
            add(&t, "heavy-b", 1, 0);
            heavy[1]++;
        } else if (i % 20 == 2) {
            add(&t, "heavy-c", 1, 0);
            heavy[2]++;
        } else {
            snprintf(k, sizeof k, "light-%d", (i * 7919) % 2000);
            add(&t, k, 1, 0);
        }
    }
    sl_topk_entry e[CAP];
    size_t n = sl_topk_list(&t, e, CAP, 0);
    assert_int_equal(n, CAP);
    const char *names[3] = {"heavy-a", "heavy-b", "heavy-c"};
    for (int h = 0; h < 3; h++) {
        /* above N / CAP: held, ranked h, count within [true, true + error] */
        assert_true(heavy[h] > N / CAP);
        assert_int_equal(e[h].key_len, strlen(names[h]));
        assert_memory_equal(e[h].key, names[h], e[h].key_len);
        assert_true(e[h].count >= heavy[h]);
        assert_true(e[h].count - e[h].error <= heavy[h]);
    }
    /* counts add up to the stream (space-saving never loses a count) */
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += e[i].count;
    assert_int_equal(sum, N);
    sl_topk_free(&t);
}

static void test_long_keys_cut(void **state)
{
    (void)state;
    sl_topk t;
    assert_int_equal(sl_topk_init(&t, 2, 0, 0), 0);
    char a[SL_TOPK_KEY_MAX + 50], b[SL_TOPK_KEY_MAX + 10];
    memset(a, 'x', sizeof a);
    memset(b, 'x', sizeof b);
    b[sizeof b - 1] = 'y'; /* differs only past the cut: the same key */
    sl_topk_add(&t, a, sizeof a, 1, 0);
    sl_topk_add(&t, b, sizeof b, 2, 0);
    sl_topk_entry e[2];
    assert_int_equal(sl_topk_list(&t, e, 2, 0), 1);
    assert_int_equal(e[0].key_len, SL_TOPK_KEY_MAX);
    assert_int_equal(e[0].count, 3);
    sl_topk_free(&t);
}

static void test_halving_decay(void **state)
{
    (void)state;
    sl_topk t;
    assert_int_equal(sl_topk_init(&t, 4, 1000, 5000), 0);
    add(&t, "old", 8, 5000);
    add(&t, "one", 1, 5100);
    sl_topk_entry e[4];
    assert_int_equal(sl_topk_list(&t, e, 4, 5999), 2);
    assert_int_equal(e[0].count, 8);
    /* one half-life: 8 -> 4, 1 -> 0 (freed) */
    assert_int_equal(sl_topk_list(&t, e, 4, 6000), 1);
    assert_int_equal(e[0].count, 4);
    /* a new key now overtakes the old one after two more half-lives (4 -> 1) */
    add(&t, "new", 3, 8500);
    assert_int_equal(sl_topk_list(&t, e, 4, 8500), 2);
    assert_memory_equal(e[0].key, "new", 3);
    assert_int_equal(e[0].count, 3);
    assert_int_equal(e[1].count, 1);
    /* time going backwards changes nothing */
    assert_int_equal(sl_topk_list(&t, e, 4, 100), 2);
    assert_int_equal(e[0].count, 3);
    /* a long silence empties it */
    assert_int_equal(sl_topk_list(&t, e, 4, 8500 + 100 * 1000), 0);
    add(&t, "again", 1, 8500 + 100 * 1000);
    assert_int_equal(sl_topk_list(&t, e, 4, 8500 + 100 * 1000), 1);
    assert_int_equal(e[0].error, 0);
    sl_topk_free(&t);
}

static void test_no_decay(void **state)
{
    (void)state;
    sl_topk t;
    assert_int_equal(sl_topk_init(&t, 2, 0, 0), 0);
    add(&t, "k", 5, 0);
    sl_topk_entry e[2];
    assert_int_equal(sl_topk_list(&t, e, 2, INT64_MAX / 2), 1);
    assert_int_equal(e[0].count, 5);
    sl_topk_free(&t);
}

static void test_options(void **state)
{
    (void)state;
    sl_topk t;
    assert_int_equal(sl_topk_init(&t, 0, 0, 0), -EINVAL);
    assert_int_equal(sl_topk_init(&t, SL_TOPK_MAX_CAPACITY + 1, 0, 0), -EINVAL);
    assert_int_equal(sl_topk_init(&t, 4, -1, 0), -EINVAL);
    /* a failed init leaves an empty sketch that ignores adds */
    add(&t, "k", 1, 0);
    sl_topk_entry e[1];
    assert_int_equal(sl_topk_list(&t, e, 1, 0), 0);
    sl_topk_free(&t);
    assert_int_equal(sl_topk_init(&t, SL_TOPK_MAX_CAPACITY, 0, 0), 0);
    add(&t, "k", 0, 0); /* n = 0 counts nothing */
    assert_int_equal(sl_topk_list(&t, e, 1, 0), 0);
    sl_topk_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_while_it_fits),
        cmocka_unit_test(test_heavy_hitters_under_many_keys),
        cmocka_unit_test(test_long_keys_cut),
        cmocka_unit_test(test_halving_decay),
        cmocka_unit_test(test_no_decay),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* sl_strmap: insert/replace/find, tags and two-part keys, the bound, backward-shift deletion
 * checked against a plain array model under heavy churn, clone and iteration. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/strmap.h"

typedef struct val {
    double d;
    int64_t i;
} val;

static void test_basic(void **state)
{
    (void)state;
    sl_strmap m;
    sl_strmap_init(&m, sizeof(val), 0, 0);
    assert_null(sl_strmap_find(&m, 0, "a", 1));
    assert_int_equal(sl_strmap_count(&m), 0);
    val v = {1.5, 7};
    sl_strmap_ent *e;
    assert_int_equal(sl_strmap_put(&m, 1, "alpha", 5, &v, &e), 0);
    assert_string_equal(e->key, "alpha");
    assert_int_equal(((uintptr_t)sl_strmap_val(e)) % _Alignof(max_align_t), 0);
    /* the tag is part of the key */
    assert_null(sl_strmap_find(&m, 2, "alpha", 5));
    e = sl_strmap_find(&m, 1, "alpha", 5);
    assert_non_null(e);
    assert_int_equal(((val *)sl_strmap_val(e))->i, 7);
    /* replace */
    v.i = 8;
    assert_int_equal(sl_strmap_put(&m, 1, "alpha", 5, &v, NULL), 0);
    assert_int_equal(sl_strmap_count(&m), 1);
    assert_int_equal(((val *)sl_strmap_val(sl_strmap_find(&m, 1, "alpha", 5)))->i, 8);
    /* val NULL: a new entry is zeroed, an existing one kept */
    assert_int_equal(sl_strmap_put(&m, 1, "beta", 4, NULL, &e), 0);
    assert_int_equal(((val *)sl_strmap_val(e))->i, 0);
    assert_int_equal(sl_strmap_put(&m, 1, "alpha", 5, NULL, &e), 0);
    assert_int_equal(((val *)sl_strmap_val(e))->i, 8);
    /* the empty key */
    assert_int_equal(sl_strmap_put(&m, 3, "", 0, &v, NULL), 0);
    assert_non_null(sl_strmap_find(&m, 3, NULL, 0));
    assert_int_equal(sl_strmap_count(&m), 3);
    assert_true(sl_strmap_remove(&m, 1, "alpha", 5));
    assert_false(sl_strmap_remove(&m, 1, "alpha", 5));
    assert_null(sl_strmap_find(&m, 1, "alpha", 5));
    assert_non_null(sl_strmap_find(&m, 1, "beta", 4));
    assert_int_equal(sl_strmap_count(&m), 2);
    sl_strmap_clear(&m);
    assert_int_equal(sl_strmap_count(&m), 0);
    assert_null(sl_strmap_find(&m, 1, "beta", 4));
    assert_int_equal(sl_strmap_put(&m, 1, "beta", 4, &v, NULL), 0);
    sl_strmap_free(&m);
    assert_int_equal(sl_strmap_count(&m), 0);
}

static void test_two_parts(void **state)
{
    (void)state;
    sl_strmap m;
    sl_strmap_init(&m, sizeof(int), 0, 42);
    int one = 1, two = 2, three = 3;
    assert_int_equal(sl_strmap_put2(&m, 0, "ab", 2, "c", 1, &one, NULL), 0);
    assert_int_equal(sl_strmap_put2(&m, 0, "a", 1, "bc", 2, &two, NULL), 0);
    assert_int_equal(sl_strmap_put(&m, 0, "abc", 3, &three, NULL), 0);
    assert_int_equal(sl_strmap_count(&m), 3);
    sl_strmap_ent *e = sl_strmap_find2(&m, 0, "ab", 2, "c", 1);
    assert_int_equal(*(int *)sl_strmap_val(e), 1);
    assert_int_equal(e->len, 2);
    assert_int_equal(e->len2, 1);
    assert_string_equal(e->key, "abc");
    assert_int_equal(*(int *)sl_strmap_val(sl_strmap_find2(&m, 0, "a", 1, "bc", 2)), 2);
    assert_int_equal(*(int *)sl_strmap_val(sl_strmap_find(&m, 0, "abc", 3)), 3);
    assert_null(sl_strmap_find2(&m, 0, "", 0, "abc", 3));
    assert_true(sl_strmap_remove2(&m, 0, "a", 1, "bc", 2));
    assert_null(sl_strmap_find2(&m, 0, "a", 1, "bc", 2));
    assert_non_null(sl_strmap_find2(&m, 0, "ab", 2, "c", 1));
    sl_strmap_free(&m);
}

static void test_bound(void **state)
{
    (void)state;
    sl_strmap m;
    sl_strmap_init(&m, 0, 3, 0);
    char k[8];
    for (int i = 0; i < 3; i++) {
        int n = snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(sl_strmap_put(&m, 0, k, (size_t)n, NULL, NULL), 0);
    }
    assert_int_equal(sl_strmap_put(&m, 0, "k9", 2, NULL, NULL), -ENOSPC);
    /* an existing key is still updatable when full */
    assert_int_equal(sl_strmap_put(&m, 0, "k1", 2, NULL, NULL), 0);
    assert_true(sl_strmap_remove(&m, 0, "k0", 2));
    assert_int_equal(sl_strmap_put(&m, 0, "k9", 2, NULL, NULL), 0);
    sl_strmap_free(&m);
}

/* Random inserts and deletes on a small key space (long probe runs, wrap-around at the table's
 * end) against a plain array; every key's presence is checked after each step. */
static void test_churn(void **state)
{
    (void)state;
    enum { KEYS = 300, STEPS = 20000 };
    sl_strmap m;
    sl_strmap_init(&m, sizeof(int), 0, 7);
    int model[KEYS];
    for (int i = 0; i < KEYS; i++)
        model[i] = -1;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < STEPS; step++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int k = (int)(rng % KEYS);
        char key[16];
        int n = snprintf(key, sizeof key, "key-%d", k);
        if ((rng >> 32) % 3 == 0) {
            assert_int_equal(sl_strmap_remove(&m, 0, key, (size_t)n), model[k] >= 0);
            model[k] = -1;
        } else {
            assert_int_equal(sl_strmap_put(&m, 0, key, (size_t)n, &step, NULL), 0);
            model[k] = step;
        }
        if (step % 97 == 0 || step > STEPS - 50) {
            size_t count = 0;
            for (int i = 0; i < KEYS; i++) {
                n = snprintf(key, sizeof key, "key-%d", i);
                sl_strmap_ent *e = sl_strmap_find(&m, 0, key, (size_t)n);
                if (model[i] < 0) {
                    assert_null(e);
                } else {
                    assert_non_null(e);
                    assert_int_equal(*(int *)sl_strmap_val(e), model[i]);
                    count++;
                }
            }
            assert_int_equal(sl_strmap_count(&m), count);
        }
    }
    assert_true(m.cap >= 2 * sl_strmap_count(&m));
    sl_strmap_free(&m);
}

static void test_clone_iterate(void **state)
{
    (void)state;
    sl_strmap m, c;
    sl_strmap_init(&m, sizeof(int), 100, 3);
    for (int i = 0; i < 50; i++) {
        char key[16];
        int n = snprintf(key, sizeof key, "%d", i);
        assert_int_equal(sl_strmap_put2(&m, (uint32_t)(i % 3), key, (size_t)n, "/x", 2, &i, NULL),
                         0);
    }
    assert_int_equal(sl_strmap_clone(&m, &c), 0);
    /* the copy owns its keys: changing the original does not show through */
    sl_strmap_clear(&m);
    assert_int_equal(sl_strmap_count(&c), 50);
    int seen[50] = {0};
    size_t pos = 0, n = 0;
    for (sl_strmap_ent *e; (e = sl_strmap_next(&c, &pos)) != NULL; n++) {
        int v = *(int *)sl_strmap_val(e);
        assert_true(v >= 0 && v < 50);
        assert_int_equal(e->tag, (uint32_t)(v % 3));
        char want[16];
        snprintf(want, sizeof want, "%d/x", v);
        assert_string_equal(e->key, want);
        seen[v]++;
    }
    assert_int_equal(n, 50);
    for (int i = 0; i < 50; i++)
        assert_int_equal(seen[i], 1);
    assert_int_equal(c.max, 100);
    sl_strmap_free(&c);
    sl_strmap_free(&m);
    /* cloning an empty map */
    sl_strmap_init(&m, sizeof(int), 0, 0);
    assert_int_equal(sl_strmap_clone(&m, &c), 0);
    assert_int_equal(sl_strmap_count(&c), 0);
    pos = 0;
    assert_null(sl_strmap_next(&c, &pos));
    sl_strmap_free(&c);
    sl_strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_two_parts),
        cmocka_unit_test(test_bound),
        cmocka_unit_test(test_churn),
        cmocka_unit_test(test_clone_iterate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

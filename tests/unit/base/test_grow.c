/* SPDX-License-Identifier: Apache-2.0 */
/* sl_grow: growth by doubling, the minimum, no allocation while there is room, overflow of
 * len + more and of capacity * size, the cap, and a failure leaving the array as it was. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/grow.h"

typedef struct item {
    uint64_t a, b;
} item;

static void test_growth(void **state)
{
    (void)state;
    item *v = NULL;
    size_t n = 0, cap = 0;
    assert_int_equal(sl_grow(&v, &cap, n, 0, 16, 0), 0); /* no room wanted: nothing allocated */
    assert_null(v);
    assert_int_equal(cap, 0);
    for (uint64_t i = 0; i < 1000; i++) {
        assert_int_equal(sl_grow(&v, &cap, n, 1, 16, 0), 0);
        assert_true(cap > n);
        v[n++] = (item){i, ~i};
    }
    assert_int_equal(cap, 1024); /* 16 doubled six times */
    for (uint64_t i = 0; i < 1000; i++) {
        assert_int_equal(v[i].a, i);
        assert_int_equal(v[i].b, ~i);
    }
    /* room already there: the same array, the same capacity */
    item *same = v;
    assert_int_equal(sl_grow(&v, &cap, n, 24, 16, 0), 0);
    assert_ptr_equal(v, same);
    assert_int_equal(cap, 1024);
    /* many at once: doubled until they fit */
    assert_int_equal(sl_grow(&v, &cap, n, 5000, 16, 0), 0);
    assert_int_equal(cap, 8192);
    assert_int_equal(v[999].a, 999);
    free(v);
}

static void test_minimum(void **state)
{
    (void)state;
    char *p = NULL;
    size_t cap = 0;
    assert_int_equal(sl_grow(&p, &cap, 0, 1, 4096, 0), 0);
    assert_int_equal(cap, 4096);
    free(p);
    /* more than the minimum at first: the minimum doubled until it holds them */
    p = NULL;
    cap = 0;
    assert_int_equal(sl_grow(&p, &cap, 0, 5000, 4096, 0), 0);
    assert_int_equal(cap, 8192);
    free(p);
    /* no minimum: from 1 */
    p = NULL;
    cap = 0;
    assert_int_equal(sl_grow(&p, &cap, 0, 3, 0, 0), 0);
    assert_int_equal(cap, 4);
    free(p);
    /* a capacity under the minimum doubles as it is (the minimum is for an empty array) */
    int *q = malloc(3 * sizeof *q);
    assert_non_null(q);
    cap = 3;
    assert_int_equal(sl_grow(&q, &cap, 3, 1, 64, 0), 0);
    assert_int_equal(cap, 6);
    free(q);
}

static void test_cap(void **state)
{
    (void)state;
    item *v = NULL;
    size_t n = 0, cap = 0;
    /* the last doubling is cut at the cap */
    for (; n < 100; n++) {
        assert_int_equal(sl_grow(&v, &cap, n, 1, 16, 100), 0);
        assert_true(cap <= 100);
        v[n] = (item){n, n};
    }
    assert_int_equal(cap, 100);
    item *before = v;
    assert_int_equal(sl_grow(&v, &cap, n, 1, 16, 100), -E2BIG);
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 100);
    assert_int_equal(v[99].a, 99);
    /* what fits still succeeds without allocating */
    assert_int_equal(sl_grow(&v, &cap, 50, 50, 16, 100), 0);
    assert_ptr_equal(v, before);
    free(v);
    /* a cap under the minimum bounds the first allocation too */
    v = NULL;
    cap = 0;
    assert_int_equal(sl_grow(&v, &cap, 0, 1, 16, 5), 0);
    assert_int_equal(cap, 5);
    assert_int_equal(sl_grow(&v, &cap, 0, 6, 16, 5), -E2BIG);
    assert_int_equal(cap, 5);
    free(v);
    /* a bound in bytes: bytes / element size */
    v = NULL;
    cap = 0;
    assert_int_equal(sl_grow(&v, &cap, 0, 64, 16, 1024 / sizeof *v), 0);
    assert_int_equal(cap, 64);
    assert_int_equal(sl_grow(&v, &cap, 64, 1, 16, 1024 / sizeof *v), -E2BIG);
    free(v);
}

static void test_overflow(void **state)
{
    (void)state;
    item *v = NULL;
    size_t cap = 0;
    assert_int_equal(sl_grow(&v, &cap, 0, 4, 4, 0), 0);
    item *before = v;
    v[3] = (item){3, 4};
    /* capacity * size would overflow size_t: -ENOMEM before any realloc, array untouched */
    assert_int_equal(sl_grow(&v, &cap, 4, SIZE_MAX / sizeof *v, 4, 0), -ENOMEM);
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 4);
    assert_int_equal(v[3].b, 4);
    /* len + more overflows: -ENOMEM, or -E2BIG under a cap */
    assert_int_equal(sl_grow(&v, &cap, 4, SIZE_MAX - 1, 4, 0), -ENOMEM);
    assert_int_equal(sl_grow(&v, &cap, 4, SIZE_MAX - 1, 4, 100), -E2BIG);
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 4);
    /* doubling past SIZE_MAX / 2 stops at what is needed (and then overflows the size) */
    uint16_t *p = NULL;
    size_t pcap = 0;
    assert_int_equal(sl_grow(&p, &pcap, 0, SIZE_MAX / 2 + 2, 1, 0), -ENOMEM);
    assert_null(p);
    assert_int_equal(pcap, 0);
    free(v);
}

static void test_void_array(void **state)
{
    (void)state;
    /* the function itself over a void *, the element size given */
    void *p = NULL;
    size_t cap = 0;
    assert_int_equal(sl_grow_reserve(&p, &cap, 0, 10, sizeof(item), 8, 0), 0);
    assert_int_equal(cap, 16);
    memset(p, 0xab, 16 * sizeof(item));
    assert_int_equal(sl_grow_reserve(&p, &cap, 16, 1, sizeof(item), 8, 0), 0);
    assert_int_equal(cap, 32);
    assert_int_equal(((unsigned char *)p)[16 * sizeof(item) - 1], 0xab);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_minimum),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_void_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

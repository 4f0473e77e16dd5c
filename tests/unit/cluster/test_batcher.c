/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batcher timing on a virtual clock (nanoseconds): the first item of a batch sets its deadline
 * to arrival + wait and later items do not move it; a batch is due at its deadline or when it
 * holds `limit` items; a take hands out at most `limit` items, oldest first, and what is left
 * behind is due at once; wait 0 makes every batch due on arrival.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "cluster/batcher.h"

static sl_batcher_item item(uint32_t i)
{
    return (sl_batcher_item){.owner = NULL, .idx = i, .attempts = 0};
}

static void test_deadline_from_first_item(void **state)
{
    (void)state;
    sl_batcher b;
    sl_batcher_init(&b, 1000, 500000); /* 500 us */
    int64_t t = 1000000000;
    assert_int_equal(sl_batcher_deadline(&b), INT64_MAX);
    assert_false(sl_batcher_due(&b, t));
    sl_batcher_item it = item(0);
    assert_int_equal(sl_batcher_add(&b, &it, t), 0);
    assert_int_equal(sl_batcher_deadline(&b), t + 500000);
    /* a later item does not push the deadline back */
    it = item(1);
    assert_int_equal(sl_batcher_add(&b, &it, t + 400000), 0);
    assert_int_equal(sl_batcher_deadline(&b), t + 500000);
    assert_false(sl_batcher_due(&b, t + 499999));
    assert_true(sl_batcher_due(&b, t + 500000));
    sl_batcher_item out[8];
    assert_int_equal(sl_batcher_take(&b, out, 8), 2);
    assert_int_equal(out[0].idx, 0);
    assert_int_equal(out[1].idx, 1);
    assert_int_equal(sl_batcher_len(&b), 0);
    assert_int_equal(sl_batcher_deadline(&b), INT64_MAX);
    /* the next batch starts its own wait */
    it = item(2);
    assert_int_equal(sl_batcher_add(&b, &it, t + 900000), 0);
    assert_int_equal(sl_batcher_deadline(&b), t + 1400000);
    sl_batcher_free(&b);
}

static void test_full_batch_goes_at_once(void **state)
{
    (void)state;
    sl_batcher b;
    sl_batcher_init(&b, 3, 10000000);
    int64_t t = 5;
    sl_batcher_item it;
    for (uint32_t i = 0; i < 2; i++) {
        it = item(i);
        assert_int_equal(sl_batcher_add(&b, &it, t), 0);
        assert_false(sl_batcher_due(&b, t));
    }
    it = item(2);
    assert_int_equal(sl_batcher_add(&b, &it, t), 1);
    assert_true(sl_batcher_due(&b, t));
    /* more than a batch queued (the caller was late): takes give at most `limit` */
    it = item(3);
    assert_int_equal(sl_batcher_add(&b, &it, t), 1);
    sl_batcher_item out[10];
    assert_int_equal(sl_batcher_take(&b, out, 10), 3);
    assert_int_equal(out[2].idx, 2);
    assert_int_equal(sl_batcher_len(&b), 1);
    /* the one left over has waited already */
    assert_true(sl_batcher_due(&b, t));
    assert_int_equal(sl_batcher_take(&b, out, 10), 1);
    assert_int_equal(out[0].idx, 3);
    sl_batcher_free(&b);
}

static void test_zero_wait(void **state)
{
    (void)state;
    sl_batcher b;
    sl_batcher_init(&b, 1000, 0);
    sl_batcher_item it = item(7);
    assert_int_equal(sl_batcher_add(&b, &it, 42), 0);
    assert_true(sl_batcher_due(&b, 42));
    sl_batcher_free(&b);
}

static void test_many_items_grow(void **state)
{
    (void)state;
    sl_batcher b;
    sl_batcher_init(&b, 100000, 1000);
    for (uint32_t i = 0; i < 50000; i++) {
        sl_batcher_item it = item(i);
        assert_int_equal(sl_batcher_add(&b, &it, 0), 0);
    }
    static sl_batcher_item out[50000];
    assert_int_equal(sl_batcher_take(&b, out, 50000), 50000);
    for (uint32_t i = 0; i < 50000; i++)
        assert_int_equal(out[i].idx, i);
    sl_batcher_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline_from_first_item),
        cmocka_unit_test(test_full_batch_goes_at_once),
        cmocka_unit_test(test_zero_wait),
        cmocka_unit_test(test_many_items_grow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

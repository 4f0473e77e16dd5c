/* SPDX-License-Identifier: Apache-2.0 */
/* sl_timeouts: lists in deadline order, removal from head, middle and tail, the due test, and the
 * tick period. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "net/timeouts.h"

static void check_list(const sl_tlist *l, sl_tnode *const *want, int n)
{
    const sl_tnode *p = l->head, *prev = NULL;
    for (int i = 0; i < n; i++) {
        assert_ptr_equal(p, want[i]);
        assert_ptr_equal(p->prev, prev);
        prev = p;
        p = p->next;
    }
    assert_null(p);
    assert_ptr_equal(l->tail, n ? want[n - 1] : NULL);
}

static void test_append_remove(void **state)
{
    (void)state;
    sl_tlist lists[2] = {{0}};
    sl_tnode a = {.list = -1}, b = {.list = -1}, c = {.list = -1};
    sl_timeouts_remove(lists, &a); /* in none: a no-op */
    sl_timeouts_append(lists, &a, 0, 100);
    sl_timeouts_append(lists, &b, 0, 110);
    sl_timeouts_append(lists, &c, 0, 120);
    check_list(&lists[0], (sl_tnode *[]){&a, &b, &c}, 3);
    sl_timeouts_remove(lists, &b); /* middle */
    assert_int_equal(b.list, -1);
    assert_null(b.prev);
    assert_null(b.next);
    check_list(&lists[0], (sl_tnode *[]){&a, &c}, 2);
    sl_timeouts_append(lists, &b, 1, 130); /* another phase */
    assert_int_equal(b.list, 1);
    check_list(&lists[1], (sl_tnode *[]){&b}, 1);
    sl_timeouts_remove(lists, &c); /* tail */
    check_list(&lists[0], (sl_tnode *[]){&a}, 1);
    sl_timeouts_remove(lists, &a); /* head, last */
    check_list(&lists[0], NULL, 0);
    sl_timeouts_remove(lists, &b);
    check_list(&lists[1], NULL, 0);
}

static void test_due(void **state)
{
    (void)state;
    sl_tlist lists[1] = {{0}};
    sl_tnode a = {.list = -1};
    sl_timeouts_append(lists, &a, 0, 1000);
    assert_int_equal(a.stamp, 1000);
    assert_false(sl_timeouts_due(&a, 500, 1499));
    assert_true(sl_timeouts_due(&a, 500, 1500));
    assert_true(sl_timeouts_due(&a, 0, 1000));
}

static void test_tick(void **state)
{
    (void)state;
    uint32_t none[3] = {0, 0, 0};
    assert_int_equal(sl_timeouts_tick_ms(none, 3), 1000);
    uint32_t some[3] = {0, 2000, 60000};
    assert_int_equal(sl_timeouts_tick_ms(some, 3), 500);
    uint32_t tiny[2] = {8, 0};
    assert_int_equal(sl_timeouts_tick_ms(tiny, 2), 5);
    uint32_t long_only[1] = {3600000};
    assert_int_equal(sl_timeouts_tick_ms(long_only, 1), 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_remove),
        cmocka_unit_test(test_due),
        cmocka_unit_test(test_tick),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

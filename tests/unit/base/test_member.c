/* SPDX-License-Identifier: Apache-2.0 */
/* sl_member: the status names every user prints (the /metrics labels, the gossip log lines), and
 * which statuses still count as a member. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/member.h"

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(sl_member_status_name(SL_MEMBER_ALIVE), "alive");
    assert_string_equal(sl_member_status_name(SL_MEMBER_SUSPECT), "suspect");
    assert_string_equal(sl_member_status_name(SL_MEMBER_DEAD), "dead");
    assert_string_equal(sl_member_status_name(SL_MEMBER_LEFT), "left");
    assert_string_equal(sl_member_status_name((sl_member_status)SL_MEMBER_NSTATUS), "unknown");
    assert_string_equal(sl_member_status_name((sl_member_status)-1), "unknown");
}

static void test_live(void **state)
{
    (void)state;
    assert_true(sl_member_status_live(SL_MEMBER_ALIVE));
    assert_true(sl_member_status_live(SL_MEMBER_SUSPECT));
    assert_false(sl_member_status_live(SL_MEMBER_DEAD));
    assert_false(sl_member_status_live(SL_MEMBER_LEFT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The proxy's limiter topology (levee/topology.h): the static list parses (and refuses what is
 * not name=host:port, or a repeated name), every change moves the version and a no-op does not,
 * copies carry the version they belong to, removal and status changes by name, the cap, and
 * a static list read again (sync) in one step.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "levee/topology.h"

static sl_topology T;

static void test_parse(void **state)
{
    (void)state;
    sl_topology_init(&T);
    char *ok[] = {"l1=127.0.0.1:5454", "l2=[::1]:5455", "l3=limiter-3.example:80"};
    const char *bad;
    assert_int_equal(sl_topology_parse(&T, ok, 3, &bad), 0);
    assert_null(bad);
    sl_member m[8];
    uint64_t v;
    assert_int_equal(sl_topology_copy(&T, m, 8, &v), 3);
    assert_int_equal(v, sl_topology_version(&T));
    assert_string_equal(m[1].name, "l2");
    assert_string_equal(m[1].service, "[::1]:5455");
    assert_int_equal(m[2].status, SL_MEMBER_ALIVE);
    char *wrong[][1] = {{"nameless:1"}, {"=127.0.0.1:1"}, {"x=127.0.0.1"}, {"x=127.0.0.1:0"},
                        {"l1=127.0.0.1:9"}};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        assert_int_equal(sl_topology_parse(&T, wrong[i], 1, &bad), -EINVAL);
        assert_string_equal(bad, wrong[i][0]);
    }
    assert_int_equal(sl_topology_copy(&T, m, 8, &v), 3); /* nothing of the bad items stayed */
    sl_topology_destroy(&T);
}

static void test_changes_move_the_version(void **state)
{
    (void)state;
    sl_topology_init(&T);
    uint64_t v0 = sl_topology_version(&T);
    assert_int_equal(sl_topology_add(&T, "a", "127.0.0.1:1", SL_MEMBER_ALIVE), 0);
    uint64_t v1 = sl_topology_version(&T);
    assert_true(v1 > v0);
    assert_int_equal(sl_topology_set_status(&T, "a", SL_MEMBER_ALIVE), 0);
    assert_int_equal(sl_topology_version(&T), v1); /* no change, same version */
    assert_int_equal(sl_topology_set_status(&T, "a", SL_MEMBER_LEFT), 0);
    uint64_t v2 = sl_topology_version(&T);
    assert_true(v2 > v1);
    assert_int_equal(sl_topology_add(&T, "a", "127.0.0.1:2", SL_MEMBER_ALIVE), 0); /* update */
    sl_member m[4];
    uint64_t v;
    assert_int_equal(sl_topology_copy(&T, m, 4, &v), 1);
    assert_string_equal(m[0].service, "127.0.0.1:2");
    assert_int_equal(m[0].status, SL_MEMBER_ALIVE);
    assert_true(v > v2);
    assert_int_equal(sl_topology_set_status(&T, "b", SL_MEMBER_DEAD), -ENOENT);
    assert_int_equal(sl_topology_remove(&T, "b"), -ENOENT);
    assert_int_equal(sl_topology_remove(&T, "a"), 0);
    assert_int_equal(sl_topology_copy(&T, m, 4, &v), 0);
    /* a limiter is alive, leaving (left) or dead; suspect is the feed's to fold into alive */
    assert_int_equal(sl_topology_add(&T, "a", "127.0.0.1:1", SL_MEMBER_SUSPECT), -EINVAL);
    assert_int_equal(sl_topology_add(&T, "a", "127.0.0.1:1", SL_MEMBER_LEFT), 0);
    assert_int_equal(sl_topology_set_status(&T, "a", SL_MEMBER_SUSPECT), -EINVAL);
    assert_int_equal(sl_topology_set_status(&T, "a", (sl_member_status)4), -EINVAL);
    sl_topology_destroy(&T);
}

static void test_bounds(void **state)
{
    (void)state;
    sl_topology_init(&T);
    char name[SL_TOPOLOGY_MAX_NAME + 8];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    assert_int_equal(sl_topology_add(&T, name, "127.0.0.1:1", SL_MEMBER_ALIVE), -EINVAL);
    assert_int_equal(sl_topology_add(&T, "", "127.0.0.1:1", SL_MEMBER_ALIVE), -EINVAL);
    for (int i = 0; i < SL_TOPOLOGY_MAX_MEMBERS; i++) {
        snprintf(name, sizeof name, "l%d", i);
        assert_int_equal(sl_topology_add(&T, name, "127.0.0.1:1", SL_MEMBER_ALIVE), 0);
    }
    assert_int_equal(sl_topology_add(&T, "one-more", "127.0.0.1:1", SL_MEMBER_ALIVE), -ENOSPC);
    sl_topology_destroy(&T);
}

/* A static list read again: one version step for the whole change, none when it is the same,
 * nothing changed by a bad item. */
static void test_sync(void **state)
{
    (void)state;
    sl_topology_init(&T);
    char *one[] = {"a=127.0.0.1:1", "b=127.0.0.1:2"};
    char *two[] = {"b=127.0.0.1:3", "c=127.0.0.1:4"};
    char *bad_items[] = {"d=127.0.0.1:5", "oops"};
    const char *bad;
    bool changed;
    assert_int_equal(sl_topology_sync(&T, one, 2, &bad, &changed), 0);
    assert_true(changed);
    uint64_t v = sl_topology_version(&T);
    assert_int_equal(sl_topology_sync(&T, one, 2, &bad, &changed), 0);
    assert_false(changed);
    assert_int_equal(sl_topology_version(&T), v);
    assert_int_equal(sl_topology_sync(&T, two, 2, &bad, &changed), 0);
    assert_true(changed);
    assert_int_equal(sl_topology_version(&T), v + 1);
    sl_member m[4];
    uint64_t ver;
    assert_int_equal(sl_topology_copy(&T, m, 4, &ver), 2);
    assert_string_equal(m[0].name, "b");
    assert_string_equal(m[0].service, "127.0.0.1:3");
    assert_string_equal(m[1].name, "c");
    assert_int_equal(sl_topology_sync(&T, bad_items, 2, &bad, &changed), -EINVAL);
    assert_string_equal(bad, "oops");
    assert_false(changed);
    assert_int_equal(sl_topology_copy(&T, m, 4, &ver), 2);
    assert_int_equal(ver, v + 1);
    sl_topology_destroy(&T);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_changes_move_the_version),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_sync),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

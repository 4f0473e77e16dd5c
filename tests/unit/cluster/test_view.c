/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer view tests: a view finds this node's index (or -1 when it is not listed), has one health
 * slot per peer, collects the numeric peers' IPs (and leaves names out when told not to resolve),
 * answers "is this caller's address a member" and "does this certificate name a member", and is
 * freed by its last reference.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/view.h"

static struct sockaddr_in v4(const char *ip, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    return sa;
}

static void test_self_and_slots(void **state)
{
    (void)state;
    const char *addrs[] = {"10.0.0.3:1051", "10.0.0.1:1051", "10.0.0.2:1051"};
    sl_view *v = sl_view_new(SL_PICKER_KIND_RING, 64, "10.0.0.2:1051", addrs, 3, false);
    assert_non_null(v);
    assert_int_equal(v->n, 3);
    assert_true(v->self >= 0);
    assert_string_equal(sl_picker_addr(v->picker, (size_t)v->self), "10.0.0.2:1051");
    assert_int_equal(v->nips, 3);
    for (size_t i = 0; i < v->n; i++)
        assert_int_equal(atomic_load(&v->health[i].err), 0);
    sl_view_unref(v);

    v = sl_view_new(SL_PICKER_KIND_HRW, 0, "10.0.0.9:1051", addrs, 3, false);
    assert_non_null(v);
    assert_int_equal(v->self, -1);
    sl_view_unref(v);
    sl_view_unref(NULL);
}

static void test_has_ip(void **state)
{
    (void)state;
    const char *addrs[] = {"10.0.0.1:1051", "10.0.0.2:1051", "peer.invalid:1051"};
    sl_view *v = sl_view_new(SL_PICKER_KIND_RING, 64, "10.0.0.1:1051", addrs, 3, false);
    assert_non_null(v);
    assert_int_equal(v->nips, 2); /* the name is left out without resolving */
    struct sockaddr_in in = v4("10.0.0.2", 40000), out = v4("10.0.0.7", 1051);
    assert_true(sl_view_has_ip(v, (struct sockaddr *)&in)); /* any source port */
    assert_false(sl_view_has_ip(v, (struct sockaddr *)&out));
    assert_false(sl_view_has_ip(v, NULL));
    assert_false(sl_view_has_ip(NULL, (struct sockaddr *)&in));
    sl_view_unref(v);
}

static void test_names(void **state)
{
    (void)state;
    const char *addrs[] = {"a.example.com:1051", "10.0.0.2:1051"};
    sl_view *v = sl_view_new(SL_PICKER_KIND_RING, 64, "10.0.0.2:1051", addrs, 2, false);
    assert_non_null(v);
    static const char dns[] = "id\0A.Example.com\0";
    static const char ip[] = "10.0.0.2\0";
    static const char other[] = "b.example.com\0*.example.com\0";
    assert_true(sl_view_names(v, dns));
    assert_true(sl_view_names(v, ip));
    assert_false(sl_view_names(v, other));
    assert_false(sl_view_names(NULL, dns));
    sl_view_unref(v);
}

static void test_refs(void **state)
{
    (void)state;
    const char *addrs[] = {"10.0.0.1:1051"};
    sl_view *v = sl_view_new(SL_PICKER_KIND_RING, 64, "10.0.0.1:1051", addrs, 1, true);
    assert_non_null(v);
    sl_view_ref(v);
    sl_view_unref(v);
    assert_int_equal(atomic_load(&v->refs), 1); /* still alive: one reference left */
    assert_int_equal(v->n, 1);
    sl_view_unref(v); /* freed (ASan checks) */

    sl_view *e = sl_view_new(SL_PICKER_KIND_RING, 64, "10.0.0.1:1051", NULL, 0, true);
    assert_non_null(e);
    assert_int_equal(e->n, 0);
    assert_int_equal(e->self, -1);
    sl_view_unref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_and_slots),
        cmocka_unit_test(test_has_ip),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_refs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

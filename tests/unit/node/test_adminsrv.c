/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin listener's pure part (node/adminsrv.c): GET /v1/admin/top's query,
 * sl_adminsrv_top_query — the defaults, both parameters in either order, the first of a repeated
 * name, a name that only starts like a parameter, and every refusal with its 400 line. The
 * listener itself is exercised by tests/system/test_top.py and the admin system tests.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/adminsrv.h"
#include "protect/who.h"

static int query(const char *target, char *limit, bool *filter, size_t *want, const char **why)
{
    return sl_adminsrv_top_query(target, strlen(target), limit, SL_WHO_NAME_MAX + 1, filter, want,
                                 why);
}

static void test_top_query(void **state)
{
    (void)state;
    char limit[SL_WHO_NAME_MAX + 1];
    bool filter;
    size_t want;
    const char *why;
    static const struct {
        const char *target;
        bool filter;
        const char *limit;
        size_t want;
    } ok[] = {
        {"/v1/admin/top", false, "", 10},
        {"/v1/admin/top?", false, "", 10},
        {"/v1/admin/top?limit=dark-launch&n=1", true, "dark-launch", 1},
        {"/v1/admin/top?n=1000&limit=a", true, "a", 1000},
        {"/v1/admin/top?limit=a&limit=b", true, "a", 10},
        {"/v1/admin/top?limitx=a&nn=5", false, "", 10},
        {"/v1/admin/top?&&limit=&", true, "", 10},
        {"/v1/admin/top?limit=%2Fapi", true, "%2Fapi", 10}, /* raw: no percent-decoding */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(query(ok[i].target, limit, &filter, &want, &why), 0);
        assert_int_equal(filter, ok[i].filter);
        assert_string_equal(limit, ok[i].limit);
        assert_int_equal(want, ok[i].want);
    }
    char long_limit[200];
    snprintf(long_limit, sizeof long_limit, "/v1/admin/top?limit=%0*d", SL_WHO_NAME_MAX + 1, 0);
    static const char *const bad_n[] = {"/v1/admin/top?n=0", "/v1/admin/top?n=",
                                        "/v1/admin/top?n=1001", "/v1/admin/top?n=5x",
                                        "/v1/admin/top?n=-1", "/v1/admin/top?n=12345678"};
    for (size_t i = 0; i < sizeof bad_n / sizeof bad_n[0]; i++) {
        assert_int_equal(query(bad_n[i], limit, &filter, &want, &why), -EINVAL);
        assert_string_equal(why, "n: 1..1000\n");
    }
    assert_int_equal(query(long_limit, limit, &filter, &want, &why), -EINVAL);
    assert_string_equal(why, "limit: too long\n");
    /* the longest limit that fits */
    long_limit[strlen(long_limit) - 1] = 0;
    assert_int_equal(query(long_limit, limit, &filter, &want, &why), 0);
    assert_int_equal(strlen(limit), SL_WHO_NAME_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

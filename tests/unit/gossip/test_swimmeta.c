/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimmeta tests: pairs written are read back; a missing key, a key that is only a prefix of
 * another, a value too long for the caller's buffer, a blob without its final newline, and keys or
 * values that would break the format are all handled.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gossip/swimmeta.h"

static void test_put_get(void **state)
{
    uint8_t b[64];
    int n = sl_swimmeta_put(b, sizeof b, 0, "service", "10.0.0.1:1051");
    assert_true(n > 0);
    n = sl_swimmeta_put(b, sizeof b, (size_t)n, "role", "limiter");
    assert_true(n > 0);
    char v[32];
    assert_int_equal(sl_swimmeta_get(b, (size_t)n, "service", v, sizeof v), 13);
    assert_string_equal(v, "10.0.0.1:1051");
    assert_int_equal(sl_swimmeta_get(b, (size_t)n, "role", v, sizeof v), 7);
    assert_string_equal(v, "limiter");
    assert_int_equal(sl_swimmeta_get(b, (size_t)n, "rol", v, sizeof v), -ENOENT);
    assert_int_equal(sl_swimmeta_get(b, (size_t)n, "service", v, 5), -EMSGSIZE);
    /* the last line without its newline still reads */
    assert_int_equal(sl_swimmeta_get(b, (size_t)n - 1, "role", v, sizeof v), 7);
    assert_int_equal(sl_swimmeta_get(b, 0, "role", v, sizeof v), -ENOENT);
    assert_int_equal(sl_swimmeta_put(b, sizeof b, 0, "a=b", "c"), -EINVAL);
    assert_int_equal(sl_swimmeta_put(b, sizeof b, 0, "", "c"), -EINVAL);
    assert_int_equal(sl_swimmeta_put(b, sizeof b, 0, "a", "c\nd"), -EINVAL);
    assert_int_equal(sl_swimmeta_put(b, 8, 0, "service", "x"), -EMSGSIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_put_get)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

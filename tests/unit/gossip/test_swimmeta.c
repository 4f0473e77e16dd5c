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

/* What gossip takes from the network: numeric ip:port services, known roles, bounded sizes. */
static void test_check(void **state)
{
    const char *why;
    const char *good[] = {"", "service=10.0.0.1:1051\nrole=limiter\n", "service=[::1]:1051",
                          "role=observer", "zone=eu-1\nservice=127.0.0.1:65535\n"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        assert_int_equal(sl_swimmeta_check((const uint8_t *)good[i], strlen(good[i]), &why), 0);
    const char *bad[] = {"service=127.0.0.1:19999x", "service=evil.example:1051",
                         "service=10.0.0.1:0", "service=10.0.0.1:65536", "service=10.0.0.1",
                         "service=::1:1051", "service=[10.0.0.1]:1", "role=admin",
                         "role=limiter\nrole=proxy", "service=1.2.3.4:1\nservice=1.2.3.4:2",
                         "zone=a\nzone=b", "novalue", "=x", "Key=1", "k=\t", "k=\x7f"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        why = NULL;
        assert_int_equal(sl_swimmeta_check((const uint8_t *)bad[i], strlen(bad[i]), &why),
                         -EINVAL);
        assert_non_null(why);
    }
    char longv[200] = "k=";
    memset(longv + 2, 'v', 129);
    longv[131] = '\0';
    assert_int_equal(sl_swimmeta_check((const uint8_t *)longv, strlen(longv), &why), -EINVAL);
    /* an address is judged on all its bytes: a NUL inside does not end it (found by
     * fuzz_swimmeta: "[f::1]:7\0...\0" "96" passed as [f::1]:7) */
    const char nul[] = "[f::1]:7\0\0\0" "96";
    assert_int_equal(sl_swimmeta_check_addr(nul, sizeof nul - 1), -EINVAL);
    assert_int_equal(sl_swimmeta_check_addr("[f::1]:7", 8), 0);
    assert_int_equal(sl_swimmeta_check_member("10.0.0.1:7946", 13, NULL, 0, &why), 0);
    assert_int_equal(sl_swimmeta_check_member("node-1:7946", 11, NULL, 0, &why), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_put_get),
                                       cmocka_unit_test(test_check)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

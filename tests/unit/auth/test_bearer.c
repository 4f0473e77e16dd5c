/* SPDX-License-Identifier: Apache-2.0 */
/* sl_bearer: the token out of Authorization, a token file's secret, the constant-time compare. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth/bearer.h"

static int hdr(const char *v, char *out)
{
    const char *t;
    size_t n;
    int rc = sl_bearer_from_header(v, strlen(v), &t, &n);
    if (!rc) {
        memcpy(out, t, n);
        out[n] = 0;
    }
    return rc;
}

static void test_header(void **state)
{
    (void)state;
    char t[600];
    assert_int_equal(hdr("Bearer abc.DEF-123", t), 0);
    assert_string_equal(t, "abc.DEF-123");
    assert_int_equal(hdr("bearer   tok  ", t), 0);
    assert_string_equal(t, "tok");
    assert_int_equal(hdr("BEARER\ttok", t), 0);
    assert_string_equal(t, "tok");
    assert_int_equal(hdr("Basic dXNlcjpwYXNz", t), -EINVAL);
    assert_int_equal(hdr("Bearer", t), -EINVAL);
    assert_int_equal(hdr("Bearer ", t), -EINVAL);
    assert_int_equal(hdr("Bearertok", t), -EINVAL);
    assert_int_equal(hdr("Bearer a b", t), -EINVAL);
    assert_int_equal(hdr("Bearer a\x01", t), -EINVAL);
    assert_int_equal(hdr("Bearer caf\xc3\xa9", t), -EINVAL);
    assert_int_equal(sl_bearer_from_header(NULL, 0, NULL, NULL), -EINVAL);
    char big[SL_BEARER_MAX_LEN + 16] = "Bearer ";
    memset(big + 7, 'a', SL_BEARER_MAX_LEN);
    big[7 + SL_BEARER_MAX_LEN] = 0;
    assert_int_equal(hdr(big, t), 0);
    assert_int_equal(strlen(t), SL_BEARER_MAX_LEN);
    big[7 + SL_BEARER_MAX_LEN] = 'a';
    big[8 + SL_BEARER_MAX_LEN] = 0;
    assert_int_equal(hdr(big, t), -EINVAL);
}

static void test_secret(void **state)
{
    (void)state;
    const char *t, *why = NULL;
    size_t n;
    const char f[] = "  0123456789abcdef-xyz\n";
    assert_int_equal(sl_bearer_parse_secret(f, sizeof f - 1, &t, &n, &why), 0);
    assert_int_equal(n, 20);
    assert_memory_equal(t, "0123456789abcdef-xyz", 20);
    assert_int_equal(sl_bearer_parse_secret("short\n", 6, &t, &n, &why), -EINVAL);
    assert_string_equal(why, "token shorter than 16 bytes");
    const char two[] = "0123456789abcdef 0123456789abcdef\n";
    assert_int_equal(sl_bearer_parse_secret(two, sizeof two - 1, &t, &n, &why), -EINVAL);
    assert_int_equal(sl_bearer_parse_secret("\n\n", 2, &t, &n, &why), -EINVAL);
    assert_int_equal(sl_bearer_parse_secret("", 0, &t, &n, &why), -EINVAL);
}

static void test_equal(void **state)
{
    (void)state;
    assert_true(sl_bearer_equal("abcdef", 6, "abcdef", 6));
    assert_false(sl_bearer_equal("abcdeX", 6, "abcdef", 6));
    assert_false(sl_bearer_equal("Xbcdef", 6, "abcdef", 6));
    assert_false(sl_bearer_equal("abcde", 5, "abcdef", 6));
    assert_false(sl_bearer_equal("abcdefg", 7, "abcdef", 6));
    assert_false(sl_bearer_equal("", 0, "abcdef", 6));
    /* a presented token padded with NULs to the secret's length is still different */
    assert_false(sl_bearer_equal("abc\0\0\0", 6, "abc", 3));
    assert_true(sl_bearer_equal("", 0, "", 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header),
        cmocka_unit_test(test_secret),
        cmocka_unit_test(test_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

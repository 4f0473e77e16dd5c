/* SPDX-License-Identifier: Apache-2.0 */
/* sl_hex: digit values, byte pairs, fixed-width parse and format. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/hex.h"

static void test_val(void **state)
{
    (void)state;
    const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        assert_int_equal(sl_hex_val(digits[i]), i);
        if (i >= 10)
            assert_int_equal(sl_hex_val(digits[i] - 'a' + 'A'), i);
    }
    int bad = 0;
    for (int c = 0; c < 256; c++)
        bad += sl_hex_val(c) < 0;
    assert_int_equal(bad, 256 - 22);
    assert_int_equal(sl_hex_val('g'), -1);
    assert_int_equal(sl_hex_val('/'), -1);
    assert_int_equal(sl_hex_val(':'), -1);
    assert_int_equal(sl_hex_val(0xe9), -1);
}

static void test_byte_parse(void **state)
{
    (void)state;
    assert_int_equal(sl_hex_byte("00"), 0);
    assert_int_equal(sl_hex_byte("fF"), 255);
    assert_int_equal(sl_hex_byte("2a"), 42);
    assert_int_equal(sl_hex_byte("2g"), -1);
    assert_int_equal(sl_hex_byte("x2"), -1);
    uint64_t v = 7;
    assert_int_equal(sl_hex_parse("d83D", 4, &v), 0);
    assert_int_equal(v, 0xd83d);
    assert_int_equal(sl_hex_parse("ffffffffffffffff", 16, &v), 0);
    assert_int_equal(v, UINT64_MAX);
    v = 7;
    assert_int_equal(sl_hex_parse("12x4", 4, &v), -EINVAL);
    assert_int_equal(v, 7);
    assert_int_equal(sl_hex_parse("1", 0, &v), -EINVAL);
    assert_int_equal(sl_hex_parse("00000000000000000", 17, &v), -EINVAL);
}

static void test_format(void **state)
{
    (void)state;
    char two[2];
    sl_hex_put(two, 0xa5, false);
    assert_memory_equal(two, "a5", 2);
    sl_hex_put(two, 0x0f, true);
    assert_memory_equal(two, "0F", 2);
    assert_int_equal(sl_hex_digit(0x1c, true), 'C');
    char out[17];
    assert_int_equal(sl_hex_format(0xbeef, 8, false, out), 8);
    assert_string_equal(out, "0000beef");
    assert_int_equal(sl_hex_format(0x123456, 4, true, out), 4);
    assert_string_equal(out, "3456");
    assert_int_equal(sl_hex_format(UINT64_MAX, 16, true, out), 16);
    assert_string_equal(out, "FFFFFFFFFFFFFFFF");
    uint64_t back;
    assert_int_equal(sl_hex_parse(out, 16, &back), 0);
    assert_int_equal(back, UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_val),
        cmocka_unit_test(test_byte_parse),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

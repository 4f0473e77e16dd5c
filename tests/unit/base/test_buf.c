/* SPDX-License-Identifier: Apache-2.0 */
/* sl_buf: growth, the cap, printf, consume. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/buf.h"

static void test_append_grow(void **state)
{
    (void)state;
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(b.cap, SL_BUF_DEFAULT_CAP);
    assert_int_equal(sl_buf_append(&b, "", 0), 0);
    assert_int_equal(b.len, 0);
    char chunk[100];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 50; i++)
        assert_int_equal(sl_buf_append(&b, chunk, sizeof chunk), 0);
    assert_int_equal(b.len, 5000);
    assert_true(b.alloc >= 5000);
    assert_int_equal(b.data[4999], 'x');
    assert_int_equal(sl_buf_append_str(&b, "yz"), 0);
    assert_memory_equal(b.data + 5000, "yz", 2);
    sl_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_true(b.alloc >= 5002);
    sl_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.alloc, 0);
}

static void test_cap(void **state)
{
    (void)state;
    sl_buf b;
    sl_buf_init(&b, 10);
    assert_int_equal(sl_buf_append(&b, "0123456789", 10), 0);
    assert_int_equal(sl_buf_append(&b, "a", 1), -EMSGSIZE);
    assert_int_equal(b.len, 10);
    assert_true(b.alloc <= 10);
    assert_int_equal(sl_buf_reserve(&b, SIZE_MAX), -EMSGSIZE);
    sl_buf_free(&b);
}

static void test_printf_consume(void **state)
{
    (void)state;
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_buf_printf(&b, "%d-%s", 42, "ab"), 0);
    assert_int_equal(b.len, 5);
    assert_memory_equal(b.data, "42-ab", 5);
    /* longer than the function's stack buffer */
    char big[600];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(sl_buf_printf(&b, "[%s]", big), 0);
    assert_int_equal(b.len, 5 + 601);
    assert_int_equal(b.data[5], '[');
    assert_int_equal(b.data[b.len - 1], ']');
    sl_buf_consume(&b, 3);
    assert_memory_equal(b.data, "ab[", 3);
    assert_int_equal(b.len, 603);
    sl_buf_consume(&b, 10000);
    assert_int_equal(b.len, 0);
    sl_buf_free(&b);

    sl_buf_init(&b, 8);
    assert_int_equal(sl_buf_printf(&b, "%s", big), -EMSGSIZE);
    assert_int_equal(b.len, 0);
    sl_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_append_grow),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_printf_consume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* sl_strbuf: appends, printf past the stack buffer, the sticky cap error, fixed storage, take. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/strbuf.h"

static void test_build(void **state)
{
    (void)state;
    sl_strbuf s;
    sl_strbuf_init(&s, 0);
    assert_string_equal(sl_strbuf_str(&s), "");
    assert_int_equal(sl_strbuf_len(&s), 0);
    assert_int_equal(sl_strbuf_puts(&s, "a="), 0);
    assert_int_equal(sl_strbuf_printf(&s, "%d", 12), 0);
    assert_int_equal(sl_strbuf_putc(&s, ';'), 0);
    assert_int_equal(sl_strbuf_append(&s, "xyz", 2), 0);
    assert_string_equal(sl_strbuf_str(&s), "a=12;xy");
    assert_int_equal(sl_strbuf_len(&s), 7);
    char big[1000];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(sl_strbuf_printf(&s, "<%s>", big), 0);
    assert_int_equal(sl_strbuf_len(&s), 7 + 1001);
    assert_int_equal(strlen(sl_strbuf_str(&s)), 7 + 1001);
    sl_strbuf_truncate(&s, 4);
    assert_string_equal(sl_strbuf_str(&s), "a=12");
    sl_strbuf_truncate(&s, 99);
    assert_string_equal(sl_strbuf_str(&s), "a=12");
    char *text;
    size_t len;
    assert_int_equal(sl_strbuf_take(&s, &text, &len), 0);
    assert_string_equal(text, "a=12");
    assert_int_equal(len, 4);
    free(text);
    assert_int_equal(sl_strbuf_len(&s), 0);
    /* an empty builder hands over "" */
    assert_int_equal(sl_strbuf_take(&s, &text, NULL), 0);
    assert_string_equal(text, "");
    free(text);
    sl_strbuf_free(&s);
}

static void test_cap_sticky(void **state)
{
    (void)state;
    sl_strbuf s;
    sl_strbuf_init(&s, 8); /* 7 characters and the NUL */
    assert_int_equal(sl_strbuf_puts(&s, "1234567"), 0);
    assert_int_equal(sl_strbuf_putc(&s, '8'), -EMSGSIZE);
    assert_int_equal(sl_strbuf_error(&s), -EMSGSIZE);
    /* sticky: even what would fit now fails, and the text is unchanged */
    sl_strbuf_truncate(&s, 1);
    assert_int_equal(sl_strbuf_puts(&s, "x"), -EMSGSIZE);
    assert_int_equal(sl_strbuf_printf(&s, "%s", "y"), -EMSGSIZE);
    assert_string_equal(sl_strbuf_str(&s), "1");
    char *text = (char *)"untouched";
    assert_int_equal(sl_strbuf_take(&s, &text, NULL), -EMSGSIZE);
    assert_string_equal(text, "untouched");
    /* take emptied it and cleared the error */
    assert_int_equal(sl_strbuf_error(&s), 0);
    assert_int_equal(sl_strbuf_puts(&s, "ok"), 0);
    sl_strbuf_reset(&s);
    assert_string_equal(sl_strbuf_str(&s), "");
    assert_int_equal(sl_strbuf_printf(&s, "%s", "123456789"), -EMSGSIZE);
    sl_strbuf_free(&s);
}

static void test_fixed(void **state)
{
    (void)state;
    char mem[6];
    sl_strbuf s;
    sl_strbuf_init_fixed(&s, mem, sizeof mem);
    assert_string_equal(sl_strbuf_str(&s), "");
    assert_int_equal(sl_strbuf_printf(&s, "%s", "ab"), 0);
    assert_ptr_equal(sl_strbuf_str(&s), mem);
    assert_int_equal(sl_strbuf_puts(&s, "cde"), 0);
    assert_string_equal(mem, "abcde");
    assert_int_equal(sl_strbuf_putc(&s, 'f'), -EMSGSIZE);
    assert_string_equal(mem, "abcde");
    /* a failed append changed nothing; after clearing the error, what fits goes in */
    sl_strbuf_truncate(&s, 3);
    assert_int_equal(sl_strbuf_printf(&s, "%s", "xyz"), -EMSGSIZE);
    assert_string_equal(mem, "abc");
    sl_strbuf_clear_error(&s);
    assert_int_equal(sl_strbuf_error(&s), 0);
    assert_int_equal(sl_strbuf_printf(&s, "%d", 7), 0);
    assert_string_equal(mem, "abc7");
    sl_strbuf_reset(&s);
    assert_int_equal(sl_strbuf_puts(&s, "q"), 0);
    char *text;
    assert_int_equal(sl_strbuf_take(&s, &text, NULL), 0);
    assert_string_equal(text, "q");
    assert_ptr_not_equal(text, mem);
    free(text);
    sl_strbuf_free(&s); /* leaves mem alone */

    sl_strbuf_init_fixed(&s, mem, 0);
    assert_string_equal(sl_strbuf_str(&s), "");
    assert_int_equal(sl_strbuf_puts(&s, ""), -EMSGSIZE);
    sl_strbuf_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_cap_sticky),
        cmocka_unit_test(test_fixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* sl_utf8: sequence lengths, the strict rules (overlong, surrogates, range), spans. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/utf8.h"

#define SEQ(s) sl_utf8_seq((const uint8_t *)(s), sizeof(s) - 1)

static void test_seq(void **state)
{
    (void)state;
    assert_int_equal(SEQ("a"), 1);
    assert_int_equal(SEQ("\x7f"), 1);
    assert_int_equal(SEQ("\xc2\x80"), 2);      /* U+0080 */
    assert_int_equal(SEQ("\xdf\xbf"), 2);      /* U+07FF */
    assert_int_equal(SEQ("\xe0\xa0\x80"), 3);  /* U+0800 */
    assert_int_equal(SEQ("\xe2\x82\xac"), 3);  /* euro sign */
    assert_int_equal(SEQ("\xed\x9f\xbf"), 3);  /* U+D7FF */
    assert_int_equal(SEQ("\xee\x80\x80"), 3);  /* U+E000 */
    assert_int_equal(SEQ("\xf0\x90\x80\x80"), 4);
    assert_int_equal(SEQ("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF */
    /* only the first sequence counts */
    assert_int_equal(SEQ("\xc3\xa9xyz"), 2);
}

static void test_seq_invalid(void **state)
{
    (void)state;
    assert_int_equal(SEQ("\x80"), 0);             /* lone continuation */
    assert_int_equal(SEQ("\xc0\x80"), 0);         /* overlong NUL */
    assert_int_equal(SEQ("\xc1\xbf"), 0);         /* overlong */
    assert_int_equal(SEQ("\xe0\x9f\xbf"), 0);     /* overlong 3-byte */
    assert_int_equal(SEQ("\xed\xa0\x80"), 0);     /* surrogate U+D800 */
    assert_int_equal(SEQ("\xed\xbf\xbf"), 0);     /* surrogate U+DFFF */
    assert_int_equal(SEQ("\xf0\x8f\xbf\xbf"), 0); /* overlong 4-byte */
    assert_int_equal(SEQ("\xf4\x90\x80\x80"), 0); /* above U+10FFFF */
    assert_int_equal(SEQ("\xf5\x80\x80\x80"), 0);
    assert_int_equal(SEQ("\xff"), 0);
    assert_int_equal(SEQ("\xc3\x28"), 0);         /* bad continuation */
    assert_int_equal(SEQ("\xe2\x82"), 0);         /* truncated */
    assert_int_equal(SEQ("\xf0\x90\x80"), 0);     /* truncated */
    /* n bounds the read even when more bytes follow in memory */
    assert_int_equal(sl_utf8_seq((const uint8_t *)"\xc3\xa9", 1), 0);
}

static void test_span(void **state)
{
    (void)state;
    assert_true(sl_utf8_valid("", 0));
    assert_true(sl_utf8_valid("plain ascii", 11));
    const char ok[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    assert_true(sl_utf8_valid(ok, sizeof ok - 1));
    assert_int_equal(sl_utf8_valid_prefix(ok, sizeof ok - 1), sizeof ok - 1);
    const char bad[] = "ab\xc3\xa9\xed\xa0\x80z";
    assert_false(sl_utf8_valid(bad, sizeof bad - 1));
    assert_int_equal(sl_utf8_valid_prefix(bad, sizeof bad - 1), 4);
    /* a sequence cut by the span's end */
    assert_false(sl_utf8_valid(ok, 4));
    assert_int_equal(sl_utf8_valid_prefix(ok, 4), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seq),
        cmocka_unit_test(test_seq_invalid),
        cmocka_unit_test(test_span),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lease id codec (protect/leaseid.c): the forms with and without a resource, percent-encoding,
 * the length limit past which the resource is left out, blanks, and every malformed id.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "protect/leaseid.h"

#define M(s) (s), strlen(s)

static void test_format(void **state)
{
    (void)state;
    char out[SL_LEASEID_MAX + 8];
    assert_int_equal(sl_leaseid_format(out, sizeof out, 0x1f, 0, M("search")), 40);
    assert_string_equal(out, "000000000000001f.0000000000000000.search");
    assert_int_equal(sl_leaseid_format(out, sizeof out, 1, 2, NULL, 0), 33);
    assert_string_equal(out, "0000000000000001.0000000000000002");
    /* no concurrency lease: the resource is not needed */
    sl_leaseid_format(out, sizeof out, 0, 2, M("search"));
    assert_string_equal(out, "0000000000000000.0000000000000002");
    /* odd bytes are percent-encoded, upper case */
    sl_leaseid_format(out, sizeof out, 1, 0, "a b.c%\xff", 7);
    assert_string_equal(out, "0000000000000001.0000000000000000.a%20b%2Ec%25%FF");
    /* past SL_LEASEID_MAX the resource is left out */
    char big[200];
    memset(big, 'r', sizeof big);
    assert_int_equal(sl_leaseid_format(out, sizeof out, 1, 0, big, 86), SL_LEASEID_MAX);
    assert_int_equal(sl_leaseid_format(out, sizeof out, 1, 0, big, 87), 33);
    /* a small buffer takes the pair */
    char pair[SL_LEASEID_PAIR_SIZE];
    assert_int_equal(sl_leaseid_format(pair, sizeof pair, 1, 2, M("x")), 33);
    assert_string_equal(pair, "0000000000000001.0000000000000002");
}

static void test_parse(void **state)
{
    (void)state;
    uint64_t c, f;
    char res[64];
    size_t rl;
    assert_int_equal(sl_leaseid_parse(M(" 000000000000001f.0000000000000002.a%20b%2ec \t"), &c, &f,
                                      res, sizeof res, &rl), 0);
    assert_int_equal(c, 0x1f);
    assert_int_equal(f, 2);
    assert_int_equal(rl, 5);
    assert_memory_equal(res, "a b.c", 5);
    assert_int_equal(sl_leaseid_parse(M("00000000000000aB"), &c, &f, res, sizeof res, &rl), 0);
    assert_int_equal(c, 0xab);
    assert_int_equal(f, 0);
    assert_int_equal(rl, 0);
    assert_int_equal(sl_leaseid_parse(M("0000000000000000.0000000000000009"), &c, &f, res,
                                      sizeof res, &rl), 0);
    assert_int_equal(c, 0);
    assert_int_equal(f, 9);
    /* round trip */
    char out[SL_LEASEID_MAX + 8];
    size_t n = sl_leaseid_format(out, sizeof out, 77, 78, "k/\x01:", 4);
    assert_int_equal(sl_leaseid_parse(out, n, &c, &f, res, sizeof res, &rl), 0);
    assert_int_equal(c, 77);
    assert_int_equal(f, 78);
    assert_int_equal(rl, 4);
    assert_memory_equal(res, "k/\x01:", 4);
    uint64_t one;
    assert_int_equal(sl_leaseid_parse_one("0000000000000000", &one), 0);
    assert_int_equal(one, 0);
    assert_int_equal(sl_leaseid_parse_one("00000000000000zz", &one), -EINVAL);
}

static void test_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "xyz",
        "0000000000000000",                                   /* no lease at all */
        "0000000000000000.0000000000000000",                  /* neither */
        "00000000000000010000000000000000",                   /* no dot */
        "0000000000000001.000000000000000",                   /* short fleet id */
        "0000000000000001.0000000000000000.",                 /* empty resource */
        "0000000000000001.0000000000000000x",                 /* no dot before the resource */
        "0000000000000000.0000000000000001.res",              /* a resource without a lease */
        "0000000000000001.0000000000000000.a%2",              /* cut escape */
        "0000000000000001.0000000000000000.a%g0",             /* not hex */
        "0000000000000001.0000000000000000.a b",              /* a blank inside */
        "000000000000000g",
    };
    uint64_t c, f;
    char res[64];
    size_t rl;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (sl_leaseid_parse(M(bad[i]), &c, &f, res, sizeof res, &rl) != -EINVAL)
            fail_msg("accepted '%s'", bad[i]);
    /* a resource longer than the caller's room */
    assert_int_equal(sl_leaseid_parse(M("0000000000000001.0000000000000000.abcd"), &c, &f, res, 3,
                                      &rl), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

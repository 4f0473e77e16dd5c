/* SPDX-License-Identifier: Apache-2.0 */
/* sl_idents: the tokens file format, its bounds and errors, lookup by token and by certificate
 * name, prefix matching. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/idents.h"

static const char good[] = "# clients\n"
                           "\n"
                           "tok-alpha-0123456789abcdef  alpha  alpha_,shared_\r\n"
                           "\ttok-beta-0123456789abcdef\tbeta\tbeta_   \n"
                           "tok-root-0123456789abcdef ops *";

static int parse(const char *text, sl_idents **s, char *err)
{
    return sl_idents_parse(text, strlen(text), s, err, 200);
}

static void test_parse_and_find(void **state)
{
    (void)state;
    sl_idents *s;
    char err[200];
    assert_int_equal(parse(good, &s, err), 0);
    assert_int_equal(sl_idents_count(s), 3);
    const sl_ident *a = sl_idents_find(s, "tok-alpha-0123456789abcdef", 26);
    assert_non_null(a);
    assert_string_equal(sl_ident_name(a), "alpha");
    assert_true(sl_ident_allows(a, "alpha_x", 7));
    assert_true(sl_ident_allows(a, "alpha_", 6));
    assert_true(sl_ident_allows(a, "shared_1", 8));
    assert_false(sl_ident_allows(a, "alpha", 5));
    assert_false(sl_ident_allows(a, "beta_x", 6));
    assert_false(sl_ident_allows(a, "", 0));
    const sl_ident *b = sl_idents_find(s, "tok-beta-0123456789abcdef", 25);
    assert_non_null(b);
    assert_string_equal(sl_ident_name(b), "beta");
    assert_true(sl_ident_allows(b, "beta_", 5));
    const sl_ident *r = sl_idents_find(s, "tok-root-0123456789abcdef", 25);
    assert_non_null(r);
    assert_true(sl_ident_allows(r, "anything", 8));
    assert_true(sl_ident_allows(r, "", 0));
    /* near misses */
    assert_null(sl_idents_find(s, "tok-alpha-0123456789abcdeX", 26));
    assert_null(sl_idents_find(s, "tok-alpha-0123456789abcde", 25));
    assert_null(sl_idents_find(s, "", 0));
    sl_idents_free(s);
}

static void expect_error(const char *text, const char *msg)
{
    sl_idents *s = (sl_idents *)1;
    char err[200] = "";
    assert_int_equal(parse(text, &s, err), -EINVAL);
    assert_null(s);
    if (!strstr(err, msg))
        fail_msg("'%s' does not contain '%s'", err, msg);
    assert_null(strstr(err, "0123456789abcdef")); /* never the token */
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("", "no identity");
    expect_error("# only a comment\n", "no identity");
    expect_error("short name p\n", "line 1: a token must be 16..512 bytes");
    expect_error("tok-0123456789abcdef name\n", "line 1: expected <token> <name>");
    expect_error("tok-0123456789abcdef\n", "line 1: expected");
    expect_error("\ntok-0123456789abcdef n p extra\n", "line 2: unexpected text");
    expect_error("tok-0123456789abcdef na/me p\n", "a name is [A-Za-z0-9_.:-]");
    expect_error("tok-0123456789abcdef n a,,b\n", "a prefix must be 1..256 bytes");
    expect_error("tok-0123456789abcdef n a,\n", "a prefix must be 1..256 bytes");
    expect_error("tok-0123456789abcdef n \x01\n", "a prefix is visible ASCII only");
    expect_error("tok-0123456789abc\x7f" "def n p\n", "visible ASCII");
    expect_error("tok-0123456789abcdef a p\ntok-0123456789abcdef b q\n", "the same token");
    char nul[] = "tok-0123456789abcdef n p\0x\n";
    sl_idents *s;
    char err[200];
    assert_int_equal(sl_idents_parse(nul, sizeof nul - 1, &s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "NUL"));
}

static void test_bounds(void **state)
{
    (void)state;
    char err[200];
    sl_idents *s;
    /* 64 prefixes are fine, 65 are not */
    char line[4096];
    int k = snprintf(line, sizeof line, "tok-0123456789abcdef n ");
    for (int i = 0; i < 65; i++)
        k += snprintf(line + k, sizeof line - (size_t)k, "%sp%d", i ? "," : "", i);
    assert_int_equal(parse(line, &s, err), -EINVAL);
    assert_non_null(strstr(err, "more than 64 prefixes"));
    char *comma = strrchr(line, ',');
    *comma = '\0';
    assert_int_equal(parse(line, &s, err), 0);
    sl_idents_free(s);
    /* a name of 129 bytes */
    char name[200];
    memset(name, 'n', 129);
    name[129] = 0;
    snprintf(line, sizeof line, "tok-0123456789abcdef %s p", name);
    assert_int_equal(parse(line, &s, err), -EINVAL);
    /* a file over the cap is refused before parsing */
    assert_int_equal(sl_idents_parse("x", SL_IDENTS_MAX_FILE + 1, &s, err, sizeof err), -EFBIG);
    /* many identities, each found */
    size_t n = 2000, cap = n * 64;
    char *big = malloc(cap);
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(big + off, cap - off, "token-%016zu id%zu p%zu_\n", i, i, i);
    assert_int_equal(sl_idents_parse(big, off, &s, err, sizeof err), 0);
    assert_int_equal(sl_idents_count(s), n);
    for (size_t i = 0; i < n; i += 97) {
        char t[40], want[40];
        snprintf(t, sizeof t, "token-%016zu", i);
        snprintf(want, sizeof want, "id%zu", i);
        const sl_ident *id = sl_idents_find(s, t, strlen(t));
        assert_non_null(id);
        assert_string_equal(sl_ident_name(id), want);
    }
    sl_idents_free(s);
    free(big);
}

/* "cert:<name>" lines: found by the certificate's name, never by a bearer token, and back. */
static void test_cert_identities(void **state)
{
    (void)state;
    static const char text[] = "tok-alpha-0123456789abcdef alpha alpha_\n"
                               "cert:client.test  viacert  cert_,shared_\n"
                               "cert:svc  short  s_\n";
    sl_idents *s;
    char err[200];
    assert_int_equal(parse(text, &s, err), 0);
    assert_int_equal(sl_idents_count(s), 3);
    const sl_ident *c = sl_idents_find_cert(s, "client.test", 11);
    assert_non_null(c);
    assert_string_equal(sl_ident_name(c), "viacert");
    assert_true(sl_ident_allows(c, "cert_x", 6));
    assert_false(sl_ident_allows(c, "alpha_x", 7));
    /* a certificate name may be short: it is not a secret */
    assert_non_null(sl_idents_find_cert(s, "svc", 3));
    /* byte for byte: another case or a prefix is another name */
    assert_null(sl_idents_find_cert(s, "Client.test", 11));
    assert_null(sl_idents_find_cert(s, "client.tes", 10));
    /* separate spaces: a token that spells the line does not find the certificate identity */
    assert_null(sl_idents_find(s, "cert:client.test", 16));
    assert_null(sl_idents_find(s, "client.test", 11));
    assert_null(sl_idents_find_cert(s, "tok-alpha-0123456789abcdef", 26));
    assert_non_null(sl_idents_find(s, "tok-alpha-0123456789abcdef", 26));
    sl_idents_free(s);
    /* a file of certificate identities only */
    assert_int_equal(parse("cert:a b *\n", &s, err), 0);
    assert_non_null(sl_idents_find_cert(s, "a", 1));
    sl_idents_free(s);
    /* errors */
    expect_error("cert: n p\n", "line 1: a certificate name must be 1..255 bytes");
    char line[400];
    memset(line, 'c', sizeof line);
    memcpy(line, "cert:", 5);
    snprintf(line + 5 + 256, sizeof line - 5 - 256, " n p\n");
    expect_error(line, "a certificate name must be 1..255 bytes");
    expect_error("cert:a\x01b n p\n", "a certificate name is visible ASCII only");
    expect_error("cert:x a p\ncert:x b q\n", "the same certificate name");
    /* a token and a certificate name that are the same bytes are two identities */
    assert_int_equal(parse("tok-0123456789abcdef a p\ncert:tok-0123456789abcdef b q\n", &s, err),
                     0);
    assert_string_equal(sl_ident_name(sl_idents_find(s, "tok-0123456789abcdef", 20)), "a");
    assert_string_equal(sl_ident_name(sl_idents_find_cert(s, "tok-0123456789abcdef", 20)), "b");
    sl_idents_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_find),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_cert_identities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

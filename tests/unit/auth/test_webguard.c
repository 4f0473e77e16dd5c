/* SPDX-License-Identifier: Apache-2.0 */
/* sl_webguard: the admin plane's Host, Origin and Content-Type rules, the browser attacks
 * (a simple cross-origin POST, DNS rebinding) and what an operator's tools send. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth/webguard.h"

static sl_webguard_value v(const char *s)
{
    return (sl_webguard_value){s, s ? strlen(s) : 0};
}

static sl_webguard_verdict check(const char *addr, bool tls, const char *method, const char *host,
                                 const char *origin, const char *ctype)
{
    sl_webguard_listener l = {.addr = addr, .tls = tls};
    const char *why = NULL;
    sl_webguard_verdict r = sl_webguard_check(&l, method, v(host), v(origin), v(ctype), &why);
    assert_non_null(why);
    if (r != SL_WEBGUARD_OK)
        assert_true(strlen(why) > 0);
    return r;
}

#define L "127.0.0.1:5455"
#define J "application/json"

static void test_operator_calls_pass(void **state)
{
    (void)state;
    /* curl / the CLI: Host is the address, no Origin */
    assert_int_equal(check(L, false, "POST", L, NULL, J), SL_WEBGUARD_OK);
    assert_int_equal(check(L, false, "POST", L, NULL, "application/json; charset=utf-8"),
                     SL_WEBGUARD_OK);
    assert_int_equal(check(L, false, "POST", L, NULL, " Application/JSON ;x=1"), SL_WEBGUARD_OK);
    assert_int_equal(check(L, false, "GET", L, NULL, NULL), SL_WEBGUARD_OK);
    assert_int_equal(check(L, false, "GET", "localhost:5455", NULL, NULL), SL_WEBGUARD_OK);
    assert_int_equal(check(L, false, "GET", "LOCALHOST:5455", NULL, NULL), SL_WEBGUARD_OK);
    /* the status page in a browser: its own origin */
    assert_int_equal(check(L, false, "POST", L, "http://127.0.0.1:5455", J), SL_WEBGUARD_OK);
    assert_int_equal(check(L, false, "GET", "localhost:5455", "http://localhost:5455", NULL),
                     SL_WEBGUARD_OK);
    /* IPv6, spelled another way, and the default port of the scheme */
    assert_int_equal(check("[::1]:5455", false, "GET", "[::1]:5455", NULL, NULL), SL_WEBGUARD_OK);
    assert_int_equal(check("[::1]:5455", false, "GET", "[0:0::1]:5455", NULL, NULL),
                     SL_WEBGUARD_OK);
    assert_int_equal(check("127.0.0.1:80", false, "GET", "127.0.0.1", NULL, NULL),
                     SL_WEBGUARD_OK);
    assert_int_equal(check("10.1.2.3:443", true, "POST", "10.1.2.3", "https://10.1.2.3", J),
                     SL_WEBGUARD_OK);
    /* a wildcard bind: any IP literal with the port */
    assert_int_equal(check("0.0.0.0:5455", true, "GET", "10.9.8.7:5455", NULL, NULL),
                     SL_WEBGUARD_OK);
    assert_int_equal(check("[::]:5455", true, "GET", "[fd00::1]:5455", NULL, NULL),
                     SL_WEBGUARD_OK);
    assert_int_equal(check("0.0.0.0:5455", true, "POST", "localhost:5455",
                           "https://localhost:5455", J), SL_WEBGUARD_OK);
    /* a Unix socket: no Host to check (curl --unix-socket says "localhost") */
    assert_int_equal(check(NULL, false, "POST", "localhost", NULL, J), SL_WEBGUARD_OK);
    assert_int_equal(check(NULL, false, "GET", NULL, NULL, NULL), SL_WEBGUARD_OK);
}

static void test_simple_cross_origin_post_refused(void **state)
{
    (void)state;
    /* what a page on evil.example can send without a preflight */
    assert_int_equal(check(L, false, "POST", L, "http://evil.example", "text/plain"),
                     SL_WEBGUARD_BAD_ORIGIN);
    /* without an Origin (some old browsers, a form), the Content-Type still stops it */
    assert_int_equal(check(L, false, "POST", L, NULL, "text/plain"),
                     SL_WEBGUARD_BAD_CONTENT_TYPE);
    assert_int_equal(check(L, false, "POST", L, NULL, "application/x-www-form-urlencoded"),
                     SL_WEBGUARD_BAD_CONTENT_TYPE);
    assert_int_equal(check(L, false, "POST", L, NULL, "multipart/form-data; boundary=x"),
                     SL_WEBGUARD_BAD_CONTENT_TYPE);
    assert_int_equal(check(L, false, "POST", L, NULL, NULL), SL_WEBGUARD_BAD_CONTENT_TYPE);
    assert_int_equal(check(L, false, "DELETE", L, NULL, "text/plain"),
                     SL_WEBGUARD_BAD_CONTENT_TYPE);
    assert_int_equal(check(L, false, "POST", L, NULL, "application/jsonx"),
                     SL_WEBGUARD_BAD_CONTENT_TYPE);
    assert_int_equal(check(L, false, "POST", L, NULL, "text/plain; a=application/json"),
                     SL_WEBGUARD_BAD_CONTENT_TYPE);
    /* a foreign origin with JSON (a preflighted fetch) is still foreign */
    assert_int_equal(check(L, false, "POST", L, "http://evil.example", J), SL_WEBGUARD_BAD_ORIGIN);
    assert_int_equal(check(L, false, "POST", L, "null", J), SL_WEBGUARD_BAD_ORIGIN);
    assert_int_equal(check(L, false, "POST", L, "http://127.0.0.1:5456", J),
                     SL_WEBGUARD_BAD_ORIGIN);
    assert_int_equal(check(L, false, "POST", L, "https://127.0.0.1:5455", J),
                     SL_WEBGUARD_BAD_ORIGIN);
    assert_int_equal(check(L, false, "POST", L, "http://127.0.0.1:5455/x", J),
                     SL_WEBGUARD_BAD_ORIGIN);
    assert_int_equal(check(L, false, "POST", L, "http://user@127.0.0.1:5455", J),
                     SL_WEBGUARD_BAD_ORIGIN);
    /* reads with a foreign origin too (a CORS fetch) */
    assert_int_equal(check(L, false, "GET", L, "http://evil.example", NULL),
                     SL_WEBGUARD_BAD_ORIGIN);
    /* on a Unix socket every origin is foreign */
    assert_int_equal(check(NULL, false, "POST", "localhost", "http://localhost", J),
                     SL_WEBGUARD_BAD_ORIGIN);
}

static void test_rebinding_host_refused(void **state)
{
    (void)state;
    /* evil.example re-pointed at 127.0.0.1: same origin for the browser, not for us */
    assert_int_equal(check(L, false, "GET", "evil.example:5455", NULL, NULL),
                     SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "evil.example", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "POST", "evil.example:5455", "http://evil.example:5455", J),
                     SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", NULL, NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "127.0.0.1", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "127.0.0.1:5456", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "127.0.0.2:5455", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "127.0.0.1:5455x", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "127.0.0.1:05455x", NULL, NULL),
                     SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "127.0.0.1:", NULL, NULL), SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check(L, false, "GET", "[127.0.0.1]:5455x", NULL, NULL),
                     SL_WEBGUARD_BAD_HOST);
    /* localhost only for a loopback listener; a wildcard bind never takes a name */
    assert_int_equal(check("10.1.2.3:5455", false, "GET", "localhost:5455", NULL, NULL),
                     SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check("0.0.0.0:5455", false, "GET", "evil.example:5455", NULL, NULL),
                     SL_WEBGUARD_BAD_HOST);
    assert_int_equal(check("0.0.0.0:5455", false, "GET", "10.9.8.7:5456", NULL, NULL),
                     SL_WEBGUARD_BAD_HOST);
}

static void test_changes_state(void **state)
{
    (void)state;
    assert_false(sl_webguard_changes_state("GET"));
    assert_false(sl_webguard_changes_state("HEAD"));
    assert_false(sl_webguard_changes_state("OPTIONS"));
    assert_true(sl_webguard_changes_state("POST"));
    assert_true(sl_webguard_changes_state("PUT"));
    assert_true(sl_webguard_changes_state("DELETE"));
    assert_true(sl_webguard_changes_state("PATCH"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_operator_calls_pass),
        cmocka_unit_test(test_simple_cross_origin_post_refused),
        cmocka_unit_test(test_rebinding_host_refused),
        cmocka_unit_test(test_changes_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

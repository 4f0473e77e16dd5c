/* SPDX-License-Identifier: Apache-2.0 */
/* sl_hostport_parse: the addresses it takes (host:port, [v6]:port, names, port 0 only when
 * allowed) and the reason it gives for each it refuses, in the words a start-up error prints. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/hostport.h"

static void test_good(void **state)
{
    (void)state;
    static const struct {
        const char *in, *host;
        unsigned port;
        bool zero;
    } ok[] = {
        {"127.0.0.1:5454", "127.0.0.1", 5454, false},
        {"[::1]:80", "::1", 80, false},
        {"sluice-0.sluice.svc:1051", "sluice-0.sluice.svc", 1051, false},
        {"localhost:65535", "localhost", 65535, false},
        {"127.0.0.1:1", "127.0.0.1", 1, false},
        {"127.0.0.1:0", "127.0.0.1", 0, true}, /* any free port, for a listen address */
        {"0.0.0.0:00080", "0.0.0.0", 80, false},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char host[SL_HOSTPORT_HOST_MAX], why[256] = "";
        unsigned short port = 1;
        assert_int_equal(sl_hostport_parse(ok[i].in, ok[i].zero, host, sizeof host, &port, why,
                                           sizeof why),
                         0);
        assert_string_equal(host, ok[i].host);
        assert_int_equal(port, ok[i].port);
    }
}

static void test_reasons(void **state)
{
    (void)state;
    static const struct {
        const char *in, *why;
        bool zero;
    } bad[] = {
        {"127.0.0.1:99999", "port 99999 is out of range 1-65535", true},
        {"127.0.0.1:65536", "port 65536 is out of range 1-65535", false},
        {"127.0.0.1:99999999999999999999", "port 99999999999999999999 is out of range 1-65535",
         false},
        {"127.0.0.1:0", "port 0 is out of range 1-65535", false},
        {"foo", "'foo' has no port (want host:port, e.g. foo:5454)", false},
        {"", "the address is empty (want host:port, e.g. 127.0.0.1:5454)", false},
        {":5454", "':5454' has no host (want host:port, e.g. 127.0.0.1:5454)", false},
        {"127.0.0.1:", "'127.0.0.1:' has an empty port", false},
        {"127.0.0.1:http", "port 'http' is not a number", false},
        {"127.0.0.1:-1", "port '-1' is not a number", false},
        {"127.0.0.1: 80", "port ' 80' is not a number", false},
        {"[::1:80", "'[::1:80' has no ']' after the IPv6 address", false},
        {"[::1]", "'[::1]' has no port (want [v6]:port, e.g. [::1]:5454)", false},
        {"a[::1]:80", "'a[::1]:80': '[' and ']' only go around an IPv6 address ([v6]:port)",
         false},
        {"[a]b]:80", "'[a]b]:80' has no port (want [v6]:port, e.g. [::1]:5454)", false},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char host[SL_HOSTPORT_HOST_MAX], why[256] = "";
        unsigned short port = 0;
        assert_int_equal(sl_hostport_parse(bad[i].in, bad[i].zero, host, sizeof host, &port, why,
                                           sizeof why),
                         -EINVAL);
        assert_string_equal(why, bad[i].why);
    }
    /* a host longer than the caller's buffer, and no reason buffer at all */
    char small[4];
    unsigned short port;
    char why[128];
    assert_int_equal(sl_hostport_parse("example.com:1", false, small, sizeof small, &port, why,
                                       sizeof why),
                     -EINVAL);
    assert_string_equal(why, "the host of 'example.com:1' is longer than 3 bytes");
    assert_int_equal(sl_hostport_parse("x", false, small, sizeof small, &port, NULL, 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

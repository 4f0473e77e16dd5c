/* SPDX-License-Identifier: Apache-2.0 */
/* sl_addr: host:port splitting, loopback, a connection's source IP against a list of addresses,
 * a certificate's names against a peer's host. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "auth/addr.h"

static void test_split(void **state)
{
    (void)state;
    char h[64];
    unsigned short p;
    assert_int_equal(sl_addr_split("127.0.0.2:81", h, sizeof h, &p), 0);
    assert_string_equal(h, "127.0.0.2");
    assert_int_equal(p, 81);
    assert_int_equal(sl_addr_split("[::1]:0", h, sizeof h, &p), 0);
    assert_string_equal(h, "::1");
    assert_int_equal(p, 0);
    assert_int_equal(sl_addr_split("localhost:9", h, sizeof h, &p), 0);
    assert_string_equal(h, "127.0.0.1");
    assert_int_equal(sl_addr_split("1.2.3.4", h, sizeof h, &p), -EINVAL);
    assert_int_equal(sl_addr_split("1.2.3.4:", h, sizeof h, &p), -EINVAL);
    assert_int_equal(sl_addr_split("1.2.3.4:65536", h, sizeof h, &p), -EINVAL);
    assert_int_equal(sl_addr_split(":80", h, sizeof h, &p), -EINVAL);
    assert_int_equal(sl_addr_split("[::1]80", h, sizeof h, &p), -EINVAL);
    assert_int_equal(sl_addr_split("1.2.3.4:8x", h, sizeof h, &p), -EINVAL);
    assert_int_equal(sl_addr_split("1.2.3.4:80", h, 4, &p), -EINVAL);
}

static void test_loopback(void **state)
{
    (void)state;
    assert_true(sl_addr_is_loopback("127.0.0.1:5455"));
    assert_true(sl_addr_is_loopback("127.3.2.1:1"));
    assert_true(sl_addr_is_loopback("[::1]:5455"));
    assert_true(sl_addr_is_loopback("[::ffff:127.0.0.1]:5455"));
    assert_true(sl_addr_is_loopback("localhost:1"));
    assert_false(sl_addr_is_loopback("0.0.0.0:5455"));
    assert_false(sl_addr_is_loopback("[::]:5455"));
    assert_false(sl_addr_is_loopback("10.0.0.1:5455"));
    assert_false(sl_addr_is_loopback("128.0.0.1:5455"));
    assert_false(sl_addr_is_loopback("example.com:5455"));
    assert_false(sl_addr_is_loopback(""));
}

static struct sockaddr_in v4(const char *ip)
{
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(40000)};
    assert_int_equal(inet_pton(AF_INET, ip, &s.sin_addr), 1);
    return s;
}

static void test_same_ip(void **state)
{
    (void)state;
    struct sockaddr_in a = v4("127.0.0.2");
    const struct sockaddr *sa = (const struct sockaddr *)&a;
    assert_true(sl_addr_same_ip(sa, "127.0.0.2:5454"));
    assert_true(sl_addr_same_ip(sa, "[::ffff:127.0.0.2]:5454"));
    assert_false(sl_addr_same_ip(sa, "127.0.0.1:5454"));
    assert_false(sl_addr_same_ip(sa, "peer.example:5454"));
    assert_false(sl_addr_same_ip(NULL, "127.0.0.2:5454"));
    struct sockaddr_in6 m = {.sin6_family = AF_INET6};
    assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.2", &m.sin6_addr), 1);
    assert_true(sl_addr_same_ip((const struct sockaddr *)&m, "127.0.0.2:1"));
    struct sockaddr_in6 l6 = {.sin6_family = AF_INET6};
    assert_int_equal(inet_pton(AF_INET6, "::1", &l6.sin6_addr), 1);
    assert_true(sl_addr_same_ip((const struct sockaddr *)&l6, "[::1]:1"));
    assert_false(sl_addr_same_ip((const struct sockaddr *)&l6, "127.0.0.1:1"));
    struct sockaddr un = {.sa_family = AF_UNIX};
    assert_false(sl_addr_same_ip(&un, "127.0.0.2:1"));
    /* the 16-byte form: one memcmp compares a caller with a peer */
    sl_addr_ip x, y;
    assert_int_equal(sl_addr_ip_of("127.0.0.2:5454", &x), 0);
    assert_int_equal(sl_addr_ip_of_sockaddr(sa, &y), 0);
    assert_memory_equal(&x, &y, sizeof x);
    assert_int_equal(sl_addr_ip_of("[::1]:1", &x), 0);
    assert_int_equal(sl_addr_ip_of_sockaddr((const struct sockaddr *)&l6, &y), 0);
    assert_memory_equal(&x, &y, sizeof x);
    assert_int_equal(sl_addr_ip_of("peer.example:1", &x), -EINVAL);
    assert_int_equal(sl_addr_ip_of_sockaddr(&un, &x), -EINVAL);
    const char *const peers[] = {"127.0.0.3:81", "bogus", "127.0.0.2:80"};
    assert_true(sl_addr_in_list(sa, peers, 3));
    assert_false(sl_addr_in_list(sa, peers, 2));
    assert_false(sl_addr_in_list(sa, NULL, 0));
}

/* Names lists as the TLS layer builds them: identity, SANs, then an empty name. */
static void test_names_host(void **state)
{
    (void)state;
    static const char node[] = "peer.sluice.test\0peer.sluice.test\0localhost\0" "127.0.0.1\0";
    assert_true(sl_addr_names_host(node, "127.0.0.1:5454"));      /* the IP SAN */
    assert_true(sl_addr_names_host(node, "localhost:5454"));      /* localhost is 127.0.0.1 */
    assert_true(sl_addr_names_host(node, "PEER.sluice.test:1"));  /* case ignored */
    assert_true(sl_addr_names_host(node, "peer.sluice.test."));   /* trailing dot, no port */
    assert_false(sl_addr_names_host(node, "127.0.0.2:5454"));
    assert_false(sl_addr_names_host(node, "other.sluice.test:1"));
    assert_false(sl_addr_names_host(node, "peer.sluice:1"));      /* a prefix is not the name */
    /* the identity (first in the list) counts like any other name */
    static const char cn[] = "10.0.0.7\0";
    assert_true(sl_addr_names_host(cn, "10.0.0.7:81"));
    assert_false(sl_addr_names_host(cn, "10.0.0.70:81"));
    /* IPv6: compared as addresses, not as text */
    static const char v6[] = "n6\0::1\0";
    assert_true(sl_addr_names_host(v6, "[0:0::1]:5454"));
    assert_false(sl_addr_names_host(v6, "127.0.0.1:5454"));
    /* no wildcards; an IP literal never matches a host name and back; "ip:port" is no IP */
    static const char wild[] = "*.sluice.test\0\0";
    assert_false(sl_addr_names_host(wild, "a.sluice.test:1"));
    static const char withport[] = "127.0.0.1:80\0";
    assert_false(sl_addr_names_host(withport, "127.0.0.1:80"));
    static const char ipname[] = "127.0.0.1\0";
    assert_false(sl_addr_names_host(ipname, "host127:80"));
    /* nothing to match */
    assert_false(sl_addr_names_host("", "127.0.0.1:1"));
    assert_false(sl_addr_names_host(NULL, "127.0.0.1:1"));
    assert_false(sl_addr_names_host(node, ":1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_same_ip),
        cmocka_unit_test(test_names_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gossipseeds tests: an observer's registration value gives its gossip address, and values that
 * are not a JSON object with a short printable "gossip" string are refused; against a real etcd
 * (skipped without /usr/bin/etcd), the observers under <prefix>/observer/ become seeds appended
 * after the given ones, a malformed registration and keys outside the prefix are ignored, the
 * caller's cap holds, and an unreachable etcd is an error, not a crash.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../support/etcdproc.h"
#include "../../support/skip.h"
#include "gossip/gossipseeds.h"

static sl_test_etcd g_etcd;

static void test_parse(void **state)
{
    char out[65];
    const char *ok = "{\"gossip\": \"10.0.0.7:7946\", \"service\": \"10.0.0.7:5454\"}";
    assert_int_equal(sl_gossipseeds_parse(ok, strlen(ok), out, sizeof out), 0);
    assert_string_equal(out, "10.0.0.7:7946");
    const char *bad[] = {
        "", "[]", "{}", "{\"gossip\": 7}", "{\"gossip\": \"\"}", "{\"gossip\": \"a b\"}",
        "{\"service\": \"10.0.0.7:5454\"}", "{\"gossip\": \"x\", \"gossip\": \"y\"}", "{\"gossip\":",
        "{\"gossip\": \"0123456789012345678901234567890123456789012345678901234567890123456789\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(sl_gossipseeds_parse(bad[i], strlen(bad[i]), out, sizeof out), -EINVAL);
    assert_int_equal(sl_gossipseeds_parse(ok, strlen(ok), out, 5), -EINVAL);
}

static void put(sl_etcd *e, const char *k, const char *v)
{
    assert_int_equal(sl_etcd_put(e, k, strlen(k), v, strlen(v), 0, NULL), 0);
}

static void test_from_etcd(void **state)
{
    SL_NEED(SL_TEST_ETCD_BIN, "etcd-server");
    assert_true(g_etcd.pid > 0); /* installed, so the group set-up started it */
    const char *eps[] = {g_etcd.url};
    sl_etcd_config ec = {.endpoints = eps, .n_endpoints = 1, .request_timeout_ms = 2000};
    sl_etcd *e;
    assert_int_equal(sl_etcd_new(&ec, &e), 0);
    put(e, "/lv/observer/obs-1", "{\"gossip\": \"127.0.0.1:7001\", \"service\": \"127.0.0.1:80\"}");
    put(e, "/lv/observer/obs-2", "{\"gossip\": \"127.0.0.1:7002\"}");
    put(e, "/lv/observer/broken", "not json");
    put(e, "/lv/observers-elsewhere/x", "{\"gossip\": \"127.0.0.1:7999\"}");
    put(e, "/other/observer/obs-3", "{\"gossip\": \"127.0.0.1:7003\"}");
    sl_etcd_free(e);

    char given[] = "127.0.0.1:7000";
    char *seeds[8] = {given};
    size_t n = 1;
    assert_int_equal(sl_gossipseeds_from_etcd(&ec, "/lv", seeds, &n, 8), 2);
    assert_int_equal(n, 3);
    assert_string_equal(seeds[0], "127.0.0.1:7000");
    assert_string_equal(seeds[1], "127.0.0.1:7001");
    assert_string_equal(seeds[2], "127.0.0.1:7002");
    free(seeds[1]);
    free(seeds[2]);
    /* the cap */
    n = 1;
    assert_int_equal(sl_gossipseeds_from_etcd(&ec, "/lv", seeds, &n, 2), 1);
    assert_int_equal(n, 2);
    free(seeds[1]);
    /* nothing registered */
    n = 0;
    assert_int_equal(sl_gossipseeds_from_etcd(&ec, "/none", seeds, &n, 8), 0);
    /* etcd not there */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", sl_test_free_port());
    const char *dead[] = {url};
    sl_etcd_config dc = {.endpoints = dead, .n_endpoints = 1, .request_timeout_ms = 500,
                         .connect_timeout_ms = 200};
    n = 0;
    assert_true(sl_gossipseeds_from_etcd(&dc, "/lv", seeds, &n, 8) < 0);
    assert_int_equal(n, 0);
}

static int etcd_setup(void **state)
{
    if (!sl_test_etcd_installed()) {
        print_message("%s not installed: skipping the etcd test\n", SL_TEST_ETCD_BIN);
        return 0;
    }
    if (sl_test_etcd_init(&g_etcd, "/tmp/sluice-gs-etcd-XXXXXX") != 0 ||
        sl_test_etcd_start(&g_etcd) != 0)
        return -1;
    return sl_test_etcd_wait_ready(&g_etcd, 30000) == 0 ? 0 : -1;
}

static int etcd_teardown(void **state)
{
    if (g_etcd.pid > 0) {
        sl_test_etcd_stop(&g_etcd, SIGTERM);
        sl_test_etcd_cleanup(&g_etcd);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_from_etcd),
    };
    return sl_skip_exit(cmocka_run_group_tests(tests, etcd_setup, etcd_teardown));
}

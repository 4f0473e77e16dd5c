/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The start-up check (node/startcheck.h) over options parsed as sluiced parses them: a good set
 * finds nothing; each bad file or value is one problem naming its option (quota file with its
 * line, RLS directory and file, token files, TLS files, key ring, state directory, peers that do
 * not resolve or lack this node, the Redis store's addresses and password file), and all of them
 * are found in one run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "config/diag.h"
#include "node/startcheck.h"

static void write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/sluice_startcheck_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

/* Parse args (sluiced's, NULL-terminated) and run the check into d. */
static size_t check(sl_diag *d, char **args)
{
    char *argv[32] = {"sluiced"};
    int argc = 1;
    while (args[argc - 1] && argc < 31) {
        argv[argc] = args[argc - 1];
        argc++;
    }
    char *no_env[] = {NULL};
    sl_options o;
    memset(&o, 0, sizeof o);
    char err[512];
    assert_int_equal(sl_config_parse(&o, argc, argv, no_env, err, sizeof err), 0);
    size_t n = sl_startcheck_run(&o, d);
    sl_config_free(&o);
    return n;
}

static bool has(const sl_diag *d, const char *text)
{
    for (size_t i = 0; i < d->n; i++)
        if (strstr(d->lines[i], text))
            return true;
    return false;
}

static void test_good_finds_nothing(void **state)
{
    (void)state;
    char q[64];
    write_file(q, "limit:\n  key:\n    api:\n      quota: {rate: 5, burst: 1}\n");
    sl_diag d = {0};
    assert_int_equal(check(&d, (char *[]){"--quota-file", q, "--discovery", "static", "--peers",
                                          "127.0.0.1:5454,localhost:5455", "--state-dir",
                                          "/tmp", NULL}),
                     0);
    sl_diag_free(&d);
    unlink(q);
}

static void test_every_problem_at_once(void **state)
{
    (void)state;
    char q[64], tok[64], junk[64];
    write_file(q, "limit:\n  key:\n    api:\n      quota: {rate: fast, burst: 1}\n");
    write_file(tok, "Zq9x\n");
    write_file(junk, "not a key ring\n");
    sl_diag d = {0};
    size_t n = check(&d, (char *[]){"--quota-file", q, "--rls-config-dir", "/nonexistent-rls",
                                    "--admin-token-file", tok, "--client-tokens-file",
                                    "/nonexistent-tokens", "--tls-cert", "/nonexistent.pem",
                                    "--tls-key", junk, "--gossip-keyring-file", junk,
                                    "--state-dir", "/nonexistent-parent/state", "--discovery",
                                    "static", "--peers", "127.0.0.2:1,nosuch.invalid:1", NULL});
    char want[128];
    snprintf(want, sizeof want, "option 'quota-file': %s: line 4: rate is not a number: 'fast'", q);
    assert_true(has(&d, want));
    assert_true(has(&d, "option 'rls-config-dir': /nonexistent-rls"));
    assert_true(has(&d, "option 'admin-token-file': "));
    assert_true(has(&d, "option 'client-tokens-file': /nonexistent-tokens"));
    assert_true(has(&d, "option 'tls-cert': certificate /nonexistent.pem: no such file"));
    assert_true(has(&d, "option 'gossip-keyring-file': "));
    assert_true(has(&d, "option 'state-dir': /nonexistent-parent/state does not exist and cannot "
                        "be made"));
    assert_true(has(&d, "option 'peers': peer 'nosuch.invalid:1' does not resolve"));
    assert_true(has(&d, "option 'peers': this node (127.0.0.1:5454) is not in the peer list "
                        "(127.0.0.2:1, nosuch.invalid:1)"));
    assert_int_equal(n, 9);
    assert_int_equal(sl_diag_count(&d), 9);
    for (size_t i = 0; i < d.n; i++)
        assert_null(strstr(d.lines[i], "Zq9x")); /* a token never appears in a message */
    sl_diag_free(&d);
    unlink(q);
    unlink(tok);
    unlink(junk);
}

static void test_advertise_addr_names_the_node(void **state)
{
    (void)state;
    sl_diag d = {0};
    assert_int_equal(check(&d, (char *[]){"--listen-addr", "0.0.0.0:5454", "--discovery",
                                          "static", "--peers", "127.0.0.1:5454,127.0.0.2:5454",
                                          NULL}),
                     1); /* 0.0.0.0:5454 is no peer's address */
    sl_diag_free(&d);
    assert_int_equal(check(&d, (char *[]){"--listen-addr", "0.0.0.0:5454", "--advertise-addr",
                                          "127.0.0.1:5454", "--discovery", "static", "--peers",
                                          "127.0.0.1:5454,127.0.0.2:5454", NULL}),
                     0);
    assert_int_equal(check(&d, (char *[]){"--listen-addr", "sluice-0:5454", NULL}), 1);
    assert_true(has(&d, "option 'listen-addr': 'sluice-0' is not an IP address"));
    sl_diag_free(&d);
}

static void test_redis_store(void **state)
{
    (void)state;
    sl_diag d = {0};
    assert_int_equal(check(&d, (char *[]){"--store", "redis", "--redis-addrs",
                                          "127.0.0.1:6379,[::1]:6380", NULL}),
                     0);
    assert_int_equal(check(&d, (char *[]){"--store", "redis", "--redis-addrs",
                                          "redis.local:6379,127.0.0.1:0", "--redis-password-file",
                                          "/nonexistent-pw", NULL}),
                     3);
    assert_true(has(&d, "option 'redis-addrs': 'redis.local' is not an IP address"));
    assert_true(has(&d, "option 'redis-addrs': port 0 is out of range 1-65535"));
    assert_true(has(&d, "option 'redis-password-file': /nonexistent-pw: "));
    sl_diag_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_finds_nothing),
        cmocka_unit_test(test_every_problem_at_once),
        cmocka_unit_test(test_advertise_addr_names_the_node),
        cmocka_unit_test(test_redis_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

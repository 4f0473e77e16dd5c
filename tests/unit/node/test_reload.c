/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reload tests (node/reload.h): the client tokens file is read into identities, a missing or
 * malformed file is an error whose message names the file and never holds a token; a TLS file
 * that cannot be read is an error with a reason; a static peer list read again from the options
 * goes to the router and into the options only when it changed, and a changed discovery kind
 * keeps the list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/reload.h"

#define TOKEN "abcdefghijklmnopqrstuvwxyz012345"

static void write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/sluice_reload_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

static void test_read_idents(void **state)
{
    (void)state;
    char path[64], err[512];
    write_file(path, "# one identity\n" TOKEN " team-a a.,b.\n");
    sl_idents *id = NULL;
    assert_int_equal(sl_reload_read_idents(path, &id, err, sizeof err), 0);
    assert_non_null(id);
    assert_int_equal(sl_idents_count(id), 1);
    sl_idents_free(id);
    unlink(path);

    write_file(path, TOKEN " bad/name a.\n");
    id = NULL;
    assert_true(sl_reload_read_idents(path, &id, err, sizeof err) < 0);
    assert_null(id);
    assert_non_null(strstr(err, "client-tokens-file"));
    assert_null(strstr(err, TOKEN));
    unlink(path);

    assert_true(sl_reload_read_idents("/nonexistent/sluice-tokens", &id, err, sizeof err) < 0);
    assert_non_null(strstr(err, "client-tokens-file"));
}

static void test_read_tls_missing(void **state)
{
    (void)state;
    sl_options o;
    memset(&o, 0, sizeof o);
    char err[512] = "";
    char missing[] = "/nonexistent/sluice.pem";
    o.tls_cert = missing;
    o.tls_key = missing;
    o.tls_ca = (char *)"";
    o.peer_tls_cert = missing;
    o.peer_tls_key = missing;
    o.peer_tls_ca = (char *)"";
    sl_tls_ctx *ctx = NULL;
    assert_true(sl_reload_read_server_tls(&o, &ctx, err, sizeof err) < 0);
    assert_null(ctx);
    assert_true(err[0] != '\0');
    err[0] = '\0';
    assert_true(sl_reload_read_peer_tls(&o, &ctx, err, sizeof err) < 0);
    assert_null(ctx);
    assert_non_null(strstr(err, "peer TLS"));
}

#define A "127.0.0.1:61051"
#define B "127.0.0.1:61052"
#define C "127.0.0.1:61053"

static void test_reload_peers(void **state)
{
    (void)state;
    char err[512];
    char *argv0[] = {"sluiced", "--discovery", "static", "--peers", A "," B,
                     "--advertise-addr", A, NULL};
    sl_options o;
    memset(&o, 0, sizeof o);
    assert_int_equal(sl_config_parse(&o, 7, argv0, NULL, err, sizeof err), 0);
    sl_router_config rc = {.workers = 1};
    sl_router_config_from_options(&rc, &o);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    sl_engine *e = NULL;
    assert_int_equal(sl_engine_new(&ec, &e), 0);
    rc.engine = e;
    sl_router *r = NULL;
    assert_int_equal(sl_router_new(&rc, &r), 0);
    assert_int_equal(sl_router_peer_count(r), 2);

    /* the same list: nothing changes */
    sl_reload_peers(&o, 7, argv0, r, NULL);
    assert_int_equal(o.peers.n, 2);

    /* a changed list goes to the router and into the options */
    char *argv1[] = {"sluiced", "--discovery", "static", "--peers", A "," B "," C,
                     "--advertise-addr", A, NULL};
    sl_reload_peers(&o, 7, argv1, r, NULL);
    assert_int_equal(sl_router_peer_count(r), 3);
    assert_int_equal(o.peers.n, 3);
    assert_string_equal(o.peers.items[2], C);

    /* another discovery kind needs a restart: the list stays */
    char *argv2[] = {"sluiced", "--discovery", "dns", "--dns-name", "peers.invalid",
                     "--advertise-addr", A, NULL};
    sl_reload_peers(&o, 7, argv2, r, NULL);
    assert_int_equal(sl_router_peer_count(r), 3);
    assert_int_equal(o.peers.n, 3);

    /* options that do not parse: the list stays */
    char *argv3[] = {"sluiced", "--no-such-option", NULL};
    sl_reload_peers(&o, 2, argv3, r, NULL);
    assert_int_equal(o.peers.n, 3);

    sl_router_free(r);
    sl_engine_free(e);
    sl_config_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_idents),
        cmocka_unit_test(test_read_tls_missing),
        cmocka_unit_test(test_reload_peers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

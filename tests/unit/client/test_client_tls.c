/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client library over TLS (include/sluice/client.h, client/h2conn.c) against a real TLS server
 * (net/server.c) on 127.0.0.1:0 whose handler accepts every /attempt: with the right CA (sync and
 * async calls, the address's IP or a given server name checked), with the wrong CA or a name the
 * certificate lacks (the call fails open or closed, -EKEYREJECTED, counted, with OpenSSL's
 * reason, and the reconnect backoff applies), and against a port that requires client
 * certificates (with ours, without, an expired one). Options that cannot work are refused by
 * sl_client_new. Certificates: tests/support/testcerts.h.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/server.h"
#include "tls/tls.h"
#include "sluice/client.h"
#include "../../support/testcerts.h"

static void accept_all(void *ud, sl_exchange *ex)
{
    (void)ud;
    sl_exchange_respond_simple(ex, 200, "text/plain", "ok\n", 3);
}

/* A TLS server with cert, asking client certificates by auth (CA ca.pem). */
static sl_server *tls_server(const char *cert, sl_tls_auth auth, char *addr, size_t n)
{
    char c[64], k[64];
    snprintf(c, sizeof c, "%s.pem", cert);
    snprintf(k, sizeof k, "%s.key", cert);
    sl_tls_config tc = {.server = true, .cert_file = path(c), .key_file = path(k),
                        .ca_file = path("ca.pem"), .client_auth = auth};
    sl_tls_ctx *ctx;
    char err[256];
    if (sl_tls_ctx_new(&ctx, &tc, err, sizeof err))
        fail_msg("server ctx: %s", err);
    sl_server_config cfg;
    sl_server_config_defaults(&cfg);
    cfg.host = "127.0.0.1";
    cfg.workers = 1;
    cfg.handler = accept_all;
    cfg.tls = ctx;
    sl_server *srv;
    assert_int_equal(sl_server_start(&srv, &cfg), 0);
    sl_tls_ctx_unref(ctx);
    snprintf(addr, n, "127.0.0.1:%u", (unsigned)sl_server_port(srv));
    return srv;
}

static void stop(sl_server *srv)
{
    sl_server_shutdown(srv, 1000);
    assert_int_equal(sl_server_wait(srv), 0);
    sl_server_free(srv);
}

static sl_client *client(const char *addr, const char *ca, const char *cert, const char *name,
                         bool fail_closed, int backoff_ms)
{
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = 5000;
    o.connect_timeout_ms = 5000;
    o.reconnect_backoff_ms = backoff_ms;
    o.fail_closed = fail_closed;
    o.tls = true;
    o.tls_ca_file = ca ? path(ca) : NULL;
    char c[64], k[64];
    snprintf(c, sizeof c, "%s.pem", cert ? cert : "");
    snprintf(k, sizeof k, "%s.key", cert ? cert : "");
    o.tls_cert_file = cert ? path(c) : NULL;
    o.tls_key_file = cert ? path(k) : NULL;
    o.tls_server_name = name;
    sl_client *cl = NULL;
    assert_int_equal(sl_client_new(addr, &o, &cl), 0);
    return cl;
}

static const sl_attempt ATTEMPT = {.resource = "api"};

typedef struct async_seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int rc;
    sl_attempt_reply r;
} async_seen;

static void on_async(void *ud, int rc, const sl_attempt_reply *r)
{
    async_seen *a = ud;
    pthread_mutex_lock(&a->mu);
    a->rc = rc;
    a->r = *r;
    a->done = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

static void test_right_ca(void **state)
{
    (void)state;
    char addr[64];
    sl_server *srv = tls_server("server", SL_TLS_AUTH_NONE, addr, sizeof addr);
    /* server.pem names localhost only: by the IP of the address it would fail, so the name */
    sl_client *c = client(addr, "ca.pem", NULL, "localhost", false, 0);
    sl_attempt_reply r;
    assert_int_equal(sl_client_attempt(c, &ATTEMPT, 0, &r), 0);
    assert_int_equal(r.err, 0);
    assert_true(r.allowed);
    assert_false(r.failed_open);
    assert_int_equal(r.http_status, 200);

    /* an async call, on the client's I/O thread and its own connection */
    async_seen a = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    assert_int_equal(sl_client_attempt_async(c, &ATTEMPT, 0, on_async, &a), 0);
    pthread_mutex_lock(&a.mu);
    while (!a.done)
        pthread_cond_wait(&a.cv, &a.mu);
    pthread_mutex_unlock(&a.mu);
    assert_int_equal(a.rc, 0);
    assert_int_equal(a.r.http_status, 200);
    assert_false(a.r.failed_open);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.connects, 2);
    assert_int_equal(st.tls_failures, 0);
    assert_int_equal(st.failed_open, 0);
    assert_string_equal(sl_client_tls_error(c), "");
    sl_client_free(c);
    stop(srv);
}

static void test_wrong_ca_or_name(void **state)
{
    (void)state;
    char addr[64];
    sl_server *srv = tls_server("server", SL_TLS_AUTH_NONE, addr, sizeof addr);
    struct {
        const char *ca, *name;
    } bad[] = {{"wrongca.pem", "localhost"}, {"ca.pem", NULL /* 127.0.0.1: not in server.pem */},
               {"ca.pem", "elsewhere.test"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_client *c = client(addr, bad[i].ca, NULL, bad[i].name, false, 0);
        sl_attempt_reply r;
        assert_int_equal(sl_client_attempt(c, &ATTEMPT, 0, &r), 0);
        assert_int_equal(r.err, -EKEYREJECTED);
        assert_true(r.allowed);
        assert_true(r.failed_open);
        assert_false(r.shed);
        assert_int_equal(r.http_status, 0);
        sl_client_stats st;
        sl_client_stats_get(c, &st);
        assert_int_equal(st.tls_failures, 1);
        assert_int_equal(st.connect_failures, 1);
        assert_int_equal(st.connects, 0);
        assert_int_equal(st.failed_open, 1);
        assert_int_equal(st.transport_errors, 1);
        assert_non_null(strstr(sl_client_tls_error(c), "certificate verify failed"));
        sl_client_free(c);
    }

    /* fail closed: denied, with the error; then in backoff, denied at once without a handshake */
    sl_client *c = client(addr, "wrongca.pem", NULL, NULL, true, 60000);
    sl_attempt_reply r;
    assert_int_equal(sl_client_attempt(c, &ATTEMPT, 0, &r), -EKEYREJECTED);
    assert_false(r.allowed);
    assert_false(r.failed_open);
    assert_int_equal(sl_client_attempt(c, &ATTEMPT, 0, &r), -EKEYREJECTED);
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.tls_failures, 1);
    assert_int_equal(st.failed_closed, 2);
    sl_client_free(c);
    stop(srv);
}

static void test_client_certificates(void **state)
{
    (void)state;
    char addr[64];
    sl_server *srv = tls_server("server", SL_TLS_AUTH_REQUIRE, addr, sizeof addr);
    const char *certs[] = {"client", NULL, "expired", "stranger"};
    for (size_t i = 0; i < sizeof certs / sizeof certs[0]; i++) {
        sl_client *c = client(addr, "ca.pem", certs[i], "localhost", false, 0);
        sl_attempt_reply r;
        assert_int_equal(sl_client_attempt(c, &ATTEMPT, 0, &r), 0);
        sl_client_stats st;
        sl_client_stats_get(c, &st);
        if (i == 0) {
            assert_int_equal(r.http_status, 200);
            assert_false(r.failed_open);
            assert_int_equal(st.tls_failures, 0);
        } else {
            /* refused by the server's alert once our side finished (TLS 1.3) */
            assert_true(r.failed_open);
            assert_int_equal(r.err, -EKEYREJECTED);
            assert_int_equal(st.tls_failures, 1);
            assert_string_not_equal(sl_client_tls_error(c), "");
        }
        sl_client_free(c);
    }
    stop(srv);
}

static void test_bad_options(void **state)
{
    (void)state;
    sl_client_options o;
    sl_client_options_default(&o);
    sl_client *c = NULL;
    o.tls_ca_file = path("missing.pem");
    assert_int_equal(sl_client_new("127.0.0.1:1", &o, &c), -ENOENT);
    o.tls_ca_file = path("server.key"); /* not a certificate */
    assert_int_equal(sl_client_new("127.0.0.1:1", &o, &c), -EINVAL);
    o.tls_ca_file = path("ca.pem");
    o.tls_cert_file = path("client.pem"); /* no key */
    assert_int_equal(sl_client_new("127.0.0.1:1", &o, &c), -EINVAL);
    o.tls_key_file = path("server.key"); /* not its key */
    assert_int_equal(sl_client_new("127.0.0.1:1", &o, &c), -EINVAL);
    assert_null(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_right_ca),
        cmocka_unit_test(test_wrong_ca_or_name),
        cmocka_unit_test(test_client_certificates),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, sl_testcerts_setup, sl_testcerts_teardown);
}

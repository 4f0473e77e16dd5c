/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis/rconn: one pipelined Redis connection, against a real redis-server started by the test on
 * free loopback ports (plain, and TLS with certificates made by tests/support/testcerts.h):
 * the RESP encoding against hiredis's own, replies answered in order, commands queued before
 * the connection is up, one write per loop iteration (and none left waiting while the loop sleeps),
 * NULL replies exactly once on a failed connect, on sl_rconn_free and on a server that closes
 * mid-pipeline, the output and reply bounds, TLS with the CA checked, a
 * wrong CA, and client certificates (tls-auth-clients).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <hiredis/hiredis.h>

#include "../../support/skip.h"
#include "../../support/testcerts.h"
#include "redisproc.h"
#include "redis/rconn.h"

#define NCMD 2000

/* A redis-server with a TLS port too (the plain one serves the readiness check). */
typedef struct tlsredis {
    sl_test_redis r;
    int tls_port;
    char tport[16];
    const char *argv[16];
} tlsredis;

static void tlsredis_start(tlsredis *t, bool auth_clients)
{
    memset(t, 0, sizeof *t);
    t->r.port = sl_test_free_port();
    do
        t->tls_port = sl_test_free_port();
    while (t->tls_port == t->r.port);
    snprintf(t->tport, sizeof t->tport, "%d", t->tls_port);
    const char *argv[] = {"--tls-port", t->tport, "--tls-cert-file", path("server.pem"),
                          "--tls-key-file", path("server.key"), "--tls-ca-cert-file",
                          path("ca.pem"), "--tls-auth-clients", auth_clients ? "yes" : "no",
                          NULL};
    memcpy(t->argv, argv, sizeof argv);
    t->r.extra = t->argv;
    assert_int_equal(sl_test_redis_start(&t->r), 0);
}

static void tlsredis_stop(tlsredis *t)
{
    sl_test_redis_stop(&t->r);
}

/* ---- a loop and what the callbacks saw --------------------------------------------------------- */

typedef struct fx {
    uv_loop_t loop;
    sl_test_redis redis;
    sl_rconn *c;
    uv_tcp_t srv;       /* a listener of the test's own (srv_open) */
    bool srv_open;
    sl_rconn_stats stats;
    int connected;      /* connect callbacks with 0 */
    int connect_failed; /* connect callbacks with an error */
    int disconnected;
    int last_status;
    int replies;        /* replies that were not NULL */
    int nulls;          /* NULL replies */
    int nulls_at_disconnect;
    int nulls_at_connect_fail;
    long long next;     /* INCR: the value expected next */
    bool out_of_order;
    char last[64];      /* the last status or string reply */
} fx;

static void on_connect(sl_rconn *c, int status)
{
    fx *f = sl_rconn_data(c);
    f->last_status = status;
    if (status == 0) {
        f->connected++;
    } else {
        f->connect_failed++;
        f->nulls_at_connect_fail = f->nulls;
        f->c = NULL;
    }
}

static void on_disconnect(sl_rconn *c, int status)
{
    fx *f = sl_rconn_data(c);
    f->disconnected++;
    f->last_status = status;
    f->nulls_at_disconnect = f->nulls;
    f->c = NULL;
}

static void on_reply(sl_rconn *c, void *reply, void *priv)
{
    (void)c;
    fx *f = priv;
    redisReply *r = reply;
    if (!r) {
        f->nulls++;
        return;
    }
    f->replies++;
    if (r->type == REDIS_REPLY_INTEGER) {
        if (r->integer != f->next)
            f->out_of_order = true;
        f->next++;
    } else if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING ||
               r->type == REDIS_REPLY_ERROR) {
        snprintf(f->last, sizeof f->last, "%.*s", (int)(r->len < 63 ? r->len : 63), r->str);
    }
}

static int cmd(fx *f, int argc, const char **argv)
{
    size_t len[8];
    for (int i = 0; i < argc; i++)
        len[i] = strlen(argv[i]);
    return sl_rconn_command(f->c, on_reply, f, argc, argv, len);
}

/* Run the loop until *cond (an int) reaches want (at most 10 s). */
static void run_until(fx *f, const int *cond, int want)
{
    int64_t deadline = sl_mono_ns() / 1000000 + 10000;
    while (*cond < want && sl_mono_ns() / 1000000 < deadline)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(*cond, want);
}

static sl_rconn_config base_cfg(fx *f, int port)
{
    return (sl_rconn_config){.loop = &f->loop, .host = "127.0.0.1", .port = port,
                             .on_connect = on_connect, .on_disconnect = on_disconnect, .data = f,
                             .stats = &f->stats};
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    *state = f;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->next = 1;
    if (sl_test_redis_installed())
        assert_int_equal(sl_test_redis_start(&f->redis), 0);
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sl_rconn_free(f->c);
    if (f->srv_open) /* also when an assertion left the test early */
        uv_close((uv_handle_t *)&f->srv, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT); /* the handles' closes: the memory freed */
    assert_int_equal(uv_loop_close(&f->loop), 0);
    sl_test_redis_stop(&f->redis);
    free(f);
    return 0;
}

#define NEED_REDIS()                                                                               \
    do {                                                                                           \
        SL_NEED(SL_TEST_REDIS_BIN, "redis-server");                                                \
    } while (0)

/* ---- tests -------------------------------------------------------------------------------------- */

/* The encoding is byte for byte hiredis's (redisFormatCommandArgv). */
static void test_encode(void **state)
{
    (void)state;
    static char big[100000];
    memset(big, 'x', sizeof big);
    const char *argv[5] = {"EVALSHA", "", "a\r\nb\0c", big, "1234567890"};
    size_t len[5] = {7, 0, 6, sizeof big, 10};
    for (int argc = 0; argc <= 5; argc++) {
        char *want = NULL;
        int n = redisFormatCommandArgv(&want, argc, argv, len);
        assert_true(n > 0);
        assert_int_equal(sl_rconn_encode(NULL, 0, argc, argv, len), (size_t)n);
        char *got = malloc((size_t)n);
        assert_int_equal(sl_rconn_encode(got, (size_t)n, argc, argv, len), (size_t)n);
        assert_memory_equal(got, want, (size_t)n);
        free(got);
        free(want);
    }
}

/* Commands queued before the connection is up, and many more in one iteration: every reply in
 * order (INCR counts 1, 2, 3, ...), the connect callback once. */
static void test_pipeline_order(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *del[] = {"DEL", "rconn:n"};
    assert_int_equal(cmd(f, 2, del), 0);
    f->next = 0; /* DEL answers 0, then INCR 1, 2, ... */
    const char *incr[] = {"INCR", "rconn:n"};
    for (int i = 0; i < NCMD; i++)
        assert_int_equal(cmd(f, 2, incr), 0);
    run_until(f, &f->replies, NCMD + 1);
    assert_int_equal(f->connected, 1);
    assert_false(f->out_of_order);
    assert_int_equal(f->next, NCMD + 1); /* 0 .. NCMD */
    /* and again once up: all queued in one iteration, all in one write */
    uint64_t writes = atomic_load(&f->stats.writes);
    for (int i = 0; i < NCMD; i++)
        assert_int_equal(cmd(f, 2, incr), 0);
    run_until(f, &f->replies, 2 * NCMD + 1);
    assert_int_equal(atomic_load(&f->stats.writes), writes + 1);
    assert_false(f->out_of_order);
    assert_int_equal(f->nulls, 0);
    assert_int_equal(f->disconnected, 0);
}

/* sl_rconn_free with commands pending (connecting, and up): each gets one NULL reply, no
 * connect or disconnect callback, and the memory goes once the loop closes the socket. */
static void test_free_answers_null(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *ping[] = {"PING"};
    for (int i = 0; i < 10; i++)
        assert_int_equal(cmd(f, 1, ping), 0);
    sl_rconn_free(f->c);
    f->c = NULL;
    assert_int_equal(f->nulls, 10);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->nulls, 10);
    assert_int_equal(f->connected + f->connect_failed + f->disconnected, 0);

    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    run_until(f, &f->connected, 1);
    const char *blpop[] = {"BLPOP", "rconn:never", "0"}; /* never answered */
    assert_int_equal(cmd(f, 3, blpop), 0);
    assert_int_equal(cmd(f, 1, ping), 0);
    for (int i = 0; i < 5; i++)
        uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->replies, 0);
    sl_rconn *c = f->c;
    f->c = NULL;
    sl_rconn_free(c);
    assert_int_equal(f->nulls, 12);
    assert_int_equal(f->disconnected, 0);
}

/* A connect refused: the connect callback with an error, then the commands queued meanwhile
 * answered with NULL, once each. */
static void test_connect_refused(void **state)
{
    fx *f = *state;
    sl_rconn_config cfg = base_cfg(f, sl_test_free_port());
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *ping[] = {"PING"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->connect_failed, 1);
    assert_true(f->last_status < 0);
    assert_int_equal(f->nulls_at_connect_fail, 0); /* after the connect callback */
    assert_int_equal(f->nulls, 3);
    assert_int_equal(f->disconnected, 0);
    cfg.host = "localhost"; /* names are not resolved */
    sl_rconn *c;
    assert_int_equal(sl_rconn_new(&cfg, &c), -EINVAL);
}

/* The server closes mid-pipeline (QUIT): the commands before it answered, those after it get
 * NULL before the disconnect callback, once; new commands are refused. */
static void test_server_closes_mid_pipeline(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    run_until(f, &f->connected, 1);
    const char *del[] = {"DEL", "rconn:q"}, *incr[] = {"INCR", "rconn:q"}, *quit[] = {"QUIT"};
    assert_int_equal(cmd(f, 2, del), 0);
    f->next = 0; /* DEL answers 0 */
    for (int i = 0; i < 5; i++)
        assert_int_equal(cmd(f, 2, incr), 0);
    assert_int_equal(cmd(f, 1, quit), 0);
    for (int i = 0; i < 7; i++)
        assert_int_equal(cmd(f, 2, incr), 0);
    sl_rconn *c = f->c;
    run_until(f, &f->disconnected, 1);
    assert_int_equal(f->replies, 7); /* DEL, 5 INCR, QUIT's OK */
    assert_false(f->out_of_order);
    assert_string_equal(f->last, "OK");
    assert_int_equal(f->nulls, 7);
    assert_int_equal(f->nulls_at_disconnect, 7);
    assert_int_equal(f->last_status, -ECONNRESET);
    (void)c; /* freed by itself after the callback */
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nulls, 7);
}

/* A reply longer than in_max closes the connection (counted); the command gets NULL. A command
 * past out_max is refused. */
static void test_bounds(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    cfg.in_max = 4096;
    cfg.out_max = 16384;
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    static char big[20000];
    memset(big, 'v', sizeof big);
    const char *set[] = {"SET", "rconn:big", big};
    size_t setlen[] = {3, 9, 10000};
    assert_int_equal(sl_rconn_command(f->c, on_reply, f, 3, set, setlen), 0);
    setlen[2] = sizeof big; /* more than out_max waiting */
    assert_int_equal(sl_rconn_command(f->c, on_reply, f, 3, set, setlen), -ENOBUFS);
    run_until(f, &f->replies, 1);
    assert_string_equal(f->last, "OK");
    const char *small[] = {"SET", "rconn:small", "s"}, *get[] = {"GET", "rconn:big"},
               *getsmall[] = {"GET", "rconn:small"};
    assert_int_equal(cmd(f, 3, small), 0);
    assert_int_equal(cmd(f, 2, getsmall), 0);
    assert_int_equal(cmd(f, 2, get), 0);
    assert_int_equal(cmd(f, 2, getsmall), 0);
    run_until(f, &f->disconnected, 1);
    assert_int_equal(f->replies, 3); /* SET, and the first small GET */
    assert_string_equal(f->last, "s");
    assert_int_equal(f->nulls, 2);
    assert_int_equal(f->last_status, -EMSGSIZE);
    assert_int_equal(atomic_load(&f->stats.oversized), 1);
}

/* An array reply counts 64 bytes per element against in_max, whatever its bytes on the wire: 40
 * integers (about 200 bytes) fit in 4096, 100 (about 500 bytes) do not. */
static void test_array_bound(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    cfg.in_max = 4096;
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *forty[] = {"EVAL", "local t = {} for i = 1, 40 do t[i] = 0 end return t", "0"};
    const char *hundred[] = {"EVAL", "local t = {} for i = 1, 100 do t[i] = 0 end return t",
                             "0"};
    assert_int_equal(cmd(f, 3, forty), 0);
    run_until(f, &f->replies, 1);
    assert_int_equal(cmd(f, 3, hundred), 0);
    run_until(f, &f->disconnected, 1);
    assert_int_equal(f->replies, 1);
    assert_int_equal(f->nulls, 1);
    assert_int_equal(f->last_status, -EMSGSIZE);
    assert_int_equal(atomic_load(&f->stats.oversized), 1);
}

/* A server that answers every command with an array header of 2^31 - 1 elements and nothing
 * after it: the connection closes at the header, before hiredis's reader would allocate the
 * element table (16 GiB; an ASan build aborts on such an allocation). */
static void on_header_written(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void on_header_read(uv_stream_t *cl, ssize_t n, const uv_buf_t *buf)
{
    free(buf->base);
    if (n <= 0)
        return;
    static char header[] = "*2147483647\r\n";
    uv_write_t *w = malloc(sizeof *w);
    uv_buf_t b = uv_buf_init(header, sizeof header - 1);
    uv_write(w, cl, &b, 1, on_header_written);
}

static void alloc_read(uv_handle_t *h, size_t size, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(size);
    buf->len = size;
}

static void on_header_accept(uv_stream_t *srv, int status)
{
    if (status < 0)
        return;
    uv_tcp_t *cl = malloc(sizeof *cl);
    uv_tcp_init(srv->loop, cl);
    if (uv_accept(srv, (uv_stream_t *)cl) == 0)
        uv_read_start((uv_stream_t *)cl, alloc_read, on_header_read);
    srv->data = cl; /* closed by the test */
}

static void test_array_header_bound(void **state)
{
    fx *f = *state;
    assert_int_equal(uv_tcp_init(&f->loop, &f->srv), 0);
    f->srv_open = true;
    f->srv.data = NULL;
    int port = sl_test_free_port();
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", port, &a);
    assert_int_equal(uv_tcp_bind(&f->srv, (const struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&f->srv, 8, on_header_accept), 0);
    sl_rconn_config cfg = base_cfg(f, port);
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    run_until(f, &f->connected, 1);
    const char *ping[] = {"PING"};
    assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->disconnected, 1);
    assert_int_equal(f->nulls, 1);
    assert_int_equal(f->last_status, -EMSGSIZE);
    assert_int_equal(atomic_load(&f->stats.oversized), 1);
    if (f->srv.data)
        uv_close((uv_handle_t *)f->srv.data, (uv_close_cb)free);
}

/* Freed from inside a reply's callback: deferred to its return; the rest get NULL once. */
static void free_in_cb(sl_rconn *c, void *reply, void *priv)
{
    fx *f = priv;
    if (reply)
        f->replies++;
    sl_rconn_free(c);
    f->c = NULL;
}

static void test_free_inside_callback(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *ping[] = {"PING"};
    size_t len[] = {4};
    assert_int_equal(sl_rconn_command(f->c, free_in_cb, f, 1, ping, len), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->replies, 1);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    assert_int_equal(f->nulls, 4);
    assert_int_equal(f->replies, 1);
}

/* A command queued from a prepare callback (after the connection's own handles ran, right before
 * the loop would sleep) still goes out in that iteration: the loop does not sleep on it. */
static void queue_ping(uv_prepare_t *h)
{
    fx *f = h->data;
    uv_prepare_stop(h);
    const char *ping[] = {"PING"};
    assert_int_equal(cmd(f, 1, ping), 0);
}

static void test_queued_before_the_loop_sleeps(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    sl_rconn_config cfg = base_cfg(f, f->redis.port);
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    run_until(f, &f->connected, 1);
    uv_prepare_t prep;
    uv_prepare_init(&f->loop, &prep);
    prep.data = f;
    uv_prepare_start(&prep, queue_ping);
    run_until(f, &f->replies, 1); /* would block in the poll for good if it slept */
    assert_string_equal(f->last, "PONG");
    uv_close((uv_handle_t *)&prep, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* closed before it goes out of scope */
}

/* ---- TLS ---------------------------------------------------------------------------------------- */

static sl_tls_ctx *client_ctx(const char *ca, const char *cert, const char *key)
{
    sl_tls_config tc = {.ca_file = path(ca), .cert_file = cert ? path(cert) : NULL,
                        .key_file = key ? path(key) : NULL};
    sl_tls_ctx *ctx;
    char err[256];
    assert_int_equal(sl_tls_ctx_new(&ctx, &tc, err, sizeof err), 0);
    return ctx;
}

/* TLS with the server's certificate checked (CA and name): pipelined replies in order; a name the
 * certificate does not carry, and a CA that did not sign it, fail the connect (counted). */
static void test_tls(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    tlsredis t;
    tlsredis_start(&t, false);
    sl_tls_ctx *ctx = client_ctx("ca.pem", NULL, NULL);
    sl_rconn_config cfg = base_cfg(f, t.tls_port);
    cfg.tls = ctx;
    cfg.server_name = "localhost";
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *del[] = {"DEL", "rconn:t"}, *incr[] = {"INCR", "rconn:t"};
    assert_int_equal(cmd(f, 2, del), 0);
    f->next = 0;
    for (int i = 0; i < NCMD; i++)
        assert_int_equal(cmd(f, 2, incr), 0);
    run_until(f, &f->replies, NCMD + 1);
    assert_int_equal(f->connected, 1);
    assert_false(f->out_of_order);
    sl_rconn_free(f->c);
    f->c = NULL;

    cfg.server_name = NULL; /* 127.0.0.1: not among the certificate's names */
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *ping[] = {"PING"};
    assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->connect_failed, 1);
    assert_int_equal(f->nulls, 1);
    assert_null(f->c);

    sl_tls_ctx *wrong = client_ctx("wrongca.pem", NULL, NULL);
    cfg.tls = wrong;
    cfg.server_name = "localhost";
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->connect_failed, 2);
    assert_int_equal(f->nulls, 2);
    assert_int_equal(f->last_status, -EPROTO);
    assert_int_equal(atomic_load(&f->stats.tls_failed), 2);
    sl_tls_ctx_unref(wrong);
    sl_tls_ctx_unref(ctx);
    tlsredis_stop(&t);
}

/* A server that accepts and closes before the handshake ends (a plain TCP port, a proxy that
 * refuses): the connect fails, the command gets NULL, and it counts as a TLS failure. */
static void on_close_accept(uv_stream_t *srv, int status)
{
    if (status < 0)
        return;
    uv_tcp_t *cl = malloc(sizeof *cl);
    uv_tcp_init(srv->loop, cl);
    uv_accept(srv, (uv_stream_t *)cl);
    uv_close((uv_handle_t *)cl, (uv_close_cb)free); /* accepted or not: closed at once */
}

static void test_tls_closed_in_handshake(void **state)
{
    fx *f = *state;
    assert_int_equal(uv_tcp_init(&f->loop, &f->srv), 0);
    f->srv_open = true;
    int port = sl_test_free_port();
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", port, &a);
    assert_int_equal(uv_tcp_bind(&f->srv, (const struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&f->srv, 8, on_close_accept), 0);
    sl_tls_ctx *ctx = client_ctx("ca.pem", NULL, NULL);
    sl_rconn_config cfg = base_cfg(f, port);
    cfg.tls = ctx;
    cfg.server_name = "localhost";
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *ping[] = {"PING"};
    assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->connect_failed, 1);
    assert_int_equal(f->nulls, 1);
    sl_tls_ctx_unref(ctx);
    assert_int_equal(atomic_load(&f->stats.tls_failed), 1);
}

/* tls-auth-clients yes: with the client certificate the commands are answered; without it the
 * server ends the session and the command gets NULL. */
static void test_tls_client_cert(void **state)
{
    fx *f = *state;
    NEED_REDIS();
    tlsredis t;
    tlsredis_start(&t, true);
    sl_tls_ctx *ctx = client_ctx("ca.pem", "client.pem", "client.key");
    sl_rconn_config cfg = base_cfg(f, t.tls_port);
    cfg.tls = ctx;
    cfg.server_name = "localhost";
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    const char *ping[] = {"PING"};
    assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->replies, 1);
    assert_string_equal(f->last, "PONG");
    sl_rconn_free(f->c);
    f->c = NULL;
    sl_tls_ctx_unref(ctx);

    sl_tls_ctx *anon = client_ctx("ca.pem", NULL, NULL);
    cfg.tls = anon;
    assert_int_equal(sl_rconn_new(&cfg, &f->c), 0);
    assert_int_equal(cmd(f, 1, ping), 0);
    run_until(f, &f->nulls, 1);
    assert_int_equal(f->replies, 1);
    assert_int_equal(f->connect_failed + f->disconnected, 1);
    sl_tls_ctx_unref(anon);
    tlsredis_stop(&t);
}

/* The reader alone, as deliver drives it: replies in order however the bytes are cut, and the
 * two bounds (bytes on the wire, announced elements) per reply. */
static void test_reader(void **state)
{
    (void)state;
    sl_rconn_reader *r;
    void *reply;
    const char *why;
    assert_int_equal(sl_rconn_reader_new(0, &r), 0);
    static const char two[] = "*2\r\n:1\r\n$3\r\nabc\r\n+OK\r\n";
    for (size_t i = 0; i < sizeof two - 1; i++) {
        assert_int_equal(sl_rconn_reader_feed(r, (const uint8_t *)two + i, 1), 0);
        int rc = sl_rconn_reader_next(r, &reply, &why);
        if (i == 16 || i == 21) { /* the last byte of each reply */
            assert_int_equal(rc, 1);
            redisReply *rep = reply;
            assert_int_equal(rep->type, i == 16 ? REDIS_REPLY_ARRAY : REDIS_REPLY_STATUS);
            freeReplyObject(reply);
        } else {
            assert_int_equal(rc, 0);
            assert_null(reply);
        }
    }
    sl_rconn_reader_free(r);

    /* 128 bytes: at most 2 elements announced per reply, at most 128 bytes per reply */
    static const struct {
        const char *wire;
        int rc;
    } cases[] = {
        {"*2\r\n:1\r\n:2\r\n", 1},
        {"*3\r\n", -EMSGSIZE},
        {"*1\r\n*1\r\n*1\r\n", -EMSGSIZE},
        {"$200\r\n", 0},
        {"?x\r\n", -EPROTO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_int_equal(sl_rconn_reader_new(128, &r), 0);
        assert_int_equal(sl_rconn_reader_feed(r, (const uint8_t *)cases[i].wire,
                                              strlen(cases[i].wire)), 0);
        int rc = sl_rconn_reader_next(r, &reply, &why);
        assert_int_equal(rc, cases[i].rc);
        if (rc == 1)
            freeReplyObject(reply);
        if (rc == -EPROTO)
            assert_non_null(why);
        sl_rconn_reader_free(r);
    }
    /* a bulk string past the bound fails once its bytes so far pass it */
    assert_int_equal(sl_rconn_reader_new(128, &r), 0);
    char big[160];
    memset(big, 'x', sizeof big);
    assert_int_equal(sl_rconn_reader_feed(r, (const uint8_t *)"$200\r\n", 6), 0);
    assert_int_equal(sl_rconn_reader_next(r, &reply, &why), 0);
    assert_int_equal(sl_rconn_reader_feed(r, (const uint8_t *)big, sizeof big), 0);
    assert_int_equal(sl_rconn_reader_next(r, &reply, &why), -EMSGSIZE);
    sl_rconn_reader_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_reader),
        cmocka_unit_test_setup_teardown(test_pipeline_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_answers_null, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_closes_mid_pipeline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_array_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_array_header_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_inside_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_before_the_loop_sleeps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_closed_in_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tls_client_cert, setup, teardown),
    };
    return sl_skip_exit(cmocka_run_group_tests(tests, sl_testcerts_setup, sl_testcerts_teardown));
}

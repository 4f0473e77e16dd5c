/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/1.1 over the sans-I/O connection: parsing, answers in order, limits, drain, late answers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/conn.h"
#include "net/exchange.h"

/* 2023-11-14T22:13:20Z */
#define T0 1700000000000LL

typedef struct tstate {
    bool defer;
    sl_exchange *held[128];
    int nheld;
    int calls;
    int cancels;
    int wakes;
    char method[16];
    char path[256];
    char xtest[64];
    bool host_found;
    char body[8192];
    size_t body_len;
    bool body_nul;
} tstate;

static void on_cancel(void *ud, sl_exchange *ex)
{
    ((tstate *)ud)->cancels++;
}

static void answer_echo(sl_exchange *ex)
{
    const sl_http_request *r = sl_exchange_request(ex);
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s %s %zu", r->method, r->path, r->body_len);
    sl_http_header h[2] = {SL_HTTP_HEADER("content-type", "text/plain"),
                           SL_HTTP_HEADER("X-Answer", "yes")};
    sl_http_response resp = {.status = 200, .headers = h, .nheaders = 2, .body = buf,
                             .body_len = (size_t)n};
    sl_exchange_respond(ex, &resp);
}

static void handler(void *ud, sl_exchange *ex)
{
    tstate *t = ud;
    const sl_http_request *r = sl_exchange_request(ex);
    t->calls++;
    snprintf(t->method, sizeof t->method, "%s", r->method);
    snprintf(t->path, sizeof t->path, "%s", r->path);
    const sl_http_header *x = sl_http_header_find(r, "x-test");
    snprintf(t->xtest, sizeof t->xtest, "%s", x ? x->value : "");
    t->host_found = sl_http_header_find(r, "HOST") != NULL;
    t->body_len = r->body_len < sizeof t->body ? r->body_len : sizeof t->body;
    memcpy(t->body, r->body, t->body_len);
    t->body_nul = r->body[r->body_len] == '\0';
    assert_int_equal(r->proto, SL_HTTP_1);
    assert_false(r->grpc);
    if (t->defer) {
        sl_exchange_set_cancel(ex, on_cancel, t);
        t->held[t->nheld++] = ex;
        return;
    }
    answer_echo(ex);
}

static void on_wake(void *ud)
{
    ((tstate *)ud)->wakes++;
}

typedef struct fix {
    tstate t;
    sl_http_ctx *ctx;
    sl_conn *c;
} fix;

static fix *fix_new(const sl_http_limits *lim)
{
    fix *f = calloc(1, sizeof *f);
    f->ctx = sl_http_ctx_new(lim, handler, &f->t);
    sl_http_ctx_set_now(f->ctx, T0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(4242)};
    sin.sin_addr.s_addr = htonl(0x7f000001);
    f->c = sl_conn_new(f->ctx, (struct sockaddr *)&sin, on_wake, &f->t);
    return f;
}

static void fix_free(fix *f)
{
    if (f->c)
        sl_conn_free(f->c);
    sl_http_ctx_free(f->ctx);
    free(f);
}

static void feed(fix *f, const char *s)
{
    sl_conn_feed(f->c, s, strlen(s));
}

/* Take the connection's output as a string. */
static char *take(fix *f)
{
    sl_buf *o = sl_conn_out(f->c);
    char *s = malloc(o->len + 1);
    memcpy(s, o->data, o->len);
    s[o->len] = 0;
    sl_buf_reset(o);
    return s;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static void test_simple_get(void **state)
{
    fix *f = fix_new(NULL);
    feed(f, "GET /hello?x=1 HTTP/1.1\r\nHost: a\r\nX-Test: Value\r\n\r\n");
    assert_int_equal(sl_conn_proto(f->c), SL_HTTP_1);
    assert_int_equal(f->t.calls, 1);
    assert_string_equal(f->t.method, "GET");
    assert_string_equal(f->t.path, "/hello?x=1");
    assert_string_equal(f->t.xtest, "Value");
    assert_true(f->t.host_found);
    char *o = take(f);
    assert_string_equal(o, "HTTP/1.1 200 OK\r\nDate: Tue, 14 Nov 2023 22:13:20 GMT\r\n"
                           "Content-Length: 16\r\ncontent-type: text/plain\r\nX-Answer: yes\r\n\r\n"
                           "GET /hello?x=1 0");
    free(o);
    assert_false(sl_conn_done(f->c));
    assert_true(sl_conn_wants_read(f->c));
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    assert_int_equal(f->t.wakes, 0); /* answered inside feed: no wake needed */
    sl_net_stats st = {0};
    sl_http_ctx_stats(f->ctx, &st);
    assert_int_equal(st.requests_h1, 1);
    assert_int_equal(st.protocol_errors, 0);
    fix_free(f);
}

static void test_request_view_peer_and_method(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    feed(f, "DELETE /k HTTP/1.1\r\nHost: a\r\nEmpty:\r\n\r\n");
    assert_int_equal(f->t.nheld, 1);
    sl_exchange *ex = f->t.held[0];
    const sl_http_request *r = sl_exchange_request(ex);
    assert_string_equal(r->method, "DELETE");
    assert_int_equal(r->nheaders, 2);
    const sl_http_header *e = sl_http_header_find(r, "empty");
    assert_non_null(e);
    assert_int_equal(e->value_len, 0);
    assert_string_equal(e->value, "");
    assert_null(sl_http_header_find(r, "absent"));
    assert_non_null(r->peer);
    assert_int_equal(r->peer->sa_family, AF_INET);
    assert_int_equal(ntohs(((const struct sockaddr_in *)r->peer)->sin_port), 4242);
    assert_int_equal(sl_exchange_now_ms(ex), T0);
    assert_null(sl_exchange_loop(ex));
    assert_true(sl_exchange_alive(ex));
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_BUSY);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 1);
    assert_int_equal(sl_exchange_respond_simple(ex, 204, NULL, NULL, 0), 0);
    char *o = take(f);
    assert_non_null(strstr(o, "HTTP/1.1 204 No Content\r\n"));
    assert_null(strstr(o, "Content-Length"));
    free(o);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 0);
    fix_free(f);
}

static void test_bodies(void **state)
{
    fix *f = fix_new(NULL);
    feed(f, "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
    assert_int_equal(f->t.calls, 1);
    assert_int_equal(f->t.body_len, 5);
    assert_memory_equal(f->t.body, "hello", 5);
    assert_true(f->t.body_nul);
    free(take(f));
    feed(f, "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\nabc\r\n4\r\ndefg\r\n0\r\nTrailer-X: t\r\n\r\n");
    assert_int_equal(f->t.calls, 2);
    assert_int_equal(f->t.body_len, 7);
    assert_memory_equal(f->t.body, "abcdefg", 7);
    assert_true(f->t.body_nul);
    char *o = take(f);
    assert_non_null(strstr(o, "POST /c 7"));
    free(o);
    fix_free(f);
}

static const char pipelined[] =
    "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
    "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz"
    "POST /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";

static void test_pipelining_out_of_order(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    feed(f, pipelined);
    assert_int_equal(f->t.nheld, 3);
    assert_int_equal(sl_conn_out(f->c)->len, 0);
    answer_echo(f->t.held[2]);
    assert_int_equal(sl_conn_out(f->c)->len, 0); /* /3 waits for /1 and /2 */
    assert_int_equal(f->t.wakes, 1);
    answer_echo(f->t.held[0]);
    char *o = take(f);
    assert_int_equal(count(o, "HTTP/1.1 200"), 1);
    assert_non_null(strstr(o, "GET /1 0"));
    free(o);
    answer_echo(f->t.held[1]);
    o = take(f);
    assert_int_equal(count(o, "HTTP/1.1 200"), 2);
    char *a = strstr(o, "POST /2 3"), *b = strstr(o, "POST /3 2");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b);
    free(o);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    fix_free(f);
}

/* The same bytes fed whole and one byte at a time give the same answers. */
static void test_split_feeding(void **state)
{
    fix *f = fix_new(NULL);
    feed(f, pipelined);
    char *whole = take(f);
    fix_free(f);
    f = fix_new(NULL);
    for (size_t i = 0; i < sizeof pipelined - 1; i++)
        sl_conn_feed(f->c, pipelined + i, 1);
    char *bytes = take(f);
    assert_string_equal(whole, bytes);
    assert_int_equal(f->t.calls, 3);
    free(whole);
    free(bytes);
    fix_free(f);
}

static void test_pipeline_backpressure(void **state)
{
    sl_http_limits lim = {.h1_max_pipeline = 2};
    fix *f = fix_new(&lim);
    f->t.defer = true;
    feed(f, "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n"
            "GET /4 HTTP/1.1\r\n\r\n");
    assert_int_equal(f->t.nheld, 2);
    assert_false(sl_conn_wants_read(f->c));
    answer_echo(f->t.held[0]);
    assert_int_equal(f->t.wakes, 1);
    sl_conn_pump(f->c); /* what the driver does on wake */
    assert_int_equal(f->t.nheld, 3);
    answer_echo(f->t.held[1]);
    sl_conn_pump(f->c);
    assert_int_equal(f->t.nheld, 4);
    assert_true(sl_conn_wants_read(f->c) == false); /* /3 and /4 still owed: pipeline full */
    answer_echo(f->t.held[3]);
    answer_echo(f->t.held[2]);
    sl_conn_pump(f->c);
    assert_true(sl_conn_wants_read(f->c));
    char *o = take(f);
    char *p1 = strstr(o, "GET /1"), *p2 = strstr(o, "GET /2"), *p3 = strstr(o, "GET /3"),
         *p4 = strstr(o, "GET /4");
    assert_true(p1 && p2 && p3 && p4);
    assert_true(p1 < p2 && p2 < p3 && p3 < p4);
    free(o);
    fix_free(f);
}

static void test_header_limits(void **state)
{
    sl_http_limits lim = {.max_header_bytes = 64, .max_headers = 3};
    fix *f = fix_new(&lim);
    char req[512];
    snprintf(req, sizeof req, "GET / HTTP/1.1\r\nX-Big: %0100d\r\n\r\n", 0);
    feed(f, req);
    assert_int_equal(f->t.calls, 0);
    char *o = take(f);
    assert_non_null(strstr(o, "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    assert_non_null(strstr(o, "Connection: close\r\n"));
    free(o);
    assert_true(sl_conn_done(f->c));
    assert_false(sl_conn_wants_read(f->c));
    fix_free(f);

    f = fix_new(&lim);
    feed(f, "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n");
    o = take(f);
    assert_non_null(strstr(o, "431"));
    free(o);
    sl_net_stats st = {0};
    sl_http_ctx_stats(f->ctx, &st);
    assert_int_equal(st.protocol_errors, 1);
    fix_free(f);

    /* A URL longer than the budget. */
    f = fix_new(&lim);
    snprintf(req, sizeof req, "GET /%0100d HTTP/1.1\r\n\r\n", 0);
    feed(f, req);
    o = take(f);
    assert_non_null(strstr(o, "431"));
    free(o);
    fix_free(f);
}

static void test_body_limits(void **state)
{
    sl_http_limits lim = {.max_body_bytes = 10};
    fix *f = fix_new(&lim);
    feed(f, "POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n");
    char *o = take(f);
    assert_non_null(strstr(o, "HTTP/1.1 413 Content Too Large\r\n"));
    assert_non_null(strstr(o, "Connection: close"));
    free(o);
    assert_true(sl_conn_done(f->c));
    assert_int_equal(f->t.calls, 0);
    fix_free(f);

    f = fix_new(&lim);
    feed(f, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n");
    assert_false(sl_conn_done(f->c));
    feed(f, "8\r\n12345678\r\n0\r\n\r\n");
    o = take(f);
    assert_non_null(strstr(o, "413"));
    free(o);
    assert_true(sl_conn_done(f->c));
    assert_int_equal(f->t.calls, 0);
    fix_free(f);

    /* Exactly at the limit is fine. */
    f = fix_new(&lim);
    feed(f, "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
    assert_int_equal(f->t.calls, 1);
    assert_int_equal(f->t.body_len, 10);
    fix_free(f);
}

static void test_malformed(void **state)
{
    const char *bad[] = {
        "GARBAGE\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
        "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nBad\x01: x\r\n\r\n",
        "\x01\x02\x03\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fix *f = fix_new(NULL);
        feed(f, bad[i]);
        char *o = take(f);
        assert_non_null(strstr(o, "HTTP/1.1 400 Bad Request\r\n"));
        assert_non_null(strstr(o, "Connection: close\r\n"));
        free(o);
        assert_true(sl_conn_done(f->c));
        assert_int_equal(f->t.calls, 0);
        /* Input after the failure is ignored. */
        feed(f, "GET / HTTP/1.1\r\n\r\n");
        assert_int_equal(sl_conn_out(f->c)->len, 0);
        fix_free(f);
    }
}

/* An error answer waits behind the answers already owed. */
static void test_error_after_pending(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    feed(f, "GET /first HTTP/1.1\r\n\r\nNOT HTTP AT ALL\r\n\r\n");
    assert_int_equal(f->t.nheld, 1);
    assert_int_equal(sl_conn_out(f->c)->len, 0);
    assert_false(sl_conn_done(f->c));
    answer_echo(f->t.held[0]);
    char *o = take(f);
    char *a = strstr(o, "GET /first"), *b = strstr(o, "400 Bad Request");
    assert_true(a && b && a < b);
    /* The first answer keeps the connection, the error closes it. */
    assert_int_equal(count(o, "Connection: close"), 1);
    free(o);
    assert_true(sl_conn_done(f->c));
    fix_free(f);
}

static void test_http10_and_close(void **state)
{
    fix *f = fix_new(NULL);
    feed(f, "GET / HTTP/1.0\r\n\r\n");
    char *o = take(f);
    assert_non_null(strstr(o, "Connection: close\r\n"));
    free(o);
    assert_true(sl_conn_done(f->c));
    fix_free(f);

    f = fix_new(NULL);
    feed(f, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    o = take(f);
    assert_non_null(strstr(o, "Connection: keep-alive\r\n"));
    free(o);
    assert_false(sl_conn_done(f->c));
    fix_free(f);

    f = fix_new(NULL);
    feed(f, "GET /a HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
    assert_int_equal(f->t.calls, 1); /* nothing after a Connection: close request */
    o = take(f);
    assert_non_null(strstr(o, "Connection: close\r\n"));
    free(o);
    assert_true(sl_conn_done(f->c));
    fix_free(f);
}

static void test_head(void **state)
{
    fix *f = fix_new(NULL);
    feed(f, "HEAD /h HTTP/1.1\r\n\r\n");
    char *o = take(f);
    /* The length of the body a GET would get ("HEAD /h 0"), and no body. */
    assert_non_null(strstr(o, "Content-Length: 9\r\n"));
    size_t n = strlen(o);
    assert_true(n > 4 && !strcmp(o + n - 4, "\r\n\r\n"));
    free(o);
    fix_free(f);
}

static void test_late_answer_after_close(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    feed(f, "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n");
    assert_int_equal(f->t.nheld, 2);
    answer_echo(f->t.held[1]); /* waits in its exchange for /1 */
    sl_conn_free(f->c);
    f->c = NULL;
    assert_int_equal(f->t.cancels, 1);
    assert_false(sl_exchange_alive(f->t.held[0]));
    assert_int_equal(sl_exchange_respond_simple(f->t.held[0], 200, NULL, "x", 1), -ENOTCONN);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 0);
    fix_free(f);
}

static void test_expect_continue(void **state)
{
    fix *f = fix_new(NULL);
    feed(f, "POST /e HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    char *o = take(f);
    assert_string_equal(o, "HTTP/1.1 100 Continue\r\n\r\n");
    free(o);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_READING);
    feed(f, "body");
    o = take(f);
    assert_non_null(strstr(o, "HTTP/1.1 200 OK"));
    assert_non_null(strstr(o, "POST /e 4"));
    free(o);
    fix_free(f);
}

static void test_drain(void **state)
{
    fix *f = fix_new(NULL);
    sl_conn_shutdown(f->c); /* nothing received yet */
    assert_true(sl_conn_done(f->c));
    fix_free(f);

    f = fix_new(NULL);
    feed(f, "GET / HTTP/1.1\r\n\r\n");
    free(take(f));
    sl_conn_shutdown(f->c); /* idle keep-alive */
    assert_true(sl_conn_done(f->c));
    fix_free(f);

    f = fix_new(NULL);
    f->t.defer = true;
    feed(f, "GET /busy HTTP/1.1\r\n\r\nGET /part");
    sl_conn_shutdown(f->c);
    assert_false(sl_conn_done(f->c));
    feed(f, " HTTP/1.1\r\n\r\n"); /* the request being received completes */
    assert_int_equal(f->t.nheld, 2);
    answer_echo(f->t.held[0]);
    assert_false(sl_conn_done(f->c));
    answer_echo(f->t.held[1]);
    char *o = take(f);
    assert_int_equal(count(o, "HTTP/1.1 200"), 2);
    assert_int_equal(count(o, "Connection: close"), 1);
    assert_true(strstr(o, "Connection: close") > strstr(o, "GET /busy"));
    free(o);
    assert_true(sl_conn_done(f->c));
    fix_free(f);
}

static void test_eof_after_request(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    feed(f, "GET /x HTTP/1.1\r\n\r\nGET /cut");
    sl_conn_eof(f->c);
    assert_false(sl_conn_done(f->c));
    answer_echo(f->t.held[0]);
    char *o = take(f);
    assert_non_null(strstr(o, "GET /x"));
    assert_non_null(strstr(o, "Connection: close"));
    free(o);
    assert_true(sl_conn_done(f->c));
    assert_int_equal(f->t.calls, 1);
    fix_free(f);
}

static void test_bad_handler_answer(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    feed(f, "GET / HTTP/1.1\r\n\r\n");
    sl_http_response r = {.status = 42};
    assert_int_equal(sl_exchange_respond(f->t.held[0], &r), -EINVAL);
    char *o = take(f);
    assert_non_null(strstr(o, "HTTP/1.1 500 "));
    free(o);
    /* Header injection attempts are dropped. */
    feed(f, "GET / HTTP/1.1\r\n\r\n");
    sl_http_header h[2] = {SL_HTTP_HEADER("x-evil", "a\r\nSet-Cookie: b"),
                           SL_HTTP_HEADER("x-fine", "c")};
    r = (sl_http_response){.status = 200, .headers = h, .nheaders = 2};
    assert_int_equal(sl_exchange_respond(f->t.held[1], &r), 0);
    o = take(f);
    assert_null(strstr(o, "Set-Cookie"));
    assert_non_null(strstr(o, "x-fine: c\r\n"));
    free(o);
    fix_free(f);
}

static void test_sniffing(void **state)
{
    /* A prefix of the HTTP/2 preface keeps the connection undecided, then plain HTTP/1.1. */
    fix *f = fix_new(NULL);
    feed(f, "P");
    assert_int_equal(sl_conn_proto(f->c), 0);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_READING);
    feed(f, "OST /s HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_int_equal(sl_conn_proto(f->c), SL_HTTP_1);
    assert_int_equal(f->t.calls, 1);
    assert_string_equal(f->t.path, "/s");
    fix_free(f);

    /* Looks like the preface up to the version, then it is not: HTTP/1.1 (and a bad request). */
    f = fix_new(NULL);
    feed(f, "PRI * HTTP/1.1\r\n\r\n");
    assert_int_equal(sl_conn_proto(f->c), SL_HTTP_1);
    feed(f, "SOMETHING ELSE");
    char *o = take(f);
    assert_non_null(strstr(o, "HTTP/1.1 4"));
    free(o);
    fix_free(f);
}

static void test_upgrade_declined_connect_ends(void **state)
{
    /* An ignored Upgrade keeps HTTP/1.1 going on the connection. */
    fix *f = fix_new(NULL);
    feed(f, "GET /u HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\n\r\n"
            "GET /next HTTP/1.1\r\n\r\n");
    assert_int_equal(f->t.calls, 2);
    assert_string_equal(f->t.path, "/next");
    char *o = take(f);
    assert_int_equal(count(o, "HTTP/1.1 200"), 2);
    assert_null(strstr(o, "Connection: close"));
    free(o);
    assert_false(sl_conn_done(f->c));
    fix_free(f);

    /* After CONNECT come tunnel bytes, not requests. */
    f = fix_new(NULL);
    feed(f, "CONNECT example.test:443 HTTP/1.1\r\n\r\n\x16\x03\x01 tls bytes");
    assert_int_equal(f->t.calls, 1);
    assert_string_equal(f->t.method, "CONNECT");
    o = take(f);
    assert_int_equal(count(o, "HTTP/1.1 200"), 1);
    assert_non_null(strstr(o, "Connection: close"));
    free(o);
    assert_true(sl_conn_done(f->c));
    fix_free(f);
}

static void test_output_high_water(void **state)
{
    /* Unwritten output above the mark pauses parsing; writing it and pumping resumes. */
    sl_http_limits lim = {.out_high_water = 100};
    fix *f = fix_new(&lim);
    feed(f, "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n");
    assert_int_equal(f->t.calls, 1);
    assert_true(sl_conn_has_backlog(f->c));
    assert_false(sl_conn_wants_read(f->c));
    int rounds = 0;
    char all[4096] = "";
    while (sl_conn_has_backlog(f->c)) {
        char *o = take(f); /* the driver wrote it */
        strcat(all, o);
        free(o);
        sl_conn_pump(f->c);
        assert_true(++rounds < 10);
    }
    char *o = take(f);
    strcat(all, o);
    free(o);
    assert_int_equal(f->t.calls, 3);
    assert_int_equal(rounds, 2);
    char *p1 = strstr(all, "GET /1"), *p2 = strstr(all, "GET /2"), *p3 = strstr(all, "GET /3");
    assert_true(p1 && p2 && p3 && p1 < p2 && p2 < p3);
    assert_true(sl_conn_wants_read(f->c));
    fix_free(f);
}

static void test_buffer_budget(void **state)
{
    /* Held request bytes over the budget stop parsing until answers free them. */
    sl_http_limits lim = {.conn_buffer_bytes = 1};
    fix *f = fix_new(&lim);
    f->t.defer = true;
    feed(f, "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n");
    assert_int_equal(f->t.nheld, 1);
    assert_false(sl_conn_wants_read(f->c));
    answer_echo(f->t.held[0]);
    sl_conn_pump(f->c);
    assert_int_equal(f->t.nheld, 2);
    answer_echo(f->t.held[1]);
    fix_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple_get),
        cmocka_unit_test(test_request_view_peer_and_method),
        cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_pipelining_out_of_order),
        cmocka_unit_test(test_split_feeding),
        cmocka_unit_test(test_pipeline_backpressure),
        cmocka_unit_test(test_header_limits),
        cmocka_unit_test(test_body_limits),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_error_after_pending),
        cmocka_unit_test(test_http10_and_close),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_late_answer_after_close),
        cmocka_unit_test(test_expect_continue),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_eof_after_request),
        cmocka_unit_test(test_bad_handler_answer),
        cmocka_unit_test(test_sniffing),
        cmocka_unit_test(test_upgrade_declined_connect_ends),
        cmocka_unit_test(test_output_high_water),
        cmocka_unit_test(test_buffer_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

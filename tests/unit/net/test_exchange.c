/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exchanges and the per-loop context (net/exchange.c), driven the way h1.c and h2.c drive them:
 * the test is the owning connection (its respond op records what it would send) and the handler.
 * Checked: limits get their defaults and clamps; the request view points into the arena, with a
 * NUL past the body and case-insensitive header lookup; a dispatched exchange is answered once
 * (a second answer is refused), a late answer after the client left is a no-op that still
 * releases, the cancel callback runs once; a bad status becomes a 500; the gRPC answers carry
 * content-type, grpc-status and a percent-encoded grpc-message capped at 1 KiB; the net layer's
 * own errors answer gRPC requests with grpc-status; exchanges come back from the pool without
 * keeping big buffers; a ctx freed with exchanges out lives until the last one is released; the
 * cached clock and Date line, the counters and the small helpers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/exchange.h"
#include "sluice/clock.h"

/* ---- the owning connection: records the last response it was asked to send ---- */

typedef struct sent {
    int calls;
    int status;
    char headers[4096];   /* "name: value\n" each */
    char trailers[2048];
    char body[4096];
    size_t body_len;
    size_t ntrailers;
} sent;

static void join_fields(char *out, size_t cap, const sl_http_header *h, size_t n)
{
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(out + off, cap - off, "%.*s: %.*s\n", (int)h[i].name_len,
                                h[i].name, (int)h[i].value_len, h[i].value);
}

static int owner_respond(void *owner, sl_exchange *ex, const sl_http_response *r)
{
    (void)ex;
    sent *s = owner;
    s->calls++;
    s->status = r->status;
    join_fields(s->headers, sizeof s->headers, r->headers, r->nheaders);
    join_fields(s->trailers, sizeof s->trailers, r->trailers, r->ntrailers);
    s->ntrailers = r->ntrailers;
    s->body_len = r->body_len < sizeof s->body ? r->body_len : sizeof s->body;
    if (s->body_len)
        memcpy(s->body, r->body, s->body_len);
    return 0;
}

static const sl_exchange_ops owner_ops = {.respond = owner_respond};

/* ---- the handler: keeps the exchange so the test answers it ---- */

typedef struct handler_state {
    int calls;
    sl_exchange *held;
    int cancels;
} handler_state;

static void handler(void *ud, sl_exchange *ex)
{
    handler_state *h = ud;
    h->calls++;
    h->held = ex;
}

static void on_cancel(void *ud, sl_exchange *ex)
{
    (void)ex;
    ((handler_state *)ud)->cancels++;
}

/* Store a request the way a protocol module does: bytes in the arena, offsets recorded. */
static void store_request(sl_exchange *ex, const char *method, const char *path,
                          const char *const *hdrs, size_t nh, const char *body)
{
    int64_t m = sl_exchange_put(ex, method, strlen(method) + 1);
    int64_t p = sl_exchange_put(ex, path, strlen(path) + 1);
    assert_true(m >= 0 && p >= 0);
    ex->method_off = (uint32_t)m;
    ex->method_len = (uint32_t)strlen(method);
    ex->path_off = (uint32_t)p;
    ex->path_len = (uint32_t)strlen(path);
    for (size_t i = 0; i < nh; i++) {
        size_t nl = strlen(hdrs[2 * i]), vl = strlen(hdrs[2 * i + 1]);
        int64_t n = sl_exchange_put(ex, hdrs[2 * i], nl + 1);
        int64_t v = sl_exchange_put(ex, hdrs[2 * i + 1], vl + 1);
        assert_true(n >= 0 && v >= 0);
        assert_int_equal(sl_exchange_add_header(ex, (uint32_t)n, (uint32_t)nl, (uint32_t)v,
                                                (uint32_t)vl), 0);
    }
    if (body) {
        int64_t b = sl_exchange_put(ex, body, strlen(body));
        assert_true(b >= 0);
        ex->body_off = (uint32_t)b;
        ex->body_len = strlen(body);
    }
}

/* A dispatched exchange with a small POST, owned by `s`, handled into `h`. */
static sl_exchange *dispatched(sl_http_ctx *ctx, sent *s, handler_state *h, bool grpc)
{
    sl_exchange *ex = sl_exchange_new(ctx, &owner_ops, s);
    assert_non_null(ex);
    static const char *const hdrs[] = {"Content-Type", "text/plain", "X-Test", "one",
                                       "x-test", "two"};
    store_request(ex, "POST", "/v1/x?q=1", hdrs, 3, "hello");
    sl_exchange_finish_request(ex, grpc ? SL_HTTP_2 : SL_HTTP_1);
    ex->req.grpc = grpc;
    sl_exchange_dispatch(ex);
    assert_ptr_equal(h->held, ex);
    return ex;
}

/* ---- tests ---- */

static void test_limits_defaults_and_clamps(void **state)
{
    (void)state;
    sl_http_limits d;
    sl_http_limits_defaults(&d);
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, NULL);
    assert_non_null(ctx);
    const sl_http_limits *def = sl_http_ctx_limits(ctx);
    assert_int_equal(def->max_header_bytes, 16 * 1024);
    assert_int_equal(def->max_headers, 100);
    assert_int_equal(def->max_body_bytes, (1u << 20) + 64);
    assert_int_equal(def->h1_max_pipeline, 64);
    assert_int_equal(def->h2_max_streams, 256);
    assert_int_equal(def->h2_window, 1u << 20);
    assert_int_equal(def->conn_buffer_bytes, 8u << 20);
    assert_int_equal(def->out_high_water, 1u << 20);
    assert_int_equal(d.max_body_bytes, def->max_body_bytes);
    sl_http_ctx_free(ctx);

    sl_http_limits l = {.max_headers = 7, .h2_window = 100, .max_body_bytes = (size_t)1 << 40,
                        .max_header_bytes = (size_t)1 << 30};
    ctx = sl_http_ctx_new(&l, handler, NULL);
    const sl_http_limits *got = sl_http_ctx_limits(ctx);
    assert_int_equal(got->max_headers, 7);               /* kept */
    assert_int_equal(got->h2_max_streams, d.h2_max_streams); /* zero: the default */
    assert_int_equal(got->h2_window, 65535);             /* HTTP/2's floor */
    assert_int_equal(got->max_body_bytes, (size_t)1 << 30); /* 32-bit arena offsets */
    assert_int_equal(got->max_header_bytes, (size_t)1 << 24);
    sl_http_ctx_free(ctx);

    l = (sl_http_limits){.h2_window = 0xffffffffu};
    ctx = sl_http_ctx_new(&l, handler, NULL);
    assert_int_equal(sl_http_ctx_limits(ctx)->h2_window, 0x7fffffff);
    sl_http_ctx_free(ctx);
}

static void test_request_view(void **state)
{
    (void)state;
    handler_state h = {0};
    sent s = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);
    sl_exchange *ex = dispatched(ctx, &s, &h, false);
    const sl_http_request *r = sl_exchange_request(ex);
    assert_string_equal(r->method, "POST");
    assert_int_equal(r->method_len, 4);
    assert_string_equal(r->path, "/v1/x?q=1");
    assert_int_equal(r->nheaders, 3);
    assert_int_equal(r->body_len, 5);
    assert_memory_equal(r->body, "hello", 5);
    assert_int_equal(r->body[5], '\0'); /* text parsers may take the body as a C string */
    assert_int_equal(r->proto, SL_HTTP_1);
    assert_null(r->peer);
    /* lookup ignores case and finds the first of repeated names */
    const sl_http_header *x = sl_http_header_find(r, "X-TEST");
    assert_non_null(x);
    assert_string_equal(x->value, "one");
    assert_non_null(sl_http_header_find(r, "content-type"));
    assert_null(sl_http_header_find(r, "x-absent"));
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_null(sl_http_header_find(r, longname));
    assert_int_equal(sl_exchange_respond_simple(ex, 204, NULL, NULL, 0), 0);
    sl_exchange_unref(ex); /* the owner's reference */

    /* a request refused at its first bytes has stored nothing: an empty view, not NULLs */
    ex = sl_exchange_new(ctx, &owner_ops, &s);
    sl_exchange_finish_request(ex, SL_HTTP_1);
    r = sl_exchange_request(ex);
    assert_string_equal(r->method, "");
    assert_string_equal(r->path, "");
    assert_int_equal(r->nheaders, 0);
    assert_int_equal(r->body_len, 0);
    assert_non_null(r->body);
    sl_exchange_unref(ex);
    assert_int_equal(sl_http_ctx_pending(ctx), 0);
    sl_http_ctx_free(ctx);
}

static void test_header_count_limit(void **state)
{
    (void)state;
    sl_http_limits l = {.max_headers = 3};
    sl_http_ctx *ctx = sl_http_ctx_new(&l, handler, NULL);
    sent s = {0};
    sl_exchange *ex = sl_exchange_new(ctx, &owner_ops, &s);
    int64_t off = sl_exchange_put(ex, "a\0b", 4);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl_exchange_add_header(ex, (uint32_t)off, 1, (uint32_t)off + 2, 1), 0);
    assert_int_equal(sl_exchange_add_header(ex, (uint32_t)off, 1, (uint32_t)off + 2, 1), -E2BIG);
    sl_exchange_unref(ex);
    sl_http_ctx_free(ctx);
}

static void test_answer_once_and_pool(void **state)
{
    (void)state;
    handler_state h = {0};
    sent s = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);
    sl_exchange *ex = dispatched(ctx, &s, &h, false);
    assert_int_equal(h.calls, 1);
    assert_int_equal(sl_http_ctx_pending(ctx), 1);
    assert_true(sl_exchange_alive(ex));
    int user;
    sl_exchange_set_user(ex, &user);
    assert_ptr_equal(sl_exchange_user(ex), &user);

    sl_http_header hd = SL_HTTP_HEADER("x-answer", "yes");
    sl_http_response r = {.status = 200, .headers = &hd, .nheaders = 1, .body = "ok",
                          .body_len = 2};
    assert_int_equal(sl_exchange_respond(ex, &r), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.status, 200);
    assert_string_equal(s.headers, "x-answer: yes\n");
    assert_memory_equal(s.body, "ok", 2);
    assert_int_equal(sl_http_ctx_pending(ctx), 0);
    /* answered twice (the owner still holds it): refused, nothing sent */
    assert_int_equal(sl_exchange_respond(ex, &r), -EINVAL);
    assert_int_equal(s.calls, 1);
    assert_int_equal(sl_http_ctx_pending(ctx), 0);

    /* the owner lets go: back to the pool, handed out again, clean */
    sl_exchange_unref(ex);
    sl_exchange *again = sl_exchange_new(ctx, &owner_ops, &s);
    assert_ptr_equal(again, ex);
    assert_null(sl_exchange_user(again));
    assert_int_equal(again->nh, 0);
    assert_int_equal(again->arena.len, 0);

    /* a big request's buffer is not kept with the pooled exchange */
    char big[16 * 1024];
    memset(big, 'b', sizeof big);
    assert_true(sl_exchange_put(again, big, sizeof big) >= 0);
    sl_exchange_unref(again);
    sl_exchange *third = sl_exchange_new(ctx, &owner_ops, &s);
    assert_ptr_equal(third, ex);
    assert_int_equal(third->arena.alloc, 0);
    sl_exchange_unref(third);
    sl_http_ctx_free(ctx);
}

static void test_late_answer_after_client_left(void **state)
{
    (void)state;
    handler_state h = {0};
    sent s = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);
    sl_exchange *ex = dispatched(ctx, &s, &h, false);
    sl_exchange_set_cancel(ex, on_cancel, &h);
    /* the connection dies: it detaches and drops its reference */
    sl_exchange_detach(ex);
    assert_int_equal(h.cancels, 1);
    assert_false(sl_exchange_alive(ex));
    sl_exchange_detach(ex); /* twice is harmless: no second cancel */
    assert_int_equal(h.cancels, 1);
    sl_exchange_unref(ex);
    /* the handler's answer is a no-op that still releases the exchange */
    assert_int_equal(sl_exchange_respond_simple(ex, 200, "text/plain", "x", 1), -ENOTCONN);
    assert_int_equal(s.calls, 0);
    assert_int_equal(sl_http_ctx_pending(ctx), 0);
    sl_http_ctx_free(ctx);
}

static void test_bad_status_becomes_500(void **state)
{
    (void)state;
    handler_state h = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);
    const int bad[] = {99, 199, 600};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sent s = {0};
        sl_exchange *ex = dispatched(ctx, &s, &h, false);
        assert_int_equal(sl_exchange_respond_simple(ex, bad[i], NULL, NULL, 0), -EINVAL);
        assert_int_equal(s.calls, 1);
        assert_int_equal(s.status, 500);
        assert_string_equal(s.headers, "content-type: text/plain\n");
        sl_exchange_unref(ex);
    }
    /* too many trailers: the same */
    sent s = {0};
    sl_exchange *ex = dispatched(ctx, &s, &h, false);
    sl_http_header tr[SL_HTTP_MAX_TRAILERS + 1];
    for (size_t i = 0; i < SL_HTTP_MAX_TRAILERS + 1; i++)
        tr[i] = SL_HTTP_HEADER("x-t", "v");
    sl_http_response r = {.status = 200, .trailers = tr, .ntrailers = SL_HTTP_MAX_TRAILERS + 1};
    assert_int_equal(sl_exchange_respond(ex, &r), -EINVAL);
    assert_int_equal(s.status, 500);
    sl_exchange_unref(ex);
    sl_http_ctx_free(ctx);
}

static void test_grpc_answers(void **state)
{
    (void)state;
    handler_state h = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);

    sent s = {0};
    sl_exchange *ex = dispatched(ctx, &s, &h, true);
    static const uint8_t msg[] = {0, 0, 0, 0, 2, 8, 1};
    assert_int_equal(sl_exchange_respond_grpc(ex, msg, sizeof msg, 0, NULL), 0);
    assert_int_equal(s.status, 200);
    assert_string_equal(s.headers, "content-type: application/grpc\n");
    assert_int_equal(s.body_len, sizeof msg);
    assert_memory_equal(s.body, msg, sizeof msg);
    assert_string_equal(s.trailers, "grpc-status: 0\n");
    sl_exchange_unref(ex);

    /* an error with a message: percent-encoded (non-ASCII and '%') */
    memset(&s, 0, sizeof s);
    ex = dispatched(ctx, &s, &h, true);
    assert_int_equal(sl_exchange_respond_grpc(ex, NULL, 0, 5, "caf\xc3\xa9 100%"), 0);
    assert_string_equal(s.trailers, "grpc-status: 5\ngrpc-message: caf%C3%A9 100%25\n");
    sl_exchange_unref(ex);

    /* trailers-only: the status travels in the one HEADERS block, the message is cut at 1 KiB */
    memset(&s, 0, sizeof s);
    ex = dispatched(ctx, &s, &h, true);
    char longmsg[3000];
    memset(longmsg, 'm', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    assert_int_equal(sl_exchange_respond_grpc_status(ex, 13, longmsg), 0);
    assert_int_equal(s.status, 200);
    assert_int_equal(s.ntrailers, 0);
    assert_int_equal(s.body_len, 0);
    const char *m = strstr(s.headers, "grpc-message: ");
    assert_non_null(m);
    assert_int_equal(strcspn(m + 14, "\n"), 1024);
    assert_non_null(strstr(s.headers, "content-type: application/grpc\n"
                                      "grpc-accept-encoding: identity,deflate,gzip\n"
                                      "grpc-status: 13\n"));
    sl_exchange_unref(ex);

    /* no message: the status alone */
    memset(&s, 0, sizeof s);
    ex = dispatched(ctx, &s, &h, true);
    assert_int_equal(sl_exchange_respond_grpc_status(ex, 12, ""), 0);
    assert_string_equal(s.headers, "content-type: application/grpc\n"
                                   "grpc-accept-encoding: identity,deflate,gzip\n"
                                   "grpc-status: 12\n");
    sl_exchange_unref(ex);
    sl_http_ctx_free(ctx);
}

static void test_net_layer_errors(void **state)
{
    (void)state;
    handler_state h = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);
    sent s = {0};
    /* a plain request refused by the net layer (never dispatched): status and text */
    sl_exchange *ex = sl_exchange_new(ctx, &owner_ops, &s);
    sl_exchange_finish_request(ex, SL_HTTP_1);
    sl_exchange_respond_error(ex, 413, "body too large\n");
    assert_int_equal(h.calls, 0);
    assert_int_equal(s.status, 413);
    assert_string_equal(s.headers, "content-type: text/plain\n");
    assert_memory_equal(s.body, "body too large\n", 15);
    assert_int_equal(sl_http_ctx_pending(ctx), 0);
    sl_exchange_unref(ex);
    /* a gRPC one: HTTP 200 with grpc-status RESOURCE_EXHAUSTED, which gRPC clients read */
    memset(&s, 0, sizeof s);
    ex = sl_exchange_new(ctx, &owner_ops, &s);
    sl_exchange_finish_request(ex, SL_HTTP_2);
    ex->req.grpc = true;
    sl_exchange_respond_error(ex, 413, "too large");
    assert_int_equal(s.status, 200);
    assert_non_null(strstr(s.headers, "grpc-status: 8\ngrpc-message: too large\n"));
    sl_exchange_unref(ex);
    sl_http_ctx_free(ctx);
}

static void test_ctx_outlives_its_exchanges(void **state)
{
    (void)state;
    handler_state h = {0};
    sent s = {0};
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, &h);
    sl_exchange *ex = dispatched(ctx, &s, &h, false);
    sl_exchange *spare = sl_exchange_new(ctx, &owner_ops, &s);
    sl_exchange_unref(spare); /* one in the pool too */
    sl_exchange_detach(ex);
    sl_exchange_unref(ex);
    /* the worker stops while the handler still owes an answer: the ctx waits for it */
    sl_http_ctx_free(ctx);
    assert_int_equal(sl_exchange_now_ms(ex), ctx->now_ms); /* still readable */
    assert_int_equal(sl_exchange_respond_simple(ex, 200, NULL, NULL, 0), -ENOTCONN);
    /* the last release freed the ctx and the pool (ASan reports a leak or a use after free) */
}

static void test_clock_and_date_line(void **state)
{
    (void)state;
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, NULL);
    sl_http_ctx_set_now(ctx, 1700000000123LL);
    assert_int_equal(sl_http_ctx_now_ms(ctx), 1700000000123LL);
    size_t len;
    const char *d = sl_http_ctx_date_line(ctx, &len);
    assert_string_equal(d, "Date: Tue, 14 Nov 2023 22:13:20 GMT\r\n");
    assert_int_equal(len, strlen(d));
    sl_http_ctx_set_now(ctx, 1700000000999LL); /* same second: the cached line */
    assert_ptr_equal(sl_http_ctx_date_line(ctx, &len), d);
    assert_string_equal(d, "Date: Tue, 14 Nov 2023 22:13:20 GMT\r\n");
    sl_http_ctx_set_now(ctx, 0);
    assert_string_equal(sl_http_ctx_date_line(ctx, &len), "Date: Thu, 01 Jan 1970 00:00:00 GMT\r\n");
    sl_http_ctx_resync_clock(ctx); /* no loop: nothing to follow */
    assert_int_equal(sl_http_ctx_now_ms(ctx), 0);

    /* on a loop: the loop's clock plus the wall-clock offset, and the worker it serves */
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    sl_http_ctx_attach_loop(ctx, &loop, 3);
    int64_t before = sl_wall_ms();
    int64_t now = sl_http_ctx_now_ms(ctx);
    int64_t after = sl_wall_ms();
    assert_true(now >= before - 1 && now <= after + 1); /* the offset was taken just now */
    sent s = {0};
    sl_exchange *ex = sl_exchange_new(ctx, &owner_ops, &s);
    assert_ptr_equal(sl_exchange_loop(ex), &loop);
    assert_int_equal(sl_exchange_worker(ex), 3);
    assert_int_equal(sl_exchange_now_ms(ex), sl_http_ctx_now_ms(ctx));
    sl_exchange_unref(ex);
    sl_http_ctx_free(ctx);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* The wall-clock offset is the machine's, not the moment's: two contexts attached to one loop
 * a millisecond apart (every worker and every process on a machine) agree on `now`. Taken as
 * sl_wall_ms() - uv_now(loop) it moved with the moment of attaching, and two nodes sharing a
 * Redis store could judge a GCRA item at its boundary differently (test_redis's sublimit test). */
static void test_clock_offset_is_the_machines(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    sl_http_ctx *a = sl_http_ctx_new(NULL, handler, NULL);
    sl_http_ctx *b = sl_http_ctx_new(NULL, handler, NULL);
    sl_http_ctx_attach_loop(a, &loop, 0);
    /* let the wall clock pass the next millisecond (the loop's cached time stays) */
    int64_t t0 = sl_wall_ms();
    for (int i = 0; i < 100000000 && sl_wall_ms() < t0 + 2; i++)
        ;
    sl_http_ctx_attach_loop(b, &loop, 1);
    assert_int_equal(sl_http_ctx_now_ms(a), sl_http_ctx_now_ms(b));
    sl_http_ctx_resync_clock(b); /* no step of the wall clock: nothing to follow */
    assert_int_equal(sl_http_ctx_now_ms(a), sl_http_ctx_now_ms(b));
    sl_http_ctx_free(a);
    sl_http_ctx_free(b);
    assert_int_equal(uv_loop_close(&loop), 0);
}

static void test_counters_add_up(void **state)
{
    (void)state;
    sl_http_ctx *a = sl_http_ctx_new(NULL, handler, NULL);
    sl_http_ctx *b = sl_http_ctx_new(NULL, handler, NULL);
    sl_net_stat_add(a, SL_NET_REQUESTS_H1, 3);
    sl_net_stat_add(a, SL_NET_BYTES_IN, 100);
    sl_net_stat_add(b, SL_NET_REQUESTS_H1, 2);
    sl_net_stat_add(b, SL_NET_PROTOCOL_ERRORS, 1);
    sl_net_stats st = {0};
    sl_http_ctx_stats(a, &st);
    sl_http_ctx_stats(b, &st); /* summed over workers */
    assert_int_equal(st.requests_h1, 5);
    assert_int_equal(st.bytes_in, 100);
    assert_int_equal(st.protocol_errors, 1);
    assert_int_equal(st.requests_h2, 0);
    sl_http_ctx_free(a);
    sl_http_ctx_free(b);
}

static void test_helpers(void **state)
{
    (void)state;
    assert_string_equal(sl_http_reason(200), "OK");
    assert_string_equal(sl_http_reason(429), "Too Many Requests");
    assert_string_equal(sl_http_reason(503), "Service Unavailable");
    assert_string_equal(sl_http_reason(299), "Unknown");
    assert_true(sl_http_name_eq("Content-Type", 12, "content-type"));
    assert_false(sl_http_name_eq("Content-Typ", 11, "content-type"));
    assert_false(sl_http_name_eq("Content-Types", 13, "content-type"));
    assert_true(sl_http_hop_header("Connection", 10));
    assert_true(sl_http_hop_header("TE", 2));
    assert_true(sl_http_hop_header("transfer-encoding", 17));
    assert_true(sl_http_hop_header("Content-Length", 14));
    assert_false(sl_http_hop_header("content-type", 12));
    assert_false(sl_http_hop_header("x-connection", 12));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_defaults_and_clamps),
        cmocka_unit_test(test_request_view),
        cmocka_unit_test(test_header_count_limit),
        cmocka_unit_test(test_answer_once_and_pool),
        cmocka_unit_test(test_late_answer_after_client_left),
        cmocka_unit_test(test_bad_status_becomes_500),
        cmocka_unit_test(test_grpc_answers),
        cmocka_unit_test(test_net_layer_errors),
        cmocka_unit_test(test_ctx_outlives_its_exchanges),
        cmocka_unit_test(test_clock_and_date_line),
        cmocka_unit_test(test_clock_offset_is_the_machines),
        cmocka_unit_test(test_counters_add_up),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

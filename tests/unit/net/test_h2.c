/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP/2 over the sans-I/O connection, driven by an nghttp2 client session in memory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "net/conn.h"
#include "net/exchange.h"

/* ---- server side: a handler that answers at once or keeps exchanges ---- */

typedef struct tstate {
    bool defer;
    sl_exchange *held[64];
    int nheld;
    int calls;
    int cancels;
    int wakes;
    bool last_grpc;
    char last_path[128];
    char last_host[64];
    uint8_t last_body[4096];
    size_t last_body_len;
} tstate;

static void on_cancel(void *ud, sl_exchange *ex)
{
    ((tstate *)ud)->cancels++;
}

static void answer(sl_exchange *ex)
{
    const sl_http_request *r = sl_exchange_request(ex);
    if (r->grpc) {
        sl_exchange_respond_grpc(ex, r->body, r->body_len, 0, NULL); /* echo */
        return;
    }
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%s %s %zu", r->method, r->path, r->body_len);
    sl_exchange_respond_simple(ex, 200, "text/plain", buf, (size_t)n);
}

static void handler(void *ud, sl_exchange *ex)
{
    tstate *t = ud;
    const sl_http_request *r = sl_exchange_request(ex);
    assert_int_equal(r->proto, SL_HTTP_2);
    t->calls++;
    t->last_grpc = r->grpc;
    snprintf(t->last_path, sizeof t->last_path, "%s", r->path);
    const sl_http_header *h = sl_http_header_find(r, "host");
    snprintf(t->last_host, sizeof t->last_host, "%s", h ? h->value : "");
    t->last_body_len = r->body_len < sizeof t->last_body ? r->body_len : sizeof t->last_body;
    memcpy(t->last_body, r->body, t->last_body_len);
    if (t->defer) {
        sl_exchange_set_cancel(ex, on_cancel, t);
        t->held[t->nheld++] = ex;
        return;
    }
    answer(ex);
}

static void on_wake(void *ud)
{
    ((tstate *)ud)->wakes++;
}

/* ---- client side ---- */

typedef struct cstream {
    int32_t id;
    int status;
    char body[4096];
    size_t body_len;
    char grpc_status[16];
    char grpc_message[256];
    char content_length[16];
    int header_frames;
    bool closed;
    uint32_t close_code;
    bool end_on_headers;
} cstream;

typedef struct client {
    nghttp2_session *s;
    cstream st[16];
    int nst;
    bool goaway;
    int32_t goaway_last;
    uint32_t goaway_code;
    uint32_t srv_max_streams;
    uint32_t srv_window;
} client;

static cstream *cs_find(client *cl, int32_t id)
{
    for (int i = 0; i < cl->nst; i++)
        if (cl->st[i].id == id)
            return &cl->st[i];
    return NULL;
}

static int c_on_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name,
                       size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    cstream *st = cs_find(ud, fr->hd.stream_id);
    if (!st)
        return 0;
    if (nl == 7 && !memcmp(name, ":status", 7))
        st->status = atoi((const char *)value);
    else if (nl == 11 && !memcmp(name, "grpc-status", 11))
        snprintf(st->grpc_status, sizeof st->grpc_status, "%s", value);
    else if (nl == 12 && !memcmp(name, "grpc-message", 12))
        snprintf(st->grpc_message, sizeof st->grpc_message, "%s", value);
    else if (nl == 14 && !memcmp(name, "content-length", 14))
        snprintf(st->content_length, sizeof st->content_length, "%s", value);
    return 0;
}

static int c_on_frame_recv(nghttp2_session *s, const nghttp2_frame *fr, void *ud)
{
    client *cl = ud;
    if (fr->hd.type == NGHTTP2_GOAWAY) {
        cl->goaway = true;
        cl->goaway_last = fr->goaway.last_stream_id;
        cl->goaway_code = fr->goaway.error_code;
    } else if (fr->hd.type == NGHTTP2_SETTINGS && !(fr->hd.flags & NGHTTP2_FLAG_ACK)) {
        for (size_t i = 0; i < fr->settings.niv; i++) {
            if (fr->settings.iv[i].settings_id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
                cl->srv_max_streams = fr->settings.iv[i].value;
            if (fr->settings.iv[i].settings_id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
                cl->srv_window = fr->settings.iv[i].value;
        }
    } else if (fr->hd.type == NGHTTP2_HEADERS) {
        cstream *st = cs_find(cl, fr->hd.stream_id);
        if (st) {
            st->header_frames++;
            if (st->header_frames == 1 && (fr->hd.flags & NGHTTP2_FLAG_END_STREAM))
                st->end_on_headers = true;
        }
    }
    return 0;
}

static int c_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                     void *ud)
{
    cstream *st = cs_find(ud, id);
    if (st && st->body_len + n <= sizeof st->body) {
        memcpy(st->body + st->body_len, d, n);
        st->body_len += n;
    }
    return 0;
}

static int c_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    cstream *st = cs_find(ud, id);
    if (st) {
        st->closed = true;
        st->close_code = code;
    }
    return 0;
}

static void client_init(client *cl)
{
    memset(cl, 0, sizeof *cl);
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, c_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, c_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, c_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, c_on_close);
    assert_int_equal(nghttp2_session_client_new(&cl->s, cb, cl), 0);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(cl->s, NGHTTP2_FLAG_NONE, iv, 1);
}

typedef struct body_src {
    const uint8_t *p;
    size_t len, off;
} body_src;

static ssize_t c_read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                           uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    body_src *b = src->ptr;
    size_t n = b->len - b->off < len ? b->len - b->off : len;
    memcpy(buf, b->p + b->off, n);
    b->off += n;
    if (b->off == b->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

/* Submit a request; body (may be NULL) must outlive the exchange of frames. */
static cstream *request(client *cl, const char *method, const char *path, const char *ctype,
                        body_src *body)
{
    nghttp2_nv nv[6] = {NV(":method", method), NV(":scheme", "http"), NV(":path", path),
                        NV(":authority", "example.test"), NV("te", "trailers")};
    size_t n = 5;
    if (ctype)
        nv[n++] = (nghttp2_nv)NV("content-type", ctype);
    nghttp2_data_provider prd = {.source.ptr = body, .read_callback = c_read_body};
    int32_t id = nghttp2_submit_request(cl->s, NULL, nv, n, body ? &prd : NULL, NULL);
    assert_true(id > 0);
    cstream *st = &cl->st[cl->nst++];
    st->id = id;
    return st;
}

typedef struct fix {
    tstate t;
    sl_http_ctx *ctx;
    sl_conn *c;
    client cl;
    size_t fed_chunk; /* 0: whole, else feed in pieces of this size */
} fix;

static fix *fix_new(const sl_http_limits *lim)
{
    fix *f = calloc(1, sizeof *f);
    f->ctx = sl_http_ctx_new(lim, handler, &f->t);
    f->c = sl_conn_new(f->ctx, NULL, on_wake, &f->t);
    client_init(&f->cl);
    return f;
}

static void fix_free(fix *f)
{
    if (f->c)
        sl_conn_free(f->c);
    nghttp2_session_del(f->cl.s);
    sl_http_ctx_free(f->ctx);
    free(f);
}

/* Move bytes both ways until nothing moves. */
static void exchange_frames(fix *f)
{
    for (int round = 0; round < 1000; round++) {
        bool moved = false;
        const uint8_t *p;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(f->cl.s, &p)) > 0) {
            moved = true;
            if (!f->fed_chunk) {
                sl_conn_feed(f->c, p, (size_t)n);
            } else {
                for (ssize_t i = 0; i < n; i += (ssize_t)f->fed_chunk) {
                    size_t k = (size_t)(n - i) < f->fed_chunk ? (size_t)(n - i) : f->fed_chunk;
                    sl_conn_feed(f->c, p + i, k);
                }
            }
        }
        if (f->c->woken) {
            sl_conn_pump(f->c);
            moved = true;
        }
        sl_buf *o = sl_conn_out(f->c);
        if (o->len) {
            assert_int_equal(nghttp2_session_mem_recv(f->cl.s, o->data, o->len), (ssize_t)o->len);
            sl_buf_reset(o);
            moved = true;
        }
        if (!moved)
            return;
    }
    fail_msg("frames never settled");
}

static void test_get(void **state)
{
    fix *f = fix_new(NULL);
    cstream *st = request(&f->cl, "GET", "/hello?a=b", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(sl_conn_proto(f->c), SL_HTTP_2);
    assert_int_equal(f->t.calls, 1);
    assert_string_equal(f->t.last_path, "/hello?a=b");
    assert_string_equal(f->t.last_host, "example.test");
    assert_false(f->t.last_grpc);
    assert_int_equal(st->status, 200);
    assert_int_equal(st->body_len, strlen("GET /hello?a=b 0"));
    assert_memory_equal(st->body, "GET /hello?a=b 0", st->body_len);
    assert_string_equal(st->content_length, "16");
    assert_true(st->closed);
    assert_int_equal(st->close_code, 0);
    assert_int_equal(f->cl.srv_max_streams, 256);
    assert_int_equal(f->cl.srv_window, 1u << 20);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    assert_false(sl_conn_done(f->c));
    sl_net_stats s = {0};
    sl_http_ctx_stats(f->ctx, &s);
    assert_int_equal(s.requests_h2, 1);
    assert_int_equal(s.requests_grpc, 0);
    fix_free(f);
}

static const uint8_t grpc_msg[] = {0, 0, 0, 0, 3, 0x08, 0x96, 0x01};

static void test_grpc_unary(void **state)
{
    fix *f = fix_new(NULL);
    body_src b = {grpc_msg, sizeof grpc_msg, 0};
    cstream *st = request(&f->cl, "POST", "/pb.gubernator.V1/GetRateLimits", "application/grpc", &b);
    exchange_frames(f);
    assert_int_equal(f->t.calls, 1);
    assert_true(f->t.last_grpc);
    assert_int_equal(f->t.last_body_len, sizeof grpc_msg);
    assert_memory_equal(f->t.last_body, grpc_msg, sizeof grpc_msg);
    assert_int_equal(st->status, 200);
    assert_int_equal(st->body_len, sizeof grpc_msg);
    assert_memory_equal(st->body, grpc_msg, sizeof grpc_msg);
    assert_string_equal(st->grpc_status, "0");
    assert_string_equal(st->grpc_message, "");
    assert_int_equal(st->header_frames, 2); /* headers + trailers */
    assert_string_equal(st->content_length, "");
    assert_true(st->closed);
    sl_net_stats s = {0};
    sl_http_ctx_stats(f->ctx, &s);
    assert_int_equal(s.requests_grpc, 1);
    fix_free(f);
}

static void test_grpc_trailers_only(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    body_src b = {grpc_msg, sizeof grpc_msg, 0};
    cstream *st = request(&f->cl, "POST", "/x.Y/Z", "application/grpc+proto", &b);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 1);
    assert_true(f->t.last_grpc);
    assert_int_equal(sl_exchange_respond_grpc_status(f->t.held[0], 5, "not found: 100% \xc3\xbc"),
                     0);
    assert_int_equal(f->t.wakes, 1);
    exchange_frames(f);
    assert_int_equal(st->status, 200);
    assert_string_equal(st->grpc_status, "5");
    assert_string_equal(st->grpc_message, "not found: 100%25 %C3%BC");
    assert_int_equal(st->header_frames, 1);
    assert_true(st->end_on_headers);
    assert_int_equal(st->body_len, 0);
    fix_free(f);
}

/* Server streaming: HEADERS at open, each push a DATA frame the client gets at once (no END_STREAM),
 * the stream stays owed (BUSY, no timeout of ours), a push over the queue bound is refused, and
 * close sends what is queued then the trailers. */
static void test_stream_push_and_close(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    body_src b = {grpc_msg, sizeof grpc_msg, 0};
    cstream *st = request(&f->cl, "POST", "/x.T/Watch", "application/grpc", &b);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 1);
    sl_exchange *ex = f->t.held[0];
    sl_http_header ct = SL_HTTP_HEADER("content-type", "application/grpc");
    sl_http_response head = {.status = 200, .headers = &ct, .nheaders = 1};
    assert_int_equal(sl_exchange_stream_open(ex, &head), 0);
    assert_int_equal(sl_exchange_stream_open(ex, &head), -EINVAL); /* once */
    exchange_frames(f);
    assert_int_equal(st->status, 200);
    assert_string_equal(st->content_length, "");
    assert_int_equal(st->body_len, 0);
    assert_false(st->closed);
    assert_int_equal(sl_exchange_stream_push(ex, "abc", 3, 16), 0);
    exchange_frames(f);
    assert_int_equal(st->body_len, 3);
    assert_false(st->closed);
    assert_int_equal(sl_exchange_stream_queued(ex), 0);
    assert_int_equal(sl_exchange_stream_push(ex, "defg", 4, 16), 0);
    exchange_frames(f);
    assert_memory_equal(st->body, "abcdefg", 7);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_BUSY);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 1);
    /* the queue bound: what is not sent yet counts */
    assert_int_equal(sl_exchange_stream_push(ex, "0123456789", 10, 16), 0);
    assert_int_equal(sl_exchange_stream_push(ex, "0123456789", 10, 16), -ENOBUFS);
    sl_http_header tr[2] = {SL_HTTP_HEADER("grpc-status", "14"),
                            SL_HTTP_HEADER("grpc-message", "bye")};
    assert_int_equal(sl_exchange_stream_close(ex, tr, 2), 0);
    exchange_frames(f);
    assert_int_equal(st->body_len, 17);
    assert_memory_equal(st->body + 7, "0123456789", 10);
    assert_string_equal(st->grpc_status, "14");
    assert_string_equal(st->grpc_message, "bye");
    assert_true(st->closed);
    assert_int_equal(st->close_code, 0);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 0);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    fix_free(f);
}

/* A client that resets a stream: the cancel callback fires, pushes are -ENOTCONN, close
 * releases. */
static void test_stream_client_goes_away(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    cstream *st = request(&f->cl, "GET", "/watch", NULL, NULL);
    exchange_frames(f);
    sl_exchange *ex = f->t.held[0];
    sl_http_response head = {.status = 200};
    assert_int_equal(sl_exchange_stream_open(ex, &head), 0);
    assert_int_equal(sl_exchange_stream_push(ex, "x", 1, 16), 0);
    exchange_frames(f);
    nghttp2_submit_rst_stream(f->cl.s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    exchange_frames(f);
    assert_int_equal(f->t.cancels, 1);
    assert_int_equal(sl_exchange_stream_push(ex, "y", 1, 16), -ENOTCONN);
    assert_int_equal(sl_exchange_stream_close(ex, NULL, 0), -ENOTCONN);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 0);
    fix_free(f);
}

static void test_async_out_of_order(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    cstream *s[3];
    s[0] = request(&f->cl, "GET", "/0", NULL, NULL);
    s[1] = request(&f->cl, "GET", "/1", NULL, NULL);
    s[2] = request(&f->cl, "GET", "/2", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 3);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_BUSY);
    answer(f->t.held[2]);
    exchange_frames(f);
    assert_true(s[2]->closed);
    assert_false(s[0]->closed);
    answer(f->t.held[0]);
    answer(f->t.held[1]);
    exchange_frames(f);
    for (int i = 0; i < 3; i++) {
        char want[32];
        snprintf(want, sizeof want, "GET /%d 0", i);
        assert_int_equal(s[i]->body_len, strlen(want));
        assert_memory_equal(s[i]->body, want, strlen(want));
    }
    fix_free(f);
}

static void test_split_feed(void **state)
{
    fix *f = fix_new(NULL);
    f->fed_chunk = 1;
    body_src b = {grpc_msg, sizeof grpc_msg, 0};
    cstream *st = request(&f->cl, "POST", "/a.B/C", "application/grpc", &b);
    cstream *st2 = request(&f->cl, "GET", "/g", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.calls, 2);
    assert_string_equal(st->grpc_status, "0");
    assert_int_equal(st2->status, 200);
    fix_free(f);
}

static void test_reset_before_answer(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    cstream *st = request(&f->cl, "GET", "/slow", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 1);
    nghttp2_submit_rst_stream(f->cl.s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    exchange_frames(f);
    assert_int_equal(f->t.cancels, 1);
    assert_false(sl_exchange_alive(f->t.held[0]));
    assert_int_equal(sl_exchange_respond_simple(f->t.held[0], 200, NULL, "late", 4), -ENOTCONN);
    assert_int_equal(sl_http_ctx_pending(f->ctx), 0);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    fix_free(f);
}

static void test_free_with_pending(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    request(&f->cl, "GET", "/1", NULL, NULL);
    request(&f->cl, "GET", "/2", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 2);
    answer(f->t.held[1]); /* answered, maybe not sent yet */
    sl_conn_free(f->c);
    f->c = NULL;
    assert_int_equal(f->t.cancels, 1);
    assert_int_equal(sl_exchange_respond_simple(f->t.held[0], 200, NULL, NULL, 0), -ENOTCONN);
    nghttp2_session_del(f->cl.s);
    f->cl.s = NULL;
    sl_http_ctx_free(f->ctx);
    free(f);
}

static void test_body_too_large(void **state)
{
    sl_http_limits lim = {.max_body_bytes = 100};
    fix *f = fix_new(&lim);
    static uint8_t big[1000];
    body_src b1 = {big, sizeof big, 0}, b2 = {big, sizeof big, 0}, b3 = {big, 100, 0};
    cstream *plain = request(&f->cl, "POST", "/p", "application/json", &b1);
    cstream *grpc = request(&f->cl, "POST", "/g.S/M", "application/grpc", &b2);
    cstream *fits = request(&f->cl, "POST", "/f", "application/json", &b3);
    exchange_frames(f);
    assert_int_equal(f->t.calls, 1);
    assert_string_equal(f->t.last_path, "/f");
    assert_int_equal(plain->status, 413);
    assert_int_equal(grpc->status, 200);
    assert_string_equal(grpc->grpc_status, "8");
    assert_int_equal(fits->status, 200);
    assert_true(plain->closed && grpc->closed && fits->closed);
    sl_net_stats s = {0};
    sl_http_ctx_stats(f->ctx, &s);
    assert_int_equal(s.protocol_errors, 2);
    assert_false(sl_conn_done(f->c)); /* the connection itself is fine */
    fix_free(f);
}

static void test_connection_budget(void **state)
{
    /* Request bytes held per connection are bounded: over it, new data is refused. */
    sl_http_limits lim = {.conn_buffer_bytes = 1000};
    fix *f = fix_new(&lim);
    f->t.defer = true;
    static uint8_t body[800];
    body_src b1 = {body, sizeof body, 0}, b2 = {body, sizeof body, 0};
    cstream *s1 = request(&f->cl, "POST", "/1", "application/json", &b1);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 1);
    cstream *s2 = request(&f->cl, "POST", "/2", "application/json", &b2);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 1);
    assert_true(s2->closed);
    assert_int_equal(s2->close_code, NGHTTP2_REFUSED_STREAM);
    /* Answering the first releases its bytes; a retry fits. */
    answer(f->t.held[0]);
    body_src b3 = {body, sizeof body, 0};
    cstream *s3 = request(&f->cl, "POST", "/3", "application/json", &b3);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 2);
    answer(f->t.held[1]);
    exchange_frames(f);
    assert_int_equal(s1->status, 200);
    assert_int_equal(s3->status, 200);
    fix_free(f);
}

static void test_header_too_large(void **state)
{
    sl_http_limits lim = {.max_header_bytes = 100, .max_headers = 4};
    fix *f = fix_new(&lim);
    char big[400];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = 0;
    nghttp2_nv nv[] = {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"),
                       NV(":authority", "a"), NV("x-big", big)};
    int32_t id = nghttp2_submit_request(f->cl.s, NULL, nv, 5, NULL, NULL);
    cstream *st = &f->cl.st[f->cl.nst++];
    st->id = id;
    exchange_frames(f);
    assert_int_equal(f->t.calls, 0);
    assert_int_equal(st->status, 431);
    /* Too many fields. */
    nghttp2_nv many[] = {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"),
                         NV(":authority", "a"), NV("a", "1"), NV("b", "2"), NV("c", "3"), NV("d", "4"), NV("e", "5")};
    id = nghttp2_submit_request(f->cl.s, NULL, many, 9, NULL, NULL);
    st = &f->cl.st[f->cl.nst++];
    st->id = id;
    exchange_frames(f);
    assert_int_equal(f->t.calls, 0);
    assert_int_equal(st->status, 431);
    fix_free(f);
}

static void test_max_streams(void **state)
{
    sl_http_limits lim = {.h2_max_streams = 2};
    fix *f = fix_new(&lim);
    f->t.defer = true;
    exchange_frames(f); /* settings exchanged and acknowledged */
    assert_int_equal(f->cl.srv_max_streams, 2);
    cstream *s1 = request(&f->cl, "GET", "/1", NULL, NULL);
    cstream *s2 = request(&f->cl, "GET", "/2", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 2);
    cstream *s3 = request(&f->cl, "GET", "/3", NULL, NULL);
    exchange_frames(f);
    /* The client holds the third back while two are open. */
    assert_int_equal(f->t.nheld, 2);
    assert_false(s3->closed);
    answer(f->t.held[0]);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 3);
    answer(f->t.held[1]);
    answer(f->t.held[2]);
    exchange_frames(f);
    assert_true(s1->closed && s2->closed && s3->closed);
    fix_free(f);
}

/* Count frames of a type in a byte string of HTTP/2 frames (after `skip` bytes). */
static int count_frames(const uint8_t *p, size_t n, uint8_t type)
{
    int c = 0;
    size_t off = 0;
    while (off + 9 <= n) {
        size_t len = (size_t)p[off] << 16 | (size_t)p[off + 1] << 8 | p[off + 2];
        if (p[off + 3] == type)
            c++;
        off += 9 + len;
    }
    return c;
}

static void test_garbage_after_preface(void **state)
{
    fix *f = fix_new(NULL);
    static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    sl_conn_feed(f->c, pre, 24);
    assert_int_equal(sl_conn_proto(f->c), SL_HTTP_2);
    assert_false(sl_conn_done(f->c));
    static const uint8_t junk[] = {0, 0, 4, 0x7f, 0xff, 0, 0, 0, 9, 'j', 'u', 'n', 'k',
                                   0, 0, 0, 0, 0, 0, 0, 0, 0};
    sl_conn_feed(f->c, junk, sizeof junk);
    assert_true(sl_conn_done(f->c));
    sl_buf *o = sl_conn_out(f->c);
    assert_int_equal(count_frames(o->data, o->len, NGHTTP2_GOAWAY), 1);
    assert_false(sl_conn_wants_read(f->c));
    fix_free(f);
}

static void test_drain(void **state)
{
    fix *f = fix_new(NULL);
    f->t.defer = true;
    cstream *s1 = request(&f->cl, "GET", "/inflight", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.nheld, 1);
    sl_conn_shutdown(f->c);
    exchange_frames(f);
    assert_true(f->cl.goaway);
    assert_int_equal(f->cl.goaway_last, s1->id);
    assert_int_equal(f->cl.goaway_code, NGHTTP2_NO_ERROR);
    assert_false(sl_conn_done(f->c));
    answer(f->t.held[0]);
    exchange_frames(f);
    assert_int_equal(s1->status, 200);
    assert_true(s1->closed);
    assert_true(sl_conn_done(f->c));
    assert_int_equal(f->t.calls, 1);
    fix_free(f);

    /* Idle: done once the GOAWAY is out. */
    f = fix_new(NULL);
    request(&f->cl, "GET", "/", NULL, NULL);
    exchange_frames(f);
    sl_conn_shutdown(f->c);
    assert_true(sl_conn_done(f->c));
    assert_int_equal(count_frames(sl_conn_out(f->c)->data, sl_conn_out(f->c)->len,
                                  NGHTTP2_GOAWAY), 1);
    fix_free(f);
}

static void test_head_and_204(void **state)
{
    fix *f = fix_new(NULL);
    cstream *st = request(&f->cl, "HEAD", "/h", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(st->status, 200);
    assert_int_equal(st->body_len, 0);
    assert_string_equal(st->content_length, "9");
    assert_true(st->end_on_headers);
    fix_free(f);
}

/* issue 11: a connection that keeps provoking 431s is told GOAWAY ENHANCE_YOUR_CALM and ends;
 * below the limit it keeps serving. */
static cstream *big_header_request(client *cl)
{
    static char big[400];
    memset(big, 'v', sizeof big - 1);
    nghttp2_nv nv[] = {NV(":method", "GET"), NV(":scheme", "http"), NV(":path", "/"),
                       NV(":authority", "a"), NV("x-big", big)};
    int32_t id = nghttp2_submit_request(cl->s, NULL, nv, 5, NULL, NULL);
    assert_true(id > 0);
    cstream *st = &cl->st[cl->nst++];
    st->id = id;
    return st;
}

static void test_calm_after_errors(void **state)
{
    sl_http_limits lim = {.max_header_bytes = 100, .max_headers = 4, .max_conn_errors = 3};
    fix *f = fix_new(&lim);
    big_header_request(&f->cl);
    big_header_request(&f->cl);
    exchange_frames(f);
    cstream *ok = request(&f->cl, "GET", "/fine", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(ok->status, 200);
    assert_false(f->cl.goaway);
    assert_false(sl_conn_done(f->c));
    for (int i = 0; i < 4; i++)
        big_header_request(&f->cl);
    exchange_frames(f);
    assert_true(f->cl.goaway);
    assert_int_equal(f->cl.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    assert_true(sl_conn_done(f->c));
    assert_false(sl_conn_wants_read(f->c));
    /* Input after the GOAWAY is not decoded any more. */
    assert_int_equal(sl_conn_feed(f->c, "garbage", 7), 0);
    sl_net_stats s = {0};
    sl_http_ctx_stats(f->ctx, &s);
    assert_int_equal(s.conns_calmed, 1);
    assert_true(s.protocol_errors >= 3);
    assert_int_equal(f->t.calls, 1);
    fix_free(f);
}

/* issue 11: answers a client keeps behind a shut flow-control window are charged in bytes; over
 * the budget (per connection or in total) new streams are refused; the phase asks for the
 * write timeout; an opened window lets them go; after the client's EOF the connection ends. */
static void zero_window(const sl_http_limits *lim, bool eof)
{
    fix *f = fix_new(lim);
    nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}};
    nghttp2_submit_settings(f->cl.s, NGHTTP2_FLAG_NONE, iv, 1);
    cstream *held = request(&f->cl, "GET", "/held", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.calls, 1);
    assert_int_equal(held->status, 200); /* HEADERS are not flow-controlled, DATA is */
    assert_false(held->closed);
    assert_int_equal(held->body_len, 0);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_WRITING);
    assert_true(f->ctx->unsent > 0);
    uint64_t produced = f->c->produced;
    cstream *more[3];
    for (int i = 0; i < 3; i++)
        more[i] = request(&f->cl, "GET", "/more", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(f->t.calls, 1);
    for (int i = 0; i < 3; i++) {
        assert_true(more[i]->closed);
        assert_int_equal(more[i]->close_code, NGHTTP2_REFUSED_STREAM);
    }
    assert_int_equal(f->c->produced, produced);
    if (eof) {
        sl_conn_eof(f->c);
        assert_true(sl_conn_done(f->c));
        sl_conn_free(f->c);
        f->c = NULL;
        assert_int_equal(f->ctx->unsent, 0);
        fix_free(f);
        return;
    }
    assert_int_equal(nghttp2_submit_window_update(f->cl.s, NGHTTP2_FLAG_NONE, held->id, 1000), 0);
    exchange_frames(f);
    assert_true(held->closed);
    assert_int_equal(held->body_len, strlen("GET /held 0"));
    assert_true(f->c->produced > produced);
    assert_int_equal(f->ctx->unsent, 0);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    cstream *after = request(&f->cl, "GET", "/after", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(after->status, 200);
    assert_int_equal(f->t.calls, 2);
    fix_free(f);
}

static void test_zero_window_conn_budget(void **state)
{
    sl_http_limits lim = {.conn_unsent_bytes = 1};
    zero_window(&lim, false);
}

static void test_zero_window_total_budget(void **state)
{
    sl_http_limits lim = {.unsent_bytes = 1};
    zero_window(&lim, false);
}

static void test_zero_window_eof_ends(void **state)
{
    sl_http_limits lim = {.conn_unsent_bytes = 1};
    zero_window(&lim, true);
}

/* issue 11: an unfinished request body keeps its own read deadline: requests completed
 * meanwhile on other streams do not move the read-timeout progress marker. */
static void test_held_body_keeps_deadline(void **state)
{
    fix *f = fix_new(NULL);
    nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":path", "/slow"),
                       NV(":authority", "a"), NV("content-type", "application/json")};
    int32_t slow = nghttp2_submit_headers(f->cl.s, NGHTTP2_FLAG_NONE, -1, NULL, nv, 5, NULL);
    assert_true(slow > 0);
    cstream *st = &f->cl.st[f->cl.nst++];
    st->id = slow;
    int32_t slow2 = nghttp2_submit_headers(f->cl.s, NGHTTP2_FLAG_NONE, -1, NULL, nv, 5, NULL);
    assert_true(slow2 > 0);
    cstream *st2 = &f->cl.st[f->cl.nst++];
    st2->id = slow2;
    exchange_frames(f);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_READING);
    uint64_t marker = f->c->completed;
    for (int i = 0; i < 3; i++) {
        cstream *quick = request(&f->cl, "GET", "/quick", NULL, NULL);
        exchange_frames(f);
        assert_int_equal(quick->status, 200);
        assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_READING);
        assert_int_equal(f->c->completed, marker);
    }
    /* The oldest one completes: the deadline moves on to the next oldest. */
    static const uint8_t body[] = "{}";
    body_src b = {body, 2, 0}, b2 = {body, 2, 0};
    nghttp2_data_provider prd = {.source.ptr = &b, .read_callback = c_read_body};
    assert_int_equal(nghttp2_submit_data(f->cl.s, NGHTTP2_FLAG_END_STREAM, slow, &prd), 0);
    exchange_frames(f);
    assert_int_equal(st->status, 200);
    assert_int_equal(f->t.calls, 4);
    assert_true(f->c->completed != marker);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_READING);
    marker = f->c->completed;
    prd.source.ptr = &b2;
    assert_int_equal(nghttp2_submit_data(f->cl.s, NGHTTP2_FLAG_END_STREAM, slow2, &prd), 0);
    exchange_frames(f);
    assert_int_equal(st2->status, 200);
    assert_true(f->c->completed != marker);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    fix_free(f);
}

/* issue 25: each stream keeps its own read deadline. The connection's deadline follows the
 * oldest stream still being received, from when that stream began: the oldest completing hands
 * over to the next one's own start, not to the time of the completion. */
static void test_each_stream_keeps_its_read_deadline(void **state)
{
    fix *f = fix_new(NULL);
    nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":path", "/slow"),
                       NV(":authority", "a"), NV("content-type", "application/json")};
    sl_http_ctx_set_now(f->ctx, 10000);
    int32_t a = nghttp2_submit_headers(f->cl.s, NGHTTP2_FLAG_NONE, -1, NULL, nv, 5, NULL);
    cstream *sa = &f->cl.st[f->cl.nst++];
    sa->id = a;
    exchange_frames(f);
    assert_int_equal(f->c->read_since, 10000);
    sl_http_ctx_set_now(f->ctx, 10400);
    int32_t b = nghttp2_submit_headers(f->cl.s, NGHTTP2_FLAG_NONE, -1, NULL, nv, 5, NULL);
    cstream *sb = &f->cl.st[f->cl.nst++];
    sb->id = b;
    exchange_frames(f);
    assert_int_equal(f->c->read_since, 10000); /* still the oldest's */
    /* Quick requests completing meanwhile change nothing. */
    sl_http_ctx_set_now(f->ctx, 10600);
    cstream *q = request(&f->cl, "GET", "/quick", NULL, NULL);
    exchange_frames(f);
    assert_int_equal(q->status, 200);
    assert_int_equal(f->c->read_since, 10000);
    /* The oldest completes at 10900: the deadline is now b's, begun at 10400 (not 10900). */
    sl_http_ctx_set_now(f->ctx, 10900);
    static const uint8_t body[] = "{}";
    body_src bs = {body, 2, 0}, bs2 = {body, 2, 0};
    nghttp2_data_provider prd = {.source.ptr = &bs, .read_callback = c_read_body};
    assert_int_equal(nghttp2_submit_data(f->cl.s, NGHTTP2_FLAG_END_STREAM, a, &prd), 0);
    exchange_frames(f);
    assert_int_equal(sa->status, 200);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_READING);
    assert_int_equal(f->c->read_since, 10400);
    prd.source.ptr = &bs2;
    assert_int_equal(nghttp2_submit_data(f->cl.s, NGHTTP2_FLAG_END_STREAM, b, &prd), 0);
    exchange_frames(f);
    assert_int_equal(sb->status, 200);
    assert_int_equal(f->c->read_since, 0);
    assert_int_equal(sl_conn_phase_get(f->c), SL_CONN_IDLE);
    fix_free(f);
}

/* issue 25: past the server's bound on buffered request bytes a stream whose body grows past a
 * small one is answered 503, or RESOURCE_EXHAUSTED on gRPC, the rest of it dropped, while small
 * requests go on; the bytes held are counted on the connection and in the shared count until the
 * exchanges go. */
static void test_request_memory_bound(void **state)
{
    sl_reqmem m;
    sl_reqmem_init(&m, 800 * 1024, 0);
    fix *f = fix_new(NULL);
    sl_http_ctx_set_reqmem(f->ctx, &m);
    nghttp2_nv nv[] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":path", "/big"),
                       NV(":authority", "a"), NV("content-type", "application/json")};
    int32_t big = nghttp2_submit_headers(f->cl.s, NGHTTP2_FLAG_NONE, -1, NULL, nv, 5, NULL);
    cstream *sbig = &f->cl.st[f->cl.nst++];
    sbig->id = big;
    exchange_frames(f);
    static uint8_t chunk[300 * 1024];
    body_src bs = {chunk, sizeof chunk, 0};
    nghttp2_data_provider prd = {.source.ptr = &bs, .read_callback = c_read_body};
    /* the body without END_STREAM: held, unfinished */
    assert_int_equal(nghttp2_submit_data(f->cl.s, NGHTTP2_FLAG_NONE, big, &prd), 0);
    exchange_frames(f);
    assert_true(bs.off == sizeof chunk); /* the window let it all through */
    assert_true(f->c->req_bytes >= bs.off);
    sl_reqmem_stats st;
    sl_reqmem_stats_get(&m, &st);
    assert_true(st.used >= f->c->req_bytes);
    assert_false(sl_reqmem_over(&m));
    /* another worker's connections hold 600 KiB more: over the bound */
    sl_reqmem_acct other = {.m = &m};
    sl_reqmem_charge(&other, 600 * 1024);
    assert_true(sl_reqmem_over(&m));
    /* Small requests are still served; one whose body passes SL_REQMEM_SMALL_BODY gets 503 over
     * HTTP, RESOURCE_EXHAUSTED over gRPC, and is not dispatched. */
    static const char small[] = "{\"x\":1}";
    body_src sb = {(const uint8_t *)small, sizeof small - 1, 0};
    cstream *plain = request(&f->cl, "POST", "/v1/x", "application/json", &sb);
    exchange_frames(f);
    assert_int_equal(plain->status, 200);
    int calls = f->t.calls;
    static uint8_t large[SL_REQMEM_SMALL_BODY + 100];
    body_src lb = {large, sizeof large, 0}, lg = {large, sizeof large, 0};
    cstream *refused = request(&f->cl, "POST", "/v1/x", "application/json", &lb);
    cstream *grpc = request(&f->cl, "POST", "/pb.gubernator.V1/GetRateLimits", "application/grpc",
                            &lg);
    exchange_frames(f);
    assert_int_equal(refused->status, 503);
    assert_int_equal(grpc->status, 200);
    assert_string_equal(grpc->grpc_status, "8");
    assert_int_equal(f->t.calls, calls);
    sl_reqmem_stats_get(&m, &st);
    assert_int_equal(st.refused, 2);
    /* The held stream goes (reset by the client): the count falls back under the bound and large
     * requests are served again. */
    nghttp2_submit_rst_stream(f->cl.s, NGHTTP2_FLAG_NONE, big, NGHTTP2_CANCEL);
    exchange_frames(f);
    assert_int_equal(f->c->req_bytes, 0);
    assert_false(sl_reqmem_over(&m));
    body_src lb2 = {large, sizeof large, 0};
    cstream *ok = request(&f->cl, "POST", "/v1/x", "application/json", &lb2);
    exchange_frames(f);
    assert_int_equal(ok->status, 200);
    fix_free(f);
    sl_reqmem_release(&other, 600 * 1024);
    sl_reqmem_stats_get(&m, &st);
    assert_true(st.used <= 4 * SL_REQMEM_CHUNK); /* each account keeps at most its slack */
    assert_true(st.peak >= 300 * 1024);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_stream_push_and_close),
        cmocka_unit_test(test_stream_client_goes_away),
        cmocka_unit_test(test_grpc_unary),
        cmocka_unit_test(test_grpc_trailers_only),
        cmocka_unit_test(test_async_out_of_order),
        cmocka_unit_test(test_split_feed),
        cmocka_unit_test(test_reset_before_answer),
        cmocka_unit_test(test_free_with_pending),
        cmocka_unit_test(test_body_too_large),
        cmocka_unit_test(test_connection_budget),
        cmocka_unit_test(test_header_too_large),
        cmocka_unit_test(test_max_streams),
        cmocka_unit_test(test_garbage_after_preface),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_head_and_204),
        cmocka_unit_test(test_calm_after_errors),
        cmocka_unit_test(test_zero_window_conn_budget),
        cmocka_unit_test(test_zero_window_total_budget),
        cmocka_unit_test(test_zero_window_eof_ends),
        cmocka_unit_test(test_held_body_keeps_deadline),
        cmocka_unit_test(test_each_stream_keeps_its_read_deadline),
        cmocka_unit_test(test_request_memory_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

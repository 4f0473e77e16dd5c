/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sans-I/O HTTP/2 client session (h2client/h2client.h) against a real nghttp2 server session, with
 * the transport faked in memory: pump() moves what one side sends into the other until nothing
 * moves. Time is virtual (a number passed to sl_h2c_expire), so deadlines are exact.
 *
 * Checked: a request with headers and body and its answer (status, headers then trailers in
 * order, body, grpc-status), the request body taken at submit, strict :status (exactly three
 * digits), deadlines (completion at the deadline, the stream held until the peer closes it),
 * caps on body and headers, refused and reset streams, GOAWAY, free completing what is pending,
 * and a completion that submits again.
 */
#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "h2client/h2client.h"

/* ---- the server side: an nghttp2 server session answering by path ---- */

typedef struct srv_stream {
    char path[64];
    uint8_t body[1 << 17];
    size_t blen;
    const uint8_t *resp;
    size_t resp_len, resp_off;
} srv_stream;

typedef struct server {
    nghttp2_session *ng;
    srv_stream streams[16];
    int nstreams;
    int requests;     /* complete requests seen */
    int resets;       /* RST_STREAM frames received */
    char status[8];   /* :status the server answers with */
    bool hold;        /* do not answer */
    size_t big_body;  /* answer with this many bytes of body */
    size_t big_header;/* answer with a header value this long */
    uint8_t blob[1 << 17];
} server;

static srv_stream *srv_stream_of(server *sv, int32_t id)
{
    return nghttp2_session_get_stream_user_data(sv->ng, id);
}

static int s_on_begin(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    server *sv = ud;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        srv_stream *st = &sv->streams[sv->nstreams++ % 16];
        memset(st, 0, sizeof *st);
        nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
    }
    return 0;
}

static int s_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                       size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    srv_stream *st = srv_stream_of(ud, f->hd.stream_id);
    if (st && nl == 5 && !memcmp(name, ":path", 5))
        snprintf(st->path, sizeof st->path, "%.*s", (int)vl, (const char *)value);
    return 0;
}

static int s_on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                     void *ud)
{
    srv_stream *st = srv_stream_of(ud, id);
    if (st && st->blen + n <= sizeof st->body) {
        memcpy(st->body + st->blen, d, n);
        st->blen += n;
    }
    return 0;
}

static ssize_t s_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *fl,
                      nghttp2_data_source *src, void *ud)
{
    srv_stream *st = src->ptr;
    size_t n = st->resp_len - st->resp_off;
    if (n > len)
        n = len;
    memcpy(buf, st->resp + st->resp_off, n);
    st->resp_off += n;
    if (st->resp_off == st->resp_len) {
        *fl |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv tr[] = {
            {(uint8_t *)"grpc-status", (uint8_t *)"7", 11, 1, NGHTTP2_NV_FLAG_NONE},
            {(uint8_t *)"grpc-message", (uint8_t *)"no%20way", 12, 8, NGHTTP2_NV_FLAG_NONE},
        };
        nghttp2_submit_trailer(ng, id, tr, 2);
    }
    return (ssize_t)n;
}

static void answer(server *sv, int32_t id, srv_stream *st)
{
    if (!strcmp(st->path, "/refuse")) {
        nghttp2_submit_rst_stream(sv->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
        return;
    }
    if (!strcmp(st->path, "/reset")) {
        nghttp2_submit_rst_stream(sv->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    if (sv->hold || !strcmp(st->path, "/hold"))
        return;
    char *hv = NULL;
    nghttp2_nv nv[3] = {
        {(uint8_t *)":status", (uint8_t *)sv->status, 7, strlen(sv->status), NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"x-echo", (uint8_t *)st->path, 6, strlen(st->path), NGHTTP2_NV_FLAG_NONE},
    };
    size_t nnv = 2;
    if (sv->big_header) {
        hv = malloc(sv->big_header);
        memset(hv, 'h', sv->big_header);
        nv[nnv++] = (nghttp2_nv){(uint8_t *)"x-big", (uint8_t *)hv, 5, sv->big_header,
                                 NGHTTP2_NV_FLAG_NONE};
    }
    if (sv->big_body) {
        memset(sv->blob, 'b', sv->big_body);
        st->resp = sv->blob;
        st->resp_len = sv->big_body;
    } else {
        st->resp = st->body; /* echo the request body */
        st->resp_len = st->blen;
    }
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = s_body};
    nghttp2_submit_response(sv->ng, id, nv, nnv, &prd);
    free(hv);
}

static int s_on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *ud)
{
    server *sv = ud;
    if (f->hd.type == NGHTTP2_RST_STREAM)
        sv->resets++;
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        srv_stream *st = srv_stream_of(sv, f->hd.stream_id);
        if (st) {
            sv->requests++;
            answer(sv, f->hd.stream_id, st);
        }
    }
    return 0;
}

static server *server_new(void)
{
    server *sv = calloc(1, sizeof *sv);
    snprintf(sv->status, sizeof sv->status, "200");
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, s_on_begin);
    nghttp2_session_callbacks_set_on_header_callback(cb, s_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, s_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, s_on_frame);
    nghttp2_session_server_new(&sv->ng, cb, sv);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(sv->ng, NGHTTP2_FLAG_NONE, NULL, 0);
    return sv;
}

static void server_free(server *sv)
{
    nghttp2_session_del(sv->ng);
    free(sv);
}

/* Move bytes both ways until neither side has anything to say. */
static void pump(sl_h2c *c, server *sv)
{
    for (int round = 0; round < 1000; round++) {
        bool moved = false;
        sl_buf out;
        sl_buf_init(&out, 0);
        assert_int_equal(sl_h2c_send(c, &out, 1 << 20), 0);
        if (out.len) {
            assert_int_equal(nghttp2_session_mem_recv(sv->ng, out.data, out.len), (ssize_t)out.len);
            moved = true;
        }
        sl_buf_free(&out);
        const uint8_t *d;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(sv->ng, &d)) > 0) {
            assert_int_equal(sl_h2c_recv(c, d, (size_t)n), 0);
            moved = true;
        }
        if (!moved)
            return;
    }
    fail_msg("the sessions kept talking");
}

/* ---- the client side ---- */

typedef struct got {
    int calls;
    int err;
    int status;
    int grpc_status;
    char fields[512]; /* "name=value;" in order */
    uint8_t body[1 << 17];
    size_t blen;
    bool take;        /* take the body's memory */
    sl_buf taken;
    sl_h2c *resubmit; /* submit another request from the callback */
    struct got *next;
} got;

static void on_done(void *ud, const sl_h2c_resp *r)
{
    got *g = ud;
    g->calls++;
    g->err = r->err;
    g->status = r->status;
    g->grpc_status = sl_h2c_grpc_status(r);
    size_t off = 0;
    for (size_t i = 0; i < r->nfields && off < sizeof g->fields; i++)
        off += (size_t)snprintf(g->fields + off, sizeof g->fields - off, "%.*s=%.*s;",
                                (int)r->fields[i].name_len, r->fields[i].name,
                                (int)(r->fields[i].value_len > 20 ? 20 : r->fields[i].value_len),
                                r->fields[i].value);
    g->blen = r->body->len < sizeof g->body ? r->body->len : sizeof g->body;
    if (g->blen)
        memcpy(g->body, r->body->data, g->blen);
    if (g->take) {
        g->taken = *r->body;
        sl_buf_init(r->body, 0);
    }
    if (g->resubmit) {
        sl_h2c_req req = {.method = "GET", .authority = "t", .path = "/again",
                          .deadline = INT64_MAX};
        assert_int_equal(sl_h2c_submit(g->resubmit, &req, on_done, g->next), 0);
    }
}

static sl_h2c *client(const sl_h2c_config *cfg)
{
    sl_h2c *c;
    assert_int_equal(sl_h2c_new(cfg, &c), 0);
    return c;
}

static void submit(sl_h2c *c, const char *path, const char *body, int64_t deadline, got *g)
{
    sl_buf b;
    sl_buf_init(&b, 0);
    if (body)
        assert_int_equal(sl_buf_append_str(&b, body), 0);
    sl_h2c_field h[] = {{"content-type", 12, "text/plain", 10}};
    sl_h2c_req req = {.method = "POST", .authority = "127.0.0.1:1", .path = path, .headers = h,
                      .nheaders = 1, .body = &b, .deadline = deadline};
    assert_int_equal(sl_h2c_submit(c, &req, on_done, g), 0);
    assert_int_equal(b.len, 0); /* taken */
    sl_buf_free(&b);
}

/* ---- tests ---- */

static void test_parse_status(void **state)
{
    (void)state;
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"200", 3), 200);
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"503", 3), 503);
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"2000", 4), -EPROTO);
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"20", 2), -EPROTO);
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"2x0", 3), -EPROTO);
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"099", 3), -EPROTO);
    assert_int_equal(sl_h2c_parse_status((const uint8_t *)"", 0), -EPROTO);
}

static void test_roundtrip(void **state)
{
    (void)state;
    server *sv = server_new();
    sl_h2c *c = client(NULL);
    got g = {0};
    submit(c, "/echo", "hello there", INT64_MAX, &g);
    assert_int_equal(sl_h2c_pending(c), 1);
    assert_int_equal(g.calls, 0); /* never from submit */
    pump(c, sv);
    assert_int_equal(sv->requests, 1);
    assert_string_equal(sv->streams[0].path, "/echo");
    assert_int_equal(sv->streams[0].blen, 11);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.err, 0);
    assert_int_equal(g.status, 200);
    assert_string_equal(g.fields, "x-echo=/echo;grpc-status=7;grpc-message=no%20way;");
    assert_int_equal(g.grpc_status, 7);
    assert_int_equal(g.blen, 11);
    assert_memory_equal(g.body, "hello there", 11);
    assert_int_equal(sl_h2c_pending(c), 0);
    assert_int_equal(sl_h2c_abandoned(c), 0);
    assert_false(sl_h2c_goaway(c));
    assert_int_equal(sl_h2c_next_deadline(c), INT64_MAX);
    sl_h2c_free(c, -ECANCELED);
    assert_int_equal(g.calls, 1);
    server_free(sv);
}

static void test_strict_status(void **state)
{
    (void)state;
    /* nghttp2 rejects the first two itself, the session the third: all are malformed answers */
    const char *bad[] = {"2000", "20", "099", "2x0"};
    for (size_t i = 0; i < 4; i++) {
        server *sv = server_new();
        snprintf(sv->status, sizeof sv->status, "%s", bad[i]);
        sl_h2c *c = client(NULL);
        got g = {0};
        submit(c, "/x", "a", INT64_MAX, &g);
        pump(c, sv);
        assert_int_equal(g.calls, 1);
        assert_int_equal(g.err, -EPROTO);
        assert_int_equal(g.status, 0);
        assert_int_equal(sv->resets, 1); /* and the stream was reset */
        assert_int_equal(sl_h2c_abandoned(c), 0);
        sl_h2c_free(c, -ECANCELED);
        assert_int_equal(g.calls, 1);
        server_free(sv);
    }
}

static void test_deadline_on_virtual_time(void **state)
{
    (void)state;
    server *sv = server_new();
    sl_h2c *c = client(NULL);
    got slow = {0}, fast = {0};
    submit(c, "/hold", "x", 1000, &slow);
    submit(c, "/echo", "y", 5000, &fast);
    assert_int_equal(sl_h2c_next_deadline(c), 1000);
    pump(c, sv);
    assert_int_equal(fast.calls, 1);
    assert_int_equal(fast.err, 0);
    sl_h2c_expire(c, 999);
    assert_int_equal(slow.calls, 0);
    sl_h2c_expire(c, 1000);
    assert_int_equal(slow.calls, 1);
    assert_int_equal(slow.err, -ETIMEDOUT);
    /* completed for the caller, still known to nghttp2 until the reset goes out */
    assert_int_equal(sl_h2c_pending(c), 0);
    assert_int_equal(sl_h2c_abandoned(c), 1);
    pump(c, sv);
    assert_int_equal(sv->resets, 1);
    assert_int_equal(sl_h2c_abandoned(c), 0);
    sl_h2c_expire(c, 100000);
    assert_int_equal(slow.calls, 1);
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);
}

static void test_caps(void **state)
{
    (void)state;
    server *sv = server_new();
    sv->big_body = 100000;
    sl_h2c_config cfg = {.max_body = 50000};
    sl_h2c *c = client(&cfg);
    got g = {0};
    submit(c, "/big", "x", INT64_MAX, &g);
    pump(c, sv);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.err, -EMSGSIZE);
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);

    /* the same body under the cap: whole, and the callee may take its memory */
    sv = server_new();
    sv->big_body = 100000;
    c = client(NULL);
    g = (got){.take = true};
    submit(c, "/big", "x", INT64_MAX, &g);
    pump(c, sv);
    assert_int_equal(g.err, 0);
    assert_int_equal(g.taken.len, 100000);
    assert_int_equal(g.taken.data[99999], 'b');
    sl_buf_free(&g.taken);
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);

    sv = server_new();
    sv->big_header = 3000;
    sl_h2c_config hc = {.max_header_bytes = 1000};
    c = client(&hc);
    g = (got){0};
    submit(c, "/hdr", "x", INT64_MAX, &g);
    pump(c, sv);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.err, -EMSGSIZE);
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);
}

static void test_refused_and_reset(void **state)
{
    (void)state;
    server *sv = server_new();
    sl_h2c *c = client(NULL);
    got r1 = {0}, r2 = {0};
    submit(c, "/refuse", "x", INT64_MAX, &r1);
    submit(c, "/reset", "x", INT64_MAX, &r2);
    pump(c, sv);
    assert_int_equal(r1.calls, 1);
    assert_int_equal(r1.err, -ECONNREFUSED);
    assert_int_equal(r2.calls, 1);
    assert_int_equal(r2.err, -ECONNRESET);
    assert_int_equal(sl_h2c_pending(c), 0);
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);
}

static void test_goaway(void **state)
{
    (void)state;
    server *sv = server_new();
    sl_h2c *c = client(NULL);
    got g = {0};
    submit(c, "/echo", "x", INT64_MAX, &g);
    pump(c, sv);
    assert_int_equal(g.calls, 1);
    nghttp2_submit_goaway(sv->ng, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR, NULL, 0);
    pump(c, sv);
    assert_true(sl_h2c_goaway(c));
    sl_buf b;
    sl_buf_init(&b, 0);
    sl_buf_append_str(&b, "y");
    sl_h2c_req req = {.method = "POST", .authority = "a", .path = "/echo", .body = &b,
                      .deadline = INT64_MAX};
    got g2 = {0};
    assert_int_equal(sl_h2c_submit(c, &req, on_done, &g2), -EAGAIN);
    assert_int_equal(b.len, 1); /* not taken */
    sl_buf_free(&b);
    assert_int_equal(g2.calls, 0);
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);
}

static void test_free_completes_pending(void **state)
{
    (void)state;
    server *sv = server_new();
    sl_h2c *c = client(NULL);
    got g[3];
    memset(g, 0, sizeof g);
    for (int i = 0; i < 3; i++)
        submit(c, "/hold", "x", 1000 + i, &g[i]);
    pump(c, sv);
    sl_h2c_expire(c, 1000); /* one times out first: held, freed with the session */
    assert_int_equal(g[0].err, -ETIMEDOUT);
    sl_h2c_free(c, -ECONNRESET);
    assert_int_equal(g[0].calls, 1);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(g[i].calls, 1);
        assert_int_equal(g[i].err, -ECONNRESET);
    }
    server_free(sv);
}

static void test_completion_submits_again(void **state)
{
    (void)state;
    server *sv = server_new();
    sl_h2c *c = client(NULL);
    got second = {0};
    got first = {.resubmit = c, .next = &second};
    submit(c, "/echo", "1", INT64_MAX, &first);
    pump(c, sv);
    assert_int_equal(first.calls, 1);
    assert_int_equal(second.calls, 1);
    assert_int_equal(second.err, 0);
    assert_string_equal(sv->streams[1].path, "/again");
    sl_h2c_free(c, -ECANCELED);
    server_free(sv);
}

static void test_bad_requests(void **state)
{
    (void)state;
    sl_h2c *c = client(NULL);
    got g = {0};
    sl_h2c_req req = {.method = "GET", .path = "/x", .deadline = INT64_MAX}; /* no authority */
    assert_int_equal(sl_h2c_submit(c, &req, on_done, &g), -EINVAL);
    req.authority = "a";
    assert_int_equal(sl_h2c_submit(c, &req, NULL, &g), -EINVAL);
    req.nheaders = 33;
    assert_int_equal(sl_h2c_submit(c, &req, on_done, &g), -EINVAL);
    /* bytes that are not HTTP/2: the session is over (a GOAWAY to send, then nothing) */
    int rc = sl_h2c_recv(c, (const uint8_t *)"HTTP/1.1 200 OK\r\n\r\n", 19);
    sl_buf out;
    sl_buf_init(&out, 0);
    if (rc == 0)
        assert_int_equal(sl_h2c_send(c, &out, 1 << 20), 0);
    assert_true(rc == -EPROTO || sl_h2c_over(c));
    sl_buf_free(&out);
    sl_h2c_free(c, -ECANCELED);
    assert_int_equal(g.calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_status),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_strict_status),
        cmocka_unit_test(test_deadline_on_virtual_time),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_refused_and_reset),
        cmocka_unit_test(test_goaway),
        cmocka_unit_test(test_free_completes_pending),
        cmocka_unit_test(test_completion_submits_again),
        cmocka_unit_test(test_bad_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

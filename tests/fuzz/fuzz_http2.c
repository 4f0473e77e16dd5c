/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the sans-I/O connection as HTTP/2 (prior knowledge): the client preface is
 * prepended and the input, cut into reads at points chosen by its first bytes, is what follows it
 * (seeds are frames written by an nghttp2 client). A trivial handler answers at once, later and
 * out of order, or never before the connection dies. Checked: output is whole frames within the
 * default frame size, the pending count matches what the handler holds, late answers are no-ops,
 * nothing leaks (ASan).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net/conn.h"
#include "net/exchange.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fstate {
    sl_exchange *held[32];
    int nheld;
    int cancels;
} fstate;

static void answer(sl_exchange *ex, int kind)
{
    const sl_http_request *r = sl_exchange_request(ex);
    if (r->grpc) {
        if (kind & 1)
            sl_exchange_respond_grpc_status(ex, 3, "bad \x01 input");
        else
            sl_exchange_respond_grpc(ex, r->body, r->body_len, 0, NULL);
        return;
    }
    sl_http_header h[2] = {SL_HTTP_HEADER("content-type", "text/plain"),
                           SL_HTTP_HEADER("connection", "dropped-on-h2")};
    sl_http_header t[1] = {SL_HTTP_HEADER("x-trailer", "t")};
    sl_http_response resp = {.status = 200 + (kind & 7), .headers = h, .nheaders = 2,
                             .body = r->body, .body_len = r->body_len, .trailers = t,
                             .ntrailers = (size_t)(kind & 1)};
    sl_exchange_respond(ex, &resp);
}

static void on_cancel(void *ud, sl_exchange *ex)
{
    ((fstate *)ud)->cancels++;
}

static void handler(void *ud, sl_exchange *ex)
{
    fstate *f = ud;
    const sl_http_request *r = sl_exchange_request(ex);
    CHECK(r->proto == SL_HTTP_2);
    CHECK(r->body[r->body_len] == '\0');
    for (size_t i = 0; i < r->nheaders; i++)
        CHECK(r->headers[i].name[r->headers[i].name_len] == '\0' &&
              r->headers[i].value[r->headers[i].value_len] == '\0');
    if (r->path_len && r->path[r->path_len - 1] == 'd' && f->nheld < 32) {
        sl_exchange_set_cancel(ex, on_cancel, f);
        f->held[f->nheld++] = ex;
        return;
    }
    answer(ex, (int)r->body_len);
}

static void check_out(sl_conn *c)
{
    sl_buf *o = sl_conn_out(c);
    size_t off = 0;
    while (off < o->len) {
        CHECK(o->len - off >= 9);
        size_t len = (size_t)o->data[off] << 16 | (size_t)o->data[off + 1] << 8 | o->data[off + 2];
        CHECK(len <= 16384);
        off += 9 + len;
    }
    CHECK(off == o->len);
    sl_buf_reset(o);
}

/* What the I/O shell does after writing: resume work held back by the output high-water mark. */
static void drain(sl_conn *c)
{
    check_out(c);
    for (int i = 0; i < 64 && sl_conn_has_backlog(c); i++) {
        sl_conn_pump(c);
        check_out(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (size < 2)
        return 0;
    uint8_t mode = data[0], cut = data[1];
    data += 2;
    size -= 2;
    fstate f = {0};
    sl_http_limits lim = {.max_header_bytes = 1024, .max_headers = 16, .max_body_bytes = 2048,
                          .h2_max_streams = 8, .conn_buffer_bytes = 8192,
                          .out_high_water = 4096, .conn_unsent_bytes = 2048,
                          .unsent_bytes = 4096, .max_conn_errors = 4};
    sl_http_ctx *ctx = sl_http_ctx_new(&lim, handler, &f);
    sl_conn *c = sl_conn_new(ctx, NULL, NULL, NULL);
    sl_conn_feed(c, preface, 24);
    CHECK(sl_conn_proto(c) == SL_HTTP_2);
    size_t step = cut ? cut : size ? size : 1;
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        sl_conn_feed(c, data + off, n);
        drain(c);
        if ((mode & 4) && f.nheld) {
            answer(f.held[--f.nheld], mode);
            sl_conn_pump(c);
            drain(c);
        }
        CHECK(sl_http_ctx_pending(ctx) == (size_t)f.nheld);
        if (sl_conn_done(c))
            break;
    }
    if (mode & 8)
        sl_conn_eof(c);
    if (mode & 16)
        sl_conn_shutdown(c);
    if (mode & 32) {
        while (f.nheld) {
            answer(f.held[--f.nheld], mode >> 1);
            sl_conn_pump(c);
            drain(c);
        }
    }
    for (int i = 0; i < 8 && !sl_conn_done(c); i++) {
        sl_conn_pump(c);
        check_out(c);
    }
    sl_conn_wants_read(c);
    sl_conn_phase_get(c);
    int held_before = f.nheld;
    sl_conn_free(c);
    CHECK(ctx->unsent == 0); /* every unsent answer's charge was released */
    CHECK(f.cancels >= held_before);
    while (f.nheld)
        CHECK(sl_exchange_respond_simple(f.held[--f.nheld], 200, NULL, NULL, 0) == -ENOTCONN);
    CHECK(sl_http_ctx_pending(ctx) == 0);
    sl_http_ctx_free(ctx);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the sans-I/O connection as HTTP/1.1 clients reach it (protocol sniffing
 * included, so inputs starting with the HTTP/2 preface go the other way). The input is cut into
 * reads at points chosen by its first bytes; a trivial handler answers at once, or later and out
 * of order, or never before the connection dies. Checked: output always starts on an answer
 * boundary, the pending count matches what the handler holds, late answers are no-ops, nothing
 * leaks (ASan).
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
    sl_exchange *held[16];
    int nheld;
    int cancels;
} fstate;

static void answer(sl_exchange *ex)
{
    const sl_http_request *r = sl_exchange_request(ex);
    if (r->grpc) {
        sl_exchange_respond_grpc(ex, r->body, r->body_len, (int)(r->body_len % 17), "m\xff%");
        return;
    }
    int status = r->path_len && r->path[r->path_len - 1] == 'n' ? 204 : 200;
    sl_http_header h[2] = {SL_HTTP_HEADER("content-type", "text/plain"),
                           {r->path, r->path_len, r->path, r->path_len}};
    sl_http_response resp = {.status = status, .headers = h, .nheaders = 2, .body = r->body,
                             .body_len = r->body_len};
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
    CHECK(r->method && r->path && r->body);
    CHECK(r->body[r->body_len] == '\0');
    for (size_t i = 0; i < r->nheaders; i++)
        CHECK(r->headers[i].name[r->headers[i].name_len] == '\0' &&
              r->headers[i].value[r->headers[i].value_len] == '\0');
    sl_http_header_find(r, "content-type");
    if (r->path_len && r->path[r->path_len - 1] == 'd' && f->nheld < 16) {
        sl_exchange_set_cancel(ex, on_cancel, f);
        f->held[f->nheld++] = ex;
        return;
    }
    answer(ex);
}

static void check_out(sl_conn *c)
{
    sl_buf *o = sl_conn_out(c);
    if (sl_conn_proto(c) == SL_HTTP_1 && o->len)
        CHECK(o->len >= 9 && !memcmp(o->data, "HTTP/1.1 ", 9));
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
    if (size < 2)
        return 0;
    uint8_t mode = data[0], cut = data[1];
    data += 2;
    size -= 2;
    fstate f = {0};
    sl_http_limits lim = {.max_header_bytes = 512, .max_headers = 8, .max_body_bytes = 1024,
                          .h1_max_pipeline = 1 + (mode & 3), .conn_buffer_bytes = 8192,
                          .out_high_water = 4096};
    sl_http_ctx *ctx = sl_http_ctx_new(&lim, handler, &f);
    sl_http_ctx_set_now(ctx, 1700000000000LL);
    sl_conn *c = sl_conn_new(ctx, NULL, NULL, NULL);
    size_t step = cut ? cut : size ? size : 1;
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        sl_conn_feed(c, data + off, n);
        drain(c);
        if ((mode & 4) && f.nheld) { /* answer the newest first */
            answer(f.held[--f.nheld]);
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
            answer(f.held[--f.nheld]);
            sl_conn_pump(c);
            drain(c);
        }
    }
    sl_conn_done(c);
    sl_conn_wants_read(c);
    sl_conn_phase_get(c);
    int held_before = f.nheld;
    sl_conn_free(c);
    CHECK(f.cancels >= held_before); /* answered ones may have been cancelled earlier */
    while (f.nheld)
        CHECK(sl_exchange_respond_simple(f.held[--f.nheld], 200, NULL, NULL, 0) == -ENOTCONN);
    CHECK(sl_http_ctx_pending(ctx) == 0);
    sl_http_ctx_free(ctx);
    return 0;
}

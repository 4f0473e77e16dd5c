/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the HTTP/2 client side reading a peer's answers: an h2client session
 * (h2client/h2client.c over nghttp2) with three PeersV1 calls in flight — GetPeerRateLimits for 3
 * items, UpdatePeerGlobals, TransferKeys, as cluster/peer.c submits them — is fed the input as the
 * server's bytes (the first byte picks the size of the pieces; every piece is followed by a send,
 * so SETTINGS ACKs, pings and window updates go out), then the deadline passes and the session is
 * freed. Each answer is read the way peer.c reads one: grpc-status and grpc-message
 * (sl_h2c_grpc_status, sl_grpc_message_decode), the body's one gRPC message
 * (sl_grpc_frame_decode), and the message through cluster/peerwire.c's decoder for its call.
 * Properties: every call completes exactly once, with a :status of 0 or 100..999 and a body within
 * max_body; recv gives 0 or -EPROTO; nothing is called after a failed session. A broken property
 * traps; ASan catches overruns and leaks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "cluster/peerwire.h"
#include "decide/batch.h"
#include "h2client/h2client.h"
#include "wire/grpc_frame.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)
#define MAX_BODY ((size_t)64 << 10)
#define MAX_MSG ((size_t)64 << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { CALL_GET, CALL_GLOBALS, CALL_TRANSFER, NCALLS };

typedef struct call {
    int kind;
    int done;
} call;

static void read_answer(int kind, const sl_h2c_resp *r)
{
    const sl_h2c_field *m = sl_h2c_resp_find(r, "grpc-message");
    if (m) {
        sl_buf text;
        sl_buf_init(&text, 4096);
        (void)sl_grpc_message_decode(m->value, m->value_len, &text);
        CHECK(text.len <= 4096);
        sl_buf_free(&text);
    }
    int gs = sl_h2c_grpc_status(r);
    CHECK(gs >= -1 && gs <= 999);
    if (r->err || r->status != 200 || gs != 0)
        return;
    sl_grpc_msg msg;
    const char *e = NULL;
    if (sl_grpc_frame_decode(r->body->data, r->body->len, MAX_MSG, &msg, &e) != 0 ||
        msg.compressed || msg.frame_len != r->body->len)
        return;
    CHECK(msg.len <= MAX_MSG && msg.data + msg.len <= r->body->data + r->body->len);
    sl_batch b;
    sl_batch_init(&b, 1 << 20);
    sl_grpc_status st;
    if (kind == CALL_GET) {
        CHECK(sl_batch_alloc_items(&b, 3) == 0);
        size_t idx[] = {2, 0, 1};
        if (sl_peerwire_decode_resp(MAX_MSG, msg.data, msg.len, &b, idx, 3, &st) == 0)
            for (size_t i = 0; i < 3; i++)
                CHECK(b.resp_meta[i].n == 0 || b.resp_meta[i].kv != NULL);
    } else if (kind == CALL_GLOBALS) {
        sl_peerwire_global *g;
        size_t n;
        if (sl_peerwire_decode_globals(MAX_MSG, msg.data, msg.len, &b, &g, &n, &st) == 0)
            CHECK(n == 0 || g != NULL);
    } else {
        int64_t accepted;
        if (sl_peerwire_decode_transfer_resp(msg.data, msg.len, &accepted) != 0)
            CHECK(accepted == 0);
    }
    sl_batch_free(&b);
}

static void on_done(void *ud, const sl_h2c_resp *r)
{
    call *c = ud;
    c->done++;
    CHECK(c->done == 1);
    CHECK(r->err <= 0);
    CHECK(r->status == 0 || (r->status >= 100 && r->status <= 999));
    CHECK(r->body != NULL && r->body->len <= MAX_BODY);
    CHECK(r->nfields == 0 || r->fields != NULL);
    for (size_t i = 0; i < r->nfields; i++)
        CHECK(r->fields[i].name != NULL && r->fields[i].value != NULL);
    read_answer(c->kind, r);
}

static void drain(sl_h2c *s, sl_buf *out)
{
    (void)sl_h2c_send(s, out, 1 << 20);
    sl_buf_consume(out, out->len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] % 64 + 1;
    sl_h2c_config cfg = {.max_body = MAX_BODY, .max_header_bytes = 8 << 10,
                         .stream_window = 16 << 10};
    sl_h2c *s;
    CHECK(sl_h2c_new(&cfg, &s) == 0);
    static const char *const paths[NCALLS] = {SL_PEERWIRE_PATH_GET_PEER_RATE_LIMITS,
                                              SL_PEERWIRE_PATH_UPDATE_PEER_GLOBALS,
                                              SL_PEERWIRE_PATH_TRANSFER_KEYS};
    static const sl_h2c_field hdrs[] = {{"content-type", 12, "application/grpc", 16},
                                        {"te", 2, "trailers", 8}};
    call calls[NCALLS];
    for (int k = 0; k < NCALLS; k++) {
        calls[k] = (call){.kind = k};
        sl_buf body;
        sl_buf_init(&body, 0);
        CHECK(sl_buf_append(&body, "\0\0\0\0\2\x08\x01", 7) == 0);
        sl_h2c_req req = {.method = "POST", .authority = "127.0.0.1:1051", .path = paths[k],
                          .headers = hdrs, .nheaders = 2, .body = &body, .deadline = 100};
        CHECK(sl_h2c_submit(s, &req, on_done, &calls[k]) == 0);
        sl_buf_free(&body);
    }
    sl_buf out;
    sl_buf_init(&out, 0);
    drain(s, &out);
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        rc = sl_h2c_recv(s, p + i, k);
        CHECK(rc == 0 || rc == -EPROTO);
        if (!rc)
            drain(s, &out);
    }
    if (!rc) { /* a failed session is only freed */
        sl_h2c_expire(s, 100);
        CHECK(sl_h2c_pending(s) == 0);
    }
    sl_h2c_free(s, -ECONNRESET);
    sl_buf_free(&out);
    for (int k = 0; k < NCALLS; k++)
        CHECK(calls[k].done == 1);
    return 0;
}

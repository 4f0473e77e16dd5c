/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/2 over nghttp2 (see h2.h). Stream user data is the exchange; the exchange holds the
 * connection's reference until nghttp2 closes the stream, so an answer's body (kept in the
 * exchange and read by nghttp2's data provider) lives exactly as long as nghttp2 may read it.
 *
 * Abuse bounds kept here, all per connection and counted without work per request:
 *  - a connection that provokes max_conn_errors protocol errors or refusals of its requests
 *    (431, 413, invalid frames) is told GOAWAY ENHANCE_YOUR_CALM and closed, so oversized header
 *    blocks cost a bounded amount of decoding per connection (streams refused for our own
 *    buffer budgets do not count: a busy client may retry them);
 *  - answers submitted and not yet sent (a client that shuts its flow-control window) are
 *    charged in bytes, with the request they answer, to the connection and to the ctx; above
 *    either budget new streams of a connection holding such answers are refused
 *    (REFUSED_STREAM), and the phase says SL_CONN_WRITING so the driver's write timeout applies;
 *  - each stream being received keeps its own read deadline, counted from its HEADERS: the
 *    connection tells the driver when its oldest unfinished request began (conn->read_since), so
 *    completing other requests, even the oldest one, never extends the deadline of the others;
 *  - past the server's bound on buffered request bytes (net/reqmem.h) a stream whose body grows
 *    past SL_REQMEM_SMALL_BODY is answered 503 (gRPC: RESOURCE_EXHAUSTED) and the rest dropped;
 *  - after the client's EOF, answers its shut window holds can never leave: the connection is
 *    done once nothing can be sent and no handler owes an answer.
 */
#include "net/h2.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#include "net/exchange.h"

typedef struct sl_h2 {
    sl_proto base;                  /* first: conn.c holds &base (net/proto.h) */
    nghttp2_session *ss;
    sl_conn *c;
    sl_exchange *rq_head, *rq_tail; /* complete requests waiting for dispatch after mem_recv */
    sl_exchange *all;               /* every exchange attached to an open stream */
    uint32_t receiving;             /* streams whose request is incomplete */
    sl_exchange *recv_head, *recv_tail; /* those streams, oldest first */
    size_t held;                    /* request bytes held by attached exchanges */
    size_t unsent;                  /* bytes charged by answered, unclosed streams */
    uint32_t errors;                /* protocol errors and refusals this client provoked */
    bool broken;                    /* session failed: flush what is queued, then close */
    bool goaway;
    bool calmed;                    /* GOAWAY ENHANCE_YOUR_CALM submitted: input is dropped */
    bool eof;                       /* the client closed its sending side */
} sl_h2;

static int h2_respond(void *owner, sl_exchange *ex, const sl_http_response *r);
static int h2_stream_open(void *owner, sl_exchange *ex, const sl_http_response *head);
static void h2_stream_more(void *owner, sl_exchange *ex);
static const sl_exchange_ops exchange_ops = {h2_respond, h2_stream_open, h2_stream_more};

/* Header entries a HEADERS frame may carry in our answers (plus :status, content-length). */
#define MAX_RESP_HEADERS 64

static void link_all(sl_h2 *h, sl_exchange *ex)
{
    ex->prev = NULL;
    ex->next = h->all;
    if (h->all)
        h->all->prev = ex;
    h->all = ex;
}

static void unlink_all(sl_h2 *h, sl_exchange *ex)
{
    if (ex->prev)
        ex->prev->next = ex->next;
    else
        h->all = ex->next;
    if (ex->next)
        ex->next->prev = ex->prev;
    ex->next = ex->prev = NULL;
}

static void stop_receiving(sl_h2 *h, sl_exchange *ex)
{
    if (!ex->counted)
        return;
    ex->counted = false;
    h->receiving--;
    /* Progress for the read timeout only when the oldest request being received is complete:
     * requests finished meanwhile on other streams do not extend its deadline. */
    if (ex == h->recv_head)
        h->c->completed++;
    if (ex->rprev)
        ex->rprev->rnext = ex->rnext;
    else
        h->recv_head = ex->rnext;
    if (ex->rnext)
        ex->rnext->rprev = ex->rprev;
    else
        h->recv_tail = ex->rprev;
    ex->rnext = ex->rprev = NULL;
    /* The read deadline is now the next oldest stream's own, from when it began. */
    h->c->read_since = h->recv_head ? h->recv_head->recv_start : 0;
}

/* Answer bytes a stream holds until nghttp2 closes it: request arena, answer, and a share for
 * nghttp2's own stream and frame state. */
#define STREAM_COST 512

static void charge_unsent(sl_h2 *h, sl_exchange *ex)
{
    ex->unsent = ex->arena.alloc + ex->resp.alloc + STREAM_COST;
    h->unsent += ex->unsent;
    h->c->ctx->unsent += ex->unsent;
}

static void release_unsent(sl_h2 *h, sl_exchange *ex)
{
    h->unsent -= ex->unsent;
    h->c->ctx->unsent -= ex->unsent;
    ex->unsent = 0;
}

/* The client provoked an error or a refusal; past max_conn_errors the connection ends. */
static void provoked(sl_h2 *h)
{
    sl_http_ctx *ctx = h->c->ctx;
    sl_net_stat_add(ctx, SL_NET_PROTOCOL_ERRORS, 1);
    if (++h->errors < ctx->lim.max_conn_errors || h->calmed || h->broken)
        return;
    h->calmed = true;
    sl_net_stat_add(ctx, SL_NET_CONNS_CALMED, 1);
    if (nghttp2_session_terminate_session(h->ss, NGHTTP2_ENHANCE_YOUR_CALM) != 0)
        h->broken = true;
}

static void release_held(sl_h2 *h, sl_exchange *ex)
{
    h->held -= ex->held;
    ex->held = 0;
}

/* Answer a request the net layer refuses (too large). */
/* Marks a stream already reset with REFUSED_STREAM (connection over its buffer budget): not an
 * HTTP status. */
#define REJECT_RESET 1

static void refuse(sl_h2 *h, sl_exchange *ex, int status)
{
    if (ex->state != SL_EX_RECV || ex->reject == REJECT_RESET)
        return;
    ex->reject = (uint16_t)status;
    if (!ex->headers_done)
        return; /* answered when the header block ends */
    stop_receiving(h, ex);
    if (status == 503)
        sl_reqmem_count_refused(h->c->ctx->mem.m); /* our bound, not the client's error */
    else
        provoked(h);
    sl_exchange_finish_request(ex, SL_HTTP_2);
    sl_exchange_respond_error(ex, status,
                              status == 413   ? "request body too large\n"
                              : status == 503 ? SL_REQMEM_REFUSED_TEXT
                                              : "request header fields too large\n");
}

static void make_ready(sl_h2 *h, sl_exchange *ex)
{
    if (ex->state != SL_EX_RECV || ex->queued)
        return;
    if (ex->reject) {
        refuse(h, ex, ex->reject);
        return;
    }
    stop_receiving(h, ex);
    ex->queued = true;
    ex->qnext = NULL;
    if (h->rq_tail)
        h->rq_tail->qnext = ex;
    else
        h->rq_head = ex;
    h->rq_tail = ex;
}

/* A gRPC request whose headers are here and body is not: the handler may take it now
 * (sl_http_early_cb). Answered at once (an unknown method), the stream is reset with NO_ERROR
 * after the answer, as grpc-go does, so the client stops sending a body nobody reads. */
static void maybe_early(sl_h2 *h, sl_exchange *ex)
{
    sl_http_ctx *ctx = h->c->ctx;
    if (!ctx->early || ex->state != SL_EX_RECV || ex->queued)
        return;
    /* the question on the path alone (the whole view is made only for a request taken now) */
    const char *a = (const char *)ex->arena.data;
    sl_http_request peek = {.method = "POST", .method_len = 4, .path = a ? a + ex->path_off : "",
                            .path_len = a ? ex->path_len : 0, .proto = SL_HTTP_2, .grpc = true};
    if (!ctx->early(ctx->handler_ud, &peek))
        return;
    sl_exchange_finish_request(ex, SL_HTTP_2);
    ex->req.early = true;
    stop_receiving(h, ex);
    sl_net_stat_add(ctx, SL_NET_REQUESTS_H2, 1);
    sl_net_stat_add(ctx, SL_NET_REQUESTS_GRPC, 1);
    sl_exchange_dispatch(ex);
    if (ex->state == SL_EX_RESPONDED)
        ex->rst_after = true; /* on_frame_send, once the answer has gone: RST_STREAM before it
                               * would make nghttp2 drop the answer */
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *ss, const nghttp2_frame *frame, void *ud)
{
    sl_h2 *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    const sl_http_limits *lim = &h->c->ctx->lim;
    if (h->unsent && (h->unsent > lim->conn_unsent_bytes || h->c->ctx->unsent > lim->unsent_bytes)) {
        /* This connection holds answers its client does not take: no new ones (the stream has
         * no exchange, so its fields and data are dropped). */
        nghttp2_submit_rst_stream(ss, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    sl_exchange *ex = sl_exchange_new(h->c->ctx, &exchange_ops, h);
    if (!ex)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    ex->stream_id = frame->hd.stream_id;
    if (h->c->has_peer) {
        ex->peer = h->c->peer;
        ex->has_peer = true;
    }
    ex->peer_identity = h->c->peer_identity;
    ex->conn_mem = &h->c->req_bytes;
    ex->recv_start = sl_http_ctx_now_ms(h->c->ctx);
    ex->counted = true;
    h->receiving++;
    ex->rnext = NULL;
    ex->rprev = h->recv_tail;
    if (h->recv_tail)
        h->recv_tail->rnext = ex;
    else {
        h->recv_head = ex;
        h->c->read_since = ex->recv_start;
    }
    h->recv_tail = ex;
    link_all(h, ex);
    nghttp2_session_set_stream_user_data(ss, frame->hd.stream_id, ex);
    return 0;
}

static int put_str(sl_exchange *ex, const uint8_t *s, size_t n, uint32_t *off)
{
    int64_t o = sl_exchange_put(ex, s, n + 1); /* nghttp2 NUL-terminates name and value */
    if (o < 0)
        return -1;
    *off = (uint32_t)o;
    return 0;
}

static int on_header(nghttp2_session *ss, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    sl_h2 *h = ud;
    sl_exchange *ex = nghttp2_session_get_stream_user_data(ss, frame->hd.stream_id);
    if (!ex || ex->headers_done || ex->reject || ex->state != SL_EX_RECV)
        return 0; /* request trailers and fields of refused requests are dropped */
    const sl_http_limits *lim = &h->c->ctx->lim;
    /* HPACK's accounting: 32 bytes of overhead per field. */
    ex->hdr_bytes += namelen + valuelen + 32;
    if (ex->hdr_bytes > lim->max_header_bytes + 32 * (size_t)lim->max_headers) {
        ex->reject = 431;
        return 0;
    }
    uint32_t noff, voff;
    if (name[0] == ':') {
        if (namelen == 7 && !memcmp(name, ":method", 7)) {
            if (put_str(ex, value, valuelen, &voff))
                goto big;
            ex->method_off = voff;
            ex->method_len = (uint32_t)valuelen;
        } else if (namelen == 5 && !memcmp(name, ":path", 5)) {
            if (put_str(ex, value, valuelen, &voff))
                goto big;
            ex->path_off = voff;
            ex->path_len = (uint32_t)valuelen;
        } else if (namelen == 10 && !memcmp(name, ":authority", 10)) {
            if (put_str(ex, (const uint8_t *)"host", 4, &noff) ||
                put_str(ex, value, valuelen, &voff))
                goto big;
            if (sl_exchange_add_header(ex, noff, 4, voff, (uint32_t)valuelen))
                goto big;
        }
        return 0;
    }
    if (namelen == 12 && !memcmp(name, "content-type", 12) && valuelen >= 16 &&
        !memcmp(value, "application/grpc", 16))
        ex->req.grpc = true; /* confirmed against the method when the block ends */
    /* the gRPC fields a call reads: the first of each, among the first 254 fields */
    else if (namelen >= 12 && name[0] == 'g' && ex->nh < 255) {
        uint8_t idx = (uint8_t)(ex->nh + 1);
        if (namelen == 13 && !memcmp(name, "grpc-encoding", 13) && !ex->h_enc)
            ex->h_enc = idx;
        else if (namelen == 12 && !memcmp(name, "grpc-timeout", 12) && !ex->h_timeout)
            ex->h_timeout = idx;
        else if (namelen == 20 && !memcmp(name, "grpc-accept-encoding", 20) && !ex->h_accept)
            ex->h_accept = idx;
    }
    if (put_str(ex, name, namelen, &noff) || put_str(ex, value, valuelen, &voff))
        goto big;
    if (sl_exchange_add_header(ex, noff, (uint32_t)namelen, voff, (uint32_t)valuelen))
        goto big;
    return 0;
big:
    ex->reject = 431;
    return 0;
}

static int on_data_chunk(nghttp2_session *ss, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *ud)
{
    sl_h2 *h = ud;
    sl_exchange *ex = nghttp2_session_get_stream_user_data(ss, stream_id);
    if (ex && ex->state == SL_EX_DISPATCHED && ex->recv_cb) {
        ex->recv_cb(ex->recv_ud, ex, data, len, false); /* a stream the handler reads itself */
        return 0;
    }
    if (!ex || ex->state != SL_EX_RECV || ex->reject)
        return 0;
    const sl_http_limits *lim = &h->c->ctx->lim;
    if (ex->body_len + len > lim->max_body_bytes) {
        refuse(h, ex, 413);
        return 0;
    }
    if (ex->body_len + len > SL_REQMEM_SMALL_BODY && sl_reqmem_over(h->c->ctx->mem.m)) {
        /* Over the server's bound on buffered request bytes: a body past a small one is
         * answered 503 (gRPC: RESOURCE_EXHAUSTED) and the rest of it dropped. */
        refuse(h, ex, 503);
        return 0;
    }
    if (h->held + len > lim->conn_buffer_bytes) {
        /* Too much held on this connection: refuse the stream so the client may retry. */
        ex->reject = REJECT_RESET;
        /* Our budget, not the client's error: counted, but not toward max_conn_errors. */
        sl_net_stat_add(h->c->ctx, SL_NET_PROTOCOL_ERRORS, 1);
        nghttp2_submit_rst_stream(ss, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    if (!ex->body_len)
        ex->body_off = (uint32_t)ex->arena.len;
    if (sl_exchange_put(ex, data, len) < 0) {
        refuse(h, ex, 413);
        return 0;
    }
    ex->body_len += len;
    ex->held += len;
    h->held += len;
    return 0;
}

static int on_frame_recv(nghttp2_session *ss, const nghttp2_frame *frame, void *ud)
{
    sl_h2 *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    sl_exchange *ex = nghttp2_session_get_stream_user_data(ss, frame->hd.stream_id);
    if (!ex)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
        ex->headers_done = true;
        ex->is_head = ex->method_len == 4 && !memcmp(ex->arena.data + ex->method_off, "HEAD", 4);
        ex->req.grpc = ex->req.grpc && ex->method_len == 4 &&
                       !memcmp(ex->arena.data + ex->method_off, "POST", 4);
        if (ex->reject && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            refuse(h, ex, ex->reject);
        else if (ex->req.grpc && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            maybe_early(h, ex);
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        if (ex->state == SL_EX_DISPATCHED && ex->recv_cb)
            ex->recv_cb(ex->recv_ud, ex, NULL, 0, true);
        else
            make_ready(h, ex);
    }
    return 0;
}

/* An early answer's last frame has gone: end the stream the client may still be sending on. */
static int on_frame_send(nghttp2_session *ss, const nghttp2_frame *frame, void *ud)
{
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    sl_exchange *ex = nghttp2_session_get_stream_user_data(ss, frame->hd.stream_id);
    if (ex && ex->rst_after) {
        ex->rst_after = false;
        nghttp2_submit_rst_stream(ss, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ss, int32_t stream_id, uint32_t error_code, void *ud)
{
    sl_h2 *h = ud;
    sl_exchange *ex = nghttp2_session_get_stream_user_data(ss, stream_id);
    if (!ex)
        return 0;
    nghttp2_session_set_stream_user_data(ss, stream_id, NULL);
    unlink_all(h, ex);
    stop_receiving(h, ex);
    release_held(h, ex);
    release_unsent(h, ex);
    ex->stream_id = 0;
    if (ex->queued)
        return 0; /* the dispatch loop sees stream_id 0 and drops it */
    sl_exchange_detach(ex);
    sl_exchange_unref(ex);
    return 0;
}

static int on_invalid_frame(nghttp2_session *ss, const nghttp2_frame *frame, int lib_error,
                            void *ud)
{
    provoked(ud);
    return 0;
}

/* ---- answers ---- */

static ssize_t read_body(nghttp2_session *ss, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *source, void *ud)
{
    sl_exchange *ex = source->ptr;
    size_t left = ex->resp_body_len - ex->resp_off;
    if (!left && ex->streaming && !ex->stream_end)
        return NGHTTP2_ERR_DEFERRED; /* h2_stream_more resumes it */
    size_t n = left < length ? left : length;
    if (n) {
        memcpy(buf, ex->resp.data + ex->resp_off, n);
        ((sl_h2 *)ud)->c->produced += n; /* the client's window let body bytes go */
    }
    ex->resp_off += n;
    if (ex->resp_off == ex->resp_body_len && (!ex->streaming || ex->stream_end)) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (ex->ntrailers) {
            nghttp2_nv nv[SL_HTTP_MAX_TRAILERS];
            const uint8_t *b = ex->resp.data;
            for (uint32_t i = 0; i < ex->ntrailers; i++) {
                const sl_hdr_off *o = &ex->trailers[i];
                nv[i] = (nghttp2_nv){(uint8_t *)b + o->name, (uint8_t *)b + o->value,
                                     o->name_len, o->value_len, NGHTTP2_NV_FLAG_NONE};
            }
            *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            if (nghttp2_submit_trailer(ss, stream_id, nv, ex->ntrailers) != 0)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
    }
    return (ssize_t)n;
}

static bool bad_field(const sl_http_header *hd)
{
    return hd->name_len == 0 || sl_http_hop_header(hd->name, hd->name_len) ||
           hd->name[0] == ':';
}

static int h2_respond(void *owner, sl_exchange *ex, const sl_http_response *r)
{
    sl_h2 *h = owner;
    nghttp2_nv nv[MAX_RESP_HEADERS + 2];
    size_t n = 0;
    char status[4] = {(char)('0' + r->status / 100), (char)('0' + r->status / 10 % 10),
                      (char)('0' + r->status % 10), 0};
    nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status, 7, 3,
                           NGHTTP2_NV_FLAG_NO_COPY_NAME};
    for (size_t i = 0; i < r->nheaders && n < MAX_RESP_HEADERS; i++) {
        const sl_http_header *hd = &r->headers[i];
        if (bad_field(hd))
            continue;
        nv[n++] = (nghttp2_nv){(uint8_t *)hd->name, (uint8_t *)hd->value, hd->name_len,
                               hd->value_len, NGHTTP2_NV_FLAG_NONE};
    }
    bool no_body = ex->is_head || r->status == 204 || r->status == 304;
    size_t body_len = no_body ? 0 : r->body_len;
    char lenbuf[24];
    if (!r->ntrailers && r->status != 204) {
        int k = 0;
        char tmp[24];
        size_t v = r->body_len;
        do {
            tmp[k++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        for (int i = 0; i < k; i++)
            lenbuf[i] = tmp[k - 1 - i];
        nv[n++] = (nghttp2_nv){(uint8_t *)"content-length", (uint8_t *)lenbuf, 14, (size_t)k,
                               NGHTTP2_NV_FLAG_NO_COPY_NAME};
    }

    nghttp2_data_provider prd, *pp = NULL;
    ex->ntrailers = 0;
    if (body_len || r->ntrailers) {
        sl_buf_reset(&ex->resp);
        if (sl_buf_append(&ex->resp, r->body, body_len))
            goto nomem;
        for (size_t i = 0; i < r->ntrailers; i++) {
            const sl_http_header *t = &r->trailers[i];
            if (bad_field(t))
                continue;
            sl_hdr_off *o = &ex->trailers[ex->ntrailers];
            o->name = (uint32_t)ex->resp.len;
            o->name_len = (uint32_t)t->name_len;
            if (sl_buf_append(&ex->resp, t->name, t->name_len))
                goto nomem;
            o->value = (uint32_t)ex->resp.len;
            o->value_len = (uint32_t)t->value_len;
            if (sl_buf_append(&ex->resp, t->value, t->value_len))
                goto nomem;
            ex->ntrailers++;
        }
        ex->resp_off = 0;
        ex->resp_body_len = body_len;
        prd.source.ptr = ex;
        prd.read_callback = read_body;
        pp = &prd;
    }
    /* The request is no longer needed: stop charging it to the connection. */
    stop_receiving(h, ex);
    release_held(h, ex);
    if (nghttp2_submit_response(h->ss, ex->stream_id, nv, n, pp) != 0)
        goto nomem;
    charge_unsent(h, ex);
    sl_conn_request_wake(h->c);
    return 0;
nomem:
    nghttp2_submit_rst_stream(h->ss, NGHTTP2_FLAG_NONE, ex->stream_id, NGHTTP2_INTERNAL_ERROR);
    sl_conn_request_wake(h->c);
    return -ENOMEM;
}

/* A streaming answer (sl_exchange_stream_open): HEADERS now, DATA as pushed. Not charged to the
 * unsent budgets (the handler bounds its queue), so the connection stays BUSY, not WRITING. */
static int h2_stream_open(void *owner, sl_exchange *ex, const sl_http_response *head)
{
    sl_h2 *h = owner;
    nghttp2_nv nv[MAX_RESP_HEADERS + 1];
    size_t n = 0;
    int st = head->status >= 200 && head->status <= 599 ? head->status : 200;
    char status[4] = {(char)('0' + st / 100), (char)('0' + st / 10 % 10), (char)('0' + st % 10), 0};
    nv[n++] = (nghttp2_nv){(uint8_t *)":status", (uint8_t *)status, 7, 3,
                           NGHTTP2_NV_FLAG_NO_COPY_NAME};
    for (size_t i = 0; i < head->nheaders && n < MAX_RESP_HEADERS; i++) {
        const sl_http_header *hd = &head->headers[i];
        if (bad_field(hd))
            continue;
        nv[n++] = (nghttp2_nv){(uint8_t *)hd->name, (uint8_t *)hd->value, hd->name_len,
                               hd->value_len, NGHTTP2_NV_FLAG_NONE};
    }
    nghttp2_data_provider prd = {.source.ptr = ex, .read_callback = read_body};
    stop_receiving(h, ex);
    release_held(h, ex);
    ex->streaming = true; /* read_body defers from the start */
    if (nghttp2_submit_response(h->ss, ex->stream_id, nv, n, &prd) != 0) {
        ex->streaming = false;
        return -ENOMEM;
    }
    sl_conn_request_wake(h->c);
    return 0;
}

static void h2_stream_more(void *owner, sl_exchange *ex)
{
    sl_h2 *h = owner;
    nghttp2_session_resume_data(h->ss, ex->stream_id);
    sl_conn_request_wake(h->c);
}

/* ---- driving ---- */

static void dispatch_ready(sl_h2 *h)
{
    sl_conn *c = h->c;
    while (h->rq_head) {
        sl_exchange *ex = h->rq_head;
        h->rq_head = ex->qnext;
        if (!h->rq_head)
            h->rq_tail = NULL;
        ex->queued = false;
        ex->qnext = NULL;
        if (ex->stream_id == 0) {
            /* The stream closed (RST_STREAM) before we got to it. */
            sl_exchange_detach(ex);
            sl_exchange_unref(ex);
            continue;
        }
        sl_net_stat_add(c->ctx, SL_NET_REQUESTS_H2, 1);
        if (ex->req.grpc)
            sl_net_stat_add(c->ctx, SL_NET_REQUESTS_GRPC, 1);
        sl_exchange_finish_request(ex, SL_HTTP_2);
        sl_exchange_dispatch(ex);
    }
}

/* Move nghttp2's pending frames into the output, up to the high-water mark (the rest waits in
 * nghttp2 until the socket drains). */
static void send_out(sl_h2 *h)
{
    sl_conn *c = h->c;
    while (c->out.len < c->ctx->lim.out_high_water) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(h->ss, &p);
        if (n < 0) {
            h->broken = true;
            return;
        }
        if (n == 0)
            return;
        if (sl_buf_append(&c->out, p, (size_t)n)) {
            c->fatal = true;
            return;
        }
    }
}

/* ---- the session's table (net/proto.h) ---- */

static sl_h2 *h2_of(sl_proto *s)
{
    return (sl_h2 *)s; /* the base is struct sl_h2's first member */
}

static const sl_h2 *h2_cof(const sl_proto *s)
{
    return (const sl_h2 *)s;
}

static sl_proto *h2_new(sl_conn *c)
{
    sl_h2 *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->base.ops = &sl_h2_ops;
    h->c = c;
    const sl_http_limits *lim = &c->ctx->lim;

    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs)) {
        free(h);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, on_invalid_frame);

    nghttp2_option *opt;
    if (nghttp2_option_new(&opt)) {
        nghttp2_session_callbacks_del(cbs);
        free(h);
        return NULL;
    }
    /* Closed streams kept for the RFC 7540 priority tree cost memory and time for nothing. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    int rv = nghttp2_session_server_new2(&h->ss, cbs, h, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rv) {
        free(h);
        return NULL;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, lim->h2_max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, lim->h2_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
         (uint32_t)(lim->max_header_bytes + 32 * (size_t)lim->max_headers)},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(h->ss, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) ||
        nghttp2_session_set_local_window_size(h->ss, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)lim->h2_window)) {
        nghttp2_session_del(h->ss);
        free(h);
        return NULL;
    }
    return &h->base;
}

static void h2_free(sl_proto *s)
{
    sl_h2 *h = h2_of(s);
    while (h->rq_head) { /* only if freed from inside a feed, which drivers do not do */
        sl_exchange *ex = h->rq_head;
        h->rq_head = ex->qnext;
        ex->queued = false;
        if (ex->stream_id == 0) {
            sl_exchange_detach(ex);
            sl_exchange_unref(ex);
        }
    }
    while (h->all) {
        sl_exchange *ex = h->all;
        unlink_all(h, ex);
        release_unsent(h, ex);
        sl_exchange_detach(ex);
        sl_exchange_unref(ex);
    }
    nghttp2_session_del(h->ss);
    free(h);
}

static void h2_feed(sl_proto *s, const char *p, size_t n)
{
    sl_h2 *h = h2_of(s);
    if (h->broken || h->calmed)
        return;
    ssize_t rv = nghttp2_session_mem_recv(h->ss, (const uint8_t *)p, n);
    if (rv < 0) {
        /* Bad preface, flood, or a callback failure: nghttp2 may still have a GOAWAY queued. */
        sl_net_stat_add(h->c->ctx, SL_NET_PROTOCOL_ERRORS, 1);
        h->broken = true;
    }
    dispatch_ready(h);
    send_out(h);
}

static void h2_pump(sl_proto *s)
{
    send_out(h2_of(s));
}

static void h2_shutdown(sl_proto *s)
{
    sl_h2 *h = h2_of(s);
    if (h->goaway || h->broken)
        return;
    h->goaway = true;
    /* Streams up to the last one processed still get their answers; later ones are refused and
     * the client may retry them elsewhere. */
    nghttp2_submit_goaway(h->ss, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ss),
                          NGHTTP2_NO_ERROR, NULL, 0);
    /* Streams the handler would keep open (watches) end now. A callback closes its exchange,
     * which stays on the list until nghttp2 closes the stream, so walk a snapshot of the ones
     * to tell (bounded by the connection's streams). */
    size_t n = 0;
    for (sl_exchange *ex = h->all; ex; ex = ex->next)
        n += ex->state == SL_EX_DISPATCHED && ex->drain_cb;
    if (n) {
        sl_exchange **tell = malloc(n * sizeof *tell);
        size_t k = 0;
        for (sl_exchange *ex = h->all; tell && ex && k < n; ex = ex->next)
            if (ex->state == SL_EX_DISPATCHED && ex->drain_cb)
                tell[k++] = ex;
        for (size_t i = 0; i < k; i++) {
            sl_exchange *ex = tell[i];
            sl_exchange_cancel_cb cb = ex->drain_cb;
            ex->drain_cb = NULL;
            if (cb && ex->state == SL_EX_DISPATCHED)
                cb(ex->drain_ud, ex);
        }
        free(tell);
    }
    send_out(h);
}

static void h2_eof(sl_proto *s)
{
    h2_of(s)->eof = true;
    h2_shutdown(s);
}

static bool h2_wants_read(const sl_proto *s)
{
    const sl_h2 *h = h2_cof(s);
    return !h->broken && !h->calmed && h->c->out.len < h->c->ctx->lim.out_high_water &&
           nghttp2_session_want_read(h->ss);
}

static bool h2_done(const sl_proto *s)
{
    const sl_h2 *h = h2_cof(s);
    if (h->broken)
        return true;
    if (h->eof && !nghttp2_session_want_write(h->ss)) {
        /* No WINDOW_UPDATE can come any more: what is not sendable now never will be. Only an
         * answer a handler still owes may yet go out. */
        for (const sl_exchange *ex = h->all; ex; ex = ex->next)
            if (ex->state == SL_EX_DISPATCHED)
                return false;
        return true;
    }
    return !nghttp2_session_want_read(h->ss) && !nghttp2_session_want_write(h->ss);
}

static bool h2_has_backlog(const sl_proto *s)
{
    const sl_h2 *h = h2_cof(s);
    return !h->broken && nghttp2_session_want_write(h->ss);
}

static sl_conn_phase h2_phase(const sl_proto *s)
{
    const sl_h2 *h = h2_cof(s);
    if (h->receiving)
        return SL_CONN_READING;
    if (h->unsent)
        return SL_CONN_WRITING;
    if (h->all)
        return SL_CONN_BUSY;
    return SL_CONN_IDLE;
}

const sl_proto_ops sl_h2_ops = {
    .proto = SL_HTTP_2,
    .new = h2_new,
    .free = h2_free,
    .feed = h2_feed,
    .eof = h2_eof,
    .pump = h2_pump,
    .shutdown = h2_shutdown,
    .wants_read = h2_wants_read,
    .done = h2_done,
    .has_backlog = h2_has_backlog,
    .phase = h2_phase,
};

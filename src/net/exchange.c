/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exchanges and the per-loop context (see exchange.h): the pool that recycles exchanges with their
 * buffers so a warm connection serves requests without malloc, the reference counting that makes
 * a late answer a no-op, the gRPC answer helpers, and the cached clock and Date line.
 */
#include "net/exchange.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/grow.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

/* Exchanges kept for reuse per loop, and the largest buffers kept with them: a burst of big
 * requests must not pin its memory forever. */
#define POOL_MAX 512
#define KEEP_BUF_BYTES (8 * 1024)

void sl_http_limits_defaults(sl_http_limits *l)
{
    l->max_header_bytes = 16 * 1024;
    l->max_headers = 100;
    l->max_body_bytes = (1u << 20) + 64;
    l->h1_max_pipeline = 64;
    l->h2_max_streams = 256;
    l->h2_window = 1u << 20;
    l->conn_buffer_bytes = 8u << 20;
    l->out_high_water = 1u << 20;
    l->conn_unsent_bytes = 4u << 20;
    l->unsent_bytes = 256u << 20;
    l->max_conn_errors = 16;
}

static void fill_limits(sl_http_limits *dst, const sl_http_limits *src)
{
    sl_http_limits d;
    sl_http_limits_defaults(&d);
    if (!src) {
        *dst = d;
        return;
    }
    *dst = *src;
#define DEF(f) if (!dst->f) dst->f = d.f
    DEF(max_header_bytes);
    DEF(max_headers);
    DEF(max_body_bytes);
    DEF(h1_max_pipeline);
    DEF(h2_max_streams);
    DEF(h2_window);
    DEF(conn_buffer_bytes);
    DEF(out_high_water);
    DEF(conn_unsent_bytes);
    DEF(unsent_bytes);
    DEF(max_conn_errors);
#undef DEF
    /* HTTP/2 caps the window at 2^31-1 and forbids less than the 65535 default being useful. */
    if (dst->h2_window < 65535)
        dst->h2_window = 65535;
    if (dst->h2_window > 0x7fffffff)
        dst->h2_window = 0x7fffffff;
    /* Offsets into an exchange arena are 32-bit. */
    if (dst->max_body_bytes > (1u << 30))
        dst->max_body_bytes = 1u << 30;
    if (dst->max_header_bytes > (1u << 24))
        dst->max_header_bytes = 1u << 24;
}

sl_http_ctx *sl_http_ctx_new(const sl_http_limits *limits, sl_http_handler handler, void *ud)
{
    sl_http_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return NULL;
    fill_limits(&ctx->lim, limits);
    ctx->handler = handler;
    ctx->handler_ud = ud;
    ctx->date_sec = -1;
    ctx->now_ms = sl_wall_ms();
    return ctx;
}

static void exchange_destroy(sl_exchange *ex)
{
    sl_buf_free(&ex->arena);
    sl_buf_free(&ex->resp);
    free(ex->hoff);
    free(ex->hview);
    free(ex);
}

static void ctx_destroy(sl_http_ctx *ctx)
{
    sl_exchange *ex = ctx->free_list;
    while (ex) {
        sl_exchange *n = ex->next;
        exchange_destroy(ex);
        ex = n;
    }
    free(ctx);
}

void sl_http_ctx_free(sl_http_ctx *ctx)
{
    if (!ctx)
        return;
    ctx->dying = true;
    if (ctx->outstanding == 0)
        ctx_destroy(ctx);
}

/* Epoch ms minus the monotonic clock's ms, read at one instant in nanoseconds: a constant of the
 * machine (until the wall clock is stepped or slewed), the same in every process and every loop.
 * Derived instead from sl_wall_ms() - uv_now(loop), it carried the truncation of two ms clocks and
 * the age of the loop's cached time, so two nodes on one machine could disagree on `now` by a
 * millisecond or more, which decides a GCRA item at its boundary differently on each (two nodes
 * sharing one Redis store). */
static int64_t wall_minus_monotonic_ms(void)
{
    struct timespec w, m;
    clock_gettime(CLOCK_REALTIME, &w);
    clock_gettime(CLOCK_MONOTONIC, &m);
    int64_t ns = ((int64_t)w.tv_sec - (int64_t)m.tv_sec) * 1000000000 + (w.tv_nsec - m.tv_nsec);
    /* to the nearest ms: with uv_now's truncated ms, `now` stays within 1.5 ms of the wall clock */
    return ns >= 0 ? (ns + 500000) / 1000000 : -((-ns + 500000) / 1000000);
}

void sl_http_ctx_attach_loop(sl_http_ctx *ctx, uv_loop_t *loop, int worker)
{
    ctx->loop = loop;
    ctx->worker = worker;
    ctx->wall_offset = loop ? wall_minus_monotonic_ms() : 0;
}

void sl_http_ctx_resync_clock(sl_http_ctx *ctx)
{
    if (!ctx->loop)
        return;
    /* Follow real wall-clock steps only: NTP's slewing moves the offset by microseconds, and
     * following every small change would let `now` step back. */
    int64_t off = wall_minus_monotonic_ms();
    int64_t d = off - ctx->wall_offset;
    if (d > 50 || d < -50)
        ctx->wall_offset = off;
}

void sl_http_ctx_set_now(sl_http_ctx *ctx, int64_t now_ms)
{
    ctx->now_ms = now_ms;
}

int64_t sl_http_ctx_now_ms(const sl_http_ctx *ctx)
{
    if (ctx->loop)
        return (int64_t)uv_now(ctx->loop) + ctx->wall_offset;
    return ctx->now_ms;
}

const sl_http_limits *sl_http_ctx_limits(const sl_http_ctx *ctx)
{
    return &ctx->lim;
}

void sl_http_ctx_stats(const sl_http_ctx *ctx, sl_net_stats *s)
{
    uint64_t v[SL_NET_STAT_COUNT];
    for (int i = 0; i < SL_NET_STAT_COUNT; i++)
        v[i] = atomic_load_explicit(&ctx->stat[i], memory_order_relaxed);
    s->conns_open += v[SL_NET_CONNS_OPEN];
    s->conns_accepted += v[SL_NET_CONNS_ACCEPTED];
    s->conns_refused += v[SL_NET_CONNS_REFUSED];
    s->conns_timed_out += v[SL_NET_CONNS_TIMED_OUT];
    s->requests_h1 += v[SL_NET_REQUESTS_H1];
    s->requests_h2 += v[SL_NET_REQUESTS_H2];
    s->requests_grpc += v[SL_NET_REQUESTS_GRPC];
    s->protocol_errors += v[SL_NET_PROTOCOL_ERRORS];
    s->bytes_in += v[SL_NET_BYTES_IN];
    s->bytes_out += v[SL_NET_BYTES_OUT];
    s->conns_calmed += v[SL_NET_CONNS_CALMED];
    s->accept_pauses += v[SL_NET_ACCEPT_PAUSES];
}

void sl_http_ctx_set_reqmem(sl_http_ctx *ctx, sl_reqmem *m)
{
    ctx->mem.m = m;
}

size_t sl_http_ctx_pending(const sl_http_ctx *ctx)
{
    return ctx->pending;
}

const char *sl_http_ctx_date_line(sl_http_ctx *ctx, size_t *len)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char mons[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t sec = sl_http_ctx_now_ms(ctx) / 1000;
    if (sec != ctx->date_sec) {
        time_t t = (time_t)sec;
        struct tm tm;
        gmtime_r(&t, &tm);
        int n = snprintf(ctx->date_line, sizeof ctx->date_line,
                         "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", days[tm.tm_wday % 7],
                         tm.tm_mday, mons[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour,
                         tm.tm_min, tm.tm_sec);
        ctx->date_len = n > 0 && (size_t)n < sizeof ctx->date_line ? (size_t)n : 0;
        ctx->date_sec = sec;
    }
    *len = ctx->date_len;
    return ctx->date_line;
}

/* ---- exchange lifecycle ---- */

sl_exchange *sl_exchange_new(sl_http_ctx *ctx, const sl_exchange_ops *ops, void *owner)
{
    sl_exchange *ex = ctx->free_list;
    if (ex) {
        ctx->free_list = ex->next;
        ctx->nfree--;
    } else {
        ex = calloc(1, sizeof *ex);
        if (!ex)
            return NULL;
    }
    /* Keep the buffers, clear the rest. */
    sl_buf arena = ex->arena, resp = ex->resp;
    sl_hdr_off *hoff = ex->hoff;
    sl_http_header *hview = ex->hview;
    uint32_t hcap = ex->hcap;
    memset(ex, 0, offsetof(sl_exchange, peer));
    ex->has_peer = false;
    ex->arena = arena;
    ex->resp = resp;
    ex->hoff = hoff;
    ex->hview = hview;
    ex->hcap = hcap;
    sl_buf_reset(&ex->arena);
    sl_buf_reset(&ex->resp);
    ex->arena.cap = ctx->lim.max_header_bytes + ctx->lim.max_body_bytes + 64 * 1024;
    ex->resp.cap = SL_BUF_DEFAULT_CAP;
    ex->ctx = ctx;
    ex->ops = ops;
    ex->owner = owner;
    ex->refs = 1;
    ex->state = SL_EX_RECV;
    ex->keepalive = true;
    ctx->outstanding++;
    return ex;
}

void sl_exchange_unref(sl_exchange *ex)
{
    if (--ex->refs)
        return;
    sl_http_ctx *ctx = ex->ctx;
    ctx->outstanding--;
    if (ex->charged) {
        if (ex->conn_mem)
            *ex->conn_mem -= ex->charged;
        sl_reqmem_release(&ctx->mem, ex->charged);
        ex->charged = 0;
    }
    ex->conn_mem = NULL;
    if (ctx->dying || ctx->nfree >= POOL_MAX) {
        exchange_destroy(ex);
        if (ctx->dying && ctx->outstanding == 0)
            ctx_destroy(ctx);
        return;
    }
    if (ex->arena.alloc > KEEP_BUF_BYTES)
        sl_buf_free(&ex->arena);
    if (ex->resp.alloc > KEEP_BUF_BYTES)
        sl_buf_free(&ex->resp);
    ex->owner = NULL;
    ex->ops = NULL;
    ex->next = ctx->free_list;
    ctx->free_list = ex;
    ctx->nfree++;
}

void sl_exchange_detach(sl_exchange *ex)
{
    if (ex->conn_mem) { /* the connection stops counting it; the ctx counts it until released */
        *ex->conn_mem -= ex->charged;
        ex->conn_mem = NULL;
    }
    if (!ex->owner)
        return;
    ex->owner = NULL;
    ex->ops = NULL;
    if (ex->state == SL_EX_DISPATCHED && ex->cancel_cb) {
        sl_exchange_cancel_cb cb = ex->cancel_cb;
        ex->cancel_cb = NULL;
        cb(ex->cancel_ud, ex);
    }
}

void sl_exchange_charge(sl_exchange *ex)
{
    size_t d = ex->arena.alloc - ex->charged;
    ex->charged = ex->arena.alloc;
    sl_reqmem_charge(&ex->ctx->mem, d);
    if (ex->conn_mem)
        *ex->conn_mem += d;
}

int sl_exchange_add_header(sl_exchange *ex, uint32_t name, uint32_t name_len, uint32_t value,
                           uint32_t value_len)
{
    if (ex->nh >= ex->ctx->lim.max_headers)
        return -E2BIG;
    if (ex->nh == ex->hcap) {
        size_t oc = ex->hcap, vc = ex->hcap; /* both arrays have hcap entries: hview grows last */
        uint32_t max = ex->ctx->lim.max_headers;
        if (sl_grow(&ex->hoff, &oc, ex->nh, 1, 16, max) ||
            sl_grow(&ex->hview, &vc, ex->nh, 1, 16, max))
            return -ENOMEM;
        ex->hcap = (uint32_t)vc;
    }
    ex->hoff[ex->nh++] = (sl_hdr_off){name, name_len, value, value_len};
    return 0;
}

void sl_exchange_finish_request(sl_exchange *ex, sl_http_proto proto)
{
    /* The body gets a NUL past its end so text parsers can take it as a C string. */
    if (ex->body_len && sl_buf_append(&ex->arena, "", 1) != 0)
        ex->body_len = 0; /* cannot happen: the arena cap leaves room */
    const char *a = (const char *)ex->arena.data;
    sl_http_request *r = &ex->req;
    if (!a) { /* nothing was stored (a request refused at its first bytes) */
        a = "";
        ex->method_len = ex->path_len = 0;
        ex->nh = 0;
        ex->body_len = 0;
    }
    if (ex->method_static) {
        r->method = ex->method_static;
        r->method_len = strlen(ex->method_static);
    } else if (ex->method_len) {
        r->method = a + ex->method_off;
        r->method_len = ex->method_len;
    } else {
        r->method = "";
        r->method_len = 0;
    }
    if (ex->path_len) {
        r->path = a + ex->path_off;
        r->path_len = ex->path_len;
    } else {
        r->path = "";
        r->path_len = 0;
    }
    for (uint32_t i = 0; i < ex->nh; i++) {
        const sl_hdr_off *o = &ex->hoff[i];
        ex->hview[i] = (sl_http_header){a + o->name, o->name_len, a + o->value, o->value_len};
    }
    r->headers = ex->hview;
    r->nheaders = ex->nh;
    r->grpc_encoding = ex->h_enc ? &ex->hview[ex->h_enc - 1] : NULL;
    r->grpc_accept_encoding = ex->h_accept ? &ex->hview[ex->h_accept - 1] : NULL;
    r->grpc_timeout = ex->h_timeout ? &ex->hview[ex->h_timeout - 1] : NULL;
    r->body = ex->body_len ? (const uint8_t *)a + ex->body_off : (const uint8_t *)"";
    r->body_len = ex->body_len;
    r->proto = proto;
    r->peer = ex->has_peer ? (const struct sockaddr *)&ex->peer : NULL;
}

const char *sl_exchange_peer_identity(const sl_exchange *ex)
{
    return ex->owner ? ex->peer_identity : NULL;
}

void sl_exchange_dispatch(sl_exchange *ex)
{
    sl_http_ctx *ctx = ex->ctx;
    ex->state = SL_EX_DISPATCHED;
    ex->refs++;
    ctx->pending++;
    ctx->handler(ctx->handler_ud, ex);
}

void sl_exchange_respond_error(sl_exchange *ex, int status, const char *text)
{
    ex->state = SL_EX_DISPATCHED;
    ex->refs++;
    ex->ctx->pending++;
    if (ex->req.grpc) {
        /* gRPC clients read grpc-status, not the HTTP status (which must be 200). */
        sl_exchange_respond_grpc_status(ex, 8 /* RESOURCE_EXHAUSTED */, text);
        return;
    }
    sl_exchange_respond_simple(ex, status, "text/plain", text, strlen(text));
}

/* ---- handler side ---- */

const sl_http_request *sl_exchange_request(const sl_exchange *ex)
{
    return &ex->req;
}

bool sl_http_name_eq(const char *name, size_t len, const char *lower)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 'A' && c <= 'Z')
            c += 32;
        if (c != (unsigned char)lower[i] || !lower[i])
            return false;
    }
    return lower[len] == '\0';
}

const sl_http_header *sl_http_header_find(const sl_http_request *r, const char *name)
{
    size_t n = strlen(name);
    char low[256];
    if (n >= sizeof low)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        low[i] = (name[i] >= 'A' && name[i] <= 'Z') ? (char)(name[i] + 32) : name[i];
    for (size_t i = 0; i < r->nheaders; i++)
        if (r->headers[i].name_len == n && sl_http_name_eq(r->headers[i].name, n, low))
            return &r->headers[i];
    return NULL;
}

bool sl_http_hop_header(const char *name, size_t len)
{
    switch (len) {
    case 2:
        return sl_http_name_eq(name, len, "te");
    case 7:
        return sl_http_name_eq(name, len, "upgrade");
    case 10:
        return sl_http_name_eq(name, len, "connection") || sl_http_name_eq(name, len, "keep-alive");
    case 14:
        return sl_http_name_eq(name, len, "content-length");
    case 16:
        return sl_http_name_eq(name, len, "proxy-connection");
    case 17:
        return sl_http_name_eq(name, len, "transfer-encoding");
    default:
        return false;
    }
}

const char *sl_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

int sl_exchange_respond(sl_exchange *ex, const sl_http_response *r)
{
    if (ex->state != SL_EX_DISPATCHED)
        return -EINVAL; /* answered twice: a handler bug, refused rather than corrupting */
    ex->state = SL_EX_RESPONDED;
    ex->ctx->pending--;
    int rc;
    if (!ex->owner) {
        rc = -ENOTCONN;
    } else if (r->status < 200 || r->status > 599 || r->ntrailers > SL_HTTP_MAX_TRAILERS) {
        static const char msg[] = "bad response from handler\n";
        sl_http_header ct = SL_HTTP_HEADER("content-type", "text/plain");
        sl_http_response e = {.status = 500, .headers = &ct, .nheaders = 1, .body = msg,
                              .body_len = sizeof msg - 1};
        ex->ops->respond(ex->owner, ex, &e);
        rc = -EINVAL;
    } else {
        rc = ex->ops->respond(ex->owner, ex, r);
    }
    sl_exchange_unref(ex);
    return rc;
}

int sl_exchange_stream_open(sl_exchange *ex, const sl_http_response *head)
{
    if (ex->state != SL_EX_DISPATCHED || ex->streaming)
        return -EINVAL;
    if (!ex->owner)
        return -ENOTCONN;
    if (!ex->ops->stream_open)
        return -ENOTSUP;
    sl_buf_reset(&ex->resp);
    ex->resp_off = ex->resp_body_len = 0;
    ex->ntrailers = 0;
    int rc = ex->ops->stream_open(ex->owner, ex, head);
    if (!rc)
        ex->streaming = true;
    return rc;
}

size_t sl_exchange_stream_queued(const sl_exchange *ex)
{
    return ex->streaming ? ex->resp_body_len - ex->resp_off : 0;
}

int sl_exchange_stream_push(sl_exchange *ex, const void *data, size_t len, size_t max_queued)
{
    if (ex->state != SL_EX_DISPATCHED || !ex->streaming)
        return -EINVAL;
    if (!ex->owner)
        return -ENOTCONN;
    size_t queued = ex->resp_body_len - ex->resp_off;
    if (queued + len > max_queued)
        return -ENOBUFS;
    if (ex->resp_off) { /* drop what the protocol took, keep the rest at the front */
        sl_buf_consume(&ex->resp, ex->resp_off);
        ex->resp_off = 0;
    }
    if (sl_buf_append(&ex->resp, data, len))
        return -ENOMEM;
    ex->resp_body_len = ex->resp.len;
    ex->ops->stream_more(ex->owner, ex);
    return 0;
}

int sl_exchange_stream_close(sl_exchange *ex, const sl_http_header *trailers, size_t ntrailers)
{
    if (ex->state != SL_EX_DISPATCHED || !ex->streaming || ntrailers > SL_HTTP_MAX_TRAILERS)
        return -EINVAL;
    ex->state = SL_EX_RESPONDED;
    ex->ctx->pending--;
    int rc = 0;
    if (!ex->owner) {
        rc = -ENOTCONN;
    } else {
        for (size_t i = 0; i < ntrailers && !rc; i++) {
            sl_hdr_off *o = &ex->trailers[ex->ntrailers];
            o->name = (uint32_t)ex->resp.len;
            o->name_len = (uint32_t)trailers[i].name_len;
            rc = sl_buf_append(&ex->resp, trailers[i].name, trailers[i].name_len);
            o->value = (uint32_t)ex->resp.len;
            o->value_len = (uint32_t)trailers[i].value_len;
            if (!rc)
                rc = sl_buf_append(&ex->resp, trailers[i].value, trailers[i].value_len);
            ex->ntrailers++;
        }
        if (rc)
            ex->ntrailers = 0; /* the stream ends without them: the client sees no status */
        ex->stream_end = true;
        ex->ops->stream_more(ex->owner, ex);
    }
    sl_exchange_unref(ex);
    return rc;
}

int sl_exchange_respond_simple(sl_exchange *ex, int status, const char *content_type,
                               const void *body, size_t body_len)
{
    sl_http_header h;
    sl_http_response r = {.status = status, .body = body, .body_len = body_len};
    if (content_type) {
        h = (sl_http_header){"content-type", 12, content_type, strlen(content_type)};
        r.headers = &h;
        r.nheaders = 1;
    }
    return sl_exchange_respond(ex, &r);
}

/* grpc-status and the percent-encoded grpc-message (wire/grpc_frame does the encoding; the
 * message is capped so an error text cannot blow up a trailer). */
#define GRPC_MESSAGE_MAX 1024

static int grpc_status_fields(sl_http_header *out, char *num, sl_buf *enc, int grpc_status,
                              const char *grpc_message)
{
    int n = snprintf(num, 12, "%d", grpc_status);
    out[0] = (sl_http_header){"grpc-status", 11, num, (size_t)(n > 0 ? n : 0)};
    if (!grpc_message || !*grpc_message)
        return 1;
    size_t len = strnlen(grpc_message, GRPC_MESSAGE_MAX);
    if (sl_grpc_message_encode(grpc_message, len, enc) != 0)
        return 1; /* out of memory: the status alone still says what happened */
    out[1] = (sl_http_header){"grpc-message", 12, (const char *)enc->data, enc->len};
    return 2;
}

int sl_exchange_respond_grpc(sl_exchange *ex, const void *msg, size_t msg_len, int grpc_status,
                             const char *grpc_message)
{
    return sl_exchange_respond_grpc_enc(ex, msg, msg_len, grpc_status, grpc_message, NULL, false);
}

int sl_exchange_respond_grpc_enc(sl_exchange *ex, const void *msg, size_t msg_len,
                                 int grpc_status, const char *grpc_message, const char *encoding,
                                 bool advertise)
{
    char num[12];
    sl_buf enc;
    sl_buf_init(&enc, 4 * GRPC_MESSAGE_MAX);
    sl_http_header h[3] = {SL_HTTP_HEADER("content-type", "application/grpc")};
    size_t nh = 1;
    if (advertise || encoding) /* HPACK makes it ~750 instructions an answer: when it matters */
        h[nh++] = SL_HTTP_HEADER("grpc-accept-encoding", SL_GRPC_ACCEPT_ENCODING);
    if (encoding)
        h[nh++] = (sl_http_header){"grpc-encoding", 13, encoding, strlen(encoding)};
    sl_http_header tr[2];
    int nt = grpc_status_fields(tr, num, &enc, grpc_status, grpc_message);
    sl_http_response r = {.status = 200, .headers = h, .nheaders = nh, .body = msg,
                          .body_len = msg_len, .trailers = tr, .ntrailers = (size_t)nt};
    int rc = sl_exchange_respond(ex, &r);
    sl_buf_free(&enc);
    return rc;
}

int sl_exchange_respond_grpc_status(sl_exchange *ex, int grpc_status, const char *grpc_message)
{
    char num[12];
    sl_buf enc;
    sl_buf_init(&enc, 4 * GRPC_MESSAGE_MAX);
    sl_http_header h[4];
    h[0] = SL_HTTP_HEADER("content-type", "application/grpc");
    /* on every answer, so that a client whose compressed call was refused falls back */
    h[1] = SL_HTTP_HEADER("grpc-accept-encoding", SL_GRPC_ACCEPT_ENCODING);
    int nt = grpc_status_fields(h + 2, num, &enc, grpc_status, grpc_message);
    sl_http_response r = {.status = 200, .headers = h, .nheaders = 2 + (size_t)nt};
    int rc = sl_exchange_respond(ex, &r);
    sl_buf_free(&enc);
    return rc;
}

void sl_exchange_set_drain(sl_exchange *ex, sl_exchange_cancel_cb cb, void *ud)
{
    ex->drain_cb = cb;
    ex->drain_ud = ud;
}

void sl_exchange_set_recv(sl_exchange *ex, sl_exchange_recv_cb cb, void *ud)
{
    ex->recv_cb = cb;
    ex->recv_ud = ud;
}

void sl_http_ctx_set_early(sl_http_ctx *ctx, sl_http_early_cb early)
{
    ctx->early = early;
}

void sl_exchange_set_cancel(sl_exchange *ex, sl_exchange_cancel_cb cb, void *ud)
{
    ex->cancel_cb = cb;
    ex->cancel_ud = ud;
}

bool sl_exchange_alive(const sl_exchange *ex)
{
    return ex->owner != NULL;
}

uv_loop_t *sl_exchange_loop(const sl_exchange *ex)
{
    return ex->ctx->loop;
}

int sl_exchange_worker(const sl_exchange *ex)
{
    return ex->ctx->worker;
}

int64_t sl_exchange_now_ms(const sl_exchange *ex)
{
    return sl_http_ctx_now_ms(ex->ctx);
}

void sl_exchange_set_user(sl_exchange *ex, void *user)
{
    ex->user = user;
}

void *sl_exchange_user(const sl_exchange *ex)
{
    return ex->user;
}

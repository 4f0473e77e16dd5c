/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/1.1 over llhttp (see h1.h). The parser's callbacks append the request line, header fields
 * and body into the current exchange's arena (fields may arrive split over reads, so they are
 * appended piece by piece and closed by the *_complete callbacks); on_message_complete pauses the
 * parser so dispatch happens outside llhttp, one message at a time, where backpressure is decided.
 */
#include "net/h1.h"

#include <errno.h>
#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

#include "net/exchange.h"

typedef struct sl_h1 {
    sl_proto base; /* first: conn.c holds &base (net/proto.h) */
    llhttp_t parser;
    sl_conn *c;
    sl_exchange *cur;           /* being received */
    sl_exchange *qhead, *qtail; /* dispatched, answers owed in this order */
    uint32_t qlen;
    size_t held;                /* arena bytes of queued exchanges */
    sl_buf in;                  /* input kept while parsing is paused */
    bool msg_in_progress;
    bool dead;                  /* parse nothing more; end after the queued answers */
    bool field_open, value_open, url_open;
    uint32_t name_off, name_len, val_off, val_len;
} sl_h1;

static int h1_respond(void *owner, sl_exchange *ex, const sl_http_response *r);
static const sl_exchange_ops exchange_ops = {.respond = h1_respond};

/* Largest input kept while paused: one read buffer plus what a read already in flight brings. */
#define IN_CAP (256 * 1024)

/* ---- parser callbacks ---- */

static int reject(sl_exchange *ex, int status)
{
    if (!ex->reject)
        ex->reject = (uint16_t)status;
    return -1;
}

/* Charge header-ish bytes against max_header_bytes before storing them. */
static int put_head(sl_h1 *h, const char *at, size_t len)
{
    sl_exchange *ex = h->cur;
    ex->hdr_bytes += len;
    if (ex->hdr_bytes > ex->ctx->lim.max_header_bytes)
        return reject(ex, 431);
    if (sl_exchange_put(ex, at, len) < 0)
        return reject(ex, 431);
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    sl_h1 *h = p->data;
    sl_conn *c = h->c;
    sl_exchange *ex = sl_exchange_new(c->ctx, &exchange_ops, h);
    if (!ex)
        return -1;
    if (c->has_peer) {
        ex->peer = c->peer;
        ex->has_peer = true;
    }
    ex->peer_identity = c->peer_identity;
    ex->conn_mem = &c->req_bytes;
    h->cur = ex;
    h->msg_in_progress = true;
    h->field_open = h->value_open = h->url_open = false;
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    sl_h1 *h = p->data;
    if (!h->url_open) {
        h->url_open = true;
        h->cur->path_off = (uint32_t)h->cur->arena.len;
    }
    if (put_head(h, at, len))
        return -1;
    h->cur->path_len += (uint32_t)len; /* counted once stored: a refused request's view stays sane */
    return 0;
}

static int on_url_complete(llhttp_t *p)
{
    sl_h1 *h = p->data;
    if (!h->url_open)
        h->cur->path_off = (uint32_t)h->cur->arena.len;
    return put_head(h, "", 1);
}

static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    sl_h1 *h = p->data;
    if (h->cur->headers_done)
        return 0; /* chunked trailers are not kept */
    if (!h->field_open) {
        h->field_open = true;
        h->name_off = (uint32_t)h->cur->arena.len;
        h->name_len = 0;
    }
    if (put_head(h, at, len))
        return -1;
    h->name_len += (uint32_t)len;
    return 0;
}

/* RFC 9110 tchar. Debian builds llhttp in its loose mode, which lets spaces and empty names
 * through; a name that is not a token is a malformed request here. */
static bool is_token(const uint8_t *s, size_t n)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              (ch && memchr(extra, ch, sizeof extra - 1))))
            return false;
    }
    return true;
}

static int on_header_field_complete(llhttp_t *p)
{
    sl_h1 *h = p->data;
    sl_exchange *ex = h->cur;
    if (ex->headers_done)
        return 0;
    if (!h->field_open) {
        h->name_off = (uint32_t)ex->arena.len;
        h->name_len = 0;
    }
    h->field_open = false;
    if (!is_token(ex->arena.data + h->name_off, h->name_len))
        return -1;
    return put_head(h, "", 1);
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    sl_h1 *h = p->data;
    if (h->cur->headers_done)
        return 0;
    if (!h->value_open) {
        h->value_open = true;
        h->val_off = (uint32_t)h->cur->arena.len;
        h->val_len = 0;
    }
    if (put_head(h, at, len))
        return -1;
    h->val_len += (uint32_t)len;
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    sl_h1 *h = p->data;
    sl_exchange *ex = h->cur;
    if (ex->headers_done)
        return 0;
    if (!h->value_open) {
        h->val_off = (uint32_t)ex->arena.len;
        h->val_len = 0;
    }
    h->value_open = false;
    if (put_head(h, "", 1))
        return -1;
    if (sl_exchange_add_header(ex, h->name_off, h->name_len, h->val_off, h->val_len))
        return reject(ex, 431);
    return 0;
}

static bool expects_continue(const sl_exchange *ex)
{
    const char *a = (const char *)ex->arena.data;
    for (uint32_t i = 0; i < ex->nh; i++) {
        const sl_hdr_off *o = &ex->hoff[i];
        if (o->name_len == 6 && sl_http_name_eq(a + o->name, 6, "expect"))
            return o->value_len == 12 && sl_http_name_eq(a + o->value, 12, "100-continue");
    }
    return false;
}

static int on_headers_complete(llhttp_t *p)
{
    sl_h1 *h = p->data;
    sl_exchange *ex = h->cur;
    ex->headers_done = true;
    ex->method_static = llhttp_method_name((llhttp_method_t)p->method);
    ex->is_head = p->method == HTTP_HEAD;
    ex->http10 = p->http_major == 1 && p->http_minor == 0;
    ex->keepalive = llhttp_should_keep_alive(p) != 0;
    bool has_body = (p->flags & F_CHUNKED) || p->content_length > 0;
    /* Over the server's bound on buffered request bytes, a request that brings more than a small
     * body is answered 503 (and, HTTP/1.1 being unable to skip a body it has not read, the
     * connection ends); small ones go on (net/reqmem.h). */
    if (((p->flags & F_CHUNKED) || p->content_length > SL_REQMEM_SMALL_BODY) &&
        sl_reqmem_over(ex->ctx->mem.m))
        return reject(ex, 503);
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > 0) {
        if (p->content_length > ex->ctx->lim.max_body_bytes)
            return reject(ex, 413);
        /* One allocation for the whole body (+ its NUL) instead of doubling. */
        if (sl_buf_reserve(&ex->arena, (size_t)p->content_length + 1))
            return reject(ex, 413);
    }
    /* Only when no earlier answer is owed: a 100 must not jump ahead of one. */
    if (has_body && h->qlen == 0 && !ex->http10 && expects_continue(ex)) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (sl_buf_append(&h->c->out, cont, sizeof cont - 1))
            return -1;
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    sl_h1 *h = p->data;
    sl_exchange *ex = h->cur;
    if (ex->body_len + len > ex->ctx->lim.max_body_bytes)
        return reject(ex, 413);
    if (ex->body_len + len > SL_REQMEM_SMALL_BODY && sl_reqmem_over(ex->ctx->mem.m))
        return reject(ex, 503); /* a chunked body growing past the bound */
    if (!ex->body_len)
        ex->body_off = (uint32_t)ex->arena.len;
    if (sl_exchange_put(ex, at, len) < 0)
        return reject(ex, 413);
    ex->body_len += len;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    sl_h1 *h = p->data;
    h->msg_in_progress = false;
    return HPE_PAUSED;
}

static const llhttp_settings_t h1_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_url_complete = on_url_complete,
    .on_header_field = on_header_field,
    .on_header_field_complete = on_header_field_complete,
    .on_header_value = on_header_value,
    .on_header_value_complete = on_header_value_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- queue and answers ---- */

static void q_push(sl_h1 *h, sl_exchange *ex)
{
    ex->next = NULL;
    if (h->qtail)
        h->qtail->next = ex;
    else
        h->qhead = ex;
    h->qtail = ex;
    h->qlen++;
    ex->held = ex->arena.alloc;
    h->held += ex->held;
}

static void q_pop(sl_h1 *h)
{
    sl_exchange *ex = h->qhead;
    h->qhead = ex->next;
    if (!h->qhead)
        h->qtail = NULL;
    h->qlen--;
    h->held -= ex->held;
    ex->next = NULL;
    sl_exchange_unref(ex); /* the connection's reference */
}

static char *put_u64(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

static bool unsafe_value(const char *s, size_t n)
{
    return memchr(s, '\r', n) || memchr(s, '\n', n);
}

#define APPEND(p, s, n) (memcpy((p), (s), (n)), (p) += (n))

/* Serialize one answer into dst, computing the size first so there is one reserve and no
 * formatting library on the hot path. */
static int h1_serialize(sl_h1 *h, sl_buf *dst, const sl_exchange *ex, const sl_http_response *r,
                        bool close)
{
    int st = r->status;
    const char *reason = sl_http_reason(st);
    size_t reason_len = strlen(reason);
    size_t date_len;
    const char *date = sl_http_ctx_date_line(h->c->ctx, &date_len);
    bool no_body = ex->is_head || st == 204 || st == 304;
    bool no_length = st == 204;
    size_t body_len = r->body_len;
    char lenbuf[24], *lenp = put_u64(lenbuf + sizeof lenbuf, body_len);
    size_t len_len = (size_t)(lenbuf + sizeof lenbuf - lenp);

    static const char cl[] = "Content-Length: ";
    static const char conn_close[] = "Connection: close\r\n";
    static const char conn_ka[] = "Connection: keep-alive\r\n";
    size_t total = 9 + 3 + 1 + reason_len + 2 + date_len + 2;
    if (!no_length)
        total += sizeof cl - 1 + len_len + 2;
    if (close)
        total += sizeof conn_close - 1;
    else if (ex->http10)
        total += sizeof conn_ka - 1;
    for (size_t i = 0; i < r->nheaders; i++) {
        const sl_http_header *hd = &r->headers[i];
        total += hd->name_len + 2 + hd->value_len + 2;
    }
    if (!no_body)
        total += body_len;
    int rc = sl_buf_reserve(dst, total);
    if (rc)
        return rc;

    char *p = (char *)dst->data + dst->len;
    APPEND(p, "HTTP/1.1 ", 9);
    *p++ = (char)('0' + st / 100);
    *p++ = (char)('0' + st / 10 % 10);
    *p++ = (char)('0' + st % 10);
    *p++ = ' ';
    APPEND(p, reason, reason_len);
    APPEND(p, "\r\n", 2);
    APPEND(p, date, date_len);
    if (!no_length) {
        APPEND(p, cl, sizeof cl - 1);
        APPEND(p, lenp, len_len);
        APPEND(p, "\r\n", 2);
    }
    if (close)
        APPEND(p, conn_close, sizeof conn_close - 1);
    else if (ex->http10)
        APPEND(p, conn_ka, sizeof conn_ka - 1);
    for (size_t i = 0; i < r->nheaders; i++) {
        const sl_http_header *hd = &r->headers[i];
        /* Headers the server manages, and any that would split the response, are dropped. */
        if (sl_http_hop_header(hd->name, hd->name_len) ||
            (hd->name_len == 4 && sl_http_name_eq(hd->name, 4, "date")) ||
            unsafe_value(hd->name, hd->name_len) || unsafe_value(hd->value, hd->value_len))
            continue;
        APPEND(p, hd->name, hd->name_len);
        APPEND(p, ": ", 2);
        APPEND(p, hd->value, hd->value_len);
        APPEND(p, "\r\n", 2);
    }
    APPEND(p, "\r\n", 2);
    if (!no_body && body_len)
        APPEND(p, r->body, body_len);
    dst->len = (size_t)(p - (char *)dst->data);
    return 0;
}

static bool closes_after(const sl_h1 *h, const sl_exchange *ex)
{
    return !ex->keepalive || (h->dead && ex == h->qtail);
}

/* Move answers that waited for their turn into the output. */
static void flush_ready(sl_h1 *h)
{
    while (h->qhead && h->qhead->ready) {
        sl_exchange *ex = h->qhead;
        if (sl_buf_append(&h->c->out, ex->resp.data, ex->resp.len))
            h->c->fatal = true;
        q_pop(h);
    }
}

static int h1_respond(void *owner, sl_exchange *ex, const sl_http_response *r)
{
    sl_h1 *h = owner;
    sl_conn *c = h->c;
    int rc;
    if (ex == h->qhead) {
        rc = h1_serialize(h, &c->out, ex, r, closes_after(h, ex));
        q_pop(h);
        flush_ready(h);
    } else {
        sl_buf_reset(&ex->resp);
        rc = h1_serialize(h, &ex->resp, ex, r, closes_after(h, ex));
        ex->ready = true;
    }
    if (rc)
        c->fatal = true; /* an answer too large to buffer: the stream of answers is broken */
    sl_conn_request_wake(c);
    return rc;
}

/* ---- parsing ---- */

static bool can_start(const sl_h1 *h)
{
    const sl_conn *c = h->c;
    const sl_http_limits *lim = &c->ctx->lim;
    return !h->dead && !c->draining && !c->fatal && h->qlen < lim->h1_max_pipeline &&
           c->out.len < lim->out_high_water && h->held < lim->conn_buffer_bytes;
}

static void complete(sl_h1 *h)
{
    sl_exchange *ex = h->cur;
    sl_conn *c = h->c;
    h->cur = NULL;
    if (!ex)
        return;
    /* Upgrades are declined (the answer is plain HTTP/1.1 and the client carries on with it,
     * RFC 9110 7.8), but after CONNECT the client would send tunnel bytes: stop there. */
    if (!ex->keepalive || h->parser.method == HTTP_CONNECT || c->draining)
        h->dead = true; /* this is the last request the connection carries */
    q_push(h, ex);
    c->completed++;
    sl_net_stat_add(c->ctx, SL_NET_REQUESTS_H1, 1);
    sl_exchange_finish_request(ex, SL_HTTP_1);
    sl_exchange_dispatch(ex);
}

static void fail(sl_h1 *h)
{
    sl_conn *c = h->c;
    sl_exchange *ex = h->cur;
    h->cur = NULL;
    h->msg_in_progress = false;
    h->dead = true;
    if (!ex) {
        ex = sl_exchange_new(c->ctx, &exchange_ops, h);
        if (!ex) {
            c->fatal = true;
            return;
        }
        ex->conn_mem = &c->req_bytes;
    }
    int status = ex->reject ? ex->reject : 400;
    if (status == 503) {
        sl_reqmem_count_refused(c->ctx->mem.m); /* our bound, not the client's error */
    } else {
        sl_net_stat_add(c->ctx, SL_NET_PROTOCOL_ERRORS, 1);
        sl_net_stat_add(c->ctx, SL_NET_CONNS_CALMED, 1); /* HTTP/1.1 closes on its first error */
    }
    ex->keepalive = false;
    ex->is_head = false;
    ex->http10 = false;
    q_push(h, ex);
    sl_exchange_finish_request(ex, SL_HTTP_1);
    const char *text = status == 413   ? "request body too large\n"
                       : status == 431 ? "request header fields too large\n"
                       : status == 503 ? SL_REQMEM_REFUSED_TEXT
                                       : "bad request\n";
    sl_exchange_respond_error(ex, status, text);
}

/* Parse as much of p as allowed; returns the bytes consumed. */
static size_t parse(sl_h1 *h, const char *p, size_t n)
{
    size_t off = 0;
    while (off < n) {
        if (h->dead || h->c->fatal)
            return n; /* input after the last request is dropped */
        if (!h->msg_in_progress && !can_start(h))
            break;
        llhttp_errno_t e = llhttp_execute(&h->parser, p + off, n - off);
        if (e == HPE_OK) {
            off = n;
            break;
        }
        if (e == HPE_PAUSED || e == HPE_PAUSED_UPGRADE) {
            const char *pos = llhttp_get_error_pos(&h->parser);
            off = pos && pos >= p + off && pos <= p + n ? (size_t)(pos - p) : n;
            if (e == HPE_PAUSED_UPGRADE) {
                /* Comes on the call after the upgrade request was completed and dispatched. */
                llhttp_resume_after_upgrade(&h->parser);
                continue;
            }
            llhttp_resume(&h->parser);
            if (!h->msg_in_progress)
                complete(h);
            continue;
        }
        fail(h);
        return n;
    }
    return off;
}

static void parse_stash(sl_h1 *h)
{
    if (!h->in.len)
        return;
    size_t used = parse(h, (const char *)h->in.data, h->in.len);
    sl_buf_consume(&h->in, used);
    if (h->dead)
        sl_buf_reset(&h->in);
}

/* ---- the session's table (net/proto.h) ---- */

static sl_h1 *h1_of(sl_proto *s)
{
    return (sl_h1 *)s; /* the base is struct sl_h1's first member */
}

static const sl_h1 *h1_cof(const sl_proto *s)
{
    return (const sl_h1 *)s;
}

static sl_proto *h1_new(sl_conn *c)
{
    sl_h1 *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->base.ops = &sl_h1_ops;
    h->c = c;
    llhttp_init(&h->parser, HTTP_REQUEST, &h1_settings);
    h->parser.data = h;
    sl_buf_init(&h->in, IN_CAP);
    return &h->base;
}

static void h1_free(sl_proto *s)
{
    sl_h1 *h = h1_of(s);
    while (h->qhead) {
        sl_exchange *ex = h->qhead;
        h->qhead = ex->next;
        sl_exchange_detach(ex);
        sl_exchange_unref(ex);
    }
    if (h->cur)
        sl_exchange_unref(h->cur);
    sl_buf_free(&h->in);
    free(h);
}

static void h1_feed(sl_proto *s, const char *p, size_t n)
{
    sl_h1 *h = h1_of(s);
    if (h->dead || h->c->fatal)
        return;
    if (h->in.len) {
        if (sl_buf_append(&h->in, p, n)) {
            h->c->fatal = true;
            return;
        }
        parse_stash(h);
        return;
    }
    size_t used = parse(h, p, n);
    if (used < n && sl_buf_append(&h->in, p + used, n - used))
        h->c->fatal = true;
}

static void h1_pump(sl_proto *s)
{
    parse_stash(h1_of(s));
}

static void h1_eof(sl_proto *s)
{
    sl_h1 *h = h1_of(s);
    /* A half-closed client still gets the answers it asked for; a request cut short is lost. */
    if (h->cur) {
        sl_exchange_unref(h->cur);
        h->cur = NULL;
    }
    h->msg_in_progress = false;
    h->dead = true;
    sl_buf_reset(&h->in);
}

static void h1_shutdown(sl_proto *s)
{
    sl_h1 *h = h1_of(s);
    /* A request already being received may finish (complete() sees draining); else stop now. */
    if (!h->msg_in_progress) {
        h->dead = true;
        sl_buf_reset(&h->in);
    }
}

static bool h1_wants_read(const sl_proto *s)
{
    const sl_h1 *h = h1_cof(s);
    return !h->dead && !h->in.len && (h->msg_in_progress || can_start(h));
}

static bool h1_done(const sl_proto *s)
{
    const sl_h1 *h = h1_cof(s);
    return h->dead && h->qlen == 0;
}

static bool h1_has_backlog(const sl_proto *s)
{
    const sl_h1 *h = h1_cof(s);
    return h->in.len && !h->dead;
}

static sl_conn_phase h1_phase(const sl_proto *s)
{
    const sl_h1 *h = h1_cof(s);
    if (h->msg_in_progress)
        return SL_CONN_READING;
    if (h->qlen || h->in.len)
        return SL_CONN_BUSY;
    return SL_CONN_IDLE;
}

const sl_proto_ops sl_h1_ops = {
    .proto = SL_HTTP_1,
    .new = h1_new,
    .free = h1_free,
    .feed = h1_feed,
    .eof = h1_eof,
    .pump = h1_pump,
    .shutdown = h1_shutdown,
    .wants_read = h1_wants_read,
    .done = h1_done,
    .has_backlog = h1_has_backlog,
    .phase = h1_phase,
};

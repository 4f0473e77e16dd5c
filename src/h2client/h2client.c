/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client HTTP/2 session (see h2client.h): nghttp2 driven in memory, plus per-stream
 * bookkeeping that turns each request into exactly one completion.
 *
 * A stream sits on exactly one list: `live` (waiting for its answer, in deadline order so expiry
 * only looks at the head), `doneq` (finished, completion not delivered yet) or `held` (delivered
 * early — timed out, over a cap — while nghttp2 still refers to it). It is freed once it has been
 * delivered and nghttp2 is done with it ("closed": the stream closed, its HEADERS were never sent,
 * or the nghttp2 session is gone). nghttp2's callbacks only record state and move streams between
 * lists; completions run after nghttp2 has returned.
 */
#include "h2client/h2client.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REQ_HEADERS 32
#define DEFAULT_MAX_BODY ((size_t)4 << 20)
#define DEFAULT_MAX_HEADER_BYTES ((size_t)64 << 10)
#define DEFAULT_STREAM_WINDOW (1u << 20)
#define STACK_FIELDS 16 /* a response with more fields than this costs one allocation */

enum { L_NONE, L_LIVE, L_DONEQ, L_HELD };

typedef struct stream {
    struct stream *next, *prev;
    int list;
    int32_t id;
    int64_t deadline;
    sl_h2c_done_fn done;
    void *ud;
    int (*on_data)(void *ud, const uint8_t *p, size_t n);
    int status;
    int err;
    bool end_stream; /* the peer finished its side */
    bool closed;     /* nghttp2 no longer refers to it */
    sl_buf req;      /* request body, freed once sent */
    size_t req_off;
    sl_buf hdrs;     /* fields as [u32 name_len][u32 value_len][name][value] */
    size_t nfields;
    sl_buf body;
} stream;

typedef struct slist {
    stream *head, *tail;
    size_t n;
} slist;

struct sl_h2c {
    nghttp2_session *ng;
    nghttp2_session_callbacks *cbs;
    sl_h2c_config cfg;
    slist live, doneq, held;
    bool goaway;
    bool freeing;
    bool delivering;
};

/* ---------------------------------------------------------------- lists */

static void list_link(slist *l, stream *st, stream *after, int which)
{
    st->prev = after;
    st->next = after ? after->next : l->head;
    if (st->next)
        st->next->prev = st;
    else
        l->tail = st;
    if (after)
        after->next = st;
    else
        l->head = st;
    l->n++;
    st->list = which;
}

static slist *list_of(sl_h2c *s, stream *st)
{
    return st->list == L_LIVE ? &s->live : st->list == L_DONEQ ? &s->doneq : &s->held;
}

static void list_unlink(sl_h2c *s, stream *st)
{
    if (st->list == L_NONE)
        return;
    slist *l = list_of(s, st);
    if (st->prev)
        st->prev->next = st->next;
    else
        l->head = st->next;
    if (st->next)
        st->next->prev = st->prev;
    else
        l->tail = st->prev;
    st->next = st->prev = NULL;
    l->n--;
    st->list = L_NONE;
}

static void stream_free(stream *st)
{
    sl_buf_free(&st->req);
    sl_buf_free(&st->hdrs);
    sl_buf_free(&st->body);
    free(st);
}

/* The answer is in (or the stream failed): queue its completion. */
static void finish(sl_h2c *s, stream *st, int err)
{
    if (st->list != L_LIVE)
        return;
    list_unlink(s, st);
    st->err = err;
    list_link(&s->doneq, st, s->doneq.tail, L_DONEQ);
}

/* Finish with an error and tell the peer we stopped listening. */
static void fail(sl_h2c *s, stream *st, int err, uint32_t code)
{
    finish(s, st, err);
    if (!st->closed && st->id > 0 && s->ng)
        nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, code);
}

/* nghttp2 is done with the stream. */
static void release(sl_h2c *s, stream *st, uint32_t error_code)
{
    st->closed = true;
    if (st->list == L_LIVE) {
        int err = 0;
        if (!st->end_stream)
            err = error_code == NGHTTP2_REFUSED_STREAM ? -ECONNREFUSED : -ECONNRESET;
        finish(s, st, err);
    } else if (st->list == L_HELD) {
        list_unlink(s, st);
        stream_free(st);
    }
}

static void deliver(sl_h2c *s)
{
    if (s->delivering)
        return; /* a `done` that submitted: the outer loop picks new entries up */
    s->delivering = true;
    stream *st;
    while ((st = s->doneq.head)) {
        list_unlink(s, st);
        sl_h2c_field stack[STACK_FIELDS];
        sl_h2c_field *fields = stack;
        sl_h2c_resp r = {.err = st->err, .status = st->status, .body = &st->body};
        if (st->nfields > STACK_FIELDS) {
            fields = calloc(st->nfields, sizeof *fields);
            if (!fields && !r.err)
                r.err = -ENOMEM;
        }
        if (fields) {
            const uint8_t *p = st->hdrs.data;
            for (size_t i = 0; i < st->nfields; i++) {
                uint32_t nl, vl;
                memcpy(&nl, p, 4);
                memcpy(&vl, p + 4, 4);
                fields[i] = (sl_h2c_field){(const char *)p + 8, nl, (const char *)p + 8 + nl, vl};
                p += 8 + nl + vl;
            }
            r.fields = fields;
            r.nfields = st->nfields;
        }
        st->done(st->ud, &r);
        if (fields != stack)
            free(fields);
        if (st->closed) {
            stream_free(st);
        } else {
            /* what the answer held is not needed any more, only the stream's identity */
            sl_buf_free(&st->hdrs);
            sl_buf_free(&st->body);
            list_link(&s->held, st, s->held.tail, L_HELD);
        }
    }
    s->delivering = false;
}

static stream *find_stream(sl_h2c *s, int32_t id)
{
    stream *st = s->ng ? nghttp2_session_get_stream_user_data(s->ng, id) : NULL;
    if (st)
        return st;
    slist *ls[] = {&s->live, &s->doneq, &s->held};
    for (size_t i = 0; i < 3; i++)
        for (st = ls[i]->head; st; st = st->next)
            if (st->id == id && !st->closed)
                return st;
    return NULL;
}

/* ---------------------------------------------------------------- nghttp2 callbacks */

int sl_h2c_parse_status(const uint8_t *v, size_t len)
{
    if (len != 3)
        return -EPROTO;
    int st = 0;
    for (size_t i = 0; i < 3; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EPROTO;
        st = st * 10 + (v[i] - '0');
    }
    return st >= 100 ? st : -EPROTO;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)flags;
    sl_h2c *s = ud;
    stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (!st || st->list != L_LIVE || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int code = sl_h2c_parse_status(value, valuelen);
        if (code < 0)
            fail(s, st, -EPROTO, NGHTTP2_PROTOCOL_ERROR);
        else
            st->status = code;
        return 0;
    }
    if (namelen && name[0] == ':')
        return 0;
    uint32_t nl = (uint32_t)namelen, vl = (uint32_t)valuelen;
    if (sl_buf_reserve(&st->hdrs, 8 + namelen + valuelen) < 0) {
        fail(s, st, -EMSGSIZE, NGHTTP2_CANCEL);
        return 0;
    }
    sl_buf_append(&st->hdrs, &nl, 4);
    sl_buf_append(&st->hdrs, &vl, 4);
    sl_buf_append(&st->hdrs, name, namelen);
    sl_buf_append(&st->hdrs, value, valuelen);
    st->nfields++;
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                   size_t len, void *ud)
{
    (void)flags;
    sl_h2c *s = ud;
    stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (!st || st->list != L_LIVE)
        return 0;
    if (st->on_data) {
        int rc = st->on_data(st->ud, data, len);
        if (rc < 0)
            fail(s, st, rc, NGHTTP2_CANCEL);
    } else if (sl_buf_append(&st->body, data, len) < 0) {
        fail(s, st, -EMSGSIZE, NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    sl_h2c *s = ud;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        s->goaway = true;
    } else if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
               (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
        if (st)
            st->end_stream = true;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *ud)
{
    stream *st = nghttp2_session_get_stream_user_data(ng, id);
    if (st)
        release(ud, st, error_code);
    return 0;
}

/* nghttp2's own HTTP checks failed on the answer (e.g. a :status that is not three digits): it
 * resets the stream itself; for the caller this is a malformed answer, not a reset. */
static int on_invalid_frame(nghttp2_session *ng, const nghttp2_frame *frame, int lib_error,
                            void *ud)
{
    if (frame->hd.type != NGHTTP2_HEADERS ||
        (lib_error != NGHTTP2_ERR_HTTP_HEADER && lib_error != NGHTTP2_ERR_HTTP_MESSAGING))
        return 0;
    stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (st)
        finish(ud, st, -EPROTO);
    return 0;
}

/* A request whose HEADERS never left (reset while queued, or refused after GOAWAY): nghttp2 will
 * not report it closed, so do it here. */
static int on_frame_not_send(nghttp2_session *ng, const nghttp2_frame *frame, int lib_error,
                             void *ud)
{
    (void)ng;
    (void)lib_error;
    sl_h2c *s = ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    stream *st = find_stream(s, frame->hd.stream_id);
    if (st && !st->closed)
        release(s, st, NGHTTP2_REFUSED_STREAM);
    return 0;
}

static ssize_t body_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ng;
    (void)id;
    (void)ud;
    stream *st = src->ptr;
    size_t n = st->req.len - st->req_off;
    if (n > len)
        n = len;
    memcpy(buf, st->req.data + st->req_off, n);
    st->req_off += n;
    if (st->req_off == st->req.len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        sl_buf_free(&st->req); /* sent: give the memory back early */
        st->req_off = 0;
    }
    return (ssize_t)n;
}

/* ---------------------------------------------------------------- public */

int sl_h2c_new(const sl_h2c_config *cfg, sl_h2c **out)
{
    *out = NULL;
    sl_h2c *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    if (cfg)
        s->cfg = *cfg;
    if (!s->cfg.max_body)
        s->cfg.max_body = DEFAULT_MAX_BODY;
    if (!s->cfg.max_header_bytes)
        s->cfg.max_header_bytes = DEFAULT_MAX_HEADER_BYTES;
    if (!s->cfg.stream_window)
        s->cfg.stream_window = DEFAULT_STREAM_WINDOW;
    if (!s->cfg.conn_window)
        s->cfg.conn_window = 4 * s->cfg.stream_window;
    if (nghttp2_session_callbacks_new(&s->cbs) != 0) {
        free(s);
        return -ENOMEM;
    }
    nghttp2_session_callbacks_set_on_header_callback(s->cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s->cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(s->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(s->cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(s->cbs, on_frame_not_send);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(s->cbs, on_invalid_frame);
    if (nghttp2_session_client_new(&s->ng, s->cbs, s) != 0) {
        nghttp2_session_callbacks_del(s->cbs);
        free(s);
        return -ENOMEM;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, s->cfg.stream_window},
    };
    if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0 ||
        nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)s->cfg.conn_window) != 0) {
        sl_h2c_free(s, -ENOMEM);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

void sl_h2c_free(sl_h2c *s, int err)
{
    if (!s)
        return;
    s->freeing = true;
    if (s->ng) {
        nghttp2_session_del(s->ng); /* frees its streams without calling back */
        s->ng = NULL;
    }
    slist *ls[] = {&s->live, &s->doneq, &s->held};
    for (size_t i = 0; i < 3; i++)
        for (stream *st = ls[i]->head; st; st = st->next)
            st->closed = true;
    while (s->live.head)
        finish(s, s->live.head, err);
    deliver(s);
    while (s->held.head) {
        stream *st = s->held.head;
        list_unlink(s, st);
        stream_free(st);
    }
    nghttp2_session_callbacks_del(s->cbs);
    free(s);
}

int sl_h2c_submit(sl_h2c *s, const sl_h2c_req *req, sl_h2c_done_fn done, void *ud)
{
    if (!req || !req->method || !req->path || !req->authority || !done ||
        req->nheaders > MAX_REQ_HEADERS)
        return -EINVAL;
    if (s->freeing || !s->ng)
        return -EINVAL;
    if (s->goaway)
        return -EAGAIN;
    stream *st = calloc(1, sizeof *st);
    if (!st)
        return -ENOMEM;
    sl_buf_init(&st->req, 0);
    sl_buf_init(&st->hdrs, s->cfg.max_header_bytes);
    sl_buf_init(&st->body, s->cfg.max_body);
    st->deadline = req->deadline;
    st->done = done;
    st->ud = ud;
    st->on_data = req->on_data;

    const char *scheme = req->scheme ? req->scheme : "http";
#define NV(n, nl, v, vl) {(uint8_t *)(n), (uint8_t *)(v), (nl), (vl), NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv nva[4 + MAX_REQ_HEADERS] = {
        NV(":method", 7, req->method, strlen(req->method)),
        NV(":scheme", 7, scheme, strlen(scheme)),
        NV(":authority", 10, req->authority, strlen(req->authority)),
        NV(":path", 5, req->path, strlen(req->path)),
    };
    size_t nv = 4;
    for (size_t i = 0; i < req->nheaders; i++) {
        const sl_h2c_field *f = &req->headers[i];
        nva[nv++] = (nghttp2_nv)NV(f->name, f->name_len, f->value, f->value_len);
    }
#undef NV
    bool has_body = req->body && req->body->len;
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = body_read};
    int32_t id = nghttp2_submit_request(s->ng, NULL, nva, nv, has_body ? &prd : NULL, st);
    if (id < 0) {
        stream_free(st);
        return id == NGHTTP2_ERR_NOMEM                     ? -ENOMEM
               : id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? -EAGAIN
                                                           : -EINVAL;
    }
    st->id = id;
    if (has_body) {
        st->req = *req->body;
        sl_buf_init(req->body, req->body->cap);
    }
    /* deadlines nearly always arrive in order: search from the tail */
    stream *at = s->live.tail;
    while (at && at->deadline > st->deadline)
        at = at->prev;
    list_link(&s->live, st, at, L_LIVE);
    return 0;
}

int sl_h2c_recv(sl_h2c *s, const uint8_t *data, size_t len)
{
    ssize_t r = nghttp2_session_mem_recv(s->ng, data, len);
    deliver(s);
    return r < 0 ? -EPROTO : 0;
}

int sl_h2c_send(sl_h2c *s, sl_buf *out, size_t high_water)
{
    int rc = 0;
    while (out->len < high_water) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(s->ng, &d);
        if (n < 0) {
            rc = n == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
            break;
        }
        if (n == 0)
            break;
        if (sl_buf_append(out, d, (size_t)n) < 0) {
            rc = -ENOMEM;
            break;
        }
    }
    deliver(s);
    return rc;
}

void sl_h2c_expire(sl_h2c *s, int64_t now)
{
    stream *st;
    while ((st = s->live.head) && st->deadline <= now)
        fail(s, st, -ETIMEDOUT, NGHTTP2_CANCEL);
    deliver(s);
}

int64_t sl_h2c_next_deadline(const sl_h2c *s)
{
    return s->live.head ? s->live.head->deadline : INT64_MAX;
}

bool sl_h2c_want_write(const sl_h2c *s)
{
    return s->ng && nghttp2_session_want_write(s->ng);
}

bool sl_h2c_goaway(const sl_h2c *s)
{
    return s->goaway;
}

bool sl_h2c_over(const sl_h2c *s)
{
    return !s->ng || (!nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng));
}

size_t sl_h2c_pending(const sl_h2c *s)
{
    return s->live.n + s->doneq.n;
}

size_t sl_h2c_abandoned(const sl_h2c *s)
{
    return s->held.n;
}

const sl_h2c_field *sl_h2c_resp_find(const sl_h2c_resp *r, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < r->nfields; i++)
        if (r->fields[i].name_len == n && memcmp(r->fields[i].name, name, n) == 0)
            return &r->fields[i];
    return NULL;
}

int sl_h2c_grpc_status(const sl_h2c_resp *r)
{
    const sl_h2c_field *f = sl_h2c_resp_find(r, "grpc-status");
    if (!f)
        return -1;
    if (f->value_len < 1 || f->value_len > 3)
        return 2;
    int v = 0;
    for (size_t i = 0; i < f->value_len; i++) {
        if (f->value[i] < '0' || f->value[i] > '9')
            return 2;
        v = v * 10 + (f->value[i] - '0');
    }
    return v;
}

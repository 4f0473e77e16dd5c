/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC's standard services on the client port (part of the service module: node/service_int.h):
 *
 *  - grpc.health.v1.Health: Check answers the node's verdict (sl_service_verdict, the one
 *    HealthCheck, the status page and /v1/admin/status give) for "" or any service the node
 *    serves (the services reflection lists), NOT_FOUND for another name; Watch sends it at once
 *    and again each time it changes (each worker re-reads it every WATCH_TICK_MS), SERVICE_UNKNOWN
 *    for a name not served, as the spec says, and stays open until the client leaves.
 *  - grpc.reflection.v1 and v1alpha ServerReflectionInfo: a bidirectional stream, taken at its
 *    headers (sl_service_early) so each request is answered as it arrives, before the client
 *    half-closes (grpcurl waits for each answer); the answers come from the descriptors built in
 *    (api/grpcstd.h).
 *
 * Bounds: Watch streams per worker (MAX_WATCHES, then RESOURCE_EXHAUSTED), bytes buffered of an
 * unfinished reflection request (the largest message served), answers queued to a client that
 * does not read (MAX_QUEUED, then the stream ends RESOURCE_EXHAUSTED).
 */
#include "node/service_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCH_TICK_MS 1000
#define MAX_WATCHES 1024
#define MAX_QUEUED ((size_t)1 << 20)

static const sl_http_header grpc_head[] = {
    SL_HTTP_HEADER("content-type", "application/grpc"),
    SL_HTTP_HEADER("grpc-accept-encoding", SL_GRPC_ACCEPT_ENCODING),
};

static void close_stream(sl_exchange *ex, int code, const char *msg)
{
    char num[12];
    int n = snprintf(num, sizeof num, "%d", code);
    sl_http_header t[2] = {{"grpc-status", 11, num, n > 0 ? (size_t)n : 0},
                           {"grpc-message", 12, msg ? msg : "", msg ? strlen(msg) : 0}};
    sl_exchange_set_cancel(ex, NULL, NULL);
    sl_exchange_set_drain(ex, NULL, NULL);
    sl_exchange_set_recv(ex, NULL, NULL);
    sl_exchange_stream_close(ex, t, msg && *msg ? 2 : 1);
}

/* ---- health ---------------------------------------------------------------------------------- */

/* A service name this node serves ("" is the server as a whole). */
static bool served(const sl_service *s, const char *name, size_t n)
{
    if (!n)
        return true;
    /* the services reflection lists: the answer to list_services names each */
    return sl_grpcstd_refl_serves(s->refl, name, n);
}

static int status_of(const sl_service *s)
{
    return sl_service_verdict(s, NULL, 0, NULL) ? SL_GRPCSTD_SERVING : SL_GRPCSTD_NOT_SERVING;
}

static int framed_status(int status, sl_buf *out)
{
    size_t mark;
    int rc = sl_grpc_frame_begin(out, &mark);
    if (!rc)
        rc = sl_grpcstd_health_encode(status, out);
    if (!rc)
        rc = sl_grpc_frame_end(out, mark);
    return rc;
}

typedef struct sl_watch {
    sl_service *s;
    sl_exchange *ex;
    int worker;
    bool known; /* a served name: follows the verdict; else SERVICE_UNKNOWN once */
    int last;   /* the status last sent */
    int64_t t0;
    struct sl_watch *next, *prev;
} sl_watch;

static void watch_unlink(sl_watch *w)
{
    sl_call_pool *p = pool_of(w->s, w->worker);
    if (w->prev)
        w->prev->next = w->next;
    else
        p->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    p->nwatches--;
}

static void watch_end(sl_watch *w, int code, const char *msg)
{
    watch_unlink(w);
    close_stream(w->ex, code, msg);
    count_call(w->s, M_GRPC_HEALTH_WATCH, T_GRPC, code, w->t0);
    free(w);
}

static void watch_cancel(void *ud, sl_exchange *ex)
{
    (void)ex;
    watch_end(ud, SL_GRPC_CANCELLED, NULL); /* a no-op close that releases the exchange */
}

static int watch_send(sl_watch *w, int status);

/* The server drains: the watcher is told NOT_SERVING, as grpc-go's health server does on
 * shutdown, and the stream ends UNAVAILABLE so that it reconnects elsewhere. */
static void watch_drain(void *ud, sl_exchange *ex)
{
    (void)ex;
    sl_watch *w = ud;
    if (w->known && w->last != SL_GRPCSTD_NOT_SERVING)
        watch_send(w, SL_GRPCSTD_NOT_SERVING);
    watch_end(w, SL_GRPC_UNAVAILABLE, "the server is shutting down");
}

static int watch_send(sl_watch *w, int status)
{
    sl_buf b;
    sl_buf_init(&b, 0);
    int rc = framed_status(status, &b);
    if (!rc)
        rc = sl_exchange_stream_push(w->ex, b.data, b.len, MAX_QUEUED);
    sl_buf_free(&b);
    if (!rc)
        w->last = status;
    return rc;
}

static void watch_tick(uv_timer_t *t)
{
    sl_service *s = t->data;
    sl_call_pool *p = NULL;
    for (int i = 0; i < s->npools - 1; i++)
        if (&s->pools[i].watch_timer == t)
            p = &s->pools[i];
    if (!p || !p->watches)
        return;
    int st = status_of(s);
    if (st == p->last_verdict)
        return;
    p->last_verdict = st;
    sl_watch *next;
    for (sl_watch *w = p->watches; w; w = next) {
        next = w->next;
        if (w->known && w->last != st && watch_send(w, st))
            watch_end(w, SL_GRPC_RESOURCE_EXHAUSTED, "the client does not read its Watch stream");
    }
}

void sl_service_watch_start(sl_service *s, int worker, uv_loop_t *loop)
{
    sl_call_pool *p = pool_of(s, worker);
    if (uv_timer_init(loop, &p->watch_timer))
        return;
    p->watch_timer.data = s;
    uv_timer_start(&p->watch_timer, watch_tick, WATCH_TICK_MS, WATCH_TICK_MS);
    uv_unref((uv_handle_t *)&p->watch_timer); /* no reason on its own to keep the loop alive */
    p->watch_timer_on = true;
}

void sl_service_watch_stop(sl_service *s, int worker)
{
    sl_call_pool *p = pool_of(s, worker);
    while (p->watches)
        watch_end(p->watches, SL_GRPC_UNAVAILABLE, "the server is stopping");
    if (p->watch_timer_on) {
        uv_timer_stop(&p->watch_timer);
        uv_close((uv_handle_t *)&p->watch_timer, NULL);
        p->watch_timer_on = false;
    }
}

static void watch_open(sl_service *s, sl_exchange *ex, bool known, int64_t t0)
{
    int worker = sl_exchange_worker(ex);
    sl_call_pool *p = pool_of(s, worker);
    if (p->nwatches >= MAX_WATCHES) {
        sl_service_answer_error(s, ex, M_GRPC_HEALTH_WATCH, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED,
                                "too many Watch streams on this worker", t0);
        return;
    }
    sl_watch *w = calloc(1, sizeof *w);
    sl_http_response head = {.status = 200, .headers = grpc_head, .nheaders = 2};
    if (!w || sl_exchange_stream_open(ex, &head)) {
        free(w);
        sl_service_answer_error(s, ex, M_GRPC_HEALTH_WATCH, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED,
                                "could not open the stream", t0);
        return;
    }
    *w = (sl_watch){.s = s, .ex = ex, .worker = worker, .known = known, .last = -1, .t0 = t0};
    w->next = p->watches;
    if (p->watches)
        p->watches->prev = w;
    p->watches = w;
    p->nwatches++;
    sl_exchange_set_cancel(ex, watch_cancel, w);
    sl_exchange_set_drain(ex, watch_drain, w);
    if (watch_send(w, known ? status_of(s) : SL_GRPCSTD_SERVICE_UNKNOWN))
        watch_end(w, SL_GRPC_RESOURCE_EXHAUSTED, "could not send the status");
}

void sl_service_grpc_health(sl_service *s, sl_exchange *ex, const sl_http_request *rq, bool watch,
                            int64_t t0)
{
    int m = watch ? M_GRPC_HEALTH_WATCH : M_GRPC_HEALTH_CHECK;
    sl_grpc_status st;
    const uint8_t *msg;
    size_t len;
    sl_buf zin;
    sl_buf_init(&zin, 0);
    if (sl_service_grpc_payload(s, rq, &zin, &msg, &len, &st)) {
        sl_buf_free(&zin);
        sl_service_answer_status(s, ex, m, T_GRPC, &st, t0);
        return;
    }
    const char *svc;
    size_t n;
    int rc = sl_grpcstd_health_decode(msg, len, &svc, &n);
    bool known = !rc && served(s, svc, n);
    sl_buf_free(&zin);
    if (rc) {
        sl_service_answer_error(s, ex, m, T_GRPC, SL_GRPC_INVALID_ARGUMENT,
                                "malformed HealthCheckRequest", t0);
        return;
    }
    if (watch) {
        watch_open(s, ex, known, t0);
        return;
    }
    if (!known) {
        sl_service_answer_error(s, ex, m, T_GRPC, SL_GRPC_NOT_FOUND, "unknown service", t0);
        return;
    }
    sl_buf b;
    sl_buf_init(&b, 0);
    if (framed_status(status_of(s), &b))
        sl_service_answer_error(s, ex, m, T_GRPC, SL_GRPC_INTERNAL, "encode failed", t0);
    else {
        sl_exchange_respond_grpc(ex, b.data, b.len, SL_GRPC_OK, NULL);
        count_call(s, m, T_GRPC, SL_GRPC_OK, t0);
    }
    sl_buf_free(&b);
}

/* ---- reflection ------------------------------------------------------------------------------ */

typedef struct refl_stream {
    sl_service *s;
    sl_exchange *ex;
    int64_t t0;
    sl_buf in;  /* bytes of requests not yet whole */
    sl_buf out; /* one answer */
} refl_stream;

static void refl_end(refl_stream *r, int code, const char *msg)
{
    close_stream(r->ex, code, msg);
    count_call(r->s, M_REFLECTION, T_GRPC, code, r->t0);
    sl_buf_free(&r->in);
    sl_buf_free(&r->out);
    free(r);
}

static void refl_drained(void *ud, sl_exchange *ex)
{
    (void)ex;
    refl_end(ud, SL_GRPC_UNAVAILABLE, "the server is shutting down");
}

static void refl_cancel(void *ud, sl_exchange *ex)
{
    (void)ex;
    refl_end(ud, SL_GRPC_CANCELLED, NULL);
}

/* Answer every whole request in r->in; 0, or a gRPC code to end the stream with (*why). */
static int refl_drain(refl_stream *r, const char **why)
{
    size_t max = r->s->cfg.gub.max_msg;
    size_t off = 0;
    int code = SL_GRPC_OK;
    while (off < r->in.len) {
        sl_grpc_msg m;
        const char *err = NULL;
        int rc = sl_grpc_frame_decode(r->in.data + off, r->in.len - off, max, &m, &err);
        if (rc == -EAGAIN)
            break;
        if (rc) {
            *why = err ? err : "bad gRPC framing";
            code = rc == -EMSGSIZE ? SL_GRPC_RESOURCE_EXHAUSTED : SL_GRPC_INVALID_ARGUMENT;
            break;
        }
        off += m.frame_len;
        if (m.compressed) {
            *why = "compressed reflection requests are not served";
            code = SL_GRPC_UNIMPLEMENTED;
            break;
        }
        sl_grpcstd_refl_req q;
        if (sl_grpcstd_refl_decode(m.data, m.len, &q)) {
            *why = "malformed ServerReflectionRequest";
            code = SL_GRPC_INVALID_ARGUMENT;
            break;
        }
        size_t mark;
        sl_buf_reset(&r->out);
        rc = sl_grpc_frame_begin(&r->out, &mark);
        if (!rc)
            rc = sl_grpcstd_refl_answer(r->s->refl, &q, m.data, m.len, &r->out);
        if (!rc)
            rc = sl_grpc_frame_end(&r->out, mark);
        if (!rc)
            rc = sl_exchange_stream_push(r->ex, r->out.data, r->out.len, MAX_QUEUED);
        if (rc) {
            *why = rc == -ENOBUFS ? "the client does not read its answers" : "out of memory";
            code = SL_GRPC_RESOURCE_EXHAUSTED;
            break;
        }
    }
    sl_buf_consume(&r->in, off);
    return code;
}

static void refl_recv(void *ud, sl_exchange *ex, const uint8_t *data, size_t len, bool end)
{
    (void)ex;
    refl_stream *r = ud;
    const char *why = NULL;
    int code = SL_GRPC_OK;
    if (len && sl_buf_append(&r->in, data, len)) {
        why = "a reflection request larger than the largest message served";
        code = SL_GRPC_RESOURCE_EXHAUSTED;
    }
    if (code == SL_GRPC_OK)
        code = refl_drain(r, &why);
    if (code == SL_GRPC_OK && end && r->in.len) {
        why = "truncated gRPC message";
        code = SL_GRPC_INVALID_ARGUMENT;
    }
    if (code != SL_GRPC_OK || end)
        refl_end(r, code, why);
}

void sl_service_reflection(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int64_t t0)
{
    refl_stream *r = calloc(1, sizeof *r);
    sl_http_response head = {.status = 200, .headers = grpc_head, .nheaders = 2};
    if (!r || sl_exchange_stream_open(ex, &head)) {
        free(r);
        sl_service_answer_error(s, ex, M_REFLECTION, T_GRPC, SL_GRPC_RESOURCE_EXHAUSTED,
                                "could not open the stream", t0);
        return;
    }
    r->s = s;
    r->ex = ex;
    r->t0 = t0;
    /* a request is at most the largest message served, and its 5 bytes of framing */
    sl_buf_init(&r->in, s->cfg.gub.max_msg + SL_GRPC_HDR_LEN);
    sl_buf_init(&r->out, 0);
    sl_exchange_set_cancel(ex, refl_cancel, r);
    sl_exchange_set_drain(ex, refl_drained, r);
    if (rq->early) {
        sl_exchange_set_recv(ex, refl_recv, r); /* the requests as they come */
        return;
    }
    /* the whole stream came at once (the client half-closed with its requests) */
    refl_recv(r, ex, rq->body, rq->body_len, true);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the sluice client (include/sluice/client.h) against a real HTTP/2 peer on 127.0.0.1:0.
 *
 * The peer is a minimal nghttp2 server session run by a thread of this test: it records what
 * arrived (path, headers, the decoded GetRateLimitsReq) and answers by rules the tests rely on —
 * GetRateLimits echoes each item (OVER_LIMIT when hits > limit, remaining = limit - hits, an error
 * for the name "bad", metadata "owner" and, for CONCURRENCY items, "lease_id"); /attempt answers by
 * X-Resource ("deny" 429 with Retry-After and RateLimit headers, "fail" 500, else 200, with
 * X-Lease-Id on X-Concurrency: acquire); /release knows lease "L-1". In silent mode it accepts and
 * reads but never answers, which is how timeouts are provoked.
 *
 * Timeouts are real (the client's deadline is a poll() deadline); they are kept at tens of ms.
 * Upper bounds on elapsed time only tell "at the deadline" from "much later" or "at once" from
 * "at the deadline", so they sit far from both (a busy 2-core machine under ASan stalls for
 * hundreds of milliseconds); the deadlines they are measured against are set to match.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "gubernator.pb-c.h"
#include "sluice/client.h"
#include "sluice/clock.h"

/* ------------------------------------------------------------------ the test peer */

#define PEER_MAX_CONNS 32

typedef struct pstream {
    char path[64];
    char resource[64];
    char lease[64];
    bool acquire;
    char headers[2048]; /* "name: value\n" lines */
    size_t hlen;
    uint8_t body[1 << 16];
    size_t blen;
    uint8_t *resp;
    size_t resp_len, resp_off;
    int grpc_status;
    char grpc_message[64];
} pstream;

typedef struct pconn {
    int fd;
    nghttp2_session *sess;
} pconn;

typedef struct peer {
    int lfd;
    uint16_t port;
    int wake[2];
    pthread_t th;
    bool running;
    pthread_mutex_t mu;
    /* behaviour */
    bool silent;
    bool unhealthy;
    /* records (under mu) */
    int accepts;
    int requests;
    char last_path[64];
    char last_headers[2048];
    Pb__Gubernator__GetRateLimitsReq *last_check;
    pconn conns[PEER_MAX_CONNS];
    int nconns;
} peer;

static void ps_hdr(pstream *ps, const char *n, size_t nl, const char *v, size_t vl)
{
    int w = snprintf(ps->headers + ps->hlen, sizeof ps->headers - ps->hlen, "%.*s: %.*s\n",
                     (int)nl, n, (int)vl, v);
    if (w > 0 && ps->hlen + (size_t)w < sizeof ps->headers)
        ps->hlen += (size_t)w;
}

static int p_on_begin(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        pstream *ps = calloc(1, sizeof *ps);
        nghttp2_session_set_stream_user_data(s, f->hd.stream_id, ps);
    }
    return 0;
}

static int p_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                       size_t nl, const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    pstream *ps = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!ps)
        return 0;
    const char *n = (const char *)name, *v = (const char *)value;
    if (nl == 5 && !memcmp(n, ":path", 5))
        snprintf(ps->path, sizeof ps->path, "%.*s", (int)vl, v);
    if (nl == 10 && !memcmp(n, "x-resource", 10))
        snprintf(ps->resource, sizeof ps->resource, "%.*s", (int)vl, v);
    if (nl == 10 && !memcmp(n, "x-lease-id", 10))
        snprintf(ps->lease, sizeof ps->lease, "%.*s", (int)vl, v);
    if (nl == 13 && !memcmp(n, "x-concurrency", 13) && vl == 7 && !memcmp(v, "acquire", 7))
        ps->acquire = true;
    ps_hdr(ps, n, nl, v, vl);
    return 0;
}

static int p_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t len,
                     void *ud)
{
    pstream *ps = nghttp2_session_get_stream_user_data(s, id);
    if (ps && ps->blen + len <= sizeof ps->body) {
        memcpy(ps->body + ps->blen, d, len);
        ps->blen += len;
    }
    return 0;
}

static ssize_t p_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                      nghttp2_data_source *src, void *ud)
{
    pstream *ps = src->ptr;
    size_t n = ps->resp_len - ps->resp_off;
    if (n > len)
        n = len;
    if (n)
        memcpy(buf, ps->resp + ps->resp_off, n);
    ps->resp_off += n;
    if (ps->resp_off == ps->resp_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (ps->grpc_status >= 0) {
            char st[12];
            snprintf(st, sizeof st, "%d", ps->grpc_status);
            nghttp2_nv tr[2] = {
                {(uint8_t *)"grpc-status", (uint8_t *)st, 11, strlen(st), NGHTTP2_NV_FLAG_NONE},
                {(uint8_t *)"grpc-message", (uint8_t *)ps->grpc_message, 12,
                 strlen(ps->grpc_message), NGHTTP2_NV_FLAG_NONE},
            };
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            nghttp2_submit_trailer(s, id, tr, ps->grpc_message[0] ? 2 : 1);
        }
    }
    return (ssize_t)n;
}

static void grpc_set(pstream *ps, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    ps->resp = malloc(5 + n);
    ps->resp[0] = 0;
    ps->resp[1] = (uint8_t)(n >> 24);
    ps->resp[2] = (uint8_t)(n >> 16);
    ps->resp[3] = (uint8_t)(n >> 8);
    ps->resp[4] = (uint8_t)n;
    protobuf_c_message_pack(m, ps->resp + 5);
    ps->resp_len = 5 + n;
}

static void answer_check(peer *p, pstream *ps)
{
    Pb__Gubernator__GetRateLimitsReq *rq = NULL;
    if (ps->blen >= 5)
        rq = pb__gubernator__get_rate_limits_req__unpack(NULL, ps->blen - 5, ps->body + 5);
    size_t n = rq ? rq->n_requests : 0;
    Pb__Gubernator__RateLimitResp *rs = calloc(n + 1, sizeof *rs);
    Pb__Gubernator__RateLimitResp **prs = calloc(n + 1, sizeof *prs);
    Pb__Gubernator__RateLimitResp__MetadataEntry *md = calloc(2 * n + 1, sizeof *md);
    Pb__Gubernator__RateLimitResp__MetadataEntry **pmd = calloc(2 * n + 1, sizeof *pmd);
    char (*leases)[24] = calloc(n + 1, 24);
    for (size_t i = 0; i < n; i++) {
        Pb__Gubernator__RateLimitReq *q = rq->requests[i];
        pb__gubernator__rate_limit_resp__init(&rs[i]);
        rs[i].status = q->hits > q->limit ? PB__GUBERNATOR__STATUS__OVER_LIMIT
                                          : PB__GUBERNATOR__STATUS__UNDER_LIMIT;
        rs[i].limit = q->limit;
        rs[i].remaining = q->hits > q->limit ? 0 : q->limit - q->hits;
        rs[i].reset_time = 1700000000000LL + q->duration;
        if (!strcmp(q->name, "bad"))
            rs[i].error = "bad name";
        rs[i].metadata = &pmd[2 * i];
        pb__gubernator__rate_limit_resp__metadata_entry__init(&md[2 * i]);
        md[2 * i].key = "owner";
        md[2 * i].value = "127.0.0.1:1";
        pmd[2 * i] = &md[2 * i];
        rs[i].n_metadata = 1;
        if (q->algorithm == PB__GUBERNATOR__ALGORITHM__CONCURRENCY) {
            snprintf(leases[i], 24, "L-%zu", i);
            pb__gubernator__rate_limit_resp__metadata_entry__init(&md[2 * i + 1]);
            md[2 * i + 1].key = "lease_id";
            md[2 * i + 1].value = leases[i];
            pmd[2 * i + 1] = &md[2 * i + 1];
            rs[i].n_metadata = 2;
        }
        prs[i] = &rs[i];
    }
    Pb__Gubernator__GetRateLimitsResp resp = PB__GUBERNATOR__GET_RATE_LIMITS_RESP__INIT;
    resp.n_responses = n;
    resp.responses = prs;
    grpc_set(ps, &resp.base);
    ps->grpc_status = rq ? 0 : 3;
    free(rs);
    free(prs);
    free(md);
    free(pmd);
    free(leases);
    pthread_mutex_lock(&p->mu);
    if (p->last_check)
        pb__gubernator__get_rate_limits_req__free_unpacked(p->last_check, NULL);
    p->last_check = rq;
    pthread_mutex_unlock(&p->mu);
}

static void respond(peer *p, nghttp2_session *s, int32_t id, pstream *ps)
{
    pthread_mutex_lock(&p->mu);
    p->requests++;
    snprintf(p->last_path, sizeof p->last_path, "%s", ps->path);
    memcpy(p->last_headers, ps->headers, ps->hlen + 1);
    bool unhealthy = p->unhealthy;
    pthread_mutex_unlock(&p->mu);

    ps->grpc_status = -1;
    nghttp2_data_provider prd = {.source.ptr = ps, .read_callback = p_read};
    nghttp2_nv grpc_hdrs[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
    };
    if (!strcmp(ps->path, "/pb.gubernator.V1/GetRateLimits")) {
        answer_check(p, ps);
        nghttp2_submit_response(s, id, grpc_hdrs, 2, &prd);
    } else if (!strcmp(ps->path, "/pb.gubernator.V1/HealthCheck")) {
        Pb__Gubernator__HealthCheckResp h = PB__GUBERNATOR__HEALTH_CHECK_RESP__INIT;
        if (unhealthy) {
            ps->grpc_status = 14;
            strcpy(ps->grpc_message, "not%20ready");
        } else {
            h.status = "healthy";
            h.peer_count = 3;
            grpc_set(ps, &h.base);
            ps->grpc_status = 0;
        }
        nghttp2_submit_response(s, id, grpc_hdrs, 2, &prd);
    } else if (!strcmp(ps->path, "/pb.gubernator.V1/LiveCheck")) {
        ps->grpc_status = 0;
        nghttp2_submit_response(s, id, grpc_hdrs, 2, &prd);
    } else if (!strcmp(ps->path, "/attempt")) {
        nghttp2_nv h[8];
        size_t nh = 0;
#define H(n, v) h[nh++] = (nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), 0}
        if (!ps->resource[0]) {
            H(":status", "400");
        } else if (!strcmp(ps->resource, "deny")) {
            H(":status", "429");
            H("retry-after", "2");
            H("ratelimit", "limit=10, remaining=0, reset=2");
            H("ratelimit-policy", "10;w=1");
        } else if (!strcmp(ps->resource, "fail")) {
            H(":status", "500");
            ps->resp = (uint8_t *)strdup("internal error\n");
            ps->resp_len = strlen((char *)ps->resp);
        } else {
            H(":status", "200");
            H("ratelimit", "\"default\";r=7;t=1");
            H("ratelimit-policy", "\"default\";q=10;w=1");
            if (ps->acquire)
                H("x-lease-id", "L-1");
        }
        nghttp2_submit_response(s, id, h, nh, ps->resp_len ? &prd : NULL);
    } else if (!strcmp(ps->path, "/release")) {
        nghttp2_nv h[1];
        size_t nh = 0;
        H(":status", strcmp(ps->lease, "L-1") ? "404" : "200");
        nghttp2_submit_response(s, id, h, nh, NULL);
#undef H
    } else {
        nghttp2_nv h[] = {{(uint8_t *)":status", (uint8_t *)"404", 7, 3, 0}};
        nghttp2_submit_response(s, id, h, 1, NULL);
    }
}

static int p_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        pstream *ps = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
        if (ps)
            respond(ud, s, f->hd.stream_id, ps);
    }
    return 0;
}

static int p_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
    pstream *ps = nghttp2_session_get_stream_user_data(s, id);
    if (ps) {
        free(ps->resp);
        free(ps);
    }
    return 0;
}

static void pconn_close(pconn *c)
{
    if (c->sess)
        nghttp2_session_del(c->sess);
    close(c->fd);
    c->sess = NULL;
    c->fd = -1;
}

static bool pconn_flush(pconn *c)
{
    for (;;) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(c->sess, &d);
        if (n < 0)
            return false;
        if (n == 0)
            return true;
        while (n > 0) {
            ssize_t w = send(c->fd, d, (size_t)n, MSG_NOSIGNAL); /* blocking socket */
            if (w <= 0)
                return false;
            d += w;
            n -= w;
        }
    }
}

static void *peer_main(void *arg)
{
    peer *p = arg;
    nghttp2_session_callbacks *cbs;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, p_on_begin);
    nghttp2_session_callbacks_set_on_header_callback(cbs, p_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, p_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, p_on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, p_on_close);
    for (;;) {
        struct pollfd pfd[2 + PEER_MAX_CONNS];
        pfd[0] = (struct pollfd){.fd = p->wake[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        for (int i = 0; i < p->nconns; i++)
            pfd[2 + i] = (struct pollfd){.fd = p->conns[i].fd, .events = POLLIN};
        if (poll(pfd, 2 + p->nconns, -1) < 0)
            continue;
        if (pfd[0].revents)
            break;
        if ((pfd[1].revents & POLLIN) && p->nconns < PEER_MAX_CONNS) {
            int fd = accept(p->lfd, NULL, NULL);
            if (fd >= 0) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                pconn *c = &p->conns[p->nconns++];
                c->fd = fd;
                c->sess = NULL;
                pthread_mutex_lock(&p->mu);
                p->accepts++;
                bool silent = p->silent;
                pthread_mutex_unlock(&p->mu);
                if (!silent) {
                    nghttp2_session_server_new(&c->sess, cbs, p);
                    nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, NULL, 0);
                    pconn_flush(c);
                }
            }
        }
        for (int i = 0; i < p->nconns; i++) {
            if (!pfd[2 + i].revents)
                continue;
            pconn *c = &p->conns[i];
            uint8_t buf[16384];
            ssize_t n = recv(c->fd, buf, sizeof buf, 0);
            bool ok = n > 0;
            if (ok && c->sess)
                ok = nghttp2_session_mem_recv(c->sess, buf, (size_t)n) == n && pconn_flush(c);
            if (!ok) {
                pconn_close(c);
                p->conns[i] = p->conns[--p->nconns];
                pfd[2 + i] = pfd[2 + p->nconns];
                i--;
            }
        }
    }
    for (int i = 0; i < p->nconns; i++)
        pconn_close(&p->conns[i]);
    p->nconns = 0;
    nghttp2_session_callbacks_del(cbs);
    return NULL;
}

/* Listen on 127.0.0.1:port (0 = any) and serve from a thread. */
static void peer_start(peer *p, uint16_t port)
{
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(p->lfd >= 0);
    int one = 1;
    setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(p->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(p->lfd, 64), 0);
    socklen_t sl = sizeof sa;
    getsockname(p->lfd, (struct sockaddr *)&sa, &sl);
    p->port = ntohs(sa.sin_port);
    assert_int_equal(pipe(p->wake), 0);
    p->running = true;
    assert_int_equal(pthread_create(&p->th, NULL, peer_main, p), 0);
}

static void peer_stop(peer *p)
{
    if (!p->running)
        return;
    ssize_t w = write(p->wake[1], "x", 1);
    (void)w;
    pthread_join(p->th, NULL);
    close(p->wake[0]);
    close(p->wake[1]);
    close(p->lfd);
    p->running = false;
}

static peer *peer_new(void)
{
    peer *p = calloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    peer_start(p, 0);
    return p;
}

static void peer_free(peer *p)
{
    peer_stop(p);
    if (p->last_check)
        pb__gubernator__get_rate_limits_req__free_unpacked(p->last_check, NULL);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static int peer_accepts(peer *p)
{
    pthread_mutex_lock(&p->mu);
    int n = p->accepts;
    pthread_mutex_unlock(&p->mu);
    return n;
}

static sl_client *client_for(peer *p, int timeout_ms, bool fail_closed, int backoff_ms)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", p->port);
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = timeout_ms;
    o.fail_closed = fail_closed;
    o.reconnect_backoff_ms = backoff_ms;
    sl_client *c = NULL;
    assert_int_equal(sl_client_new(addr, &o, &c), 0);
    return c;
}

static sl_client_item item(const char *name, const char *key, int64_t hits, int64_t limit)
{
    sl_client_item it;
    memset(&it, 0, sizeof it);
    it.req.name = name;
    it.req.name_len = strlen(name);
    it.req.unique_key = key;
    it.req.unique_key_len = strlen(key);
    it.req.hits = hits;
    it.req.limit = limit;
    it.req.duration = 1000;
    return it;
}

/* ------------------------------------------------------------------ check over gRPC */

static void test_check_encoding_and_decoding(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 2000, false, 0);

    sl_client_kv md[] = {{"priority", "critical"}, {"trace", "abc"}};
    sl_client_item items[3];
    items[0] = item("requests_per_sec", "account:42", 3, 10);
    items[0].req.algorithm = SL_GCRA;
    items[0].req.behavior = SL_GLOBAL | SL_RESET_REMAINING;
    items[0].req.burst = 20;
    items[0].req.created_at = 1700000000123LL;
    items[0].metadata = md;
    items[0].metadata_count = 2;
    items[1] = item("sw", "k2", 11, 10);
    items[1].req.algorithm = SL_SLIDING_WINDOW;
    items[1].req.sub_windows = 4;
    items[1].req.duration = 60000;
    items[2] = item("bad", "k3", 1, 5);

    sl_client_check_reply r;
    assert_int_equal(sl_client_check(c, items, 3, 0, &r), 0);
    assert_int_equal(r.err, 0);
    assert_false(r.failed_open);
    assert_int_equal(r.http_status, 200);
    assert_int_equal(r.grpc_status, 0);
    assert_int_equal(r.count, 3);

    /* what arrived on the wire */
    pthread_mutex_lock(&p->mu);
    assert_string_equal(p->last_path, "/pb.gubernator.V1/GetRateLimits");
    assert_non_null(strstr(p->last_headers, "content-type: application/grpc\n"));
    assert_non_null(strstr(p->last_headers, "te: trailers\n"));
    assert_non_null(strstr(p->last_headers, "grpc-timeout: 2000m\n"));
    Pb__Gubernator__GetRateLimitsReq *q = p->last_check;
    assert_non_null(q);
    assert_int_equal(q->n_requests, 3);
    assert_string_equal(q->requests[0]->name, "requests_per_sec");
    assert_string_equal(q->requests[0]->unique_key, "account:42");
    assert_int_equal(q->requests[0]->hits, 3);
    assert_int_equal(q->requests[0]->limit, 10);
    assert_int_equal(q->requests[0]->duration, 1000);
    assert_int_equal(q->requests[0]->algorithm, 2);
    assert_int_equal(q->requests[0]->behavior, 2 | 8);
    assert_int_equal(q->requests[0]->burst, 20);
    assert_int_equal(q->requests[0]->created_at, 1700000000123LL);
    assert_int_equal(q->requests[0]->n_metadata, 2);
    assert_string_equal(q->requests[0]->metadata[0]->key, "priority");
    assert_string_equal(q->requests[0]->metadata[0]->value, "critical");
    assert_string_equal(q->requests[0]->metadata[1]->key, "trace");
    assert_int_equal(q->requests[1]->algorithm, 4);
    assert_int_equal(q->requests[1]->n_metadata, 1);
    assert_string_equal(q->requests[1]->metadata[0]->key, "sub_windows");
    assert_string_equal(q->requests[1]->metadata[0]->value, "4");
    assert_int_equal(q->requests[1]->created_at, 0);
    pthread_mutex_unlock(&p->mu);

    /* what came back */
    assert_int_equal(r.items[0].resp.status, SL_UNDER_LIMIT);
    assert_int_equal(r.items[0].resp.limit, 10);
    assert_int_equal(r.items[0].resp.remaining, 7);
    assert_int_equal(r.items[0].resp.reset_time, 1700000000000LL + 1000);
    assert_null(r.items[0].resp.error);
    assert_int_equal(r.items[0].metadata_count, 1);
    assert_string_equal(r.items[0].metadata[0].key, "owner");
    assert_string_equal(r.items[0].metadata[0].value, "127.0.0.1:1");
    assert_int_equal(r.items[1].resp.status, SL_OVER_LIMIT);
    assert_int_equal(r.items[1].resp.remaining, 0);
    assert_int_equal(r.items[1].resp.reset_time, 1700000000000LL + 60000);
    assert_string_equal(r.items[2].resp.error, "bad name");
    sl_client_check_reply_free(&r);
    assert_null(r.items);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.calls, 1);
    assert_int_equal(st.failed_open, 0);
    assert_int_equal(st.connects, 1);
    sl_client_free(c);
    peer_free(p);
}

static void test_check_concurrency_lease_over_grpc(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 2000, false, 0);
    sl_client_item it = item("db", "pool", 1, 5);
    it.req.algorithm = SL_CONCURRENCY;
    sl_client_check_reply r;
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_int_equal(r.items[0].metadata_count, 2);
    assert_string_equal(r.items[0].metadata[1].key, "lease_id");
    assert_string_equal(r.items[0].metadata[1].value, "L-0");

    sl_client_kv rel[] = {{"lease_id", r.items[0].metadata[1].value}};
    sl_client_item back = item("db", "pool", -1, 5);
    back.req.algorithm = SL_CONCURRENCY;
    back.metadata = rel;
    back.metadata_count = 1;
    sl_client_check_reply r2;
    assert_int_equal(sl_client_check(c, &back, 1, 0, &r2), 0);
    pthread_mutex_lock(&p->mu);
    assert_int_equal(p->last_check->requests[0]->hits, -1);
    assert_int_equal(p->last_check->requests[0]->algorithm, 6);
    assert_string_equal(p->last_check->requests[0]->metadata[0]->key, "lease_id");
    assert_string_equal(p->last_check->requests[0]->metadata[0]->value, "L-0");
    pthread_mutex_unlock(&p->mu);
    sl_client_check_reply_free(&r);
    sl_client_check_reply_free(&r2);
    sl_client_free(c);
    peer_free(p);
}

static void test_check_bad_arguments(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 2000, false, 0);
    sl_client_check_reply r;
    sl_client_item it = item("n", "k", 1, 1);
    assert_int_equal(sl_client_check(c, &it, 0, 0, &r), -EINVAL);
    assert_null(r.items);
    sl_client_item *many = calloc(SL_CLIENT_MAX_ITEMS + 1, sizeof *many);
    for (size_t i = 0; i <= SL_CLIENT_MAX_ITEMS; i++)
        many[i] = it;
    assert_int_equal(sl_client_check(c, many, SL_CLIENT_MAX_ITEMS + 1, 0, &r), -E2BIG);
    /* exactly the maximum is fine and comes back in order */
    assert_int_equal(sl_client_check(c, many, SL_CLIENT_MAX_ITEMS, 0, &r), 0);
    assert_int_equal(r.count, SL_CLIENT_MAX_ITEMS);
    assert_false(r.failed_open);
    sl_client_check_reply_free(&r);
    free(many);
    it.req.name = NULL;
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), -EINVAL);
    sl_client_free(c);
    peer_free(p);
}

static void test_response_too_big_fails_open(void **state)
{
    peer *p = peer_new();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", p->port);
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = 2000;
    o.max_response_bytes = 64;
    sl_client *c;
    assert_int_equal(sl_client_new(addr, &o, &c), 0);
    sl_client_item items[10];
    for (int i = 0; i < 10; i++)
        items[i] = item("n", "k", 1, 5);
    sl_client_check_reply r;
    assert_int_equal(sl_client_check(c, items, 10, 0, &r), 0);
    assert_true(r.failed_open);
    assert_int_equal(r.err, -EMSGSIZE);
    assert_int_equal(r.items[9].resp.status, SL_UNDER_LIMIT);
    sl_client_check_reply_free(&r);
    sl_client_free(c);
    peer_free(p);
}

/* ------------------------------------------------------------------ health */

static void test_health(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 2000, false, 0);
    sl_health_reply h;
    assert_int_equal(sl_client_health(c, 0, &h), 0);
    assert_true(h.healthy);
    assert_string_equal(h.status, "healthy");
    assert_int_equal(h.peer_count, 3);
    assert_int_equal(sl_client_live(c, 0), 0);

    pthread_mutex_lock(&p->mu);
    p->unhealthy = true;
    pthread_mutex_unlock(&p->mu);
    assert_int_equal(sl_client_health(c, 0, &h), 0);
    assert_false(h.healthy);
    assert_int_equal(h.grpc_status, 14);
    assert_string_equal(h.status, "unhealthy");
    assert_string_equal(h.message, "not ready");

    peer_stop(p);
    assert_true(sl_client_health(c, 0, &h) < 0);
    assert_true(h.err < 0);
    assert_false(h.healthy);
    sl_client_free(c);
    peer_free(p);
}

/* ------------------------------------------------------------------ Levee /attempt */

static void test_attempt_outcomes(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 2000, false, 0);
    sl_attempt_reply r;

    sl_attempt a = {.resource = "api", .prefix = "/v1/users", .method = "GET", .req_id = "r-1",
                    .priority = "get"};
    assert_int_equal(sl_client_attempt(c, &a, 0, &r), 0);
    assert_int_equal(r.outcome, SL_ATTEMPT_ACCEPTED);
    assert_true(r.allowed);
    assert_false(r.failed_open);
    assert_int_equal(r.http_status, 200);
    assert_int_equal(r.rl_remaining, 7);
    assert_int_equal(r.rl_reset_s, 1);
    assert_int_equal(r.rl_limit, 10);
    assert_int_equal(r.rl_window_s, 1);
    assert_int_equal(r.retry_after_ms, -1);
    pthread_mutex_lock(&p->mu);
    assert_string_equal(p->last_path, "/attempt");
    assert_non_null(strstr(p->last_headers, ":method: POST\n"));
    assert_non_null(strstr(p->last_headers, "x-resource: api\n"));
    assert_non_null(strstr(p->last_headers, "x-prefix: /v1/users\n"));
    assert_non_null(strstr(p->last_headers, "x-method: GET\n"));
    assert_non_null(strstr(p->last_headers, "x-req-id: r-1\n"));
    assert_non_null(strstr(p->last_headers, "x-priority: get\n"));
    assert_null(strstr(p->last_headers, "x-concurrency"));
    pthread_mutex_unlock(&p->mu);

    a = (sl_attempt){.resource = "deny"};
    assert_int_equal(sl_client_attempt(c, &a, 0, &r), 0);
    assert_int_equal(r.outcome, SL_ATTEMPT_REJECTED);
    assert_false(r.allowed);
    assert_int_equal(r.http_status, 429);
    assert_int_equal(r.retry_after_ms, 2000);
    assert_int_equal(r.rl_limit, 10);
    assert_int_equal(r.rl_remaining, 0);
    assert_int_equal(r.rl_reset_s, 2);
    assert_int_equal(r.rl_window_s, 1);
    assert_string_equal(r.ratelimit, "limit=10, remaining=0, reset=2");
    pthread_mutex_lock(&p->mu);
    assert_null(strstr(p->last_headers, "x-prefix"));
    pthread_mutex_unlock(&p->mu);

    /* 500 is "failed": fail open, counted */
    a = (sl_attempt){.resource = "fail"};
    assert_int_equal(sl_client_attempt(c, &a, 0, &r), 0);
    assert_int_equal(r.outcome, SL_ATTEMPT_FAILED);
    assert_true(r.allowed);
    assert_true(r.failed_open);
    assert_int_equal(r.err, -EPROTO);
    assert_int_equal(r.http_status, 500);
    assert_string_equal(r.message, "internal error");

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.calls, 3);
    assert_int_equal(st.failed_open, 1);
    assert_int_equal(st.transport_errors, 1);
    assert_int_equal(st.connects, 1);

    /* arguments the client refuses before sending */
    a = (sl_attempt){.resource = NULL};
    assert_int_equal(sl_client_attempt(c, &a, 0, &r), -EINVAL);
    a = (sl_attempt){.resource = "x\r\nx-evil: 1"};
    assert_int_equal(sl_client_attempt(c, &a, 0, &r), -EINVAL);
    sl_client_free(c);
    peer_free(p);
}

static void test_acquire_release(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 2000, false, 0);
    sl_attempt a = {.resource = "db", .priority = "critical"};
    sl_attempt_reply r;
    assert_int_equal(sl_client_acquire(c, &a, 0, &r), 0);
    assert_true(r.allowed);
    assert_string_equal(r.lease_id, "L-1");
    pthread_mutex_lock(&p->mu);
    assert_non_null(strstr(p->last_headers, "x-concurrency: acquire\n"));
    assert_non_null(strstr(p->last_headers, "x-priority: critical\n"));
    pthread_mutex_unlock(&p->mu);

    char lease[sizeof r.lease_id];
    strcpy(lease, r.lease_id);
    assert_int_equal(sl_client_release(c, &a, lease, 0, &r), 0);
    pthread_mutex_lock(&p->mu);
    assert_string_equal(p->last_path, "/release");
    assert_non_null(strstr(p->last_headers, "x-lease-id: L-1\n"));
    pthread_mutex_unlock(&p->mu);
    assert_int_equal(sl_client_release(c, NULL, "L-unknown", 0, &r), -ENOENT);
    assert_int_equal(r.http_status, 404);
    /* nothing to release after a fail-open acquire */
    assert_int_equal(sl_client_release(c, NULL, "", 0, &r), 0);
    sl_client_free(c);
    peer_free(p);
}

static void test_ratelimit_header_parsing(void **state)
{
    sl_attempt_reply r;
    sl_attempt_reply_init(&r);
#define HDR(n, v) sl_attempt_reply_header(&r, n, strlen(n), v, strlen(v))
    HDR("RateLimit-Limit", "100");
    HDR("RateLimit-Remaining", "42");
    HDR("RateLimit-Reset", "30");
    HDR("Retry-After", " 5 ");
    HDR("X-Lease-Id", "abc");
    assert_int_equal(r.rl_limit, 100);
    assert_int_equal(r.rl_remaining, 42);
    assert_int_equal(r.rl_reset_s, 30);
    assert_int_equal(r.retry_after_ms, 5000);
    assert_string_equal(r.lease_id, "abc");

    sl_attempt_reply_init(&r);
    HDR("ratelimit", "\"burst\";r=0;t=12, \"daily\";r=100;t=3600");
    HDR("ratelimit-policy", "\"burst\";q=10;w=60, \"daily\";q=1000;w=86400");
    assert_int_equal(r.rl_remaining, 0);
    assert_int_equal(r.rl_reset_s, 12);
    assert_int_equal(r.rl_limit, 10);
    assert_int_equal(r.rl_window_s, 60);

    sl_attempt_reply_init(&r);
    HDR("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"); /* HTTP-date: not understood */
    HDR("content-type", "text/plain");
    assert_int_equal(r.retry_after_ms, -1);
    assert_int_equal(r.rl_limit, -1);
#undef HDR
}

/* ------------------------------------------------------------------ failures */

static void test_timeout_fails_open_and_is_counted(void **state)
{
    peer *p = peer_new();
    p->silent = true;
    sl_client *c = client_for(p, 50, false, 0);
    sl_client_item it = item("n", "k", 1, 5);
    sl_client_check_reply r;
    int64_t t0 = sl_mono_ns();
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    int64_t ms = (sl_mono_ns() - t0) / 1000000;
    assert_true(ms >= 49);
    assert_true(ms < 5000); /* the silent server never answers: only the deadline ends it */
    assert_true(r.failed_open);
    assert_int_equal(r.err, -ETIMEDOUT);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.items[0].resp.status, SL_UNDER_LIMIT);
    assert_int_equal(r.items[0].resp.limit, 5);
    sl_client_check_reply_free(&r);

    sl_attempt a = {.resource = "api"};
    sl_attempt_reply ar;
    assert_int_equal(sl_client_attempt(c, &a, 30, &ar), 0);
    assert_true(ar.allowed);
    assert_true(ar.failed_open);
    assert_int_equal(ar.err, -ETIMEDOUT);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.calls, 2);
    assert_int_equal(st.failed_open, 2);
    assert_int_equal(st.timeouts, 2);
    assert_int_equal(st.failed_closed, 0);
    sl_client_free(c);
    peer_free(p);
}

static void test_timeout_fail_closed(void **state)
{
    peer *p = peer_new();
    p->silent = true;
    sl_client *c = client_for(p, 40, true, 0);
    sl_client_item it = item("n", "k", 1, 5);
    sl_client_check_reply r;
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), -ETIMEDOUT);
    assert_false(r.failed_open);
    assert_int_equal(r.count, 1);
    assert_int_equal(r.items[0].resp.status, SL_OVER_LIMIT);
    assert_non_null(r.items[0].resp.error);
    sl_client_check_reply_free(&r);

    sl_attempt a = {.resource = "api"};
    sl_attempt_reply ar;
    assert_int_equal(sl_client_attempt(c, &a, 0, &ar), -ETIMEDOUT);
    assert_false(ar.allowed);
    assert_false(ar.failed_open);
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.failed_closed, 2);
    assert_int_equal(st.failed_open, 0);
    sl_client_free(c);
    peer_free(p);
}

static void test_server_down_fails_open(void **state)
{
    peer *p = peer_new();
    peer_stop(p); /* the port is now closed: connection refused */
    sl_client *c = client_for(p, 20000, false, 0);
    sl_client_item it = item("n", "k", 1, 5);
    sl_client_check_reply r;
    int64_t t0 = sl_mono_ns();
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_true((sl_mono_ns() - t0) / 1000000 < 10000); /* refused at once, not at 20 s */
    assert_true(r.failed_open);
    assert_int_equal(r.err, -ECONNREFUSED);
    sl_client_check_reply_free(&r);
    sl_attempt a = {.resource = "api"};
    sl_attempt_reply ar;
    assert_int_equal(sl_client_attempt(c, &a, 0, &ar), 0);
    assert_true(ar.failed_open);
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.failed_open, 2);
    assert_int_equal(st.transport_errors, 2);
    assert_int_equal(st.connect_failures, 2);
    assert_int_equal(st.connects, 0);
    sl_client_free(c);
    peer_free(p);
}

static void test_reconnects_after_server_restart(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 1000, false, 0);
    sl_client_item it = item("n", "k", 1, 5);
    sl_client_check_reply r;
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_false(r.failed_open);
    sl_client_check_reply_free(&r);

    uint16_t port = p->port;
    peer_stop(p);
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_true(r.failed_open); /* down */
    sl_client_check_reply_free(&r);

    peer_start(p, port);
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_false(r.failed_open); /* back, on a new connection */
    assert_int_equal(r.items[0].resp.remaining, 4);
    sl_client_check_reply_free(&r);

    /* restart while the connection sits idle in the pool: the next call must not fail on it */
    peer_stop(p);
    peer_start(p, port);
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_false(r.failed_open);
    sl_client_check_reply_free(&r);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.connects, 3);
    assert_int_equal(st.failed_open, 1);
    assert_int_equal(peer_accepts(p), 3);
    sl_client_free(c);
    peer_free(p);
}

static void test_backoff_skips_connects(void **state)
{
    peer *p = peer_new();
    uint16_t port = p->port;
    peer_stop(p);
    sl_client *c = client_for(p, 1000, false, 60000);
    sl_client_item it = item("n", "k", 1, 5);
    sl_client_check_reply r;
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_true(r.failed_open);
    sl_client_check_reply_free(&r);
    peer_start(p, port);
    /* within the backoff the client does not even try: fails open at once, nothing accepted */
    assert_int_equal(sl_client_check(c, &it, 1, 0, &r), 0);
    assert_true(r.failed_open);
    assert_int_equal(r.err, -ECONNREFUSED);
    sl_client_check_reply_free(&r);
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.connect_failures, 1);
    assert_int_equal(st.failed_open, 2);
    assert_int_equal(peer_accepts(p), 0);
    sl_client_free(c);
    peer_free(p);
}

/* ------------------------------------------------------------------ async */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int ok;          /* answers that were real and correct */
    int failed_open;
    int last_rc;
    int last_err;
    sl_client_check_reply kept;
} waiter;

static void waiter_init(waiter *w)
{
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

static void waiter_wait(waiter *w, int n)
{
    pthread_mutex_lock(&w->mu);
    int64_t until = sl_mono_ns() + 10LL * 1000000000;
    while (w->done < n && sl_mono_ns() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
}

static void on_check(void *ud, int rc, sl_client_check_reply *r)
{
    waiter *w = ud;
    pthread_mutex_lock(&w->mu);
    w->last_rc = rc;
    w->last_err = r->err;
    if (r->failed_open)
        w->failed_open++;
    else if (rc == 0 && r->count == 1 && r->items[0].resp.remaining == 4)
        w->ok++;
    if (!w->kept.items) { /* take ownership of the first reply */
        w->kept = *r;
        memset(r, 0, sizeof *r);
    }
    w->done++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void on_attempt(void *ud, int rc, const sl_attempt_reply *r)
{
    waiter *w = ud;
    pthread_mutex_lock(&w->mu);
    w->last_rc = rc;
    w->last_err = r->err;
    if (r->failed_open)
        w->failed_open++;
    else if (r->outcome == SL_ATTEMPT_REJECTED && r->retry_after_ms == 2000)
        w->ok++;
    w->done++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void on_health(void *ud, int rc, const sl_health_reply *r)
{
    waiter *w = ud;
    pthread_mutex_lock(&w->mu);
    if (rc == 0 && r->healthy)
        w->ok++;
    w->done++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void test_async_many_on_one_connection(void **state)
{
    peer *p = peer_new();
    sl_client *c = client_for(p, 5000, false, 0);
    waiter w;
    waiter_init(&w);
    sl_client_item it = item("n", "k", 1, 5);
    enum { N = 200 };
    for (int i = 0; i < N; i++)
        assert_int_equal(sl_client_check_async(c, &it, 1, 0, on_check, &w), 0);
    waiter_wait(&w, N);
    assert_int_equal(w.done, N);
    assert_int_equal(w.ok, N);
    assert_int_equal(w.failed_open, 0);
    assert_int_equal(peer_accepts(p), 1); /* multiplexed */
    assert_int_equal(w.kept.count, 1);
    assert_string_equal(w.kept.items[0].metadata[0].key, "owner"); /* a reply kept past its cb */
    sl_client_check_reply_free(&w.kept);

    waiter w2;
    waiter_init(&w2);
    sl_attempt a = {.resource = "deny"};
    assert_int_equal(sl_client_attempt_async(c, &a, 0, on_attempt, &w2), 0);
    assert_int_equal(sl_client_health_async(c, 0, on_health, &w2), 0);
    waiter_wait(&w2, 2);
    assert_int_equal(w2.done, 2);
    assert_int_equal(w2.ok, 2);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.async_pending, 0);
    assert_int_equal(st.calls, N + 2);
    sl_client_free(c);
    peer_free(p);
}

static void test_async_timeout_and_server_restart(void **state)
{
    peer *p = peer_new();
    p->silent = true;
    sl_client *c = client_for(p, 40, false, 0);
    sl_client_item it = item("n", "k", 1, 5);
    waiter w;
    waiter_init(&w);
    assert_int_equal(sl_client_check_async(c, &it, 1, 0, on_check, &w), 0);
    waiter_wait(&w, 1);
    assert_int_equal(w.done, 1);
    assert_int_equal(w.failed_open, 1);
    assert_int_equal(w.last_rc, 0);
    assert_int_equal(w.last_err, -ETIMEDOUT);
    sl_client_check_reply_free(&w.kept);

    /* the silent server goes away, a real one comes up on the port: the I/O thread reconnects */
    uint16_t port = p->port;
    peer_stop(p);
    p->silent = false;
    peer_start(p, port);
    waiter w2;
    waiter_init(&w2);
    int ok = 0;
    for (int i = 0; i < 5 && !ok; i++) { /* the first may still land on the dying connection */
        waiter_init(&w2);
        assert_int_equal(sl_client_check_async(c, &it, 1, 1000, on_check, &w2), 0);
        waiter_wait(&w2, 1);
        ok = w2.ok;
        sl_client_check_reply_free(&w2.kept);
    }
    assert_int_equal(ok, 1);
    sl_client_free(c);
    peer_free(p);
}

static void test_free_cancels_pending_async(void **state)
{
    peer *p = peer_new();
    p->silent = true;
    sl_client *c = client_for(p, 60000, false, 0);
    sl_client_item it = item("n", "k", 1, 5);
    waiter w;
    waiter_init(&w);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl_client_check_async(c, &it, 1, 0, on_check, &w), 0);
    int64_t t0 = sl_mono_ns();
    sl_client_free(c);
    assert_true((sl_mono_ns() - t0) / 1000000 < 30000); /* cancelled, not waited out (60 s) */
    assert_int_equal(w.done, 3); /* called before free returned */
    assert_int_equal(w.failed_open, 3);
    assert_int_equal(w.last_err, -ECANCELED);
    sl_client_check_reply_free(&w.kept);
    peer_free(p);
}

static void test_async_queue_bound(void **state)
{
    peer *p = peer_new();
    p->silent = true;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", p->port);
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = 60000;
    o.max_async_pending = 4;
    sl_client *c;
    assert_int_equal(sl_client_new(addr, &o, &c), 0);
    sl_client_item it = item("n", "k", 1, 5);
    waiter w;
    waiter_init(&w);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sl_client_check_async(c, &it, 1, 0, on_check, &w), 0);
    assert_int_equal(sl_client_check_async(c, &it, 1, 0, on_check, &w), -EAGAIN);
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.async_rejected, 1);
    assert_int_equal(st.async_pending, 4);
    sl_client_free(c);
    assert_int_equal(w.done, 4);
    sl_client_check_reply_free(&w.kept);
    peer_free(p);
}

/* ------------------------------------------------------------------ threads */

typedef struct worker {
    sl_client *c;
    int ok;
} worker;

static void *worker_main(void *arg)
{
    worker *wk = arg;
    sl_client_item it = item("n", "k", 2, 5);
    for (int i = 0; i < 50; i++) {
        sl_client_check_reply r;
        if (sl_client_check(wk->c, &it, 1, 0, &r) == 0 && !r.failed_open &&
            r.items[0].resp.remaining == 3)
            wk->ok++;
        sl_client_check_reply_free(&r);
    }
    return NULL;
}

static void test_sync_from_many_threads(void **state)
{
    peer *p = peer_new();
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", p->port);
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = 5000;
    o.max_sync_conns = 2; /* four threads share two connections */
    sl_client *c;
    assert_int_equal(sl_client_new(addr, &o, &c), 0);
    pthread_t th[4];
    worker wk[4];
    for (int i = 0; i < 4; i++) {
        wk[i] = (worker){.c = c};
        pthread_create(&th[i], NULL, worker_main, &wk[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(wk[i].ok, 50);
    }
    assert_true(peer_accepts(p) <= 2);
    sl_client_free(c);
    peer_free(p);
}

static void test_address_parsing(void **state)
{
    sl_client *c;
    assert_int_equal(sl_client_new("127.0.0.1:5454", NULL, &c), 0);
    sl_client_free(c);
    assert_int_equal(sl_client_new("http://localhost:80/", NULL, &c), 0);
    sl_client_free(c);
    assert_int_equal(sl_client_new("[::1]:5454", NULL, &c), 0);
    sl_client_free(c);
    assert_int_equal(sl_client_new("127.0.0.1", NULL, &c), 0);
    sl_client_free(c);
    assert_int_equal(sl_client_new("127.0.0.1:99999", NULL, &c), -EINVAL);
    assert_int_equal(sl_client_new("127.0.0.1:x", NULL, &c), -EINVAL);
    assert_int_equal(sl_client_new("[::1", NULL, &c), -EINVAL);
    assert_int_equal(sl_client_new("", NULL, &c), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_encoding_and_decoding),
        cmocka_unit_test(test_check_concurrency_lease_over_grpc),
        cmocka_unit_test(test_check_bad_arguments),
        cmocka_unit_test(test_response_too_big_fails_open),
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_attempt_outcomes),
        cmocka_unit_test(test_acquire_release),
        cmocka_unit_test(test_ratelimit_header_parsing),
        cmocka_unit_test(test_timeout_fails_open_and_is_counted),
        cmocka_unit_test(test_timeout_fail_closed),
        cmocka_unit_test(test_server_down_fails_open),
        cmocka_unit_test(test_reconnects_after_server_restart),
        cmocka_unit_test(test_backoff_skips_connects),
        cmocka_unit_test(test_async_many_on_one_connection),
        cmocka_unit_test(test_async_timeout_and_server_restart),
        cmocka_unit_test(test_free_cancels_pending_async),
        cmocka_unit_test(test_async_queue_bound),
        cmocka_unit_test(test_sync_from_many_threads),
        cmocka_unit_test(test_address_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * example_middleware: how a C HTTP service puts sluice in front of its handler.
 *
 * A tiny HTTP/1.1 server (libuv + llhttp) that, for every request, asks a sluiced
 * "POST /attempt" (Levee dialect: X-Resource = --resource, X-Prefix = the request path, X-Method =
 * the request method, X-Req-Id = a counter) and answers
 *   200 "hello"          when accepted (or when sluice could not be asked: the client fails open,
 *                        marked with "X-Sluice: failed-open"),
 *   429 + Retry-After    (and the RateLimit headers sluice sent) when rejected,
 *   503 + Retry-After    when sluice sheds load (X-Method classifies: GET is a "get" call,
 *                        other methods "post"; test traffic would send X-Priority: test).
 * A rejection keeps sluice's own body (its reason) and RateLimit fields; a header sluice did not
 * send is not sent at all (never an empty "RateLimit:" line). Paths under a --critical prefix are
 * sent with X-Priority: critical, so shedders keep them while dropping the rest. With --lease every
 * request takes a concurrency lease (X-Concurrency: acquire) and releases it once its response is
 * written, so sluice counts the calls in flight, not only their rate.
 *
 *   example_middleware --listen 127.0.0.1:8080 --sluice 127.0.0.1:5454 --resource demo \
 *                      --critical /checkout --lease
 *   curl -i http://127.0.0.1:8080/hello
 *
 * The point is the threading: the event loop never blocks on sluice. Each request calls
 * sl_client_attempt_async(); the answer arrives on the client's I/O thread, which queues it and
 * wakes the loop with a uv_async_t; the loop then writes the response. While a connection waits for
 * its answer it stops reading (llhttp is paused after the message), so pipelined requests are
 * answered in order.
 */
#include <errno.h>
#include <llhttp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "sluice/client.h"

#define MAX_PATH 1024
#define MAX_BUFFERED (64 << 10) /* pipelined bytes held while a decision is pending */
#define MAX_CRITICAL 16         /* --critical prefixes */
#define RESP_CAP 2048           /* one response's head + body */

typedef struct app app;

typedef struct conn {
    uv_tcp_t tcp;
    app *a;
    llhttp_t parser;
    char path[MAX_PATH];
    size_t path_len;
    char *inbuf; /* bytes read after a message, waiting for its answer */
    size_t inlen;
    bool waiting;   /* a decision is pending */
    bool closing;   /* uv_close called */
    bool keep_alive;
} conn;

/* One decision on its way from the client's I/O thread to the loop. */
typedef struct decision {
    struct decision *next;
    conn *c;
    int rc;
    sl_attempt_reply r;
} decision;

struct app {
    uv_loop_t *loop;
    uv_tcp_t server;
    uv_async_t wake;
    uv_signal_t sigint;
    sl_client *client;
    const char *resource;
    const char *critical[MAX_CRITICAL]; /* path prefixes sent as X-Priority: critical */
    size_t ncritical;
    bool lease;         /* acquire a lease per request, release it when the response is written */
    int timeout_ms;
    unsigned long next_req_id;
    bool stopping;      /* the client is gone: drop decisions instead of answering */
    pthread_mutex_t mu; /* guards done */
    decision *done;
    llhttp_settings_t settings;
};

static void conn_closed(uv_handle_t *h)
{
    conn *c = h->data;
    if (!c->waiting) { /* else the pending decision frees it */
        free(c->inbuf);
        free(c);
    }
}

static void conn_close(conn *c)
{
    if (!c->closing) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, conn_closed);
    }
}

/* ------------------------------------------------------------------ sluice -> loop */

/* Runs on the sluice client's I/O thread: hand the answer to the loop. */
static void on_decision(void *ud, int rc, const sl_attempt_reply *r)
{
    decision *d = ud;
    app *a = d->c->a;
    d->rc = rc;
    d->r = *r;
    pthread_mutex_lock(&a->mu);
    d->next = a->done;
    a->done = d;
    pthread_mutex_unlock(&a->mu);
    uv_async_send(&a->wake);
}

/* One response being written, with the lease to give back once it is out. */
typedef struct resp_write {
    uv_write_t w;
    app *a;
    char lease_id[128];
    char buf[RESP_CAP];
} resp_write;

static void on_released(void *ud, int rc, const sl_attempt_reply *r)
{
    (void)ud, (void)rc, (void)r; /* a lease not released expires after its duration anyway */
}

static void written(uv_write_t *w, int status)
{
    (void)status;
    resp_write *rw = (resp_write *)w;
    app *a = rw->a;
    if (rw->lease_id[0] && !a->stopping) {
        sl_attempt at = {.resource = a->resource};
        sl_client_release_async(a->client, &at, rw->lease_id, a->timeout_ms, on_released, NULL);
    }
    free(rw);
}

static void conn_feed(conn *c, const char *data, size_t len);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b);

static void respond(conn *c, const sl_attempt_reply *r)
{
    resp_write *rw = malloc(sizeof *rw);
    if (!rw) {
        conn_close(c);
        return;
    }
    rw->a = c->a;
    rw->lease_id[0] = 0;
    char *buf = rw->buf;
    const char *conn_hdr = c->keep_alive ? "keep-alive" : "close";
    int n;
    if (r->allowed) {
        if (r->lease_id[0])
            snprintf(rw->lease_id, sizeof rw->lease_id, "%s", r->lease_id);
        n = snprintf(buf, RESP_CAP,
                     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n"
                     "Connection: %s\r\n%s\r\nhello\n",
                     conn_hdr, r->failed_open ? "X-Sluice: failed-open\r\n" : "");
    } else {
        /* Retry-After in whole seconds, rounded up; 1 when sluice gave none */
        long long ra = r->retry_after_ms > 0 ? (r->retry_after_ms + 999) / 1000 : 1;
        char rl[300] = "", rlp[300] = "";
        if (r->ratelimit[0])
            snprintf(rl, sizeof rl, "RateLimit: %s\r\n", r->ratelimit);
        if (r->ratelimit_policy[0])
            snprintf(rlp, sizeof rlp, "RateLimit-Policy: %s\r\n", r->ratelimit_policy);
        bool shed = r->http_status == 503;
        /* sluice's body says why; our own words only when it sent none */
        char body[300];
        snprintf(body, sizeof body, "%s\n",
                 r->message[0] ? r->message : shed ? "service is busy" : "too many requests");
        n = snprintf(buf, RESP_CAP,
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %zu\r\nRetry-After: %lld\r\n%s%sConnection: %s\r\n\r\n"
                     "%s",
                     shed ? "503 Service Unavailable" : "429 Too Many Requests", strlen(body),
                     ra, rl, rlp, conn_hdr, body);
    }
    if (n < 0 || n >= RESP_CAP)
        n = 0;
    uv_buf_t b = uv_buf_init(buf, (unsigned)n);
    if (uv_write(&rw->w, (uv_stream_t *)&c->tcp, &b, 1, written) < 0) {
        written(&rw->w, -1); /* still give the lease back */
        conn_close(c);
        return;
    }
    if (!c->keep_alive) {
        conn_close(c); /* libuv finishes queued writes before closing */
        return;
    }
    /* go on with what was pipelined behind this request */
    llhttp_resume(&c->parser);
    char *pending = c->inbuf;
    size_t plen = c->inlen;
    c->inbuf = NULL;
    c->inlen = 0;
    if (plen)
        conn_feed(c, pending, plen);
    free(pending);
    if (!c->waiting && !c->closing)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_wake(uv_async_t *h)
{
    app *a = h->data;
    pthread_mutex_lock(&a->mu);
    decision *list = a->done;
    a->done = NULL;
    pthread_mutex_unlock(&a->mu);
    /* the list is newest first; answer in arrival order doesn't matter across connections and a
     * connection has at most one pending decision */
    while (list) {
        decision *d = list;
        list = d->next;
        conn *c = d->c;
        c->waiting = false;
        if (c->closing) {
            free(c->inbuf);
            free(c);
        } else if (a->stopping) {
            conn_close(c);
        } else {
            respond(c, &d->r);
        }
        free(d);
    }
}

/* ------------------------------------------------------------------ HTTP parsing */

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    conn *c = p->data;
    size_t room = sizeof c->path - 1 - c->path_len;
    size_t n = len < room ? len : room;
    memcpy(c->path + c->path_len, at, n);
    c->path_len += n;
    c->path[c->path_len] = 0;
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    conn *c = p->data;
    c->path_len = 0;
    c->path[0] = 0;
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    conn *c = p->data;
    app *a = c->a;
    c->keep_alive = llhttp_should_keep_alive(p);
    char *q = strchr(c->path, '?'); /* the quota prefix is the path, not the query */
    if (q)
        *q = 0;
    char req_id[32];
    snprintf(req_id, sizeof req_id, "mw-%lu", ++a->next_req_id);
    bool critical = false;
    for (size_t i = 0; i < a->ncritical && !critical; i++)
        critical = strncmp(c->path, a->critical[i], strlen(a->critical[i])) == 0;
    sl_attempt at = {.resource = a->resource,
                     .prefix = c->path[0] ? c->path : NULL,
                     .method = llhttp_method_name((llhttp_method_t)llhttp_get_method(p)),
                     .req_id = req_id,
                     .priority = critical ? "critical" : NULL};
    decision *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    d->c = c;
    c->waiting = true;
    int rc = a->lease ? sl_client_acquire_async(a->client, &at, a->timeout_ms, on_decision, d)
                      : sl_client_attempt_async(a->client, &at, a->timeout_ms, on_decision, d);
    if (rc < 0) {
        /* The client refused the call (queue full, bad header value): fail open here too, through
         * the same queue, so the answer is written outside llhttp_execute(). */
        sl_attempt_reply r;
        sl_attempt_reply_init(&r);
        r.allowed = true;
        r.failed_open = true;
        on_decision(d, rc, &r);
    }
    return HPE_PAUSED; /* one request at a time per connection */
}

/* Parse bytes; whatever follows a paused message is kept for later. */
static void conn_feed(conn *c, const char *data, size_t len)
{
    if (c->closing)
        return;
    llhttp_errno_t e = llhttp_execute(&c->parser, data, len);
    if (e == HPE_OK)
        return;
    if (e == HPE_PAUSED) {
        const char *pos = llhttp_get_error_pos(&c->parser);
        size_t used = pos ? (size_t)(pos - data) : len;
        size_t rest = len - used;
        if (rest) {
            if (c->inlen + rest > MAX_BUFFERED) {
                conn_close(c);
                return;
            }
            char *nb = realloc(c->inbuf, c->inlen + rest);
            if (!nb) {
                conn_close(c);
                return;
            }
            memcpy(nb + c->inlen, data + used, rest);
            c->inbuf = nb;
            c->inlen += rest;
        }
        if (c->waiting)
            uv_read_stop((uv_stream_t *)&c->tcp);
        return;
    }
    static const char bad[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                              "Connection: close\r\n\r\n";
    uv_buf_t b = uv_buf_init((char *)bad, sizeof bad - 1);
    uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    conn_close(c);
}

/* ------------------------------------------------------------------ libuv plumbing */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    b->base = malloc(suggested);
    b->len = b->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn *c = s->data;
    if (n > 0) {
        if (c->waiting) { /* a read that raced uv_read_stop: keep it for later */
            if (c->inlen + (size_t)n > MAX_BUFFERED) {
                conn_close(c);
            } else {
                char *nb = realloc(c->inbuf, c->inlen + (size_t)n);
                if (nb) {
                    memcpy(nb + c->inlen, b->base, (size_t)n);
                    c->inbuf = nb;
                    c->inlen += (size_t)n;
                } else {
                    conn_close(c);
                }
            }
        } else {
            conn_feed(c, b->base, (size_t)n);
        }
    } else if (n < 0) {
        conn_close(c);
    }
    free(b->base);
}

static void on_connection(uv_stream_t *server, int status)
{
    app *a = server->data;
    if (status < 0)
        return;
    conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->a = a;
    uv_tcp_init(a->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    llhttp_init(&c->parser, HTTP_REQUEST, &a->settings);
    c->parser.data = c;
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void on_sigint(uv_signal_t *h, int sig)
{
    uv_stop(h->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, h->type == UV_TCP && h->data != arg ? conn_closed : NULL);
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: example_middleware [--listen HOST:PORT] [--sluice HOST:PORT] [--resource R]\n"
        "                          [--timeout MS] [--fail-closed] [--critical PREFIX]... [--lease]\n"
        "  --listen A      where this demo service listens (default 127.0.0.1:8080)\n"
        "  --sluice A      the sluiced to ask (default 127.0.0.1:5454)\n"
        "  --resource R    X-Resource sent for every request (default \"demo\")\n"
        "  --timeout MS    per-decision timeout (default 100)\n"
        "  --fail-closed   answer 429 when sluice cannot be asked (default: fail open)\n"
        "  --critical P    paths starting with P are sent as X-Priority: critical (up to 16)\n"
        "  --lease         take a concurrency lease per request, release it after the response\n");
}

int main(int argc, char **argv)
{
    const char *listen_addr = "127.0.0.1:8080", *sluice_addr = "127.0.0.1:5454";
    app a;
    memset(&a, 0, sizeof a);
    a.resource = "demo";
    a.timeout_ms = 100;
    bool fail_closed = false;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--listen") && v) {
            listen_addr = v;
            i++;
        } else if (!strcmp(argv[i], "--sluice") && v) {
            sluice_addr = v;
            i++;
        } else if (!strcmp(argv[i], "--resource") && v) {
            a.resource = v;
            i++;
        } else if (!strcmp(argv[i], "--timeout") && v) {
            a.timeout_ms = atoi(v);
            i++;
        } else if (!strcmp(argv[i], "--critical") && v && a.ncritical < MAX_CRITICAL) {
            a.critical[a.ncritical++] = v;
            i++;
        } else if (!strcmp(argv[i], "--lease")) {
            a.lease = true;
        } else if (!strcmp(argv[i], "--fail-closed")) {
            fail_closed = true;
        } else if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }

    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = a.timeout_ms > 0 ? a.timeout_ms : 100;
    o.fail_closed = fail_closed;
    int rc = sl_client_new(sluice_addr, &o, &a.client);
    if (rc < 0) {
        fprintf(stderr, "example_middleware: bad --sluice '%s': %s\n", sluice_addr, strerror(-rc));
        return 2;
    }

    char host[256];
    const char *colon = strrchr(listen_addr, ':');
    if (!colon || (size_t)(colon - listen_addr) >= sizeof host) {
        fprintf(stderr, "example_middleware: bad --listen '%s'\n", listen_addr);
        return 2;
    }
    memcpy(host, listen_addr, (size_t)(colon - listen_addr));
    host[colon - listen_addr] = 0;
    struct sockaddr_storage sa;
    if (uv_ip4_addr(host, atoi(colon + 1), (struct sockaddr_in *)&sa) != 0 &&
        uv_ip6_addr(host, atoi(colon + 1), (struct sockaddr_in6 *)&sa) != 0) {
        fprintf(stderr, "example_middleware: bad --listen '%s'\n", listen_addr);
        return 2;
    }

    signal(SIGPIPE, SIG_IGN);
    a.loop = uv_default_loop();
    pthread_mutex_init(&a.mu, NULL);
    llhttp_settings_init(&a.settings);
    a.settings.on_message_begin = on_message_begin;
    a.settings.on_url = on_url;
    a.settings.on_message_complete = on_message_complete;
    uv_async_init(a.loop, &a.wake, on_wake);
    a.wake.data = &a;
    uv_signal_init(a.loop, &a.sigint);
    uv_signal_start(&a.sigint, on_sigint, SIGINT);
    uv_tcp_init(a.loop, &a.server);
    a.server.data = &a;
    if ((rc = uv_tcp_bind(&a.server, (const struct sockaddr *)&sa, 0)) < 0 ||
        (rc = uv_listen((uv_stream_t *)&a.server, 128, on_connection)) < 0) {
        fprintf(stderr, "example_middleware: cannot listen on %s: %s\n", listen_addr,
                uv_strerror(rc));
        return 1;
    }
    printf("example_middleware: listening on %s, asking sluice at %s (resource \"%s\")\n",
           listen_addr, sluice_addr, a.resource);
    fflush(stdout);

    uv_run(a.loop, UV_RUN_DEFAULT);

    /* Pending decisions complete (cancelled) inside sl_client_free; deliver them, then close. */
    a.stopping = true;
    sl_client_free(a.client);
    on_wake(&a.wake);
    uv_walk(a.loop, close_walk, &a);
    uv_run(a.loop, UV_RUN_DEFAULT);
    uv_loop_close(a.loop);
    pthread_mutex_destroy(&a.mu);
    return 0;
}

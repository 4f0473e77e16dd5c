/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's I/O (client/clientio.h): how a call's request reaches the server.
 *
 * Sync calls borrow a connection from a pool and drive it on the caller's thread
 * (sl_h2conn_roundtrip); at most max_sync_conns exist, further callers wait on a condition variable
 * until one is returned or their deadline passes. Async calls go through a mutex-protected queue to
 * one I/O thread that multiplexes them on its own connection; it polls an eventfd beside the
 * connection so a new call wakes it at once. A server GOAWAY moves that connection to a draining
 * list and opens a fresh one, so in-flight calls finish where they started while new ones go to the
 * new connection. Each call passes the circuit breaker's gate (sl_call_gate) first: an open breaker
 * fails it at once, before any connection is taken. Every outcome goes through sl_call_decode (and, async, sl_call_deliver).
 */
#include "client/clientio.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sluice/clock.h"

#define MAX_DRAINING 8 /* GOAWAY'd connections still finishing their streams */

static void wake_io(sl_client *c)
{
    uint64_t one = 1;
    ssize_t w = write(c->wake_fd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is already non-zero, the thread will wake anyway */
}

int sl_clientio_init(sl_client *c)
{
    c->idle = calloc(c->opt.max_sync_conns, sizeof *c->idle);
    c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!c->idle || c->wake_fd < 0) {
        int rc = c->wake_fd < 0 ? -errno : -ENOMEM;
        if (c->wake_fd >= 0)
            close(c->wake_fd);
        free(c->idle);
        return rc;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->pool_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->pool_mu, NULL);
    pthread_mutex_init(&c->q_mu, NULL);
    return 0;
}

void sl_clientio_fini(sl_client *c)
{
    pthread_mutex_lock(&c->q_mu);
    c->stopping = true;
    bool started = c->io_started;
    pthread_mutex_unlock(&c->q_mu);
    if (started) {
        wake_io(c);
        pthread_join(c->io, NULL);
    }
    for (size_t i = 0; i < c->nidle; i++)
        sl_h2conn_free(c->idle[i]);
    free(c->idle);
    close(c->wake_fd);
    pthread_mutex_destroy(&c->pool_mu);
    pthread_cond_destroy(&c->pool_cv);
    pthread_mutex_destroy(&c->q_mu);
}


static void on_h2_done(void *ud, const sl_h2c_resp *resp)
{
    sl_call *k = ud;
    sl_call_decode(k, resp, 0);
    if (k->async)
        sl_call_deliver(k);
}

static void make_req(sl_call *k, sl_h2conn_req *req)
{
    *req = (sl_h2conn_req){.method = "POST", .path = k->path, .headers = k->hdrs,
                           .nheaders = k->nhdrs, .body = &k->body,
                           .deadline_ns = k->deadline_ns};
}

/* ------------------------------------------------------------------ sync path */

static int pool_get(sl_client *c, int64_t deadline_ns, sl_h2conn **out)
{
    pthread_mutex_lock(&c->pool_mu);
    while (c->nidle == 0 && c->nconns >= c->opt.max_sync_conns) {
        struct timespec ts = {.tv_sec = deadline_ns / 1000000000,
                              .tv_nsec = deadline_ns % 1000000000};
        if (pthread_cond_timedwait(&c->pool_cv, &c->pool_mu, &ts) == ETIMEDOUT &&
            c->nidle == 0 && c->nconns >= c->opt.max_sync_conns) {
            pthread_mutex_unlock(&c->pool_mu);
            return -ETIMEDOUT;
        }
    }
    if (c->nidle) {
        *out = c->idle[--c->nidle];
        pthread_mutex_unlock(&c->pool_mu);
        return 0;
    }
    c->nconns++;
    pthread_mutex_unlock(&c->pool_mu);
    int rc = sl_h2conn_new(&c->target, out);
    if (rc < 0) {
        pthread_mutex_lock(&c->pool_mu);
        c->nconns--;
        pthread_cond_signal(&c->pool_cv);
        pthread_mutex_unlock(&c->pool_mu);
    }
    return rc;
}

static void pool_put(sl_client *c, sl_h2conn *h)
{
    pthread_mutex_lock(&c->pool_mu);
    c->idle[c->nidle++] = h;
    pthread_cond_signal(&c->pool_cv);
    pthread_mutex_unlock(&c->pool_mu);
}

int sl_clientio_run_sync(sl_client *c, sl_call *k)
{
    atomic_fetch_add(&c->calls, 1);
    if (!sl_call_gate(k)) {
        sl_call_decode(k, NULL, -EHOSTDOWN);
        return k->rc;
    }
    sl_h2conn *h;
    int rc = pool_get(c, k->deadline_ns, &h);
    if (rc == 0) {
        sl_h2conn_refresh(h);
        sl_h2conn_req req;
        make_req(k, &req);
        rc = sl_h2conn_roundtrip(h, &req, on_h2_done, k);
        pool_put(c, h);
    }
    if (rc < 0)
        sl_call_decode(k, NULL, rc);
    return k->rc;
}

/* ------------------------------------------------------------------ async path */

static void io_submit(sl_client *c, sl_h2conn **active, sl_h2conn **draining, size_t *ndraining, sl_call *k)
{
    if (!sl_call_gate(k)) {
        sl_call_decode(k, NULL, -EHOSTDOWN);
        sl_call_deliver(k);
        return;
    }
    sl_h2conn_req req;
    make_req(k, &req);
    int rc = -ENOMEM;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!*active && sl_h2conn_new(&c->target, active) < 0) {
            rc = -ENOMEM;
            break;
        }
        rc = sl_h2conn_submit(*active, &req, on_h2_done, k);
        if (rc != -EAGAIN)
            break;
        /* GOAWAY with streams in flight: let them drain there, start afresh for new calls */
        if (*ndraining == MAX_DRAINING) {
            sl_h2conn_free(draining[0]);
            memmove(draining, draining + 1, (MAX_DRAINING - 1) * sizeof *draining);
            (*ndraining)--;
        }
        draining[(*ndraining)++] = *active;
        *active = NULL;
    }
    if (rc < 0) {
        sl_call_decode(k, NULL, rc);
        sl_call_deliver(k);
    }
}

static void *io_main(void *arg)
{
    sl_client *c = arg;
    sl_h2conn *active = NULL;
    sl_h2conn *draining[MAX_DRAINING];
    size_t ndraining = 0;
    for (;;) {
        pthread_mutex_lock(&c->q_mu);
        sl_call *list = c->q_head;
        c->q_head = c->q_tail = NULL;
        bool stopping = c->stopping;
        pthread_mutex_unlock(&c->q_mu);

        while (list) {
            sl_call *k = list;
            list = k->next;
            k->next = NULL;
            if (stopping) {
                sl_call_decode(k, NULL, -ECANCELED);
                sl_call_deliver(k);
            } else {
                io_submit(c, &active, draining, &ndraining, k);
            }
        }
        if (stopping)
            break;

        struct pollfd pfd[2 + MAX_DRAINING];
        sl_h2conn *conns[1 + MAX_DRAINING];
        size_t nconns = 0;
        if (active)
            conns[nconns++] = active;
        for (size_t i = 0; i < ndraining; i++)
            conns[nconns++] = draining[i];
        pfd[0] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
        int64_t dl = INT64_MAX;
        for (size_t i = 0; i < nconns; i++) {
            sl_h2conn_pollfd(conns[i], &pfd[1 + i]);
            int64_t d = sl_h2conn_next_deadline(conns[i]);
            if (d < dl)
                dl = d;
        }
        int64_t now = sl_mono_ns();
        int tmo = dl == INT64_MAX ? -1 : dl <= now ? 0 : (int)((dl - now + 999999) / 1000000);
        int n = poll(pfd, 1 + nconns, tmo);
        if (n < 0)
            memset(pfd, 0, sizeof pfd); /* EINTR: just run deadlines */
        if (pfd[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(c->wake_fd, &v, sizeof v);
            (void)r;
        }
        now = sl_mono_ns();
        for (size_t i = 0; i < nconns; i++)
            sl_h2conn_process(conns[i], pfd[1 + i].fd >= 0 ? pfd[1 + i].revents : 0, now);
        for (size_t i = 0; i < ndraining;) {
            if (sl_h2conn_finished(draining[i])) {
                sl_h2conn_free(draining[i]);
                draining[i] = draining[--ndraining];
            } else {
                i++;
            }
        }
    }
    sl_h2conn_free(active);
    for (size_t i = 0; i < ndraining; i++)
        sl_h2conn_free(draining[i]);
    return NULL;
}

int sl_clientio_run_async(sl_client *c, sl_call *k)
{
    k->async = true;
    pthread_mutex_lock(&c->q_mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->q_mu);
        sl_call_free(k);
        return -ECANCELED;
    }
    if (atomic_load(&c->async_pending) >= c->opt.max_async_pending) {
        pthread_mutex_unlock(&c->q_mu);
        atomic_fetch_add(&c->async_rejected, 1);
        sl_call_free(k);
        return -EAGAIN;
    }
    if (!c->io_started) {
        if (pthread_create(&c->io, NULL, io_main, c) != 0) {
            pthread_mutex_unlock(&c->q_mu);
            sl_call_free(k);
            return -EAGAIN;
        }
        c->io_started = true;
    }
    atomic_fetch_add(&c->async_pending, 1);
    atomic_fetch_add(&c->calls, 1);
    if (c->q_tail)
        c->q_tail->next = k;
    else
        c->q_head = k;
    c->q_tail = k;
    pthread_mutex_unlock(&c->q_mu);
    wake_io(c);
    return 0;
}


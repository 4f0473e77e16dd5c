/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client-proxy's observer feed (see feed.h): one thread, one observer at a time, a
 * poll() loop over one h2c connection (h2client/h2client + h2client/h2sock) carrying one server stream.
 */
#include "levee/feed.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gossip/gossipseeds.h"
#include "h2client/h2client.h"
#include "h2client/h2sock.h"
#include "wire/grpc_frame.h"

#define MAX_OBSERVERS 64
#define MAX_VIEW 1024                 /* members in one update (the observer's table cap) */
#define MAX_MSG ((size_t)1 << 20)     /* one update on the wire */
#define TICK_MS 100                   /* poll slice: how soon a stop is seen */
#define ROUND_PAUSE_MS 200            /* after a round where no observer answered */
#define WATCH_PATH "/sluice.levee.v1.Topology/Watch"

struct sl_feed {
    sl_feed_config cfg;
    sl_etcd_config etcd_cfg;          /* cfg.etcd points here */
    char **observers;
    size_t n_observers;
    pthread_t thread;
    _Atomic bool stop;
    sl_topowire_member *view;         /* decode space, MAX_VIEW */
    sl_metrics_gauge *m_connected;
    sl_metrics_counter *m_reconnects, *m_updates;
    uint64_t streams;                 /* streams that delivered (the thread's own) */
};

/* One stream's state while it runs. */
typedef struct stream_ctx {
    sl_feed *f;
    sl_buf in;           /* gRPC bytes not yet decoded, at most one message + header */
    int64_t last_msg;    /* ms, monotonic */
    size_t updates;
    bool done;
    int err;
} stream_ctx;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A suspect limiter keeps its keys until it is declared dead: it stays alive here. */
static sl_member_status map_status(sl_member_status s)
{
    return sl_member_status_live(s) ? SL_MEMBER_ALIVE : s; /* left (leaving), dead: as they are */
}

static bool is_limiter(const sl_topowire_member *m)
{
    return !strcmp(m->mb.role, "limiter") && m->mb.service[0];
}

size_t sl_feed_apply(sl_topology *t, const sl_topowire_update *u, const sl_topowire_member *m)
{
    uint64_t before = sl_topology_version(t);
    if (u->full) {
        sl_member *cur = malloc(SL_TOPOLOGY_MAX_MEMBERS * sizeof *cur);
        if (cur) {
            uint64_t v;
            size_t n = sl_topology_copy(t, cur, SL_TOPOLOGY_MAX_MEMBERS, &v);
            for (size_t i = 0; i < n; i++) {
                bool keep = false;
                for (size_t j = 0; j < u->n && !keep; j++)
                    keep = is_limiter(&m[j]) && !strcmp(m[j].mb.name, cur[i].name);
                if (!keep)
                    sl_topology_remove(t, cur[i].name);
            }
            free(cur);
        }
    }
    for (size_t j = 0; j < u->n; j++)
        if (is_limiter(&m[j]))
            sl_topology_add(t, m[j].mb.name, m[j].mb.service, map_status(m[j].mb.status));
    return (size_t)(sl_topology_version(t) - before);
}

/* DATA bytes of the stream: frames out, updates applied. Runs inside sl_h2c_recv. */
static int on_data(void *ud, const uint8_t *p, size_t n)
{
    stream_ctx *c = ud;
    if (sl_buf_append(&c->in, p, n))
        return -EMSGSIZE;
    size_t off = 0;
    int rc = 0;
    for (;;) {
        sl_grpc_msg msg;
        const char *why;
        rc = sl_grpc_frame_decode((const uint8_t *)c->in.data + off, c->in.len - off, MAX_MSG,
                                  &msg, &why);
        if (rc == -EAGAIN) {
            rc = 0;
            break;
        }
        if (rc || msg.compressed) {
            rc = -EPROTO;
            break;
        }
        sl_topowire_update u;
        if (sl_topowire_decode(msg.data, msg.len, &u, c->f->view, MAX_VIEW)) {
            rc = -EPROTO;
            break;
        }
        sl_feed_apply(c->f->cfg.topology, &u, c->f->view);
        c->last_msg = mono_ms();
        c->updates++;
        if (c->f->m_updates)
            sl_metrics_counter_inc(c->f->m_updates);
        off += msg.frame_len;
    }
    sl_buf_consume(&c->in, off);
    return rc;
}

static void on_done(void *ud, const sl_h2c_resp *r)
{
    stream_ctx *c = ud;
    c->done = true;
    c->err = r->err;
    if (!c->err && (r->status != 200 || sl_h2c_grpc_status(r) > 0))
        c->err = -ECONNREFUSED;
}

static int connect_to(const char *addr, int64_t timeout_ms)
{
    char host[SL_TOPOWIRE_MAX_ADDR + 1];
    snprintf(host, sizeof host, "%s", addr);
    char *colon = strrchr(host, ':');
    if (!colon)
        return -EINVAL;
    *colon = 0;
    char *h = host;
    if (h[0] == '[' && colon[-1] == ']') {
        h++;
        colon[-1] = 0;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    if (getaddrinfo(h, colon + 1, &hints, &ai))
        return -EHOSTUNREACH;
    bool now = false;
    int fd = sl_h2sock_connect(ai->ai_addr, ai->ai_addrlen, &now);
    freeaddrinfo(ai);
    if (fd < 0 || now)
        return fd;
    struct pollfd pfd = {fd, POLLOUT, 0};
    int rc = poll(&pfd, 1, (int)timeout_ms);
    rc = rc == 1 ? sl_h2sock_connect_result(fd) : -ETIMEDOUT;
    if (rc) {
        close(fd);
        return rc;
    }
    return fd;
}

/* Follow one observer until its stream ends, it goes silent, or we stop. Updates received. */
static size_t follow_one(sl_feed *f, const char *addr, int64_t *last_ok)
{
    int fd = connect_to(addr, f->cfg.timeout_ms);
    if (fd < 0)
        return 0;
    stream_ctx c = {.f = f, .last_msg = mono_ms()};
    sl_buf_init(&c.in, MAX_MSG + SL_GRPC_HDR_LEN);
    sl_buf out, body;
    sl_buf_init(&out, 0);
    sl_buf_init(&body, 0);
    sl_h2c *s = NULL;
    static const sl_h2c_field hdrs[] = {{"content-type", 12, "application/grpc", 16},
                                        {"te", 2, "trailers", 8}};
    sl_h2c_req req = {.method = "POST", .authority = addr, .path = WATCH_PATH,
                      .headers = hdrs, .nheaders = 2, .body = &body, .deadline = INT64_MAX,
                      .on_data = on_data};
    if (sl_h2c_new(NULL, &s) || sl_grpc_frame_append(&body, "", 0) ||
        sl_h2c_submit(s, &req, on_done, &c))
        goto out;
    uint8_t buf[16384];
    bool counted = false;
    while (!atomic_load(&f->stop) && !c.done) {
        if (sl_h2sock_write(s, fd, &out, 65536))
            break;
        struct pollfd pfd = {fd, (short)(POLLIN | (out.len ? POLLOUT : 0)), 0};
        if (poll(&pfd, 1, TICK_MS) < 0 && errno != EINTR)
            break;
        if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) &&
            sl_h2sock_read(s, fd, buf, sizeof buf, 4))
            break;
        if (c.updates) {
            *last_ok = c.last_msg;
            if (!counted) {
                counted = true;
                if (f->streams++ && f->m_reconnects)
                    sl_metrics_counter_inc(f->m_reconnects);
                if (f->m_connected)
                    sl_metrics_gauge_set(f->m_connected, 1);
                if (f->cfg.log)
                    sl_log_info(f->cfg.log, "proxy: following observer %s", addr);
            }
        }
        if (mono_ms() - c.last_msg > f->cfg.timeout_ms) {
            if (f->cfg.log)
                sl_log_warn(f->cfg.log, "proxy: observer %s silent for %lld ms, leaving it",
                            addr, (long long)f->cfg.timeout_ms);
            break;
        }
    }
out:
    if (f->m_connected)
        sl_metrics_gauge_set(f->m_connected, 0);
    sl_h2c_free(s, -ECONNRESET);
    close(fd);
    sl_buf_free(&out);
    sl_buf_free(&body);
    sl_buf_free(&c.in);
    return c.updates;
}

/* The observers to try this round: --observers, else etcd's registrations. */
static size_t observer_list(sl_feed *f, char **list)
{
    size_t n = 0;
    for (; n < f->n_observers && n < MAX_OBSERVERS; n++)
        list[n] = strdup(f->observers[n]);
    if (!n && f->cfg.etcd) {
        int rc = sl_gossipseeds_from_etcd_field(f->cfg.etcd, f->cfg.prefix, "service", list, &n,
                                                MAX_OBSERVERS);
        if (rc < 0 && f->cfg.log)
            sl_log_warn(f->cfg.log, "proxy: observers in etcd not read: %s", strerror(-rc));
    }
    return n;
}

static void *run(void *arg)
{
    sl_feed *f = arg;
    int64_t last_ok = mono_ms();
    size_t next = 0;
    while (!atomic_load(&f->stop)) {
        char *list[MAX_OBSERVERS] = {0};
        size_t n = observer_list(f, list);
        bool followed = false;
        for (size_t k = 0; k < n && !followed && !atomic_load(&f->stop); k++) {
            size_t i = (next + k) % n;
            if (!list[i])
                continue;
            if (follow_one(f, list[i], &last_ok)) {
                followed = true;
                next = i + 1; /* it failed after serving: the next one first */
            }
        }
        for (size_t i = 0; i < n; i++)
            free(list[i]);
        if (atomic_load(&f->stop))
            break;
        if (mono_ms() - last_ok > f->cfg.retry_window_ms) {
            char why[128];
            snprintf(why, sizeof why, "no observer answered for %lld ms",
                     (long long)f->cfg.retry_window_ms);
            if (f->cfg.log)
                sl_log_error(f->cfg.log, "proxy: %s", why);
            if (f->cfg.on_fatal)
                f->cfg.on_fatal(f->cfg.fatal_ud, why);
            break;
        }
        if (!followed)
            for (int t = 0; t < ROUND_PAUSE_MS / TICK_MS && !atomic_load(&f->stop); t++)
                usleep(TICK_MS * 1000);
    }
    return NULL;
}

static void release(sl_feed *f)
{
    for (size_t i = 0; i < f->n_observers; i++)
        free(f->observers[i]);
    free(f->observers);
    free(f->view);
    free(f);
}

int sl_feed_start(const sl_feed_config *cfg, sl_feed **out)
{
    *out = NULL;
    if (!cfg->topology || (!cfg->n_observers && !cfg->etcd))
        return -EINVAL;
    sl_feed *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->cfg = *cfg;
    if (cfg->etcd) {
        f->etcd_cfg = *cfg->etcd;
        f->cfg.etcd = &f->etcd_cfg;
    }
    f->view = calloc(MAX_VIEW, sizeof *f->view);
    f->observers = calloc(cfg->n_observers + 1, sizeof *f->observers);
    int rc = f->view && f->observers ? 0 : -ENOMEM;
    for (size_t i = 0; !rc && i < cfg->n_observers; i++) {
        if (!(f->observers[i] = strdup(cfg->observers[i])))
            rc = -ENOMEM;
        f->n_observers++;
    }
    if (!rc && cfg->metrics &&
        (sl_metrics_gauge_new(cfg->metrics, "sluice_proxy_observer_connected",
                              "1 while the proxy follows an observer's topology stream",
                              &f->m_connected) ||
         sl_metrics_counter_new(cfg->metrics, "sluice_proxy_observer_reconnects_total",
                                "Topology streams opened after the first (observer changes)",
                                &f->m_reconnects) ||
         sl_metrics_counter_new(cfg->metrics, "sluice_proxy_observer_updates_total",
                                "Topology updates received from observers", &f->m_updates)))
        rc = -ENOMEM;
    if (!rc)
        rc = -pthread_create(&f->thread, NULL, run, f);
    if (rc) {
        release(f);
        return rc;
    }
    *out = f;
    return 0;
}

void sl_feed_free(sl_feed *f)
{
    if (!f)
        return;
    atomic_store(&f->stop, true);
    pthread_join(f->thread, NULL);
    release(f);
}

int sl_feed_start_options(const sl_options *o, sl_topology *t, sl_metrics *m, sl_logger *log,
                            void (*on_fatal)(void *ud, const char *why), void *ud,
                            sl_feed **out)
{
    sl_etcd_config ec;
    sl_gossipseeds_etcd_config(o, &ec);
    sl_feed_config c = {
        .topology = t,
        .observers = (const char *const *)o->observers.items,
        .n_observers = o->observers.n,
        .etcd = o->storage_addrs.n ? &ec : NULL,
        .prefix = o->storage_prefix,
        .timeout_ms = o->observer_timeout_ns / 1000000,
        .retry_window_ms = o->observer_retry_window_ns / 1000000,
        .on_fatal = on_fatal,
        .fatal_ud = ud,
        .metrics = m,
        .log = log,
    };
    return sl_feed_start(&c, out);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graphite bridge (see graphite.h): the pusher thread, the UDP packing of lines into datagrams,
 * and the TCP connection with its liveness check, one retry and reconnect backoff.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "node/graphite.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sluice/clock.h"

#define DEFAULT_PERIOD_MS 10000
#define DEFAULT_TIMEOUT_MS 2000
#define DEFAULT_BACKOFF_MIN_MS 1000
#define DEFAULT_BACKOFF_MAX_MS 60000
#define DEFAULT_DATAGRAM 1400
#define MIN_DATAGRAM 64
#define MAX_TAGS 16 /* name, value pairs copied from the config */

struct sl_graphite {
    /* configuration (read-only once the thread runs) */
    char host[SL_GRAPHITE_HOST_MAX];
    char port[8];
    sl_graphite_proto proto;
    int64_t period_ms, timeout_ms, backoff_min_ms, backoff_max_ms;
    size_t max_datagram;
    char *prefix;
    char *tags[2 * MAX_TAGS + 1];
    sl_metrics *metrics;
    sl_logger *log;

    pthread_t thread;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* on CLOCK_MONOTONIC: stop requests */
    bool stopping;
    int fd;             /* the socket in use, -1 = none; closed by the thread only */
    sl_graphite_stats st;

    /* the thread's own */
    struct sockaddr_storage dst; /* UDP destination */
    socklen_t dst_len;
    int64_t backoff_ms;          /* TCP: current backoff, 0 after a connection succeeded */
    int64_t reconnect_at;        /* TCP: monotonic ms before which no connect is tried */
    bool logged_down;            /* one warning per outage, then debug */
    uint64_t rng;
};

const char *sl_graphite_proto_name(sl_graphite_proto p)
{
    return p == SL_GRAPHITE_UDP ? "udp" : "tcp";
}

static int64_t mono_ms(void)
{
    return sl_mono_ns() / 1000000;
}

/* ---------------------------------------------------------------- address */

int sl_graphite_parse_addr(const char *addr, char *host, size_t hostlen, uint16_t *port,
                           sl_graphite_proto *proto)
{
    if (!addr || !addr[0])
        return -EINVAL;
    size_t n = strlen(addr);
    sl_graphite_proto pr = SL_GRAPHITE_TCP;
    const char *slash = strchr(addr, '/');
    if (slash) {
        if (!strcmp(slash, "/udp"))
            pr = SL_GRAPHITE_UDP;
        else if (strcmp(slash, "/tcp"))
            return -EINVAL;
        n = (size_t)(slash - addr);
    }
    const char *h = addr, *colon;
    size_t hl;
    if (addr[0] == '[') {
        const char *end = memchr(addr, ']', n);
        if (!end || end + 1 >= addr + n || end[1] != ':')
            return -EINVAL;
        h = addr + 1;
        hl = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = NULL;
        for (size_t i = 0; i < n; i++)
            if (addr[i] == ':')
                colon = addr + i;
        if (!colon)
            return -EINVAL;
        hl = (size_t)(colon - addr);
        if (memchr(addr, ':', hl))
            return -EINVAL; /* a bare IPv6 address: brackets are required */
    }
    if (hl == 0 || hl >= hostlen)
        return -EINVAL;
    const char *p = colon + 1, *end = addr + n;
    if (p == end || end - p > 5)
        return -EINVAL;
    long v = 0;
    for (; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return -EINVAL;
    for (size_t i = 0; i < hl; i++)
        if ((unsigned char)h[i] <= 0x20 || h[i] == 0x7f)
            return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (uint16_t)v;
    *proto = pr;
    return 0;
}

/* ---------------------------------------------------------------- state helpers */

static void set_error(sl_graphite *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(sl_graphite *g, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&g->mu);
    va_start(ap, fmt);
    vsnprintf(g->st.last_error, sizeof g->st.last_error, fmt, ap);
    va_end(ap);
    g->st.failures++;
    pthread_mutex_unlock(&g->mu);
}

static bool stopping(sl_graphite *g)
{
    pthread_mutex_lock(&g->mu);
    bool s = g->stopping;
    pthread_mutex_unlock(&g->mu);
    return s;
}

/* Publish the socket so that sl_graphite_stop() can shut it down; false if a stop came first. */
static bool publish_fd(sl_graphite *g, int fd)
{
    pthread_mutex_lock(&g->mu);
    bool ok = !g->stopping;
    if (ok)
        g->fd = fd;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void close_fd(sl_graphite *g)
{
    pthread_mutex_lock(&g->mu);
    int fd = g->fd;
    g->fd = -1;
    g->st.connected = false;
    pthread_mutex_unlock(&g->mu);
    if (fd >= 0)
        close(fd);
}

static void set_timeouts(int fd, int64_t ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

static struct addrinfo *resolve(sl_graphite *g, int socktype, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = socktype,
                             .ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(g->host, g->port, &hints, &res);
    if (rc == EAI_BADFLAGS || (rc == EAI_NONAME && hints.ai_flags & AI_ADDRCONFIG)) {
        /* AI_ADDRCONFIG hides 127.0.0.1 on a host with loopback only: ask again without it */
        hints.ai_flags = AI_NUMERICSERV;
        rc = getaddrinfo(g->host, g->port, &hints, &res);
    }
    if (rc) {
        snprintf(err, errlen, "resolve %.80s: %s", g->host, gai_strerror(rc));
        return NULL;
    }
    return res;
}

/* ---------------------------------------------------------------- UDP */

static int udp_open(sl_graphite *g, char *err, size_t errlen)
{
    struct addrinfo *res = resolve(g, SOCK_DGRAM, err, errlen);
    if (!res)
        return -EHOSTUNREACH;
    int fd = -1, rc = -EHOSTUNREACH;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        memcpy(&g->dst, a->ai_addr, a->ai_addrlen);
        g->dst_len = a->ai_addrlen;
        break;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "udp socket: %s", strerror(-rc));
        return rc;
    }
    set_timeouts(fd, g->timeout_ms);
    if (!publish_fd(g, fd)) {
        close(fd);
        return -ECANCELED;
    }
    pthread_mutex_lock(&g->mu);
    g->st.connected = true;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* Pack whole lines into datagrams of at most max_datagram bytes and send them. */
static int udp_push(sl_graphite *g, const char *buf, size_t len, char *err, size_t errlen)
{
    if (g->fd < 0) {
        int rc = udp_open(g, err, errlen);
        if (rc)
            return rc;
    }
    uint64_t lines = 0, dropped = 0, dgrams = 0, bytes = 0;
    size_t pos = 0;
    int rc = 0;
    while (pos < len && rc == 0) {
        /* take lines while they fit */
        size_t start = pos, end = pos, nlines = 0;
        while (end < len) {
            const char *nl = memchr(buf + end, '\n', len - end);
            size_t line_end = nl ? (size_t)(nl - buf) + 1 : len;
            if (line_end - start > g->max_datagram) {
                if (end == start) {
                    dropped++; /* a line that fits no datagram */
                    start = end = line_end;
                    continue;
                }
                break;
            }
            end = line_end;
            nlines++;
        }
        pos = end;
        if (end == start)
            continue;
        ssize_t w;
        do
            w = sendto(g->fd, buf + start, end - start, MSG_NOSIGNAL,
                       (const struct sockaddr *)&g->dst, g->dst_len);
        while (w < 0 && errno == EINTR);
        if (w < 0) {
            rc = -errno;
            snprintf(err, errlen, "udp send to %.80s:%s: %s", g->host, g->port, strerror(errno));
            break;
        }
        dgrams++;
        lines += nlines;
        bytes += (uint64_t)w;
    }
    pthread_mutex_lock(&g->mu);
    g->st.lines += lines;
    g->st.datagrams += dgrams;
    g->st.bytes += bytes;
    g->st.dropped_lines += dropped;
    pthread_mutex_unlock(&g->mu);
    if (rc)
        close_fd(g); /* re-resolve and open again next time */
    return rc;
}

/* ---------------------------------------------------------------- TCP */

static int tcp_connect(sl_graphite *g, char *err, size_t errlen)
{
    struct addrinfo *res = resolve(g, SOCK_STREAM, err, errlen);
    if (!res) {
        pthread_mutex_lock(&g->mu);
        g->st.connect_errors++;
        pthread_mutex_unlock(&g->mu);
        return -EHOSTUNREACH;
    }
    int rc = -ECONNREFUSED;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        set_timeouts(fd, g->timeout_ms); /* SO_SNDTIMEO also bounds a blocking connect */
        if (!publish_fd(g, fd)) {
            close(fd);
            rc = -ECANCELED;
            break;
        }
        /* A stop between publish_fd() and connect() finds nothing to shut down yet: the connect
         * then runs to its timeout. Elsewhere the stop's shutdown() ends it at once. */
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            rc = 0;
            break;
        }
        rc = errno == EINPROGRESS || errno == EAGAIN ? -ETIMEDOUT : -errno;
        close_fd(g);
        if (stopping(g)) {
            rc = -ECANCELED;
            break;
        }
    }
    freeaddrinfo(res);
    if (rc) {
        snprintf(err, errlen, "connect %.80s:%s: %s", g->host, g->port, strerror(-rc));
        if (rc != -ECANCELED) {
            pthread_mutex_lock(&g->mu);
            g->st.connect_errors++;
            pthread_mutex_unlock(&g->mu);
        }
        return rc;
    }
    pthread_mutex_lock(&g->mu);
    g->st.connects++;
    g->st.connected = true;
    pthread_mutex_unlock(&g->mu);
    g->backoff_ms = 0;
    g->logged_down = false;
    return 0;
}

/* A collector never writes: a readable socket has been closed or reset by the other side. */
static bool tcp_alive(sl_graphite *g)
{
    struct pollfd p = {.fd = g->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0)
        return true;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL))
        return false;
    char junk[512];
    ssize_t r = recv(g->fd, junk, sizeof junk, MSG_DONTWAIT);
    return r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

/* send() everything by `deadline` (monotonic ms); the number of bytes sent in *sent. SO_SNDTIMEO
 * alone does not bound a push: each send() that moves a few bytes starts a new timeout, so a
 * collector that reads a trickle would hold the thread for ever. */
static int send_all(int fd, const char *buf, size_t len, int64_t deadline, size_t *sent)
{
    size_t off = 0;
    int rc = 0;
    while (off < len) {
        if (off > 0 && mono_ms() >= deadline) {
            rc = -ETIMEDOUT;
            break;
        }
        ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
            break;
        }
        off += (size_t)w;
    }
    *sent = off;
    return rc;
}

static uint64_t next_rand(sl_graphite *g)
{
    /* xorshift64*: jitter only */
    uint64_t x = g->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static void schedule_reconnect(sl_graphite *g)
{
    int64_t b = g->backoff_ms ? g->backoff_ms * 2 : g->backoff_min_ms;
    if (b > g->backoff_max_ms)
        b = g->backoff_max_ms;
    g->backoff_ms = b;
    /* wait between b/2 and b, so that nodes restarted together do not reconnect in step */
    int64_t wait = b / 2 + (int64_t)(next_rand(g) % (uint64_t)(b / 2 + 1));
    g->reconnect_at = mono_ms() + wait;
}

static void count_lines(sl_graphite *g, const char *buf, size_t len)
{
    uint64_t lines = 0;
    for (const char *p = buf; (p = memchr(p, '\n', (size_t)(buf + len - p))) != NULL; p++)
        lines++;
    pthread_mutex_lock(&g->mu);
    g->st.lines += lines;
    g->st.bytes += len;
    pthread_mutex_unlock(&g->mu);
}

static int tcp_push(sl_graphite *g, const char *buf, size_t len, char *err, size_t errlen)
{
    bool fresh = false;
    if (g->fd >= 0 && !tcp_alive(g))
        close_fd(g);
    if (g->fd < 0) {
        if (mono_ms() < g->reconnect_at) {
            snprintf(err, errlen, "collector %.80s:%s down, next connect in %lld ms", g->host,
                     g->port, (long long)(g->reconnect_at - mono_ms()));
            return -EAGAIN;
        }
        int rc = tcp_connect(g, err, errlen);
        if (rc) {
            if (rc != -ECANCELED)
                schedule_reconnect(g);
            return rc;
        }
        fresh = true;
    }
    for (int attempt = 0;; attempt++) {
        size_t sent = 0;
        int rc = send_all(g->fd, buf, len, mono_ms() + g->timeout_ms, &sent);
        if (rc == 0) {
            count_lines(g, buf, len);
            return 0;
        }
        close_fd(g);
        if (stopping(g))
            return -ECANCELED; /* the stop shut the socket down: not a collector failure */
        if (sent == 0 && !fresh && attempt == 0) {
            /* The connection died since the last push and nothing was written: a new connection
             * delivers this push whole. */
            rc = tcp_connect(g, err, errlen);
            if (rc) {
                if (rc != -ECANCELED)
                    schedule_reconnect(g);
                return rc;
            }
            fresh = true;
            continue;
        }
        snprintf(err, errlen, "send to %.80s:%s: %s (%zu of %zu bytes sent)", g->host, g->port,
                 strerror(-rc), sent, len);
        /* the next push reconnects at once; the backoff is for failed connects */
        g->reconnect_at = 0;
        return rc;
    }
}

/* ---------------------------------------------------------------- the thread */

static void push_once(sl_graphite *g)
{
    char *buf = NULL;
    size_t len = 0;
    int64_t now_ms = sl_wall_ms();
    int rc = sl_metrics_render_graphite(g->metrics, g->prefix, (const char *const *)g->tags,
                                        now_ms / 1000, &buf, &len);
    if (rc) {
        set_error(g, "render: %s", strerror(-rc));
        sl_log_warn(g->log, "graphite push failed error=\"render: %s\"", strerror(-rc));
        return;
    }
    char err[160] = "";
    rc = len == 0 ? 0
         : g->proto == SL_GRAPHITE_UDP ? udp_push(g, buf, len, err, sizeof err)
                                       : tcp_push(g, buf, len, err, sizeof err);
    free(buf);
    if (rc == 0) {
        pthread_mutex_lock(&g->mu);
        g->st.pushes++;
        g->st.last_push_ms = now_ms;
        g->st.last_error[0] = '\0';
        pthread_mutex_unlock(&g->mu);
        return;
    }
    if (rc == -ECANCELED)
        return; /* stopping */
    set_error(g, "%s", err);
    /* One warning per outage (the first failure after a success), then debug: a collector that
     * is down for hours must not fill the log. */
    sl_log_level lvl = g->logged_down ? SL_LOG_DEBUG : SL_LOG_WARN;
    g->logged_down = true;
    sl_log_write(g->log, lvl, "graphite push failed addr=%s:%s/%s error=\"%s\"", g->host, g->port,
                 sl_graphite_proto_name(g->proto), err);
}

static void *run(void *arg)
{
    sl_graphite *g = arg;
    int64_t next = mono_ms() + g->period_ms;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (!g->stopping) {
            int64_t now = mono_ms();
            if (now >= next)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wait = next - now;
            ts.tv_sec += wait / 1000;
            ts.tv_nsec += (wait % 1000) * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&g->cv, &g->mu, &ts);
        }
        bool stop = g->stopping;
        pthread_mutex_unlock(&g->mu);
        if (stop)
            break;
        push_once(g);
        /* Fixed rate; periods missed while a push was slow are skipped, not caught up. */
        next += g->period_ms;
        int64_t now = mono_ms();
        if (next <= now)
            next = now + g->period_ms;
    }
    close_fd(g);
    return NULL;
}

/* ---------------------------------------------------------------- lifecycle */

static void free_all(sl_graphite *g)
{
    free(g->prefix);
    for (size_t i = 0; g->tags[i]; i++)
        free(g->tags[i]);
    free(g);
}

int sl_graphite_start(const sl_graphite_config *cfg, sl_graphite **out)
{
    *out = NULL;
    if (!cfg->addr || !cfg->addr[0])
        return 0;
    if (!cfg->metrics)
        return -EINVAL;
    sl_graphite *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    uint16_t port;
    if (sl_graphite_parse_addr(cfg->addr, g->host, sizeof g->host, &port, &g->proto)) {
        free(g);
        return -EINVAL;
    }
    snprintf(g->port, sizeof g->port, "%u", port);
    g->period_ms = cfg->period_ms > 0 ? cfg->period_ms : DEFAULT_PERIOD_MS;
    g->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : DEFAULT_TIMEOUT_MS;
    g->backoff_min_ms = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : DEFAULT_BACKOFF_MIN_MS;
    g->backoff_max_ms = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS;
    if (g->backoff_max_ms < g->backoff_min_ms)
        g->backoff_max_ms = g->backoff_min_ms;
    g->max_datagram = cfg->max_datagram ? cfg->max_datagram : DEFAULT_DATAGRAM;
    if (g->max_datagram < MIN_DATAGRAM)
        g->max_datagram = MIN_DATAGRAM;
    g->metrics = cfg->metrics;
    g->log = cfg->log;
    g->fd = -1;
    g->rng = (uint64_t)sl_mono_ns() ^ (uint64_t)(uintptr_t)g ^ 0x9E3779B97F4A7C15ULL;
    if (!g->rng)
        g->rng = 1;
    bool oom = false;
    if (cfg->prefix && cfg->prefix[0] && !(g->prefix = strdup(cfg->prefix)))
        oom = true;
    for (size_t i = 0, n = 0; !oom && cfg->tags && cfg->tags[i] && cfg->tags[i + 1]; i += 2) {
        if (n == 2 * MAX_TAGS)
            break;
        if (!(g->tags[n] = strdup(cfg->tags[i])))
            oom = true;
        else if (!(g->tags[n + 1] = strdup(cfg->tags[i + 1])))
            oom = true;
        n += 2;
    }
    if (oom) {
        free_all(g);
        return -ENOMEM;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&g->mu, NULL);
    int rc = pthread_create(&g->thread, NULL, run, g);
    if (rc) {
        pthread_cond_destroy(&g->cv);
        pthread_mutex_destroy(&g->mu);
        free_all(g);
        return -rc;
    }
    sl_log_info(g->log, "graphite bridge started addr=%s:%s/%s period_ms=%lld prefix=%s", g->host,
                g->port, sl_graphite_proto_name(g->proto), (long long)g->period_ms,
                g->prefix ? g->prefix : "");
    *out = g;
    return 0;
}

void sl_graphite_stop(sl_graphite *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->mu);
    g->stopping = true;
    /* Wakes a blocking connect or send at once (the thread still owns and closes the fd). */
    if (g->fd >= 0)
        shutdown(g->fd, SHUT_RDWR);
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    sl_log_info(g->log, "graphite bridge stopped pushes=%llu failures=%llu",
                (unsigned long long)g->st.pushes, (unsigned long long)g->st.failures);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free_all(g);
}

void sl_graphite_stats_get(sl_graphite *g, sl_graphite_stats *out)
{
    pthread_mutex_lock(&g->mu);
    *out = g->st;
    pthread_mutex_unlock(&g->mu);
}

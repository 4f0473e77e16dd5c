/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the Graphite bridge against real UDP and TCP listeners on 127.0.0.1:0 owned by
 * the test: address parsing, datagrams packed at line boundaries under the size bound, tagged
 * lines that parse, TCP reconnect after the collector closes, backoff while it is down, two bridges
 * in one process, and a stop that is prompt even with a send blocked on a collector that does not
 * read. The bridge runs on the real clock (it is a thread pushing on a period): the test waits for
 * events with deadlines, never for a fixed time that decides the outcome. The few elapsed-time
 * bounds are set against what a broken bridge would take (the one-hour period, the 30 s send
 * timeout), not against how fast a good one is, so a loaded 2-core machine under ASan does not
 * make them flake: STOP_BOUND_MS below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "runtime/metrics.h"
#include "node/graphite.h"
#include "sluice/clock.h"

#define NSERIES 60
/* A stop takes milliseconds (graphite.h); a stop that waited for the period or a blocked send
 * would take far longer than this in every test that checks it (period 1 h, send timeout 30 s). */
#define STOP_BOUND_MS 5000

static int64_t mono_ms(void)
{
    return sl_mono_ns() / 1000000;
}

static void nap_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---------------------------------------------------------------- listeners */

static int listen_on(int type, uint16_t *port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(*port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    if (type == SOCK_STREAM)
        assert_int_equal(listen(fd, 8), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static bool readable(int fd, int64_t deadline)
{
    int64_t left = deadline - mono_ms();
    if (left < 0)
        left = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, (int)left) == 1;
}

static int accept_by(int lfd, int64_t deadline)
{
    if (!readable(lfd, deadline))
        return -1;
    return accept(lfd, NULL, NULL);
}

/* ---------------------------------------------------------------- lines */

typedef struct line {
    char path[256];   /* prefix.name */
    char tags[2048];  /* ";a=b;c=d" */
    double value;
    long long ts;
} line;

/* "path;tags value ts" -> line; false when it does not have that shape. */
static bool parse_line(const char *s, size_t n, line *out)
{
    char buf[4096];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *sp1 = strchr(buf, ' ');
    if (!sp1)
        return false;
    char *sp2 = strchr(sp1 + 1, ' ');
    if (!sp2 || strchr(sp2 + 1, ' '))
        return false;
    *sp1 = *sp2 = '\0';
    char *semi = strchr(buf, ';');
    size_t pl = semi ? (size_t)(semi - buf) : strlen(buf);
    if (pl == 0 || pl >= sizeof out->path)
        return false;
    memcpy(out->path, buf, pl);
    out->path[pl] = '\0';
    snprintf(out->tags, sizeof out->tags, "%s", semi ? semi : "");
    char *end;
    out->value = strtod(sp1 + 1, &end);
    if (*end)
        return false;
    out->ts = strtoll(sp2 + 1, &end, 10);
    return *end == '\0';
}

typedef struct seen {
    bool series[NSERIES];
    int nseries;
    bool hits_seen;
    bool histo_count_seen;
    int lines;
    int bad;
    int big_seen;
} seen;

/* Check one line of the test registry and note what it was. */
static void check_line(seen *sn, const char *s, size_t n, const char *prefix, const char *instance)
{
    line l;
    if (!parse_line(s, n, &l)) {
        sn->bad++;
        return;
    }
    sn->lines++;
    char want_tag[128];
    snprintf(want_tag, sizeof want_tag, ";instance=%s", instance);
    size_t tl = strlen(l.tags), wl = strlen(want_tag);
    if (tl < wl || strcmp(l.tags + tl - wl, want_tag) != 0)
        sn->bad++;
    long long now = sl_wall_ms() / 1000;
    if (l.ts < now - 30 || l.ts > now + 30)
        sn->bad++;
    size_t pl = strlen(prefix);
    if (strncmp(l.path, prefix, pl) != 0 || l.path[pl] != '.') {
        sn->bad++;
        return;
    }
    const char *name = l.path + pl + 1;
    if (!strcmp(name, "sluice_test_series_total")) {
        int k;
        if (sscanf(l.tags, ";k=series-%d", &k) != 1 || k < 0 || k >= NSERIES || l.value != k) {
            sn->bad++;
            return;
        }
        if (!sn->series[k]) {
            sn->series[k] = true;
            sn->nseries++;
        }
    } else if (!strcmp(name, "sluice_test_hits_total")) {
        if (l.value != 7 || strcmp(l.tags, want_tag) != 0)
            sn->bad++;
        sn->hits_seen = true;
    } else if (!strcmp(name, "sluice_test_seconds_count")) {
        sn->histo_count_seen = true;
    } else if (!strcmp(name, "sluice_test_big")) {
        sn->big_seen++;
    }
}

/* The registry every test pushes: NSERIES labelled counters (series-k = k, long enough together to
 * need several datagrams), an unlabelled counter at 7, a histogram, and optionally one gauge whose
 * line is longer than a datagram. */
static sl_metrics *test_registry(bool big)
{
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_family *f;
    assert_int_equal(sl_metrics_counter_family(m, "sluice_test_series_total", "series", "k", &f), 0);
    for (int k = 0; k < NSERIES; k++) {
        char v[64];
        snprintf(v, sizeof v, "series-%d-padding-padding-padding", k);
        const char *vals[1] = {v};
        sl_metrics_counter *c = sl_metrics_counter_get(f, vals, 1);
        assert_non_null(c);
        sl_metrics_counter_add(c, (uint64_t)k);
    }
    sl_metrics_counter *hits;
    assert_int_equal(sl_metrics_counter_new(m, "sluice_test_hits_total", "hits", &hits), 0);
    sl_metrics_counter_add(hits, 7);
    static const double b[] = {0.1, 1};
    sl_metrics_histogram *h;
    assert_int_equal(sl_metrics_histogram_new(m, "sluice_test_seconds", "h", b, 2, 1e9, &h), 0);
    sl_metrics_histogram_observe(h, 5000000);
    if (big) {
        sl_metrics_family *g;
        assert_int_equal(sl_metrics_gauge_family(m, "sluice_test_big", "big", "a,b,c,d,e,f", &g), 0);
        char v[6][250];
        const char *vals[6];
        for (int i = 0; i < 6; i++) {
            memset(v[i], 'a' + i, sizeof v[i] - 1);
            v[i][sizeof v[i] - 1] = '\0';
            vals[i] = v[i];
        }
        sl_metrics_gauge *gg = sl_metrics_gauge_get(g, vals, 6);
        assert_non_null(gg);
        sl_metrics_gauge_set(gg, 1);
    }
    return m;
}

static sl_graphite_config base_config(sl_metrics *m, const char *addr, const char *const *tags)
{
    sl_graphite_config c = {
        .addr = addr,
        .period_ms = 30,
        .prefix = "sl",
        .tags = tags,
        .metrics = m,
        .timeout_ms = 1000,
        .backoff_min_ms = 40,
        .backoff_max_ms = 80,
    };
    return c;
}

/* ---------------------------------------------------------------- tests */

static void test_parse_addr(void **state)
{
    (void)state;
    char host[64];
    uint16_t port;
    sl_graphite_proto pr;
    assert_int_equal(sl_graphite_parse_addr("127.0.0.1:2003", host, sizeof host, &port, &pr), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 2003);
    assert_int_equal(pr, SL_GRAPHITE_TCP);
    assert_int_equal(sl_graphite_parse_addr("10.0.0.1:1/udp", host, sizeof host, &port, &pr), 0);
    assert_int_equal(pr, SL_GRAPHITE_UDP);
    assert_int_equal(port, 1);
    assert_int_equal(sl_graphite_parse_addr("carbon.local:65535/tcp", host, sizeof host, &port, &pr),
                     0);
    assert_string_equal(host, "carbon.local");
    assert_int_equal(pr, SL_GRAPHITE_TCP);
    assert_int_equal(sl_graphite_parse_addr("[::1]:2003/udp", host, sizeof host, &port, &pr), 0);
    assert_string_equal(host, "::1");
    const char *bad[] = {"", "127.0.0.1", "127.0.0.1:", ":2003", "127.0.0.1:0",
                         "127.0.0.1:65536", "127.0.0.1:20x3", "127.0.0.1:2003/sctp",
                         "127.0.0.1:2003/", "127.0.0.1:2003/udp/tcp", "::1:2003", "[::1]2003",
                         "[::1]:", "a b:2003", "127.0.0.1:123456", NULL};
    for (int i = 0; bad[i]; i++) {
        assert_int_equal(sl_graphite_parse_addr(bad[i], host, sizeof host, &port, &pr), -EINVAL);
    }
    char tiny[4];
    assert_int_equal(sl_graphite_parse_addr("localhost:1", tiny, sizeof tiny, &port, &pr), -EINVAL);
}

static void test_off_and_bad_config(void **state)
{
    (void)state;
    sl_metrics *m = test_registry(false);
    sl_graphite *g = (sl_graphite *)1;
    sl_graphite_config c = base_config(m, "", NULL);
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    assert_null(g);
    c.addr = NULL;
    g = (sl_graphite *)1;
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    assert_null(g);
    c.addr = "127.0.0.1:2003/carrier-pigeon";
    assert_int_equal(sl_graphite_start(&c, &g), -EINVAL);
    assert_null(g);
    c.addr = "127.0.0.1:2003";
    c.metrics = NULL;
    assert_int_equal(sl_graphite_start(&c, &g), -EINVAL);
    sl_graphite_stop(NULL);
    sl_metrics_free(m);
}

static void test_udp_datagrams(void **state)
{
    (void)state;
    uint16_t port = 0;
    int fd = listen_on(SOCK_DGRAM, &port);
    sl_metrics *m = test_registry(true);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u/udp", port);
    const char *tags[] = {"instance", "node-a", NULL};
    sl_graphite_config c = base_config(m, addr, tags);
    sl_graphite *g;
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    assert_non_null(g);

    seen sn = {0};
    int datagrams = 0;
    int64_t deadline = mono_ms() + 10000;
    while ((sn.nseries < NSERIES || !sn.hits_seen || !sn.histo_count_seen || datagrams < 4) &&
           readable(fd, deadline)) {
        char buf[65536];
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        assert_true(r > 0);
        datagrams++;
        /* every datagram: at most 1400 bytes of whole lines */
        assert_true(r <= 1400);
        assert_int_equal(buf[r - 1], '\n');
        for (char *p = buf; p < buf + r;) {
            char *nl = memchr(p, '\n', (size_t)(buf + r - p));
            assert_non_null(nl);
            check_line(&sn, p, (size_t)(nl - p), "sl", "node-a");
            p = nl + 1;
        }
    }
    assert_int_equal(sn.nseries, NSERIES);
    assert_true(sn.hits_seen);
    assert_true(sn.histo_count_seen);
    assert_int_equal(sn.bad, 0);
    assert_int_equal(sn.big_seen, 0); /* longer than a datagram: dropped, never split */
    assert_true(datagrams >= 4);      /* one push needs several datagrams */

    sl_graphite_stats st;
    int64_t until = mono_ms() + 5000;
    do {
        sl_graphite_stats_get(g, &st);
        if (st.pushes >= 2)
            break;
        nap_ms(5);
    } while (mono_ms() < until);
    assert_true(st.pushes >= 2);
    assert_int_equal(st.failures, 0);
    assert_true(st.datagrams >= 2 * 2);
    assert_true(st.dropped_lines >= 1);
    assert_true(st.lines >= (uint64_t)NSERIES);
    assert_true(st.connected);
    assert_int_equal(st.connects, 0);
    assert_string_equal(st.last_error, "");
    sl_graphite_stop(g);
    sl_metrics_free(m);
    close(fd);
}

/* Read TCP lines from fd until `want` lines of the registry were seen or the deadline passes;
 * false when the connection closed first. */
static bool read_tcp_lines(int fd, seen *sn, int want, int64_t deadline, const char *instance)
{
    static char buf[1 << 16];
    size_t have = 0;
    while (sn->lines < want && readable(fd, deadline)) {
        ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
        if (r <= 0)
            return false;
        have += (size_t)r;
        char *p = buf, *nl;
        while ((nl = memchr(p, '\n', (size_t)(buf + have - p))) != NULL) {
            check_line(sn, p, (size_t)(nl - p), "sl", instance);
            p = nl + 1;
        }
        have -= (size_t)(p - buf);
        memmove(buf, p, have);
    }
    return sn->lines >= want;
}

static void test_tcp_lines_and_reconnect(void **state)
{
    (void)state;
    uint16_t port = 0;
    int lfd = listen_on(SOCK_STREAM, &port);
    sl_metrics *m = test_registry(false);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u/tcp", port);
    const char *tags[] = {"instance", "node-t", NULL};
    sl_graphite_config c = base_config(m, addr, tags);
    sl_graphite *g;
    assert_int_equal(sl_graphite_start(&c, &g), 0);

    int cfd = accept_by(lfd, mono_ms() + 10000);
    assert_true(cfd >= 0);
    seen sn = {0};
    /* two whole pushes on one connection */
    assert_true(read_tcp_lines(cfd, &sn, 2 * (NSERIES + 1), mono_ms() + 10000, "node-t"));
    assert_int_equal(sn.nseries, NSERIES);
    assert_true(sn.hits_seen);
    assert_int_equal(sn.bad, 0);

    /* The collector restarts: the bridge notices the close and delivers on a new connection. */
    close(cfd);
    cfd = accept_by(lfd, mono_ms() + 10000);
    assert_true(cfd >= 0);
    seen sn2 = {0};
    assert_true(read_tcp_lines(cfd, &sn2, NSERIES + 1, mono_ms() + 10000, "node-t"));
    assert_int_equal(sn2.bad, 0);

    /* the counters move just after the bytes left: wait for them */
    sl_graphite_stats st;
    int64_t until = mono_ms() + 5000;
    do {
        sl_graphite_stats_get(g, &st);
        if (st.pushes >= 3 && st.lines >= 3 * (NSERIES + 1))
            break;
        nap_ms(5);
    } while (mono_ms() < until);
    assert_int_equal(st.connects, 2);
    assert_true(st.connected);
    assert_true(st.pushes >= 3);
    assert_true(st.lines >= 3 * (NSERIES + 1));
    int64_t t0 = mono_ms();
    sl_graphite_stop(g);
    assert_true(mono_ms() - t0 < STOP_BOUND_MS); /* the period is 30 ms: this only bounds a hang */
    /* the bridge closed its end */
    ssize_t r = 1;
    while (r > 0 && readable(cfd, mono_ms() + 2000)) {
        char b[4096];
        r = recv(cfd, b, sizeof b, 0);
    }
    assert_int_equal(r, 0);
    close(cfd);
    close(lfd);
    sl_metrics_free(m);
}

static void test_tcp_collector_down_then_up(void **state)
{
    (void)state;
    /* A port nothing listens on: take one and close it. */
    uint16_t port = 0;
    int tmp = listen_on(SOCK_STREAM, &port);
    close(tmp);
    sl_metrics *m = test_registry(false);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", port); /* no suffix: TCP */
    const char *tags[] = {"instance", "node-d", NULL};
    sl_graphite_config c = base_config(m, addr, tags);
    c.period_ms = 10;
    sl_graphite *g;
    assert_int_equal(sl_graphite_start(&c, &g), 0);

    sl_graphite_stats st;
    int64_t until = mono_ms() + 5000;
    do {
        sl_graphite_stats_get(g, &st);
        if (st.failures >= 10)
            break;
        nap_ms(5);
    } while (mono_ms() < until);
    assert_true(st.failures >= 10);
    assert_int_equal(st.pushes, 0);
    assert_int_equal(st.connects, 0);
    assert_false(st.connected);
    assert_true(strstr(st.last_error, "127.0.0.1") != NULL);

    /* The collector comes up: within the longest backoff the bridge is connected and pushing. */
    int lfd = listen_on(SOCK_STREAM, &port);
    int cfd = accept_by(lfd, mono_ms() + 5000);
    assert_true(cfd >= 0);
    seen sn = {0};
    assert_true(read_tcp_lines(cfd, &sn, NSERIES + 1, mono_ms() + 5000, "node-d"));
    assert_int_equal(sn.bad, 0);
    until = mono_ms() + 5000;
    do { /* the counter moves just after the bytes left */
        sl_graphite_stats_get(g, &st);
        if (st.pushes >= 1)
            break;
        nap_ms(5);
    } while (mono_ms() < until);
    assert_int_equal(st.connects, 1);
    assert_true(st.pushes >= 1);
    sl_graphite_stop(g);
    close(cfd);
    close(lfd);
    sl_metrics_free(m);
}

/* While the collector refuses, connection attempts are spaced by the backoff, not made on every
 * push; a collector that accepts and closes is noticed before the next push. */
static void test_tcp_backoff_spaces_connects(void **state)
{
    (void)state;
    uint16_t port = 0;
    int lfd = listen_on(SOCK_STREAM, &port);
    sl_metrics *m = test_registry(false);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
    sl_graphite_config c = base_config(m, addr, NULL);
    c.period_ms = 5;
    c.backoff_min_ms = 200;
    c.backoff_max_ms = 400;
    sl_graphite *g;
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    /* A collector that accepts and closes at once, again and again: the next push finds the
     * connection closed and connects again (a success resets the backoff). */
    int accepted = 0;
    int64_t end = mono_ms() + 5000;
    while (accepted < 3 && mono_ms() < end) {
        int cfd = accept_by(lfd, end);
        if (cfd >= 0) {
            accepted++;
            close(cfd);
        }
    }
    assert_int_equal(accepted, 3);
    close(lfd); /* now refused */
    /* A connect may have completed in the kernel's backlog just before the close: start counting
     * from the first refused attempt. */
    sl_graphite_stats st0, st1;
    sl_graphite_stats_get(g, &st1);
    int64_t until = mono_ms() + 10000;
    do {
        nap_ms(2);
        sl_graphite_stats_get(g, &st0);
    } while (st0.connect_errors == st1.connect_errors && mono_ms() < until);
    assert_true(st0.connect_errors > st1.connect_errors);
    int64_t t0 = mono_ms();
    until = t0 + 10000;
    do {
        nap_ms(5);
        sl_graphite_stats_get(g, &st1);
    } while (st1.failures < st0.failures + 100 && mono_ms() < until);
    int64_t elapsed = mono_ms() - t0;
    assert_true(st1.failures >= st0.failures + 100);
    /* 100 failed pushes; each wait between attempts is at least backoff_min / 2 = 100 ms, so at
     * most elapsed / 100 + 1 attempts, plus one for an attempt at either edge of the window that
     * a loaded machine can read late (without the backoff there would be about 100). */
    uint64_t attempts = st1.connect_errors - st0.connect_errors;
    assert_true(attempts >= 1);
    assert_true(attempts <= (uint64_t)(elapsed / 100) + 2);
    assert_true(attempts < 50);
    assert_int_equal(st1.connects, st0.connects);
    sl_graphite_stop(g);
    sl_metrics_free(m);
}

/* About 6 MB a push: more than Linux buffers for a sender (tcp_wmem's maximum, 4 MiB by
 * default), so that a send to a collector that does not read blocks. */
static sl_metrics *big_registry(void)
{
    sl_metrics *big;
    sl_metrics_config mc;
    sl_metrics_config_default(&mc);
    mc.max_series = 6100;
    assert_int_equal(sl_metrics_new(&mc, &big), 0);
    sl_metrics_family *f;
    assert_int_equal(sl_metrics_counter_family(big, "sluice_test_wide_total", "w", "a,b,c,d", &f),
                     0);
    for (int k = 0; k < 6000; k++) {
        char v[4][256];
        const char *vals[4];
        for (int i = 0; i < 4; i++) {
            snprintf(v[i], sizeof v[i], "%d-%0240d", k, i);
            vals[i] = v[i];
        }
        assert_non_null(sl_metrics_counter_get(f, vals, 4));
    }
    return big;
}

/* A TCP listener whose connections have a small receive buffer. */
static int stingy_listener(uint16_t *port)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(lfd >= 0);
    int small = 4096;
    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(lfd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return lfd;
}

static void test_stop_is_prompt(void **state)
{
    (void)state;
    sl_metrics *m = test_registry(false);
    /* Idle between pushes: a one-hour period. */
    sl_graphite_config c = base_config(m, "127.0.0.1:9/udp", NULL);
    c.period_ms = 3600 * 1000;
    sl_graphite *g;
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    int64_t t0 = mono_ms();
    sl_graphite_stop(g);
    assert_true(mono_ms() - t0 < STOP_BOUND_MS); /* not the one-hour period */
    sl_metrics_free(m);

    /* A send blocked on a collector that accepts and never reads, with a long send timeout: the
     * stop must not wait for it. */
    sl_metrics *big = big_registry();
    uint16_t port;
    int lfd = stingy_listener(&port);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u/tcp", port);
    c = base_config(big, addr, NULL);
    c.period_ms = 50;
    c.timeout_ms = 30000;
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    int cfd = accept_by(lfd, mono_ms() + 10000);
    assert_true(cfd >= 0);
    /* wait until the bridge has been sending for a while without finishing a push */
    int64_t until = mono_ms() + 300;
    sl_graphite_stats st;
    do {
        nap_ms(10);
        sl_graphite_stats_get(g, &st);
    } while (mono_ms() < until);
    assert_int_equal(st.pushes, 0); /* blocked in send(): the case under test */
    t0 = mono_ms();
    sl_graphite_stop(g);
    assert_true(mono_ms() - t0 < STOP_BOUND_MS); /* not the 30 s send timeout */
    close(cfd);
    close(lfd);
    sl_metrics_free(big);
}

/* A collector that stops reading: a push gives up after its timeout (not after each send()'s),
 * and the next push uses a new connection. */
static void test_tcp_send_deadline(void **state)
{
    (void)state;
    sl_metrics *big = big_registry();
    uint16_t port;
    int lfd = stingy_listener(&port);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u/tcp", port);
    sl_graphite_config c = base_config(big, addr, NULL);
    c.period_ms = 50;
    c.timeout_ms = 200;
    sl_graphite *g;
    assert_int_equal(sl_graphite_start(&c, &g), 0);
    int cfd = accept_by(lfd, mono_ms() + 10000);
    assert_true(cfd >= 0);
    int64_t t0 = mono_ms();
    sl_graphite_stats st;
    do {
        nap_ms(5);
        sl_graphite_stats_get(g, &st);
    } while (st.failures == 0 && mono_ms() < t0 + 10000);
    assert_int_equal(st.failures, 1);
    assert_int_equal(st.pushes, 0);
    /* the push gave up after its 200 ms timeout (the slack is for a loaded machine); one that
     * waited for the kernel's TCP retransmission timeout (minutes) would not be here yet */
    assert_true(mono_ms() - t0 < 6000);
    assert_non_null(strstr(st.last_error, "bytes sent"));
    /* the next push connects again */
    int cfd2 = accept_by(lfd, mono_ms() + 10000);
    assert_true(cfd2 >= 0);
    sl_graphite_stop(g);
    close(cfd);
    close(cfd2);
    close(lfd);
    sl_metrics_free(big);
}

/* Two bridges in one process, each with its own registry, listener and instance tag. */
static void test_two_bridges(void **state)
{
    (void)state;
    uint16_t p1 = 0, p2 = 0;
    int f1 = listen_on(SOCK_DGRAM, &p1), f2 = listen_on(SOCK_DGRAM, &p2);
    sl_metrics *m1 = test_registry(false), *m2 = test_registry(false);
    char a1[64], a2[64];
    snprintf(a1, sizeof a1, "127.0.0.1:%u/udp", p1);
    snprintf(a2, sizeof a2, "127.0.0.1:%u/udp", p2);
    const char *t1[] = {"instance", "one", NULL}, *t2[] = {"instance", "two", NULL};
    sl_graphite_config c1 = base_config(m1, a1, t1), c2 = base_config(m2, a2, t2);
    sl_graphite *g1, *g2;
    assert_int_equal(sl_graphite_start(&c1, &g1), 0);
    assert_int_equal(sl_graphite_start(&c2, &g2), 0);
    int fds[2] = {f1, f2};
    const char *inst[2] = {"one", "two"};
    for (int i = 0; i < 2; i++) {
        seen sn = {0};
        int64_t deadline = mono_ms() + 10000;
        while (sn.nseries < NSERIES && readable(fds[i], deadline)) {
            char buf[2048];
            ssize_t r = recv(fds[i], buf, sizeof buf, 0);
            assert_true(r > 0);
            for (char *p = buf; p < buf + r;) {
                char *nl = memchr(p, '\n', (size_t)(buf + r - p));
                assert_non_null(nl);
                check_line(&sn, p, (size_t)(nl - p), "sl", inst[i]);
                p = nl + 1;
            }
        }
        assert_int_equal(sn.nseries, NSERIES);
        assert_int_equal(sn.bad, 0); /* every line carries this bridge's instance only */
    }
    sl_graphite_stop(g1);
    sl_graphite_stop(g2);
    sl_metrics_free(m1);
    sl_metrics_free(m2);
    close(f1);
    close(f2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_addr),
        cmocka_unit_test(test_off_and_bad_config),
        cmocka_unit_test(test_udp_datagrams),
        cmocka_unit_test(test_tcp_lines_and_reconnect),
        cmocka_unit_test(test_tcp_collector_down_then_up),
        cmocka_unit_test(test_tcp_backoff_spaces_connects),
        cmocka_unit_test(test_stop_is_prompt),
        cmocka_unit_test(test_tcp_send_deadline),
        cmocka_unit_test(test_two_bridges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

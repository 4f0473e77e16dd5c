/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership source tests: the DNS answer parser (A and AAAA records, other types skipped,
 * compression pointers, malformed messages refused); the static source reports its list once,
 * sorted and without duplicates; the DNS source, pointed at a small UDP DNS server run by this
 * test, reports the records at the advertise port and reports again only when they change,
 * while a failed lookup (the server stops answering) keeps the last list. (etcd is exercised
 * against a real etcd by tests/system/test_cluster.py.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster/members.h"

/* ---- a DNS answer by hand ---- */

static size_t put_name(uint8_t *p, const char *name)
{
    size_t o = 0;
    while (*name) {
        const char *dot = strchr(name, '.');
        size_t n = dot ? (size_t)(dot - name) : strlen(name);
        p[o++] = (uint8_t)n;
        memcpy(p + o, name, n);
        o += n;
        name += n + (dot ? 1 : 0);
    }
    p[o++] = 0;
    return o;
}

static size_t put_rr(uint8_t *p, uint16_t type, const void *rdata, uint16_t rdlen)
{
    size_t o = 0;
    p[o++] = 0xC0; /* pointer to the question name */
    p[o++] = 12;
    p[o++] = (uint8_t)(type >> 8);
    p[o++] = (uint8_t)type;
    p[o++] = 0;
    p[o++] = 1; /* IN */
    memset(p + o, 0, 3);
    p[o + 3] = 5; /* TTL */
    o += 4;
    p[o++] = (uint8_t)(rdlen >> 8);
    p[o++] = (uint8_t)rdlen;
    memcpy(p + o, rdata, rdlen);
    return o + rdlen;
}

/* A response to a query for `name` with `n` A records taken from ips[]. */
static size_t build_answer(uint8_t *out, uint16_t id, const char *name, uint16_t qtype,
                           const char *const *ips, size_t n, bool with_extra, int rcode)
{
    size_t o = 12;
    o += put_name(out + o, name);
    out[o++] = (uint8_t)(qtype >> 8);
    out[o++] = (uint8_t)qtype;
    out[o++] = 0;
    out[o++] = 1;
    uint16_t an = 0;
    if (qtype == 1 && rcode == 0) {
        for (size_t i = 0; i < n; i++) {
            struct in_addr a;
            inet_pton(AF_INET, ips[i], &a);
            o += put_rr(out + o, 1, &a, 4);
            an++;
        }
    }
    if (with_extra) {
        struct in6_addr a6;
        inet_pton(AF_INET6, "fd00::7", &a6);
        o += put_rr(out + o, 28, &a6, 16);
        o += put_rr(out + o, 5, "\x03" "foo\x00", 5); /* a CNAME: skipped */
        an += 2;
    }
    out[0] = (uint8_t)(id >> 8);
    out[1] = (uint8_t)id;
    out[2] = 0x84; /* response, authoritative */
    out[3] = (uint8_t)rcode;
    out[4] = 0;
    out[5] = 1;
    out[6] = (uint8_t)(an >> 8);
    out[7] = (uint8_t)an;
    memset(out + 8, 0, 4);
    return o;
}

static void test_parse_dns(void **state)
{
    (void)state;
    uint8_t msg[512];
    const char *ips[] = {"10.0.0.1", "10.0.0.2"};
    size_t len = build_answer(msg, 7, "peers.test", 1, ips, 2, true, 0);
    char *out[8] = {0};
    assert_int_equal(sl_members_parse_dns(msg, len, 1051, out, 8), 3);
    assert_string_equal(out[0], "10.0.0.1:1051");
    assert_string_equal(out[1], "10.0.0.2:1051");
    assert_string_equal(out[2], "[fd00::7]:1051");
    for (int i = 0; i < 3; i++)
        free(out[i]);
    /* at most `max` */
    assert_int_equal(sl_members_parse_dns(msg, len, 1, out, 1), 1);
    free(out[0]);
    /* truncated anywhere: refused, never read past the end */
    for (size_t cut = 0; cut < len; cut++) {
        int n = sl_members_parse_dns(msg, cut, 1, out, 8);
        if (n > 0)
            for (int i = 0; i < n; i++)
                free(out[i]);
        else if (cut < len - 1)
            assert_int_equal(n, -EPROTO);
    }
}

/* ---- on_change recorder ---- */

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int changes;
    char list[1024];
} recorder;

static void on_change(void *ud, const char *const *addrs, size_t n)
{
    recorder *r = ud;
    pthread_mutex_lock(&r->mu);
    r->changes++;
    r->list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strcat(r->list, i ? "," : "");
        strcat(r->list, addrs[i]);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Wait (up to 5 s) until `changes` reaches n. */
static bool wait_changes(recorder *r, int n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&r->mu);
    while (r->changes < n)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts))
            break;
    bool ok = r->changes >= n;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void test_static(void **state)
{
    (void)state;
    recorder r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ""};
    const char *peers[] = {"b:2", "a:1", "b:2", "c:3"};
    sl_members_config c = {.kind = SL_MEMBERS_STATIC, .advertise_addr = "a:1", .peers = peers,
                           .n_peers = 4, .on_change = on_change, .ud = &r};
    sl_members *m;
    assert_int_equal(sl_members_start(&c, &m), 0);
    assert_int_equal(r.changes, 1); /* before start returned */
    assert_string_equal(r.list, "a:1,b:2,c:3");
    assert_int_equal(sl_members_changes(m), 1);
    sl_members_stop(m);
    c.kind = 42;
    assert_int_equal(sl_members_start(&c, &m), -EINVAL);
}

/* ---- a UDP DNS server ---- */

typedef struct dns_srv {
    int fd;
    uint16_t port;
    pthread_t th;
    pthread_mutex_t mu;
    const char *ips[8];
    size_t n;
    int rcode;          /* 0, 2 (SERVFAIL: a failed lookup) or 3 (NXDOMAIN) */
    volatile bool stop;
    int queries;
    pthread_cond_t cv;  /* signalled on every query */
} dns_srv;

static void *dns_thread(void *arg)
{
    dns_srv *s = arg;
    uint8_t q[512], a[1024];
    while (!s->stop) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(s->fd, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
        if (n < 12)
            continue;
        /* question: name at 12, then type */
        size_t o = 12;
        char name[256];
        size_t nl = 0;
        while (o < (size_t)n && q[o] && nl < 200) {
            uint8_t l = q[o++];
            if (nl)
                name[nl++] = '.';
            memcpy(name + nl, q + o, l);
            nl += l;
            o += l;
        }
        name[nl] = '\0';
        o++;
        uint16_t qtype = (uint16_t)((q[o] << 8) | q[o + 1]);
        pthread_mutex_lock(&s->mu);
        size_t len = build_answer(a, (uint16_t)((q[0] << 8) | q[1]), name, qtype, s->ips, s->n,
                                  false, s->rcode);
        sendto(s->fd, a, len, 0, (struct sockaddr *)&from, fl);
        s->queries++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static void dns_start(dns_srv *s)
{
    s->fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(s->fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(s->fd, (struct sockaddr *)&a, &l);
    s->port = ntohs(a.sin_port);
    struct timeval tv = {0, 100000};
    setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_create(&s->th, NULL, dns_thread, s);
}

static void dns_set(dns_srv *s, const char *const *ips, size_t n)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++)
        s->ips[i] = ips[i];
    s->n = n;
    pthread_mutex_unlock(&s->mu);
}

/* Wait until the server has answered `more` further queries (the source's period drives them). */
static void dns_wait_queries(dns_srv *s, int more)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    int want = s->queries + more;
    while (s->queries < want)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts))
            break;
    assert_true(s->queries >= want);
    pthread_mutex_unlock(&s->mu);
}

static void dns_mode(dns_srv *s, int rcode)
{
    pthread_mutex_lock(&s->mu);
    s->rcode = rcode;
    pthread_mutex_unlock(&s->mu);
}

static void dns_stop(dns_srv *s)
{
    s->stop = true;
    pthread_join(s->th, NULL);
    close(s->fd);
}

static void test_dns_source(void **state)
{
    (void)state;
    static dns_srv srv;
    memset(&srv, 0, sizeof srv);
    dns_start(&srv);
    const char *three[] = {"127.0.0.13", "127.0.0.11", "127.0.0.12"};
    dns_set(&srv, three, 3);
    char server[64];
    snprintf(server, sizeof server, "127.0.0.1:%u", srv.port);
    recorder r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ""};
    sl_members_config c = {.kind = SL_MEMBERS_DNS, .advertise_addr = "127.0.0.11:1051",
                           .dns_name = "peers.test", .dns_server = server, .dns_period_ms = 30,
                           .on_change = on_change, .ud = &r};
    sl_members *m;
    assert_int_equal(sl_members_start(&c, &m), 0);
    assert_true(wait_changes(&r, 1));
    assert_string_equal(r.list, "127.0.0.11:1051,127.0.0.12:1051,127.0.0.13:1051");
    /* the same records again and again (each lookup asks A and AAAA): no new report */
    dns_wait_queries(&srv, 6);
    assert_int_equal(r.changes, 1);
    /* a peer joins */
    const char *four[] = {"127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"};
    dns_set(&srv, four, 4);
    assert_true(wait_changes(&r, 2));
    assert_string_equal(r.list,
                        "127.0.0.11:1051,127.0.0.12:1051,127.0.0.13:1051,127.0.0.14:1051");
    /* lookups fail (SERVFAIL): the list stays */
    dns_mode(&srv, 2);
    dns_wait_queries(&srv, 6);
    assert_int_equal(r.changes, 2);
    /* the name is gone (NXDOMAIN): a list of no peers */
    dns_mode(&srv, 3);
    assert_true(wait_changes(&r, 3));
    assert_string_equal(r.list, "");
    sl_members_stop(m);
    dns_stop(&srv);

    /* "name:port" overrides the advertise port; a bad server address is refused */
    c.dns_name = "peers.test:9";
    c.dns_server = "not-an-ip:53";
    assert_int_equal(sl_members_start(&c, &m), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_dns),
        cmocka_unit_test(test_static),
        cmocka_unit_test(test_dns_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership sources (see members.h). Each source runs on threads of its own and reports through
 * report(), which sorts, de-duplicates and compares with the last list so on_change only hears of
 * real changes. DNS queries to an explicit server go through glibc's res_nquery with a private
 * resolver state (res_ninit) whose server list is replaced; answers are walked with dn_skipname.
 */
#include "cluster/members.h"

#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <resolv.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/grow.h"
#include "base/member.h"
#include "gossip/gossipnode.h"
#include "cluster/peer.h"
#include "ctlplane/etcd.h"
#include "runtime/stopwait.h"
#include "gossip/swimmeta.h"

typedef struct kvpair {
    char *key;
    char *val;
} kvpair;

struct sl_members {
    sl_members_config cfg;
    sl_logger *log;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool stop;
    pthread_t th[2];
    int nth;
    /* last reported list */
    pthread_mutex_t report_mu;
    char **last;
    size_t nlast;
    bool reported;
    _Atomic uint64_t changes;
    /* owned copies of the configuration strings */
    char *advertise, *dns_name, *prefix;
    char **peers;
    size_t npeers;
    /* dns */
    char dns_host[256];
    uint16_t dns_port;
    struct sockaddr_in dns_server;
    bool has_server;
    /* etcd */
    sl_etcd *etcd;
    sl_etcd_watch *watch;
    int64_t lease;        /* 0 = not registered */
    int64_t ttl_s;
    sl_k8s *k8s;
    char *reg_key;
    kvpair *kv;
    size_t nkv, capkv;
    /* gossip: members with a service address (guarded by the gossip node's lock) */
    sl_member *gp;
    size_t ngp;
    bool gossip_subscribed;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Report a list (the strings are copied). */
static void report(sl_members *m, char *const *addrs, size_t n)
{
    if (n > SL_MEMBERS_MAX) {
        sl_log_warn(m->log, "membership: %zu peers, keeping the first %d", n, SL_MEMBERS_MAX);
        n = SL_MEMBERS_MAX;
    }
    char **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!addrs[i] || !addrs[i][0])
            continue;
        if (!(v[k] = strdup(addrs[i]))) {
            free_list(v, k);
            return;
        }
        k++;
    }
    qsort(v, k, sizeof *v, cmp_str);
    size_t w = 0;
    for (size_t i = 0; i < k; i++) {
        if (w && strcmp(v[i], v[w - 1]) == 0)
            free(v[i]);
        else
            v[w++] = v[i];
    }
    pthread_mutex_lock(&m->report_mu);
    bool same = m->reported && w == m->nlast;
    for (size_t i = 0; same && i < w; i++)
        same = strcmp(v[i], m->last[i]) == 0;
    if (same || m->stop) {
        pthread_mutex_unlock(&m->report_mu);
        free_list(v, w);
        return;
    }
    free_list(m->last, m->nlast);
    m->last = v;
    m->nlast = w;
    m->reported = true;
    atomic_fetch_add(&m->changes, 1);
    if (sl_log_enabled(m->log, SL_LOG_INFO)) {
        char buf[1024];
        size_t off = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < w && off < sizeof buf - 1; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? "," : "", v[i]);
        sl_log_info(m->log, "membership changed peers=%zu list=%s", w, buf);
    }
    m->cfg.on_change(m->cfg.ud, (const char *const *)v, w);
    pthread_mutex_unlock(&m->report_mu);
}

/* Wait up to ms or until stopped. Returns true when stopped. */
static bool wait_ms(sl_members *m, int64_t ms)
{
    return sl_stopwait_ms(&m->mu, &m->cv, CLOCK_REALTIME, &m->stop, ms);
}

static bool stopped(sl_members *m)
{
    return atomic_load(&m->stop);
}

/* ---- DNS ---------------------------------------------------------------------------------- */

static char *fmt_addr(int family, const void *a, uint16_t port)
{
    char ip[INET6_ADDRSTRLEN];
    if (!inet_ntop(family, a, ip, sizeof ip))
        return NULL;
    char buf[INET6_ADDRSTRLEN + 16];
    if (family == AF_INET6)
        snprintf(buf, sizeof buf, "[%s]:%u", ip, port);
    else
        snprintf(buf, sizeof buf, "%s:%u", ip, port);
    return strdup(buf);
}

int sl_members_parse_dns(const uint8_t *msg, size_t len, uint16_t port, char **out, size_t max)
{
    if (len < NS_HFIXEDSZ)
        return -EPROTO;
    const uint8_t *end = msg + len;
    unsigned qd = ((unsigned)msg[4] << 8) | msg[5];
    unsigned an = ((unsigned)msg[6] << 8) | msg[7];
    const uint8_t *p = msg + NS_HFIXEDSZ;
    for (unsigned i = 0; i < qd; i++) {
        int n = dn_skipname(p, end);
        if (n < 0 || end - (p + n) < NS_QFIXEDSZ)
            return -EPROTO;
        p += n + NS_QFIXEDSZ;
    }
    size_t got = 0;
    for (unsigned i = 0; i < an; i++) {
        int n = dn_skipname(p, end);
        if (n < 0 || end - (p + n) < NS_RRFIXEDSZ)
            goto bad;
        p += n;
        unsigned type = ((unsigned)p[0] << 8) | p[1];
        unsigned rdlen = ((unsigned)p[8] << 8) | p[9];
        p += NS_RRFIXEDSZ;
        if ((size_t)(end - p) < rdlen)
            goto bad;
        char *a = NULL;
        if (type == ns_t_a && rdlen == 4)
            a = fmt_addr(AF_INET, p, port);
        else if (type == ns_t_aaaa && rdlen == 16)
            a = fmt_addr(AF_INET6, p, port);
        if (a) {
            if (got < max)
                out[got++] = a;
            else
                free(a);
        }
        p += rdlen;
    }
    return (int)got;
bad:
    /* nothing is appended from a malformed message */
    for (size_t i = 0; i < got; i++) {
        free(out[i]);
        out[i] = NULL;
    }
    return -EPROTO;
}

/* One query through the explicit server. Returns records appended, or -1 when the lookup failed
 * (no answer, server failure) - as opposed to 0: the name has no such records. */
static int query_server(sl_members *m, int type, char **out, size_t max)
{
    struct __res_state st;
    memset(&st, 0, sizeof st);
    if (res_ninit(&st))
        return -1;
    st.nscount = 1;
    st.nsaddr_list[0] = m->dns_server;
    st.retrans = 1;
    st.retry = 2;
    uint8_t ans[8192];
    int n = res_nquery(&st, m->dns_host, ns_c_in, type, ans, sizeof ans);
    int herr = st.res_h_errno;
    res_nclose(&st);
    if (n < 0)
        return herr == HOST_NOT_FOUND || herr == NO_DATA ? 0 : -1;
    int r = sl_members_parse_dns(ans, (size_t)n, m->dns_port, out, max);
    return r < 0 ? -1 : r;
}

static int resolve_system(sl_members *m, char **out, size_t max)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(m->dns_host, NULL, &hints, &res);
    if (rc == EAI_NONAME)
        return 0;
    if (rc)
        return -1;
    size_t got = 0;
    for (struct addrinfo *ai = res; ai && got < max; ai = ai->ai_next) {
        char *a = NULL;
        if (ai->ai_family == AF_INET)
            a = fmt_addr(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, m->dns_port);
        else if (ai->ai_family == AF_INET6)
            a = fmt_addr(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, m->dns_port);
        if (a)
            out[got++] = a;
    }
    freeaddrinfo(res);
    return (int)got;
}

static void dns_once(sl_members *m)
{
    char **v = calloc(SL_MEMBERS_MAX, sizeof *v);
    if (!v)
        return;
    int n;
    if (m->has_server) {
        n = query_server(m, ns_t_a, v, SL_MEMBERS_MAX);
        if (n >= 0) {
            int n6 = query_server(m, ns_t_aaaa, v + n, SL_MEMBERS_MAX - (size_t)n);
            n = n6 < 0 ? n6 : n + n6;
        }
    } else {
        n = resolve_system(m, v, SL_MEMBERS_MAX);
    }
    if (n < 0) {
        sl_log_warn(m->log, "membership: DNS lookup of %s failed, keeping the last peer list",
                    m->dns_host);
        for (size_t i = 0; i < SL_MEMBERS_MAX && v[i]; i++)
            free(v[i]);
    } else {
        report(m, v, (size_t)n);
        for (int i = 0; i < n; i++)
            free(v[i]);
    }
    free(v);
}

static void *dns_thread(void *arg)
{
    sl_members *m = arg;
    do {
        dns_once(m);
    } while (!wait_ms(m, m->cfg.dns_period_ms));
    return NULL;
}

static int dns_setup(sl_members *m)
{
    const char *name = m->cfg.dns_name;
    if (!name || !*name)
        return -EINVAL;
    uint16_t port = 0;
    char host[256];
    const char *colon = strrchr(name, ':');
    if (colon && name[0] != '[') {
        if (sl_peer_split_addr(name, m->dns_host, sizeof m->dns_host, &m->dns_port))
            return -EINVAL;
    } else {
        if (strlen(name) >= sizeof m->dns_host)
            return -EINVAL;
        snprintf(m->dns_host, sizeof m->dns_host, "%s", name);
        if (sl_peer_split_addr(m->cfg.advertise_addr, host, sizeof host, &port))
            return -EINVAL;
        m->dns_port = port;
    }
    const char *srv = m->cfg.dns_server;
    if (srv && *srv) {
        uint16_t sp;
        if (sl_peer_split_addr(srv, host, sizeof host, &sp))
            return -EINVAL;
        memset(&m->dns_server, 0, sizeof m->dns_server);
        m->dns_server.sin_family = AF_INET;
        m->dns_server.sin_port = htons(sp);
        if (inet_pton(AF_INET, host, &m->dns_server.sin_addr) != 1)
            return -EINVAL; /* glibc's resolver state takes IPv4 servers here */
        m->has_server = true;
    }
    return 0;
}

/* ---- etcd --------------------------------------------------------------------------------- */

static int etcd_register(sl_members *m)
{
    int64_t id = 0, ttl = 0;
    int rc = sl_etcd_lease_grant(m->etcd, m->ttl_s, 0, &id, &ttl);
    if (rc)
        return rc;
    rc = sl_etcd_put(m->etcd, m->reg_key, strlen(m->reg_key), m->advertise, strlen(m->advertise),
                     id, NULL);
    if (rc) {
        sl_etcd_lease_revoke(m->etcd, id);
        return rc;
    }
    pthread_mutex_lock(&m->mu);
    m->lease = id;
    pthread_mutex_unlock(&m->mu);
    sl_log_info(m->log, "membership: registered key=%s lease=%lld ttl=%llds", m->reg_key,
                (long long)id, (long long)ttl);
    return 0;
}

static void *keepalive_thread(void *arg)
{
    sl_members *m = arg;
    int64_t every = m->ttl_s * 1000 / 3;
    if (every < 100)
        every = 100;
    while (!wait_ms(m, m->lease ? every : 500)) {
        pthread_mutex_lock(&m->mu);
        int64_t lease = m->lease;
        pthread_mutex_unlock(&m->mu);
        if (!lease) {
            int rc = etcd_register(m);
            if (rc)
                sl_log_warn(m->log, "membership: cannot register in etcd: %s", strerror(-rc));
            continue;
        }
        int64_t ttl;
        int rc = sl_etcd_lease_keepalive(m->etcd, lease, &ttl);
        if (rc == -ENOENT) {
            /* the lease expired (etcd was away longer than the TTL): join again */
            sl_log_warn(m->log, "membership: lease %lld expired, registering again",
                        (long long)lease);
            pthread_mutex_lock(&m->mu);
            m->lease = 0;
            pthread_mutex_unlock(&m->mu);
            if ((rc = etcd_register(m)))
                sl_log_warn(m->log, "membership: cannot register in etcd: %s", strerror(-rc));
        } else if (rc) {
            sl_log_warn(m->log, "membership: lease keep-alive failed: %s", strerror(-rc));
        }
    }
    return NULL;
}

static void kv_clear(sl_members *m)
{
    for (size_t i = 0; i < m->nkv; i++) {
        free(m->kv[i].key);
        free(m->kv[i].val);
    }
    m->nkv = 0;
}

static void kv_put(sl_members *m, const char *key, const char *val)
{
    for (size_t i = 0; i < m->nkv; i++)
        if (strcmp(m->kv[i].key, key) == 0) {
            char *v = strdup(val);
            if (v) {
                free(m->kv[i].val);
                m->kv[i].val = v;
            }
            return;
        }
    if (m->nkv >= SL_MEMBERS_MAX)
        return;
    if (sl_grow(&m->kv, &m->capkv, m->nkv, 1, 16, SL_MEMBERS_MAX))
        return;
    char *k = strdup(key), *v = strdup(val);
    if (!k || !v) {
        free(k);
        free(v);
        return;
    }
    m->kv[m->nkv++] = (kvpair){k, v};
}

static void kv_del(sl_members *m, const char *key)
{
    for (size_t i = 0; i < m->nkv; i++)
        if (strcmp(m->kv[i].key, key) == 0) {
            free(m->kv[i].key);
            free(m->kv[i].val);
            m->kv[i] = m->kv[--m->nkv];
            return;
        }
}

/* The peer address of a registration: its value, or the key's last component. */
static const char *kv_addr(const kvpair *p)
{
    if (p->val[0])
        return p->val;
    const char *s = strrchr(p->key, '/');
    return s ? s + 1 : p->key;
}

static void kv_report(sl_members *m)
{
    char **v = calloc(m->nkv ? m->nkv : 1, sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < m->nkv; i++)
        v[i] = (char *)kv_addr(&m->kv[i]);
    report(m, v, m->nkv);
    free(v);
}

static int on_watch(void *ud, const sl_etcd_watch_msg *msg)
{
    sl_members *m = ud;
    for (size_t i = 0; i < msg->n_events; i++) {
        const sl_etcd_event *ev = &msg->events[i];
        if (ev->type == SL_ETCD_PUT)
            kv_put(m, ev->kv.key, ev->kv.value ? ev->kv.value : "");
        else
            kv_del(m, ev->kv.key);
    }
    if (msg->n_events)
        kv_report(m);
    return stopped(m) ? 1 : 0;
}

/* Read the whole peer prefix and report it. Returns the revision to watch from, or <0. */
static int64_t etcd_load(sl_members *m, const char *pfx)
{
    sl_etcd_kvs r;
    memset(&r, 0, sizeof r);
    int rc = sl_etcd_range(m->etcd, pfx, strlen(pfx), true, 0, false, &r);
    if (rc)
        return rc;
    kv_clear(m);
    for (size_t i = 0; i < r.n; i++)
        kv_put(m, r.kvs[i].key, r.kvs[i].value ? r.kvs[i].value : "");
    int64_t rev = r.revision;
    sl_etcd_kvs_free(&r);
    kv_report(m);
    return rev;
}

static char *peers_prefix(sl_members *m)
{
    size_t n = strlen(m->prefix) + sizeof "/peers/";
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/peers/", m->prefix);
    return s;
}

static void *watch_thread(void *arg)
{
    sl_members *m = arg;
    char *pfx = peers_prefix(m);
    if (!pfx)
        return NULL;
    int64_t rev = -1;
    while (!stopped(m)) {
        if (rev < 0) {
            rev = etcd_load(m, pfx);
            if (rev < 0) {
                sl_log_warn(m->log, "membership: cannot read %s from etcd: %s", pfx,
                            strerror((int)-rev));
                if (wait_ms(m, 500))
                    break;
                continue;
            }
        }
        int rc = sl_etcd_watch_run(m->watch, pfx, strlen(pfx), true, rev + 1, on_watch, m);
        if (rc == -ECANCELED || rc == 1 || stopped(m))
            break;
        /* the stream broke or the revision was compacted: read everything again */
        sl_log_warn(m->log, "membership: etcd watch ended (%s), reading the peer list again",
                    strerror(rc < 0 ? -rc : EIO));
        rev = -1;
        if (wait_ms(m, 200))
            break;
    }
    free(pfx);
    return NULL;
}

static int etcd_setup(sl_members *m)
{
    if (!m->cfg.n_etcd_endpoints || !m->prefix || !m->advertise[0])
        return -EINVAL;
    sl_etcd_config ec = {
        .endpoints = m->cfg.etcd_endpoints,
        .n_endpoints = m->cfg.n_etcd_endpoints,
        .request_timeout_ms = m->cfg.etcd_timeout_ms ? m->cfg.etcd_timeout_ms : 2000,
        .tls = m->cfg.etcd_tls,
    };
    int rc = sl_etcd_new(&ec, &m->etcd);
    if (rc)
        return rc;
    if ((rc = sl_etcd_watch_new(m->etcd, &m->watch)))
        return rc;
    int64_t ttl = m->cfg.lease_ttl_ms ? m->cfg.lease_ttl_ms : 5000;
    m->ttl_s = (ttl + 999) / 1000;
    size_t n = strlen(m->prefix) + strlen(m->advertise) + sizeof "/peers/";
    if (!(m->reg_key = malloc(n)))
        return -ENOMEM;
    snprintf(m->reg_key, n, "%s/peers/%s", m->prefix, m->advertise);
    if ((rc = etcd_register(m)))
        sl_log_warn(m->log, "membership: cannot register in etcd yet (%s), retrying",
                    strerror(-rc));
    /* the first list before start returns, so the node starts with its peers when it can */
    char *pfx = peers_prefix(m);
    if (pfx) {
        int64_t rev = etcd_load(m, pfx);
        if (rev < 0)
            sl_log_warn(m->log, "membership: cannot read the peer list yet");
        free(pfx);
    }
    return 0;
}

/* ---- k8s (ctlplane/k8s.c) ------------------------------------------------------------------ */

static void on_k8s(void *ud, char *const *addrs, size_t n)
{
    report(ud, addrs, n);
}

/* ---- gossip (gossip/gossipnode.c) ------------------------------------------------------- */

/* Alive and suspect limiters keep their service address in the list; dead and left ones leave
 * (and members of another role, a proxy or an observer, never join it). */
static void on_gossip(void *ud, const sl_swim_member *mb, int old)
{
    sl_members *m = ud;
    char svc[SL_SWIM_MAX_NAME + 1], role[16];
    int rl = sl_swimmeta_get(mb->meta, mb->meta_len, "role", role, sizeof role);
    bool keep = sl_member_status_live(mb->status) &&
                (rl == -ENOENT || (rl >= 0 && strcmp(role, "limiter") == 0)) &&
                sl_swimmeta_get(mb->meta, mb->meta_len, "service", svc, sizeof svc) > 0;
    size_t i = 0;
    while (i < m->ngp && strcmp(m->gp[i].name, mb->name))
        i++;
    if (keep && i == m->ngp) {
        if (m->ngp == SL_MEMBERS_MAX)
            return;
        if (!m->gp && !(m->gp = calloc(SL_MEMBERS_MAX, sizeof *m->gp)))
            return;
        snprintf(m->gp[i].name, sizeof m->gp[i].name, "%s", mb->name);
        m->ngp++;
    }
    if (keep)
        snprintf(m->gp[i].service, sizeof m->gp[i].service, "%s", svc);
    else if (i < m->ngp)
        m->gp[i] = m->gp[--m->ngp];
    char **v = calloc(m->ngp ? m->ngp : 1, sizeof *v);
    if (!v)
        return;
    for (size_t j = 0; j < m->ngp; j++)
        v[j] = m->gp[j].service;
    report(m, v, m->ngp);
    free(v);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static void members_free(sl_members *m)
{
    if (m->watch)
        sl_etcd_watch_free(m->watch);
    if (m->etcd)
        sl_etcd_free(m->etcd);
    kv_clear(m);
    free(m->kv);
    free(m->reg_key);
    free(m->gp);
    free_list(m->last, m->nlast);
    free_list(m->peers, m->npeers);
    free(m->advertise);
    free(m->dns_name);
    free(m->prefix);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->report_mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

int sl_members_start(const sl_members_config *cfg, sl_members **out)
{
    *out = NULL;
    if (!cfg->on_change)
        return -EINVAL;
    sl_members *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->cfg = *cfg;
    m->log = cfg->log;
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->report_mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->advertise = dup_or_empty(cfg->advertise_addr);
    m->dns_name = dup_or_empty(cfg->dns_name);
    m->prefix = dup_or_empty(cfg->prefix);
    if (!m->advertise || !m->dns_name || !m->prefix) {
        members_free(m);
        return -ENOMEM;
    }
    m->cfg.advertise_addr = m->advertise;
    m->cfg.dns_name = m->dns_name;
    m->cfg.prefix = m->prefix;
    if (!m->cfg.dns_period_ms)
        m->cfg.dns_period_ms = 5000;
    int rc = 0;
    switch (cfg->kind) {
    case SL_MEMBERS_STATIC:
        report(m, (char *const *)cfg->peers, cfg->n_peers);
        break;
    case SL_MEMBERS_DNS:
        if ((rc = dns_setup(m)))
            break;
        if (pthread_create(&m->th[m->nth], NULL, dns_thread, m))
            rc = -EAGAIN;
        else
            m->nth++;
        break;
    case SL_MEMBERS_ETCD:
        if ((rc = etcd_setup(m)))
            break;
        if (pthread_create(&m->th[m->nth], NULL, keepalive_thread, m)) {
            rc = -EAGAIN;
            break;
        }
        m->nth++;
        if (pthread_create(&m->th[m->nth], NULL, watch_thread, m))
            rc = -EAGAIN;
        else
            m->nth++;
        break;
    case SL_MEMBERS_K8S:
        rc = cfg->k8s ? sl_k8s_start(cfg->k8s, m->log, on_k8s, m, &m->k8s) : -EINVAL;
        break;
    case SL_MEMBERS_GOSSIP:
        rc = cfg->gossip ? sl_gossipnode_subscribe(cfg->gossip, on_gossip, m) : -EINVAL;
        m->gossip_subscribed = rc == 0;
        break;
    default:
        rc = -EINVAL;
    }
    if (rc) {
        sl_members_stop(m);
        return rc;
    }
    *out = m;
    return 0;
}

void sl_members_stop(sl_members *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->gossip_subscribed)
        sl_gossipnode_unsubscribe(m->cfg.gossip, on_gossip, m);
    /* report() checks m->stop under report_mu: once we hold it, no on_change is running or will */
    pthread_mutex_lock(&m->report_mu);
    pthread_mutex_unlock(&m->report_mu);
    if (m->watch)
        sl_etcd_watch_stop(m->watch);
    for (int i = 0; i < m->nth; i++)
        pthread_join(m->th[i], NULL);
    sl_k8s_stop(m->k8s);
    if (m->etcd && m->lease) {
        int rc = sl_etcd_lease_revoke(m->etcd, m->lease);
        if (rc)
            sl_log_warn(m->log, "membership: lease revoke failed: %s", strerror(-rc));
        else
            sl_log_info(m->log, "membership: left (lease %lld revoked)", (long long)m->lease);
    }
    members_free(m);
}

uint64_t sl_members_changes(const sl_members *m)
{
    return atomic_load(&((sl_members *)m)->changes);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node's own metric series read at render time (see collectors.h). One table row per family:
 * where its stats come from, and which uint64 fields of that struct become which label values
 * (one unlabelled field, or up to four labelled ones); the decisions (a two-dimensional array) and
 * the Graphite connection state have collectors of their own.
 */
#include "node/collectors.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "runtime/buildinfo.h"

enum { SRC_ENGINE, SRC_SERVER, SRC_GRAPHITE, SRC_TLS, SRC_GOSSIP, SRC_REQMEM };

typedef struct {
    const char *value; /* label value, NULL for an unlabelled family */
    size_t off;        /* offsetof a uint64_t field in the source's stats struct */
} stat_field;

struct stat_family {
    int src;
    sl_metrics_type type;
    const char *name, *help, *label;
    stat_field f[4];
};

#define ENG(field) offsetof(sl_engine_stats, field)
#define NET(field) offsetof(sl_net_stats, field)
#define GRA(field) offsetof(sl_graphite_stats, field)
#define TLS(field) offsetof(sl_tls_stats, field)
#define GOS(field) offsetof(sl_swim_stats, field)
#define RQM(field) offsetof(sl_reqmem_stats, field)

static const struct stat_family stat_families[] = {
    {SRC_ENGINE, SL_METRICS_GAUGE, "sluice_keys",
     "Keys held by the engine (kind=keys) and slots allocated (kind=capacity).", "kind",
     {{"keys", ENG(keys)}, {"capacity", ENG(capacity)}}},
    {SRC_ENGINE, SL_METRICS_GAUGE, "sluice_store_bytes", "Bytes held by the key store.", NULL,
     {{NULL, ENG(bytes)}}},
    {SRC_ENGINE, SL_METRICS_COUNTER, "sluice_keys_removed_total",
     "Keys removed: evicted because the store was full (evicted_limited: a key at its limit, "
     "evicted only when no other could go), expired, or collected (gc-collect, gc-collect-free).",
     "reason",
     {{"evicted", ENG(evictions)}, {"expired", ENG(expirations)},
      {"collected", ENG(collections)}, {"evicted_limited", ENG(evictions_limited)}}},
    {SRC_ENGINE, SL_METRICS_COUNTER, "sluice_item_errors_total",
     "Rate-limit items answered with a per-item error (bad input).", NULL, {{NULL, ENG(errors)}}},
    {SRC_SERVER, SL_METRICS_GAUGE, "sluice_connections_open", "Client connections open now.", NULL,
     {{NULL, NET(conns_open)}}},
    {SRC_SERVER, SL_METRICS_COUNTER, "sluice_connections_total",
     "Connections accepted, refused (over --max-conns), closed for a timeout, and closed for "
     "provoking protocol errors (calmed: --max-conn-errors on HTTP/2, the first on HTTP/1.1).",
     "event",
     {{"accepted", NET(conns_accepted)}, {"refused", NET(conns_refused)},
      {"timed_out", NET(conns_timed_out)}, {"calmed", NET(conns_calmed)}}},
    {SRC_SERVER, SL_METRICS_COUNTER, "sluice_accept_paused_total",
     "Times accepting paused at the file-descriptor limit (EMFILE/ENFILE), resumed by a timer.",
     NULL, {{NULL, NET(accept_pauses)}}},
    {SRC_SERVER, SL_METRICS_COUNTER, "sluice_http_requests_total", "Requests by HTTP version.",
     "protocol", {{"http1", NET(requests_h1)}, {"http2", NET(requests_h2)}}},
    {SRC_SERVER, SL_METRICS_COUNTER, "sluice_protocol_errors_total",
     "Malformed HTTP/1.1, HTTP/2 protocol errors and limit violations.", NULL,
     {{NULL, NET(protocol_errors)}}},
    {SRC_SERVER, SL_METRICS_COUNTER, "sluice_network_bytes_total", "Bytes received and sent.",
     "direction", {{"in", NET(bytes_in)}, {"out", NET(bytes_out)}}},
    {SRC_REQMEM, SL_METRICS_GAUGE, "sluice_request_memory_bytes",
     "Request bytes buffered over all client connections (used, counted in 64 KiB chunks per "
     "worker), the highest seen (peak) and --max-request-memory (limit).", "kind",
     {{"used", RQM(used)}, {"peak", RQM(peak)}, {"limit", RQM(limit)}}},
    {SRC_REQMEM, SL_METRICS_COUNTER, "sluice_request_memory_events_total",
     "Past --max-request-memory: requests answered 503 / RESOURCE_EXHAUSTED (refused) and "
     "connections holding the most request bytes closed (closed).", "event",
     {{"refused", RQM(refused)}, {"closed", RQM(closed)}}},
    {SRC_TLS, SL_METRICS_COUNTER, "sluice_tls_handshakes_total",
     "TLS handshakes on the client port: completed (ok), plaintext sent to the TLS port, client "
     "certificate missing, expired or from another CA (cert), other failures (protocol).",
     "result",
     {{"ok", TLS(handshakes)}, {"plaintext", TLS(fail_plaintext)}, {"cert", TLS(fail_cert)},
      {"protocol", TLS(fail_protocol)}}},
    {SRC_TLS, SL_METRICS_COUNTER, "sluice_tls_events_total",
     "TLS handshakes closed at --tls-handshake-timeout (timed_out), certificates reloaded "
     "(reloaded).", "event", {{"timed_out", TLS(timed_out)}, {"reloaded", TLS(reloads)}}},
    {SRC_GRAPHITE, SL_METRICS_COUNTER, "sluice_graphite_pushes_total",
     "Pushes to Graphite that went through (ok) or not (failed).", "result",
     {{"ok", GRA(pushes)}, {"failed", GRA(failures)}}},
    {SRC_GOSSIP, SL_METRICS_COUNTER, "sluice_gossip_probes_total",
     "Gossip probes: direct probes sent, probes that ended in suspicion (failed), indirect probe "
     "requests sent, NACKs received from relays.", "event",
     {{"sent", GOS(probes_sent)}, {"failed", GOS(probes_failed)},
      {"indirect", GOS(indirect_probes_sent)}, {"nack", GOS(nacks_received)}}},
    {SRC_GOSSIP, SL_METRICS_COUNTER, "sluice_gossip_suspicions_total",
     "Members this node began to suspect (suspected) or declared dead (dead), and suspicions of "
     "this node it refuted (refuted).", "event",
     {{"suspected", GOS(suspicions)}, {"dead", GOS(deaths)}, {"refuted", GOS(refutations)}}},
    {SRC_GOSSIP, SL_METRICS_COUNTER, "sluice_gossip_packets_total",
     "Gossip datagrams received and sent.", "direction",
     {{"in", GOS(packets_received)}, {"out", GOS(packets_sent)}}},
    {SRC_GOSSIP, SL_METRICS_COUNTER, "sluice_gossip_bytes_total",
     "Gossip bytes received and sent (datagrams and push/pull messages, before encryption).",
     "direction", {{"in", GOS(bytes_received)}, {"out", GOS(bytes_sent)}}},
    {SRC_GOSSIP, SL_METRICS_COUNTER, "sluice_gossip_trust_total",
     "Gossip packets taken without authentication (no key ring: loopback or --gossip-insecure), "
     "and news about this node that it contradicted (another address, metadata or status).",
     "event", {{"unauthenticated", GOS(unauthenticated)}, {"contradicted", GOS(refuted_news)}}},
};
#define N_STAT_FAMILIES (sizeof stat_families / sizeof stat_families[0])
_Static_assert(N_STAT_FAMILIES == SL_COLLECTORS_ROWS, "SL_COLLECTORS_ROWS must match the table");

typedef struct {
    const struct stat_family *fam;
    void *src;
} stat_row;
_Static_assert(sizeof(stat_row) == sizeof(((sl_collectors *)0)->rows[0]), "row layout");

static void collect_stats(void *arg, sl_metrics_sink *sink)
{
    const stat_row *c = arg;
    union {
        sl_engine_stats e;
        sl_net_stats s;
        sl_graphite_stats g;
        sl_tls_stats t;
        sl_swim_stats w;
        sl_reqmem_stats r;
    } st;
    switch (c->fam->src) {
    case SRC_ENGINE:
        sl_engine_stats_get(c->src, &st.e);
        break;
    case SRC_SERVER:
        sl_server_stats(c->src, &st.s);
        break;
    case SRC_TLS:
        sl_server_tls_stats(c->src, &st.t);
        break;
    case SRC_REQMEM:
        sl_server_reqmem_stats(c->src, &st.r);
        break;
    case SRC_GOSSIP:
        sl_gossipnode_stats(c->src, &st.w);
        break;
    default:
        sl_graphite_stats_get(c->src, &st.g);
        break;
    }
    for (size_t i = 0; i < 4 && (i == 0 || c->fam->f[i].value); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&st + c->fam->f[i].off, sizeof v);
        const char *label[1] = {c->fam->f[i].value};
        sl_metrics_sink_emit(sink, c->fam->label ? label : NULL, c->fam->label ? 1 : 0, (double)v);
    }
}

/* Register the table rows of one source. */
static int register_stats(sl_collectors *cs, sl_metrics *m, int src, void *from)
{
    for (size_t i = 0; i < N_STAT_FAMILIES; i++) {
        if (stat_families[i].src != src)
            continue;
        cs->rows[i].fam = &stat_families[i];
        cs->rows[i].src = from;
        const struct stat_family *f = &stat_families[i];
        int rc = sl_metrics_collector(m, f->type, f->name, f->help, f->label, collect_stats,
                                      &cs->rows[i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* Decisions by algorithm and status: a two-dimensional array, not a table row. */
static void collect_decisions(void *arg, sl_metrics_sink *sink)
{
    sl_engine_stats st;
    sl_engine_stats_get(arg, &st);
    static const char *const status[2] = {"UNDER_LIMIT", "OVER_LIMIT"};
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        const char *name = sl_algorithm_name(a);
        for (int s = 0; s < 2; s++) {
            const char *v[2] = {name ? name : "unknown", status[s]};
            sl_metrics_sink_emit(sink, v, 2, (double)st.decisions[a][s]);
        }
    }
}

static void collect_graphite_connected(void *arg, sl_metrics_sink *sink)
{
    sl_graphite_stats st;
    sl_graphite_stats_get(arg, &st);
    sl_metrics_sink_emit(sink, NULL, 0, st.connected ? 1.0 : 0.0);
}

int sl_collectors_engine(sl_collectors *c, sl_metrics *m, sl_engine *e)
{
    int rc = register_stats(c, m, SRC_ENGINE, e);
    if (rc)
        return rc;
    return sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_decisions_total",
                                "Decisions by algorithm and status.", "algorithm,status",
                                collect_decisions, e);
}

int sl_collectors_server(sl_collectors *c, sl_metrics *m, sl_server *s, bool tls)
{
    int rc = register_stats(c, m, SRC_SERVER, s);
    if (!rc)
        rc = register_stats(c, m, SRC_REQMEM, s);
    if (!rc && tls)
        rc = register_stats(c, m, SRC_TLS, s);
    return rc;
}

int sl_collectors_graphite(sl_collectors *c, sl_metrics *m, sl_graphite *g)
{
    int rc = register_stats(c, m, SRC_GRAPHITE, g);
    if (!rc)
        rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_graphite_connected",
                                  "1 while the Graphite TCP connection (or UDP socket) is up.",
                                  NULL, collect_graphite_connected, g);
    return rc;
}

static void collect_gossip_members(void *arg, sl_metrics_sink *sink)
{
    sl_swim_stats st;
    sl_gossipnode_stats(arg, &st);
    for (int i = 0; i < SL_MEMBER_NSTATUS; i++) {
        const char *v[1] = {sl_member_status_name((sl_member_status)i)};
        sl_metrics_sink_emit(sink, v, 1, (double)st.members[i]);
    }
}

static void collect_gossip_dropped(void *arg, sl_metrics_sink *sink)
{
    sl_swim_stats st;
    sl_gossipnode_stats(arg, &st);
    for (int i = 0; i < SL_SWIM_DROP_NREASONS; i++) {
        const char *v[1] = {sl_swim_drop_name((sl_swim_drop)i)};
        sl_metrics_sink_emit(sink, v, 1, (double)st.dropped[i]);
    }
}

static void collect_gossip_health(void *arg, sl_metrics_sink *sink)
{
    sl_swim_stats st;
    sl_gossipnode_stats(arg, &st);
    sl_metrics_sink_emit(sink, NULL, 0, (double)st.lhm);
}

int sl_collectors_gossip(sl_collectors *c, sl_metrics *m, sl_gossipnode *g)
{
    int rc = register_stats(c, m, SRC_GOSSIP, g);
    if (!rc)
        rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_gossip_members",
                                  "Gossip members by status as this node sees them (itself "
                                  "included).", "status", collect_gossip_members, g);
    if (!rc)
        rc = sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_gossip_dropped_total",
                                  "Gossip packets dropped, by reason (malformed, oversize, "
                                  "version, wrong_node, unexpected, queue_full, table_full, "
                                  "decrypt, meta, unknown_target, sender, replay, stale, "
                                  "rate_limited).", "reason", collect_gossip_dropped, g);
    if (!rc)
        rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_gossip_health_multiplier",
                                  "Lifeguard's local health multiplier: probe interval and "
                                  "timeout are scaled by it plus one.", NULL,
                                  collect_gossip_health, g);
    return rc;
}

/* ---- the build and the process -------------------------------------------------------------- */

static void collect_build_info(void *arg, sl_metrics_sink *sink)
{
    (void)arg;
    const char *v[2] = {sl_buildinfo_version, sl_buildinfo_commit};
    sl_metrics_sink_emit(sink, v, 2, 1.0);
}

/* /proc/self/stat's fields after the command (which may hold spaces and parentheses: the fields
 * start after its last ')'), numbered as proc(5) numbers them: 3 is the state. */
typedef struct proc_stat {
    double utime, stime;  /* clock ticks (14, 15) */
    double starttime;     /* clock ticks after boot (22) */
    double vsize;         /* bytes (23) */
    double rss;           /* pages (24) */
} proc_stat;

static int read_proc_stat(proc_stat *ps)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    double v[25] = {0};
    for (int field = 3; field <= 24; field++) {
        char *end;
        while (*p == ' ')
            p++;
        if (field == 3) { /* the state: one letter */
            if (!*p)
                return -1;
            p++;
            continue;
        }
        v[field] = strtod(p, &end);
        if (end == p)
            return -1;
        p = end;
    }
    *ps = (proc_stat){v[14], v[15], v[22], v[23], v[24]};
    return 0;
}

static double boot_time(void)
{
    char line[256];
    double bt = 0;
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "btime ", 6)) {
            bt = strtod(line + 6, NULL);
            break;
        }
    fclose(f);
    return bt;
}

enum { P_CPU, P_RSS, P_VSZ, P_START, P_FDS, P_MAXFDS };

static void collect_process(void *arg, sl_metrics_sink *sink)
{
    int which = (int)(intptr_t)arg;
    proc_stat ps;
    double ticks = (double)sysconf(_SC_CLK_TCK);
    if (which == P_FDS) {
        DIR *d = opendir("/proc/self/fd");
        if (!d)
            return;
        double n = 0;
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        sl_metrics_sink_emit(sink, NULL, 0, n - 1); /* less the one opendir holds */
        return;
    }
    if (which == P_MAXFDS) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
            sl_metrics_sink_emit(sink, NULL, 0,
                                 rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
        return;
    }
    if (read_proc_stat(&ps) || ticks <= 0)
        return;
    switch (which) {
    case P_CPU:
        sl_metrics_sink_emit(sink, NULL, 0, (ps.utime + ps.stime) / ticks);
        break;
    case P_RSS:
        sl_metrics_sink_emit(sink, NULL, 0, ps.rss * (double)sysconf(_SC_PAGESIZE));
        break;
    case P_VSZ:
        sl_metrics_sink_emit(sink, NULL, 0, ps.vsize);
        break;
    case P_START:
        sl_metrics_sink_emit(sink, NULL, 0, boot_time() + ps.starttime / ticks);
        break;
    default:
        break;
    }
}

int sl_collectors_process(sl_metrics *m)
{
    int rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_build_info",
                                  "The build this sluiced is: always 1, its version and commit in "
                                  "the labels.",
                                  "version,commit", collect_build_info, NULL);
    /* the names, types and units of Prometheus' client libraries' process collector */
    static const struct {
        int which;
        sl_metrics_type type;
        const char *name, *help;
    } p[] = {
        {P_CPU, SL_METRICS_COUNTER, "process_cpu_seconds_total",
         "Total user and system CPU time spent in seconds."},
        {P_RSS, SL_METRICS_GAUGE, "process_resident_memory_bytes", "Resident memory size in bytes."},
        {P_VSZ, SL_METRICS_GAUGE, "process_virtual_memory_bytes", "Virtual memory size in bytes."},
        {P_START, SL_METRICS_GAUGE, "process_start_time_seconds",
         "Start time of the process since unix epoch in seconds."},
        {P_FDS, SL_METRICS_GAUGE, "process_open_fds", "Number of open file descriptors."},
        {P_MAXFDS, SL_METRICS_GAUGE, "process_max_fds",
         "Maximum number of open file descriptors."},
    };
    for (size_t i = 0; !rc && i < sizeof p / sizeof p[0]; i++)
        rc = sl_metrics_collector(m, p[i].type, p[i].name, p[i].help, "", collect_process,
                                  (void *)(intptr_t)p[i].which);
    return rc;
}

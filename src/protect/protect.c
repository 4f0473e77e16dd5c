/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protection as a service (see protect.h): the per-worker shedders and switchboard readers, the
 * leases in the engine, and the metrics of both.
 *
 * The leases are CONCURRENCY keys of the local engine: "<ns>.conc"/<resource> with the resource's
 * limit, and "<ns>.fleet"/noncritical with (1 - reserve) * capacity, both divided by the
 * resource's group size as Levee divides its rate quotas (each of DF limiters sees 1/DF of the
 * traffic). Critical calls take no fleet lease: the fleet shedder never sheds them, and the
 * reserve is what they use. Routed (a cluster, a store), both keys are decided by their owner
 * with the whole limit; the "*.local" keys here hold the fallback's share meanwhile.
 */
#include "protect/protect.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/concurrency.h"
#include "sluice/clock.h"

#define FLEET_KEY "noncritical"
#define FLEET_LOCAL_KEY "noncritical.local"

/* local: a fleet or concurrency lease decided on this node's share while its key's owner could
 * not be reached (the fallback keys) */
enum { LS_ACQUIRED, LS_RELEASED, LS_NOT_FOUND, LS_LOCAL, LS_COUNT };
static const char *const ls_names[LS_COUNT] = {"acquired", "released", "not_found", "local"};

typedef struct pworker {
    sl_shed shed;
    sl_killswitch_reader reader;
} __attribute__((aligned(64))) pworker;

struct sl_protect {
    sl_protect_config cfg;
    char conc_name[SL_MAX_NAME_LEN];
    size_t conc_name_len;
    char conc_local_name[SL_MAX_NAME_LEN]; /* "<ns>.conc.local": the routed leases' fallback */
    size_t conc_local_name_len;
    char fleet_name[SL_MAX_NAME_LEN];
    size_t fleet_name_len;
    pworker *w;
    int nw; /* workers + 1 */
    sl_ladder_counters events;
    sl_metrics_counter *leases[LS_COUNT];
    sl_log_budget log_budget; /* would-reject and shed lines (runtime/log.h's budget) */
    sl_who *who;
};

void sl_protect_config_default(sl_protect_config *c)
{
    memset(c, 0, sizeof *c);
    c->shed = true;
    sl_shedder_options_default(&c->shed_opts);
    c->shed_interval_ms = 100;
    c->default_priority = SL_PRIORITY_CRITICAL;
    c->log_per_second = 20;
    sl_who_config_default(&c->who);
}

static pworker *wk(sl_protect *p, int worker)
{
    if (worker < 0 || worker >= p->nw - 1)
        worker = p->nw - 1;
    return &p->w[worker];
}

const sl_protect_config *sl_protect_cfg(const sl_protect *p)
{
    return &p->cfg;
}

int sl_protect_workers(const sl_protect *p)
{
    return p->nw - 1;
}

const sl_killswitch_snap *sl_protect_switches(sl_protect *p, int worker)
{
    return p->cfg.switches ? sl_killswitch_read(p->cfg.switches, &wk(p, worker)->reader) : NULL;
}

void sl_protect_ladder(sl_protect *p, sl_ladder *l)
{
    sl_ladder_init(l, &p->events);
}

sl_who *sl_protect_who(sl_protect *p)
{
    return p->who;
}

bool sl_protect_log_ok(sl_protect *p, sl_log_level lvl)
{
    return p->cfg.log && sl_log_budget_take(p->cfg.log, &p->log_budget, lvl);
}

/* ---------------------------------------------------------------- the worker shedder */

/* "test 100%, get 50%": the classes a level sheds, and how much of each. */
static const char *class_list(uint32_t level, char *buf, size_t cap)
{
    static const sl_priority order[3] = {SL_PRIORITY_TEST, SL_PRIORITY_GET, SL_PRIORITY_POST};
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < 3; i++) {
        double f = sl_shed_fraction_at(level, order[i]);
        if (f <= 0)
            break;
        int n = snprintf(buf + o, cap - o, "%s%s %.0f%%", o ? ", " : "", sl_priority_name(order[i]),
                         f * 100);
        if (n < 0 || (size_t)n >= cap - o)
            break;
        o += (size_t)n;
    }
    return buf;
}

int sl_protect_observe(sl_protect *p, int worker, int64_t now_ms, double utilization)
{
    pworker *w = wk(p, worker);
    int moved = sl_shed_observe(&w->shed, now_ms, utilization);
    if (moved && p->cfg.log) {
        char cls[96];
        uint32_t level = sl_shed_level_milli(&w->shed);
        sl_log_write(p->cfg.log, moved > 0 ? SL_LOG_WARN : SL_LOG_INFO,
                     "worker shed level %s worker=%d level=%.3f utilization=%.2f shedding=\"%s\"",
                     moved > 0 ? "raised" : "lowered", (int)(w - p->w), level / 1000.0,
                     sl_shed_util(&w->shed), level ? class_list(level, cls, sizeof cls) : "nothing");
    }
    return moved;
}

double sl_protect_shed_level(sl_protect *p, int worker)
{
    return sl_shed_level_milli(&wk(p, worker)->shed) / 1000.0;
}

double sl_protect_shed_util(sl_protect *p, int worker)
{
    return sl_shed_util(&wk(p, worker)->shed);
}

bool sl_protect_shed_admit(sl_protect *p, int worker, sl_priority prio)
{
    return !p->cfg.shed || sl_shed_admit(&wk(p, worker)->shed, prio);
}

int64_t sl_protect_shed_retry_ms(const sl_protect *p)
{
    int64_t ms = p->cfg.shed_opts.lower_after_ms;
    return ms > 1000 ? ms : 1000;
}

size_t sl_protect_shed_reason(sl_protect *p, int worker, sl_priority prio, char *buf, size_t cap)
{
    char cls[96];
    int64_t ms = sl_protect_shed_retry_ms(p);
    int n = snprintf(buf, cap, "sluiced is overloaded and sheds %s traffic (%s); retry in %lld s",
                     sl_priority_name(prio),
                     class_list(sl_shed_level_milli(&wk(p, worker)->shed), cls, sizeof cls),
                     (long long)((ms + 999) / 1000));
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* ---------------------------------------------------------------- leases */

uint32_t sl_protect_group_size(uint32_t override, const sl_quota_snap *snap, const char *res,
                               size_t len)
{
    if (override)
        return override;
    if (!snap || !snap->tree)
        return 1;
    uint32_t f;
    if (res && len) {
        sl_quota_path pk = {.kind = SL_QUOTA_FACTOR_KEY, .key = res, .key_len = len};
        if (sl_quota_tree_get_factor(snap->tree, &pk, &f) && f > 0)
            return f;
    }
    sl_quota_path pd = {.kind = SL_QUOTA_FACTOR_DEFAULT};
    if (sl_quota_tree_get_factor(snap->tree, &pd, &f) && f > 0)
        return f;
    return 1;
}

int64_t sl_protect_share(int64_t v, uint32_t df)
{
    if (v <= 0)
        return 0;
    int64_t s = v / (int64_t)(df ? df : 1);
    return s < 1 ? 1 : s;
}

int64_t sl_protect_fleet_limit(const sl_killswitch_fleet *f, uint32_t df)
{
    double v = floor((1.0 - f->reserve) * (double)sl_protect_share(f->capacity, df) + 1e-9);
    return v < 0 ? 0 : (int64_t)v;
}

static void lease_req(sl_request *q, const char *name, size_t nl, const char *key, size_t kl,
                      int64_t hits, int64_t limit, int64_t duration, uint64_t lease)
{
    memset(q, 0, sizeof *q);
    q->name = name;
    q->name_len = nl;
    q->unique_key = key;
    q->unique_key_len = kl;
    q->hits = hits;
    q->limit = limit;
    q->duration = duration;
    q->algorithm = SL_CONCURRENCY;
    q->lease_id = lease;
}

static void take(sl_protect *p, const char *name, size_t nl, const char *key, size_t kl,
                 int64_t limit, int64_t duration, int64_t now, sl_response *r)
{
    sl_request q;
    lease_req(&q, name, nl, key, kl, 1, limit, duration, 0);
    sl_engine_decide(p->cfg.engine, &q, r, now);
    if (!r->error && r->status == SL_UNDER_LIMIT)
        sl_metrics_counter_inc(p->leases[LS_ACQUIRED]);
}

/* Give a lease back: 1 released, 0 not found (counted when `count_missing`), -1 another error. */
static int give_lease(sl_protect *p, const char *name, size_t nl, const char *key, size_t kl,
                      uint64_t lease, int64_t now, bool count_missing)
{
    if (!lease)
        return 0;
    sl_request q;
    sl_response r;
    lease_req(&q, name, nl, key, kl, -1, 0, 1, lease);
    sl_engine_decide(p->cfg.engine, &q, &r, now);
    if (!r.error) {
        sl_metrics_counter_inc(p->leases[LS_RELEASED]);
        return 1;
    }
    if (r.error == sl_conc_err_not_found) {
        if (count_missing)
            sl_metrics_counter_inc(p->leases[LS_NOT_FOUND]);
        return 0;
    }
    return -1;
}

static int give(sl_protect *p, const char *name, size_t nl, const char *key, size_t kl,
                uint64_t lease, int64_t now)
{
    return give_lease(p, name, nl, key, kl, lease, now, true);
}

void sl_protect_fleet_take(sl_protect *p, int64_t limit, int64_t duration_ms, int64_t now,
                           sl_response *r)
{
    take(p, p->fleet_name, p->fleet_name_len, FLEET_KEY, sizeof FLEET_KEY - 1, limit, duration_ms,
         now, r);
}

void sl_protect_conc_take(sl_protect *p, const char *res, size_t len, int64_t limit,
                          int64_t duration_ms, int64_t now, sl_response *r)
{
    take(p, p->conc_name, p->conc_name_len, res, len, limit, duration_ms, now, r);
}

int sl_protect_fleet_give(sl_protect *p, uint64_t lease, int64_t now)
{
    return give(p, p->fleet_name, p->fleet_name_len, FLEET_KEY, sizeof FLEET_KEY - 1, lease, now);
}

void sl_protect_fleet_key(const sl_protect *p, const char **name, size_t *name_len,
                          const char **key, size_t *key_len)
{
    *name = p->fleet_name;
    *name_len = p->fleet_name_len;
    *key = FLEET_KEY;
    *key_len = sizeof FLEET_KEY - 1;
}

void sl_protect_fleet_take_local(sl_protect *p, int64_t limit, int64_t duration_ms, int64_t now,
                                 sl_response *r)
{
    sl_metrics_counter_inc(p->leases[LS_LOCAL]);
    take(p, p->fleet_name, p->fleet_name_len, FLEET_LOCAL_KEY, sizeof FLEET_LOCAL_KEY - 1, limit,
         duration_ms, now, r);
}

/* A give of a fallback key: not found here is normal (the lease came from the owner): not
 * counted. 1 released, 0 not found, -1 another error. */
static int give_local(sl_protect *p, const char *name, size_t nl, const char *key, size_t kl,
                      uint64_t lease, int64_t now)
{
    return give_lease(p, name, nl, key, kl, lease, now, false);
}

int sl_protect_fleet_give_local(sl_protect *p, uint64_t lease, int64_t now)
{
    return give_local(p, p->fleet_name, p->fleet_name_len, FLEET_LOCAL_KEY,
                      sizeof FLEET_LOCAL_KEY - 1, lease, now);
}

void sl_protect_conc_key(const sl_protect *p, const char **name, size_t *name_len)
{
    *name = p->conc_name;
    *name_len = p->conc_name_len;
}

void sl_protect_conc_take_local(sl_protect *p, const char *res, size_t len, int64_t limit,
                                int64_t duration_ms, int64_t now, sl_response *r)
{
    sl_metrics_counter_inc(p->leases[LS_LOCAL]);
    take(p, p->conc_local_name, p->conc_local_name_len, res, len, limit, duration_ms, now, r);
}

int sl_protect_conc_give_local(sl_protect *p, const char *res, size_t len, uint64_t lease,
                               int64_t now)
{
    return give_local(p, p->conc_local_name, p->conc_local_name_len, res, len, lease, now);
}

void sl_protect_lease_count(sl_protect *p, sl_protect_lease_event ev)
{
    static const int map[] = {LS_ACQUIRED, LS_RELEASED, LS_NOT_FOUND};
    if ((unsigned)ev < sizeof map / sizeof map[0])
        sl_metrics_counter_inc(p->leases[map[ev]]);
}

int sl_protect_conc_give(sl_protect *p, const char *res, size_t len, uint64_t lease, int64_t now)
{
    return give(p, p->conc_name, p->conc_name_len, res, len, lease, now);
}

static int renew(sl_protect *p, const char *name, size_t nl, const char *res, size_t len,
                 uint64_t lease, int64_t duration_ms, int64_t now)
{
    if (!lease)
        return 0;
    sl_request q;
    sl_response r;
    lease_req(&q, name, nl, res, len, 0, 0, duration_ms, lease);
    sl_engine_decide(p->cfg.engine, &q, &r, now);
    if (!r.error)
        return 1;
    return r.error == sl_conc_err_not_found ? 0 : -1;
}

int sl_protect_conc_renew(sl_protect *p, const char *res, size_t len, uint64_t lease,
                          int64_t duration_ms, int64_t now)
{
    return renew(p, p->conc_name, p->conc_name_len, res, len, lease, duration_ms, now);
}

int sl_protect_conc_renew_local(sl_protect *p, const char *res, size_t len, uint64_t lease,
                                int64_t duration_ms, int64_t now)
{
    return renew(p, p->conc_local_name, p->conc_local_name_len, res, len, lease, duration_ms,
                 now);
}

/* ---------------------------------------------------------------- lifecycle and metrics */

/* One gauge per worker: its shed level, or its (smoothed) utilization. */
static void collect_per_worker(sl_protect *p, sl_metrics_sink *sink, bool level)
{
    for (int i = 0; i < p->nw - 1; i++) {
        char wbuf[16];
        snprintf(wbuf, sizeof wbuf, "%d", i);
        const char *v[1] = {wbuf};
        double u = sl_shed_util(&p->w[i].shed);
        sl_metrics_sink_emit(sink, v, 1,
                             level ? sl_shed_level_milli(&p->w[i].shed) / 1000.0 : u < 0 ? 0 : u);
    }
}

static void collect_level(void *arg, sl_metrics_sink *sink)
{
    collect_per_worker(arg, sink, true);
}

static void collect_util(void *arg, sl_metrics_sink *sink)
{
    collect_per_worker(arg, sink, false);
}

static void collect_shed_calls(void *arg, sl_metrics_sink *sink)
{
    sl_protect *p = arg;
    sl_shedder_stats sum = {0};
    for (int i = 0; i < p->nw; i++) {
        sl_shedder_stats st;
        sl_shed_stats(&p->w[i].shed, &st);
        for (int c = 0; c < SL_PRIORITY_COUNT; c++) {
            sum.admitted[c] += st.admitted[c];
            sum.shed[c] += st.shed[c];
        }
    }
    for (int c = 0; c < SL_PRIORITY_COUNT; c++) {
        const char *v[2] = {sl_priority_name((sl_priority)c), "shed"};
        sl_metrics_sink_emit(sink, v, 2, (double)sum.shed[c]);
        v[1] = "admitted";
        sl_metrics_sink_emit(sink, v, 2, (double)sum.admitted[c]);
    }
}

static int register_metrics(sl_protect *p)
{
    sl_metrics *m = p->cfg.metrics;
    int rc = sl_ladder_register_metrics(m, &p->events);
    if (rc || !m)
        return rc;
    sl_metrics_family *f;
    rc = sl_metrics_counter_family(m, "sluice_leases_total",
                                   "Concurrency and fleet leases taken and given back by /attempt, "
                                   "/release and the fleet shedder (not_found: already released "
                                   "or expired; local: decided on this node's share while the "
                                   "key's owner could not be reached).",
                                   "event", &f);
    if (rc)
        return rc;
    for (int e = 0; e < LS_COUNT; e++) {
        const char *v[1] = {ls_names[e]};
        p->leases[e] = sl_metrics_counter_get(f, v, 1);
    }
    if ((rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_shed_level",
                                   "Worker shed level, 0..3: test traffic is shed first (0..1), "
                                   "then get (1..2), then post (2..3); critical never.",
                                   "worker", collect_level, p)))
        return rc;
    if ((rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_worker_utilization",
                                   "Busy fraction of each worker loop (smoothed), the signal of "
                                   "the worker shedder.",
                                   "worker", collect_util, p)))
        return rc;
    return sl_metrics_collector(m, SL_METRICS_COUNTER, "sluice_shed_calls_total",
                                "Calls seen by the worker shedder, by priority and outcome.",
                                "priority,outcome", collect_shed_calls, p);
}

int sl_protect_new(const sl_protect_config *cfg, sl_protect **out)
{
    if (!cfg || !out || !cfg->engine)
        return -EINVAL;
    if (cfg->shed && sl_shedder_options_check(&cfg->shed_opts, NULL))
        return -EINVAL;
    sl_protect *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->cfg = *cfg;
    if (p->cfg.shed_interval_ms <= 0)
        p->cfg.shed_interval_ms = 100;
    if (p->cfg.log_per_second <= 0)
        p->cfg.log_per_second = 20;
    const char *ns = cfg->name && cfg->name[0] ? cfg->name : "levee";
    int n1 = snprintf(p->conc_name, sizeof p->conc_name, "%s.conc", ns);
    int n2 = snprintf(p->fleet_name, sizeof p->fleet_name, "%s.fleet", ns);
    int n3 = snprintf(p->conc_local_name, sizeof p->conc_local_name, "%s.conc.local", ns);
    if (n1 < 0 || (size_t)n1 >= sizeof p->conc_name || n2 < 0 ||
        (size_t)n2 >= sizeof p->fleet_name || n3 < 0 || (size_t)n3 >= sizeof p->conc_local_name) {
        free(p);
        return -EINVAL;
    }
    p->conc_name_len = (size_t)n1;
    p->fleet_name_len = (size_t)n2;
    p->conc_local_name_len = (size_t)n3;
    p->nw = (cfg->workers > 0 ? cfg->workers : 1) + 1;
    size_t bytes = (size_t)p->nw * sizeof *p->w;
    p->w = aligned_alloc(64, bytes);
    if (!p->w) {
        free(p);
        return -ENOMEM;
    }
    memset(p->w, 0, bytes);
    for (int i = 0; i < p->nw; i++)
        sl_shed_init(&p->w[i].shed, &p->cfg.shed_opts);
    p->log_budget.per_second = (uint32_t)(p->cfg.log_per_second > UINT32_MAX
                                              ? UINT32_MAX
                                              : p->cfg.log_per_second);
    sl_who_config wc = p->cfg.who;
    wc.metrics = cfg->metrics;
    int rc = sl_who_new(&wc, &p->who);
    if (!rc)
        rc = register_metrics(p);
    if (rc) {
        sl_protect_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void sl_protect_worker_stop(sl_protect *p, int worker)
{
    sl_killswitch_reader_release(&wk(p, worker)->reader);
}

void sl_protect_free(sl_protect *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->nw; i++)
        sl_killswitch_reader_release(&p->w[i].reader);
    sl_who_free(p->who);
    free(p->w);
    free(p);
}

/*
 * The quota source (see quotasrc.h): the etcd watcher thread, the quota-file reload, and the
 * generation-checked publication of immutable snapshots to request threads.
 */
#include "config/quotasrc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/etcd.h"
#include "config/quotafile.h"
#include "sluice/clock.h"

enum { METRIC_COUNT = 9 };

typedef struct metric_ref {
    sl_quotasrc *s;
    int which;
} metric_ref;

struct sl_quotasrc {
    sl_quotasrc_mode mode;
    sl_logger *log;
    char *root;         /* storage prefix without a trailing '/' */
    char *watch_prefix; /* root + "/" */
    char *quota_file;
    size_t max_entries;
    int64_t backoff_min_ms, backoff_max_ms;

    /* publication */
    pthread_mutex_t pub_mu;
    sl_quota_snap *cur;
    _Atomic uint64_t gen;

    /* status */
    pthread_mutex_t st_mu;
    sl_quotasrc_status st;

    /* etcd mode */
    sl_etcd *etcd;
    sl_etcd_watch *watch;
    sl_quota_tree *master; /* owned by the watcher thread */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv; /* stop requests and "loaded" wake-ups */
    bool stopping;
    uint64_t rng;

    pthread_mutex_t reload_mu; /* file mode: one reload at a time */
    metric_ref metrics[METRIC_COUNT];
};

const char *sl_quotasrc_mode_name(sl_quotasrc_mode mode)
{
    switch (mode) {
    case SL_QUOTASRC_ETCD: return "etcd";
    case SL_QUOTASRC_FILE: return "file";
    default: return "none";
    }
}

/* ---------------------------------------------------------------- publication */

static int publish(sl_quotasrc *s, sl_quota_tree *tree, int64_t revision)
{
    size_t entries = sl_quota_tree_count(tree);
    int64_t now = sl_wall_ms();
    sl_quota_snap *snap;
    int rc = sl_quota_snap_new(tree, true, revision, now, &snap);
    if (rc)
        return rc;
    pthread_mutex_lock(&s->pub_mu);
    sl_quota_snap *old = s->cur;
    snap->generation = old ? old->generation + 1 : 1;
    s->cur = snap;
    atomic_store_explicit(&s->gen, snap->generation, memory_order_release);
    pthread_mutex_unlock(&s->pub_mu);
    sl_quota_snap_unref(old);

    pthread_mutex_lock(&s->st_mu);
    s->st.loaded = true;
    s->st.revision = revision;
    s->st.entries = entries;
    s->st.generation = snap->generation;
    s->st.last_change_ms = now;
    pthread_mutex_unlock(&s->st_mu);

    pthread_mutex_lock(&s->run_mu);
    pthread_cond_broadcast(&s->run_cv);
    pthread_mutex_unlock(&s->run_mu);
    return 0;
}

const sl_quota_snap *sl_quotasrc_read(sl_quotasrc *s, sl_quotasrc_reader *r)
{
    uint64_t g = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (r->snap && g == r->generation)
        return r->snap;
    pthread_mutex_lock(&s->pub_mu);
    sl_quota_snap *old = r->snap;
    r->snap = s->cur;
    sl_quota_snap_ref(r->snap);
    r->generation = r->snap->generation;
    pthread_mutex_unlock(&s->pub_mu);
    sl_quota_snap_unref(old);
    return r->snap;
}

void sl_quotasrc_reader_release(sl_quotasrc_reader *r)
{
    sl_quota_snap_unref(r->snap);
    r->snap = NULL;
    r->generation = 0;
}

sl_quota_snap *sl_quotasrc_acquire(sl_quotasrc *s)
{
    pthread_mutex_lock(&s->pub_mu);
    sl_quota_snap *snap = s->cur;
    sl_quota_snap_ref(snap);
    pthread_mutex_unlock(&s->pub_mu);
    return snap;
}

void sl_quotasrc_status_get(sl_quotasrc *s, sl_quotasrc_status *out)
{
    pthread_mutex_lock(&s->st_mu);
    *out = s->st;
    pthread_mutex_unlock(&s->st_mu);
    if (s->etcd) {
        out->failovers = sl_etcd_failovers(s->etcd);
        sl_etcd_current_endpoint(s->etcd, out->endpoint, sizeof out->endpoint);
    }
}

static void status_error(sl_quotasrc *s, const char *msg, bool load_error)
{
    pthread_mutex_lock(&s->st_mu);
    snprintf(s->st.last_error, sizeof s->st.last_error, "%s", msg);
    if (load_error)
        s->st.load_errors++;
    pthread_mutex_unlock(&s->st_mu);
}

/* ---------------------------------------------------------------- etcd mode */

static bool stopping(sl_quotasrc *s)
{
    pthread_mutex_lock(&s->run_mu);
    bool st = s->stopping;
    pthread_mutex_unlock(&s->run_mu);
    return st;
}

/* Sleep up to ms on the real clock unless stopped. */
static void pause_ms(sl_quotasrc *s, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->run_mu);
    while (!s->stopping && pthread_cond_timedwait(&s->run_cv, &s->run_mu, &ts) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&s->run_mu);
}

static void set_connected(sl_quotasrc *s, bool connected)
{
    pthread_mutex_lock(&s->st_mu);
    s->st.connected = connected;
    pthread_mutex_unlock(&s->st_mu);
}

/* Apply one etcd put to the master tree; log and count malformed entries. */
static void apply_put(sl_quotasrc *s, sl_quota_tree *t, const sl_etcd_kv *kv)
{
    const char *err = NULL;
    int rc = sl_quota_tree_apply_put(t, s->root, kv->key, kv->key_len, kv->value, kv->value_len,
                                     &err);
    if (rc == 0 || rc == -ENOENT)
        return;
    pthread_mutex_lock(&s->st_mu);
    s->st.invalid++;
    pthread_mutex_unlock(&s->st_mu);
    sl_log_warn(s->log, "quota entry ignored key=%.*s error=\"%s\" value=%.*s",
                (int)(kv->key_len > 512 ? 512 : kv->key_len), kv->key, err ? err : "invalid",
                (int)(kv->value_len > 256 ? 256 : kv->value_len), kv->value);
}

static int full_load(sl_quotasrc *s, int64_t *revision)
{
    sl_etcd_kvs kvs;
    int rc = sl_etcd_range(s->etcd, s->watch_prefix, strlen(s->watch_prefix), true, 0, false,
                           &kvs);
    if (rc)
        return rc;
    sl_quota_tree *t, *pub;
    rc = sl_quota_tree_new(s->max_entries, &t);
    if (rc) {
        sl_etcd_kvs_free(&kvs);
        return rc;
    }
    for (size_t i = 0; i < kvs.n; i++)
        apply_put(s, t, &kvs.kvs[i]);
    *revision = kvs.revision;
    sl_etcd_kvs_free(&kvs);
    rc = sl_quota_tree_clone(t, &pub);
    if (rc == 0)
        rc = publish(s, pub, *revision);
    if (rc) {
        sl_quota_tree_free(t);
        return rc;
    }
    sl_quota_tree_free(s->master);
    s->master = t;
    pthread_mutex_lock(&s->st_mu);
    s->st.loads++;
    pthread_mutex_unlock(&s->st_mu);
    return 0;
}

typedef struct watch_ctx {
    sl_quotasrc *s;
    int64_t revision;
    bool created;
} watch_ctx;

static int on_watch(void *ud, const sl_etcd_watch_msg *msg)
{
    watch_ctx *wc = ud;
    sl_quotasrc *s = wc->s;
    if (msg->created && !wc->created) {
        wc->created = true;
        set_connected(s, true);
        char ep[128];
        sl_log_info(s->log, "etcd watch established endpoint=%s prefix=%s revision=%lld",
                    sl_etcd_current_endpoint(s->etcd, ep, sizeof ep), s->watch_prefix,
                    (long long)wc->revision);
    }
    if (msg->n_events == 0)
        return 0;
    for (size_t i = 0; i < msg->n_events; i++) {
        const sl_etcd_event *ev = &msg->events[i];
        if (ev->type == SL_ETCD_PUT)
            apply_put(s, s->master, &ev->kv);
        else
            sl_quota_tree_apply_delete(s->master, s->root, ev->kv.key, ev->kv.key_len);
    }
    if (msg->revision > wc->revision)
        wc->revision = msg->revision;
    pthread_mutex_lock(&s->st_mu);
    s->st.updates += msg->n_events;
    pthread_mutex_unlock(&s->st_mu);
    sl_quota_tree *pub;
    int rc = sl_quota_tree_clone(s->master, &pub);
    if (rc == 0)
        rc = publish(s, pub, wc->revision);
    if (rc) {
        /* out of memory: end the watch; the full reload that follows catches up */
        sl_log_error(s->log, "cannot publish quotas error=%s", strerror(-rc));
        return rc;
    }
    sl_log_debug(s->log, "quotas updated events=%zu revision=%lld entries=%zu", msg->n_events,
                 (long long)wc->revision, sl_quota_tree_count(s->master));
    return 0;
}

static int64_t jitter(sl_quotasrc *s, int64_t ms)
{
    /* xorshift64: spread reconnects of many daemons over [ms/2, ms] */
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return ms / 2 + (int64_t)(s->rng % (uint64_t)(ms / 2 + 1));
}

static void *etcd_thread(void *arg)
{
    sl_quotasrc *s = arg;
    int64_t backoff = s->backoff_min_ms;
    bool ever_connected = false, warned = false;
    char err[256];
    while (!stopping(s)) {
        int64_t rev = 0;
        int rc = full_load(s, &rev);
        if (rc) {
            sl_etcd_last_error(s->etcd, err, sizeof err);
            status_error(s, err, true);
            set_connected(s, false);
            if (!warned) {
                sl_log_warn(s->log, "etcd unavailable, serving last known quotas error=\"%s\" "
                            "retry_ms=%lld", err, (long long)backoff);
                warned = true;
            } else {
                sl_log_debug(s->log, "etcd still unavailable error=\"%s\"", err);
            }
            pause_ms(s, jitter(s, backoff));
            backoff = backoff * 2 > s->backoff_max_ms ? s->backoff_max_ms : backoff * 2;
            continue;
        }
        char ep[128];
        sl_log_info(s->log, "quotas loaded from etcd endpoint=%s revision=%lld entries=%zu",
                    sl_etcd_current_endpoint(s->etcd, ep, sizeof ep), (long long)rev,
                    sl_quota_tree_count(s->master));
        if (ever_connected) {
            pthread_mutex_lock(&s->st_mu);
            s->st.reconnects++;
            pthread_mutex_unlock(&s->st_mu);
        }
        ever_connected = true;
        warned = false;
        watch_ctx wc = {.s = s, .revision = rev};
        rc = sl_etcd_watch_run(s->watch, s->watch_prefix, strlen(s->watch_prefix), true, rev + 1,
                               on_watch, &wc);
        set_connected(s, false);
        if (rc == -ECANCELED || stopping(s))
            break;
        sl_etcd_last_error(s->etcd, err, sizeof err);
        status_error(s, err, false);
        sl_log_warn(s->log, "etcd watch lost, serving last known quotas revision=%lld error=\"%s\"",
                    (long long)wc.revision, err);
        if (wc.created)
            backoff = s->backoff_min_ms; /* it worked for a while: retry soon */
        pause_ms(s, jitter(s, backoff));
        if (!wc.created)
            backoff = backoff * 2 > s->backoff_max_ms ? s->backoff_max_ms : backoff * 2;
    }
    return NULL;
}

/* ---------------------------------------------------------------- file mode */

int sl_quotasrc_reload(sl_quotasrc *s, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || errlen == 0)
        err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (s->mode == SL_QUOTASRC_ETCD) {
        snprintf(err, errlen, "quotas come from etcd and are watched: nothing to reload");
        return -EOPNOTSUPP;
    }
    if (s->mode == SL_QUOTASRC_NONE)
        return 0;
    pthread_mutex_lock(&s->reload_mu);
    sl_quota_tree *t;
    int rc = sl_quota_tree_new(s->max_entries, &t);
    if (rc == 0) {
        rc = sl_quotafile_load(s->quota_file, t, err, errlen);
        if (rc == 0) {
            size_t n = sl_quota_tree_count(t);
            rc = publish(s, t, 0);
            if (rc == 0) {
                pthread_mutex_lock(&s->st_mu);
                s->st.loads++;
                s->st.last_error[0] = 0;
                pthread_mutex_unlock(&s->st_mu);
                sl_log_info(s->log, "quota file loaded path=%s entries=%zu", s->quota_file, n);
            }
        } else {
            sl_quota_tree_free(t);
        }
    }
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "%s", strerror(-rc));
        status_error(s, err, true);
        sl_log_error(s->log, "quota file not loaded, keeping the current quotas error=\"%s\"", err);
    }
    pthread_mutex_unlock(&s->reload_mu);
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

int sl_quotasrc_new(const sl_quotasrc_config *cfg, sl_quotasrc **out)
{
    sl_quotasrc *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->log = cfg->log;
    s->max_entries = cfg->max_entries;
    s->backoff_min_ms = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : 100;
    s->backoff_max_ms = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 5000;
    if (s->backoff_max_ms < s->backoff_min_ms)
        s->backoff_max_ms = s->backoff_min_ms;
    s->rng = (uint64_t)sl_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s;
    if (!s->rng)
        s->rng = 1;
    const char *prefix = cfg->prefix ? cfg->prefix : "/sluice";
    size_t pl = strlen(prefix);
    while (pl && prefix[pl - 1] == '/')
        pl--;
    s->root = strndup(prefix, pl);
    s->watch_prefix = malloc(pl + 2);
    pthread_mutex_init(&s->pub_mu, NULL);
    pthread_mutex_init(&s->st_mu, NULL);
    pthread_mutex_init(&s->run_mu, NULL);
    pthread_mutex_init(&s->reload_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->run_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->gen, 0);
    for (int i = 0; i < METRIC_COUNT; i++)
        s->metrics[i] = (metric_ref){s, i};
    if (!s->root || !s->watch_prefix) {
        sl_quotasrc_free(s);
        return -ENOMEM;
    }
    memcpy(s->watch_prefix, s->root, pl);
    s->watch_prefix[pl] = '/';
    s->watch_prefix[pl + 1] = 0;

    /* The first snapshot: empty and not loaded (etcd), or empty and loaded (none). */
    sl_quota_tree *t;
    int rc = sl_quota_tree_new(s->max_entries, &t);
    sl_quota_snap *snap = NULL;
    if (rc == 0)
        rc = sl_quota_snap_new(t, false, 0, 0, &snap);
    if (rc) {
        sl_quotasrc_free(s);
        return rc;
    }
    snap->generation = 1;
    s->cur = snap;
    atomic_store(&s->gen, 1);
    s->st.generation = 1;

    if (cfg->n_endpoints > 0) {
        s->mode = SL_QUOTASRC_ETCD;
        /* before the watcher starts: it sets connected as soon as its watch is up */
        s->st.mode = s->mode;
        s->st.connected = false;
        sl_etcd_config ec = {.endpoints = cfg->etcd_endpoints,
                             .n_endpoints = cfg->n_endpoints,
                             .connect_timeout_ms = cfg->connect_timeout_ms,
                             .request_timeout_ms = cfg->request_timeout_ms};
        rc = sl_etcd_new(&ec, &s->etcd);
        if (rc == 0)
            rc = sl_etcd_watch_new(s->etcd, &s->watch);
        if (rc == 0)
            rc = sl_quota_tree_new(s->max_entries, &s->master);
        if (rc == 0) {
            rc = -pthread_create(&s->thread, NULL, etcd_thread, s);
            s->thread_started = rc == 0;
        }
    } else if (cfg->quota_file && cfg->quota_file[0]) {
        s->mode = SL_QUOTASRC_FILE;
        s->quota_file = strdup(cfg->quota_file);
        if (!s->quota_file) {
            rc = -ENOMEM;
        } else {
            snprintf(s->st.endpoint, sizeof s->st.endpoint, "%s", s->quota_file);
            rc = sl_quotasrc_reload(s, NULL, 0);
        }
    } else {
        s->mode = SL_QUOTASRC_NONE;
        s->cur->loaded = true;
        s->st.loaded = true;
    }
    if (s->mode != SL_QUOTASRC_ETCD) {
        s->st.mode = s->mode;
        s->st.connected = true;
    }
    if (rc) {
        sl_quotasrc_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sl_quotasrc_free(sl_quotasrc *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->run_mu);
        s->stopping = true;
        pthread_cond_broadcast(&s->run_cv);
        pthread_mutex_unlock(&s->run_mu);
        sl_etcd_watch_stop(s->watch);
        pthread_join(s->thread, NULL);
    }
    sl_etcd_watch_free(s->watch);
    sl_etcd_free(s->etcd);
    sl_quota_tree_free(s->master);
    sl_quota_snap_unref(s->cur);
    pthread_mutex_destroy(&s->pub_mu);
    pthread_mutex_destroy(&s->st_mu);
    pthread_mutex_destroy(&s->run_mu);
    pthread_mutex_destroy(&s->reload_mu);
    pthread_cond_destroy(&s->run_cv);
    free(s->root);
    free(s->watch_prefix);
    free(s->quota_file);
    free(s);
}

int sl_quotasrc_wait_loaded(sl_quotasrc *s, int64_t timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = 0;
    pthread_mutex_lock(&s->run_mu);
    for (;;) {
        pthread_mutex_lock(&s->st_mu);
        bool loaded = s->st.loaded;
        pthread_mutex_unlock(&s->st_mu);
        if (loaded)
            break;
        if (pthread_cond_timedwait(&s->run_cv, &s->run_mu, &ts) == ETIMEDOUT) {
            pthread_mutex_lock(&s->st_mu);
            rc = s->st.loaded ? 0 : -ETIMEDOUT;
            pthread_mutex_unlock(&s->st_mu);
            break;
        }
    }
    pthread_mutex_unlock(&s->run_mu);
    return rc;
}

/* ---------------------------------------------------------------- metrics */

static void collect(void *arg, sl_metrics_sink *sink)
{
    metric_ref *r = arg;
    sl_quotasrc_status st;
    sl_quotasrc_status_get(r->s, &st);
    const char *mode = sl_quotasrc_mode_name(st.mode);
    double v = 0;
    switch (r->which) {
    case 0: v = st.loaded; break;
    case 1: v = st.connected; break;
    case 2: v = (double)st.revision; break;
    case 3: v = (double)st.entries; break;
    case 4: v = (double)st.reconnects; break;
    case 5: v = (double)st.updates; break;
    case 6: v = (double)st.load_errors; break;
    case 7: v = (double)st.invalid; break;
    case 8: v = (double)st.failovers; break;
    }
    sl_metrics_sink_emit(sink, &mode, 1, v);
}

int sl_quotasrc_register_metrics(sl_quotasrc *s, sl_metrics *m)
{
    static const struct {
        sl_metrics_type type;
        const char *name, *help;
    } defs[METRIC_COUNT] = {
        {SL_METRICS_GAUGE, "sluice_quota_source_loaded", "1 once quotas have been loaded"},
        {SL_METRICS_GAUGE, "sluice_quota_source_connected",
         "1 while the etcd watch is established (always 1 for a file)"},
        {SL_METRICS_GAUGE, "sluice_quota_source_revision", "etcd revision of the quotas in use"},
        {SL_METRICS_GAUGE, "sluice_quota_entries", "quota and group-size entries in use"},
        {SL_METRICS_COUNTER, "sluice_quota_source_reconnects_total",
         "times the etcd watch was lost and set up again"},
        {SL_METRICS_COUNTER, "sluice_quota_source_updates_total", "etcd quota events applied"},
        {SL_METRICS_COUNTER, "sluice_quota_source_load_errors_total",
         "failed etcd reads or quota file reloads"},
        {SL_METRICS_COUNTER, "sluice_quota_source_invalid_total",
         "quota entries ignored as malformed"},
        {SL_METRICS_COUNTER, "sluice_quota_source_failovers_total",
         "etcd calls that moved to another endpoint"},
    };
    for (int i = 0; i < METRIC_COUNT; i++) {
        int rc = sl_metrics_collector(m, defs[i].type, defs[i].name, defs[i].help, "source",
                                      collect, &s->metrics[i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The watched source (see watched.h): the etcd range-then-watch thread with backoff and
 * reconnect accounting, shared by every feed of one root (one thread, one watch stream); per
 * feed, the file reload, the status and the generation-checked snapshot slot.
 */
#include "config/watched.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/stopwait.h"
#include "sluice/clock.h"

/* What the feeds of one root share: the etcd client, the one thread and the one watch. */
struct sl_watched_source {
    sl_watched_mode mode;
    sl_logger *log;
    char *root;         /* without a trailing '/' */
    char *watch_prefix; /* root + "/" */
    char *file;
    int64_t backoff_min_ms, backoff_max_ms;
    _Atomic int refs;   /* the creator's and one per attached feed */

    pthread_mutex_t feeds_mu; /* the feed list; held while the thread calls into the feeds */
    sl_watched *feeds[SL_WATCHED_MAX_FEEDS];
    size_t n_feeds;
    char what[128];     /* the feeds' names, for messages: "quotas and switches" */

    sl_etcd *etcd;
    sl_etcd_watch *watch;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv; /* stop requests and "loaded" wake-ups */
    atomic_bool stopping;
    uint64_t rng;
};

/* One feed: its ranges, its callbacks, its snapshot slot and its status. */
struct sl_watched {
    sl_watched_source *src;
    char *what;
    sl_watched_range *ranges;
    size_t n_ranges;
    sl_watched_ops ops;
    void *ud;

    /* the slot */
    pthread_mutex_t pub_mu;
    void *cur;
    uint64_t cur_gen;
    _Atomic uint64_t gen;

    pthread_mutex_t st_mu;
    sl_watched_status st;

    sl_logger *log;            /* the feed's conn.log (a shared source has its own) */
    bool own_src;              /* the source is this feed's alone (started by sl_watched_start) */

    /* sl_watched_register_metrics: the collectors' arguments (one per family, which it is) */
    struct metric_arg {
        sl_watched *w;
        size_t which;
        sl_watched_stat stat;
        const char *label;
        double (*value)(void *ud, size_t i);
    } margs[SL_WATCHED_MAX_METRICS];
    size_t n_margs;
    pthread_mutex_t reload_mu; /* one file reload at a time */
};

sl_watched_mode sl_watched_mode_of(const sl_watched *w)
{
    return w->src->mode;
}

const char *sl_watched_mode_name(sl_watched_mode mode)
{
    switch (mode) {
    case SL_WATCHED_ETCD: return "etcd";
    case SL_WATCHED_FILE: return "file";
    default: return "none";
    }
}

const char *sl_watched_root(const sl_watched *w)
{
    return w->src->root;
}

const char *sl_watched_watch_prefix(const sl_watched *w)
{
    return w->src->watch_prefix;
}

sl_etcd *sl_watched_etcd(sl_watched *w)
{
    return w->src->etcd;
}

/* ---------------------------------------------------------------- the slot */

uint64_t sl_watched_publish(sl_watched *w, void *snap)
{
    pthread_mutex_lock(&w->pub_mu);
    void *old = w->cur;
    uint64_t g = w->cur_gen + 1;
    if (w->ops.stamp)
        w->ops.stamp(snap, g);
    w->cur = snap;
    w->cur_gen = g;
    atomic_store_explicit(&w->gen, g, memory_order_release);
    pthread_mutex_unlock(&w->pub_mu);
    w->ops.unref(old);

    pthread_mutex_lock(&w->st_mu);
    w->st.generation = g;
    w->st.last_change_ms = sl_wall_ms();
    pthread_mutex_unlock(&w->st_mu);
    return g;
}

void *sl_watched_read(sl_watched *w, void *held, uint64_t *generation)
{
    uint64_t g = atomic_load_explicit(&w->gen, memory_order_acquire);
    if (held && g == *generation)
        return held;
    pthread_mutex_lock(&w->pub_mu);
    void *snap = w->cur;
    w->ops.ref(snap);
    *generation = w->cur_gen;
    pthread_mutex_unlock(&w->pub_mu);
    w->ops.unref(held);
    return snap;
}

void *sl_watched_reader_read(sl_watched *w, sl_watched_reader *r)
{
    r->held = sl_watched_read(w, r->held, &r->generation);
    r->unref = w->ops.unref;
    return r->held;
}

void sl_watched_reader_release(sl_watched_reader *r)
{
    if (r->held && r->unref)
        r->unref(r->held);
    r->held = NULL;
    r->generation = 0;
}

void *sl_watched_acquire(sl_watched *w)
{
    pthread_mutex_lock(&w->pub_mu);
    void *snap = w->cur;
    w->ops.ref(snap);
    pthread_mutex_unlock(&w->pub_mu);
    return snap;
}

/* ---------------------------------------------------------------- status */

void sl_watched_status_get(sl_watched *w, sl_watched_status *out)
{
    pthread_mutex_lock(&w->st_mu);
    *out = w->st;
    pthread_mutex_unlock(&w->st_mu);
    if (w->src->etcd) {
        out->failovers = sl_etcd_failovers(w->src->etcd);
        sl_etcd_current_endpoint(w->src->etcd, out->endpoint, sizeof out->endpoint);
    }
}

static double stat_value(sl_watched *w, sl_watched_stat stat)
{
    sl_watched_status st;
    sl_watched_status_get(w, &st);
    switch (stat) {
    case SL_WATCHED_STAT_LOADED: return st.loaded;
    case SL_WATCHED_STAT_CONNECTED: return st.connected;
    case SL_WATCHED_STAT_REVISION: return (double)st.revision;
    case SL_WATCHED_STAT_LOADS: return (double)st.loads;
    case SL_WATCHED_STAT_LOAD_ERRORS: return (double)st.load_errors;
    case SL_WATCHED_STAT_RECONNECTS: return (double)st.reconnects;
    case SL_WATCHED_STAT_UPDATES: return (double)st.updates;
    case SL_WATCHED_STAT_INVALID: return (double)st.invalid;
    case SL_WATCHED_STAT_FAILOVERS: return (double)st.failovers;
    default: return 0;
    }
}

static void collect(void *arg, sl_metrics_sink *sink)
{
    const struct metric_arg *a = arg;
    double v = a->stat == SL_WATCHED_STAT_OWN ? a->value(a->w->ud, a->which)
                                              : stat_value(a->w, a->stat);
    const char *mode = sl_watched_mode_name(a->w->src->mode);
    if (a->label)
        sl_metrics_sink_emit(sink, &mode, 1, v);
    else
        sl_metrics_sink_emit(sink, NULL, 0, v);
}

int sl_watched_register_metrics(sl_watched *w, sl_metrics *m, const sl_watched_metric *defs,
                                size_t n, const char *label, double (*value)(void *ud, size_t i))
{
    if (n > SL_WATCHED_MAX_METRICS - w->n_margs)
        return -ENOSPC;
    for (size_t i = 0; i < n; i++)
        if (defs[i].stat == SL_WATCHED_STAT_OWN && !value)
            return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        struct metric_arg *a = &w->margs[w->n_margs++];
        *a = (struct metric_arg){w, i, defs[i].stat, label, value};
        int rc = sl_metrics_collector(m, defs[i].type, defs[i].name, defs[i].help, label, collect,
                                      a);
        if (rc)
            return rc;
    }
    return 0;
}

void sl_watched_count_invalid(sl_watched *w, uint64_t n)
{
    pthread_mutex_lock(&w->st_mu);
    w->st.invalid += n;
    pthread_mutex_unlock(&w->st_mu);
}

static void set_connected(sl_watched *w, bool connected)
{
    pthread_mutex_lock(&w->st_mu);
    w->st.connected = connected;
    pthread_mutex_unlock(&w->st_mu);
}

static void status_error(sl_watched *w, const char *msg, bool load_error)
{
    pthread_mutex_lock(&w->st_mu);
    snprintf(w->st.last_error, sizeof w->st.last_error, "%s", msg);
    if (load_error)
        w->st.load_errors++;
    w->st.connected = w->src->mode != SL_WATCHED_ETCD;
    pthread_mutex_unlock(&w->st_mu);
}

static void count_reconnect(sl_watched *w)
{
    pthread_mutex_lock(&w->st_mu);
    w->st.reconnects++;
    pthread_mutex_unlock(&w->st_mu);
}

/* A load succeeded: count it and wake sl_watched_wait_loaded(). */
static void loaded(sl_watched *w, int64_t revision)
{
    pthread_mutex_lock(&w->st_mu);
    w->st.loaded = true;
    w->st.loads++;
    w->st.revision = revision;
    if (w->src->mode == SL_WATCHED_FILE)
        w->st.last_error[0] = 0;
    pthread_mutex_unlock(&w->st_mu);
    pthread_mutex_lock(&w->src->run_mu);
    pthread_cond_broadcast(&w->src->run_cv);
    pthread_mutex_unlock(&w->src->run_mu);
}

/* ---------------------------------------------------------------- etcd mode */

static bool stopping(sl_watched_source *src)
{
    pthread_mutex_lock(&src->run_mu);
    bool st = src->stopping;
    pthread_mutex_unlock(&src->run_mu);
    return st;
}

/* Sleep up to ms on the real clock unless stopped. */
static void pause_ms(sl_watched_source *src, int64_t ms)
{
    sl_stopwait_ms(&src->run_mu, &src->run_cv, CLOCK_MONOTONIC, &src->stopping, ms);
}

static int64_t jitter(sl_watched_source *src, int64_t ms)
{
    /* xorshift64: spread reconnects of many daemons over [ms/2, ms] */
    src->rng ^= src->rng << 13;
    src->rng ^= src->rng >> 7;
    src->rng ^= src->rng << 17;
    return ms / 2 + (int64_t)(src->rng % (uint64_t)(ms / 2 + 1));
}

/* One feed's full load: its ranges, then its load callback. */
static int feed_load(sl_watched *w, int64_t *revision)
{
    sl_watched_source *src = w->src;
    size_t pl = strlen(src->watch_prefix);
    sl_etcd_kvs *kvs = calloc(w->n_ranges, sizeof *kvs);
    if (!kvs)
        return -ENOMEM;
    int rc = 0;
    size_t done = 0;
    for (; done < w->n_ranges && !rc; done++) {
        const sl_watched_range *r = &w->ranges[done];
        size_t sl = strlen(r->suffix);
        char *key = malloc(pl + sl + 1);
        if (!key) {
            rc = -ENOMEM;
            break;
        }
        memcpy(key, src->watch_prefix, pl);
        memcpy(key + pl, r->suffix, sl + 1);
        rc = sl_etcd_range(src->etcd, key, pl + sl, r->prefix, 0, false, &kvs[done]);
        free(key);
        if (rc)
            break;
    }
    if (rc == 0) {
        *revision = kvs[0].revision; /* the earliest: the watch replays from there */
        rc = w->ops.load(w->ud, kvs, w->n_ranges, *revision);
    }
    for (size_t i = 0; i < done; i++)
        sl_etcd_kvs_free(&kvs[i]);
    free(kvs);
    if (rc == 0)
        loaded(w, *revision);
    return rc;
}

/* Every feed's full load, with feeds_mu held. The watch starts after the earliest revision: a
 * feed that loaded later sees again events it already holds, and applying them in order ends in
 * the state it read (a put of the value it has, a delete of a key it lacks). */
static int full_load(sl_watched_source *src, int64_t *revision)
{
    int64_t earliest = 0;
    for (size_t i = 0; i < src->n_feeds; i++) {
        int64_t rev = 0;
        int rc = feed_load(src->feeds[i], &rev);
        if (rc)
            return rc;
        if (i == 0 || rev < earliest)
            earliest = rev;
    }
    *revision = earliest;
    return 0;
}

typedef struct watch_ctx {
    sl_watched_source *src;
    int64_t revision;
    bool created;
} watch_ctx;

static void set_connected_all(sl_watched_source *src, bool connected)
{
    pthread_mutex_lock(&src->feeds_mu);
    for (size_t i = 0; i < src->n_feeds; i++)
        set_connected(src->feeds[i], connected);
    pthread_mutex_unlock(&src->feeds_mu);
}

/* One watch message for every feed: each applies the events under its own keys. */
static int on_watch(void *ud, const sl_etcd_watch_msg *msg)
{
    watch_ctx *wc = ud;
    sl_watched_source *src = wc->src;
    if (msg->created && !wc->created) {
        wc->created = true;
        set_connected_all(src, true);
        char ep[128];
        sl_log_info(src->log, "etcd watch established endpoint=%s prefix=%s revision=%lld what=%s",
                    sl_etcd_current_endpoint(src->etcd, ep, sizeof ep), src->watch_prefix,
                    (long long)wc->revision, src->what);
    }
    if (msg->revision > wc->revision)
        wc->revision = msg->revision;
    if (msg->n_events == 0)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&src->feeds_mu);
    for (size_t i = 0; i < src->n_feeds && !rc; i++) {
        sl_watched *w = src->feeds[i];
        int n = w->ops.events(w->ud, msg->events, msg->n_events, wc->revision);
        if (n < 0) {
            sl_log_error(src->log, "cannot publish %s error=%s", w->what, strerror(-n));
            rc = n;
        } else if (n > 0) {
            pthread_mutex_lock(&w->st_mu);
            w->st.updates += (uint64_t)n;
            w->st.revision = wc->revision;
            pthread_mutex_unlock(&w->st_mu);
        }
    }
    pthread_mutex_unlock(&src->feeds_mu);
    return rc;
}

static int64_t backoff_next(sl_watched_source *src, int64_t backoff)
{
    return backoff * 2 > src->backoff_max_ms ? src->backoff_max_ms : backoff * 2;
}

static void *etcd_thread(void *arg)
{
    sl_watched_source *src = arg;
    int64_t backoff = src->backoff_min_ms;
    bool ever_connected = false, warned = false;
    char err[256];
    while (!stopping(src)) {
        int64_t rev = 0;
        pthread_mutex_lock(&src->feeds_mu);
        if (src->n_feeds == 0) { /* the last feed is leaving: it stops the thread */
            pthread_mutex_unlock(&src->feeds_mu);
            pause_ms(src, src->backoff_min_ms);
            continue;
        }
        int rc = full_load(src, &rev);
        if (rc) {
            sl_etcd_last_error(src->etcd, err, sizeof err);
            if (!err[0])
                snprintf(err, sizeof err, "%s", strerror(-rc));
            for (size_t i = 0; i < src->n_feeds; i++)
                status_error(src->feeds[i], err, true);
        } else if (ever_connected) {
            for (size_t i = 0; i < src->n_feeds; i++)
                count_reconnect(src->feeds[i]);
        }
        pthread_mutex_unlock(&src->feeds_mu);
        if (rc) {
            if (!warned) {
                sl_log_warn(src->log, "etcd unavailable, serving last known %s error=\"%s\" "
                            "retry_ms=%lld", src->what, err, (long long)backoff);
                warned = true;
            } else {
                sl_log_debug(src->log, "etcd still unavailable error=\"%s\"", err);
            }
            pause_ms(src, jitter(src, backoff));
            backoff = backoff_next(src, backoff);
            continue;
        }
        ever_connected = true;
        warned = false;
        watch_ctx wc = {.src = src, .revision = rev};
        rc = sl_etcd_watch_run(src->watch, src->watch_prefix, strlen(src->watch_prefix), true,
                               rev + 1, on_watch, &wc);
        set_connected_all(src, false);
        if (rc == -ECANCELED || stopping(src))
            break;
        sl_etcd_last_error(src->etcd, err, sizeof err);
        if (!err[0])
            snprintf(err, sizeof err, "%s", strerror(-rc));
        pthread_mutex_lock(&src->feeds_mu);
        for (size_t i = 0; i < src->n_feeds; i++)
            status_error(src->feeds[i], err, false);
        pthread_mutex_unlock(&src->feeds_mu);
        sl_log_warn(src->log, "etcd watch lost, serving last known %s revision=%lld error=\"%s\"",
                    src->what, (long long)wc.revision, err);
        if (wc.created)
            backoff = src->backoff_min_ms; /* it worked for a while: retry soon */
        pause_ms(src, jitter(src, backoff));
        if (!wc.created)
            backoff = backoff_next(src, backoff);
    }
    return NULL;
}

/* ---------------------------------------------------------------- file mode */

int sl_watched_reload(sl_watched *w, char *err, size_t errlen)
{
    char local[sizeof w->st.last_error]; /* the status keeps the reason even if nobody asks */
    if (!err || errlen == 0)
        err = local, errlen = sizeof local;
    err[0] = 0;
    if (w->src->mode == SL_WATCHED_ETCD) {
        snprintf(err, errlen, "%s come from etcd and are watched: nothing to reload", w->what);
        return -EOPNOTSUPP;
    }
    if (w->src->mode == SL_WATCHED_NONE)
        return 0;
    pthread_mutex_lock(&w->reload_mu);
    int rc = w->ops.load_file(w->ud, w->src->file, err, errlen);
    if (rc == 0) {
        loaded(w, 0);
    } else {
        if (!err[0])
            snprintf(err, errlen, "%s", strerror(-rc));
        status_error(w, err, true);
    }
    pthread_mutex_unlock(&w->reload_mu);
    return rc;
}

int sl_watched_reload_logged(sl_watched *w, const char *failed, char *err, size_t errlen)
{
    char buf[256];
    if (!err || errlen == 0)
        err = buf, errlen = sizeof buf; /* for the log line */
    int rc = sl_watched_reload(w, err, errlen);
    if (rc && rc != -EOPNOTSUPP)
        sl_log_error(w->log, "%s error=\"%s\"", failed, err);
    return rc;
}

/* ---------------------------------------------------------------- lifecycle */

static void source_stop(sl_watched_source *src)
{
    if (!src->thread_started)
        return;
    pthread_mutex_lock(&src->run_mu);
    src->stopping = true;
    pthread_cond_broadcast(&src->run_cv);
    pthread_mutex_unlock(&src->run_mu);
    sl_etcd_watch_stop(src->watch);
    pthread_join(src->thread, NULL);
    src->thread_started = false;
}

static void source_unref(sl_watched_source *src)
{
    if (!src || atomic_fetch_sub(&src->refs, 1) != 1)
        return;
    source_stop(src);
    sl_etcd_watch_free(src->watch);
    sl_etcd_free(src->etcd);
    pthread_mutex_destroy(&src->feeds_mu);
    pthread_mutex_destroy(&src->run_mu);
    pthread_cond_destroy(&src->run_cv);
    free(src->root);
    free(src->watch_prefix);
    free(src->file);
    free(src);
}

int sl_watched_source_new(const sl_watched_conn *cfg, sl_watched_source **out)
{
    sl_watched_source *src = calloc(1, sizeof *src);
    if (!src)
        return -ENOMEM;
    atomic_init(&src->refs, 1);
    src->log = cfg->log;
    src->backoff_min_ms = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : 100;
    src->backoff_max_ms = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 5000;
    if (src->backoff_max_ms < src->backoff_min_ms)
        src->backoff_max_ms = src->backoff_min_ms;
    src->rng = (uint64_t)sl_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)src;
    if (!src->rng)
        src->rng = 1;
    pthread_mutex_init(&src->feeds_mu, NULL);
    pthread_mutex_init(&src->run_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&src->run_cv, &ca);
    pthread_condattr_destroy(&ca);

    const char *prefix = cfg->prefix ? cfg->prefix : "/sluice";
    size_t pl = strlen(prefix);
    while (pl && prefix[pl - 1] == '/')
        pl--;
    src->root = strndup(prefix, pl);
    src->watch_prefix = malloc(pl + 2);
    if (!src->root || !src->watch_prefix) {
        source_unref(src);
        return -ENOMEM;
    }
    memcpy(src->watch_prefix, src->root, pl);
    src->watch_prefix[pl] = '/';
    src->watch_prefix[pl + 1] = 0;

    int rc = 0;
    if (cfg->n_endpoints > 0) {
        src->mode = SL_WATCHED_ETCD;
        sl_etcd_config ec = {.endpoints = cfg->etcd_endpoints,
                             .n_endpoints = cfg->n_endpoints,
                             .connect_timeout_ms = cfg->connect_timeout_ms,
                             .request_timeout_ms = cfg->request_timeout_ms,
                             .tls = cfg->etcd_tls};
        rc = sl_etcd_new(&ec, &src->etcd);
        if (rc == 0)
            rc = sl_etcd_watch_new(src->etcd, &src->watch);
    } else if (cfg->file && cfg->file[0]) {
        src->mode = SL_WATCHED_FILE;
        src->file = strdup(cfg->file);
        if (!src->file)
            rc = -ENOMEM;
    } else {
        src->mode = SL_WATCHED_NONE;
    }
    if (rc) {
        source_unref(src);
        return rc;
    }
    *out = src;
    return 0;
}

int sl_watched_source_start(sl_watched_source *src)
{
    int rc = 0;
    pthread_mutex_lock(&src->feeds_mu); /* attach() reads thread_started under it */
    if (src->mode == SL_WATCHED_ETCD && !src->thread_started) {
        rc = -pthread_create(&src->thread, NULL, etcd_thread, src);
        src->thread_started = rc == 0;
    }
    pthread_mutex_unlock(&src->feeds_mu);
    return rc;
}

void sl_watched_source_free(sl_watched_source *src)
{
    source_unref(src);
}

sl_watched_mode sl_watched_source_mode(const sl_watched_source *src)
{
    return src->mode;
}

/* Add w to the source's feeds and take a reference. -EBUSY once the thread runs: its loads and
 * watch would not include the new feed until the next reconnect. */
static int attach(sl_watched_source *src, sl_watched *w)
{
    int rc = 0;
    pthread_mutex_lock(&src->feeds_mu);
    if (src->thread_started) {
        rc = -EBUSY;
    } else if (src->n_feeds == SL_WATCHED_MAX_FEEDS) {
        rc = -ENOSPC;
    } else {
        src->feeds[src->n_feeds++] = w;
        size_t n = 0;
        src->what[0] = 0;
        for (size_t i = 0; i < src->n_feeds && n < sizeof src->what; i++)
            n += (size_t)snprintf(src->what + n, sizeof src->what - n, "%s%s",
                                  i ? " and " : "", src->feeds[i]->what);
        atomic_fetch_add(&src->refs, 1);
        w->src = src;
    }
    pthread_mutex_unlock(&src->feeds_mu);
    return rc;
}

/* Remove w from its source's feeds (waiting out a call into it) and drop its reference: the last
 * one stops the thread. */
static void detach(sl_watched *w)
{
    sl_watched_source *src = w->src;
    if (!src)
        return;
    pthread_mutex_lock(&src->feeds_mu);
    for (size_t i = 0; i < src->n_feeds; i++) {
        if (src->feeds[i] == w) {
            memmove(&src->feeds[i], &src->feeds[i + 1],
                    (src->n_feeds - i - 1) * sizeof src->feeds[0]);
            src->n_feeds--;
            break;
        }
    }
    pthread_mutex_unlock(&src->feeds_mu);
    w->src = NULL;
    source_unref(src);
}

static const sl_watched_range whole_tree = {"", true};

int sl_watched_new(const sl_watched_config *cfg, sl_watched **out)
{
    sl_watched *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->ops = cfg->ops;
    w->ud = cfg->ud;
    w->log = cfg->conn.log;
    pthread_mutex_init(&w->pub_mu, NULL);
    pthread_mutex_init(&w->st_mu, NULL);
    pthread_mutex_init(&w->reload_mu, NULL);
    atomic_init(&w->gen, 0);
    w->what = strdup(cfg->what ? cfg->what : "configuration");
    const sl_watched_range *ranges = cfg->n_ranges ? cfg->ranges : &whole_tree;
    w->n_ranges = cfg->n_ranges ? cfg->n_ranges : 1;
    w->ranges = calloc(w->n_ranges, sizeof *w->ranges);
    if (!w->what || !w->ranges) {
        sl_watched_free(w);
        return -ENOMEM;
    }
    memcpy(w->ranges, ranges, w->n_ranges * sizeof *w->ranges);

    int rc;
    if (cfg->conn.source) {
        rc = attach(cfg->conn.source, w);
    } else {
        /* a source of its own: this feed holds the only reference */
        sl_watched_source *src;
        rc = sl_watched_source_new(&cfg->conn, &src);
        if (rc == 0) {
            rc = attach(src, w);
            source_unref(src);
            w->own_src = true;
        }
    }
    if (rc) {
        sl_watched_free(w);
        return rc;
    }
    sl_watched_mode mode = w->src->mode;
    w->st.mode = mode;
    w->st.loaded = mode == SL_WATCHED_NONE;
    w->st.connected = mode != SL_WATCHED_ETCD; /* etcd: once the watch is up */
    if (mode == SL_WATCHED_FILE)
        snprintf(w->st.endpoint, sizeof w->st.endpoint, "%s", w->src->file);
    *out = w;
    return 0;
}

int sl_watched_start(sl_watched *w)
{
    if (w->src->mode == SL_WATCHED_FILE)
        return sl_watched_reload(w, NULL, 0);
    if (w->src->mode != SL_WATCHED_ETCD || !w->own_src)
        return 0; /* a shared source is started by its owner, once every feed is attached */
    return sl_watched_source_start(w->src);
}

void sl_watched_free(sl_watched *w)
{
    if (!w)
        return;
    detach(w); /* the thread no longer calls into w; the last feed stops it */
    if (w->ops.unref)
        w->ops.unref(w->cur);
    pthread_mutex_destroy(&w->pub_mu);
    pthread_mutex_destroy(&w->st_mu);
    pthread_mutex_destroy(&w->reload_mu);
    free(w->what);
    free(w->ranges);
    free(w);
}

int sl_watched_wait_loaded(sl_watched *w, int64_t timeout_ms)
{
    sl_watched_source *src = w->src;
    struct timespec ts;
    sl_stopwait_deadline(&ts, CLOCK_MONOTONIC, timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&src->run_mu);
    for (;;) {
        pthread_mutex_lock(&w->st_mu);
        bool ok = w->st.loaded;
        pthread_mutex_unlock(&w->st_mu);
        if (ok)
            break;
        if (pthread_cond_timedwait(&src->run_cv, &src->run_mu, &ts) == ETIMEDOUT) {
            pthread_mutex_lock(&w->st_mu);
            rc = w->st.loaded ? 0 : -ETIMEDOUT;
            pthread_mutex_unlock(&w->st_mu);
            break;
        }
    }
    pthread_mutex_unlock(&src->run_mu);
    return rc;
}

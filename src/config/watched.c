/*
 * The watched source (see watched.h): the etcd range-then-watch thread with backoff and
 * reconnect accounting, the file reload, the stop flag, the status, and the generation-checked
 * snapshot slot.
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

#include "sluice/clock.h"

struct sl_watched {
    sl_watched_mode mode;
    sl_logger *log;
    char *root;         /* without a trailing '/' */
    char *watch_prefix; /* root + "/" */
    char *file;
    char *what;
    sl_watched_range *ranges;
    size_t n_ranges;
    int64_t backoff_min_ms, backoff_max_ms;
    sl_watched_ops ops;
    void *ud;

    /* the slot */
    pthread_mutex_t pub_mu;
    void *cur;
    uint64_t cur_gen;
    _Atomic uint64_t gen;

    pthread_mutex_t st_mu;
    sl_watched_status st;

    sl_etcd *etcd;
    sl_etcd_watch *watch;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t run_mu;
    pthread_cond_t run_cv; /* stop requests and "loaded" wake-ups */
    bool stopping;
    uint64_t rng;

    pthread_mutex_t reload_mu; /* one file reload at a time */
};

sl_watched_mode sl_watched_mode_of(const sl_watched *w)
{
    return w->mode;
}

const char *sl_watched_root(const sl_watched *w)
{
    return w->root;
}

const char *sl_watched_watch_prefix(const sl_watched *w)
{
    return w->watch_prefix;
}

sl_etcd *sl_watched_etcd(sl_watched *w)
{
    return w->etcd;
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
    if (w->etcd) {
        out->failovers = sl_etcd_failovers(w->etcd);
        sl_etcd_current_endpoint(w->etcd, out->endpoint, sizeof out->endpoint);
    }
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
    w->st.connected = w->mode != SL_WATCHED_ETCD;
    pthread_mutex_unlock(&w->st_mu);
}

/* A load succeeded: count it and wake sl_watched_wait_loaded(). */
static void loaded(sl_watched *w, int64_t revision)
{
    pthread_mutex_lock(&w->st_mu);
    w->st.loaded = true;
    w->st.loads++;
    w->st.revision = revision;
    if (w->mode == SL_WATCHED_FILE)
        w->st.last_error[0] = 0;
    pthread_mutex_unlock(&w->st_mu);
    pthread_mutex_lock(&w->run_mu);
    pthread_cond_broadcast(&w->run_cv);
    pthread_mutex_unlock(&w->run_mu);
}

/* ---------------------------------------------------------------- etcd mode */

static void deadline_after(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static bool stopping(sl_watched *w)
{
    pthread_mutex_lock(&w->run_mu);
    bool st = w->stopping;
    pthread_mutex_unlock(&w->run_mu);
    return st;
}

/* Sleep up to ms on the real clock unless stopped. */
static void pause_ms(sl_watched *w, int64_t ms)
{
    struct timespec ts;
    deadline_after(&ts, ms);
    pthread_mutex_lock(&w->run_mu);
    while (!w->stopping && pthread_cond_timedwait(&w->run_cv, &w->run_mu, &ts) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&w->run_mu);
}

static int64_t jitter(sl_watched *w, int64_t ms)
{
    /* xorshift64: spread reconnects of many daemons over [ms/2, ms] */
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return ms / 2 + (int64_t)(w->rng % (uint64_t)(ms / 2 + 1));
}

static int full_load(sl_watched *w, int64_t *revision)
{
    size_t pl = strlen(w->watch_prefix);
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
        memcpy(key, w->watch_prefix, pl);
        memcpy(key + pl, r->suffix, sl + 1);
        rc = sl_etcd_range(w->etcd, key, pl + sl, r->prefix, 0, false, &kvs[done]);
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

typedef struct watch_ctx {
    sl_watched *w;
    int64_t revision;
    bool created;
} watch_ctx;

static int on_watch(void *ud, const sl_etcd_watch_msg *msg)
{
    watch_ctx *wc = ud;
    sl_watched *w = wc->w;
    if (msg->created && !wc->created) {
        wc->created = true;
        set_connected(w, true);
        char ep[128];
        sl_log_info(w->log, "etcd watch established endpoint=%s prefix=%s revision=%lld what=%s",
                    sl_etcd_current_endpoint(w->etcd, ep, sizeof ep), w->watch_prefix,
                    (long long)wc->revision, w->what);
    }
    if (msg->revision > wc->revision)
        wc->revision = msg->revision;
    if (msg->n_events == 0)
        return 0;
    int n = w->ops.events(w->ud, msg->events, msg->n_events, wc->revision);
    if (n < 0) {
        sl_log_error(w->log, "cannot publish %s error=%s", w->what, strerror(-n));
        return n;
    }
    if (n > 0) {
        pthread_mutex_lock(&w->st_mu);
        w->st.updates += (uint64_t)n;
        w->st.revision = wc->revision;
        pthread_mutex_unlock(&w->st_mu);
    }
    return 0;
}

static int64_t backoff_next(sl_watched *w, int64_t backoff)
{
    return backoff * 2 > w->backoff_max_ms ? w->backoff_max_ms : backoff * 2;
}

static void *etcd_thread(void *arg)
{
    sl_watched *w = arg;
    int64_t backoff = w->backoff_min_ms;
    bool ever_connected = false, warned = false;
    char err[256];
    while (!stopping(w)) {
        int64_t rev = 0;
        int rc = full_load(w, &rev);
        if (rc) {
            sl_etcd_last_error(w->etcd, err, sizeof err);
            if (!err[0])
                snprintf(err, sizeof err, "%s", strerror(-rc));
            status_error(w, err, true);
            if (!warned) {
                sl_log_warn(w->log, "etcd unavailable, serving last known %s error=\"%s\" "
                            "retry_ms=%lld", w->what, err, (long long)backoff);
                warned = true;
            } else {
                sl_log_debug(w->log, "etcd still unavailable error=\"%s\"", err);
            }
            pause_ms(w, jitter(w, backoff));
            backoff = backoff_next(w, backoff);
            continue;
        }
        if (ever_connected) {
            pthread_mutex_lock(&w->st_mu);
            w->st.reconnects++;
            pthread_mutex_unlock(&w->st_mu);
        }
        ever_connected = true;
        warned = false;
        watch_ctx wc = {.w = w, .revision = rev};
        rc = sl_etcd_watch_run(w->watch, w->watch_prefix, strlen(w->watch_prefix), true, rev + 1,
                               on_watch, &wc);
        set_connected(w, false);
        if (rc == -ECANCELED || stopping(w))
            break;
        sl_etcd_last_error(w->etcd, err, sizeof err);
        if (!err[0])
            snprintf(err, sizeof err, "%s", strerror(-rc));
        status_error(w, err, false);
        sl_log_warn(w->log, "etcd watch lost, serving last known %s revision=%lld error=\"%s\"",
                    w->what, (long long)wc.revision, err);
        if (wc.created)
            backoff = w->backoff_min_ms; /* it worked for a while: retry soon */
        pause_ms(w, jitter(w, backoff));
        if (!wc.created)
            backoff = backoff_next(w, backoff);
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
    if (w->mode == SL_WATCHED_ETCD) {
        snprintf(err, errlen, "%s come from etcd and are watched: nothing to reload", w->what);
        return -EOPNOTSUPP;
    }
    if (w->mode == SL_WATCHED_NONE)
        return 0;
    pthread_mutex_lock(&w->reload_mu);
    int rc = w->ops.load_file(w->ud, w->file, err, errlen);
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

/* ---------------------------------------------------------------- lifecycle */

static const sl_watched_range whole_tree = {"", true};

int sl_watched_new(const sl_watched_config *cfg, sl_watched **out)
{
    sl_watched *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->log = cfg->log;
    w->ops = cfg->ops;
    w->ud = cfg->ud;
    w->backoff_min_ms = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : 100;
    w->backoff_max_ms = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 5000;
    if (w->backoff_max_ms < w->backoff_min_ms)
        w->backoff_max_ms = w->backoff_min_ms;
    w->rng = (uint64_t)sl_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)w;
    if (!w->rng)
        w->rng = 1;
    pthread_mutex_init(&w->pub_mu, NULL);
    pthread_mutex_init(&w->st_mu, NULL);
    pthread_mutex_init(&w->run_mu, NULL);
    pthread_mutex_init(&w->reload_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->run_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&w->gen, 0);

    const char *prefix = cfg->prefix ? cfg->prefix : "/sluice";
    size_t pl = strlen(prefix);
    while (pl && prefix[pl - 1] == '/')
        pl--;
    w->root = strndup(prefix, pl);
    w->watch_prefix = malloc(pl + 2);
    w->what = strdup(cfg->what ? cfg->what : "configuration");
    const sl_watched_range *ranges = cfg->n_ranges ? cfg->ranges : &whole_tree;
    w->n_ranges = cfg->n_ranges ? cfg->n_ranges : 1;
    w->ranges = calloc(w->n_ranges, sizeof *w->ranges);
    if (!w->root || !w->watch_prefix || !w->what || !w->ranges) {
        sl_watched_free(w);
        return -ENOMEM;
    }
    memcpy(w->ranges, ranges, w->n_ranges * sizeof *w->ranges);
    memcpy(w->watch_prefix, w->root, pl);
    w->watch_prefix[pl] = '/';
    w->watch_prefix[pl + 1] = 0;

    int rc = 0;
    if (cfg->n_endpoints > 0) {
        w->mode = SL_WATCHED_ETCD;
        sl_etcd_config ec = {.endpoints = cfg->etcd_endpoints,
                             .n_endpoints = cfg->n_endpoints,
                             .connect_timeout_ms = cfg->connect_timeout_ms,
                             .request_timeout_ms = cfg->request_timeout_ms};
        rc = sl_etcd_new(&ec, &w->etcd);
        if (rc == 0)
            rc = sl_etcd_watch_new(w->etcd, &w->watch);
    } else if (cfg->file && cfg->file[0]) {
        w->mode = SL_WATCHED_FILE;
        w->file = strdup(cfg->file);
        if (!w->file)
            rc = -ENOMEM;
        else
            snprintf(w->st.endpoint, sizeof w->st.endpoint, "%s", w->file);
    } else {
        w->mode = SL_WATCHED_NONE;
        w->st.loaded = true;
    }
    w->st.mode = w->mode;
    w->st.connected = w->mode != SL_WATCHED_ETCD; /* etcd: once the watch is up */
    if (rc) {
        sl_watched_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int sl_watched_start(sl_watched *w)
{
    if (w->mode == SL_WATCHED_FILE)
        return sl_watched_reload(w, NULL, 0);
    if (w->mode != SL_WATCHED_ETCD || w->thread_started)
        return 0;
    int rc = -pthread_create(&w->thread, NULL, etcd_thread, w);
    w->thread_started = rc == 0;
    return rc;
}

void sl_watched_free(sl_watched *w)
{
    if (!w)
        return;
    if (w->thread_started) {
        pthread_mutex_lock(&w->run_mu);
        w->stopping = true;
        pthread_cond_broadcast(&w->run_cv);
        pthread_mutex_unlock(&w->run_mu);
        sl_etcd_watch_stop(w->watch);
        pthread_join(w->thread, NULL);
    }
    sl_etcd_watch_free(w->watch);
    sl_etcd_free(w->etcd);
    if (w->ops.unref)
        w->ops.unref(w->cur);
    pthread_mutex_destroy(&w->pub_mu);
    pthread_mutex_destroy(&w->st_mu);
    pthread_mutex_destroy(&w->run_mu);
    pthread_mutex_destroy(&w->reload_mu);
    pthread_cond_destroy(&w->run_cv);
    free(w->root);
    free(w->watch_prefix);
    free(w->file);
    free(w->what);
    free(w->ranges);
    free(w);
}

int sl_watched_wait_loaded(sl_watched *w, int64_t timeout_ms)
{
    struct timespec ts;
    deadline_after(&ts, timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&w->run_mu);
    for (;;) {
        pthread_mutex_lock(&w->st_mu);
        bool ok = w->st.loaded;
        pthread_mutex_unlock(&w->st_mu);
        if (ok)
            break;
        if (pthread_cond_timedwait(&w->run_cv, &w->run_mu, &ts) == ETIMEDOUT) {
            pthread_mutex_lock(&w->st_mu);
            rc = w->st.loaded ? 0 : -ETIMEDOUT;
            pthread_mutex_unlock(&w->st_mu);
            break;
        }
    }
    pthread_mutex_unlock(&w->run_mu);
    return rc;
}

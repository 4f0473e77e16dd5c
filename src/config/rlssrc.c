/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The --rls-config-dir source (see rlssrc.h): a directory read into an sl_rlsconf, published
 * through a file-mode sl_watched feed (its status, its RCU slot, one reload at a time), and a
 * polling thread that reloads when the directory's signature changes.
 */
#include "config/rlssrc.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/file.h"
#include "base/grow.h"

/* etcd mode: one key's text */
typedef struct ent {
    char *key, *text;
    size_t key_len, len;
} ent;

struct sl_rlssrc {
    sl_watched *w;
    ent *ents;          /* etcd mode: the keys under <root>/rls/ (the watch thread's alone) */
    size_t nents, capents;
    sl_logger *log;
    char *dir;
    int64_t poll_ms;
    _Atomic uint64_t sig; /* the signature of the directory at the last load (the poller reads it) */
    pthread_t thread;
    bool thread_started, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static bool wanted(const char *name)
{
    size_t n = strlen(name);
    if (name[0] == '.')
        return false;
    return (n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml"));
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The wanted names in dir, sorted (free each and the array). */
static int list_dir(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return rc;
    }
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!wanted(e->d_name))
            continue;
        if (cnt == SL_RLSSRC_MAX_FILES) {
            snprintf(err, errlen, "%s: more than %d configuration files", dir, SL_RLSSRC_MAX_FILES);
            rc = -E2BIG;
            break;
        }
        if (sl_grow(&v, &cap, cnt, 1, 16, SL_RLSSRC_MAX_FILES)) {
            rc = -ENOMEM;
            break;
        }
        if (!(v[cnt] = strdup(e->d_name))) {
            rc = -ENOMEM;
            break;
        }
        cnt++;
    }
    closedir(d);
    if (rc) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "%s: out of memory", dir);
        for (size_t i = 0; i < cnt; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    if (cnt) /* (qsort's array may not be NULL, even for 0 entries) */
        qsort(v, cnt, sizeof *v, name_cmp);
    *names = v;
    *n = cnt;
    return 0;
}

int sl_rlssrc_load_dir(const char *dir, sl_rlsconf **out, char *err, size_t errlen)
{
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir(dir, &names, &n, err, errlen);
    if (rc)
        return rc;
    sl_rlsconf *c = NULL;
    rc = sl_rlsconf_new(&c);
    for (size_t i = 0; !rc && i < n; i++) {
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) {
            snprintf(err, errlen, "%s/%s: path too long", dir, names[i]);
            rc = -ENAMETOOLONG;
            break;
        }
        char *text = NULL;
        size_t len = 0;
        rc = sl_file_read(path, SL_RLSCONF_MAX_FILE, SL_FILE_REGULAR, &text, &len, err, errlen);
        if (!rc)
            rc = sl_rlsconf_add(c, names[i], text, len, err, errlen);
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc) {
        sl_rlsconf_unref(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* A hash of the wanted files' names, sizes and modification times (0 when unreadable). */
static uint64_t signature(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    uint64_t h = 1469598103934665603ULL, sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!wanted(e->d_name))
            continue;
        char path[4096];
        struct stat st;
        uint64_t x = 1469598103934665603ULL;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
            stat(path, &st))
            continue;
        for (const char *p = e->d_name; *p; p++)
            x = (x ^ (unsigned char)*p) * 1099511628211ULL;
        x ^= (uint64_t)st.st_size * 0x9E3779B97F4A7C15ULL;
        x ^= ((uint64_t)st.st_mtim.tv_sec * 1000000000ULL + (uint64_t)st.st_mtim.tv_nsec) *
             0xC2B2AE3D27D4EB4FULL;
        x ^= (uint64_t)st.st_ino;
        sum += x; /* order-independent: readdir's order may change */
    }
    closedir(d);
    return (h ^ sum) | 1;
}

/* ---- etcd mode ----------------------------------------------------------------------------- */

#define RLS_DIR "/rls/"

static void ent_free(ent *e)
{
    free(e->key);
    free(e->text);
}

static int ent_put(sl_rlssrc *s, const char *key, size_t kl, const char *val, size_t vl)
{
    ent *e = NULL;
    for (size_t i = 0; i < s->nents && !e; i++)
        if (s->ents[i].key_len == kl && !memcmp(s->ents[i].key, key, kl))
            e = &s->ents[i];
    char *text = malloc(vl + 1);
    if (!text)
        return -ENOMEM;
    memcpy(text, val, vl);
    text[vl] = 0;
    if (!e) {
        if (s->nents == SL_RLSSRC_MAX_FILES) {
            free(text);
            return -E2BIG;
        }
        if (sl_grow(&s->ents, &s->capents, s->nents, 1, 16, SL_RLSSRC_MAX_FILES)) {
            free(text);
            return -ENOMEM;
        }
        e = &s->ents[s->nents];
        if (!(e->key = strndup(key, kl))) {
            free(text);
            return -ENOMEM;
        }
        e->key_len = kl;
        e->text = NULL;
        s->nents++;
    }
    free(e->text);
    e->text = text;
    e->len = vl;
    return 0;
}

static void ent_del(sl_rlssrc *s, const char *key, size_t kl)
{
    for (size_t i = 0; i < s->nents; i++)
        if (s->ents[i].key_len == kl && !memcmp(s->ents[i].key, key, kl)) {
            ent_free(&s->ents[i]);
            s->ents[i] = s->ents[--s->nents];
            return;
        }
}

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const ent *)a)->key, ((const ent *)b)->key);
}

/* Whether key is under <root>/rls/ (an entry of ours). */
static bool ours(sl_rlssrc *s, const char *key, size_t kl)
{
    const char *root = sl_watched_root(s->w);
    size_t rl = strlen(root);
    return kl > rl + sizeof RLS_DIR - 1 && !memcmp(key, root, rl) &&
           !memcmp(key + rl, RLS_DIR, sizeof RLS_DIR - 1);
}

/* Build the configuration from the keys and publish it; a bad one is logged and counted, and
 * the last good one stays. */
static int rebuild(sl_rlssrc *s)
{
    if (s->nents) /* (qsort's array may not be NULL, even for 0 entries) */
        qsort(s->ents, s->nents, sizeof *s->ents, ent_cmp); /* keys in name order, like files */
    size_t skip = strlen(sl_watched_root(s->w)) + 1;    /* names: "rls/<name>" */
    sl_rlsconf *c;
    char err[512] = "";
    int rc = sl_rlsconf_new(&c);
    for (size_t i = 0; !rc && i < s->nents; i++)
        rc = sl_rlsconf_add(c, s->ents[i].key + skip, s->ents[i].text, s->ents[i].len, err,
                            sizeof err);
    if (rc) {
        sl_rlsconf_unref(c);
        if (rc == -ENOMEM)
            return rc;
        sl_watched_count_invalid(s->w, 1);
        if (s->log)
            sl_log_error(s->log, "rls: the rules under %s%s do not load, keeping the last good "
                         "configuration: %s", sl_watched_root(s->w), RLS_DIR, err);
        return 0;
    }
    sl_watched_publish(s->w, c);
    if (s->log)
        sl_log_info(s->log, "rls: %zu domain(s) loaded from etcd", sl_rlsconf_domains(c));
    return 0;
}

static int on_load(void *ud, const sl_etcd_kvs *kvs, size_t n, int64_t revision)
{
    (void)n;
    (void)revision;
    sl_rlssrc *s = ud;
    for (size_t i = 0; i < s->nents; i++)
        ent_free(&s->ents[i]);
    s->nents = 0;
    for (size_t i = 0; i < kvs[0].n; i++) {
        const sl_etcd_kv *kv = &kvs[0].kvs[i];
        int rc = ours(s, kv->key, kv->key_len)
                     ? ent_put(s, kv->key, kv->key_len, kv->value, kv->value_len)
                     : 0;
        if (rc == -ENOMEM)
            return rc;
        if (rc)
            sl_watched_count_invalid(s->w, 1);
    }
    return rebuild(s);
}

static int on_events(void *ud, const sl_etcd_event *ev, size_t n, int64_t revision)
{
    (void)revision;
    sl_rlssrc *s = ud;
    int applied = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_etcd_kv *kv = &ev[i].kv;
        if (!ours(s, kv->key, kv->key_len))
            continue;
        applied++;
        if (ev[i].type != SL_ETCD_PUT) {
            ent_del(s, kv->key, kv->key_len);
            continue;
        }
        int rc = ent_put(s, kv->key, kv->key_len, kv->value, kv->value_len);
        if (rc == -ENOMEM)
            return rc; /* the watch ends; the full load that follows catches up */
        if (rc)
            sl_watched_count_invalid(s->w, 1);
    }
    if (!applied)
        return 0;
    int rc = rebuild(s);
    return rc ? rc : applied;
}

/* ---- the feed ------------------------------------------------------------------------------ */

static void snap_ref(void *p)
{
    sl_rlsconf_ref(p);
}

static void snap_unref(void *p)
{
    sl_rlsconf_unref(p);
}

static int load_file(void *ud, const char *path, char *err, size_t errlen)
{
    sl_rlssrc *s = ud;
    uint64_t sig = signature(path);
    sl_rlsconf *c;
    int rc = sl_rlssrc_load_dir(path, &c, err, errlen);
    s->sig = sig; /* a broken state is not retried until it changes again */
    if (rc)
        return rc;
    sl_watched_publish(s->w, c);
    return 0;
}

int sl_rlssrc_reload(sl_rlssrc *s, char *err, size_t errlen)
{
    int rc = sl_watched_reload(s->w, err, errlen);
    if (s->log) {
        if (rc == -EOPNOTSUPP)
            sl_log_info(s->log, "rls: rules come from etcd and reload by themselves");
        else if (rc)
            sl_log_error(s->log, "rls: reload of %s failed, keeping the last good configuration: %s",
                         s->dir, err);
        else
            sl_log_info(s->log, "rls: %s read again", s->dir);
    }
    return rc;
}

static void *poll_main(void *arg)
{
    sl_rlssrc *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += s->poll_ms / 1000;
        ts.tv_nsec += (s->poll_ms % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        if (s->stop)
            break;
        pthread_mutex_unlock(&s->mu);
        if (signature(s->dir) != s->sig) {
            char err[512];
            sl_rlssrc_reload(s, err, sizeof err);
        }
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sl_rlssrc_new(const sl_rlssrc_config *cfg, sl_rlssrc **out, char *err, size_t errlen)
{
    sl_rlssrc *s = calloc(1, sizeof *s);
    const sl_watched_conn *conn = &cfg->conn;
    if (!s || !(s->dir = strdup(conn->source ? "etcd" : conn->file))) {
        free(s);
        return -ENOMEM;
    }
    s->log = conn->log;
    s->poll_ms = cfg->poll_ms;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    static const sl_watched_range ranges[] = {{"rls/", true}};
    sl_watched_config wc = {
        .conn = {.source = conn->source, .file = conn->source ? NULL : s->dir, .log = conn->log},
        .ranges = conn->source ? ranges : NULL,
        .n_ranges = conn->source ? 1 : 0,
        .what = "rls",
        .ops = {.ref = snap_ref, .unref = snap_unref, .load_file = load_file, .load = on_load,
                .events = on_events},
        .ud = s,
    };
    if (errlen)
        err[0] = 0;
    int rc = sl_watched_new(&wc, &s->w);
    if (!rc && !conn->source) /* file mode: the first load (sl_watched_start's), with its reason */
        rc = sl_watched_reload(s->w, err, errlen);
    if (!rc && s->poll_ms > 0 && !conn->source) {
        rc = -pthread_create(&s->thread, NULL, poll_main, s);
        s->thread_started = rc == 0;
    }
    if (rc) {
        if (errlen && !err[0])
            snprintf(err, errlen, "%s: %s", conn->file, strerror(-rc));
        sl_rlssrc_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sl_rlssrc_free(sl_rlssrc *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    sl_watched_free(s->w); /* the watch thread no longer calls into s */
    for (size_t i = 0; i < s->nents; i++)
        ent_free(&s->ents[i]);
    free(s->ents);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->dir);
    free(s);
}

const sl_rlsconf *sl_rlssrc_read(sl_rlssrc *s, sl_rlssrc_reader *r)
{
    return sl_watched_reader_read(s->w, r);
}

void sl_rlssrc_reader_release(sl_rlssrc_reader *r)
{
    sl_watched_reader_release(r);
}

void sl_rlssrc_status_get(sl_rlssrc *s, sl_watched_status *out)
{
    sl_watched_status_get(s->w, out);
}

/* ---- metrics ------------------------------------------------------------------------------- */

/* The one family that is not the feed's status: the domains serving now. */
static double domains_value(void *ud, size_t which)
{
    (void)which;
    sl_rlssrc *s = ud;
    sl_rlsconf *c = sl_watched_acquire(s->w);
    double v = (double)sl_rlsconf_domains(c);
    sl_rlsconf_unref(c);
    return v;
}

int sl_rlssrc_register_metrics(sl_rlssrc *s, sl_metrics *metrics)
{
    static const sl_watched_metric defs[] = {
        {SL_METRICS_GAUGE, "sluice_rls_config_domains",
         "Domains in the --rls-config-dir configuration serving now.", SL_WATCHED_STAT_OWN},
        {SL_METRICS_COUNTER, "sluice_rls_config_loads_total",
         "Loads of --rls-config-dir that succeeded (start, changes, SIGHUP).",
         SL_WATCHED_STAT_LOADS},
        {SL_METRICS_COUNTER, "sluice_rls_config_load_errors_total",
         "Loads of --rls-config-dir that failed (the last good configuration kept serving).",
         SL_WATCHED_STAT_LOAD_ERRORS},
    };
    if (!metrics)
        return 0;
    return sl_watched_register_metrics(s->w, metrics, defs, sizeof defs / sizeof defs[0], NULL,
                                       domains_value);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The quota source (see quotasrc.h): what a quota snapshot is built from. The watcher thread, the
 * file reload, the status and the publication to request threads are config/watched.c's.
 */
#include "config/quotasrc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config/quotafile.h"
#include "config/watched.h"
#include "sluice/clock.h"

struct sl_quotasrc {
    sl_watched *w;
    sl_logger *log;
    size_t max_entries;
    sl_quota_tree *master;   /* etcd mode: owned by the watcher thread */
    _Atomic size_t entries;  /* in the current snapshot */
};

const char *sl_quotasrc_mode_name(sl_quotasrc_mode mode)
{
    return sl_watched_mode_name(mode);
}

/* ---------------------------------------------------------------- publication */

static void snap_ref(void *p)
{
    sl_quota_snap_ref(p);
}

static void snap_unref(void *p)
{
    sl_quota_snap_unref(p);
}

static void snap_stamp(void *p, uint64_t generation)
{
    ((sl_quota_snap *)p)->generation = generation;
}

/* Wrap `tree` (always taken) in a snapshot and publish it. */
static int publish(sl_quotasrc *s, sl_quota_tree *tree, bool loaded, int64_t revision,
                   int64_t at_ms)
{
    size_t entries = sl_quota_tree_count(tree);
    sl_quota_snap *snap;
    int rc = sl_quota_snap_new(tree, loaded, revision, at_ms, &snap);
    if (rc)
        return rc;
    atomic_store(&s->entries, entries);
    sl_watched_publish(s->w, snap);
    return 0;
}

const sl_quota_snap *sl_quotasrc_read(sl_quotasrc *s, sl_quotasrc_reader *r)
{
    return sl_watched_reader_read(s->w, r);
}

void sl_quotasrc_reader_release(sl_quotasrc_reader *r)
{
    sl_watched_reader_release(r);
}

sl_quota_snap *sl_quotasrc_acquire(sl_quotasrc *s)
{
    return sl_watched_acquire(s->w);
}

void sl_quotasrc_status_get(sl_quotasrc *s, sl_quotasrc_status *out)
{
    sl_watched_status ws;
    sl_watched_status_get(s->w, &ws);
    memset(out, 0, sizeof *out);
    out->mode = ws.mode;
    out->loaded = ws.loaded;
    out->connected = ws.connected;
    out->revision = ws.revision;
    out->entries = atomic_load(&s->entries);
    out->generation = ws.generation;
    out->loads = ws.loads;
    out->load_errors = ws.load_errors;
    out->reconnects = ws.reconnects;
    out->updates = ws.updates;
    out->invalid = ws.invalid;
    out->failovers = ws.failovers;
    out->last_change_ms = ws.last_change_ms;
    memcpy(out->endpoint, ws.endpoint, sizeof out->endpoint);
    memcpy(out->last_error, ws.last_error, sizeof out->last_error);
}

/* ---------------------------------------------------------------- etcd mode */

/* Apply one etcd put to the master tree; log and count malformed entries. */
static void apply_put(sl_quotasrc *s, sl_quota_tree *t, const sl_etcd_kv *kv)
{
    const char *err = NULL;
    int rc = sl_quota_tree_apply_put(t, sl_watched_root(s->w), kv->key, kv->key_len, kv->value,
                                     kv->value_len, &err);
    if (rc == 0 || rc == -ENOENT)
        return;
    sl_watched_count_invalid(s->w, 1);
    sl_log_warn(s->log, "quota entry ignored key=%.*s error=\"%s\" value=%.*s",
                (int)(kv->key_len > 512 ? 512 : kv->key_len), kv->key, err ? err : "invalid",
                (int)(kv->value_len > 256 ? 256 : kv->value_len), kv->value);
}

static int on_load(void *ud, const sl_etcd_kvs *kvs, size_t n, int64_t revision)
{
    (void)n;
    sl_quotasrc *s = ud;
    sl_quota_tree *t, *pub;
    int rc = sl_quota_tree_new(s->max_entries, &t);
    if (rc)
        return rc;
    for (size_t i = 0; i < kvs[0].n; i++)
        apply_put(s, t, &kvs[0].kvs[i]);
    rc = sl_quota_tree_clone(t, &pub);
    if (rc == 0)
        rc = publish(s, pub, true, revision, sl_wall_ms());
    if (rc) {
        sl_quota_tree_free(t);
        return rc;
    }
    sl_quota_tree_free(s->master);
    s->master = t;
    char ep[128];
    sl_log_info(s->log, "quotas loaded from etcd endpoint=%s revision=%lld entries=%zu",
                sl_etcd_current_endpoint(sl_watched_etcd(s->w), ep, sizeof ep),
                (long long)revision, sl_quota_tree_count(t));
    return 0;
}

static int on_events(void *ud, const sl_etcd_event *ev, size_t n, int64_t revision)
{
    sl_quotasrc *s = ud;
    const char *root = sl_watched_root(s->w);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == SL_ETCD_PUT)
            apply_put(s, s->master, &ev[i].kv);
        else
            sl_quota_tree_apply_delete(s->master, root, ev[i].kv.key, ev[i].kv.key_len);
    }
    sl_quota_tree *pub;
    int rc = sl_quota_tree_clone(s->master, &pub);
    if (rc == 0)
        rc = publish(s, pub, true, revision, sl_wall_ms());
    if (rc)
        return rc; /* out of memory: the watch ends and the full reload catches up */
    sl_log_debug(s->log, "quotas updated events=%zu revision=%lld entries=%zu", n,
                 (long long)revision, sl_quota_tree_count(s->master));
    return (int)n;
}

/* ---------------------------------------------------------------- file mode */

static int on_load_file(void *ud, const char *path, char *err, size_t errlen)
{
    sl_quotasrc *s = ud;
    sl_quota_tree *t;
    int rc = sl_quota_tree_new(s->max_entries, &t);
    if (rc)
        return rc;
    rc = sl_quotafile_load(path, t, err, errlen);
    if (rc) {
        sl_quota_tree_free(t);
        return rc;
    }
    size_t n = sl_quota_tree_count(t);
    rc = publish(s, t, true, 0, sl_wall_ms());
    if (rc == 0)
        sl_log_info(s->log, "quota file loaded path=%s entries=%zu", path, n);
    return rc;
}

int sl_quotasrc_reload(sl_quotasrc *s, char *err, size_t errlen)
{
    return sl_watched_reload_logged(s->w, "quota file not loaded, keeping the current quotas", err,
                                    errlen);
}

/* ---------------------------------------------------------------- lifecycle */

int sl_quotasrc_new(const sl_quotasrc_config *cfg, sl_quotasrc **out)
{
    sl_quotasrc *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->log = cfg->conn.log;
    s->max_entries = cfg->max_entries;
    atomic_init(&s->entries, 0);
    sl_watched_config wc = {
        .conn = cfg->conn,
        .what = "quotas",
        .ops = {.ref = snap_ref, .unref = snap_unref, .stamp = snap_stamp, .load = on_load,
                .events = on_events, .load_file = on_load_file},
        .ud = s,
    };
    int rc = sl_watched_new(&wc, &s->w);
    if (rc) {
        free(s);
        return rc;
    }
    /* The first snapshot: empty and not loaded, or empty and loaded when there is no source. */
    sl_quota_tree *t;
    rc = sl_quota_tree_new(s->max_entries, &t);
    if (rc == 0)
        rc = publish(s, t, sl_watched_mode_of(s->w) == SL_WATCHED_NONE, 0, 0);
    if (rc == 0 && sl_watched_mode_of(s->w) == SL_WATCHED_ETCD)
        rc = sl_quota_tree_new(s->max_entries, &s->master);
    if (rc == 0)
        rc = sl_watched_start(s->w);
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
    sl_watched_free(s->w); /* stops the thread, which owns master until then */
    sl_quota_tree_free(s->master);
    free(s);
}

int sl_quotasrc_wait_loaded(sl_quotasrc *s, int64_t timeout_ms)
{
    return sl_watched_wait_loaded(s->w, timeout_ms);
}

/* ---------------------------------------------------------------- metrics */

/* The one family that is not the feed's status: the entries in the current snapshot. */
static double entries_value(void *ud, size_t which)
{
    (void)which;
    sl_quotasrc *s = ud;
    return (double)atomic_load(&s->entries);
}

int sl_quotasrc_register_metrics(sl_quotasrc *s, sl_metrics *m)
{
    static const sl_watched_metric defs[] = {
        {SL_METRICS_GAUGE, "sluice_quota_source_loaded", "1 once quotas have been loaded",
         SL_WATCHED_STAT_LOADED},
        {SL_METRICS_GAUGE, "sluice_quota_source_connected",
         "1 while the etcd watch is established (always 1 for a file)", SL_WATCHED_STAT_CONNECTED},
        {SL_METRICS_GAUGE, "sluice_quota_source_revision", "etcd revision of the quotas in use",
         SL_WATCHED_STAT_REVISION},
        {SL_METRICS_GAUGE, "sluice_quota_entries", "quota and group-size entries in use",
         SL_WATCHED_STAT_OWN},
        {SL_METRICS_COUNTER, "sluice_quota_source_reconnects_total",
         "times the etcd watch was lost and set up again", SL_WATCHED_STAT_RECONNECTS},
        {SL_METRICS_COUNTER, "sluice_quota_source_updates_total", "etcd quota events applied",
         SL_WATCHED_STAT_UPDATES},
        {SL_METRICS_COUNTER, "sluice_quota_source_load_errors_total",
         "failed etcd reads or quota file reloads", SL_WATCHED_STAT_LOAD_ERRORS},
        {SL_METRICS_COUNTER, "sluice_quota_source_invalid_total",
         "quota entries ignored as malformed", SL_WATCHED_STAT_INVALID},
        {SL_METRICS_COUNTER, "sluice_quota_source_failovers_total",
         "etcd calls that moved to another endpoint", SL_WATCHED_STAT_FAILOVERS},
    };
    return sl_watched_register_metrics(s->w, m, defs, sizeof defs / sizeof defs[0], "source",
                                       entries_value);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's source (see killswitchsrc.h): the source board (what etcd or the file says)
 * and the admin board (this node's overrides) under one mutex, merged into a snapshot and
 * published after every change; the etcd callbacks, the file reload, the status and the metrics.
 * The watcher thread, the reload bookkeeping and the publication slot are config/watched.c's.
 *
 * etcd. A full load reads the three subtrees (killswitch/, concurrency/, fleet) with three ranges,
 * then the watch of <root>/ starts from the first range's revision + 1: events between the ranges
 * are replayed and, applied in order, end in the current state. The watch (shared with the quota
 * source in a node, config/watched.h) sees the quota tree's events too and ignores them.
 */
#include "config/killswitchsrc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strmap.h"
#include "config/killswitchfile.h"
#include "config/watched.h"
#include "sluice/clock.h"

const char *sl_killswitch_source_name(sl_killswitch_source s)
{
    return sl_watched_mode_name(s);
}

struct sl_killswitch {
    sl_killswitch_source source;
    sl_logger *log;
    size_t max_entries;
    uint64_t seed;
    sl_watched *w;

    pthread_mutex_t mu; /* the layers and the switchboard's own status fields */
    sl_killswitch_board src;
    sl_killswitch_board admin;
    bool loaded;        /* what snapshots say: the source has been read */
    sl_killswitch_status st;
};

static void snap_ref(void *p)
{
    sl_killswitch_snap_ref(p);
}

static void snap_unref(void *p)
{
    sl_killswitch_snap_unref(p);
}

static void snap_stamp(void *p, uint64_t generation)
{
    sl_killswitch_snap_stamp(p, generation);
}

/* Merge the layers into a new snapshot and publish it. Called with mu held. */
static int publish_locked(sl_killswitch *ks)
{
    sl_killswitch_snap *s;
    int rc =
        sl_killswitch_snap_new(&ks->src, &ks->admin, ks->loaded, ks->max_entries, ks->seed, &s);
    if (rc)
        return rc;
    sl_killswitch_snap_counts(s, &ks->st.switches, &ks->st.overrides, &ks->st.concurrency);
    ks->st.fleet = ks->src.has_fleet;
    sl_watched_publish(ks->w, s);
    return 0;
}

const sl_killswitch_snap *sl_killswitch_read(sl_killswitch *ks, sl_killswitch_reader *r)
{
    return sl_watched_reader_read(ks->w, r);
}

void sl_killswitch_reader_release(sl_killswitch_reader *r)
{
    sl_watched_reader_release(r);
}

void sl_killswitch_visit(sl_killswitch *ks, sl_killswitch_switch_fn sw, sl_killswitch_conc_fn cc,
                         void *ud)
{
    sl_killswitch_snap *s = sl_watched_acquire(ks->w);
    sl_killswitch_snap_visit(s, sw, cc, ud);
    sl_killswitch_snap_unref(s);
}

void sl_killswitch_status_get(sl_killswitch *ks, sl_killswitch_status *out)
{
    pthread_mutex_lock(&ks->mu);
    *out = ks->st;
    pthread_mutex_unlock(&ks->mu);
    sl_watched_status ws;
    sl_watched_status_get(ks->w, &ws);
    out->loaded = ws.loaded;
    out->connected = ws.connected;
    out->revision = ws.revision;
    out->generation = ws.generation;
    out->updates += ws.updates; /* ks->st counts the admin calls */
    out->reconnects = ws.reconnects;
    out->last_change_ms = ws.last_change_ms;
    memcpy(out->endpoint, ws.endpoint, sizeof out->endpoint);
    memcpy(out->last_error, ws.last_error, sizeof out->last_error);
}

int sl_killswitch_set(sl_killswitch *ks, const char *name, size_t len, sl_killswitch_mode mode)
{
    if (!name || len == 0 || len > SL_KILLSWITCH_MAX_NAME ||
        (mode != SL_KILLSWITCH_ENFORCE && mode != SL_KILLSWITCH_SHADOW &&
         mode != SL_KILLSWITCH_KILLED))
        return -EINVAL;
    pthread_mutex_lock(&ks->mu);
    sl_killswitch_entry v = {.mode = (uint8_t)mode, .admin = 1};
    int rc = sl_killswitch_board_put(&ks->admin, SL_KILLSWITCH_K_SWITCH, name, len, &v);
    if (rc == 0) {
        ks->st.updates++;
        rc = publish_locked(ks);
    }
    pthread_mutex_unlock(&ks->mu);
    if (rc == 0)
        sl_log_info(ks->log, "switch set by admin call name=%.*s mode=%s",
                    (int)(len > 256 ? 256 : len), name, sl_killswitch_mode_name(mode));
    return rc;
}

/* ---------------------------------------------------------------- applying source entries */

static void invalid(sl_killswitch *ks, const char *what, size_t wlen, const char *why)
{
    ks->st.invalid++;
    sl_log_warn(ks->log, "switchboard entry ignored entry=%.*s error=\"%s\"",
                (int)(wlen > 512 ? 512 : wlen), what, why);
}

/* Apply one etcd key (relative to the root) to a board: 0 applied, -ENOENT not ours. A malformed
 * value is counted and logged. From the watch (`events`), a write of a switch ends its admin
 * override (last write wins). Called with mu held. */
static int apply_rel(sl_killswitch *ks, sl_killswitch_board *b, const char *rel, size_t rlen,
                     const char *val, size_t vlen, bool del, bool events)
{
    sl_killswitch_key key;
    const char *err;
    int rc = sl_killswitch_board_apply(b, rel, rlen, val, vlen, del, &key, &err);
    if (rc == -ENOENT)
        return rc;
    if (events && key.kind == SL_KILLSWITCH_K_SWITCH)
        sl_killswitch_board_del(&ks->admin, SL_KILLSWITCH_K_SWITCH, key.name, key.len);
    if (rc)
        invalid(ks, rel, rlen, err);
    return rc;
}

/* Replace the source board by `fresh` (a full load). Admin overrides of switches whose source
 * value changed end. Called with mu held; takes ownership of fresh. */
static int replace_layer(sl_killswitch *ks, sl_killswitch_board *fresh)
{
    size_t pos = 0;
    for (sl_strmap_ent *me; (me = sl_strmap_next(&ks->admin.map, &pos));) {
        const sl_killswitch_entry *o =
            sl_killswitch_board_get(&ks->src, SL_KILLSWITCH_K_SWITCH, me->key, me->len);
        const sl_killswitch_entry *n =
            sl_killswitch_board_get(fresh, SL_KILLSWITCH_K_SWITCH, me->key, me->len);
        int om = o ? o->mode : SL_KILLSWITCH_ENFORCE, nm = n ? n->mode : SL_KILLSWITCH_ENFORCE;
        if (om != nm) {
            sl_strmap_remove_ent(&ks->admin.map, me);
            pos--; /* the backward shift may have moved another entry here */
        }
    }
    sl_killswitch_board_free(&ks->src);
    ks->src = *fresh;
    return publish_locked(ks);
}

/* ---------------------------------------------------------------- the quota file */

static int on_load_file(void *ud, const char *path, char *err, size_t errlen)
{
    sl_killswitch *ks = ud;
    sl_killswitch_board fresh;
    sl_killswitch_board_init(&fresh, ks->max_entries, ks->seed);
    int rc = sl_killswitchfile_load(path, &fresh, err, errlen);
    if (rc) {
        sl_killswitch_board_free(&fresh);
        return rc;
    }
    pthread_mutex_lock(&ks->mu);
    ks->loaded = true;
    rc = replace_layer(ks, &fresh);
    size_t switches = ks->st.switches, conc = ks->st.concurrency;
    pthread_mutex_unlock(&ks->mu);
    if (rc == 0)
        sl_log_info(ks->log, "switchboard loaded path=%s switches=%zu concurrency=%zu", path,
                    switches, conc);
    return rc;
}

int sl_killswitch_reload(sl_killswitch *ks, char *err, size_t errlen)
{
    return sl_watched_reload_logged(ks->w, "switchboard not loaded, keeping the current switches",
                                    err, errlen);
}

/* ---------------------------------------------------------------- etcd */

/* Apply a key with the root (ignored unless it is ours): as apply_rel. Called with mu held. */
static int apply_kv(sl_killswitch *ks, sl_killswitch_board *b, const sl_etcd_kv *kv, bool del,
                    bool events)
{
    const char *wp = sl_watched_watch_prefix(ks->w);
    size_t pl = strlen(wp);
    if (kv->key_len <= pl || memcmp(kv->key, wp, pl) != 0)
        return -ENOENT;
    return apply_rel(ks, b, kv->key + pl, kv->key_len - pl, kv->value, kv->value_len, del,
                     events);
}

static int on_load(void *ud, const sl_etcd_kvs *kvs, size_t n, int64_t revision)
{
    sl_killswitch *ks = ud;
    sl_killswitch_board fresh;
    sl_killswitch_board_init(&fresh, ks->max_entries, ks->seed);
    pthread_mutex_lock(&ks->mu);
    for (size_t p = 0; p < n; p++)
        for (size_t i = 0; i < kvs[p].n; i++)
            apply_kv(ks, &fresh, &kvs[p].kvs[i], false, false);
    bool was = ks->loaded;
    ks->loaded = true;
    int rc = replace_layer(ks, &fresh);
    if (rc)
        ks->loaded = was;
    size_t switches = ks->st.switches;
    pthread_mutex_unlock(&ks->mu);
    if (rc == 0)
        sl_log_info(ks->log, "switchboard loaded from etcd revision=%lld switches=%zu",
                    (long long)revision, switches);
    return rc;
}

static int on_events(void *ud, const sl_etcd_event *ev, size_t n, int64_t revision)
{
    sl_killswitch *ks = ud;
    size_t ours = 0;
    pthread_mutex_lock(&ks->mu);
    for (size_t i = 0; i < n; i++)
        if (apply_kv(ks, &ks->src, &ev[i].kv, ev[i].type == SL_ETCD_DELETE, true) != -ENOENT)
            ours++;
    int rc = ours ? publish_locked(ks) : 0;
    size_t switches = ks->st.switches;
    pthread_mutex_unlock(&ks->mu);
    if (rc)
        return rc; /* the full reload that follows catches up */
    if (ours)
        sl_log_info(ks->log, "switchboard updated events=%zu revision=%lld switches=%zu", ours,
                    (long long)revision, switches);
    return (int)ours;
}

/* ---------------------------------------------------------------- lifecycle */

int sl_killswitch_new(const sl_killswitch_config *cfg, sl_killswitch **out)
{
    static const sl_watched_range ranges[] = {
        {"killswitch/", true}, {"concurrency/", true}, {"fleet", false}};
    sl_killswitch *ks = calloc(1, sizeof *ks);
    if (!ks)
        return -ENOMEM;
    ks->log = cfg->conn.log;
    ks->max_entries = cfg->max_entries ? cfg->max_entries : SL_KILLSWITCH_DEFAULT_MAX_ENTRIES;
    ks->seed = sl_strmap_seed(ks);
    pthread_mutex_init(&ks->mu, NULL);
    sl_killswitch_board_init(&ks->src, ks->max_entries, ks->seed);
    sl_killswitch_board_init(&ks->admin, ks->max_entries, ks->seed);

    sl_watched_config wc = {
        .conn = cfg->conn,
        .ranges = ranges,
        .n_ranges = sizeof ranges / sizeof ranges[0],
        .what = "switches",
        .ops = {.ref = snap_ref, .unref = snap_unref, .stamp = snap_stamp, .load = on_load,
                .events = on_events, .load_file = on_load_file},
        .ud = ks,
    };
    int rc = sl_watched_new(&wc, &ks->w);
    if (rc) {
        sl_killswitch_free(ks);
        return rc;
    }
    ks->source = sl_watched_mode_of(ks->w);
    ks->st.source = ks->source;
    pthread_mutex_lock(&ks->mu);
    ks->loaded = ks->source == SL_KILLSWITCH_NONE;
    rc = publish_locked(ks); /* the first snapshot: empty */
    pthread_mutex_unlock(&ks->mu);
    if (rc == 0)
        rc = sl_watched_start(ks->w);
    if (rc) {
        sl_killswitch_free(ks);
        return rc;
    }
    *out = ks;
    return 0;
}

void sl_killswitch_free(sl_killswitch *ks)
{
    if (!ks)
        return;
    sl_watched_free(ks->w); /* stops the thread first: it writes the layers */
    sl_killswitch_board_free(&ks->src);
    sl_killswitch_board_free(&ks->admin);
    pthread_mutex_destroy(&ks->mu);
    free(ks);
}

int sl_killswitch_wait_loaded(sl_killswitch *ks, int64_t timeout_ms)
{
    return sl_watched_wait_loaded(ks->w, timeout_ms);
}

/* ---------------------------------------------------------------- metrics */

typedef struct emit_ctx {
    sl_metrics_sink *sink;
} emit_ctx;

static int emit_switch(void *ud, const char *name, size_t len, sl_killswitch_mode mode, bool admin)
{
    emit_ctx *c = ud;
    char buf[SL_METRICS_LABEL_VALUE_MAX];
    size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
    memcpy(buf, name, n);
    buf[n] = 0;
    const char *v[3] = {buf, sl_killswitch_mode_name(mode), admin ? "admin" : "source"};
    sl_metrics_sink_emit(c->sink, v, 3, 1);
    return 0;
}

static void collect_switches(void *arg, sl_metrics_sink *sink)
{
    emit_ctx c = {.sink = sink};
    sl_killswitch_visit(arg, emit_switch, NULL, &c);
}

/* The families that are the switchboard's own (its status adds the admin calls to the updates
 * and counts its invalid entries itself); the others are the feed's status. */
static double status_value(void *ud, size_t which)
{
    sl_killswitch_status st;
    sl_killswitch_status_get(ud, &st);
    switch (which) {
    case 2: return (double)st.updates;
    case 3: return (double)st.invalid;
    default: return (double)st.switches;
    }
}

int sl_killswitch_register_metrics(sl_killswitch *ks, sl_metrics *m)
{
    int rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_killswitch",
                                  "1 per switch set: a limiter killed (admits everything) or in "
                                  "shadow mode (admits what it would reject), by name and source.",
                                  "name,mode,origin", collect_switches, ks);
    if (rc)
        return rc;
    static const sl_watched_metric defs[] = {
        {SL_METRICS_GAUGE, "sluice_switch_source_loaded", "1 once the switchboard has been read",
         SL_WATCHED_STAT_LOADED},
        {SL_METRICS_GAUGE, "sluice_switch_source_connected",
         "1 while the etcd watch of the switchboard is established (always 1 for a file)",
         SL_WATCHED_STAT_CONNECTED},
        {SL_METRICS_COUNTER, "sluice_switch_source_updates_total",
         "switchboard changes applied (etcd events and admin calls)", SL_WATCHED_STAT_OWN},
        {SL_METRICS_COUNTER, "sluice_switch_source_invalid_total",
         "switchboard entries ignored as malformed or over the entry cap", SL_WATCHED_STAT_OWN},
        {SL_METRICS_COUNTER, "sluice_switch_source_reconnects_total",
         "times the etcd watch of the switchboard was set up again", SL_WATCHED_STAT_RECONNECTS},
        {SL_METRICS_GAUGE, "sluice_switches_set",
         "switches set (killed or shadow), overrides included", SL_WATCHED_STAT_OWN},
    };
    return sl_watched_register_metrics(ks->w, m, defs, sizeof defs / sizeof defs[0], "source",
                                       status_value);
}

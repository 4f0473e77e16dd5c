/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's source (see config/killswitch.h for what it holds): it keeps the switches,
 * concurrency limits and fleet up to date from etcd (watched: config/watched.h, shared with the
 * quotas in a node) or from the quota file (re-read on SIGHUP, parsed by config/killswitchfile.h),
 * layers the admin overrides of one node on top, publishes snapshots to per-thread readers, and
 * keeps the status and the metrics.
 *
 * Its functions keep the sl_killswitch_ names the request path has always called (api/protect.c):
 * the split of killswitch.c into values, file section and source did not rename them.
 */
#ifndef SLUICE_CONFIG_KILLSWITCHSRC_H
#define SLUICE_CONFIG_KILLSWITCHSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/killswitch.h"
#include "config/watched.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

/* Where the switchboard is read from: its feed's mode (config/watched.h), under its own names. */
typedef sl_watched_mode sl_killswitch_source;
#define SL_KILLSWITCH_NONE SL_WATCHED_NONE /* admin calls only */
#define SL_KILLSWITCH_ETCD SL_WATCHED_ETCD
#define SL_KILLSWITCH_FILE SL_WATCHED_FILE

typedef struct sl_killswitch_config {
    sl_watched_conn conn; /* where (config/watched.h): the node's shared etcd source, or
                             --storage-addrs etc., or conn.file = --quota-file */
    size_t max_entries;   /* 0 = SL_KILLSWITCH_DEFAULT_MAX_ENTRIES */
} sl_killswitch_config;

typedef struct sl_killswitch sl_killswitch;

/* File mode reads the file now and fails (-errno, the reason logged) if it cannot; etcd mode
 * starts its watcher thread (unless the source is shared: its owner starts it) and returns at once
 * (sl_killswitch_wait_loaded). */
int sl_killswitch_new(const sl_killswitch_config *cfg, sl_killswitch **out);
/* Stops the thread and frees everything; readers must have been released. */
void sl_killswitch_free(sl_killswitch *ks);
int sl_killswitch_wait_loaded(sl_killswitch *ks, int64_t timeout_ms);

/* File mode: read the file again (on error keep the current settings; reason in err). etcd mode:
 * -EOPNOTSUPP; none: 0. */
int sl_killswitch_reload(sl_killswitch *ks, char *err, size_t errlen);

/* The admin override of one switch on this node. 0, -EINVAL (empty or too long name, bad mode),
 * -ENOSPC (too many entries), -ENOMEM. */
int sl_killswitch_set(sl_killswitch *ks, const char *name, size_t len, sl_killswitch_mode mode);

/* Per-thread reader, zero-initialised (config/watched.h); the snapshot stays valid until the
 * next read or release on the same reader. */
typedef sl_watched_reader sl_killswitch_reader;

const sl_killswitch_snap *sl_killswitch_read(sl_killswitch *ks, sl_killswitch_reader *r);
void sl_killswitch_reader_release(sl_killswitch_reader *r);

/* Every switch set now and the concurrency entries (sl_killswitch_snap_visit on the current
 * snapshot). */
void sl_killswitch_visit(sl_killswitch *ks, sl_killswitch_switch_fn sw, sl_killswitch_conc_fn cc,
                         void *ud);

typedef struct sl_killswitch_status {
    sl_killswitch_source source;
    bool loaded;           /* the source has been read once */
    bool connected;        /* etcd: the watch is established; file/none: true */
    int64_t revision;
    size_t switches;       /* switches set (any mode but enforce), overrides included */
    size_t overrides;      /* of which set through the admin call */
    size_t concurrency;    /* concurrency entries */
    bool fleet;            /* a fleet is configured */
    uint64_t generation;
    uint64_t updates;      /* etcd events and admin calls applied */
    uint64_t invalid;      /* entries ignored as malformed or over max_entries */
    uint64_t reconnects;
    int64_t last_change_ms;
    char endpoint[128];
    char last_error[256];
} sl_killswitch_status;

void sl_killswitch_status_get(sl_killswitch *ks, sl_killswitch_status *out);
const char *sl_killswitch_source_name(sl_killswitch_source s); /* "none", "etcd", "file" */

/*
 * Metrics, read at render time (the registry must not render after sl_killswitch_free()):
 *   sluice_killswitch{name,mode}          1 per switch set (mode shadow or killed)
 *   sluice_switch_source_loaded / _connected{source}, sluice_switch_source_updates_total /
 *   _invalid_total / _reconnects_total{source}
 */
int sl_killswitch_register_metrics(sl_killswitch *ks, sl_metrics *m);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The quota source: owns the current quota snapshot and keeps it up to date, from etcd (a watcher
 * thread) or from the standalone quota file (reloaded on demand, e.g. on SIGHUP).
 *
 * etcd mode. A thread (its own, or the node's sl_watched_source shared with the switchboard:
 * sl_quotasrc_config.conn.source) ranges over <prefix>/ , builds a tree, publishes it, then watches
 * the prefix from the next revision and publishes a new snapshot after every watch message, so a
 * change reaches request threads within one etcd round trip. When the watch breaks (etcd restart,
 * outage, compaction) it keeps serving the last snapshot, waits (exponential backoff with jitter,
 * backoff_min..backoff_max), and starts again with a full range on whichever endpoint answers,
 * then a watch from the new revision: a re-read is always right, whatever was missed.
 *
 * Publication. Request threads never lock on the hot path. Each worker keeps an
 * sl_quotasrc_reader; sl_quotasrc_read() compares the reader's generation with the source's (one
 * atomic load of a line that changes only when quotas do) and only when they differ takes the
 * publication mutex to swap its reference. A snapshot is freed when the last reader has moved
 * past it, so a reader's pointer stays valid until its next read or release: RCU with the
 * readers' own next access as the grace period.
 *
 * Before the first successful load the snapshot is empty with loaded == false; the Levee handler
 * answers 500 then rather than applying no-quota rules to a tree it has not seen.
 */
#ifndef SLUICE_CONFIG_QUOTASRC_H
#define SLUICE_CONFIG_QUOTASRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/quota.h"
#include "config/watched.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

/* The source's mode is its feed's (config/watched.h); the names are the quota source's own. */
typedef sl_watched_mode sl_quotasrc_mode;
#define SL_QUOTASRC_NONE SL_WATCHED_NONE /* no quotas: an empty, loaded tree */
#define SL_QUOTASRC_ETCD SL_WATCHED_ETCD
#define SL_QUOTASRC_FILE SL_WATCHED_FILE

typedef struct sl_quotasrc_config {
    sl_watched_conn conn; /* where (config/watched.h): the node's shared etcd source, or
                             --storage-addrs etc., or conn.file = --quota-file */
    size_t max_entries;   /* 0 = SL_QUOTA_DEFAULT_MAX_ENTRIES */
} sl_quotasrc_config;

typedef struct sl_quotasrc sl_quotasrc;

typedef struct sl_quotasrc_status {
    sl_quotasrc_mode mode;
    bool loaded;             /* a snapshot from the source has been published */
    bool connected;          /* etcd: a watch is established; file/none: always true */
    int64_t revision;        /* etcd revision of the current snapshot */
    size_t entries;          /* entries in the current snapshot */
    uint64_t generation;     /* snapshots published */
    uint64_t loads;          /* full loads (etcd ranges, file reads) that succeeded */
    uint64_t load_errors;    /* failed ranges / file reloads */
    uint64_t reconnects;     /* times the etcd watch was lost and set up again */
    uint64_t updates;        /* etcd events applied */
    uint64_t invalid;        /* entries ignored as malformed (logged) */
    uint64_t failovers;      /* etcd calls that moved to another endpoint */
    int64_t last_change_ms;  /* wall clock of the last publication */
    char endpoint[128];      /* etcd endpoint in use, or the quota file */
    char last_error[256];    /* "" when none */
} sl_quotasrc_status;

/*
 * Create the source. File mode reads the file now and fails (-errno, message logged and kept in
 * status.last_error) if it cannot. etcd mode starts the watcher thread (unless the source is
 * shared: its owner starts it) and returns at once: use sl_quotasrc_wait_loaded() to wait for the
 * first snapshot. With neither, mode NONE.
 */
int sl_quotasrc_new(const sl_quotasrc_config *cfg, sl_quotasrc **out);
/* Stop the thread (promptly, even mid-watch or mid-backoff) and free everything. Readers must
 * have been released. */
void sl_quotasrc_free(sl_quotasrc *s);

/* Wait on the real clock, at most timeout_ms, for the first load. 0 or -ETIMEDOUT. */
int sl_quotasrc_wait_loaded(sl_quotasrc *s, int64_t timeout_ms);

/* File mode: read the file again and publish it; on error keep the current quotas and return
 * -errno (reason in err, logged). etcd mode: -EOPNOTSUPP (changes arrive by the watch). */
int sl_quotasrc_reload(sl_quotasrc *s, char *err, size_t errlen);

/* Per-thread reader (zero-initialise it; config/watched.h). The returned snapshot stays valid
 * until the next read or release on the same reader. */
typedef sl_watched_reader sl_quotasrc_reader;

const sl_quota_snap *sl_quotasrc_read(sl_quotasrc *s, sl_quotasrc_reader *r);
void sl_quotasrc_reader_release(sl_quotasrc_reader *r);

/* A counted reference for occasional users (CLI, health): sl_quota_snap_unref() it. */
sl_quota_snap *sl_quotasrc_acquire(sl_quotasrc *s);

void sl_quotasrc_status_get(sl_quotasrc *s, sl_quotasrc_status *out);
const char *sl_quotasrc_mode_name(sl_quotasrc_mode mode); /* "none", "etcd", "file" */

/*
 * Register the source's gauges and counters in a metrics registry (read at render time):
 *   sluice_quota_source_loaded, sluice_quota_source_connected, sluice_quota_source_revision,
 *   sluice_quota_entries, sluice_quota_source_reconnects_total, sluice_quota_source_updates_total,
 *   sluice_quota_source_load_errors_total, sluice_quota_source_invalid_total,
 *   sluice_quota_source_failovers_total.
 * The registry must not render after sl_quotasrc_free().
 */
int sl_quotasrc_register_metrics(sl_quotasrc *s, sl_metrics *m);

#endif

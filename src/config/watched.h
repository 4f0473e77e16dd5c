/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A watched configuration source: the machinery the quota source (config/quotasrc.h) and the
 * switchboard (config/killswitch.h) share, so that each of them only says how its entries are
 * parsed and what a snapshot holds.
 *
 * Source and feeds. An sl_watched is one feed: its keys, its callbacks, its snapshot slot and its
 * status. Its sl_watched_source is the root it reads: the etcd client, one thread and one watch
 * stream. A feed gets a source of its own unless sl_watched_config.conn.source names a shared one;
 * the node shares one between the quotas and the switchboard, so one watch of <root>/ feeds both.
 * Every feed is attached before the shared source starts (sl_watched_source_start).
 *
 * etcd mode. The thread ranges, for each feed, over one or more keys under <root>/ (the revision
 * of a feed's first range is its load's), hands the answers to the feed's load callback, then
 * watches <root>/ from the earliest of those revisions + 1 and hands every message's events to
 * every feed's events callback (each applies the keys that are its own). When the
 * watch breaks (etcd restart, outage, compaction) it keeps the last snapshot, waits (exponential
 * backoff with jitter, backoff_min..backoff_max; back to the minimum after a watch that worked)
 * and starts again with a full load on whichever endpoint answers: a re-read is always right,
 * whatever was missed. sl_watched_free() stops it promptly, even mid-watch or mid-backoff.
 *
 * File mode. sl_watched_reload() calls the file callback, one reload at a time, and keeps the
 * status (loads, load errors, last error).
 *
 * Publication. A slot holds the current snapshot (an opaque, reference-counted object: ops.ref
 * and ops.unref) and its generation in an atomic word. A reader compares the generation it holds
 * with the slot's (one atomic load while nothing changes) and only when they differ takes the
 * publication mutex to swap its reference. A snapshot is freed when the last reader has moved
 * past it: RCU with the readers' own next access as the grace period.
 *
 * Locks. Callbacks run without any of the source's locks held, so a user may call back into it
 * (publish, count invalid entries) under its own locks.
 */
#ifndef SLUICE_CONFIG_WATCHED_H
#define SLUICE_CONFIG_WATCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctlplane/etcd.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

typedef enum sl_watched_mode {
    SL_WATCHED_NONE = 0, /* nothing to read: loaded from the start */
    SL_WATCHED_ETCD = 1,
    SL_WATCHED_FILE = 2,
} sl_watched_mode;

typedef struct sl_watched sl_watched;
typedef struct sl_watched_source sl_watched_source;

/* Most feeds one source serves. */
#define SL_WATCHED_MAX_FEEDS 4

/* One key read by a full load, relative to <root>/ ("" with prefix = the whole tree). The array
 * is copied; the suffix strings must outlive the source (string literals). */
typedef struct sl_watched_range {
    const char *suffix;
    bool prefix;
} sl_watched_range;

typedef struct sl_watched_ops {
    void (*ref)(void *snap);
    void (*unref)(void *snap); /* NULL must be ignored */
    /* Called with the snapshot's generation before readers can see it; may be NULL. */
    void (*stamp)(void *snap, uint64_t generation);
    /* etcd: a full load, one answer per range. Build and publish a snapshot; 0 or -errno. */
    int (*load)(void *ud, const sl_etcd_kvs *kvs, size_t n, int64_t revision);
    /* etcd: one watch message's events (any key under <root>/). Return how many were applied
     * (counted as updates; revision then becomes the status's), or -errno to end the watch (the
     * full load that follows catches up). */
    int (*events)(void *ud, const sl_etcd_event *ev, size_t n, int64_t revision);
    /* file: read `path`, build and publish; 0, or -errno with the reason in err. */
    int (*load_file)(void *ud, const char *path, char *err, size_t errlen);
} sl_watched_ops;

/*
 * Where a feed reads from: the connection every watched source (quotas, switchboard, RLS rules)
 * is configured with the same way, so that each embeds this one struct (as .conn) and keeps only
 * what is its own. The strings and arrays must outlive sl_watched_source_new / sl_watched_new.
 */
typedef struct sl_watched_conn {
    sl_watched_source *source;         /* shared source, or NULL: one of its own from the fields
                                          below (ignored by sl_watched_source_new) */
    const char *const *etcd_endpoints; /* --storage-addrs; etcd mode when n_endpoints > 0 */
    size_t n_endpoints;
    const char *prefix;                /* --storage-prefix (the root); NULL = "/sluice";
                                          trailing '/' ignored */
    const char *file;                  /* file mode when there are no endpoints */
    int64_t backoff_min_ms;            /* 0 = 100 */
    int64_t backoff_max_ms;            /* 0 = 5000 */
    int64_t connect_timeout_ms;        /* etcd; 0 = 1000 */
    int64_t request_timeout_ms;        /* etcd; 0 = 5000 */
    sl_etcd_tls etcd_tls;              /* etcd over https:// (ctlplane/etcd.h) */
    sl_logger *log;                    /* may be NULL */
} sl_watched_conn;

/* A source to share between feeds (sl_watched_conn.source). Feeds hold references of their
 * own: sl_watched_source_free() drops the creator's, and the last feed freed stops the thread. */
int sl_watched_source_new(const sl_watched_conn *cfg, sl_watched_source **out);
/* etcd: start the thread (returns at once); every feed must be attached by now. Otherwise 0. */
int sl_watched_source_start(sl_watched_source *src);
void sl_watched_source_free(sl_watched_source *src);
sl_watched_mode sl_watched_source_mode(const sl_watched_source *src);

typedef struct sl_watched_config {
    sl_watched_conn conn;              /* where to read (conn.log also logs the feed's lines) */
    const sl_watched_range *ranges;    /* NULL: the whole of <root>/ */
    size_t n_ranges;
    const char *what;                  /* for messages: "quotas", "switches" */
    sl_watched_ops ops;
    void *ud;                          /* passed to load, events, load_file */
} sl_watched_config;

typedef struct sl_watched_status {
    sl_watched_mode mode;
    bool loaded;             /* a load succeeded (always true in mode none) */
    bool connected;          /* etcd: a watch is established; file/none: true */
    int64_t revision;        /* etcd revision of the last load or applied events */
    uint64_t generation;     /* snapshots published */
    uint64_t loads;          /* full loads that succeeded */
    uint64_t load_errors;    /* failed loads */
    uint64_t reconnects;     /* times the etcd watch was lost and set up again */
    uint64_t updates;        /* etcd events applied */
    uint64_t invalid;        /* see sl_watched_count_invalid() */
    uint64_t failovers;      /* etcd calls that moved to another endpoint */
    int64_t last_change_ms;  /* wall clock of the last publication */
    char endpoint[128];      /* etcd endpoint in use, or the file */
    char last_error[256];    /* "" when none */
} sl_watched_status;

/* Create the feed without starting it (nothing is published yet): the user may publish a first
 * snapshot before sl_watched_start(). With a shared source: -EBUSY once that source has started,
 * -ENOSPC past SL_WATCHED_MAX_FEEDS. */
int sl_watched_new(const sl_watched_config *cfg, sl_watched **out);
/* etcd: start the thread of a source of its own (returns at once; a shared source is started by
 * its owner). file: the first reload (its error is returned). none: nothing. */
int sl_watched_start(sl_watched *w);
/* Leave the source (the thread no longer calls into this feed; the last feed stops it) and free
 * everything, the current snapshot's reference included. */
void sl_watched_free(sl_watched *w);

sl_watched_mode sl_watched_mode_of(const sl_watched *w);
const char *sl_watched_mode_name(sl_watched_mode mode);  /* "none", "etcd", "file" */
const char *sl_watched_root(const sl_watched *w);         /* without a trailing '/' */
const char *sl_watched_watch_prefix(const sl_watched *w); /* root + "/" */
sl_etcd *sl_watched_etcd(sl_watched *w);                   /* NULL unless etcd mode */

/* Wait on the real clock, at most timeout_ms, for the first load. 0 or -ETIMEDOUT. */
int sl_watched_wait_loaded(sl_watched *w, int64_t timeout_ms);
/* File mode: sl_watched_config.ops.load_file, with the status kept. etcd: -EOPNOTSUPP, with a
 * reason in err; none: 0. */
int sl_watched_reload(sl_watched *w, char *err, size_t errlen);
/* sl_watched_reload for a user's reload call (SIGHUP): a failure other than -EOPNOTSUPP is also
 * logged on conn.log as `<failed> error="<reason>"`, and err may be NULL. */
int sl_watched_reload_logged(sl_watched *w, const char *failed, char *err, size_t errlen);

/* Publish `snap` (its reference passes to the slot); returns its generation. */
uint64_t sl_watched_publish(sl_watched *w, void *snap);
/* A reader holding `held` (NULL at first) at *generation: the snapshot to hold now. When it
 * differs from held, a reference to it has been taken, held's dropped and *generation updated. */
void *sl_watched_read(sl_watched *w, void *held, uint64_t *generation);
/* A per-thread reader of a feed's snapshots (zero-initialise it): the reader struct of every
 * source (sl_quotasrc_reader, sl_killswitch_reader, sl_rlssrc_reader are this type). */
typedef struct sl_watched_reader {
    void *held;                /* the snapshot it holds a reference to, or NULL */
    uint64_t generation;       /* held's */
    void (*unref)(void *snap); /* held's ops.unref: a release needs no feed (it may be freed) */
} sl_watched_reader;

/* The snapshot to use now, valid until the reader's next read or release (sl_watched_read). */
void *sl_watched_reader_read(sl_watched *w, sl_watched_reader *r);
/* Drop the reader's reference; it may be read again afterwards. */
void sl_watched_reader_release(sl_watched_reader *r);

/* A counted reference to the current snapshot (ops.unref it). */
void *sl_watched_acquire(sl_watched *w);

/* A source's metric families, one collector each, read at render time (the registry must not
 * render after sl_watched_free). With label (e.g. "source"), each series carries the feed's mode
 * name ("none", "etcd", "file") as that label's value; NULL: no labels. A family's value is a
 * field of the feed's status (stat), or, with SL_WATCHED_STAT_OWN, value(ud, i) for family i,
 * ud being sl_watched_config.ud (value may be NULL when no family is the source's own). -ENOSPC
 * past SL_WATCHED_MAX_METRICS in all. */
#define SL_WATCHED_MAX_METRICS 16
typedef enum sl_watched_stat {
    SL_WATCHED_STAT_OWN = 0,
    SL_WATCHED_STAT_LOADED,
    SL_WATCHED_STAT_CONNECTED,
    SL_WATCHED_STAT_REVISION,
    SL_WATCHED_STAT_LOADS,
    SL_WATCHED_STAT_LOAD_ERRORS,
    SL_WATCHED_STAT_RECONNECTS,
    SL_WATCHED_STAT_UPDATES,
    SL_WATCHED_STAT_INVALID,
    SL_WATCHED_STAT_FAILOVERS,
} sl_watched_stat;
typedef struct sl_watched_metric {
    sl_metrics_type type;
    const char *name, *help;
    sl_watched_stat stat;
} sl_watched_metric;
int sl_watched_register_metrics(sl_watched *w, sl_metrics *m, const sl_watched_metric *defs,
                                size_t n, const char *label, double (*value)(void *ud, size_t i));

/* Count entries ignored as malformed. */
void sl_watched_count_invalid(sl_watched *w, uint64_t n);
void sl_watched_status_get(sl_watched *w, sl_watched_status *out);

#endif

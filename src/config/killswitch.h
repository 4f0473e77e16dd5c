/*
 * The switchboard of sluice's protections: kill switches and shadow mode per limit name, and the
 * settings of /attempt's concurrency limits and fleet shedder. It comes from etcd (watched, so
 * that every node obeys a change within one etcd round trip) or from the quota file (re-read on
 * SIGHUP), and a node's admin endpoint may override a switch locally.
 *
 *     <root>/killswitch/<NAME>        "on" | "shadow" | "off"     (NAME "*": every limiter)
 *     <root>/concurrency/default      {"limit": 20, "duration": 60000}
 *     <root>/concurrency/key/<KEY>    {"limit": 5, "duration": "30s"}
 *     <root>/fleet                    {"capacity": 200, "reserve": 0.2, "duration": "60s"}
 *
 * and in the quota file, beside its limit: and factor: sections (config/quotafile.h):
 *
 *     killswitch:    {"*": off, search: on, new-limit: shadow}
 *     concurrency:   {default: {limit: 20, duration: 60s}, key: {search: {limit: 5, duration: 30s}}}
 *     fleet:         {capacity: 200, reserve: 0.2, duration: 60s}
 *
 * A switch value "on" (also true, yes, 1, kill) turns the limiter OFF: it admits everything and
 * says so; "shadow" (also dry-run) keeps deciding and counting but admits what it would reject;
 * "off" (false, no, 0, enforce) or no entry: the limiter enforces. A duration is milliseconds as
 * a number, or a string in sluiced's duration syntax ("30s", "1m30s").
 *
 * Which names exist is the caller's business (docs/protection.md): Gubernator items by their
 * `name`, /attempt's rate quotas by quota name and "levee" for all of them, "concurrency", "fleet"
 * and "shed" for /attempt's concurrency limits, the fleet shedder and the worker shedder.
 *
 * Precedence: a switch set through the admin call overrides the source for that name until the
 * source next writes that name (an etcd put or delete, or a reload that changes its value): the
 * last write wins, whichever side made it.
 *
 * Reads are lock-free on the request path: the source publishes immutable snapshots and each
 * worker keeps a reader (the scheme of config/quotasrc.h: one atomic load per read while nothing
 * changes). A snapshot with no switch set answers every lookup without hashing.
 *
 * Bounded: at most max_entries switches and concurrency entries (names up to SL_KILLSWITCH_MAX_NAME
 * bytes); entries beyond are refused and counted as invalid.
 */
#ifndef SLUICE_CONFIG_KILLSWITCH_H
#define SLUICE_CONFIG_KILLSWITCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "core/metrics.h"

#define SL_KILLSWITCH_GLOBAL "*"
#define SL_KILLSWITCH_MAX_NAME 1024
#define SL_KILLSWITCH_DEFAULT_MAX_ENTRIES 4096
/* Bounds of the settings (a larger concurrency limit is the engine's max-concurrency-limit's to
 * refuse; these only keep the arithmetic meaningful). */
#define SL_KILLSWITCH_MAX_LIMIT INT64_C(1000000000)
#define SL_KILLSWITCH_MAX_DURATION_MS (INT64_C(86400000) * 365)

typedef enum sl_killswitch_mode {
    SL_KILLSWITCH_ENFORCE = 0, /* no switch: the limiter decides */
    SL_KILLSWITCH_SHADOW = 1,  /* decide and count, admit anyway */
    SL_KILLSWITCH_KILLED = 2,  /* the limiter is off: admit without deciding */
} sl_killswitch_mode;

/* "enforce", "shadow", "killed". */
const char *sl_killswitch_mode_name(sl_killswitch_mode m);
/* A switch value (see above), any case, blanks around it allowed: the mode, or -EINVAL. */
int sl_killswitch_parse_mode(const char *s, size_t n);

typedef struct sl_killswitch_conc {
    int64_t limit;       /* calls in flight, >= 0 */
    int64_t duration_ms; /* a lease's life, > 0 */
} sl_killswitch_conc;

typedef struct sl_killswitch_fleet {
    int64_t capacity;    /* C: calls in flight the fleet serves, >= 1 */
    double reserve;      /* r: share of C kept for critical calls, [0, 1) */
    int64_t duration_ms; /* a fleet lease's life */
} sl_killswitch_fleet;

/* JSON values as etcd holds them. 0, or -EINVAL with a static reason in *err. */
int sl_killswitch_parse_conc(const char *s, size_t len, sl_killswitch_conc *out, const char **err);
int sl_killswitch_parse_fleet(const char *s, size_t len, sl_killswitch_fleet *out,
                              const char **err);

/* ---- snapshots (what the request path reads) ---- */

typedef struct sl_killswitch_snap sl_killswitch_snap;

/* True when no switch is set (every mode is ENFORCE): skip the lookups. */
bool sl_killswitch_snap_quiet(const sl_killswitch_snap *s);
/* The global switch ("*"). */
sl_killswitch_mode sl_killswitch_snap_global(const sl_killswitch_snap *s);
/* The switch of one name (the global one is not folded in: callers combine them). */
sl_killswitch_mode sl_killswitch_snap_mode(const sl_killswitch_snap *s, const char *name,
                                           size_t len);
/* The concurrency limit of a resource: its key entry, else the default. False when neither. */
bool sl_killswitch_snap_concurrency(const sl_killswitch_snap *s, const char *key, size_t len,
                                    sl_killswitch_conc *out);
/* The fleet shedder's settings, or NULL when no fleet is configured. */
const sl_killswitch_fleet *sl_killswitch_snap_fleet(const sl_killswitch_snap *s);
bool sl_killswitch_snap_loaded(const sl_killswitch_snap *s);

/* ---- the source ---- */

typedef enum sl_killswitch_source {
    SL_KILLSWITCH_NONE = 0, /* admin calls only */
    SL_KILLSWITCH_ETCD = 1,
    SL_KILLSWITCH_FILE = 2,
} sl_killswitch_source;

typedef struct sl_killswitch_config {
    struct sl_watched_source *source;  /* shared etcd source (config/watched.h), or NULL: one of
                                          its own from the fields below */
    const char *const *etcd_endpoints; /* --storage-addrs: etcd mode when n_endpoints > 0 */
    size_t n_endpoints;
    const char *prefix;                /* --storage-prefix; NULL = "/sluice" */
    const char *file;                  /* --quota-file: file mode when there are no endpoints */
    size_t max_entries;                /* 0 = SL_KILLSWITCH_DEFAULT_MAX_ENTRIES */
    int64_t backoff_min_ms;            /* 0 = 100 */
    int64_t backoff_max_ms;            /* 0 = 5000 */
    int64_t connect_timeout_ms;        /* etcd; 0 = 1000 */
    int64_t request_timeout_ms;        /* etcd; 0 = 5000 */
    sl_logger *log;                    /* may be NULL */
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

/* Per-thread reader, zero-initialised; the snapshot stays valid until the next read or release on
 * the same reader. */
typedef struct sl_killswitch_reader {
    sl_killswitch_snap *snap;
    uint64_t generation;
} sl_killswitch_reader;

const sl_killswitch_snap *sl_killswitch_read(sl_killswitch *ks, sl_killswitch_reader *r);
void sl_killswitch_reader_release(sl_killswitch_reader *r);

/* Every switch set now (effective mode, after admin overrides), in no particular order; and the
 * concurrency entries ("" = the default). Return nonzero from fn to stop. */
typedef int (*sl_killswitch_switch_fn)(void *ud, const char *name, size_t len,
                                       sl_killswitch_mode mode, bool admin);
typedef int (*sl_killswitch_conc_fn)(void *ud, const char *key, size_t len,
                                     const sl_killswitch_conc *c);
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

/* Parse the switchboard sections of a quota-file text into a fresh snapshot's worth of entries
 * (for tests and for `sluice killswitch --check`): 0, or -EINVAL with the line in err. */
int sl_killswitch_check_file_text(const char *text, size_t len, char *err, size_t errlen);

#endif

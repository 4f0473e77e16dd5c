/* SPDX-License-Identifier: Apache-2.0 */
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
 *
 * Three modules, as for quotas: this one holds the values, the board (the entries a source or the
 * admin layer holds) and the snapshots; config/killswitchfile.h parses the quota file's sections;
 * config/killswitchsrc.h is the source (etcd or file, admin overrides, readers, status, metrics),
 * included at the end of this header for the callers that include only this one.
 */
#ifndef SLUICE_CONFIG_KILLSWITCH_H
#define SLUICE_CONFIG_KILLSWITCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strmap.h"

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
/* The defaults of a concurrency limit's and a fleet's missing fields. */
#define SL_KILLSWITCH_DEFAULT_DURATION_MS 60000
#define SL_KILLSWITCH_DEFAULT_RESERVE 0.2
/* A fleet's bounds: 0, or -EINVAL with a static reason in *err. */
int sl_killswitch_fleet_check(const sl_killswitch_fleet *f, const char **err);
/* A duration in sluiced's syntax ("30s", "1m30s"; a bare number: milliseconds) within
 * 1 ms..SL_KILLSWITCH_MAX_DURATION_MS, in milliseconds. 0 or -EINVAL. */
int sl_killswitch_parse_duration(const char *s, int64_t *ms);

/* ---- the board: the entries one layer (a source's, or the admin calls') holds ---- */

/* An entry's kind: a switch "api" and the concurrency entry of resource "api" are different. */
enum { SL_KILLSWITCH_K_SWITCH = 1, SL_KILLSWITCH_K_CONC = 2 };

typedef struct sl_killswitch_entry {
    uint8_t mode;  /* K_SWITCH: sl_killswitch_mode */
    uint8_t admin; /* in a snapshot: the mode is an admin override */
    sl_killswitch_conc conc; /* K_CONC; name "" = the default */
} sl_killswitch_entry;

/* (kind, name) -> sl_killswitch_entry, at most max_entries; and the fleet. */
typedef struct sl_killswitch_board {
    sl_strmap map;
    bool has_fleet;
    sl_killswitch_fleet fleet;
} sl_killswitch_board;

void sl_killswitch_board_init(sl_killswitch_board *b, size_t max_entries, uint64_t seed);
void sl_killswitch_board_free(sl_killswitch_board *b);
static inline sl_killswitch_entry *sl_killswitch_board_get(const sl_killswitch_board *b, int kind,
                                                           const char *name, size_t len)
{
    sl_strmap_ent *e = sl_strmap_find(&b->map, (uint32_t)kind, name, len);
    return e ? (sl_killswitch_entry *)sl_strmap_val(e) : NULL;
}
/* Insert or replace. 0, -ENOSPC (max_entries), -ENOMEM. */
int sl_killswitch_board_put(sl_killswitch_board *b, int kind, const char *name, size_t len,
                            const sl_killswitch_entry *v);
bool sl_killswitch_board_del(sl_killswitch_board *b, int kind, const char *name, size_t len);

/* What an etcd key names (relative to the root): kind 0 for the fleet or a key not ours. */
typedef struct sl_killswitch_key {
    int kind;
    const char *name;
    size_t len;
} sl_killswitch_key;

/*
 * Apply one etcd key relative to the root ("killswitch/api", "concurrency/default",
 * "concurrency/key/K", "fleet") with its value, or its deletion, to a board. 0 applied; -ENOENT
 * not a switchboard key; -EINVAL a malformed value (the entry is removed: the board never holds
 * what etcd no longer has) or a name longer than SL_KILLSWITCH_MAX_NAME; -ENOSPC, -ENOMEM. *err
 * says why on every error. *key says which switch or concurrency entry the key names (kind 0 for
 * the fleet, and when the name is too long), whatever the outcome.
 */
int sl_killswitch_board_apply(sl_killswitch_board *b, const char *rel, size_t rlen,
                              const char *val, size_t vlen, bool del, sl_killswitch_key *key,
                              const char **err);

/* ---- snapshots (what the request path reads) ---- */

typedef struct sl_killswitch_snap sl_killswitch_snap;

/* Merge a source's board and the admin layer's (whose switches override the source's) into a new
 * snapshot with one reference. 0, -ENOMEM. */
int sl_killswitch_snap_new(const sl_killswitch_board *src, const sl_killswitch_board *admin,
                           bool loaded, size_t max_entries, uint64_t seed,
                           sl_killswitch_snap **out);
void sl_killswitch_snap_ref(sl_killswitch_snap *s);
void sl_killswitch_snap_unref(sl_killswitch_snap *s); /* NULL is ignored */
void sl_killswitch_snap_stamp(sl_killswitch_snap *s, uint64_t generation);
/* Switches set (any mode but enforce), of which admin overrides, and concurrency entries. */
void sl_killswitch_snap_counts(const sl_killswitch_snap *s, size_t *switches, size_t *overrides,
                               size_t *concurrency);

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

/* Every switch set (effective mode, after admin overrides), in no particular order; and the
 * concurrency entries ("" = the default). Return nonzero from fn to stop. */
typedef int (*sl_killswitch_switch_fn)(void *ud, const char *name, size_t len,
                                       sl_killswitch_mode mode, bool admin);
typedef int (*sl_killswitch_conc_fn)(void *ud, const char *key, size_t len,
                                     const sl_killswitch_conc *c);
void sl_killswitch_snap_visit(const sl_killswitch_snap *s, sl_killswitch_switch_fn sw,
                              sl_killswitch_conc_fn cc, void *ud);

#endif

/* the source (after the guard: it includes this header for the types above) */
#include "config/killswitchsrc.h"

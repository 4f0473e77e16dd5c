/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Levee quota tree: which (rate, burst) applies to a request for <resource>/<prefix>/<method>.
 *
 * Levee keeps its quotas in etcd under a root prefix (docs/levee.md has the whole model):
 *
 *     <root>/limit/key_default                       {"rate": r, "burst": b}
 *     <root>/limit/subkey_default/<SUBKEY>           {"rate": r, "burst": b}
 *     <root>/limit/key/<KEY>/quota                   {"rate": r, "burst": b}
 *     <root>/limit/key/<KEY>/sublimit/<SUBKEY>       {"rate": r, "burst": b}
 *     <root>/factor/default                          DF (uint)
 *     <root>/factor/key/<KEY>                        DF (uint)
 *
 * An sl_quota_tree holds those entries in one open-addressing hash table, keyed by (kind, key,
 * subkey). A tree is mutable and single-threaded: its owner (the quota source's thread, or the
 * quota-file loader) applies etcd events or file entries to it, then publishes an immutable clone
 * as a snapshot (sl_quota_snap) that any number of request threads read without locks. Lookup is a
 * handful of hash probes on short strings and never allocates.
 *
 * Entries are bounded (max_entries; a key's length by SL_QUOTA_MAX_KEY) because a misconfigured or
 * hostile writer to etcd must not be able to grow the daemon's memory without limit.
 *
 * Errors: 0 or a negative errno; parse errors also give a static message in *err.
 */
#ifndef SLUICE_CONFIG_QUOTA_H
#define SLUICE_CONFIG_QUOTA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest KEY or SUBKEY accepted, and longest joined request path (resource/prefix/method). It is
 * below the engine's SL_MAX_KEY_LEN so that a bucket key always fits the engine. */
#define SL_QUOTA_MAX_KEY 2048
/* Default cap on entries in a tree (sl_quota_tree_new with 0). */
#define SL_QUOTA_DEFAULT_MAX_ENTRIES (1u << 20)
/* Largest rate (requests/s) and burst accepted in a quota, and largest DF: beyond these the
 * fixed-point conversion for the engine would lose its meaning. */
#define SL_QUOTA_MAX_RATE 1e9
#define SL_QUOTA_MAX_BURST 1000000000LL
#define SL_QUOTA_MAX_FACTOR 65536u

typedef struct sl_quota {
    double rate;   /* requests per second, >= 0 (0: nothing passes) */
    int64_t burst; /* extra requests beyond one admitted at once, >= 0 */
} sl_quota;

typedef enum sl_quota_kind {
    SL_QUOTA_KEY_DEFAULT = 1,    /* limit/key_default */
    SL_QUOTA_SUBKEY_DEFAULT = 2, /* limit/subkey_default/<SUBKEY> */
    SL_QUOTA_KEY = 3,            /* limit/key/<KEY>/quota */
    SL_QUOTA_SUBLIMIT = 4,       /* limit/key/<KEY>/sublimit/<SUBKEY> */
    SL_QUOTA_FACTOR_DEFAULT = 5, /* factor/default */
    SL_QUOTA_FACTOR_KEY = 6,     /* factor/key/<KEY> */
} sl_quota_kind;

/* A path below the root, split. key/sub point into the parsed string. */
typedef struct sl_quota_path {
    sl_quota_kind kind;
    const char *key;
    size_t key_len;
    const char *sub;
    size_t sub_len;
} sl_quota_path;

/*
 * Split a path relative to the root ("limit/key/api/quota") into its kind, key and subkey.
 * Returns 0, or -ENOENT when the path is not a quota or factor entry (other subtrees such as
 * observer/ share the root and are ignored), or -EINVAL when it is under limit/ or factor/ but
 * malformed (empty key, a key longer than SL_QUOTA_MAX_KEY). A KEY may contain '/': the path ends
 * in "/quota" for a key's quota, otherwise the last "/sublimit/" separates KEY and SUBKEY (a
 * SUBKEY has no '/').
 */
int sl_quota_path_parse(const char *rel, size_t len, sl_quota_path *out);
/* Compose the relative path of an entry into buf (NUL-terminated). Returns the length, or
 * -ENAMETOOLONG if it does not fit. */
int sl_quota_path_format(const sl_quota_path *p, char *buf, size_t size);

/* Parse a quota value: a JSON object {"rate": number, "burst": number}. "rate" is required and
 * must be finite and within [0, SL_QUOTA_MAX_RATE]; "burst" defaults to 0 and is rounded down;
 * other members are ignored. */
int sl_quota_parse_json(const char *s, size_t len, sl_quota *out, const char **err);
/* Parse a group size (DF): a decimal integer 1..SL_QUOTA_MAX_FACTOR, blanks around it allowed,
 * optionally a JSON string ("4"). */
int sl_quota_parse_factor(const char *s, size_t len, uint32_t *out, const char **err);
/* Render a quota as the JSON etcd holds ({"rate":110,"burst":27}); returns length or -ENOSPC. */
int sl_quota_format_json(const sl_quota *q, char *buf, size_t size);

/* ---- the mutable tree ---- */

typedef struct sl_quota_tree sl_quota_tree;

/* max_entries: 0 = SL_QUOTA_DEFAULT_MAX_ENTRIES. */
int sl_quota_tree_new(size_t max_entries, sl_quota_tree **out);
void sl_quota_tree_free(sl_quota_tree *t);
void sl_quota_tree_clear(sl_quota_tree *t);
size_t sl_quota_tree_count(const sl_quota_tree *t);
/* A deep copy (for publishing). */
int sl_quota_tree_clone(const sl_quota_tree *t, sl_quota_tree **out);

/* Set a quota (kinds KEY_DEFAULT, SUBKEY_DEFAULT, KEY, SUBLIMIT) or a factor (FACTOR_*): -ENOSPC
 * when the tree is full, -EINVAL for a bad kind/value. */
int sl_quota_tree_set_quota(sl_quota_tree *t, const sl_quota_path *p, const sl_quota *q);
int sl_quota_tree_set_factor(sl_quota_tree *t, const sl_quota_path *p, uint32_t factor);
/* Remove an entry; returns true if it was there. */
bool sl_quota_tree_remove(sl_quota_tree *t, const sl_quota_path *p);
/* Read one entry (a quota for quota kinds, a factor for factor kinds). */
bool sl_quota_tree_get_quota(const sl_quota_tree *t, const sl_quota_path *p, sl_quota *out);
bool sl_quota_tree_get_factor(const sl_quota_tree *t, const sl_quota_path *p, uint32_t *out);

/*
 * Apply an etcd key/value (the full key, with the root) to the tree. `root` is the storage prefix
 * ("/levee"; a trailing '/' is ignored). Returns 0 when applied, -ENOENT when the key is not a
 * quota/factor entry under the root (ignored), -EINVAL for a malformed key or value: the entry is
 * then removed, so that the tree never holds a value etcd no longer has and a re-read of etcd
 * yields the same tree; *err says why.
 */
int sl_quota_tree_apply_put(sl_quota_tree *t, const char *root, const char *key, size_t key_len,
                            const char *val, size_t val_len, const char **err);
/* Apply an etcd delete: 0 when an entry was removed, -ENOENT otherwise. */
int sl_quota_tree_apply_delete(sl_quota_tree *t, const char *root, const char *key,
                               size_t key_len);

/* Visit every entry (order unspecified). Return nonzero from fn to stop. */
typedef int (*sl_quota_visit_fn)(void *ud, const sl_quota_path *p, const sl_quota *q,
                                 uint32_t factor);
void sl_quota_tree_visit(const sl_quota_tree *t, sl_quota_visit_fn fn, void *ud);

/* ---- lookup ---- */

/* Where a matched quota came from. */
typedef enum sl_quota_source {
    SL_QUOTA_FROM_KEY = 1,            /* limit/key/<K>/quota */
    SL_QUOTA_FROM_KEY_DEFAULT = 2,    /* limit/key_default */
    SL_QUOTA_FROM_SUBLIMIT = 3,       /* limit/key/<resource>/sublimit/<method> */
    SL_QUOTA_FROM_SUBKEY_DEFAULT = 4, /* limit/subkey_default/<method> */
} sl_quota_source;

typedef struct sl_quota_match {
    sl_quota_source source;
    int level;            /* main quota: 1 = R/P/M, 2 = R/M, 3 = R, 4 = key_default; sub: 0 */
    const char *bucket;   /* the key whose state this quota counts (into the lookup's buffer) */
    size_t bucket_len;
    const char *name;     /* printable name for headers and logs (into the lookup's buffer) */
    size_t name_len;
    sl_quota raw;         /* as configured */
    sl_quota quota;       /* normalised for this limiter: rate / DF, burst as configured */
    uint32_t factor;      /* the DF used */
} sl_quota_match;

typedef struct sl_quota_lookup {
    size_t n;             /* 0, 1 or 2 quotas apply; main first when present */
    bool has_main;
    sl_quota_match m[2];
    char buf[4 * SL_QUOTA_MAX_KEY + 64];
} sl_quota_lookup;

/*
 * Find the quotas that apply to a request (empty/NULL prefix or method = absent; a prefix has
 * its leading and trailing '/' trimmed). The main quota is the first found of
 *     key <R>/<P>/<M>, key <R>/<M> (only with both P and M), key <R>, key_default
 * (absent parts are left out of the joined key, so (R, P, -) tries R/P then R). Its bucket is the
 * key where it was found, or <R> for key_default. With a method, the subkey quota is also
 * applied: sublimit <R>/<M>, else subkey_default/<M>; its bucket is (R, M).
 * Both are normalised by the resource's group size: factor/key/<R>, else factor/default, else 1;
 * `factor_override` > 0 replaces all three.
 * Returns 0, or -ENAMETOOLONG when a part or the joined path exceeds SL_QUOTA_MAX_KEY, -EINVAL
 * for an empty resource.
 */
int sl_quota_lookup_request(const sl_quota_tree *t, const char *resource, size_t resource_len,
                            const char *prefix, size_t prefix_len, const char *method,
                            size_t method_len, uint32_t factor_override, sl_quota_lookup *out);

/* ---- immutable snapshots ---- */

/*
 * A published, read-only tree with the state of its source. Reference counted: whoever holds a
 * reference may read it from any thread until it drops the reference.
 */
typedef struct sl_quota_snap {
    const sl_quota_tree *tree;
    bool loaded;          /* false until the source's first successful load */
    int64_t revision;     /* etcd revision the tree reflects (0 for a file or nothing) */
    int64_t loaded_at_ms; /* wall clock of publication */
    uint64_t generation;  /* 1, 2, ... per source */
    atomic_uint_fast64_t refs;
} sl_quota_snap;

/* Wrap `tree` (ownership passes to the snapshot, even on failure) with one reference. */
int sl_quota_snap_new(sl_quota_tree *tree, bool loaded, int64_t revision, int64_t loaded_at_ms,
                      sl_quota_snap **out);
void sl_quota_snap_ref(sl_quota_snap *s);
void sl_quota_snap_unref(sl_quota_snap *s); /* frees on the last reference; NULL is ignored */

#endif

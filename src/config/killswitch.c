/*
 * The switchboard (see killswitch.h): entries in small open-addressing maps, the source layer and
 * the admin layer merged into immutable snapshots, and the quota-file sections. The watcher
 * thread, the file reload, the source status and the publication are config/watched.c's.
 *
 * Maps. Keys are (kind, name): a switch "api" and the concurrency entry of resource "api" are
 * different entries. Linear probing with backward-shift deletion (no tombstones, so a map that
 * sees many puts and deletes never degrades), grown x2 past half full, capped at max_entries.
 *
 * Publication is config/watched.h's slot; the two layers and the switch counts are under mu.
 *
 * etcd. A full load reads the three subtrees (killswitch/, concurrency/, fleet) with three ranges,
 * then the watch of <root>/ starts from the first range's revision + 1: events between the ranges
 * are replayed and, applied in order, end in the current state. The watch (shared with the quota
 * source in a node, config/watched.h) sees the quota tree's events too and ignores them.
 */
#include "config/killswitch.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "config/config.h"
#include "config/watched.h"
#include "config/yamlwalk.h"
#include "sluice/clock.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define DEFAULT_DURATION_MS 60000
#define DEFAULT_RESERVE 0.2

enum { K_SWITCH = 1, K_CONC = 2 };

/* ---------------------------------------------------------------- values */

const char *sl_killswitch_mode_name(sl_killswitch_mode m)
{
    switch (m) {
    case SL_KILLSWITCH_SHADOW: return "shadow";
    case SL_KILLSWITCH_KILLED: return "killed";
    default: return "enforce";
    }
}

const char *sl_killswitch_source_name(sl_killswitch_source s)
{
    switch (s) {
    case SL_KILLSWITCH_ETCD: return "etcd";
    case SL_KILLSWITCH_FILE: return "file";
    default: return "none";
    }
}

static bool word_is(const char *s, size_t n, const char *w)
{
    size_t wl = strlen(w);
    if (n != wl)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != w[i])
            return false;
    }
    return true;
}

static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t' || **s == '\n' || **s == '\r'))
        (*s)++, (*n)--;
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\n' ||
                  (*s)[*n - 1] == '\r'))
        (*n)--;
}

int sl_killswitch_parse_mode(const char *s, size_t n)
{
    if (!s)
        return -EINVAL;
    trim(&s, &n);
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') /* a JSON string */
        s++, n -= 2;
    static const char *const killed[] = {"on", "true", "yes", "1", "kill", "killed"};
    static const char *const shadow[] = {"shadow", "dry-run", "dryrun"};
    static const char *const enforce[] = {"off", "false", "no", "0", "enforce"};
    for (size_t i = 0; i < sizeof killed / sizeof killed[0]; i++)
        if (word_is(s, n, killed[i]))
            return SL_KILLSWITCH_KILLED;
    for (size_t i = 0; i < sizeof shadow / sizeof shadow[0]; i++)
        if (word_is(s, n, shadow[i]))
            return SL_KILLSWITCH_SHADOW;
    for (size_t i = 0; i < sizeof enforce / sizeof enforce[0]; i++)
        if (word_is(s, n, enforce[i]))
            return SL_KILLSWITCH_ENFORCE;
    return -EINVAL;
}

/* A duration: milliseconds as a whole number, or sluiced's duration syntax as a string. */
static int duration_text(const char *s, int64_t *ms)
{
    int64_t ns;
    if (sl_opt_parse_duration(s, &ns))
        return -EINVAL;
    if (ns < 1000000 || ns / 1000000 > SL_KILLSWITCH_MAX_DURATION_MS)
        return -EINVAL;
    *ms = ns / 1000000;
    return 0;
}

static int duration_json(const json_t *j, int64_t *ms)
{
    if (json_is_integer(j)) {
        json_int_t v = json_integer_value(j);
        if (v < 1 || v > SL_KILLSWITCH_MAX_DURATION_MS)
            return -EINVAL;
        *ms = v;
        return 0;
    }
    if (json_is_string(j))
        return duration_text(json_string_value(j), ms);
    return -EINVAL;
}

static json_t *load_object(const char *s, size_t len, const char **err)
{
    json_error_t jerr;
    json_t *root = json_loadb(s, len, 0, &jerr);
    if (!root) {
        *err = "not valid JSON";
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *err = "not a JSON object";
        return NULL;
    }
    return root;
}

int sl_killswitch_parse_conc(const char *s, size_t len, sl_killswitch_conc *out, const char **err)
{
    json_t *root = load_object(s, len, err);
    if (!root)
        return -EINVAL;
    int rc = -EINVAL;
    const char *key;
    json_t *v;
    sl_killswitch_conc c = {.limit = -1, .duration_ms = DEFAULT_DURATION_MS};
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "limit")) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > SL_KILLSWITCH_MAX_LIMIT) {
                *err = "concurrency \"limit\" must be a whole number >= 0";
                goto out;
            }
            c.limit = json_integer_value(v);
        } else if (!strcmp(key, "duration")) {
            if (duration_json(v, &c.duration_ms)) {
                *err = "concurrency \"duration\" must be milliseconds or a duration (\"30s\")";
                goto out;
            }
        } else {
            *err = "unknown field in a concurrency limit (limit, duration)";
            goto out;
        }
    }
    if (c.limit < 0) {
        *err = "a concurrency limit needs \"limit\"";
        goto out;
    }
    *out = c;
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int fleet_ok(const sl_killswitch_fleet *f, const char **err)
{
    if (f->capacity < 1 || f->capacity > SL_KILLSWITCH_MAX_LIMIT) {
        *err = "fleet \"capacity\" must be a whole number >= 1";
        return -EINVAL;
    }
    if (!(f->reserve >= 0 && f->reserve < 1)) {
        *err = "fleet \"reserve\" must be in [0, 1)";
        return -EINVAL;
    }
    return 0;
}

int sl_killswitch_parse_fleet(const char *s, size_t len, sl_killswitch_fleet *out,
                              const char **err)
{
    json_t *root = load_object(s, len, err);
    if (!root)
        return -EINVAL;
    int rc = -EINVAL;
    const char *key;
    json_t *v;
    sl_killswitch_fleet f = {.capacity = 0, .reserve = DEFAULT_RESERVE,
                             .duration_ms = DEFAULT_DURATION_MS};
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "capacity")) {
            if (!json_is_integer(v)) {
                *err = "fleet \"capacity\" must be a whole number >= 1";
                goto out;
            }
            f.capacity = json_integer_value(v);
        } else if (!strcmp(key, "reserve")) {
            if (!json_is_number(v)) {
                *err = "fleet \"reserve\" must be in [0, 1)";
                goto out;
            }
            f.reserve = json_number_value(v);
        } else if (!strcmp(key, "duration")) {
            if (duration_json(v, &f.duration_ms)) {
                *err = "fleet \"duration\" must be milliseconds or a duration (\"60s\")";
                goto out;
            }
        } else {
            *err = "unknown field in fleet (capacity, reserve, duration)";
            goto out;
        }
    }
    if ((rc = fleet_ok(&f, err)) == 0)
        *out = f;
out:
    json_decref(root);
    return rc;
}

/* ---------------------------------------------------------------- maps */

typedef struct entry {
    uint64_t hash; /* 0: empty slot */
    char *name;
    uint32_t len;
    uint8_t kind;
    uint8_t mode;  /* K_SWITCH: sl_killswitch_mode */
    uint8_t admin; /* in a snapshot: the mode is an admin override */
    sl_killswitch_conc conc;
} entry;

typedef struct kmap {
    entry *e;
    size_t cap, n, max;
    uint64_t seed;
} kmap;

static uint64_t khash(const kmap *m, int kind, const char *name, size_t len)
{
    uint64_t h = XXH3_64bits_withSeed(name, len, m->seed + (uint64_t)kind);
    return h ? h : 1;
}

static void kmap_init(kmap *m, size_t max, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->max = max;
    m->seed = seed;
}

static void kmap_free(kmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->e[i].hash)
            free(m->e[i].name);
    free(m->e);
    m->e = NULL;
    m->cap = m->n = 0;
}

static entry *kmap_find(const kmap *m, int kind, const char *name, size_t len)
{
    if (!m->cap)
        return NULL;
    uint64_t h = khash(m, kind, name, len);
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        entry *e = &m->e[i];
        if (!e->hash)
            return NULL;
        if (e->hash == h && e->kind == kind && e->len == len && !memcmp(e->name, name, len))
            return e;
    }
}

/* Place an entry whose name is already owned (no duplicate check). */
static void kmap_place(kmap *m, const entry *src)
{
    for (size_t i = src->hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->e[i].hash) {
            m->e[i] = *src;
            m->n++;
            return;
        }
    }
}

static int kmap_grow(kmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    entry *old = m->e;
    size_t oldcap = m->cap;
    m->e = calloc(cap, sizeof *m->e);
    if (!m->e) {
        m->e = old;
        return -ENOMEM;
    }
    m->cap = cap;
    m->n = 0;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].hash)
            kmap_place(m, &old[i]);
    free(old);
    return 0;
}

/* Insert or replace (kind, name) with the value fields of v. 0, -ENOSPC, -ENOMEM. */
static int kmap_put(kmap *m, int kind, const char *name, size_t len, const entry *v)
{
    entry *e = kmap_find(m, kind, name, len);
    if (e) {
        e->mode = v->mode;
        e->admin = v->admin;
        e->conc = v->conc;
        return 0;
    }
    if (m->n >= m->max)
        return -ENOSPC;
    if ((m->n + 1) * 2 > m->cap && kmap_grow(m))
        return -ENOMEM;
    entry n = *v;
    n.kind = (uint8_t)kind;
    n.len = (uint32_t)len;
    n.hash = khash(m, kind, name, len);
    n.name = malloc(len + 1);
    if (!n.name)
        return -ENOMEM;
    memcpy(n.name, name, len);
    n.name[len] = 0;
    kmap_place(m, &n);
    return 0;
}

static bool kmap_del(kmap *m, int kind, const char *name, size_t len)
{
    entry *e = kmap_find(m, kind, name, len);
    if (!e)
        return false;
    free(e->name);
    size_t i = (size_t)(e - m->e), mask = m->cap - 1;
    /* backward shift: move later members of the probe run into the hole */
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (!m->e[j].hash)
            break;
        size_t home = m->e[j].hash & mask;
        /* j's entry may move to i iff i lies cyclically in [home, j) */
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    memset(&m->e[i], 0, sizeof m->e[i]);
    m->n--;
    return true;
}

/* The source layer: what etcd or the file says. */
typedef struct layer {
    kmap map;
    bool has_fleet;
    sl_killswitch_fleet fleet;
} layer;

/* ---------------------------------------------------------------- snapshots */

struct sl_killswitch_snap {
    kmap map;            /* switches with a mode other than enforce, and concurrency entries */
    bool loaded;
    bool quiet;          /* no switch set */
    sl_killswitch_mode global;
    bool has_default;
    sl_killswitch_conc def;
    bool has_fleet;
    sl_killswitch_fleet fleet;
    size_t switches, overrides, concurrency;
    uint64_t generation;
    _Atomic uint64_t refs;
};

static void snap_unref(sl_killswitch_snap *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        kmap_free(&s->map);
        free(s);
    }
}

bool sl_killswitch_snap_quiet(const sl_killswitch_snap *s)
{
    return !s || s->quiet;
}

sl_killswitch_mode sl_killswitch_snap_global(const sl_killswitch_snap *s)
{
    return s ? s->global : SL_KILLSWITCH_ENFORCE;
}

sl_killswitch_mode sl_killswitch_snap_mode(const sl_killswitch_snap *s, const char *name,
                                           size_t len)
{
    if (!s || s->quiet || !name)
        return SL_KILLSWITCH_ENFORCE;
    const entry *e = kmap_find(&s->map, K_SWITCH, name, len);
    return e ? (sl_killswitch_mode)e->mode : SL_KILLSWITCH_ENFORCE;
}

bool sl_killswitch_snap_concurrency(const sl_killswitch_snap *s, const char *key, size_t len,
                                    sl_killswitch_conc *out)
{
    if (!s)
        return false;
    if (s->concurrency > (s->has_default ? 1u : 0u) && key) {
        const entry *e = kmap_find(&s->map, K_CONC, key, len);
        if (e && len) {
            *out = e->conc;
            return true;
        }
    }
    if (s->has_default) {
        *out = s->def;
        return true;
    }
    return false;
}

const sl_killswitch_fleet *sl_killswitch_snap_fleet(const sl_killswitch_snap *s)
{
    return s && s->has_fleet ? &s->fleet : NULL;
}

bool sl_killswitch_snap_loaded(const sl_killswitch_snap *s)
{
    return s && s->loaded;
}

/* ---------------------------------------------------------------- the source */

struct sl_killswitch {
    sl_killswitch_source source;
    sl_logger *log;
    size_t max_entries;
    uint64_t seed;
    sl_watched *w;

    pthread_mutex_t mu; /* the layers and the switchboard's own status fields */
    layer src;
    kmap admin;
    bool loaded;        /* what snapshots say: the source has been read */
    sl_killswitch_status st;

    struct metric_arg {
        sl_killswitch *ks;
        int which;
    } margs[6]; /* collector arguments */
};

typedef struct metric_arg metric_arg;

static void snap_ref(void *p)
{
    atomic_fetch_add(&((sl_killswitch_snap *)p)->refs, 1);
}

static void snap_unref_any(void *p)
{
    snap_unref(p);
}

static void snap_stamp(void *p, uint64_t generation)
{
    ((sl_killswitch_snap *)p)->generation = generation;
}

/* Merge the layers into a new snapshot and publish it. Called with mu held. */
static int publish_locked(sl_killswitch *ks)
{
    sl_killswitch_snap *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    kmap_init(&s->map, ks->max_entries * 2 + 2, ks->seed);
    int rc = 0;
    for (size_t i = 0; i < ks->src.map.cap && !rc; i++) {
        const entry *e = &ks->src.map.e[i];
        if (!e->hash)
            continue;
        if (e->kind == K_CONC) {
            if (e->len == 0) {
                s->has_default = true;
                s->def = e->conc;
            }
            s->concurrency++;
            rc = kmap_put(&s->map, K_CONC, e->name, e->len, e);
            continue;
        }
        if (kmap_find(&ks->admin, K_SWITCH, e->name, e->len))
            continue; /* overridden: taken from the admin layer below */
        if (e->mode != SL_KILLSWITCH_ENFORCE) {
            entry v = *e;
            v.admin = 0;
            rc = kmap_put(&s->map, K_SWITCH, e->name, e->len, &v);
            s->switches++;
        }
    }
    for (size_t i = 0; i < ks->admin.cap && !rc; i++) {
        const entry *e = &ks->admin.e[i];
        if (!e->hash || e->mode == SL_KILLSWITCH_ENFORCE)
            continue;
        entry v = *e;
        v.admin = 1;
        rc = kmap_put(&s->map, K_SWITCH, e->name, e->len, &v);
        s->switches++;
        s->overrides++;
    }
    if (rc) {
        kmap_free(&s->map);
        free(s);
        return rc;
    }
    s->has_fleet = ks->src.has_fleet;
    s->fleet = ks->src.fleet;
    s->quiet = s->switches == 0;
    const entry *g = kmap_find(&s->map, K_SWITCH, SL_KILLSWITCH_GLOBAL, 1);
    s->global = g ? (sl_killswitch_mode)g->mode : SL_KILLSWITCH_ENFORCE;
    s->loaded = ks->loaded;
    atomic_init(&s->refs, 1);
    ks->st.switches = s->switches;
    ks->st.overrides = s->overrides;
    ks->st.concurrency = s->concurrency;
    ks->st.fleet = s->has_fleet;
    sl_watched_publish(ks->w, s);
    return 0;
}

const sl_killswitch_snap *sl_killswitch_read(sl_killswitch *ks, sl_killswitch_reader *r)
{
    r->snap = sl_watched_read(ks->w, r->snap, &r->generation);
    return r->snap;
}

void sl_killswitch_reader_release(sl_killswitch_reader *r)
{
    snap_unref(r->snap);
    r->snap = NULL;
    r->generation = 0;
}

void sl_killswitch_visit(sl_killswitch *ks, sl_killswitch_switch_fn sw, sl_killswitch_conc_fn cc,
                         void *ud)
{
    sl_killswitch_snap *s = sl_watched_acquire(ks->w);
    for (size_t i = 0; i < s->map.cap; i++) {
        const entry *e = &s->map.e[i];
        if (!e->hash)
            continue;
        int stop = 0;
        if (e->kind == K_SWITCH && sw)
            stop = sw(ud, e->name, e->len, (sl_killswitch_mode)e->mode, e->admin);
        else if (e->kind == K_CONC && cc)
            stop = cc(ud, e->name, e->len, &e->conc);
        if (stop)
            break;
    }
    snap_unref(s);
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
    entry v = {.mode = (uint8_t)mode, .admin = 1};
    int rc = kmap_put(&ks->admin, K_SWITCH, name, len, &v);
    if (rc == 0) {
        ks->st.updates++;
        rc = publish_locked(ks);
    }
    pthread_mutex_unlock(&ks->mu);
    if (rc == 0)
        sl_log_info(ks->log, "switch set by admin call name=%.*s mode=%s", (int)(len > 256 ? 256 : len),
                    name, sl_killswitch_mode_name(mode));
    return rc;
}

/* ---------------------------------------------------------------- applying source entries */

/* The source wrote (kind, name): an admin override of that switch ends (last write wins). */
static void source_wrote(sl_killswitch *ks, int kind, const char *name, size_t len)
{
    if (kind == K_SWITCH)
        kmap_del(&ks->admin, K_SWITCH, name, len);
}

static void invalid(sl_killswitch *ks, const char *what, size_t wlen, const char *why)
{
    ks->st.invalid++;
    sl_log_warn(ks->log, "switchboard entry ignored entry=%.*s error=\"%s\"",
                (int)(wlen > 512 ? 512 : wlen), what, why);
}

/* Apply one etcd key (relative to the root) to a layer: 0 applied, -ENOENT not ours. A malformed
 * value removes the entry (the layer never holds what etcd no longer has) and is counted. */
static int apply_rel(sl_killswitch *ks, layer *l, const char *rel, size_t rlen, const char *val,
                     size_t vlen, bool del, bool events)
{
    const char *err = NULL;
    int kind;
    const char *name;
    size_t nlen;
    if (rlen > 11 && !memcmp(rel, "killswitch/", 11)) {
        kind = K_SWITCH;
        name = rel + 11;
        nlen = rlen - 11;
    } else if (rlen == 19 && !memcmp(rel, "concurrency/default", 19)) {
        kind = K_CONC;
        name = "";
        nlen = 0;
    } else if (rlen > 16 && !memcmp(rel, "concurrency/key/", 16)) {
        kind = K_CONC;
        name = rel + 16;
        nlen = rlen - 16;
    } else if (rlen == 5 && !memcmp(rel, "fleet", 5)) {
        if (del) {
            l->has_fleet = false;
            return 0;
        }
        sl_killswitch_fleet f;
        if (sl_killswitch_parse_fleet(val, vlen, &f, &err)) {
            l->has_fleet = false;
            invalid(ks, rel, rlen, err);
            return -EINVAL;
        }
        l->has_fleet = true;
        l->fleet = f;
        return 0;
    } else {
        return -ENOENT;
    }
    if (nlen > SL_KILLSWITCH_MAX_NAME) {
        invalid(ks, rel, rlen, "name too long");
        return -EINVAL;
    }
    if (events)
        source_wrote(ks, kind, name, nlen);
    if (del) {
        kmap_del(&l->map, kind, name, nlen);
        return 0;
    }
    entry v = {0};
    if (kind == K_SWITCH) {
        int m = sl_killswitch_parse_mode(val, vlen);
        if (m < 0)
            err = "a switch is \"on\", \"shadow\" or \"off\"";
        v.mode = (uint8_t)(m < 0 ? 0 : m);
    } else if (sl_killswitch_parse_conc(val, vlen, &v.conc, &err) == 0) {
        err = NULL;
    }
    if (err) {
        kmap_del(&l->map, kind, name, nlen);
        invalid(ks, rel, rlen, err);
        return -EINVAL;
    }
    int rc = kmap_put(&l->map, kind, name, nlen, &v);
    if (rc) {
        invalid(ks, rel, rlen, rc == -ENOSPC ? "too many switchboard entries" : "out of memory");
        return rc;
    }
    return 0;
}

/* Replace the source layer by `fresh` (a full load). Admin overrides of switches whose source
 * value changed end. Called with mu held; takes ownership of fresh. */
static int replace_layer(sl_killswitch *ks, layer *fresh)
{
    for (size_t i = 0; i < ks->admin.cap; i++) {
        entry *a = &ks->admin.e[i];
        if (!a->hash)
            continue;
        const entry *o = kmap_find(&ks->src.map, K_SWITCH, a->name, a->len);
        const entry *n = kmap_find(&fresh->map, K_SWITCH, a->name, a->len);
        int om = o ? o->mode : SL_KILLSWITCH_ENFORCE, nm = n ? n->mode : SL_KILLSWITCH_ENFORCE;
        if (om != nm) {
            kmap_del(&ks->admin, K_SWITCH, a->name, a->len);
            i--; /* the backward shift may have moved another entry here */
        }
    }
    kmap_free(&ks->src.map);
    ks->src = *fresh;
    return publish_locked(ks);
}

/* ---------------------------------------------------------------- the quota file */

/* The walk's state: sl_yw first, so a callback's sl_yw * converts back (see yamlwalk.h). */
typedef struct ywalk {
    sl_yw yw;
    layer *l;
} ywalk;

static int yput(sl_yw *w, const yaml_node_t *at, int kind, const char *name, size_t len,
                const entry *v)
{
    if (len > SL_KILLSWITCH_MAX_NAME)
        return sl_yw_fail(w, at, -EINVAL, "name too long");
    int rc = kmap_put(&((ywalk *)w)->l->map, kind, name, len, v);
    if (rc == -ENOSPC)
        return sl_yw_fail(w, at, -EINVAL, "too many switchboard entries");
    if (rc)
        return sl_yw_fail(w, at, -EINVAL, "out of memory");
    return 0;
}

static int ks_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    size_t nl = 0, vl = 0;
    const char *name = sl_yw_scalar(k, &nl), *val = sl_yw_scalar(v, &vl);
    if (nl == 0)
        return sl_yw_fail(w, k, -EINVAL, "a switch needs a name");
    int m = val ? sl_killswitch_parse_mode(val, vl) : -EINVAL;
    if (m < 0)
        return sl_yw_fail(w, v, -EINVAL, "a switch is on, shadow or off");
    entry e = {.mode = (uint8_t)m};
    return yput(w, k, K_SWITCH, name, nl, &e);
}

static int duration_node(sl_yw *w, const yaml_node_t *v, int64_t *ms)
{
    size_t l;
    const char *s = sl_yw_scalar(v, &l);
    char buf[64];
    if (!s || l == 0 || l >= sizeof buf)
        return sl_yw_fail(w, v, -EINVAL, "a duration is milliseconds or like 30s");
    memcpy(buf, s, l);
    buf[l] = 0;
    if (duration_text(buf, ms))
        return sl_yw_fail(w, v, -EINVAL, "invalid duration '%s' (e.g. 500ms, 30s, 1m)", buf);
    return 0;
}

static int int_node(sl_yw *w, const yaml_node_t *v, const char *what, int64_t lo, int64_t *out)
{
    size_t l;
    const char *s = sl_yw_scalar(v, &l);
    char buf[32];
    if (!s || l == 0 || l >= sizeof buf)
        return sl_yw_fail(w, v, -EINVAL, "%s must be a whole number", what);
    memcpy(buf, s, l);
    buf[l] = 0;
    char *end;
    errno = 0;
    long long x = strtoll(buf, &end, 10);
    if (*end || errno || x < lo || x > SL_KILLSWITCH_MAX_LIMIT)
        return sl_yw_fail(w, v, -EINVAL, "%s must be a whole number >= %lld", what, (long long)lo);
    *out = x;
    return 0;
}

typedef struct conc_acc {
    sl_killswitch_conc c;
    bool has_limit;
} conc_acc;

static int conc_field(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    conc_acc *a = ud;
    if (sl_yw_is(k, "limit")) {
        a->has_limit = true;
        return int_node(w, v, "limit", 0, &a->c.limit);
    }
    if (sl_yw_is(k, "duration"))
        return duration_node(w, v, &a->c.duration_ms);
    return sl_yw_fail(w, k, -EINVAL, "unknown field in a concurrency limit (limit, duration)");
}

static int conc_value(sl_yw *w, const yaml_node_t *at, const yaml_node_t *v, const char *name,
                      size_t len)
{
    conc_acc a = {.c = {.limit = 0, .duration_ms = DEFAULT_DURATION_MS}};
    if (!v || v->type != YAML_MAPPING_NODE)
        return sl_yw_fail(w, v ? v : at, -EINVAL, "a concurrency limit is {limit: N, duration: D}");
    int rc = sl_yw_each(w, v, "a concurrency limit", conc_field, &a);
    if (rc)
        return rc;
    if (!a.has_limit)
        return sl_yw_fail(w, v, -EINVAL, "a concurrency limit needs a limit");
    entry e = {.conc = a.c};
    return yput(w, at, K_CONC, name, len, &e);
}

static int conc_key_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    size_t l = 0;
    const char *name = sl_yw_scalar(k, &l);
    if (l == 0)
        return sl_yw_fail(w, k, -EINVAL, "a concurrency key needs a name");
    return conc_value(w, k, v, name, l);
}

static int conc_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (sl_yw_is(k, "default"))
        return conc_value(w, k, v, "", 0);
    if (sl_yw_is(k, "key"))
        return sl_yw_each(w, v, "concurrency.key", conc_key_pair, NULL);
    return sl_yw_fail(w, k, -EINVAL, "unknown field under concurrency (default, key)");
}

static int fleet_field(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    sl_killswitch_fleet *f = ud;
    if (sl_yw_is(k, "capacity"))
        return int_node(w, v, "capacity", 1, &f->capacity);
    if (sl_yw_is(k, "duration"))
        return duration_node(w, v, &f->duration_ms);
    if (sl_yw_is(k, "reserve")) {
        size_t l;
        const char *s = sl_yw_scalar(v, &l);
        char buf[48];
        if (!s || l == 0 || l >= sizeof buf)
            return sl_yw_fail(w, v, -EINVAL, "reserve must be a number in [0, 1)");
        memcpy(buf, s, l);
        buf[l] = 0;
        char *end;
        f->reserve = strtod(buf, &end);
        if (*end || !(f->reserve >= 0 && f->reserve < 1))
            return sl_yw_fail(w, v, -EINVAL, "reserve must be a number in [0, 1)");
        return 0;
    }
    return sl_yw_fail(w, k, -EINVAL, "unknown field in fleet (capacity, reserve, duration)");
}

static int top_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (sl_yw_is(k, "killswitch"))
        return sl_yw_each(w, v, "killswitch", ks_pair, NULL);
    if (sl_yw_is(k, "concurrency"))
        return sl_yw_each(w, v, "concurrency", conc_pair, NULL);
    if (sl_yw_is(k, "fleet")) {
        if (sl_yw_empty(v))
            return 0;
        sl_killswitch_fleet f = {.capacity = 0, .reserve = DEFAULT_RESERVE,
                                 .duration_ms = DEFAULT_DURATION_MS};
        int rc = sl_yw_each(w, v, "fleet", fleet_field, &f);
        if (rc)
            return rc;
        const char *why;
        if (fleet_ok(&f, &why))
            return sl_yw_fail(w, v, -EINVAL, "%s", why);
        ywalk *yw = (ywalk *)w;
        yw->l->has_fleet = true;
        yw->l->fleet = f;
        return 0;
    }
    return 0; /* limit:, factor: are the quota tree's (config/quotafile.c) */
}

static int parse_text(const char *text, size_t len, layer *l, char *err, size_t errlen)
{
    ywalk w = {.l = l};
    int rc = sl_yw_load(&w.yw, text, len, err, errlen);
    w.yw.scalar_keys = true;
    yaml_node_t *root = rc ? NULL : sl_yw_root(&w.yw);
    if (root)
        rc = sl_yw_each(&w.yw, root, "the quota file", top_pair, NULL);
    sl_yw_free(&w.yw);
    return rc;
}

int sl_killswitch_check_file_text(const char *text, size_t len, char *err, size_t errlen)
{
    layer l = {0};
    kmap_init(&l.map, SL_KILLSWITCH_DEFAULT_MAX_ENTRIES, 1);
    int rc = parse_text(text, len, &l, err, errlen);
    kmap_free(&l.map);
    return rc;
}

static int read_file(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -ENOMEM;
    while (!rc) {
        if (n == cap) {
            if (cap >= ((size_t)16 << 20)) {
                snprintf(err, errlen, "%s: larger than 16 MiB", path);
                rc = -EFBIG;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) {
                snprintf(err, errlen, "%s: read error", path);
                rc = -EIO;
            }
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

static int on_load_file(void *ud, const char *path, char *err, size_t errlen)
{
    sl_killswitch *ks = ud;
    char *text = NULL;
    size_t len = 0;
    int rc = read_file(path, &text, &len, err, errlen);
    if (rc)
        return rc;
    layer fresh = {0};
    kmap_init(&fresh.map, ks->max_entries, ks->seed);
    char inner[200];
    rc = parse_text(text, len, &fresh, inner, sizeof inner);
    free(text);
    if (rc) {
        snprintf(err, errlen, "%s: %s", path, inner);
        kmap_free(&fresh.map);
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
    char buf[256];
    if (!err || errlen == 0)
        err = buf, errlen = sizeof buf; /* for the log line */
    int rc = sl_watched_reload(ks->w, err, errlen);
    if (rc && rc != -EOPNOTSUPP)
        sl_log_error(ks->log, "switchboard not loaded, keeping the current switches error=\"%s\"",
                     err);
    return rc;
}

/* ---------------------------------------------------------------- etcd */

/* Apply a key with the root (ignored unless it is ours): as apply_rel. Called with mu held. */
static int apply_kv(sl_killswitch *ks, layer *l, const sl_etcd_kv *kv, bool del, bool events)
{
    const char *wp = sl_watched_watch_prefix(ks->w);
    size_t pl = strlen(wp);
    if (kv->key_len <= pl || memcmp(kv->key, wp, pl) != 0)
        return -ENOENT;
    return apply_rel(ks, l, kv->key + pl, kv->key_len - pl, kv->value, kv->value_len, del,
                     events);
}

static int on_load(void *ud, const sl_etcd_kvs *kvs, size_t n, int64_t revision)
{
    sl_killswitch *ks = ud;
    layer fresh = {0};
    kmap_init(&fresh.map, ks->max_entries, ks->seed);
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
    ks->log = cfg->log;
    ks->max_entries = cfg->max_entries ? cfg->max_entries : SL_KILLSWITCH_DEFAULT_MAX_ENTRIES;
    ks->seed = ((uint64_t)sl_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)ks) *
               0x9e3779b97f4a7c15ull;
    pthread_mutex_init(&ks->mu, NULL);
    kmap_init(&ks->src.map, ks->max_entries, ks->seed);
    kmap_init(&ks->admin, ks->max_entries, ks->seed);

    sl_watched_config wc = {
        .source = cfg->source,
        .etcd_endpoints = cfg->etcd_endpoints,
        .n_endpoints = cfg->n_endpoints,
        .prefix = cfg->prefix,
        .file = cfg->file,
        .ranges = ranges,
        .n_ranges = sizeof ranges / sizeof ranges[0],
        .backoff_min_ms = cfg->backoff_min_ms,
        .backoff_max_ms = cfg->backoff_max_ms,
        .connect_timeout_ms = cfg->connect_timeout_ms,
        .request_timeout_ms = cfg->request_timeout_ms,
        .what = "switches",
        .log = cfg->log,
        .ops = {.ref = snap_ref, .unref = snap_unref_any, .stamp = snap_stamp, .load = on_load,
                .events = on_events, .load_file = on_load_file},
        .ud = ks,
    };
    int rc = sl_watched_new(&wc, &ks->w);
    if (rc) {
        sl_killswitch_free(ks);
        return rc;
    }
    ks->source = (sl_killswitch_source)sl_watched_mode_of(ks->w);
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
    kmap_free(&ks->src.map);
    kmap_free(&ks->admin);
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

static void collect_status(void *arg, sl_metrics_sink *sink)
{
    metric_arg *a = arg;
    sl_killswitch_status st;
    sl_killswitch_status_get(a->ks, &st);
    const char *src = sl_killswitch_source_name(st.source);
    double v = 0;
    switch (a->which) {
    case 0: v = st.loaded; break;
    case 1: v = st.connected; break;
    case 2: v = (double)st.updates; break;
    case 3: v = (double)st.invalid; break;
    case 4: v = (double)st.reconnects; break;
    case 5: v = (double)st.switches; break;
    }
    sl_metrics_sink_emit(sink, &src, 1, v);
}

int sl_killswitch_register_metrics(sl_killswitch *ks, sl_metrics *m)
{
    int rc = sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_killswitch",
                                  "1 per switch set: a limiter killed (admits everything) or in "
                                  "shadow mode (admits what it would reject), by name and source.",
                                  "name,mode,origin", collect_switches, ks);
    if (rc)
        return rc;
    static const struct {
        sl_metrics_type type;
        const char *name, *help;
    } defs[6] = {
        {SL_METRICS_GAUGE, "sluice_switch_source_loaded", "1 once the switchboard has been read"},
        {SL_METRICS_GAUGE, "sluice_switch_source_connected",
         "1 while the etcd watch of the switchboard is established (always 1 for a file)"},
        {SL_METRICS_COUNTER, "sluice_switch_source_updates_total",
         "switchboard changes applied (etcd events and admin calls)"},
        {SL_METRICS_COUNTER, "sluice_switch_source_invalid_total",
         "switchboard entries ignored as malformed or over the entry cap"},
        {SL_METRICS_COUNTER, "sluice_switch_source_reconnects_total",
         "times the etcd watch of the switchboard was set up again"},
        {SL_METRICS_GAUGE, "sluice_switches_set", "switches set (killed or shadow), overrides included"},
    };
    for (int i = 0; i < 6; i++) {
        ks->margs[i] = (metric_arg){ks, i};
        rc = sl_metrics_collector(m, defs[i].type, defs[i].name, defs[i].help, "source",
                                  collect_status, &ks->margs[i]);
        if (rc)
            return rc;
    }
    return 0;
}

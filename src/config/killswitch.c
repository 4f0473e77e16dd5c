/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's values (see killswitch.h): the mode words, the JSON of concurrency limits and
 * fleets, the board (entries in a base string map keyed by (kind, name), so that a switch "api"
 * and the concurrency entry of resource "api" are different entries) with the etcd key layout
 * applied to it, and the immutable snapshots the request path reads: a source's board merged with
 * the admin overrides. The file sections are config/killswitchfile.c's, the source
 * config/killswitchsrc.c's.
 */
#include "config/killswitch.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "config/opt.h"

/* ---------------------------------------------------------------- values */

const char *sl_killswitch_mode_name(sl_killswitch_mode m)
{
    switch (m) {
    case SL_KILLSWITCH_SHADOW: return "shadow";
    case SL_KILLSWITCH_KILLED: return "killed";
    default: return "enforce";
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

int sl_killswitch_parse_duration(const char *s, int64_t *ms)
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
        return sl_killswitch_parse_duration(json_string_value(j), ms);
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

/* One member of a limit's JSON object: its name, how its value is read, where it goes, and the
 * message when the value is not right. */
typedef struct jfield {
    const char *name;
    enum { JF_INT, JF_NUMBER, JF_DURATION } type;
    void *dst;         /* int64_t (JF_INT, JF_DURATION: milliseconds) or double (JF_NUMBER) */
    int64_t min, max;  /* JF_INT: inclusive bounds */
    const char *bad;
} jfield;

/* The members of the JSON object s[0..len), each into the field of fs[0..n) with its name; any
 * other member is an error (`unknown`). 0, or -EINVAL with *err at the first bad member. */
static int parse_object(const char *s, size_t len, const jfield *fs, size_t n,
                        const char *unknown, const char **err)
{
    json_t *root = load_object(s, len, err);
    if (!root)
        return -EINVAL;
    int rc = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        const jfield *f = NULL;
        for (size_t i = 0; i < n && !f; i++)
            if (!strcmp(key, fs[i].name))
                f = &fs[i];
        bool ok = false;
        if (!f) {
            *err = unknown;
        } else if (f->type == JF_INT) {
            ok = json_is_integer(v) && json_integer_value(v) >= f->min &&
                 json_integer_value(v) <= f->max;
            if (ok)
                *(int64_t *)f->dst = json_integer_value(v);
        } else if (f->type == JF_NUMBER) {
            ok = json_is_number(v);
            if (ok)
                *(double *)f->dst = json_number_value(v);
        } else {
            ok = duration_json(v, f->dst) == 0;
        }
        if (!ok) {
            if (f)
                *err = f->bad;
            rc = -EINVAL;
            break;
        }
    }
    json_decref(root);
    return rc;
}

int sl_killswitch_parse_conc(const char *s, size_t len, sl_killswitch_conc *out, const char **err)
{
    sl_killswitch_conc c = {.limit = -1, .duration_ms = SL_KILLSWITCH_DEFAULT_DURATION_MS};
    const jfield fs[] = {
        {"limit", JF_INT, &c.limit, 0, SL_KILLSWITCH_MAX_LIMIT,
         "concurrency \"limit\" must be a whole number >= 0"},
        {"duration", JF_DURATION, &c.duration_ms, 0, 0,
         "concurrency \"duration\" must be milliseconds or a duration (\"30s\")"},
    };
    int rc = parse_object(s, len, fs, sizeof fs / sizeof fs[0],
                          "unknown field in a concurrency limit (limit, duration)", err);
    if (rc)
        return rc;
    if (c.limit < 0) {
        *err = "a concurrency limit needs \"limit\"";
        return -EINVAL;
    }
    *out = c;
    return 0;
}

int sl_killswitch_fleet_check(const sl_killswitch_fleet *f, const char **err)
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
    sl_killswitch_fleet f = {.capacity = 0, .reserve = SL_KILLSWITCH_DEFAULT_RESERVE,
                             .duration_ms = SL_KILLSWITCH_DEFAULT_DURATION_MS};
    const jfield fs[] = {
        {"capacity", JF_INT, &f.capacity, INT64_MIN, INT64_MAX,
         "fleet \"capacity\" must be a whole number >= 1"},
        {"reserve", JF_NUMBER, &f.reserve, 0, 0, "fleet \"reserve\" must be in [0, 1)"},
        {"duration", JF_DURATION, &f.duration_ms, 0, 0,
         "fleet \"duration\" must be milliseconds or a duration (\"60s\")"},
    };
    int rc = parse_object(s, len, fs, sizeof fs / sizeof fs[0],
                          "unknown field in fleet (capacity, reserve, duration)", err);
    if (rc == 0 && (rc = sl_killswitch_fleet_check(&f, err)) == 0)
        *out = f;
    return rc;
}

/* ---------------------------------------------------------------- the board */

void sl_killswitch_board_init(sl_killswitch_board *b, size_t max_entries, uint64_t seed)
{
    memset(b, 0, sizeof *b);
    sl_strmap_init(&b->map, sizeof(sl_killswitch_entry), max_entries, seed);
}

void sl_killswitch_board_free(sl_killswitch_board *b)
{
    sl_strmap_free(&b->map);
}

int sl_killswitch_board_put(sl_killswitch_board *b, int kind, const char *name, size_t len,
                            const sl_killswitch_entry *v)
{
    return sl_strmap_put(&b->map, (uint32_t)kind, name, len, v, NULL);
}

bool sl_killswitch_board_del(sl_killswitch_board *b, int kind, const char *name, size_t len)
{
    return sl_strmap_remove(&b->map, (uint32_t)kind, name, len);
}

int sl_killswitch_board_apply(sl_killswitch_board *b, const char *rel, size_t rlen,
                              const char *val, size_t vlen, bool del, sl_killswitch_key *key,
                              const char **err)
{
    int kind;
    const char *name;
    size_t nlen;
    *key = (sl_killswitch_key){0};
    *err = NULL;
    if (rlen > 11 && !memcmp(rel, "killswitch/", 11)) {
        kind = SL_KILLSWITCH_K_SWITCH;
        name = rel + 11;
        nlen = rlen - 11;
    } else if (rlen == 19 && !memcmp(rel, "concurrency/default", 19)) {
        kind = SL_KILLSWITCH_K_CONC;
        name = "";
        nlen = 0;
    } else if (rlen > 16 && !memcmp(rel, "concurrency/key/", 16)) {
        kind = SL_KILLSWITCH_K_CONC;
        name = rel + 16;
        nlen = rlen - 16;
    } else if (rlen == 5 && !memcmp(rel, "fleet", 5)) {
        if (del) {
            b->has_fleet = false;
            return 0;
        }
        sl_killswitch_fleet f;
        if (sl_killswitch_parse_fleet(val, vlen, &f, err)) {
            b->has_fleet = false;
            return -EINVAL;
        }
        b->has_fleet = true;
        b->fleet = f;
        return 0;
    } else {
        return -ENOENT;
    }
    if (nlen > SL_KILLSWITCH_MAX_NAME) {
        *err = "name too long";
        return -EINVAL;
    }
    *key = (sl_killswitch_key){kind, name, nlen};
    if (del) {
        sl_killswitch_board_del(b, kind, name, nlen);
        return 0;
    }
    sl_killswitch_entry v = {0};
    if (kind == SL_KILLSWITCH_K_SWITCH) {
        int m = sl_killswitch_parse_mode(val, vlen);
        if (m < 0)
            *err = "a switch is \"on\", \"shadow\" or \"off\"";
        v.mode = (uint8_t)(m < 0 ? 0 : m);
    } else if (sl_killswitch_parse_conc(val, vlen, &v.conc, err) == 0) {
        *err = NULL;
    }
    if (*err) {
        sl_killswitch_board_del(b, kind, name, nlen);
        return -EINVAL;
    }
    int rc = sl_killswitch_board_put(b, kind, name, nlen, &v);
    if (rc)
        *err = rc == -ENOSPC ? "too many switchboard entries" : "out of memory";
    return rc;
}

/* ---------------------------------------------------------------- snapshots */

struct sl_killswitch_snap {
    sl_killswitch_board b; /* switches with a mode other than enforce; concurrency entries */
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

void sl_killswitch_snap_ref(sl_killswitch_snap *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void sl_killswitch_snap_unref(sl_killswitch_snap *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        sl_killswitch_board_free(&s->b);
        free(s);
    }
}

void sl_killswitch_snap_stamp(sl_killswitch_snap *s, uint64_t generation)
{
    s->generation = generation;
}

void sl_killswitch_snap_counts(const sl_killswitch_snap *s, size_t *switches, size_t *overrides,
                               size_t *concurrency)
{
    *switches = s->switches;
    *overrides = s->overrides;
    *concurrency = s->concurrency;
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
    const sl_killswitch_entry *e =
        sl_killswitch_board_get(&s->b, SL_KILLSWITCH_K_SWITCH, name, len);
    return e ? (sl_killswitch_mode)e->mode : SL_KILLSWITCH_ENFORCE;
}

bool sl_killswitch_snap_concurrency(const sl_killswitch_snap *s, const char *key, size_t len,
                                    sl_killswitch_conc *out)
{
    if (!s)
        return false;
    if (s->concurrency > (s->has_default ? 1u : 0u) && key) {
        const sl_killswitch_entry *e =
            sl_killswitch_board_get(&s->b, SL_KILLSWITCH_K_CONC, key, len);
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

int sl_killswitch_snap_new(const sl_killswitch_board *src, const sl_killswitch_board *admin,
                           bool loaded, size_t max_entries, uint64_t seed,
                           sl_killswitch_snap **out)
{
    sl_killswitch_snap *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    sl_killswitch_board_init(&s->b, max_entries * 2 + 2, seed);
    int rc = 0;
    size_t pos = 0;
    for (sl_strmap_ent *me; !rc && (me = sl_strmap_next(&src->map, &pos));) {
        const sl_killswitch_entry *e = sl_strmap_val(me);
        if (me->tag == SL_KILLSWITCH_K_CONC) {
            if (me->len == 0) {
                s->has_default = true;
                s->def = e->conc;
            }
            s->concurrency++;
            rc = sl_killswitch_board_put(&s->b, SL_KILLSWITCH_K_CONC, me->key, me->len, e);
            continue;
        }
        if (sl_killswitch_board_get(admin, SL_KILLSWITCH_K_SWITCH, me->key, me->len))
            continue; /* overridden: taken from the admin layer below */
        if (e->mode != SL_KILLSWITCH_ENFORCE) {
            sl_killswitch_entry v = *e;
            v.admin = 0;
            rc = sl_killswitch_board_put(&s->b, SL_KILLSWITCH_K_SWITCH, me->key, me->len, &v);
            s->switches++;
        }
    }
    pos = 0;
    for (sl_strmap_ent *me; !rc && (me = sl_strmap_next(&admin->map, &pos));) {
        const sl_killswitch_entry *e = sl_strmap_val(me);
        if (e->mode == SL_KILLSWITCH_ENFORCE)
            continue;
        sl_killswitch_entry v = *e;
        v.admin = 1;
        rc = sl_killswitch_board_put(&s->b, SL_KILLSWITCH_K_SWITCH, me->key, me->len, &v);
        s->switches++;
        s->overrides++;
    }
    if (rc) {
        sl_killswitch_board_free(&s->b);
        free(s);
        return rc;
    }
    s->has_fleet = src->has_fleet;
    s->fleet = src->fleet;
    s->quiet = s->switches == 0;
    const sl_killswitch_entry *g =
        sl_killswitch_board_get(&s->b, SL_KILLSWITCH_K_SWITCH, SL_KILLSWITCH_GLOBAL, 1);
    s->global = g ? (sl_killswitch_mode)g->mode : SL_KILLSWITCH_ENFORCE;
    s->loaded = loaded;
    atomic_init(&s->refs, 1);
    *out = s;
    return 0;
}

void sl_killswitch_snap_visit(const sl_killswitch_snap *s, sl_killswitch_switch_fn sw,
                              sl_killswitch_conc_fn cc, void *ud)
{
    size_t pos = 0;
    for (sl_strmap_ent *me; (me = sl_strmap_next(&s->b.map, &pos));) {
        const sl_killswitch_entry *e = sl_strmap_val(me);
        int stop = 0;
        if (me->tag == SL_KILLSWITCH_K_SWITCH && sw)
            stop = sw(ud, me->key, me->len, (sl_killswitch_mode)e->mode, e->admin);
        else if (me->tag == SL_KILLSWITCH_K_CONC && cc)
            stop = cc(ud, me->key, me->len, &e->conc);
        if (stop)
            break;
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envoyproxy/ratelimit configuration files into an immutable tree (format and matching rules in
 * rlsconf.h). Everything a configuration holds lives in one bump arena freed at once with the
 * last reference. Children of a node are sorted by (key, has value, value) for a binary search;
 * the wildcard ones are also listed in file order, which is the order envoyproxy/ratelimit tries
 * them in.
 */
#include "config/rlsconf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/grow.h"
#include "config/yamlwalk.h"
#include "sluice/engine.h"

struct sl_rlsconf_node {
    const char *key, *value; /* NUL-terminated; value NULL = a key without value */
    size_t key_len, value_len;
    const char *pattern;     /* "key_value" when it holds a '*', else NULL */
    size_t pattern_len;
    const sl_rlsconf_rule *limit;
    sl_rlsconf_node *kids;   /* sorted */
    size_t nkids;
    const sl_rlsconf_node **wild; /* kids with a pattern, in file order */
    size_t nwild;
    bool share;              /* share_threshold: every value the pattern matches, one counter */
};

struct sl_rlsconf_domain {
    const char *name;
    size_t len;
    const char *file;
    bool any_share;          /* some node has share_threshold */
    sl_rlsconf_node root;
};

typedef struct blk {
    struct blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} blk;

struct sl_rlsconf {
    atomic_int refs;
    blk *arena;
    sl_rlsconf_domain **domains;
    size_t ndomains, capdomains;
};

int64_t sl_rls_unit_ms(int unit)
{
    static const int64_t ms[SL_RLS_UNIT_COUNT] = {
        [SL_RLS_UNIT_SECOND] = 1000,           [SL_RLS_UNIT_MINUTE] = 60000,
        [SL_RLS_UNIT_HOUR] = 3600000,          [SL_RLS_UNIT_DAY] = 86400000,
        [SL_RLS_UNIT_MONTH] = 30LL * 86400000, [SL_RLS_UNIT_YEAR] = 365LL * 86400000,
        [SL_RLS_UNIT_WEEK] = 7LL * 86400000,
    };
    return unit > 0 && unit < SL_RLS_UNIT_COUNT ? ms[unit] : 0;
}

/* ---- arena --------------------------------------------------------------------------------- */

static void *alloc(sl_rlsconf *c, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    blk *b = c->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = c->arena;
        c->arena = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

static char *dup(sl_rlsconf *c, const char *s, size_t n)
{
    char *d = alloc(c, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

int sl_rlsconf_new(sl_rlsconf **out)
{
    sl_rlsconf *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    atomic_init(&c->refs, 1);
    *out = c;
    return 0;
}

void sl_rlsconf_ref(sl_rlsconf *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void sl_rlsconf_unref(sl_rlsconf *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (blk *b = c->arena, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(c->domains);
    free(c);
}

/* ---- parsing ------------------------------------------------------------------------------- */

typedef struct walk {
    sl_yw yw; /* first (yamlwalk.h) */
    sl_rlsconf *c;
    const char *file;
    int depth;
    bool any_share;
} walk;

static int line_of(const yaml_node_t *n)
{
    return n ? (int)n->start_mark.line + 1 : 0;
}

static int want_scalar(walk *w, const yaml_node_t *n, const char *what, const char **s, size_t *l)
{
    *s = sl_yw_scalar(n, l);
    if (!*s)
        return sl_yw_fail(&w->yw, n, -EINVAL, "%s must be a string", what);
    return 0;
}

static int want_bool(walk *w, const yaml_node_t *n, const char *what, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "y"};
    static const char *const no[] = {"false", "no", "off", "n"};
    size_t l;
    const char *s = sl_yw_scalar(n, &l);
    for (size_t i = 0; s && i < 4; i++) {
        if (l == strlen(yes[i]) && !strncasecmp(s, yes[i], l)) {
            *out = true;
            return 0;
        }
        if (l == strlen(no[i]) && !strncasecmp(s, no[i], l)) {
            *out = false;
            return 0;
        }
    }
    return sl_yw_fail(&w->yw, n, -EINVAL, "%s must be true or false", what);
}

static int want_uint(walk *w, const yaml_node_t *n, const char *what, uint64_t max, uint64_t *out)
{
    size_t l;
    const char *s = sl_yw_scalar(n, &l);
    uint64_t v = 0;
    if (!s || l == 0 || l > 20)
        return sl_yw_fail(&w->yw, n, -EINVAL, "%s must be a whole number", what);
    for (size_t i = 0; i < l; i++) {
        if (s[i] < '0' || s[i] > '9')
            return sl_yw_fail(&w->yw, n, -EINVAL, "%s must be a whole number", what);
        if (v > (max - (uint64_t)(s[i] - '0')) / 10)
            return sl_yw_fail(&w->yw, n, -EINVAL, "%s is larger than %llu", what,
                              (unsigned long long)max);
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

static bool is_word(const char *s, size_t l, const char *word)
{
    return l == strlen(word) && !strncasecmp(s, word, l);
}

/* What a rate_limit mapping says, before it becomes a rule. */
typedef struct rl_acc {
    const yaml_node_t *at, *unit_node;
    const char *unit;
    size_t unit_len;
    uint64_t rpu, multiplier;
    bool unlimited;
    int32_t algorithm;
    uint64_t burst;
    const char *name;
    size_t name_len;
    const yaml_node_t *replaces;
} rl_acc;

static int replace_field(sl_yw *y, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    walk *w = (walk *)y;
    const char **name = ud;
    size_t l;
    if (!sl_yw_is(k, "name"))
        return sl_yw_fail(y, k, -EINVAL, "unknown key in replaces (name)");
    int rc = want_scalar(w, v, "replaces.name", name, &l);
    if (!rc && l == 0)
        rc = sl_yw_fail(y, v, -EINVAL, "should not have an empty replaces entry");
    if (!rc)
        *name = dup(w->c, *name, l);
    return rc ? rc : (*name ? 0 : -ENOMEM);
}

static int rl_field(sl_yw *y, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    walk *w = (walk *)y;
    rl_acc *a = ud;
    if (sl_yw_is(k, "unit")) {
        a->unit_node = v;
        return want_scalar(w, v, "unit", &a->unit, &a->unit_len);
    }
    if (sl_yw_is(k, "requests_per_unit"))
        return want_uint(w, v, "requests_per_unit", UINT32_MAX, &a->rpu);
    if (sl_yw_is(k, "unit_multiplier")) {
        int rc = want_uint(w, v, "unit_multiplier", UINT32_MAX, &a->multiplier);
        if (!rc && a->multiplier == 0)
            rc = sl_yw_fail(y, v, -EINVAL, "unit_multiplier must be at least 1");
        return rc;
    }
    if (sl_yw_is(k, "unlimited"))
        return want_bool(w, v, "unlimited", &a->unlimited);
    if (sl_yw_is(k, "name"))
        return want_scalar(w, v, "name", &a->name, &a->name_len);
    if (sl_yw_is(k, "replaces")) {
        if (v->type != YAML_SEQUENCE_NODE && !sl_yw_empty(v))
            return sl_yw_fail(y, v, -EINVAL, "replaces must be a list of {name: ...}");
        a->replaces = v;
        return 0;
    }
    if (sl_yw_is(k, "burst"))
        return want_uint(w, v, "burst", (uint64_t)1 << 53, &a->burst);
    if (sl_yw_is(k, "algorithm")) {
        static const struct { const char *n; int32_t a; } algs[] = {
            {"fixed_window", SL_FIXED_WINDOW}, {"token_bucket", SL_TOKEN_BUCKET},
            {"leaky_bucket", SL_LEAKY_BUCKET}, {"gcra", SL_GCRA},
            {"sliding_window", SL_SLIDING_WINDOW},
        };
        const char *s;
        size_t l;
        int rc = want_scalar(w, v, "algorithm", &s, &l);
        if (rc)
            return rc;
        for (size_t i = 0; i < sizeof algs / sizeof algs[0]; i++)
            if (is_word(s, l, algs[i].n)) {
                a->algorithm = algs[i].a;
                return 0;
            }
        return sl_yw_fail(y, v, -EINVAL,
                          "unknown algorithm '%.*s' (fixed_window, token_bucket, leaky_bucket, "
                          "gcra, sliding_window)", (int)(l > 64 ? 64 : l), s);
    }
    return sl_yw_fail(y, k, -EINVAL, "unknown key in rate_limit");
}

static int unit_of(const char *s, size_t l)
{
    static const char *const names[SL_RLS_UNIT_COUNT] = {
        [SL_RLS_UNIT_SECOND] = "second", [SL_RLS_UNIT_MINUTE] = "minute",
        [SL_RLS_UNIT_HOUR] = "hour",     [SL_RLS_UNIT_DAY] = "day",
        [SL_RLS_UNIT_MONTH] = "month",   [SL_RLS_UNIT_YEAR] = "year",
        [SL_RLS_UNIT_WEEK] = "week",
    };
    for (int u = 1; u < SL_RLS_UNIT_COUNT; u++)
        if (is_word(s, l, names[u]))
            return u;
    return 0;
}

static int build_rule(walk *w, const yaml_node_t *n, const char *path, sl_rlsconf_rule **out)
{
    if (n->type != YAML_MAPPING_NODE)
        return sl_yw_fail(&w->yw, n, -EINVAL, "rate_limit must be a mapping");
    rl_acc a = {.at = n, .algorithm = SL_FIXED_WINDOW, .multiplier = 1};
    int rc = sl_yw_each(&w->yw, n, "rate_limit", rl_field, &a);
    if (rc)
        return rc;
    int unit = a.unit ? unit_of(a.unit, a.unit_len) : 0;
    if (a.unlimited && unit)
        return sl_yw_fail(&w->yw, n, -EINVAL, "should not specify rate limit unit when unlimited");
    if (!a.unlimited && !unit)
        return sl_yw_fail(&w->yw, a.unit_node ? a.unit_node : n, -EINVAL,
                          "invalid rate limit unit '%.*s' (want one of: second, minute, hour, "
                          "day, week, month, year)", a.unit ? (int)(a.unit_len > 64 ? 64 : a.unit_len) : 0,
                          a.unit ? a.unit : "");
    if (a.unlimited && a.multiplier != 1)
        return sl_yw_fail(&w->yw, n, -EINVAL,
                          "should not specify unit_multiplier when unlimited");
    /* a year is 3.15e10 ms: any uint32 multiplier keeps the window inside int64 */
    int64_t window = unit ? sl_rls_unit_ms(unit) * (int64_t)a.multiplier : 0;
    sl_rlsconf_rule *r = alloc(w->c, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->requests_per_unit = (uint32_t)a.rpu;
    r->unit = (uint8_t)unit;
    r->unit_multiplier = (uint32_t)a.multiplier;
    r->window_ms = window;
    r->unlimited = a.unlimited;
    r->algorithm = a.algorithm;
    r->burst = (int64_t)a.burst;
    r->name = dup(w->c, a.name ? a.name : "", a.name ? a.name_len : 0);
    r->path = path;
    r->file = w->file;
    r->line = line_of(n);
    if (!r->name)
        return -ENOMEM;
    if (a.replaces && a.replaces->type == YAML_SEQUENCE_NODE) {
        size_t cnt = (size_t)(a.replaces->data.sequence.items.top -
                              a.replaces->data.sequence.items.start);
        const char **names = alloc(w->c, (cnt ? cnt : 1) * sizeof *names);
        if (!names)
            return -ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *it = sl_yw_node(&w->yw, a.replaces->data.sequence.items.start[i]);
            if (!it)
                return sl_yw_fail(&w->yw, NULL, -EINVAL, "file too complex");
            if (it->type != YAML_MAPPING_NODE)
                return sl_yw_fail(&w->yw, it, -EINVAL, "a replaces entry is a mapping {name: ...}");
            names[i] = NULL;
            if ((rc = sl_yw_each(&w->yw, it, "a replaces entry", replace_field, &names[i])))
                return rc;
            if (!names[i])
                return sl_yw_fail(&w->yw, it, -EINVAL, "should not have an empty replaces entry");
            if (!strcmp(names[i], r->name))
                return sl_yw_fail(&w->yw, it, -EINVAL,
                                  "replaces should not contain name of same descriptor");
        }
        r->replaces = names;
        r->n_replaces = cnt;
    }
    *out = r;
    return 0;
}

/* One descriptor mapping, before its children are built. */
typedef struct desc_acc {
    const yaml_node_t *key_node, *rate_limit, *rate_limits, *descriptors;
    const char *key, *value;
    size_t key_len, value_len;
    bool has_value, shadow, detailed, share, quota;
} desc_acc;

static int desc_field(sl_yw *y, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    walk *w = (walk *)y;
    desc_acc *a = ud;
    if (sl_yw_is(k, "key")) {
        a->key_node = v;
        return want_scalar(w, v, "key", &a->key, &a->key_len);
    }
    if (sl_yw_is(k, "value")) {
        int rc = want_scalar(w, v, "value", &a->value, &a->value_len);
        a->has_value = !rc && a->value_len > 0; /* "" is no value, as in envoyproxy/ratelimit */
        return rc;
    }
    if (sl_yw_is(k, "rate_limit")) {
        a->rate_limit = sl_yw_empty(v) ? NULL : v;
        return 0;
    }
    if (sl_yw_is(k, "rate_limits")) {
        if (v->type != YAML_SEQUENCE_NODE && !sl_yw_empty(v))
            return sl_yw_fail(y, v, -EINVAL, "rate_limits must be a list of rate_limit blocks");
        a->rate_limits = sl_yw_empty(v) ? NULL : v;
        return 0;
    }
    if (sl_yw_is(k, "descriptors")) {
        a->descriptors = v;
        return 0;
    }
    if (sl_yw_is(k, "shadow_mode"))
        return want_bool(w, v, "shadow_mode", &a->shadow);
    if (sl_yw_is(k, "detailed_metric"))
        return want_bool(w, v, "detailed_metric", &a->detailed);
    /* envoyproxy/ratelimit's, with no effect on sluice's decisions */
    if (sl_yw_is(k, "share_threshold"))
        return want_bool(w, v, "share_threshold", &a->share);
    if (sl_yw_is(k, "quota_mode"))
        return want_bool(w, v, "quota_mode", &a->quota);
    if (sl_yw_is(k, "value_to_metric") || sl_yw_is(k, "metadata"))
        return 0;
    size_t l;
    const char *s = sl_yw_scalar(k, &l);
    return sl_yw_fail(y, k, -EINVAL, "config error, unknown key '%.*s'",
                      s ? (int)(l > 64 ? 64 : l) : 0, s ? s : "");
}

static int node_cmp(const sl_rlsconf_node *a, const char *key, size_t key_len, bool has_value,
                    const char *value, size_t value_len)
{
    size_t m = a->key_len < key_len ? a->key_len : key_len;
    int c = memcmp(a->key, key, m);
    if (c || a->key_len != key_len)
        return c ? c : (a->key_len < key_len ? -1 : 1);
    bool av = a->value != NULL;
    if (av != has_value)
        return av ? 1 : -1;
    if (!av)
        return 0;
    m = a->value_len < value_len ? a->value_len : value_len;
    c = memcmp(a->value, value, m);
    if (c || a->value_len == value_len)
        return c;
    return a->value_len < value_len ? -1 : 1;
}

static int node_qsort_cmp(const void *x, const void *y)
{
    const sl_rlsconf_node *b = y;
    return node_cmp(x, b->key, b->key_len, b->value != NULL, b->value, b->value_len);
}

/* Most blocks in one descriptor's rate_limits: list. */
#define MAX_BLOCKS 16

/* The descriptor's rule chain (nd->limit, linked by `also`): its rate_limit, or every block of
 * its rate_limits in file order. */
static int build_rules(walk *w, const desc_acc *a, const char *path, sl_rlsconf_node *nd)
{
    const yaml_node_t *one = a->rate_limit;
    size_t cnt = 1;
    if (a->rate_limits) {
        cnt = (size_t)(a->rate_limits->data.sequence.items.top -
                       a->rate_limits->data.sequence.items.start);
        if (cnt == 0 || cnt > MAX_BLOCKS)
            return sl_yw_fail(&w->yw, a->rate_limits, -EINVAL,
                              "rate_limits holds 1 to %d blocks, not %zu", MAX_BLOCKS, cnt);
    } else if (!one) {
        return 0;
    }
    sl_rlsconf_rule *prev = NULL;
    for (size_t i = 0; i < cnt; i++) {
        const yaml_node_t *n = one;
        if (a->rate_limits &&
            !(n = sl_yw_node(&w->yw, a->rate_limits->data.sequence.items.start[i])))
            return sl_yw_fail(&w->yw, NULL, -EINVAL, "file too complex");
        sl_rlsconf_rule *r = NULL;
        int rc = build_rule(w, n, path, &r);
        if (rc)
            return rc;
        if (cnt > 1 && r->unlimited)
            return sl_yw_fail(&w->yw, n, -EINVAL,
                              "an unlimited block cannot be one of several rate_limits");
        r->shadow = a->shadow;
        r->quota = a->quota;
        r->detailed = a->detailed;
        if (prev)
            prev->also = r;
        else
            nd->limit = r;
        prev = r;
    }
    return 0;
}

static int build_level(walk *w, const yaml_node_t *seq, const char *prefix, sl_rlsconf_node *into);

static int build_node(walk *w, const yaml_node_t *n, const char *prefix, sl_rlsconf_node *nd)
{
    if (n->type != YAML_MAPPING_NODE)
        return sl_yw_fail(&w->yw, n, -EINVAL, "a descriptor must be a mapping");
    desc_acc a = {0};
    int rc = sl_yw_each(&w->yw, n, "a descriptor", desc_field, &a);
    if (rc)
        return rc;
    if (!a.key || a.key_len == 0)
        return sl_yw_fail(&w->yw, a.key_node ? a.key_node : n, -EINVAL,
                          "descriptor has empty key");
    nd->key = dup(w->c, a.key, a.key_len);
    nd->key_len = a.key_len;
    if (a.has_value) {
        nd->value = dup(w->c, a.value, a.value_len);
        nd->value_len = a.value_len;
    }
    /* the full key: prefix "." key ["_" value] */
    size_t pl = strlen(prefix);
    size_t fl = a.key_len + (a.has_value ? 1 + a.value_len : 0);
    char *path = alloc(w->c, pl + 1 + fl + 1);
    if (!nd->key || (a.has_value && !nd->value) || !path)
        return -ENOMEM;
    size_t o = 0;
    if (pl) {
        memcpy(path, prefix, pl);
        path[pl] = '.';
        o = pl + 1;
    }
    memcpy(path + o, a.key, a.key_len);
    if (a.has_value) {
        path[o + a.key_len] = '_';
        memcpy(path + o + a.key_len + 1, a.value, a.value_len);
    }
    path[o + fl] = 0;
    const char *fk = path + o; /* key_value */
    if (memchr(fk, '*', fl)) {
        nd->pattern = fk;
        nd->pattern_len = fl;
    }
    if (a.share && !nd->pattern)
        return sl_yw_fail(&w->yw, n, -EINVAL,
                          "share_threshold can only be used with wildcard values (containing "
                          "'*'), but found key '%s'", fk);
    nd->share = a.share;
    w->any_share |= a.share;
    if (a.rate_limit && a.rate_limits)
        return sl_yw_fail(&w->yw, a.rate_limits, -EINVAL,
                          "a descriptor has rate_limit or rate_limits, not both");
    if ((rc = build_rules(w, &a, path, nd)))
        return rc;
    if (a.descriptors && !sl_yw_empty(a.descriptors)) {
        if (++w->depth > SL_RLSCONF_MAX_DEPTH)
            return sl_yw_fail(&w->yw, a.descriptors, -EINVAL,
                              "descriptors nested deeper than %d levels", SL_RLSCONF_MAX_DEPTH);
        rc = build_level(w, a.descriptors, path, nd);
        w->depth--;
    }
    return rc;
}

static int build_level(walk *w, const yaml_node_t *seq, const char *prefix, sl_rlsconf_node *into)
{
    if (seq->type != YAML_SEQUENCE_NODE)
        return sl_yw_fail(&w->yw, seq, -EINVAL, "descriptors must be a list");
    size_t cnt = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (!cnt)
        return 0;
    sl_rlsconf_node *kids = alloc(w->c, cnt * sizeof *kids);
    const sl_rlsconf_node **order = alloc(w->c, cnt * sizeof *order);
    const yaml_node_t **src = alloc(w->c, cnt * sizeof *src);
    if (!kids || !order || !src)
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++) {
        yaml_node_t *it = sl_yw_node(&w->yw, seq->data.sequence.items.start[i]);
        if (!it)
            return sl_yw_fail(&w->yw, NULL, -EINVAL, "file too complex");
        int rc = build_node(w, it, prefix, &kids[i]);
        if (rc)
            return rc;
        src[i] = it;
    }
    /* wildcards in file order, then sort all for lookups (the pointers are rebuilt after) */
    size_t nwild = 0;
    for (size_t i = 0; i < cnt; i++)
        if (kids[i].pattern)
            order[nwild++] = (const sl_rlsconf_node *)(uintptr_t)i; /* index for now */
    /* remember each node's file position across the sort through its key pointer */
    const char **keys = alloc(w->c, cnt * sizeof *keys);
    if (!keys)
        return -ENOMEM;
    for (size_t i = 0; i < cnt; i++)
        keys[i] = kids[i].key;
    if (cnt)
        qsort(kids, cnt, sizeof *kids, node_qsort_cmp);
    for (size_t i = 0; i + 1 < cnt; i++) {
        if (node_qsort_cmp(&kids[i], &kids[i + 1]) == 0) {
            size_t j = 0;
            while (j < cnt && keys[j] != kids[i + 1].key)
                j++;
            return sl_yw_fail(&w->yw, j < cnt ? src[j] : NULL, -EINVAL,
                              "duplicate descriptor composite key '%s'",
                              kids[i + 1].limit ? kids[i + 1].limit->path : kids[i + 1].key);
        }
    }
    for (size_t k = 0; k < nwild; k++) {
        const char *key = keys[(size_t)(uintptr_t)order[k]];
        for (size_t i = 0; i < cnt; i++)
            if (kids[i].key == key) {
                order[k] = &kids[i];
                break;
            }
    }
    into->kids = kids;
    into->nkids = cnt;
    into->wild = nwild ? order : NULL;
    into->nwild = nwild;
    return 0;
}

typedef struct root_acc {
    const yaml_node_t *domain_node, *descriptors;
    const char *domain;
    size_t domain_len;
} root_acc;

static int root_field(sl_yw *y, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    walk *w = (walk *)y;
    root_acc *a = ud;
    if (sl_yw_is(k, "domain")) {
        a->domain_node = v;
        return want_scalar(w, v, "domain", &a->domain, &a->domain_len);
    }
    if (sl_yw_is(k, "descriptors")) {
        a->descriptors = v;
        return 0;
    }
    size_t l;
    const char *s = sl_yw_scalar(k, &l);
    return sl_yw_fail(y, k, -EINVAL, "config error, unknown key '%.*s'",
                      s ? (int)(l > 64 ? 64 : l) : 0, s ? s : "");
}

int sl_rlsconf_add(sl_rlsconf *c, const char *file, const char *text, size_t len, char *err,
                   size_t errlen)
{
    char why[256];
    walk w = {.c = c};
    int rc = sl_yw_load(&w.yw, text, len, why, sizeof why);
    if (rc == -ENOMEM)
        goto out;
    if (rc)
        goto fail;
    w.yw.scalar_keys = true;
    w.file = dup(c, file, strlen(file));
    if (!w.file) {
        rc = -ENOMEM;
        goto out;
    }
    yaml_node_t *root = sl_yw_root(&w.yw);
    if (!root) {
        rc = sl_yw_fail(&w.yw, NULL, -EINVAL, "config file cannot have empty domain");
        goto fail;
    }
    if (root->type != YAML_MAPPING_NODE) {
        rc = sl_yw_fail(&w.yw, root, -EINVAL, "a configuration file is a mapping");
        goto fail;
    }
    root_acc a = {0};
    if ((rc = sl_yw_each(&w.yw, root, "the file", root_field, &a)))
        goto fail;
    if (!a.domain || !a.domain_len) {
        rc = sl_yw_fail(&w.yw, a.domain_node ? a.domain_node : root, -EINVAL,
                        "config file cannot have empty domain");
        goto fail;
    }
    if (sl_rlsconf_domain_find(c, a.domain, a.domain_len)) {
        rc = sl_yw_fail(&w.yw, a.domain_node, -EINVAL, "duplicate domain '%.*s' in config file",
                        (int)(a.domain_len > 128 ? 128 : a.domain_len), a.domain);
        goto fail;
    }
    sl_rlsconf_domain *d = alloc(c, sizeof *d);
    if (!d || !(d->name = dup(c, a.domain, a.domain_len))) {
        rc = -ENOMEM;
        goto out;
    }
    d->len = a.domain_len;
    d->file = w.file;
    if (a.descriptors && !sl_yw_empty(a.descriptors) &&
        (rc = build_level(&w, a.descriptors, "", &d->root)))
        goto fail;
    d->any_share = w.any_share;
    if (sl_grow(&c->domains, &c->capdomains, c->ndomains, 1, 8, 0)) {
        rc = -ENOMEM;
        goto out;
    }
    c->domains[c->ndomains++] = d;
    rc = 0;
    goto out;
fail:
    if (rc != -ENOMEM && errlen)
        snprintf(err, errlen, "%s: %s", file, w.yw.err && w.yw.err[0] ? w.yw.err : why);
out:
    if (rc == -ENOMEM && errlen)
        snprintf(err, errlen, "%s: out of memory", file);
    sl_yw_free(&w.yw);
    return rc;
}

/* ---- lookups ------------------------------------------------------------------------------- */

size_t sl_rlsconf_domains(const sl_rlsconf *c)
{
    return c ? c->ndomains : 0;
}

const sl_rlsconf_domain *sl_rlsconf_domain_find(const sl_rlsconf *c, const char *name, size_t len)
{
    for (size_t i = 0; c && i < c->ndomains; i++)
        if (c->domains[i]->len == len && !memcmp(c->domains[i]->name, name, len))
            return c->domains[i];
    return NULL;
}

static const sl_rlsconf_node *find(const sl_rlsconf_node *p, const char *key, size_t key_len,
                                   bool has_value, const char *value, size_t value_len)
{
    size_t lo = 0, hi = p->nkids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = node_cmp(&p->kids[mid], key, key_len, has_value, value, value_len);
        if (!c)
            return &p->kids[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Byte i of the request entry's "key_value". */
static char at(const sl_rlsconf_entry *e, size_t i)
{
    if (i < e->key_len)
        return e->key[i];
    return i == e->key_len ? '_' : e->value[i - e->key_len - 1];
}

/* '*' matches any run of bytes (envoyproxy/ratelimit's wildcards); linear backtracking over the
 * last star, so O(pattern * subject) at worst. */
static bool glob(const char *pat, size_t plen, const sl_rlsconf_entry *e)
{
    size_t slen = e->key_len + 1 + e->value_len;
    size_t p = 0, s = 0, star = SIZE_MAX, mark = 0;
    while (s < slen) {
        if (p < plen && pat[p] == '*') {
            star = p++;
            mark = s;
        } else if (p < plen && pat[p] == at(e, s)) {
            p++;
            s++;
        } else if (star != SIZE_MAX) {
            p = star + 1;
            s = ++mark;
        } else {
            return false;
        }
    }
    while (p < plen && pat[p] == '*')
        p++;
    return p == plen;
}

const char *sl_rlsconf_domain_name(const sl_rlsconf_domain *d, size_t *len)
{
    *len = d->len;
    return d->name;
}

bool sl_rlsconf_domain_shares(const sl_rlsconf_domain *d)
{
    return d && d->any_share;
}

const sl_rlsconf_rule *sl_rlsconf_match(const sl_rlsconf_domain *d, const sl_rlsconf_entry *e,
                                        size_t n, const char **shared)
{
    if (!d)
        return NULL;
    for (size_t i = 0; shared && i < n; i++)
        shared[i] = NULL;
    const sl_rlsconf_node *level = &d->root;
    const sl_rlsconf_rule *rule = NULL;
    for (size_t i = 0; i < n; i++) {
        const sl_rlsconf_entry *en = &e[i];
        const sl_rlsconf_node *next = find(level, en->key, en->key_len, true, en->value,
                                           en->value_len);
        for (size_t k = 0; !next && k < level->nwild; k++)
            if (glob(level->wild[k]->pattern, level->wild[k]->pattern_len, en)) {
                next = level->wild[k];
                if (shared && next->share)
                    shared[i] = next->value ? next->value : "";
            }
        if (!next)
            next = find(level, en->key, en->key_len, false, NULL, 0);
        if (next && next->limit && i == n - 1)
            rule = next->limit;
        if (!next || !next->nkids)
            break;
        level = next;
    }
    return rule;
}

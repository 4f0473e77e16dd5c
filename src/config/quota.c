/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Levee quota tree (see quota.h and docs/levee.md): parsing etcd keys and JSON values, one
 * open-addressing table for every entry kind, the lookup that turns a request's resource, prefix
 * and method into the quotas that apply, and reference-counted immutable snapshots.
 *
 * The table is a base/strmap (linear probing with backward-shift deletion: etcd deletes are routine,
 * an operator removing a quota, and tombstones would slowly lengthen every probe of the hot-path
 * lookup). An entry's tag is its kind, its key the two parts (KEY, SUBKEY), its value a qval.
 */
#include "config/quota.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/strmap.h"

/* An entry's value: a quota for the quota kinds, a group size for the factor kinds. */
typedef union qval {
    sl_quota q;
    uint32_t factor;
} qval;

struct sl_quota_tree {
    sl_strmap map;
};

/* ---------------------------------------------------------------- paths */

static bool has_prefix(const char *s, size_t len, const char *p, size_t *plen)
{
    size_t n = strlen(p);
    *plen = n;
    return len >= n && memcmp(s, p, n) == 0;
}

static bool ends_with(const char *s, size_t len, const char *suf)
{
    size_t n = strlen(suf);
    return len >= n && memcmp(s + len - n, suf, n) == 0;
}

int sl_quota_path_parse(const char *rel, size_t len, sl_quota_path *out)
{
    size_t n;
    memset(out, 0, sizeof *out);
    if (has_prefix(rel, len, "limit/", &n)) {
        const char *s = rel + n;
        size_t l = len - n;
        if (l == strlen("key_default") && !memcmp(s, "key_default", l)) {
            out->kind = SL_QUOTA_KEY_DEFAULT;
            return 0;
        }
        if (has_prefix(s, l, "subkey_default/", &n)) {
            out->kind = SL_QUOTA_SUBKEY_DEFAULT;
            out->sub = s + n;
            out->sub_len = l - n;
            if (out->sub_len == 0 || out->sub_len > SL_QUOTA_MAX_KEY)
                return -EINVAL;
            return 0;
        }
        if (has_prefix(s, l, "key/", &n)) {
            s += n;
            l -= n;
            /* "/quota" at the end wins: a KEY may itself contain "/sublimit/". */
            if (ends_with(s, l, "/quota")) {
                out->kind = SL_QUOTA_KEY;
                out->key = s;
                out->key_len = l - strlen("/quota");
                if (out->key_len == 0 || out->key_len > SL_QUOTA_MAX_KEY)
                    return -EINVAL;
                return 0;
            }
            static const char sep[] = "/sublimit/";
            const size_t seplen = sizeof sep - 1;
            if (l > seplen) {
                for (size_t i = l - seplen; i-- > 0;) { /* last "/sublimit/" with a non-empty KEY */
                    if (memcmp(s + i + 1, sep, seplen) == 0) {
                        out->kind = SL_QUOTA_SUBLIMIT;
                        out->key = s;
                        out->key_len = i + 1;
                        out->sub = s + i + 1 + seplen;
                        out->sub_len = l - (i + 1 + seplen);
                        if (out->sub_len == 0 || memchr(out->sub, '/', out->sub_len) ||
                            out->key_len > SL_QUOTA_MAX_KEY || out->sub_len > SL_QUOTA_MAX_KEY)
                            return -EINVAL;
                        return 0;
                    }
                }
            }
            return -EINVAL;
        }
        return -EINVAL;
    }
    if (has_prefix(rel, len, "factor/", &n)) {
        const char *s = rel + n;
        size_t l = len - n;
        if (l == strlen("default") && !memcmp(s, "default", l)) {
            out->kind = SL_QUOTA_FACTOR_DEFAULT;
            return 0;
        }
        if (has_prefix(s, l, "key/", &n)) {
            out->kind = SL_QUOTA_FACTOR_KEY;
            out->key = s + n;
            out->key_len = l - n;
            if (out->key_len == 0 || out->key_len > SL_QUOTA_MAX_KEY)
                return -EINVAL;
            return 0;
        }
        return -EINVAL;
    }
    return -ENOENT;
}

int sl_quota_path_format(const sl_quota_path *p, char *buf, size_t size)
{
    int n;
    int kl = (int)p->key_len, sl = (int)p->sub_len;
    switch (p->kind) {
    case SL_QUOTA_KEY_DEFAULT: n = snprintf(buf, size, "limit/key_default"); break;
    case SL_QUOTA_SUBKEY_DEFAULT: n = snprintf(buf, size, "limit/subkey_default/%.*s", sl, p->sub); break;
    case SL_QUOTA_KEY: n = snprintf(buf, size, "limit/key/%.*s/quota", kl, p->key); break;
    case SL_QUOTA_SUBLIMIT:
        n = snprintf(buf, size, "limit/key/%.*s/sublimit/%.*s", kl, p->key, sl, p->sub);
        break;
    case SL_QUOTA_FACTOR_DEFAULT: n = snprintf(buf, size, "factor/default"); break;
    case SL_QUOTA_FACTOR_KEY: n = snprintf(buf, size, "factor/key/%.*s", kl, p->key); break;
    default: return -EINVAL;
    }
    if (n < 0 || (size_t)n >= size)
        return -ENAMETOOLONG;
    return n;
}

/* ---------------------------------------------------------------- values */

int sl_quota_parse_json(const char *s, size_t len, sl_quota *out, const char **err)
{
    json_error_t jerr;
    json_t *root = json_loadb(s, len, 0, &jerr);
    if (!root) {
        *err = "quota is not valid JSON";
        return -EINVAL;
    }
    int rc = -EINVAL;
    if (!json_is_object(root)) {
        *err = "quota is not a JSON object";
        goto out;
    }
    json_t *jr = json_object_get(root, "rate");
    json_t *jb = json_object_get(root, "burst");
    if (!jr || !json_is_number(jr)) {
        *err = "quota needs a numeric \"rate\"";
        goto out;
    }
    double rate = json_number_value(jr);
    if (!isfinite(rate) || rate < 0 || rate > SL_QUOTA_MAX_RATE) {
        *err = "quota rate out of range";
        goto out;
    }
    double burst = 0;
    if (jb && !json_is_null(jb)) {
        if (!json_is_number(jb)) {
            *err = "quota \"burst\" is not a number";
            goto out;
        }
        burst = json_number_value(jb);
        if (!isfinite(burst) || burst < 0 || burst > (double)SL_QUOTA_MAX_BURST) {
            *err = "quota burst out of range";
            goto out;
        }
    }
    out->rate = rate;
    out->burst = (int64_t)floor(burst);
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int sl_quota_parse_factor(const char *s, size_t len, uint32_t *out, const char **err)
{
    while (len && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t' || s[len - 1] == '\n' ||
                   s[len - 1] == '\r'))
        len--;
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
        s++, len -= 2;
    if (len == 0 || len > 10) {
        *err = "group size is not an integer";
        return -EINVAL;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            *err = "group size is not an integer";
            return -EINVAL;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v < 1 || v > SL_QUOTA_MAX_FACTOR) {
        *err = "group size out of range (1..65536)";
        return -EINVAL;
    }
    *out = (uint32_t)v;
    return 0;
}

int sl_quota_format_json(const sl_quota *q, char *buf, size_t size)
{
    int n = snprintf(buf, size, "{\"rate\":%.10g,\"burst\":%lld}", q->rate, (long long)q->burst);
    if (n < 0 || (size_t)n >= size)
        return -ENOSPC;
    return n;
}

/* ---------------------------------------------------------------- table */

static bool kind_is_factor(int kind)
{
    return kind == SL_QUOTA_FACTOR_DEFAULT || kind == SL_QUOTA_FACTOR_KEY;
}

static const qval *find(const sl_quota_tree *t, int kind, const char *key, size_t klen,
                        const char *sub, size_t slen)
{
    const sl_strmap_ent *e = sl_strmap_find2(&t->map, (uint32_t)kind, key, klen, sub, slen);
    return e ? sl_strmap_val(e) : NULL;
}

int sl_quota_tree_new(size_t max_entries, sl_quota_tree **out)
{
    sl_quota_tree *t = calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    sl_strmap_init(&t->map, sizeof(qval), max_entries ? max_entries : SL_QUOTA_DEFAULT_MAX_ENTRIES,
                   sl_strmap_seed(t)); /* looked up with clients' resource names */
    *out = t;
    return 0;
}

void sl_quota_tree_clear(sl_quota_tree *t)
{
    sl_strmap_clear(&t->map);
}

void sl_quota_tree_free(sl_quota_tree *t)
{
    if (!t)
        return;
    sl_strmap_free(&t->map);
    free(t);
}

size_t sl_quota_tree_count(const sl_quota_tree *t)
{
    return sl_strmap_count(&t->map);
}

static int upsert(sl_quota_tree *t, const sl_quota_path *p, const sl_quota *q, uint32_t factor)
{
    if (p->key_len > SL_QUOTA_MAX_KEY || p->sub_len > SL_QUOTA_MAX_KEY)
        return -EINVAL;
    sl_strmap_ent *e;
    int rc = sl_strmap_put2(&t->map, (uint32_t)p->kind, p->key, p->key_len, p->sub, p->sub_len,
                            NULL, &e);
    if (rc)
        return rc;
    qval *v = sl_strmap_val(e);
    if (kind_is_factor(p->kind))
        v->factor = factor;
    else
        v->q = *q;
    return 0;
}

int sl_quota_tree_set_quota(sl_quota_tree *t, const sl_quota_path *p, const sl_quota *q)
{
    if (kind_is_factor(p->kind) || p->kind < SL_QUOTA_KEY_DEFAULT || p->kind > SL_QUOTA_FACTOR_KEY)
        return -EINVAL;
    if (!(q->rate >= 0 && q->rate <= SL_QUOTA_MAX_RATE) || q->burst < 0 ||
        q->burst > SL_QUOTA_MAX_BURST)
        return -EINVAL;
    return upsert(t, p, q, 0);
}

int sl_quota_tree_set_factor(sl_quota_tree *t, const sl_quota_path *p, uint32_t factor)
{
    if (!kind_is_factor(p->kind) || factor < 1 || factor > SL_QUOTA_MAX_FACTOR)
        return -EINVAL;
    return upsert(t, p, NULL, factor);
}

bool sl_quota_tree_remove(sl_quota_tree *t, const sl_quota_path *p)
{
    return sl_strmap_remove2(&t->map, (uint32_t)p->kind, p->key, p->key_len, p->sub, p->sub_len);
}

bool sl_quota_tree_get_quota(const sl_quota_tree *t, const sl_quota_path *p, sl_quota *out)
{
    if (kind_is_factor(p->kind))
        return false;
    const qval *e = find(t, p->kind, p->key, p->key_len, p->sub, p->sub_len);
    if (e && out)
        *out = e->q;
    return e != NULL;
}

bool sl_quota_tree_get_factor(const sl_quota_tree *t, const sl_quota_path *p, uint32_t *out)
{
    if (!kind_is_factor(p->kind))
        return false;
    const qval *e = find(t, p->kind, p->key, p->key_len, NULL, 0);
    if (e && out)
        *out = e->factor;
    return e != NULL;
}

int sl_quota_tree_clone(const sl_quota_tree *t, sl_quota_tree **out)
{
    sl_quota_tree *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    int rc = sl_strmap_clone(&t->map, &c->map);
    if (rc) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void sl_quota_tree_visit(const sl_quota_tree *t, sl_quota_visit_fn fn, void *ud)
{
    size_t pos = 0;
    for (const sl_strmap_ent *e; (e = sl_strmap_next(&t->map, &pos)) != NULL;) {
        const qval *v = sl_strmap_val(e);
        sl_quota_path p = {.kind = (sl_quota_kind)e->tag,
                           .key = e->key,
                           .key_len = e->len,
                           .sub = e->key + e->len,
                           .sub_len = e->len2};
        int stop = kind_is_factor((int)e->tag) ? fn(ud, &p, NULL, v->factor) : fn(ud, &p, &v->q, 0);
        if (stop)
            return;
    }
}

/* ---------------------------------------------------------------- etcd keys */

static int relative(const char *root, const char *key, size_t key_len, const char **rel,
                    size_t *rel_len)
{
    size_t rl = root ? strlen(root) : 0;
    while (rl && root[rl - 1] == '/')
        rl--;
    if (key_len < rl + 1 || (rl && memcmp(key, root, rl) != 0) || key[rl] != '/')
        return -ENOENT;
    *rel = key + rl + 1;
    *rel_len = key_len - rl - 1;
    return 0;
}

int sl_quota_tree_apply_put(sl_quota_tree *t, const char *root, const char *key, size_t key_len,
                            const char *val, size_t val_len, const char **err)
{
    const char *rel;
    size_t rel_len;
    sl_quota_path p;
    *err = NULL;
    if (relative(root, key, key_len, &rel, &rel_len))
        return -ENOENT;
    int rc = sl_quota_path_parse(rel, rel_len, &p);
    if (rc == -ENOENT)
        return rc;
    if (rc) {
        *err = "malformed quota key";
        return rc;
    }
    if (kind_is_factor(p.kind)) {
        uint32_t f;
        rc = sl_quota_parse_factor(val, val_len, &f, err);
        if (rc == 0)
            rc = sl_quota_tree_set_factor(t, &p, f);
    } else {
        sl_quota q;
        rc = sl_quota_parse_json(val, val_len, &q, err);
        if (rc == 0)
            rc = sl_quota_tree_set_quota(t, &p, &q);
    }
    if (rc == -ENOSPC)
        *err = "quota tree is full (max entries)";
    else if (rc == -ENOMEM)
        *err = "out of memory";
    if (rc) {
        sl_quota_tree_remove(t, &p);
        return rc == -ENOMEM || rc == -ENOSPC ? rc : -EINVAL;
    }
    return 0;
}

int sl_quota_tree_apply_delete(sl_quota_tree *t, const char *root, const char *key,
                               size_t key_len)
{
    const char *rel;
    size_t rel_len;
    sl_quota_path p;
    if (relative(root, key, key_len, &rel, &rel_len))
        return -ENOENT;
    if (sl_quota_path_parse(rel, rel_len, &p))
        return -ENOENT;
    return sl_quota_tree_remove(t, &p) ? 0 : -ENOENT;
}

/* ---------------------------------------------------------------- lookup */

static const qval *find_key(const sl_quota_tree *t, const char *k, size_t kl)
{
    return find(t, SL_QUOTA_KEY, k, kl, NULL, 0);
}

/* Concatenate up to three pieces into the lookup buffer; NULL when it is full (cannot happen
 * within SL_QUOTA_MAX_KEY, kept as a guard). */
static char *lk_cat(sl_quota_lookup *lk, size_t *used, const char *a, size_t al, const char *b,
                    size_t bl, const char *c, size_t cl)
{
    if (*used + al + bl + cl > sizeof lk->buf)
        return NULL;
    char *p = lk->buf + *used;
    memcpy(p, a, al);
    if (bl)
        memcpy(p + al, b, bl);
    if (cl)
        memcpy(p + al + bl, c, cl);
    *used += al + bl + cl;
    return p;
}

static void set_match(sl_quota_match *m, sl_quota_source src, int level, const char *bucket,
                      size_t bucket_len, const char *name, size_t name_len, const sl_quota *q,
                      uint32_t df)
{
    m->source = src;
    m->level = level;
    m->bucket = bucket;
    m->bucket_len = bucket_len;
    m->name = name;
    m->name_len = name_len;
    m->raw = *q;
    m->factor = df;
    m->quota.rate = q->rate / df;
    m->quota.burst = q->burst;
}

int sl_quota_lookup_request(const sl_quota_tree *t, const char *resource, size_t resource_len,
                            const char *prefix, size_t prefix_len, const char *method,
                            size_t method_len, uint32_t factor_override, sl_quota_lookup *out)
{
    out->n = 0;
    out->has_main = false;
    if (!resource || resource_len == 0)
        return -EINVAL;
    if (!prefix)
        prefix_len = 0;
    while (prefix_len && prefix[0] == '/')
        prefix++, prefix_len--;
    while (prefix_len && prefix[prefix_len - 1] == '/')
        prefix_len--;
    if (!method)
        method_len = 0;
    if (resource_len + prefix_len + method_len + 2 > SL_QUOTA_MAX_KEY)
        return -ENAMETOOLONG;

    /* Group size of the resource. */
    uint32_t df = 1;
    if (factor_override) {
        df = factor_override;
    } else {
        const qval *f = find(t, SL_QUOTA_FACTOR_KEY, resource, resource_len, NULL, 0);
        if (!f)
            f = find(t, SL_QUOTA_FACTOR_DEFAULT, NULL, 0, NULL, 0);
        if (f)
            df = f->factor;
    }

    /* The most specific candidate, "R[/P][/M]", starts with "R": the level-3 key is its prefix. */
    size_t used = 0;
    char *full = lk_cat(out, &used, resource, resource_len, prefix_len ? "/" : "",
                        prefix_len ? 1 : 0, prefix, prefix_len);
    size_t full_len = resource_len + (prefix_len ? 1 + prefix_len : 0);
    if (method_len) {
        lk_cat(out, &used, "/", 1, method, method_len, NULL, 0);
        full_len += 1 + method_len;
    }

    const qval *e = NULL;
    const char *bk = full;
    size_t bkl = full_len;
    int level = 0;
    if (prefix_len || method_len) {
        e = find_key(t, full, full_len);
        level = prefix_len ? 1 : 2;
    }
    if (!e && prefix_len && method_len) {
        char *rm = lk_cat(out, &used, resource, resource_len, "/", 1, method, method_len);
        bk = rm, bkl = resource_len + 1 + method_len, level = 2;
        e = find_key(t, rm, bkl);
    }
    if (!e) {
        bk = full, bkl = resource_len, level = 3;
        e = find_key(t, resource, resource_len);
    }
    sl_quota_source src = SL_QUOTA_FROM_KEY;
    if (!e) {
        /* The default is a value, not a shared bucket: each resource counts its own. */
        level = 4;
        src = SL_QUOTA_FROM_KEY_DEFAULT;
        e = find(t, SL_QUOTA_KEY_DEFAULT, NULL, 0, NULL, 0);
    }
    if (e) {
        set_match(&out->m[out->n++], src, level, bk, bkl, bk, bkl, &e->q, df);
        out->has_main = true;
    }

    if (method_len) {
        const qval *s = find(t, SL_QUOTA_SUBLIMIT, resource, resource_len, method, method_len);
        sl_quota_source ssrc = SL_QUOTA_FROM_SUBLIMIT;
        if (!s) {
            s = find(t, SL_QUOTA_SUBKEY_DEFAULT, NULL, 0, method, method_len);
            ssrc = SL_QUOTA_FROM_SUBKEY_DEFAULT;
        }
        if (s) {
            /* The bucket separates resource and method with '\n', which no HTTP header value
             * holds, so that (R="a/b", M="c") and (R="a", M="b/c") never share a bucket. */
            char *b = lk_cat(out, &used, resource, resource_len, "\n", 1, method, method_len);
            char *nm;
            size_t nml;
            if (ssrc == SL_QUOTA_FROM_SUBLIMIT) {
                nm = lk_cat(out, &used, resource, resource_len, "/sublimit/", 10, method,
                            method_len);
                nml = resource_len + 10 + method_len;
            } else {
                nm = lk_cat(out, &used, "subkey_default/", 15, method, method_len, NULL, 0);
                nml = 15 + method_len;
            }
            if (!b || !nm)
                return -ENAMETOOLONG;
            set_match(&out->m[out->n++], ssrc, 0, b, resource_len + 1 + method_len, nm, nml,
                      &s->q, df);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- snapshots */

int sl_quota_snap_new(sl_quota_tree *tree, bool loaded, int64_t revision, int64_t loaded_at_ms,
                      sl_quota_snap **out)
{
    sl_quota_snap *s = calloc(1, sizeof *s);
    if (!s) {
        sl_quota_tree_free(tree);
        return -ENOMEM;
    }
    s->tree = tree;
    s->loaded = loaded;
    s->revision = revision;
    s->loaded_at_ms = loaded_at_ms;
    atomic_init(&s->refs, 1);
    *out = s;
    return 0;
}

void sl_quota_snap_ref(sl_quota_snap *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void sl_quota_snap_unref(sl_quota_snap *s)
{
    if (!s)
        return;
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1) {
        sl_quota_tree_free((sl_quota_tree *)s->tree);
        free(s);
    }
}

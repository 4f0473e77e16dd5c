/*
 * Loading the YAML quota file (format in quotafile.h) with libyaml's document API into an
 * sl_quota_tree. The walk visits every node at most a bounded number of times: YAML aliases let a
 * small file name one big mapping many times, so the number of nodes visited is capped along with
 * the tree's entries.
 */
#include "config/quotafile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yaml.h>

typedef struct walk {
    yaml_document_t *doc;
    sl_quota_tree *t;
    char *err;
    size_t errlen;
    size_t budget; /* nodes left to visit */
} walk;

static int fail(walk *w, const yaml_node_t *n, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(walk *w, const yaml_node_t *n, int rc, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(w->err, w->errlen, "line %lu: %s", (unsigned long)n->start_mark.line + 1, msg);
    else
        snprintf(w->err, w->errlen, "%s", msg);
    return rc;
}

static yaml_node_t *node(walk *w, int id)
{
    if (w->budget == 0)
        return NULL;
    w->budget--;
    return yaml_document_get_node(w->doc, id);
}

static const char *scalar(const yaml_node_t *n, size_t *len)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    *len = n->data.scalar.length;
    return (const char *)n->data.scalar.value;
}

static bool scalar_is(const yaml_node_t *n, const char *s)
{
    size_t l;
    const char *v = scalar(n, &l);
    return v && l == strlen(s) && !memcmp(v, s, l);
}

static int number(walk *w, const yaml_node_t *n, const char *what, double *out)
{
    size_t l;
    const char *v = scalar(n, &l);
    if (!v || l == 0 || l > 40)
        return fail(w, n, -EINVAL, "%s is not a number", what);
    char buf[48];
    memcpy(buf, v, l);
    buf[l] = 0;
    char *end;
    double d = strtod(buf, &end);
    if (*end || !isfinite(d))
        return fail(w, n, -EINVAL, "%s is not a number: '%s'", what, buf);
    *out = d;
    return 0;
}

/* {rate: r, burst: b} */
static int quota_value(walk *w, const yaml_node_t *n, sl_quota *q)
{
    if (!n)
        return fail(w, NULL, -EINVAL, "quota file too complex");
    if (n->type != YAML_MAPPING_NODE)
        return fail(w, n, -EINVAL, "a quota is a mapping {rate: R, burst: B}");
    bool has_rate = false;
    double rate = 0, burst = 0;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
        if (!k || !v)
            return fail(w, NULL, -EINVAL, "quota file too complex");
        int rc;
        if (scalar_is(k, "rate")) {
            if ((rc = number(w, v, "rate", &rate)))
                return rc;
            has_rate = true;
        } else if (scalar_is(k, "burst")) {
            if ((rc = number(w, v, "burst", &burst)))
                return rc;
        } else {
            return fail(w, k, -EINVAL, "unknown quota field (rate, burst)");
        }
    }
    if (!has_rate)
        return fail(w, n, -EINVAL, "a quota needs a rate");
    if (rate < 0 || rate > SL_QUOTA_MAX_RATE)
        return fail(w, n, -EINVAL, "rate out of range");
    if (burst < 0 || burst > (double)SL_QUOTA_MAX_BURST)
        return fail(w, n, -EINVAL, "burst out of range");
    q->rate = rate;
    q->burst = (int64_t)floor(burst);
    return 0;
}

static int add_quota(walk *w, const yaml_node_t *at, sl_quota_kind kind, const yaml_node_t *key,
                     const yaml_node_t *sub, const yaml_node_t *val)
{
    sl_quota_path p = {.kind = kind};
    if (key && !(p.key = scalar(key, &p.key_len)))
        return fail(w, key, -EINVAL, "a key must be a string");
    if (sub && !(p.sub = scalar(sub, &p.sub_len)))
        return fail(w, sub, -EINVAL, "a subkey must be a string");
    if ((key && p.key_len == 0) || (sub && p.sub_len == 0) || p.key_len > SL_QUOTA_MAX_KEY ||
        p.sub_len > SL_QUOTA_MAX_KEY)
        return fail(w, at, -EINVAL, "empty or too long key");
    if (kind == SL_QUOTA_SUBLIMIT && memchr(p.sub, '/', p.sub_len))
        return fail(w, sub, -EINVAL, "a subkey cannot contain '/'");
    int rc;
    if (kind == SL_QUOTA_FACTOR_DEFAULT || kind == SL_QUOTA_FACTOR_KEY) {
        double f;
        if ((rc = number(w, val, "group size", &f)))
            return rc;
        if (f != floor(f) || f < 1 || f > SL_QUOTA_MAX_FACTOR)
            return fail(w, val, -EINVAL, "group size must be an integer 1..%u",
                        SL_QUOTA_MAX_FACTOR);
        rc = sl_quota_tree_set_factor(w->t, &p, (uint32_t)f);
    } else {
        sl_quota q;
        if ((rc = quota_value(w, val, &q)))
            return rc;
        rc = sl_quota_tree_set_quota(w->t, &p, &q);
    }
    if (rc == -ENOSPC)
        return fail(w, at, rc, "too many quota entries");
    if (rc)
        return fail(w, at, rc, "cannot add entry: %s", strerror(-rc));
    return 0;
}

typedef int (*pair_fn)(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud);

static int each_pair(walk *w, const yaml_node_t *n, const char *what, pair_fn fn, void *ud)
{
    if (!n)
        return fail(w, NULL, -EINVAL, "quota file too complex");
    if (n->type == YAML_SCALAR_NODE && n->data.scalar.length == 0)
        return 0; /* "key:" with nothing under it */
    if (n->type != YAML_MAPPING_NODE)
        return fail(w, n, -EINVAL, "%s must be a mapping", what);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(w, p->key), *v = node(w, p->value);
        if (!k || !v)
            return fail(w, NULL, -EINVAL, "quota file too complex");
        int rc = fn(w, k, v, ud);
        if (rc)
            return rc;
    }
    return 0;
}

static int subkey_default_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    return add_quota(w, k, SL_QUOTA_SUBKEY_DEFAULT, NULL, k, v);
}

static int sublimit_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    return add_quota(w, k, SL_QUOTA_SUBLIMIT, (yaml_node_t *)ud, k, v);
}

static int key_entry_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    yaml_node_t *key = ud;
    if (scalar_is(k, "quota"))
        return add_quota(w, k, SL_QUOTA_KEY, key, NULL, v);
    if (scalar_is(k, "sublimit"))
        return each_pair(w, v, "sublimit", sublimit_pair, key);
    return fail(w, k, -EINVAL, "unknown field under a key (quota, sublimit)");
}

static int key_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (k->type != YAML_SCALAR_NODE)
        return fail(w, k, -EINVAL, "a key must be a string");
    return each_pair(w, v, "a key", key_entry_pair, k);
}

static int limit_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (scalar_is(k, "key_default"))
        return add_quota(w, k, SL_QUOTA_KEY_DEFAULT, NULL, NULL, v);
    if (scalar_is(k, "subkey_default"))
        return each_pair(w, v, "subkey_default", subkey_default_pair, NULL);
    if (scalar_is(k, "key"))
        return each_pair(w, v, "limit.key", key_pair, NULL);
    return fail(w, k, -EINVAL, "unknown field under limit (key_default, subkey_default, key)");
}

static int factor_key_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    return add_quota(w, k, SL_QUOTA_FACTOR_KEY, k, NULL, v);
}

static int factor_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (scalar_is(k, "default"))
        return add_quota(w, k, SL_QUOTA_FACTOR_DEFAULT, NULL, NULL, v);
    if (scalar_is(k, "key"))
        return each_pair(w, v, "factor.key", factor_key_pair, NULL);
    return fail(w, k, -EINVAL, "unknown field under factor (default, key)");
}

static int top_pair(walk *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (scalar_is(k, "limit"))
        return each_pair(w, v, "limit", limit_pair, NULL);
    if (scalar_is(k, "factor"))
        return each_pair(w, v, "factor", factor_pair, NULL);
    /* the switchboard's sections: config/killswitch.c reads and checks them */
    if (scalar_is(k, "killswitch") || scalar_is(k, "concurrency") || scalar_is(k, "fleet"))
        return 0;
    return fail(w, k, -EINVAL,
                "unknown top-level field (limit, factor, killswitch, concurrency, fleet)");
}

int sl_quotafile_parse(const char *text, size_t len, sl_quota_tree *t, char *err, size_t errlen)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    char dummy[1];
    if (!err || errlen == 0)
        err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (len > SL_QUOTAFILE_MAX_BYTES) {
        snprintf(err, errlen, "quota file larger than %zu bytes", SL_QUOTAFILE_MAX_BYTES);
        return -EFBIG;
    }
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        snprintf(err, errlen, "line %lu: %s", (unsigned long)parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "YAML syntax error");
        yaml_parser_delete(&parser);
        return -EINVAL;
    }
    yaml_parser_delete(&parser);
    walk w = {.doc = &doc, .t = t, .err = err, .errlen = errlen};
    /* each entry costs a few nodes; aliases cannot make the walk longer than this */
    w.budget = 8 * (len + 16);
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && !(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
        rc = each_pair(&w, root, "the quota file", top_pair, NULL);
    yaml_document_delete(&doc);
    return rc;
}

int sl_quotafile_load(const char *path, sl_quota_tree *t, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || errlen == 0)
        err = dummy, errlen = sizeof dummy;
    FILE *f = fopen(path, "rb");
    if (!f) {
        int rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && (size_t)st.st_size > SL_QUOTAFILE_MAX_BYTES) {
        fclose(f);
        snprintf(err, errlen, "%s: larger than %zu bytes", path, SL_QUOTAFILE_MAX_BYTES);
        return -EFBIG;
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return -ENOMEM;
    }
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
        if (len == cap) {
            if (cap > SL_QUOTAFILE_MAX_BYTES) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "%s: larger than %zu bytes", path, SL_QUOTAFILE_MAX_BYTES);
                return -EFBIG;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
    }
    bool ioerr = ferror(f);
    fclose(f);
    if (ioerr) {
        free(buf);
        snprintf(err, errlen, "%s: read error", path);
        return -EIO;
    }
    char inner[200];
    int rc = sl_quotafile_parse(buf, len, t, inner, sizeof inner);
    free(buf);
    if (rc)
        snprintf(err, errlen, "%s: %s", path, inner);
    return rc;
}

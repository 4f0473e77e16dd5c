/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading the YAML quota file (format in quotafile.h) with libyaml's document API into an
 * sl_quota_tree. The walk visits every node at most a bounded number of times: YAML aliases let a
 * small file name one big mapping many times, so the number of nodes visited is capped along with
 * the tree's entries.
 */
#include "config/quotafile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "config/yamlwalk.h"

/* The walk's state: sl_yw first, so a callback's sl_yw * converts back (see yamlwalk.h). */
typedef struct walk {
    sl_yw yw;
    sl_quota_tree *t;
} walk;

static int number(sl_yw *w, const yaml_node_t *n, const char *what, double *out)
{
    size_t l;
    const char *v = sl_yw_scalar(n, &l);
    if (!v || l == 0 || l > 40)
        return sl_yw_fail(w, n, -EINVAL, "%s is not a number", what);
    char buf[48];
    memcpy(buf, v, l);
    buf[l] = 0;
    char *end;
    double d = strtod(buf, &end);
    if (*end || !isfinite(d))
        return sl_yw_fail(w, n, -EINVAL, "%s is not a number: '%s'", what, buf);
    *out = d;
    return 0;
}

typedef struct quota_acc {
    bool has_rate;
    double rate, burst;
} quota_acc;

static int quota_field(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    quota_acc *a = ud;
    if (sl_yw_is(k, "rate")) {
        a->has_rate = true;
        return number(w, v, "rate", &a->rate);
    }
    if (sl_yw_is(k, "burst"))
        return number(w, v, "burst", &a->burst);
    return sl_yw_fail(w, k, -EINVAL, "unknown quota field (rate, burst)");
}

/* {rate: r, burst: b} */
static int quota_value(sl_yw *w, const yaml_node_t *n, sl_quota *q)
{
    if (!n)
        return sl_yw_fail(w, NULL, -EINVAL, "quota file too complex");
    if (n->type != YAML_MAPPING_NODE)
        return sl_yw_fail(w, n, -EINVAL, "a quota is a mapping {rate: R, burst: B}");
    quota_acc a = {0};
    int rc = sl_yw_each(w, n, "a quota", quota_field, &a);
    if (rc)
        return rc;
    if (!a.has_rate)
        return sl_yw_fail(w, n, -EINVAL, "a quota needs a rate");
    if (a.rate < 0 || a.rate > SL_QUOTA_MAX_RATE)
        return sl_yw_fail(w, n, -EINVAL, "rate out of range");
    if (a.burst < 0 || a.burst > (double)SL_QUOTA_MAX_BURST)
        return sl_yw_fail(w, n, -EINVAL, "burst out of range");
    q->rate = a.rate;
    q->burst = (int64_t)floor(a.burst);
    return 0;
}

static int add_quota(sl_yw *w, const yaml_node_t *at, sl_quota_kind kind, const yaml_node_t *key,
                     const yaml_node_t *sub, const yaml_node_t *val)
{
    sl_quota_path p = {.kind = kind};
    if (key && !(p.key = sl_yw_scalar(key, &p.key_len)))
        return sl_yw_fail(w, key, -EINVAL, "a key must be a string");
    if (sub && !(p.sub = sl_yw_scalar(sub, &p.sub_len)))
        return sl_yw_fail(w, sub, -EINVAL, "a subkey must be a string");
    if ((key && p.key_len == 0) || (sub && p.sub_len == 0) || p.key_len > SL_QUOTA_MAX_KEY ||
        p.sub_len > SL_QUOTA_MAX_KEY)
        return sl_yw_fail(w, at, -EINVAL, "empty or too long key");
    if (kind == SL_QUOTA_SUBLIMIT && memchr(p.sub, '/', p.sub_len))
        return sl_yw_fail(w, sub, -EINVAL, "a subkey cannot contain '/'");
    int rc;
    if (kind == SL_QUOTA_FACTOR_DEFAULT || kind == SL_QUOTA_FACTOR_KEY) {
        double f;
        if ((rc = number(w, val, "group size", &f)))
            return rc;
        if (f != floor(f) || f < 1 || f > SL_QUOTA_MAX_FACTOR)
            return sl_yw_fail(w, val, -EINVAL, "group size must be an integer 1..%u",
                              SL_QUOTA_MAX_FACTOR);
        rc = sl_quota_tree_set_factor(((walk *)w)->t, &p, (uint32_t)f);
    } else {
        sl_quota q;
        if ((rc = quota_value(w, val, &q)))
            return rc;
        rc = sl_quota_tree_set_quota(((walk *)w)->t, &p, &q);
    }
    if (rc == -ENOSPC)
        return sl_yw_fail(w, at, rc, "too many quota entries");
    if (rc)
        return sl_yw_fail(w, at, rc, "cannot add entry: %s", strerror(-rc));
    return 0;
}

static int subkey_default_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    return add_quota(w, k, SL_QUOTA_SUBKEY_DEFAULT, NULL, k, v);
}

static int sublimit_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    return add_quota(w, k, SL_QUOTA_SUBLIMIT, (yaml_node_t *)ud, k, v);
}

static int key_entry_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    yaml_node_t *key = ud;
    if (sl_yw_is(k, "quota"))
        return add_quota(w, k, SL_QUOTA_KEY, key, NULL, v);
    if (sl_yw_is(k, "sublimit"))
        return sl_yw_each(w, v, "sublimit", sublimit_pair, key);
    return sl_yw_fail(w, k, -EINVAL, "unknown field under a key (quota, sublimit)");
}

static int key_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (k->type != YAML_SCALAR_NODE)
        return sl_yw_fail(w, k, -EINVAL, "a key must be a string");
    return sl_yw_each(w, v, "a key", key_entry_pair, k);
}

static int limit_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (sl_yw_is(k, "key_default"))
        return add_quota(w, k, SL_QUOTA_KEY_DEFAULT, NULL, NULL, v);
    if (sl_yw_is(k, "subkey_default"))
        return sl_yw_each(w, v, "subkey_default", subkey_default_pair, NULL);
    if (sl_yw_is(k, "key"))
        return sl_yw_each(w, v, "limit.key", key_pair, NULL);
    return sl_yw_fail(w, k, -EINVAL,
                      "unknown field under limit (key_default, subkey_default, key)");
}

static int factor_key_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    return add_quota(w, k, SL_QUOTA_FACTOR_KEY, k, NULL, v);
}

static int factor_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (sl_yw_is(k, "default"))
        return add_quota(w, k, SL_QUOTA_FACTOR_DEFAULT, NULL, NULL, v);
    if (sl_yw_is(k, "key"))
        return sl_yw_each(w, v, "factor.key", factor_key_pair, NULL);
    return sl_yw_fail(w, k, -EINVAL, "unknown field under factor (default, key)");
}

static int top_pair(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    if (sl_yw_is(k, "limit"))
        return sl_yw_each(w, v, "limit", limit_pair, NULL);
    if (sl_yw_is(k, "factor"))
        return sl_yw_each(w, v, "factor", factor_pair, NULL);
    /* the switchboard's sections: config/killswitchfile.c reads and checks them */
    if (sl_yw_is(k, "killswitch") || sl_yw_is(k, "concurrency") || sl_yw_is(k, "fleet"))
        return 0;
    return sl_yw_fail(w, k, -EINVAL,
                      "unknown top-level field (limit, factor, killswitch, concurrency, fleet)");
}

int sl_quotafile_parse(const char *text, size_t len, sl_quota_tree *t, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || errlen == 0)
        err = dummy, errlen = sizeof dummy;
    err[0] = 0;
    if (len > SL_QUOTAFILE_MAX_BYTES) {
        snprintf(err, errlen, "quota file larger than %zu bytes", SL_QUOTAFILE_MAX_BYTES);
        return -EFBIG;
    }
    walk w = {.t = t};
    int rc = sl_yw_load(&w.yw, text, len, err, errlen);
    yaml_node_t *root = rc ? NULL : sl_yw_root(&w.yw);
    if (root)
        rc = sl_yw_each(&w.yw, root, "the quota file", top_pair, NULL);
    sl_yw_free(&w.yw);
    return rc;
}

int sl_quotafile_load(const char *path, sl_quota_tree *t, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || errlen == 0)
        err = dummy, errlen = sizeof dummy;
    char *buf;
    size_t len;
    int rc = sl_file_read(path, SL_QUOTAFILE_MAX_BYTES, 0, &buf, &len, err, errlen);
    if (rc)
        return rc;
    char inner[200];
    rc = sl_quotafile_parse(buf, len, t, inner, sizeof inner);
    free(buf);
    if (rc)
        snprintf(err, errlen, "%s: %s", path, inner);
    return rc;
}

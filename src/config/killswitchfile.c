/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's sections of the quota file (format in killswitchfile.h), walked with
 * config/yamlwalk.h into an sl_killswitch_board. The limit: and factor: sections are the quota
 * tree's (config/quotafile.c) and are skipped here.
 */
#include "config/killswitchfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "config/opt.h"
#include "config/quotafile.h"
#include "config/yamlwalk.h"

/* The walk's state: sl_yw first, so a callback's sl_yw * converts back (see yamlwalk.h). */
typedef struct ywalk {
    sl_yw yw;
    sl_killswitch_board *b;
} ywalk;

static int yput(sl_yw *w, const yaml_node_t *at, int kind, const char *name, size_t len,
                const sl_killswitch_entry *v)
{
    if (len > SL_KILLSWITCH_MAX_NAME)
        return sl_yw_fail(w, at, -EINVAL, "name too long");
    int rc = sl_killswitch_board_put(((ywalk *)w)->b, kind, name, len, v);
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
    sl_killswitch_entry e = {.mode = (uint8_t)m};
    return yput(w, k, SL_KILLSWITCH_K_SWITCH, name, nl, &e);
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
    if (sl_killswitch_parse_duration(buf, ms))
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
    int64_t x;
    if (sl_opt_parse_int(buf, &x) || x < lo || x > SL_KILLSWITCH_MAX_LIMIT)
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
    conc_acc a = {.c = {.limit = 0, .duration_ms = SL_KILLSWITCH_DEFAULT_DURATION_MS}};
    if (!v || v->type != YAML_MAPPING_NODE)
        return sl_yw_fail(w, v ? v : at, -EINVAL, "a concurrency limit is {limit: N, duration: D}");
    int rc = sl_yw_each(w, v, "a concurrency limit", conc_field, &a);
    if (rc)
        return rc;
    if (!a.has_limit)
        return sl_yw_fail(w, v, -EINVAL, "a concurrency limit needs a limit");
    sl_killswitch_entry e = {.conc = a.c};
    return yput(w, at, SL_KILLSWITCH_K_CONC, name, len, &e);
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
        if (sl_opt_parse_double(buf, &f->reserve) || !(f->reserve >= 0 && f->reserve < 1))
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
        sl_killswitch_fleet f = {.capacity = 0, .reserve = SL_KILLSWITCH_DEFAULT_RESERVE,
                                 .duration_ms = SL_KILLSWITCH_DEFAULT_DURATION_MS};
        int rc = sl_yw_each(w, v, "fleet", fleet_field, &f);
        if (rc)
            return rc;
        const char *why;
        if (sl_killswitch_fleet_check(&f, &why))
            return sl_yw_fail(w, v, -EINVAL, "%s", why);
        ywalk *yw = (ywalk *)w;
        yw->b->has_fleet = true;
        yw->b->fleet = f;
        return 0;
    }
    return 0; /* limit:, factor: are the quota tree's (config/quotafile.c) */
}

int sl_killswitchfile_parse(const char *text, size_t len, sl_killswitch_board *b, char *err,
                            size_t errlen)
{
    ywalk w = {.b = b};
    int rc = sl_yw_load(&w.yw, text, len, err, errlen);
    w.yw.scalar_keys = true;
    yaml_node_t *root = rc ? NULL : sl_yw_root(&w.yw);
    if (root)
        rc = sl_yw_each(&w.yw, root, "the quota file", top_pair, NULL);
    sl_yw_free(&w.yw);
    return rc;
}

int sl_killswitchfile_check_text(const char *text, size_t len, char *err, size_t errlen)
{
    sl_killswitch_board b;
    sl_killswitch_board_init(&b, SL_KILLSWITCH_DEFAULT_MAX_ENTRIES, 1);
    int rc = sl_killswitchfile_parse(text, len, &b, err, errlen);
    sl_killswitch_board_free(&b);
    return rc;
}

int sl_killswitchfile_load(const char *path, sl_killswitch_board *b, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    int rc = sl_file_read(path, SL_QUOTAFILE_MAX_BYTES, 0, &text, &len, err, errlen);
    if (rc)
        return rc;
    char inner[200];
    rc = sl_killswitchfile_parse(text, len, b, inner, sizeof inner);
    free(text);
    if (rc)
        snprintf(err, errlen, "%s: %s", path, inner);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option engine (see opt.h): one description per option serves the YAML loader, the
 * environment, the flag parser, --help and the effective-config dump, so an option cannot be
 * settable in one place and missing from another, or undocumented. It knows no program's options:
 * sluiced's table is config/config.c, the CLI's are beside each subcommand.
 *
 * The engine in four files, one job each:
 *   opt.c       the table and the target: lookup, applying a value to its field (type, range and
 *               the message naming where the value came from), defaults, release
 *   optvalue.c  the value syntax: parsing and formatting of the typed values
 *   optsrc.c    the sources: the YAML file, the environment, the command-line flags
 *   opthelp.c   the rendering: --help and the effective-config dump
 * What the last two share with this file (and no other module uses) is in config/opt_int.h.
 */
#include "config/opt.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/diag.h"
#include "config/opt_int.h"

/* ---------------------------------------------------------------------------------------------- */
/* Messages. */

int sl_opt_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int sl_opt_problem(const sl_opt_track *tr, char *err, size_t errlen, int rc, const char *fmt, ...)
{
    char buf[SL_DIAG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    bool first = !(err != NULL && errlen > 0 && err[0] != '\0' && tr && tr->diag);
    if (tr && tr->diag)
        sl_diag_add(tr->diag, "%s", buf);
    if (first && err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", buf);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Lookup and storage. */

unsigned sl_opt_edit_distance(const char *a, const char *b)
{
    enum { CAP = 64 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= CAP || lb >= CAP)
        return 255;
    unsigned prev[CAP + 1], cur[CAP + 1];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (unsigned)i;
        char ca = a[i - 1] == '_' ? '-' : (char)tolower((unsigned char)a[i - 1]);
        for (size_t j = 1; j <= lb; j++) {
            char cb = b[j - 1] == '_' ? '-' : (char)tolower((unsigned char)b[j - 1]);
            unsigned best = prev[j - 1] + (ca == cb ? 0u : 1u);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, (lb + 1) * sizeof prev[0]);
    }
    return prev[lb] > 255 ? 255 : prev[lb];
}

const sl_opt *sl_opt_suggest(const sl_opt_table *t, const char *name)
{
    const sl_opt *best = NULL;
    unsigned bd = 255;
    for (size_t i = 0; i < t->nopts; i++) {
        unsigned d = sl_opt_edit_distance(name, t->opts[i].name);
        if (d < bd) {
            bd = d;
            best = &t->opts[i];
        }
    }
    size_t len = strlen(name);
    if (!best || bd == 0 || bd > 3 || (size_t)bd * 3 > len)
        return NULL;
    return best;
}

const sl_opt *sl_opt_find(const sl_opt_table *t, const char *name)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const char *a = t->opts[i].name, *b = name;
        while (*a && (*a == *b || (*a == '-' && *b == '_'))) {
            a++;
            b++;
        }
        if (*a == '\0' && *b == '\0')
            return &t->opts[i];
    }
    return NULL;
}

const sl_opt *sl_opt_find_short(const sl_opt_table *t, char c)
{
    for (size_t i = 0; i < t->nopts; i++)
        if (t->opts[i].short_name != 0 && t->opts[i].short_name == c)
            return &t->opts[i];
    return NULL;
}

void sl_opt_env_name(const sl_opt_table *t, const sl_opt *o, char *buf,
                     size_t size)
{
    if (size == 0)
        return;
    size_t n = 0;
    for (const char *p = t->env_prefix ? t->env_prefix : ""; *p && n + 1 < size; p++)
        buf[n++] = *p;
    for (const char *p = o->name; *p && n + 1 < size; p++)
        buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[n] = '\0';
}

/* The list helpers, sl_opt_apply and the short-name lookup are shared with the sources
 * (config/opt_int.h). */

void sl_opt_list_clear(sl_opt_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int sl_opt_list_push(sl_opt_list *l, const char *s, size_t n)
{
    char **items = realloc(l->items, (l->n + 1) * sizeof(char *));
    if (items == NULL)
        return -ENOMEM;
    l->items = items;
    if ((items[l->n] = strndup(s, n)) == NULL)
        return -ENOMEM;
    l->n++;
    return 0;
}

/* Comma-separated items, trimmed, empty ones dropped. */
static int list_push_csv(sl_opt_list *l, const char *s)
{
    while (*s) {
        const char *comma = strchr(s, ',');
        const char *end = comma ? comma : s + strlen(s);
        const char *a = s, *b = end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if (b > a) {
            int rc = sl_opt_list_push(l, a, (size_t)(b - a));
            if (rc != 0)
                return rc;
        }
        if (comma == NULL)
            break;
        s = comma + 1;
    }
    return 0;
}

const char *sl_opt_type_word(sl_opt_type t)
{
    switch (t) {
    case SL_OPT_INT:
        return "integer";
    case SL_OPT_BOOL:
        return "boolean";
    case SL_OPT_DURATION:
        return "duration";
    case SL_OPT_SIZE:
        return "size";
    case SL_OPT_ENUM:
        return "choice";
    case SL_OPT_LIST:
        return "list";
    case SL_OPT_DOUBLE:
        return "number";
    default:
        return "string";
    }
}

/* Describe the inclusive range of an option in its own syntax. */
static void range_text(const sl_opt *o, char *buf, size_t size)
{
    char lo[32], hi[32];
    if (o->type == SL_OPT_DURATION) {
        sl_opt_format_duration(o->min, lo, sizeof(lo));
        sl_opt_format_duration(o->max, hi, sizeof(hi));
    } else if (o->type == SL_OPT_SIZE) {
        sl_opt_format_size((uint64_t)o->min, lo, sizeof(lo));
        sl_opt_format_size((uint64_t)o->max, hi, sizeof(hi));
    } else {
        snprintf(lo, sizeof(lo), "%lld", (long long)o->min);
        snprintf(hi, sizeof(hi), "%lld", (long long)o->max);
    }
    snprintf(buf, size, "%s..%s", lo, hi);
}

/*
 * Parse `text` for option `o` and store it. `append` adds to a list instead of replacing it.
 * `source` says where the text came from, for the message.
 */
int sl_opt_apply(void *target, const sl_opt *o, const char *text, bool append,
                 const char *source, char *err, size_t errlen)
{
    void *f = sl_opt_field(target, o);
    int rc = 0;
    int64_t iv = 0;
    uint64_t uv = 0;
    bool bv = false;
    switch (o->type) {
    case SL_OPT_STRING: {
        char *s = strdup(text);
        if (s == NULL)
            return sl_opt_fail(err, errlen, -ENOMEM, "out of memory");
        free(*(char **)f);
        *(char **)f = s;
        return 0;
    }
    case SL_OPT_LIST: {
        sl_opt_list l = {0};
        if (append)
            l = *(sl_opt_list *)f;
        if ((rc = o->repeat ? sl_opt_list_push(&l, text, strlen(text)) : list_push_csv(&l, text)) != 0) {
            if (!append)
                sl_opt_list_clear(&l);
            return sl_opt_fail(err, errlen, rc, "out of memory");
        }
        if (!append)
            sl_opt_list_clear((sl_opt_list *)f);
        *(sl_opt_list *)f = l;
        return 0;
    }
    case SL_OPT_BOOL:
        if (sl_opt_parse_bool(text, &bv) != 0)
            return sl_opt_fail(err, errlen, -EINVAL,
                        "option '%s': invalid boolean '%s' (want true/false, yes/no, on/off, 1/0) "
                        "(%s)",
                        o->name, text, source);
        *(bool *)f = bv;
        return 0;
    case SL_OPT_ENUM:
        for (int i = 0; o->choices[i] != NULL; i++) {
            if (strcasecmp(text, o->choices[i]) == 0) {
                *(int *)f = i;
                return 0;
            }
        }
        {
            char want[256] = "";
            size_t n = 0;
            for (int i = 0; o->choices[i] != NULL && n < sizeof(want); i++)
                n += (size_t)snprintf(want + n, sizeof(want) - n, "%s%s", i ? ", " : "",
                                      o->choices[i]);
            return sl_opt_fail(err, errlen, -EINVAL,
                               "option '%s': invalid value '%s' (want one of: %s) (%s)", 
                        o->name, text, want, source);
        }
    case SL_OPT_DOUBLE: {
        double dv = 0;
        rc = sl_opt_parse_double(text, &dv);
        if (rc == -ERANGE)
            return sl_opt_fail(err, errlen, -EINVAL, "option '%s': number '%s' is too large (%s)",
                               o->name, text, source);
        if (rc != 0)
            return sl_opt_fail(err, errlen, -EINVAL, "option '%s': invalid number '%s' (%s)",
                               o->name, text, source);
        if ((o->dmin != 0 || o->dmax != 0) && !(dv >= o->dmin && dv <= o->dmax))
            return sl_opt_fail(err, errlen, -EINVAL,
                               "option '%s': '%s' is out of range %g..%g (%s)", 
                               o->name, text, o->dmin, o->dmax, source);
        *(double *)f = dv;
        return 0;
    }
    case SL_OPT_INT:
        rc = sl_opt_parse_int(text, &iv);
        break;
    case SL_OPT_DURATION:
        rc = sl_opt_parse_duration(text, &iv);
        break;
    case SL_OPT_SIZE:
        rc = sl_opt_parse_size(text, &uv);
        if (rc == 0 && uv > (uint64_t)INT64_MAX)
            rc = -ERANGE;
        iv = (int64_t)uv;
        break;
    }
    if (rc == -ERANGE)
        return sl_opt_fail(err, errlen, -EINVAL, "option '%s': %s '%s' is too large (%s)", o->name,
                    sl_opt_type_word(o->type), text, source);
    if (rc != 0) {
        const char *hint = o->type == SL_OPT_DURATION ? " (e.g. 500us, 100ms, 5s, 1m, 2h)"
                           : o->type == SL_OPT_SIZE   ? " (e.g. 512, 16KiB, 1MiB)"
                                                      : "";
        return sl_opt_fail(err, errlen, -EINVAL, "option '%s': invalid %s '%s'%s (%s)", o->name,
                    sl_opt_type_word(o->type), text, hint, source);
    }
    if ((o->min != 0 || o->max != 0) && (iv < o->min || iv > o->max)) {
        char range[80];
        range_text(o, range, sizeof(range));
        return sl_opt_fail(err, errlen, -EINVAL, "option '%s': '%s' is out of range %s (%s)",
                           o->name, 
                    text, range, source);
    }
    if (o->type == SL_OPT_SIZE)
        *(uint64_t *)f = (uint64_t)iv;
    else
        *(int64_t *)f = iv;
    return 0;
}

int sl_opt_store(const sl_opt_table *t, const sl_opt_track *tr, void *target, const sl_opt *o,
                 const char *text, bool append, const char *source, char *err, size_t errlen)
{
    if (tr && tr->diag) {
        char e[SL_DIAG_LINE_MAX];
        e[0] = '\0';
        int rc = sl_opt_apply(target, o, text, append, source, e, sizeof e);
        if (rc != 0)
            return sl_opt_problem(tr, err, errlen, rc, "%s", e);
    } else {
        int rc = sl_opt_apply(target, o, text, append, source, err, errlen);
        if (rc != 0)
            return rc;
    }
    if (tr && tr->origin)
        snprintf(tr->origin[o - t->opts], SL_OPT_ORIGIN_MAX, "%s", source);
    return 0;
}

int sl_opt_set(const sl_opt_table *t, void *target, const char *name,
               const char *value, const char *source, char *err, size_t errlen)
{
    const sl_opt *o = sl_opt_find(t, name);
    if (o == NULL)
        return sl_opt_fail(err, errlen, -EINVAL, "unknown option '%s' (%s)", name,
                    source ? source : "set");
    return sl_opt_apply(target, o, value, false, source ? source : "set", err, errlen);
}

/* ---------------------------------------------------------------------------------------------- */
/* Defaults and release. */

void sl_opt_free(const sl_opt_table *t, void *target)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        if (o->type == SL_OPT_STRING) {
            free(*(char **)sl_opt_field(target, o));
            *(char **)sl_opt_field(target, o) = NULL;
        } else if (o->type == SL_OPT_LIST) {
            sl_opt_list_clear((sl_opt_list *)sl_opt_field(target, o));
        }
    }
}

int sl_opt_defaults(const sl_opt_table *t, void *target, char *err, size_t errlen)
{
    return sl_opt_defaults_ex(t, target, NULL, err, errlen);
}

int sl_opt_defaults_ex(const sl_opt_table *t, void *target, const sl_opt_track *tr, char *err,
                       size_t errlen)
{
    sl_opt_free(t, target);
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        const char *def = o->def;
        if (tr && tr->origin)
            snprintf(tr->origin[i], SL_OPT_ORIGIN_MAX, "default");
        if (def == NULL && (o->nullable || o->type == SL_OPT_LIST))
            continue; /* NULL: not given; a list: empty */
        if (def == NULL) {
            switch (o->type) {
            case SL_OPT_STRING:
            case SL_OPT_LIST:
                def = "";
                break;
            case SL_OPT_BOOL:
                def = "false";
                break;
            case SL_OPT_ENUM:
                def = o->choices[0];
                break;
            default:
                def = "0";
                break;
            }
        }
        int rc = sl_opt_apply(target, o, def, false, "default", err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

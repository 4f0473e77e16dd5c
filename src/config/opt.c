/*
 * The option engine (see opt.h): one description per option serves the YAML loader, the
 * environment, the flag parser, --help and the effective-config dump, so an option cannot be
 * settable in one place and missing from another, or undocumented. It knows no program's options:
 * sluiced's table is config/config.c, the CLI's are beside each subcommand.
 */
#include "config/opt.h"

#include "base/file.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

extern char **environ;

#define MAX_FILE_BYTES ((size_t)1 << 20) /* a config file is small; anything bigger is a mistake */
#define NS_PER_MS INT64_C(1000000)

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

/* ---------------------------------------------------------------------------------------------- */
/* Value syntax. */

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int sl_opt_parse_bool(const char *s, bool *b)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *b = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *b = false;
            return 0;
        }
    }
    return -EINVAL;
}

int sl_opt_parse_int(const char *s, int64_t *v)
{
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return -EINVAL;
    uint64_t acc = 0;
    for (; is_digit(*p); p++) {
        if (acc > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        acc = acc * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '\0')
        return -EINVAL;
    if (neg ? acc > (uint64_t)INT64_MAX + 1 : acc > (uint64_t)INT64_MAX)
        return -ERANGE;
    *v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 0;
}

int sl_opt_parse_double(const char *s, double *v)
{
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (*end != '\0' || !isfinite(d))
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *v = d;
    return 0;
}

int sl_opt_parse_duration(const char *s, int64_t *ns)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {
        {"ns", 1},           {"us", 1000},           {"\xc2\xb5s", 1000}, /* µs */
        {"ms", NS_PER_MS},   {"s", 1000 * NS_PER_MS}, {"m", 60000 * NS_PER_MS},
        {"h", 3600000 * NS_PER_MS}, {"d", 86400000 * NS_PER_MS},
    };
    static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                     100000000, 1000000000};
    if (s == NULL || *s == '\0')
        return -EINVAL;
    const char *p = s;
    while (is_digit(*p))
        p++;
    if (*p == '\0') { /* a bare integer: milliseconds */
        int64_t ms;
        int rc = sl_opt_parse_int(s, &ms);
        if (rc != 0)
            return rc;
        if (ms > INT64_MAX / NS_PER_MS)
            return -ERANGE;
        *ns = ms * NS_PER_MS;
        return 0;
    }
    unsigned __int128 total = 0;
    p = s;
    while (*p) {
        uint64_t ip = 0, frac = 0;
        size_t fdig = 0;
        bool any = false;
        for (; is_digit(*p); p++, any = true) {
            if (ip > (UINT64_MAX - 9) / 10)
                return -ERANGE;
            ip = ip * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
            for (p++; is_digit(*p); p++, any = true) {
                if (fdig < 9) { /* finer than a nanosecond says nothing */
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    fdig++;
                }
            }
        }
        if (!any)
            return -EINVAL;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t n = strlen(units[i].name);
            if (n > best_len && strncmp(p, units[i].name, n) == 0) {
                best = i;
                best_len = n;
            }
        }
        if (best_len == 0)
            return -EINVAL;
        p += best_len;
        unsigned __int128 u = (unsigned __int128)units[best].ns;
        total += (unsigned __int128)ip * u + (unsigned __int128)frac * u / pow10[fdig];
        if (total > (unsigned __int128)INT64_MAX)
            return -ERANGE;
    }
    *ns = (int64_t)total;
    return 0;
}

int sl_opt_parse_size(const char *s, uint64_t *bytes)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1ull << 10},
        {"kib", 1ull << 10},
        {"kb", 1000ull},
        {"m", 1ull << 20},
        {"mib", 1ull << 20},
        {"mb", 1000000ull},
        {"g", 1ull << 30},
        {"gib", 1ull << 30},
        {"gb", 1000000000ull},
        {"t", 1ull << 40},
        {"tib", 1ull << 40},
        {"tb", 1000000000000ull},
    };
    if (s == NULL || !is_digit(*s))
        return -EINVAL;
    uint64_t v = 0;
    const char *p = s;
    for (; is_digit(*p); p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(p, units[i].name) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return -ERANGE;
            *bytes = v * units[i].mult;
            return 0;
        }
    }
    return -EINVAL;
}

void sl_opt_format_duration(int64_t ns, char *buf, size_t size)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {{"h", 3600000 * NS_PER_MS}, {"m", 60000 * NS_PER_MS}, {"s", 1000 * NS_PER_MS},
                 {"ms", NS_PER_MS},          {"us", 1000},             {"ns", 1}};
    if (ns == 0) {
        snprintf(buf, size, "0s");
        return;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (ns % units[i].ns == 0) {
            snprintf(buf, size, "%lld%s", (long long)(ns / units[i].ns), units[i].name);
            return;
        }
    }
}

void sl_opt_format_size(uint64_t bytes, char *buf, size_t size)
{
    static const char *const names[] = {"TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 4; i++) {
        uint64_t m = 1ull << (10 * (4 - i));
        if (bytes != 0 && bytes % m == 0) {
            snprintf(buf, size, "%llu%s", (unsigned long long)(bytes / m), names[i]);
            return;
        }
    }
    snprintf(buf, size, "%llu", (unsigned long long)bytes);
}

/* ---------------------------------------------------------------------------------------------- */
/* Lookup and storage. */

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

static const sl_opt *find_short(const sl_opt_table *t, char c)
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

static void *field(void *target, const sl_opt *o)
{
    return (char *)target + o->offset;
}

static const void *cfield(const void *target, const sl_opt *o)
{
    return (const char *)target + o->offset;
}

static void list_clear(sl_opt_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static int list_push(sl_opt_list *l, const char *s, size_t n)
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
            int rc = list_push(l, a, (size_t)(b - a));
            if (rc != 0)
                return rc;
        }
        if (comma == NULL)
            break;
        s = comma + 1;
    }
    return 0;
}

static const char *type_word(sl_opt_type t)
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
static int apply(void *target, const sl_opt *o, const char *text, bool append,
                 const char *source, char *err, size_t errlen)
{
    void *f = field(target, o);
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
        if ((rc = o->repeat ? list_push(&l, text, strlen(text)) : list_push_csv(&l, text)) != 0) {
            if (!append)
                list_clear(&l);
            return sl_opt_fail(err, errlen, rc, "out of memory");
        }
        if (!append)
            list_clear((sl_opt_list *)f);
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
                    type_word(o->type), text, source);
    if (rc != 0) {
        const char *hint = o->type == SL_OPT_DURATION ? " (e.g. 500us, 100ms, 5s, 1m, 2h)"
                           : o->type == SL_OPT_SIZE   ? " (e.g. 512, 16KiB, 1MiB)"
                                                      : "";
        return sl_opt_fail(err, errlen, -EINVAL, "option '%s': invalid %s '%s'%s (%s)", o->name,
                    type_word(o->type), text, hint, source);
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

int sl_opt_set(const sl_opt_table *t, void *target, const char *name,
               const char *value, const char *source, char *err, size_t errlen)
{
    const sl_opt *o = sl_opt_find(t, name);
    if (o == NULL)
        return sl_opt_fail(err, errlen, -EINVAL, "unknown option '%s' (%s)", name,
                    source ? source : "set");
    return apply(target, o, value, false, source ? source : "set", err, errlen);
}

/* ---------------------------------------------------------------------------------------------- */
/* Defaults and release. */

void sl_opt_free(const sl_opt_table *t, void *target)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        if (o->type == SL_OPT_STRING) {
            free(*(char **)field(target, o));
            *(char **)field(target, o) = NULL;
        } else if (o->type == SL_OPT_LIST) {
            list_clear((sl_opt_list *)field(target, o));
        }
    }
}

int sl_opt_defaults(const sl_opt_table *t, void *target, char *err, size_t errlen)
{
    sl_opt_free(t, target);
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        const char *def = o->def;
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
        int rc = apply(target, o, def, false, "default", err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* YAML file. */

static bool is_null_scalar(const yaml_event_t *ev)
{
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)ev->data.scalar.value;
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static const char *event_what(yaml_event_type_t t)
{
    switch (t) {
    case YAML_MAPPING_START_EVENT:
        return "a nested mapping";
    case YAML_SEQUENCE_START_EVENT:
        return "a list";
    case YAML_ALIAS_EVENT:
        return "an alias";
    case YAML_SCALAR_EVENT:
        return "a scalar";
    default:
        return "unexpected YAML";
    }
}

struct yaml_ctx {
    yaml_parser_t parser;
    yaml_event_t ev;
    bool have_ev;
    const char *name;
    char *err;
    size_t errlen;
};

static int yaml_next(struct yaml_ctx *y)
{
    if (y->have_ev) {
        yaml_event_delete(&y->ev);
        y->have_ev = false;
    }
    if (!yaml_parser_parse(&y->parser, &y->ev)) {
        yaml_parser_t *p = &y->parser;
        return sl_opt_fail(y->err, y->errlen, -EINVAL, "%s:%zu: invalid YAML: %s%s%s", y->name,
                    (size_t)p->problem_mark.line + 1, p->problem ? p->problem : "parse error",
                    p->context ? " " : "", p->context ? p->context : "");
    }
    y->have_ev = true;
    return 0;
}

static size_t yaml_line(const struct yaml_ctx *y)
{
    return (size_t)y->ev.start_mark.line + 1;
}

/* The value of one key: the current event is the value's first. */
static int yaml_value(struct yaml_ctx *y, void *target, const sl_opt *o)
{
    char src[512];
    snprintf(src, sizeof(src), "file %s:%zu", y->name, yaml_line(y));
    if (y->ev.type == YAML_SCALAR_EVENT) {
        const char *text = is_null_scalar(&y->ev) ? "" : (const char *)y->ev.data.scalar.value;
        return apply(target, o, text, false, src, y->err, y->errlen);
    }
    if (y->ev.type != YAML_SEQUENCE_START_EVENT || o->type != SL_OPT_LIST)
        return sl_opt_fail(y->err, y->errlen, -EINVAL, "%s:%zu: option '%s' takes %s %s, not %s",
                           y->name, 
                    yaml_line(y), o->name, o->type == SL_OPT_INT ? "an" : "a", type_word(o->type),
                    event_what(y->ev.type));
    sl_opt_list l = {0};
    int rc;
    for (;;) {
        if ((rc = yaml_next(y)) != 0)
            break;
        if (y->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        if (y->ev.type != YAML_SCALAR_EVENT) {
            rc = sl_opt_fail(y->err, y->errlen, -EINVAL, "%s:%zu: option '%s': list items must be "
                      "scalars, not %s", y->name, yaml_line(y), o->name, event_what(y->ev.type));
            break;
        }
        const char *v = (const char *)y->ev.data.scalar.value;
        if (!is_null_scalar(&y->ev) && (rc = list_push(&l, v, strlen(v))) != 0) {
            rc = sl_opt_fail(y->err, y->errlen, rc, "out of memory");
            break;
        }
    }
    if (rc != 0) {
        list_clear(&l);
        return rc;
    }
    sl_opt_list *f = field(target, o);
    list_clear(f);
    *f = l;
    return 0;
}

static int yaml_mapping(struct yaml_ctx *y, const sl_opt_table *t, void *target)
{
    bool *seen = calloc(t->nopts ? t->nopts : 1, sizeof(bool));
    size_t *seen_line = calloc(t->nopts ? t->nopts : 1, sizeof(size_t));
    int rc = 0;
    if (seen == NULL || seen_line == NULL) {
        rc = sl_opt_fail(y->err, y->errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (;;) {
        if ((rc = yaml_next(y)) != 0)
            goto out;
        if (y->ev.type == YAML_MAPPING_END_EVENT)
            break;
        if (y->ev.type != YAML_SCALAR_EVENT) {
            rc = sl_opt_fail(y->err, y->errlen, -EINVAL,
                             "%s:%zu: keys must be option names, not %s", 
                      y->name, yaml_line(y), event_what(y->ev.type));
            goto out;
        }
        const char *key = (const char *)y->ev.data.scalar.value;
        size_t line = yaml_line(y);
        const sl_opt *o = sl_opt_find(t, key);
        if (o == NULL) {
            rc = sl_opt_fail(y->err, y->errlen, -EINVAL, "%s:%zu: unknown option '%s'", y->name,
                             line, 
                      key);
            goto out;
        }
        if (o->file_forbidden) {
            rc = sl_opt_fail(y->err, y->errlen, -EINVAL,
                             "%s:%zu: option '%s' cannot be set in a file", 
                      y->name, line, o->name);
            goto out;
        }
        size_t idx = (size_t)(o - t->opts);
        if (seen[idx]) {
            rc = sl_opt_fail(y->err, y->errlen, -EINVAL,
                             "%s:%zu: option '%s' set twice (first at line %zu)", 
                      y->name, line, o->name, seen_line[idx]);
            goto out;
        }
        seen[idx] = true;
        seen_line[idx] = line;
        if ((rc = yaml_next(y)) != 0)
            goto out;
        if ((rc = yaml_value(y, target, o)) != 0)
            goto out;
    }
out:
    free(seen);
    free(seen_line);
    return rc;
}

int sl_opt_load_yaml(const sl_opt_table *t, void *target, const char *yaml,
                     size_t len, const char *name, char *err, size_t errlen)
{
    struct yaml_ctx y = {.name = name ? name : "<config>", .err = err, .errlen = errlen};
    if (!yaml_parser_initialize(&y.parser))
        return sl_opt_fail(err, errlen, -ENOMEM, "out of memory");
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)yaml, len);
    int rc;
    if ((rc = yaml_next(&y)) != 0) /* stream start */
        goto out;
    if ((rc = yaml_next(&y)) != 0)
        goto out;
    if (y.ev.type == YAML_STREAM_END_EVENT) /* empty file, or only comments */
        goto out;
    if ((rc = yaml_next(&y)) != 0) /* past document start */
        goto out;
    if (y.ev.type == YAML_SCALAR_EVENT && is_null_scalar(&y.ev)) {
        /* "---" alone: an empty document */
    } else if (y.ev.type != YAML_MAPPING_START_EVENT) {
        rc = sl_opt_fail(err, errlen, -EINVAL,
                         "%s:%zu: the file must be a mapping of option: value", 
                  y.name, yaml_line(&y));
        goto out;
    } else if ((rc = yaml_mapping(&y, t, target)) != 0) {
        goto out;
    }
    if ((rc = yaml_next(&y)) != 0) /* document end */
        goto out;
    if ((rc = yaml_next(&y)) != 0)
        goto out;
    if (y.ev.type != YAML_STREAM_END_EVENT)
        rc = sl_opt_fail(err, errlen, -EINVAL, "%s:%zu: only one YAML document is allowed", y.name,
                  yaml_line(&y));
out:
    if (y.have_ev)
        yaml_event_delete(&y.ev);
    yaml_parser_delete(&y.parser);
    return rc;
}

int sl_opt_load_file(const sl_opt_table *t, void *target, const char *path, char *err,
                     size_t errlen)
{
    char *buf = NULL, why[512];
    size_t len = 0;
    int rc = sl_file_read(path, MAX_FILE_BYTES, SL_FILE_REGULAR, &buf, &len, why, sizeof why);
    if (rc == -ENOMEM)
        return sl_opt_fail(err, errlen, rc, "out of memory");
    if (rc == -EFBIG || rc == -EIO)
        return sl_opt_fail(err, errlen, rc, "config file %s", why);
    if (rc)
        return sl_opt_fail(err, errlen, rc, "config file %s (option 'config')", why);
    rc = sl_opt_load_yaml(t, target, buf, len, path, err, errlen);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Environment. */

const char *sl_opt_getenv(char *const *envp, const char *name)
{
    if (envp == NULL)
        envp = environ;
    size_t n = strlen(name);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
            return envp[i] + n + 1;
    return NULL;
}

int sl_opt_load_env(const sl_opt_table *t, void *target, char *const *envp, char *err,
                    size_t errlen)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        char name[128], src[160];
        sl_opt_env_name(t, o, name, sizeof(name));
        const char *v = sl_opt_getenv(envp, name);
        if (v == NULL)
            continue;
        snprintf(src, sizeof(src), "env %s", name);
        int rc = apply(target, o, v, false, src, err, errlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* Flags. */

/* --help / -h / --version anywhere before "--". */
int sl_opt_special(const sl_opt_table *t, int argc, char *const *argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return SL_OPT_HELP;
        if (t->version && strcmp(a, "--version") == 0)
            return SL_OPT_VERSION;
    }
    return 0;
}

/* A positional argument: kept when there is room, else the error. */
static int positional(const char *a, const char **pos, size_t maxpos, size_t *npos, char *err,
                      size_t errlen)
{
    if (*npos >= maxpos)
        return sl_opt_fail(err, errlen, -EINVAL, "unexpected argument '%s'", a);
    pos[(*npos)++] = a;
    return 0;
}

static bool starts_with_digit(const char *s)
{
    return *s >= '0' && *s <= '9';
}

int sl_opt_parse_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                      const char **pos, size_t maxpos, size_t *npos, char *err, size_t errlen)
{
    size_t unused = 0;
    if (npos == NULL)
        npos = &unused;
    *npos = 0;
    int special = sl_opt_special(t, argc, argv);
    if (special != 0)
        return special;
    bool *seen = calloc(t->nopts ? t->nopts : 1, sizeof(bool));
    if (seen == NULL)
        return sl_opt_fail(err, errlen, -ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        const sl_opt *o = NULL;
        const char *value = NULL;
        char src[160];
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc && rc == 0; i++)
                rc = positional(argv[i], pos, maxpos, npos, err, errlen);
            break;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            char nm[128];
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            if (n >= sizeof(nm)) {
                rc = sl_opt_fail(err, errlen, -EINVAL, "unknown flag '%s'", a);
                break;
            }
            memcpy(nm, name, n);
            nm[n] = '\0';
            bool negated = false;
            o = sl_opt_find(t, nm);
            if (o == NULL && strncmp(nm, "no-", 3) == 0) {
                o = sl_opt_find(t, nm + 3);
                if (o != NULL && o->type != SL_OPT_BOOL)
                    o = NULL;
                negated = o != NULL;
            }
            if (o == NULL) {
                rc = sl_opt_fail(err, errlen, -EINVAL, "unknown flag '--%s' (see --help)", nm);
                break;
            }
            snprintf(src, sizeof(src), "flag --%s", negated ? nm : o->name);
            if (negated) {
                if (eq != NULL) {
                    rc = sl_opt_fail(err, errlen, -EINVAL, "flag --%s takes no value", nm);
                    break;
                }
                value = "false";
            } else if (eq != NULL) {
                value = eq + 1;
            } else if (o->type == SL_OPT_BOOL) {
                value = "true";
            } else if (o->optional_value) {
                value = i + 1 < argc && starts_with_digit(argv[i + 1]) ? argv[++i] : "";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                rc = sl_opt_fail(err, errlen, -EINVAL, "option '%s': flag --%s needs a value",
                                 o->name, o->name);
                break;
            }
        } else if (a[0] == '-' && a[1] != '\0' && a[2] == '\0') {
            o = find_short(t, a[1]);
            if (o == NULL) {
                rc = sl_opt_fail(err, errlen, -EINVAL, "unknown flag '%s' (see --help)", a);
                break;
            }
            snprintf(src, sizeof(src), "flag %s", a);
            if (o->type == SL_OPT_BOOL) {
                value = "true";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                rc = sl_opt_fail(err, errlen, -EINVAL, "option '%s': flag %s needs a value",
                                 o->name, a);
                break;
            }
        } else {
            rc = positional(a, pos, maxpos, npos, err, errlen);
            continue;
        }
        size_t idx = (size_t)(o - t->opts);
        rc = apply(target, o, value, seen[idx] && o->type == SL_OPT_LIST, src, err, errlen);
        seen[idx] = true;
    }
    free(seen);
    return rc;
}

int sl_opt_load_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                     char *err, size_t errlen)
{
    return sl_opt_parse_args(t, target, argc, argv, NULL, 0, NULL, err, errlen);
}

/* ---------------------------------------------------------------------------------------------- */
/* --help and dump. */

static void metavar(const sl_opt *o, char *buf, size_t size)
{
    if (o->metavar != NULL) {
        snprintf(buf, size, "%s", o->metavar);
        return;
    }
    switch (o->type) {
    case SL_OPT_INT:
        snprintf(buf, size, "N");
        break;
    case SL_OPT_DURATION:
        snprintf(buf, size, "DURATION");
        break;
    case SL_OPT_SIZE:
        snprintf(buf, size, "SIZE");
        break;
    case SL_OPT_LIST:
        snprintf(buf, size, "LIST");
        break;
    case SL_OPT_DOUBLE:
        snprintf(buf, size, "NUMBER");
        break;
    case SL_OPT_ENUM: {
        size_t n = 0;
        buf[0] = '\0';
        for (int i = 0; o->choices[i] != NULL && n < size; i++)
            n += (size_t)snprintf(buf + n, size - n, "%s%s", i ? "|" : "", o->choices[i]);
        break;
    }
    case SL_OPT_BOOL:
        buf[0] = '\0';
        break;
    default:
        snprintf(buf, size, "VALUE");
        break;
    }
}

static void default_text(const sl_opt *o, char *buf, size_t size)
{
    if (o->def_doc != NULL)
        snprintf(buf, size, "%s", o->def_doc);
    else if (o->def == NULL || o->def[0] == '\0')
        snprintf(buf, size, "%s",
                 o->type == SL_OPT_BOOL   ? "false"
                 : o->type == SL_OPT_ENUM ? o->choices[0]
                 : o->type == SL_OPT_LIST ? "empty"
                 : o->type == SL_OPT_STRING ? "none"
                                            : "0");
    else
        snprintf(buf, size, "%s", o->def);
}

#define HELP_COL 36    /* where help text starts */
#define HELP_WIDTH 100 /* where a command's help wraps */

/* One option's lines: flag and help, then its default (and, unless flags_only, its env var). */
static void help_option(const sl_opt_table *t, const sl_opt *o, FILE *out)
{
    char left[160], mv[128], def[128], env[128];
    metavar(o, mv, sizeof(mv));
    char shortp[8] = "    ";
    if (o->short_name)
        snprintf(shortp, sizeof(shortp), "-%c, ", o->short_name);
    if (o->type == SL_OPT_BOOL)
        snprintf(left, sizeof(left), "  %s--[no-]%s", shortp, o->name);
    else if (o->optional_value)
        snprintf(left, sizeof(left), "  %s--%s [%s]", shortp, o->name, mv);
    else
        snprintf(left, sizeof(left), "  %s--%s %s", shortp, o->name, mv);
    default_text(o, def, sizeof(def));
    if (strlen(left) + 2 <= HELP_COL)
        fprintf(out, "%-*s", HELP_COL, left);
    else
        fprintf(out, "%s\n%-*s", left, HELP_COL, "");
    /* a command's help text in lines of at most HELP_WIDTH columns, broken at spaces (sluiced's
     * is printed as written, one line per option) */
    const char *h = o->help;
    for (;;) {
        size_t n = strlen(h);
        if (t->flags_only && n > HELP_WIDTH - HELP_COL) {
            size_t cut = HELP_WIDTH - HELP_COL;
            while (cut > 0 && h[cut] != ' ')
                cut--;
            if (cut > 0)
                n = cut;
        }
        fprintf(out, "%.*s\n", (int)n, h);
        h += n;
        while (*h == ' ')
            h++;
        if (*h == '\0')
            break;
        fprintf(out, "%-*s", HELP_COL, "");
    }
    if (t->flags_only) {
        /* a flag without a default worth stating (a required value, a switch) says nothing */
        if (o->def_doc != NULL || (o->def != NULL && o->def[0] != '\0' && o->type != SL_OPT_BOOL))
            fprintf(out, "%-*s[default: %s]\n", HELP_COL, "", def);
        return;
    }
    sl_opt_env_name(t, o, env, sizeof(env));
    fprintf(out, "%-*s[default: %s; env %s]\n", HELP_COL, "", def, env);
}

void sl_opt_help(const sl_opt_table *t, FILE *out)
{
    if (t->flags_only) {
        fprintf(out, "usage: %s %s\n", t->program ? t->program : "program",
                t->usage ? t->usage : "[options]");
        if (t->about != NULL)
            fprintf(out, "\n%s", t->about);
    } else {
        char example[128] = "";
        if (t->nopts > 0)
            sl_opt_env_name(t, &t->opts[t->nopts > 2 ? 2 : 0], example, sizeof(example));
        fprintf(out,
                "Usage: %s [options]\n"
                "\n"
                "Options are read from, lowest to highest precedence: built-in defaults, the YAML file\n"
                "given by --config (a flat mapping of option: value; snake_case keys are accepted too),\n"
                "environment variables %s<NAME> (e.g. %s), and flags.\n"
                "  durations  500us, 100ms, 1.5s, 1m30s, 2h; a bare number means milliseconds\n"
                "  sizes      16KiB, 1MiB (K, M, G also powers of 1024; KB, MB, GB powers of 1000);\n"
                "             a bare number means bytes\n"
                "  booleans   --name / --no-name, or true/false, yes/no, on/off, 1/0\n"
                "  lists      a YAML sequence; comma-separated in the environment and in flags\n",
                t->program ? t->program : "program", t->env_prefix ? t->env_prefix : "", example);
    }
    const char *groups[64];
    size_t ngroups = 0;
    for (size_t i = 0; i < t->nopts; i++) {
        const char *g = t->opts[i].group ? t->opts[i].group : "Options";
        size_t k = 0;
        while (k < ngroups && strcmp(groups[k], g) != 0)
            k++;
        if (k == ngroups && ngroups < sizeof(groups) / sizeof(groups[0]))
            groups[ngroups++] = g;
    }
    for (size_t k = 0; k < ngroups; k++) {
        fprintf(out, "\n%s:\n", groups[k]);
        for (size_t i = 0; i < t->nopts; i++) {
            const sl_opt *o = &t->opts[i];
            if (strcmp(o->group ? o->group : "Options", groups[k]) == 0)
                help_option(t, o, out);
        }
    }
    if (t->flags_only) {
        bool durations = false;
        for (size_t i = 0; i < t->nopts; i++)
            durations |= t->opts[i].type == SL_OPT_DURATION;
        if (durations)
            fprintf(out, "\nDurations: 500us, 100ms, 1.5s, 1m30s, 2h; a bare number means "
                         "milliseconds.\n");
    }
    fprintf(out, "\nOther:\n%-*s%s\n", HELP_COL, "  -h, --help", "show this help and exit");
    if (t->version)
        fprintf(out, "%-*s%s\n", HELP_COL, "      --version", "print the version and exit");
    if (t->flags_only && t->epilog != NULL)
        fprintf(out, "\n%s", t->epilog);
}

static void dump_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static size_t cfield_list_n(const void *target, const sl_opt *o)
{
    return ((const sl_opt_list *)cfield(target, o))->n;
}

void sl_opt_dump(const sl_opt_table *t, const void *target, FILE *out)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        if (o->file_forbidden)
            continue;
        const void *f = cfield(target, o);
        char buf[64];
        fprintf(out, "%s:%s", o->name,
                o->type == SL_OPT_LIST && cfield_list_n(target, o) ? "" : " ");
        switch (o->type) {
        case SL_OPT_STRING:
            dump_quoted(out, *(char *const *)f ? *(char *const *)f : "");
            break;
        case SL_OPT_INT:
            fprintf(out, "%lld", (long long)*(const int64_t *)f);
            break;
        case SL_OPT_BOOL:
            fputs(*(const bool *)f ? "true" : "false", out);
            break;
        case SL_OPT_DURATION:
            sl_opt_format_duration(*(const int64_t *)f, buf, sizeof(buf));
            fputs(buf, out);
            break;
        case SL_OPT_SIZE:
            sl_opt_format_size(*(const uint64_t *)f, buf, sizeof(buf));
            fputs(buf, out);
            break;
        case SL_OPT_DOUBLE:
            fprintf(out, "%.17g", *(const double *)f);
            break;
        case SL_OPT_ENUM:
            fputs(o->choices[*(const int *)f], out);
            break;
        case SL_OPT_LIST: {
            const sl_opt_list *l = f;
            if (l->n == 0)
                fputs("[]", out);
            for (size_t k = 0; k < l->n; k++) {
                fputs("\n  - ", out);
                dump_quoted(out, l->items[k]);
            }
            break;
        }
        }
        fputc('\n', out);
    }
}

/*
 * Table-driven configuration (see config.h): one description per option serves the YAML loader,
 * the environment, the flag parser, --help and the effective-config dump, so an option cannot be
 * settable in one place and missing from another, or undocumented. The last part of the file is
 * sluiced's table and the checks that need several options at once.
 */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

extern char **environ;

#define MAX_FILE_BYTES ((size_t)1 << 20) /* a config file is small; anything bigger is a mistake */
#define NS_PER_MS INT64_C(1000000)

/* ---------------------------------------------------------------------------------------------- */
/* Messages. */

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int rc,
                                                      const char *fmt, ...)
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

int sl_config_parse_bool(const char *s, bool *b)
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

static int parse_int(const char *s, int64_t *v)
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

int sl_config_parse_duration(const char *s, int64_t *ns)
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
        int rc = parse_int(s, &ms);
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

int sl_config_parse_size(const char *s, uint64_t *bytes)
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

void sl_config_format_duration(int64_t ns, char *buf, size_t size)
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

void sl_config_format_size(uint64_t bytes, char *buf, size_t size)
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

const sl_config_option *sl_config_find(const sl_config_table *t, const char *name)
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

static const sl_config_option *find_short(const sl_config_table *t, char c)
{
    for (size_t i = 0; i < t->nopts; i++)
        if (t->opts[i].short_name != 0 && t->opts[i].short_name == c)
            return &t->opts[i];
    return NULL;
}

void sl_config_env_name(const sl_config_table *t, const sl_config_option *o, char *buf,
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

static void *field(void *target, const sl_config_option *o)
{
    return (char *)target + o->offset;
}

static const void *cfield(const void *target, const sl_config_option *o)
{
    return (const char *)target + o->offset;
}

static void list_clear(sl_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static int list_push(sl_strlist *l, const char *s, size_t n)
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
static int list_push_csv(sl_strlist *l, const char *s)
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

static const char *type_word(sl_config_type t)
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
    default:
        return "string";
    }
}

/* Describe the inclusive range of an option in its own syntax. */
static void range_text(const sl_config_option *o, char *buf, size_t size)
{
    char lo[32], hi[32];
    if (o->type == SL_OPT_DURATION) {
        sl_config_format_duration(o->min, lo, sizeof(lo));
        sl_config_format_duration(o->max, hi, sizeof(hi));
    } else if (o->type == SL_OPT_SIZE) {
        sl_config_format_size((uint64_t)o->min, lo, sizeof(lo));
        sl_config_format_size((uint64_t)o->max, hi, sizeof(hi));
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
static int apply(void *target, const sl_config_option *o, const char *text, bool append,
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
            return fail(err, errlen, -ENOMEM, "out of memory");
        free(*(char **)f);
        *(char **)f = s;
        return 0;
    }
    case SL_OPT_LIST: {
        sl_strlist l = {0};
        if (append)
            l = *(sl_strlist *)f;
        if ((rc = list_push_csv(&l, text)) != 0) {
            if (!append)
                list_clear(&l);
            return fail(err, errlen, rc, "out of memory");
        }
        if (!append)
            list_clear((sl_strlist *)f);
        *(sl_strlist *)f = l;
        return 0;
    }
    case SL_OPT_BOOL:
        if (sl_config_parse_bool(text, &bv) != 0)
            return fail(err, errlen, -EINVAL,
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
            return fail(err, errlen, -EINVAL, "option '%s': invalid value '%s' (want one of: %s) (%s)",
                        o->name, text, want, source);
        }
    case SL_OPT_INT:
        rc = parse_int(text, &iv);
        break;
    case SL_OPT_DURATION:
        rc = sl_config_parse_duration(text, &iv);
        break;
    case SL_OPT_SIZE:
        rc = sl_config_parse_size(text, &uv);
        if (rc == 0 && uv > (uint64_t)INT64_MAX)
            rc = -ERANGE;
        iv = (int64_t)uv;
        break;
    }
    if (rc == -ERANGE)
        return fail(err, errlen, -EINVAL, "option '%s': %s '%s' is too large (%s)", o->name,
                    type_word(o->type), text, source);
    if (rc != 0) {
        const char *hint = o->type == SL_OPT_DURATION ? " (e.g. 500us, 100ms, 5s, 1m, 2h)"
                           : o->type == SL_OPT_SIZE   ? " (e.g. 512, 16KiB, 1MiB)"
                                                      : "";
        return fail(err, errlen, -EINVAL, "option '%s': invalid %s '%s'%s (%s)", o->name,
                    type_word(o->type), text, hint, source);
    }
    if ((o->min != 0 || o->max != 0) && (iv < o->min || iv > o->max)) {
        char range[80];
        range_text(o, range, sizeof(range));
        return fail(err, errlen, -EINVAL, "option '%s': '%s' is out of range %s (%s)", o->name,
                    text, range, source);
    }
    if (o->type == SL_OPT_SIZE)
        *(uint64_t *)f = (uint64_t)iv;
    else
        *(int64_t *)f = iv;
    return 0;
}

int sl_config_table_set(const sl_config_table *t, void *target, const char *name,
                        const char *value, const char *source, char *err, size_t errlen)
{
    const sl_config_option *o = sl_config_find(t, name);
    if (o == NULL)
        return fail(err, errlen, -EINVAL, "unknown option '%s' (%s)", name,
                    source ? source : "set");
    return apply(target, o, value, false, source ? source : "set", err, errlen);
}

/* ---------------------------------------------------------------------------------------------- */
/* Defaults and release. */

void sl_config_table_free(const sl_config_table *t, void *target)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_config_option *o = &t->opts[i];
        if (o->type == SL_OPT_STRING) {
            free(*(char **)field(target, o));
            *(char **)field(target, o) = NULL;
        } else if (o->type == SL_OPT_LIST) {
            list_clear((sl_strlist *)field(target, o));
        }
    }
}

int sl_config_table_defaults(const sl_config_table *t, void *target, char *err, size_t errlen)
{
    sl_config_table_free(t, target);
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_config_option *o = &t->opts[i];
        const char *def = o->def;
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
        return fail(y->err, y->errlen, -EINVAL, "%s:%zu: invalid YAML: %s%s%s", y->name,
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
static int yaml_value(struct yaml_ctx *y, void *target, const sl_config_option *o)
{
    char src[512];
    snprintf(src, sizeof(src), "file %s:%zu", y->name, yaml_line(y));
    if (y->ev.type == YAML_SCALAR_EVENT) {
        const char *text = is_null_scalar(&y->ev) ? "" : (const char *)y->ev.data.scalar.value;
        return apply(target, o, text, false, src, y->err, y->errlen);
    }
    if (y->ev.type != YAML_SEQUENCE_START_EVENT || o->type != SL_OPT_LIST)
        return fail(y->err, y->errlen, -EINVAL, "%s:%zu: option '%s' takes %s %s, not %s", y->name,
                    yaml_line(y), o->name, o->type == SL_OPT_INT ? "an" : "a", type_word(o->type),
                    event_what(y->ev.type));
    sl_strlist l = {0};
    int rc;
    for (;;) {
        if ((rc = yaml_next(y)) != 0)
            break;
        if (y->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        if (y->ev.type != YAML_SCALAR_EVENT) {
            rc = fail(y->err, y->errlen, -EINVAL, "%s:%zu: option '%s': list items must be "
                      "scalars, not %s", y->name, yaml_line(y), o->name, event_what(y->ev.type));
            break;
        }
        const char *v = (const char *)y->ev.data.scalar.value;
        if (!is_null_scalar(&y->ev) && (rc = list_push(&l, v, strlen(v))) != 0) {
            rc = fail(y->err, y->errlen, rc, "out of memory");
            break;
        }
    }
    if (rc != 0) {
        list_clear(&l);
        return rc;
    }
    sl_strlist *f = field(target, o);
    list_clear(f);
    *f = l;
    return 0;
}

static int yaml_mapping(struct yaml_ctx *y, const sl_config_table *t, void *target)
{
    bool *seen = calloc(t->nopts ? t->nopts : 1, sizeof(bool));
    size_t *seen_line = calloc(t->nopts ? t->nopts : 1, sizeof(size_t));
    int rc = 0;
    if (seen == NULL || seen_line == NULL) {
        rc = fail(y->err, y->errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (;;) {
        if ((rc = yaml_next(y)) != 0)
            goto out;
        if (y->ev.type == YAML_MAPPING_END_EVENT)
            break;
        if (y->ev.type != YAML_SCALAR_EVENT) {
            rc = fail(y->err, y->errlen, -EINVAL, "%s:%zu: keys must be option names, not %s",
                      y->name, yaml_line(y), event_what(y->ev.type));
            goto out;
        }
        const char *key = (const char *)y->ev.data.scalar.value;
        size_t line = yaml_line(y);
        const sl_config_option *o = sl_config_find(t, key);
        if (o == NULL) {
            rc = fail(y->err, y->errlen, -EINVAL, "%s:%zu: unknown option '%s'", y->name, line,
                      key);
            goto out;
        }
        if (o->file_forbidden) {
            rc = fail(y->err, y->errlen, -EINVAL, "%s:%zu: option '%s' cannot be set in a file",
                      y->name, line, o->name);
            goto out;
        }
        size_t idx = (size_t)(o - t->opts);
        if (seen[idx]) {
            rc = fail(y->err, y->errlen, -EINVAL, "%s:%zu: option '%s' set twice (first at line %zu)",
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

int sl_config_table_load_yaml(const sl_config_table *t, void *target, const char *yaml,
                              size_t len, const char *name, char *err, size_t errlen)
{
    struct yaml_ctx y = {.name = name ? name : "<config>", .err = err, .errlen = errlen};
    if (!yaml_parser_initialize(&y.parser))
        return fail(err, errlen, -ENOMEM, "out of memory");
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
        rc = fail(err, errlen, -EINVAL, "%s:%zu: the file must be a mapping of option: value",
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
        rc = fail(err, errlen, -EINVAL, "%s:%zu: only one YAML document is allowed", y.name,
                  yaml_line(&y));
out:
    if (y.have_ev)
        yaml_event_delete(&y.ev);
    yaml_parser_delete(&y.parser);
    return rc;
}

int sl_config_table_load_file(const sl_config_table *t, void *target, const char *path, char *err,
                              size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return fail(err, errlen, -e, "config file %s: %s (option 'config')", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, -EINVAL, "config file %s: not a regular file (option 'config')",
                    path);
    }
    if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
        close(fd);
        return fail(err, errlen, -EFBIG, "config file %s: larger than %zu bytes", path,
                    MAX_FILE_BYTES);
    }
    size_t size = (size_t)st.st_size, got = 0;
    char *buf = malloc(size + 1);
    if (buf == NULL) {
        close(fd);
        return fail(err, errlen, -ENOMEM, "out of memory");
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    int rc = sl_config_table_load_yaml(t, target, buf, got, path, err, errlen);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Environment. */

static const char *env_get(char *const *envp, const char *name)
{
    if (envp == NULL)
        envp = environ;
    size_t n = strlen(name);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
            return envp[i] + n + 1;
    return NULL;
}

int sl_config_table_load_env(const sl_config_table *t, void *target, char *const *envp, char *err,
                             size_t errlen)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_config_option *o = &t->opts[i];
        char name[128], src[160];
        sl_config_env_name(t, o, name, sizeof(name));
        const char *v = env_get(envp, name);
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
static int args_special(int argc, char *const *argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return SL_CONFIG_HELP;
        if (strcmp(a, "--version") == 0)
            return SL_CONFIG_VERSION;
    }
    return 0;
}

int sl_config_table_load_args(const sl_config_table *t, void *target, int argc, char *const *argv,
                              char *err, size_t errlen)
{
    int special = args_special(argc, argv);
    if (special != 0)
        return special;
    bool *seen = calloc(t->nopts ? t->nopts : 1, sizeof(bool));
    if (seen == NULL)
        return fail(err, errlen, -ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        const sl_config_option *o = NULL;
        const char *value = NULL;
        char src[160];
        if (strcmp(a, "--") == 0) {
            if (i + 1 < argc)
                rc = fail(err, errlen, -EINVAL, "unexpected argument '%s'", argv[i + 1]);
            break;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            char nm[128];
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            if (n >= sizeof(nm)) {
                rc = fail(err, errlen, -EINVAL, "unknown flag '%s'", a);
                break;
            }
            memcpy(nm, name, n);
            nm[n] = '\0';
            bool negated = false;
            o = sl_config_find(t, nm);
            if (o == NULL && strncmp(nm, "no-", 3) == 0) {
                o = sl_config_find(t, nm + 3);
                if (o != NULL && o->type != SL_OPT_BOOL)
                    o = NULL;
                negated = o != NULL;
            }
            if (o == NULL) {
                rc = fail(err, errlen, -EINVAL, "unknown flag '--%s' (see --help)", nm);
                break;
            }
            snprintf(src, sizeof(src), "flag --%s", negated ? nm : o->name);
            if (negated) {
                if (eq != NULL) {
                    rc = fail(err, errlen, -EINVAL, "flag --%s takes no value", nm);
                    break;
                }
                value = "false";
            } else if (eq != NULL) {
                value = eq + 1;
            } else if (o->type == SL_OPT_BOOL) {
                value = "true";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                rc = fail(err, errlen, -EINVAL, "option '%s': flag --%s needs a value", o->name,
                          o->name);
                break;
            }
        } else if (a[0] == '-' && a[1] != '\0' && a[2] == '\0') {
            o = find_short(t, a[1]);
            if (o == NULL) {
                rc = fail(err, errlen, -EINVAL, "unknown flag '%s' (see --help)", a);
                break;
            }
            snprintf(src, sizeof(src), "flag %s", a);
            if (o->type == SL_OPT_BOOL) {
                value = "true";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                rc = fail(err, errlen, -EINVAL, "option '%s': flag %s needs a value", o->name, a);
                break;
            }
        } else {
            rc = fail(err, errlen, -EINVAL, "unexpected argument '%s'", a);
            break;
        }
        size_t idx = (size_t)(o - t->opts);
        rc = apply(target, o, value, seen[idx] && o->type == SL_OPT_LIST, src, err, errlen);
        seen[idx] = true;
    }
    free(seen);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* --help and dump. */

static void metavar(const sl_config_option *o, char *buf, size_t size)
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

static void default_text(const sl_config_option *o, char *buf, size_t size)
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

#define HELP_COL 36 /* where help text starts */

void sl_config_table_help(const sl_config_table *t, FILE *out)
{
    char example[128] = "";
    if (t->nopts > 0)
        sl_config_env_name(t, &t->opts[t->nopts > 2 ? 2 : 0], example, sizeof(example));
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
            const sl_config_option *o = &t->opts[i];
            if (strcmp(o->group ? o->group : "Options", groups[k]) != 0)
                continue;
            char left[160], mv[128], def[128], env[128];
            metavar(o, mv, sizeof(mv));
            char shortp[8] = "    ";
            if (o->short_name)
                snprintf(shortp, sizeof(shortp), "-%c, ", o->short_name);
            if (o->type == SL_OPT_BOOL)
                snprintf(left, sizeof(left), "  %s--[no-]%s", shortp, o->name);
            else
                snprintf(left, sizeof(left), "  %s--%s %s", shortp, o->name, mv);
            default_text(o, def, sizeof(def));
            sl_config_env_name(t, o, env, sizeof(env));
            if (strlen(left) + 2 <= HELP_COL)
                fprintf(out, "%-*s%s\n", HELP_COL, left, o->help);
            else
                fprintf(out, "%s\n%-*s%s\n", left, HELP_COL, "", o->help);
            fprintf(out, "%-*s[default: %s; env %s]\n", HELP_COL, "", def, env);
        }
    }
    fprintf(out, "\nOther:\n%-*s%s\n%-*s%s\n", HELP_COL, "  -h, --help", "show this help and exit",
            HELP_COL, "      --version", "print the version and exit");
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

static size_t cfield_list_n(const void *target, const sl_config_option *o)
{
    return ((const sl_strlist *)cfield(target, o))->n;
}

void sl_config_table_dump(const sl_config_table *t, const void *target, FILE *out)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_config_option *o = &t->opts[i];
        if (o->file_forbidden)
            continue;
        const void *f = cfield(target, o);
        char buf[64];
        fprintf(out, "%s:%s", o->name, o->type == SL_OPT_LIST && cfield_list_n(target, o) ? "" : " ");
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
            sl_config_format_duration(*(const int64_t *)f, buf, sizeof(buf));
            fputs(buf, out);
            break;
        case SL_OPT_SIZE:
            sl_config_format_size(*(const uint64_t *)f, buf, sizeof(buf));
            fputs(buf, out);
            break;
        case SL_OPT_ENUM:
            fputs(o->choices[*(const int *)f], out);
            break;
        case SL_OPT_LIST: {
            const sl_strlist *l = f;
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

/* ---------------------------------------------------------------------------------------------- */
/* sluiced. */

/* The offset of a field, and a compile error if the field's type is not T: the table cannot point
 * an option of one type at a field of another. */
#define FIELD(f, T)                                                                                \
    (offsetof(sl_options, f) + 0 * sizeof(char[_Generic(((sl_options *)0)->f, T : 1, default : -1)]))

#define MS (INT64_C(1000000))
#define SEC (1000 * MS)

#define G_GENERAL "General"
#define G_LIMITS "Limits"
#define G_ENGINE "Engine"
#define G_QUOTAS "Quotas (Levee)"
#define G_METRICS "Metrics"
#define G_CLUSTER "Cluster"
#define G_PROTECT "Protection"

static const char *const no_quota_choices[] = {"allow", "deny", "error", NULL};
static const char *const discovery_choices[] = {"none", "static", "dns", "etcd", NULL};
static const char *const picker_choices[] = {"ring", "hrw", NULL};
static const char *const priority_choices[] = {"critical", "post", "get", "test", NULL};

static const sl_config_option daemon_opts[] = {
    /* General */
    {.name = "config", .short_name = 'c', .type = SL_OPT_STRING, .offset = FIELD(config, char *),
     .group = G_GENERAL, .metavar = "FILE", .file_forbidden = true,
     .help = "YAML file of options (a flat mapping of option: value)"},
    {.name = "instance-id", .type = SL_OPT_STRING, .offset = FIELD(instance_id, char *),
     .def_doc = "the host name", .group = G_GENERAL, .metavar = "ID",
     .help = "name of this node in logs, metrics and the cluster"},
    {.name = "listen-addr", .type = SL_OPT_STRING, .offset = FIELD(listen_addr, char *),
     .def = "127.0.0.1:5454", .group = G_GENERAL, .metavar = "ADDR",
     .help = "ip:port of the client API (HTTP/1.1, h2c, gRPC)"},
    {.name = "workers", .type = SL_OPT_INT, .offset = FIELD(workers, int64_t), .def = "0",
     .def_doc = "the number of CPUs", .min = 0, .max = 1024, .group = G_GENERAL,
     .help = "event-loop threads sharing the port; 0 = one per CPU"},
    {.name = "verbose", .short_name = 'v', .type = SL_OPT_BOOL, .offset = FIELD(verbose, bool),
     .def = "false", .group = G_GENERAL, .help = "log at debug level"},

    /* Limits */
    {.name = "max-conns", .type = SL_OPT_INT, .offset = FIELD(max_conns, int64_t), .def = "10000",
     .min = 1, .max = 10000000, .group = G_LIMITS,
     .help = "most client connections open at once"},
    {.name = "max-header-bytes", .type = SL_OPT_SIZE, .offset = FIELD(max_header_bytes, uint64_t),
     .def = "16KiB", .min = 1024, .max = 16 << 20, .group = G_LIMITS,
     .help = "largest request head (HTTP/1.1 headers, HTTP/2 header list)"},
    {.name = "max-body-bytes", .type = SL_OPT_SIZE, .offset = FIELD(max_body_bytes, uint64_t),
     .def = "1MiB", .min = 1024, .max = 1 << 30, .group = G_LIMITS,
     .help = "largest request body or gRPC message"},
    {.name = "idle-timeout", .type = SL_OPT_DURATION, .offset = FIELD(idle_timeout_ns, int64_t),
     .def = "60s", .min = 1 * MS, .max = 86400 * SEC, .group = G_LIMITS,
     .help = "close a client connection idle this long"},
    {.name = "read-timeout", .type = SL_OPT_DURATION, .offset = FIELD(read_timeout_ns, int64_t),
     .def = "10s", .min = 1 * MS, .max = 3600 * SEC, .group = G_LIMITS,
     .help = "close a connection slower than this to send a request"},
    {.name = "max-streams", .type = SL_OPT_INT, .offset = FIELD(max_streams, int64_t),
     .def = "256", .min = 1, .max = 65535, .group = G_LIMITS,
     .help = "concurrent HTTP/2 streams per connection"},
    {.name = "shutdown-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(shutdown_timeout_ns, int64_t), .def = "5s", .min = 0, .max = 3600 * SEC,
     .group = G_LIMITS, .help = "on SIGTERM or SIGINT, time left for requests in flight"},
    {.name = "max-batch", .type = SL_OPT_INT, .offset = FIELD(max_batch, int64_t), .def = "1000",
     .min = 1, .max = 1000000, .group = G_LIMITS,
     .help = "most requests in one GetRateLimits call"},

    /* Engine */
    {.name = "gc-max-keys", .type = SL_OPT_INT, .offset = FIELD(gc_max_keys, int64_t),
     .def = "1000000", .min = 1, .max = INT64_C(1) << 40, .group = G_ENGINE,
     .help = "most keys held; past it idle keys are collected, LRU first"},
    {.name = "gc-period", .type = SL_OPT_DURATION, .offset = FIELD(gc_period_ns, int64_t),
     .def = "1s", .min = 1 * MS, .max = 86400 * SEC, .group = G_ENGINE,
     .help = "how often the collector of inactive keys runs"},
    {.name = "gc-collect", .type = SL_OPT_DURATION, .offset = FIELD(gc_collect_ns, int64_t),
     .def = "0", .min = 0, .max = 18 * 3600 * SEC, .group = G_ENGINE,
     .help = "collect keys without hits for this long (Levee's GC); 0 = off (a collected key "
             "starts afresh, so keep it above your longest limit duration)"},
    {.name = "gc-max-work", .type = SL_OPT_INT, .offset = FIELD(gc_max_work, int64_t),
     .def = "10000", .min = 1, .max = INT64_C(1) << 32, .group = G_ENGINE,
     .help = "most key slots one collector run examines (bounds its pause)"},
    {.name = "shards", .type = SL_OPT_INT, .offset = FIELD(shards, int64_t), .def = "64",
     .min = 1, .max = 65536, .group = G_ENGINE,
     .help = "key store shards, each with its own lock (a power of two)"},
    {.name = "max-log-limit", .type = SL_OPT_INT, .offset = FIELD(max_log_limit, int64_t),
     .def = "10000", .min = 1, .max = 100000000, .group = G_ENGINE,
     .help = "largest SLIDING_LOG limit (memory per key grows with it)"},
    {.name = "max-sub-windows", .type = SL_OPT_INT, .offset = FIELD(max_sub_windows, int64_t),
     .def = "60", .min = 1, .max = 100000, .group = G_ENGINE,
     .help = "most sub-windows accepted for SLIDING_WINDOW"},

    /* Quotas (Levee) */
    {.name = "standalone", .type = SL_OPT_BOOL, .offset = FIELD(standalone, bool), .def = "false",
     .group = G_QUOTAS, .help = "run alone: no cluster membership and no peers"},
    {.name = "storage-prefix", .type = SL_OPT_STRING, .offset = FIELD(storage_prefix, char *),
     .def = "/sluice", .group = G_QUOTAS, .metavar = "PREFIX",
     .help = "root of the etcd tree (<prefix>/limit, <prefix>/factor)"},
    {.name = "storage-addrs", .type = SL_OPT_LIST, .offset = FIELD(storage_addrs, sl_strlist),
     .group = G_QUOTAS, .metavar = "URLS", .help = "etcd endpoints, e.g. http://127.0.0.1:2379"},
    {.name = "quota-file", .type = SL_OPT_STRING, .offset = FIELD(quota_file, char *),
     .group = G_QUOTAS, .metavar = "FILE",
     .help = "file of quotas for POST /attempt, instead of etcd"},
    {.name = "no-quota", .type = SL_OPT_ENUM, .offset = FIELD(no_quota, int), .def = "error",
     .choices = no_quota_choices, .group = G_QUOTAS,
     .help = "/attempt answer with no quota nor key_default: 200/429/500"},
    {.name = "storage-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(storage_timeout_ns, int64_t), .def = "2s", .min = 1 * MS, .max = 600 * SEC,
     .group = G_QUOTAS, .help = "timeout of one etcd request"},

    /* Metrics */
    {.name = "graphite-addr", .type = SL_OPT_STRING, .offset = FIELD(graphite_addr, char *),
     .group = G_METRICS, .metavar = "ADDR",
     .help = "Graphite collector ip:port[/udp|/tcp] (no suffix: tcp); empty = off"},
    {.name = "graphite-period", .type = SL_OPT_DURATION,
     .offset = FIELD(graphite_period_ns, int64_t), .def = "10s", .min = 100 * MS,
     .max = 86400 * SEC, .group = G_METRICS, .help = "how often metrics are pushed to Graphite"},
    {.name = "graphite-prefix", .type = SL_OPT_STRING, .offset = FIELD(graphite_prefix, char *),
     .def = "sluice", .group = G_METRICS, .metavar = "PREFIX",
     .help = "put before metric names sent to Graphite (prefix.name)"},

    /* Cluster */
    {.name = "discovery", .type = SL_OPT_ENUM, .offset = FIELD(discovery, int), .def = "none",
     .choices = discovery_choices, .group = G_CLUSTER,
     .help = "peer list source: none (one node), --peers, DNS, etcd"},
    {.name = "peers", .type = SL_OPT_LIST, .offset = FIELD(peers, sl_strlist), .group = G_CLUSTER,
     .metavar = "ADDRS", .help = "peer addresses (host:port) for --discovery=static"},
    {.name = "dns-name", .type = SL_OPT_STRING, .offset = FIELD(dns_name, char *),
     .group = G_CLUSTER, .metavar = "NAME",
     .help = "name whose A/AAAA records are the peers, for --discovery=dns"},
    {.name = "dns-server", .type = SL_OPT_STRING, .offset = FIELD(dns_server, char *),
     .group = G_CLUSTER, .metavar = "IP:PORT",
     .help = "DNS server (IPv4) for --discovery=dns instead of the system resolver"},
    {.name = "dns-period", .type = SL_OPT_DURATION, .offset = FIELD(dns_period_ns, int64_t),
     .def = "5s", .min = 100 * MS, .max = 86400 * SEC, .group = G_CLUSTER,
     .help = "how often the DNS name is resolved again"},
    {.name = "advertise-addr", .type = SL_OPT_STRING, .offset = FIELD(advertise_addr, char *),
     .def_doc = "--listen-addr", .group = G_CLUSTER, .metavar = "ADDR",
     .help = "address other peers reach this node at"},
    {.name = "peer-picker", .type = SL_OPT_ENUM, .offset = FIELD(peer_picker, int), .def = "ring",
     .choices = picker_choices, .group = G_CLUSTER,
     .help = "key owner choice: consistent-hash ring or rendezvous (HRW)"},
    {.name = "replicas", .type = SL_OPT_INT, .offset = FIELD(replicas, int64_t), .def = "512",
     .min = 1, .max = 65536, .group = G_CLUSTER, .help = "virtual nodes per peer on the ring"},
    {.name = "batch-wait", .type = SL_OPT_DURATION, .offset = FIELD(batch_wait_ns, int64_t),
     .def = "500us", .min = 0, .max = 10 * SEC, .group = G_CLUSTER,
     .help = "gather requests for one owner this long before forwarding"},
    {.name = "batch-limit", .type = SL_OPT_INT, .offset = FIELD(batch_limit, int64_t),
     .def = "1000", .min = 1, .max = 1000000, .group = G_CLUSTER,
     .help = "most requests in one forwarded batch (full: sent at once)"},
    {.name = "batch-timeout", .type = SL_OPT_DURATION, .offset = FIELD(batch_timeout_ns, int64_t),
     .def = "500ms", .min = 1 * MS, .max = 600 * SEC, .group = G_CLUSTER,
     .help = "timeout of one forwarded batch"},
    {.name = "global-sync-wait", .type = SL_OPT_DURATION,
     .offset = FIELD(global_sync_wait_ns, int64_t), .def = "100ms", .min = 1 * MS,
     .max = 600 * SEC, .group = G_CLUSTER,
     .help = "how often GLOBAL hits and owner state are sent"},
    {.name = "global-batch-limit", .type = SL_OPT_INT,
     .offset = FIELD(global_batch_limit, int64_t), .def = "1000", .min = 1, .max = 1000000,
     .group = G_CLUSTER, .help = "most keys in one GLOBAL update or broadcast"},
    {.name = "fail-open", .type = SL_OPT_BOOL, .offset = FIELD(fail_open, bool), .def = "false",
     .group = G_CLUSTER,
     .help = "allow, instead of failing, when a key's owner is unreachable"},
    {.name = "peer-lease-ttl", .type = SL_OPT_DURATION,
     .offset = FIELD(peer_lease_ttl_ns, int64_t), .def = "5s", .min = 1 * SEC, .max = 3600 * SEC,
     .group = G_CLUSTER, .help = "TTL of this node's membership lease in etcd"},

    /* Protection */
    {.name = "shed", .type = SL_OPT_BOOL, .offset = FIELD(shed, bool), .def = "true",
     .group = G_PROTECT,
     .help = "shed calls by priority when a worker loop is overloaded (test first, never critical)"},
    {.name = "shed-target", .type = SL_OPT_INT, .offset = FIELD(shed_target, int64_t),
     .def = "90", .min = 1, .max = 100, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "busy share of a worker loop above which shedding rises"},
    {.name = "shed-low", .type = SL_OPT_INT, .offset = FIELD(shed_low, int64_t), .def = "70",
     .min = 0, .max = 100, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "busy share below which shedding falls (<= shed-target: the band holds)"},
    {.name = "shed-raise-after", .type = SL_OPT_DURATION,
     .offset = FIELD(shed_raise_after_ns, int64_t), .def = "1s", .min = 0, .max = 3600 * SEC,
     .group = G_PROTECT, .help = "over shed-target this long before each raise"},
    {.name = "shed-lower-after", .type = SL_OPT_DURATION,
     .offset = FIELD(shed_lower_after_ns, int64_t), .def = "5s", .min = 0, .max = 3600 * SEC,
     .group = G_PROTECT, .help = "under shed-low this long before each lowering"},
    {.name = "shed-raise-step", .type = SL_OPT_INT, .offset = FIELD(shed_raise_step, int64_t),
     .def = "25", .min = 1, .max = 300, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "shed share added per raise, in percent of one traffic class"},
    {.name = "shed-lower-step", .type = SL_OPT_INT, .offset = FIELD(shed_lower_step, int64_t),
     .def = "10", .min = 1, .max = 300, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "shed share removed per lowering, in percent of one traffic class"},
    {.name = "shed-smoothing", .type = SL_OPT_INT, .offset = FIELD(shed_smoothing, int64_t),
     .def = "50", .min = 1, .max = 100, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "weight of a new load sample in the moving average (100 = none)"},
    {.name = "shed-interval", .type = SL_OPT_DURATION, .offset = FIELD(shed_interval_ns, int64_t),
     .def = "100ms", .min = 10 * MS, .max = 60 * SEC, .group = G_PROTECT,
     .help = "how often each worker samples its load"},
    {.name = "default-priority", .type = SL_OPT_ENUM, .offset = FIELD(default_priority, int),
     .def = "critical", .choices = priority_choices, .group = G_PROTECT,
     .help = "priority of calls without X-Priority / metadata priority (and no X-Method)"},
    {.name = "max-concurrency-limit", .type = SL_OPT_INT,
     .offset = FIELD(max_concurrency_limit, int64_t), .def = "10000", .min = 1,
     .max = 100000000, .group = G_PROTECT,
     .help = "largest CONCURRENCY limit (16 bytes per lease held)"},
    {.name = "max-switches", .type = SL_OPT_INT, .offset = FIELD(max_switches, int64_t),
     .def = "4096", .min = 1, .max = 1000000, .group = G_PROTECT,
     .help = "most kill switches and concurrency entries held"},
    {.name = "admin-api", .type = SL_OPT_BOOL, .offset = FIELD(admin_api, bool), .def = "true",
     .group = G_PROTECT,
     .help = "serve GET/POST /v1/admin/killswitch on the client port"},
};

static const sl_config_table daemon_table = {
    .program = "sluiced",
    .env_prefix = "SLUICE_",
    .opts = daemon_opts,
    .nopts = sizeof(daemon_opts) / sizeof(daemon_opts[0]),
};

const sl_config_table *sl_config_daemon_table(void)
{
    return &daemon_table;
}

void sl_config_help(FILE *out)
{
    sl_config_table_help(&daemon_table, out);
}

void sl_config_dump(const sl_options *o, FILE *out)
{
    sl_config_table_dump(&daemon_table, o, out);
}

void sl_config_free(sl_options *o)
{
    sl_config_table_free(&daemon_table, o);
}

/* The --config value from flags (last one wins), or NULL. */
static const char *args_config(int argc, char *const *argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strncmp(a, "--config=", 9) == 0)
            path = a + 9;
        else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < argc)
            path = argv[++i];
    }
    return path;
}

static int replace_str(char **dst, const char *src, char *err, size_t errlen)
{
    char *s = strdup(src);
    if (s == NULL)
        return fail(err, errlen, -ENOMEM, "out of memory");
    free(*dst);
    *dst = s;
    return 0;
}

/* Computed defaults and rules that span options. */
static int finalize(sl_options *o, char *err, size_t errlen)
{
    int rc;
    if (o->instance_id[0] == '\0') {
        char host[256];
        if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
            snprintf(host, sizeof(host), "sluice");
        host[sizeof(host) - 1] = '\0';
        if ((rc = replace_str(&o->instance_id, host, err, errlen)) != 0)
            return rc;
    }
    if (o->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->workers = n < 1 ? 1 : n > 1024 ? 1024 : n;
    }
    if (o->listen_addr[0] == '\0')
        return fail(err, errlen, -EINVAL, "option 'listen-addr': must not be empty");
    if (o->advertise_addr[0] == '\0' &&
        (rc = replace_str(&o->advertise_addr, o->listen_addr, err, errlen)) != 0)
        return rc;
    if ((o->shards & (o->shards - 1)) != 0)
        return fail(err, errlen, -EINVAL, "option 'shards': %lld is not a power of two",
                    (long long)o->shards);
    if (o->discovery == SL_DISCOVERY_STATIC && o->peers.n == 0)
        return fail(err, errlen, -EINVAL, "option 'peers': required with discovery=static");
    if (o->discovery == SL_DISCOVERY_DNS && o->dns_name[0] == '\0')
        return fail(err, errlen, -EINVAL, "option 'dns-name': required with discovery=dns");
    if (o->discovery == SL_DISCOVERY_ETCD && o->storage_addrs.n == 0)
        return fail(err, errlen, -EINVAL, "option 'storage-addrs': required with discovery=etcd");
    if (o->shed_low > o->shed_target)
        return fail(err, errlen, -EINVAL, "option 'shed-low': %lld is above shed-target (%lld)",
                    (long long)o->shed_low, (long long)o->shed_target);
    if (o->standalone && o->discovery != SL_DISCOVERY_NONE)
        return fail(err, errlen, -EINVAL,
                    "option 'standalone': cannot be combined with discovery=%s",
                    discovery_choices[o->discovery]);
    return 0;
}

int sl_config_parse(sl_options *o, int argc, char *const *argv, char *const *envp, char *err,
                    size_t errlen)
{
    const sl_config_table *t = &daemon_table;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    int rc = sl_config_table_defaults(t, o, err, errlen);
    if (rc != 0)
        return rc;
    int special = args_special(argc, argv);
    if (special != 0)
        return special;
    /* The file comes first, so its name must be known before env and flags are applied. */
    const char *path = args_config(argc, argv);
    if (path == NULL)
        path = env_get(envp, "SLUICE_CONFIG");
    if (path != NULL && path[0] != '\0') {
        if ((rc = sl_config_table_load_file(t, o, path, err, errlen)) != 0)
            return rc;
    }
    if ((rc = sl_config_table_load_env(t, o, envp, err, errlen)) != 0)
        return rc;
    if ((rc = sl_config_table_load_args(t, o, argc, argv, err, errlen)) != 0)
        return rc;
    return finalize(o, err, errlen);
}

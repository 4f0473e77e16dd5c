/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option engine's sources (config/opt.h): a YAML file (one flat mapping of option: value; an
 * unknown key, a key given twice, a nested mapping or a sequence for a non-list option is an error
 * naming the key and its line), the environment (<prefix><NAME>) and the command-line flags (--name
 * value, --name=value, --[no-]name, -c value, "--", positional arguments). Each turns its text
 * into sl_opt_apply() calls with the source named for the message; precedence is the caller's
 * order of calls (defaults < file < environment < flags).
 */
#include "config/opt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/file.h"
#include "config/opt_int.h"

extern char **environ;

#define MAX_FILE_BYTES ((size_t)1 << 20) /* a config file is small; anything bigger is a mistake */

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
    const sl_opt_table *t;
    const sl_opt_track *tr; /* NULL: stop at the first problem */
    bool in_list;            /* an error came from inside a list's items: no skipping past it */
};

static bool keep_going(const struct yaml_ctx *y)
{
    return y->tr && y->tr->diag;
}

static int yaml_next(struct yaml_ctx *y)
{
    if (y->have_ev) {
        yaml_event_delete(&y->ev);
        y->have_ev = false;
    }
    if (!yaml_parser_parse(&y->parser, &y->ev)) {
        yaml_parser_t *p = &y->parser;
        return sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL, "%s:%zu: invalid YAML: %s%s%s",
                              y->name,
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
        return sl_opt_store(y->t, y->tr, target, o, text, false, src, y->err, y->errlen);
    }
    if (y->ev.type != YAML_SEQUENCE_START_EVENT || o->type != SL_OPT_LIST)
        return sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                              "%s:%zu: option '%s' takes %s %s, not %s",
                           y->name, 
                    yaml_line(y), o->name, o->type == SL_OPT_INT ? "an" : "a", sl_opt_type_word(o->type),
                    event_what(y->ev.type));
    sl_opt_list l = {0};
    int rc;
    y->in_list = true;
    for (;;) {
        if ((rc = yaml_next(y)) != 0)
            break;
        if (y->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        if (y->ev.type != YAML_SCALAR_EVENT) {
            rc = sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                                "%s:%zu: option '%s': list items must be "
                      "scalars, not %s", y->name, yaml_line(y), o->name, event_what(y->ev.type));
            break;
        }
        const char *v = (const char *)y->ev.data.scalar.value;
        if (!is_null_scalar(&y->ev) && (rc = sl_opt_list_push(&l, v, strlen(v))) != 0) {
            rc = sl_opt_problem(y->tr, y->err, y->errlen, rc, "out of memory");
            break;
        }
    }
    if (rc != 0) {
        sl_opt_list_clear(&l);
        return rc;
    }
    y->in_list = false;
    sl_opt_list *f = sl_opt_field(target, o);
    sl_opt_list_clear(f);
    *f = l;
    if (y->tr && y->tr->origin)
        snprintf(y->tr->origin[o - y->t->opts], SL_OPT_ORIGIN_MAX, "%.*s",
                 SL_OPT_ORIGIN_MAX - 1, src);
    return 0;
}

/* Past the value of a key that is refused (the current event is its first): a nested mapping or
 * list whole, so that a check goes on with the next key. */
static int yaml_skip_value(struct yaml_ctx *y)
{
    int depth = 0, rc;
    for (;;) {
        switch (y->ev.type) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            depth++;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
        if (depth <= 0)
            return 0;
        if ((rc = yaml_next(y)) != 0)
            return rc;
    }
}

static int yaml_mapping(struct yaml_ctx *y, const sl_opt_table *t, void *target)
{
    int first = 0;
    bool *seen = calloc(t->nopts ? t->nopts : 1, sizeof(bool));
    size_t *seen_line = calloc(t->nopts ? t->nopts : 1, sizeof(size_t));
    int rc = 0;
    if (seen == NULL || seen_line == NULL) {
        rc = sl_opt_problem(y->tr, y->err, y->errlen, -ENOMEM, "out of memory");
        goto out;
    }
    for (;;) {
        if ((rc = yaml_next(y)) != 0)
            goto out;
        if (y->ev.type == YAML_MAPPING_END_EVENT)
            break;
        if (y->ev.type != YAML_SCALAR_EVENT) {
            rc = sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                             "%s:%zu: keys must be option names, not %s", 
                      y->name, yaml_line(y), event_what(y->ev.type));
            goto out;
        }
        const char *key = (const char *)y->ev.data.scalar.value;
        size_t line = yaml_line(y);
        const sl_opt *o = sl_opt_find(t, key);
        int krc = 0;
        if (o == NULL) {
            const sl_opt *near = sl_opt_suggest(t, key);
            if (near)
                krc = sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                                     "%s:%zu: unknown option '%s': did you mean '%s'?", y->name,
                                     line, key, near->name);
            else
                krc = sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                                     "%s:%zu: unknown option '%s' (%s --help lists the options)",
                                     y->name, line, key, t->program ? t->program : "--help");
        } else if (o->file_forbidden) {
            krc = sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                                 "%s:%zu: option '%s' cannot be set in a file", y->name, line,
                                 o->name);
        } else if (seen[o - t->opts]) {
            krc = sl_opt_problem(y->tr, y->err, y->errlen, -EINVAL,
                                 "%s:%zu: option '%s' set twice (first at line %zu)", y->name,
                                 line, o->name, seen_line[o - t->opts]);
        }
        if (krc != 0) {
            if (first == 0)
                first = krc;
            if (!keep_going(y)) {
                rc = krc;
                goto out;
            }
            if ((rc = yaml_next(y)) != 0 || (rc = yaml_skip_value(y)) != 0)
                goto out;
            continue;
        }
        size_t idx = (size_t)(o - t->opts);
        seen[idx] = true;
        seen_line[idx] = line;
        if ((rc = yaml_next(y)) != 0)
            goto out;
        if ((rc = yaml_value(y, target, o)) != 0) {
            if (first == 0)
                first = rc;
            if (!keep_going(y) || y->in_list || (rc = yaml_skip_value(y)) != 0) {
                rc = rc ? rc : first;
                goto out;
            }
        }
    }
    rc = first;
out:
    free(seen);
    free(seen_line);
    return rc;
}

static int load_yaml(const sl_opt_table *t, void *target, const char *yaml, size_t len,
                     const char *name, const sl_opt_track *tr, char *err, size_t errlen)
{
    struct yaml_ctx y = {.name = name ? name : "<config>", .err = err, .errlen = errlen, .t = t,
                         .tr = tr};
    if (!yaml_parser_initialize(&y.parser))
        return sl_opt_problem(tr, err, errlen, -ENOMEM, "out of memory");
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
        rc = sl_opt_problem(tr, err, errlen, -EINVAL,
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
        rc = sl_opt_problem(tr, err, errlen, -EINVAL, "%s:%zu: only one YAML document is allowed", y.name,
                  yaml_line(&y));
out:
    if (y.have_ev)
        yaml_event_delete(&y.ev);
    yaml_parser_delete(&y.parser);
    return rc;
}

int sl_opt_load_yaml(const sl_opt_table *t, void *target, const char *yaml,
                     size_t len, const char *name, char *err, size_t errlen)
{
    return load_yaml(t, target, yaml, len, name, NULL, err, errlen);
}

int sl_opt_load_yaml_ex(const sl_opt_table *t, void *target, const char *yaml, size_t len,
                        const char *name, const sl_opt_track *tr, char *err, size_t errlen)
{
    return load_yaml(t, target, yaml, len, name, tr, err, errlen);
}

int sl_opt_load_file(const sl_opt_table *t, void *target, const char *path, char *err,
                     size_t errlen)
{
    return sl_opt_load_file_ex(t, target, path, NULL, err, errlen);
}

int sl_opt_load_file_ex(const sl_opt_table *t, void *target, const char *path,
                        const sl_opt_track *tr, char *err, size_t errlen)
{
    char *buf = NULL, why[512];
    size_t len = 0;
    int rc = sl_file_read(path, MAX_FILE_BYTES, SL_FILE_REGULAR, &buf, &len, why, sizeof why);
    if (rc == -ENOMEM)
        return sl_opt_problem(tr, err, errlen, rc, "out of memory");
    if (rc == -EFBIG || rc == -EIO)
        return sl_opt_problem(tr, err, errlen, rc, "config file %s", why);
    if (rc)
        return sl_opt_problem(tr, err, errlen, rc, "config file %s (option 'config')", why);
    rc = load_yaml(t, target, buf, len, path, tr, err, errlen);
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
    return sl_opt_load_env_ex(t, target, envp, NULL, err, errlen);
}

int sl_opt_load_env_ex(const sl_opt_table *t, void *target, char *const *envp,
                       const sl_opt_track *tr, char *err, size_t errlen)
{
    int first = 0;
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        char name[128], src[160];
        sl_opt_env_name(t, o, name, sizeof(name));
        const char *v = sl_opt_getenv(envp, name);
        if (v == NULL)
            continue;
        snprintf(src, sizeof(src), "env %s", name);
        int rc = sl_opt_store(t, tr, target, o, v, false, src, err, errlen);
        if (rc != 0 && !(tr && tr->diag))
            return rc;
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
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
static int positional(const char *a, const char **pos, size_t maxpos, size_t *npos,
                      const sl_opt_track *tr, char *err, size_t errlen)
{
    if (*npos >= maxpos)
        return sl_opt_problem(tr, err, errlen, -EINVAL, "unexpected argument '%s'", a);
    pos[(*npos)++] = a;
    return 0;
}

static bool starts_with_digit(const char *s)
{
    return *s >= '0' && *s <= '9';
}

static int parse_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                      const char **pos, size_t maxpos, size_t *npos, const sl_opt_track *tr,
                      char *err, size_t errlen);

int sl_opt_parse_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                      const char **pos, size_t maxpos, size_t *npos, char *err, size_t errlen)
{
    return parse_args(t, target, argc, argv, pos, maxpos, npos, NULL, err, errlen);
}

int sl_opt_load_args_ex(const sl_opt_table *t, void *target, int argc, char *const *argv,
                        const sl_opt_track *tr, char *err, size_t errlen)
{
    return parse_args(t, target, argc, argv, NULL, 0, NULL, tr, err, errlen);
}

static int parse_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                      const char **pos, size_t maxpos, size_t *npos, const sl_opt_track *tr,
                      char *err, size_t errlen)
{
    int first = 0;
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
    bool diag = tr && tr->diag;
    for (int i = 1; i < argc; i++) {
        if (rc != 0) {
            if (first == 0)
                first = rc;
            if (!diag)
                break;
            rc = 0;
        }
        const char *a = argv[i];
        const sl_opt *o = NULL;
        const char *value = NULL;
        char src[160];
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc && rc == 0; i++)
                rc = positional(argv[i], pos, maxpos, npos, tr, err, errlen);
            break;
        }
        if (a[0] == '-' && a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            char nm[128];
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            if (n >= sizeof(nm)) {
                rc = sl_opt_problem(tr, err, errlen, -EINVAL, "unknown flag '%s'", a);
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
            if (o == NULL && strncmp(nm, "no-", 3) == 0 && sl_opt_find(t, nm + 3) != NULL) {
                rc = sl_opt_problem(tr, err, errlen, -EINVAL,
                                    "unknown flag '--%s': option '%s' is not a boolean "
                                    "(see --help)",
                                    nm, nm + 3);
                continue;
            }
            if (o == NULL) {
                const sl_opt *near = sl_opt_suggest(t, nm);
                rc = sl_opt_problem(tr, err, errlen, -EINVAL, "unknown flag '--%s'%s%s%s", nm,
                                    near ? ": did you mean '--" : "", near ? near->name : "",
                                    near ? "'? (see --help)" : " (see --help)");
                /* its value, if it has one, is not a positional argument */
                if (diag && !eq && i + 1 < argc && argv[i + 1][0] != '-')
                    i++;
                continue;
            }
            snprintf(src, sizeof(src), "flag --%s", negated ? nm : o->name);
            if (negated) {
                if (eq != NULL) {
                    rc = sl_opt_problem(tr, err, errlen, -EINVAL, "flag --%s takes no value", nm);
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
                rc = sl_opt_problem(tr, err, errlen, -EINVAL,
                                    "option '%s': flag --%s needs a value",
                                 o->name, o->name);
                break;
            }
        } else if (a[0] == '-' && a[1] != '\0' && a[2] == '\0') {
            o = sl_opt_find_short(t, a[1]);
            if (o == NULL) {
                rc = sl_opt_problem(tr, err, errlen, -EINVAL, "unknown flag '%s' (see --help)", a);
                continue;
            }
            snprintf(src, sizeof(src), "flag %s", a);
            if (o->type == SL_OPT_BOOL) {
                value = "true";
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                rc = sl_opt_problem(tr, err, errlen, -EINVAL, "option '%s': flag %s needs a value",
                                 o->name, a);
                break;
            }
        } else {
            rc = positional(a, pos, maxpos, npos, tr, err, errlen);
            continue;
        }
        size_t idx = (size_t)(o - t->opts);
        rc = sl_opt_store(t, tr, target, o, value, seen[idx] && o->type == SL_OPT_LIST, src, err,
                          errlen);
        seen[idx] = true;
    }
    free(seen);
    if (rc != 0 && first == 0)
        first = rc;
    return first;
}

int sl_opt_load_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                     char *err, size_t errlen)
{
    return sl_opt_parse_args(t, target, argc, argv, NULL, 0, NULL, err, errlen);
}

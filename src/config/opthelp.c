/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option engine's rendering (config/opt.h): --help (usage, the syntax notes, every option by
 * group with its metavar, default and environment variable; a CLI command's form wraps its help
 * lines at 100 columns) and the effective-config dump, a YAML file that loads back to the same
 * values.
 */
#include "config/opt.h"

#include <stdio.h>
#include <string.h>

#include "config/opt_int.h"

static const void *cfield(const void *target, const sl_opt *o)
{
    return (const char *)target + o->offset;
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
    if (t->other_help != NULL)
        fputs(t->other_help, out);
    if (t->flags_only && t->epilog != NULL)
        fprintf(out, "\n%s", t->epilog);
}

/* A double-quoted YAML scalar that loads back to s: escaped are '"', '\\', the C0 and C1 controls
 * (which YAML does not allow unescaped), the characters YAML reads as line breaks inside quotes
 * (U+0085, U+2028, U+2029: a raw one would load back as a space) and U+FEFF, U+FFFE, U+FFFF. */
static void dump_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(out, "\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(out, "\\x%02x", *p);
        } else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            fprintf(out, "\\x%02x", p[1]);
            p++;
        } else if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9)) {
            fprintf(out, "\\u%04x", 0x2000 | (p[2] & 0x3f));
            p += 2;
        } else if (p[0] == 0xef && ((p[1] == 0xbb && p[2] == 0xbf) ||
                                    (p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)))) {
            fprintf(out, "\\u%04x", ((p[1] & 0x3f) << 6 | (p[2] & 0x3f)) | 0xf000);
            p += 2;
        } else {
            fputc(*p, out);
        }
    }
    fputc('"', out);
}

static size_t cfield_list_n(const void *target, const sl_opt *o)
{
    return ((const sl_opt_list *)cfield(target, o))->n;
}

/* One non-list, non-string value in the option's own syntax. */
static void dump_value(FILE *out, const sl_opt *o, const void *f)
{
    char buf[64];
    switch (o->type) {
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
    default:
        break;
    }
}

void sl_opt_dump(const sl_opt_table *t, const void *target, FILE *out)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        if (o->file_forbidden)
            continue;
        const void *f = cfield(target, o);
        fprintf(out, "%s:%s", o->name,
                o->type == SL_OPT_LIST && cfield_list_n(target, o) ? "" : " ");
        if (o->type == SL_OPT_STRING) {
            dump_quoted(out, *(char *const *)f ? *(char *const *)f : "");
        } else if (o->type == SL_OPT_LIST) {
            const sl_opt_list *l = f;
            if (l->n == 0)
                fputs("[]", out);
            for (size_t k = 0; k < l->n; k++) {
                fputs("\n  - ", out);
                dump_quoted(out, l->items[k]);
            }
        } else {
            dump_value(out, o, f);
        }
        fputc('\n', out);
    }
}

/* A URL's "user:password@" (scheme://...@host) as "<redacted>@", else s as it is, into buf. */
static const char *redact_userinfo(const char *s, char *buf, size_t size)
{
    const char *scheme = strstr(s, "://");
    if (scheme == NULL)
        return s;
    const char *auth = scheme + 3, *end = auth + strcspn(auth, "/?#");
    const char *at = NULL;
    for (const char *p = auth; p < end; p++)
        if (*p == '@')
            at = p;
    if (at == NULL)
        return s;
    snprintf(buf, size, "%.*s<redacted>%s", (int)(auth - s), s, at);
    return buf;
}

static void dump_text(FILE *out, const sl_opt *o, const char *s)
{
    char buf[1024];
    if (o->secret && s[0] != '\0')
        s = "<redacted>";
    else if (strlen(s) < sizeof buf - 16)
        s = redact_userinfo(s, buf, sizeof buf);
    dump_quoted(out, s);
}

void sl_opt_dump_origins(const sl_opt_table *t, const void *target,
                         const char (*origin)[SL_OPT_ORIGIN_MAX], FILE *out)
{
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        if (o->file_forbidden)
            continue;
        const void *f = cfield(target, o);
        const char *why = origin != NULL && origin[i][0] ? origin[i] : NULL;
        if (o->type == SL_OPT_LIST) {
            const sl_opt_list *l = f;
            fprintf(out, "%s:%s", o->name, l->n ? "" : " []");
            if (why)
                fprintf(out, "  # %s", why);
            for (size_t k = 0; k < l->n; k++) {
                fputs("\n  - ", out);
                dump_text(out, o, l->items[k]);
            }
            fputc('\n', out);
            continue;
        }
        fprintf(out, "%s: ", o->name);
        if (o->type == SL_OPT_STRING)
            dump_text(out, o, *(char *const *)f ? *(char *const *)f : "");
        else
            dump_value(out, o, f);
        if (why)
            fprintf(out, "  # %s", why);
        fputc('\n', out);
    }
}

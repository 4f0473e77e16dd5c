/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option engine: one table of option descriptors drives a program's configuration from
 * defaults, a YAML file, the environment and command-line flags, and its --help. Each option has a
 * long name (`listen-addr`), a type, a default, a help line and a --help group; its environment
 * variable is the table's prefix plus the name in upper snake case (SLUICE_LISTEN_ADDR) and its
 * YAML key is the name itself or its snake_case form (listen_addr).
 *
 * Precedence, lowest to highest: defaults < YAML file (sluiced's --config FILE or SLUICE_CONFIG) <
 * environment < flags. A list set by a higher source replaces the lower one's; a list flag given
 * several times accumulates.
 *
 * Syntax, the same in every source:
 *   string    as is
 *   int       decimal, optionally signed
 *   bool      true/false, yes/no, on/off, 1/0; as flags --name, --no-name, --name=false
 *   duration  a sequence of <number><unit>, units ns us (or µs) ms s m h d, fractions allowed:
 *             500us, 100ms, 1.5s, 1m30s, 2h; a bare integer means milliseconds
 *   size      <integer><unit>: B, KiB MiB GiB TiB (or K M G T: powers of 1024), KB MB GB TB
 *             (powers of 1000), any case; a bare integer means bytes
 *   enum      one of the option's choices
 *   double    a finite decimal number (strtod syntax)
 *   list      a YAML sequence (or a scalar), or comma-separated in env and flags
 * An environment variable that is set but empty sets an empty value: it clears a string or a list
 * and is an error for the other types (unset it instead).
 * Flags: --name value, --name=value, -c FILE for short names; "--" ends the options. The YAML file
 * is one flat mapping; an unknown key, a key given twice, a nested mapping or a sequence for a
 * non-list option is an error naming the key and its line.
 *
 * Errors name the option and where the bad value came from ("option 'max-conns': invalid integer
 * 'ten' (file sluice.yaml:3)", "... (env SLUICE_MAX_CONNS)", "... (flag --max-conns)"). Functions
 * return 0 or a negative errno and write the message into err (errlen bytes, may be 0).
 *
 * The engine is generic over a table and a target struct: sluiced's table is config/config.c, and
 * each `sluice` subcommand has one of its own (src/cli). It is implemented in four files (see
 * config/opt.c): opt.c (table, lookup, storing values), optvalue.c (value parsers and formatters),
 * optsrc.c (file, environment, flags) and opthelp.c (--help, dump); this header is its whole API.
 */
#ifndef SLUICE_CONFIG_OPT_H
#define SLUICE_CONFIG_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum sl_opt_type {
    SL_OPT_STRING,   /* char *, owned, never NULL once defaults are applied ("" = empty) */
    SL_OPT_INT,      /* int64_t */
    SL_OPT_BOOL,     /* bool */
    SL_OPT_DURATION, /* int64_t nanoseconds */
    SL_OPT_SIZE,     /* uint64_t bytes */
    SL_OPT_ENUM,     /* int: index into choices */
    SL_OPT_LIST,     /* sl_opt_list, owned */
    SL_OPT_DOUBLE,   /* double, finite */
} sl_opt_type;

typedef struct sl_opt_list {
    char **items;
    size_t n;
} sl_opt_list;

typedef struct sl_opt {
    const char *name;              /* long name: lower case, '-' between words */
    char short_name;               /* 'c' for -c, or 0 */
    sl_opt_type type;
    size_t offset;                 /* of the field in the target struct */
    const char *def;               /* default, in the option's own syntax; NULL = empty / 0 */
    const char *def_doc;           /* shown in --help when the default is computed at run time */
    const char *group;             /* --help section */
    const char *metavar;           /* value placeholder in --help; NULL = from the type */
    const char *help;              /* one line */
    int64_t min, max;              /* int, duration (ns), size: inclusive bounds; both 0 = none */
    const char *const *choices;    /* enum: NULL-terminated names, stored as their index */
    bool file_forbidden;           /* may not be set from the file (the `config` option itself) */
    double dmin, dmax;             /* double: inclusive bounds; both 0 = none */
    bool nullable;                 /* string: NULL until set (tells "not given" from "") */
    bool repeat;                   /* list: each flag adds its whole value as one item (no
                                      comma splitting) */
    bool optional_value;           /* string, nullable: a bare --name sets ""; the value comes
                                      from --name=V, or from the next argument when it starts
                                      with a digit */
    bool secret;                   /* its value is a secret: the effective-config dump with
                                      origins (--print-config) shows "<redacted>" */
} sl_opt;

typedef struct sl_opt_table {
    const char *program;    /* for "Usage: <program> [options]" */
    /* Flags only (a CLI command): no file nor environment, and a --help of its own form:
     * "usage: <program> <usage>", the about text, the options, then the epilog. */
    bool flags_only;
    bool version;           /* --version is SL_OPT_VERSION (else an unknown flag) */
    const char *usage;      /* flags_only: what follows the program name; NULL = "[options]" */
    const char *about;      /* flags_only: paragraphs after the usage line, or NULL */
    const char *epilog;     /* flags_only: text after the options, or NULL */
    const char *env_prefix; /* "SLUICE_" */
    const char *other_help; /* more lines for --help's "Other:" section (modes the program's main
                               takes before the engine sees the flags), or NULL */
    const sl_opt *opts;
    size_t nopts;
} sl_opt_table;

/* sl_opt_load_args's (and sl_config_parse's) non-error results. */
#define SL_OPT_HELP 1    /* --help or -h was given: print help, exit 0 */
#define SL_OPT_VERSION 2 /* --version was given */

/* ---- generic engine ------------------------------------------------------------------------ */

/* Longest text of an option's origin ("file /etc/sluice/sluiced.yaml:12"). */
#define SL_OPT_ORIGIN_MAX 160

/*
 * How a parse reports and records, for the _ex loaders (the plain ones pass NULL: stop at the first
 * problem, record nothing):
 *   diag    when set, every problem is added to it and the load goes on with the next key, variable
 *           or flag (a syntax error of the YAML file still stops that file); the return is then
 *           the first problem's errno, err holding its text
 *   origin  when set, t->nopts entries: each option's is overwritten with where its value came
 *           from ("default", "file F:LINE", "env NAME", "flag --name") whenever a source sets it
 */
struct sl_diag;
typedef struct sl_opt_track {
    struct sl_diag *diag;
    char (*origin)[SL_OPT_ORIGIN_MAX];
} sl_opt_track;

/* Option by long name or its snake_case spelling, or NULL. */
const sl_opt *sl_opt_find(const sl_opt_table *t, const char *name);
/* The option whose name is nearest to `name` (an unknown one), for "did you mean": the smallest
 * edit distance (insertions, deletions, substitutions, and '_' as '-'), when it is at most 3 and at
 * most a third of the name's length; else NULL. */
const sl_opt *sl_opt_suggest(const sl_opt_table *t, const char *name);
/* The edit distance (Levenshtein) between a and b, '_' counted as '-', capped at 255. */
unsigned sl_opt_edit_distance(const char *a, const char *b);
/* "SLUICE_LISTEN_ADDR" for listen-addr into buf (truncated to size). */
void sl_opt_env_name(const sl_opt_table *t, const sl_opt *o, char *buf,
                     size_t size);

/* Set every option to its default. The target must be zeroed, or hold values this table set. */
int sl_opt_defaults(const sl_opt_table *t, void *target, char *err, size_t errlen);
/* Apply a YAML file. -ENOENT etc. when it cannot be read, -EFBIG past 1 MiB, -EINVAL. */
int sl_opt_load_file(const sl_opt_table *t, void *target, const char *path, char *err,
                     size_t errlen);
/* The same from a string (`name` is used in messages, e.g. the file name). */
int sl_opt_load_yaml(const sl_opt_table *t, void *target, const char *yaml,
                     size_t len, const char *name, char *err, size_t errlen);
/* Apply every <prefix><NAME> variable of envp (NULL = the process environment). */
int sl_opt_load_env(const sl_opt_table *t, void *target, char *const *envp, char *err,
                    size_t errlen);
/* Apply argv[1..argc). Returns SL_OPT_HELP / SL_OPT_VERSION when asked for, without
 * applying anything; positional arguments are an error. */
int sl_opt_load_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                     char *err, size_t errlen);
/* The same, collecting up to maxpos positional arguments (pointers into argv, in order, wherever
 * they stand among the flags; everything after "--") into pos[] and their count into *npos. One
 * more is an error ("unexpected argument"). */
int sl_opt_parse_args(const sl_opt_table *t, void *target, int argc, char *const *argv,
                      const char **pos, size_t maxpos, size_t *npos, char *err, size_t errlen);
/* SL_OPT_HELP for --help or -h, SL_OPT_VERSION for --version (if the table has it) anywhere in
 * argv[1..argc) before "--", else 0. */
int sl_opt_special(const sl_opt_table *t, int argc, char *const *argv);
/* The value of variable `name` in envp (NULL = the process environment), or NULL. */
const char *sl_opt_getenv(char *const *envp, const char *name);
/* Set one option from text, as if it came from `source` (e.g. "etcd /sluice/x"). */
int sl_opt_set(const sl_opt_table *t, void *target, const char *name,
               const char *value, const char *source, char *err, size_t errlen);
/* Free the strings and lists the table owns in target (the struct itself is the caller's). */
void sl_opt_free(const sl_opt_table *t, void *target);
/* The same loaders with a tracker (see sl_opt_track; tr may be NULL). */
int sl_opt_defaults_ex(const sl_opt_table *t, void *target, const sl_opt_track *tr, char *err,
                       size_t errlen);
int sl_opt_load_file_ex(const sl_opt_table *t, void *target, const char *path,
                        const sl_opt_track *tr, char *err, size_t errlen);
int sl_opt_load_yaml_ex(const sl_opt_table *t, void *target, const char *yaml, size_t len,
                        const char *name, const sl_opt_track *tr, char *err, size_t errlen);
int sl_opt_load_env_ex(const sl_opt_table *t, void *target, char *const *envp,
                       const sl_opt_track *tr, char *err, size_t errlen);
int sl_opt_load_args_ex(const sl_opt_table *t, void *target, int argc, char *const *argv,
                        const sl_opt_track *tr, char *err, size_t errlen);
/* --help text: usage, syntax notes, then every option by group, with default and env var. */
void sl_opt_help(const sl_opt_table *t, FILE *out);
/* The effective values as a YAML file that loads back to the same values. */
void sl_opt_dump(const sl_opt_table *t, const void *target, FILE *out);
/* The same with each option's origin as a comment ("listen-addr: \"x\"  # flag --listen-addr"),
 * secrets (sl_opt.secret) as "<redacted>" and a URL's user:password@ as "<redacted>@"; origin as
 * filled by a tracked parse (NULL: no comments). Loads back as YAML (secrets excepted). */
void sl_opt_dump_origins(const sl_opt_table *t, const void *target,
                         const char (*origin)[SL_OPT_ORIGIN_MAX], FILE *out);

/* Write the message into err (when errlen > 0) and return rc: the engine's own error path, for
 * callers that add checks of their own. */
__attribute__((format(printf, 4, 5))) int sl_opt_fail(char *err, size_t errlen, int rc,
                                                      const char *fmt, ...);

/* A problem of a tracked parse: into tr->diag when tracking one (the text also in err if err is still empty), else
 * only into err. Returns rc. */
__attribute__((format(printf, 5, 6))) int sl_opt_problem(const sl_opt_track *tr, char *err,
                                                         size_t errlen, int rc, const char *fmt,
                                                         ...);

/* Value parsers, exposed for other modules (the etcd watcher, the CLI). 0 or -EINVAL/-ERANGE. */
int sl_opt_parse_duration(const char *s, int64_t *ns);
int sl_opt_parse_size(const char *s, uint64_t *bytes);
int sl_opt_parse_bool(const char *s, bool *b);
int sl_opt_parse_int(const char *s, int64_t *v);       /* decimal, optionally signed */
int sl_opt_parse_double(const char *s, double *v);     /* finite */
/* Shortest exact spelling: "500us", "2h", "1m30s" -> "90s"; "16KiB", "1000000". */
void sl_opt_format_duration(int64_t ns, char *buf, size_t size);
void sl_opt_format_size(uint64_t bytes, char *buf, size_t size);

#endif

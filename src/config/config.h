/*
 * Configuration from defaults, a YAML file, the environment and command-line flags, driven by one
 * table of options. Each option has a long name (`listen-addr`), a type, a default, a help line and
 * a --help group; its environment variable is the table's prefix plus the name in upper snake case
 * (SLUICE_LISTEN_ADDR) and its YAML key is the name itself or its snake_case form (listen_addr).
 *
 * Precedence, lowest to highest: defaults < YAML file (--config FILE or SLUICE_CONFIG) <
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
 * The engine (sl_config_table_*) is generic over a table and a target struct; sluiced's table and
 * its `sl_options` struct are below (sl_config_parse and friends). Another program (the CLI) can
 * build a table of its own over its own struct.
 */
#ifndef SLUICE_CONFIG_CONFIG_H
#define SLUICE_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum sl_config_type {
    SL_OPT_STRING,   /* char *, owned, never NULL once defaults are applied ("" = empty) */
    SL_OPT_INT,      /* int64_t */
    SL_OPT_BOOL,     /* bool */
    SL_OPT_DURATION, /* int64_t nanoseconds */
    SL_OPT_SIZE,     /* uint64_t bytes */
    SL_OPT_ENUM,     /* int: index into choices */
    SL_OPT_LIST,     /* sl_strlist, owned */
} sl_config_type;

typedef struct sl_strlist {
    char **items;
    size_t n;
} sl_strlist;

typedef struct sl_config_option {
    const char *name;              /* long name: lower case, '-' between words */
    char short_name;               /* 'c' for -c, or 0 */
    sl_config_type type;
    size_t offset;                 /* of the field in the target struct */
    const char *def;               /* default, in the option's own syntax; NULL = empty / 0 */
    const char *def_doc;           /* shown in --help when the default is computed at run time */
    const char *group;             /* --help section */
    const char *metavar;           /* value placeholder in --help; NULL = from the type */
    const char *help;              /* one line */
    int64_t min, max;              /* int, duration (ns), size: inclusive bounds; both 0 = none */
    const char *const *choices;    /* enum: NULL-terminated names, stored as their index */
    bool file_forbidden;           /* may not be set from the file (the `config` option itself) */
} sl_config_option;

typedef struct sl_config_table {
    const char *program;    /* for "Usage: <program> [options]" */
    const char *env_prefix; /* "SLUICE_" */
    const sl_config_option *opts;
    size_t nopts;
} sl_config_table;

/* sl_config_parse's non-error results. */
#define SL_CONFIG_HELP 1    /* --help or -h was given: print help, exit 0 */
#define SL_CONFIG_VERSION 2 /* --version was given */

/* ---- generic engine ------------------------------------------------------------------------ */

/* Option by long name or its snake_case spelling, or NULL. */
const sl_config_option *sl_config_find(const sl_config_table *t, const char *name);
/* "SLUICE_LISTEN_ADDR" for listen-addr into buf (truncated to size). */
void sl_config_env_name(const sl_config_table *t, const sl_config_option *o, char *buf,
                        size_t size);

/* Set every option to its default. The target must be zeroed, or hold values this table set. */
int sl_config_table_defaults(const sl_config_table *t, void *target, char *err, size_t errlen);
/* Apply a YAML file. -ENOENT etc. when it cannot be read, -EFBIG past 1 MiB, -EINVAL. */
int sl_config_table_load_file(const sl_config_table *t, void *target, const char *path, char *err,
                              size_t errlen);
/* The same from a string (`name` is used in messages, e.g. the file name). */
int sl_config_table_load_yaml(const sl_config_table *t, void *target, const char *yaml,
                              size_t len, const char *name, char *err, size_t errlen);
/* Apply every <prefix><NAME> variable of envp (NULL = the process environment). */
int sl_config_table_load_env(const sl_config_table *t, void *target, char *const *envp, char *err,
                             size_t errlen);
/* Apply argv[1..argc). Returns SL_CONFIG_HELP / SL_CONFIG_VERSION when asked for, without
 * applying anything; positional arguments are an error. */
int sl_config_table_load_args(const sl_config_table *t, void *target, int argc, char *const *argv,
                              char *err, size_t errlen);
/* Set one option from text, as if it came from `source` (e.g. "etcd /sluice/x"). */
int sl_config_table_set(const sl_config_table *t, void *target, const char *name,
                        const char *value, const char *source, char *err, size_t errlen);
/* Free the strings and lists the table owns in target (the struct itself is the caller's). */
void sl_config_table_free(const sl_config_table *t, void *target);
/* --help text: usage, syntax notes, then every option by group, with default and env var. */
void sl_config_table_help(const sl_config_table *t, FILE *out);
/* The effective values as a YAML file that loads back to the same values. */
void sl_config_table_dump(const sl_config_table *t, const void *target, FILE *out);

/* Value parsers, exposed for other modules (the etcd watcher, the CLI). 0 or -EINVAL/-ERANGE. */
int sl_config_parse_duration(const char *s, int64_t *ns);
int sl_config_parse_size(const char *s, uint64_t *bytes);
int sl_config_parse_bool(const char *s, bool *b);
/* Shortest exact spelling: "500us", "2h", "1m30s" -> "90s"; "16KiB", "1000000". */
void sl_config_format_duration(int64_t ns, char *buf, size_t size);
void sl_config_format_size(uint64_t bytes, char *buf, size_t size);

/* ---- sluiced ---------------------------------------------------------------------------------- */

typedef enum sl_no_quota {
    SL_NO_QUOTA_ALLOW = 0, /* 200 */
    SL_NO_QUOTA_DENY = 1,  /* 429 */
    SL_NO_QUOTA_ERROR = 2, /* 500, Levee's "failed" */
} sl_no_quota;

typedef enum sl_discovery {
    SL_DISCOVERY_NONE = 0,
    SL_DISCOVERY_STATIC = 1,
    SL_DISCOVERY_DNS = 2,
    SL_DISCOVERY_ETCD = 3,
} sl_discovery;

typedef enum sl_peer_picker {
    SL_PICKER_RING = 0,
    SL_PICKER_HRW = 1,
} sl_peer_picker;

/* sluiced's options. Durations are nanoseconds (_ns), sizes bytes. */
typedef struct sl_options {
    /* General */
    char *config;
    char *instance_id;         /* defaults to the host name */
    char *listen_addr;
    int64_t workers;           /* defaults to the number of online CPUs */
    bool verbose;
    /* Limits */
    int64_t max_conns;
    uint64_t max_header_bytes;
    uint64_t max_body_bytes;
    int64_t idle_timeout_ns;
    int64_t read_timeout_ns;
    int64_t max_streams;
    int64_t shutdown_timeout_ns;
    int64_t max_batch;
    /* Engine */
    int64_t gc_max_keys;
    int64_t gc_period_ns;
    int64_t gc_collect_ns;
    int64_t gc_max_work;
    int64_t shards;
    int64_t max_log_limit;
    int64_t max_sub_windows;
    /* Quotas (Levee) */
    bool standalone;
    char *storage_prefix;
    sl_strlist storage_addrs;
    char *quota_file;
    int no_quota;              /* sl_no_quota */
    int64_t storage_timeout_ns;
    /* Metrics */
    char *graphite_addr;
    int64_t graphite_period_ns;
    char *graphite_prefix;
    /* Cluster */
    int discovery;             /* sl_discovery */
    sl_strlist peers;
    char *dns_name;
    char *dns_server;          /* "" = the system resolver */
    int64_t dns_period_ns;
    char *advertise_addr;      /* defaults to listen_addr */
    int peer_picker;           /* sl_peer_picker */
    int64_t replicas;
    int64_t batch_wait_ns;
    int64_t batch_limit;
    int64_t batch_timeout_ns;
    int64_t global_sync_wait_ns;
    int64_t global_batch_limit;
    bool fail_open;
    int64_t peer_lease_ttl_ns;
    /* Protection */
    bool shed;
    int64_t shed_target;          /* percent of a worker loop's time busy */
    int64_t shed_low;             /* percent */
    int64_t shed_raise_after_ns;
    int64_t shed_lower_after_ns;
    int64_t shed_raise_step;      /* percent of a traffic class */
    int64_t shed_lower_step;
    int64_t shed_smoothing;       /* percent weight of a new sample */
    int64_t shed_interval_ns;
    int default_priority;         /* sl_priority: critical, post, get, test */
    int64_t max_concurrency_limit;
    int64_t max_switches;
    bool admin_api;
} sl_options;

/* sluiced's table (program "sluiced", prefix "SLUICE_"). */
const sl_config_table *sl_config_daemon_table(void);

/*
 * Fill *o from defaults, the file named by --config / SLUICE_CONFIG, the environment (envp; NULL =
 * the process's) and argv, then resolve computed defaults (instance-id, workers, advertise-addr)
 * and check options against each other (e.g. --discovery=static needs --peers). Returns 0,
 * SL_CONFIG_HELP, SL_CONFIG_VERSION, or a negative errno with the message in err. *o must be
 * zeroed before the first call; call sl_config_free() afterwards in every case.
 */
int sl_config_parse(sl_options *o, int argc, char *const *argv, char *const *envp, char *err,
                    size_t errlen);
void sl_config_free(sl_options *o);
void sl_config_help(FILE *out);                       /* sluiced --help */
void sl_config_dump(const sl_options *o, FILE *out);  /* effective options as YAML */

#endif

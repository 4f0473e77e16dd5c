/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluice quota: read and write Levee quotas and group sizes in etcd (the tree described in
 * docs/levee.md), so that operators need neither etcdctl nor base64. The key a command touches is
 * chosen with a resource KEY, --sub, --default and --factor; values are checked with the same
 * parser the daemon uses before anything is written.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "ctlplane/etcd.h"
#include "config/quota.h"

typedef struct quota_args {
    sl_cli_storage storage;
    char *sub;
    bool dflt;
    char *factor; /* NULL: no --factor; "": --factor without a value */
    char *rate, *burst, *rps, *group_size;
    bool json;
    const char *cmd, *key; /* positional */
} quota_args;

#define FIELD(f) offsetof(quota_args, f)

static const sl_opt quota_opts[] = {
    {.name = "sub", .type = SL_OPT_STRING, .offset = FIELD(sub), .nullable = true,
     .group = "Selectors (with set, get, rm)", .metavar = "SUBKEY",
     .help = "KEY --sub SUBKEY: limit/key/KEY/sublimit/SUBKEY"},
    {.name = "default", .type = SL_OPT_BOOL, .offset = FIELD(dflt),
     .group = "Selectors (with set, get, rm)",
     .help = "the defaults: limit/key_default (--sub: limit/subkey_default/S)"},
    {.name = "factor", .type = SL_OPT_STRING, .offset = FIELD(factor), .nullable = true,
     .optional_value = true, .group = "Selectors (with set, get, rm)", .metavar = "DF",
     .help = "the group size: factor/key/KEY (or factor/default); DF to set"},
    {.name = "rate", .type = SL_OPT_STRING, .offset = FIELD(rate), .nullable = true,
     .group = "Values (with set)", .metavar = "R", .help = "the quota's rate (requests/s)"},
    {.name = "burst", .type = SL_OPT_STRING, .offset = FIELD(burst), .nullable = true,
     .group = "Values (with set)", .metavar = "B", .help = "with --rate: the burst (default 0)"},
    {.name = "rps", .type = SL_OPT_STRING, .offset = FIELD(rps), .nullable = true,
     .group = "Values (with set)", .metavar = "N",
     .help = "Levee's sizing rule: rate = N * 1.1, burst = rate / DF * 0.1"},
    {.name = "group-size", .type = SL_OPT_STRING, .offset = FIELD(group_size), .nullable = true,
     .group = "Values (with set)", .metavar = "DF",
     .help = "with --rps: the group size (default 1)"},
    {.name = "json", .type = SL_OPT_BOOL, .offset = FIELD(json), .def = "false",
     .help = "print one JSON object"},
    SL_CLI_STORAGE_OPTS(quota_args),
};

static const sl_opt_table quota_table = {
    .program = "sluice quota",
    .flags_only = true,
    .usage = "[options] <command> [KEY] [selectors] [value]",
    .about = "Commands:\n"
             "  set KEY --rate R [--burst B]      limit/key/KEY/quota = {\"rate\":R,\"burst\":B}\n"
             "  set KEY --rps N [--group-size DF] rate = N * 1.1, burst = rate / DF * 0.1\n"
             "  get KEY                           print a value (exit 1 if absent)\n"
             "  rm KEY                            delete a value\n"
             "  list                              every quota and group size under the root\n",
    .epilog = "exit: 0 done, 1 get or rm of a value that is not set, 2 usage, 3 etcd unreachable\n",
    .opts = quota_opts,
    .nopts = sizeof quota_opts / sizeof quota_opts[0],
};

/* A stored value as JSON: the quota object, else the number or text as it is. */
static json_t *value_json(const char *v, size_t n)
{
    json_t *j = json_loadb(v, n, JSON_DECODE_ANY, NULL);
    return j ? j : json_stringn(v, n);
}

/* A non-negative number from a flag's text (the engine's number syntax). */
static int parse_double(const char *s, const char *what, double *out)
{
    double v;
    if (sl_opt_parse_double(s, &v) || v < 0) {
        fprintf(stderr, "sluice quota: %s must be a non-negative number: '%s'\n", what, s);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

/* The path (relative to the root) the selectors name. */
static int selected_path(const quota_args *a, sl_quota_path *p)
{
    memset(p, 0, sizeof *p);
    if (a->dflt && a->key) {
        fprintf(stderr, "sluice quota: give a KEY or --default, not both\n");
        return -EINVAL;
    }
    if (!a->dflt && !a->key) {
        fprintf(stderr, "sluice quota: give a KEY or --default\n");
        return -EINVAL;
    }
    if (a->factor && a->sub) {
        fprintf(stderr, "sluice quota: --factor and --sub do not go together\n");
        return -EINVAL;
    }
    if (a->factor) {
        p->kind = a->dflt ? SL_QUOTA_FACTOR_DEFAULT : SL_QUOTA_FACTOR_KEY;
    } else if (a->sub) {
        p->kind = a->dflt ? SL_QUOTA_SUBKEY_DEFAULT : SL_QUOTA_SUBLIMIT;
        p->sub = a->sub;
        p->sub_len = strlen(a->sub);
        if (p->sub_len == 0 || strchr(a->sub, '/')) {
            fprintf(stderr, "sluice quota: SUBKEY must be non-empty and without '/'\n");
            return -EINVAL;
        }
    } else {
        p->kind = a->dflt ? SL_QUOTA_KEY_DEFAULT : SL_QUOTA_KEY;
    }
    if (a->key) {
        p->key = a->key;
        p->key_len = strlen(a->key);
        if (p->key_len == 0 || p->key_len > SL_QUOTA_MAX_KEY) {
            fprintf(stderr, "sluice quota: KEY must be 1..%d bytes\n", SL_QUOTA_MAX_KEY);
            return -EINVAL;
        }
    }
    return 0;
}

static int full_key(const char *root, const sl_quota_path *p, char *buf, size_t size)
{
    size_t rl = strlen(root);
    while (rl && root[rl - 1] == '/')
        rl--;
    if (rl + 2 > size)
        return -ENAMETOOLONG;
    memcpy(buf, root, rl);
    buf[rl] = '/';
    int n = sl_quota_path_format(p, buf + rl + 1, size - rl - 1);
    return n < 0 ? n : (int)rl + 1 + n;
}

/* The value to write for `set`, checked with the daemon's parsers. */
static int set_value(const quota_args *a, const sl_quota_path *p, char *buf, size_t size)
{
    const char *err = NULL;
    if (a->factor) {
        if (!a->factor[0]) {
            fprintf(stderr, "sluice quota: set --factor needs the group size: --factor DF\n");
            return -EINVAL;
        }
        uint32_t f;
        if (sl_quota_parse_factor(a->factor, strlen(a->factor), &f, &err)) {
            fprintf(stderr, "sluice quota: %s\n", err);
            return -EINVAL;
        }
        return snprintf(buf, size, "%u", f);
    }
    sl_quota q = {0};
    if (a->rps) {
        if (a->rate || a->burst) {
            fprintf(stderr, "sluice quota: --rps computes rate and burst; drop --rate/--burst\n");
            return -EINVAL;
        }
        double rps, df = 1;
        if (parse_double(a->rps, "--rps", &rps) ||
            (a->group_size && parse_double(a->group_size, "--group-size", &df)))
            return -EINVAL;
        if (df < 1 || df != floor(df)) {
            fprintf(stderr, "sluice quota: --group-size must be a whole number >= 1\n");
            return -EINVAL;
        }
        /* Levee's sizing rule: 10% headroom on the rate, a burst of 100 ms of one limiter's
         * share (the tiny epsilon keeps 27.5000000001 from binary noise at 27) */
        q.rate = rps * 1.1;
        q.burst = (int64_t)floor(q.rate / df * 0.1 + 1e-9);
    } else if (a->rate) {
        double rate, burst = 0;
        if (parse_double(a->rate, "--rate", &rate) ||
            (a->burst && parse_double(a->burst, "--burst", &burst)))
            return -EINVAL;
        q.rate = rate;
        q.burst = (int64_t)floor(burst);
    } else {
        fprintf(stderr, "sluice quota: set needs --rate R [--burst B] or --rps N\n");
        return -EINVAL;
    }
    int n = sl_quota_format_json(&q, buf, size);
    if (n < 0)
        return n;
    sl_quota check;
    if (sl_quota_parse_json(buf, (size_t)n, &check, &err)) {
        fprintf(stderr, "sluice quota: %s\n", err);
        return -EINVAL;
    }
    (void)p;
    return n;
}

static int cmd_list(sl_etcd *e, const char *root, bool json)
{
    size_t rl = strlen(root);
    while (rl && root[rl - 1] == '/')
        rl--;
    char *prefix = malloc(rl + 2);
    if (!prefix)
        return SL_CLI_EXIT_UNREACHABLE;
    memcpy(prefix, root, rl);
    prefix[rl] = '/';
    prefix[rl + 1] = 0;
    sl_etcd_kvs r;
    int rc = sl_etcd_range(e, prefix, rl + 1, true, 0, false, &r);
    if (rc) {
        char err[256];
        fprintf(stderr, "sluice quota: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
        free(prefix);
        return SL_CLI_EXIT_UNREACHABLE;
    }
    json_t *entries = json ? json_array() : NULL;
    for (size_t i = 0; i < r.n; i++) {
        const sl_etcd_kv *kv = &r.kvs[i];
        const char *rel = kv->key + rl + 1;
        size_t rel_len = kv->key_len - rl - 1;
        sl_quota_path p;
        int prc = sl_quota_path_parse(rel, rel_len, &p);
        if (prc == -ENOENT)
            continue; /* observer/ and other subtrees */
        const char *err = NULL;
        if (prc == 0) {
            if (p.kind == SL_QUOTA_FACTOR_DEFAULT || p.kind == SL_QUOTA_FACTOR_KEY) {
                uint32_t f;
                if (sl_quota_parse_factor(kv->value, kv->value_len, &f, &err))
                    prc = -EINVAL;
            } else {
                sl_quota q;
                if (sl_quota_parse_json(kv->value, kv->value_len, &q, &err))
                    prc = -EINVAL;
            }
        } else {
            err = "malformed key";
        }
        if (json) {
            json_t *x = json_pack("{s:s%,s:o}", "path", rel, rel_len, "value",
                                  value_json(kv->value, kv->value_len));
            if (prc)
                json_object_set_new(x, "ignored", json_string(err ? err : "invalid"));
            json_array_append_new(entries, x);
        } else {
            printf("%-40.*s %.*s%s%s%s\n", (int)rel_len, rel, (int)kv->value_len, kv->value,
                   prc ? "  (ignored: " : "", prc ? err : "", prc ? ")" : "");
        }
    }
    if (json)
        sl_cli_print_json(json_pack("{s:s,s:o}", "prefix", prefix, "entries", entries));
    sl_etcd_kvs_free(&r);
    free(prefix);
    return 0;
}

static int run(void *opts, const sl_cli_args *args)
{
    quota_args a = *(const quota_args *)opts;
    a.cmd = args->pos[0];
    a.key = args->npos > 1 ? args->pos[1] : NULL;
    bool is_set = !strcmp(a.cmd, "set"), is_get = !strcmp(a.cmd, "get");
    bool is_rm = !strcmp(a.cmd, "rm") || !strcmp(a.cmd, "delete");
    bool is_list = !strcmp(a.cmd, "list") || !strcmp(a.cmd, "ls");
    if (!is_set && !is_get && !is_rm && !is_list) {
        fprintf(stderr, "sluice quota: unknown command '%s'\n", a.cmd);
        sl_opt_help(&quota_table, stderr);
        return 2;
    }

    sl_etcd *e = NULL;
    const char *root;
    int erc = sl_cli_etcd("sluice quota", &a.storage, &e, &root);
    if (erc)
        return erc;
    int ret = 0;
    if (is_list) {
        if (a.key) {
            fprintf(stderr, "sluice quota: list takes no KEY\n");
            ret = 2;
        } else {
            ret = cmd_list(e, root, a.json);
        }
        goto out;
    }

    sl_quota_path p;
    char key[SL_QUOTA_MAX_KEY * 2 + 512];
    int kl;
    if (selected_path(&a, &p) || (kl = full_key(root, &p, key, sizeof key)) < 0) {
        ret = 2;
        goto out;
    }
    char err[256];
    if (is_set) {
        char val[128];
        int vl = set_value(&a, &p, val, sizeof val);
        if (vl < 0) {
            ret = 2;
            goto out;
        }
        int64_t rev = 0;
        if (sl_etcd_put(e, key, (size_t)kl, val, (size_t)vl, 0, &rev)) {
            fprintf(stderr, "sluice quota: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = SL_CLI_EXIT_UNREACHABLE;
            goto out;
        }
        if (a.json)
            sl_cli_print_json(json_pack("{s:s,s:o,s:I}", "key", key, "value",
                                        value_json(val, (size_t)vl), "revision",
                                        (json_int_t)rev));
        else
            printf("%s %s (revision %lld)\n", key, val, (long long)rev);
    } else if (is_get) {
        sl_etcd_kvs r;
        if (sl_etcd_range(e, key, (size_t)kl, false, 0, false, &r)) {
            fprintf(stderr, "sluice quota: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = SL_CLI_EXIT_UNREACHABLE;
            goto out;
        }
        if (r.n == 0) {
            fprintf(stderr, "sluice quota: %s is not set\n", key);
            if (a.json)
                sl_cli_print_json(json_pack("{s:s,s:n}", "key", key, "value"));
            ret = SL_CLI_EXIT_LIMITED;
        } else if (a.json) {
            sl_cli_print_json(json_pack("{s:s,s:o}", "key", key, "value",
                                        value_json(r.kvs[0].value, r.kvs[0].value_len)));
        } else {
            printf("%.*s\n", (int)r.kvs[0].value_len, r.kvs[0].value);
        }
        sl_etcd_kvs_free(&r);
    } else {
        int64_t deleted = 0;
        if (sl_etcd_delete(e, key, (size_t)kl, false, &deleted, NULL)) {
            fprintf(stderr, "sluice quota: etcd: %s\n", sl_etcd_last_error(e, err, sizeof err));
            ret = SL_CLI_EXIT_UNREACHABLE;
            goto out;
        }
        if (deleted == 0) {
            fprintf(stderr, "sluice quota: %s was not set\n", key);
            ret = SL_CLI_EXIT_LIMITED;
        } else {
            if (!a.json)
                printf("deleted %s\n", key);
        }
        if (a.json)
            sl_cli_print_json(json_pack("{s:s,s:b}", "key", key, "deleted", deleted != 0));
    }
out:
    sl_etcd_free(e);
    return ret;
}

const sl_cli_command sl_cmd_quota = {
    .name = "quota", .summary = "read and write Levee quotas and group sizes in etcd",
    .table = &quota_table, .opts_size = sizeof(quota_args), .minpos = 1, .maxpos = 2, .run = run};

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one skeleton of a sluice subcommand (sl_cli_command_run): its table of options through the
 * option engine (config/opt.h), the same machinery and value syntax as sluiced's, with --help
 * generated from the table and every usage error worded by the engine, then its body and its exit
 * code; and what several commands share: the etcd client of the commands that write the tree, the
 * token file of the commands that call an admin listener.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "cli/commands.h"
#include "ctlplane/etcd.h"

/* Fill target from defaults and argv[1..argc) by the table (flags_only), collecting up to maxpos
 * positional arguments. True to go on (sl_opt_free(t, target) when done); false when the command
 * must end now with *code: 0 after printing --help, 2 after a usage error (the engine's message
 * on stderr, prefixed with the table's program name). */
static bool parse(const sl_opt_table *t, void *target, int argc, char **argv, const char **pos,
                  size_t maxpos, size_t *npos, int *code)
{
    char err[512];
    int rc = sl_opt_defaults(t, target, err, sizeof err);
    if (rc == 0)
        rc = sl_opt_parse_args(t, target, argc, argv, pos, maxpos, npos, err, sizeof err);
    if (rc == 0)
        return true;
    if (rc == SL_OPT_HELP) {
        sl_opt_help(t, stdout);
        *code = 0;
    } else {
        fprintf(stderr, "%s: %s\n", t->program, err);
        *code = 2;
    }
    sl_opt_free(t, target);
    return false;
}

int sl_cli_etcd(const char *program, const sl_cli_storage *s, sl_etcd **e, const char **root)
{
    const char *addrs;
    sl_etcd_cli_defaults(&addrs, root);
    if (s->addrs)
        addrs = s->addrs;
    if (s->prefix)
        *root = s->prefix;
    int rc = sl_etcd_new_from_list(addrs, (long)(s->timeout_ns / 1000000), e);
    if (rc == 0)
        return 0;
    if (rc == -EINVAL)
        fprintf(stderr, "%s: bad --storage-addrs '%s'\n", program, addrs);
    else
        fprintf(stderr, "%s: cannot create the etcd client\n", program);
    return rc == -EINVAL ? 2 : 1;
}

int sl_cli_command_run(const sl_cli_command *c, int argc, char **argv)
{
    if (c->main)
        return c->main(argc, argv);
    void *opts = calloc(1, c->opts_size ? c->opts_size : 1);
    if (!opts) {
        fprintf(stderr, "%s: out of memory\n", c->table->program);
        return 1;
    }
    const char *pos[SL_CLI_MAX_POS];
    sl_cli_args args = {.pos = pos};
    size_t maxpos = c->maxpos < SL_CLI_MAX_POS ? c->maxpos : SL_CLI_MAX_POS;
    int code;
    if (!parse(c->table, opts, argc, argv, pos, maxpos, &args.npos, &code)) {
        if (code == 2 && c->usage_hint)
            fputs(c->usage_hint, stderr);
    } else {
        if (args.npos < c->minpos) {
            sl_opt_help(c->table, stderr);
            code = 2;
        } else {
            code = c->run(opts, &args);
        }
        sl_opt_free(c->table, opts);
    }
    free(opts);
    return code;
}

int sl_cli_read_token(const char *program, const char *path, char token[SL_BEARER_MAX_LEN + 1])
{
    char *buf = NULL, err[300];
    size_t len = 0, tl = 0;
    const char *tok, *why = "";
    int rc = sl_file_read(path, 4096, SL_FILE_REGULAR, &buf, &len, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: %s\n", program, err);
        return -1;
    }
    rc = sl_bearer_parse_secret(buf, len, &tok, &tl, &why);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", program, path, why);
    } else {
        memcpy(token, tok, tl);
        token[tl] = '\0';
    }
    memset(buf, 0, len); /* the secret does not outlive its use */
    free(buf);
    return rc ? -1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one way a sluice subcommand reads its flags: its table of options through the option
 * engine (config/opt.h), the same machinery and value syntax as sluiced's, with --help generated
 * from the table and every usage error worded by the engine; and the etcd client of the commands
 * that write the tree.
 */
#include <errno.h>
#include <stdio.h>

#include "cli/commands.h"
#include "ctlplane/etcd.h"

bool sl_cli_parse(const sl_opt_table *t, void *target, int argc, char **argv, const char **pos,
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

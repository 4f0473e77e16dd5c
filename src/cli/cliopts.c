/*
 * The one way a sluice subcommand reads its flags: its table of options through the option
 * engine (config/opt.h), the same machinery and value syntax as sluiced's, with --help generated
 * from the table and every usage error worded by the engine.
 */
#include <stdio.h>

#include "cli/commands.h"

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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the option engine's YAML reader (config/optsrc.c, sl_opt_load_yaml) over
 * sluiced's own table (config/config.c), what `sluiced --config FILE` reads: arbitrary bytes give
 * 0 or a negative errno with a message that fits, never a crash. A file that loads is dumped
 * (sl_opt_dump, "a YAML file that loads back to the same values"), and the dump must load into
 * fresh options and dump to the same text. A broken property traps; ASan catches leaks (every
 * string and list the table owns is freed with sl_config_free).
 */
#define _GNU_SOURCE /* open_memstream */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/opt.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *dump(const sl_opt_table *t, const sl_options *o, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    CHECK(f != NULL);
    sl_opt_dump(t, o, f);
    CHECK(fclose(f) == 0);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const sl_opt_table *t = sl_config_daemon_table();
    char err[512];
    sl_options o;
    memset(&o, 0, sizeof o);
    CHECK(sl_opt_defaults(t, &o, err, sizeof err) == 0);
    err[0] = 0;
    int rc = sl_opt_load_yaml(t, &o, (const char *)data, size, "fuzz.yaml", err, sizeof err);
    CHECK(rc <= 0);
    if (rc) {
        CHECK(err[0] != 0 && strlen(err) < sizeof err);
    } else {
        size_t n1, n2;
        char *d1 = dump(t, &o, &n1);
        sl_options back;
        memset(&back, 0, sizeof back);
        CHECK(sl_opt_defaults(t, &back, err, sizeof err) == 0);
        rc = sl_opt_load_yaml(t, &back, d1, n1, "dump.yaml", err, sizeof err);
        if (rc) {
            fprintf(stderr, "the dump does not load back: %s\n%s\n", err, d1);
            __builtin_trap();
        }
        char *d2 = dump(t, &back, &n2);
        if (n1 != n2 || memcmp(d1, d2, n1) != 0) {
            fprintf(stderr, "the dump loads back to other values:\n%s\n----\n%s\n", d1, d2);
            __builtin_trap();
        }
        free(d1);
        free(d2);
        sl_config_free(&back);
    }
    sl_config_free(&o);
    return 0;
}

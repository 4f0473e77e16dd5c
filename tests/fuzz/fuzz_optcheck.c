/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for what a start-up check reads first: the first line is an address for
 * base/hostport (sluiced's listen-addr, peers), the rest a YAML options file for sluiced's table,
 * loaded twice: as a start loads it (stop at the first problem) and as --check-config does (every
 * problem, refused keys and their values skipped, each value's origin recorded). Arbitrary bytes
 * never crash, leak or overrun; a parsed address prints back to itself; the check finds a problem
 * exactly when the plain load fails, and its first problem is the plain load's message.
 * A broken property traps, which libFuzzer reports as a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hostport.h"
#include "config/config.h"
#include "config/diag.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void address(const char *a)
{
    char host[SL_HOSTPORT_HOST_MAX], why[256], back[SL_HOSTPORT_HOST_MAX + 16];
    unsigned short port;
    bool zero = a[0] == '0'; /* both modes over the corpus */
    why[0] = '\0';
    if (sl_hostport_parse(a, zero, host, sizeof host, &port, why, sizeof why) != 0) {
        CHECK(why[0] != '\0'); /* a refusal always says why */
        return;
    }
    CHECK(host[0] != '\0' && (zero || port != 0));
    snprintf(back, sizeof back, strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
    char host2[SL_HOSTPORT_HOST_MAX];
    unsigned short port2;
    CHECK(sl_hostport_parse(back, zero, host2, sizeof host2, &port2, NULL, 0) == 0);
    CHECK(strcmp(host, host2) == 0 && port == port2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *nl = memchr(text, '\n', size);
    size_t alen = nl ? (size_t)(nl - text) : size;
    char *addr = strndup(text, alen);
    if (addr) {
        address(addr);
        free(addr);
    }
    const char *yaml = nl ? nl + 1 : text + size;
    size_t ylen = size - (size_t)(yaml - text);

    const sl_opt_table *t = sl_config_daemon_table();
    sl_options a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    char ea[1024], eb[1024];
    ea[0] = eb[0] = '\0';
    CHECK(sl_opt_defaults(t, &a, ea, sizeof ea) == 0);
    CHECK(sl_opt_defaults(t, &b, eb, sizeof eb) == 0);
    int ra = sl_opt_load_yaml(t, &a, yaml, ylen, "f.yaml", ea, sizeof ea);

    char(*origin)[SL_OPT_ORIGIN_MAX] = calloc(t->nopts, sizeof *origin);
    sl_diag d = {0};
    sl_opt_track tr = {.diag = &d, .origin = origin};
    eb[0] = '\0';
    int rb = sl_opt_load_yaml_ex(t, &b, yaml, ylen, "f.yaml", &tr, eb, sizeof eb);
    CHECK((ra == 0) == (rb == 0));
    CHECK((ra == 0) == (sl_diag_count(&d) == 0));
    if (ra != 0 && d.n > 0)
        CHECK(strcmp(d.lines[0], ea) == 0 && strcmp(eb, ea) == 0);
    for (size_t i = 0; i < d.n; i++)
        CHECK(d.lines[i][0] != '\0');
    if (origin) {
        char *out = NULL;
        size_t olen = 0;
        FILE *f = open_memstream(&out, &olen);
        if (f) {
            sl_opt_dump_origins(t, &b, (const char(*)[SL_OPT_ORIGIN_MAX])origin, f);
            fclose(f);
        }
        free(out);
    }
    sl_diag_free(&d);
    free(origin);
    sl_config_free(&a);
    sl_config_free(&b);
    free(text);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the envoyproxy/ratelimit configuration parser (config/rlsconf): arbitrary
 * bytes as one file. A file that loads is matched against descriptors made from its own bytes
 * (so keys and values of the file are hit) and must keep one domain; one that does not must say
 * why and add nothing.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config/rlsconf.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_rlsconf *c;
    char err[256] = "";
    CHECK(sl_rlsconf_new(&c) == 0);
    int rc = sl_rlsconf_add(c, "f.yaml", (const char *)data, size, err, sizeof err);
    if (rc) {
        CHECK(err[0] && sl_rlsconf_domains(c) == 0);
    } else {
        CHECK(sl_rlsconf_domains(c) == 1);
        /* split the input on newlines into up to 8 entries, "key: value" style */
        sl_rlsconf_entry e[8];
        const char *shared[8];
        size_t n = 0, start = 0;
        for (size_t i = 0; i <= size && n < 8; i++) {
            if (i == size || data[i] == '\n') {
                const char *line = (const char *)data + start;
                size_t len = i - start;
                const char *colon = memchr(line, ':', len);
                size_t kl = colon ? (size_t)(colon - line) : len;
                e[n++] = (sl_rlsconf_entry){.key = line, .key_len = kl,
                                            .value = colon ? colon + 1 : line + len,
                                            .value_len = colon ? len - kl - 1 : 0};
                start = i + 1;
            }
        }
        /* every domain the file could name is tried through the first line's value */
        const sl_rlsconf_domain *d = sl_rlsconf_domain_find(c, e[0].value, e[0].value_len);
        for (size_t k = 0; k <= n; k++)
            (void)sl_rlsconf_match(d, e, k, shared);
    }
    sl_rlsconf_unref(c);
    return 0;
}

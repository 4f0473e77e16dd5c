/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the certificate -> identity path: the input is a DER certificate, read by
 * tls/tls.c's identity code (sl_tls_cert_identity: the list a verified session's
 * sl_tls_peer_identity returns), and the identity is then used as the callers use it: looked up
 * among --client-tokens-file's "cert:" identities (auth/idents.c) and matched against a peer's
 * host (auth/addr.c sl_addr_names_host). Properties: the list is 1 + at most 16 names, each 1 to
 * 255 bytes of printable ASCII, ended by an empty one; a name found in the tokens file is exactly
 * that file's name. A broken property traps; ASan catches overruns and leaks.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/addr.h"
#include "auth/idents.h"
#include "tls/tls.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char tokens[] =
    "cert:good.test good *\n"
    "cert:client-a client-a *\n"
    "cert:admin admin *\n";
static sl_idents *ids;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ids) {
        char err[128];
        CHECK(sl_idents_parse(tokens, sizeof tokens - 1, &ids, err, sizeof err) == 0);
    }
    char *list = sl_tls_cert_identity(data, size);
    if (!list)
        return 0;
    size_t names = 0;
    const char *p = list;
    while (*p) {
        size_t n = strlen(p);
        CHECK(n >= 1 && n <= 255);
        for (size_t i = 0; i < n; i++)
            CHECK(p[i] >= 0x20 && p[i] <= 0x7e);
        names++;
        p += n + 1;
    }
    CHECK(names >= 1 && names <= 17);
    const sl_ident *id = sl_idents_find_cert(ids, list, strlen(list));
    if (id)
        CHECK(!strcmp(list, "good.test") || !strcmp(list, "client-a") || !strcmp(list, "admin"));
    (void)sl_addr_names_host(list, "127.0.0.1:1051");
    (void)sl_addr_names_host(list, "[::1]:1051");
    (void)sl_addr_names_host(list, "good.test:1051");
    free(list);
    return 0;
}

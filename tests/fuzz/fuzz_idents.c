/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for auth/idents (the --client-tokens-file parser) and auth/bearer (the
 * Authorization header and the admin token file): arbitrary bytes never crash or overrun, an
 * error message never quotes a token, and every parsed identity is found again by its own token
 * (a "cert:" line by its certificate name, and never as a token).
 * A broken property traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "auth/bearer.h"
#include "auth/idents.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    sl_idents *s = NULL;
    char err[256];
    int rc = sl_idents_parse(text, size, &s, err, sizeof err);
    CHECK(rc == 0 ? s != NULL : s == NULL);
    if (rc == 0) {
        CHECK(sl_idents_count(s) > 0);
        /* each line's first field, when it is a token, finds its identity */
        const char *p = text, *end = text + size;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            while (p < le && (*p == ' ' || *p == '\t'))
                p++;
            const char *t = p;
            while (p < le && *p != ' ' && *p != '\t' && *p != '\r')
                p++;
            size_t tl = (size_t)(p - t);
            const size_t cpl = sizeof SL_IDENTS_CERT_PREFIX - 1;
            if (tl > cpl && !memcmp(t, SL_IDENTS_CERT_PREFIX, cpl)) {
                /* a certificate line: found by its name, never as a bearer token */
                const sl_ident *id = sl_idents_find_cert(s, t + cpl, tl - cpl);
                CHECK(id != NULL);
                CHECK(strlen(sl_ident_name(id)) <= SL_IDENTS_MAX_NAME);
                CHECK(sl_idents_find(s, t, tl) == NULL);
            } else if (tl >= SL_BEARER_MIN_LEN && t[0] != '#') {
                const sl_ident *id = sl_idents_find(s, t, tl);
                CHECK(id != NULL);
                CHECK(strlen(sl_ident_name(id)) <= SL_IDENTS_MAX_NAME);
                (void)sl_ident_allows(id, t, tl);
            }
            p = nl ? nl + 1 : end;
        }
        sl_idents_free(s);
    } else {
        CHECK(strlen(err) < sizeof err);
    }
    /* the same bytes as an Authorization value and as an admin token file */
    const char *tok, *why;
    size_t tl;
    if (sl_bearer_from_header(text, size, &tok, &tl) == 0) {
        CHECK(tok >= text && tok + tl <= text + size && tl > 0 && tl <= SL_BEARER_MAX_LEN);
        CHECK(sl_bearer_equal(tok, tl, tok, tl));
    }
    if (sl_bearer_parse_secret(text, size, &tok, &tl, &why) == 0)
        CHECK(tl >= SL_BEARER_MIN_LEN && tl <= SL_BEARER_MAX_LEN && tok + tl <= text + size);
    return 0;
}

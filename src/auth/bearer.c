/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bearer tokens (see bearer.h): header and file parsing, constant-time comparison.
 */
#include "auth/bearer.h"

#include <errno.h>
#include <strings.h>

bool sl_bearer_char_ok(unsigned char c)
{
    return c > 0x20 && c < 0x7f;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The bytes of [p, p+n) without surrounding whitespace, all of them token bytes: 0 or -EINVAL. */
static int token_in(const char *p, size_t n, const char **tok, size_t *len)
{
    while (n && is_space(*p))
        p++, n--;
    while (n && is_space(p[n - 1]))
        n--;
    if (n == 0 || n > SL_BEARER_MAX_LEN)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!sl_bearer_char_ok((unsigned char)p[i]))
            return -EINVAL;
    *tok = p;
    *len = n;
    return 0;
}

int sl_bearer_from_header(const char *v, size_t n, const char **tok, size_t *len)
{
    static const char scheme[] = "bearer";
    const size_t sl = sizeof scheme - 1;
    if (!v || n <= sl || strncasecmp(v, scheme, sl) != 0 || (v[sl] != ' ' && v[sl] != '\t'))
        return -EINVAL;
    return token_in(v + sl, n - sl, tok, len);
}

int sl_bearer_parse_secret(const char *buf, size_t n, const char **tok, size_t *len,
                           const char **why)
{
    const char *t;
    size_t tl;
    if (token_in(buf, n, &t, &tl)) {
        *why = "expected one token of visible ASCII characters (at most 512 bytes)";
        return -EINVAL;
    }
    if (tl < SL_BEARER_MIN_LEN) {
        *why = "token shorter than 16 bytes";
        return -EINVAL;
    }
    *tok = t;
    *len = tl;
    return 0;
}

bool sl_bearer_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Walk all of b whatever a holds: the time tells at most b's length, never a prefix match. */
    volatile unsigned char diff = (unsigned char)(alen != blen);
    for (size_t i = 0; i < blen; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        diff |= (unsigned char)(x ^ (unsigned char)b[i]);
    }
    return diff == 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The lease id codec (see leaseid.h): percent-encoding of the resource with a conservative set of
 * characters that pass through headers and gRPC metadata untouched.
 */
#include "protect/leaseid.h"

#include "base/hex.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define ZERO_ID "0000000000000000"

static bool token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '~' || c == '/' || c == ':' || c == '@' || c == '+' || c == '-';
}

size_t sl_leaseid_format(char *out, size_t cap, uint64_t conc, uint64_t fleet, const char *res,
                         size_t rlen)
{
    char a[SL_CONC_ID_HEX + 1], b[SL_CONC_ID_HEX + 1];
    sl_conc_format_id(conc, a);
    sl_conc_format_id(fleet, b);
    int n = snprintf(out, cap, "%s.%s", a, b);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (!conc || !res || !rlen || len >= cap)
        return len;
    size_t limit = cap - 1 < SL_LEASEID_MAX ? cap - 1 : SL_LEASEID_MAX;
    size_t need = len + 1;
    for (size_t i = 0; i < rlen; i++)
        need += token_char((unsigned char)res[i]) ? 1 : 3;
    if (need > limit)
        return len; /* too long to carry: /release needs X-Resource */
    out[len++] = '.';
    for (size_t i = 0; i < rlen; i++) {
        unsigned char c = (unsigned char)res[i];
        if (token_char(c)) {
            out[len++] = (char)c;
        } else {
            out[len++] = '%';
            sl_hex_put(out + len, c, true);
            len += 2;
        }
    }
    out[len] = 0;
    return len;
}

int sl_leaseid_parse_one(const char *s, uint64_t *id)
{
    if (!memcmp(s, ZERO_ID, SL_CONC_ID_HEX)) {
        *id = 0;
        return 0;
    }
    return sl_conc_parse_id(s, SL_CONC_ID_HEX, id);
}

int sl_leaseid_parse(const char *s, size_t n, uint64_t *conc, uint64_t *fleet, char *resbuf,
                     size_t rescap, size_t *rlen)
{
    *conc = *fleet = 0;
    *rlen = 0;
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n < SL_CONC_ID_HEX || sl_leaseid_parse_one(s, conc))
        return -EINVAL;
    if (n == SL_CONC_ID_HEX)
        return *conc ? 0 : -EINVAL;
    if (n < 2 * SL_CONC_ID_HEX + 1 || s[SL_CONC_ID_HEX] != '.' ||
        sl_leaseid_parse_one(s + SL_CONC_ID_HEX + 1, fleet))
        return -EINVAL;
    if (!*conc && !*fleet)
        return -EINVAL;
    size_t off = 2 * SL_CONC_ID_HEX + 1;
    if (n == off)
        return 0;
    if (s[off] != '.' || n == off + 1 || !*conc)
        return -EINVAL;
    size_t o = 0;
    for (size_t i = off + 1; i < n; i++) {
        char c = s[i];
        if (c == '%') {
            int v = i + 2 < n ? sl_hex_byte(s + i + 1) : -1;
            if (v < 0)
                return -EINVAL;
            c = (char)v;
            i += 2;
        } else if (!token_char((unsigned char)c)) {
            return -EINVAL;
        }
        if (o >= rescap)
            return -EINVAL;
        resbuf[o++] = c;
    }
    *rlen = o;
    return 0;
}

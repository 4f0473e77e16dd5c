/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-span UTF-8 validation over sl_utf8_seq (see utf8.h). */
#include "base/utf8.h"

size_t sl_utf8_valid_prefix(const void *s, size_t n)
{
    const uint8_t *p = s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs are the common case: skip them a byte at a time without the call */
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = sl_utf8_seq(p + i, n - i);
        if (!k)
            break;
        i += k;
    }
    return i;
}

bool sl_utf8_valid(const void *s, size_t n)
{
    return sl_utf8_valid_prefix(s, n) == n;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_utf8: strict UTF-8 validation (RFC 3629): no overlong forms, no surrogates (U+D800..DFFF),
 * nothing above U+10FFFF. The JSON codecs and the metrics label sanitiser share it. The
 * per-sequence step is static inline because the JSON fast path calls it for every non-ASCII byte
 * run.
 */
#ifndef SLUICE_BASE_UTF8_H
#define SLUICE_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the valid UTF-8 sequence that starts at s[0], or 0 when it is invalid or
 * truncated (it would run past s[n-1]). n must be at least 1. */
static inline size_t sl_utf8_seq(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))
            return 0; /* overlong, or a surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
            return 0; /* overlong, or above U+10FFFF */
        return 4;
    }
    return 0;
}

/* True when s[0..n) is entirely valid UTF-8 (an empty span is). */
bool sl_utf8_valid(const void *s, size_t n);

/* Length of the longest valid UTF-8 prefix of s[0..n) (n when all of it is valid). */
size_t sl_utf8_valid_prefix(const void *s, size_t n);

#endif

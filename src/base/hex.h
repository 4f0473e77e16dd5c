/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_hex: hexadecimal digits, both ways. Digit values for the JSON \u escapes, grpc-message and
 * lease-token percent-decoding; digit characters for the matching encoders. Everything is static
 * inline: the callers sit in codec loops.
 */
#ifndef SLUICE_BASE_HEX_H
#define SLUICE_BASE_HEX_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Value 0..15 of the hex digit c (either case), or -1 when c is not one. */
static inline int sl_hex_val(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte 0..255 spelt by the two hex digits p[0] p[1], or -1 when either is not a digit. */
static inline int sl_hex_byte(const char *p)
{
    int h = sl_hex_val((unsigned char)p[0]), l = sl_hex_val((unsigned char)p[1]);
    return h < 0 || l < 0 ? -1 : h << 4 | l;
}

/* Parse exactly n (1..16) hex digits at p into *out. 0, or -EINVAL (a non-digit, or a bad n). */
static inline int sl_hex_parse(const char *p, size_t n, uint64_t *out)
{
    if (n == 0 || n > 16)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int h = sl_hex_val((unsigned char)p[i]);
        if (h < 0)
            return -EINVAL;
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 0;
}

/* The hex digit for v & 15, lower or upper case. */
static inline char sl_hex_digit(unsigned v, bool upper)
{
    return (upper ? "0123456789ABCDEF" : "0123456789abcdef")[v & 15];
}

/* Write byte b as two hex digits at out (no NUL). */
static inline void sl_hex_put(char out[2], uint8_t b, bool upper)
{
    out[0] = sl_hex_digit(b >> 4, upper);
    out[1] = sl_hex_digit(b, upper);
}

/* Write v as exactly `digits` hex digits (1..16; anything else means 16), most significant first,
 * then a NUL; higher digits of v that do not fit are dropped. Returns the number of digits. */
size_t sl_hex_format(uint64_t v, unsigned digits, bool upper, char *out);

#endif

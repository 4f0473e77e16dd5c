/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Saturating and floor arithmetic for the algorithms. Every int64 a request carries may be anything
 * from INT64_MIN to INT64_MAX, and the algorithms must answer without signed overflow (undefined
 * behaviour in C, silent wrap-around in Go): sums and products clamp at the int64 range instead,
 * which keeps every comparison meaningful ("never expires", "never refills") where a wrapped value
 * would invert it. Header-only: these sit on the decision path.
 */
#ifndef SLUICE_CORE_SATMATH_H
#define SLUICE_CORE_SATMATH_H

#include <math.h>
#include <stdint.h>

typedef __int128 sl_i128;

static inline int64_t sl_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static inline int64_t sl_sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static inline int64_t sl_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return ((a < 0) != (b < 0)) ? INT64_MIN : INT64_MAX;
    return r;
}

static inline int64_t sl_sat_i128(sl_i128 v)
{
    if (v > (sl_i128)INT64_MAX)
        return INT64_MAX;
    if (v < (sl_i128)INT64_MIN)
        return INT64_MIN;
    return (int64_t)v;
}

/* Floor division and its remainder (0 <= r < b) for b > 0. */
static inline int64_t sl_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b) < 0)
        q--;
    return q;
}

static inline sl_i128 sl_floor_div128(sl_i128 a, sl_i128 b)
{
    sl_i128 q = a / b;
    if ((a % b) < 0)
        q--;
    return q;
}

static inline sl_i128 sl_ceil_div128(sl_i128 a, sl_i128 b)
{
    return -sl_floor_div128(-a, b);
}

/* double -> int64 truncating toward zero like Go's int64(x), but saturating where Go's conversion is
 * implementation-defined (out of range: INT64_MIN on amd64) and 0 for NaN. */
static inline int64_t sl_f2i(double x)
{
    if (isnan(x))
        return 0;
    if (x >= 9223372036854775808.0)
        return INT64_MAX;
    if (x <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)x;
}

/* Earliest decision time the window algorithms use: 2^62 ms (146 million years) before 1970. Any
 * earlier t is clamped to it, which keeps floor(t / w) * w inside int64 for every w. */
#define SL_TIME_MIN (-(INT64_C(1) << 62))

static inline int64_t sl_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t sl_min64(int64_t a, int64_t b) { return a < b ? a : b; }

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option engine's value syntax (config/opt.h, "Value parsers"): booleans, integers, finite
 * numbers, durations (500us, 1m30s; a bare integer is milliseconds) and sizes (16KiB, 1MB; a bare
 * integer is bytes), and the shortest exact spelling of a duration or a size for --help and the
 * effective-config dump. Pure functions over strings; the engine (config/opt.c) stores the values.
 */
#include "config/opt.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define NS_PER_MS INT64_C(1000000)

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int sl_opt_parse_bool(const char *s, bool *b)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *b = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *b = false;
            return 0;
        }
    }
    return -EINVAL;
}

int sl_opt_parse_int(const char *s, int64_t *v)
{
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return -EINVAL;
    uint64_t acc = 0;
    for (; is_digit(*p); p++) {
        if (acc > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        acc = acc * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '\0')
        return -EINVAL;
    if (neg ? acc > (uint64_t)INT64_MAX + 1 : acc > (uint64_t)INT64_MAX)
        return -ERANGE;
    *v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 0;
}

int sl_opt_parse_double(const char *s, double *v)
{
    if (s == NULL || *s == '\0' || isspace((unsigned char)*s))
        return -EINVAL;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (*end != '\0' || !isfinite(d))
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *v = d;
    return 0;
}

int sl_opt_parse_duration(const char *s, int64_t *ns)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {
        {"ns", 1},           {"us", 1000},           {"\xc2\xb5s", 1000}, /* µs */
        {"ms", NS_PER_MS},   {"s", 1000 * NS_PER_MS}, {"m", 60000 * NS_PER_MS},
        {"h", 3600000 * NS_PER_MS}, {"d", 86400000 * NS_PER_MS},
    };
    static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000,
                                     100000000, 1000000000};
    if (s == NULL || *s == '\0')
        return -EINVAL;
    const char *p = s;
    while (is_digit(*p))
        p++;
    if (*p == '\0') { /* a bare integer: milliseconds */
        int64_t ms;
        int rc = sl_opt_parse_int(s, &ms);
        if (rc != 0)
            return rc;
        if (ms > INT64_MAX / NS_PER_MS)
            return -ERANGE;
        *ns = ms * NS_PER_MS;
        return 0;
    }
    unsigned __int128 total = 0;
    p = s;
    while (*p) {
        uint64_t ip = 0, frac = 0;
        size_t fdig = 0;
        bool any = false;
        for (; is_digit(*p); p++, any = true) {
            if (ip > (UINT64_MAX - 9) / 10)
                return -ERANGE;
            ip = ip * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.') {
            for (p++; is_digit(*p); p++, any = true) {
                if (fdig < 9) { /* finer than a nanosecond says nothing */
                    frac = frac * 10 + (uint64_t)(*p - '0');
                    fdig++;
                }
            }
        }
        if (!any)
            return -EINVAL;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t n = strlen(units[i].name);
            if (n > best_len && strncmp(p, units[i].name, n) == 0) {
                best = i;
                best_len = n;
            }
        }
        if (best_len == 0)
            return -EINVAL;
        p += best_len;
        unsigned __int128 u = (unsigned __int128)units[best].ns;
        total += (unsigned __int128)ip * u + (unsigned __int128)frac * u / pow10[fdig];
        if (total > (unsigned __int128)INT64_MAX)
            return -ERANGE;
    }
    *ns = (int64_t)total;
    return 0;
}

int sl_opt_parse_size(const char *s, uint64_t *bytes)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {
        {"", 1},
        {"b", 1},
        {"k", 1ull << 10},
        {"kib", 1ull << 10},
        {"kb", 1000ull},
        {"m", 1ull << 20},
        {"mib", 1ull << 20},
        {"mb", 1000000ull},
        {"g", 1ull << 30},
        {"gib", 1ull << 30},
        {"gb", 1000000000ull},
        {"t", 1ull << 40},
        {"tib", 1ull << 40},
        {"tb", 1000000000000ull},
    };
    if (s == NULL || !is_digit(*s))
        return -EINVAL;
    uint64_t v = 0;
    const char *p = s;
    for (; is_digit(*p); p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -ERANGE;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(p, units[i].name) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return -ERANGE;
            *bytes = v * units[i].mult;
            return 0;
        }
    }
    return -EINVAL;
}

void sl_opt_format_duration(int64_t ns, char *buf, size_t size)
{
    static const struct {
        const char *name;
        int64_t ns;
    } units[] = {{"h", 3600000 * NS_PER_MS}, {"m", 60000 * NS_PER_MS}, {"s", 1000 * NS_PER_MS},
                 {"ms", NS_PER_MS},          {"us", 1000},             {"ns", 1}};
    if (ns == 0) {
        snprintf(buf, size, "0s");
        return;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (ns % units[i].ns == 0) {
            snprintf(buf, size, "%lld%s", (long long)(ns / units[i].ns), units[i].name);
            return;
        }
    }
}

void sl_opt_format_size(uint64_t bytes, char *buf, size_t size)
{
    static const char *const names[] = {"TiB", "GiB", "MiB", "KiB"};
    for (int i = 0; i < 4; i++) {
        uint64_t m = 1ull << (10 * (4 - i));
        if (bytes != 0 && bytes % m == 0) {
            snprintf(buf, size, "%llu%s", (unsigned long long)(bytes / m), names[i]);
            return;
        }
    }
    snprintf(buf, size, "%llu", (unsigned long long)bytes);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* protojson conversions too large to inline (see protojson.h). */
#include "json/protojson.h"

#include <stdlib.h>

#include "gubernator.pb-c.h"

/* Is s[0..n) a JSON number (the grammar protojson also accepts inside quotes)? *is_plain_int: it
 * has neither a fraction nor an exponent. */
static bool text_is_json_number(const char *s, size_t n, bool *is_plain_int)
{
    size_t i = 0;
    *is_plain_int = true;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n)
        return false;
    if (s[i] == '0') {
        i++;
    } else if (s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    } else {
        return false;
    }
    if (i < n && s[i] == '.') {
        *is_plain_int = false;
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return false;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *is_plain_int = false;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return false;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    return i == n;
}

bool sl_protojson_text_to_int(const char *s, size_t n, bool is_unsigned, int64_t *out)
{
    bool plain;
    if (!text_is_json_number(s, n, &plain))
        return false;
    if (!plain) {
        char tmp[128];
        if (n >= sizeof tmp)
            return false;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        return sl_protojson_double_to_int(strtod(tmp, NULL), is_unsigned, out);
    }
    bool neg = s[0] == '-';
    if (neg && is_unsigned)
        return s[1] == '0' && n == 2 ? (*out = 0, true) : false;
    uint64_t limit = is_unsigned ? UINT64_MAX
                     : neg       ? (uint64_t)INT64_MAX + 1
                                 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    for (size_t i = neg ? 1 : 0; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return true;
}

bool sl_protojson_enum_from_name(const ProtobufCEnumDescriptor *ed, const char *s, size_t n,
                                 int *out)
{
    const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(ed, s);
    if (ev) {
        *out = ev->value;
        return true;
    }
    if (ed != &pb__gubernator__behavior__descriptor || !memchr(s, '|', n))
        return false;
    int acc = 0;
    size_t i = 0;
    while (i <= n) {
        size_t j = i;
        while (j < n && s[j] != '|')
            j++;
        /* trim spaces around each name */
        size_t a = i, b = j;
        while (a < b && s[a] == ' ')
            a++;
        while (b > a && s[b - 1] == ' ')
            b--;
        char name[64];
        if (b == a || b - a >= sizeof name)
            return false;
        memcpy(name, s + a, b - a);
        name[b - a] = 0;
        ev = protobuf_c_enum_descriptor_get_value_by_name(ed, name);
        if (!ev)
            return false;
        acc |= ev->value;
        i = j + 1;
    }
    *out = acc;
    return true;
}

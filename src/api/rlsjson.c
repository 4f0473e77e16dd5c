/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /json (see rlsjson.h). The request is rebuilt as protobuf with Envoy's field numbers (the
 * ones api/rls.c reads) and the answer read back from the protobuf api/rls.c wrote, so that the
 * JSON dialect cannot drift from the gRPC one: one parser, one planner, one encoder.
 */
#include "api/rlsjson.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wire/pbwire.h"

static const char *const units[] = {"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                    "DAY",     "MONTH",  "YEAR",   "WEEK"};
#define N_UNITS (sizeof units / sizeof units[0])
static const char *const codes[] = {"UNKNOWN", "OK", "OVER_LIMIT"};

/* ---- JSON -> protobuf ---------------------------------------------------------------------- */

static int put_varint(sl_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    return sl_buf_append(b, tmp, (size_t)(sl_pb_put_varint(tmp, v) - tmp));
}

static int put_varint_field(sl_buf *b, uint8_t key, uint64_t v)
{
    int rc = sl_buf_append(b, &key, 1);
    return rc ? rc : put_varint(b, v);
}

static int put_bytes_field(sl_buf *b, uint8_t key, const void *p, size_t n)
{
    int rc = sl_buf_append(b, &key, 1);
    if (!rc)
        rc = put_varint(b, n);
    return rc ? rc : sl_buf_append(b, p, n);
}

/* The member under its lowerCamelCase or its proto name; NULL when absent or null. */
static json_t *field(json_t *o, const char *camel, const char *proto)
{
    json_t *v = json_object_get(o, camel);
    if (!v && proto)
        v = json_object_get(o, proto);
    return v && !json_is_null(v) ? v : NULL;
}

/* Whether every member of o is one of the names (NULL-terminated), as protojson refuses unknown
 * fields. */
static bool only(json_t *o, const char *const *names)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        bool ok = false;
        for (size_t i = 0; names[i] && !ok; i++)
            ok = !strcmp(k, names[i]);
        if (!ok)
            return false;
    }
    return true;
}

/* An unsigned integer as protojson writes one: a number, or a decimal string. */
static bool uint_of(json_t *v, uint64_t max, uint64_t *out)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || (uint64_t)i > max)
            return false;
        *out = (uint64_t)i;
        return true;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        if (!*s || *s == '-' || *s == '+')
            return false;
        errno = 0;
        unsigned long long u = strtoull(s, &end, 10);
        if (errno || *end || u > max)
            return false;
        *out = u;
        return true;
    }
    return false;
}

#define BAD(msg)                                                                                   \
    do {                                                                                           \
        *err = msg;                                                                                \
        rc = -EINVAL;                                                                              \
        goto out;                                                                                  \
    } while (0)

static int text_field(sl_buf *b, uint8_t key, json_t *v, const char **err, const char *what)
{
    if (!v)
        return 0;
    if (!json_is_string(v)) {
        *err = what;
        return -EINVAL;
    }
    size_t n = json_string_length(v);
    return n ? put_bytes_field(b, key, json_string_value(v), n) : 0;
}

static int entry_pb(json_t *e, sl_buf *out, const char **err)
{
    static const char *const names[] = {"key", "value", NULL};
    if (!json_is_object(e) || !only(e, names)) {
        *err = "a descriptor entry is an object {key, value}";
        return -EINVAL;
    }
    int rc = text_field(out, 0x0a, field(e, "key", NULL), err, "entry key is not a string");
    return rc ? rc : text_field(out, 0x12, field(e, "value", NULL), err, "entry value is not a string");
}

static int limit_pb(json_t *l, sl_buf *out, const char **err)
{
    static const char *const names[] = {"requestsPerUnit", "requests_per_unit", "unit", NULL};
    uint64_t rpu = 0, unit = 0;
    json_t *v;
    if (!json_is_object(l) || !only(l, names)) {
        *err = "limit is an object {requestsPerUnit, unit}";
        return -EINVAL;
    }
    if ((v = field(l, "requestsPerUnit", "requests_per_unit")) && !uint_of(v, UINT32_MAX, &rpu)) {
        *err = "limit.requestsPerUnit is not a uint32";
        return -EINVAL;
    }
    if ((v = field(l, "unit", NULL))) {
        bool ok = false;
        if (json_is_string(v)) {
            for (size_t u = 0; u < N_UNITS && !ok; u++)
                if (!strcmp(json_string_value(v), units[u])) {
                    unit = u;
                    ok = true;
                }
        } else {
            ok = uint_of(v, INT32_MAX, &unit);
        }
        if (!ok) {
            *err = "limit.unit is not a unit (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH, YEAR)";
            return -EINVAL;
        }
    }
    int rc = rpu ? put_varint_field(out, 0x08, rpu) : 0;
    return rc || !unit ? rc : put_varint_field(out, 0x10, unit);
}

static int descriptor_pb(json_t *d, sl_buf *out, const char **err)
{
    static const char *const names[] = {"entries", "limit", "hitsAddend", "hits_addend", NULL};
    sl_buf sub;
    sl_buf_init(&sub, 0);
    int rc = 0;
    json_t *v;
    if (!json_is_object(d) || !only(d, names))
        BAD("a descriptor is an object {entries, limit, hitsAddend}");
    if ((v = field(d, "entries", NULL))) {
        size_t i;
        json_t *e;
        if (!json_is_array(v))
            BAD("descriptor entries is not a list");
        json_array_foreach(v, i, e) {
            sl_buf_reset(&sub);
            if ((rc = entry_pb(e, &sub, err)) || (rc = put_bytes_field(out, 0x0a, sub.data, sub.len)))
                goto out;
        }
    }
    if ((v = field(d, "limit", NULL))) {
        sl_buf_reset(&sub);
        if ((rc = limit_pb(v, &sub, err)) || (rc = put_bytes_field(out, 0x12, sub.data, sub.len)))
            goto out;
    }
    if ((v = field(d, "hitsAddend", "hits_addend"))) {
        uint64_t h;
        if (!uint_of(v, UINT64_MAX, &h))
            BAD("descriptor hitsAddend is not a uint64");
        sl_buf_reset(&sub);
        if ((h && (rc = put_varint_field(&sub, 0x08, h))) ||
            (rc = put_bytes_field(out, 0x1a, sub.data, sub.len)))
            goto out;
    }
out:
    sl_buf_free(&sub);
    return rc;
}

int sl_rlsjson_request(const char *json, size_t len, sl_buf *out, const char **err)
{
    static const char *const names[] = {"domain", "descriptors", "hitsAddend", "hits_addend", NULL};
    *err = NULL;
    if (sl_buf_reserve(out, 1)) { /* never a NULL message, even an empty one */
        *err = "out of memory";
        return -ENOMEM;
    }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    sl_buf sub;
    sl_buf_init(&sub, 0);
    int rc = 0;
    json_t *v;
    if (!root)
        BAD("the body is not JSON");
    if (!json_is_object(root) || !only(root, names))
        BAD("the body is a RateLimitRequest {domain, descriptors, hitsAddend}");
    if ((rc = text_field(out, 0x0a, field(root, "domain", NULL), err, "domain is not a string")))
        goto out;
    if ((v = field(root, "descriptors", NULL))) {
        size_t i;
        json_t *d;
        if (!json_is_array(v))
            BAD("descriptors is not a list");
        json_array_foreach(v, i, d) {
            sl_buf_reset(&sub);
            if ((rc = descriptor_pb(d, &sub, err)) ||
                (rc = put_bytes_field(out, 0x12, sub.data, sub.len)))
                goto out;
        }
    }
    if ((v = field(root, "hitsAddend", "hits_addend"))) {
        uint64_t h;
        if (!uint_of(v, UINT32_MAX, &h))
            BAD("hitsAddend is not a uint32");
        if (h && (rc = put_varint_field(out, 0x18, h)))
            goto out;
    }
out:
    if (rc == -ENOMEM || rc == -EMSGSIZE) {
        *err = "out of memory";
        rc = -ENOMEM;
    }
    sl_buf_free(&sub);
    json_decref(root);
    return rc;
}

/* ---- protobuf -> JSON ---------------------------------------------------------------------- */

static json_t *name_of(const char *const *names, size_t n, uint64_t v)
{
    return v < n ? json_string(names[v]) : json_integer((json_int_t)v);
}

static int set_new(json_t *o, const char *k, json_t *v)
{
    return v && !json_object_set_new(o, k, v) ? 0 : -ENOMEM;
}

/* Duration as protojson writes it: seconds, a fraction of 3, 6 or 9 digits, "s". */
static json_t *duration_json(sl_pb_rd r)
{
    uint64_t sec = 0, nanos = 0, v;
    uint32_t f;
    unsigned wt;
    while (r.p < r.end) {
        if (!sl_pb_key(&r, &f, &wt) || wt != SL_PB_VARINT || !sl_pb_varint(&r, &v))
            return NULL;
        if (f == 1)
            sec = v;
        else if (f == 2)
            nanos = v % 1000000000;
    }
    char s[48];
    if (!nanos)
        snprintf(s, sizeof s, "%" PRIu64 "s", sec);
    else if (nanos % 1000000 == 0)
        snprintf(s, sizeof s, "%" PRIu64 ".%03" PRIu64 "s", sec, nanos / 1000000);
    else if (nanos % 1000 == 0)
        snprintf(s, sizeof s, "%" PRIu64 ".%06" PRIu64 "s", sec, nanos / 1000);
    else
        snprintf(s, sizeof s, "%" PRIu64 ".%09" PRIu64 "s", sec, nanos);
    return json_string(s);
}

/* A message of varint and length-delimited fields: fields 1..3 as (key, name, kind) where kind is
 * 'u' uint, 'e' unit enum, 'c' code enum, 's' string, 'w' a wrapped uint (field 1 inside). */
typedef struct spec {
    uint32_t field;
    const char *name;
    char kind;
} spec;

static json_t *message_json(sl_pb_rd r, const spec *specs, size_t n)
{
    json_t *o = json_object();
    uint32_t f;
    unsigned wt;
    while (o && r.p < r.end) {
        if (!sl_pb_key(&r, &f, &wt))
            goto bad;
        const spec *s = NULL;
        for (size_t i = 0; i < n && !s; i++)
            if (specs[i].field == f)
                s = &specs[i];
        uint64_t v;
        sl_pb_rd sub;
        if (!s) {
            if (!sl_pb_skip(&r, wt))
                goto bad;
            continue;
        }
        json_t *val = NULL;
        if (s->kind == 's' || s->kind == 'w') {
            if (wt != SL_PB_LEN || !sl_pb_bytes(&r, &sub))
                goto bad;
            if (s->kind == 's') {
                val = json_stringn((const char *)sub.p, (size_t)(sub.end - sub.p));
            } else {
                uint32_t f2;
                unsigned wt2;
                v = 0;
                while (sub.p < sub.end)
                    if (!sl_pb_key(&sub, &f2, &wt2) || wt2 != SL_PB_VARINT ||
                        !sl_pb_varint(&sub, &v))
                        goto bad;
                val = json_integer((json_int_t)v);
            }
        } else {
            if (wt != SL_PB_VARINT || !sl_pb_varint(&r, &v))
                goto bad;
            val = s->kind == 'e'   ? name_of(units, N_UNITS, v)
                  : s->kind == 'c' ? name_of(codes, 3, v)
                                   : json_integer((json_int_t)v);
        }
        if (set_new(o, s->name, val))
            goto bad;
    }
    return o;
bad:
    json_decref(o);
    return NULL;
}

static json_t *status_json(sl_pb_rd r)
{
    static const spec top[] = {{1, "code", 'c'}, {3, "limitRemaining", 'u'}};
    static const spec limit[] = {{1, "requestsPerUnit", 'u'}, {2, "unit", 'e'},
                                 {3, "name", 's'}, {4, "unitMultiplier", 'w'}};
    json_t *o = message_json(r, top, 2);
    uint32_t f;
    unsigned wt;
    while (o && r.p < r.end) {
        sl_pb_rd sub;
        if (!sl_pb_key(&r, &f, &wt))
            goto bad;
        if ((f == 2 || f == 4) && wt == SL_PB_LEN) {
            if (!sl_pb_bytes(&r, &sub))
                goto bad;
            json_t *v = f == 2 ? message_json(sub, limit, 4) : duration_json(sub);
            if (set_new(o, f == 2 ? "currentLimit" : "durationUntilReset", v))
                goto bad;
        } else if (!sl_pb_skip(&r, wt)) {
            goto bad;
        }
    }
    return o;
bad:
    json_decref(o);
    return NULL;
}

/* google.protobuf.Struct / Value / ListValue, as protojson writes them: an object, a value, an
 * array. depth bounds the nesting. */
static json_t *value_json(sl_pb_rd r, int depth);

static json_t *struct_json(sl_pb_rd r, int depth)
{
    json_t *o = json_object();
    uint32_t f;
    unsigned wt;
    while (o && r.p < r.end) {
        sl_pb_rd e, k = {NULL, NULL}, v = {NULL, NULL};
        if (!sl_pb_key(&r, &f, &wt))
            goto bad;
        if (f != 1 || wt != SL_PB_LEN) {
            if (!sl_pb_skip(&r, wt))
                goto bad;
            continue;
        }
        if (!sl_pb_bytes(&r, &e))
            goto bad;
        while (e.p < e.end) {
            sl_pb_rd x;
            if (!sl_pb_key(&e, &f, &wt) || wt != SL_PB_LEN || !sl_pb_bytes(&e, &x))
                goto bad;
            if (f == 1)
                k = x;
            else if (f == 2)
                v = x;
        }
        json_t *val = v.p ? value_json(v, depth + 1) : json_null();
        char key[256];
        size_t kl = k.p ? (size_t)(k.end - k.p) : 0;
        if (!val || kl >= sizeof key) {
            json_decref(val);
            goto bad;
        }
        if (kl)
            memcpy(key, k.p, kl);
        key[kl] = 0;
        if (json_object_set_new(o, key, val))
            goto bad;
    }
    return o;
bad:
    json_decref(o);
    return NULL;
}

static json_t *value_json(sl_pb_rd r, int depth)
{
    json_t *val = NULL;
    uint32_t f;
    unsigned wt;
    if (depth > 16)
        return NULL;
    while (r.p < r.end) {
        sl_pb_rd sub;
        uint64_t u;
        json_decref(val);
        val = NULL;
        if (!sl_pb_key(&r, &f, &wt))
            return NULL;
        if (f == 2 && wt == SL_PB_I64) {
            if (r.end - r.p < 8)
                return NULL;
            u = 0;
            for (int i = 0; i < 8; i++)
                u |= (uint64_t)r.p[i] << (8 * i);
            r.p += 8;
            double d;
            memcpy(&d, &u, sizeof d);
            val = isfinite(d) ? json_real(d) : json_null();
        } else if ((f == 1 || f == 4) && wt == SL_PB_VARINT) {
            if (!sl_pb_varint(&r, &u))
                return NULL;
            val = f == 1 ? json_null() : json_boolean(u != 0);
        } else if ((f == 3 || f == 5 || f == 6) && wt == SL_PB_LEN) {
            if (!sl_pb_bytes(&r, &sub))
                return NULL;
            if (f == 3) {
                val = json_stringn((const char *)sub.p, (size_t)(sub.end - sub.p));
            } else if (f == 5) {
                val = struct_json(sub, depth + 1);
            } else {
                val = json_array();
                while (val && sub.p < sub.end) {
                    sl_pb_rd x;
                    json_t *e;
                    if (!sl_pb_key(&sub, &f, &wt) || f != 1 || wt != SL_PB_LEN ||
                        !sl_pb_bytes(&sub, &x) || !(e = value_json(x, depth + 1)) ||
                        json_array_append_new(val, e)) {
                        json_decref(val);
                        return NULL;
                    }
                }
            }
        } else if (!sl_pb_skip(&r, wt)) {
            return NULL;
        } else {
            continue;
        }
        if (!val)
            return NULL;
    }
    return val ? val : json_null();
}

int sl_rlsjson_response(const uint8_t *pb, size_t len, sl_buf *out, int *overall)
{
    static const spec header[] = {{1, "key", 's'}, {2, "value", 's'}};
    json_t *o = json_object(), *statuses = json_array(), *headers = json_array();
    sl_pb_rd r = {pb, pb + len};
    uint32_t f;
    unsigned wt;
    int rc = -EINVAL;
    *overall = 0;
    if (!o || !statuses || !headers) {
        rc = -ENOMEM;
        goto out;
    }
    while (r.p < r.end) {
        uint64_t v;
        sl_pb_rd sub;
        if (!sl_pb_key(&r, &f, &wt))
            goto out;
        if (f == 1 && wt == SL_PB_VARINT) {
            if (!sl_pb_varint(&r, &v))
                goto out;
            *overall = v <= 2 ? (int)v : 0;
        } else if ((f == 2 || f == 3) && wt == SL_PB_LEN) {
            if (!sl_pb_bytes(&r, &sub))
                goto out;
            json_t *e = f == 2 ? status_json(sub) : message_json(sub, header, 2);
            if (!e || json_array_append_new(f == 2 ? statuses : headers, e))
                goto out;
        } else if (f == 6 && wt == SL_PB_LEN) { /* dynamic_metadata */
            json_t *m;
            if (!sl_pb_bytes(&r, &sub) || !(m = struct_json(sub, 0)) ||
                json_object_set_new(o, "dynamicMetadata", m))
                goto out;
        } else if (!sl_pb_skip(&r, wt)) {
            goto out;
        }
    }
    if ((*overall && set_new(o, "overallCode", name_of(codes, 3, (uint64_t)*overall))) ||
        (json_array_size(statuses) && json_object_set(o, "statuses", statuses)) ||
        (json_array_size(headers) && json_object_set(o, "responseHeadersToAdd", headers))) {
        rc = -ENOMEM;
        goto out;
    }
    char *s = json_dumps(o, JSON_COMPACT);
    rc = !s ? -ENOMEM : sl_buf_append_str(out, s) ? -ENOMEM : 0;
    free(s);
out:
    json_decref(statuses);
    json_decref(headers);
    json_decref(o);
    return rc;
}

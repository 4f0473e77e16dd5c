/*
 * protojson over protobuf-c descriptors (see gubjson.h for the conventions).
 *
 * Parsing has two implementations of one behaviour.
 *
 *   The reference path is the definition: a byte pre-scan bounds what jansson will build (nesting
 *   depth and a count of tokens - containers, members, elements - so that a 1 MiB body cannot
 *   make the parser allocate tens of MiB of tiny nodes), jansson does the JSON syntax (UTF-8,
 *   escapes, numbers, duplicate keys), and the tree is walked against the message descriptor to
 *   fill the struct. It costs a malloc per JSON value and three passes over the body.
 *
 *   The fast path, written by hand, is what runs: one pass over the bytes straight into the
 *   struct, allocating only the message itself (see "the hand-written parser" below). It accepts
 *   exactly the documents the reference accepts and builds the same struct; whatever it is not
 *   sure of, it declines, and the reference path then parses the body and reports the error in
 *   jansson's words. Errors are rare, so they may cost two parses.
 *
 * Printing writes straight into an sl_buf instead of building a jansson tree: responses are the
 * hot path (1000 items per call) and need nothing but integers and a few escaped strings.
 */
#include "wire/gubjson.h"

#include "base/hex.h"
#include "base/utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_gubjson_limits_default(sl_gubjson_limits *lim)
{
    lim->max_body = SL_GUBJSON_DEFAULT_MAX_BODY;
    lim->max_depth = SL_GUBJSON_DEFAULT_MAX_DEPTH;
    lim->max_tokens = SL_GUBJSON_DEFAULT_MAX_TOKENS;
}

/* ------------------------------------------------------------------------------------------ */
/* parsing: the reference path (and the conversions both paths share)                          */

typedef struct parse_ctx {
    ProtobufCAllocator *alloc;
    char *err;
    size_t errsz;
    /* Where the walk is ("requests[3].metadata"), kept as frames and formatted only for an
     * error message: formatting it on every field costs more than the rest of the walk. */
    struct path_frame {
        char kind;        /* 'f' field name, 'k' map key, 'i' array index */
        const char *name;
        size_t index;
    } frames[24];
    unsigned depth;
    char path[192];
} parse_ctx;

static void *sys_alloc(void *data, size_t n)
{
    (void)data;
    return malloc(n);
}

static void *ctx_alloc(parse_ctx *c, size_t n)
{
    if (n == 0)
        n = 1;
    if (c->alloc)
        return c->alloc->alloc(c->alloc->allocator_data, n);
    return sys_alloc(NULL, n);
}

static int fail(parse_ctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(parse_ctx *c, int rc, const char *fmt, ...)
{
    if (c->errsz) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errsz, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static int fail_oom(parse_ctx *c)
{
    return fail(c, -ENOMEM, "out of memory parsing the request");
}

/* Frames deeper than the array holds are counted but not recorded: the message then ends "...". */
static unsigned path_push(parse_ctx *c, char kind, const char *name, size_t index)
{
    if (c->depth < sizeof c->frames / sizeof c->frames[0])
        c->frames[c->depth] = (struct path_frame){kind, name, index};
    return c->depth++;
}

static void path_pop(parse_ctx *c, unsigned old)
{
    c->depth = old;
}

/* Format the current path into c->path: fields joined by '.', indices as [i], keys as ["k"]. */
static const char *path_str(parse_ctx *c)
{
    const unsigned max = sizeof c->frames / sizeof c->frames[0];
    size_t n = 0, cap = sizeof c->path;
    c->path[0] = 0;
    for (unsigned i = 0; i < c->depth && i < max && n < cap; i++) {
        const struct path_frame *f = &c->frames[i];
        int w;
        if (f->kind == 'i')
            w = snprintf(c->path + n, cap - n, "[%zu]", f->index);
        else if (f->kind == 'k')
            w = snprintf(c->path + n, cap - n, "[\"%.32s\"]", f->name);
        else
            w = snprintf(c->path + n, cap - n, "%s%s", n ? "." : "", f->name);
        if (w > 0)
            n += (size_t)w;
    }
    if (c->depth > max && n + 4 < cap)
        memcpy(c->path + n, "...", 4);
    return c->path;
}

/* A short description of a JSON value for error messages: strings quoted and cut at 40 bytes. */
static void describe(const json_t *v, char *buf, size_t n)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: snprintf(buf, n, "an object"); break;
    case JSON_ARRAY: snprintf(buf, n, "an array"); break;
    case JSON_STRING: {
        const char *s = json_string_value(v);
        size_t l = json_string_length(v);
        char cut[48];
        size_t k = 0;
        for (size_t i = 0; i < l && k < 40; i++)
            cut[k++] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"') ? s[i] : '?';
        cut[k] = 0;
        snprintf(buf, n, "\"%s\"%s", cut, l > 40 ? "..." : "");
        break;
    }
    case JSON_INTEGER: snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: snprintf(buf, n, "%g", json_real_value(v)); break;
    case JSON_TRUE: snprintf(buf, n, "true"); break;
    case JSON_FALSE: snprintf(buf, n, "false"); break;
    default: snprintf(buf, n, "null"); break;
    }
}

static const char *type_name(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: return "int32";
    case PROTOBUF_C_TYPE_SINT32: return "sint32";
    case PROTOBUF_C_TYPE_SFIXED32: return "sfixed32";
    case PROTOBUF_C_TYPE_INT64: return "int64";
    case PROTOBUF_C_TYPE_SINT64: return "sint64";
    case PROTOBUF_C_TYPE_SFIXED64: return "sfixed64";
    case PROTOBUF_C_TYPE_UINT32: return "uint32";
    case PROTOBUF_C_TYPE_FIXED32: return "fixed32";
    case PROTOBUF_C_TYPE_UINT64: return "uint64";
    case PROTOBUF_C_TYPE_FIXED64: return "fixed64";
    case PROTOBUF_C_TYPE_FLOAT: return "float";
    case PROTOBUF_C_TYPE_DOUBLE: return "double";
    case PROTOBUF_C_TYPE_BOOL: return "bool";
    case PROTOBUF_C_TYPE_ENUM: return "enum";
    case PROTOBUF_C_TYPE_STRING: return "string";
    case PROTOBUF_C_TYPE_BYTES: return "bytes";
    case PROTOBUF_C_TYPE_MESSAGE: return "message";
    }
    return "?";
}

static int bad_value(parse_ctx *c, const ProtobufCFieldDescriptor *f, const json_t *v)
{
    char d[64];
    describe(v, d, sizeof d);
    return fail(c, -EINVAL, "invalid value for %s field %s: %s", type_name(f->type), path_str(c),
                d);
}

/* Bound what jansson builds and find out whether the body is empty; see the file comment. */
static int prescan(parse_ctx *c, const char *p, size_t n, const sl_gubjson_limits *lim,
                   bool *empty)
{
    unsigned depth = 0;
    size_t tokens = 0;
    *empty = true;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        switch (ch) {
        case ' ': case '\t': case '\r': case '\n':
            continue;
        case '"':
            for (i++; i < n && p[i] != '"'; i++)
                if (p[i] == '\\')
                    i++;
            break;
        case '{': case '[':
            if (++depth > lim->max_depth)
                return fail(c, -EINVAL, "JSON nested deeper than %u levels", lim->max_depth);
            tokens++;
            break;
        case '}': case ']':
            if (depth)
                depth--;
            break;
        case ',': case ':':
            tokens++;
            break;
        default:
            break;
        }
        *empty = false;
        if (tokens > lim->max_tokens)
            return fail(c, -EINVAL, "JSON has more than %zu values", lim->max_tokens);
    }
    return 0;
}

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

static bool double_to_int(double d, bool is_unsigned, int64_t *out)
{
    if (!isfinite(d) || d != trunc(d))
        return false;
    if (is_unsigned) {
        if (d < 0 || d >= 18446744073709551616.0)
            return false;
        *out = (int64_t)(uint64_t)d;
    } else {
        if (d < -9223372036854775808.0 || d >= 9223372036854775808.0)
            return false;
        *out = (int64_t)d;
    }
    return true;
}

/* Parse a decimal integer string exactly (no double rounding for plain integers). For unsigned,
 * *out holds the uint64 bit pattern. */
static bool text_to_int(const char *s, size_t n, bool is_unsigned, int64_t *out)
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
        return double_to_int(strtod(tmp, NULL), is_unsigned, out);
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

/* Any JSON integer form: number, real with an integral value, or a string holding a number. */
static bool json_to_int(const json_t *v, bool is_unsigned, int64_t *out)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        *out = json_integer_value(v);
        return !(is_unsigned && *out < 0);
    case JSON_REAL:
        return double_to_int(json_real_value(v), is_unsigned, out);
    case JSON_STRING:
        return text_to_int(json_string_value(v), json_string_length(v), is_unsigned, out);
    default:
        return false;
    }
}

/* An enum value by name; for Behavior also "A|B|C" (OR of the flags). */
static bool enum_from_name(const ProtobufCEnumDescriptor *ed, const char *s, size_t n, int *out)
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

static size_t scalar_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
        return 4;
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

static int build_message(parse_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *obj,
                         ProtobufCMessage **out);

/* Store one JSON value of field f at `slot` (a struct member or an array element). */
static int set_value(parse_ctx *c, const ProtobufCFieldDescriptor *f, const json_t *v, void *slot)
{
    int64_t i;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
        if (!json_to_int(v, false, &i) || i < INT32_MIN || i > INT32_MAX)
            return bad_value(c, f, v);
        *(int32_t *)slot = (int32_t)i;
        return 0;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if (!json_to_int(v, false, &i) || i < 0 || i > UINT32_MAX)
            return bad_value(c, f, v);
        *(uint32_t *)slot = (uint32_t)i;
        return 0;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
        if (!json_to_int(v, false, &i))
            return bad_value(c, f, v);
        *(int64_t *)slot = i;
        return 0;
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        if (!json_to_int(v, true, &i))
            return bad_value(c, f, v);
        *(uint64_t *)slot = (uint64_t)i;
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return bad_value(c, f, v);
        *(protobuf_c_boolean *)slot = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM: {
        int e;
        if (json_is_string(v)) {
            if (!enum_from_name(f->descriptor, json_string_value(v), json_string_length(v), &e))
                return bad_value(c, f, v);
        } else if (json_is_integer(v)) {
            /* proto3 enums are open: any int32 number is kept, as protojson does */
            json_int_t n = json_integer_value(v);
            if (n < INT32_MIN || n > INT32_MAX)
                return bad_value(c, f, v);
            e = (int)n;
        } else {
            return bad_value(c, f, v);
        }
        *(int *)slot = e;
        return 0;
    }
    case PROTOBUF_C_TYPE_STRING: {
        if (!json_is_string(v))
            return bad_value(c, f, v);
        size_t n = json_string_length(v);
        char *s = ctx_alloc(c, n + 1);
        if (!s)
            return fail_oom(c);
        memcpy(s, json_string_value(v), n + 1);
        *(char **)slot = s;
        return 0;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!json_is_object(v))
            return bad_value(c, f, v);
        return build_message(c, f->descriptor, v, (ProtobufCMessage **)slot);
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE: case PROTOBUF_C_TYPE_BYTES:
        break;
    }
    return fail(c, -EINVAL, "field %s: %s fields are not supported", path_str(c),
                type_name(f->type));
}

/* protobuf-c has no map type: a map<K,V> is a repeated message "XxxEntry" with key=1, value=2. */
static bool is_map_entry(const ProtobufCFieldDescriptor *f)
{
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED)
        return false;
    const ProtobufCMessageDescriptor *d = f->descriptor;
    size_t nl = strlen(d->name);
    return d->n_fields == 2 && d->fields[0].id == 1 && d->fields[1].id == 2 &&
           strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0 &&
           nl >= 5 && strcmp(d->name + nl - 5, "Entry") == 0;
}

static int new_message(parse_ctx *c, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    ProtobufCMessage *m = ctx_alloc(c, d->sizeof_message);
    if (!m)
        return fail_oom(c);
    d->message_init(m);
    *out = m;
    return 0;
}

/* Map keys are strings in JSON; for non-string key types they hold the number as text. */
static int set_map_key(parse_ctx *c, const ProtobufCFieldDescriptor *kf, const char *key,
                       void *slot)
{
    json_t *k = json_string(key);
    if (!k)
        return fail(c, -EINVAL, "field %s: invalid map key", path_str(c));
    int rc = set_value(c, kf, k, slot);
    json_decref(k);
    return rc;
}

static int set_repeated(parse_ctx *c, const ProtobufCFieldDescriptor *f, const json_t *v,
                        void *msg)
{
    size_t *np = (size_t *)((char *)msg + f->quantifier_offset);
    void **arrp = (void **)((char *)msg + f->offset);
    if (json_is_null(v))
        return 0;
    if (is_map_entry(f)) {
        if (!json_is_object(v))
            return bad_value(c, f, v);
        size_t n = json_object_size(v);
        if (n == 0)
            return 0;
        ProtobufCMessage **arr = ctx_alloc(c, n * sizeof *arr);
        if (!arr)
            return fail_oom(c);
        *arrp = arr;
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            ProtobufCMessage *e;
            int rc = new_message(c, ed, &e);
            if (rc)
                return rc;
            arr[(*np)++] = e;
            unsigned old = path_push(c, 'k', key, 0);
            rc = set_map_key(c, kf, key, (char *)e + kf->offset);
            if (!rc) {
                if (json_is_null(val))
                    rc = bad_value(c, vf, val);
                else
                    rc = set_value(c, vf, val, (char *)e + vf->offset);
            }
            path_pop(c, old);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (!json_is_array(v))
        return bad_value(c, f, v);
    size_t n = json_array_size(v);
    if (n == 0)
        return 0;
    size_t es = scalar_size(f->type);
    char *arr = ctx_alloc(c, n * es);
    if (!arr)
        return fail_oom(c);
    memset(arr, 0, n * es);
    *arrp = arr;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        unsigned old = path_push(c, 'i', NULL, i);
        /* counted before it is filled, so that a message element that fails half-built is
         * still freed with its parent */
        (*np)++;
        int rc = json_is_null(e) ? bad_value(c, f, e) : set_value(c, f, e, arr + i * es);
        path_pop(c, old);
        if (rc) {
            if (f->type == PROTOBUF_C_TYPE_MESSAGE && !((void **)arr)[i])
                (*np)--;
            return rc;
        }
    }
    return 0;
}

/* Does `key` spell the lowerCamelCase JSON name of snake_case `name` (protoc's ToJsonName)? */
static bool is_camel_of(const char *key, const char *name)
{
    bool up = false;
    for (; *name; name++) {
        if (*name == '_') {
            up = true;
            continue;
        }
        char want = up && *name >= 'a' && *name <= 'z' ? (char)(*name - 'a' + 'A') : *name;
        up = false;
        if (*key++ != want)
            return false;
    }
    return *key == 0;
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d,
                                                  const char *key)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
    if (f)
        return f;
    for (unsigned i = 0; i < d->n_fields; i++)
        if (is_camel_of(key, d->fields[i].name))
            return &d->fields[i];
    return NULL;
}

static int build_message(parse_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *obj,
                         ProtobufCMessage **out)
{
    ProtobufCMessage *m = NULL;
    int rc = new_message(c, d, &m);
    if (rc)
        return rc;
    *out = m; /* linked before filling, so a failure frees it with its parent */
    uint64_t seen = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        const ProtobufCFieldDescriptor *f = find_field(d, key);
        if (!f)
            continue; /* unknown fields are ignored, as Gubernator's gateway does */
        unsigned idx = (unsigned)(f - d->fields);
        unsigned old = path_push(c, 'f', f->name, 0);
        if (idx < 64) {
            if (seen & (UINT64_C(1) << idx)) {
                rc = fail(c, -EINVAL, "duplicate field %s (as \"%s\")", path_str(c), key);
                path_pop(c, old);
                return rc;
            }
            seen |= UINT64_C(1) << idx;
        }
        char *slot = (char *)m + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            rc = set_repeated(c, f, v, m);
        } else if (json_is_null(v)) {
            rc = 0; /* null = unset */
        } else {
            rc = set_value(c, f, v, slot);
            if (!rc && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
                *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
            else if (!rc && f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
                *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
        }
        path_pop(c, old);
        if (rc)
            return rc;
    }
    return 0;
}

/* The reference path: prescan, jansson, then the walk. lim is set and len is within max_body. */
static int parse_reference(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                           const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                           ProtobufCMessage **out, char *err, size_t errsz)
{
    parse_ctx c = {.alloc = alloc, .err = err, .errsz = errsz};
    bool empty;
    int rc = prescan(&c, body, len, lim, &empty);
    if (rc)
        return rc;
    if (empty) {
        ProtobufCMessage *m = NULL;
        rc = new_message(&c, desc, &m);
        if (!rc)
            *out = m;
        return rc;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root)
        return fail(&c, jerr.text[0] == 0 || strstr(jerr.text, "memory") ? -ENOMEM : -EINVAL,
                    "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        char d[64];
        describe(root, d, sizeof d);
        json_decref(root);
        return fail(&c, -EINVAL, "request body must be a JSON object, got %s", d);
    }
    ProtobufCMessage *m = NULL;
    rc = build_message(&c, desc, root, &m);
    json_decref(root);
    if (rc) {
        if (m)
            protobuf_c_message_free_unpacked(m, alloc);
        return rc;
    }
    *out = m;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* the hand-written parser                                                                      */

/*
 * One pass over the bytes, straight into the protobuf-c structs: no token array, no tree, no
 * allocation but the message's own. It accepts exactly what jansson accepts (RFC 8259 with
 * jansson's rules: UTF-8 checked, no \u0000, surrogates paired, integers within int64, reals
 * finite, no duplicate key in any object) and fills the struct exactly as the walk above does.
 * Anything it is not sure about - a syntax or type error, a key written with escapes, an object
 * with many unknown keys, deep nesting - it declines: the caller then runs the reference path,
 * which decides and words the error. So errors keep jansson's messages, and the fast path only
 * has to be right about what it accepts (the fuzzer compares the two paths on every input).
 *
 * Depth and tokens are counted at the same bytes the prescan counts them, so the limits bind at
 * the same place. Not knowing an array's length up front, it grows repeated fields by doubling
 * (with an arena the outgrown arrays stay until the reset: at most as much again as the array).
 */

#define FP_MAX_DEPTH 32 /* deeper documents go to the reference path: bounds the recursion */
#define FP_MAX_KEYS 32  /* more unknown keys (or map entries) in one object: reference path */

typedef struct fp {
    const unsigned char *p, *end;
    ProtobufCAllocator *alloc; /* NULL = malloc/free */
    unsigned depth, max_depth;
    size_t tokens, max_tokens;
} fp;

typedef struct fp_span {
    const char *s;
    size_t n;
} fp_span;

static void *fp_alloc(fp *f, size_t n)
{
    if (n == 0)
        n = 1;
    return f->alloc ? f->alloc->alloc(f->alloc->allocator_data, n) : malloc(n);
}

static void fp_free(fp *f, void *p)
{
    if (!p)
        return;
    if (f->alloc)
        f->alloc->free(f->alloc->allocator_data, p);
    else
        free(p);
}

static inline void fp_ws(fp *f)
{
    while (f->p < f->end && (*f->p == ' ' || *f->p == '\n' || *f->p == '\r' || *f->p == '\t'))
        f->p++;
}

static inline bool fp_at(const fp *f, char ch)
{
    return f->p < f->end && *f->p == (unsigned char)ch;
}

/* '{' or '[', counted as the prescan counts them. */
static inline bool fp_open(fp *f)
{
    f->p++;
    if (++f->depth > f->max_depth || f->depth > FP_MAX_DEPTH)
        return false;
    return ++f->tokens <= f->max_tokens;
}

static inline void fp_close(fp *f)
{
    f->p++;
    f->depth--;
}

/* ',' or ':' */
static inline bool fp_sep(fp *f)
{
    f->p++;
    return ++f->tokens <= f->max_tokens;
}

/* After a member or element: a ',' (another follows: FP_MORE) or the closing `close` (FP_DONE);
 * anything else, or a separator over the token budget, is FP_BAD. */
enum { FP_BAD, FP_MORE, FP_DONE };

/* Just after an opening '{' or '[': FP_DONE if the container is empty (its `close` consumed),
 * else FP_MORE with the first member next. */
static int fp_first(fp *f, char close)
{
    fp_ws(f);
    if (!fp_at(f, close))
        return FP_MORE;
    fp_close(f);
    return FP_DONE;
}

static int fp_next(fp *f, char close)
{
    fp_ws(f);
    if (fp_at(f, ',')) {
        if (!fp_sep(f))
            return FP_BAD;
        fp_ws(f);
        return FP_MORE;
    }
    if (!fp_at(f, close))
        return FP_BAD;
    fp_close(f);
    return FP_DONE;
}

static bool fp_literal(fp *f, const char *lit, size_t n)
{
    if ((size_t)(f->end - f->p) < n || memcmp(f->p, lit, n) != 0)
        return false;
    f->p += n;
    return true;
}

/* Four hex digits at p (end bounds it). */
static bool hex4(const unsigned char *p, const unsigned char *end, unsigned *out)
{
    if (end - p < 4)
        return false;
    uint64_t v;
    if (sl_hex_parse((const char *)p, 4, &v))
        return false;
    *out = (unsigned)v;
    return true;
}

/*
 * At '"': check a string as jansson does (control characters, UTF-8, escapes, \u0000, surrogate
 * pairs) and step past it. out gets the raw bytes between the quotes; *esc says whether they
 * hold escapes (fp_unescape() decodes them; without escapes the raw bytes are the value).
 */
static bool fp_string(fp *f, fp_span *out, bool *esc)
{
    const unsigned char *p = f->p + 1, *end = f->end, *start = p;
    *esc = false;
    for (;;) {
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p >= end)
            return false;
        unsigned char c = *p;
        if (c == '"')
            break;
        if (c < 0x20)
            return false;
        if (c >= 0x80) {
            size_t k = sl_utf8_seq(p, (size_t)(end - p));
            if (!k)
                return false;
            p += k;
            continue;
        }
        /* a backslash */
        *esc = true;
        if (end - p < 2)
            return false;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            continue;
        case 'u': {
            unsigned u, lo;
            if (!hex4(p + 2, end, &u))
                return false;
            p += 6;
            if (u == 0 || (u >= 0xdc00 && u <= 0xdfff))
                return false;
            if (u >= 0xd800 && u <= 0xdbff) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, end, &lo) ||
                    lo < 0xdc00 || lo > 0xdfff)
                    return false;
                p += 6;
            }
            continue;
        }
        default:
            return false;
        }
    }
    out->s = (const char *)start;
    out->n = (size_t)(p - start);
    f->p = p + 1;
    return true;
}

/* Decode a string fp_string() accepted into out (room for s.n bytes); returns the length. */
static size_t fp_unescape(fp_span s, char *out)
{
    const unsigned char *p = (const unsigned char *)s.s, *end = p + s.n;
    char *o = out;
    while (p < end) {
        if (*p != '\\') {
            *o++ = (char)*p++;
            continue;
        }
        char c = (char)p[1];
        p += 2;
        switch (c) {
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u': break;
        default: *o++ = c; continue; /* " \ / */
        }
        unsigned u, lo;
        hex4(p, end, &u);
        p += 4;
        if (u >= 0xd800 && u <= 0xdbff) {
            hex4(p + 2, end, &lo);
            p += 6;
            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        }
        if (u < 0x80) {
            *o++ = (char)u;
        } else if (u < 0x800) {
            *o++ = (char)(0xc0 | u >> 6);
            *o++ = (char)(0x80 | (u & 0x3f));
        } else if (u < 0x10000) {
            *o++ = (char)(0xe0 | u >> 12);
            *o++ = (char)(0x80 | ((u >> 6) & 0x3f));
            *o++ = (char)(0x80 | (u & 0x3f));
        } else {
            *o++ = (char)(0xf0 | u >> 18);
            *o++ = (char)(0x80 | ((u >> 12) & 0x3f));
            *o++ = (char)(0x80 | ((u >> 6) & 0x3f));
            *o++ = (char)(0x80 | (u & 0x3f));
        }
    }
    return (size_t)(o - out);
}

/* The text of a string value, NUL-terminated in buf (escapes decoded); false if over bufsz. */
static bool fp_text(fp_span s, bool esc, char *buf, size_t bufsz, fp_span *out)
{
    if (s.n >= bufsz)
        return false;
    out->n = esc ? fp_unescape(s, buf) : (memcpy(buf, s.s, s.n), s.n);
    buf[out->n] = 0;
    out->s = buf;
    return true;
}

typedef struct fp_num {
    bool real;
    int64_t i;
    double d;
} fp_num;

static inline bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* At '-' or a digit: a JSON number as jansson reads it (integers must fit int64, reals must not
 * overflow to infinity). */
static bool fp_number(fp *f, fp_num *out)
{
    const unsigned char *p = f->p, *end = f->end, *start = p;
    bool neg = false, big = false;
    uint64_t v = 0;
    if (*p == '-') {
        neg = true;
        p++;
    }
    if (p >= end)
        return false;
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p))
            return false;
    } else if (is_digit(*p)) {
        for (; p < end && is_digit(*p); p++) {
            unsigned d = (unsigned)(*p - '0');
            if (v > (UINT64_MAX - d) / 10)
                big = true;
            else
                v = v * 10 + d;
        }
    } else {
        return false;
    }
    out->real = false;
    if (p < end && *p == '.') {
        out->real = true;
        p++;
        if (p >= end || !is_digit(*p))
            return false;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        out->real = true;
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return false;
        while (p < end && is_digit(*p))
            p++;
    }
    if (!out->real) {
        if (big || v > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
            return false; /* jansson: "too big integer" */
        out->i = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        char tmp[64];
        size_t n = (size_t)(p - start);
        if (n >= sizeof tmp)
            return false;
        memcpy(tmp, start, n);
        tmp[n] = 0;
        out->d = strtod(tmp, NULL);
        if (isinf(out->d))
            return false; /* jansson: "real number overflow" */
    }
    f->p = p;
    return true;
}

static bool fp_skip(fp *f);

/* An object we do not map to a message: checked, its keys compared for duplicates. */
static bool fp_skip_object(fp *f)
{
    fp_span keys[FP_MAX_KEYS];
    unsigned nk = 0;
    if (!fp_open(f))
        return false;
    if (fp_first(f, '}') == FP_DONE)
        return true;
    for (;;) {
        fp_span k;
        bool esc;
        if (!fp_at(f, '"') || !fp_string(f, &k, &esc) || esc || nk == FP_MAX_KEYS)
            return false;
        for (unsigned i = 0; i < nk; i++)
            if (keys[i].n == k.n && memcmp(keys[i].s, k.s, k.n) == 0)
                return false;
        keys[nk++] = k;
        fp_ws(f);
        if (!fp_at(f, ':') || !fp_sep(f))
            return false;
        fp_ws(f);
        if (!fp_skip(f))
            return false;
        int next = fp_next(f, '}');
        if (next == FP_MORE)
            continue;
        return next == FP_DONE;
    }
}

/* Any JSON value (the value of an unknown field). */
static bool fp_skip(fp *f)
{
    if (f->p >= f->end)
        return false;
    switch (*f->p) {
    case '"': {
        fp_span s;
        bool esc;
        return fp_string(f, &s, &esc);
    }
    case '{':
        return fp_skip_object(f);
    case '[':
        if (!fp_open(f))
            return false;
        if (fp_first(f, ']') == FP_DONE)
            return true;
        for (;;) {
            if (!fp_skip(f))
                return false;
            int next = fp_next(f, ']');
            if (next == FP_MORE)
                continue;
            return next == FP_DONE;
        }
    case 't':
        return fp_literal(f, "true", 4);
    case 'f':
        return fp_literal(f, "false", 5);
    case 'n':
        return fp_literal(f, "null", 4);
    default: {
        fp_num num;
        return fp_number(f, &num);
    }
    }
}

/* An integer field's value: a number, or a string holding one (json_to_int's rules). */
static bool fp_int(fp *f, bool is_unsigned, int64_t *out)
{
    if (fp_at(f, '"')) {
        fp_span s, t;
        bool esc;
        char buf[128];
        if (!fp_string(f, &s, &esc) || !fp_text(s, esc, buf, sizeof buf, &t))
            return false;
        return text_to_int(t.s, t.n, is_unsigned, out);
    }
    fp_num num;
    if (!fp_number(f, &num))
        return false;
    if (num.real)
        return double_to_int(num.d, is_unsigned, out);
    *out = num.i;
    return !(is_unsigned && num.i < 0);
}

static bool fp_message(fp *f, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m);

/* A non-null value of field fd stored at slot (a struct member or an array element), as
 * set_value() stores it. */
static bool fp_value(fp *f, const ProtobufCFieldDescriptor *fd, void *slot)
{
    int64_t i;
    switch (fd->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
        if (!fp_int(f, false, &i) || i < INT32_MIN || i > INT32_MAX)
            return false;
        *(int32_t *)slot = (int32_t)i;
        return true;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if (!fp_int(f, false, &i) || i < 0 || i > UINT32_MAX)
            return false;
        *(uint32_t *)slot = (uint32_t)i;
        return true;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
        if (!fp_int(f, false, &i))
            return false;
        *(int64_t *)slot = i;
        return true;
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        if (!fp_int(f, true, &i))
            return false;
        *(uint64_t *)slot = (uint64_t)i;
        return true;
    case PROTOBUF_C_TYPE_BOOL:
        if (fp_at(f, 't') && fp_literal(f, "true", 4)) {
            *(protobuf_c_boolean *)slot = 1;
            return true;
        }
        if (fp_at(f, 'f') && fp_literal(f, "false", 5)) {
            *(protobuf_c_boolean *)slot = 0;
            return true;
        }
        return false;
    case PROTOBUF_C_TYPE_ENUM: {
        int e;
        if (fp_at(f, '"')) {
            fp_span s, t;
            bool esc;
            char buf[256];
            if (!fp_string(f, &s, &esc) || !fp_text(s, esc, buf, sizeof buf, &t) ||
                !enum_from_name(fd->descriptor, t.s, t.n, &e))
                return false;
        } else {
            fp_num num;
            if (!fp_number(f, &num) || num.real || num.i < INT32_MIN || num.i > INT32_MAX)
                return false;
            e = (int)num.i;
        }
        *(int *)slot = e;
        return true;
    }
    case PROTOBUF_C_TYPE_STRING: {
        fp_span s;
        bool esc;
        if (!fp_at(f, '"') || !fp_string(f, &s, &esc))
            return false;
        char *str = fp_alloc(f, s.n + 1);
        if (!str)
            return false;
        size_t n = esc ? fp_unescape(s, str) : (memcpy(str, s.s, s.n), s.n);
        str[n] = 0;
        *(char **)slot = str;
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        if (!fp_at(f, '{'))
            return false;
        const ProtobufCMessageDescriptor *sd = fd->descriptor;
        ProtobufCMessage *sub = fp_alloc(f, sd->sizeof_message);
        if (!sub)
            return false;
        sd->message_init(sub);
        *(ProtobufCMessage **)slot = sub; /* linked first: a failure frees it with its parent */
        return fp_message(f, sd, sub);
    }
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE: case PROTOBUF_C_TYPE_BYTES:
        break;
    }
    return false;
}

/* Room for one more element in a repeated field's array (which keeps *np valid elements). */
static void *fp_grow(fp *f, void **arrp, size_t n, size_t *cap, size_t es)
{
    if (n < *cap)
        return (char *)*arrp + n * es;
    size_t ncap = *cap ? *cap * 2 : 4;
    if (ncap > SIZE_MAX / es)
        return NULL;
    char *arr = fp_alloc(f, ncap * es);
    if (!arr)
        return NULL;
    if (n)
        memcpy(arr, *arrp, n * es);
    fp_free(f, *arrp);
    *arrp = arr;
    *cap = ncap;
    return arr + n * es;
}

/* A map<string, V> written as a JSON object: entries in document order, as the walk makes them. */
static bool fp_map(fp *f, const ProtobufCFieldDescriptor *fd, size_t *np, void **arrp)
{
    const ProtobufCMessageDescriptor *ed = fd->descriptor;
    const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
    size_t cap = 0;
    if (kf->type != PROTOBUF_C_TYPE_STRING || !fp_at(f, '{') || !fp_open(f))
        return false;
    if (fp_first(f, '}') == FP_DONE)
        return true;
    for (;;) {
        fp_span k;
        bool esc;
        if (*np == FP_MAX_KEYS || !fp_at(f, '"') || !fp_string(f, &k, &esc))
            return false;
        ProtobufCMessage **slot = fp_grow(f, arrp, *np, &cap, sizeof *slot);
        if (!slot)
            return false;
        ProtobufCMessage *e = fp_alloc(f, ed->sizeof_message);
        if (!e)
            return false;
        ed->message_init(e);
        *slot = e;
        (*np)++;
        char *key = fp_alloc(f, k.n + 1);
        if (!key)
            return false;
        size_t kn = esc ? fp_unescape(k, key) : (memcpy(key, k.s, k.n), k.n);
        key[kn] = 0;
        *(char **)((char *)e + kf->offset) = key;
        /* jansson refuses a duplicate key (keys hold no NUL: \u0000 was refused above) */
        for (size_t j = 0; j + 1 < *np; j++)
            if (strcmp(*(char **)((char *)((ProtobufCMessage **)*arrp)[j] + kf->offset), key) ==
                0)
                return false;
        fp_ws(f);
        if (!fp_at(f, ':') || !fp_sep(f))
            return false;
        fp_ws(f);
        if (fp_at(f, 'n') || !fp_value(f, vf, (char *)e + vf->offset))
            return false;
        int next = fp_next(f, '}');
        if (next == FP_MORE)
            continue;
        return next == FP_DONE;
    }
}

static bool fp_repeated(fp *f, const ProtobufCFieldDescriptor *fd, ProtobufCMessage *m)
{
    size_t *np = (size_t *)((char *)m + fd->quantifier_offset);
    void **arrp = (void **)((char *)m + fd->offset);
    if (fp_at(f, 'n'))
        return fp_literal(f, "null", 4); /* unset */
    if (is_map_entry(fd))
        return fp_map(f, fd, np, arrp);
    if (!fp_at(f, '[') || !fp_open(f))
        return false;
    if (fp_first(f, ']') == FP_DONE)
        return true;
    size_t es = scalar_size(fd->type), cap = 0;
    bool ptr = fd->type == PROTOBUF_C_TYPE_MESSAGE || fd->type == PROTOBUF_C_TYPE_STRING;
    for (;;) {
        void *slot = fp_grow(f, arrp, *np, &cap, es);
        if (!slot)
            return false;
        memset(slot, 0, es);
        bool ok = !fp_at(f, 'n') && fp_value(f, fd, slot);
        /* an element that failed half-built is still counted, so that it is freed */
        if (ok || (ptr && *(void **)slot))
            (*np)++;
        if (!ok)
            return false;
        int next = fp_next(f, ']');
        if (next == FP_MORE)
            continue;
        return next == FP_DONE;
    }
}

/* is_camel_of() for a key that is not NUL-terminated. */
static bool is_camel_of_n(const char *key, size_t n, const char *name)
{
    bool up = false;
    size_t i = 0;
    for (; *name; name++) {
        if (*name == '_') {
            up = true;
            continue;
        }
        char want = up && *name >= 'a' && *name <= 'z' ? (char)(*name - 'a' + 'A') : *name;
        up = false;
        if (i == n || key[i++] != want)
            return false;
    }
    return i == n;
}

/* find_field() for a raw key: an exact name first, then lowerCamelCase in field order. Fields
 * usually come in declaration order, so the exact search starts after the previous match. */
static const ProtobufCFieldDescriptor *fp_find_field(const ProtobufCMessageDescriptor *d,
                                                     const char *key, size_t n, unsigned *hint)
{
    unsigned nf = d->n_fields;
    for (unsigned j = 0, i = *hint; j < nf; j++, i++) {
        if (i >= nf)
            i = 0;
        const char *name = d->fields[i].name;
        if (name[0] == key[0] && strncmp(name, key, n) == 0 && name[n] == 0) {
            *hint = i + 1;
            return &d->fields[i];
        }
    }
    for (unsigned i = 0; i < nf; i++)
        if (is_camel_of_n(key, n, d->fields[i].name))
            return &d->fields[i];
    return NULL;
}

/* At '{': the members of message m (already initialised and linked to its parent). */
static bool fp_message(fp *f, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m)
{
    fp_span unknown[FP_MAX_KEYS];
    unsigned nu = 0, hint = 0;
    uint64_t seen = 0;
    if (d->n_fields > 64 || !fp_open(f))
        return false;
    if (fp_first(f, '}') == FP_DONE)
        return true;
    for (;;) {
        fp_span k;
        bool esc;
        if (!fp_at(f, '"') || !fp_string(f, &k, &esc) || esc)
            return false;
        fp_ws(f);
        if (!fp_at(f, ':') || !fp_sep(f))
            return false;
        fp_ws(f);
        if (f->p >= f->end)
            return false;
        const ProtobufCFieldDescriptor *fd = fp_find_field(d, k.s, k.n, &hint);
        if (!fd) {
            /* ignored, but jansson still refuses it twice */
            if (nu == FP_MAX_KEYS)
                return false;
            for (unsigned i = 0; i < nu; i++)
                if (unknown[i].n == k.n && memcmp(unknown[i].s, k.s, k.n) == 0)
                    return false;
            unknown[nu++] = k;
            if (!fp_skip(f))
                return false;
        } else {
            uint64_t bit = UINT64_C(1) << (fd - d->fields);
            if (seen & bit)
                return false; /* a duplicate field, or one key twice */
            seen |= bit;
            if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
                if (!fp_repeated(f, fd, m))
                    return false;
            } else if (fp_at(f, 'n')) {
                if (!fp_literal(f, "null", 4))
                    return false; /* null = unset */
            } else {
                if (!fp_value(f, fd, (char *)m + fd->offset))
                    return false;
                if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                    *(uint32_t *)((char *)m + fd->quantifier_offset) = fd->id;
                else if (fd->label == PROTOBUF_C_LABEL_OPTIONAL && fd->quantifier_offset)
                    *(protobuf_c_boolean *)((char *)m + fd->quantifier_offset) = 1;
            }
        }
        int next = fp_next(f, '}');
        if (next == FP_MORE)
            continue;
        return next == FP_DONE;
    }
}

/* 0 and *out, or -EAGAIN: declined (nothing is left allocated). */
static int parse_fast(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                      const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                      ProtobufCMessage **out)
{
    fp f = {.p = (const unsigned char *)body, .end = (const unsigned char *)body + len,
            .alloc = alloc, .max_depth = lim->max_depth, .max_tokens = lim->max_tokens};
    fp_ws(&f);
    if (f.p != f.end && *f.p != '{')
        return -EAGAIN;
    ProtobufCMessage *m = fp_alloc(&f, desc->sizeof_message);
    if (!m)
        return -EAGAIN;
    desc->message_init(m);
    bool ok = f.p == f.end; /* an empty body is an empty message */
    if (!ok && fp_message(&f, desc, m)) {
        fp_ws(&f);
        ok = f.p == f.end;
    }
    if (!ok) {
        protobuf_c_message_free_unpacked(m, alloc);
        return -EAGAIN;
    }
    *out = m;
    return 0;
}

int sl_gubjson_parse_with(sl_gubjson_parser which, const ProtobufCMessageDescriptor *desc,
                          const char *body, size_t len, const sl_gubjson_limits *lim,
                          ProtobufCAllocator *alloc, ProtobufCMessage **out, char *err,
                          size_t errsz)
{
    sl_gubjson_limits dl;
    if (!lim) {
        sl_gubjson_limits_default(&dl);
        lim = &dl;
    }
    if (errsz)
        err[0] = 0;
    *out = NULL;
    if (len > lim->max_body) {
        parse_ctx c = {.err = err, .errsz = errsz};
        return fail(&c, -EMSGSIZE, "request body too large: %zu bytes (the maximum is %zu)", len,
                    lim->max_body);
    }
    if (which != SL_GUBJSON_PARSE_REFERENCE) {
        int rc = parse_fast(desc, body, len, lim, alloc, out);
        if (rc == 0)
            return 0;
        if (which == SL_GUBJSON_PARSE_FAST) {
            if (errsz)
                snprintf(err, errsz, "declined by the hand-written parser");
            return rc;
        }
    }
    return parse_reference(desc, body, len, lim, alloc, out, err, errsz);
}

int sl_gubjson_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                     const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                     ProtobufCMessage **out, char *err, size_t errsz)
{
    return sl_gubjson_parse_with(SL_GUBJSON_PARSE_AUTO, desc, body, len, lim, alloc, out, err,
                                 errsz);
}

int sl_gubjson_parse_get_rate_limits_req(const char *body, size_t len, const sl_gubjson_limits *lim,
                                         ProtobufCAllocator *alloc,
                                         Pb__Gubernator__GetRateLimitsReq **out, char *err,
                                         size_t errsz)
{
    ProtobufCMessage *m;
    int rc = sl_gubjson_parse(&pb__gubernator__get_rate_limits_req__descriptor, body, len, lim,
                              alloc, &m, err, errsz);
    *out = rc ? NULL : (Pb__Gubernator__GetRateLimitsReq *)m;
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* printing                                                                                     */

int sl_gubjson_print_string(sl_buf *out, const char *str, size_t n)
{
    const uint8_t *s = (const uint8_t *)str;
    int rc = sl_buf_append(out, "\"", 1);
    size_t i = 0;
    while (!rc && i < n) {
        size_t j = i;
        while (j < n && s[j] >= 0x20 && s[j] < 0x80 && s[j] != '"' && s[j] != '\\')
            j++;
        if (j > i) {
            rc = sl_buf_append(out, s + i, j - i);
            i = j;
            continue;
        }
        uint8_t ch = s[i];
        if (ch >= 0x80) {
            size_t k = sl_utf8_seq(s + i, n - i);
            if (k) {
                rc = sl_buf_append(out, s + i, k);
                i += k;
            } else {
                rc = sl_buf_append(out, "\\ufffd", 6);
                i++;
            }
            continue;
        }
        char e[6];
        size_t el = 2;
        e[0] = '\\';
        switch (ch) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        default:
            e[1] = 'u';
            e[2] = '0';
            e[3] = '0';
            sl_hex_put(e + 4, ch, false);
            el = 6;
        }
        rc = sl_buf_append(out, e, el);
        i++;
    }
    return rc ? rc : sl_buf_append(out, "\"", 1);
}

static int print_i64(sl_buf *out, int64_t v, bool quoted)
{
    char tmp[24], *p = tmp + sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    if (quoted)
        *--p = '"';
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    if (quoted)
        *--p = '"';
    return sl_buf_append(out, p, (size_t)(tmp + sizeof tmp - p));
}

static int print_u64(sl_buf *out, uint64_t u, bool quoted)
{
    char tmp[24], *p = tmp + sizeof tmp;
    if (quoted)
        *--p = '"';
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (quoted)
        *--p = '"';
    return sl_buf_append(out, p, (size_t)(tmp + sizeof tmp - p));
}

static int print_message(const ProtobufCMessage *m, sl_buf *out);

static int print_value(const ProtobufCFieldDescriptor *f, const void *slot, sl_buf *out,
                       bool as_key)
{
    /* map keys are always JSON strings, so 32-bit numbers get quotes there too */
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
        return print_i64(out, *(const int32_t *)slot, as_key);
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        return print_u64(out, *(const uint32_t *)slot, as_key);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
        return print_i64(out, *(const int64_t *)slot, true);
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        return print_u64(out, *(const uint64_t *)slot, true);
    case PROTOBUF_C_TYPE_BOOL: {
        bool b = *(const protobuf_c_boolean *)slot;
        if (as_key)
            return sl_buf_append_str(out, b ? "\"true\"" : "\"false\"");
        return sl_buf_append_str(out, b ? "true" : "false");
    }
    case PROTOBUF_C_TYPE_ENUM: {
        int e = *(const int *)slot;
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, e);
        if (ev)
            return sl_gubjson_print_string(out, ev->name, strlen(ev->name));
        return print_i64(out, e, false);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)slot;
        return s ? sl_gubjson_print_string(out, s, strlen(s)) : sl_buf_append_str(out, "\"\"");
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)slot;
        return sub ? print_message(sub, out) : sl_buf_append_str(out, "null");
    }
    case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE: case PROTOBUF_C_TYPE_BYTES:
        break;
    }
    return -ENOTSUP;
}

static int print_repeated(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m,
                          sl_buf *out)
{
    size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
    const char *arr = *(char *const *)((const char *)m + f->offset);
    int rc;
    if (is_map_entry(f)) {
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
        rc = sl_buf_append(out, "{", 1);
        bool first = true;
        for (size_t i = 0; !rc && i < n; i++) {
            const char *e = ((char *const *)arr)[i];
            if (!e)
                continue;
            if (!first)
                rc = sl_buf_append(out, ",", 1);
            first = false;
            if (!rc)
                rc = print_value(kf, e + kf->offset, out, true);
            if (!rc)
                rc = sl_buf_append(out, ":", 1);
            if (!rc)
                rc = print_value(vf, e + vf->offset, out, false);
        }
        return rc ? rc : sl_buf_append(out, "}", 1);
    }
    size_t es = scalar_size(f->type);
    rc = sl_buf_append(out, "[", 1);
    for (size_t i = 0; !rc && i < n; i++) {
        if (i)
            rc = sl_buf_append(out, ",", 1);
        if (!rc)
            rc = print_value(f, arr + i * es, out, false);
    }
    return rc ? rc : sl_buf_append(out, "]", 1);
}

static int print_message(const ProtobufCMessage *m, sl_buf *out)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    int rc = sl_buf_append(out, "{", 1);
    bool first = true;
    for (unsigned i = 0; !rc && i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *slot = (const char *)m + f->offset;
        /* protojson's EmitUnpopulated still leaves out fields of a oneof that is not set */
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
            continue;
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
            f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING &&
            !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            !*(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset))
            continue;
        if (!first)
            rc = sl_buf_append(out, ",", 1);
        first = false;
        if (!rc)
            rc = sl_gubjson_print_string(out, f->name, strlen(f->name));
        if (!rc)
            rc = sl_buf_append(out, ":", 1);
        if (rc)
            break;
        if (f->label == PROTOBUF_C_LABEL_REPEATED)
            rc = print_repeated(f, m, out);
        else
            rc = print_value(f, slot, out, false);
    }
    return rc ? rc : sl_buf_append(out, "}", 1);
}

int sl_gubjson_print(const ProtobufCMessage *msg, sl_buf *out)
{
    size_t mark = out->len;
    int rc = print_message(msg, out);
    if (rc)
        out->len = mark; /* never leave half a document behind */
    return rc;
}

int sl_gubjson_print_error(sl_buf *out, int grpc_code, const char *message)
{
    size_t mark = out->len;
    int rc = sl_buf_append_str(out, "{\"code\":");
    if (!rc)
        rc = print_i64(out, grpc_code, false);
    if (!rc)
        rc = sl_buf_append_str(out, ",\"message\":");
    if (!rc)
        rc = sl_gubjson_print_string(out, message ? message : "", message ? strlen(message) : 0);
    if (!rc)
        rc = sl_buf_append_str(out, ",\"details\":[]}");
    if (rc)
        out->len = mark;
    return rc;
}

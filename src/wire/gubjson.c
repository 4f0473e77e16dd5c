/*
 * protojson over protobuf-c descriptors (see gubjson.h for the conventions).
 *
 * Parsing is two steps. A byte pre-scan bounds what jansson will build: nesting depth and a count
 * of tokens (containers, members, elements), so that a 1 MiB body cannot make the parser allocate
 * tens of MiB of tiny nodes. jansson then does the JSON syntax (UTF-8, escapes, numbers,
 * duplicate keys), and the tree is walked against the message descriptor to fill the struct.
 *
 * Printing writes straight into an sl_buf instead of building a jansson tree: responses are the
 * hot path (1000 items per call) and need nothing but integers and a few escaped strings.
 */
#include "wire/gubjson.h"

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
/* parsing                                                                                      */

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

int sl_gubjson_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                     const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                     ProtobufCMessage **out, char *err, size_t errsz)
{
    sl_gubjson_limits dl;
    if (!lim) {
        sl_gubjson_limits_default(&dl);
        lim = &dl;
    }
    parse_ctx c = {.alloc = alloc, .err = err, .errsz = errsz};
    if (errsz)
        err[0] = 0;
    *out = NULL;
    if (len > lim->max_body)
        return fail(&c, -EMSGSIZE, "request body too large: %zu bytes (the maximum is %zu)", len,
                    lim->max_body);
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

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one (RFC 3629: no overlongs,
 * no surrogates, nothing above U+10FFFF). */
static size_t utf8_seq(const uint8_t *s, size_t n)
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
            return 0;
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

int sl_gubjson_print_string(sl_buf *out, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
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
            size_t k = utf8_seq(s + i, n - i);
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
            e[4] = hex[ch >> 4];
            e[5] = hex[ch & 15];
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

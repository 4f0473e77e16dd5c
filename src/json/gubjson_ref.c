/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reference Gubernator JSON parser (see gubjson_ref.h): it defines what the gateway accepts and
 * words every error.
 *
 * A byte pre-scan bounds what jansson will build (nesting depth and a count of tokens - containers,
 * members, elements - so that a 1 MiB body cannot make the parser allocate tens of MiB of tiny
 * nodes), jansson does the JSON syntax (UTF-8, escapes, numbers, duplicate keys), and the tree is
 * walked against the message descriptor to fill the struct. It costs a malloc per JSON value and
 * three passes over the body, which is why json/gubjson_fast.c runs first.
 */
#include "json/gubjson_ref.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "json/protojson.h"

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

/* Any JSON integer form: number, real with an integral value, or a string holding a number. */
static bool json_to_int(const json_t *v, bool is_unsigned, int64_t *out)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        *out = json_integer_value(v);
        return !(is_unsigned && *out < 0);
    case JSON_REAL:
        return sl_protojson_double_to_int(json_real_value(v), is_unsigned, out);
    case JSON_STRING:
        return sl_protojson_text_to_int(json_string_value(v), json_string_length(v), is_unsigned,
                                        out);
    default:
        return false;
    }
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
            if (!sl_protojson_enum_from_name(f->descriptor, json_string_value(v),
                                             json_string_length(v), &e))
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
        char *s = sl_protojson_alloc(c->alloc, n + 1);
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

static int new_message(parse_ctx *c, const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    ProtobufCMessage *m = sl_protojson_new_message(c->alloc, d);
    if (!m)
        return fail_oom(c);
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
    if (sl_protojson_is_map_entry(f)) {
        if (!json_is_object(v))
            return bad_value(c, f, v);
        size_t n = json_object_size(v);
        if (n == 0)
            return 0;
        ProtobufCMessage **arr = sl_protojson_alloc(c->alloc, n * sizeof *arr);
        if (!arr)
            return fail_oom(c);
        *arrp = arr;
        const ProtobufCMessageDescriptor *ed = f->descriptor;
        const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            ProtobufCMessage *e = NULL;
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
    size_t es = sl_protojson_scalar_size(f->type);
    char *arr = sl_protojson_alloc(c->alloc, n * es);
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

static int build_message(parse_ctx *c, const ProtobufCMessageDescriptor *d, const json_t *obj,
                         ProtobufCMessage **out)
{
    ProtobufCMessage *m = NULL;
    int rc = new_message(c, d, &m);
    if (rc)
        return rc;
    *out = m; /* linked before filling, so a failure frees it with its parent */
    uint64_t seen = 0;
    unsigned hint = 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        const ProtobufCFieldDescriptor *f = sl_protojson_find_field(d, key, strlen(key), &hint);
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

int sl_gubjson_ref_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
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


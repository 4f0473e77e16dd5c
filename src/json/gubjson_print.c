/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protojson printer (see gubjson_print.h). It writes straight into an sl_buf instead of
 * building a jansson tree: responses are the hot path (1000 items per call) and need nothing but
 * integers and a few escaped strings.
 */
#include "json/gubjson_print.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/hex.h"
#include "base/utf8.h"
#include "json/protojson.h"

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
    if (sl_protojson_is_map_entry(f)) {
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
    size_t es = sl_protojson_scalar_size(f->type);
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

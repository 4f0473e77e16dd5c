/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_protojson: the protojson conventions over protobuf-c descriptors that the Gubernator JSON
 * parsers (json/gubjson_ref.c, json/gubjson_fast.c) and the printer (json/gubjson_print.c) share,
 * written once: finding a field by its proto name or its lowerCamelCase JSON name, recognising a
 * map field, the size of a repeated field's element, allocating through a ProtobufCAllocator, and
 * the integer and enum conversions (see json/gubjson.h for the conventions themselves).
 *
 * What the fast parser calls per key or per value is static inline here, as it was when both
 * parsers lived in one file.
 */
#ifndef SLUICE_JSON_PROTOJSON_H
#define SLUICE_JSON_PROTOJSON_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

/* n bytes (at least 1) from alloc, or from malloc when alloc is NULL. */
static inline void *sl_protojson_alloc(ProtobufCAllocator *alloc, size_t n)
{
    if (n == 0)
        n = 1;
    return alloc ? alloc->alloc(alloc->allocator_data, n) : malloc(n);
}

static inline void sl_protojson_free(ProtobufCAllocator *alloc, void *p)
{
    if (!p)
        return;
    if (alloc)
        alloc->free(alloc->allocator_data, p);
    else
        free(p);
}

/* A new, initialised message of type d, or NULL. */
static inline ProtobufCMessage *sl_protojson_new_message(ProtobufCAllocator *alloc,
                                                         const ProtobufCMessageDescriptor *d)
{
    ProtobufCMessage *m = sl_protojson_alloc(alloc, d->sizeof_message);
    if (m)
        d->message_init(m);
    return m;
}

/* Does key[0..n) spell the lowerCamelCase JSON name of snake_case `name` (protoc's ToJsonName)? */
static inline bool sl_protojson_is_camel_of(const char *key, size_t n, const char *name)
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

/* The field that key[0..n) names: its proto name first, then its lowerCamelCase name, in field
 * order. Fields usually come in declaration order, so the exact search starts after the previous
 * match (*hint; start a message with 0). NULL for an unknown key. */
static inline const ProtobufCFieldDescriptor *
sl_protojson_find_field(const ProtobufCMessageDescriptor *d, const char *key, size_t n,
                        unsigned *hint)
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
        if (sl_protojson_is_camel_of(key, n, d->fields[i].name))
            return &d->fields[i];
    return NULL;
}

/* protobuf-c has no map type: a map<K,V> is a repeated message "XxxEntry" with key=1, value=2. */
static inline bool sl_protojson_is_map_entry(const ProtobufCFieldDescriptor *f)
{
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label != PROTOBUF_C_LABEL_REPEATED)
        return false;
    const ProtobufCMessageDescriptor *d = f->descriptor;
    size_t nl = strlen(d->name);
    return d->n_fields == 2 && d->fields[0].id == 1 && d->fields[1].id == 2 &&
           strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0 &&
           nl >= 5 && strcmp(d->name + nl - 5, "Entry") == 0;
}

/* Bytes per element of a repeated field of type t. */
static inline size_t sl_protojson_scalar_size(ProtobufCType t)
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

/* A double that holds an integer within int64 (uint64 when is_unsigned: *out then holds its bit
 * pattern); false for a fraction, out of range, or not finite. */
static inline bool sl_protojson_double_to_int(double d, bool is_unsigned, int64_t *out)
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

/* A decimal integer written as text (protojson accepts a 64-bit integer as a string): "10", "-3",
 * "1e1", "2.0". Plain integers are parsed exactly (no double rounding); for unsigned, *out holds
 * the uint64 bit pattern. */
bool sl_protojson_text_to_int(const char *s, size_t n, bool is_unsigned, int64_t *out);

/* An enum value by name (s is NUL-terminated, n its length); for gubernator's Behavior also "A|B|C"
 * (the OR of the flags: protojson cannot name a combination). */
bool sl_protojson_enum_from_name(const ProtobufCEnumDescriptor *ed, const char *s, size_t n,
                                 int *out);

#endif

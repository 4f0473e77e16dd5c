/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_pb: the protobuf wire format, by hand - a bounds-checked reader (varints, field keys,
 * length-delimited fields, skipping unknown fields) and the matching writer (varint sizes, varints,
 * string and int64 fields as protobuf-c writes them). It is what the hand-written Gubernator
 * decoder and encoders (api/gubernator.c) are built from; protobuf-c stays the reference.
 *
 * The reader follows protobuf-c 1.4: a varint is at most 10 bytes with bits past 64 dropped, a
 * field key at most 5 bytes with the field number cut to 32 bits and field 0 refused. The fast-path
 * helpers are static inline: they run for every field of every request.
 */
#ifndef SLUICE_WIRE_PBWIRE_H
#define SLUICE_WIRE_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A cursor over bytes [p, end). */
typedef struct sl_pb_rd {
    const uint8_t *p, *end;
} sl_pb_rd;

/* Wire types. */
enum { SL_PB_VARINT = 0, SL_PB_I64 = 1, SL_PB_LEN = 2, SL_PB_I32 = 5 };

/* ---- reading ---- */

/* A varint of at most 10 bytes; bits past 64 are dropped (protobuf-c's parse_uint64). False when
 * it is truncated or longer. */
static inline bool sl_pb_varint(sl_pb_rd *r, uint64_t *v)
{
    const uint8_t *p = r->p;
    if (p < r->end && *p < 0x80) { /* most keys, lengths and small values are one byte */
        *v = *p;
        r->p = p + 1;
        return true;
    }
    uint64_t x = 0;
    for (unsigned i = 0; i < 10 && p < r->end; i++, p++) {
        x |= (uint64_t)(*p & 0x7f) << (7 * i);
        if (!(*p & 0x80)) {
            *v = x;
            r->p = p + 1;
            return true;
        }
    }
    return false;
}

/* A field key: at most 5 bytes, the field number cut to 32 bits (parse_tag_and_wiretype); field
 * number 0 is refused (protobuf-c 1.4 refuses it). */
static inline bool sl_pb_key(sl_pb_rd *r, uint32_t *field, unsigned *wt)
{
    const uint8_t *p = r->p;
    if (p < r->end && *p < 0x80) {
        *field = *p >> 3;
        *wt = *p & 7;
        r->p = p + 1;
        return *field != 0;
    }
    uint64_t x = 0;
    for (unsigned i = 0; i < 5 && p < r->end; i++, p++) {
        x |= (uint64_t)(*p & 0x7f) << (7 * i);
        if (!(*p & 0x80)) {
            *field = (uint32_t)(x >> 3);
            *wt = (unsigned)(x & 7);
            r->p = p + 1;
            return *field != 0;
        }
    }
    return false;
}

/* A length-delimited field's bytes into *sub. Lengths of 5 bytes (256 MiB and more) are
 * declined. */
static inline bool sl_pb_bytes(sl_pb_rd *r, sl_pb_rd *sub)
{
    const uint8_t *p = r->p;
    uint32_t n = 0;
    for (unsigned i = 0; i < 4 && p < r->end; i++, p++) {
        n |= (uint32_t)(*p & 0x7f) << (7 * i);
        if (!(*p & 0x80)) {
            p++;
            if (n > (size_t)(r->end - p))
                return false;
            sub->p = p;
            sub->end = p + n;
            r->p = p + n;
            return true;
        }
    }
    return false;
}

/* Step over a field's value of wire type wt. False for a truncated value, a group (3, 4) or the
 * non-types 6 and 7 (protobuf-c refuses them). */
bool sl_pb_skip(sl_pb_rd *r, unsigned wt);

/*
 * Count the top-level occurrences of length-delimited field `field` in msg[0..n), stopping once
 * more than `stop_after` are seen: a screen run before any decoder (the fast one or protobuf-c)
 * builds items. Unlike the fast-path reader above it takes keys as full varints (field numbers
 * 1..2^29-1) and lengths of any width. 0, or -EINVAL when the top level is not well-formed
 * protobuf.
 */
int sl_pb_count_field(const uint8_t *msg, size_t n, uint32_t field, size_t stop_after,
                      size_t *count);

/* ---- writing: sizes first, then the bytes into an exact reservation ---- */

/* Bytes in the varint encoding of v (1..10). */
static inline size_t sl_pb_varint_size(uint64_t v)
{
    /* ceil(bits / 7) without a division: (floor(log2 v) * 9 + 73) / 64 */
    return (size_t)((63 - __builtin_clzll(v | 1)) * 9 + 73) / 64;
}

static inline uint8_t *sl_pb_put_varint(uint8_t *w, uint64_t v)
{
    while (v >= 0x80) {
        *w++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *w++ = (uint8_t)v;
    return w;
}

/* A string field (key byte + length + bytes), or nothing when it is empty (proto3). */
static inline size_t sl_pb_str_field_size(size_t n)
{
    return n ? 1 + sl_pb_varint_size(n) + n : 0;
}

static inline uint8_t *sl_pb_put_str_field(uint8_t *w, uint8_t key, const char *s, size_t n)
{
    if (!n)
        return w;
    *w++ = key;
    w = sl_pb_put_varint(w, n);
    memcpy(w, s, n);
    return w + n;
}

/* An int64 field (key byte + varint; 10 bytes when negative), or nothing when it is 0. */
static inline size_t sl_pb_i64_field_size(int64_t v)
{
    return v ? 1 + sl_pb_varint_size((uint64_t)v) : 0;
}

static inline uint8_t *sl_pb_put_i64_field(uint8_t *w, uint8_t key, int64_t v)
{
    if (!v)
        return w;
    *w++ = key;
    return sl_pb_put_varint(w, (uint64_t)v);
}

#endif

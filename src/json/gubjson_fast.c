/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hand-written Gubernator JSON parser (see gubjson_fast.h): what runs on every JSON request.
 *
 * One pass over the bytes, straight into the protobuf-c structs: no token array, no tree, no
 * allocation but the message's own. It accepts exactly what jansson accepts (RFC 8259 with
 * jansson's rules: UTF-8 checked, no \u0000, surrogates paired, integers within int64, reals
 * finite, no duplicate key in any object) and fills the struct exactly as the reference walk
 * (gubjson_ref.c) does. Anything it is not sure about - a syntax or type error, a key written with
 * escapes, an object with many unknown keys, deep nesting - it declines: the caller then runs the
 * reference path, which decides and words the error. So errors keep jansson's messages, and the
 * fast path only has to be right about what it accepts (the fuzzer compares the two paths on every
 * input).
 *
 * Depth and tokens are counted at the same bytes the prescan counts them, so the limits bind at
 * the same place. Not knowing an array's length up front, it grows repeated fields by doubling
 * (with an arena the outgrown arrays stay until the reset: at most as much again as the array).
 */
#include "json/gubjson_fast.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hex.h"
#include "base/utf8.h"
#include "json/protojson.h"

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

/* At a container's opening '{' or '[': consume and count it, then as fp_first. FP_BAD when the
 * opening is over the depth or token budget. The loop over the members then reads
 *     int st = fp_enter(f, close);
 *     while (st == FP_MORE) { <one member, return false if bad>; st = fp_next(f, close); }
 *     return st == FP_DONE;                                                              */
static inline int fp_enter(fp *f, char close)
{
    if (!fp_open(f))
        return FP_BAD;
    return fp_first(f, close);
}

/* After a member's key: the ':' and the blanks around it. */
static inline bool fp_colon(fp *f)
{
    fp_ws(f);
    if (!fp_at(f, ':') || !fp_sep(f))
        return false;
    fp_ws(f);
    return true;
}

/* Note key k among keys[0..*n): false when it is there already (jansson refuses a key twice) or
 * there is no room for it. */
static inline bool fp_key_once(fp_span *keys, unsigned *n, fp_span k)
{
    if (*n == FP_MAX_KEYS)
        return false;
    for (unsigned i = 0; i < *n; i++)
        if (keys[i].n == k.n && memcmp(keys[i].s, k.s, k.n) == 0)
            return false;
    keys[(*n)++] = k;
    return true;
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
        unsigned u = 0, lo = 0; /* set by hex4 (validated before); gcc -O3 cannot tell */
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
    int st = fp_enter(f, '}');
    while (st == FP_MORE) {
        fp_span k;
        bool esc;
        if (!fp_at(f, '"') || !fp_string(f, &k, &esc) || esc || !fp_key_once(keys, &nk, k))
            return false;
        if (!fp_colon(f))
            return false;
        if (!fp_skip(f))
            return false;
        st = fp_next(f, '}');
    }
    return st == FP_DONE;
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
    case '[': {
        int st = fp_enter(f, ']');
        while (st == FP_MORE) {
            if (!fp_skip(f))
                return false;
            st = fp_next(f, ']');
        }
        return st == FP_DONE;
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
        return sl_protojson_text_to_int(t.s, t.n, is_unsigned, out);
    }
    fp_num num;
    if (!fp_number(f, &num))
        return false;
    if (num.real)
        return sl_protojson_double_to_int(num.d, is_unsigned, out);
    *out = num.i;
    return !(is_unsigned && num.i < 0);
}

static bool fp_message(fp *f, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m);

/* A non-null value of field fd stored at slot (a struct member or an array element), as
 * the reference's set_value() stores it. */
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
                !sl_protojson_enum_from_name(fd->descriptor, t.s, t.n, &e))
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
        char *str = sl_protojson_alloc(f->alloc, s.n + 1);
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
        ProtobufCMessage *sub = sl_protojson_new_message(f->alloc, sd);
        if (!sub)
            return false;
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
    char *arr = sl_protojson_alloc(f->alloc, ncap * es);
    if (!arr)
        return NULL;
    if (n)
        memcpy(arr, *arrp, n * es);
    sl_protojson_free(f->alloc, *arrp);
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
    if (kf->type != PROTOBUF_C_TYPE_STRING || !fp_at(f, '{'))
        return false;
    int st = fp_enter(f, '}');
    while (st == FP_MORE) {
        fp_span k;
        bool esc;
        if (*np == FP_MAX_KEYS || !fp_at(f, '"') || !fp_string(f, &k, &esc))
            return false;
        ProtobufCMessage **slot = fp_grow(f, arrp, *np, &cap, sizeof *slot);
        if (!slot)
            return false;
        ProtobufCMessage *e = sl_protojson_new_message(f->alloc, ed);
        if (!e)
            return false;
        *slot = e;
        (*np)++;
        char *key = sl_protojson_alloc(f->alloc, k.n + 1);
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
        if (!fp_colon(f))
            return false;
        if (fp_at(f, 'n') || !fp_value(f, vf, (char *)e + vf->offset))
            return false;
        st = fp_next(f, '}');
    }
    return st == FP_DONE;
}

static bool fp_repeated(fp *f, const ProtobufCFieldDescriptor *fd, ProtobufCMessage *m)
{
    size_t *np = (size_t *)((char *)m + fd->quantifier_offset);
    void **arrp = (void **)((char *)m + fd->offset);
    if (fp_at(f, 'n'))
        return fp_literal(f, "null", 4); /* unset */
    if (sl_protojson_is_map_entry(fd))
        return fp_map(f, fd, np, arrp);
    if (!fp_at(f, '['))
        return false;
    size_t es = sl_protojson_scalar_size(fd->type), cap = 0;
    bool ptr = fd->type == PROTOBUF_C_TYPE_MESSAGE || fd->type == PROTOBUF_C_TYPE_STRING;
    int st = fp_enter(f, ']');
    while (st == FP_MORE) {
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
        st = fp_next(f, ']');
    }
    return st == FP_DONE;
}

/* At '{': the members of message m (already initialised and linked to its parent). */
static bool fp_message(fp *f, const ProtobufCMessageDescriptor *d, ProtobufCMessage *m)
{
    fp_span unknown[FP_MAX_KEYS];
    unsigned nu = 0, hint = 0;
    uint64_t seen = 0;
    if (d->n_fields > 64)
        return false;
    int st = fp_enter(f, '}');
    while (st == FP_MORE) {
        fp_span k;
        bool esc;
        if (!fp_at(f, '"') || !fp_string(f, &k, &esc) || esc)
            return false;
        if (!fp_colon(f))
            return false;
        if (f->p >= f->end)
            return false;
        const ProtobufCFieldDescriptor *fd = sl_protojson_find_field(d, k.s, k.n, &hint);
        if (!fd) {
            /* ignored, but jansson still refuses it twice */
            if (!fp_key_once(unknown, &nu, k) || !fp_skip(f))
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
        st = fp_next(f, '}');
    }
    return st == FP_DONE;
}

int sl_gubjson_fast_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                          const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                          ProtobufCMessage **out)
{
    fp f = {.p = (const unsigned char *)body, .end = (const unsigned char *)body + len,
            .alloc = alloc, .max_depth = lim->max_depth, .max_tokens = lim->max_tokens};
    fp_ws(&f);
    if (f.p != f.end && *f.p != '{')
        return -EAGAIN;
    ProtobufCMessage *m = sl_protojson_new_message(alloc, desc);
    if (!m)
        return -EAGAIN;
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

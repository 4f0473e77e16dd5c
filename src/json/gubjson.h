/* SPDX-License-Identifier: Apache-2.0 */
/*
 * protojson for the Gubernator HTTP gateway: JSON text <-> the protobuf-c structs generated from
 * proto/gubernator.proto and proto/peers.proto, driven by protobuf-c's message descriptors, with
 * jansson doing the JSON syntax.
 *
 * It follows what Gubernator's grpc-gateway is configured to do (protojson with UseProtoNames,
 * EmitUnpopulated, DiscardUnknown):
 *
 *   output  field names as in the .proto (snake_case: "reset_time", "rate_limits"); every field,
 *           zero values included (a unset message field prints null, a map {} and a list []);
 *           64-bit integers as JSON strings ("10"); 32-bit integers as numbers; enums by name
 *           (by number when the value has no name, e.g. combined Behavior flags).
 *   input   snake_case or lowerCamelCase names ("unique_key" / "uniqueKey"; both at once is a
 *           duplicate); 64-bit integers as a number or a string ("10", 10, 1e1); enums by name or
 *           by number; null means "unset"; unknown fields are ignored. sluice extension: a
 *           Behavior may also be written as names joined by '|' ("GLOBAL|NO_BATCHING"), since
 *           protojson cannot name a combination.
 *   errors  malformed JSON, a value of the wrong type, an unknown enum name, a duplicate field, a
 *           body over the size limit or nested too deep give a negative errno and a message
 *           naming the field (e.g. `invalid value for int64 field requests[2].hits: "ten"`).
 *
 * Parsed messages are allocated with a ProtobufCAllocator (NULL = malloc), node by node as
 * protobuf-c's own unpacker does, so protobuf_c_message_free_unpacked() with the same allocator
 * frees one - or with an arena allocator, dropping the arena does.
 *
 * Parsing runs a hand-written single-pass parser (gubjson_fast.h); what it declines (every error,
 * and a few rare forms such as keys written with escapes) is parsed again by the reference
 * implementation (gubjson_ref.h: jansson and a walk over its tree), which defines the behaviour and
 * words the errors. Printing is gubjson_print.h, included here.
 */
#ifndef SLUICE_JSON_GUBJSON_H
#define SLUICE_JSON_GUBJSON_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "gubernator.pb-c.h"
#include "peers.pb-c.h"
#include "base/buf.h"
#include "json/gubjson_print.h" /* the printer: sl_gubjson_print() and friends */

typedef struct sl_gubjson_limits {
    size_t max_body;     /* bytes; larger bodies are refused before parsing (-EMSGSIZE) */
    unsigned max_depth;  /* nesting of objects and arrays */
    size_t max_tokens;   /* objects + arrays + members + elements: bounds the parser's memory */
} sl_gubjson_limits;

#define SL_GUBJSON_DEFAULT_MAX_BODY ((size_t)1 << 20)
#define SL_GUBJSON_DEFAULT_MAX_DEPTH 16
#define SL_GUBJSON_DEFAULT_MAX_TOKENS ((size_t)1 << 17)

void sl_gubjson_limits_default(sl_gubjson_limits *lim);

/*
 * Parse `body` (len bytes, need not be NUL-terminated) as a message of type `desc`.
 * An empty or all-whitespace body is an empty message (as grpc-gateway treats it).
 * Returns 0 and *out, or -EMSGSIZE (body over lim->max_body), -EINVAL (bad JSON, wrong type,
 * too deep, too many tokens) or -ENOMEM, with a NUL-terminated message in err[errsz].
 * lim NULL = defaults; alloc NULL = malloc/free.
 */
int sl_gubjson_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                     const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                     ProtobufCMessage **out, char *err, size_t errsz);

/* Which parser runs. AUTO is sl_gubjson_parse(); FAST and REFERENCE are there for tests that
 * check the two agree, and for measuring. */
typedef enum sl_gubjson_parser {
    SL_GUBJSON_PARSE_AUTO,      /* the hand-written parser, the reference for what it declines */
    SL_GUBJSON_PARSE_FAST,      /* the hand-written parser only: -EAGAIN when it declines */
    SL_GUBJSON_PARSE_REFERENCE, /* jansson and the descriptor walk only */
} sl_gubjson_parser;

int sl_gubjson_parse_with(sl_gubjson_parser which, const ProtobufCMessageDescriptor *desc,
                          const char *body, size_t len, const sl_gubjson_limits *lim,
                          ProtobufCAllocator *alloc, ProtobufCMessage **out, char *err,
                          size_t errsz);

/* sl_gubjson_parse() for the GetRateLimits request body. */
int sl_gubjson_parse_get_rate_limits_req(const char *body, size_t len, const sl_gubjson_limits *lim,
                                         ProtobufCAllocator *alloc,
                                         Pb__Gubernator__GetRateLimitsReq **out, char *err,
                                         size_t errsz);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_gubjson_ref: the reference Gubernator JSON parser - jansson plus a walk of its tree against
 * the protobuf-c descriptor. It is the definition of what sl_gubjson_parse() accepts and how it
 * words errors; the hand-written parser (gubjson_fast.h) must agree with it, and hands it whatever
 * it declines. Callers use sl_gubjson_parse_with() (gubjson.h).
 */
#ifndef SLUICE_JSON_GUBJSON_REF_H
#define SLUICE_JSON_GUBJSON_REF_H

#include "json/gubjson.h"

/* Parse body[0..len) as a `desc` message. lim is set and len is within lim->max_body (the caller
 * checked). 0 and *out, or -EINVAL / -ENOMEM with a message in err[errsz]. */
int sl_gubjson_ref_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                         const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                         ProtobufCMessage **out, char *err, size_t errsz);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_gubjson_fast: the hand-written Gubernator JSON parser - one pass over the bytes straight into
 * the protobuf-c structs. It accepts exactly what the reference parser (gubjson_ref.h) accepts and
 * builds the same message; whatever it is not sure of, it declines. Callers use
 * sl_gubjson_parse_with() (gubjson.h), which runs the reference on a decline.
 */
#ifndef SLUICE_JSON_GUBJSON_FAST_H
#define SLUICE_JSON_GUBJSON_FAST_H

#include "json/gubjson.h"

/* Parse body[0..len) as a `desc` message (lim is set; len is within lim->max_body). 0 and *out, or
 * -EAGAIN: declined, nothing left allocated (an error, or a form it leaves to the reference). */
int sl_gubjson_fast_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                          const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                          ProtobufCMessage **out);

#endif

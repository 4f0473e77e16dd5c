/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_gubjson_print: protobuf-c messages as protojson, the way Gubernator's grpc-gateway prints them
 * (conventions in gubjson.h: proto field names, every field, 64-bit integers as strings, enums by
 * name), plus the gateway's error body. gubjson.h includes this header.
 */
#ifndef SLUICE_JSON_GUBJSON_PRINT_H
#define SLUICE_JSON_GUBJSON_PRINT_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "base/buf.h"

/* Append `msg` as protojson. 0 or -ENOMEM / -EMSGSIZE (out's cap) / -ENOTSUP (a field type
 * Gubernator's protos do not use: float, double, bytes); on failure out is as it was. */
int sl_gubjson_print(const ProtobufCMessage *msg, sl_buf *out);

/* Append grpc-gateway's error body: {"code":<grpc code>,"message":"...","details":[]}. */
int sl_gubjson_print_error(sl_buf *out, int grpc_code, const char *message);

/* Append `s` (n bytes) as a JSON string literal with quotes. Bytes that are not valid UTF-8 become
 * U+FFFD, so the output is always valid JSON whatever the wire message carried. */
int sl_gubjson_print_string(sl_buf *out, const char *s, size_t n);

#endif

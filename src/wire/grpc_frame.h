/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC over HTTP/2, the parts that are not HTTP/2: the length-prefixed message framing carried in
 * DATA frames, status codes and their names, the grpc-gateway HTTP status for each code, the
 * percent-encoding of the grpc-message trailer, grpc-timeout and content-type checks.
 *
 * Pure functions over buffers; the HTTP/2 session (nghttp2) and stream state live in src/net/.
 *
 *   one gRPC message on a stream:
 *   +----------+---------------------------+---------------------------+
 *   | 1 byte   | 4 bytes, big-endian       | `length` bytes            |
 *   | flag 0/1 | length                    | protobuf message          |
 *   +----------+---------------------------+---------------------------+
 *   flag 1 = compressed with the stream's grpc-encoding (sluice announces none, so it refuses it).
 */
#ifndef SLUICE_WIRE_GRPC_FRAME_H
#define SLUICE_WIRE_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define SL_GRPC_HDR_LEN 5

/* The message encodings sluiced's server decodes and may answer with (api/grpczip.c), the value
 * of the grpc-accept-encoding header of its every gRPC answer. */
#define SL_GRPC_ACCEPT_ENCODING "identity,deflate,gzip"

/* Largest message sluice accepts by default: Gubernator's gRPC MaxRecvMsgSize (1 MiB). */
#define SL_GRPC_DEFAULT_MAX_MSG ((size_t)1 << 20)

/* gRPC status codes (the numbers are the protocol's). */
typedef enum sl_grpc_code {
    SL_GRPC_OK = 0,
    SL_GRPC_CANCELLED = 1,
    SL_GRPC_UNKNOWN = 2,
    SL_GRPC_INVALID_ARGUMENT = 3,
    SL_GRPC_DEADLINE_EXCEEDED = 4,
    SL_GRPC_NOT_FOUND = 5,
    SL_GRPC_ALREADY_EXISTS = 6,
    SL_GRPC_PERMISSION_DENIED = 7,
    SL_GRPC_RESOURCE_EXHAUSTED = 8,
    SL_GRPC_FAILED_PRECONDITION = 9,
    SL_GRPC_ABORTED = 10,
    SL_GRPC_OUT_OF_RANGE = 11,
    SL_GRPC_UNIMPLEMENTED = 12,
    SL_GRPC_INTERNAL = 13,
    SL_GRPC_UNAVAILABLE = 14,
    SL_GRPC_DATA_LOSS = 15,
    SL_GRPC_UNAUTHENTICATED = 16,
} sl_grpc_code;

/* "OK", "OUT_OF_RANGE", ...; NULL for a number that is not a gRPC code. */
const char *sl_grpc_code_name(int code);

/* The HTTP status grpc-gateway answers for a gRPC code (OUT_OF_RANGE and INVALID_ARGUMENT 400,
 * UNAVAILABLE 503, RESOURCE_EXHAUSTED 429, ...); 500 for an unknown code. */
int sl_grpc_code_to_http(int code);

/* Why a whole call failed: a gRPC code, the HTTP status the JSON gateway answers with it, and a
 * message. Every dialect and the peer codec report call errors in one. */
typedef struct sl_grpc_status {
    int code;          /* sl_grpc_code */
    int http_status;   /* what the HTTP gateway answers with it */
    char message[256];
} sl_grpc_status;

/* Fill *st (printf-style message); http_status from grpc-gateway's mapping of the code. */
void sl_grpc_status_set(sl_grpc_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* OK, HTTP 200, no message. */
void sl_grpc_status_ok(sl_grpc_status *st);
/* A size error: RESOURCE_EXHAUSTED as grpc-go reports it, but HTTP 413 (which says what happened
 * better than grpc-gateway's 429 for that code). Returns rc, for `return too_large(...)`. */
int sl_grpc_status_too_large(sl_grpc_status *st, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One decoded message. `data` points into the caller's buffer. */
typedef struct sl_grpc_msg {
    const uint8_t *data;
    size_t len;
    bool compressed;
    size_t frame_len; /* header + message: bytes to consume once decoded; when -EAGAIN, the total
                         bytes needed so far known (5 until the header is complete) */
} sl_grpc_msg;

/*
 * Decode the message at the start of src[0..len).
 *   0        a whole message: *out filled, consume out->frame_len bytes
 *   -EAGAIN  not all of it is here yet (out->frame_len says how many bytes the frame needs)
 *   -EMSGSIZE  its length exceeds max_msg (known from the header alone: refuse before buffering)
 *   -EPROTO  the flag byte is neither 0 nor 1
 * On an error, *err is a static message.
 */
int sl_grpc_frame_decode(const uint8_t *src, size_t len, size_t max_msg, sl_grpc_msg *out,
                         const char **err);

/* Write the 5-byte header for a message of msg_len bytes. -EMSGSIZE if it exceeds 4 GiB - 1. */
int sl_grpc_frame_header(uint8_t hdr[SL_GRPC_HDR_LEN], size_t msg_len, bool compressed);

/* Append one framed message (uncompressed) to out. 0 or -ENOMEM / -EMSGSIZE. */
int sl_grpc_frame_append(sl_buf *out, const void *msg, size_t len);

/* Framing in place, for encoders that write the message straight into `out`:
 *   size_t mark;
 *   sl_grpc_frame_begin(out, &mark); <append the message>; sl_grpc_frame_end(out, mark);
 * begin reserves the header; end fills it with the length appended since. */
int sl_grpc_frame_begin(sl_buf *out, size_t *mark);
int sl_grpc_frame_end(sl_buf *out, size_t mark);

/* Percent-encode a status message for the grpc-message trailer: bytes outside 0x20..0x7E and '%'
 * become %XX. 0 or -ENOMEM / -EMSGSIZE. */
int sl_grpc_message_encode(const char *msg, size_t len, sl_buf *out);

/* Decode a grpc-message value. Malformed escapes are kept as they are (the spec asks receivers to
 * be lenient). Appends the decoded bytes and a terminating NUL not counted in out->len. */
int sl_grpc_message_decode(const char *val, size_t len, sl_buf *out);

/* Parse a grpc-timeout value ("100m", "5S": at most 8 digits and a unit of H M S m u n) into
 * milliseconds, rounding sub-millisecond timeouts up to 1 ms. 0 or -EINVAL. */
int sl_grpc_timeout_parse(const char *val, size_t len, int64_t *ms);

/* Is this content-type one sluice serves? "application/grpc" or "application/grpc+proto",
 * optionally followed by ";parameters". */
bool sl_grpc_content_type_ok(const char *val, size_t len);

#endif

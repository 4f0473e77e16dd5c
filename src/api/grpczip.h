/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC message compression (the spec's "Message-Encoding"): the encodings sluice accepts and
 * answers with, gzip (RFC 1952) and deflate (the zlib format, RFC 1950, as grpc-go and grpc-core
 * mean it), both through zlib. Pure functions over buffers.
 *
 * A compressed request message is inflated into a buffer capped at the largest message the
 * service accepts uncompressed: a small frame that inflates past the cap (a decompression bomb)
 * is refused with -EMSGSIZE after at most cap + one zlib chunk of output, never buffered whole.
 */
#ifndef SLUICE_API_GRPCZIP_H
#define SLUICE_API_GRPCZIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef enum sl_grpczip_enc {
    SL_GRPCZIP_IDENTITY = 0,
    SL_GRPCZIP_GZIP,
    SL_GRPCZIP_DEFLATE,
    SL_GRPCZIP_UNSUPPORTED, /* a name sluice does not implement (snappy, zstd, ...) */
} sl_grpczip_enc;

/* What every gRPC answer advertises in grpc-accept-encoding: SL_GRPC_ACCEPT_ENCODING
 * (wire/grpc_frame.h), the three names below. */

/* The encoding a grpc-encoding value names (absent or "identity": IDENTITY). Case-sensitive, as
 * the spec's names are. */
sl_grpczip_enc sl_grpczip_parse(const char *val, size_t len);

/* The name to send in grpc-encoding ("gzip", "deflate"; "identity" for IDENTITY). */
const char *sl_grpczip_name(sl_grpczip_enc e);

/* Whether a grpc-accept-encoding value (a comma-separated list, spaces allowed) names e. */
bool sl_grpczip_accepts(const char *val, size_t len, sl_grpczip_enc e);

/* Inflate `in` (encoded with e: GZIP or DEFLATE) and append the result to out.
 *   0          done: out holds the whole message
 *   -EMSGSIZE  it inflates past max_out bytes (nothing more is produced)
 *   -EINVAL    not a valid stream of that encoding (corrupt, truncated, or trailing bytes)
 *   -ENOMEM    out could not grow
 */
int sl_grpczip_inflate(sl_grpczip_enc e, const uint8_t *in, size_t n, size_t max_out, sl_buf *out);

/* Compress `in` with e (GZIP or DEFLATE) and append the result to out. 0, -ENOMEM, -EINVAL. */
int sl_grpczip_deflate(sl_grpczip_enc e, const uint8_t *in, size_t n, sl_buf *out);

#endif

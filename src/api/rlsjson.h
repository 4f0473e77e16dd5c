/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_rlsjson: envoyproxy/ratelimit's `POST /json`, as a transcoder around the RLS codec
 * (api/rls.h): a RateLimitRequest in protojson (lowerCamelCase or proto field names, enums by name
 * or number, 64-bit integers as numbers or strings) becomes the protobuf message sl_rls_begin
 * reads, and the RateLimitResponse sl_rls_encode writes becomes protojson (lowerCamelCase, enums
 * by name, Durations as "1.5s", fields at their default left out), so both dialects share every
 * decision and every answer. Pure: bytes in, bytes out.
 */
#ifndef SLUICE_API_RLSJSON_H
#define SLUICE_API_RLSJSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define SL_RLSJSON_PATH "/json"

/* The protobuf RateLimitRequest for a JSON one, appended to out. 0, -EINVAL with a static reason
 * in *err (not JSON, a field of the wrong type, an unknown unit name), or -ENOMEM. */
int sl_rlsjson_request(const char *json, size_t len, sl_buf *out, const char **err);

/* The JSON for a protobuf RateLimitResponse, appended to out; *overall: its overall_code (0
 * UNKNOWN, 1 OK, 2 OVER_LIMIT). 0, -EINVAL (not a RateLimitResponse) or -ENOMEM. */
int sl_rlsjson_response(const uint8_t *pb, size_t len, sl_buf *out, int *overall);

#endif

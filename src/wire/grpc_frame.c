/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC message framing, status codes, grpc-message percent-encoding and small header parsers
 * (see grpc_frame.h). The length in a frame header is attacker-controlled: it is checked against
 * the caller's maximum as soon as the 5 header bytes are in, so a connection never buffers a
 * message it would refuse anyway.
 */
#include "wire/grpc_frame.h"

#include "base/hex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *sl_grpc_code_name(int code)
{
    if (code < 0 || (size_t)code >= sizeof code_names / sizeof code_names[0])
        return NULL;
    return code_names[code];
}

int sl_grpc_code_to_http(int code)
{
    /* grpc-gateway's runtime.HTTPStatusFromCode, so HTTP clients of Gubernator see the same
     * statuses from sluiced. 499 is nginx's "client closed request". */
    switch (code) {
    case SL_GRPC_OK: return 200;
    case SL_GRPC_CANCELLED: return 499;
    case SL_GRPC_UNKNOWN: return 500;
    case SL_GRPC_INVALID_ARGUMENT: return 400;
    case SL_GRPC_DEADLINE_EXCEEDED: return 504;
    case SL_GRPC_NOT_FOUND: return 404;
    case SL_GRPC_ALREADY_EXISTS: return 409;
    case SL_GRPC_PERMISSION_DENIED: return 403;
    case SL_GRPC_RESOURCE_EXHAUSTED: return 429;
    case SL_GRPC_FAILED_PRECONDITION: return 400;
    case SL_GRPC_ABORTED: return 409;
    case SL_GRPC_OUT_OF_RANGE: return 400;
    case SL_GRPC_UNIMPLEMENTED: return 501;
    case SL_GRPC_INTERNAL: return 500;
    case SL_GRPC_UNAVAILABLE: return 503;
    case SL_GRPC_DATA_LOSS: return 500;
    case SL_GRPC_UNAUTHENTICATED: return 401;
    default: return 500;
    }
}

int sl_grpc_frame_decode(const uint8_t *src, size_t len, size_t max_msg, sl_grpc_msg *out,
                         const char **err)
{
    *err = NULL;
    out->data = NULL;
    out->len = 0;
    out->compressed = false;
    out->frame_len = SL_GRPC_HDR_LEN;
    if (len < 1)
        return -EAGAIN;
    if (src[0] > 1) {
        *err = "gRPC frame: compressed flag must be 0 or 1";
        return -EPROTO;
    }
    if (len < SL_GRPC_HDR_LEN)
        return -EAGAIN;
    uint32_t n = (uint32_t)src[1] << 24 | (uint32_t)src[2] << 16 | (uint32_t)src[3] << 8 |
                 (uint32_t)src[4];
    if ((uint64_t)n > (uint64_t)max_msg) {
        *err = "gRPC frame: message larger than the maximum";
        return -EMSGSIZE;
    }
    out->compressed = src[0] == 1;
    out->frame_len = SL_GRPC_HDR_LEN + (size_t)n;
    if (len - SL_GRPC_HDR_LEN < (size_t)n)
        return -EAGAIN;
    out->data = src + SL_GRPC_HDR_LEN;
    out->len = n;
    return 0;
}

int sl_grpc_frame_header(uint8_t hdr[SL_GRPC_HDR_LEN], size_t msg_len, bool compressed)
{
    if ((uint64_t)msg_len > UINT32_MAX)
        return -EMSGSIZE;
    hdr[0] = compressed ? 1 : 0;
    hdr[1] = (uint8_t)(msg_len >> 24);
    hdr[2] = (uint8_t)(msg_len >> 16);
    hdr[3] = (uint8_t)(msg_len >> 8);
    hdr[4] = (uint8_t)msg_len;
    return 0;
}

int sl_grpc_frame_append(sl_buf *out, const void *msg, size_t len)
{
    uint8_t hdr[SL_GRPC_HDR_LEN];
    int rc = sl_grpc_frame_header(hdr, len, false);
    if (rc)
        return rc;
    rc = sl_buf_reserve(out, SL_GRPC_HDR_LEN + len);
    if (rc)
        return rc;
    sl_buf_append(out, hdr, sizeof hdr);
    return sl_buf_append(out, msg, len);
}

int sl_grpc_frame_begin(sl_buf *out, size_t *mark)
{
    static const uint8_t zero[SL_GRPC_HDR_LEN];
    *mark = out->len;
    return sl_buf_append(out, zero, sizeof zero);
}

int sl_grpc_frame_end(sl_buf *out, size_t mark)
{
    if (mark > out->len || out->len - mark < SL_GRPC_HDR_LEN)
        return -EINVAL;
    return sl_grpc_frame_header(out->data + mark, out->len - mark - SL_GRPC_HDR_LEN, false);
}

int sl_grpc_message_encode(const char *msg, size_t len, sl_buf *out)
{
    for (size_t i = 0; i < len;) {
        /* copy the longest run that needs no escaping in one append */
        size_t j = i;
        while (j < len && (uint8_t)msg[j] >= 0x20 && (uint8_t)msg[j] <= 0x7e && msg[j] != '%')
            j++;
        if (j > i) {
            int rc = sl_buf_append(out, msg + i, j - i);
            if (rc)
                return rc;
            i = j;
            continue;
        }
        uint8_t c = (uint8_t)msg[i++];
        char e[3] = {'%'};
        sl_hex_put(e + 1, c, true);
        int rc = sl_buf_append(out, e, 3);
        if (rc)
            return rc;
    }
    return 0;
}

int sl_grpc_message_decode(const char *val, size_t len, sl_buf *out)
{
    int rc = sl_buf_reserve(out, len + 1);
    if (rc)
        return rc;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)val[i];
        if (c == '%' && i + 2 < len) {
            int v = sl_hex_byte(val + i + 1);
            if (v >= 0) {
                c = (uint8_t)v;
                i += 2;
            }
        }
        out->data[out->len++] = c;
    }
    out->data[out->len] = 0;
    return 0;
}

int sl_grpc_timeout_parse(const char *val, size_t len, int64_t *ms)
{
    if (len < 2 || len > 9)
        return -EINVAL;
    int64_t v = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (val[i] < '0' || val[i] > '9')
            return -EINVAL;
        v = v * 10 + (val[i] - '0');
    }
    /* at most 8 digits: v < 1e8, so every product below fits in int64 */
    switch (val[len - 1]) {
    case 'H': *ms = v * 3600 * 1000; break;
    case 'M': *ms = v * 60 * 1000; break;
    case 'S': *ms = v * 1000; break;
    case 'm': *ms = v; break;
    case 'u': *ms = (v + 999) / 1000; break;
    case 'n': *ms = (v + 999999) / 1000000; break;
    default: return -EINVAL;
    }
    return 0;
}

bool sl_grpc_content_type_ok(const char *val, size_t len)
{
    static const char base[] = "application/grpc";
    const size_t bl = sizeof base - 1;
    if (len < bl || strncasecmp(val, base, bl) != 0)
        return false;
    const char *rest = val + bl;
    size_t rl = len - bl;
    if (rl >= 6 && strncasecmp(rest, "+proto", 6) == 0) {
        rest += 6;
        rl -= 6;
    }
    return rl == 0 || rest[0] == ';' || rest[0] == ' ';
}

void sl_grpc_status_set(sl_grpc_status *st, int code, const char *fmt, ...)
{
    st->code = code;
    st->http_status = sl_grpc_code_to_http(code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
}

void sl_grpc_status_ok(sl_grpc_status *st)
{
    st->code = SL_GRPC_OK;
    st->http_status = 200;
    st->message[0] = 0;
}

int sl_grpc_status_too_large(sl_grpc_status *st, int rc, const char *fmt, ...)
{
    st->code = SL_GRPC_RESOURCE_EXHAUSTED;
    st->http_status = 413;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC message compression over zlib (see grpczip.h). */
#include "api/grpczip.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

/* zlib's windowBits: 15 (a 32 KiB window) for the zlib format; +16 asks for the gzip wrapper. */
#define WBITS_ZLIB 15
#define WBITS_GZIP (15 + 16)
/* Output grown by at most this much per inflate step, so a bomb stops near the cap. */
#define CHUNK 16384

static bool name_is(const char *val, size_t len, const char *name)
{
    size_t n = strlen(name);
    return len == n && memcmp(val, name, n) == 0;
}

sl_grpczip_enc sl_grpczip_parse(const char *val, size_t len)
{
    if (!val || !len || name_is(val, len, "identity"))
        return SL_GRPCZIP_IDENTITY;
    if (name_is(val, len, "gzip"))
        return SL_GRPCZIP_GZIP;
    if (name_is(val, len, "deflate"))
        return SL_GRPCZIP_DEFLATE;
    return SL_GRPCZIP_UNSUPPORTED;
}

const char *sl_grpczip_name(sl_grpczip_enc e)
{
    switch (e) {
    case SL_GRPCZIP_GZIP: return "gzip";
    case SL_GRPCZIP_DEFLATE: return "deflate";
    default: return "identity";
    }
}

bool sl_grpczip_accepts(const char *val, size_t len, sl_grpczip_enc e)
{
    if (e == SL_GRPCZIP_IDENTITY)
        return true;
    if (!val || e == SL_GRPCZIP_UNSUPPORTED)
        return false;
    const char *want = sl_grpczip_name(e);
    size_t i = 0;
    while (i < len) {
        while (i < len && (val[i] == ' ' || val[i] == '\t' || val[i] == ','))
            i++;
        size_t s = i;
        while (i < len && val[i] != ',' && val[i] != ' ' && val[i] != '\t')
            i++;
        if (i > s && name_is(val + s, i - s, want))
            return true;
    }
    return false;
}

static int wbits(sl_grpczip_enc e)
{
    return e == SL_GRPCZIP_GZIP ? WBITS_GZIP : e == SL_GRPCZIP_DEFLATE ? WBITS_ZLIB : 0;
}

int sl_grpczip_inflate(sl_grpczip_enc e, const uint8_t *in, size_t n, size_t max_out, sl_buf *out)
{
    int wb = wbits(e);
    if (!wb || n > UINT32_MAX)
        return -EINVAL;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, wb) != Z_OK)
        return -ENOMEM;
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    size_t produced = 0;
    int rc = 0;
    for (;;) {
        /* Room for one more chunk, but never past max_out + 1: one byte over the cap proves the
         * message too large without inflating the rest. */
        size_t room = max_out + 1 - produced;
        if (room > CHUNK)
            room = CHUNK;
        if (sl_buf_reserve(out, room)) {
            rc = -ENOMEM;
            break;
        }
        z.next_out = out->data + out->len;
        z.avail_out = (uInt)room;
        int zr = inflate(&z, Z_NO_FLUSH);
        size_t got = room - z.avail_out;
        out->len += got;
        produced += got;
        if (produced > max_out) {
            rc = -EMSGSIZE;
            break;
        }
        if (zr == Z_STREAM_END) {
            rc = z.avail_in ? -EINVAL : 0; /* bytes after the end are not ours to ignore */
            break;
        }
        if (zr == Z_MEM_ERROR) {
            rc = -ENOMEM;
            break;
        }
        if (zr != Z_OK && !(zr == Z_BUF_ERROR && z.avail_out == 0)) {
            rc = -EINVAL; /* corrupt, or truncated (Z_BUF_ERROR with room left: no more input) */
            break;
        }
        if (got == 0 && z.avail_in == 0) {
            rc = -EINVAL;
            break;
        }
    }
    inflateEnd(&z);
    return rc;
}

int sl_grpczip_deflate(sl_grpczip_enc e, const uint8_t *in, size_t n, sl_buf *out)
{
    int wb = wbits(e);
    if (!wb || n > UINT32_MAX)
        return -EINVAL;
    z_stream z;
    memset(&z, 0, sizeof z);
    /* level 1: an answer is small and the CPU is the decision's; memLevel 8 is zlib's default */
    if (deflateInit2(&z, 1, Z_DEFLATED, wb, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t bound = deflateBound(&z, (uLong)n);
    int rc = sl_buf_reserve(out, bound);
    if (!rc) {
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)n;
        z.next_out = out->data + out->len;
        z.avail_out = (uInt)bound;
        if (deflate(&z, Z_FINISH) == Z_STREAM_END)
            out->len += bound - z.avail_out;
        else
            rc = -ENOMEM;
    }
    deflateEnd(&z);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The protobuf wire format's slow paths: skipping an unknown field and the top-level field count
 * (the rest of sl_pb is inline in pbwire.h). */
#include "wire/pbwire.h"

#include <errno.h>

bool sl_pb_skip(sl_pb_rd *r, unsigned wt)
{
    uint64_t v;
    sl_pb_rd sub;
    switch (wt) {
    case SL_PB_VARINT:
        return sl_pb_varint(r, &v);
    case SL_PB_I64:
        if (r->end - r->p < 8)
            return false;
        r->p += 8;
        return true;
    case SL_PB_LEN:
        return sl_pb_bytes(r, &sub);
    case SL_PB_I32:
        if (r->end - r->p < 4)
            return false;
        r->p += 4;
        return true;
    default:
        return false; /* groups (3, 4) and 6, 7 */
    }
}

int sl_pb_count_field(const uint8_t *msg, size_t n, uint32_t field, size_t stop_after,
                      size_t *count)
{
    sl_pb_rd r = {msg, msg + n};
    *count = 0;
    while (r.p < r.end) {
        uint64_t tag, v;
        if (!sl_pb_varint(&r, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
            return -EINVAL;
        if ((tag & 7) != SL_PB_LEN) {
            if (!sl_pb_skip(&r, (unsigned)(tag & 7)))
                return -EINVAL; /* truncated, or a group (none in proto3), or not a wire type */
            continue;
        }
        /* a length of any width here: protobuf-c's scan takes them */
        if (!sl_pb_varint(&r, &v) || v > (uint64_t)(r.end - r.p))
            return -EINVAL;
        r.p += (size_t)v;
        if ((tag >> 3) == field && ++*count > stop_after)
            return 0;
    }
    return 0;
}

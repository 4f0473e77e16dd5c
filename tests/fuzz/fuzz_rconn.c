/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the Redis store's reply reader as a connection drives it (redis/rconn.c:
 * deliver feeds what the socket read to sl_rconn_reader_feed and takes replies with
 * sl_rconn_reader_next until none is complete): hiredis's reader with the connection's two bounds,
 * in_max bytes on the wire and in_max / 64 announced array elements per reply. The first two bytes
 * pick in_max (64 B .. 64 KiB, or 64 MiB, the default) and the size of the pieces the rest arrives
 * in. Properties: the replies delivered, and whether the stream ends in an error, are the same
 * whether the bytes come whole or in pieces; no reply holds more elements than the bound; a reply
 * refused says why. A broken property traps; ASan catches overruns, leaks, and an allocation
 * past -rss_limit_mb (what an unbounded "*300000000" would make).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis/rconn.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Elements in a reply (every level), and a digest of it. */
static uint64_t walk(const redisReply *r, uint64_t *digest, int depth)
{
    CHECK(depth < 16);
    *digest = *digest * 1000003u + (uint64_t)r->type;
    switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        CHECK(r->str != NULL && r->str[r->len] == 0);
        *digest = *digest * 31 + r->len + (r->len ? (uint8_t)r->str[0] : 0);
        return 0;
    case REDIS_REPLY_INTEGER:
        *digest = *digest * 31 + (uint64_t)r->integer;
        return 0;
    case REDIS_REPLY_NIL:
        return 0;
    case REDIS_REPLY_ARRAY: {
        uint64_t n = r->elements;
        CHECK(r->elements == 0 || r->element != NULL);
        for (size_t i = 0; i < r->elements; i++)
            n += walk(r->element[i], digest, depth + 1);
        return n;
    }
    default:
        __builtin_trap();
    }
}

static int run(const uint8_t *p, size_t n, size_t piece, size_t in_max, size_t *replies,
               uint64_t *digest)
{
    sl_rconn_reader *r;
    CHECK(sl_rconn_reader_new(in_max, &r) == 0);
    *replies = 0;
    *digest = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc >= 0; i += piece) {
        size_t k = n - i < piece ? n - i : piece;
        CHECK(sl_rconn_reader_feed(r, p + i, k) == 0);
        for (;;) {
            void *reply;
            const char *why;
            rc = sl_rconn_reader_next(r, &reply, &why);
            if (rc <= 0) {
                if (rc == -EPROTO)
                    CHECK(why != NULL && why[0]);
                else
                    CHECK(rc == 0 || rc == -EMSGSIZE);
                break;
            }
            CHECK(reply != NULL);
            uint64_t elements = walk(reply, digest, 0);
            CHECK(elements <= (in_max ? in_max : (size_t)64 << 20) / 64);
            (*replies)++;
            freeReplyObject(reply);
        }
    }
    sl_rconn_reader_free(r);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t in_max = data[0] == 0xff ? 0 : (size_t)64 << (data[0] % 11); /* 64 B .. 64 KiB */
    size_t piece = (size_t)data[1] % 29 + 1;
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    size_t rw, rp;
    uint64_t dw, dp;
    int whole = run(p, n, n ? n : 1, in_max, &rw, &dw);
    int cut = run(p, n, piece, in_max, &rp, &dp);
    CHECK(rw == rp && dw == dp);
    CHECK((whole < 0) == (cut < 0));
    return 0;
}

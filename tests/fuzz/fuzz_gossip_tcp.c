/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the gossip push/pull stream as gossipnode reads it: the framing reader
 * (gossip/swimwire's sl_swimwire_frame: a u32 big-endian length, then the message) is fed the
 * input in chunks whose sizes come from the input itself, as TCP may cut it; a whole frame is
 * opened with the fixed test key ring when the first byte's low bit asks for a ring (sealed mode),
 * checked by a replay guard, and given to a live swim node as a stream message, answered through
 * a reply that must itself frame within the cap. The reader never accepts a length of 0 or over
 * the cap, never writes past the room it gave, and after a whole frame or an error takes no more.
 * The seed corpus (tests/fuzz/corpus/fuzz_gossip_tcp/) holds framed PUSH messages, plain and
 * sealed with the test key.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/keyring.h"
#include "gossip/swim.h"
#include "gossip/swimmeta.h"
#include "gossip/swimwire.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)
#define CAP 65536

#define TEST_RING \
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n" \
    "f0e0d0c0b0a090807060504030201000f0e0d0c0b0a090807060504030201000\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, const char *addr, const uint8_t *p, size_t len) {}
static void sink_stream(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    CHECK(len <= CAP);
}
static void reply(void *ctx, const uint8_t *p, size_t len)
{
    CHECK(len <= CAP);
    sl_swimwire_msg m;
    const char *why;
    CHECK(sl_swimwire_decode(p, len, CAP, &m, &why) == 0 && m.type == SL_SWIMWIRE_PULL);
}

static int check_member(void *ctx, const char *addr, size_t alen, const uint8_t *meta, size_t mlen)
{
    const char *why;
    return sl_swimmeta_check_member(addr, alen, meta, mlen, &why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl_keyring *ring;
    char err[128];
    if (!ring)
        CHECK(sl_keyring_parse(TEST_RING, strlen(TEST_RING), &ring, err, sizeof err) == 0);
    if (size < 2)
        return 0;
    int sealed = data[0] & 1;
    unsigned chunk = (data[0] >> 1) + 1; /* 1..128 bytes a read */
    data++;
    size--;

    sl_swim_config c = {.name = "fuzz", .addr = "127.0.0.1:7946", .max_members = 16,
                        .max_stream_bytes = CAP,
                        .cb = {NULL, sink, sink_stream, NULL, check_member}};
    sl_swim *s;
    CHECK(sl_swim_new(&c, 1000, &s, err, sizeof err) == 0);
    sl_keyring_guard *g;
    CHECK(sl_keyring_guard_new(30000, 4, &g) == 0);

    sl_swimwire_frame f = {0};
    size_t off = 0;
    int r = 0;
    while (off < size && r == 0) {
        uint8_t *p;
        size_t room;
        sl_swimwire_frame_room(&f, &p, &room);
        CHECK(p && room > 0);
        size_t n = size - off < chunk ? size - off : chunk;
        if (n > room)
            n = room;
        memcpy(p, data + off, n);
        off += n;
        r = sl_swimwire_frame_got(&f, n, CAP + SL_KEYRING_MAX_OVERHEAD);
        CHECK(r == 0 || r == 1 || r == -EMSGSIZE || r == -ENOMEM);
    }
    if (r == 1) {
        CHECK(f.want >= 1 && f.want <= CAP + SL_KEYRING_MAX_OVERHEAD && f.got == f.want);
        /* a whole frame takes no more */
        uint8_t *p;
        size_t room;
        sl_swimwire_frame_room(&f, &p, &room);
        CHECK(room == 0);
        CHECK(sl_swimwire_frame_got(&f, 1, CAP) == -EMSGSIZE);
        const uint8_t *msg = f.buf;
        size_t len = f.want;
        uint8_t *plain = NULL;
        int ok = 1;
        if (sealed) {
            plain = malloc(len);
            CHECK(plain);
            sl_keyring_sealed info;
            int n = sl_keyring_open(ring, f.buf, len, plain, len, &info);
            ok = n >= 0 && sl_keyring_guard_check(g, &info, info.ts_ms) == 0;
            msg = plain;
            len = n >= 0 ? (size_t)n : 0;
        }
        if (ok)
            sl_swim_recv_stream(s, "127.0.0.2:40000", msg, len, 1000, reply, NULL);
        free(plain);
    }
    sl_swimwire_frame_free(&f);
    for (uint64_t t = 1000; t < 10000; t += 500)
        sl_swim_tick(s, t);
    CHECK(sl_swim_member_count(s) <= 16);
    sl_keyring_guard_free(g);
    sl_swim_free(s);
    return 0;
}

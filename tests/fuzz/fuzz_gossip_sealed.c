/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for sealed gossip packets (gossip/keyring): arbitrary bytes are opened with a
 * fixed two-key test ring. Whatever opens names a sender of 1..64 printable bytes, has exactly
 * the plaintext length the format allows, passes or fails the replay guard consistently (a second
 * look at the same packet is always a replay), seals again under the same sender and time to a
 * packet of the same length that opens to the same plaintext, and is then handed to a live swim
 * node as the sealed sender's datagram. Bytes that do not open are refused with -EBADMSG (or
 * -EMSGSIZE), never read past. The seed corpus (tests/fuzz/corpus/fuzz_gossip_sealed/) holds
 * packets sealed with the test key, so the fuzzer starts past the tag check.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/keyring.h"
#include "gossip/swim.h"
#include "gossip/swimmeta.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

/* The test key ring; tests/fuzz/corpus/fuzz_gossip_sealed/ is sealed with its first key. */
#define TEST_RING \
    "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n" \
    "f0e0d0c0b0a090807060504030201000f0e0d0c0b0a090807060504030201000\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void sink(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    CHECK(len <= SL_SWIMWIRE_MAX_UDP);
}

static void sink_stream(void *ctx, const char *addr, const uint8_t *p, size_t len) {}

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
    uint8_t *plain = malloc(size + 1), *again = malloc(size + SL_KEYRING_MAX_OVERHEAD + 1),
            *plain2 = malloc(size + 1);
    CHECK(plain && again && plain2);
    sl_keyring_sealed info;
    int n = sl_keyring_open(ring, data, size, plain, size, &info);
    if (n < 0) {
        CHECK(n == -EBADMSG || n == -EMSGSIZE);
        goto out;
    }
    size_t sl = strlen(info.sender);
    CHECK(sl >= 1 && sl <= SL_KEYRING_MAX_SENDER);
    for (size_t i = 0; i < sl; i++)
        CHECK(info.sender[i] > 0x20 && info.sender[i] < 0x7f);
    CHECK((size_t)n + SL_KEYRING_OVERHEAD + sl == size);
    /* a smaller output buffer is refused, not overrun */
    if (n > 0)
        CHECK(sl_keyring_open(ring, data, size, plain2, (size_t)n - 1, NULL) == -EMSGSIZE);

    /* the replay guard: in the window it is fresh once, then a replay; outside, stale */
    sl_keyring_guard *g;
    CHECK(sl_keyring_guard_new(30000, 4, &g) == 0);
    int r = sl_keyring_guard_check(g, &info, info.ts_ms);
    if (info.ts_ms == 0) {
        CHECK(r == -ESTALE);
    } else {
        CHECK(r == 0);
        CHECK(sl_keyring_guard_check(g, &info, info.ts_ms) == -EALREADY);
    }
    if (info.ts_ms < UINT64_MAX - 40000)
        CHECK(sl_keyring_guard_check(g, &info, info.ts_ms + 30001) == -ESTALE);
    sl_keyring_guard_free(g);

    /* sealed again under the same sender and time: the same length, the same plaintext */
    int m = sl_keyring_seal(ring, info.sender, info.ts_ms, plain, (size_t)n, again,
                            size + SL_KEYRING_MAX_OVERHEAD);
    CHECK(m == (int)size);
    sl_keyring_sealed info2;
    CHECK(sl_keyring_open(ring, again, (size_t)m, plain2, size, &info2) == n);
    CHECK(memcmp(plain, plain2, (size_t)n) == 0);
    CHECK(strcmp(info.sender, info2.sender) == 0 && info.ts_ms == info2.ts_ms);

    /* and the plaintext goes to the protocol as that sender's datagram */
    sl_swim_config c = {.name = "fuzz", .addr = "127.0.0.1:7946", .max_members = 16,
                        .cb = {NULL, sink, sink_stream, NULL, check_member}};
    sl_swim *s;
    CHECK(sl_swim_new(&c, 1000, &s, err, sizeof err) == 0);
    sl_swim_recv_sealed(s, "127.0.0.2:7946", info.sender, plain, (size_t)n, 1000);
    for (uint64_t t = 1000; t < 20000; t += 500)
        sl_swim_tick(s, t);
    CHECK(sl_swim_member_count(s) <= 16);
    sl_swim_free(s);
out:
    free(plain);
    free(plain2);
    free(again);
    return 0;
}

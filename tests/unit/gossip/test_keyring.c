/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyring tests: a key ring file parses (comments, blank lines, CRLF) and bad ones are refused
 * with the line; a sealed packet opens to the same bytes and nothing else does (another key, a
 * flipped bit anywhere, a truncation); rotation: a ring with the new key first still opens what
 * the old ring seals, and the old ring refuses the new key's packets until it has the key too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gossip/keyring.h"

#define K1 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define T0 1700000000000ull /* a fixed sealing time */
#define K2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static sl_keyring *ring(const char *text)
{
    sl_keyring *k;
    char err[128];
    assert_int_equal(sl_keyring_parse(text, strlen(text), &k, err, sizeof err), 0);
    return k;
}

static void test_parse(void **state)
{
    sl_keyring *k = ring("# gossip keys\n\n" K1 "\r\n  " K2 "  \n");
    assert_int_equal(sl_keyring_count(k), 2);
    sl_keyring_free(k);
    char err[128];
    const char *bad[] = {"", "# nothing\n", K1 "0\n"};
    assert_int_equal(sl_keyring_parse(bad[0], 0, &k, err, sizeof err), -EINVAL);
    assert_int_equal(sl_keyring_parse(bad[1], strlen(bad[1]), &k, err, sizeof err), -EINVAL);
    assert_string_equal(err, "key ring: no key");
    assert_int_equal(sl_keyring_parse(bad[2], strlen(bad[2]), &k, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 1"));
    char notHex[] = K1;
    notHex[5] = 'g';
    assert_int_equal(sl_keyring_parse(notHex, strlen(notHex), &k, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a hex digit"));
    char many[20 * 66];
    many[0] = '\0';
    for (int i = 0; i < 17; i++)
        strcat(many, K1 "\n");
    assert_int_equal(sl_keyring_parse(many, strlen(many), &k, err, sizeof err), -EINVAL);

    char path[] = "/tmp/sl_keyring_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, K2 "\n", 65), 65);
    close(fd);
    assert_int_equal(sl_keyring_load(path, &k, err, sizeof err), 0);
    assert_int_equal(sl_keyring_count(k), 1);
    sl_keyring_free(k);
    unlink(path);
    assert_true(sl_keyring_load(path, &k, err, sizeof err) < 0);
}

static void test_seal_open(void **state)
{
    sl_keyring *k = ring(K1 "\n");
    const uint8_t msg[] = "SW\x01\x05\0\0 some gossip";
    uint8_t sealed[128], plain[128];
    int n = sl_keyring_seal(k, "node-1", T0, msg, sizeof msg, sealed, sizeof sealed);
    assert_int_equal(n, (int)sizeof msg + SL_KEYRING_OVERHEAD + 6);
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, NULL), (int)sizeof msg);
    assert_memory_equal(plain, msg, sizeof msg);
    /* two seals of the same bytes differ (random nonce) */
    uint8_t again[128];
    assert_int_equal(sl_keyring_seal(k, "node-1", T0, msg, sizeof msg, again, sizeof again), n);
    assert_memory_not_equal(again, sealed, (size_t)n);
    for (int i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            sealed[i] ^= (uint8_t)(1 << bit);
            assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, NULL), -EBADMSG);
            sealed[i] ^= (uint8_t)(1 << bit);
        }
    for (int cut = 0; cut < n; cut++)
        assert_true(sl_keyring_open(k, sealed, (size_t)cut, plain, sizeof plain, NULL) < 0);
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, 3, NULL), -EMSGSIZE);
    assert_int_equal(sl_keyring_seal(k, "node-1", T0, msg, sizeof msg, sealed, sizeof msg), -EMSGSIZE);
    sl_keyring_free(k);
}

static void test_rotation(void **state)
{
    sl_keyring *old = ring(K1 "\n"), *mid = ring(K1 "\n" K2 "\n"), *next = ring(K2 "\n" K1 "\n"),
               *last = ring(K2 "\n");
    const uint8_t msg[] = "hello";
    uint8_t s[64], p[64];
    /* step 1: the new key added second: everyone still seals with K1 */
    int n = sl_keyring_seal(mid, "node-1", T0, msg, sizeof msg, s, sizeof s);
    assert_true(sl_keyring_open(old, s, (size_t)n, p, sizeof p, NULL) > 0);
    /* step 2: the new key first on some nodes: nodes at step 1 open it, nodes at step 0 do not */
    n = sl_keyring_seal(next, "node-1", T0, msg, sizeof msg, s, sizeof s);
    assert_true(sl_keyring_open(mid, s, (size_t)n, p, sizeof p, NULL) > 0);
    assert_int_equal(sl_keyring_open(old, s, (size_t)n, p, sizeof p, NULL), -EBADMSG);
    /* step 3: the old key dropped: packets of nodes still at step 2 open */
    assert_true(sl_keyring_open(last, s, (size_t)n, p, sizeof p, NULL) > 0);
    n = sl_keyring_seal(old, "node-1", T0, msg, sizeof msg, s, sizeof s);
    assert_int_equal(sl_keyring_open(last, s, (size_t)n, p, sizeof p, NULL), -EBADMSG);
    sl_keyring_free(old);
    sl_keyring_free(mid);
    sl_keyring_free(next);
    sl_keyring_free(last);
}

/* The sender and the time are authenticated: a packet opens to them, and changing either (or
 * the format byte) breaks the tag; the old format-1 packet is refused. */
static void test_sender_and_time_sealed(void **state)
{
    sl_keyring *k = ring(K1 "\n");
    const uint8_t msg[] = "SW\x01\x05\0\0";
    uint8_t sealed[128], plain[128];
    sl_keyring_sealed info;
    int n = sl_keyring_seal(k, "node-7", T0 + 5, msg, sizeof msg, sealed, sizeof sealed);
    assert_true(n > 0);
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, &info),
                     (int)sizeof msg);
    assert_string_equal(info.sender, "node-7");
    assert_true(info.ts_ms == T0 + 5);
    sealed[2] = 'm'; /* "mode-7" */
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, &info), -EBADMSG);
    sealed[2] = 'n';
    sealed[2 + 6 + 7] ^= 1; /* the timestamp's last byte */
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, &info), -EBADMSG);
    sealed[2 + 6 + 7] ^= 1;
    sealed[0] = 0x01;
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, &info), -EBADMSG);
    sealed[0] = 0x02;
    sealed[1] = 0; /* no sender */
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, &info), -EBADMSG);
    sealed[1] = 200; /* past the packet */
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain, &info), -EBADMSG);
    assert_int_equal(sl_keyring_seal(k, "", T0, msg, sizeof msg, sealed, sizeof sealed), -EINVAL);
    sl_keyring_free(k);
}

static sl_keyring_sealed pkt(const char *sender, uint64_t ts, uint8_t nonce)
{
    sl_keyring_sealed i;
    memset(&i, 0, sizeof i);
    snprintf(i.sender, sizeof i.sender, "%s", sender);
    i.ts_ms = ts;
    i.nonce[0] = nonce;
    i.nonce[7] = (uint8_t)(nonce * 31);
    return i;
}

/* The replay window on a virtual clock: an exact replay is refused inside the window, anything
 * outside it (either side) is refused, and a sender's floor rises when its cache is full. */
static void test_replay_guard(void **state)
{
    sl_keyring_guard *g;
    assert_int_equal(sl_keyring_guard_new(30000, 4, &g), 0);
    uint64_t now = T0;
    sl_keyring_sealed a = pkt("a", now, 1), b = pkt("b", now, 1);
    assert_int_equal(sl_keyring_guard_check(g, &a, now), 0);
    assert_int_equal(sl_keyring_guard_check(g, &a, now), -EALREADY);
    assert_int_equal(sl_keyring_guard_check(g, &a, now + 29999), -EALREADY);
    assert_int_equal(sl_keyring_guard_check(g, &b, now), 0); /* same nonce, other sender */
    /* outside the window, either side */
    sl_keyring_sealed old = pkt("a", now - 30001, 9), future = pkt("a", now + 30001, 9);
    assert_int_equal(sl_keyring_guard_check(g, &old, now), -ESTALE);
    assert_int_equal(sl_keyring_guard_check(g, &future, now), -ESTALE);
    /* a timestamp near UINT64_MAX is judged by the difference, not a sum that wraps (found by
     * fuzz_gossip_sealed's "future" seed, stamped near UINT64_MAX, was stale at its own time) */
    sl_keyring_guard *g2;
    assert_int_equal(sl_keyring_guard_new(30000, 4, &g2), 0);
    sl_keyring_sealed edge = pkt("z", UINT64_MAX - 10, 1);
    assert_int_equal(sl_keyring_guard_check(g2, &edge, now), -ESTALE);
    assert_int_equal(sl_keyring_guard_check(g2, &edge, UINT64_MAX - 5), 0);
    assert_int_equal(sl_keyring_guard_check(g2, &edge, UINT64_MAX - 5), -EALREADY);
    sl_keyring_guard_free(g2);
    /* the replay of a, once the window has passed, is stale */
    assert_int_equal(sl_keyring_guard_check(g, &a, now + 30001), -ESTALE);
    /* reordering inside the cache is fine */
    sl_keyring_sealed c1 = pkt("c", now + 10, 1), c0 = pkt("c", now + 5, 2);
    assert_int_equal(sl_keyring_guard_check(g, &c1, now), 0);
    assert_int_equal(sl_keyring_guard_check(g, &c0, now), 0);
    /* a full cache: the oldest is forgotten and its time becomes the floor */
    for (unsigned i = 0; i < SL_KEYRING_GUARD_RECENT; i++) {
        sl_keyring_sealed x = pkt("c", now + 100 + i, (uint8_t)(i + 3));
        assert_int_equal(sl_keyring_guard_check(g, &x, now), 0);
    }
    assert_int_equal(sl_keyring_guard_check(g, &c0, now), -ESTALE);
    assert_int_equal(sl_keyring_guard_check(g, &c1, now), -ESTALE);
    sl_keyring_sealed last = pkt("c", now + 100 + SL_KEYRING_GUARD_RECENT - 1,
                                 (uint8_t)(SL_KEYRING_GUARD_RECENT + 2));
    assert_int_equal(sl_keyring_guard_check(g, &last, now), -EALREADY);
    /* a full sender table forgets the least recently heard sender; its old packets stay refused */
    sl_keyring_sealed d = pkt("d", now + 1, 1), e = pkt("e", now + 2, 1);
    assert_int_equal(sl_keyring_guard_check(g, &d, now + 1), 0); /* a, b, c, d */
    assert_int_equal(sl_keyring_guard_check(g, &e, now + 2), 0); /* b (heard longest ago) goes */
    assert_int_equal(sl_keyring_guard_check(g, &b, now + 3), -ESTALE);
    sl_keyring_sealed b2 = pkt("b", now + 400, 5);
    assert_int_equal(sl_keyring_guard_check(g, &b2, now + 400), 0);
    sl_keyring_guard_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_seal_open),
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_sender_and_time_sealed),
        cmocka_unit_test(test_replay_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

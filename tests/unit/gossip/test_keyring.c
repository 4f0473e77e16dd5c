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
    int n = sl_keyring_seal(k, msg, sizeof msg, sealed, sizeof sealed);
    assert_int_equal(n, (int)sizeof msg + SL_KEYRING_OVERHEAD);
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain), (int)sizeof msg);
    assert_memory_equal(plain, msg, sizeof msg);
    /* two seals of the same bytes differ (random nonce) */
    uint8_t again[128];
    assert_int_equal(sl_keyring_seal(k, msg, sizeof msg, again, sizeof again), n);
    assert_memory_not_equal(again, sealed, (size_t)n);
    for (int i = 0; i < n; i++)
        for (int bit = 0; bit < 8; bit += 3) {
            sealed[i] ^= (uint8_t)(1 << bit);
            assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, sizeof plain), -EBADMSG);
            sealed[i] ^= (uint8_t)(1 << bit);
        }
    for (int cut = 0; cut < n; cut++)
        assert_true(sl_keyring_open(k, sealed, (size_t)cut, plain, sizeof plain) < 0);
    assert_int_equal(sl_keyring_open(k, sealed, (size_t)n, plain, 3), -EMSGSIZE);
    assert_int_equal(sl_keyring_seal(k, msg, sizeof msg, sealed, sizeof msg), -EMSGSIZE);
    sl_keyring_free(k);
}

static void test_rotation(void **state)
{
    sl_keyring *old = ring(K1 "\n"), *mid = ring(K1 "\n" K2 "\n"), *next = ring(K2 "\n" K1 "\n"),
               *last = ring(K2 "\n");
    const uint8_t msg[] = "hello";
    uint8_t s[64], p[64];
    /* step 1: the new key added second: everyone still seals with K1 */
    int n = sl_keyring_seal(mid, msg, sizeof msg, s, sizeof s);
    assert_true(sl_keyring_open(old, s, (size_t)n, p, sizeof p) > 0);
    /* step 2: the new key first on some nodes: nodes at step 1 open it, nodes at step 0 do not */
    n = sl_keyring_seal(next, msg, sizeof msg, s, sizeof s);
    assert_true(sl_keyring_open(mid, s, (size_t)n, p, sizeof p) > 0);
    assert_int_equal(sl_keyring_open(old, s, (size_t)n, p, sizeof p), -EBADMSG);
    /* step 3: the old key dropped: packets of nodes still at step 2 open */
    assert_true(sl_keyring_open(last, s, (size_t)n, p, sizeof p) > 0);
    n = sl_keyring_seal(old, msg, sizeof msg, s, sizeof s);
    assert_int_equal(sl_keyring_open(last, s, (size_t)n, p, sizeof p), -EBADMSG);
    sl_keyring_free(old);
    sl_keyring_free(mid);
    sl_keyring_free(next);
    sl_keyring_free(last);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_seal_open),
        cmocka_unit_test(test_rotation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* sl_peersig: secret files, signing and verifying peer calls on a virtual clock: rotation, the
 * skew window, and tampering with each signed part. */
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

#include "auth/peersig.h"

#define PATH "/pb.gubernator.PeersV1/GetPeerRateLimits"
#define SENDER "10.0.0.1:5454"
#define S1 "first-secret-0123456789abcdef"
#define S2 "second-secret-0123456789abcdef"
#define NOW 1795972524601LL
#define SKEW 30000

static sl_peersig_keys *keys(const char *text)
{
    sl_peersig_keys *k = NULL;
    const char *why = NULL;
    assert_int_equal(sl_peersig_keys_parse(text, strlen(text), &k, &why), 0);
    return k;
}

static int sign(sl_peersig_keys *k, int64_t ts, const char *body, char *out)
{
    return sl_peersig_sign(k, PATH, strlen(PATH), ts, SENDER, body, strlen(body), out,
                           SL_PEERSIG_VALUE_MAX);
}

static sl_peersig_verdict verify(sl_peersig_keys *k, const char *v, const char *path,
                                 const char *body, int64_t now)
{
    const char *snd = NULL;
    size_t sl = 0;
    sl_peersig_verdict r = sl_peersig_verify(k, v, strlen(v), path, strlen(path), body,
                                             strlen(body), now, SKEW, &snd, &sl);
    if (r == SL_PEERSIG_OK) {
        assert_int_equal(sl, strlen(SENDER));
        assert_memory_equal(snd, SENDER, sl);
    }
    return r;
}

static void test_parse(void **state)
{
    (void)state;
    sl_peersig_keys *k = keys("# cluster secret\n" S1 "\n\n");
    assert_int_equal(sl_peersig_keys_count(k), 1);
    sl_peersig_keys_unref(k);
    k = keys("  " S1 "  \r\n" S2);
    assert_int_equal(sl_peersig_keys_count(k), 2);
    sl_peersig_keys_unref(k);
    static const char *const bad[] = {"", "# only a comment\n", "short-secret\n",
                                      S1 "\n" S2 "\nthird-secret-0123456789abcdef\n",
                                      "a secret with spaces in it\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = NULL;
        k = NULL;
        assert_int_equal(sl_peersig_keys_parse(bad[i], strlen(bad[i]), &k, &why), -EINVAL);
        assert_non_null(why);
        assert_null(k);
    }
}

static void test_read_file(void **state)
{
    (void)state;
    char path[] = "/tmp/test_peersig_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, S1 "\n", sizeof S1), (ssize_t)sizeof S1);
    close(fd);
    sl_peersig_keys *k = NULL;
    char err[256];
    assert_int_equal(sl_peersig_keys_read(path, &k, err, sizeof err), 0);
    assert_int_equal(sl_peersig_keys_count(k), 1);
    sl_peersig_keys_unref(k);
    unlink(path);
    assert_true(sl_peersig_keys_read(path, &k, err, sizeof err) < 0);
    assert_non_null(strstr(err, path));
}

static void test_sign_verify(void **state)
{
    (void)state;
    sl_peersig_keys *k = keys(S1);
    char v[SL_PEERSIG_VALUE_MAX];
    int n = sign(k, NOW, "body", v);
    assert_true(n > 0 && (size_t)n == strlen(v));
    assert_memory_equal(v, "v1 1795972524601 " SENDER " ", strlen("v1 1795972524601 " SENDER " "));
    assert_int_equal(verify(k, v, PATH, "body", NOW), SL_PEERSIG_OK);
    /* the same value twice gives the same MAC (deterministic) */
    char w[SL_PEERSIG_VALUE_MAX];
    sign(k, NOW, "body", w);
    assert_string_equal(v, w);
    /* another secret does not verify it */
    sl_peersig_keys *other = keys(S2);
    assert_int_equal(verify(other, v, PATH, "body", NOW), SL_PEERSIG_BAD_MAC);
    sl_peersig_keys_unref(other);
    /* a bad sender cannot be signed */
    assert_int_equal(sl_peersig_sign(k, PATH, strlen(PATH), NOW, "a b", "", 0, w, sizeof w),
                     -EINVAL);
    assert_int_equal(sl_peersig_sign(k, PATH, strlen(PATH), NOW, "", "", 0, w, sizeof w),
                     -EINVAL);
    sl_peersig_keys_unref(k);
}

static void test_skew(void **state)
{
    (void)state;
    sl_peersig_keys *k = keys(S1);
    char v[SL_PEERSIG_VALUE_MAX];
    sign(k, NOW, "b", v);
    assert_int_equal(verify(k, v, PATH, "b", NOW + SKEW), SL_PEERSIG_OK);
    assert_int_equal(verify(k, v, PATH, "b", NOW - SKEW), SL_PEERSIG_OK);
    assert_int_equal(verify(k, v, PATH, "b", NOW + SKEW + 1), SL_PEERSIG_SKEW);
    assert_int_equal(verify(k, v, PATH, "b", NOW - SKEW - 1), SL_PEERSIG_SKEW);
    sl_peersig_keys_unref(k);
}

static void test_tamper(void **state)
{
    (void)state;
    sl_peersig_keys *k = keys(S1);
    char v[SL_PEERSIG_VALUE_MAX], t[SL_PEERSIG_VALUE_MAX + 8];
    sign(k, NOW, "body", v);
    /* another path, another body */
    assert_int_equal(verify(k, v, "/pb.gubernator.PeersV1/UpdatePeerGlobals", "body", NOW),
                     SL_PEERSIG_BAD_MAC);
    assert_int_equal(verify(k, v, PATH, "bodY", NOW), SL_PEERSIG_BAD_MAC);
    /* another time */
    strcpy(t, v);
    t[strlen("v1 179597252460")] = '2';
    assert_int_equal(verify(k, t, PATH, "body", NOW), SL_PEERSIG_BAD_MAC);
    /* another sender */
    snprintf(t, sizeof t, "v1 %lld 10.0.0.9:5454 %s", NOW, v + strlen(v) - 64);
    assert_int_equal(verify(k, t, PATH, "body", NOW), SL_PEERSIG_BAD_MAC);
    /* every bit of the MAC counts */
    for (size_t i = strlen(v) - 64; i < strlen(v); i++) {
        strcpy(t, v);
        t[i] = t[i] == '0' ? '1' : '0';
        assert_int_equal(verify(k, t, PATH, "body", NOW), SL_PEERSIG_BAD_MAC);
    }
    /* malformed values */
    static const char *const bad[] = {
        "", "v1", "v2 1 a 0000000000000000000000000000000000000000000000000000000000000000",
        "v1 x a 0000000000000000000000000000000000000000000000000000000000000000",
        "v1 01 a 0000000000000000000000000000000000000000000000000000000000000000",
        "v1 1  0000000000000000000000000000000000000000000000000000000000000000",
        "v1 1 a 000000000000000000000000000000000000000000000000000000000000000g",
        "v1 1 a 00000000000000000000000000000000000000000000000000000000000000",
        "v1 99999999999999999999 a 0000000000000000000000000000000000000000000000000000000000000000",
        "v1 9999999999999999999 a 0000000000000000000000000000000000000000000000000000000000000000",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(verify(k, bad[i], PATH, "body", NOW), SL_PEERSIG_MALFORMED);
    sl_peersig_keys_unref(k);
}

static void test_rotation(void **state)
{
    (void)state;
    sl_peersig_keys *old = keys(S1), *both = keys(S1 "\n" S2), *swapped = keys(S2 "\n" S1),
                    *fresh = keys(S2);
    char v[SL_PEERSIG_VALUE_MAX];
    /* step 1: a node on the old secret, the others accepting both */
    sign(old, NOW, "b", v);
    assert_int_equal(verify(both, v, PATH, "b", NOW), SL_PEERSIG_OK);
    assert_int_equal(verify(swapped, v, PATH, "b", NOW), SL_PEERSIG_OK);
    /* step 2: signing with the new one, still accepted by a node that has both */
    sign(swapped, NOW, "b", v);
    assert_int_equal(verify(both, v, PATH, "b", NOW), SL_PEERSIG_OK);
    assert_int_equal(verify(fresh, v, PATH, "b", NOW), SL_PEERSIG_OK);
    assert_int_equal(verify(old, v, PATH, "b", NOW), SL_PEERSIG_BAD_MAC);
    /* step 3: the old secret removed: its signatures are refused */
    sign(old, NOW, "b", v);
    assert_int_equal(verify(fresh, v, PATH, "b", NOW), SL_PEERSIG_BAD_MAC);
    /* the slot: a reload changes what new calls get, a taken set stays valid */
    sl_peersig *slot = sl_peersig_new(old);
    sl_peersig_keys *held = sl_peersig_get(slot);
    sl_peersig_set(slot, fresh);
    sl_peersig_keys *now = sl_peersig_get(slot);
    assert_ptr_equal(now, fresh);
    assert_int_equal(sign(held, NOW, "b", v) > 0, 1);
    sl_peersig_keys_unref(held);
    sl_peersig_keys_unref(now);
    sl_peersig_free(slot);
    sl_peersig_keys_unref(old);
    sl_peersig_keys_unref(both);
    sl_peersig_keys_unref(swapped);
    sl_peersig_keys_unref(fresh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),     cmocka_unit_test(test_read_file),
        cmocka_unit_test(test_sign_verify), cmocka_unit_test(test_skew),
        cmocka_unit_test(test_tamper),    cmocka_unit_test(test_rotation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

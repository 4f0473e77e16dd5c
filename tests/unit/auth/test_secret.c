/* SPDX-License-Identifier: Apache-2.0 */
/* sl_secret: secret files through their one reader, wiping, and HMAC-SHA256 (RFC 4231's
 * vectors, fed whole and in pieces). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "auth/secret.h"

static void tag_of(const char *key, const char *data, size_t cut, uint8_t out[32])
{
    sl_secret_mac *m;
    assert_int_equal(sl_secret_mac_new(key, strlen(key), &m), 0);
    assert_int_equal(sl_secret_mac_update(m, data, cut), 0);
    assert_int_equal(sl_secret_mac_update(m, data + cut, strlen(data) - cut), 0);
    assert_int_equal(sl_secret_mac_final(m, out), 0);
    sl_secret_mac_free(m);
}

static void test_hmac_sha256(void **state)
{
    (void)state;
    /* RFC 4231, test case 2 */
    static const uint8_t want[32] = {
        0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
        0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
    const char *data = "what do ya want for nothing?";
    uint8_t got[32];
    for (size_t cut = 0; cut <= strlen(data); cut += 7) {
        tag_of("Jefe", data, cut, got);
        assert_memory_equal(got, want, 32);
        assert_true(sl_secret_mac_equal(got, want));
    }
    tag_of("Jefe!", data, 3, got);
    assert_false(sl_secret_mac_equal(got, want));
    sl_secret_mac *m = NULL;
    assert_int_equal(sl_secret_mac_new("", 0, &m), -EINVAL);
    assert_null(m);
}

static void test_read_and_wipe(void **state)
{
    (void)state;
    char dir[] = "/tmp/sl_test_secret.XXXXXX", path[96], err[300];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/key", dir);
    FILE *f = fopen(path, "w");
    fputs("top-secret", f);
    fclose(f);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(sl_secret_read(path, 100, &buf, &len, err, sizeof err), -EACCES);
    assert_non_null(strstr(err, "chmod 600 "));
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(sl_secret_read(path, 100, &buf, &len, err, sizeof err), 0);
    assert_string_equal(buf, "top-secret");
    sl_secret_wipe(buf, len);
    for (size_t i = 0; i < len; i++)
        assert_int_equal(buf[i], 0);
    sl_secret_free(buf, len);
    sl_secret_free(NULL, 5);
    assert_int_equal(sl_secret_read(dir, 100, &buf, &len, err, sizeof err), -EINVAL);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_sha256),
        cmocka_unit_test(test_read_and_wipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

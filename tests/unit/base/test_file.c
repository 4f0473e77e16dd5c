/* SPDX-License-Identifier: Apache-2.0 */
/* sl_file_read: a whole file, the byte cap at and past its edge, errors and their messages. */
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

#include "base/file.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/sl_test_file.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_read(void **state)
{
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    write_file(path, "hello\0world", 11);
    char *buf;
    size_t len;
    assert_int_equal(sl_file_read(path, 100, 0, &buf, &len, err, sizeof err), 0);
    assert_int_equal(len, 11);
    assert_memory_equal(buf, "hello\0world", 12); /* NUL-terminated too */
    free(buf);
    /* exactly max bytes is fine; one more is not */
    assert_int_equal(sl_file_read(path, 11, SL_FILE_REGULAR, &buf, &len, err, sizeof err), 0);
    assert_int_equal(len, 11);
    free(buf);
    assert_int_equal(sl_file_read(path, 10, 0, &buf, &len, err, sizeof err), -EFBIG);
    char want[200];
    snprintf(want, sizeof want, "%s: larger than 10 bytes", path);
    assert_string_equal(err, want);
    /* empty */
    write_file(path, "", 0);
    assert_int_equal(sl_file_read(path, 0, 0, &buf, &len, NULL, 0), 0);
    assert_int_equal(len, 0);
    assert_string_equal(buf, "");
    free(buf);
}

static void test_large(void **state)
{
    (void)state;
    char path[128], err[256];
    snprintf(path, sizeof path, "%s/big", dir);
    size_t n = 100000;
    char *data = malloc(n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + i % 26);
    write_file(path, data, n);
    char *buf;
    size_t len;
    assert_int_equal(sl_file_read(path, 1 << 20, 0, &buf, &len, err, sizeof err), 0);
    assert_int_equal(len, n);
    assert_memory_equal(buf, data, n);
    free(buf);
    assert_int_equal(sl_file_read(path, n - 1, 0, &buf, &len, err, sizeof err), -EFBIG);
    free(data);
}

/* Not regular files: refused on request; otherwise a device with no size is read (and capped)
 * by the read loop alone. */
static void test_not_regular(void **state)
{
    (void)state;
    char err[256], want[200];
    char *buf = NULL;
    size_t len;
    assert_int_equal(sl_file_read(dir, 100, SL_FILE_REGULAR, &buf, &len, err, sizeof err), -EINVAL);
    snprintf(want, sizeof want, "%s: not a regular file", dir);
    assert_string_equal(err, want);
    /* a directory opens but does not read */
    assert_int_equal(sl_file_read(dir, 100, 0, &buf, &len, err, sizeof err), -EIO);
    snprintf(want, sizeof want, "%s: read error", dir);
    assert_string_equal(err, want);
    assert_int_equal(sl_file_read("/dev/null", 100, 0, &buf, &len, err, sizeof err), 0);
    assert_int_equal(len, 0);
    free(buf);
    assert_int_equal(sl_file_read("/dev/zero", 10000, 0, &buf, &len, err, sizeof err), -EFBIG);
}

/* A secret file: refused, with the fix, while group or others have any access to it. */
static void test_secret(void **state)
{
    (void)state;
    char path[128], err[300], want[400];
    snprintf(path, sizeof path, "%s/token", dir);
    write_file(path, "s3cret", 6);
    char *buf = NULL;
    size_t len = 0;
    static const mode_t refused[] = {0644, 0640, 0604, 0602, 0620, 0601, 0610};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        assert_int_equal(chmod(path, refused[i]), 0);
        assert_int_equal(sl_file_read(path, 100, SL_FILE_SECRET, &buf, &len, err, sizeof err),
                         -EACCES);
        snprintf(want, sizeof want, "%s: readable by group or others (mode %04o): chmod 600 %s "
                 "(a token, key or secret file must be its owner's alone)", path,
                 (unsigned)refused[i], path);
        assert_string_equal(err, want);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), -EACCES);
        assert_string_equal(err, want);
        /* without the flag the mode does not matter */
        assert_int_equal(sl_file_read(path, 100, 0, &buf, &len, err, sizeof err), 0);
        free(buf);
    }
    static const mode_t fine[] = {0600, 0400, 0700};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        assert_int_equal(chmod(path, fine[i]), 0);
        assert_int_equal(sl_file_read(path, 100, SL_FILE_SECRET | SL_FILE_REGULAR, &buf, &len,
                                      err, sizeof err), 0);
        assert_string_equal(buf, "s3cret");
        free(buf);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), 0);
    }
    /* root:<our group> 0440 (Kubernetes' fsGroup Secret): the group is ours; not if it could
     * write, not for another group, not for a root group */
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 0, 65534), 0);
        assert_int_equal(chmod(path, 0440), 0);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), -EACCES); /* egid 0 */
        assert_int_equal(setegid(65534), 0);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), 0);
        assert_int_equal(sl_file_read(path, 100, SL_FILE_SECRET, &buf, &len, err, sizeof err), 0);
        free(buf);
        assert_int_equal(chmod(path, 0460), 0);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), -EACCES);
        assert_int_equal(chmod(path, 0444), 0);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), -EACCES);
        assert_int_equal(chmod(path, 0440), 0);
        assert_int_equal(chown(path, 0, 65533), 0);
        assert_int_equal(sl_file_check_secret(path, err, sizeof err), -EACCES);
        assert_int_equal(setegid(0), 0);
    }
    snprintf(path, sizeof path, "%s/nope", dir);
    assert_int_equal(sl_file_check_secret(path, err, sizeof err), -ENOENT);
}

static void test_missing(void **state)
{
    (void)state;
    char path[128], err[256], want[300];
    snprintf(path, sizeof path, "%s/nope", dir);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(sl_file_read(path, 100, 0, &buf, &len, err, sizeof err), -ENOENT);
    snprintf(want, sizeof want, "%s: %s", path, strerror(ENOENT));
    assert_string_equal(err, want);
    assert_null(buf);
    /* a short message buffer is truncated, not overrun */
    char tiny[4];
    assert_int_equal(sl_file_read(path, 100, 0, &buf, &len, tiny, sizeof tiny), -ENOENT);
    assert_int_equal(strlen(tiny), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_not_regular),
        cmocka_unit_test(test_missing),
        cmocka_unit_test(test_secret),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

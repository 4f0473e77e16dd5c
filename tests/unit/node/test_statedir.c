/* SPDX-License-Identifier: Apache-2.0 */
/* node/statedir: the snapshot file authenticated with a key (the cluster secret) and checked
 * with it, a trailer ignored without one, and the temporary file never followed through a link
 * planted at its name. */
#include <errno.h>
#include <fcntl.h>
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

#include "node/statedir.h"

#define NOW 1700000000000

static char dir[64], logpath[96];
static sl_logger lg;
static FILE *logf;

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/sl_test_statedir.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    logf = fopen(logpath, "w+");
    sl_log_init(&lg, logf, SL_LOG_INFO, NULL);
    return logf ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fclose(logf);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static bool logged(const char *what)
{
    fflush(logf);
    FILE *f = fopen(logpath, "r");
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, what) != NULL;
}

static sl_engine *engine_with_keys(int n)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.hash_seed = 42;
    sl_engine *e = NULL;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    for (int i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        sl_request r = {.name = "n", .name_len = 1, .unique_key = key,
                        .unique_key_len = strlen(key), .hits = 1, .limit = 10,
                        .duration = 600000, .algorithm = SL_TOKEN_BUCKET};
        sl_response resp;
        sl_engine_decide(e, &r, &resp, NOW);
    }
    return e;
}

/* Read DIR's snapshot with key: true when it was accepted (its mapping released). */
static bool accepted(const sl_statedir_key *key, uint64_t *keys)
{
    sl_statedir_snap snap;
    if (!sl_statedir_read(dir, NULL, key, &lg, &snap))
        return false;
    if (keys)
        *keys = snap.keys;
    sl_statedir_load(&snap, NULL, NULL, 0, &lg);
    return true;
}

static void test_authenticated_snapshot(void **state)
{
    (void)state;
    static const uint8_t k1[] = "cluster-secret-one-0123456789abcdef";
    static const uint8_t k2[] = "cluster-secret-two-0123456789abcdef";
    const sl_statedir_key key = {.p = k1, .n = sizeof k1 - 1};
    const sl_statedir_key other = {.p = k2, .n = sizeof k2 - 1};
    sl_engine *e = engine_with_keys(5);
    assert_int_equal(sl_statedir_write(dir, e, 0, &key, NOW, &lg), 0);
    uint64_t keys = 0;
    assert_true(accepted(&key, &keys));
    assert_int_equal(keys, 5);
    /* another secret, or the file altered by one byte: refused; another secret with this one as
     * the old one (a rotation): accepted */
    assert_false(accepted(&other, NULL));
    const sl_statedir_key rotating = {k2, sizeof k2 - 1, k1, sizeof k1 - 1};
    assert_true(accepted(&rotating, NULL));
    assert_true(logged("not authenticated by the cluster secret"));
    char path[128];
    snprintf(path, sizeof path, "%s/sluice.snapshot", dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    uint8_t b;
    off_t at = st.st_size - SL_STATEDIR_TRAILER - 3; /* a byte of the body */
    assert_int_equal(pread(fd, &b, 1, at), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    assert_false(accepted(&key, NULL));
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, at), 1);
    assert_true(accepted(&key, NULL));
    close(fd);
    /* no key to check it with: the trailer is ignored */
    assert_true(accepted(NULL, &keys));
    assert_int_equal(keys, 5);
    /* a snapshot written without the key is refused by a node that has one */
    assert_int_equal(sl_statedir_write(dir, e, 0, NULL, NOW, &lg), 0);
    assert_false(accepted(&key, NULL));
    assert_true(accepted(NULL, NULL));
    sl_engine_free(e);
}

static void test_temp_file_never_followed(void **state)
{
    (void)state;
    char tmp[128], victim[128];
    snprintf(tmp, sizeof tmp, "%s/sluice.snapshot.tmp", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    FILE *f = fopen(victim, "w");
    fputs("precious\n", f);
    fclose(f);
    assert_int_equal(symlink(victim, tmp), 0); /* planted at the temporary file's name */
    sl_engine *e = engine_with_keys(3);
    assert_int_equal(sl_statedir_write(dir, e, 0, NULL, NOW, &lg), 0);
    f = fopen(victim, "r");
    char buf[32] = {0};
    assert_non_null(fgets(buf, sizeof buf, f));
    fclose(f);
    assert_string_equal(buf, "precious\n"); /* the link's target untouched */
    uint64_t keys = 0;
    assert_true(accepted(NULL, &keys));
    assert_int_equal(keys, 3);
    struct stat st;
    assert_int_equal(lstat(tmp, &st), -1); /* renamed away */
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_authenticated_snapshot),
        cmocka_unit_test(test_temp_file_never_followed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

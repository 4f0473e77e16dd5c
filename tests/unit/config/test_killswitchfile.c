/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The quota file's switchboard sections (config/killswitchfile.c) on their own: a file parsed into
 * a board holds every switch, concurrency entry and the fleet with defaults filled in; the quota
 * tree's sections are skipped; bad values and unknown fields are errors naming the line; a file is
 * read through sl_file_read (missing file, the path in messages).
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

#include "config/killswitchfile.h"

#define M(s) (s), strlen(s)

static const char file1[] =
    "limit:\n"
    "  key_default: {rate: 10, burst: 5}\n"
    "factor:\n"
    "  default: 1\n"
    "killswitch:\n"
    "  \"*\": off\n"
    "  search: on\n"
    "  new-limit: shadow\n"
    "concurrency:\n"
    "  default: {limit: 20}\n"
    "  key:\n"
    "    reports: {limit: 2, duration: 1500}\n"
    "fleet: {capacity: 100, duration: 30s}\n";

static void test_parse(void **state)
{
    (void)state;
    sl_killswitch_board b;
    sl_killswitch_board_init(&b, 16, 7);
    char err[200];
    assert_int_equal(sl_killswitchfile_parse(M(file1), &b, err, sizeof err), 0);
    const sl_killswitch_entry *e = sl_killswitch_board_get(&b, SL_KILLSWITCH_K_SWITCH, M("search"));
    assert_non_null(e);
    assert_int_equal(e->mode, SL_KILLSWITCH_KILLED);
    e = sl_killswitch_board_get(&b, SL_KILLSWITCH_K_SWITCH, M("new-limit"));
    assert_int_equal(e->mode, SL_KILLSWITCH_SHADOW);
    e = sl_killswitch_board_get(&b, SL_KILLSWITCH_K_SWITCH, M("*"));
    assert_int_equal(e->mode, SL_KILLSWITCH_ENFORCE);
    /* a switch and a concurrency entry of the same name are different entries */
    assert_null(sl_killswitch_board_get(&b, SL_KILLSWITCH_K_CONC, M("search")));
    e = sl_killswitch_board_get(&b, SL_KILLSWITCH_K_CONC, "", 0);
    assert_non_null(e);
    assert_int_equal(e->conc.limit, 20);
    assert_int_equal(e->conc.duration_ms, SL_KILLSWITCH_DEFAULT_DURATION_MS);
    e = sl_killswitch_board_get(&b, SL_KILLSWITCH_K_CONC, M("reports"));
    assert_int_equal(e->conc.limit, 2);
    assert_int_equal(e->conc.duration_ms, 1500);
    assert_true(b.has_fleet);
    assert_int_equal(b.fleet.capacity, 100);
    assert_true(b.fleet.reserve == SL_KILLSWITCH_DEFAULT_RESERVE);
    assert_int_equal(b.fleet.duration_ms, 30000);
    assert_int_equal(sl_strmap_count(&b.map), 5);
    sl_killswitch_board_free(&b);
}

static void test_errors(void **state)
{
    (void)state;
    char err[200];
    assert_int_equal(sl_killswitchfile_check_text(M(file1), err, sizeof err), 0);
    assert_int_equal(sl_killswitchfile_check_text(M(""), err, sizeof err), 0);
    assert_int_equal(sl_killswitchfile_check_text(M("killswitch: [a]\n"), err, sizeof err),
                     -EINVAL);
    assert_int_equal(sl_killswitchfile_check_text(M("fleet: {reserve: 0.1}\n"), err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "capacity"));
    assert_int_equal(sl_killswitchfile_check_text(M("a: [\n"), err, sizeof err), -EINVAL);
    assert_int_equal(
        sl_killswitchfile_check_text(M("killswitch:\n  api: maybe\n"), err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "2"));
    assert_int_equal(sl_killswitchfile_check_text(M("concurrency:\n  default: {limit: 1, x: 2}\n"),
                                                  err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "unknown field"));
}

static void test_load(void **state)
{
    (void)state;
    sl_killswitch_board b;
    sl_killswitch_board_init(&b, 16, 7);
    char err[300];
    assert_int_equal(sl_killswitchfile_load("/nonexistent/q.yaml", &b, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/q.yaml"));
    char path[] = "/tmp/sluice-ksfile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *bad = "killswitch:\n  api: sometimes\n";
    assert_int_equal(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    assert_int_equal(sl_killswitchfile_load(path, &b, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, path));
    FILE *f = fopen(path, "w");
    fputs(file1, f);
    fclose(f);
    sl_killswitch_board_free(&b);
    sl_killswitch_board_init(&b, 16, 7);
    assert_int_equal(sl_killswitchfile_load(path, &b, err, sizeof err), 0);
    assert_int_equal(sl_strmap_count(&b.map), 5);
    unlink(path);
    sl_killswitch_board_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

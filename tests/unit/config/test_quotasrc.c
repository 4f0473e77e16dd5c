/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Quota source tests without etcd (the etcd mode is tested against a real etcd in test_etcd.c):
 * file mode loads at start and fails on a bad file, a reload publishes a new snapshot that
 * readers pick up on their next read while the old one stays valid until then, a failed reload
 * keeps the current quotas, mode "none" is loaded and empty, and the metrics render the status.
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

#include "config/quotasrc.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static double rate_of(const sl_quota_snap *s, const char *key)
{
    sl_quota_path p = {.kind = SL_QUOTA_KEY, .key = key, .key_len = strlen(key)};
    sl_quota q;
    if (!sl_quota_tree_get_quota(s->tree, &p, &q))
        return -1;
    return q.rate;
}

static void test_file_mode(void **state)
{
    char path[] = "/tmp/sluice-quotasrc-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "limit:\n  key:\n    api: {quota: {rate: 10, burst: 1}}\n");

    FILE *logf = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, logf, SL_LOG_DEBUG, "t");
    sl_quotasrc_config cfg = {.conn.file = path, .conn.log = &lg};
    sl_quotasrc *src = NULL;
    assert_int_equal(sl_quotasrc_new(&cfg, &src), 0);
    assert_int_equal(sl_quotasrc_wait_loaded(src, 0), 0);

    sl_quotasrc_status st;
    sl_quotasrc_status_get(src, &st);
    assert_int_equal(st.mode, SL_QUOTASRC_FILE);
    assert_true(st.loaded && st.connected);
    assert_int_equal(st.entries, 1);
    assert_int_equal(st.loads, 1);
    assert_string_equal(st.endpoint, path);

    sl_quotasrc_reader r1 = {0}, r2 = {0};
    const sl_quota_snap *a = sl_quotasrc_read(src, &r1);
    assert_true(a->loaded);
    assert_true(rate_of(a, "api") == 10);
    assert_ptr_equal(sl_quotasrc_read(src, &r2), a);
    assert_ptr_equal(sl_quotasrc_read(src, &r1), a); /* nothing changed: the same snapshot */

    /* reload: r1 sees the new one on its next read; r2's pointer stays valid until then */
    write_file(path, "limit:\n  key:\n    api: {quota: {rate: 20}}\n    web: {quota: {rate: 5}}\n");
    char err[256];
    assert_int_equal(sl_quotasrc_reload(src, err, sizeof err), 0);
    const sl_quota_snap *b = sl_quotasrc_read(src, &r1);
    assert_ptr_not_equal(b, a);
    assert_true(rate_of(b, "api") == 20 && rate_of(b, "web") == 5);
    assert_true(b->generation > a->generation);
    assert_true(rate_of(a, "api") == 10); /* r2 still holds the old one: readable */
    assert_ptr_equal(sl_quotasrc_read(src, &r2), b);

    /* a bad file keeps the current quotas */
    write_file(path, "limit:\n  key:\n    api: {quota: {rate: oops}}\n");
    assert_int_equal(sl_quotasrc_reload(src, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 3"));
    assert_ptr_equal(sl_quotasrc_read(src, &r1), b);
    sl_quotasrc_status_get(src, &st);
    assert_int_equal(st.load_errors, 1);
    assert_non_null(strstr(st.last_error, "line 3"));

    /* a counted reference for occasional users */
    sl_quota_snap *c = sl_quotasrc_acquire(src);
    assert_ptr_equal(c, b);
    sl_quota_snap_unref(c);

    /* metrics */
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    assert_int_equal(sl_quotasrc_register_metrics(src, m), 0);
    char *text;
    size_t len;
    assert_int_equal(sl_metrics_render_prometheus(m, &text, &len), 0);
    assert_non_null(strstr(text, "sluice_quota_entries{source=\"file\"} 2"));
    assert_non_null(strstr(text, "sluice_quota_source_load_errors_total{source=\"file\"} 1"));
    assert_non_null(strstr(text, "sluice_quota_source_connected{source=\"file\"} 1"));
    free(text);
    sl_metrics_free(m);

    sl_quotasrc_reader_release(&r1);
    sl_quotasrc_reader_release(&r2);
    assert_int_equal(sl_quotasrc_reload(src, NULL, 0), -EINVAL);
    sl_quotasrc_free(src);
    unlink(path);

    /* the log says what happened */
    rewind(logf);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, logf);
    buf[n] = 0;
    assert_non_null(strstr(buf, "quota file loaded"));
    assert_non_null(strstr(buf, "keeping the current quotas"));
    fclose(logf);
}

static void test_file_missing(void **state)
{
    sl_quotasrc_config cfg = {.conn.file = "/nonexistent/sluice-quotas.yaml"};
    sl_quotasrc *src = NULL;
    assert_int_equal(sl_quotasrc_new(&cfg, &src), -ENOENT);
    assert_null(src);
}

static void test_none_mode(void **state)
{
    sl_quotasrc_config cfg = {0};
    sl_quotasrc *src = NULL;
    assert_int_equal(sl_quotasrc_new(&cfg, &src), 0);
    sl_quotasrc_reader r = {0};
    const sl_quota_snap *s = sl_quotasrc_read(src, &r);
    assert_true(s->loaded);
    assert_int_equal(sl_quota_tree_count(s->tree), 0);
    assert_int_equal(sl_quotasrc_reload(src, NULL, 0), 0);
    sl_quotasrc_status st;
    sl_quotasrc_status_get(src, &st);
    assert_int_equal(st.mode, SL_QUOTASRC_NONE);
    assert_string_equal(sl_quotasrc_mode_name(st.mode), "none");
    sl_quotasrc_reader_release(&r);
    sl_quotasrc_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_mode),
        cmocka_unit_test(test_file_missing),
        cmocka_unit_test(test_none_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

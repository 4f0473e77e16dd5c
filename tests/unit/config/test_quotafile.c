/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Quota file tests: the documented example parses into the same tree etcd would give, every
 * section is optional, errors name their line (unknown fields, a missing rate, bad numbers, a bad
 * group size), aliases cannot blow up the walk, and loading from a real file (missing, too big).
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

#include "config/quotafile.h"

static const char example[] =
    "# quotas for the standalone limiter\n"
    "limit:\n"
    "  key_default: {rate: 10, burst: 5}\n"
    "  subkey_default:\n"
    "    GET: {rate: 100, burst: 10}\n"
    "  key:\n"
    "    api:\n"
    "      quota: {rate: 1000, burst: 100}\n"
    "      sublimit:\n"
    "        POST: {rate: 50.5, burst: 5.9}\n"
    "    \"api/v1/GET\":\n"
    "      quota: {rate: 200, burst: 20}\n"
    "factor:\n"
    "  default: 1\n"
    "  key:\n"
    "    api: 2\n";

static sl_quota_tree *parse(const char *text, int expect, const char *err_part)
{
    sl_quota_tree *t = NULL;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    char err[256];
    int rc = sl_quotafile_parse(text, strlen(text), t, err, sizeof err);
    if (rc != expect)
        fail_msg("parse returned %d (%s), expected %d", rc, err, expect);
    if (err_part && !strstr(err, err_part))
        fail_msg("error '%s' does not mention '%s'", err, err_part);
    return t;
}

static void expect_quota(sl_quota_tree *t, sl_quota_kind kind, const char *key, const char *sub,
                         double rate, int64_t burst)
{
    sl_quota_path p = {.kind = kind, .key = key, .key_len = key ? strlen(key) : 0,
                       .sub = sub, .sub_len = sub ? strlen(sub) : 0};
    sl_quota q;
    assert_true(sl_quota_tree_get_quota(t, &p, &q));
    if (q.rate != rate || q.burst != burst)
        fail_msg("%s/%s: rate %g burst %lld", key ? key : "-", sub ? sub : "-", q.rate,
                 (long long)q.burst);
}

static void test_example(void **state)
{
    sl_quota_tree *t = parse(example, 0, NULL);
    assert_int_equal(sl_quota_tree_count(t), 7);
    expect_quota(t, SL_QUOTA_KEY_DEFAULT, NULL, NULL, 10, 5);
    expect_quota(t, SL_QUOTA_SUBKEY_DEFAULT, NULL, "GET", 100, 10);
    expect_quota(t, SL_QUOTA_KEY, "api", NULL, 1000, 100);
    expect_quota(t, SL_QUOTA_SUBLIMIT, "api", "POST", 50.5, 5);
    expect_quota(t, SL_QUOTA_KEY, "api/v1/GET", NULL, 200, 20);
    uint32_t f;
    sl_quota_path pd = {.kind = SL_QUOTA_FACTOR_DEFAULT};
    assert_true(sl_quota_tree_get_factor(t, &pd, &f));
    assert_int_equal(f, 1);
    sl_quota_path pk = {.kind = SL_QUOTA_FACTOR_KEY, .key = "api", .key_len = 3};
    assert_true(sl_quota_tree_get_factor(t, &pk, &f));
    assert_int_equal(f, 2);

    /* the lookup sees it as it would an etcd tree */
    sl_quota_lookup lk;
    assert_int_equal(sl_quota_lookup_request(t, "api", 3, "v1", 2, "GET", 3, 0, &lk), 0);
    assert_int_equal(lk.n, 2);
    assert_true(lk.m[0].level == 1 && lk.m[0].quota.rate == 100); /* 200 / DF 2 */
    assert_true(lk.m[1].source == SL_QUOTA_FROM_SUBKEY_DEFAULT && lk.m[1].quota.rate == 50);
    sl_quota_tree_free(t);
}

static void test_optional_sections(void **state)
{
    sl_quota_tree *t = parse("", 0, NULL);
    assert_int_equal(sl_quota_tree_count(t), 0);
    sl_quota_tree_free(t);
    t = parse("# nothing\n", 0, NULL);
    sl_quota_tree_free(t);
    t = parse("limit:\n  key:\nfactor:\n", 0, NULL);
    assert_int_equal(sl_quota_tree_count(t), 0);
    sl_quota_tree_free(t);
    t = parse("limit: {key_default: {rate: 3}}\n", 0, NULL);
    expect_quota(t, SL_QUOTA_KEY_DEFAULT, NULL, NULL, 3, 0);
    sl_quota_tree_free(t);
}

static void test_errors(void **state)
{
    struct {
        const char *text, *part;
    } cases[] = {
        {"limits:\n  key_default: {rate: 1}\n", "line 1"},
        {"limit:\n  key_defaults: {rate: 1}\n", "line 2"},
        {"limit:\n  key_default: {burst: 1}\n", "needs a rate"},
        {"limit:\n  key_default: {rate: fast}\n", "not a number"},
        {"limit:\n  key_default: {rate: -1}\n", "rate out of range"},
        {"limit:\n  key_default: {rate: 1, burst: -1}\n", "burst out of range"},
        {"limit:\n  key_default: {rate: 1, brust: 1}\n", "unknown quota field"},
        {"limit:\n  key_default: 5\n", "mapping"},
        {"limit:\n  key:\n    api:\n      quotas: {rate: 1}\n", "line 4"},
        {"limit:\n  key:\n    api:\n      sublimit:\n        \"a/b\": {rate: 1}\n", "'/'"},
        {"factor:\n  default: 0\n", "group size"},
        {"factor:\n  default: 1.5\n", "group size"},
        {"factor:\n  key:\n    api: x\n", "not a number"},
        {"limit: [1, 2]\n", "mapping"},
        {"limit:\n  key_default: {rate: 1\n", "line"}, /* YAML syntax */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_quota_tree *t = parse(cases[i].text, -EINVAL, cases[i].part);
        sl_quota_tree_free(t);
    }
}

/* Aliases let a small file name one big mapping many times: 300 keys sharing one map of 300
 * sublimits would be 90,000 entries from ~10 KB of text. The walk is bounded by the text's size,
 * so it stops with an error instead (a billion-laughs file stops the same way, sooner). */
static void test_alias_bomb(void **state)
{
    enum { N = 300 };
    size_t cap = 64 * 1024, n = 0;
    char *text = malloc(cap);
    n += (size_t)snprintf(text + n, cap - n, "limit:\n  key:\n    k0:\n      sublimit: &subs\n");
    for (int i = 0; i < N; i++)
        n += (size_t)snprintf(text + n, cap - n, "        S%d: {rate: 1}\n", i);
    for (int i = 1; i < N; i++)
        n += (size_t)snprintf(text + n, cap - n, "    k%d: {sublimit: *subs}\n", i);
    sl_quota_tree *t = NULL;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    char err[256];
    assert_int_equal(sl_quotafile_parse(text, n, t, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "too complex"));
    assert_true(sl_quota_tree_count(t) < (size_t)N * N);
    sl_quota_tree_free(t);
    free(text);

    /* a modest use of aliases is fine: 40 keys sharing one sublimit map */
    char text2[4096];
    size_t m = (size_t)snprintf(text2, sizeof text2,
                                "limit:\n  key:\n    k0: &k0 {sublimit: {GET: {rate: 1}}}\n");
    for (int i = 1; i < 40; i++)
        m += (size_t)snprintf(text2 + m, sizeof text2 - m, "    k%d: *k0\n", i);
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    assert_int_equal(sl_quotafile_parse(text2, m, t, err, sizeof err), 0);
    assert_int_equal(sl_quota_tree_count(t), 40);
    sl_quota_tree_free(t);
}

static void test_entry_cap(void **state)
{
    sl_quota_tree *t = NULL;
    assert_int_equal(sl_quota_tree_new(2, &t), 0);
    const char *text = "limit:\n  subkey_default:\n    A: {rate: 1}\n    B: {rate: 1}\n"
                       "    C: {rate: 1}\n";
    char err[256];
    assert_int_equal(sl_quotafile_parse(text, strlen(text), t, err, sizeof err), -ENOSPC);
    assert_non_null(strstr(err, "too many"));
    sl_quota_tree_free(t);
}

static void test_load_file(void **state)
{
    char path[] = "/tmp/sluice-quotafile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, example, strlen(example)), (ssize_t)strlen(example));
    close(fd);
    sl_quota_tree *t = NULL;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    char err[256];
    assert_int_equal(sl_quotafile_load(path, t, err, sizeof err), 0);
    assert_int_equal(sl_quota_tree_count(t), 7);
    sl_quota_tree_free(t);

    /* a syntax error names the file and the line */
    FILE *f = fopen(path, "w");
    fputs("limit:\n  key_default: {rate: x}\n", f);
    fclose(f);
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    assert_int_equal(sl_quotafile_load(path, t, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "line 2"));
    sl_quota_tree_free(t);
    unlink(path);

    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    assert_int_equal(sl_quotafile_load(path, t, err, sizeof err), -ENOENT);
    sl_quota_tree_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example),    cmocka_unit_test(test_optional_sections),
        cmocka_unit_test(test_errors),     cmocka_unit_test(test_alias_bomb),
        cmocka_unit_test(test_entry_cap),  cmocka_unit_test(test_load_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * envoyproxy/ratelimit configuration tests (config/rlsconf, config/rlssrc): the format's fields,
 * its matching rules (value before key alone, depth must match, wildcards in file order,
 * share_threshold), its errors with file and line, aliases that cannot blow up the walk, and a
 * directory read in name order where one bad file fails the whole load.
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

#include "config/rlsconf.h"
#include "config/rlssrc.h"
#include "sluice/engine.h"

static const char shop[] =
    "domain: shop\n"
    "descriptors:\n"
    "  - key: remote_address\n"
    "    rate_limit: {unit: minute, requests_per_unit: 3}\n"
    "  - key: remote_address\n"
    "    value: 50.0.0.5\n"
    "    rate_limit: {unit: SECOND, requests_per_unit: 0}\n"
    "  - key: message_type\n"
    "    value: marketing\n"
    "    descriptors:\n"
    "      - key: to_number\n"
    "        rate_limit: {unit: day, requests_per_unit: 5, name: mkt}\n"
    "  - key: ldap\n"
    "    rate_limit: {unlimited: true}\n"
    "  - key: s\n"
    "    shadow_mode: true\n"
    "    detailed_metric: yes\n"
    "    quota_mode: false\n"
    "    value_to_metric: true\n"
    "    metadata: {any: [thing, 1]}\n"
    "    rate_limit:\n"
    "      unit: hour\n"
    "      requests_per_unit: 1\n"
    "      algorithm: gcra\n"
    "      burst: 4\n"
    "      replaces: [{name: mkt}]\n"
    "  - key: path\n"
    "    value: /api/*/x\n"
    "    rate_limit: {unit: week, requests_per_unit: 7}\n"
    "  - key: path\n"
    "    value: /api/*\n"
    "    rate_limit: {unit: month, requests_per_unit: 8}\n"
    "  - key: files\n"
    "    value: f/*\n"
    "    share_threshold: true\n"
    "    rate_limit: {unit: year, requests_per_unit: 9}\n"
    "  - key: empty\n";

static sl_rlsconf *load(const char *text, int expect, const char *err_part)
{
    sl_rlsconf *c = NULL;
    assert_int_equal(sl_rlsconf_new(&c), 0);
    char err[256] = "";
    int rc = sl_rlsconf_add(c, "f.yaml", text, strlen(text), err, sizeof err);
    if (rc != expect)
        fail_msg("add returned %d (%s), expected %d", rc, err, expect);
    if (err_part && !strstr(err, err_part))
        fail_msg("error '%s' does not mention '%s'", err, err_part);
    return c;
}

/* Match "k1=v1", "k2=v2", ... (NULL-terminated pairs). */
static const sl_rlsconf_rule *match(const sl_rlsconf *c, const char *domain, const char **shared,
                                    ...)
{
    sl_rlsconf_entry e[8];
    size_t n = 0;
    va_list ap;
    va_start(ap, shared);
    const char *k;
    while ((k = va_arg(ap, const char *))) {
        const char *v = va_arg(ap, const char *);
        e[n++] = (sl_rlsconf_entry){.key = k, .key_len = strlen(k), .value = v,
                                    .value_len = strlen(v)};
    }
    va_end(ap);
    return sl_rlsconf_match(sl_rlsconf_domain_find(c, domain, strlen(domain)), e, n, shared);
}

static void test_fields_and_units(void **state)
{
    (void)state;
    sl_rlsconf *c = load(shop, 0, NULL);
    assert_int_equal(sl_rlsconf_domains(c), 1);
    const sl_rlsconf_rule *r = match(c, "shop", NULL, "remote_address", "10.0.0.1", NULL);
    assert_non_null(r);
    assert_int_equal(r->requests_per_unit, 3);
    assert_int_equal(r->unit, SL_RLS_UNIT_MINUTE);
    assert_int_equal(r->algorithm, SL_FIXED_WINDOW);
    assert_string_equal(r->path, "remote_address");
    assert_string_equal(r->file, "f.yaml");
    assert_int_equal(r->line, 4);
    r = match(c, "shop", NULL, "message_type", "marketing", "to_number", "1", NULL);
    assert_non_null(r);
    assert_string_equal(r->name, "mkt");
    assert_string_equal(r->path, "message_type_marketing.to_number");
    r = match(c, "shop", NULL, "ldap", "x", NULL);
    assert_true(r && r->unlimited);
    r = match(c, "shop", NULL, "s", "x", NULL);
    assert_true(r && r->shadow && r->detailed);
    assert_int_equal(r->algorithm, SL_GCRA);
    assert_int_equal(r->burst, 4);
    assert_int_equal(r->n_replaces, 1);
    assert_string_equal(r->replaces[0], "mkt");
    assert_int_equal(sl_rls_unit_ms(SL_RLS_UNIT_WEEK), 7LL * 86400000);
    assert_int_equal(sl_rls_unit_ms(SL_RLS_UNIT_MONTH), 30LL * 86400000);
    assert_int_equal(sl_rls_unit_ms(SL_RLS_UNIT_YEAR), 365LL * 86400000);
    assert_int_equal(sl_rls_unit_ms(0), 0);
    assert_int_equal(sl_rls_unit_ms(99), 0);
    sl_rlsconf_unref(c);
}

/* sluice's extensions: several rate_limit blocks on one descriptor, windows of n units. */
static void test_rate_limits_and_unit_multiplier(void **state)
{
    (void)state;
    sl_rlsconf *c = load("domain: x\n"
                         "descriptors:\n"
                         "  - key: k\n"
                         "    shadow_mode: true\n"
                         "    rate_limits:\n"
                         "      - {unit: second, requests_per_unit: 10, name: a}\n"
                         "      - {unit: minute, unit_multiplier: 5, requests_per_unit: 100}\n"
                         "  - key: one\n"
                         "    rate_limit: {unit: hour, requests_per_unit: 1}\n",
                         0, NULL);
    const sl_rlsconf_rule *r = match(c, "x", NULL, "k", "v", NULL);
    assert_non_null(r);
    assert_int_equal(r->requests_per_unit, 10);
    assert_int_equal(r->unit_multiplier, 1);
    assert_int_equal(r->window_ms, 1000);
    assert_string_equal(r->name, "a");
    assert_true(r->shadow);
    const sl_rlsconf_rule *b = r->also;
    assert_non_null(b);
    assert_int_equal(b->requests_per_unit, 100);
    assert_int_equal(b->unit, SL_RLS_UNIT_MINUTE);
    assert_int_equal(b->unit_multiplier, 5);
    assert_int_equal(b->window_ms, 300000);
    assert_true(b->shadow);
    assert_string_equal(b->path, "k");
    assert_null(b->also);
    r = match(c, "x", NULL, "one", "v", NULL);
    assert_true(r && !r->also && r->window_ms == 3600000);
    sl_rlsconf_unref(c);
    static const char *const bad[][2] = {
        {"  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"
         "    rate_limits: [{unit: day, requests_per_unit: 2}]\n", "not both"},
        {"  - key: k\n    rate_limits: []\n", "1 to 16"},
        {"  - key: k\n    rate_limits: {unit: day}\n", "must be a list"},
        {"  - key: k\n    rate_limits: [{unlimited: true}, {unit: day, requests_per_unit: 2}]\n",
         "unlimited"},
        {"  - key: k\n    rate_limit: {unit: day, requests_per_unit: 2, unit_multiplier: 0}\n",
         "at least 1"},
        {"  - key: k\n    rate_limit: {unlimited: true, unit_multiplier: 2}\n", "unlimited"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "domain: x\ndescriptors:\n%s", bad[i][0]);
        sl_rlsconf_unref(load(text, bad[i][1] ? -EINVAL : 0, bad[i][1]));
    }
}

static void test_matching_rules(void **state)
{
    (void)state;
    sl_rlsconf *c = load(shop, 0, NULL);
    /* key + value before key alone */
    const sl_rlsconf_rule *r = match(c, "shop", NULL, "remote_address", "50.0.0.5", NULL);
    assert_true(r && r->requests_per_unit == 0 && r->unit == SL_RLS_UNIT_SECOND);
    /* depth must match the configuration's */
    assert_null(match(c, "shop", NULL, "message_type", "marketing", NULL));
    assert_null(match(c, "shop", NULL, "message_type", "marketing", "to_number", "1", "x", "y",
                      NULL));
    assert_null(match(c, "shop", NULL, "remote_address", "1", "x", "y", NULL));
    assert_null(match(c, "shop", NULL, "message_type", "other", "to_number", "1", NULL));
    /* no rule, no domain, a key without rate_limit */
    assert_null(match(c, "shop", NULL, "nothing", "x", NULL));
    assert_null(match(c, "other", NULL, "remote_address", "x", NULL));
    assert_null(match(c, "shop", NULL, "empty", "x", NULL));
    assert_null(match(c, "shop", NULL, NULL));
    /* wildcards: the first in file order that matches "key_value" */
    r = match(c, "shop", NULL, "path", "/api/1/x", NULL);
    assert_true(r && r->requests_per_unit == 7);
    r = match(c, "shop", NULL, "path", "/api/1/y", NULL);
    assert_true(r && r->requests_per_unit == 8);
    r = match(c, "shop", NULL, "path", "/api/", NULL);
    assert_true(r && r->requests_per_unit == 8);
    assert_null(match(c, "shop", NULL, "path", "/web", NULL));
    /* share_threshold: the pattern's value stands for the entry's */
    const char *shared[2] = {"junk", "junk"};
    r = match(c, "shop", shared, "files", "f/a.pdf", NULL);
    assert_true(r && r->requests_per_unit == 9);
    assert_string_equal(shared[0], "f/*");
    r = match(c, "shop", shared, "path", "/api/q", NULL);
    assert_null(shared[0]);
    sl_rlsconf_unref(c);
}

static void test_errors_name_file_and_line(void **state)
{
    (void)state;
    static const struct { const char *text, *err; } bad[] = {
        {"descriptors: []\n", "f.yaml: line 1: config file cannot have empty domain"},
        {"", "config file cannot have empty domain"},
        {"domain: a\nfoo: 1\n", "line 2: config error, unknown key 'foo'"},
        {"domain: a\ndescriptors:\n  - value: x\n", "line 3: descriptor has empty key"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n"
         "      requests_per_unit: 1\n", "line 5: invalid rate limit unit 'fortnight'"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n",
         "line 4: should not specify rate limit unit when unlimited"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
         "requests_per_unit: -1}\n", "requests_per_unit must be a whole number"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
         "requests_per_unit: 4294967296}\n", "requests_per_unit is larger than 4294967295"},
        {"domain: a\ndescriptors:\n  - key: k\n  - key: k\n",
         "line 4: duplicate descriptor composite key 'k'"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, name: n, "
         "replaces: [{name: n}]}\n", "replaces should not contain name of same descriptor"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
         "replaces: [{name: ''}]}\n", "should not have an empty replaces entry"},
        {"domain: a\ndescriptors:\n  - key: k\n    share_threshold: true\n",
         "share_threshold can only be used with wildcard values"},
        {"domain: a\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n",
         "shadow_mode must be true or false"},
        {"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, algorithm: x}\n",
         "unknown algorithm 'x'"},
        {"domain: a\ndescriptors: {key: k}\n", "descriptors must be a list"},
        {"domain: a\ndescriptors:\n  - [k]\n", "a descriptor must be a mapping"},
        {"domain: [a]\n", "domain must be a string"},
        {"domain: a\n  b: :\n", "f.yaml: line"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_rlsconf *c = load(bad[i].text, -EINVAL, bad[i].err);
        assert_int_equal(sl_rlsconf_domains(c), 0);
        sl_rlsconf_unref(c);
    }
    /* too deep */
    char deep[8192] = "domain: d\ndescriptors:\n";
    size_t o = strlen(deep);
    for (int i = 0; i <= SL_RLSCONF_MAX_DEPTH + 1; i++)
        o += (size_t)snprintf(deep + o, sizeof deep - o, "%*s- key: k\n%*s  descriptors:\n",
                              2 * i, "", 2 * i, "");
    sl_rlsconf_unref(load(deep, -EINVAL, "nested deeper than"));
}

static void test_duplicate_domain_and_aliases(void **state)
{
    (void)state;
    sl_rlsconf *c = load("domain: a\n", 0, NULL);
    char err[256];
    assert_int_equal(sl_rlsconf_add(c, "g.yaml", "domain: a\n", 10, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "g.yaml: line 1: duplicate domain 'a'"));
    assert_int_equal(sl_rlsconf_add(c, "h.yaml", "domain: b\n", 10, err, sizeof err), 0);
    assert_int_equal(sl_rlsconf_domains(c), 2);
    /* aliases naming one list many times: bounded by the file's size */
    const char bomb[] = "domain: z\n"
                        "x: &a [{key: k}, {key: l}]\n";
    sl_rlsconf_unref(load(bomb, -EINVAL, "unknown key 'x'"));
    char big[4096] = "domain: z\ndescriptors:\n  - &a {key: k0, descriptors: "
                     "[{key: k}, {key: l}, {key: m}]}\n";
    size_t o = strlen(big);
    for (int i = 1; i < 60; i++)
        o += (size_t)snprintf(big + o, sizeof big - o, "  - {key: k%d, descriptors: [*a, *a, *a]}\n", i);
    sl_rlsconf *d = NULL;
    assert_int_equal(sl_rlsconf_new(&d), 0);
    int rc = sl_rlsconf_add(d, "b.yaml", big, strlen(big), err, sizeof err);
    assert_true(rc == 0 || rc == -EINVAL); /* either way, it returned */
    sl_rlsconf_unref(d);
    sl_rlsconf_unref(c);
}

static void put(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/sluice-rlsconf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    put(dir, "a.yaml", shop);
    put(dir, "b.yml", "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, "
                      "requests_per_unit: 1}\n");
    put(dir, ".hidden.yaml", "not: [valid");
    put(dir, "notes.txt", "not: [valid");
    sl_rlsconf *c = NULL;
    char err[512] = "";
    assert_int_equal(sl_rlssrc_load_dir(dir, &c, err, sizeof err), 0);
    assert_int_equal(sl_rlsconf_domains(c), 2);
    sl_rlsconf_unref(c);
    /* a live source: a bad file fails a reload, the last good configuration stays */
    sl_rlssrc *s = NULL;
    sl_rlssrc_config cfg = {.conn.file = dir};
    assert_int_equal(sl_rlssrc_new(&cfg, &s, err, sizeof err), 0);
    sl_rlssrc_reader r = {0};
    const sl_rlsconf *cur = sl_rlssrc_read(s, &r);
    assert_int_equal(sl_rlsconf_domains(cur), 2);
    put(dir, "c.yaml", "domain: shop\n");
    assert_int_equal(sl_rlssrc_reload(s, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "c.yaml: line 1: duplicate domain 'shop'"));
    assert_ptr_equal(sl_rlssrc_read(s, &r), cur);
    sl_watched_status st;
    sl_rlssrc_status_get(s, &st);
    assert_int_equal(st.load_errors, 1);
    put(dir, "c.yaml", "domain: third\n");
    assert_int_equal(sl_rlssrc_reload(s, err, sizeof err), 0);
    assert_int_equal(sl_rlsconf_domains(sl_rlssrc_read(s, &r)), 3);
    sl_rlssrc_reader_release(&r);
    sl_rlssrc_free(s);
    /* a bad directory fails the start */
    put(dir, "d.yaml", "domain: [");
    assert_int_not_equal(sl_rlssrc_new(&cfg, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, "d.yaml: line"));
    char missing[600];
    snprintf(missing, sizeof missing, "%s/none", dir);
    assert_int_equal(sl_rlssrc_load_dir(missing, &c, err, sizeof err), -ENOENT);
    const char *names[] = {"a.yaml", "b.yml", ".hidden.yaml", "notes.txt", "c.yaml", "d.yaml"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* An empty directory is an empty configuration, not an error (its name list is NULL: qsort of
 * NULL, even for 0 entries, is undefined; UBSan stopped an etcd-fed sluiced at start on it). */
static void test_empty_directory(void **state)
{
    (void)state;
    char dir[] = "/tmp/sluice-rlsconf-XXXXXX";
    assert_non_null(mkdtemp(dir));
    sl_rlsconf *c = NULL;
    char err[512] = "";
    assert_int_equal(sl_rlssrc_load_dir(dir, &c, err, sizeof err), 0);
    assert_int_equal(sl_rlsconf_domains(c), 0);
    sl_rlsconf_unref(c);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_and_units),
        cmocka_unit_test(test_rate_limits_and_unit_multiplier),
        cmocka_unit_test(test_matching_rules),
        cmocka_unit_test(test_errors_name_file_and_line),
        cmocka_unit_test(test_duplicate_domain_and_aliases),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_empty_directory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Quota tree tests: etcd key parsing (including KEYs with '/' and "/sublimit/" in them), JSON and
 * group-size values, the table (insert, replace, backward-shift removal checked against a
 * reference under many random operations, the entry cap), applying etcd puts and deletes under a
 * root, every lookup level, defaults, sublimits, DF normalisation, and snapshot reference counts.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config/quota.h"

static sl_quota_tree *tree(void)
{
    sl_quota_tree *t = NULL;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    return t;
}

static void put(sl_quota_tree *t, const char *key, const char *val)
{
    const char *err = NULL;
    int rc = sl_quota_tree_apply_put(t, "/levee", key, strlen(key), val, strlen(val), &err);
    if (rc)
        fail_msg("put %s=%s: %d %s", key, val, rc, err ? err : "");
}

static void parse_ok(const char *rel, sl_quota_kind kind, const char *key, const char *sub)
{
    sl_quota_path p;
    assert_int_equal(sl_quota_path_parse(rel, strlen(rel), &p), 0);
    assert_int_equal(p.kind, kind);
    assert_int_equal(p.key_len, key ? strlen(key) : 0);
    if (key)
        assert_memory_equal(p.key, key, strlen(key));
    assert_int_equal(p.sub_len, sub ? strlen(sub) : 0);
    if (sub)
        assert_memory_equal(p.sub, sub, strlen(sub));
    char buf[256];
    assert_int_equal(sl_quota_path_format(&p, buf, sizeof buf), (int)strlen(rel));
    assert_string_equal(buf, rel);
}

static void test_path_parse(void **state)
{
    parse_ok("limit/key_default", SL_QUOTA_KEY_DEFAULT, NULL, NULL);
    parse_ok("limit/subkey_default/GET", SL_QUOTA_SUBKEY_DEFAULT, NULL, "GET");
    parse_ok("limit/key/api/quota", SL_QUOTA_KEY, "api", NULL);
    parse_ok("limit/key/api/v1/GET/quota", SL_QUOTA_KEY, "api/v1/GET", NULL);
    parse_ok("limit/key/api/sublimit/POST", SL_QUOTA_SUBLIMIT, "api", "POST");
    parse_ok("limit/key/a/b/sublimit/PUT", SL_QUOTA_SUBLIMIT, "a/b", "PUT");
    /* the last "/sublimit/" splits; "/quota" at the end wins over a sublimit named quota */
    parse_ok("limit/key/x/sublimit/y/sublimit/Z", SL_QUOTA_SUBLIMIT, "x/sublimit/y", "Z");
    parse_ok("limit/key/x/sublimit/quota", SL_QUOTA_KEY, "x/sublimit", NULL);
    parse_ok("factor/default", SL_QUOTA_FACTOR_DEFAULT, NULL, NULL);
    parse_ok("factor/key/api", SL_QUOTA_FACTOR_KEY, "api", NULL);

    sl_quota_path p;
    assert_int_equal(sl_quota_path_parse("observer/obs-1", 14, &p), -ENOENT);
    assert_int_equal(sl_quota_path_parse("limitx", 6, &p), -ENOENT);
    const char *bad[] = {"limit/key//quota", "limit/key/api", "limit/key/api/sublimit/",
                         "limit/subkey_default/", "limit/other", "factor/key/", "factor/x",
                         "limit/key/quota"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(sl_quota_path_parse(bad[i], strlen(bad[i]), &p), -EINVAL);
}

static void test_values(void **state)
{
    sl_quota q;
    const char *err = NULL;
    assert_int_equal(sl_quota_parse_json("{\"rate\": 1000, \"burst\": 25}", 27, &q, &err), 0);
    assert_true(q.rate == 1000 && q.burst == 25);
    const char *s = "{\"rate\":2.5,\"burst\":27.9,\"note\":\"x\"}";
    assert_int_equal(sl_quota_parse_json(s, strlen(s), &q, &err), 0);
    assert_true(q.rate == 2.5 && q.burst == 27); /* rounded down */
    s = "{\"rate\":7}";
    assert_int_equal(sl_quota_parse_json(s, strlen(s), &q, &err), 0);
    assert_true(q.rate == 7 && q.burst == 0);
    const char *bad[] = {"", "[]", "{\"burst\":1}", "{\"rate\":-1}", "{\"rate\":\"5\"}",
                         "{\"rate\":1,\"burst\":-2}", "{\"rate\":1e12}", "{\"rate\":1,\"burst\":\"x\"}",
                         "not json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = NULL;
        assert_int_equal(sl_quota_parse_json(bad[i], strlen(bad[i]), &q, &err), -EINVAL);
        assert_non_null(err);
    }

    uint32_t f;
    assert_int_equal(sl_quota_parse_factor("4", 1, &f, &err), 0);
    assert_int_equal(f, 4);
    assert_int_equal(sl_quota_parse_factor(" 12\n", 4, &f, &err), 0);
    assert_int_equal(f, 12);
    assert_int_equal(sl_quota_parse_factor("\"3\"", 3, &f, &err), 0);
    assert_int_equal(f, 3);
    const char *badf[] = {"0", "", "-1", "1.5", "abc", "65537", "99999999999"};
    for (size_t i = 0; i < sizeof badf / sizeof badf[0]; i++)
        assert_int_equal(sl_quota_parse_factor(badf[i], strlen(badf[i]), &f, &err), -EINVAL);

    char buf[64];
    q = (sl_quota){.rate = 1100, .burst = 27};
    assert_true(sl_quota_format_json(&q, buf, sizeof buf) > 0);
    assert_string_equal(buf, "{\"rate\":1100,\"burst\":27}");
    sl_quota back;
    assert_int_equal(sl_quota_parse_json(buf, strlen(buf), &back, &err), 0);
    assert_true(back.rate == 1100 && back.burst == 27);
    assert_int_equal(sl_quota_format_json(&q, buf, 8), -ENOSPC);
}

/* Random inserts and removals against a plain array: the table must agree after every step
 * (this exercises backward-shift deletion across wrapped clusters as the table grows). */
static void test_table_random(void **state)
{
    enum { KEYS = 300, STEPS = 20000 };
    sl_quota_tree *t = tree();
    bool present[KEYS] = {0};
    int64_t val[KEYS] = {0};
    char names[KEYS][16];
    for (int i = 0; i < KEYS; i++)
        snprintf(names[i], sizeof names[i], "k%d", i);
    uint64_t x = 88172645463325252ull;
    size_t count = 0;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % KEYS);
        bool sub = (x >> 20) & 1; /* half the keys are sublimits, half key quotas */
        sl_quota_path p = {.kind = sub ? SL_QUOTA_SUBLIMIT : SL_QUOTA_KEY,
                           .key = names[k], .key_len = strlen(names[k]),
                           .sub = sub ? "M" : NULL, .sub_len = sub ? 1 : 0};
        /* key k always uses the same kind, so each k is one entry */
        p.kind = k % 2 ? SL_QUOTA_SUBLIMIT : SL_QUOTA_KEY;
        p.sub = k % 2 ? "M" : NULL;
        p.sub_len = k % 2 ? 1 : 0;
        if ((x >> 32) % 3) {
            sl_quota q = {.rate = (double)step, .burst = step};
            assert_int_equal(sl_quota_tree_set_quota(t, &p, &q), 0);
            if (!present[k])
                count++;
            present[k] = true;
            val[k] = step;
        } else {
            assert_int_equal(sl_quota_tree_remove(t, &p), present[k]);
            if (present[k])
                count--;
            present[k] = false;
        }
        assert_int_equal(sl_quota_tree_count(t), count);
        if (step % 97 == 0) {
            for (int j = 0; j < KEYS; j++) {
                sl_quota_path pj = {.kind = j % 2 ? SL_QUOTA_SUBLIMIT : SL_QUOTA_KEY,
                                    .key = names[j], .key_len = strlen(names[j]),
                                    .sub = j % 2 ? "M" : NULL, .sub_len = j % 2 ? 1 : 0};
                sl_quota q;
                assert_int_equal(sl_quota_tree_get_quota(t, &pj, &q), present[j]);
                if (present[j])
                    assert_int_equal(q.burst, val[j]);
            }
        }
    }
    /* a clone holds the same entries and is independent */
    sl_quota_tree *c;
    assert_int_equal(sl_quota_tree_clone(t, &c), 0);
    assert_int_equal(sl_quota_tree_count(c), count);
    sl_quota_tree_clear(t);
    assert_int_equal(sl_quota_tree_count(t), 0);
    for (int j = 0; j < KEYS; j++) {
        sl_quota_path pj = {.kind = j % 2 ? SL_QUOTA_SUBLIMIT : SL_QUOTA_KEY, .key = names[j],
                            .key_len = strlen(names[j]), .sub = j % 2 ? "M" : NULL,
                            .sub_len = j % 2 ? 1 : 0};
        assert_int_equal(sl_quota_tree_get_quota(c, &pj, NULL), present[j]);
    }
    sl_quota_tree_free(c);
    sl_quota_tree_free(t);
}

static void test_max_entries(void **state)
{
    sl_quota_tree *t = NULL;
    assert_int_equal(sl_quota_tree_new(3, &t), 0);
    put(t, "/levee/limit/key/a/quota", "{\"rate\":1}");
    put(t, "/levee/limit/key/b/quota", "{\"rate\":1}");
    put(t, "/levee/factor/default", "2");
    const char *err = NULL;
    const char *k = "/levee/limit/key/c/quota";
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee", k, strlen(k), "{\"rate\":1}", 10, &err),
                     -ENOSPC);
    assert_non_null(err);
    /* replacing an existing entry still works when full */
    put(t, "/levee/limit/key/a/quota", "{\"rate\":5}");
    assert_int_equal(sl_quota_tree_count(t), 3);
    sl_quota_tree_free(t);
}

static void test_apply_etcd(void **state)
{
    sl_quota_tree *t = tree();
    const char *err = NULL;
    /* outside the root, or not a quota subtree: ignored */
    const char *k1 = "/other/limit/key/a/quota", *k2 = "/levee/observer/obs-1";
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee", k1, strlen(k1), "{\"rate\":1}", 10, &err),
                     -ENOENT);
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee", k2, strlen(k2), "{}", 2, &err), -ENOENT);
    const char *k3 = "/leveex/limit/key_default";
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee", k3, strlen(k3), "{\"rate\":1}", 10, &err),
                     -ENOENT);
    assert_int_equal(sl_quota_tree_count(t), 0);

    /* a trailing slash on the root is the same root */
    const char *k4 = "/levee/limit/key/api/quota";
    const char *v4 = "{\"rate\":10,\"burst\":2}";
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee/", k4, strlen(k4), v4, strlen(v4), &err),
                     0);
    sl_quota_path p = {.kind = SL_QUOTA_KEY, .key = "api", .key_len = 3};
    sl_quota q;
    assert_true(sl_quota_tree_get_quota(t, &p, &q));
    assert_true(q.rate == 10 && q.burst == 2);

    /* a malformed value removes the entry (the tree mirrors what etcd holds that is valid) */
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee", k4, strlen(k4), "{\"rate\":-3}", 11, &err),
                     -EINVAL);
    assert_non_null(err);
    assert_false(sl_quota_tree_get_quota(t, &p, NULL));

    put(t, k4, "{\"rate\":10}");
    assert_int_equal(sl_quota_tree_apply_delete(t, "/levee", k4, strlen(k4)), 0);
    assert_int_equal(sl_quota_tree_apply_delete(t, "/levee", k4, strlen(k4)), -ENOENT);
    assert_false(sl_quota_tree_get_quota(t, &p, NULL));

    put(t, "/levee/factor/key/api", "3");
    sl_quota_path pf = {.kind = SL_QUOTA_FACTOR_KEY, .key = "api", .key_len = 3};
    uint32_t f = 0;
    assert_true(sl_quota_tree_get_factor(t, &pf, &f));
    assert_int_equal(f, 3);
    const char *kf = "/levee/factor/key/api";
    assert_int_equal(sl_quota_tree_apply_put(t, "/levee", kf, strlen(kf), "zero", 4, &err), -EINVAL);
    assert_false(sl_quota_tree_get_factor(t, &pf, &f));

    /* root "/" and "": keys start right after the first '/' */
    put(t, "/levee/limit/key_default", "{\"rate\":1}");
    const char *k5 = "/limit/key/z/quota";
    assert_int_equal(sl_quota_tree_apply_put(t, "/", k5, strlen(k5), "{\"rate\":1}", 10, &err), 0);
    assert_int_equal(sl_quota_tree_apply_put(t, "", k5, strlen(k5), "{\"rate\":2}", 10, &err), 0);
    sl_quota_path pz = {.kind = SL_QUOTA_KEY, .key = "z", .key_len = 1};
    assert_true(sl_quota_tree_get_quota(t, &pz, &q));
    assert_true(q.rate == 2);
    sl_quota_tree_free(t);
}

/* Lookup helper: resource, prefix, method as C strings (NULL = absent). */
static void look(const sl_quota_tree *t, const char *r, const char *p, const char *m,
                 uint32_t df_override, sl_quota_lookup *lk)
{
    assert_int_equal(sl_quota_lookup_request(t, r, strlen(r), p, p ? strlen(p) : 0, m,
                                             m ? strlen(m) : 0, df_override, lk),
                     0);
}

static void assert_match(const sl_quota_match *m, sl_quota_source src, int level,
                         const char *bucket, const char *name, double rate, int64_t burst)
{
    assert_int_equal(m->source, src);
    assert_int_equal(m->level, level);
    assert_int_equal(m->bucket_len, strlen(bucket));
    assert_memory_equal(m->bucket, bucket, m->bucket_len);
    assert_int_equal(m->name_len, strlen(name));
    assert_memory_equal(m->name, name, m->name_len);
    if (m->quota.rate != rate)
        fail_msg("rate %g, expected %g", m->quota.rate, rate);
    assert_int_equal(m->quota.burst, burst);
}

static void test_lookup_levels(void **state)
{
    sl_quota_tree *t = tree();
    sl_quota_lookup lk;

    /* nothing at all */
    look(t, "api", "v1", "GET", 0, &lk);
    assert_int_equal(lk.n, 0);
    assert_false(lk.has_main);

    put(t, "/levee/limit/key_default", "{\"rate\":1,\"burst\":1}");
    look(t, "api", "v1", "GET", 0, &lk);
    assert_int_equal(lk.n, 1);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY_DEFAULT, 4, "api", "api", 1, 1);

    put(t, "/levee/limit/key/api/quota", "{\"rate\":3,\"burst\":3}");
    look(t, "api", "v1", "GET", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 3, "api", "api", 3, 3);

    put(t, "/levee/limit/key/api/GET/quota", "{\"rate\":2,\"burst\":2}");
    look(t, "api", "v1", "GET", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 2, "api/GET", "api/GET", 2, 2);

    put(t, "/levee/limit/key/api/v1/GET/quota", "{\"rate\":4,\"burst\":4}");
    look(t, "api", "v1", "GET", 0, &lk);
    assert_int_equal(lk.n, 1);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 1, "api/v1/GET", "api/v1/GET", 4, 4);

    /* the prefix is trimmed of slashes: "/v1/" is "v1" */
    look(t, "api", "/v1/", "GET", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 1, "api/v1/GET", "api/v1/GET", 4, 4);
    /* another prefix falls to R/M, another method to R */
    look(t, "api", "v2", "GET", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 2, "api/GET", "api/GET", 2, 2);
    look(t, "api", "v1", "POST", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 3, "api", "api", 3, 3);
    /* no method: R/P then R */
    look(t, "api", "v1", NULL, 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 3, "api", "api", 3, 3);
    put(t, "/levee/limit/key/api/v1/quota", "{\"rate\":5}");
    look(t, "api", "v1", NULL, 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 1, "api/v1", "api/v1", 5, 0);
    look(t, "api", "", "", 0, &lk); /* empty = absent */
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 3, "api", "api", 3, 3);
    /* no prefix, a method: R/M is the most specific */
    look(t, "api", NULL, "GET", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 2, "api/GET", "api/GET", 2, 2);
    /* another resource gets the default with a bucket of its own */
    look(t, "web", "v1", "GET", 0, &lk);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY_DEFAULT, 4, "web", "web", 1, 1);

    /* errors */
    assert_int_equal(sl_quota_lookup_request(t, "", 0, NULL, 0, NULL, 0, 0, &lk), -EINVAL);
    char *big = malloc(SL_QUOTA_MAX_KEY + 1);
    memset(big, 'a', SL_QUOTA_MAX_KEY);
    big[SL_QUOTA_MAX_KEY] = 0;
    assert_int_equal(sl_quota_lookup_request(t, big, SL_QUOTA_MAX_KEY, NULL, 0, NULL, 0, 0, &lk),
                     -ENAMETOOLONG);
    assert_int_equal(sl_quota_lookup_request(t, big, SL_QUOTA_MAX_KEY - 10, "p", 1, "m", 1, 0, &lk),
                     0);
    free(big);
    sl_quota_tree_free(t);
}

static void test_lookup_sublimits(void **state)
{
    sl_quota_tree *t = tree();
    sl_quota_lookup lk;
    put(t, "/levee/limit/key/api/quota", "{\"rate\":100,\"burst\":10}");
    put(t, "/levee/limit/subkey_default/GET", "{\"rate\":50,\"burst\":5}");
    put(t, "/levee/limit/key/api/sublimit/POST", "{\"rate\":7,\"burst\":1}");

    look(t, "api", NULL, "POST", 0, &lk);
    assert_int_equal(lk.n, 2);
    assert_match(&lk.m[0], SL_QUOTA_FROM_KEY, 3, "api", "api", 100, 10);
    assert_match(&lk.m[1], SL_QUOTA_FROM_SUBLIMIT, 0, "api\nPOST", "api/sublimit/POST", 7, 1);

    /* no sublimit for GET on api: subkey_default */
    look(t, "api", "v1", "GET", 0, &lk);
    assert_int_equal(lk.n, 2);
    assert_match(&lk.m[1], SL_QUOTA_FROM_SUBKEY_DEFAULT, 0, "api\nGET", "subkey_default/GET", 50,
                 5);
    /* the sublimit bucket is per resource: every prefix shares it */
    look(t, "api", "v2", "POST", 0, &lk);
    assert_match(&lk.m[1], SL_QUOTA_FROM_SUBLIMIT, 0, "api\nPOST", "api/sublimit/POST", 7, 1);
    /* a method without any subkey quota: main only */
    look(t, "api", NULL, "DELETE", 0, &lk);
    assert_int_equal(lk.n, 1);
    /* no method: no subkey quota */
    look(t, "api", NULL, NULL, 0, &lk);
    assert_int_equal(lk.n, 1);
    /* a resource without a main quota still gets the subkey default */
    look(t, "other", NULL, "GET", 0, &lk);
    assert_int_equal(lk.n, 1);
    assert_false(lk.has_main);
    assert_match(&lk.m[0], SL_QUOTA_FROM_SUBKEY_DEFAULT, 0, "other\nGET", "subkey_default/GET",
                 50, 5);
    sl_quota_tree_free(t);
}

static void test_lookup_factor(void **state)
{
    sl_quota_tree *t = tree();
    sl_quota_lookup lk;
    put(t, "/levee/limit/key/api/quota", "{\"rate\":1000,\"burst\":25}");
    put(t, "/levee/limit/key/web/quota", "{\"rate\":6600,\"burst\":165}");
    put(t, "/levee/limit/key/api/sublimit/GET", "{\"rate\":100,\"burst\":3}");

    look(t, "api", NULL, "GET", 0, &lk);
    assert_int_equal(lk.m[0].factor, 1);
    assert_true(lk.m[0].quota.rate == 1000);

    put(t, "/levee/factor/default", "4");
    look(t, "api", NULL, "GET", 0, &lk);
    /* rate divided by DF, burst as configured (Levee's burst formula already includes DF) */
    assert_int_equal(lk.m[0].factor, 4);
    assert_true(lk.m[0].quota.rate == 250 && lk.m[0].quota.burst == 25);
    assert_true(lk.m[0].raw.rate == 1000);
    assert_true(lk.m[1].quota.rate == 25 && lk.m[1].quota.burst == 3);

    put(t, "/levee/factor/key/web", "3");
    look(t, "web", NULL, NULL, 0, &lk);
    assert_int_equal(lk.m[0].factor, 3);
    assert_true(lk.m[0].quota.rate == 2200);
    look(t, "api", NULL, NULL, 0, &lk);
    assert_int_equal(lk.m[0].factor, 4);

    /* an override replaces every DF */
    look(t, "web", NULL, NULL, 1, &lk);
    assert_true(lk.m[0].quota.rate == 6600 && lk.m[0].factor == 1);
    look(t, "api", NULL, NULL, 5, &lk);
    assert_true(lk.m[0].quota.rate == 200);
    sl_quota_tree_free(t);
}

static int count_visit(void *ud, const sl_quota_path *p, const sl_quota *q, uint32_t factor)
{
    int *n = ud;
    (*n)++;
    if (p->kind == SL_QUOTA_FACTOR_DEFAULT)
        assert_true(q == NULL && factor == 2);
    else
        assert_non_null(q);
    return 0;
}

static void test_visit_and_snapshot(void **state)
{
    sl_quota_tree *t = tree();
    put(t, "/levee/limit/key/a/quota", "{\"rate\":1}");
    put(t, "/levee/limit/key/a/sublimit/GET", "{\"rate\":1}");
    put(t, "/levee/factor/default", "2");
    int n = 0;
    sl_quota_tree_visit(t, count_visit, &n);
    assert_int_equal(n, 3);

    sl_quota_snap *s;
    assert_int_equal(sl_quota_snap_new(t, true, 42, 1000, &s), 0);
    assert_int_equal(s->revision, 42);
    assert_true(s->loaded);
    sl_quota_snap_ref(s);
    sl_quota_snap_unref(s);
    assert_int_equal(sl_quota_tree_count(s->tree), 3); /* still alive */
    sl_quota_snap_unref(s);                            /* freed (ASan checks) */
    sl_quota_snap_unref(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_parse),      cmocka_unit_test(test_values),
        cmocka_unit_test(test_table_random),    cmocka_unit_test(test_max_entries),
        cmocka_unit_test(test_apply_etcd),      cmocka_unit_test(test_lookup_levels),
        cmocka_unit_test(test_lookup_sublimits), cmocka_unit_test(test_lookup_factor),
        cmocka_unit_test(test_visit_and_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

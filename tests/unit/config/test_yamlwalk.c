/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bounded YAML walk tests: a syntax error and a failing node name their line, an empty document
 * has no root, the pair iterator's checks (not a mapping, a non-scalar key when asked, a callback's
 * error stops it), and an alias bomb spends the budget instead of expanding.
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

#include "config/yamlwalk.h"

/* sl_yw first, as the callers embed it */
typedef struct counter {
    sl_yw yw;
    size_t pairs;
    size_t stop_at; /* 0: never */
} counter;

static int visit(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud)
{
    counter *c = (counter *)w;
    c->pairs++;
    if (c->stop_at && c->pairs == c->stop_at)
        return sl_yw_fail(w, k, -ERANGE, "stopped at %zu", c->pairs);
    if (v->type == YAML_MAPPING_NODE)
        return sl_yw_each(w, v, ud ? ud : "a value", visit, ud);
    return 0;
}

static int walk_text(counter *c, const char *text, bool scalar_keys, char *err, size_t errlen)
{
    int rc = sl_yw_load(&c->yw, text, strlen(text), err, errlen);
    if (rc)
        return rc;
    c->yw.scalar_keys = scalar_keys;
    yaml_node_t *root = sl_yw_root(&c->yw);
    if (root)
        rc = sl_yw_each(&c->yw, root, "the file", visit, NULL);
    sl_yw_free(&c->yw);
    return rc;
}

static void test_syntax_error(void **state)
{
    counter c = {0};
    char err[128];
    assert_int_equal(walk_text(&c, "a: 1\nb: 2\n  c: 3\n", false, err, sizeof err), -EINVAL);
    assert_string_equal(err, "line 3: mapping values are not allowed in this context");
    /* no error buffer is fine too, and a short one is truncated, not overrun */
    assert_int_equal(walk_text(&c, "a: [1,\n", false, NULL, 0), -EINVAL);
    char tiny[6];
    assert_int_equal(walk_text(&c, "a: 1\nb: 2\n  c: 3\n", false, tiny, sizeof tiny), -EINVAL);
    assert_string_equal(tiny, "line ");
    assert_int_equal(c.pairs, 0);
}

static void test_empty_and_scalars(void **state)
{
    counter c = {0};
    char err[128] = "stale";
    assert_int_equal(walk_text(&c, "", true, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(walk_text(&c, "# only a comment\n", true, err, sizeof err), 0);
    assert_int_equal(walk_text(&c, "a:\nb: {}\n", true, err, sizeof err), 0);
    assert_int_equal(c.pairs, 2);

    sl_yw w;
    assert_int_equal(sl_yw_load(&w, "abc", 3, err, sizeof err), 0);
    yaml_node_t *n = yaml_document_get_root_node(&w.doc);
    size_t l = 0;
    assert_non_null(sl_yw_scalar(n, &l));
    assert_int_equal(l, 3);
    assert_true(sl_yw_is(n, "abc"));
    assert_false(sl_yw_is(n, "ab"));
    assert_false(sl_yw_is(n, "abcd"));
    assert_false(sl_yw_empty(n));
    assert_null(sl_yw_scalar(NULL, &l));
    assert_false(sl_yw_is(NULL, "abc"));
    assert_non_null(sl_yw_root(&w));
    sl_yw_free(&w);
    sl_yw_free(&w); /* twice is harmless */
    assert_null(sl_yw_root(&w));
}

static void test_fail_lines(void **state)
{
    char err[128];
    const char *text = "a: 1\nb:\n  c: [1, 2]\n";
    sl_yw w;
    assert_int_equal(sl_yw_load(&w, text, strlen(text), err, sizeof err), 0);
    yaml_node_t *root = sl_yw_root(&w);
    assert_non_null(root);
    /* a node the budget refused */
    assert_int_equal(sl_yw_each(&w, NULL, "x", visit, NULL), -EINVAL);
    assert_string_equal(err, "quota file too complex");
    yaml_node_t *b = sl_yw_node(&w, root->data.mapping.pairs.start[1].value);
    yaml_node_t *seq = sl_yw_node(&w, b->data.mapping.pairs.start[0].value);
    assert_int_equal(sl_yw_each(&w, seq, "b.c", visit, NULL), -EINVAL);
    assert_string_equal(err, "line 3: b.c must be a mapping");
    assert_int_equal(sl_yw_fail(&w, b, -ENOSPC, "full after %d", 7), -ENOSPC);
    assert_string_equal(err, "line 3: full after 7");
    assert_int_equal(sl_yw_fail(&w, NULL, -EIO, "no line"), -EIO);
    assert_string_equal(err, "no line");
    sl_yw_free(&w);
}

static void test_each_checks(void **state)
{
    counter c = {0};
    char err[128];
    const char *complex_key = "a: 1\n? [x, y]\n: 2\n";
    /* a non-scalar key: an error only when the caller asks for scalar keys */
    assert_int_equal(walk_text(&c, complex_key, true, err, sizeof err), -EINVAL);
    assert_string_equal(err, "line 2: the file: a key must be a string");
    assert_int_equal(c.pairs, 1);
    c.pairs = 0;
    assert_int_equal(walk_text(&c, complex_key, false, err, sizeof err), 0);
    assert_int_equal(c.pairs, 2);

    /* the top level must be a mapping */
    c.pairs = 0;
    assert_int_equal(walk_text(&c, "- a\n- b\n", true, err, sizeof err), -EINVAL);
    assert_string_equal(err, "line 1: the file must be a mapping");

    /* a callback's error stops the walk and comes back unchanged */
    c = (counter){.stop_at = 3};
    assert_int_equal(walk_text(&c, "a: 1\nb: {c: 2, d: 3}\ne: 4\n", true, err, sizeof err),
                     -ERANGE);
    assert_string_equal(err, "line 2: stopped at 3");
    assert_int_equal(c.pairs, 3);
}

static void test_alias_bomb(void **state)
{
    /* 10^7 leaves through aliases in well under a kilobyte */
    char text[2048];
    size_t n = (size_t)snprintf(text, sizeof text,
                                "l0: &l0 {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1, "
                                "j: 1}\n");
    for (int lv = 1; lv <= 7; lv++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "l%d: &l%d {a: *l%d, b: *l%d, c: *l%d, d: *l%d, e: *l%d, f: *l%d, "
                              "g: *l%d, h: *l%d, i: *l%d, j: *l%d}\n",
                              lv, lv, lv - 1, lv - 1, lv - 1, lv - 1, lv - 1, lv - 1, lv - 1,
                              lv - 1, lv - 1, lv - 1);
    assert_true(n < sizeof text - 1);
    counter c = {0};
    char err[128];
    assert_int_equal(walk_text(&c, text, true, err, sizeof err), -EINVAL);
    assert_string_equal(err, "quota file too complex");
    /* every pair visited cost two nodes of 8 * (len + 16) */
    assert_true(c.pairs <= 4 * (n + 16));
    assert_true(c.pairs >= 4 * (n + 16) - 8);

    /* the same levels without aliases, written out, fit the budget */
    c.pairs = 0;
    assert_int_equal(walk_text(&c, "l0: {a: 1, b: 1}\nl1: {a: {x: 1}, b: {y: 2}}\n", true, err,
                               sizeof err),
                     0);
    assert_int_equal(c.pairs, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_error), cmocka_unit_test(test_empty_and_scalars),
        cmocka_unit_test(test_fail_lines),   cmocka_unit_test(test_each_checks),
        cmocka_unit_test(test_alias_bomb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

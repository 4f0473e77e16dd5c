/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client-proxy's choice of limiters (levee/proxy.h): a resource's group is its DF best
 * limiters by HRW, the same whatever order the limiters are listed in; a down member is replaced
 * by the next one by HRW and the other members stay; with every candidate down the best ones are
 * used all the same; groups spread over the limiters; DF comes from factor/key/<R>, else
 * factor/default, else 1.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/picker.h"
#include "levee/proxy.h"

static const char *const names[] = {"l1", "l2", "l3", "l4", "l5", "l6"};
#define N 6

static void test_group_is_top_df_in_any_order(void **state)
{
    (void)state;
    const char *rev[N];
    for (int i = 0; i < N; i++)
        rev[i] = names[N - 1 - i];
    for (int r = 0; r < 200; r++) {
        char res[32];
        snprintf(res, sizeof res, "resource-%d", r);
        uint64_t h = sl_picker_hash(NULL, res, strlen(res));
        size_t a[N], b[N], all[N];
        assert_int_equal(sl_proxy_group(names, NULL, N, h, 3, a), 3);
        assert_int_equal(sl_proxy_group(rev, NULL, N, h, 3, b), 3);
        assert_int_equal(sl_proxy_group(names, NULL, N, h, N, all), N);
        for (int i = 0; i < 3; i++) {
            assert_string_equal(names[a[i]], rev[b[i]]); /* the list's order does not matter */
            assert_int_equal(a[i], all[i]);              /* the DF best of the full order */
        }
        assert_int_equal(sl_proxy_group(names, NULL, N, h, 99, all), N); /* DF capped at N */
    }
}

static void test_down_member_replaced_by_next_by_hrw(void **state)
{
    (void)state;
    for (int r = 0; r < 200; r++) {
        char res[32];
        snprintf(res, sizeof res, "r%d", r);
        uint64_t h = sl_picker_hash(NULL, res, strlen(res));
        size_t all[N], g[N];
        sl_proxy_group(names, NULL, N, h, N, all);
        bool down[N] = {false};
        down[all[1]] = true; /* the second member of a DF-3 group fails */
        assert_int_equal(sl_proxy_group(names, down, N, h, 3, g), 3);
        assert_int_equal(g[0], all[0]);
        assert_int_equal(g[1], all[2]);
        assert_int_equal(g[2], all[3]); /* the next by HRW takes the share */
        for (int i = 0; i < N; i++)
            down[i] = true;
        assert_int_equal(sl_proxy_group(names, down, N, h, 2, g), 2);
        assert_int_equal(g[0], all[0]); /* all down: the best ones all the same */
        assert_int_equal(g[1], all[1]);
    }
    size_t g[N];
    assert_int_equal(sl_proxy_group(names, NULL, 0, 1, 3, g), 0);
}

static void test_groups_spread(void **state)
{
    (void)state;
    int owners[N] = {0};
    for (int r = 0; r < 6000; r++) {
        char res[32];
        snprintf(res, sizeof res, "k%d", r);
        size_t g[1];
        sl_proxy_group(names, NULL, N, sl_picker_hash(NULL, res, strlen(res)), 1, g);
        owners[g[0]]++;
    }
    for (int i = 0; i < N; i++)
        assert_in_range(owners[i], 700, 1300); /* 1000 each on average */
}

static void test_factor(void **state)
{
    (void)state;
    sl_quota_tree *t;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    assert_int_equal(sl_proxy_factor(NULL, "x", 1), 1);
    assert_int_equal(sl_proxy_factor(t, "x", 1), 1);
    const char *err;
    assert_int_equal(sl_quota_tree_apply_put(t, "/lv", "/lv/factor/default", 18, "2", 1, &err), 0);
    assert_int_equal(sl_quota_tree_apply_put(t, "/lv", "/lv/factor/key/hot", 18, "4", 1, &err), 0);
    assert_int_equal(sl_proxy_factor(t, "x", 1), 2);
    assert_int_equal(sl_proxy_factor(t, "hot", 3), 4);
    assert_int_equal(sl_proxy_factor(t, "", 0), 2);
    sl_quota_tree_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_is_top_df_in_any_order),
        cmocka_unit_test(test_down_member_replaced_by_next_by_hrw),
        cmocka_unit_test(test_groups_spread),
        cmocka_unit_test(test_factor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

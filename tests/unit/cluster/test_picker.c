/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Picker tests: every node computes the same owner from the same set of peers whatever order it
 * learnt them in; the key hash of (name, unique_key) is the hash of name + "_" + unique_key; an
 * empty picker has no owner; a join moves keys only to the new peer and a leave only from the
 * old one, about 1/N of them; the load is balanced; DF groups are distinct, start with the HRW
 * owner and grow by appending. The balance and movement figures are printed (docs/cluster.md).
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

#include "cluster/picker.h"
#include "sluice/clock.h"

#define NKEYS 200000

static char **make_addrs(size_t n, size_t base)
{
    char **v = calloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i] = malloc(32);
        snprintf(v[i], 32, "10.0.%zu.%zu:1051", (base + i) / 250, (base + i) % 250 + 1);
    }
    return v;
}

static void free_addrs(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static uint64_t key_hash(size_t k)
{
    char key[32];
    int n = snprintf(key, sizeof key, "account:%zu", k);
    return sl_picker_key_hash(NULL, "requests_per_sec", 16, key, (size_t)n);
}

static void test_same_owner_any_order(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        char **a = make_addrs(7, 0);
        const char *fwd[8], *rev[8];
        for (int i = 0; i < 7; i++) {
            fwd[i] = a[i];
            rev[i] = a[6 - i];
        }
        fwd[7] = a[3]; /* a duplicate changes nothing */
        sl_picker *p1, *p2;
        assert_int_equal(sl_picker_new(kind, 64, fwd, 8, &p1), 0);
        assert_int_equal(sl_picker_new(kind, 64, rev, 7, &p2), 0);
        assert_int_equal(sl_picker_count(p1), 7);
        for (size_t k = 0; k < 5000; k++) {
            uint64_t h = key_hash(k);
            assert_string_equal(sl_picker_addr(p1, sl_picker_owner(p1, h)),
                                sl_picker_addr(p2, sl_picker_owner(p2, h)));
        }
        assert_int_equal(sl_picker_find(p1, a[5]), sl_picker_find(p2, a[5]));
        assert_int_equal(sl_picker_find(p1, "nope:1"), -1);
        sl_picker_free(p1);
        sl_picker_free(p2);
        free_addrs(a, 7);
    }
}

static void test_key_hash_is_joined_key(void **state)
{
    (void)state;
    assert_true(sl_picker_key_hash(NULL, "a", 1, "b", 1) == sl_picker_hash(NULL, "a_b", 3));
    assert_true(sl_picker_key_hash(NULL, "a_b", 3, "c", 1) == sl_picker_hash(NULL, "a_b_c", 5));
    assert_true(sl_picker_key_hash(NULL, "a", 1, "b", 1) != sl_picker_key_hash(NULL, "a", 1, "c", 1));
    /* past the stack buffer, the streaming path must agree */
    char name[300], key[400], joined[701];
    memset(name, 'n', sizeof name);
    memset(key, 'k', sizeof key);
    memcpy(joined, name, sizeof name);
    joined[300] = '_';
    memcpy(joined + 301, key, sizeof key);
    assert_true(sl_picker_key_hash(NULL, name, 300, key, 400) == sl_picker_hash(NULL, joined, 701));
}

static void test_empty_and_invalid(void **state)
{
    (void)state;
    sl_picker *p;
    assert_int_equal(sl_picker_new(SL_PICKER_KIND_RING, 16, NULL, 0, &p), 0);
    assert_int_equal(sl_picker_owner(p, 42), SIZE_MAX);
    size_t g[3];
    assert_int_equal(sl_picker_group(p, 42, 3, g), 0);
    sl_picker_free(p);
    const char *one = "a:1";
    assert_int_equal(sl_picker_new(7, 16, &one, 1, &p), -EINVAL);
    assert_int_equal(sl_picker_new(SL_PICKER_KIND_RING, 0, &one, 1, &p), -EINVAL);
}

static double balance(int kind, size_t n, unsigned replicas)
{
    char **a = make_addrs(n, 0);
    sl_picker *p;
    assert_int_equal(sl_picker_new(kind, replicas, (const char *const *)a, n, &p), 0);
    size_t *cnt = calloc(n, sizeof *cnt);
    for (size_t k = 0; k < NKEYS; k++)
        cnt[sl_picker_owner(p, key_hash(k))]++;
    size_t mx = 0;
    for (size_t i = 0; i < n; i++)
        if (cnt[i] > mx)
            mx = cnt[i];
    free(cnt);
    sl_picker_free(p);
    free_addrs(a, n);
    return (double)mx / ((double)NKEYS / (double)n);
}

/* Share of keys that change owner when a peer joins (n -> n+1) or leaves (n -> n-1). Keys may
 * only move to the joiner / from the leaver: anything else fails the test. */
static void movement(int kind, size_t n, unsigned replicas, double *join, double *leave)
{
    char **a = make_addrs(n + 1, 0);
    sl_picker *base, *joined, *left;
    assert_int_equal(sl_picker_new(kind, replicas, (const char *const *)a, n, &base), 0);
    assert_int_equal(sl_picker_new(kind, replicas, (const char *const *)a, n + 1, &joined), 0);
    /* the leaver is a[n/2] */
    const char **l = calloc(n, sizeof *l);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (i != n / 2)
            l[m++] = a[i];
    assert_int_equal(sl_picker_new(kind, replicas, l, m, &left), 0);
    size_t moved_j = 0, moved_l = 0;
    for (size_t k = 0; k < NKEYS; k++) {
        uint64_t h = key_hash(k);
        const char *o = sl_picker_addr(base, sl_picker_owner(base, h));
        const char *oj = sl_picker_addr(joined, sl_picker_owner(joined, h));
        const char *ol = sl_picker_addr(left, sl_picker_owner(left, h));
        if (strcmp(o, oj) != 0) {
            assert_string_equal(oj, a[n]);
            moved_j++;
        }
        if (strcmp(o, ol) != 0) {
            assert_string_equal(o, a[n / 2]);
            moved_l++;
        }
    }
    *join = (double)moved_j / NKEYS;
    *leave = (double)moved_l / NKEYS;
    sl_picker_free(base);
    sl_picker_free(joined);
    sl_picker_free(left);
    free(l);
    free_addrs(a, n + 1);
}

static void test_balance_and_movement(void **state)
{
    (void)state;
    static const size_t ns[] = {3, 10, 100};
    printf("picker  replicas  peers  max/mean  join-moved (ideal)  leave-moved (ideal)  ns/owner\n");
    for (int kind = 0; kind < 2; kind++) {
        unsigned reps[] = {512, 64};
        for (int ri = 0; ri < (kind == SL_PICKER_KIND_RING ? 2 : 1); ri++) {
            for (size_t t = 0; t < 3; t++) {
                size_t n = ns[t];
                double b = balance(kind, n, reps[ri]);
                double j, l;
                movement(kind, n, reps[ri], &j, &l);
                /* lookup cost */
                char **a = make_addrs(n, 0);
                sl_picker *p;
                assert_int_equal(sl_picker_new(kind, reps[ri], (const char *const *)a, n, &p), 0);
                uint64_t *hs = malloc(NKEYS * sizeof *hs);
                for (size_t k = 0; k < NKEYS; k++)
                    hs[k] = key_hash(k);
                int64_t t0 = sl_mono_ns();
                size_t acc = 0;
                for (size_t k = 0; k < NKEYS; k++)
                    acc += sl_picker_owner(p, hs[k]);
                double nsk = (double)(sl_mono_ns() - t0) / NKEYS;
                free(hs);
                assert_true(acc < SIZE_MAX);
                sl_picker_free(p);
                free_addrs(a, n);
                printf("%-6s  %8s  %5zu  %8.3f  %10.4f (%.4f)  %11.4f (%.4f)  %6.0f\n",
                       kind == SL_PICKER_KIND_RING ? "ring" : "hrw",
                       kind == SL_PICKER_KIND_RING ? (ri ? "64" : "512") : "-", n, b, j,
                       1.0 / (double)(n + 1), l, 1.0 / (double)n, nsk);
                /* balance: within 30% of the mean at the default settings */
                if (kind == SL_PICKER_KIND_HRW || reps[ri] == 512)
                    assert_true(b < 1.30);
                /* movement: about 1/N (sampling and ring placement allow some slack) */
                assert_true(j > 0.5 / (double)(n + 1) && j < 1.6 / (double)(n + 1));
                assert_true(l > 0.5 / (double)n && l < 1.6 / (double)n);
            }
        }
    }
}

static void test_group(void **state)
{
    (void)state;
    char **a = make_addrs(20, 0);
    sl_picker *ring, *hrw;
    assert_int_equal(sl_picker_new(SL_PICKER_KIND_RING, 64, (const char *const *)a, 20, &ring), 0);
    assert_int_equal(sl_picker_new(SL_PICKER_KIND_HRW, 0, (const char *const *)a, 20, &hrw), 0);
    size_t first_counts[20] = {0};
    for (size_t k = 0; k < 2000; k++) {
        uint64_t h = key_hash(k);
        size_t g3[3], g5[5], gr[3], g30[30];
        assert_int_equal(sl_picker_group(hrw, h, 3, g3), 3);
        assert_int_equal(sl_picker_group(hrw, h, 5, g5), 5);
        /* the group is rendezvous top-DF whatever the owner picker is */
        assert_int_equal(sl_picker_group(ring, h, 3, gr), 3);
        assert_int_equal(sl_picker_group(hrw, h, 30, g30), 20);
        assert_true(g3[0] != g3[1] && g3[1] != g3[2] && g3[0] != g3[2]);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(g3[i], g5[i]); /* a bigger group extends a smaller one */
            assert_string_equal(sl_picker_addr(hrw, g3[i]), sl_picker_addr(ring, gr[i]));
        }
        assert_int_equal(g3[0], sl_picker_owner(hrw, h));
        first_counts[g3[0]]++;
    }
    for (int i = 0; i < 20; i++)
        assert_true(first_counts[i] > 40); /* ~100 each */
    sl_picker_free(ring);
    sl_picker_free(hrw);
    free_addrs(a, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_owner_any_order),
        cmocka_unit_test(test_key_hash_is_joined_key),
        cmocka_unit_test(test_empty_and_invalid),
        cmocka_unit_test(test_balance_and_movement),
        cmocka_unit_test(test_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CONCURRENCY on one key's state, driven as the store drives it (lazy expiry of the key, then the
 * decision) on a virtual clock: 20 acquisitions pass and the 21st waits for the earliest lease,
 * a release frees exactly its lease, an unreleased lease frees at its expiry, reset_time and the
 * key's expiry follow the leases, limit changes, RESET_REMAINING, the request checks, memory
 * growth and release, lease ids (unique, repeatable per seed, text form), and a randomized run
 * against a reference model of the leases.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alg.h"
#include "core/concurrency.h"
#include "core/slidelog.h"

#define T0 INT64_C(1700000000000)

typedef struct key {
    sl_state st;
    int64_t expire_at;
    int64_t now;
    sl_conc_ids ids;
    bool use_ids;
} key;

static void k_init(key *k, uint64_t seed)
{
    memset(k, 0, sizeof *k);
    k->st.algorithm = SL_ALG_NONE;
    k->now = T0;
    sl_conc_ids_init(&k->ids, seed);
    k->use_ids = true;
}

static void k_drop(sl_state *st)
{
    sl_conc_release(st);
    sl_alg_release(st);
}

static void k_free(key *k)
{
    k_drop(&k->st);
}

static sl_request creq(int64_t hits, int64_t limit, int64_t duration)
{
    sl_request r;
    memset(&r, 0, sizeof r);
    r.name = "conc";
    r.name_len = 4;
    r.unique_key = "account:1";
    r.unique_key_len = 9;
    r.algorithm = SL_CONCURRENCY;
    r.hits = hits;
    r.limit = limit;
    r.duration = duration;
    return r;
}

/* One decision as the store makes it, with the invariants every algorithm keeps. */
static sl_response k_decide(key *k, const sl_request *q, uint64_t lease_in, uint64_t *lease_out)
{
    const char *err = sl_conc_check(q, lease_in, 0);
    sl_response r;
    if (err) {
        memset(&r, 0, sizeof r);
        r.error = err;
        return r;
    }
    if (k->st.algorithm != SL_ALG_NONE && sl_alg_expired(k->expire_at, k->now)) {
        k_drop(&k->st);
        k->expire_at = 0;
    }
    memset(&r, 0x5a, sizeof r);
    uint64_t out = 12345;
    sl_conc_decide(&k->st, &k->expire_at, q, lease_in, k->now, k->use_ids ? &k->ids : NULL, &r,
                   &out);
    if (!r.error) {
        assert_true(r.remaining >= 0);
        assert_true(r.retry_after >= 0);
        if (r.status == SL_UNDER_LIMIT)
            assert_int_equal(r.retry_after, 0);
        else
            assert_true(r.retry_after > 0);
        if (q->hits == 1 && r.status == SL_UNDER_LIMIT)
            assert_true(out != 0);
        else
            assert_true(out == 0);
    } else {
        assert_true(out == 0);
    }
    if (k->st.algorithm == SL_CONCURRENCY)
        assert_true(sl_conc_held(&k->st) > 0);
    if (lease_out)
        *lease_out = out;
    return r;
}

static sl_response kd(key *k, int64_t hits, int64_t limit, int64_t duration, uint64_t lease_in,
                      uint64_t *lease_out)
{
    sl_request q = creq(hits, limit, duration);
    return k_decide(k, &q, lease_in, lease_out);
}

static void test_twenty_in_flight(void **state)
{
    (void)state;
    key k;
    k_init(&k, 1);
    sl_request acq = creq(1, 20, 60000);
    uint64_t ids[20];
    for (int i = 0; i < 20; i++) {
        sl_response r = k_decide(&k, &acq, 0, &ids[i]);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_int_equal(r.limit, 20);
        assert_int_equal(r.remaining, 19 - i);
        assert_int_equal(r.reset_time, T0 + 60000); /* the first lease frees first */
        k.now += 10;
    }
    for (int i = 0; i < 20; i++)
        for (int j = i + 1; j < 20; j++)
            assert_true(ids[i] != ids[j]);
    uint64_t none;
    sl_response r = k_decide(&k, &acq, 0, &none);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_time, T0 + 60000);
    assert_int_equal(r.retry_after, T0 + 60000 - k.now);

    /* one release frees exactly one slot: the one of the lease named */
    sl_request rel = creq(-1, 20, 60000);
    r = k_decide(&k, &rel, ids[0], NULL);
    assert_null(r.error);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_time, T0 + 10 + 60000); /* now the second lease is the earliest */
    uint64_t again;
    r = k_decide(&k, &acq, 0, &again);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 0);
    r = k_decide(&k, &acq, 0, NULL);
    assert_int_equal(r.status, SL_OVER_LIMIT);

    /* the same lease cannot be released twice; nothing else changes */
    r = k_decide(&k, &rel, ids[0], NULL);
    assert_ptr_equal(r.error, sl_conc_err_not_found);
    assert_int_equal(sl_conc_held(&k.st), 20);
    /* nor can a lease that never existed */
    r = k_decide(&k, &rel, 0xdeadbeefULL, NULL);
    assert_ptr_equal(r.error, sl_conc_err_not_found);
    assert_int_equal(sl_conc_held(&k.st), 20);
    k_free(&k);
}

static void test_unreleased_lease_expires(void **state)
{
    (void)state;
    key k;
    k_init(&k, 2);
    sl_request acq = creq(1, 2, 1000);
    uint64_t a, b;
    k_decide(&k, &acq, 0, &a);
    k.now += 300;
    k_decide(&k, &acq, 0, &b);
    assert_int_equal(k.expire_at, T0 + 300 + 1000 - 1); /* the key lives as long as its last lease */
    sl_response r = k_decide(&k, &acq, 0, NULL);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 700);

    k.now = T0 + 999; /* the first lease still holds its slot */
    r = k_decide(&k, &acq, 0, NULL);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 1);
    k.now = T0 + 1000; /* and is gone now: its slot is free without a release */
    uint64_t c;
    r = k_decide(&k, &acq, 0, &c);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_time, T0 + 1300);
    /* releasing the expired lease reports it as unknown */
    sl_request rel = creq(-1, 2, 1000);
    r = k_decide(&k, &rel, a, NULL);
    assert_ptr_equal(r.error, sl_conc_err_not_found);

    /* past every lease the key is gone as a whole (the store's lazy expiry) */
    k.now = T0 + 2000;
    r = kd(&k, 0, 2, 1000, 0, NULL);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.reset_time, k.now);
    assert_int_equal(k.st.algorithm, SL_ALG_NONE);
    k_free(&k);
}

static void test_release_last_frees_key(void **state)
{
    (void)state;
    key k;
    k_init(&k, 3);
    sl_request acq = creq(1, 100, 5000);
    uint64_t id;
    sl_response r = k_decide(&k, &acq, 0, &id);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(sl_conc_side_bytes(&k.st), 4 * 16);
    r = kd(&k, -1, 100, 5000, id, NULL);
    assert_null(r.error);
    assert_int_equal(r.remaining, 100);
    assert_int_equal(k.st.algorithm, SL_ALG_NONE); /* idle keys cost nothing */
    assert_int_equal(sl_conc_side_bytes(&k.st), 0);
    /* a peek on an absent key keeps nothing either */
    r = kd(&k, 0, 100, 5000, 0, NULL);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(k.st.algorithm, SL_ALG_NONE);
    k_free(&k);
}

static void test_growth_capped_by_limit(void **state)
{
    (void)state;
    key k;
    k_init(&k, 4);
    sl_request acq = creq(1, 37, 5000);
    for (int i = 0; i < 37; i++)
        assert_int_equal(k_decide(&k, &acq, 0, NULL).status, SL_UNDER_LIMIT);
    /* 4, 8, 16, 32, then capped at the limit */
    assert_int_equal(sl_conc_side_bytes(&k.st), 37 * 16);
    assert_int_equal(k_decide(&k, &acq, 0, NULL).status, SL_OVER_LIMIT);
    assert_int_equal(sl_conc_side_bytes(&k.st), 37 * 16);
    k_free(&k);
}

static void test_limit_change(void **state)
{
    (void)state;
    key k;
    k_init(&k, 5);
    sl_request acq = creq(1, 5, 10000);
    uint64_t ids[5];
    for (int i = 0; i < 5; i++)
        k_decide(&k, &acq, 0, &ids[i]);
    /* the limit shrinks below what is in flight: the leases stay, new ones wait */
    sl_request small = creq(1, 3, 10000);
    sl_response r = k_decide(&k, &small, 0, NULL);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.limit, 3);
    assert_int_equal(r.remaining, 0);
    sl_request rel = creq(-1, 3, 10000);
    for (int i = 0; i < 2; i++)
        assert_null(k_decide(&k, &rel, ids[i], NULL).error);
    assert_int_equal(k_decide(&k, &small, 0, NULL).status, SL_OVER_LIMIT); /* 3 of 3 */
    assert_null(k_decide(&k, &rel, ids[2], NULL).error);
    assert_int_equal(k_decide(&k, &small, 0, NULL).status, SL_UNDER_LIMIT);
    /* it grows: room at once */
    sl_request big = creq(1, 6, 10000);
    for (int i = 0; i < 3; i++)
        assert_int_equal(k_decide(&k, &big, 0, NULL).status, SL_UNDER_LIMIT);
    assert_int_equal(k_decide(&k, &big, 0, NULL).status, SL_OVER_LIMIT);
    /* a limit of 0 admits nothing and says to come back after a lease's duration */
    k_free(&k);
    k_init(&k, 5);
    r = kd(&k, 1, 0, 700, 0, NULL);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 700);
    assert_int_equal(k.st.algorithm, SL_ALG_NONE);
    k_free(&k);
}

static void test_reset_remaining(void **state)
{
    (void)state;
    key k;
    k_init(&k, 6);
    sl_request acq = creq(1, 2, 10000);
    uint64_t a;
    k_decide(&k, &acq, 0, &a);
    k_decide(&k, &acq, 0, NULL);
    assert_int_equal(k_decide(&k, &acq, 0, NULL).status, SL_OVER_LIMIT);
    sl_request reset = creq(1, 2, 10000);
    reset.behavior = SL_RESET_REMAINING;
    sl_response r = k_decide(&k, &reset, 0, NULL);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 1);
    assert_ptr_equal(kd(&k, -1, 2, 10000, a, NULL).error, sl_conc_err_not_found);
    k_free(&k);
}

static void test_checks(void **state)
{
    (void)state;
    sl_request q = creq(2, 10, 1000);
    assert_non_null(sl_conc_check(&q, 0, 0));
    q.hits = -2;
    assert_non_null(sl_conc_check(&q, 7, 0));
    q = creq(1, SL_CONC_DEFAULT_MAX_LIMIT + 1, 1000);
    assert_non_null(sl_conc_check(&q, 0, 0));
    assert_null(sl_conc_check(&q, 0, SL_CONC_DEFAULT_MAX_LIMIT + 1));
    q = creq(1, 10, 1000);
    q.behavior = SL_GLOBAL;
    assert_non_null(sl_conc_check(&q, 0, 0));
    q = creq(-1, 10, 1000);
    assert_ptr_equal(sl_conc_check(&q, 0, 0), sl_conc_err_no_lease);
    assert_null(sl_conc_check(&q, 1, 0));
    q = creq(0, 10, 1000);
    assert_null(sl_conc_check(&q, 0, 0));
}

/* A key that held another algorithm's state (with a side buffer) starts afresh and frees it:
 * ASan reports the leak otherwise. */
static void test_replaces_other_algorithm(void **state)
{
    (void)state;
    key k;
    k_init(&k, 7);
    sl_request lg = creq(1, 50, 1000);
    lg.algorithm = SL_SLIDING_LOG;
    sl_response r;
    sl_slog_decide(&k.st, &k.expire_at, &lg, k.now, &r);
    assert_int_equal(k.st.algorithm, SL_SLIDING_LOG);
    r = kd(&k, 1, 3, 1000, 0, NULL);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 2);
    assert_int_equal(k.st.algorithm, SL_CONCURRENCY);
    k_free(&k);
    /* and a peek does the same, leaving no key */
    k_init(&k, 7);
    sl_slog_decide(&k.st, &k.expire_at, &lg, k.now, &r);
    kd(&k, 0, 3, 1000, 0, NULL);
    assert_int_equal(k.st.algorithm, SL_ALG_NONE);
    k_free(&k);
}

static void test_ids(void **state)
{
    (void)state;
    sl_conc_ids a, b, c;
    sl_conc_ids_init(&a, 42);
    sl_conc_ids_init(&b, 42);
    sl_conc_ids_init(&c, 43);
    enum { N = 200000 };
    uint64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    int same_as_c = 0;
    for (int i = 0; i < N; i++) {
        v[i] = sl_conc_ids_next(&a);
        assert_true(v[i] != 0);
        assert_true(v[i] == sl_conc_ids_next(&b)); /* repeatable per seed */
        same_as_c += v[i] == sl_conc_ids_next(&c);
    }
    assert_int_equal(same_as_c, 0);
    /* consecutive counters give unrelated ids: no simple step between them */
    assert_true(v[1] - v[0] != v[2] - v[1]);
    /* distinct: sort and compare neighbours */
    for (int gap = N / 2; gap > 0; gap /= 2) /* shell sort: no qsort comparator needed */
        for (int i = gap; i < N; i++)
            for (int j = i; j >= gap && v[j - gap] > v[j]; j -= gap) {
                uint64_t t = v[j];
                v[j] = v[j - gap];
                v[j - gap] = t;
            }
    for (int i = 1; i < N; i++)
        assert_true(v[i] != v[i - 1]);
    free(v);

    /* a random generator differs from run to run and between generators */
    sl_conc_ids r1, r2;
    sl_conc_ids_init(&r1, 0);
    sl_conc_ids_init(&r2, 0);
    assert_true(sl_conc_ids_next(&r1) != sl_conc_ids_next(&r2));

    char hex[SL_CONC_ID_HEX + 1];
    assert_int_equal(sl_conc_format_id(0x00ab00cd00ef0012ULL, hex), 16);
    assert_string_equal(hex, "00ab00cd00ef0012");
    uint64_t id = 0;
    assert_int_equal(sl_conc_parse_id(hex, 16, &id), 0);
    assert_true(id == 0x00ab00cd00ef0012ULL);
    assert_int_equal(sl_conc_parse_id("00AB00CD00EF0012", 16, &id), 0);
    assert_true(id == 0x00ab00cd00ef0012ULL);
    assert_int_equal(sl_conc_parse_id("00ab00cd00ef001", 15, &id), -EINVAL);
    assert_int_equal(sl_conc_parse_id("00ab00cd00ef001g", 16, &id), -EINVAL);
    assert_int_equal(sl_conc_parse_id("0000000000000000", 16, &id), -EINVAL);
    assert_int_equal(sl_conc_parse_id(NULL, 0, &id), -EINVAL);
}

static void test_ids_without_generator(void **state)
{
    (void)state;
    key k;
    k_init(&k, 8);
    k.use_ids = false;
    sl_request acq = creq(1, 500, 1000);
    uint64_t ids[500];
    for (int i = 0; i < 500; i++)
        assert_int_equal(k_decide(&k, &acq, 0, &ids[i]).status, SL_UNDER_LIMIT);
    for (int i = 0; i < 500; i++)
        assert_null(kd(&k, -1, 500, 1000, ids[i], NULL).error);
    assert_int_equal(k.st.algorithm, SL_ALG_NONE);
    k_free(&k);
}

/* Randomized: acquires, releases (of held, released and expired leases), peeks and clock steps
 * against a model that keeps every lease with its expiry. */
typedef struct mlease {
    uint64_t id;
    int64_t expires;
    bool released;
} mlease;

static uint64_t rng = 0x243f6a8885a308d3ULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_against_model(void **state)
{
    (void)state;
    enum { OPS = 20000, MAXL = 4000 };
    key k;
    k_init(&k, 9);
    mlease *m = calloc(MAXL, sizeof *m);
    assert_non_null(m);
    size_t nm = 0;
    int64_t limit = 8, duration = 500;
    for (int op = 0; op < OPS; op++) {
        uint64_t x = rnd() % 100;
        if (x < 5)
            limit = 1 + (int64_t)(rnd() % 12);
        if (x < 8)
            duration = 50 + (int64_t)(rnd() % 1000);
        k.now += (int64_t)(rnd() % 40);
        /* what the model holds now */
        int64_t held = 0, min_exp = INT64_MAX;
        for (size_t i = 0; i < nm; i++)
            if (!m[i].released && m[i].expires > k.now) {
                held++;
                if (m[i].expires < min_exp)
                    min_exp = m[i].expires;
            }
        sl_response r;
        if (x < 55 || nm == 0) {
            uint64_t id;
            r = kd(&k, 1, limit, duration, 0, &id);
            if (held < limit) {
                assert_int_equal(r.status, SL_UNDER_LIMIT);
                if (nm == MAXL) { /* forget the oldest finished lease */
                    size_t j = 0;
                    while (j < nm && !m[j].released && m[j].expires > k.now)
                        j++;
                    assert_true(j < nm);
                    m[j] = m[--nm];
                }
                m[nm++] = (mlease){id, k.now + duration, false};
                held++;
                if (k.now + duration < min_exp)
                    min_exp = k.now + duration;
            } else {
                assert_int_equal(r.status, SL_OVER_LIMIT);
                assert_int_equal(r.retry_after, min_exp - k.now);
            }
        } else if (x < 90) {
            mlease *l = &m[rnd() % nm];
            r = kd(&k, -1, limit, duration, l->id, NULL);
            if (!l->released && l->expires > k.now) {
                assert_null(r.error);
                l->released = true;
                held--;
                min_exp = INT64_MAX;
                for (size_t i = 0; i < nm; i++)
                    if (!m[i].released && m[i].expires > k.now && m[i].expires < min_exp)
                        min_exp = m[i].expires;
            } else {
                assert_ptr_equal(r.error, sl_conc_err_not_found);
                continue;
            }
        } else {
            r = kd(&k, 0, limit, duration, 0, NULL);
            assert_int_equal(r.status, SL_UNDER_LIMIT);
        }
        assert_int_equal(r.remaining, limit - held > 0 ? limit - held : 0);
        assert_int_equal(r.reset_time, held ? min_exp : k.now);
        assert_int_equal(k.st.algorithm == SL_ALG_NONE, held == 0);
    }
    free(m);
    k_free(&k);
}

/* Renewal (hits 0 with a lease id): the lease lives `duration` from the renewal, so a call that
 * runs longer than one duration keeps its slot; the key's expiry follows; an unknown, released or
 * expired lease is the not-found error and changes nothing; a peek (no id) is still a peek. */
static void test_renew(void **state)
{
    (void)state;
    key k;
    k_init(&k, 7);
    uint64_t a = 0, b = 0;
    assert_int_equal(kd(&k, 1, 2, 1000, 0, &a).status, SL_UNDER_LIMIT);
    k.now += 400;
    assert_int_equal(kd(&k, 1, 2, 1000, 0, &b).status, SL_UNDER_LIMIT);
    k.now += 500; /* t = 900: renew a until 1900 */
    sl_response r = kd(&k, 0, 2, 1000, a, NULL);
    assert_null(r.error);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.reset_time, T0 + 1400); /* b is now the earliest */
    k.now = T0 + 1500; /* b expired, a still held */
    r = kd(&k, 0, 2, 1000, 0, NULL);
    assert_int_equal(r.remaining, 1);
    assert_int_equal(r.reset_time, T0 + 1900);
    assert_int_equal(kd(&k, 0, 2, 1000, b, NULL).error, sl_conc_err_not_found);
    assert_true(k.expire_at >= T0 + 1899);
    k.now = T0 + 1899;
    r = kd(&k, 0, 2, 1000, a, NULL); /* renewed again before it ran out: until 2899 */
    assert_null(r.error);
    k.now = T0 + 2898;
    assert_int_equal(kd(&k, 0, 2, 1000, 0, NULL).remaining, 1);
    assert_null(kd(&k, -1, 2, 1000, a, NULL).error);   /* released */
    assert_int_equal(kd(&k, 0, 2, 1000, a, NULL).error, sl_conc_err_not_found);
    assert_int_equal(kd(&k, 0, 2, 1000, 12345, NULL).error, sl_conc_err_not_found);
    k_free(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twenty_in_flight),
        cmocka_unit_test(test_unreleased_lease_expires),
        cmocka_unit_test(test_release_last_frees_key),
        cmocka_unit_test(test_growth_capped_by_limit),
        cmocka_unit_test(test_limit_change),
        cmocka_unit_test(test_reset_remaining),
        cmocka_unit_test(test_checks),
        cmocka_unit_test(test_replaces_other_algorithm),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_ids_without_generator),
        cmocka_unit_test(test_against_model),
        cmocka_unit_test(test_renew),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

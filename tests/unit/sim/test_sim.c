/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the accuracy simulator: traffic generators, the perfect sliding window, scoring, the
 * engine runners (single, split, GLOBAL model), the CSV series and the shaper study. Everything is on virtual time.
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

#include "sim/series.h"
#include "sim/shape.h"
#include "sim/sim.h"
#include "sim/traffic.h"

/* A traffic from hand-written (t_ms, key) pairs, keys "a", "b", ... */
static void handmade(sl_traffic *t, const int64_t *times, const uint32_t *keys, size_t n,
                     uint32_t nkeys, int64_t span)
{
    char buf[1024];
    size_t off = 0;
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%lld %c\n", (long long)times[i],
                                'a' + (keys ? (int)keys[i] : 0));
    FILE *f = fmemopen(buf, off, "r");
    assert_non_null(f);
    size_t line;
    const char *err;
    sl_traffic_init(t, 0);
    assert_int_equal(sl_traffic_replay(t, f, &line, &err), 0);
    fclose(f);
    assert_int_equal(t->nkeys, nkeys);
    /* The replay shifts to the first timestamp; the hand-made cases start at 0. */
    t->span_ms = span;
}

static sl_sim_alg alg(const char *spec)
{
    sl_sim_alg a;
    assert_int_equal(sl_sim_alg_parse(spec, strlen(spec), &a), 0);
    return a;
}

/* ---- generators ---- */

static void test_rng_deterministic(void **state)
{
    (void)state;
    sl_traffic_rng a, b, c;
    sl_traffic_rng_seed(&a, 7);
    sl_traffic_rng_seed(&b, 7);
    sl_traffic_rng_seed(&c, 8);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = sl_traffic_rng_next(&a);
        assert_true(x == sl_traffic_rng_next(&b));
        differ += x != sl_traffic_rng_next(&c);
    }
    assert_true(differ > 990);
    for (int i = 0; i < 10000; i++) {
        double u = sl_traffic_rng_unit(&a);
        assert_true(u >= 0 && u < 1);
        assert_true(sl_traffic_rng_below(&a, 3) < 3);
    }
}

static void test_poisson_mean_rate(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_poisson(&t, 200, 60000, 3, 42), 0);
    assert_int_equal(t.nkeys, 3);
    assert_string_equal(t.keys[2], "k2");
    double rate = sl_traffic_mean_rate(&t);
    assert_true(rate > 200 * 0.97 && rate < 200 * 1.03);
    /* Keys are used evenly and times are ordered and inside the span. */
    size_t per[3] = {0};
    for (size_t i = 0; i < t.n; i++) {
        per[t.ev[i].key]++;
        assert_true(t.ev[i].t_ms >= 0 && t.ev[i].t_ms < 60000);
        if (i)
            assert_true(t.ev[i].t_ms >= t.ev[i - 1].t_ms);
    }
    for (int k = 0; k < 3; k++)
        assert_true(per[k] > 12000 * 0.95 && per[k] < 12000 * 1.05);
    sl_traffic_free(&t);
}

static void test_bursty_mean_rate(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_bursty(&t, 100, 1000, 3000, 400000, 1, 3), 0);
    double rate = sl_traffic_mean_rate(&t);
    assert_true(rate > 25 * 0.95 && rate < 25 * 1.05);
    for (size_t i = 0; i < t.n; i++)
        assert_true(t.ev[i].t_ms % 4000 < 1000); /* nothing while off */
    sl_traffic_free(&t);
}

static void test_ramp_mean_rate(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_ramp(&t, 0, 400, 100000, 1, 5), 0);
    double rate = sl_traffic_mean_rate(&t);
    assert_true(rate > 200 * 0.97 && rate < 200 * 1.03);
    /* Linear growth: the first quarter holds 1/16 of the requests, the last 7/16. */
    size_t q1 = 0, q4 = 0;
    for (size_t i = 0; i < t.n; i++) {
        q1 += t.ev[i].t_ms < 25000;
        q4 += t.ev[i].t_ms >= 75000;
    }
    assert_true(q1 > t.n / 16 * 0.9 && q1 < t.n / 16 * 1.1);
    assert_true(q4 > t.n * 7 / 16 * 0.95 && q4 < t.n * 7 / 16 * 1.05);
    sl_traffic_free(&t);
}

static void test_edge_pattern(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    /* epoch 500 ms past a second: the first boundary is at t = 500 */
    assert_int_equal(sl_traffic_edge(&t, 3, 1000, 10500, 5000, 2), 0);
    /* boundaries at t = 500 and 2500, 4500: 3 requests x 2 keys at B-1 and at B */
    assert_int_equal(t.n, 3 * 2 * 2 * 3);
    assert_int_equal(t.ev[0].t_ms, 499);
    assert_int_equal(t.ev[6].t_ms, 500);
    assert_int_equal(t.ev[12].t_ms, 2499);
    assert_int_equal(t.ev[t.n - 1].t_ms, 4500);
    sl_traffic_free(&t);
}

static void test_generator_limits(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 1000);
    assert_int_equal(sl_traffic_poisson(&t, 1000, 60000, 1, 1), -E2BIG);
    assert_int_equal(t.n, 0);
    assert_int_equal(sl_traffic_poisson(&t, -1, 1000, 1, 1), -EINVAL);
    assert_int_equal(sl_traffic_poisson(&t, 1, 0, 1, 1), -EINVAL);
    assert_int_equal(sl_traffic_poisson(&t, 1, 1000, 0, 1), -EINVAL);
    assert_int_equal(sl_traffic_bursty(&t, 1, 0, 10, 1000, 1, 1), -EINVAL);
    assert_int_equal(sl_traffic_poisson(&t, 10, 1000, 1, 1), 0);
    sl_traffic_free(&t);
}

static void test_replay(void **state)
{
    (void)state;
    static const char text[] = "# t_ms key\n"
                               "1000500 alice\n"
                               "1000400,bob\n"
                               "\n"
                               "  1000400   alice  # same ms as bob, later in the file\n"
                               "1000900\n";
    FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
    sl_traffic t;
    sl_traffic_init(&t, 0);
    size_t line;
    const char *err;
    assert_int_equal(sl_traffic_replay(&t, f, &line, &err), 0);
    fclose(f);
    assert_int_equal(t.n, 4);
    assert_int_equal(t.nkeys, 3);
    assert_string_equal(t.keys[0], "alice");
    assert_string_equal(t.keys[1], "bob");
    assert_string_equal(t.keys[2], "k0");
    assert_int_equal(t.span_ms, 501);
    /* sorted stably: bob then alice at 0, alice at 100, k0 at 500 */
    assert_int_equal(t.ev[0].t_ms, 0);
    assert_int_equal(t.ev[0].key, 1);
    assert_int_equal(t.ev[1].t_ms, 0);
    assert_int_equal(t.ev[1].key, 0);
    assert_int_equal(t.ev[2].t_ms, 100);
    assert_int_equal(t.ev[3].t_ms, 500);
    assert_int_equal(t.ev[3].key, 2);

    static const char bad[] = "10 a\n11 b c\n";
    f = fmemopen((void *)bad, sizeof bad - 1, "r");
    assert_int_equal(sl_traffic_replay(&t, f, &line, &err), -EINVAL);
    fclose(f);
    assert_int_equal(line, 2);
    assert_non_null(err);
    assert_int_equal(t.n, 0);

    static const char bad2[] = "10\nx12\n";
    f = fmemopen((void *)bad2, sizeof bad2 - 1, "r");
    assert_int_equal(sl_traffic_replay(&t, f, &line, &err), -EINVAL);
    fclose(f);
    assert_int_equal(line, 2);
    sl_traffic_free(&t);
}

/* ---- the perfect limiter ---- */

static void test_reference_handmade(void **state)
{
    (void)state;
    /* limit 2 per 10 ms; windows are (t - 10, t]. */
    static const int64_t times[] = {0, 0, 0, 5, 9, 10, 10, 11, 15, 20, 20};
    static const int expect[] = {1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1};
    sl_sim_ref *r;
    assert_int_equal(sl_sim_ref_new(2, 2, 10, &r), 0);
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        assert_int_equal(sl_sim_ref_decide(r, 0, times[i]), expect[i]);
        /* key 1 is independent: it sees each time once, alternating allowed */
        if (i == 3)
            assert_true(sl_sim_ref_decide(r, 1, times[i]));
    }
    assert_false(sl_sim_ref_decide(r, 0, 29));  /* (19, 29] holds the two at 20 */
    assert_true(sl_sim_ref_decide(r, 0, 30));   /* (20, 30] is empty */
    assert_true(sl_sim_ref_decide(r, 1, 14));   /* key 1: (4, 14] holds the one at 5 */
    assert_false(sl_sim_ref_decide(r, 1, 14));
    sl_sim_ref_free(r);

    /* limit 1: exactly one per window, spaced by at least the duration */
    assert_int_equal(sl_sim_ref_new(1, 1, 100, &r), 0);
    assert_true(sl_sim_ref_decide(r, 0, 0));
    assert_false(sl_sim_ref_decide(r, 0, 99));
    assert_true(sl_sim_ref_decide(r, 0, 100));
    assert_false(sl_sim_ref_decide(r, 0, 150));
    assert_true(sl_sim_ref_decide(r, 0, 250));
    sl_sim_ref_free(r);

    assert_int_equal(sl_sim_ref_new(0, 1, 1, &r), -EINVAL);
    assert_int_equal(sl_sim_ref_new(1, 0, 1, &r), -EINVAL);
    assert_int_equal(sl_sim_ref_new(1 << 20, 1 << 20, 1, &r), -E2BIG);
}

/* The reference against a brute-force count of its own admissions on random traffic. */
static void test_reference_brute_force(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_bursty(&t, 40, 700, 900, 20000, 3, 11), 0);
    const int64_t limit = 7, d = 500;
    sl_sim_ref *r;
    assert_int_equal(sl_sim_ref_new(t.nkeys, limit, d, &r), 0);
    uint8_t *adm = calloc(t.n, 1);
    size_t admitted = 0;
    for (size_t i = 0; i < t.n; i++) {
        int64_t inside = 0;
        for (size_t j = 0; j < i; j++)
            inside += adm[j] && t.ev[j].key == t.ev[i].key && t.ev[j].t_ms > t.ev[i].t_ms - d;
        adm[i] = sl_sim_ref_decide(r, t.ev[i].key, t.ev[i].t_ms);
        assert_int_equal(adm[i], inside < limit);
        admitted += adm[i];
    }
    assert_true(admitted > 0 && admitted < t.n);
    free(adm);
    sl_sim_ref_free(r);
    sl_traffic_free(&t);
}

static void test_score_handmade(void **state)
{
    (void)state;
    /* one key, limit 2 per 10 ms */
    static const int64_t times[] = {0, 1, 2, 3, 12, 13};
    sl_traffic t;
    handmade(&t, times, NULL, 6, 1, 20);
    sl_sim s;
    sl_sim_params p = {.limit = 2, .duration = 10, .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
    assert_int_equal(sl_sim_init(&s, &t, &p), 0);
    /* perfect: 1 1 0 0 1 1 */
    static const uint8_t ref[] = {1, 1, 0, 0, 1, 1};
    assert_memory_equal(s.ref, ref, 6);
    assert_int_equal(s.perfect.peak, 2);
    assert_int_equal(s.perfect.excess, 0);
    /* a limiter admitting everything: peak 4 in (-7, 3]; the admissions at 2 and 3 found the
     * window full; at 12, (2, 12] holds only 3 before it, at 13, (3, 13] only 12 */
    static const uint8_t all[] = {1, 1, 1, 1, 1, 1};
    sl_sim_result res;
    sl_sim_score(&s, all, &res);
    assert_int_equal(res.admitted, 6);
    assert_int_equal(res.rejected, 0);
    assert_int_equal(res.peak, 4);
    assert_int_equal(res.over_limit, 2);
    assert_int_equal(res.excess, 2);
    assert_int_equal(res.wrong_admit, 2);
    assert_int_equal(res.wrong_reject, 0);
    static const uint8_t late[] = {0, 1, 1, 0, 0, 1};
    sl_sim_score(&s, late, &res);
    assert_int_equal(res.peak, 2);
    assert_int_equal(res.over_limit, 0);
    assert_int_equal(res.excess, 0);
    assert_int_equal(res.wrong_admit, 1);  /* request 2 */
    assert_int_equal(res.wrong_reject, 2); /* requests 0 and 4 */
    sl_sim_free(&s);
    sl_traffic_free(&t);
}

/* ---- against the engine ---- */

/* The adversarial edge pattern: a fixed window admits `limit` just before its boundary and `limit`
 * just after, i.e. 2 x limit within 2 ms. */
static void test_edge_fixed_window_doubles(void **state)
{
    (void)state;
    sl_sim_params p = {.limit = 50, .duration = 1000, .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_edge(&t, p.limit, p.duration, p.epoch_ms, 10000, 2), 0);
    sl_sim s;
    assert_int_equal(sl_sim_init(&s, &t, &p), 0);
    assert_int_equal(s.perfect.peak, p.limit);
    sl_sim_alg a = alg("fixed_window");
    sl_sim_result r;
    assert_int_equal(sl_sim_eval(&s, &a, NULL, NULL, &r), 0);
    assert_int_equal(r.errors, 0);
    assert_int_equal(r.peak, 2 * p.limit);
    assert_int_equal(r.over_limit, p.limit);
    assert_int_equal(r.rejected, 0);
    /* the sliding log holds the line on the same pattern */
    a = alg("sliding_log");
    assert_int_equal(sl_sim_eval(&s, &a, NULL, NULL, &r), 0);
    assert_int_equal(r.peak, p.limit);
    sl_sim_free(&s);
    sl_traffic_free(&t);
}

static void check_log_exact(sl_traffic *t, int64_t limit, int64_t duration)
{
    sl_sim_params p = {.limit = limit, .duration = duration, .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
    sl_sim s;
    assert_int_equal(sl_sim_init(&s, t, &p), 0);
    sl_sim_alg a = alg("sliding_log");
    sl_sim_result r;
    assert_int_equal(sl_sim_eval(&s, &a, NULL, NULL, &r), 0);
    assert_int_equal(r.errors, 0);
    assert_true(r.peak <= limit);
    assert_int_equal(r.over_limit, 0);
    assert_int_equal(r.excess, 0);
    assert_true(r.admitted > 0);
    assert_true(r.rejected > 0); /* the traffic did push it to the limit */
    sl_sim_free(&s);
}

static void test_sliding_log_never_exceeds(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_poisson(&t, 300, 20000, 4, 9), 0);
    check_log_exact(&t, 100, 1000);
    assert_int_equal(sl_traffic_bursty(&t, 2000, 300, 1700, 20000, 2, 10), 0);
    check_log_exact(&t, 37, 700);
    assert_int_equal(sl_traffic_edge(&t, 20, 1000, SL_SIM_DEFAULT_EPOCH_MS, 10000, 3), 0);
    check_log_exact(&t, 20, 1000);
    sl_traffic_free(&t);
}

/* GCRA with burst b: everything at one instant, at most b + 1 pass. */
static void test_gcra_burst(void **state)
{
    (void)state;
    static const int64_t bursts[] = {1, 4, 9};
    for (size_t i = 0; i < sizeof bursts / sizeof bursts[0]; i++) {
        int64_t b = bursts[i];
        sl_traffic t;
        sl_traffic_init(&t, 0);
        /* 100 requests at one millisecond (the edge pattern's first boundary) */
        assert_int_equal(sl_traffic_edge(&t, 50, 1000, SL_SIM_DEFAULT_EPOCH_MS, 1001, 1), 0);
        assert_int_equal(t.n, 100);
        sl_sim_params p = {.limit = 10, .duration = 1000, .burst = b,
                           .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
        sl_sim s;
        assert_int_equal(sl_sim_init(&s, &t, &p), 0);
        sl_sim_alg a = alg("gcra");
        sl_sim_result r;
        uint8_t dec[100];
        assert_int_equal(sl_sim_eval(&s, &a, NULL, dec, &r), 0);
        assert_int_equal(r.errors, 0);
        /* 999 and 1000 are 1 ms apart, far less than the emission interval (100 ms) */
        assert_true(r.admitted <= (uint64_t)b + 1);
        assert_true(r.admitted >= (uint64_t)b); /* and the burst is really there */
        size_t first = 0;
        for (size_t j = 0; j < 50; j++)
            first += dec[j];
        assert_int_equal(first, b + 1); /* b + 1 at the very same instant */
        sl_sim_free(&s);
        sl_traffic_free(&t);
    }
}

static void test_same_seed_same_output(void **state)
{
    (void)state;
    sl_sim_params p = {.limit = 20, .duration = 1000, .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
    sl_sim_alg algs[8];
    size_t nalgs;
    assert_int_equal(sl_sim_alg_parse_list("token_bucket,leaky_bucket,gcra,fixed_window,"
                                           "sliding_window:1,sliding_window:5,sliding_log",
                                           algs, 8, &nalgs), 0);
    assert_int_equal(nalgs, 7);
    assert_string_equal(algs[5].label, "sliding_window:5");
    assert_int_equal(algs[5].sub_windows, 5);
    sl_sim_result first[7];
    uint8_t *dec1[7];
    for (int run = 0; run < 2; run++) {
        sl_traffic t;
        sl_traffic_init(&t, 0);
        assert_int_equal(sl_traffic_poisson(&t, 40, 30000, 3, 1234), 0);
        sl_sim s;
        assert_int_equal(sl_sim_init(&s, &t, &p), 0);
        for (size_t a = 0; a < nalgs; a++) {
            sl_sim_result r;
            uint8_t *dec = malloc(t.n);
            assert_int_equal(sl_sim_eval(&s, &algs[a], NULL, dec, &r), 0);
            assert_int_equal(r.errors, 0);
            if (run == 0) {
                first[a] = r;
                dec1[a] = dec;
            } else {
                assert_memory_equal(dec, dec1[a], t.n);
                assert_int_equal(r.admitted, first[a].admitted);
                assert_int_equal(r.peak, first[a].peak);
                assert_int_equal(r.wrong_admit, first[a].wrong_admit);
                assert_int_equal(r.wrong_reject, first[a].wrong_reject);
                assert_true(r.bytes_per_key == first[a].bytes_per_key);
                free(dec);
                free(dec1[a]);
            }
        }
        /* the random distributions repeat too */
        sl_sim_dist d = {.mode = SL_SIM_GLOBAL, .nodes = 3, .sync_ms = 50, .seed = 5};
        sl_sim_result g;
        assert_int_equal(sl_sim_eval(&s, &algs[0], &d, NULL, &g), 0);
        if (run == 0)
            first[0].excess = g.admitted; /* stash */
        else
            assert_int_equal(g.admitted, first[0].excess);
        sl_sim_free(&s);
        sl_traffic_free(&t);
    }
    /* a different seed is different traffic */
    sl_traffic a, b;
    sl_traffic_init(&a, 0);
    sl_traffic_init(&b, 0);
    assert_int_equal(sl_traffic_poisson(&a, 40, 30000, 3, 1234), 0);
    assert_int_equal(sl_traffic_poisson(&b, 40, 30000, 3, 1235), 0);
    assert_true(a.n != b.n || memcmp(a.ev, b.ev, a.n * sizeof *a.ev) != 0);
    sl_traffic_free(&a);
    sl_traffic_free(&b);
}

/* One limiter in a "distribution" is the single engine: same decisions. */
static void test_distribution_of_one(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_poisson(&t, 150, 20000, 2, 77), 0);
    sl_sim_params p = {.limit = 100, .duration = 1000, .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
    sl_sim s;
    assert_int_equal(sl_sim_init(&s, &t, &p), 0);
    sl_sim_alg a = alg("token_bucket");
    uint8_t *one = malloc(t.n), *other = malloc(t.n);
    sl_sim_result r1, r2;
    assert_int_equal(sl_sim_eval(&s, &a, NULL, one, &r1), 0);
    sl_sim_dist d = {.mode = SL_SIM_SPLIT_RANDOM, .nodes = 1, .seed = 3};
    assert_int_equal(sl_sim_eval(&s, &a, &d, other, &r2), 0);
    assert_memory_equal(one, other, t.n);
    d = (sl_sim_dist){.mode = SL_SIM_GLOBAL, .nodes = 1, .sync_ms = 10, .seed = 3};
    assert_int_equal(sl_sim_eval(&s, &a, &d, other, &r2), 0);
    assert_memory_equal(one, other, t.n);
    assert_int_equal(r2.errors, 0);
    free(one);
    free(other);
    sl_sim_free(&s);
    sl_traffic_free(&t);
}

/* Splitting: each of k limiters enforces limit/k; GLOBAL over-admits more as the sync slows. */
static void test_distribution_studies(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_poisson(&t, 400, 30000, 4, 21), 0);
    sl_sim_params p = {.limit = 120, .duration = 1000, .burst = 12,
                       .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
    sl_sim s;
    assert_int_equal(sl_sim_init(&s, &t, &p), 0);
    sl_sim_alg a = alg("gcra");
    sl_sim_result r;
    sl_sim_dist d = {.mode = SL_SIM_SPLIT_RR, .nodes = 4, .seed = 1};
    assert_int_equal(sl_sim_eval(&s, &a, &d, NULL, &r), 0);
    assert_int_equal(r.node_limit, 30);
    assert_int_equal(r.errors, 0);
    /* four GCRA limiters of 30/s cannot admit much more than 120/s in total */
    assert_true(r.admitted < s.perfect.admitted * 1.05);
    assert_true(r.admitted > s.perfect.admitted * 0.9);

    sl_sim_alg tb = alg("token_bucket");
    sl_sim_result fast, slow;
    d = (sl_sim_dist){.mode = SL_SIM_GLOBAL, .nodes = 4, .sync_ms = 10, .seed = 1};
    assert_int_equal(sl_sim_eval(&s, &tb, &d, NULL, &fast), 0);
    d.sync_ms = 1000;
    assert_int_equal(sl_sim_eval(&s, &tb, &d, NULL, &slow), 0);
    assert_int_equal(fast.errors, 0);
    assert_int_equal(slow.errors, 0);
    assert_true(slow.admitted > fast.admitted);
    assert_true(slow.peak > p.limit);
    d.nodes = 0;
    assert_int_equal(sl_sim_eval(&s, &tb, &d, NULL, &slow), -EINVAL);
    d = (sl_sim_dist){.mode = SL_SIM_GLOBAL, .nodes = 2, .sync_ms = 0};
    assert_int_equal(sl_sim_eval(&s, &tb, &d, NULL, &slow), -EINVAL);
    sl_sim_free(&s);
    sl_traffic_free(&t);
}

static void test_alg_parse(void **state)
{
    (void)state;
    sl_sim_alg a;
    assert_int_equal(sl_sim_alg_parse("GCRA", 4, &a), 0);
    assert_int_equal(a.algorithm, SL_GCRA);
    assert_string_equal(a.label, "gcra");
    assert_int_equal(sl_sim_alg_parse("sliding_window:60", 17, &a), 0);
    assert_int_equal(a.sub_windows, 60);
    assert_int_equal(a.burst, -1);
    assert_int_equal(sl_sim_alg_parse("gcra:5", 6, &a), 0);
    assert_int_equal(a.burst, 5);
    assert_string_equal(a.label, "gcra:5");
    assert_int_equal(sl_sim_alg_parse("leaky_bucket:0", 14, &a), 0);
    assert_int_equal(a.burst, 0);
    assert_int_equal(sl_sim_alg_parse("token_bucket:5", 14, &a), -EINVAL);
    assert_int_equal(sl_sim_alg_parse("sliding_window:0", 16, &a), -EINVAL);
    assert_int_equal(sl_sim_alg_parse("gcra:-1", 7, &a), -EINVAL);
    assert_int_equal(sl_sim_alg_parse("sliding_window:", 15, &a), -EINVAL);
    assert_int_equal(sl_sim_alg_parse("sliding_window:x", 16, &a), -EINVAL);
    assert_int_equal(sl_sim_alg_parse("nope", 4, &a), -EINVAL);
    sl_sim_alg list[2];
    size_t n;
    assert_int_equal(sl_sim_alg_parse_list("gcra,sliding_log,token_bucket", list, 2, &n), -E2BIG);
    assert_int_equal(sl_sim_alg_parse_list("gcra,,sliding_log", list, 2, &n), -EINVAL);
}

/* ---- CSV series ---- */

static void test_series(void **state)
{
    (void)state;
    static const int64_t times[] = {0, 100, 150, 900, 1000, 1100, 1950};
    static const uint32_t keys[] = {0, 0, 1, 0, 0, 0, 0};
    sl_traffic t;
    handmade(&t, times, keys, 7, 2, 2000);
    static const uint8_t all[] = {1, 1, 1, 1, 1, 1, 1};
    static const uint8_t some[] = {1, 0, 1, 1, 0, 1, 1};
    const uint8_t *dec[] = {all, some};
    const char *names[] = {"perfect", "x"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(sl_series_write(f, &t, 0, 1000, 500, 2, names, dec), 0);
    fclose(f);
    /* key 0 times 0,100,900,1000,1100,1950; windows (t-1000, t] */
    assert_string_equal(buf, "t_s,perfect,x\n"
                             "0.500,2,1\n"  /* 0 100        | 0 */
                             "1.000,3,1\n"  /* 100 900 1000 | 900 */
                             "1.500,3,2\n"  /* 900 1000 1100 | 900 1100 */
                             "2.000,2,2\n"); /* 1100 1950   | 1100 1950 */
    free(buf);
    sl_traffic_free(&t);
}

/* The shaper study: GCRA with max_delay over Poisson traffic at twice the rate, and over bursts at
 * five times it. Departures never exceed limit + burst in any window, no delay exceeds max_delay,
 * departures stay in slot order, and the engine admits >= 99 % of what a perfect FIFO shaper (in
 * doubles, independent of the engine's integers) admits. */
static void test_shape(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        sl_traffic t;
        sl_traffic_init(&t, 0);
        if (c == 0)
            assert_int_equal(sl_traffic_poisson(&t, 40.0, 600000, 4, 7), 0); /* 10/s per key */
        else
            assert_int_equal(sl_traffic_bursty(&t, 25.0, 2000, 3000, 600000, 1, 3), 0);
        sl_sim s;
        sl_sim_params p = {.limit = 300, .duration = 60000, .burst = 2,
                           .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};
        assert_int_equal(sl_sim_init(&s, &t, &p), 0);
        sl_sim_shape_result r;
        assert_int_equal(sl_sim_shape(&s, 2000, &r), 0);
        assert_int_equal(r.requests, t.n);
        assert_int_equal(r.errors, 0);
        assert_true(r.delayed > 0);
        assert_true(r.max_delay_seen <= 2000);
        assert_true(r.peak <= r.peak_bound);
        assert_true(r.admitted * 100 >= r.perfect_admitted * 99);
        assert_true(r.admitted <= r.perfect_admitted + 4);
        /* without delay the same traffic admits less */
        sl_sim_shape_result r0;
        assert_int_equal(sl_sim_shape(&s, 0, &r0), 0);
        assert_int_equal(r0.delayed, 0);
        assert_true(r0.admitted < r.admitted);
        sl_sim_free(&s);
        sl_traffic_free(&t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_rng_deterministic),
        cmocka_unit_test(test_poisson_mean_rate),
        cmocka_unit_test(test_bursty_mean_rate),
        cmocka_unit_test(test_ramp_mean_rate),
        cmocka_unit_test(test_edge_pattern),
        cmocka_unit_test(test_generator_limits),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_reference_handmade),
        cmocka_unit_test(test_reference_brute_force),
        cmocka_unit_test(test_score_handmade),
        cmocka_unit_test(test_alg_parse),
        cmocka_unit_test(test_series),
        cmocka_unit_test(test_edge_fixed_window_doubles),
        cmocka_unit_test(test_sliding_log_never_exceeds),
        cmocka_unit_test(test_gcra_burst),
        cmocka_unit_test(test_same_seed_same_output),
        cmocka_unit_test(test_distribution_of_one),
        cmocka_unit_test(test_distribution_studies),
    };
    return cmocka_run_group_tests(tests, 0, NULL);
}

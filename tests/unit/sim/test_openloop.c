/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the open-loop lab (sim/openloop.h) and of the constant traffic it is studied with: each
 * estimator, the real engine on a virtual clock, fed the same traffic and read against the true
 * count of the trailing window. Fixed window back to 0 at every window edge, the log equal to the
 * true count, the sub-window estimate within 1/N of it, the buckets' backlog and what they let
 * through, and the error figures.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/openloop.h"
#include "sim/sim.h"
#include "sim/traffic.h"

#define MIN_MS 60000

static sl_openloop_col col(const char *spec, sl_openloop_kind kind)
{
    sl_openloop_col c;
    memset(&c, 0, sizeof c);
    assert_int_equal(sl_sim_alg_parse(spec, strlen(spec), &c.alg), 0);
    c.kind = kind;
    return c;
}

static const sl_sim_params params100 = {
    .limit = 100, .duration = MIN_MS, .burst = 0, .epoch_ms = SL_SIM_DEFAULT_EPOCH_MS};

/* The series of column c, out of a fresh array of n samples (the caller frees it). */
static double *series(const sl_traffic *t, const sl_sim_params *p, sl_openloop_col c, int64_t step,
                      size_t *n)
{
    *n = sl_openloop_samples(t, step);
    assert_true(*n > 0);
    double *out = calloc(*n, sizeof *out);
    assert_non_null(out);
    const char *err = "unset";
    assert_int_equal(sl_openloop_run(t, 0, p, &c, step, out, &err), 0);
    assert_null(err);
    return out;
}

static double *truth(const sl_traffic *t, int64_t duration, int64_t step, size_t *n)
{
    *n = sl_openloop_samples(t, step);
    double *out = calloc(*n ? *n : 1, sizeof *out);
    assert_non_null(out);
    assert_int_equal(sl_openloop_true(t, 0, duration, step, out), 0);
    return out;
}

static void test_constant_traffic(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_constant(&t, 2, 10000, 3), 0);
    assert_int_equal(t.n, 60); /* 20 instants x 3 keys */
    assert_int_equal(t.span_ms, 10000);
    for (size_t i = 0; i < t.n; i++) {
        assert_int_equal(t.ev[i].t_ms, (int64_t)(i / 3) * 500);
        assert_int_equal(t.ev[i].key, i % 3);
    }
    assert_int_equal(sl_traffic_constant(&t, 3, 1000, 1), 0);
    assert_int_equal(t.n, 3);
    assert_int_equal(t.ev[1].t_ms, 333);
    assert_int_equal(t.ev[2].t_ms, 666);
    assert_int_equal(sl_traffic_constant(&t, 0, 1000, 1), 0);
    assert_int_equal(t.n, 0);
    assert_int_equal(sl_traffic_constant(&t, -1, 1000, 1), -EINVAL);
    sl_traffic t2;
    sl_traffic_init(&t2, 10);
    assert_int_equal(sl_traffic_constant(&t2, 100, 1000, 1), -E2BIG);
    assert_int_equal(t2.n, 0);
    sl_traffic_free(&t2);
    sl_traffic_free(&t);
}

static void test_columns(void **state)
{
    (void)state;
    sl_sim_alg algs[3];
    size_t n;
    assert_int_equal(sl_sim_alg_parse_list("fixed_window,leaky_bucket,gcra:99", algs, 3, &n), 0);
    sl_openloop_col cols[5];
    size_t nc;
    assert_int_equal(sl_openloop_columns(algs, n, cols, 5, &nc), 0);
    assert_int_equal(nc, 5);
    assert_string_equal(cols[0].label, "fixed_window");
    assert_int_equal(cols[0].kind, SL_OPENLOOP_COUNT);
    assert_string_equal(cols[1].label, "leaky_bucket_backlog");
    assert_int_equal(cols[1].kind, SL_OPENLOOP_BACKLOG);
    assert_string_equal(cols[2].label, "leaky_bucket_admitted");
    assert_int_equal(cols[2].kind, SL_OPENLOOP_ADMITTED);
    assert_string_equal(cols[4].label, "gcra:99_admitted");
    assert_int_equal(cols[4].alg.burst, 99);
    assert_int_equal(sl_openloop_columns(algs, n, cols, 4, &nc), -E2BIG);
}

/* The fixed window forgets at every edge: sampled right on an edge (the epoch is shifted by 250 ms
 * so that no request falls on one), its count is 0 while the true count stays at 120; just before
 * the edge it holds the whole minute. It never counts more than the truth. */
static void test_fixed_window_drops_at_edges(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_constant(&t, 2, 5 * MIN_MS, 1), 0);
    sl_sim_params p = params100;
    p.epoch_ms += 250; /* edges at t = 59750 + k * 60000 */
    size_t n, nt;
    double *est = series(&t, &p, col("fixed_window", SL_OPENLOOP_COUNT), 250, &n);
    double *tru = truth(&t, MIN_MS, 250, &nt);
    assert_int_equal(n, nt);
    int edges = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = 250 * (int64_t)(i + 1);
        assert_true(est[i] <= tru[i]);
        if ((p.epoch_ms + s) % MIN_MS == 0) {
            edges++;
            assert_true(est[i] == 0);
            assert_true(est[i - 1] >= 119); /* a whole minute at 2/s, less one half-open end */
            if (s > MIN_MS)
                assert_true(tru[i] == 120);
        }
    }
    assert_int_equal(edges, 5);
    free(est);
    free(tru);
    sl_traffic_free(&t);
}

/* The log is the true count, sample for sample, even at ten times the limit (nothing refused). */
static void test_log_equals_true(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_poisson(&t, 2, 10 * MIN_MS, 1, 7), 0);
    size_t n, nt;
    double *tru = truth(&t, MIN_MS, 1000, &nt);
    double *est = series(&t, &params100, col("sliding_log", SL_OPENLOOP_COUNT), 1000, &n);
    for (size_t i = 0; i < n; i++)
        assert_true(est[i] == tru[i]);
    free(est);
    free(tru);
    /* Ten times the limit: 1000 requests per minute against a limit of 100. */
    assert_int_equal(sl_traffic_poisson(&t, 1000.0 / 60, 3 * MIN_MS, 1, 7), 0);
    tru = truth(&t, MIN_MS, 500, &nt);
    est = series(&t, &params100, col("sliding_log", SL_OPENLOOP_COUNT), 500, &n);
    double peak = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(est[i] == tru[i]);
        peak = est[i] > peak ? est[i] : peak;
    }
    assert_true(peak > 900);
    free(est);
    free(tru);
    sl_traffic_free(&t);
}

/* Under constant traffic, N sub-windows estimate the trailing window within 1/N of the truth (the
 * oldest sub-window is weighted as if its requests were spread evenly, which they are), once a
 * whole window has passed. */
static void test_sub_windows_within_1_over_n(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_constant(&t, 3, 6 * MIN_MS, 1), 0);
    static const char *const specs[] = {"sliding_window:1", "sliding_window:5",
                                        "sliding_window:60"};
    static const int subs[] = {1, 5, 60};
    size_t nt;
    double *tru = truth(&t, MIN_MS, 700, &nt);
    for (size_t k = 0; k < 3; k++) {
        size_t n;
        double *est = series(&t, &params100, col(specs[k], SL_OPENLOOP_COUNT), 700, &n);
        for (size_t i = 0; i < n; i++) {
            if (700 * (int64_t)(i + 1) <= MIN_MS)
                continue;
            assert_true(fabs(est[i] - tru[i]) <= tru[i] / subs[k] + 1);
            assert_true(fabs(est[i] - tru[i]) <= 2); /* in fact within a request or two */
        }
        free(est);
    }
    free(tru);
    sl_traffic_free(&t);
}

/* The buckets under exactly 2/s against 100 per minute: the backlog (a deep bucket) grows by the
 * excess over the rate, 20 a minute, whatever the window holds; with the real bucket (burst = limit,
 * full at the start) the leaky bucket, once dry, lets through one request a second: 60 a minute,
 * 40 % under its limit, as GCRA with burst 0 does from the start. */
static void test_buckets_constant(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_constant(&t, 2, 20 * MIN_MS, 1), 0);
    size_t n;
    for (int g = 0; g < 2; g++) {
        const char *name = g ? "gcra" : "leaky_bucket";
        double *b = series(&t, &params100, col(name, SL_OPENLOOP_BACKLOG), 1000, &n);
        for (size_t i = 0; i < n; i++) {
            double want = (2.0 - 100.0 / 60) * (double)(i + 1);
            assert_true(fabs(b[i] - want) <= 2.5);
        }
        free(b);
        double *a = series(&t, &params100, col(name, SL_OPENLOOP_ADMITTED), 1000, &n);
        for (size_t i = n / 2; i < n; i++) /* steady state: the second half */
            assert_true(fabs(a[i] - 60) <= 1);
        free(a);
    }
    /* Below the rate the backlog stays at a request or less, while the window holds 90. */
    assert_int_equal(sl_traffic_constant(&t, 1.5, 5 * MIN_MS, 1), 0);
    double *b = series(&t, &params100, col("leaky_bucket", SL_OPENLOOP_BACKLOG), 1000, &n);
    size_t nt;
    double *tru = truth(&t, MIN_MS, 1000, &nt);
    for (size_t i = 0; i < n; i++) {
        assert_true(b[i] <= 1);
        if (i >= 60)
            assert_true(tru[i] >= 89);
    }
    free(b);
    free(tru);
    sl_traffic_free(&t);
}

/* The token bucket (Gubernator's: a window opened by the first hit) counts from its own start. */
static void test_token_bucket_count(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_constant(&t, 2, 3 * MIN_MS, 1), 0);
    size_t n, nt;
    double *est = series(&t, &params100, col("token_bucket", SL_OPENLOOP_COUNT), 1000, &n);
    double *tru = truth(&t, MIN_MS, 1000, &nt);
    for (size_t i = 0; i < n; i++)
        assert_true(est[i] >= 0 && est[i] <= tru[i] + 1);
    assert_true(est[29] >= 59 && est[29] <= 61); /* t = 30 s: half a minute of hits */
    free(est);
    free(tru);
    sl_traffic_free(&t);
}

static void test_error_figures(void **state)
{
    (void)state;
    const double tru[] = {10, 10, 10, 10};
    const double est[] = {12, 8, 10, 14};
    sl_openloop_err e;
    sl_openloop_error(est, tru, 0, 4, &e);
    assert_int_equal(e.n, 4);
    assert_true(fabs(e.mae - 2.0) < 1e-12);    /* (2 + 2 + 0 + 4) / 4 */
    assert_true(fabs(e.max_err - 4.0) < 1e-12);
    assert_true(fabs(e.bias - 1.0) < 1e-12);   /* (2 - 2 + 0 + 4) / 4 */
    assert_true(fabs(e.mean_true - 10) < 1e-12);
    assert_true(fabs(e.mean_est - 11) < 1e-12);
    sl_openloop_error(est, tru, 2, 4, &e);     /* the second half */
    assert_int_equal(e.n, 2);
    assert_true(fabs(e.bias - 2.0) < 1e-12);
    sl_openloop_error(est, tru, 3, 3, &e);
    assert_int_equal(e.n, 0);
    assert_true(e.mae == 0 && e.bias == 0);
}

static void test_bad_input(void **state)
{
    (void)state;
    sl_traffic t;
    sl_traffic_init(&t, 0);
    assert_int_equal(sl_traffic_constant(&t, 1, 10000, 1), 0);
    double out[16];
    const char *err;
    sl_openloop_col c = col("fixed_window", SL_OPENLOOP_COUNT);
    assert_int_equal(sl_openloop_run(&t, 1, &params100, &c, 1000, out, &err), -EINVAL);
    assert_int_equal(sl_openloop_run(&t, 0, &params100, &c, 0, out, &err), -EINVAL);
    assert_int_equal(sl_openloop_true(&t, 5, MIN_MS, 1000, out), -EINVAL);
    assert_int_equal(sl_openloop_samples(&t, 0), 0);
    t.span_ms = (int64_t)SL_OPENLOOP_MAX_SAMPLES * 2;
    assert_int_equal(sl_openloop_run(&t, 0, &params100, &c, 1, out, &err), -E2BIG);
    t.span_ms = 10000;
    /* The engine's own checks come back as *err: 7 sub-windows do not divide 60000 ms... */
    sl_openloop_col bad = col("sliding_window:7", SL_OPENLOOP_COUNT);
    assert_int_equal(sl_openloop_run(&t, 0, &params100, &bad, 1000, out, &err), -EINVAL);
    assert_non_null(err);
    sl_traffic_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_constant_traffic),
        cmocka_unit_test(test_columns),
        cmocka_unit_test(test_fixed_window_drops_at_edges),
        cmocka_unit_test(test_log_equals_true),
        cmocka_unit_test(test_sub_windows_within_1_over_n),
        cmocka_unit_test(test_buckets_constant),
        cmocka_unit_test(test_token_bucket_count),
        cmocka_unit_test(test_error_figures),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

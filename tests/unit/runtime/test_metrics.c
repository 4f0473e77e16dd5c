/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the metrics registry: registration rules, sharded updates, histogram buckets,
 * both renderers checked line by line, promtool's verdict, and the cost of a hot-path update. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../support/skip.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/metrics.h"
#include "sluice/clock.h"

static const double lat[] = {SL_METRICS_LATENCY_BUCKETS};

static char *render_prom(sl_metrics *m)
{
    char *s = NULL;
    size_t n = 0;
    assert_int_equal(sl_metrics_render_prometheus(m, &s, &n), 0);
    assert_non_null(s);
    assert_int_equal(strlen(s), n);
    return s;
}

/* Compare text with the expected lines exactly, one line at a time (the first differing line is
 * what cmocka prints). */
static void assert_lines(const char *text, const char *const *expect)
{
    const char *p = text;
    size_t i = 0;
    for (; expect[i] != NULL; i++) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        char line[1024];
        size_t n = (size_t)(nl - p);
        assert_true(n < sizeof(line));
        memcpy(line, p, n);
        line[n] = '\0';
        assert_string_equal(line, expect[i]);
        p = nl + 1;
    }
    assert_string_equal(p, "");
}

static void collect_none(void *arg, sl_metrics_sink *sink)
{
    (void)arg;
    (void)sink;
}

static void test_registration_rules(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_family *f;
    assert_int_equal(sl_metrics_counter_family(m, "sluice_x", "h", NULL, &f), -EINVAL);
    assert_null(f);
    assert_int_equal(sl_metrics_gauge_family(m, "sluice_x_total", "h", NULL, &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "9bad_total", "h", NULL, &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "bad-name_total", "h", NULL, &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", NULL, NULL, &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", "a,,b", &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", "a,", &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", "__x", &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", "a,a", &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", "a-b", &f), -EINVAL);
    assert_int_equal(
        sl_metrics_counter_family(m, "sluice_a_total", "h", "a,b,c,d,e,f,g,h,i", &f), -EINVAL);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", "a,b", &f), 0);
    assert_non_null(f);
    assert_int_equal(sl_metrics_counter_family(m, "sluice_a_total", "h", NULL, NULL), -EEXIST);
    assert_int_equal(sl_metrics_gauge_family(m, "sluice_a_total", "h", NULL, NULL), -EINVAL);

    double up[] = {1, 2, 2};
    double nan_b[] = {1, NAN};
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_h", "h", "le", lat, 16, 1e9, NULL),
                     -EINVAL);
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_h", "h", NULL, up, 3, 1, NULL),
                     -EINVAL);
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_h", "h", NULL, nan_b, 2, 1, NULL),
                     -EINVAL);
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_h", "h", NULL, lat, 0, 1, NULL),
                     -EINVAL);
    /* 0.1 and 0.2 are one base unit apart only after scaling: with scale 1 both floor to 0. */
    double close_b[] = {0.1, 0.2};
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_h", "h", NULL, close_b, 2, 1, NULL),
                     -EINVAL);
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_h", "h", NULL, close_b, 2, 10, NULL),
                     0);
    assert_int_equal(sl_metrics_collector(m, SL_METRICS_HISTOGRAM, "sluice_c", "h", NULL,
                                          collect_none, NULL),
                     -EINVAL);

    /* Type and arity checks on lookup. */
    assert_null(sl_metrics_gauge_get(f, (const char *[]){"x", "y"}, 2));
    assert_null(sl_metrics_counter_get(f, (const char *[]){"x"}, 1));
    sl_metrics_counter *c = sl_metrics_counter_get(f, (const char *[]){"x", "y"}, 2);
    assert_non_null(c);
    assert_ptr_equal(sl_metrics_counter_get(f, (const char *[]){"x", "y"}, 2), c);
    assert_ptr_not_equal(sl_metrics_counter_get(f, (const char *[]){"y", "x"}, 2), c);

    sl_metrics_config bad = {.shards = 3};
    sl_metrics *m2 = NULL;
    assert_int_equal(sl_metrics_new(&bad, &m2), -EINVAL);
    assert_null(m2);
    sl_metrics_free(m);
}

static void test_counter_gauge_values(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_counter *c;
    sl_metrics_gauge *g;
    assert_int_equal(sl_metrics_counter_new(m, "sluice_c_total", "c", &c), 0);
    assert_int_equal(sl_metrics_gauge_new(m, "sluice_g", "g", &g), 0);
    sl_metrics_counter_inc(c);
    sl_metrics_counter_add(c, 41);
    assert_int_equal(sl_metrics_counter_value(c), 42);
    sl_metrics_gauge_set(g, 10);
    sl_metrics_gauge_add(g, -2.5);
    assert_true(sl_metrics_gauge_value(g) == 7.5);

    /* Different threads land on different shards; the value is their sum. */
    sl_metrics_bind_thread(5);
    sl_metrics_counter_add(c, 8);
    assert_int_equal(sl_metrics_counter_value(c), 50);

    /* NULL handles are ignored. */
    sl_metrics_counter_inc(NULL);
    sl_metrics_gauge_set(NULL, 1);
    sl_metrics_gauge_add(NULL, 1);
    sl_metrics_histogram_observe(NULL, 1);
    assert_int_equal(sl_metrics_counter_value(NULL), 0);
    sl_metrics_free(m);
}

struct worker_arg {
    sl_metrics_counter *c;
    sl_metrics_histogram *h;
    sl_metrics_gauge *g;
    unsigned index;
    int n;
};

static void *worker(void *p)
{
    struct worker_arg *a = p;
    if (a->index != ~0u)
        sl_metrics_bind_thread(a->index);
    for (int i = 0; i < a->n; i++) {
        sl_metrics_counter_inc(a->c);
        sl_metrics_histogram_observe(a->h, i % 3);
        sl_metrics_gauge_add(a->g, 1);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    /* 2 shards and 6 threads: shards are shared, so the atomics must carry the count. */
    sl_metrics_config cfg = {.shards = 2};
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(&cfg, &m), 0);
    sl_metrics_counter *c;
    sl_metrics_histogram *h;
    sl_metrics_gauge *g;
    double b[] = {0, 1};
    assert_int_equal(sl_metrics_counter_new(m, "sluice_t_total", "t", &c), 0);
    assert_int_equal(sl_metrics_histogram_new(m, "sluice_t", "t", b, 2, 1, &h), 0);
    assert_int_equal(sl_metrics_gauge_new(m, "sluice_tg", "t", &g), 0);
    enum { T = 6, N = 30000 };
    pthread_t th[T];
    struct worker_arg args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (struct worker_arg){c, h, g, i % 2 ? (unsigned)i : ~0u, N};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(sl_metrics_counter_value(c), T * N);
    assert_int_equal(sl_metrics_histogram_count(h), T * N);
    assert_int_equal(sl_metrics_histogram_bucket(h, 0), T * (N / 3));
    assert_int_equal(sl_metrics_histogram_bucket(h, 1), T * (2 * N / 3));
    assert_true(sl_metrics_histogram_sum(h) == (double)T * (N / 3) * 3);
    assert_true(sl_metrics_gauge_value(g) == (double)T * N);
    sl_metrics_free(m);
}

static void test_histogram_buckets(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_histogram *h;
    assert_int_equal(sl_metrics_histogram_new(m, "sluice_lat_seconds", "l", lat,
                                              SL_METRICS_LATENCY_NBUCKETS, 1e9, &h),
                     0);
    sl_metrics_histogram_observe(h, 50000);     /* exactly 50us: le is inclusive */
    sl_metrics_histogram_observe(h, 50001);     /* just above: next bucket (100us) */
    sl_metrics_histogram_observe(h, 0);         /* first bucket */
    sl_metrics_histogram_observe(h, 7000000000); /* 7s: only +Inf */
    sl_metrics_histogram_observe_f(h, 0.001);   /* 1ms */
    assert_int_equal(sl_metrics_histogram_bucket(h, 0), 2);
    assert_int_equal(sl_metrics_histogram_bucket(h, 1), 3);
    assert_int_equal(sl_metrics_histogram_bucket(h, 4), 4);  /* le=0.001 */
    assert_int_equal(sl_metrics_histogram_bucket(h, 15), 4); /* le=5 */
    assert_int_equal(sl_metrics_histogram_bucket(h, 16), 5); /* +Inf */
    assert_int_equal(sl_metrics_histogram_bucket(h, 99), 5);
    assert_int_equal(sl_metrics_histogram_count(h), 5);
    assert_true(fabs(sl_metrics_histogram_sum(h) - 7.001100001) < 1e-12);
    sl_metrics_free(m);
}

static void collect_keys(void *arg, sl_metrics_sink *sink)
{
    int *calls = arg;
    (*calls)++;
    sl_metrics_sink_emit(sink, (const char *[]){"0"}, 1, 12);
    sl_metrics_sink_emit(sink, (const char *[]){"1"}, 1, 3.5);
    sl_metrics_sink_emit(sink, NULL, 0, 99); /* wrong arity: ignored */
}

/* A registry with one of everything; the expected renderings follow. */
static sl_metrics *sample_registry(int *calls)
{
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_family *req, *lat_f;
    assert_int_equal(sl_metrics_counter_family(m, "sluice_requests_total",
                                               "Requests decided, by API method and status.",
                                               "method,status", &req),
                     0);
    sl_metrics_counter *ok =
        sl_metrics_counter_get(req, (const char *[]){"GetRateLimits", "ok"}, 2);
    sl_metrics_counter *odd =
        sl_metrics_counter_get(req, (const char *[]){"a\"b\\c\nd", "bad;val ue"}, 2);
    sl_metrics_counter *empty = sl_metrics_counter_get(req, (const char *[]){"", "~x"}, 2);
    sl_metrics_counter_add(ok, 7);
    sl_metrics_counter_inc(odd);
    sl_metrics_counter_add(empty, 2);

    sl_metrics_gauge *conns;
    assert_int_equal(sl_metrics_gauge_new(m, "sluice_connections", "Open client\nconnections \\ now.",
                                          &conns),
                     0);
    sl_metrics_gauge_set(conns, 3);

    double b[] = {0.001, 0.5};
    assert_int_equal(sl_metrics_histogram_family(m, "sluice_request_duration_seconds",
                                                 "Time to answer a request.", "method", b, 2, 1e9,
                                                 &lat_f),
                     0);
    sl_metrics_histogram *h = sl_metrics_histogram_get(lat_f, (const char *[]){"attempt"}, 1);
    sl_metrics_histogram_observe(h, 500000);    /* 0.5ms */
    sl_metrics_histogram_observe(h, 250000000); /* 0.25s */
    sl_metrics_histogram_observe(h, 2000000000); /* 2s */

    assert_int_equal(sl_metrics_collector(m, SL_METRICS_GAUGE, "sluice_keys",
                                          "Keys held, by shard.", "shard", collect_keys, calls),
                     0);
    sl_metrics_family *unused;
    assert_int_equal(sl_metrics_counter_family(m, "sluice_peer_errors_total", "Errors by peer.",
                                               "peer", &unused),
                     0);
    return m;
}

static void test_render_prometheus(void **state)
{
    (void)state;
    int calls = 0;
    sl_metrics *m = sample_registry(&calls);
    char *s = render_prom(m);
    assert_int_equal(calls, 1);
    const char *expect[] = {
        "# HELP sluice_requests_total Requests decided, by API method and status.",
        "# TYPE sluice_requests_total counter",
        "sluice_requests_total{method=\"GetRateLimits\",status=\"ok\"} 7",
        "sluice_requests_total{method=\"a\\\"b\\\\c\\nd\",status=\"bad;val ue\"} 1",
        "sluice_requests_total{method=\"\",status=\"~x\"} 2",
        "# HELP sluice_connections Open client\\nconnections \\\\ now.",
        "# TYPE sluice_connections gauge",
        "sluice_connections 3",
        "# HELP sluice_request_duration_seconds Time to answer a request.",
        "# TYPE sluice_request_duration_seconds histogram",
        "sluice_request_duration_seconds_bucket{method=\"attempt\",le=\"0.001\"} 1",
        "sluice_request_duration_seconds_bucket{method=\"attempt\",le=\"0.5\"} 2",
        "sluice_request_duration_seconds_bucket{method=\"attempt\",le=\"+Inf\"} 3",
        "sluice_request_duration_seconds_sum{method=\"attempt\"} 2.2505",
        "sluice_request_duration_seconds_count{method=\"attempt\"} 3",
        "# HELP sluice_keys Keys held, by shard.",
        "# TYPE sluice_keys gauge",
        "sluice_keys{shard=\"0\"} 12",
        "sluice_keys{shard=\"1\"} 3.5",
        "# HELP sluice_peer_errors_total Errors by peer.",
        "# TYPE sluice_peer_errors_total counter",
        NULL,
    };
    assert_lines(s, expect);
    free(s);
    sl_metrics_free(m);
}

static void test_render_graphite(void **state)
{
    (void)state;
    int calls = 0;
    sl_metrics *m = sample_registry(&calls);
    char *s = NULL;
    size_t n = 0;
    const char *tags[] = {"instance", "node 1", "empty", "", NULL};
    assert_int_equal(sl_metrics_render_graphite(m, "dc1 .sluice", tags, 1700000000, &s, &n), 0);
    const char *expect[] = {
        "dc1_.sluice.sluice_requests_total;method=GetRateLimits;status=ok;instance=node_1 7 "
        "1700000000",
        "dc1_.sluice.sluice_requests_total;method=a\"b\\c_d;status=bad_val_ue;instance=node_1 1 "
        "1700000000",
        "dc1_.sluice.sluice_requests_total;status=_x;instance=node_1 2 1700000000",
        "dc1_.sluice.sluice_connections;instance=node_1 3 1700000000",
        "dc1_.sluice.sluice_request_duration_seconds_bucket;method=attempt;le=0.001;instance=node_1"
        " 1 1700000000",
        "dc1_.sluice.sluice_request_duration_seconds_bucket;method=attempt;le=0.5;instance=node_1"
        " 2 1700000000",
        "dc1_.sluice.sluice_request_duration_seconds_bucket;method=attempt;le=+Inf;instance=node_1"
        " 3 1700000000",
        "dc1_.sluice.sluice_request_duration_seconds_sum;method=attempt;instance=node_1 2.2505 "
        "1700000000",
        "dc1_.sluice.sluice_request_duration_seconds_count;method=attempt;instance=node_1 3 "
        "1700000000",
        "dc1_.sluice.sluice_keys;shard=0;instance=node_1 12 1700000000",
        "dc1_.sluice.sluice_keys;shard=1;instance=node_1 3.5 1700000000",
        NULL,
    };
    assert_lines(s, expect);
    free(s);

    /* No prefix, no tags. */
    assert_int_equal(sl_metrics_render_graphite(m, NULL, NULL, 5, &s, &n), 0);
    assert_true(strncmp(s, "sluice_requests_total;method=GetRateLimits;status=ok 7 5\n", 52) == 0);
    free(s);
    sl_metrics_free(m);
}

static void test_label_hygiene_and_caps(void **state)
{
    (void)state;
    sl_metrics_config cfg = {.max_series = 3};
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(&cfg, &m), 0);
    sl_metrics_family *f;
    assert_int_equal(sl_metrics_counter_family(m, "sluice_x_total", "x", "k", &f), 0);
    /* Invalid UTF-8 is replaced, and the replaced value is the series' identity. */
    sl_metrics_counter *a = sl_metrics_counter_get(f, (const char *[]){"a\xff"}, 1);
    sl_metrics_counter *b = sl_metrics_counter_get(f, (const char *[]){"a\xfe"}, 1);
    assert_non_null(a);
    assert_ptr_equal(a, b);
    sl_metrics_counter *u = sl_metrics_counter_get(f, (const char *[]){"\xc3\xa9t\xc3\xa9"}, 1);
    assert_non_null(u);
    char big[SL_METRICS_LABEL_VALUE_MAX + 2];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_null(sl_metrics_counter_get(f, (const char *[]){big}, 1));
    assert_null(sl_metrics_counter_get(f, (const char *[]){NULL}, 1));
    assert_non_null(sl_metrics_counter_get(f, (const char *[]){"third"}, 1));
    /* The cap: a fourth series is refused, existing ones are still found. */
    assert_null(sl_metrics_counter_get(f, (const char *[]){"fourth"}, 1));
    assert_ptr_equal(sl_metrics_counter_get(f, (const char *[]){"a?"}, 1), a);
    assert_int_equal(sl_metrics_gauge_family(m, "sluice_g", "g", NULL, NULL), -ENOSPC);
    char *s = render_prom(m);
    assert_non_null(strstr(s, "sluice_x_total{k=\"a?\"} 0\n"));
    assert_non_null(strstr(s, "sluice_x_total{k=\"\xc3\xa9t\xc3\xa9\"} 0\n"));
    assert_null(strstr(s, "sluice_g"));
    free(s);
    sl_metrics_free(m);
}

static void test_special_values(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_gauge *g;
    assert_int_equal(sl_metrics_gauge_new(m, "sluice_g", "g", &g), 0);
    sl_metrics_gauge_set(g, NAN);
    char *s = render_prom(m);
    assert_non_null(strstr(s, "sluice_g NaN\n"));
    free(s);
    sl_metrics_gauge_set(g, -INFINITY);
    s = render_prom(m);
    assert_non_null(strstr(s, "sluice_g -Inf\n"));
    free(s);
    assert_int_equal(sl_metrics_render_graphite(m, "p", NULL, 1, &s, NULL), 0);
    assert_string_equal(s, ""); /* Graphite cannot carry it: skipped */
    free(s);
    sl_metrics_gauge_set(g, 0.1);
    s = render_prom(m);
    assert_non_null(strstr(s, "sluice_g 0.1\n"));
    free(s);
    sl_metrics_gauge_set(g, 1.0 / 3);
    s = render_prom(m);
    assert_non_null(strstr(s, "sluice_g 0.33333333333333331\n")); /* round-trips */
    free(s);
    sl_metrics_free(m);
}

static void test_promtool(void **state)
{
    (void)state;
    SL_NEED("/usr/bin/promtool", "prometheus");
    int calls = 0;
    sl_metrics *m = sample_registry(&calls);
    /* Also the full latency bucket set, whose small bounds print in exponent form. */
    sl_metrics_histogram *h;
    assert_int_equal(sl_metrics_histogram_new(m, "sluice_engine_decide_seconds", "Engine time.", lat,
                                              SL_METRICS_LATENCY_NBUCKETS, 1e9, &h),
                     0);
    sl_metrics_histogram_observe(h, 70000);
    char *s = render_prom(m);
    char path[] = "/tmp/sluice_metrics_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(s, f);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics < %s", path);
    int rc = system(cmd);
    unlink(path);
    free(s);
    sl_metrics_free(m);
    assert_int_equal(rc, 0);

    /* And promtool must be able to fail: a counter without _total written by hand. */
    strcpy(path, "/tmp/sluice_metrics_XXXXXX");
    int fd2 = mkstemp(path);
    assert_true(fd2 >= 0);
    FILE *f2 = fdopen(fd2, "w");
    fputs("# HELP x a\n# TYPE x counter\nx 1\n", f2);
    fclose(f2);
    snprintf(cmd, sizeof(cmd), "/usr/bin/promtool check metrics < %s >/dev/null 2>&1", path);
    rc = system(cmd);
    unlink(path);
    assert_int_not_equal(rc, 0);
}

/* Cost of one update, on the thread's own shard. Printed for the report; the bound only catches
 * a hot path that went badly wrong (it must hold under ASan too). */
static void test_update_cost(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_metrics_counter *c;
    sl_metrics_histogram *h;
    assert_int_equal(sl_metrics_counter_new(m, "sluice_bench_total", "b", &c), 0);
    assert_int_equal(sl_metrics_histogram_new(m, "sluice_bench_seconds", "b", lat,
                                              SL_METRICS_LATENCY_NBUCKETS, 1e9, &h),
                     0);
    enum { N = 2000000 };
    int64_t t0 = sl_mono_ns();
    for (int i = 0; i < N; i++)
        sl_metrics_counter_inc(c);
    int64_t t1 = sl_mono_ns();
    for (int i = 0; i < N; i++)
        sl_metrics_histogram_observe(h, (int64_t)(i & 1023) * 97000); /* 0 .. ~99ms */
    int64_t t2 = sl_mono_ns();
    double inc_ns = (double)(t1 - t0) / N, obs_ns = (double)(t2 - t1) / N;
    printf("metrics: counter inc %.2f ns, histogram observe %.2f ns\n", inc_ns, obs_ns);
    assert_int_equal(sl_metrics_counter_value(c), N);
    assert_int_equal(sl_metrics_histogram_count(h), N);
    assert_true(inc_ns < 500 && obs_ns < 1000);
    sl_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registration_rules),
        cmocka_unit_test(test_counter_gauge_values),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_histogram_buckets),
        cmocka_unit_test(test_render_prometheus),
        cmocka_unit_test(test_render_graphite),
        cmocka_unit_test(test_label_hygiene_and_caps),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_promtool),
        cmocka_unit_test(test_update_cost),
    };
    return sl_skip_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Levee /attempt tests on a real engine and a virtual clock: 429 once the burst is spent and 200
 * again one emission interval later, Retry-After and the RateLimit header fields, every lookup
 * level and the defaults, sublimits, "every quota must accept" without consuming anything on a
 * rejection (in both orders), DF normalisation, rate 0, the no-quota modes, malformed requests,
 * X-Req-Id, quotas not loaded yet, a quota changed under a live bucket, X-Max-Delay (delay instead
 * of reject), the same answers from a store's two-step decision (sl_levee_plan_*), and the engine
 * parameter and policy-window conversions.
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

#include "api/levee.h"
#include "sluice/clock.h"

#define T0 1700000000000LL

typedef struct fixture {
    sl_engine *engine;
    sl_quota_snap *snap;
    sl_levee_config cfg;
    sl_clock clock;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    sl_levee_config_default(&f->cfg);
    sl_clock_init_virtual(&f->clock, T0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sl_quota_snap_unref(f->snap);
    sl_engine_free(f->engine);
    free(f);
    return 0;
}

/* Replace the snapshot with one built from "key=value" etcd entries under /levee. */
static void quotas(fixture *f, const char *const *kv)
{
    sl_quota_tree *t;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    for (; *kv; kv++) {
        const char *eq = strchr(*kv, '=');
        assert_non_null(eq);
        char key[256];
        snprintf(key, sizeof key, "/levee/%.*s", (int)(eq - *kv), *kv);
        const char *err = NULL;
        int rc = sl_quota_tree_apply_put(t, "/levee", key, strlen(key), eq + 1, strlen(eq + 1),
                                         &err);
        if (rc)
            fail_msg("%s: %s", *kv, err);
    }
    sl_quota_snap_unref(f->snap);
    assert_int_equal(sl_quota_snap_new(t, true, 1, 0, &f->snap), 0);
}

static sl_answer resp;

static int attempt(fixture *f, const char *res, const char *prefix, const char *method)
{
    sl_levee_request rq = {.resource = res, .resource_len = res ? strlen(res) : 0,
                           .prefix = prefix, .prefix_len = prefix ? strlen(prefix) : 0,
                           .method = method, .method_len = method ? strlen(method) : 0};
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, sl_clock_now_ms(&f->clock), &resp);
    return resp.status;
}

static const char *header(const char *name)
{
    static char buf[2048];
    for (size_t i = 0; i < resp.n_headers; i++) {
        if (strcmp(resp.headers[i].name, name) == 0) {
            assert_int_equal(resp.headers[i].name_len, strlen(name));
            snprintf(buf, sizeof buf, "%.*s", (int)resp.headers[i].value_len,
                     resp.headers[i].value);
            return buf;
        }
    }
    return NULL;
}

static void assert_header(const char *name, const char *value)
{
    const char *v = header(name);
    if (!v)
        fail_msg("no %s header", name);
    if (strcmp(v, value) != 0)
        fail_msg("%s: '%s', expected '%s'", name, v, value);
}

static void assert_quota(const char *name)
{
    if (resp.quota_len != strlen(name) || memcmp(resp.quota, name, resp.quota_len) != 0)
        fail_msg("quota '%.*s', expected '%s'", (int)resp.quota_len, resp.quota ? resp.quota : "",
                 name);
}

/* rate 10/s, burst 2: three at once, then one every 100 ms. */
static void test_gcra_burst_and_interval(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key/api/quota={\"rate\":10,\"burst\":2}", NULL});
    for (int i = 0; i < 3; i++)
        assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    assert_int_equal(resp.n_headers, 0); /* nothing on 200 by default */
    assert_null(resp.body);

    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
    assert_int_equal(resp.outcome, SL_ANSWER_REJECTED);
    assert_int_equal(resp.retry_after_ms, 100);
    assert_header("Retry-After", "1");
    assert_header("RateLimit-Policy", "\"api\";q=10;w=1;sluice-burst=2");
    assert_header("RateLimit", "\"api\";r=0;t=1");
    assert_null(resp.body);
    assert_quota("api");
    assert_int_equal(resp.level, 3);

    /* 99 ms later still nothing; at 100 ms exactly one */
    sl_clock_advance(&f->clock, 99);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
    assert_int_equal(resp.retry_after_ms, 1);
    sl_clock_advance(&f->clock, 1);
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);

    /* idle long enough: the whole burst again */
    sl_clock_advance(&f->clock, 300);
    for (int i = 0; i < 3; i++)
        assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
}

static void test_lookup_levels(void **state)
{
    fixture *f = *state;
    /* burst 0 everywhere: each bucket admits one request at T0 */
    quotas(f, (const char *const[]){"limit/key_default={\"rate\":1}",
                                    "limit/key/api/quota={\"rate\":1}",
                                    "limit/key/api/GET/quota={\"rate\":1}",
                                    "limit/key/api/v1/GET/quota={\"rate\":1}", NULL});
    struct {
        const char *r, *p, *m, *quota;
        int level;
    } cases[] = {
        {"api", "v1", "GET", "api/v1/GET", 1},
        {"api", "v2", "GET", "api/GET", 2},
        {"api", NULL, "GET", "api/GET", 2},
        {"api", "v1", "PUT", "api", 3},
        {"api", NULL, NULL, "api", 3},
        {"web", "v1", "GET", "web", 4},
        {"db", NULL, NULL, "db", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* the first request of a bucket passes; repeats of cases sharing a bucket do not */
        int st = attempt(f, cases[i].r, cases[i].p, cases[i].m);
        bool shared = false;
        for (size_t j = 0; j < i; j++)
            shared |= strcmp(cases[j].quota, cases[i].quota) == 0;
        assert_int_equal(st, shared ? 429 : 200);
        assert_quota(cases[i].quota);
        assert_int_equal(resp.level, cases[i].level);
        assert_int_equal(attempt(f, cases[i].r, cases[i].p, cases[i].m), 429);
        assert_quota(cases[i].quota);
    }
}

/* Sub quota rejects after the main one accepted: the main quota's hit is given back. */
static void test_sublimit_rejects_without_consuming_main(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key/api/quota={\"rate\":1,\"burst\":4}",
                                    "limit/key/api/sublimit/POST={\"rate\":1,\"burst\":0}", NULL});
    assert_int_equal(attempt(f, "api", NULL, "POST"), 200); /* main 4 left, POST none */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(attempt(f, "api", "v1", "POST"), 429);
        assert_quota("api/sublimit/POST");
    }
    /* both quotas appear in the policy; both in RateLimit, the main one with its state after the
     * give-back (4 left), the rejecting one at 0 */
    assert_header("RateLimit-Policy",
                  "\"api\";q=1;w=1;sluice-burst=4, \"api/sublimit/POST\";q=1;w=1;sluice-burst=0");
    assert_header("RateLimit", "\"api\";r=4;t=1, \"api/sublimit/POST\";r=0;t=1");
    /* the ten rejected POSTs cost the main quota nothing: exactly 4 GETs pass */
    for (int i = 0; i < 4; i++)
        assert_int_equal(attempt(f, "api", NULL, "GET"), 200);
    assert_int_equal(attempt(f, "api", NULL, "GET"), 429);
    assert_quota("api");
}

/* Main quota rejects first: the sub quota is never touched. */
static void test_main_rejects_without_consuming_sub(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key/x/quota={\"rate\":1,\"burst\":0}",
                                    "limit/subkey_default/POST={\"rate\":1,\"burst\":3}", NULL});
    assert_int_equal(attempt(f, "x", NULL, "POST"), 200); /* main empty, sub 3 left */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(attempt(f, "x", NULL, "POST"), 429);
        assert_quota("x");
    }
    /* only the main quota was consulted: RateLimit names it alone */
    assert_header("RateLimit", "\"x\";r=0;t=1");
    /* peek the sub bucket in the engine: still 3 left */
    sl_request rq = {.name = "levee.sub", .name_len = 9, .unique_key = "x\nPOST",
                     .unique_key_len = 6, .hits = 0, .limit = 1, .duration = 1000, .burst = 3,
                     .algorithm = SL_GCRA};
    sl_response r;
    sl_engine_decide(f->engine, &rq, &r, sl_clock_now_ms(&f->clock));
    assert_null(r.error);
    assert_int_equal(r.remaining, 3);
}

static void test_subkey_default_per_resource(void **state)
{
    fixture *f = *state;
    f->cfg.no_quota = SL_LEVEE_NO_QUOTA_ALLOW;
    quotas(f, (const char *const[]){"limit/subkey_default/GET={\"rate\":1}", NULL});
    /* no main quota, but the subkey default applies, one bucket per resource */
    assert_int_equal(attempt(f, "a", NULL, "GET"), 200);
    assert_int_equal(attempt(f, "a", NULL, "GET"), 429);
    assert_quota("subkey_default/GET");
    assert_int_equal(resp.level, 0);
    assert_int_equal(attempt(f, "b", NULL, "GET"), 200);
    /* other methods have no quota at all: the no-quota mode (allow) */
    assert_int_equal(attempt(f, "a", NULL, "PUT"), 200);
    assert_int_equal(attempt(f, "a", NULL, "PUT"), 200);
}

static void test_group_size(void **state)
{
    fixture *f = *state;
    /* rate 10 with DF 2: this limiter allows 5/s, one every 200 ms */
    quotas(f, (const char *const[]){"limit/key/api/quota={\"rate\":10}", "factor/key/api=2",
                                    "factor/default=5", "limit/key_default={\"rate\":10}", NULL});
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    sl_clock_advance(&f->clock, 100);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
    assert_header("RateLimit-Policy", "\"api\";q=5;w=1;sluice-burst=0");
    sl_clock_advance(&f->clock, 100);
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    /* factor/default applies elsewhere: 10 / 5 = 2/s, 500 ms */
    assert_int_equal(attempt(f, "other", NULL, NULL), 200);
    sl_clock_advance(&f->clock, 499);
    assert_int_equal(attempt(f, "other", NULL, NULL), 429);
    assert_int_equal(resp.retry_after_ms, 1);
    sl_clock_advance(&f->clock, 1);
    assert_int_equal(attempt(f, "other", NULL, NULL), 200);
    /* a configured group size overrides the tree: 10/s from the next emission on (GCRA keeps
     * the time already scheduled, TAT, when the rate changes) */
    f->cfg.group_size = 1;
    sl_clock_advance(&f->clock, 499);
    assert_int_equal(attempt(f, "other", NULL, NULL), 429);
    sl_clock_advance(&f->clock, 1);
    assert_int_equal(attempt(f, "other", NULL, NULL), 200);
    sl_clock_advance(&f->clock, 100);
    assert_int_equal(attempt(f, "other", NULL, NULL), 200); /* 100 ms is enough now */
}

static void test_rate_zero(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key/blocked/quota={\"rate\":0,\"burst\":100}", NULL});
    assert_int_equal(attempt(f, "blocked", NULL, NULL), 429);
    assert_header("Retry-After", "1");
    assert_header("RateLimit-Policy", "\"blocked\";q=0;w=1;sluice-burst=100");
    assert_header("RateLimit", "\"blocked\";r=0;t=1");
    f->cfg.blocked_retry_after_s = 30;
    assert_int_equal(attempt(f, "blocked", NULL, NULL), 429);
    assert_header("Retry-After", "30");
    sl_engine_stats es;
    sl_engine_stats_get(f->engine, &es);
    assert_int_equal(es.keys, 0); /* the engine holds nothing for it */
}

static void test_no_quota_modes(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){NULL});
    assert_int_equal(f->cfg.no_quota, SL_LEVEE_NO_QUOTA_ERROR); /* the default */
    assert_int_equal(attempt(f, "any", NULL, NULL), 500);
    f->cfg.no_quota = SL_LEVEE_NO_QUOTA_ALLOW;
    assert_int_equal(attempt(f, "any", NULL, NULL), 200);
    assert_int_equal(resp.n_quotas, 0);
    f->cfg.no_quota = SL_LEVEE_NO_QUOTA_DENY;
    assert_int_equal(attempt(f, "any", NULL, NULL), 429);
    assert_header("Retry-After", "1");
    assert_null(header("RateLimit"));
    f->cfg.no_quota = SL_LEVEE_NO_QUOTA_ERROR;
    assert_int_equal(attempt(f, "any", NULL, NULL), 500);
    assert_int_equal(resp.outcome, SL_ANSWER_FAILED);
    assert_string_equal(resp.body, "no quota for resource\n");
    assert_string_equal(resp.content_type, "text/plain; charset=utf-8");

    assert_int_equal(sl_levee_no_quota_from_name("deny"), SL_LEVEE_NO_QUOTA_DENY);
    assert_int_equal(sl_levee_no_quota_from_name("ERROR"), SL_LEVEE_NO_QUOTA_ERROR);
    assert_int_equal(sl_levee_no_quota_from_name("allow"), SL_LEVEE_NO_QUOTA_ALLOW);
    assert_int_equal(sl_levee_no_quota_from_name("maybe"), -EINVAL);
    assert_string_equal(sl_levee_no_quota_name(SL_LEVEE_NO_QUOTA_DENY), "deny");
}

static void test_malformed_and_req_id(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key_default={\"rate\":1}", NULL});
    sl_levee_request rq = {.req_id = "trace-42", .req_id_len = 8};
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, T0, &resp);
    assert_int_equal(resp.status, 400);
    assert_int_equal(resp.outcome, SL_ANSWER_MALFORMED);
    assert_string_equal(resp.body, "missing X-Resource header\n");
    assert_header("X-Req-Id", "trace-42");

    rq.resource = "api";
    rq.resource_len = 3;
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, T0, &resp);
    assert_int_equal(resp.status, 200);
    assert_header("X-Req-Id", "trace-42");
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, T0, &resp);
    assert_int_equal(resp.status, 429);
    assert_header("X-Req-Id", "trace-42");

    /* too long for a bucket key */
    char *big = malloc(5000);
    memset(big, 'r', 5000);
    rq.resource = big;
    rq.resource_len = 5000;
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, T0, &resp);
    assert_int_equal(resp.status, 400);
    free(big);

    /* quotas not loaded yet (etcd not reached): 500, not the no-quota rules */
    sl_levee_request ok = {.resource = "api", .resource_len = 3};
    sl_levee_attempt(&f->cfg, NULL, f->engine, &ok, T0, &resp);
    assert_int_equal(resp.status, 500);
    assert_string_equal(resp.body, "quotas not loaded yet\n");
    sl_quota_tree *t;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    sl_quota_snap *unloaded;
    assert_int_equal(sl_quota_snap_new(t, false, 0, 0, &unloaded), 0);
    sl_levee_attempt(&f->cfg, unloaded, f->engine, &ok, T0, &resp);
    assert_int_equal(resp.status, 500);
    sl_quota_snap_unref(unloaded);
}

static void test_headers_on_accept_and_names(void **state)
{
    fixture *f = *state;
    f->cfg.headers_on_accept = true;
    quotas(f, (const char *const[]){"limit/key_default={\"rate\":2.5,\"burst\":3}", NULL});
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    /* 2.5/s = 5 per 2 s; 3 more may pass now; full again in 400 ms -> t=1 */
    assert_header("RateLimit-Policy", "\"api\";q=5;w=2;sluice-burst=3");
    assert_header("RateLimit", "\"api\";r=3;t=1");
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    assert_header("RateLimit", "\"api\";r=2;t=1");

    /* names are sf-strings: quotes and backslashes escaped, other bytes replaced */
    assert_int_equal(attempt(f, "a\"b\\c\x01\xff", NULL, NULL), 200);
    assert_header("RateLimit", "\"a\\\"b\\\\c??\";r=3;t=1");
    /* a very long name is cut in the headers */
    char big[1000];
    memset(big, 'n', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(attempt(f, big, NULL, NULL), 200);
    const char *v = header("RateLimit");
    assert_non_null(v);
    assert_true(strlen(v) < SL_LEVEE_HEADER_NAME_MAX + 20);
    assert_true(resp.quota_len <= SL_LEVEE_HEADER_NAME_MAX);
}

/* A quota changed in etcd takes effect on the next request, on the same bucket. */
static void test_quota_change(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key/api/quota={\"rate\":1,\"burst\":0}", NULL});
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
    assert_int_equal(resp.retry_after_ms, 1000);
    /* raised to 10/s: the time already scheduled (TAT, 1 s on) stays, then one every 100 ms */
    quotas(f, (const char *const[]){"limit/key/api/quota={\"rate\":10,\"burst\":0}", NULL});
    sl_clock_advance(&f->clock, 999);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
    assert_int_equal(resp.retry_after_ms, 1);
    sl_clock_advance(&f->clock, 1);
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    sl_clock_advance(&f->clock, 99);
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);
    sl_clock_advance(&f->clock, 1);
    assert_int_equal(attempt(f, "api", NULL, NULL), 200);
    /* removed: the no-quota mode decides */
    quotas(f, (const char *const[]){NULL});
    f->cfg.no_quota = SL_LEVEE_NO_QUOTA_ERROR;
    assert_int_equal(attempt(f, "api", NULL, NULL), 500);
}

static void test_conversions(void **state)
{
    int64_t l, d;
    sl_quota q = {.rate = 10};
    sl_levee_gcra_params(&q, &l, &d);
    assert_true(l == 10 && d == 1000);
    q.rate = 2.5;
    sl_levee_gcra_params(&q, &l, &d);
    assert_true(l == 25 && d == 10000);
    q.rate = 1100.0 * 1.1 / 1.1; /* binary noise stays whole */
    sl_levee_gcra_params(&q, &l, &d);
    assert_true(l == 1100 && d == 1000);
    q.rate = 1000.0 / 3; /* 333.33..: the nearest at a millionth */
    sl_levee_gcra_params(&q, &l, &d);
    assert_true(l == 333333333 && d == 1000000000);
    q.rate = 0;
    sl_levee_gcra_params(&q, &l, &d);
    assert_int_equal(l, 0);
    q.rate = 1e-9;
    sl_levee_gcra_params(&q, &l, &d);
    assert_true(l == 1 && d == 1000000000);

    int64_t pq, pw;
    sl_levee_policy_window(10, &pq, &pw);
    assert_true(pq == 10 && pw == 1);
    sl_levee_policy_window(0.5, &pq, &pw);
    assert_true(pq == 1 && pw == 2);
    sl_levee_policy_window(1.0 / 3, &pq, &pw);
    assert_true(pq == 1 && pw == 3);
    sl_levee_policy_window(0.001, &pq, &pw);
    assert_true(pq == 1 && pw == 1000);
    sl_levee_policy_window(0.0001, &pq, &pw);
    assert_true(pq == 1 && pw == 10000);
    sl_levee_policy_window(0, &pq, &pw);
    assert_true(pq == 0 && pw == 1);
    assert_string_equal(sl_answer_outcome_name(SL_ANSWER_REJECTED), "rejected");
}

static int attempt_delay(fixture *f, const char *res, const char *max_delay)
{
    sl_levee_request rq = {.resource = res, .resource_len = strlen(res), .max_delay = max_delay,
                           .max_delay_len = strlen(max_delay)};
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, sl_clock_now_ms(&f->clock), &resp);
    return resp.status;
}

/* X-Max-Delay: rate 10/s, burst 0. The first goes at once; the next ones wait 100, 200 ms (their
 * slots reserved, X-Delay-Ms); one that would wait longer than asked is a 429 that reserved
 * nothing; a bad value is a 400; the node's max-delay cuts a larger ask. */
static void test_max_delay(void **state)
{
    fixture *f = *state;
    quotas(f, (const char *const[]){"limit/key/api/quota={\"rate\":10,\"burst\":0}", NULL});
    assert_int_equal(attempt_delay(f, "api", "250ms"), 200);
    assert_null(header("X-Delay-Ms"));
    assert_int_equal(attempt_delay(f, "api", "250ms"), 200);
    assert_header("X-Delay-Ms", "100");
    assert_int_equal(attempt_delay(f, "api", "250"), 200);
    assert_header("X-Delay-Ms", "200");
    assert_int_equal(attempt_delay(f, "api", "250ms"), 429); /* would wait 300 */
    assert_null(header("X-Delay-Ms"));
    assert_int_equal(attempt(f, "api", NULL, NULL), 429);     /* no delay asked */
    sl_clock_advance(&f->clock, 50);
    assert_int_equal(attempt_delay(f, "api", "1s"), 200);     /* slot 3 at 300: 250 from now */
    assert_header("X-Delay-Ms", "250");
    assert_int_equal(attempt_delay(f, "api", "soon"), 400);
    assert_int_equal(attempt_delay(f, "api", "-5"), 400);
    f->cfg.max_delay_ms = 100;
    assert_int_equal(attempt_delay(f, "api", "10s"), 429);    /* cut to 100 ms: slot 4 is 350 away */
    f->cfg.max_delay_ms = 0;
    assert_int_equal(attempt_delay(f, "api", "10s"), 429);
}

/* The two-step decision of a store (sl_levee_plan_begin / _done, as node/service.c runs it over
 * the Redis store) against sl_levee_decide: a second real engine stands for the store, deciding
 * each round's items; every answer must be the same, header by header. Returns the status. */
static sl_answer store_resp;

static int both(fixture *f, sl_engine *store, const char *res, const char *method,
                const char *max_delay)
{
    sl_levee_request rq = {.resource = res, .resource_len = res ? strlen(res) : 0,
                           .method = method, .method_len = method ? strlen(method) : 0,
                           .max_delay = max_delay,
                           .max_delay_len = max_delay ? strlen(max_delay) : 0};
    int64_t now = sl_clock_now_ms(&f->clock);
    sl_levee_attempt(&f->cfg, f->snap, f->engine, &rq, now, &resp);

    sl_batch b;
    sl_batch_init(&b, 0);
    sl_levee_plan *plan;
    sl_answer *a = &store_resp;
    sl_answer_reset(a);
    int rounds = 0;
    if (sl_levee_plan_begin(&f->cfg, f->snap, &rq, now, &b, &plan, a)) {
        do {
            assert_true(++rounds <= 2);
            for (size_t i = 0; i < b.n; i++)
                if (!b.answered[i])
                    sl_engine_decide(store, &b.reqs[i], &b.resps[i], now);
            sl_answer_reset(a);
        } while (sl_levee_plan_done(&f->cfg, plan, &rq, now, &b, a));
    }
    assert_int_equal(a->status, resp.status);
    assert_int_equal(a->outcome, resp.outcome);
    assert_int_equal(a->retry_after_ms, resp.retry_after_ms);
    assert_int_equal(a->n_quotas, resp.n_quotas);
    assert_int_equal(a->level, resp.level);
    assert_int_equal(a->quota_len, resp.quota_len);
    if (a->quota_len)
        assert_memory_equal(a->quota, resp.quota, a->quota_len);
    assert_int_equal(a->body_len, resp.body_len);
    if (a->body_len)
        assert_memory_equal(a->body, resp.body, a->body_len);
    assert_int_equal(a->n_headers, resp.n_headers);
    for (size_t i = 0; i < a->n_headers; i++) {
        assert_string_equal(a->headers[i].name, resp.headers[i].name);
        assert_int_equal(a->headers[i].value_len, resp.headers[i].value_len);
        assert_memory_equal(a->headers[i].value, resp.headers[i].value, a->headers[i].value_len);
    }
    sl_batch_free(&b);
    return resp.status;
}

static void test_store_steps_answer_as_the_engine(void **state)
{
    fixture *f = *state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 2;
    sl_engine *store;
    assert_int_equal(sl_engine_new(&ec, &store), 0);
    f->cfg.headers_on_accept = true;
    quotas(f, (const char *const[]){
        "limit/key/api/quota={\"rate\":10,\"burst\":3}",
        "limit/key/api/sublimit/GET={\"rate\":10,\"burst\":1}",
        "limit/key/zero/quota={\"rate\":0}",
        "limit/key/subzero/quota={\"rate\":5,\"burst\":1}",
        "limit/key/subzero/sublimit/PUT={\"rate\":0}",
        "limit/key/slow/quota={\"rate\":10,\"burst\":0}", NULL});
    /* the sub quota rejects: the main quota's hit goes back (a second round) */
    assert_int_equal(both(f, store, "api", "GET", NULL), 200);
    assert_int_equal(both(f, store, "api", "GET", NULL), 200);
    assert_int_equal(both(f, store, "api", "GET", NULL), 429);
    assert_int_equal(both(f, store, "api", "POST", NULL), 200);
    assert_int_equal(both(f, store, "api", "POST", NULL), 200);
    /* the main quota rejects: the sub quota's hit (taken in the same round) goes back */
    assert_int_equal(both(f, store, "api", "POST", NULL), 429);
    assert_int_equal(both(f, store, "api", "GET", NULL), 429);
    sl_clock_advance(&f->clock, 100); /* one slot back in each bucket */
    assert_int_equal(both(f, store, "api", "GET", NULL), 200);
    assert_int_equal(both(f, store, "api", "GET", NULL), 429);
    /* rate 0: main (nothing asked) and sub (main given back) */
    assert_int_equal(both(f, store, "zero", NULL, NULL), 429);
    assert_int_equal(both(f, store, "subzero", "PUT", NULL), 429);
    assert_int_equal(both(f, store, "subzero", "PUT", NULL), 429);
    assert_int_equal(both(f, store, "subzero", "GET", NULL), 200);
    /* X-Max-Delay: the store's delay reservations */
    assert_int_equal(both(f, store, "slow", NULL, "250ms"), 200);
    assert_int_equal(both(f, store, "slow", NULL, "250ms"), 200);
    assert_int_equal(both(f, store, "slow", NULL, "250ms"), 200);
    assert_int_equal(both(f, store, "slow", NULL, "250ms"), 429);
    /* answered without the store: malformed, no quota */
    assert_int_equal(both(f, store, "slow", NULL, "soon"), 400);
    assert_int_equal(both(f, store, NULL, NULL, NULL), 400);
    assert_int_equal(both(f, store, "unknown", NULL, NULL), 500);
    sl_engine_free(store);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gcra_burst_and_interval, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_levels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sublimit_rejects_without_consuming_main, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_main_rejects_without_consuming_sub, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subkey_default_per_resource, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rate_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_quota_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_and_req_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_headers_on_accept_and_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_delay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_steps_answer_as_the_engine, setup, teardown),
        cmocka_unit_test(test_conversions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

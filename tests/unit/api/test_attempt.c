/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Levee's /attempt and /release under protection (api/attempt.c), with a real engine, quota
 * snapshot and switchboard, on a virtual clock: /attempt with X-Concurrency (20 in flight, the
 * 21st 429 with Retry-After, RateLimit headers and a reason; one release frees one slot; the
 * lease id carries the resource; an unreleased lease frees after its duration), the fleet shedder
 * (non-critical calls fill (1 - reserve) * capacity and get 503, critical calls still pass and take
 * no fleet lease), the group size dividing both, leases given back when a later check rejects,
 * priorities (explicit, from X-Method, invalid), the worker shedder (503 by class, never
 * critical), shadow mode and kill switches on each limiter, and the metrics. The routed fleet (one
 * for the cluster): its lease asked of the fleet key's owner (here the engine, as the owner's
 * router would decide it), the whole fleet whatever the group size, the local share with X-Fleet
 * when the owner cannot answer, the give-back of a later rejection, /release giving an owner's
 * lease back, and no fleet step for critical calls or calls without a lease. Rate quotas in a
 * store (--store redis): their items out of sl_attempt_begin / _resume, the answer and the
 * leases' give-back from sl_attempt_store_done. The resource's concurrency limit routed too:
 * its item of the cluster's limit beside the fleet's in one batch, renewal and /release of the
 * owner's lease, the give-back of either when the other rejects, and the fallback share with
 * X-Concurrency-Source: local when the owner cannot answer.
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

#include "api/attempt.h"
#include "api/gubprotect.h"
#include "protect/admin.h"
#include "protect_fixture.h"

static sl_answer resp;

static int attempt_full(fx *f, const char *res, const char *method, const char *prio,
                        bool acquire, const char *req_id)
{
    sl_attempt_req q = {0};
    q.levee.resource = res;
    q.levee.resource_len = res ? strlen(res) : 0;
    q.levee.method = method;
    q.levee.method_len = method ? strlen(method) : 0;
    q.levee.req_id = req_id;
    q.levee.req_id_len = req_id ? strlen(req_id) : 0;
    q.priority = prio;
    q.priority_len = prio ? strlen(prio) : 0;
    q.concurrency = acquire ? "acquire" : NULL;
    q.concurrency_len = acquire ? 7 : 0;
    sl_attempt_decide(f->p, 0, &f->lcfg, f->snap, &q, f->now, &resp);
    return resp.status;
}

static int acquire(fx *f, const char *res, const char *prio)
{
    return attempt_full(f, res, NULL, prio, true, NULL);
}

static const char *header(const char *name)
{
    static char buf[512];
    for (size_t i = 0; i < resp.n_headers; i++)
        if (!strcmp(resp.headers[i].name, name)) {
            snprintf(buf, sizeof buf, "%.*s", (int)resp.headers[i].value_len,
                     resp.headers[i].value);
            return buf;
        }
    return NULL;
}

static void assert_header(const char *name, const char *value)
{
    const char *v = header(name);
    if (!v)
        fail_msg("no %s header", name);
    if (strcmp(v, value))
        fail_msg("%s: '%s', expected '%s'", name, v, value);
}

/* The limiter that rejected: the enum, and the name the metrics and logs give it. */
static void assert_limiter(sl_ladder_limiter lim, const char *name)
{
    assert_int_equal(resp.limiter, lim);
    assert_string_equal(sl_ladder_name(resp.limiter), name);
}

static char *lease(void)
{
    const char *v = header("X-Lease-Id");
    assert_non_null(v);
    return strdup(v);
}

static int release(fx *f, const char *lease_id, const char *res)
{
    sl_attempt_release_req q = {.lease_id = lease_id, .lease_id_len = lease_id ? strlen(lease_id) : 0,
                                .resource = res, .resource_len = res ? strlen(res) : 0};
    sl_attempt_release(f->p, &q, f->now, &resp);
    return resp.status;
}

static bool body_has(const char *s)
{
    return resp.body && strstr(resp.body, s);
}

static void test_twenty_in_flight(void **state)
{
    fx *f = *state;
    char *ids[20];
    for (int i = 0; i < 20; i++) {
        assert_int_equal(acquire(f, "search", "critical"), 200);
        ids[i] = lease();
        /* "<conc>.<fleet>.<resource>": no fleet lease for a critical call */
        assert_int_equal(strlen(ids[i]), 16 + 1 + 16 + 1 + 6);
        assert_memory_equal(ids[i] + 17, "0000000000000000.search", 23);
        f->now += 10;
    }
    assert_int_equal(acquire(f, "search", "critical"), 429);
    assert_int_equal(resp.outcome, SL_ANSWER_REJECTED);
    assert_limiter(SL_LADDER_CONC, "concurrency");
    assert_header("Retry-After", "10"); /* the first lease frees 9.8 s from now */
    assert_header("RateLimit-Policy", "\"concurrency\";q=20");
    assert_header("RateLimit", "\"concurrency\";r=0;t=10");
    assert_true(body_has("concurrency limit reached: 20 calls in flight for \"search\""));
    assert_string_equal(resp.content_type, "text/plain; charset=utf-8");
    assert_int_equal(resp.grpc_code, 8);

    /* one release frees one slot */
    assert_int_equal(release(f, ids[7], NULL), 200);
    assert_int_equal(acquire(f, "search", "critical"), 200);
    char *again = lease();
    assert_int_equal(acquire(f, "search", "critical"), 429);
    /* a lease is released once */
    assert_int_equal(release(f, ids[7], NULL), 404);
    assert_int_equal(resp.outcome, SL_ANSWER_NOT_FOUND);
    assert_true(body_has("lease not found"));
    /* another resource is another limit */
    assert_int_equal(acquire(f, "other", "critical"), 200);

    /* an unreleased lease frees after its duration (10 s) */
    f->now = T0 + 10000;
    assert_int_equal(acquire(f, "search", "critical"), 200); /* ids[0] expired */
    assert_int_equal(acquire(f, "search", "critical"), 429);
    assert_int_equal(release(f, ids[0], NULL), 404);
    for (int i = 0; i < 20; i++)
        free(ids[i]);
    free(again);
}

static void test_release_forms(void **state)
{
    fx *f = *state;
    /* a resource that does not fit the lease id: /release needs X-Resource */
    char big[200];
    memset(big, 'r', sizeof big - 1);
    big[sizeof big - 1] = 0;
    assert_int_equal(acquire(f, big, "critical"), 200);
    char *id = lease();
    assert_int_equal(strlen(id), 33);
    assert_int_equal(release(f, id, NULL), 400);
    assert_true(body_has("X-Resource is required"));
    assert_int_equal(release(f, id, "someone-else"), 404);
    assert_int_equal(release(f, id, big), 200);
    free(id);
    /* odd characters travel percent-encoded */
    assert_int_equal(acquire(f, "a b.c%d", "critical"), 200);
    id = lease();
    assert_non_null(strstr(id, ".a%20b%2Ec%25d"));
    assert_int_equal(release(f, id, NULL), 200);
    free(id);
    /* malformed ids */
    assert_int_equal(release(f, NULL, NULL), 400);
    assert_int_equal(release(f, "xyz", NULL), 400);
    assert_int_equal(release(f, "0000000000000000.0000000000000000", NULL), 400);
    assert_int_equal(release(f, "00000000000000010000000000000000", NULL), 400);
    assert_int_equal(release(f, "0000000000000001.0000000000000000.a%2", NULL), 400);
    assert_int_equal(release(f, "0000000000000001.0000000000000000.a b", NULL), 400);
    /* X-Req-Id is echoed */
    sl_attempt_release_req q = {.lease_id = "0000000000000001", .lease_id_len = 16,
                                .resource = "x", .resource_len = 1, .req_id = "r-9",
                                .req_id_len = 3};
    sl_attempt_release(f->p, &q, f->now, &resp);
    assert_int_equal(resp.status, 404);
    assert_header("X-Req-Id", "r-9");
}

static void test_fleet(void **state)
{
    fx *f = *state;
    /* capacity 10, reserve 0.2: 8 non-critical calls in flight */
    char *ids[8];
    for (int i = 0; i < 8; i++) {
        char res[16];
        snprintf(res, sizeof res, "r%d", i);
        assert_int_equal(acquire(f, res, i % 2 ? "get" : "post"), 200);
        ids[i] = lease();
        assert_true(memcmp(ids[i] + 17, "0000000000000000", 16) != 0);
    }
    assert_int_equal(acquire(f, "r9", "test"), 503);
    assert_int_equal(resp.outcome, SL_ANSWER_SHED);
    assert_limiter(SL_LADDER_FLEET, "fleet");
    assert_header("RateLimit-Policy", "\"fleet\";q=8");
    assert_header("Retry-After", "30");
    assert_true(body_has("reserved for critical calls"));
    assert_int_equal(resp.grpc_code, 14);
    /* critical calls still pass, as many as their own limits allow */
    for (int i = 0; i < 15; i++)
        assert_int_equal(acquire(f, "crit", "critical"), 200);
    /* without X-Priority, X-Method says: GET is a get */
    assert_int_equal(attempt_full(f, "r9", "GET", NULL, true, NULL), 503);
    /* a release frees a non-critical slot */
    assert_int_equal(release(f, ids[3], NULL), 200);
    assert_int_equal(acquire(f, "r9", "get"), 200);
    assert_int_equal(acquire(f, "r10", "get"), 503);
    /* a call without a lease is not counted by the fleet */
    assert_int_equal(attempt_full(f, "r11", NULL, "get", false, NULL), 200);
    assert_null(header("X-Lease-Id"));
    for (int i = 0; i < 8; i++)
        free(ids[i]);
}

static void test_group_size(void **state)
{
    fx *f = *state;
    /* DF 2 halves the fleet (10 -> 5, 80 % -> 4) and the resource's limit (1 -> 1, at least 1) */
    const char *kv[] = {"factor/default=2", NULL};
    quotas(f, kv);
    for (int i = 0; i < 4; i++)
        assert_int_equal(acquire(f, "many", "get"), 200);
    assert_int_equal(acquire(f, "many", "get"), 503);
    assert_header("RateLimit-Policy", "\"fleet\";q=4");
    assert_int_equal(acquire(f, "one", "critical"), 200);
    assert_int_equal(acquire(f, "one", "critical"), 429);
    assert_header("RateLimit-Policy", "\"concurrency\";q=1");
}

static void test_give_back(void **state)
{
    fx *f = *state;
    /* "one" holds 1 lease; its rate quota blocks: the leases taken are given back */
    const char *kv[] = {"limit/key/one/quota={\"rate\":0}", NULL};
    quotas(f, kv);
    assert_int_equal(acquire(f, "one", "get"), 429);
    assert_limiter(SL_LADDER_RATE, "rate");
    assert_true(body_has("rate limit exceeded for \"one\""));
    assert_non_null(header("Retry-After"));
    assert_non_null(header("RateLimit-Policy"));
    for (int i = 0; i < 20; i++) /* the fleet slot came back each time too */
        assert_int_equal(acquire(f, "one", "get"), 429);
    /* with the rate limiter switched off, the slot is free: nothing leaked */
    set_switch(f, "levee", SL_KILLSWITCH_KILLED);
    assert_int_equal(acquire(f, "one", "get"), 200);
    assert_header("X-Sluice-Killswitch", "rate");
    assert_int_equal(acquire(f, "one", "get"), 429);
    assert_limiter(SL_LADDER_CONC, "concurrency");
}

static void test_priorities(void **state)
{
    fx *f = *state;
    assert_int_equal(attempt_full(f, "x", NULL, "urgent", false, "id-1"), 400);
    assert_int_equal(resp.outcome, SL_ANSWER_MALFORMED);
    assert_true(body_has("X-Priority must be"));
    assert_header("X-Req-Id", "id-1");
    sl_attempt_req q = {0};
    q.levee.resource = "x";
    q.levee.resource_len = 1;
    q.concurrency = "hold";
    q.concurrency_len = 4;
    sl_attempt_decide(f->p, 0, &f->lcfg, f->snap, &q, f->now, &resp);
    assert_int_equal(resp.status, 400);
    assert_int_equal(attempt_full(f, NULL, NULL, NULL, false, NULL), 400);
    assert_true(body_has("missing X-Resource"));
    /* the levee answer's own headers come through, once */
    assert_int_equal(attempt_full(f, "x", NULL, NULL, false, "id-2"), 200);
    assert_header("X-Req-Id", "id-2");
    int n = 0;
    for (size_t i = 0; i < resp.n_headers; i++)
        n += !strcmp(resp.headers[i].name, "X-Req-Id");
    assert_int_equal(n, 1);
}

static void test_worker_shedder(void **state)
{
    fx *f = *state;
    /* overload: raise_after 0, step 0.5 -> level 1.5 after three samples above target */
    for (int i = 0; i < 3; i++)
        sl_protect_observe(f->p, 0, 1000 + i * 100, 0.99);
    assert_true(sl_protect_shed_level(f->p, 0) == 1.5);
    int shed[SL_PRIORITY_COUNT] = {0};
    static const char *const pn[] = {"critical", "post", "get", "test"};
    for (int p = 0; p < SL_PRIORITY_COUNT; p++)
        for (int i = 0; i < 100; i++)
            shed[p] += attempt_full(f, "x", NULL, pn[p], false, NULL) == 503;
    assert_int_equal(shed[SL_PRIORITY_CRITICAL], 0);
    assert_int_equal(shed[SL_PRIORITY_POST], 0);
    assert_in_range(shed[SL_PRIORITY_GET], 48, 52);
    assert_int_equal(shed[SL_PRIORITY_TEST], 100);
    assert_int_equal(attempt_full(f, "x", NULL, "test", false, NULL), 503);
    assert_limiter(SL_LADDER_SHED, "shed");
    assert_header("Retry-After", "5");
    assert_header("RateLimit", "\"shed\";r=0;t=5");
    assert_true(body_has("sluiced is overloaded and sheds test traffic (test 100%, get 50%)"));
    /* shadow: admitted and said */
    set_switch(f, "shed", SL_KILLSWITCH_SHADOW);
    assert_int_equal(attempt_full(f, "x", NULL, "test", false, NULL), 200);
    assert_header("X-Sluice-Shadow", "shed");
    /* killed: admitted and said */
    set_switch(f, "shed", SL_KILLSWITCH_KILLED);
    assert_int_equal(attempt_full(f, "x", NULL, "test", false, NULL), 200);
    assert_header("X-Sluice-Killswitch", "shed");
    set_switch(f, "shed", SL_KILLSWITCH_ENFORCE);
    /* the load goes: level falls (lower_after 5 s, step 0.1) */
    for (int i = 0; i < 200; i++)
        sl_protect_observe(f->p, 0, 2000 + i * 1000, 0.0);
    assert_true(sl_protect_shed_level(f->p, 0) == 0);
    assert_int_equal(attempt_full(f, "x", NULL, "test", false, NULL), 200);
}

static void test_shadow_rate(void **state)
{
    fx *f = *state;
    const char *kv[] = {"limit/key/api/quota={\"rate\":1,\"burst\":0}", NULL};
    quotas(f, kv);
    assert_int_equal(attempt_full(f, "api", NULL, NULL, false, NULL), 200);
    assert_int_equal(attempt_full(f, "api", NULL, NULL, false, NULL), 429);
    set_switch(f, "api", SL_KILLSWITCH_SHADOW); /* by quota name */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(attempt_full(f, "api", NULL, NULL, false, "q-1"), 200);
        assert_header("X-Sluice-Shadow", "rate");
    }
    set_switch(f, "api", SL_KILLSWITCH_ENFORCE);
    assert_int_equal(attempt_full(f, "api", NULL, NULL, false, NULL), 429);
    set_switch(f, "levee", SL_KILLSWITCH_SHADOW); /* every rate quota */
    assert_int_equal(attempt_full(f, "api", NULL, NULL, false, NULL), 200);
    set_switch(f, "levee", SL_KILLSWITCH_ENFORCE);
    set_switch(f, "*", SL_KILLSWITCH_SHADOW); /* everything */
    assert_int_equal(attempt_full(f, "api", NULL, NULL, false, NULL), 200);
    assert_header("X-Sluice-Shadow", "rate");
    /* the would-reject log line names the request */
    fflush(f->logf);
    rewind(f->logf);
    char line[1024];
    bool seen = false;
    while (fgets(line, sizeof line, f->logf))
        seen |= strstr(line, "would_reject limiter=rate req_id=q-1 resource=api") != NULL;
    assert_true(seen);
    /* and the metrics count it */
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(f->metrics, &txt, &len), 0);
    assert_non_null(strstr(txt, "sluice_protect_events_total{limiter=\"rate\",event=\"would_reject\"} 7"));
    assert_non_null(strstr(txt, "sluice_protect_events_total{limiter=\"rate\",event=\"rejected\"} 2"));
    free(txt);
}

static void test_kill_switches(void **state)
{
    fx *f = *state;
    /* the concurrency limiter off: no lease, no limit */
    set_switch(f, "concurrency", SL_KILLSWITCH_KILLED);
    for (int i = 0; i < 5; i++)
        assert_int_equal(acquire(f, "one", "critical"), 200);
    assert_null(header("X-Lease-Id"));
    assert_header("X-Sluice-Killswitch", "concurrency");
    set_switch(f, "concurrency", SL_KILLSWITCH_ENFORCE);
    /* the fleet off: non-critical calls beyond the fleet pass, without fleet leases */
    set_switch(f, "fleet", SL_KILLSWITCH_KILLED);
    for (int i = 0; i < 12; i++)
        assert_int_equal(acquire(f, "many", "test"), 200);
    set_switch(f, "fleet", SL_KILLSWITCH_ENFORCE);
    /* everything off */
    set_switch(f, "*", SL_KILLSWITCH_KILLED);
    const char *kv[] = {"limit/key/api/quota={\"rate\":0}", NULL};
    quotas(f, kv);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(attempt_full(f, "api", NULL, "test", true, NULL), 200);
        assert_header("X-Sluice-Killswitch", "*");
    }
    set_switch(f, "*", SL_KILLSWITCH_ENFORCE);
    assert_int_equal(attempt_full(f, "api", NULL, "test", false, NULL), 429);
}

static void test_metrics_and_config(void **state)
{
    fx *f = *state;
    assert_int_equal(acquire(f, "m", "get"), 200);
    char *id = lease();
    assert_int_equal(release(f, id, NULL), 200);
    assert_int_equal(release(f, id, NULL), 404);
    free(id);
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(f->metrics, &txt, &len), 0);
    assert_non_null(strstr(txt, "sluice_leases_total{event=\"acquired\"} 2")); /* conc + fleet */
    assert_non_null(strstr(txt, "sluice_leases_total{event=\"released\"} 2"));
    assert_non_null(strstr(txt, "sluice_leases_total{event=\"not_found\"} 2"));
    assert_non_null(strstr(txt, "sluice_shed_level{worker=\"0\"} 0"));
    assert_non_null(strstr(txt, "sluice_shed_calls_total{priority=\"get\",outcome=\"admitted\"} 1"));
    free(txt);

    sl_protect_config pc;
    sl_protect_config_default(&pc);
    sl_protect *p = NULL;
    assert_int_equal(sl_protect_new(&pc, &p), -EINVAL); /* no engine */
    pc.engine = f->engine;
    pc.shed_opts.low = 2;
    assert_int_equal(sl_protect_new(&pc, &p), -EINVAL);
    pc.shed_opts.low = 0.5;
    assert_int_equal(sl_protect_new(&pc, &p), 0);
    /* without a switchboard nothing is switched, and the admin call says so */
    sl_admin_response a;
    sl_admin_handle(p, "GET", NULL, 0, &a);
    assert_int_equal(a.status, 503);
    free(a.body);
    sl_protect_free(p);
    assert_string_equal(sl_answer_outcome_name(SL_ANSWER_SHED), "shed");
}

static int renew(fx *f, const char *lease_id, const char *res)
{
    sl_attempt_req q = {0};
    q.levee.resource = res;
    q.levee.resource_len = res ? strlen(res) : 0;
    q.concurrency = "renew";
    q.concurrency_len = 5;
    q.lease_id = lease_id;
    q.lease_id_len = lease_id ? strlen(lease_id) : 0;
    sl_attempt_decide(f->p, 0, &f->lcfg, f->snap, &q, f->now, &resp);
    return resp.status;
}

/* X-Concurrency: renew keeps a lease past its duration (10 s for "search"): renewed every 8 s it
 * still holds its slot at 24 s; unknown, released or expired leases are 404, malformed 400. */
static void test_renew(void **state)
{
    fx *f = *state;
    char *ids[20];
    for (int i = 0; i < 20; i++) {
        assert_int_equal(acquire(f, "search", "critical"), 200);
        ids[i] = lease();
    }
    for (int k = 0; k < 3; k++) {
        f->now += 8000;
        assert_int_equal(renew(f, ids[3], NULL), 200); /* the resource is in the token */
    }
    /* t = 24 s: the other 19 expired at 10 s, ids[3] holds until 34 s */
    for (int i = 0; i < 19; i++)
        assert_int_equal(acquire(f, "search", "critical"), 200);
    assert_int_equal(acquire(f, "search", "critical"), 429);
    assert_int_equal(renew(f, ids[0], NULL), 404);
    assert_true(body_has("lease not found"));
    assert_int_equal(renew(f, NULL, "search"), 400);
    assert_int_equal(renew(f, "xyz", "search"), 400);
    assert_int_equal(release(f, ids[3], NULL), 200);
    assert_int_equal(renew(f, ids[3], NULL), 404);
    for (int i = 0; i < 20; i++)
        free(ids[i]);
}

/* ---- the routed fleet ---------------------------------------------------------------------- */

static sl_attempt_req acquire_req(const char *res, const char *prio)
{
    sl_attempt_req q = {0};
    q.levee.resource = res;
    q.levee.resource_len = strlen(res);
    q.priority = prio;
    q.priority_len = strlen(prio);
    q.concurrency = "acquire";
    q.concurrency_len = 7;
    return q;
}

/* A routed /attempt: begin; when it needs the fleet, the fleet item decided by the engine (the
 * owner) or failed (`down`: the owner unreachable), then resume. *back: the give-back. */
static int routed(fx *f, const char *res, const char *prio, bool down, int nodes, uint64_t *back)
{
    sl_attempt_req q = acquire_req(res, prio);
    sl_attempt_fleet st = {0};
    *back = 0;
    if (!sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp))
        return resp.status;
    sl_batch fb;
    sl_batch_init(&fb, 0);
    assert_int_equal(sl_gubprotect_fleet_item(f->p, &fb, 1, st.limit, st.duration_ms, 0), 0);
    assert_int_equal(fb.n, 1);
    assert_int_equal(fb.reqs[0].algorithm, SL_CONCURRENCY);
    assert_int_equal(fb.reqs[0].limit, 8); /* the cluster's fleet, not a node's share */
    if (down)
        fb.resps[0] = (sl_response){.error = "peer unreachable"};
    else
        sl_engine_decide(f->engine, &fb.reqs[0], &fb.resps[0], f->now);
    sl_response r;
    bool local = sl_gubprotect_fleet_taken(f->p, &fb, 0, &st.limit, st.duration_ms, nodes,
                                           f->now, &r);
    assert_int_equal(local, down);
    sl_attempt_resume(f->p, 0, &f->lcfg, f->snap, &q, &st, &r, local, f->now, &resp, back);
    sl_batch_free(&fb);
    return resp.status;
}

/* Route a fleet give-back or release batch to the owner (the engine). */
static int route_release(fx *f, sl_batch *g)
{
    sl_engine_decide(f->engine, &g->reqs[0], &g->resps[0], f->now);
    return sl_gubprotect_fleet_released(f->p, &g->resps[0]);
}

static void test_routed_fleet(void **state)
{
    fx *f = *state;
    uint64_t back;
    /* the group size divides a node's own fleet, not the cluster's one count */
    const char *kv[] = {"factor/default=2", NULL};
    quotas(f, kv);
    char *ids[8];
    for (int i = 0; i < 8; i++) {
        assert_int_equal(routed(f, "many", "get", false, 2, &back), 200);
        assert_int_equal(back, 0);
        assert_null(header("X-Fleet"));
        ids[i] = lease();
        assert_true(memcmp(ids[i] + 17, "0000000000000000", 16) != 0);
    }
    assert_int_equal(routed(f, "many", "post", false, 2, &back), 503);
    assert_int_equal(resp.outcome, SL_ANSWER_SHED);
    assert_limiter(SL_LADDER_FLEET, "fleet");
    assert_header("RateLimit-Policy", "\"fleet\";q=8");
    assert_true(body_has("reserved for critical calls: 8"));
    /* critical calls and calls without a lease have no fleet step: answered at once */
    sl_attempt_req q = acquire_req("many", "critical");
    sl_attempt_fleet st = {.limit = -7};
    assert_int_equal(sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(st.limit, -7);
    q.concurrency = NULL;
    q.priority = "get";
    q.priority_len = 3;
    assert_int_equal(sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_null(header("X-Lease-Id"));

    /* /release: the owner's fleet lease is the caller's to give back */
    sl_attempt_release_req rr = {.lease_id = ids[0], .lease_id_len = strlen(ids[0]),
                                 .req_id = "r-1", .req_id_len = 3};
    int conc_rc;
    uint64_t fl = sl_attempt_release_begin(f->p, &rr, f->now, true, &conc_rc, &resp);
    assert_true(fl != 0);
    assert_int_equal(conc_rc, 1);
    sl_batch g;
    sl_batch_init(&g, 0);
    assert_int_equal(sl_gubprotect_fleet_item(f->p, &g, -1, 0, 1, fl), 0);
    int frc = route_release(f, &g);
    assert_int_equal(frc, 1);
    sl_attempt_release_answer(&rr, conc_rc, frc, &resp);
    assert_int_equal(resp.status, 200);
    assert_header("X-Req-Id", "r-1");
    sl_batch_free(&g);
    assert_int_equal(routed(f, "many", "get", false, 2, &back), 200);
    assert_int_equal(routed(f, "many", "get", false, 2, &back), 503);
    /* twice: not found in both */
    sl_attempt_release_answer(&rr, 0, 0, &resp);
    assert_int_equal(resp.status, 404);
    for (int i = 0; i < 8; i++)
        free(ids[i]);
}

static void test_routed_fleet_give_back_and_fallback(void **state)
{
    fx *f = *state;
    uint64_t back;
    /* "one" holds one lease: a second call's fleet lease goes back to the owner */
    assert_int_equal(acquire(f, "one", "critical"), 200);
    assert_int_equal(routed(f, "one", "get", false, 2, &back), 429);
    assert_limiter(SL_LADDER_CONC, "concurrency");
    assert_true(back != 0);
    sl_batch *g = sl_gubprotect_fleet_release(f->p, back, f->now);
    assert_non_null(g);
    assert_int_equal(route_release(f, g), 1);
    sl_gubprotect_giveback_done(f->p, g);
    for (int i = 0; i < 8; i++) /* nothing leaked: the whole fleet is free */
        assert_int_equal(routed(f, "many", "get", false, 2, &back), 200);

    /* the owner unreachable: this node's share of 2, floor(8 / 2) = 4, said with X-Fleet */
    char *ids[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(routed(f, "many", "get", true, 2, &back), 200);
        assert_header("X-Fleet", "local");
        ids[i] = lease();
    }
    assert_int_equal(routed(f, "many", "get", true, 2, &back), 503);
    assert_header("X-Fleet", "local");
    assert_header("RateLimit-Policy", "\"fleet\";q=4");
    /* a lease of the share goes back here: nothing to route */
    sl_attempt_release_req rr = {.lease_id = ids[0], .lease_id_len = strlen(ids[0])};
    int conc_rc;
    assert_int_equal(sl_attempt_release_begin(f->p, &rr, f->now, true, &conc_rc, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(routed(f, "many", "get", true, 2, &back), 200);
    /* a rejected call's share lease is given back here too (no batch to route) */
    rr = (sl_attempt_release_req){.lease_id = ids[1], .lease_id_len = strlen(ids[1])};
    assert_int_equal(sl_attempt_release_begin(f->p, &rr, f->now, true, &conc_rc, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(routed(f, "one", "get", true, 2, &back), 429);
    assert_true(back != 0);
    assert_null(sl_gubprotect_fleet_release(f->p, back, f->now));
    assert_int_equal(routed(f, "many", "get", true, 2, &back), 200);
    assert_int_equal(routed(f, "many", "get", true, 2, &back), 503);
    for (int i = 0; i < 4; i++)
        free(ids[i]);
}

/* An /attempt whose rate quotas a store decides (st.store: node/service.c's --store redis),
 * `store` the store's engine; the fleet, when asked, is routed to the owner (the fixture's
 * engine). Returns the status. */
static int in_store(fx *f, sl_engine *store, const char *res, const char *prio, bool acq,
                    int *rounds)
{
    sl_attempt_req q = {0};
    q.levee.resource = res;
    q.levee.resource_len = strlen(res);
    q.levee.req_id = "s-1";
    q.levee.req_id_len = 3;
    q.priority = prio;
    q.priority_len = strlen(prio);
    q.concurrency = acq ? "acquire" : NULL;
    q.concurrency_len = acq ? 7 : 0;
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_attempt_fleet st;
    memset(&st, 0x55, sizeof st); /* as node/service.c: only .store and .leases are set by the
                                     caller (.leases NULL: the concurrency lease decided here) */
    st.store = &b;
    st.leases = NULL;
    uint64_t back = 0;
    *rounds = 0;
    int rc = sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp);
    if (rc == 1) { /* the fleet: routed through the same batch, then the rate quotas */
        assert_int_equal(sl_gubprotect_fleet_item(f->p, &b, 1, st.limit, st.duration_ms, 0), 0);
        sl_engine_decide(f->engine, &b.reqs[0], &b.resps[0], f->now);
        sl_response r;
        bool local = sl_gubprotect_fleet_taken(f->p, &b, 0, &st.limit, st.duration_ms, 1,
                                               f->now, &r);
        rc = sl_attempt_resume(f->p, 0, &f->lcfg, f->snap, &q, &st, &r, local, f->now, &resp,
                               &back);
    }
    if (rc == SL_ATTEMPT_STORE) {
        sl_answer_reset(&resp); /* the answer is made again when the store answered */
        do {
            ++*rounds;
            for (size_t i = 0; i < b.n; i++) {
                if (b.answered[i])
                    continue;
                assert_int_equal(b.reqs[i].algorithm, SL_GCRA);
                sl_engine_decide(store, &b.reqs[i], &b.resps[i], f->now);
            }
        } while (sl_attempt_store_done(f->p, 0, &f->lcfg, &q, &st, f->now, &resp, &back));
    }
    if (back) { /* a later rejection gives the routed fleet lease back to the owner */
        sl_batch *g = sl_gubprotect_fleet_release(f->p, back, f->now);
        assert_non_null(g);
        sl_engine_decide(f->engine, &g->reqs[0], &g->resps[0], f->now);
        assert_int_equal(sl_gubprotect_fleet_released(f->p, &g->resps[0]), 1);
        sl_batch_free(g);
        free(g);
    }
    sl_batch_free(&b);
    return resp.status;
}

/* The resource's concurrency limit routed too (a cluster or a store: st.leases set): one batch
 * with the fleet's item and the resource's, decided by the engine as the keys' owner (or failed:
 * `down`), then resume. *st as the call left it (conc_back: the owner's lease to give back). */
static int routed_conc(fx *f, const char *res, const char *prio, bool down, int nodes,
                       sl_batch *fb, sl_attempt_fleet *st, uint64_t *back)
{
    sl_attempt_req q = acquire_req(res, prio);
    memset(st, 0x55, sizeof *st);
    st->store = NULL;
    st->leases = fb;
    st->nodes = nodes;
    *back = 0;
    sl_batch_reset(fb);
    int rc = sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, st, &resp);
    if (!rc)
        return resp.status;
    assert_int_equal(rc, 1);
    assert_int_equal(fb->n, (size_t)(st->fleet_item >= 0) + (size_t)(st->conc_item >= 0));
    for (size_t j = 0; j < fb->n; j++) {
        assert_int_equal(fb->reqs[j].algorithm, SL_CONCURRENCY);
        if (down)
            fb->resps[j] = (sl_response){.error = "peer unreachable"};
        else
            sl_engine_decide(f->engine, &fb->reqs[j], &fb->resps[j], f->now);
    }
    sl_response r;
    bool local = false;
    if (st->fleet_item >= 0)
        local = sl_gubprotect_fleet_taken(f->p, fb, (size_t)st->fleet_item, &st->limit,
                                          st->duration_ms, nodes, f->now, &r);
    assert_int_equal(sl_attempt_resume(f->p, 0, &f->lcfg, f->snap, &q, st,
                                       st->fleet_item >= 0 ? &r : NULL, local, f->now, &resp,
                                       back),
                     0);
    return resp.status;
}

/* A routed give-back or release batch decided by the owner (the engine): released count. */
static int route_all(fx *f, sl_batch *g)
{
    int n = 0;
    for (size_t j = 0; j < g->n; j++) {
        sl_engine_decide(f->engine, &g->reqs[j], &g->resps[j], f->now);
        n += sl_gubprotect_fleet_released(f->p, &g->resps[j]) == 1;
    }
    return n;
}

static void test_routed_concurrency(void **state)
{
    fx *f = *state;
    uint64_t back;
    sl_attempt_fleet st;
    sl_batch fb;
    sl_batch_init(&fb, 0);
    /* the group size divides a node's own limit, not the cluster's one count */
    const char *kv[] = {"factor/default=2", NULL};
    quotas(f, kv);
    char *ids[20];
    for (int i = 0; i < 20; i++) {
        assert_int_equal(routed_conc(f, "search", "critical", false, 2, &fb, &st, &back), 200);
        /* a critical call: the resource's item alone, of the cluster's limit */
        assert_int_equal(fb.n, 1);
        assert_int_equal(st.fleet_item, -1);
        assert_int_equal(fb.reqs[0].limit, 20);
        assert_int_equal(fb.reqs[0].name_len, 10);
        assert_memory_equal(fb.reqs[0].name, "levee.conc", 10);
        assert_int_equal(fb.reqs[0].unique_key_len, 6);
        assert_memory_equal(fb.reqs[0].unique_key, "search", 6);
        assert_null(header("X-Concurrency-Source"));
        ids[i] = lease();
        assert_memory_equal(ids[i] + 17, "0000000000000000.search", 23);
    }
    assert_int_equal(routed_conc(f, "search", "critical", false, 2, &fb, &st, &back), 429);
    assert_limiter(SL_LADDER_CONC, "concurrency");
    assert_header("RateLimit-Policy", "\"concurrency\";q=20");
    /* the owner holds them: a node deciding here has none of them */
    sl_response r;
    sl_protect_conc_take(f->p, "search", 6, 20, 10000, f->now, &r);
    assert_int_equal(r.status, SL_OVER_LIMIT);

    /* renewal: the owner's lease, asked of the owner */
    sl_attempt_req q = {.concurrency = "renew", .concurrency_len = 5, .lease_id = ids[3],
                        .lease_id_len = strlen(ids[3])};
    st.leases = &fb;
    sl_batch_reset(&fb);
    assert_int_equal(sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp),
                     SL_ATTEMPT_RENEW);
    assert_int_equal(fb.n, 1);
    assert_int_equal(fb.reqs[0].hits, 0);
    assert_int_equal(fb.reqs[0].duration, 10000);
    sl_engine_decide(f->engine, &fb.reqs[0], &fb.resps[0], f->now);
    sl_attempt_renewed(&q, &st, &resp);
    assert_int_equal(resp.status, 200);

    /* /release: the owner's lease in a batch to route; once */
    sl_attempt_release_req rr = {.lease_id = ids[3], .lease_id_len = strlen(ids[3]),
                                 .req_id = "r-2", .req_id_len = 3};
    int conc_rc;
    for (int k = 0; k < 2; k++) {
        sl_batch_reset(&fb);
        st.leases = &fb;
        assert_int_equal(sl_attempt_release_route(f->p, &rr, f->now, &st, &conc_rc, &resp), 1);
        assert_int_equal(st.fleet_item, -1);
        assert_int_equal(st.conc_item, 0);
        assert_int_equal(fb.reqs[0].hits, -1);
        sl_engine_decide(f->engine, &fb.reqs[0], &fb.resps[0], f->now);
        sl_attempt_release_done(f->p, &rr, &st, conc_rc, &resp);
        assert_int_equal(resp.status, k ? 404 : 200);
        assert_header("X-Req-Id", "r-2");
    }
    /* a renewal of a released lease: not found */
    sl_batch_reset(&fb);
    assert_int_equal(sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp),
                     SL_ATTEMPT_RENEW);
    sl_engine_decide(f->engine, &fb.reqs[0], &fb.resps[0], f->now);
    sl_attempt_renewed(&q, &st, &resp);
    assert_int_equal(resp.status, 404);
    assert_int_equal(routed_conc(f, "search", "critical", false, 2, &fb, &st, &back), 200);
    for (int i = 0; i < 20; i++)
        free(ids[i]);
    sl_batch_free(&fb);
}

static void test_routed_concurrency_with_the_fleet(void **state)
{
    fx *f = *state;
    uint64_t back;
    sl_attempt_fleet st;
    sl_batch fb;
    sl_batch_init(&fb, 0);
    /* a non-critical acquire: the fleet's item and the resource's in one batch */
    assert_int_equal(routed_conc(f, "one", "get", false, 2, &fb, &st, &back), 200);
    assert_int_equal(fb.n, 2);
    assert_int_equal(st.fleet_item, 0);
    assert_int_equal(st.conc_item, 1);
    assert_int_equal(fb.reqs[0].limit, 8);
    assert_int_equal(fb.reqs[1].limit, 1);
    char *held = lease();
    assert_true(memcmp(held + 17, "0000000000000000", 16) != 0);
    /* "one" is full at its owner: the fleet lease of the same round trip goes back */
    assert_int_equal(routed_conc(f, "one", "get", false, 2, &fb, &st, &back), 429);
    assert_limiter(SL_LADDER_CONC, "concurrency");
    assert_true(back != 0);
    assert_int_equal(st.conc_back, 0);
    sl_batch *g = sl_gubprotect_lease_release(f->p, back, "one", 3, st.conc_back, f->now);
    assert_non_null(g);
    assert_int_equal(g->n, 1);
    assert_int_equal(route_all(f, g), 1);
    sl_gubprotect_giveback_done(f->p, g);
    /* fill the fleet (8 with the one held): the shed call's concurrency lease goes back */
    for (int i = 0; i < 7; i++)
        assert_int_equal(routed_conc(f, "many", "get", false, 2, &fb, &st, &back), 200);
    assert_int_equal(routed_conc(f, "many", "get", false, 2, &fb, &st, &back), 503);
    assert_limiter(SL_LADDER_FLEET, "fleet");
    assert_int_equal(back, 0);
    assert_true(st.conc_back != 0);
    g = sl_gubprotect_lease_release(f->p, 0, "many", 4, st.conc_back, f->now);
    assert_non_null(g);
    assert_int_equal(g->n, 1);
    assert_memory_equal(g->reqs[0].unique_key, "many", 4);
    assert_int_equal(route_all(f, g), 1);
    sl_gubprotect_giveback_done(f->p, g);

    /* /release of both leases of the owners: one batch of two items */
    sl_attempt_release_req rr = {.lease_id = held, .lease_id_len = strlen(held)};
    int conc_rc;
    sl_batch_reset(&fb);
    st.leases = &fb;
    assert_int_equal(sl_attempt_release_route(f->p, &rr, f->now, &st, &conc_rc, &resp), 1);
    assert_int_equal(fb.n, 2);
    assert_int_equal(route_all(f, &fb), 2);
    sl_attempt_release_done(f->p, &rr, &st, conc_rc, &resp);
    assert_int_equal(resp.status, 200);
    assert_int_equal(routed_conc(f, "one", "get", false, 2, &fb, &st, &back), 200);
    free(held);
    sl_batch_free(&fb);
}

static void test_routed_concurrency_fallback(void **state)
{
    fx *f = *state;
    uint64_t back;
    sl_attempt_fleet st;
    sl_batch fb;
    sl_batch_init(&fb, 0);
    /* the owner unreachable: this node's share, floor(20 / 2) = 10, said and counted */
    char *ids[10];
    for (int i = 0; i < 10; i++) {
        assert_int_equal(routed_conc(f, "search", "critical", true, 2, &fb, &st, &back), 200);
        assert_header("X-Concurrency-Source", "local");
        ids[i] = lease();
    }
    assert_int_equal(routed_conc(f, "search", "critical", true, 2, &fb, &st, &back), 429);
    assert_header("X-Concurrency-Source", "local");
    assert_header("RateLimit-Policy", "\"concurrency\";q=10");
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(f->metrics, &txt, &len), 0);
    assert_non_null(strstr(txt, "sluice_leases_total{event=\"local\"} 11"));
    free(txt);
    /* the share's leases are renewed and released here: nothing to route */
    sl_attempt_req q = {.concurrency = "renew", .concurrency_len = 5, .lease_id = ids[0],
                        .lease_id_len = strlen(ids[0])};
    st.leases = &fb;
    assert_int_equal(sl_attempt_begin(f->p, 0, &f->lcfg, f->snap, &q, f->now, &st, &resp), 0);
    assert_int_equal(resp.status, 200);
    sl_attempt_release_req rr = {.lease_id = ids[0], .lease_id_len = strlen(ids[0])};
    int conc_rc;
    assert_int_equal(sl_attempt_release_route(f->p, &rr, f->now, &st, &conc_rc, &resp), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(routed_conc(f, "search", "critical", true, 2, &fb, &st, &back), 200);
    /* the concurrency limiter off: nothing routed, no lease, the killed event counted once */
    set_switch(f, "concurrency", SL_KILLSWITCH_KILLED);
    assert_int_equal(routed_conc(f, "one", "critical", false, 2, &fb, &st, &back), 200);
    assert_int_equal(fb.n, 0);
    assert_null(header("X-Lease-Id"));
    assert_header("X-Sluice-Killswitch", "concurrency");
    txt = NULL;
    assert_int_equal(sl_metrics_render_prometheus(f->metrics, &txt, &len), 0);
    assert_non_null(strstr(
        txt, "sluice_protect_events_total{limiter=\"concurrency\",event=\"killswitch\"} 1\n"));
    free(txt);
    set_switch(f, "concurrency", SL_KILLSWITCH_ENFORCE);
    /* the owner back: the cluster's count, the share's leases apart */
    assert_int_equal(routed_conc(f, "search", "critical", false, 2, &fb, &st, &back), 200);
    assert_null(header("X-Concurrency-Source"));
    for (int i = 0; i < 10; i++)
        free(ids[i]);
    sl_batch_free(&fb);
}


static void test_rate_quotas_in_a_store(void **state)
{
    fx *f = *state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 3;
    sl_engine *store;
    assert_int_equal(sl_engine_new(&ec, &store), 0);
    const char *kv[] = {"limit/key/one/quota={\"rate\":1,\"burst\":1}",
                        "limit/key/api/quota={\"rate\":1,\"burst\":2}", NULL};
    quotas(f, kv);
    int rounds;
    /* the quotas are the store's: the fixture's engine holds no rate state */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(in_store(f, store, "api", "critical", false, &rounds), 200);
        assert_int_equal(rounds, 1);
        assert_header("X-Req-Id", "s-1");
    }
    assert_int_equal(in_store(f, store, "api", "critical", false, &rounds), 429);
    assert_limiter(SL_LADDER_RATE, "rate");
    assert_header("Retry-After", "1");
    assert_true(body_has("rate limit exceeded for \"api\""));
    assert_int_equal(attempt_full(f, "api", NULL, "critical", false, NULL), 200); /* the engine's */

    /* with a concurrency lease and a routed fleet lease: 200 carries both */
    assert_int_equal(in_store(f, store, "one", "get", true, &rounds), 200);
    char *id = lease();
    assert_true(memcmp(id + 17, "0000000000000000", 16) != 0);
    /* "one" holds 1 lease: the next is the concurrency limit's, before any rate quota */
    assert_int_equal(in_store(f, store, "one", "get", true, &rounds), 429);
    assert_limiter(SL_LADDER_CONC, "concurrency");
    assert_int_equal(rounds, 0);
    assert_int_equal(release(f, id, NULL), 200);
    free(id);
    /* the store's quota rejects: the leases taken before it are given back, here and the owner */
    assert_int_equal(in_store(f, store, "one", "get", true, &rounds), 200);
    id = lease();
    assert_int_equal(release(f, id, NULL), 200);
    free(id);
    assert_int_equal(in_store(f, store, "one", "get", true, &rounds), 429);
    assert_limiter(SL_LADDER_RATE, "rate");
    assert_null(header("X-Lease-Id"));
    f->now += 1000;
    assert_int_equal(in_store(f, store, "one", "get", true, &rounds), 200); /* nothing leaked */
    sl_engine_free(store);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rate_quotas_in_a_store, setup, teardown),
        T(test_routed_concurrency),
        T(test_routed_concurrency_with_the_fleet),
        T(test_routed_concurrency_fallback),
        T(test_twenty_in_flight), T(test_release_forms), T(test_fleet),
        T(test_group_size),       T(test_give_back),     T(test_priorities),
        T(test_worker_shedder),   T(test_shadow_rate),   T(test_kill_switches),
        T(test_metrics_and_config), T(test_renew), T(test_routed_fleet),
        T(test_routed_fleet_give_back_and_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

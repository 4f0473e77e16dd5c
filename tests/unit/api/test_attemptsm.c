/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /attempt as one state machine (api/attempt.c sl_attempt_start / _step / _giveback), driven as
 * node/serviceatt.c drives it, with the engine as every key's owner and a second engine as the
 * Redis store: a node on its own answers at once (the fleet lease taken here, of its share);
 * in a cluster a non-critical acquire is handed on (its fleet and concurrency leases in one
 * batch), answered after one step, shed at the cluster's fleet limit, and answered on this
 * node's share with X-Fleet: local when the owner cannot answer; a later rejection's leases come
 * back as a give-back batch; a renewal is handed on and answered; on a store the rate quotas are
 * handed on and answered by the store's step.
 */
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
#include "protect_fixture.h"

static sl_answer resp;

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

static sl_attempt_req request(const char *res, const char *prio, const char *conc,
                              const char *lease)
{
    sl_attempt_req q = {0};
    q.levee.resource = res;
    q.levee.resource_len = res ? strlen(res) : 0;
    q.priority = prio;
    q.priority_len = prio ? strlen(prio) : 0;
    q.concurrency = conc;
    q.concurrency_len = conc ? strlen(conc) : 0;
    q.lease_id = lease;
    q.lease_id_len = lease ? strlen(lease) : 0;
    return q;
}

/* One call through the machine: every hand-off decided by `owner` (the keys' owner, or the
 * store), or failed when `down`; *steps counts them. The answer's status; *g the give-back. */
static int run(fx *f, const sl_attempt_req *q, sl_batch *b, bool store, sl_engine *owner,
               bool down, int *steps, sl_batch **g)
{
    sl_attempt_fleet st;
    memset(&st, 0x55, sizeof st); /* the machine sets what it reads */
    if (b)
        sl_batch_reset(b);
    *steps = 0;
    *g = NULL;
    int next = sl_attempt_start(f->p, 0, &f->lcfg, f->snap, q, b, store, 2, f->now, &st, &resp);
    uint64_t back = 0;
    while (next != SL_ATTEMPT_DO_SEND) {
        assert_non_null(b);
        assert_true(next == SL_ATTEMPT_DO_ROUTE || (store && next == SL_ATTEMPT_DO_STORE));
        ++*steps;
        for (size_t i = 0; i < b->n; i++) {
            if (b->answered[i])
                continue;
            if (down)
                b->resps[i] = (sl_response){.error = "peer unreachable"};
            else
                sl_engine_decide(owner, &b->reqs[i], &b->resps[i], f->now);
        }
        next = sl_attempt_step(f->p, 0, &f->lcfg, f->snap, q, &st, 2, f->now, &resp, &back);
        if (next == SL_ATTEMPT_DO_SEND && *steps)
            *g = sl_attempt_giveback(f->p, q, &st, back, f->now);
    }
    return resp.status;
}

static void free_giveback(fx *f, sl_batch *g, int want)
{
    if (!g) {
        assert_int_equal(want, 0);
        return;
    }
    assert_int_equal(g->n, (size_t)want);
    for (size_t j = 0; j < g->n; j++) {
        sl_engine_decide(f->engine, &g->reqs[j], &g->resps[j], f->now);
        assert_int_equal(sl_gubprotect_fleet_released(f->p, &g->resps[j]), 1);
    }
    sl_gubprotect_giveback_done(f->p, g);
}

static void test_alone(void **state)
{
    fx *f = *state;
    int steps;
    sl_batch *g;
    sl_attempt_req q = request("r", NULL, NULL, NULL);
    assert_int_equal(run(f, &q, NULL, false, NULL, false, &steps, &g), 200);
    assert_int_equal(steps, 0);
    /* a non-critical acquire: the fleet lease is this node's, decided at once */
    q = request("r", "get", "acquire", NULL);
    for (int i = 0; i < 8; i++)
        assert_int_equal(run(f, &q, NULL, false, NULL, false, &steps, &g), 200);
    assert_non_null(header("X-Lease-Id"));
    assert_int_equal(run(f, &q, NULL, false, NULL, false, &steps, &g), 503);
    assert_null(g);
    q = request(NULL, NULL, NULL, NULL);
    assert_int_equal(run(f, &q, NULL, false, NULL, false, &steps, &g), 400);
}

static void test_cluster(void **state)
{
    fx *f = *state;
    int steps;
    sl_batch b, *g;
    sl_batch_init(&b, 0);
    sl_attempt_req q = request("search", "get", "acquire", NULL);
    char id[128] = "";
    for (int i = 0; i < 8; i++) {
        assert_int_equal(run(f, &q, &b, false, f->engine, false, &steps, &g), 200);
        assert_int_equal(steps, 1);
        assert_int_equal(b.n, 2); /* the fleet's lease and the resource's: one round trip */
        assert_null(header("X-Fleet"));
        free_giveback(f, g, 0);
        snprintf(id, sizeof id, "%s", header("X-Lease-Id"));
    }
    assert_int_equal(run(f, &q, &b, false, f->engine, false, &steps, &g), 503);
    free_giveback(f, g, 1); /* the concurrency lease taken in the same round trip */
    /* the owner is down: this node's share of the fleet (8 / 2), said so */
    assert_int_equal(run(f, &q, &b, false, f->engine, true, &steps, &g), 200);
    assert_string_equal(header("X-Fleet"), "local");
    assert_string_equal(header("X-Concurrency-Source"), "local");
    free_giveback(f, g, 0);
    /* a renewal of an owner's lease: handed on, answered */
    sl_attempt_req r = request("search", NULL, "renew", id);
    assert_int_equal(run(f, &r, &b, false, f->engine, false, &steps, &g), 200);
    assert_int_equal(steps, 1);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.reqs[0].hits, 0);
    free_giveback(f, g, 0);
    sl_batch_free(&b);
}

static void test_store(void **state)
{
    fx *f = *state;
    sl_engine *store;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 2;
    assert_int_equal(sl_engine_new(&ec, &store), 0);
    const char *kv[] = {"limit/key/api/quota={\"rate\":1,\"burst\":2}", NULL};
    quotas(f, kv);
    int steps;
    sl_batch b, *g;
    sl_batch_init(&b, 0);
    sl_attempt_req q = request("api", "critical", NULL, NULL);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(run(f, &q, &b, true, store, false, &steps, &g), i < 3 ? 200 : 429);
        assert_int_equal(steps, 1); /* the quotas, handed to the store once */
        free_giveback(f, g, 0);
    }
    assert_non_null(header("Retry-After"));
    sl_batch_free(&b);
    sl_engine_free(store);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {T(test_alone), T(test_cluster), T(test_store)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

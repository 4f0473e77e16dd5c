/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gubernator calls under protection (api/gubprotect.c), with a real engine and switchboard on a
 * virtual clock, the engine standing in for the standalone router: lease ids in and out of
 * metadata, kill switches, SL_SHADOW, fleet shedding of CONCURRENCY items, the whole call shed,
 * peer calls, and a switch set through the admin endpoint acting on an item.
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

#include "api/gubprotect.h"
#include "protect/admin.h"
#include "protect_fixture.h"

/* ---------------------------------------------------------------- Gubernator */

/* What the standalone router does: the engine decides the items nobody answered. */
static void route(fx *f, sl_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        if (!b->answered[i])
            sl_engine_decide(f->engine, &b->reqs[i], &b->resps[i], f->now);
}

static void item(sl_batch *b, size_t i, const char *name, int32_t alg, int64_t hits,
                 int64_t limit)
{
    sl_request *q = &b->reqs[i];
    q->name = name;
    q->name_len = strlen(name);
    q->unique_key = "k";
    q->unique_key_len = 1;
    q->algorithm = alg;
    q->hits = hits;
    q->limit = limit;
    q->duration = 60000;
}

/* What node/service.c does around the router: the fleet's leases first (one node: its engine
 * owns the fleet key), the call's items, and the fleet leases given back after. */
static int run(fx *f, sl_batch *b, bool peer, sl_gubprotect_verdict *v)
{
    sl_gubprotect_call *c = NULL;
    int rc = sl_gubprotect_begin(f->p, 0, b, peer, f->now, &c, v);
    if (rc)
        return rc;
    sl_batch *fb = sl_gubprotect_fleet_batch(c);
    if (fb) {
        route(f, fb);
        sl_gubprotect_fleet_done(f->p, c, b, 1, f->now);
    }
    route(f, b);
    sl_gubprotect_end(f->p, c, b, peer, f->now);
    sl_batch *gb = sl_gubprotect_giveback(c);
    if (gb) {
        route(f, gb);
        sl_gubprotect_giveback_done(f->p, gb);
    }
    return 0;
}

/* The fleet key's owner cannot be reached (the router answers its items with an error): each
 * node of two takes from its share, 4 of the 8, and the answers say fleet=local; a fallback
 * lease released with its token goes back here (no routed release). */
static void fleet_unreachable(fx *f, sl_batch *b)
{
    sl_gubprotect_verdict v;
    sl_gubprotect_call *c = NULL;
    assert_int_equal(sl_gubprotect_begin(f->p, 0, b, false, f->now, &c, &v), 0);
    sl_batch *fb = sl_gubprotect_fleet_batch(c);
    if (fb) {
        for (size_t j = 0; j < fb->n; j++)
            fb->resps[j].error = "peer 10.0.0.2:5454: connection refused";
        sl_gubprotect_fleet_done(f->p, c, b, 2, f->now);
    }
    route(f, b);
    sl_gubprotect_end(f->p, c, b, false, f->now);
    assert_null(sl_gubprotect_giveback(c));
}

static void test_fleet_owner_unreachable(void **state)
{
    fx *f = *state;
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_batch_alloc_items(&b, 5), 0);
    for (int i = 0; i < 5; i++) {
        item(&b, i, "c", SL_CONCURRENCY, 1, 100);
        sl_batch_meta_set(&b, &b.req_meta[i], "priority", "get");
    }
    fleet_unreachable(f, &b);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(b.resps[i].status, SL_UNDER_LIMIT);
        assert_string_equal(sl_batch_meta_get(&b.resp_meta[i], "fleet"), "local");
        assert_int_equal(strlen(sl_batch_meta_get(&b.resp_meta[i], "lease_id")), 33);
    }
    assert_int_equal(b.resps[4].status, SL_OVER_LIMIT);
    assert_int_equal(b.resps[4].limit, 4);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[4], "shed"), "fleet");
    char tok[64];
    snprintf(tok, sizeof tok, "%s", sl_batch_meta_get(&b.resp_meta[0], "lease_id"));

    /* released with its token: the share has room for one more, not two */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    item(&b, 0, "c", SL_CONCURRENCY, -1, 100);
    sl_batch_meta_set(&b, &b.req_meta[0], "lease_id", tok);
    for (int i = 1; i < 3; i++) {
        item(&b, i, "c", SL_CONCURRENCY, 1, 100);
        sl_batch_meta_set(&b, &b.req_meta[i], "priority", "test");
    }
    fleet_unreachable(f, &b);
    assert_null(b.resps[0].error);
    assert_int_equal(b.resps[1].status, SL_UNDER_LIMIT);
    assert_int_equal(b.resps[2].status, SL_OVER_LIMIT);
    sl_batch_free(&b);
}

static void test_batch(void **state)
{
    fx *f = *state;
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_gubprotect_verdict v;

    /* acquire two leases of a CONCURRENCY limit of 2, a third is over */
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    for (int i = 0; i < 3; i++)
        item(&b, i, "conc", SL_CONCURRENCY, 1, 2);
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_int_equal(b.resps[0].status, SL_UNDER_LIMIT);
    assert_int_equal(b.resps[2].status, SL_OVER_LIMIT);
    char id0[64];
    const char *l0 = sl_batch_meta_get(&b.resp_meta[0], "lease_id");
    assert_non_null(l0);
    assert_int_equal(strlen(l0), 16); /* critical by default: no fleet lease */
    snprintf(id0, sizeof id0, "%s", l0);
    assert_null(sl_batch_meta_get(&b.resp_meta[2], "lease_id"));
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[2], "reason"),
                        "concurrency limit reached: too many calls in flight");

    /* release it through the metadata; a bad id is an item error */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    item(&b, 0, "conc", SL_CONCURRENCY, -1, 2);
    sl_batch_meta_set(&b, &b.req_meta[0], "lease_id", id0);
    item(&b, 1, "conc", SL_CONCURRENCY, -1, 2);
    sl_batch_meta_set(&b, &b.req_meta[1], "lease_id", "nope");
    item(&b, 2, "conc", SL_CONCURRENCY, 1, 2);
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_null(b.resps[0].error);
    assert_int_equal(b.resps[0].remaining, 1);
    assert_string_equal(b.resps[1].error, "metadata 'lease_id' is not a lease id");
    assert_int_equal(b.resps[2].status, SL_UNDER_LIMIT);

    /* kill switch by name; shadow by behavior; priorities checked */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 4), 0);
    item(&b, 0, "rate", SL_TOKEN_BUCKET, 1, 1);
    item(&b, 1, "rate", SL_TOKEN_BUCKET, 1, 1);
    item(&b, 2, "rate", SL_TOKEN_BUCKET, 1, 1);
    b.reqs[2].behavior = SL_SHADOW;
    item(&b, 3, "rate", SL_TOKEN_BUCKET, 1, 1);
    sl_batch_meta_set(&b, &b.req_meta[3], "priority", "vip");
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_int_equal(b.resps[0].status, SL_UNDER_LIMIT);
    assert_int_equal(b.resps[1].status, SL_OVER_LIMIT);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[1], "reason"), "rate limit exceeded");
    assert_int_equal(b.resps[2].status, SL_UNDER_LIMIT);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[2], "shadow"), "rate");
    assert_string_equal(b.resps[3].error,
                        "metadata 'priority' must be critical, post, get or test");
    set_switch(f, "rate", SL_KILLSWITCH_KILLED);
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 1), 0);
    item(&b, 0, "rate", SL_TOKEN_BUCKET, 1, 1);
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_int_equal(b.resps[0].status, SL_UNDER_LIMIT);
    assert_int_equal(b.resps[0].remaining, 1);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[0], "killswitch"), "on");
    set_switch(f, "rate", SL_KILLSWITCH_SHADOW);
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 1), 0);
    item(&b, 0, "rate", SL_TOKEN_BUCKET, 1, 1);
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_int_equal(b.resps[0].status, SL_UNDER_LIMIT);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[0], "shadow"), "rate");
    sl_batch_free(&b);
}

static void test_batch_fleet_and_shed(void **state)
{
    fx *f = *state;
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_gubprotect_verdict v;
    /* 8 non-critical CONCURRENCY acquisitions hold the fleet; the 9th is shed, critical passes */
    assert_int_equal(sl_batch_alloc_items(&b, 10), 0);
    for (int i = 0; i < 10; i++) {
        item(&b, i, "c", SL_CONCURRENCY, 1, 100);
        sl_batch_meta_set(&b, &b.req_meta[i], "priority", i == 9 ? "critical" : "get");
    }
    assert_int_equal(run(f, &b, false, &v), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(b.resps[i].status, SL_UNDER_LIMIT);
        assert_int_equal(strlen(sl_batch_meta_get(&b.resp_meta[i], "lease_id")), 33);
    }
    assert_int_equal(b.resps[8].status, SL_OVER_LIMIT);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[8], "reason"),
                        "shed: fleet capacity is reserved for critical calls");
    assert_int_equal(b.resps[9].status, SL_UNDER_LIMIT);
    char tok[64];
    snprintf(tok, sizeof tok, "%s", sl_batch_meta_get(&b.resp_meta[0], "lease_id"));

    /* releasing with the combined id frees the fleet slot too */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 2), 0);
    item(&b, 0, "c", SL_CONCURRENCY, -1, 100);
    sl_batch_meta_set(&b, &b.req_meta[0], "lease_id", tok);
    item(&b, 1, "c", SL_CONCURRENCY, 1, 100);
    sl_batch_meta_set(&b, &b.req_meta[1], "priority", "test");
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_null(b.resps[0].error);
    assert_int_equal(b.resps[1].status, SL_UNDER_LIMIT);

    /* the whole call is shed for its most important item's class */
    for (int i = 0; i < 4; i++)
        sl_protect_observe(f->p, 0, 1000 + i * 100, 0.99); /* level 2.0: test and get */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 2), 0);
    item(&b, 0, "r", SL_TOKEN_BUCKET, 1, 10);
    item(&b, 1, "r", SL_TOKEN_BUCKET, 1, 10);
    sl_batch_meta_set(&b, &b.req_meta[0], "priority", "test");
    sl_batch_meta_set(&b, &b.req_meta[1], "priority", "get");
    assert_int_equal(run(f, &b, false, &v), 1);
    assert_true(v.shed);
    assert_int_equal(v.retry_after_s, 5);
    assert_non_null(strstr(v.message, "sheds get traffic"));
    sl_batch_meta_set(&b, &b.req_meta[1], "priority", "post");
    assert_int_equal(run(f, &b, false, &v), 0);
    /* a peer call is never shed and only its lease ids are read */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 2), 0);
    item(&b, 0, "r", SL_TOKEN_BUCKET, 1, 10);
    sl_batch_meta_set(&b, &b.req_meta[0], "priority", "test");
    item(&b, 1, "pc", SL_CONCURRENCY, 1, 1);
    assert_int_equal(run(f, &b, true, &v), 0);
    assert_int_equal(b.resps[0].status, SL_UNDER_LIMIT);
    const char *pl = sl_batch_meta_get(&b.resp_meta[1], "lease_id");
    assert_non_null(pl);
    assert_int_equal(strlen(pl), 16);
    snprintf(tok, sizeof tok, "%s", pl);
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 1), 0);
    item(&b, 0, "pc", SL_CONCURRENCY, -1, 1);
    sl_batch_meta_set(&b, &b.req_meta[0], "lease_id", tok);
    assert_int_equal(run(f, &b, true, &v), 0);
    assert_null(b.resps[0].error);
    sl_batch_free(&b);
}

/* ---------------------------------------------------------------- admin */

static void test_admin(void **state)
{
    fx *f = *state;
    sl_admin_response a;
    const char *on = "{\"name\": \"search\", \"on\": true}";
    sl_admin_handle(f->p, "POST", (const uint8_t *)on, strlen(on), &a);
    assert_int_equal(a.status, 200);
    assert_non_null(strstr(a.body, "\"mode\":\"killed\""));
    free(a.body);
    const char *sh = "{\"name\": \"x\", \"mode\": \"shadow\"}";
    sl_admin_handle(f->p, "POST", (const uint8_t *)sh, strlen(sh), &a);
    assert_int_equal(a.status, 200);
    free(a.body);
    sl_admin_handle(f->p, "GET", NULL, 0, &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.content_type, "application/json");
    assert_non_null(strstr(a.body, "{\"name\":\"search\",\"mode\":\"killed\",\"origin\":\"admin\"}"));
    assert_non_null(strstr(a.body, "\"fleet\":{\"capacity\":10"));
    assert_non_null(strstr(a.body, "\"source\":\"file\""));
    assert_non_null(strstr(a.body, "\"shed\":[{\"worker\":0"));
    free(a.body);
    static const char *const bad[] = {"", "[]", "{\"name\": 1, \"on\": true}",
                                      "{\"name\": \"a\"}", "{\"name\": \"a\", \"on\": 1}",
                                      "{\"name\": \"a\", \"mode\": \"maybe\"}",
                                      "{\"name\": \"\", \"on\": true}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_admin_handle(f->p, "POST", (const uint8_t *)bad[i], strlen(bad[i]), &a);
        assert_int_equal(a.status, 400);
        assert_non_null(strstr(a.body, "\"error\""));
        free(a.body);
    }
    sl_admin_handle(f->p, "DELETE", NULL, 0, &a);
    assert_int_equal(a.status, 405);
    free(a.body);
    /* the switch works */
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_gubprotect_verdict v;
    assert_int_equal(sl_batch_alloc_items(&b, 1), 0);
    item(&b, 0, "search", SL_TOKEN_BUCKET, 5, 1);
    assert_int_equal(run(f, &b, false, &v), 0);
    assert_string_equal(sl_batch_meta_get(&b.resp_meta[0], "killswitch"), "on");
    sl_batch_free(&b);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_batch), T(test_batch_fleet_and_shed), T(test_fleet_owner_unreachable), T(test_admin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

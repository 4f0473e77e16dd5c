/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GLOBAL sync tests on one real loop, with a real engine and GLOBAL table; the view is a small
 * one written here in place of the router's (the ops interface is how the router answers). Checked:
 * hits answered from the local copy are counted and sent at the next sync; hits whose owner is now
 * this node are applied to the local engine and their new state is broadcast; received owner
 * states replace the local copy; a peer's GLOBAL hits decided here are broadcast to every remote
 * peer of the view within a tenth of a sync interval; calls that fail (a peer that refuses
 * connections) are reported to the router with their method, peer slot and an error.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "global_req.h"

#include "cluster/globalsync.h"
#include "cluster/picker.h"
#include "cluster/peerwire.h"
#include "sluice/clock.h"

#define REFUSED_ADDR "127.0.0.1:1" /* nothing listens on port 1 */

typedef struct fixture {
    uv_loop_t loop;
    sl_engine *engine;
    sl_global *global;
    sl_globalsync *gs;
    sl_peer *peer;          /* the one remote peer (slot 1), or NULL: this node owns everything */
    int done[2];            /* call_done per method */
    int errs[2];
    size_t last_vidx;
} fixture;

static bool f_has_view(void *ud)
{
    (void)ud;
    return true;
}

static bool f_peer_at(void *ud, size_t i, sl_globalsync_peer *out)
{
    fixture *f = ud;
    if (i != 1 || !f->peer)
        return false;
    *out = (sl_globalsync_peer){.conn = f->peer, .addr = REFUSED_ADDR, .vidx = 1, .version = 7};
    return true;
}

static bool f_owner(void *ud, uint64_t h, sl_globalsync_peer *out)
{
    (void)h;
    return f_peer_at(ud, 1, out);
}

static size_t f_slots(void *ud)
{
    (void)ud;
    return 2; /* slot 0 is this node */
}

static void f_call_done(void *ud, int method, const sl_globalsync_peer *p, int64_t t0, int err)
{
    fixture *f = ud;
    assert_true(method == SL_GLOBALSYNC_HITS || method == SL_GLOBALSYNC_BROADCAST);
    assert_int_equal(p->version, 7);
    assert_true(t0 > 0);
    f->done[method]++;
    if (err)
        f->errs[method]++;
    f->last_vidx = p->vidx;
}

static const sl_globalsync_ops ops = {
    .has_view = f_has_view,
    .owner = f_owner,
    .slots = f_slots,
    .peer = f_peer_at,
    .call_done = f_call_done,
};

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    assert_int_equal(sl_global_new(NULL, &f->global), 0);
    sl_globalsync_config c = {
        .engine = f->engine,
        .global = f->global,
        .sync_wait_ns = 5000000, /* 5 ms */
        .batch_limit = 100,
        .call_timeout_ms = 2000,
        .max_msg = SL_GRPC_DEFAULT_MAX_MSG,
        .ops = &ops,
        .ud = f,
    };
    assert_int_equal(sl_globalsync_new(&c, &f->gs), 0);
    sl_globalsync_start(f->gs, &f->loop);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sl_globalsync_stop(f->gs);
    if (f->peer)
        sl_peer_close(f->peer);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    sl_globalsync_free(f->gs);
    sl_global_free(f->global);
    sl_engine_free(f->engine);
    free(f);
    return 0;
}

static void add_peer(fixture *f)
{
    sl_peer_config pc = {.loop = &f->loop, .addr = REFUSED_ADDR, .connect_timeout_ms = 2000};
    assert_int_equal(sl_peer_new(&pc, &f->peer), 0);
}

static sl_request req(const char *key, int64_t hits, int64_t limit)
{
    return global_req(key, hits, limit, 60000);
}

/* Run the loop until `n` calls of `method` ended (a hang guard, not a timing bound). */
static void run_until_done(fixture *f, int method, int n)
{
    int64_t give_up = sl_mono_ns() + 20000000000LL;
    while (f->done[method] < n && sl_mono_ns() < give_up)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(f->done[method], n);
}

static void test_hits_owned_here_are_applied_and_broadcast(void **state)
{
    fixture *f = *state;
    int64_t now = sl_wall_ms();
    sl_request q = req("a", 3, 10);
    sl_response resp;
    assert_int_equal(sl_globalsync_hit(f->gs, hash_of(&q), &q, now, &resp), 0);
    assert_int_equal(resp.status, SL_UNDER_LIMIT);
    assert_int_equal(resp.remaining, 7);
    assert_int_equal(sl_global_hits_waiting(f->global), 1);

    /* the sync timer fires; the owner is this node, so the engine takes the hits, and the
     * key's new state is queued for broadcast and then taken (no remote peer to send it to) */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(sl_global_hits_waiting(f->global), 0);
    assert_int_equal(sl_global_touched_waiting(f->global), 0);
    sl_request peek = req("a", 0, 10);
    peek.behavior = 0;
    sl_engine_decide(f->engine, &peek, &resp, sl_wall_ms());
    assert_null(resp.error);
    assert_int_equal(resp.remaining, 7);

    sl_globalsync_stats st;
    sl_globalsync_stats_get(f->gs, &st);
    assert_int_equal(st.local_answers, 1);
    assert_int_equal(st.sends, 0);
    assert_int_equal(st.broadcasts, 0);
    assert_int_equal(f->done[SL_GLOBALSYNC_HITS] + f->done[SL_GLOBALSYNC_BROADCAST], 0);
}

static void test_update_replaces_local_copy(void **state)
{
    fixture *f = *state;
    int64_t now = sl_wall_ms();
    sl_peerwire_global g = {
        .key = "rl_b",
        .key_len = 4,
        .resp = {.status = SL_UNDER_LIMIT, .limit = 10, .remaining = 4, .reset_time = now + 60000},
        .algorithm = SL_TOKEN_BUCKET,
        .duration = 60000,
        .created_at = now,
    };
    sl_globalsync_update(f->gs, &g, 1, now);
    sl_request q = req("b", 1, 10);
    sl_response resp;
    assert_int_equal(sl_globalsync_hit(f->gs, hash_of(&q), &q, now, &resp), 0);
    assert_int_equal(resp.remaining, 3);
    sl_globalsync_stats st;
    sl_globalsync_stats_get(f->gs, &st);
    assert_int_equal(st.updates, 1);
    assert_int_equal(st.local_answers, 1);
}

static void test_hits_to_unreachable_owner_reported(void **state)
{
    fixture *f = *state;
    add_peer(f);
    int64_t now = sl_wall_ms();
    sl_request a = req("c", 1, 10), b = req("d", 2, 10);
    sl_response resp;
    assert_int_equal(sl_globalsync_hit(f->gs, hash_of(&a), &a, now, &resp), 0);
    assert_int_equal(sl_globalsync_hit(f->gs, hash_of(&b), &b, now, &resp), 0);
    run_until_done(f, SL_GLOBALSYNC_HITS, 1); /* both keys, one owner: one call */
    assert_int_equal(f->errs[SL_GLOBALSYNC_HITS], 1);
    assert_int_equal(f->last_vidx, 1);
    assert_int_equal(sl_global_hits_waiting(f->global), 0); /* lost: the next sync sends new */
    sl_globalsync_stats st;
    sl_globalsync_stats_get(f->gs, &st);
    assert_int_equal(st.sends, 1);
    assert_int_equal(st.local_answers, 2);
}

static void test_peer_hits_broadcast_to_every_peer(void **state)
{
    fixture *f = *state;
    add_peer(f);
    int64_t now = sl_wall_ms();
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_batch_alloc_items(&b, 2), 0);
    b.reqs[0] = req("e", 2, 10);
    b.reqs[1] = req("f", 0, 10); /* a peek changes nothing: not broadcast */
    for (size_t i = 0; i < b.n; i++)
        sl_engine_decide(f->engine, &b.reqs[i], &b.resps[i], now);
    sl_globalsync_peer_batch(f->gs, &b, now);
    assert_int_equal(sl_global_touched_waiting(f->global), 1);
    run_until_done(f, SL_GLOBALSYNC_BROADCAST, 1);
    assert_int_equal(f->errs[SL_GLOBALSYNC_BROADCAST], 1);
    assert_int_equal(f->last_vidx, 1);
    assert_int_equal(f->done[SL_GLOBALSYNC_HITS], 0);
    sl_globalsync_stats st;
    sl_globalsync_stats_get(f->gs, &st);
    assert_int_equal(st.broadcasts, 1);
    sl_batch_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hits_owned_here_are_applied_and_broadcast, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_update_replaces_local_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hits_to_unreachable_owner_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_peer_hits_broadcast_to_every_peer, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

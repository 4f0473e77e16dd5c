/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hand-off tests on a real libuv loop with two engines in one process: node "a" walks its store
 * for a two-node list and sends the keys "b" owns through a transport that hands each framed
 * TransferKeysReq to b's receiver (sl_handoff_receive) and completes the call on a later loop
 * iteration, as a peer call does. Checked: every key b owns arrives and answers there as it did
 * on a, with small batches (many calls, the walk waiting on a call in flight); a's own keys stay;
 * the moved ones leave a; a failing transport keeps every key on a and counts it, and a walk
 * whose first calls failed runs again and delivers; a leaving node
 * (self -1) sends everything. The loop only runs callbacks; nothing sleeps.
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

#include "api/gubernator.h"
#include "cluster/handoff.h"
#include "cluster/picker.h"
#include "cluster/peerwire.h"
#include "core/keystate.h"
#include "core/store.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

/* The walk reads the wall clock to skip expired keys, so the decisions are made at a time taken
 * once from it; nothing waits on it (the keys last 10 minutes). */
static int64_t T0;
#define NKEYS 2000

typedef struct pending {
    sl_handoff_sent_cb cb;
    void *ud;
    int err;
} pending;

typedef struct fixture {
    uv_loop_t loop;
    uv_timer_t done_timer;
    sl_engine *a, *b;
    sl_picker *picker;
    pending q[64];
    size_t nq;
    int fail;           /* nonzero: sends fail at once with this ... */
    int fail_calls;     /* ... this many times (< 0: always) */
    size_t calls, records_bytes, max_inflight, inflight;
} fixture;

static void complete(uv_timer_t *t)
{
    fixture *f = t->data;
    size_t n = f->nq;
    pending q[64];
    memcpy(q, f->q, n * sizeof *q);
    f->nq = 0;
    for (size_t i = 0; i < n; i++) {
        f->inflight--;
        q[i].cb(q[i].ud, q[i].err);
    }
}

static int send_to_b(void *ud, size_t peer, sl_buf *framed, sl_handoff_sent_cb cb, void *cb_ud)
{
    fixture *f = ud;
    assert_int_equal(peer, (size_t)sl_picker_find(f->picker, "b:1"));
    if (f->fail && f->fail_calls) {
        if (f->fail_calls > 0)
            f->fail_calls--;
        return f->fail;
    }
    sl_grpc_msg m;
    const char *err;
    assert_int_equal(sl_grpc_frame_decode(framed->data, framed->len, 1 << 24, &m, &err), 0);
    const uint8_t *recs;
    size_t rlen, bad;
    assert_int_equal(sl_peerwire_decode_transfer_req(m.data, m.len, &recs, &rlen), 0);
    sl_handoff_receive(f->b, NULL, recs, rlen, T0 + 10, &bad);
    assert_int_equal(bad, 0);
    f->calls++;
    f->records_bytes += rlen;
    assert_true(f->nq < 64);
    f->q[f->nq++] = (pending){cb, cb_ud, 0};
    if (++f->inflight > f->max_inflight)
        f->max_inflight = f->inflight;
    uv_timer_start(&f->done_timer, complete, 0, 0);
    return 0;
}

static sl_engine *engine(uint64_t seed)
{
    sl_engine_config c;
    sl_engine_config_default(&c);
    c.max_keys = 100000;
    c.cluster_keys = true;
    c.hash_seed = seed;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&c, &e), 0);
    return e;
}

static sl_request req(char *buf, int i, int64_t hits)
{
    int n = snprintf(buf, 32, "k%d", i);
    sl_request r = {.name = "n", .name_len = 1, .unique_key = buf, .unique_key_len = (size_t)n,
                    .hits = hits, .limit = 10, .duration = 600000,
                    .algorithm = i % 2 ? SL_TOKEN_BUCKET : SL_SLIDING_LOG};
    return r;
}

static bool owned_by_b(fixture *f, int i)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "k%d", i);
    size_t o = sl_picker_owner(f->picker, sl_picker_key_hash(NULL, "n", 1, buf, (size_t)n));
    return o == (size_t)sl_picker_find(f->picker, "b:1");
}

static void setup(fixture *f)
{
    memset(f, 0, sizeof *f);
    uv_loop_init(&f->loop);
    uv_timer_init(&f->loop, &f->done_timer);
    f->done_timer.data = f;
    f->a = engine(1);
    f->b = engine(2);
    const char *addrs[] = {"a:1", "b:1"};
    assert_int_equal(sl_picker_new(SL_PICKER_KIND_RING, 64, addrs, 2, &f->picker), 0);
    for (int i = 0; i < NKEYS; i++) {
        char buf[32];
        sl_request r = req(buf, i, 1 + i % 5);
        sl_response resp;
        sl_engine_decide(f->a, &r, &resp, T0);
        assert_null(resp.error);
    }
}

static void teardown(fixture *f)
{
    uv_close((uv_handle_t *)&f->done_timer, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    sl_picker_free(f->picker);
    sl_engine_free(f->a);
    sl_engine_free(f->b);
}

static void run_walk(fixture *f, long self, size_t batch_bytes, int retries,
                     sl_handoff_stats *st)
{
    sl_handoff_config hc = {.engine = f->a, .loop = &f->loop, .batch_bytes = batch_bytes,
                            .step_work = 100, .retries = retries, .retry_ms = 1,
                            .send = send_to_b, .ud = f};
    sl_handoff *h;
    assert_int_equal(sl_handoff_new(&hc, &h), 0);
    sl_handoff_begin(h, f->picker, self, NULL);
    while (sl_handoff_busy(h))
        uv_run(&f->loop, UV_RUN_ONCE);
    sl_handoff_stats_get(h, st);
    sl_handoff_close(h);
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static void peek(sl_engine *e, int i, sl_response *resp)
{
    char buf[32];
    sl_request r = req(buf, i, 0);
    sl_engine_decide(e, &r, resp, T0 + 20);
}

static void test_keys_move_to_their_owner(void **state)
{
    (void)state;
    fixture f;
    setup(&f);
    /* the reference answers, before anything moves */
    static sl_response before[NKEYS];
    for (int i = 0; i < NKEYS; i++)
        peek(f.a, i, &before[i]);
    sl_handoff_stats st;
    run_walk(&f, sl_picker_find(f.picker, "a:1"), 4096, -1, &st);
    size_t moved = 0;
    for (int i = 0; i < NKEYS; i++) {
        sl_response ra, rb;
        peek(f.a, i, &ra);
        peek(f.b, i, &rb);
        if (owned_by_b(&f, i)) {
            moved++;
            assert_int_equal(rb.remaining, before[i].remaining);
            assert_int_equal(rb.reset_time, before[i].reset_time);
            assert_int_equal(ra.remaining, 10); /* gone from a: a fresh key there */
        } else {
            assert_int_equal(ra.remaining, before[i].remaining);
            assert_int_equal(rb.remaining, 10); /* never sent */
        }
    }
    assert_true(moved > NKEYS / 4 && moved < 3 * NKEYS / 4);
    assert_int_equal(st.keys, moved);
    assert_int_equal(st.bytes, f.records_bytes);
    assert_true(f.calls > 5); /* 4 KiB batches: many calls, one at a time */
    assert_int_equal(f.max_inflight, 1);
    assert_int_equal(st.failed_keys, 0);
    assert_int_equal(st.walks_done, 1);
    teardown(&f);
}

static void test_leaving_node_sends_everything(void **state)
{
    (void)state;
    fixture f;
    setup(&f);
    sl_handoff_stats st;
    /* a leaving node walks the list without itself: b owns every key */
    sl_picker_free(f.picker);
    const char *addrs[] = {"b:1"};
    assert_int_equal(sl_picker_new(SL_PICKER_KIND_RING, 64, addrs, 1, &f.picker), 0);
    run_walk(&f, -1, 0, -1, &st);
    assert_int_equal(st.keys, NKEYS);
    sl_engine_stats es;
    sl_engine_stats_get(f.a, &es);
    assert_int_equal(es.keys, 0);
    sl_engine_stats_get(f.b, &es);
    assert_int_equal(es.keys, NKEYS);
    teardown(&f);
}

static void test_failed_sends_keep_the_keys(void **state)
{
    (void)state;
    fixture f;
    setup(&f);
    f.fail = -ECONNREFUSED;
    f.fail_calls = -1;
    sl_handoff_stats st;
    run_walk(&f, sl_picker_find(f.picker, "a:1"), 4096, 2, &st); /* retried twice, in vain */
    assert_int_equal(st.keys, 0);
    assert_true(st.failed_keys > 0);
    sl_engine_stats es;
    sl_engine_stats_get(f.a, &es);
    assert_int_equal(es.keys, NKEYS);
    sl_engine_stats_get(f.b, &es);
    assert_int_equal(es.keys, 0);
    teardown(&f);
}

/* The first calls fail (a peer not listening yet): the walk runs again and the keys arrive. */
static void test_failed_sends_are_retried(void **state)
{
    (void)state;
    fixture f;
    setup(&f);
    f.fail = -ECONNREFUSED;
    f.fail_calls = 3;
    sl_handoff_stats st;
    run_walk(&f, sl_picker_find(f.picker, "a:1"), 4096, 0, &st);
    assert_int_equal(st.failed_keys, 0);
    size_t for_b = 0;
    for (int i = 0; i < NKEYS; i++)
        for_b += owned_by_b(&f, i);
    sl_engine_stats es;
    sl_engine_stats_get(f.b, &es);
    assert_int_equal(es.keys, for_b);
    sl_engine_stats_get(f.a, &es);
    assert_int_equal(es.keys, NKEYS - for_b);
    teardown(&f);
}

static void test_transfer_messages(void **state)
{
    (void)state;
    const uint8_t recs[] = {1, 2, 3, 4, 5};
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_peerwire_encode_transfer_req(recs, sizeof recs, &out), 0);
    const uint8_t *got;
    size_t n;
    assert_int_equal(sl_peerwire_decode_transfer_req(out.data + 5, out.len - 5, &got, &n), 0);
    assert_int_equal(n, sizeof recs);
    assert_memory_equal(got, recs, n);
    /* a truncated message is refused */
    assert_int_equal(sl_peerwire_decode_transfer_req(out.data + 5, out.len - 6, &got, &n), -EINVAL);
    sl_buf_reset(&out);
    assert_int_equal(sl_peerwire_encode_transfer_resp(1234, &out), 0);
    int64_t acc;
    assert_int_equal(sl_peerwire_decode_transfer_resp(out.data + 5, out.len - 5, &acc), 0);
    assert_int_equal(acc, 1234);
    sl_buf_free(&out);
}

/* Bounds on what a peer sends (issue 25): the latest expiry a state of a duration may have, and
 * the check of a TransferKeysReq's records before any is merged. */
static void test_transfer_bounds(void **state)
{
    (void)state;
    const int64_t now = 1795972524601LL, D = 60000;
    assert_int_equal(sl_handoff_latest_expiry(now, D), now + 2 * D + 1000);
    /* 0..5 may name a Gregorian interval: a year; a short duration counts as a second */
    assert_int_equal(sl_handoff_latest_expiry(now, 3), now + 2 * 366LL * 86400000 + 1000);
    assert_int_equal(sl_handoff_latest_expiry(now, 10), now + 3000);
    assert_int_equal(sl_handoff_latest_expiry(now, INT64_MAX), INT64_MAX);
    assert_int_equal(sl_handoff_latest_expiry(INT64_MAX - 5, D), INT64_MAX);
    sl_state st = {.algorithm = SL_TOKEN_BUCKET};
    st.u.tb.limit = 5;
    st.u.tb.duration = D;
    st.u.tb.created_at = now;
    uint8_t recs[3 * SL_KEYSTATE_FIXED];
    size_t n = 0;
    n += sl_keystate_encode(1, now + D, &st, recs + n, sizeof recs - n);
    n += sl_keystate_encode(2, now + 2 * D, &st, recs + n, sizeof recs - n);
    assert_int_equal(n, 2 * SL_KEYSTATE_FIXED);
    size_t bad = 99;
    assert_int_equal(sl_handoff_check(NULL, recs, n, now, 0, &bad), 0);
    assert_int_equal(sl_handoff_check(NULL, recs, n, now, 2, &bad), 0);
    assert_int_equal(sl_handoff_check(NULL, recs, n, now, 1, &bad), -E2BIG);
    /* a third record locking its key out for a year: the whole call is refused, naming it */
    n += sl_keystate_encode(3, now + 365LL * 86400000, &st, recs + n, sizeof recs - n);
    assert_int_equal(sl_handoff_check(NULL, recs, n, now, 0, &bad), -ERANGE);
    assert_int_equal(bad, 2);
    /* the same record is fine for a limit whose duration is a year */
    st.u.tb.duration = 366LL * 86400000;
    size_t m = sl_keystate_encode(4, now + 365LL * 86400000, &st, recs, sizeof recs);
    assert_int_equal(sl_handoff_check(NULL, recs, m, now, 0, &bad), 0);
    /* malformed */
    recs[0] = 99;
    assert_int_equal(sl_handoff_check(NULL, recs, m, now, 0, &bad), -EINVAL);
    assert_int_equal(bad, 0);
}

int main(void)
{
    T0 = sl_wall_ms();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_move_to_their_owner),
        cmocka_unit_test(test_leaving_node_sends_everything),
        cmocka_unit_test(test_failed_sends_keep_the_keys),
        cmocka_unit_test(test_failed_sends_are_retried),
        cmocka_unit_test(test_transfer_messages),
        cmocka_unit_test(test_transfer_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

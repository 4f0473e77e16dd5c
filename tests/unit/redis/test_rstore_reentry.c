/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store's call records when a call's `done` submits another call at once (service.c's
 * fleet and give-back batches do): every call is answered exactly once, whatever state the store
 * is in. No Redis is needed: the store points at 127.0.0.1:1, which refuses connections, so every
 * script call fails (per-item errors) - from inside a submit that closes the worker's open script
 * call, and from the sweep of a stopping Redis Cluster worker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sluice/clock.h"
#include "redis/rstore.h"

typedef struct job {
    sl_rstore *rs;
    sl_batch b;
    int done;         /* times answered */
    struct job *then; /* submitted from this one's done callback */
} job;

static void job_init(job *j, sl_rstore *rs, int32_t alg, const char *key)
{
    memset(j, 0, sizeof *j);
    j->rs = rs;
    sl_batch_init(&j->b, 0);
    assert_int_equal(sl_batch_alloc_items(&j->b, 1), 0);
    sl_request *q = &j->b.reqs[0];
    memset(q, 0, sizeof *q);
    q->name = "re";
    q->name_len = 2;
    q->unique_key = key;
    q->unique_key_len = strlen(key);
    q->hits = 1;
    q->limit = 10;
    q->duration = 1000;
    q->algorithm = alg;
    q->burst = alg == SL_LEAKY_BUCKET ? 10 : 0;
}

static void done_cb(void *ud, sl_batch *b)
{
    (void)b;
    job *j = ud;
    j->done++;
    if (j->then)
        sl_rstore_submit(j->rs, 0, &j->then->b, sl_wall_ms(), done_cb, j->then);
}

/* Turn the loop for a while without blocking: the refused connect is seen. */
static void spin(uv_loop_t *l, int ms)
{
    int64_t end = sl_mono_ns() / 1000000 + ms;
    while (sl_mono_ns() / 1000000 < end)
        uv_run(l, UV_RUN_NOWAIT);
}

static sl_rstore *store(uv_loop_t *loop, bool cluster)
{
    const char *addrs[] = {"127.0.0.1:1"};
    sl_rstore_config c = {.addrs = addrs, .n_addrs = 1, .timeout_ms = 1000, .workers = 1,
                          .cluster = cluster};
    sl_rstore *rs;
    char err[256];
    assert_int_equal(sl_rstore_new(&c, &rs, err, sizeof err), 0);
    sl_rstore_worker_start(rs, 0, loop);
    return rs;
}

static void finish(uv_loop_t *loop, sl_rstore *rs, job *jobs, size_t n)
{
    sl_rstore_worker_stop(rs, 0);
    uv_run(loop, UV_RUN_DEFAULT);
    sl_rstore_free(rs);
    assert_int_equal(uv_loop_close(loop), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(jobs[i].done, 1);
        assert_non_null(jobs[i].b.resps[0].error); /* Redis refused: a per-item error */
        sl_batch_free(&jobs[i].b);
    }
}

/* X's open script call is closed by Z (another algorithm) while the server is unreachable: X
 * fails inside Z's submit, and X's done submits Y, which opens a script call of its own. Z must
 * not take Y's place: Y is answered too. */
static void test_submit_from_done_inside_a_submit(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    sl_rstore *rs = store(&loop, false);
    spin(&loop, 30);
    job j[3]; /* x, y, z */
    job_init(&j[0], rs, SL_TOKEN_BUCKET, "x");
    job_init(&j[1], rs, SL_GCRA, "y");
    job_init(&j[2], rs, SL_LEAKY_BUCKET, "z");
    j[0].then = &j[1];
    sl_rstore_submit(rs, 0, &j[0].b, sl_wall_ms(), done_cb, &j[0]);
    sl_rstore_submit(rs, 0, &j[2].b, sl_wall_ms(), done_cb, &j[2]);
    spin(&loop, 100);
    finish(&loop, rs, j, 3);
}

/* Redis Cluster with no topology yet: X waits (parked) for one; the worker stops, X fails, and
 * X's done submits Y during the stop. Y must be failed, not parked where nothing sweeps. */
static void test_cluster_stop_answers_everything(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    sl_rstore *rs = store(&loop, true);
    job j[2];
    job_init(&j[0], rs, SL_TOKEN_BUCKET, "x");
    job_init(&j[1], rs, SL_TOKEN_BUCKET, "y");
    j[0].then = &j[1];
    sl_rstore_submit(rs, 0, &j[0].b, sl_wall_ms(), done_cb, &j[0]);
    spin(&loop, 20);
    finish(&loop, rs, j, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_submit_from_done_inside_a_submit),
        cmocka_unit_test(test_cluster_stop_answers_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store with --redis-cluster (src/redis/rstore.c over redis/rslots.c) against a real
 * two-master Redis Cluster on free loopback ports (slots 0-8191 and 8192-16383, joined by CLUSTER
 * MEET), each answer compared with the memory engine's answer to the same request at the same
 * time: the topology read from a seed, a batch whose keys span both masters (each master holds
 * its keys), then a key's slot given to the other master (CLUSTER SETSLOT ... NODE): the store's
 * call is MOVED, followed, and the key's state stays whole. Skipped (exit 77) without
 * redis-server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "../../support/skip.h"
#include "redisproc.h"
#include "redis/rscript.h"
#include "redis/rslots.h"
#include "redis/rstore.h"

typedef struct fx {
    sl_test_redis m[2];
    redisContext *c[2];
    uv_loop_t loop;
    sl_rstore *rs;
    sl_engine *mem;
    sl_engine_config ec;
    sl_batch b;
    int64_t now;
} fx;

static redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    return r;
}

static bool cluster_ok(fx *f)
{
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        redisReply *r = cmd(f->c[i], "CLUSTER INFO");
        ok = ok && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
        freeReplyObject(r);
    }
    return ok;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void done_cb(void *ud, sl_batch *b)
{
    (void)b;
    *(bool *)ud = true;
}

/* Run the loop until the store's stats satisfy cond (bounded by a generous limit). */
static bool stats_reach(fx *f, bool (*cond)(const sl_rstore_stats *, uint64_t), uint64_t arg)
{
    sl_rstore_stats st;
    int64_t end = sl_mono_ns() / 1000000 + 15000;
    for (;;) {
        sl_rstore_stats_get(f->rs, &st);
        if (cond(&st, arg) || sl_mono_ns() / 1000000 > end)
            return cond(&st, arg);
        uv_run(&f->loop, UV_RUN_NOWAIT);
        sleep_ms(2);
    }
}

static bool refreshes_at_least(const sl_rstore_stats *st, uint64_t n)
{
    return st->refreshes >= n;
}

static bool connects_at_least(const sl_rstore_stats *st, uint64_t n)
{
    return st->connects >= n;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    *state = f;
    if (!sl_test_redis_installed())
        return 0;
    for (int i = 0; i < 2; i++) {
        f->m[i].cluster = true;
        assert_int_equal(sl_test_redis_start(&f->m[i]), 0);
        f->c[i] = redisConnect("127.0.0.1", f->m[i].port);
        assert_true(f->c[i] && !f->c[i]->err);
    }
    freeReplyObject(cmd(f->c[0], "CLUSTER ADDSLOTSRANGE 0 8191"));
    freeReplyObject(cmd(f->c[1], "CLUSTER ADDSLOTSRANGE 8192 16383"));
    freeReplyObject(cmd(f->c[0], "CLUSTER MEET 127.0.0.1 %d", f->m[1].port));
    for (int i = 0; i < 1000 && !cluster_ok(f); i++)
        sleep_ms(10);
    assert_true(cluster_ok(f));
    assert_int_equal(uv_loop_init(&f->loop), 0);
    sl_engine_config_default(&f->ec);
    assert_int_equal(sl_engine_new(&f->ec, &f->mem), 0);
    sl_batch_init(&f->b, 0);
    f->now = sl_wall_ms();
    const char *addrs[] = {f->m[1].addr}; /* the seed: either master will do */
    sl_rstore_config c = {.engine_cfg = &f->ec, .addrs = addrs, .n_addrs = 1, .timeout_ms = 1000,
                          .cluster = true, .cluster_refresh_ms = 50, .workers = 1};
    char err[256];
    assert_int_equal(sl_rstore_new(&c, &f->rs, err, sizeof err), 0);
    sl_rstore_worker_start(f->rs, 0, &f->loop);
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    if (f->rs) {
        sl_rstore_worker_stop(f->rs, 0);
        uv_run(&f->loop, UV_RUN_DEFAULT);
        sl_rstore_free(f->rs);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        sl_engine_free(f->mem);
        sl_batch_free(&f->b);
    }
    for (int i = 0; i < 2; i++) {
        if (f->c[i])
            redisFree(f->c[i]);
        sl_test_redis_stop(&f->m[i]);
    }
    free(f);
    return 0;
}

static sl_request req(const char *key, int64_t limit)
{
    sl_request q = {.name = "c", .name_len = 1, .unique_key = key,
                    .unique_key_len = strlen(key), .hits = 1, .limit = limit, .duration = 60000,
                    .algorithm = SL_TOKEN_BUCKET};
    return q;
}

/* Decide q[0..n) through the store and through the memory engine; the answers must agree. */
static void same_answers(fx *f, const sl_request *q, size_t n)
{
    sl_batch_reset(&f->b);
    assert_int_equal(sl_batch_alloc_items(&f->b, n), 0);
    memcpy(f->b.reqs, q, n * sizeof *q);
    bool done = false;
    sl_rstore_submit(f->rs, 0, &f->b, f->now, done_cb, &done);
    int64_t deadline = sl_mono_ns() / 1000000 + 15000;
    while (!done && sl_mono_ns() / 1000000 < deadline)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_true(done);
    for (size_t i = 0; i < n; i++) {
        sl_response want;
        sl_engine_decide(f->mem, &q[i], &want, f->now);
        const sl_response *got = &f->b.resps[i];
        if (got->error)
            fail_msg("item %zu: %s", i, got->error);
        if (want.status != got->status || want.remaining != got->remaining ||
            want.reset_time != got->reset_time)
            fail_msg("item %zu: memory {st %d rem %lld reset %lld} != redis {st %d rem %lld "
                     "reset %lld}", i, want.status, (long long)want.remaining,
                     (long long)want.reset_time, got->status, (long long)got->remaining,
                     (long long)got->reset_time);
    }
}

static long long dbsize(redisContext *c)
{
    redisReply *r = cmd(c, "DBSIZE");
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

static void wait_topology(fx *f)
{
    assert_true(stats_reach(f, refreshes_at_least, 1));
    assert_true(stats_reach(f, connects_at_least, 3)); /* the seed, then both masters */
}

static void test_batch_over_both_masters(void **state)
{
    fx *f = *state;
    SL_NEED(SL_TEST_REDIS_BIN, "redis-server");
    assert_non_null(f->rs); /* installed, so the set-up started the cluster */
    wait_topology(f);
    enum { N = 300 };
    static char keys[N][16];
    sl_request q[N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i % 200); /* 100 keys twice, in order */
        q[i] = req(keys[i], 5);
    }
    same_answers(f, q, N);
    same_answers(f, q, N);
    /* each master holds its share of the 200 keys */
    long long a = dbsize(f->c[0]), b = dbsize(f->c[1]);
    assert_int_equal(a + b, 200);
    assert_true(a > 50 && b > 50);
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.errors, 0);
    assert_int_equal(st.redirects, 0);
}

/* q's key, alone in its slot, moved by hand from its master to the other one: the slot set
 * IMPORTING on `to` and MIGRATING on `from`, the key MIGRATEd. The slot stays `from`'s until
 * give_slot. Writes to_id (64 bytes); returns the slot, with *from_out and *to_out. */
static unsigned migrate_key(fx *f, const sl_request *q, int *from_out, int *to_out, char *to_id)
{
    char key[SL_RSCRIPT_KEY_MAX];
    size_t klen = sl_rscript_key(key, q);
    unsigned slot = sl_rslots_key_slot(key, klen);
    int from = slot < 8192 ? 0 : 1, to = 1 - from;
    assert_int_equal(dbsize(f->c[from]), 1);
    redisReply *id = cmd(f->c[to], "CLUSTER MYID");
    snprintf(to_id, 64, "%s", id->str);
    freeReplyObject(id);
    redisReply *fid = cmd(f->c[from], "CLUSTER MYID");
    freeReplyObject(cmd(f->c[to], "CLUSTER SETSLOT %u IMPORTING %s", slot, fid->str));
    freeReplyObject(cmd(f->c[from], "CLUSTER SETSLOT %u MIGRATING %s", slot, to_id));
    freeReplyObject(fid);
    redisReply *m = cmd(f->c[from], "MIGRATE 127.0.0.1 %d %b 0 5000", f->m[to].port, key, klen);
    assert_int_equal(m->type, REDIS_REPLY_STATUS);
    freeReplyObject(m);
    *from_out = from;
    *to_out = to;
    return slot;
}

/* The slot given to `to` on both masters (CLUSTER SETSLOT NODE). */
static void give_slot(fx *f, unsigned slot, const char *to_id)
{
    for (int i = 0; i < 2; i++)
        freeReplyObject(cmd(f->c[i], "CLUSTER SETSLOT %u NODE %s", slot, to_id));
}

static void test_moved_is_followed(void **state)
{
    fx *f = *state;
    SL_NEED(SL_TEST_REDIS_BIN, "redis-server");
    assert_non_null(f->rs); /* installed, so the set-up started the cluster */
    wait_topology(f);
    sl_request q = req("moving", 4);
    same_answers(f, &q, 1);
    /* the (empty but for this key) slot's key moved by hand, then the slot given to `to` */
    int from, to;
    char to_id[64];
    unsigned slot = migrate_key(f, &q, &from, &to, to_id);
    give_slot(f, slot, to_id);
    assert_int_equal(dbsize(f->c[from]), 0);
    assert_int_equal(dbsize(f->c[to]), 1);
    /* still routed to `from`: MOVED, followed; the state moved with the key */
    same_answers(f, &q, 1);
    same_answers(f, &q, 1);
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_true(st.redirects >= 1);
    assert_int_equal(st.errors, 0);
    assert_true(stats_reach(f, refreshes_at_least, 2)); /* the refresh the MOVED asked for */
    uint64_t redirects = st.redirects;
    same_answers(f, &q, 1); /* the new topology: straight to `to` */
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.redirects, redirects);
}

/* ASK to a master that lost its scripts (a restart, SCRIPT FLUSH): the NOSCRIPT's EVAL is sent
 * after ASKING again, else the importing master would answer MOVED and the item would fail. */
static void test_ask_then_noscript(void **state)
{
    fx *f = *state;
    SL_NEED(SL_TEST_REDIS_BIN, "redis-server");
    assert_non_null(f->rs); /* installed, so the set-up started the cluster */
    wait_topology(f);
    sl_request q = req("asked", 4);
    same_answers(f, &q, 1);
    int from, to;
    char to_id[64];
    unsigned slot = migrate_key(f, &q, &from, &to, to_id);
    freeReplyObject(cmd(f->c[to], "SCRIPT FLUSH"));
    /* the slot is still `from`'s, migrating: ASK, then NOSCRIPT on `to`, then EVAL after ASKING */
    same_answers(f, &q, 1);
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.errors, 0);
    assert_true(st.redirects >= 1);
    assert_true(st.reloads >= 1);
    give_slot(f, slot, to_id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_over_both_masters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_moved_is_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ask_then_noscript, setup, teardown),
    };
    return sl_skip_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store (src/redis/rstore.c) against a real redis-server on a free loopback port, each
 * answer compared with the memory engine's answer to the same request at the same time: a table of
 * TOKEN_BUCKET sequences (Gubernator's rules one by one), a seeded random walk, a 1000-item call in
 * one pipeline; the keys' TTLs (SET PX or KEEPTTL, never none), a script called by hand with text
 * arguments and its binary answer; then the faults: NOSCRIPT after SCRIPT FLUSH, Redis stopped
 * (per-item errors, or the engine's answers under fail-open), Redis back on the same port (used
 * again), and a server that stops answering (--redis-timeout). Skipped (exit 77) without
 * redis-server.
 *
 * Times: decisions take `now` from the test (a virtual clock starting at the wall clock's
 * value), so expiry and Gregorian intervals are exact; only the fault cases wait for real events
 * (a connection lost, a deadline), in loops bounded by generous limits.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../support/skip.h"
#include "core/concurrency.h"
#include "redisproc.h"
#include "redis/rscript.h"
#include "redis/rstore.h"

#define SEC INT64_C(1000)
#define MINUTE (60 * SEC)

typedef struct fx {
    sl_test_redis redis;
    uv_loop_t loop;
    sl_rstore *rs;
    sl_engine *mem;     /* the reference */
    sl_engine *local;   /* the fail-open engine of rs */
    sl_engine_config ec;
    sl_batch b;
    int64_t now;
    char prefix[32];    /* per test run, so that reruns against one server never meet */
    int64_t batch_items;
} fx;

static void done_cb(void *ud, sl_batch *b)
{
    (void)b;
    *(bool *)ud = true;
}

static void run_until(fx *f, bool (*cond)(fx *), int64_t max_ms)
{
    int64_t deadline = sl_mono_ns() / 1000000 + max_ms;
    while (!cond(f) && sl_mono_ns() / 1000000 < deadline)
        uv_run(&f->loop, UV_RUN_ONCE);
}

static uint64_t connects_seen;
static bool connected(fx *f)
{
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    return st.connects > connects_seen;
}

static void wait_connected(fx *f)
{
    run_until(f, connected, 15000);
    assert_true(connected(f));
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    connects_seen = st.connects;
}

static void make_store(fx *f, bool fail_open, int64_t timeout_ms)
{
    const char *addrs[] = {f->redis.addr};
    sl_rstore_config c = {.engine = f->local, .engine_cfg = &f->ec, .addrs = addrs, .n_addrs = 1,
                          .timeout_ms = timeout_ms, .fail_open = fail_open, .workers = 1,
                          .batch_items = f->batch_items};
    char err[256];
    assert_int_equal(sl_rstore_new(&c, &f->rs, err, sizeof err), 0);
    connects_seen = 0;
    sl_rstore_worker_start(f->rs, 0, &f->loop);
}

static int setup_opts(void **state, bool fail_open, int64_t timeout_ms, int64_t batch_items)
{
    fx *f = calloc(1, sizeof *f);
    *state = f;
    f->batch_items = batch_items;
    if (!sl_test_redis_installed())
        return 0;
    assert_int_equal(sl_test_redis_start(&f->redis), 0);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    sl_engine_config_default(&f->ec);
    assert_int_equal(sl_engine_new(&f->ec, &f->mem), 0);
    assert_int_equal(sl_engine_new(&f->ec, &f->local), 0);
    sl_batch_init(&f->b, 0);
    f->now = sl_wall_ms();
    snprintf(f->prefix, sizeof f->prefix, "t%lld", (long long)f->now);
    make_store(f, fail_open, timeout_ms);
    wait_connected(f);
    return 0;
}

static int setup(void **state)
{
    return setup_opts(state, false, 1000, 0);
}

static int setup_small_batches(void **state)
{
    return setup_opts(state, false, 1000, 7);
}

static int setup_fail_open(void **state)
{
    return setup_opts(state, true, 200, 0);
}

static int teardown(void **state)
{
    fx *f = *state;
    if (f->rs) {
        sl_rstore_worker_stop(f->rs, 0);
        uv_run(&f->loop, UV_RUN_DEFAULT); /* the closes */
        sl_rstore_free(f->rs);
        assert_int_equal(uv_loop_close(&f->loop), 0);
        sl_engine_free(f->mem);
        sl_engine_free(f->local);
        sl_batch_free(&f->b);
    }
    sl_test_redis_stop(&f->redis);
    free(f);
    return 0;
}

#define NEED_REDIS(f)                                                                              \
    do {                                                                                           \
        SL_NEED(SL_TEST_REDIS_BIN, "redis-server");                                                \
        assert_non_null((f)->rs); /* installed, so the set-up started it */                        \
    } while (0)

/* Decide n requests through the Redis store at f->now; answers in out. */
static void via_redis(fx *f, const sl_request *q, size_t n, sl_response *out)
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
    memcpy(out, f->b.resps, n * sizeof *out);
}

static void assert_same(const sl_response *want, const sl_response *got, const char *what)
{
    if (want->error || got->error) {
        if (!want->error || !got->error || strcmp(want->error, got->error) != 0)
            fail_msg("%s: error '%s' != '%s'", what, want->error ? want->error : "(none)",
                     got->error ? got->error : "(none)");
        return;
    }
    if (want->delay_ms != got->delay_ms)
        fail_msg("%s: delay_ms %lld != %lld", what, (long long)want->delay_ms,
                 (long long)got->delay_ms);
    if (want->status != got->status || want->limit != got->limit ||
        want->remaining != got->remaining || want->reset_time != got->reset_time ||
        want->retry_after != got->retry_after || want->delay_ms != got->delay_ms)
        fail_msg("%s: memory {st %d lim %lld rem %lld reset %lld retry %lld} != redis {st %d lim "
                 "%lld rem %lld reset %lld retry %lld}",
                 what, want->status, (long long)want->limit, (long long)want->remaining,
                 (long long)want->reset_time, (long long)want->retry_after, got->status,
                 (long long)got->limit, (long long)got->remaining, (long long)got->reset_time,
                 (long long)got->retry_after);
}

/* One step of a sequence: time moves dt ms, then the request. */
typedef struct step {
    int64_t dt;
    int64_t hits, limit, duration;
    int32_t behavior;
    int64_t created_ago; /* created_at = now - created_ago when > 0 */
    int32_t algorithm;
    int64_t burst;
    int64_t max_delay;
    int32_t sub_windows;
} step;

static sl_request mkreq(const fx *f, const char *key, const step *s)
{
    sl_request q = {0};
    q.name = f->prefix;
    q.name_len = strlen(f->prefix);
    q.unique_key = key;
    q.unique_key_len = strlen(key);
    q.hits = s->hits;
    q.limit = s->limit;
    q.duration = s->duration;
    q.behavior = s->behavior;
    q.algorithm = s->algorithm;
    q.burst = s->burst;
    q.max_delay_ms = s->max_delay;
    q.sub_windows = s->sub_windows;
    if (s->created_ago > 0)
        q.created_at = f->now - s->created_ago;
    return q;
}

static void check_step(fx *f, const char *key, const step *s, const char *what)
{
    f->now += s->dt;
    sl_request q = mkreq(f, key, s);
    sl_response want, got;
    sl_engine_decide(f->mem, &q, &want, f->now);
    via_redis(f, &q, 1, &got);
    assert_same(&want, &got, what);
}

#define G SL_DURATION_IS_GREGORIAN
#define R SL_RESET_REMAINING
#define D SL_DRAIN_OVER_LIMIT

typedef struct seq {
    const char *name;
    step s[12];
} seq;

/* TOKEN_BUCKET, LEAKY_BUCKET, FIXED_WINDOW and SLIDING_LOG steps: T(dt, hits, limit, duration,
 * behavior, created_ago), L(dt, hits, limit, duration, burst, behavior), F and G_ as T;
 * GCRA: C(dt, hits, limit, duration, burst, behavior, max_delay); SLIDING_WINDOW:
 * W(dt, hits, limit, duration, sub_windows, behavior, created_ago). */
#define T(dt, h, l, d, beh, ago) {dt, h, l, d, beh, ago, SL_TOKEN_BUCKET, 0, 0, 0}
#define L(dt, h, l, d, b, beh) {dt, h, l, d, beh, 0, SL_LEAKY_BUCKET, b, 0, 0}
#define F(dt, h, l, d, beh, ago) {dt, h, l, d, beh, ago, SL_FIXED_WINDOW, 0, 0, 0}
#define G_(dt, h, l, d, beh, ago) {dt, h, l, d, beh, ago, SL_SLIDING_LOG, 0, 0, 0}
#define C(dt, h, l, d, b, beh, delay) {dt, h, l, d, beh, 0, SL_GCRA, b, delay, 0}
#define W(dt, h, l, d, sub, beh, ago) {dt, h, l, d, beh, ago, SL_SLIDING_WINDOW, 0, 0, sub}
#define END {-1, 0, 0, 0, 0, 0, 0, 0, 0, 0}

static const seq table[] = {
    {"over the limit",
     {T(0, 1, 2, 9 * SEC, 0, 0), T(0, 1, 2, 9 * SEC, 0, 0), T(0, 1, 2, 9 * SEC, 0, 0), END}},
    {"sticky over limit",
     {T(0, 2, 2, MINUTE, 0, 0), T(1, 1, 2, MINUTE, 0, 0), T(1, 0, 2, MINUTE, 0, 0),
      T(1, 0, 5, MINUTE, 0, 0), T(1, 1, 5, MINUTE, 0, 0), END}},
    {"too many at once",
     {T(0, 5, 3, MINUTE, 0, 0), T(0, 3, 3, MINUTE, 0, 0), T(0, 1, 3, MINUTE, 0, 0), END}},
    {"more than remaining",
     {T(0, 2, 5, MINUTE, 0, 0), T(0, 4, 5, MINUTE, 0, 0), T(0, 3, 5, MINUTE, 0, 0), END}},
    {"drain over limit",
     {T(0, 2, 5, MINUTE, 0, 0), T(0, 4, 5, MINUTE, D, 0), T(0, 1, 5, MINUTE, 0, 0), END}},
    {"reset remaining",
     {T(0, 5, 5, MINUTE, 0, 0), T(0, 1, 5, MINUTE, 0, 0), T(0, 1, 5, MINUTE, R, 0),
      T(0, 1, 5, MINUTE, 0, 0), T(0, 0, 7, MINUTE, R, 0), END}},
    {"negative hits",
     {T(0, 4, 5, MINUTE, 0, 0), T(0, -3, 5, MINUTE, 0, 0), T(0, -10, 5, MINUTE, 0, 0),
      T(0, 12, 5, MINUTE, 0, 0), END}},
    {"limit grows and shrinks",
     {T(0, 3, 5, MINUTE, 0, 0), T(0, 1, 10, MINUTE, 0, 0), T(0, 1, 2, MINUTE, 0, 0),
      T(0, 1, 2, MINUTE, 0, 0), T(0, 1, 20, MINUTE, 0, 0), END}},
    {"expires after its duration",
     {T(0, 3, 3, 10 * SEC, 0, 0), T(5000, 1, 3, 10 * SEC, 0, 0), T(5001, 1, 3, 10 * SEC, 0, 0),
      T(1, 1, 3, 10 * SEC, 0, 0), END}},
    {"duration change renews",
     {T(0, 2, 3, MINUTE, 0, 0), T(30 * SEC, 1, 3, 10 * SEC, 0, 0), T(0, 1, 3, 10 * SEC, 0, 0),
      T(0, 1, 3, 2 * MINUTE, 0, 0), END}},
    {"zero duration",
     {T(0, 1, 3, 0, 0, 0), T(0, 1, 3, 0, 0, 0), T(1, 1, 3, 0, 0, 0), END}},
    {"created_at in the past",
     {T(0, 1, 3, 10 * SEC, 0, 4000), T(0, 1, 3, 10 * SEC, 0, 9000), T(0, 1, 3, 10 * SEC, 0, 20000),
      END}},
    {"gregorian minutes",
     {T(0, 1, 2, SL_GREGORIAN_MINUTES, G, 0), T(0, 2, 2, SL_GREGORIAN_MINUTES, G, 0),
      T(MINUTE, 1, 2, SL_GREGORIAN_MINUTES, G, 0), END}},
    {"gregorian hours to months",
     {T(0, 1, 2, SL_GREGORIAN_HOURS, G, 0), T(0, 1, 2, SL_GREGORIAN_MONTHS, G, 0),
      T(0, 1, 2, SL_GREGORIAN_YEARS, G, 0), T(0, 1, 2, SL_GREGORIAN_DAYS, G, 0), END}},
    {"gregorian weeks rejected",
     {T(0, 1, 2, SL_GREGORIAN_WEEKS, G, 0), END}},
    {"invalid requests",
     {T(0, 1, -1, MINUTE, 0, 0), T(0, 1, 2, -5, 0, 0), T(0, INT64_C(1) << 60, 2, MINUTE, 0, 0),
      T(0, 1, 2, MINUTE, 0, 0), END}},
    {"peek",
     {T(0, 0, 3, MINUTE, 0, 0), T(0, 3, 3, MINUTE, 0, 0), T(0, 0, 3, MINUTE, 0, 0),
      T(0, 1, 3, MINUTE, 0, 0), T(0, 0, 3, MINUTE, 0, 0), END}},
};

static const seq table2[] = {
    {"leaky: leaks over time",
     {L(0, 5, 5, 5 * SEC, 0, 0), L(0, 1, 5, 5 * SEC, 0, 0), L(999, 1, 5, 5 * SEC, 0, 0),
      L(1, 1, 5, 5 * SEC, 0, 0), L(2500, 0, 5, 5 * SEC, 0, 0), L(10 * SEC, 2, 5, 5 * SEC, 0, 0),
      END}},
    {"leaky: burst",
     {L(0, 8, 5, 5 * SEC, 10, 0), L(0, 3, 5, 5 * SEC, 10, 0), L(500, 1, 5, 5 * SEC, 3, 0),
      L(0, 1, 5, 5 * SEC, 20, 0), L(0, 25, 5, 5 * SEC, 20, 0), END}},
    {"leaky: fractions",
     {L(0, 3, 3, 10 * SEC, 0, 0), L(3333, 1, 3, 10 * SEC, 0, 0), L(1, 0, 3, 10 * SEC, 0, 0),
      L(3333, 1, 3, 10 * SEC, 0, 0), L(7, 1, 3, 10 * SEC, 0, D), END}},
    {"leaky: reset, drain, negative",
     {L(0, 4, 5, MINUTE, 0, 0), L(0, 3, 5, MINUTE, 0, D), L(0, 1, 5, MINUTE, 0, R),
      L(0, -7, 5, MINUTE, 0, 0), L(0, 0, 5, MINUTE, 0, 0), L(0, 9, 5, MINUTE, 0, 0), END}},
    {"leaky: limit 0 and duration 0",
     {L(0, 1, 0, MINUTE, 0, 0), L(10, 1, 0, MINUTE, 0, 0), L(0, 1, 3, 0, 0, 0),
      L(10, 1, 3, 0, 0, 0), L(0, 0, 0, 0, 0, 0), END}},
    {"leaky: gregorian",
     {L(0, 1, 60, SL_GREGORIAN_MINUTES, 0, G), L(500, 1, 60, SL_GREGORIAN_MINUTES, 0, G),
      L(1500, 2, 24, SL_GREGORIAN_DAYS, 0, G), L(0, 1, 2, SL_GREGORIAN_MONTHS, 0, G), END}},
    {"fixed: window and its edge",
     {F(0, 2, 3, 10 * SEC, 0, 0), F(0, 1, 3, 10 * SEC, 0, 0), F(0, 1, 3, 10 * SEC, 0, 0),
      F(10 * SEC, 1, 3, 10 * SEC, 0, 0), F(0, 3, 3, 10 * SEC, 0, 0), END}},
    {"fixed: drain, negative, reset",
     {F(0, 2, 5, MINUTE, 0, 0), F(0, 9, 5, MINUTE, D, 0), F(0, -2, 5, MINUTE, 0, 0),
      F(0, -9, 5, MINUTE, 0, 0), F(0, 4, 5, MINUTE, 0, 0), F(0, 1, 5, MINUTE, R, 0), END}},
    {"fixed: created_at before the window",
     {F(0, 1, 3, SEC, 0, 0), F(1200, 1, 3, SEC, 0, 0), F(0, 1, 3, SEC, 0, 1500),
      F(0, 1, 3, SEC, 0, 0), F(0, 1, 3, SEC, 0, 0), END}},
    {"fixed: duration change",
     {F(0, 2, 3, MINUTE, 0, 0), F(0, 2, 3, 2 * MINUTE, 0, 0), F(0, 2, 3, 2 * MINUTE, 0, 0),
      END}},
    {"log: slides",
     {G_(0, 2, 3, 10 * SEC, 0, 0), G_(4000, 1, 3, 10 * SEC, 0, 0), G_(0, 1, 3, 10 * SEC, 0, 0),
      G_(6000, 1, 3, 10 * SEC, 0, 0), G_(1, 2, 3, 10 * SEC, 0, 0), G_(4000, 4, 3, 10 * SEC, 0, 0),
      END}},
    {"log: drain, give back, reset",
     {G_(0, 2, 5, MINUTE, 0, 0), G_(10, 9, 5, MINUTE, D, 0), G_(10, -2, 5, MINUTE, 0, 0),
      G_(10, -9, 5, MINUTE, 0, 0), G_(10, 4, 5, MINUTE, 0, 0), G_(0, 1, 5, MINUTE, R, 0), END}},
    {"log: limit lowered and raised, created_at",
     {G_(0, 5, 5, MINUTE, 0, 0), G_(0, 1, 2, MINUTE, 0, 0), G_(0, -4, 2, MINUTE, 0, 0),
      G_(0, 1, 8, MINUTE, 0, 3000), G_(0, 1, 8, MINUTE, 0, 0), END}},
    {"gcra: paces, bursts",
     {C(0, 1, 10, SEC, 0, 0, 0), C(0, 1, 10, SEC, 0, 0, 0), C(99, 1, 10, SEC, 0, 0, 0),
      C(1, 1, 10, SEC, 0, 0, 0), C(0, 3, 10, SEC, 4, 0, 0), C(0, 3, 10, SEC, 4, 0, 0),
      C(0, 9, 10, SEC, 4, 0, 0), C(5000, 0, 10, SEC, 4, 0, 0), END}},
    {"gcra: thirds of a millisecond",
     {C(0, 1, 3, 1000, 1, 0, 0), C(0, 1, 3, 1000, 1, 0, 0), C(0, 1, 3, 1000, 1, 0, 0),
      C(333, 1, 3, 1000, 1, 0, 0), C(1, 1, 3, 1000, 1, 0, 0), C(0, 1, 7, 1000, 1, 0, 0),
      C(0, 1, 2, 1000, 1, 0, 0), END}},
    {"gcra: a delay of exactly max_delay",
     {C(0, 1, 10, SEC, 0, 0, 0), C(0, 1, 10, SEC, 0, 0, 100), C(0, 1, 10, SEC, 0, 0, 199), END}},
    {"gcra: delay instead of reject",
     {C(0, 2, 10, SEC, 1, 0, 0), C(0, 1, 10, SEC, 1, 0, 250), C(0, 1, 10, SEC, 1, 0, 250),
      C(0, 1, 10, SEC, 1, 0, 50), C(0, 3, 10, SEC, 1, 0, 5000), END}},
    {"gcra: drain, give back, reset, rate 0",
     {C(0, 1, 4, SEC, 2, 0, 0), C(0, 9, 4, SEC, 2, D, 0), C(0, -2, 4, SEC, 2, 0, 0),
      C(0, -50, 4, SEC, 2, 0, 0), C(0, 2, 4, SEC, 2, 0, 0), C(0, 1, 4, SEC, 2, R, 0),
      C(0, 1, 0, SEC, 2, 0, 0), C(0, 0, 4, SEC, 2, 0, 0), END}},
#define W10(dt, h) W(dt, h, 5, 10 * SEC, 0, 0, 0)
#define W6(dt, h, beh) W(dt, h, 6, 6 * SEC, 3, beh, 0)
    {"window: classic estimate",
     {W10(0, 4), W10(9000, 1), W10(2000, 1), W10(0, 3), W10(5000, 2), W10(0, 9), END}},
    {"window: sub-windows",
     {W6(0, 3, 0), W6(2500, 2, 0), W6(2000, 2, 0), W6(2000, 3, 0), W6(100, 1, D), W6(0, -4, 0),
      W6(20 * SEC, 1, 0), W(0, 1, 6, 6 * SEC, 2, 0, 0), END}},
    {"window: created_at, reset",
     {W(0, 2, 4, 4 * SEC, 4, 0, 0), W(1500, 1, 4, 4 * SEC, 4, 0, 2500),
      W(0, 1, 4, 4 * SEC, 4, R, 0), END}},
    {"fixed: gregorian",
     {F(0, 1, 2, SL_GREGORIAN_HOURS, G, 0), F(0, 2, 2, SL_GREGORIAN_HOURS, G, 0),
      F(0, 1, 2, SL_GREGORIAN_YEARS, G, 0), F(0, 1, 2, SL_GREGORIAN_WEEKS, G, 0),
      F(0, 1, 2, SL_GREGORIAN_MONTHS, G, MINUTE), END}},
};

static void test_table(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
        char key[64];
        snprintf(key, sizeof key, "table-%zu", k);
        for (int i = 0; table[k].s[i].dt >= 0; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s, step %d", table[k].name, i);
            check_step(f, key, &table[k].s[i], what);
        }
    }
    for (size_t k = 0; k < sizeof table2 / sizeof table2[0]; k++) {
        char key[64];
        snprintf(key, sizeof key, "table2-%zu", k);
        for (int i = 0; table2[k].s[i].dt >= 0; i++) {
            char what[128];
            snprintf(what, sizeof what, "%s, step %d", table2[k].name, i);
            check_step(f, key, &table2[k].s[i], what);
        }
    }
}

static int64_t rnd(uint64_t *x, int64_t n)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return (int64_t)((*x >> 33) % (uint64_t)n);
}
#define RND(n) rnd(&x, n)

/* A seeded random walk over a few keys of one algorithm: hits -2..5, limits, bursts and
 * durations that change now and then (Gregorian intervals too), the behaviour flags, created_at,
 * time moving by 0..4 s. */
static void random_walk(fx *f, int32_t alg, uint64_t x, int steps)
{
    int64_t limit[6], dur[6], burst[6];
    int32_t greg[6];
    for (int k = 0; k < 6; k++)
        limit[k] = 1 + RND(10), dur[k] = (1 + RND(10)) * SEC, burst[k] = 0, greg[k] = 0;
    for (int i = 0; i < steps; i++) {
        int k = (int)RND(6);
        if (RND(alg == SL_GCRA ? 4 : 20) == 0)
            limit[k] = RND(12);
        if (RND(25) == 0) {
            dur[k] = RND(12) * SEC;
            greg[k] = 0;
        }
        if (alg != SL_FIXED_WINDOW && RND(20) == 0)
            dur[k] = (1 + RND(10)) * 100; /* fast leaks and short buckets */
        if (alg != SL_FIXED_WINDOW && alg != SL_TOKEN_BUCKET && dur[k] == 0)
            dur[k] = 1; /* not a valid window */
        if ((alg == SL_FIXED_WINDOW || alg == SL_SLIDING_LOG || alg == SL_GCRA) && dur[k] == 0)
            dur[k] = SEC;
        if (alg != SL_SLIDING_LOG && alg != SL_GCRA && alg != SL_SLIDING_WINDOW && RND(60) == 0) {
            const int64_t kinds[] = {SL_GREGORIAN_MINUTES, SL_GREGORIAN_HOURS, SL_GREGORIAN_DAYS,
                                     SL_GREGORIAN_MONTHS, SL_GREGORIAN_YEARS};
            dur[k] = kinds[RND(5)];
            greg[k] = SL_DURATION_IS_GREGORIAN;
        }
        if ((alg == SL_LEAKY_BUCKET || alg == SL_GCRA) && RND(15) == 0)
            burst[k] = RND(15);
        int64_t dt = RND(5);
        dt *= RND(3) ? 100 : 1000;
        step s = {dt, RND(8) - 2, limit[k], dur[k], greg[k], 0, alg, burst[k], 0, 0};
        int64_t b = RND(30);
        s.behavior |= b == 0 ? R : b == 1 ? D : 0;
        if (RND(10) == 0)
            s.created_ago = RND(3000);
        if (alg == SL_GCRA && RND(4) == 0)
            s.max_delay = RND(2000);
        if (alg == SL_SLIDING_WINDOW) {
            const int32_t subs[] = {0, 1, 2, 4, 5};
            s.sub_windows = subs[k % 5];
            if (dur[k] % 20) /* a multiple of every sub-window count */
                dur[k] += 20 - dur[k] % 20;
            s.duration = dur[k];
        }
        char key[32], what[64];
        snprintf(key, sizeof key, "walk-%d-%d", alg, k);
        snprintf(what, sizeof what, "%s: random step %d (key %d)", sl_algorithm_name(alg), i, k);
        check_step(f, key, &s, what);
    }
}

static void test_random_token_bucket(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    random_walk(f, SL_TOKEN_BUCKET, 0x9e3779b97f4a7c15u, 1500);
}

static void test_random_leaky_bucket(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    random_walk(f, SL_LEAKY_BUCKET, 0x2545f4914f6cdd1du, 1500);
}

static void test_random_sliding_log(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    random_walk(f, SL_SLIDING_LOG, 0x8cb92ba72f3d8dd7u, 1500);
}

static void test_random_sliding_window(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    random_walk(f, SL_SLIDING_WINDOW, 0xbb67ae8584caa73bu, 1500);
}

static void test_random_gcra(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    random_walk(f, SL_GCRA, 0x6a09e667f3bcc909u, 1500);
}

/* Numbers whose exact arithmetic passes 2^53 (GCRA in 1/limit ms, a sliding window's limit * w):
 * a per-item error, not a wrong answer. */
static void test_exact_range(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    step s = {0, 1, 1000, INT64_C(1) << 40, 0, 0, SL_GCRA, 1 << 20, 0, 0};
    sl_request q = mkreq(f, "huge", &s);
    sl_response r;
    via_redis(f, &q, 1, &r);
    assert_ptr_equal(r.error, sl_rscript_err_range);
    step w = {0, 1, INT64_C(1) << 40, INT64_C(1) << 20, 0, 0, SL_SLIDING_WINDOW, 0, 0, 0};
    q = mkreq(f, "huge-window", &w);
    via_redis(f, &q, 1, &r);
    assert_ptr_equal(r.error, sl_rscript_err_range);
}

static void test_random_fixed_window(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    random_walk(f, SL_FIXED_WINDOW, 0xda942042e4dd58b5u, 1500);
}

/* 1000 items in one call: one pipeline on the worker's connection, answers in request order,
 * repeated keys decided in order. */
static void test_batch(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    enum { N = 1000 };
    static sl_request q[N];
    static sl_response want[N], got[N];
    static char keys[N][16];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(keys[i], sizeof keys[i], "b%d", i % 30);
            step s = {0, 1 + i % 3, 20, MINUTE, 0, 0, 0, 0, 0, 0};
            q[i] = mkreq(f, keys[i], &s);
        }
        sl_engine_decide_batch(f->mem, q, want, N, f->now);
        via_redis(f, q, N, got);
        for (int i = 0; i < N; i++)
            assert_same(&want[i], &got[i], "batch item");
        f->now += 100;
    }
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.items, 3 * N);
}

/* CONCURRENCY: lease ids differ between the stores (each makes its own, unguessable), so the walk
 * keeps the pairs of ids the two stores gave for each acquire and releases or renews a lease by
 * its id in each; every other field of every answer must be the same. */
static void test_random_concurrency(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    enum { K = 4, MAXL = 32 };
    uint64_t x = 0x510e527fade682d1u;
    static uint64_t mem_ids[K][MAXL], red_ids[K][MAXL];
    int nids[K] = {0};
    int64_t limit[K];
    for (int k = 0; k < K; k++)
        limit[k] = 1 + RND(5);
    for (int i = 0; i < 1500; i++) {
        int k = (int)RND(K);
        if (RND(20) == 0)
            limit[k] = RND(6);
        int64_t op = RND(4); /* acquire, acquire, release, renew or peek */
        step s = {RND(5) * 250, op < 2 ? 1 : op == 2 ? -1 : 0, limit[k], 2000, 0, 0,
                  SL_CONCURRENCY, 0, 0, 0};
        if (RND(40) == 0)
            s.behavior = R;
        char key[32], what[64];
        snprintf(key, sizeof key, "leases-%d", k);
        snprintf(what, sizeof what, "CONCURRENCY: random step %d (key %d)", i, k);
        sl_request qm = mkreq(f, key, &s), qr = qm;
        int j = -1;
        if (s.hits <= 0 && nids[k] > 0 && (s.hits < 0 || RND(2))) {
            j = (int)RND(nids[k]);
            qm.lease_id = mem_ids[k][j];
            qr.lease_id = red_ids[k][j];
        } else if (s.hits < 0) {
            qm.lease_id = qr.lease_id = 0x1234; /* held by neither */
        }
        f->now += s.dt;
        sl_response want, got;
        sl_engine_decide(f->mem, &qm, &want, f->now);
        via_redis(f, &qr, 1, &got);
        assert_int_equal(want.lease_id != 0, got.lease_id != 0);
        uint64_t wl = want.lease_id, gl = got.lease_id;
        want.lease_id = got.lease_id = 0;
        assert_same(&want, &got, what);
        if (wl) {
            if (nids[k] == MAXL) { /* forget the oldest pair */
                memmove(mem_ids[k], mem_ids[k] + 1, (MAXL - 1) * sizeof(uint64_t));
                memmove(red_ids[k], red_ids[k] + 1, (MAXL - 1) * sizeof(uint64_t));
                nids[k]--;
            }
            mem_ids[k][nids[k]] = wl;
            red_ids[k][nids[k]++] = gl;
        }
        if (s.hits < 0 && j >= 0 && !want.error) {
            mem_ids[k][j] = mem_ids[k][--nids[k]];
            red_ids[k][j] = red_ids[k][nids[k]];
        }
    }
}

/* Send one command (inline, or RESP) to the server and read (the start of) its answer: the number
 * of bytes read (out is NUL-terminated after them). */
static ssize_t redis_cmd(const fx *f, const char *cmd, char *out, size_t outlen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->redis.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    ssize_t n = read(fd, out, outlen - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    return n;
}

/* Script calls run by the server so far (EVALSHA and EVAL), from INFO commandstats. */
static long long script_calls(const fx *f)
{
    char buf[8192];
    redis_cmd(f, "INFO commandstats\r\n", buf, sizeof buf);
    long long n = 0;
    static const char *const names[] = {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="};
    for (size_t i = 0; i < 2; i++) {
        const char *at = strstr(buf, names[i]);
        if (at)
            n += atoll(at + strlen(names[i]));
    }
    return n;
}

/* Calls submitted in one turn of the loop share script calls: three one-item calls of one key
 * and algorithm are one EVALSHA, decided in the order they came (each sees the hits before it),
 * and a call of another algorithm after them starts a second one. */
static void test_calls_share_a_script_call(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    enum { N = 4 };
    sl_batch b[N];
    bool done[N] = {false};
    step tb = {0, 0, 10, MINUTE, 0, 0, 0, 0, 0, 0};
    step fw = {0, 1, 10, MINUTE, 0, 0, SL_FIXED_WINDOW, 0, 0, 0};
    long long before = script_calls(f);
    for (int i = 0; i < N; i++) {
        sl_batch_init(&b[i], 0);
        assert_int_equal(sl_batch_alloc_items(&b[i], 1), 0);
        tb.hits = i + 1;
        b[i].reqs[0] = i < 3 ? mkreq(f, "share", &tb) : mkreq(f, "share", &fw);
        sl_rstore_submit(f->rs, 0, &b[i], f->now, done_cb, &done[i]);
    }
    for (int i = 0; i < N; i++)
        assert_false(done[i]); /* nothing sent before the loop turns */
    int64_t deadline = sl_mono_ns() / 1000000 + 15000;
    while (!(done[0] && done[1] && done[2] && done[3]) && sl_mono_ns() / 1000000 < deadline)
        uv_run(&f->loop, UV_RUN_ONCE);
    const int64_t want_rem[N] = {9, 7, 4, 9};
    for (int i = 0; i < N; i++) {
        assert_true(done[i]);
        assert_null(b[i].resps[0].error);
        assert_int_equal(b[i].resps[0].status, SL_UNDER_LIMIT);
        assert_int_equal(b[i].resps[0].remaining, want_rem[i]);
        sl_batch_free(&b[i]);
    }
    assert_int_equal(script_calls(f) - before, 2);
}

static void test_noscript_reload(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    step s = {0, 1, 5, MINUTE, 0, 0, 0, 0, 0, 0};
    check_step(f, "flush", &s, "before the flush");
    char buf[64];
    redis_cmd(f, "SCRIPT FLUSH\r\n", buf, sizeof buf);
    assert_string_equal(buf, "+OK\r\n");
    check_step(f, "flush", &s, "after the flush");
    check_step(f, "flush", &s, "loaded again");
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.reloads, 1);
}

/* The key is dropped by Redis some time after the state's own expiry (PEXPIRE): no growth. */
static void test_keys_expire(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    step s = {0, 1, 5, 10 * SEC, 0, 0, 0, 0, 0, 0};
    check_step(f, "ttl", &s, "ttl");
    char cmd[128], buf[64];
    snprintf(cmd, sizeof cmd, "PTTL sl:{%zu:%s:ttl}\r\n", strlen(f->prefix), f->prefix);
    redis_cmd(f, cmd, buf, sizeof buf);
    assert_int_equal(buf[0], ':');
    long long ttl = atoll(buf + 1);
    /* 10 s of state plus the 60 s margin, give or take the test's own time */
    assert_true(ttl > 60 * SEC && ttl <= 70 * SEC);
}

/* The PTTL of f's key `key` with `suffix` appended (a neighbour: "|log", "|leases"). */
static long long pttl(fx *f, const char *key, const char *suffix)
{
    char cmd[256], buf[64];
    snprintf(cmd, sizeof cmd, "PTTL sl:{%zu:%s:%s}%s\r\n", strlen(f->prefix), f->prefix, key,
             suffix);
    redis_cmd(f, cmd, buf, sizeof buf);
    assert_int_equal(buf[0], ':');
    return atoll(buf + 1);
}

/* A key written again keeps a TTL: SETRANGE (or SET KEEPTTL for a state of another length) when
 * its state's expiry did not move (Redis holds the TTL that expiry was written with), SET PX when
 * it did, or when the call itself created the key; never a key without expiry (PTTL -1), for
 * every algorithm and the keys beside a state. */
static void test_keys_keep_ttl(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    static const int32_t algs[] = {SL_TOKEN_BUCKET,    SL_LEAKY_BUCKET, SL_FIXED_WINDOW,
                                   SL_SLIDING_LOG,     SL_GCRA,         SL_SLIDING_WINDOW,
                                   SL_CONCURRENCY};
    const long long bound = 2 * 10 * SEC + 60 * SEC; /* twice the duration, plus the margin */
    for (size_t a = 0; a < sizeof algs / sizeof *algs; a++) {
        char key[32], what[64];
        snprintf(key, sizeof key, "keep%d", algs[a]);
        step s = {0, 1, 100, 10 * SEC, 0, 0, algs[a], 0, 0, 0};
        for (int k = 0; k < 6; k++) {
            s.dt = k % 2 ? 0 : 700; /* the same expiry twice, then a later one */
            snprintf(what, sizeof what, "algorithm %d, step %d", algs[a], k);
            check_step(f, key, &s, what);
            long long ttl = pttl(f, key, "");
            if (ttl <= 0 || ttl > bound)
                fail_msg("%s: PTTL %lld", what, ttl);
            const char *nb = algs[a] == SL_SLIDING_LOG   ? "|log"
                             : algs[a] == SL_CONCURRENCY ? "|leases"
                                                         : NULL;
            if (nb && ((ttl = pttl(f, key, nb)) <= 0 || ttl > bound))
                fail_msg("%s: PTTL of %s %lld", what, nb, ttl);
        }
    }

    /* one call creating a key and writing it again: SET PX, not KEEPTTL */
    step s = {0, 1, 5, 10 * SEC, 0, 0, SL_TOKEN_BUCKET, 0, 0, 0};
    sl_request q[2] = {mkreq(f, "keep-new", &s), mkreq(f, "keep-new", &s)};
    sl_response want[2], got[2];
    for (int i = 0; i < 2; i++)
        sl_engine_decide(f->mem, &q[i], &want[i], f->now);
    via_redis(f, q, 2, got);
    assert_same(&want[0], &got[0], "created");
    assert_same(&want[1], &got[1], "written again");
    long long ttl = pttl(f, "keep-new", "");
    assert_true(ttl > 0 && ttl <= 70 * SEC);

    /* the same expiry 5 s later: the TTL is kept (PX would make it 5 s shorter) */
    check_step(f, "keep-tb", &s, "created");
    long long first = pttl(f, "keep-tb", "");
    s.dt = 5 * SEC;
    check_step(f, "keep-tb", &s, "same expiry");
    ttl = pttl(f, "keep-tb", "");
    assert_true(ttl > first - 2 * SEC && ttl <= first);
    /* a longer duration moves the expiry: written with PX, 20 s + 60 s from the first hit */
    s.dt = 0;
    s.duration = 20 * SEC;
    check_step(f, "keep-tb", &s, "expiry moved");
    ttl = pttl(f, "keep-tb", "");
    assert_true(ttl > 73 * SEC && ttl <= 75 * SEC);

    /* a state that did not change (peeks, hits over what remains) is not written at all; a hit
     * that changes it is */
    char buf[4096];
    redis_cmd(f, "CONFIG RESETSTAT\r\n", buf, sizeof buf);
    assert_string_equal(buf, "+OK\r\n");
    s.hits = 0;
    check_step(f, "keep-tb", &s, "peek");
    check_step(f, "keep-tb", &s, "peek again");
    s.hits = 9;
    check_step(f, "keep-tb", &s, "over the limit");
    check_step(f, "keep-tb", &s, "over the limit again");
    redis_cmd(f, "INFO commandstats\r\n", buf, sizeof buf);
    assert_non_null(strstr(buf, "cmdstat_evalsha:calls=4,"));
    assert_null(strstr(buf, "cmdstat_set:"));
    assert_null(strstr(buf, "cmdstat_setrange:"));
    s.hits = -1;
    check_step(f, "keep-tb", &s, "given back"); /* same expiry, same length: in place */
    redis_cmd(f, "INFO commandstats\r\n", buf, sizeof buf);
    assert_non_null(strstr(buf, "cmdstat_setrange:calls=1,"));
    assert_null(strstr(buf, "cmdstat_set:"));

    /* a state of another length with the same expiry (SLIDING_WINDOW's sub-windows changed):
     * SET KEEPTTL, the TTL kept, the answers the engine's */
    step sw = {0, 1, 10, 10 * SEC, 0, 0, SL_SLIDING_WINDOW, 0, 0, 0};
    check_step(f, "keep-sw", &sw, "one window");
    redis_cmd(f, "CONFIG RESETSTAT\r\n", buf, sizeof buf);
    sw.sub_windows = 4;
    check_step(f, "keep-sw", &sw, "four sub-windows");
    check_step(f, "keep-sw", &sw, "four sub-windows again");
    ttl = pttl(f, "keep-sw", "");
    assert_true(ttl > 0 && ttl <= bound);
    redis_cmd(f, "INFO commandstats\r\n", buf, sizeof buf);
    assert_true(strstr(buf, "cmdstat_set:") || strstr(buf, "cmdstat_setrange:"));

    /* a peek at a key Redis holds nothing for deletes nothing (a command costs what a decision
     * does); a key that held a state is deleted when its state empties */
    redis_cmd(f, "CONFIG RESETSTAT\r\n", buf, sizeof buf);
    step fw = {0, 0, 5, 10 * SEC, 0, 0, SL_FIXED_WINDOW, 0, 0, 0};
    check_step(f, "keep-fw-absent", &fw, "peek at nothing");
    check_step(f, "keep-fw-absent", &fw, "peek at nothing again");
    redis_cmd(f, "INFO commandstats\r\n", buf, sizeof buf);
    assert_null(strstr(buf, "cmdstat_del:"));
}

/* A key holding a string that starts with an algorithm's tag byte but is too short to be its
 * state (another program's value, a corrupt one): decided as if absent, as the engine decides a
 * key it holds nothing for, and written over. (It used to fail the whole call.) */
static void test_not_a_state(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    static const struct {
        int32_t alg;
        int tag; /* the first byte of the algorithm's state in Redis (src/redis/lua/NAME.lua) */
    } algs[] = {{SL_TOKEN_BUCKET, 0}, {SL_LEAKY_BUCKET, 1},   {SL_GCRA, 2},
                {SL_FIXED_WINDOW, 3}, {SL_SLIDING_WINDOW, 4}, {SL_SLIDING_LOG, 5},
                {SL_CONCURRENCY, 6}};
    for (size_t a = 0; a < sizeof algs / sizeof *algs; a++) {
        char key[32], cmd[512], out[64], what[64];
        snprintf(key, sizeof key, "notastate%d", algs[a].alg);
        snprintf(cmd, sizeof cmd,
                 "EVAL \"redis.call('SET', KEYS[1], string.char(tonumber(ARGV[1])) .. 'abcd')\" 1 "
                 "sl:{%zu:%s:%s} %d\r\n",
                 strlen(f->prefix), f->prefix, key, algs[a].tag);
        redis_cmd(f, cmd, out, sizeof out);
        assert_string_equal(out, "$-1\r\n");
        step s = {0, 1, 5, 10 * SEC, 0, 0, algs[a].alg, 0, 0, 0};
        snprintf(what, sizeof what, "algorithm %d over a string that is not its state",
                 algs[a].alg);
        check_step(f, key, &s, what);
        check_step(f, key, &s, what);
        if (pttl(f, key, "") <= 0)
            fail_msg("%s: no TTL", what);
    }
}

/* EVAL of alg's script on KEYS key1 (and key2 when not NULL) with the items given as text, as an
 * operator would call it: the answer's first bytes in out, their number returned. */
static ssize_t eval_by_hand(fx *f, int32_t alg, const char *key1, const char *item1,
                            const char *key2, const char *item2, char *out, size_t outlen)
{
    const sl_rscript *sc = sl_rscript_of(alg);
    size_t cap = sc->len + 1024;
    char *cmd = malloc(cap);
    assert_non_null(cmd);
    int n = snprintf(cmd, cap, "*%d\r\n$4\r\nEVAL\r\n$%zu\r\n", key2 ? 7 : 5, sc->len);
    memcpy(cmd + n, sc->src, sc->len);
    n += (int)sc->len;
    n += snprintf(cmd + n, cap - (size_t)n, "\r\n$1\r\n%c\r\n", key2 ? '2' : '1');
    const char *args[4] = {key1, key2, item1, item2};
    for (int i = 0; i < 4; i++)
        if (args[i])
            n += snprintf(cmd + n, cap - (size_t)n, "$%zu\r\n%s\r\n", strlen(args[i]), args[i]);
    ssize_t got = redis_cmd(f, cmd, out, outlen);
    free(cmd);
    return got;
}

/* A script called by hand: one text argument per key, the numbers space-separated; the answer is
 * one string of binary records. A malformed item is an error, and for a script that writes a
 * key's neighbour as it goes, one that leaves nothing written. */
static void test_by_hand(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    char key[128], key2[128], item[160], out[512];
    snprintf(key, sizeof key, "sl:{%zu:%s:hand}", strlen(f->prefix), f->prefix);
    /* hits limit duration t now margin reset drain | greg gexp_now gexp_t max_count */
    snprintf(item, sizeof item, "2 10 60000 %lld %lld 60000 0 0 0 0 0 9007199254740992",
             (long long)f->now, (long long)f->now);
    ssize_t n = eval_by_hand(f, SL_TOKEN_BUCKET, key, item, NULL, NULL, out, sizeof out);
    assert_true(n == 5 + 48 + 2);
    assert_memory_equal(out, "$48\r\n", 5);
    sl_response r;
    assert_int_equal(sl_rscript_answer_read(SL_TOKEN_BUCKET, out + 5, 48, 0, f->now, &f->ec, &r),
                     0);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.limit, 10);
    assert_int_equal(r.remaining, 8);
    assert_int_equal(r.reset_time, f->now + 60000);

    n = eval_by_hand(f, SL_TOKEN_BUCKET, key, "2 10 60000", NULL, NULL, out, sizeof out);
    assert_true(n > 0 && out[0] == '-');
    assert_non_null(strstr(out, "not an item of this script"));

    /* SLIDING_LOG: the first item well-formed, the second not: its log is not written */
    snprintf(key2, sizeof key2, "sl:{%zu:%s:hand2}", strlen(f->prefix), f->prefix);
    snprintf(item, sizeof item, "1 10 60000 %lld %lld 60000 0 0", (long long)f->now,
             (long long)f->now);
    n = eval_by_hand(f, SL_SLIDING_LOG, key2, item, key, "1 10 60000 x", out, sizeof out);
    assert_true(n > 0 && out[0] == '-');
    char cmd[2 * sizeof key2 + 16];
    snprintf(cmd, sizeof cmd, "EXISTS %s|log %s\r\n", key2, key2);
    redis_cmd(f, cmd, out, sizeof out);
    assert_string_equal(out, ":0\r\n");

    /* an empty item is the item before it; an empty first item is an error */
    char key3[128];
    snprintf(key3, sizeof key3, "sl:{%zu:%s:hand3}", strlen(f->prefix), f->prefix);
    snprintf(item, sizeof item, "3 10 60000 %lld %lld 60000 0 0 0 0 0 9007199254740992",
             (long long)f->now, (long long)f->now);
    n = eval_by_hand(f, SL_TOKEN_BUCKET, key2, item, key3, "", out, sizeof out);
    assert_true(n == 5 + 96 + 2);
    assert_int_equal(sl_rscript_answer_read(SL_TOKEN_BUCKET, out + 5, 96, 1, f->now, &f->ec, &r),
                     0);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(r.remaining, 7);
    n = eval_by_hand(f, SL_TOKEN_BUCKET, key3, "", NULL, NULL, out, sizeof out);
    assert_true(n > 0 && out[0] == '-');
    assert_non_null(strstr(out, "ARGV[1] is not an item of this script"));
    snprintf(cmd, sizeof cmd, "DEL %s %s\r\n", key2, key3);
    redis_cmd(f, cmd, out, sizeof out);

    /* TOKEN_BUCKET writes a key of one item at once: a malformed second item still leaves the
     * first key unwritten (every item is checked first) */
    snprintf(item, sizeof item, "1 10 60000 %lld %lld 60000 0 0 0 0 0 9007199254740992",
             (long long)f->now, (long long)f->now);
    n = eval_by_hand(f, SL_TOKEN_BUCKET, key2, item, key, "1 10 60000 x", out, sizeof out);
    assert_true(n > 0 && out[0] == '-');
    snprintf(cmd, sizeof cmd, "EXISTS %s\r\n", key2);
    redis_cmd(f, cmd, out, sizeof out);
    assert_string_equal(out, ":0\r\n");
}

/* One call whose items repeat the one before them (a script parses such an item once) and then
 * change, per algorithm: every answer is the engine's. */
static void test_repeated_items(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    static const int32_t algs[] = {SL_TOKEN_BUCKET, SL_LEAKY_BUCKET, SL_FIXED_WINDOW,
                                   SL_SLIDING_LOG,  SL_GCRA,         SL_SLIDING_WINDOW};
    /* repeated keys (written once, at the end of the call) among keys of one item (written at
     * once), twice over: the second round finds every key's state in Redis */
    static const int64_t hits[] = {1, 1, 1, 2, 2, 1, 0, 1, 0, 1, 3, 2};
    static const char *const keys[] = {"r1", "r2", "s1", "r1", "r1", "r2",
                                       "r2", "s2", "r1", "r2", "r1", "r1"};
    enum { N = sizeof hits / sizeof *hits };
    for (size_t a = 0; a < 2 * sizeof algs / sizeof *algs; a++) {
        sl_request q[N];
        sl_response want[N], got[N];
        char name[N][16];
        for (int i = 0; i < N; i++) {
            step s = {0, hits[i], 5, 10 * SEC, 0, 0, algs[a % 6], 0, 0, 0};
            snprintf(name[i], sizeof name[i], "%s-%d", keys[i], algs[a % 6]);
            q[i] = mkreq(f, name[i], &s);
            sl_engine_decide(f->mem, &q[i], &want[i], f->now);
        }
        via_redis(f, q, N, got);
        for (int i = 0; i < N; i++) {
            char what[64];
            snprintf(what, sizeof what, "algorithm %d, round %zu, item %d", algs[a % 6],
                     a / 6 + 1, i);
            assert_same(&want[i], &got[i], what);
        }
    }
}

static bool disconnected(fx *f)
{
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    return st.disconnects > 0;
}

static void test_down_then_back(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    step s = {0, 1, 5, MINUTE, 0, 0, 0, 0, 0, 0};
    check_step(f, "down", &s, "up");
    sl_test_redis_stop(&f->redis);
    run_until(f, disconnected, 15000);
    assert_true(disconnected(f));
    sl_request q = mkreq(f, "down", &s);
    sl_response r;
    via_redis(f, &q, 1, &r);
    assert_string_equal(r.error, "redis store unavailable");
    /* back on the same port, empty (no persistence): the store reconnects by itself */
    assert_int_equal(sl_test_redis_start(&f->redis), 0);
    wait_connected(f);
    sl_engine_remove(f->mem, q.name, q.name_len, q.unique_key, q.unique_key_len);
    check_step(f, "down", &s, "back");
    check_step(f, "down", &s, "back again");
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.errors, 1);
    assert_int_equal(st.fail_open, 0);
}

static void test_fail_open(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    sl_test_redis_stop(&f->redis);
    run_until(f, disconnected, 15000);
    step s = {0, 2, 3, MINUTE, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 3; i++) {
        sl_request q = mkreq(f, "open", &s);
        sl_response want, got;
        sl_engine_decide(f->mem, &q, &want, f->now); /* the local engine starts as empty */
        via_redis(f, &q, 1, &got);
        assert_same(&want, &got, "fail-open");
        assert_string_equal(sl_batch_meta_get(&f->b.resp_meta[0], "fail_open"),
                            "redis store unavailable");
    }
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_int_equal(st.fail_open, 3);
    assert_int_equal(st.errors, 0);
}

/* A server that accepts and never answers: the item fails after --redis-timeout (200 ms here),
 * the connection is made again and used once the server answers. */
static void test_timeout(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    step s = {0, 1, 5, MINUTE, 0, 0, 0, 0, 0, 0};
    check_step(f, "slow", &s, "before");
    sl_test_redis_pause(&f->redis, true);
    sl_request q = mkreq(f, "slow", &s);
    sl_response r;
    int64_t t0 = sl_mono_ns() / 1000000;
    via_redis(f, &q, 1, &r);
    int64_t took = sl_mono_ns() / 1000000 - t0;
    assert_non_null(sl_batch_meta_get(&f->b.resp_meta[0], "fail_open"));
    assert_true(took >= 200);
    sl_test_redis_pause(&f->redis, false);
    wait_connected(f);
    /* the paused server did run the script once it woke up: the reference catches up */
    sl_response ignore;
    sl_engine_decide(f->mem, &q, &ignore, f->now);
    check_step(f, "slow", &s, "after");
}

/* --redis-addrs is an order of preference: a replica first (READONLY to every script) is left for
 * the next address, the master, without a restart. */
static void test_replica_then_master(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    sl_test_redis replica = {.replica_of = f->redis.port};
    assert_int_equal(sl_test_redis_start(&replica), 0);
    sl_rstore_worker_stop(f->rs, 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    sl_rstore_free(f->rs);
    const char *addrs[] = {replica.addr, f->redis.addr};
    sl_rstore_config c = {.engine = f->local, .engine_cfg = &f->ec, .addrs = addrs, .n_addrs = 2,
                          .timeout_ms = 1000, .workers = 1};
    char err[256];
    assert_int_equal(sl_rstore_new(&c, &f->rs, err, sizeof err), 0);
    sl_rstore_worker_start(f->rs, 0, &f->loop);
    step s = {0, 1, 5, MINUTE, 0, 0, 0, 0, 0, 0};
    sl_request q = mkreq(f, "primary", &s);
    sl_response r = {.error = "not yet"};
    int64_t deadline = sl_mono_ns() / 1000000 + 10000;
    while (r.error && sl_mono_ns() / 1000000 < deadline) {
        via_redis(f, &q, 1, &r);
        if (r.error) {
            assert_string_equal(r.error, "redis store unavailable");
            uv_run(&f->loop, UV_RUN_ONCE);
        }
    }
    assert_null(r.error);
    assert_int_equal(r.remaining, 4);
    sl_rstore_stats st;
    sl_rstore_stats_get(f->rs, &st);
    assert_true(st.connects >= 2 && st.disconnects >= 1); /* the replica, then the master */
    sl_test_redis_stop(&replica);
}

static void test_config_errors(void **state)
{
    (void)state;
    char err[256];
    sl_rstore *r = NULL;
    const char *bad[] = {"localhost"};
    sl_rstore_config c = {.addrs = bad, .n_addrs = 1, .workers = 1};
    assert_int_equal(sl_rstore_new(&c, &r, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not host:port"));
    const char *good[] = {"[::1]:6379", "127.0.0.1:6380"};
    c.addrs = good;
    c.n_addrs = 2;
    c.password_file = "/nonexistent/redis-password";
    assert_true(sl_rstore_new(&c, &r, err, sizeof err) < 0);
    assert_non_null(strstr(err, "/nonexistent/redis-password"));
    c.password_file = NULL;
    assert_int_equal(sl_rstore_new(&c, &r, err, sizeof err), 0);
    sl_rstore_free(r);
    c.n_addrs = 0;
    assert_int_equal(sl_rstore_new(&c, &r, err, sizeof err), -EINVAL);
}

/* n little-endian doubles at out: a script's answer record. */
static void record(char *out, const double *v, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t u;
        memcpy(&u, &v[i], sizeof u);
        for (int j = 0; j < 8; j++)
            out[8 * i + j] = (char)(u >> (8 * j));
    }
}

/* Read a one-item answer of alg: the numbers v (five, then the lease id in hex, with a lease;
 * else six) at t 4000. */
static int read_one(int32_t alg, const double *v, const char *lease, const sl_engine_config *ec,
                    sl_response *r)
{
    char rec[56];
    record(rec, v, lease ? 5 : 6);
    if (lease)
        memcpy(rec + 40, lease, 16);
    return sl_rscript_answer_read(alg, rec, lease ? 56 : 48, 0, 4000, ec, r);
}

/* The command itself (sans-I/O): key layout, EVALSHA vs EVAL, the arguments, many items. */
/* "d" exactly when no key of the call is there twice: random calls of 1-40 keys drawn from 12
 * names (so that most repeat one), against a comparison of every pair. */
static void test_distinct_keys(void **state)
{
    (void)state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    static const char *const names[] = {"a", "b", "c", "ab", "ba", "abc", "x:y", "x", "y:x",
                                        "k0", "k00", "0k"};
    enum { NN = sizeof names / sizeof *names, MAXK = 40 };
    sl_request q[MAXK];
    sl_rscript_item it[MAXK];
    sl_rscript_cmd cmd = {0};
    uint32_t rnd = 12345;
    for (int trial = 0; trial < 500; trial++) {
        rnd = rnd * 1103515245u + 12345u;
        size_t n = 1 + (rnd >> 16) % MAXK;
        bool all_different = trial % 3 == 0; /* a third of the calls: names taken in turn */
        if (all_different)
            n = 1 + n % NN;
        size_t start = (rnd >> 8) % NN;
        for (size_t i = 0; i < n; i++) {
            rnd = rnd * 1103515245u + 12345u;
            const char *k = names[all_different ? (start + i) % NN : (rnd >> 16) % NN];
            q[i] = (sl_request){.name = "n", .name_len = 1, .unique_key = k,
                                .unique_key_len = strlen(k), .hits = 1, .limit = 5,
                                .duration = 1000, .algorithm = SL_TOKEN_BUCKET};
            it[i] = (sl_rscript_item){&q[i], 5000, 0};
        }
        bool distinct = true;
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (strcmp(q[i].unique_key, q[j].unique_key) == 0)
                    distinct = false;
        assert_true(distinct || !all_different);
        assert_int_equal(sl_rscript_cmd_build(&cmd, SL_TOKEN_BUCKET, false, it, n, &ec, 7), 0);
        assert_int_equal(cmd.argc, (int)(3 + 2 * n + (distinct ? 1 : 0)));
        if (distinct)
            assert_memory_equal(cmd.argv[cmd.argc - 1], "d", 1);
    }
    sl_rscript_cmd_free(&cmd);
}

static void test_command(void **state)
{
    (void)state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    sl_request q[2] = {
        {.name = "a:b", .name_len = 3, .unique_key = "c", .unique_key_len = 1, .hits = 2,
         .limit = 10, .duration = 1000, .algorithm = SL_TOKEN_BUCKET,
         .behavior = SL_DRAIN_OVER_LIMIT},
        {.name = "a", .name_len = 1, .unique_key = "b:c", .unique_key_len = 3, .hits = 1,
         .limit = 5, .duration = 1000, .algorithm = SL_TOKEN_BUCKET, .created_at = 4000},
    };
    sl_rscript_args a;
    assert_null(sl_rscript_args_of(&a, &q[0], 5000, &ec, 7, 0));
    assert_int_equal(a.n, 12);
    assert_int_equal(a.t, 5000);
    const char *want[] = {"2", "10", "1000", "5000", "5000", "7", "0", "1", "0", "0", "0",
                          "9007199254740992"};
    for (int i = 0; i < 12; i++) {
        assert_int_equal(a.len[i], strlen(want[i]));
        assert_memory_equal(a.num[i], want[i], a.len[i]);
    }
    assert_null(sl_rscript_args_of(&a, &q[1], 5000, &ec, 7, 0));
    assert_int_equal(a.t, 4000);
    assert_null(sl_rscript_args_of(NULL, &q[1], 5000, &ec, 7, 0)); /* the check alone */
    sl_request bad = q[1];
    bad.algorithm = SL_ALGORITHM_COUNT;
    assert_ptr_equal(sl_rscript_args_of(NULL, &bad, 5000, &ec, 7, 0), sl_rscript_err_unsupported);

    sl_rscript_cmd cmd = {0};
    sl_rscript_item it[2] = {{&q[0], 5000, 0}, {&q[1], 5000, 0}};
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_TOKEN_BUCKET, false, it, 2, &ec, 7), 0);
    assert_int_equal(cmd.argc, 3 + 2 + 2 + 1);
    assert_int_equal(cmd.argvlen[7], 1); /* two keys, not one twice: "d" */
    assert_memory_equal(cmd.argv[7], "d", 1);
    assert_memory_equal(cmd.argv[0], "EVALSHA", 7);
    assert_int_equal(cmd.argvlen[1], 40);
    assert_memory_equal(cmd.argv[1], sl_rscript_of(SL_TOKEN_BUCKET)->sha, 40);
    assert_memory_equal(cmd.argv[2], "2", cmd.argvlen[2]);
    /* the name's length keeps ("a:b", "c") and ("a", "b:c") apart */
    assert_int_equal(cmd.argvlen[3], strlen("sl:{3:a:b:c}"));
    assert_memory_equal(cmd.argv[3], "sl:{3:a:b:c}", cmd.argvlen[3]);
    assert_int_equal(cmd.argvlen[4], strlen("sl:{1:a:b:c}"));
    assert_memory_equal(cmd.argv[4], "sl:{1:a:b:c}", cmd.argvlen[4]);
    /* one argument per item: its numbers in decimal, separated by single spaces */
    const char *arg1 = "2 10 1000 5000 5000 7 0 1 0 0 0 9007199254740992";
    const char *arg2 = "1 5 1000 4000 5000 7 0 0 0 0 0 9007199254740992"; /* item 2's t: 4000 */
    assert_int_equal(cmd.argvlen[5], strlen(arg1));
    assert_memory_equal(cmd.argv[5], arg1, cmd.argvlen[5]);
    assert_int_equal(cmd.argvlen[6], strlen(arg2));
    assert_memory_equal(cmd.argv[6], arg2, cmd.argvlen[6]);
    /* an item the same as the one before it is the empty string; after a different one, in full */
    sl_rscript_item it3[3] = {{&q[0], 5000, 0}, {&q[0], 5000, 0}, {&q[1], 5000, 0}};
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_TOKEN_BUCKET, false, it3, 3, &ec, 7), 0);
    assert_int_equal(cmd.argc, 3 + 3 + 3); /* q[0]'s key twice: no "d" */
    assert_int_equal(cmd.argvlen[6], strlen(arg1));
    assert_memory_equal(cmd.argv[6], arg1, cmd.argvlen[6]);
    assert_int_equal(cmd.argvlen[7], 0);
    assert_int_equal(cmd.argvlen[8], strlen(arg2));
    assert_memory_equal(cmd.argv[8], arg2, cmd.argvlen[8]);
    sl_rscript_item it4[3] = {{&q[0], 5000, 0}, {&q[1], 5000, 0}, {&q[0], 6000, 0}};
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_TOKEN_BUCKET, false, it4, 3, &ec, 7), 0);
    assert_int_equal(cmd.argc, 3 + 3 + 3); /* nor when another key is between the two */
    it[0].now = 6000; /* each item has its own node time */
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_TOKEN_BUCKET, true, it, 1, &ec, 7), 0);
    assert_memory_equal(cmd.argv[0], "EVAL", 4);
    assert_int_equal(cmd.argvlen[1], sl_rscript_of(SL_TOKEN_BUCKET)->len);
    assert_int_equal(cmd.argc, 3 + 1 + 1 + 1);
    assert_memory_equal(cmd.argv[4], "2 10 1000 6000 6000 7 ", 22);
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_ALGORITHM_COUNT, false, it, 1, &ec, 7),
                     -EINVAL);
    assert_null(sl_rscript_of(SL_ALGORITHM_COUNT));

    /* CONCURRENCY: an acquire's lease id is drawn once per item, so a call built again (sent
     * again after a failover, or as EVAL after NOSCRIPT) asks for the same lease, not another */
    sl_request acq = {.name = "c", .name_len = 1, .unique_key = "k", .unique_key_len = 1,
                      .hits = 1, .limit = 3, .duration = 1000, .algorithm = SL_CONCURRENCY};
    sl_rscript_item ci = {&acq, 5000, sl_rscript_new_lease(&acq)};
    assert_int_not_equal(ci.lease, 0);
    assert_int_equal(sl_rscript_new_lease(&q[0]), 0); /* not CONCURRENCY */
    acq.hits = 0;
    assert_int_equal(sl_rscript_new_lease(&acq), 0); /* a renewal takes no new lease */
    acq.hits = 1;
    char first[128];
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_CONCURRENCY, false, &ci, 1, &ec, 7), 0);
    assert_true(cmd.argvlen[4] < sizeof first);
    memcpy(first, cmd.argv[4], cmd.argvlen[4]);
    size_t first_len = cmd.argvlen[4];
    assert_int_equal(sl_rscript_cmd_build(&cmd, SL_CONCURRENCY, true, &ci, 1, &ec, 7), 0);
    assert_int_equal(cmd.argvlen[4], first_len);
    assert_memory_equal(cmd.argv[4], first, first_len);
    sl_rscript_cmd_free(&cmd);

    /* answers: one string, a record of six little-endian doubles per item */
    assert_int_equal(sl_rscript_answer_size(SL_TOKEN_BUCKET), 48);
    assert_int_equal(sl_rscript_answer_size(SL_CONCURRENCY), 56);
    assert_int_equal(sl_rscript_answer_size(SL_ALGORITHM_COUNT), 0);
    char rec[2 * 48];
    double ans[6] = {1, 10, 0, -5, 3, 0};
    record(rec, ans, 6);
    sl_response r;
    assert_int_equal(sl_rscript_answer_read(SL_TOKEN_BUCKET, rec, 48, 0, 4000, &ec, &r), 0);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.limit, 10);
    assert_int_equal(r.retry_after, 3);
    assert_int_equal(r.reset_time, 4000); /* never before 1970 with the engine's bounds */
    double sat[6] = {0, 0x1p63, -0x1p63, NAN, -2.9, 1e300};
    record(rec + 48, sat, 6);
    assert_int_equal(sl_rscript_answer_read(SL_GCRA, rec, 96, 1, 4000, &ec, &r), 0);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_true(r.limit == INT64_MAX && r.remaining == INT64_MIN);
    assert_int_equal(r.reset_time, 0);  /* NaN */
    assert_int_equal(r.retry_after, -2); /* toward zero */
    assert_true(r.delay_ms == INT64_MAX);
    assert_int_equal(sl_rscript_answer_read(SL_GCRA, rec, 96, 2, 4000, &ec, &r), -EPROTO);
    assert_int_equal(sl_rscript_answer_read(SL_GCRA, rec, 95, 1, 4000, &ec, &r), -EPROTO);
    ans[0] = -1;
    assert_int_equal(read_one(SL_TOKEN_BUCKET, ans, NULL, &ec, &r), 0);
    assert_ptr_equal(r.error, sl_rscript_err_range);
    ans[0] = 2;
    assert_int_equal(read_one(SL_TOKEN_BUCKET, ans, NULL, &ec, &r), -EPROTO);
    ans[0] = 0;
    assert_int_equal(read_one(SL_ALGORITHM_COUNT, ans, NULL, &ec, &r), -EPROTO);
    /* CONCURRENCY: five doubles, then the lease taken as 16 hex digits (zeros: none) */
    double conc[5] = {0, 3, 2, 9000, 0};
    assert_int_equal(read_one(SL_CONCURRENCY, conc, "00c0ffee00000001", &ec, &r), 0);
    assert_int_equal(r.lease_id, UINT64_C(0x00c0ffee00000001));
    assert_int_equal(r.remaining, 2);
    assert_int_equal(r.delay_ms, 0);
    assert_int_equal(read_one(SL_CONCURRENCY, conc, "0000000000000000", &ec, &r), 0);
    assert_int_equal(r.lease_id, 0);
    conc[0] = -2;
    assert_int_equal(read_one(SL_CONCURRENCY, conc, "0000000000000000", &ec, &r), 0);
    assert_ptr_equal(r.error, sl_conc_err_not_found);
    conc[0] = 0;
    assert_int_equal(read_one(SL_CONCURRENCY, conc, "00c0ffee0000000g", &ec, &r), -EPROTO);
}

/* A call mixing algorithms, repeating keys across them, with invalid items between: script calls
 * are cut at every change of algorithm and at batch_items (7 here), and every answer is the
 * engine's for the same order. */
static void test_mixed_batch(void **state)
{
    fx *f = *state;
    NEED_REDIS(f);
    enum { N = 200 };
    static sl_request q[N];
    static sl_response want[N], got[N];
    static char keys[N][16];
    const int32_t algs[] = {SL_TOKEN_BUCKET, SL_LEAKY_BUCKET, SL_FIXED_WINDOW, SL_SLIDING_LOG,
                            SL_GCRA, SL_SLIDING_WINDOW};
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            snprintf(keys[i], sizeof keys[i], "m%d", i % 5); /* repeats within a script call */
            step s = {0, 1 + i % 2, 9, MINUTE, 0, 0, algs[(i / 10) % 6], 0, 0, 0};
            if (i % 23 == 0)
                s.limit = -1; /* a per-item error in the middle of a run */
            q[i] = mkreq(f, keys[i], &s);
        }
        sl_engine_decide_batch(f->mem, q, want, N, f->now);
        via_redis(f, q, N, got);
        for (int i = 0; i < N; i++) {
            char what[32];
            snprintf(what, sizeof what, "item %d", i);
            assert_same(&want[i], &got[i], what);
        }
        f->now += 700;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_command),
        cmocka_unit_test(test_distinct_keys),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test_setup_teardown(test_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_token_bucket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_leaky_bucket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_fixed_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_sliding_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_gcra, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_sliding_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mixed_batch, setup_small_batches, teardown),
        cmocka_unit_test_setup_teardown(test_random_concurrency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_calls_share_a_script_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noscript_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_expire, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_keep_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_by_hand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeated_items, setup, teardown),
        cmocka_unit_test_setup_teardown(test_down_then_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_open, setup_fail_open, teardown),
        cmocka_unit_test_setup_teardown(test_replica_then_master, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup_fail_open, teardown),
    };
    return sl_skip_exit(cmocka_run_group_tests(tests, NULL, NULL));
}

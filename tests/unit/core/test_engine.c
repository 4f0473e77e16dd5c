/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine entry point tests: configuration, validation errors that change nothing, remove, two
 * engines that share nothing, active expiry and the key cap through the public API, batches that
 * answer exactly as one-by-one calls, and threaded tests: many threads on one key admit exactly
 * `limit` hits (linearizable decisions), and threads on different and shared keys admit exactly
 * what each key allows. Virtual time only: `now` is a number the test chooses.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sluice/engine.h"

#define T0 1700000000000LL /* a realistic epoch-ms start for the virtual clock */
#define HOUR 3600000LL

static sl_engine *engine_new(size_t max_keys, unsigned shards, uint64_t seed)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = max_keys;
    cfg.shards = shards;
    cfg.hash_seed = seed;
    sl_engine *e = NULL;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    assert_non_null(e);
    return e;
}

static sl_request tb(const char *name, const char *key, int64_t hits, int64_t limit,
                     int64_t duration)
{
    sl_request r = {.name = name, .name_len = strlen(name), .unique_key = key,
                    .unique_key_len = strlen(key), .hits = hits, .limit = limit,
                    .duration = duration, .algorithm = SL_TOKEN_BUCKET};
    return r;
}

static void test_config(void **state)
{
    (void)state;
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    assert_true(cfg.max_keys > 0);
    assert_int_equal(cfg.shards, 64);
    assert_true(cfg.max_log_limit > 0);
    assert_true(cfg.max_sub_windows > 0);
    sl_engine *e = NULL;
    cfg.shards = 6;
    assert_int_equal(sl_engine_new(&cfg, &e), -EINVAL);
    assert_null(e);
    cfg.shards = 0; /* default */
    cfg.max_keys = 0;
    assert_int_equal(sl_engine_new(&cfg, &e), -EINVAL);
    cfg.max_keys = 1000;
    assert_int_equal(sl_engine_new(&cfg, &e), 0);
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 0);
    assert_true(st.capacity > 0);
    assert_true(st.bytes >= st.capacity * 64);
    sl_engine_free(e);
    sl_engine_free(NULL);
}

static void test_decide_and_stats(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 4, 0);
    sl_request rq = tb("api", "alice", 1, 3, HOUR);
    sl_response rs;
    for (int i = 0; i < 3; i++) {
        sl_engine_decide(e, &rq, &rs, T0);
        assert_null(rs.error);
        assert_int_equal(rs.status, SL_UNDER_LIMIT);
        assert_int_equal(rs.limit, 3);
        assert_int_equal(rs.remaining, 2 - i);
    }
    sl_engine_decide(e, &rq, &rs, T0);
    assert_int_equal(rs.status, SL_OVER_LIMIT);
    /* The same unique_key under another name is another key. */
    sl_request other = tb("api2", "alice", 1, 3, HOUR);
    sl_engine_decide(e, &other, &rs, T0);
    assert_int_equal(rs.status, SL_UNDER_LIMIT);
    /* Name/key boundaries matter: ("ab","c") and ("a","bc") are different keys. */
    sl_request ab_c = tb("ab", "c", 1, 1, HOUR), a_bc = tb("a", "bc", 1, 1, HOUR);
    sl_engine_decide(e, &ab_c, &rs, T0);
    assert_int_equal(rs.status, SL_UNDER_LIMIT);
    sl_engine_decide(e, &a_bc, &rs, T0);
    assert_int_equal(rs.status, SL_UNDER_LIMIT);

    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 4);
    assert_int_equal(st.decisions[SL_TOKEN_BUCKET][SL_UNDER_LIMIT], 6);
    assert_int_equal(st.decisions[SL_TOKEN_BUCKET][SL_OVER_LIMIT], 1);
    assert_int_equal(st.errors, 0);
    sl_engine_free(e);
}

static void test_invalid_request_changes_nothing(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 4, 0);
    sl_request bad = tb("api", "", 1, 3, HOUR); /* empty unique_key */
    sl_response rs = {.status = 7, .remaining = 7};
    sl_engine_decide(e, &bad, &rs, T0);
    assert_non_null(rs.error);
    assert_int_equal(rs.status, 0);
    assert_int_equal(rs.remaining, 0);
    bad = tb("api", "bob", 1, 3, HOUR);
    bad.algorithm = 99;
    sl_engine_decide(e, &bad, &rs, T0);
    assert_non_null(rs.error);
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.errors, 2);
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        assert_int_equal(st.decisions[a][0] + st.decisions[a][1], 0);
    sl_engine_free(e);
}

static void test_remove(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 4, 0);
    sl_request rq = tb("api", "carol", 2, 5, HOUR);
    sl_response rs;
    sl_engine_decide(e, &rq, &rs, T0);
    assert_int_equal(rs.remaining, 3);
    assert_true(sl_engine_remove(e, "api", 3, "carol", 5));
    assert_false(sl_engine_remove(e, "api", 3, "carol", 5));
    assert_false(sl_engine_remove(e, "api", 3, "dave", 4));
    sl_engine_decide(e, &rq, &rs, T0);
    assert_int_equal(rs.remaining, 3); /* a fresh bucket */
    sl_engine_free(e);
}

static void test_engines_are_independent(void **state)
{
    (void)state;
    sl_engine *a = engine_new(1000, 4, 0), *b = engine_new(1000, 4, 0);
    sl_request rq = tb("api", "erin", 1, 2, HOUR);
    sl_response rs;
    sl_engine_decide(a, &rq, &rs, T0);
    sl_engine_decide(a, &rq, &rs, T0);
    sl_engine_decide(a, &rq, &rs, T0);
    assert_int_equal(rs.status, SL_OVER_LIMIT);
    sl_engine_decide(b, &rq, &rs, T0);
    assert_int_equal(rs.status, SL_UNDER_LIMIT);
    assert_int_equal(rs.remaining, 1);
    sl_engine_stats sa, sb;
    sl_engine_stats_get(a, &sa);
    sl_engine_stats_get(b, &sb);
    assert_int_equal(sa.decisions[SL_TOKEN_BUCKET][0] + sa.decisions[SL_TOKEN_BUCKET][1], 3);
    assert_int_equal(sb.decisions[SL_TOKEN_BUCKET][0] + sb.decisions[SL_TOKEN_BUCKET][1], 1);
    sl_engine_free(a);
    sl_engine_free(b);
}

static void test_expire_and_cap(void **state)
{
    (void)state;
    sl_engine *e = engine_new(100, 4, 0);
    char key[32];
    sl_response rs;
    /* 150 keys for a cap of 100: the oldest are evicted, never more than 100 held. */
    for (int i = 0; i < 150; i++) {
        snprintf(key, sizeof key, "user-%d", i);
        sl_request rq = tb("short", key, 1, 10, 1000);
        sl_engine_decide(e, &rq, &rs, T0 + i * 2000LL);
        assert_null(rs.error);
    }
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 100);
    assert_int_equal(st.keys + st.evictions + st.expirations, 150);
    /* Every key has a 1 s duration: an hour later all have expired; bounded sweeps remove them. */
    size_t removed = 0;
    for (int i = 0; i < 1000 && removed < st.keys; i++) {
        size_t r = sl_engine_expire(e, T0 + HOUR, 8);
        assert_true(r <= 8);
        removed += r;
    }
    assert_int_equal(removed, st.keys);
    uint64_t before = st.expirations;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, 0);
    assert_int_equal(st.expirations, before + removed);
    sl_engine_free(e);
}

/* --- batch == one by one --------------------------------------------------------------------- */

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

typedef struct gen_req {
    sl_request rq;
    char name[16], key[16];
} gen_req;

static void gen(gen_req *g, uint64_t *x)
{
    static const int algs[] = {SL_TOKEN_BUCKET, SL_LEAKY_BUCKET, SL_GCRA, SL_FIXED_WINDOW,
                               SL_SLIDING_WINDOW, SL_SLIDING_LOG};
    int a = algs[rng(x) % (sizeof algs / sizeof algs[0])];
    /* Few names and keys, so that keys repeat within and across batches. */
    snprintf(g->name, sizeof g->name, "n%d", a);
    if (rng(x) % 50 == 0)
        g->key[0] = '\0'; /* an invalid item now and then */
    else
        snprintf(g->key, sizeof g->key, "k%u", (unsigned)(rng(x) % 40));
    memset(&g->rq, 0, sizeof g->rq);
    g->rq.name = g->name;
    g->rq.name_len = strlen(g->name);
    g->rq.unique_key = g->key;
    g->rq.unique_key_len = strlen(g->key);
    g->rq.hits = (int64_t)(rng(x) % 4);
    g->rq.limit = 1 + (int64_t)(rng(x) % 20);
    g->rq.duration = 1000 + (int64_t)(rng(x) % 5) * 1000;
    g->rq.algorithm = a;
}

static void test_batch_equals_one_by_one(void **state)
{
    (void)state;
    sl_engine *one = engine_new(10000, 8, 12345), *bat = engine_new(10000, 8, 999);
    enum { N = 5000 };
    gen_req *g = calloc(N, sizeof *g);
    sl_request *rq = calloc(N, sizeof *rq);
    sl_response *r1 = calloc(N, sizeof *r1), *r2 = calloc(N, sizeof *r2);
    assert_non_null(g);
    uint64_t x = 0x1234567;
    for (int i = 0; i < N; i++) {
        gen(&g[i], &x);
        rq[i] = g[i].rq;
    }
    int64_t now = T0;
    for (size_t i = 0; i < N;) {
        size_t n = 1 + rng(&x) % 150; /* sizes across the internal chunk of 64 */
        if (n > N - i)
            n = N - i;
        for (size_t j = 0; j < n; j++)
            sl_engine_decide(one, &rq[i + j], &r1[i + j], now);
        sl_engine_decide_batch(bat, &rq[i], &r2[i], n, now);
        i += n;
        now += (int64_t)(rng(&x) % 700);
    }
    int errors = 0, over = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(r1[i].status, r2[i].status);
        assert_int_equal(r1[i].limit, r2[i].limit);
        assert_int_equal(r1[i].remaining, r2[i].remaining);
        assert_int_equal(r1[i].reset_time, r2[i].reset_time);
        assert_int_equal(r1[i].retry_after, r2[i].retry_after);
        assert_ptr_equal(r1[i].error, r2[i].error);
        errors += r1[i].error != NULL;
        over += r1[i].status == SL_OVER_LIMIT;
    }
    assert_true(errors > 0);
    assert_true(over > 0); /* the sequence does exercise limits */
    sl_engine_stats s1, s2;
    sl_engine_stats_get(one, &s1);
    sl_engine_stats_get(bat, &s2);
    assert_int_equal(s1.keys, s2.keys);
    assert_int_equal(s1.errors, s2.errors);
    assert_memory_equal(s1.decisions, s2.decisions, sizeof s1.decisions);
    free(g);
    free(rq);
    free(r1);
    free(r2);
    sl_engine_free(one);
    sl_engine_free(bat);
}

/* --- threads --------------------------------------------------------------------------------- */

enum { THREADS = 4, HITS_PER_THREAD = 10000, ONE_KEY_LIMIT = 12345 };

typedef struct worker {
    sl_engine *e;
    int id;
    int batch;       /* 0: one by one */
    int64_t admitted;
    int64_t admitted_per_key[64];
    volatile int *stop;
} worker;

static void *one_key_worker(void *arg)
{
    worker *w = arg;
    sl_request rq = tb("api", "hot-key", 1, ONE_KEY_LIMIT, HOUR);
    sl_response rs[16];
    sl_request batch[16];
    for (int i = 0; i < 16; i++)
        batch[i] = rq;
    for (int i = 0; i < HITS_PER_THREAD;) {
        if (w->batch) {
            /* A batch of the same key: every item is still its own decision. */
            sl_engine_decide_batch(w->e, batch, rs, 16, T0);
            for (int j = 0; j < 16; j++)
                w->admitted += rs[j].status == SL_UNDER_LIMIT && !rs[j].error;
            i += 16;
        } else {
            sl_engine_decide(w->e, &rq, rs, T0);
            w->admitted += rs[0].status == SL_UNDER_LIMIT && !rs[0].error;
            i++;
        }
    }
    return NULL;
}

static void *janitor(void *arg)
{
    worker *w = arg;
    sl_engine_stats st;
    while (!__atomic_load_n(w->stop, __ATOMIC_ACQUIRE)) {
        sl_engine_expire(w->e, T0, 64);
        sl_engine_stats_get(w->e, &st);
    }
    return NULL;
}

static void run_one_key(int batch)
{
    sl_engine *e = engine_new(1000, 64, 0);
    pthread_t th[THREADS], jt;
    worker w[THREADS];
    volatile int stop = 0;
    worker jw = {.e = e, .stop = &stop};
    assert_int_equal(pthread_create(&jt, NULL, janitor, &jw), 0);
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){.e = e, .id = t, .batch = batch};
        assert_int_equal(pthread_create(&th[t], NULL, one_key_worker, &w[t]), 0);
    }
    int64_t admitted = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        admitted += w[t].admitted;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(jt, NULL);
    /* 40000 hits on one bucket of 12345 over an hour that does not pass: exactly 12345 pass. */
    assert_int_equal(admitted, ONE_KEY_LIMIT);
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    int64_t per_thread = batch ? (HITS_PER_THREAD + 15) / 16 * 16 : HITS_PER_THREAD;
    int64_t total = THREADS * per_thread;
    assert_int_equal(st.decisions[SL_TOKEN_BUCKET][SL_UNDER_LIMIT], ONE_KEY_LIMIT);
    assert_int_equal(st.decisions[SL_TOKEN_BUCKET][SL_OVER_LIMIT], total - ONE_KEY_LIMIT);
    assert_int_equal(st.keys, 1);
    sl_engine_free(e);
}

static void test_threads_one_key(void **state)
{
    (void)state;
    run_one_key(0);
}

static void test_threads_one_key_batched(void **state)
{
    (void)state;
    run_one_key(1);
}

enum { OWN_KEYS = 500, SHARED_KEYS = 64, KEY_LIMIT = 7, ROUNDS = 5 };

static void *many_keys_worker(void *arg)
{
    worker *w = arg;
    char key[32];
    sl_response rs;
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < OWN_KEYS; k++) {
            snprintf(key, sizeof key, "own-%d-%d", w->id, k);
            sl_request rq = tb("api", key, 1, KEY_LIMIT, HOUR);
            sl_engine_decide(w->e, &rq, &rs, T0);
            w->admitted += rs.status == SL_UNDER_LIMIT && !rs.error;
        }
        for (int k = 0; k < SHARED_KEYS; k++) {
            snprintf(key, sizeof key, "shared-%d", (k + w->id * 7) % SHARED_KEYS);
            sl_request rq = tb("api", key, 1, KEY_LIMIT, HOUR);
            sl_engine_decide(w->e, &rq, &rs, T0);
            if (rs.status == SL_UNDER_LIMIT && !rs.error)
                w->admitted_per_key[(k + w->id * 7) % SHARED_KEYS]++;
        }
    }
    return NULL;
}

static void test_threads_many_keys(void **state)
{
    (void)state;
    sl_engine *e = engine_new(100000, 16, 0);
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker){.e = e, .id = t};
        assert_int_equal(pthread_create(&th[t], NULL, many_keys_worker, &w[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++) /* own keys: 5 hits each, all under the limit of 7 */
        assert_int_equal(w[t].admitted, OWN_KEYS * ROUNDS);
    for (int k = 0; k < SHARED_KEYS; k++) { /* shared keys: 20 hits each, exactly 7 admitted */
        int64_t sum = 0;
        for (int t = 0; t < THREADS; t++)
            sum += w[t].admitted_per_key[k];
        assert_int_equal(sum, KEY_LIMIT);
    }
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_int_equal(st.keys, THREADS * OWN_KEYS + SHARED_KEYS);
    sl_engine_free(e);
}

typedef struct flood_worker {
    sl_engine *e;
    int id;
    int errors; /* cmocka's asserts must run on the test's thread */
} flood_worker;

static void *flood(void *arg)
{
    flood_worker *w = arg;
    char key[32];
    sl_response rs;
    for (int i = 0; i < 20000; i++) {
        snprintf(key, sizeof key, "flood-%d-%d", w->id, i);
        sl_request rq = tb("api", key, 1, 5, HOUR);
        sl_engine_decide(w->e, &rq, &rs, T0 + i);
        w->errors += rs.error != NULL;
    }
    return NULL;
}

static void test_threads_key_flood_respects_cap(void **state)
{
    (void)state;
    sl_engine *e = engine_new(1000, 8, 0);
    pthread_t th[THREADS];
    flood_worker w[THREADS];
    for (int t = 0; t < THREADS; t++) {
        w[t] = (flood_worker){.e = e, .id = t};
        assert_int_equal(pthread_create(&th[t], NULL, flood, &w[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(w[t].errors, 0);
    }
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    assert_true(st.keys <= 1000);
    assert_true(st.keys >= 900);
    assert_int_equal(st.keys + st.evictions + st.expirations, THREADS * 20000);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_decide_and_stats),
        cmocka_unit_test(test_invalid_request_changes_nothing),
        cmocka_unit_test(test_remove),
        cmocka_unit_test(test_engines_are_independent),
        cmocka_unit_test(test_expire_and_cap),
        cmocka_unit_test(test_batch_equals_one_by_one),
        cmocka_unit_test(test_threads_one_key),
        cmocka_unit_test(test_threads_one_key_batched),
        cmocka_unit_test(test_threads_many_keys),
        cmocka_unit_test(test_threads_key_flood_respects_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

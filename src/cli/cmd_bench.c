/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `sluice bench engine`: in-process engine throughput. Pre-populates N keys, then T threads decide
 * on keys drawn uniformly from the N for S seconds, one by one (--batch 1) or in batches through
 * sl_engine_decide_batch(). Prints readable lines, then, as its last line, one JSON object for
 * scripts (bench/, docs/performance.md).
 *
 * The loop is built so the engine dominates: a key is "key-" plus 8 hex digits written by a table
 * lookup per byte (no printf), the random source is a per-thread xorshift, and the clock is read
 * once per 256 decisions (the engine takes `now` from its caller, as the daemon's loop does).
 * ns_per_decision is the wall time one thread spends per decision: threads / decisions_per_sec.
 * cpu_share is the threads' CPU time over their wall time: below ~0.95 other processes took some of
 * the cores and the run understates the engine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "sluice/clock.h"
#include "sluice/engine.h"

#define KEY_PREFIX "key-"
#define KEY_LEN (sizeof KEY_PREFIX - 1 + 8)
#define MAX_BATCH 4096
#define MAX_THREADS 256
#define CLOCK_EVERY 256

typedef struct bench_opts {
    bool json; /* only the JSON line */
    int algorithm;
    uint64_t keys;
    uint64_t max_keys;   /* 0 = keys */
    unsigned shards;
    int threads;
    double seconds;
    int batch;
    int64_t limit;
    int64_t duration;
} bench_opts;

typedef struct bench_thread {
    pthread_t tid;
    sl_engine *e;
    const bench_opts *o;
    uint64_t seed;
    volatile int *stop;
    volatile int *go;
    uint64_t decisions, over, errors;
    int64_t elapsed_ns, cpu_ns;
} bench_thread;

/* The flags of `sluice bench engine`, turned into bench_opts. */
typedef struct engine_flags {
    char *algorithm;
    int64_t keys, max_keys, shards, threads, batch, limit, duration;
    double seconds;
    bool json;
} engine_flags;

#define F(f) offsetof(engine_flags, f)

static const sl_opt engine_opts[] = {
    {.name = "algorithm", .type = SL_OPT_STRING, .offset = F(algorithm), .def = "TOKEN_BUCKET",
     .metavar = "A", .help = "algorithm name, any case"},
    {.name = "keys", .type = SL_OPT_INT, .offset = F(keys), .def = "1000000", .min = 1,
     .max = UINT32_MAX, .metavar = "N", .help = "distinct keys"},
    {.name = "max-keys", .type = SL_OPT_INT, .offset = F(max_keys), .def = "0", .def_doc = "N",
     .min = 0, .max = (int64_t)(UINT64_MAX >> 8), .metavar = "M",
     .help = "the engine's key cap (smaller than N measures eviction)"},
    {.name = "shards", .type = SL_OPT_INT, .offset = F(shards), .def = "64", .min = 1,
     .max = 65536, .metavar = "S", .help = "store shards, a power of two"},
    {.name = "threads", .type = SL_OPT_INT, .offset = F(threads), .def = "1", .min = 1,
     .max = MAX_THREADS, .metavar = "T", .help = "deciding threads"},
    {.name = "seconds", .type = SL_OPT_DOUBLE, .offset = F(seconds), .def = "3", .dmin = 1e-9,
     .dmax = 3600, .metavar = "S", .help = "measured duration"},
    {.name = "batch", .type = SL_OPT_INT, .offset = F(batch), .def = "1", .min = 1,
     .max = MAX_BATCH, .metavar = "B",
     .help = "requests per sl_engine_decide_batch() call; 1 = sl_engine_decide()"},
    {.name = "limit", .type = SL_OPT_INT, .offset = F(limit), .def = "100", .min = 1,
     .max = INT64_MAX, .metavar = "L",
     .help = "the requests' limit (SLIDING_LOG keeps 8*L bytes/key)"},
    {.name = "duration", .type = SL_OPT_INT, .offset = F(duration), .def = "60000", .min = 1,
     .max = INT64_MAX, .metavar = "MS", .help = "the requests' duration in ms"},
    {.name = "json", .type = SL_OPT_BOOL, .offset = F(json), .def = "false",
     .help = "print only the JSON line (the prose lines are left out)"},
};

static const sl_opt_table engine_table = {
    .program = "sluice bench engine",
    .flags_only = true,
    .about = "Decide in-process on keys drawn uniformly from N pre-populated keys and report the\n"
             "decision rate, the cost per decision and the memory per key. The last line is JSON.\n",
    .epilog = "exit: 0 done, 2 usage, 3 the engine failed or a request errored\n",
    .opts = engine_opts,
    .nopts = sizeof engine_opts / sizeof engine_opts[0],
};

static const char hex2[] = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                           "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
                           "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
                           "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
                           "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
                           "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
                           "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
                           "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

/* Writes the 8 hex digits of i after the constant prefix already in buf. */
static inline void key_format(char *buf, uint32_t i)
{
    char *p = buf + sizeof KEY_PREFIX - 1;
    for (int b = 3; b >= 0; b--, p += 2)
        memcpy(p, &hex2[((i >> (8 * b)) & 0xff) * 2], 2);
}

static inline uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static inline uint32_t pick(uint64_t *x, uint64_t n)
{
    return (uint32_t)(((unsigned __int128)xorshift(x) * n) >> 64);
}

static void request_init(sl_request *rq, char *keybuf, const bench_opts *o)
{
    memcpy(keybuf, KEY_PREFIX, sizeof KEY_PREFIX - 1);
    memset(rq, 0, sizeof *rq);
    rq->name = "bench";
    rq->name_len = 5;
    rq->unique_key = keybuf;
    rq->unique_key_len = KEY_LEN;
    rq->hits = 1;
    rq->limit = o->limit;
    rq->duration = o->duration;
    rq->algorithm = o->algorithm;
}

typedef struct bench_buf {
    sl_request *rq;
    sl_response *rs;
    char (*keys)[KEY_LEN];
} bench_buf;

static int buf_init(bench_buf *b, int n, const bench_opts *o)
{
    b->rq = calloc((size_t)n, sizeof *b->rq);
    b->rs = calloc((size_t)n, sizeof *b->rs);
    b->keys = calloc((size_t)n, sizeof *b->keys);
    if (!b->rq || !b->rs || !b->keys)
        return -ENOMEM;
    for (int i = 0; i < n; i++)
        request_init(&b->rq[i], b->keys[i], o);
    return 0;
}

static void buf_free(bench_buf *b)
{
    free(b->rq);
    free(b->rs);
    free(b->keys);
}

/* CPU time of the calling thread: a thread that got less CPU than wall time shared its core with
 * other work, and the run's figures are then not the engine's alone (reported as cpu_share). */
static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *bench_run(void *arg)
{
    bench_thread *t = arg;
    const bench_opts *o = t->o;
    bench_buf b;
    int n = o->batch;
    int rc = buf_init(&b, n, o);
    while (!__atomic_load_n(t->go, __ATOMIC_ACQUIRE))
        sched_yield();
    if (rc) {
        buf_free(&b);
        return NULL;
    }
    uint64_t x = t->seed | 1, decisions = 0, over = 0, errors = 0;
    int64_t t0 = sl_mono_ns(), c0 = thread_cpu_ns(), now = sl_wall_ms();
    unsigned since_clock = 0;
    while (!__atomic_load_n(t->stop, __ATOMIC_RELAXED)) {
        for (int i = 0; i < n; i++)
            key_format(b.keys[i], pick(&x, o->keys));
        if (n == 1)
            sl_engine_decide(t->e, b.rq, b.rs, now);
        else
            sl_engine_decide_batch(t->e, b.rq, b.rs, (size_t)n, now);
        for (int i = 0; i < n; i++) {
            over += b.rs[i].status == SL_OVER_LIMIT;
            errors += b.rs[i].error != NULL;
        }
        decisions += (uint64_t)n;
        if ((since_clock += (unsigned)n) >= CLOCK_EVERY) {
            since_clock = 0;
            now = sl_wall_ms();
        }
    }
    t->elapsed_ns = sl_mono_ns() - t0;
    t->cpu_ns = thread_cpu_ns() - c0;
    t->decisions = decisions;
    t->over = over;
    t->errors = errors;
    buf_free(&b);
    return NULL;
}

/* One hit on every key, in batches, so that the measured run finds them all held. */
static int populate(sl_engine *e, const bench_opts *o, uint64_t *errors)
{
    enum { CHUNK = 256 };
    bench_buf b;
    int rc = buf_init(&b, CHUNK, o);
    if (rc) {
        buf_free(&b);
        return rc;
    }
    *errors = 0;
    int64_t now = sl_wall_ms();
    for (uint64_t base = 0; base < o->keys; base += CHUNK) {
        size_t n = o->keys - base < CHUNK ? (size_t)(o->keys - base) : CHUNK;
        for (size_t i = 0; i < n; i++)
            key_format(b.keys[i], (uint32_t)(base + i));
        sl_engine_decide_batch(e, b.rq, b.rs, n, now);
        for (size_t i = 0; i < n; i++)
            *errors += b.rs[i].error != NULL;
    }
    buf_free(&b);
    return 0;
}

/* The flags as bench_opts: 0, or 2 after a usage error. */
static int engine_options(const engine_flags *f, bench_opts *o)
{
    *o = (bench_opts){.keys = (uint64_t)f->keys, .max_keys = (uint64_t)f->max_keys,
                      .shards = (unsigned)f->shards, .threads = (int)f->threads,
                      .seconds = f->seconds, .batch = (int)f->batch, .limit = f->limit,
                      .duration = f->duration};
    o->algorithm = sl_algorithm_from_name(f->algorithm, strlen(f->algorithm));
    if (o->algorithm < 0) {
        fprintf(stderr, "sluice bench engine: invalid value '%s'\n", f->algorithm);
        return 2;
    }
    if (f->shards & (f->shards - 1)) {
        fprintf(stderr, "sluice bench engine: invalid value '%lld'\n", (long long)f->shards);
        return 2;
    }
    return 0;
}

static int engine_run(bench_opts o);

static int engine_main(void *flags, const sl_cli_args *args)
{
    bench_opts o;
    (void)args;
    int code = engine_options(flags, &o);
    o.json = ((const engine_flags *)flags)->json;
    return code ? code : engine_run(o);
}

/* sluice bench engine: a command of its own, under sluice bench's routing (bench_main). */
static const sl_cli_command bench_engine = {
    .name = "engine", .table = &engine_table, .opts_size = sizeof(engine_flags),
    .run = engine_main};

static int engine_run(bench_opts o)
{
    if (!o.max_keys)
        o.max_keys = o.keys;

    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    cfg.max_keys = o.max_keys;
    cfg.shards = o.shards;
    sl_engine *e = NULL;
    int rc = sl_engine_new(&cfg, &e);
    if (rc) {
        fprintf(stderr, "sluice bench engine: engine: %s\n", strerror(-rc));
        return SL_CLI_EXIT_UNREACHABLE;
    }
    const char *alg = sl_algorithm_name(o.algorithm);
    if (!o.json)
        printf("engine: %s, %llu keys (cap %llu, %u shards), %d thread(s), batch %d, %.1f s\n",
               alg, (unsigned long long)o.keys, (unsigned long long)o.max_keys, o.shards, o.threads,
               o.batch, o.seconds);

    uint64_t pop_errors = 0;
    int64_t p0 = sl_mono_ns();
    rc = populate(e, &o, &pop_errors);
    int64_t p1 = sl_mono_ns();
    if (rc || pop_errors) {
        fprintf(stderr, "sluice bench engine: populating failed (%s, %llu request errors)\n",
                rc ? strerror(-rc) : "ok", (unsigned long long)pop_errors);
        sl_engine_free(e);
        return SL_CLI_EXIT_UNREACHABLE;
    }
    sl_engine_stats st;
    sl_engine_stats_get(e, &st);
    if (!o.json)
        printf("populate: %llu keys in %.2f s (%.0f ns per new key)\n",
               (unsigned long long)st.keys, (double)(p1 - p0) / 1e9, (double)(p1 - p0) / (double)o.keys);

    bench_thread *th = calloc((size_t)o.threads, sizeof *th);
    volatile int stop = 0, go = 0;
    int started = 0;
    for (int i = 0; th && i < o.threads; i++) {
        th[i] = (bench_thread){.e = e, .o = &o, .seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1),
                               .stop = &stop, .go = &go};
        if (pthread_create(&th[i].tid, NULL, bench_run, &th[i]))
            break;
        started++;
    }
    if (started < o.threads) {
        fprintf(stderr, "sluice bench engine: could not start %d threads\n", o.threads);
        __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < started; i++)
            pthread_join(th[i].tid, NULL);
        free(th);
        sl_engine_free(e);
        return SL_CLI_EXIT_UNREACHABLE;
    }
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    struct timespec ts = {.tv_sec = (time_t)o.seconds,
                          .tv_nsec = (long)((o.seconds - (double)(time_t)o.seconds) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    uint64_t decisions = 0, over = 0, errors = 0;
    double rate = 0, cpu = 0, wall = 0;
    for (int i = 0; i < o.threads; i++) {
        pthread_join(th[i].tid, NULL);
        decisions += th[i].decisions;
        over += th[i].over;
        errors += th[i].errors;
        if (th[i].elapsed_ns > 0)
            rate += (double)th[i].decisions * 1e9 / (double)th[i].elapsed_ns;
        cpu += (double)th[i].cpu_ns;
        wall += (double)th[i].elapsed_ns;
    }
    double cpu_share = wall > 0 ? cpu / wall : 0;
    free(th);

    sl_engine_stats_get(e, &st);
    double ns_per = rate > 0 ? 1e9 * o.threads / rate : 0;
    double bytes_per_key = st.keys ? (double)st.bytes / (double)st.keys : 0;
    if (!o.json) {
        printf("decisions: %llu in %.2f s: %.2f M/s, %.1f ns per decision per thread\n",
               (unsigned long long)decisions, o.seconds, rate / 1e6, ns_per);
        printf("cpu: the threads ran %.1f%% of the wall time%s\n", 100 * cpu_share,
               cpu_share < 0.95 ? " (other work shared the cores: figures are pessimistic)" : "");
        printf("outcomes: %.1f%% over limit, %llu errors, %llu evictions\n",
               decisions ? 100.0 * (double)over / (double)decisions : 0.0,
               (unsigned long long)errors, (unsigned long long)st.evictions);
        printf("memory: %.1f MB for %llu keys (%llu slots): %.1f bytes per key\n",
               (double)st.bytes / 1e6, (unsigned long long)st.keys,
               (unsigned long long)st.capacity, bytes_per_key);
    }

    json_t *j = json_pack("{s:s, s:I, s:I, s:i, s:i, s:i, s:f, s:I, s:f, s:f, s:f, s:I, s:I, s:I, "
                          "s:f}",
                          "algorithm", alg, "keys", (json_int_t)o.keys, "max_keys",
                          (json_int_t)o.max_keys, "shards", (int)o.shards, "threads", o.threads,
                          "batch", o.batch, "seconds", o.seconds, "decisions",
                          (json_int_t)decisions, "decisions_per_sec", rate, "ns_per_decision",
                          ns_per, "bytes_per_key", bytes_per_key, "bytes", (json_int_t)st.bytes,
                          "evictions", (json_int_t)st.evictions, "errors", (json_int_t)errors,
                          "cpu_share", cpu_share);
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(j);
    sl_engine_free(e);
    return s && !errors ? SL_CLI_EXIT_OK : SL_CLI_EXIT_UNREACHABLE;
}

static int bench_main(int argc, char **argv)
{
    /* argv[0] is "bench" (main passes the arguments from the command's name on). */
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        sl_opt_help(&engine_table, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "engine"))
        return sl_cli_command_run(&bench_engine, argc - 1, argv + 1);
    fprintf(stderr, "sluice bench: unknown benchmark '%s' (known: engine)\n", argv[1]);
    return 2;
}

const sl_cli_command sl_cmd_bench = {
    .name = "bench", .summary = "in-process benchmarks: sluice bench engine ...",
    .main = bench_main};

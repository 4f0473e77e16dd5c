/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `sluice sim`: the accuracy lab. Generates (or replays) traffic on a virtual clock, runs it
 * through the real engine once per algorithm, and compares every decision with a perfect sliding
 * window (src/sim/sim.h defines the figures). It can also split the traffic over k limiters
 * (Levee's client-proxy) or model Gubernator's GLOBAL mode over k nodes with a sync period,
 * sweeping k and s.
 *
 * With --open-loop it runs Criteo's study instead (src/sim/openloop.h): the same offered traffic
 * fed to every estimator, each one's count of the trailing window recorded against the true count,
 * errors tabulated over the whole run and over its second half (steady state).
 *
 * Output: a table for people, then, as the last line, one JSON object with every figure, for
 * scripts (scripts/plots.sh, docs/accuracy.md). The run is deterministic: the same options give the
 * same bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "sim/openloop.h"
#include "sim/series.h"
#include "sim/shape.h"
#include "sim/sim.h"
#include "sim/traffic.h"

#define MAX_ALGS 16
#define MAX_SWEEP 32

typedef struct opts {
    /* the flags */
    char *traffic;
    double rate, rate_start, seconds;
    int64_t on_ms, off_ms, start_ms, csv_step;
    int64_t keys_flag, seed_flag, max_events_flag;
    int64_t limit, duration, burst;
    char *file, *csv; /* NULL: not given */
    char *algorithms;
    char *split_list, *nodes_list, *sync_list;
    int split_mode_flag, forward_flag;
    /* what they say */
    uint32_t keys;
    uint64_t seed;
    size_t max_events;
    sl_sim_params p;
    int64_t split[MAX_SWEEP];
    size_t nsplit;
    sl_sim_mode split_mode;
    int64_t nodes[MAX_SWEEP], sync[MAX_SWEEP];
    size_t nnodes, nsync;
    bool forward_admitted_only;
    bool json;          /* --json: only the JSON document on stdout */
    int64_t max_delay;  /* --max-delay: the shaper study (delay instead of reject); -1 = off */
    bool open_loop;     /* --open-loop: Criteo's study instead of the closed-loop one */
} opts;

/* The defaults below spell these out. */
_Static_assert(SL_TRAFFIC_DEFAULT_MAX_EVENTS == 10000000, "--max-events default");
_Static_assert(SL_SIM_DEFAULT_EPOCH_MS == INT64_C(1699920000000), "--start-ms default");
_Static_assert(SL_TRAFFIC_MAX_KEYS == 1048576, "--keys bound");

#define F(f) offsetof(opts, f)
#define G_TRAFFIC "Traffic"
#define G_LIMIT "Limit"
#define G_DIST "Distribution (sweeps; each takes a comma-separated list)"
#define G_OUT "Output"
#define T40 (INT64_C(1) << 40)

static const char *const split_modes[] = {"rr", "random", NULL};
static const char *const forwards[] = {"all", "admitted", NULL};

static const sl_opt sim_opts[] = {
    {.name = "traffic", .type = SL_OPT_STRING, .offset = F(traffic), .def = "poisson",
     .group = G_TRAFFIC, .metavar = "KIND",
     .help = "poisson | bursty | ramp | constant | edge | replay; constant spaces requests evenly "
             "at --rate; edge sends --limit requests per key at "
             "B-1 ms and at B ms for every other multiple B of --duration (a fixed window's worst "
             "case)"},
    {.name = "rate", .type = SL_OPT_DOUBLE, .offset = F(rate), .def = "2", .dmax = 1e9,
     .group = G_TRAFFIC, .metavar = "R",
     .help = "requests/s per key: poisson rate, bursty rate while on, ramp end rate"},
    {.name = "rate-start", .type = SL_OPT_DOUBLE, .offset = F(rate_start), .def = "0",
     .dmax = 1e9, .group = G_TRAFFIC, .metavar = "R", .help = "ramp: rate at t = 0"},
    {.name = "on-ms", .type = SL_OPT_INT, .offset = F(on_ms), .def = "2000", .min = 1, .max = T40,
     .group = G_TRAFFIC, .metavar = "MS", .help = "bursty: length of an on period"},
    {.name = "off-ms", .type = SL_OPT_INT, .offset = F(off_ms), .def = "8000", .min = 0,
     .max = T40, .group = G_TRAFFIC, .metavar = "MS", .help = "bursty: length of an off period"},
    {.name = "seconds", .type = SL_OPT_DOUBLE, .offset = F(seconds), .def = "600", .dmin = 0.001,
     .dmax = 1e9, .group = G_TRAFFIC, .metavar = "S", .help = "length of generated traffic"},
    {.name = "keys", .type = SL_OPT_INT, .offset = F(keys_flag), .def = "1", .min = 1,
     .max = SL_TRAFFIC_MAX_KEYS, .group = G_TRAFFIC, .metavar = "K",
     .help = "number of keys, requests spread uniformly"},
    {.name = "seed", .type = SL_OPT_INT, .offset = F(seed_flag), .def = "1", .min = 0,
     .max = INT64_MAX, .group = G_TRAFFIC, .metavar = "N",
     .help = "PRNG seed for traffic and routing"},
    {.name = "file", .type = SL_OPT_STRING, .offset = F(file), .nullable = true,
     .group = G_TRAFFIC, .metavar = "F",
     .help = "replay: lines '<t_ms> [<key>]' (blank or comma separated, '#' comments; timestamps "
             "in ms, the run starts at the smallest)"},
    {.name = "max-events", .type = SL_OPT_INT, .offset = F(max_events_flag), .def = "10000000",
     .min = 1, .max = UINT32_MAX, .group = G_TRAFFIC, .metavar = "N",
     .help = "refuse traffic longer than N requests"},
    {.name = "start-ms", .type = SL_OPT_INT, .offset = F(start_ms), .def = "1699920000000",
     .min = 0, .max = INT64_C(1) << 50, .group = G_TRAFFIC, .metavar = "MS",
     .help = "virtual epoch ms of t = 0 (the default is day-aligned)"},

    {.name = "limit", .type = SL_OPT_INT, .offset = F(limit), .def = "100", .min = 1, .max = T40,
     .group = G_LIMIT, .metavar = "L", .help = "requests per duration per key"},
    {.name = "duration", .type = SL_OPT_INT, .offset = F(duration), .def = "60000", .min = 1,
     .max = T40, .group = G_LIMIT, .metavar = "MS",
     .help = "window / period in ms (sliding_window:N needs a multiple of N)"},
    {.name = "burst", .type = SL_OPT_INT, .offset = F(burst), .def = "0", .min = 0, .max = T40,
     .group = G_LIMIT, .metavar = "B",
     .help = "burst passed to the engine (leaky bucket, GCRA; 0 = engine default)"},
    {.name = "algorithms", .type = SL_OPT_STRING, .offset = F(algorithms),
     .def = "token_bucket,leaky_bucket,gcra,fixed_window,sliding_window:1,sliding_window:5,"
            "sliding_window:60,sliding_log",
     .group = G_LIMIT, .metavar = "LIST",
     .help = "comma-separated; sliding_window:N uses N sub-windows, gcra:B and leaky_bucket:B use "
             "burst B instead of --burst"},

    {.name = "split", .type = SL_OPT_STRING, .offset = F(split_list), .group = G_DIST,
     .metavar = "K[,K...]", .help = "k limiters with limit/k and burst/k each (Levee's DF groups)"},
    {.name = "split-mode", .type = SL_OPT_ENUM, .offset = F(split_mode_flag), .def = "rr",
     .choices = split_modes, .group = G_DIST, .metavar = "MODE",
     .help = "rr (a key's requests round-robin, as Levee's client-proxy) | random"},
    {.name = "global-nodes", .type = SL_OPT_STRING, .offset = F(nodes_list), .group = G_DIST,
     .metavar = "K[,K...]", .help = "Gubernator GLOBAL model: k nodes answering from local copies"},
    {.name = "global-sync", .type = SL_OPT_STRING, .offset = F(sync_list), .def = "100",
     .group = G_DIST, .metavar = "MS[,MS...]",
     .help = "period of hit sends and owner broadcasts"},
    {.name = "global-forward", .type = SL_OPT_ENUM, .offset = F(forward_flag), .def = "all",
     .choices = forwards, .group = G_DIST, .metavar = "WHAT",
     .help = "all (every hit goes to the owner, as Gubernator) | admitted (only the hits a node "
             "admitted)"},

    {.name = "json", .type = SL_OPT_BOOL, .offset = F(json), .def = "false", .group = G_OUT,
     .help = "print only the JSON document (the tables are left out)"},
    {.name = "csv", .type = SL_OPT_STRING, .offset = F(csv), .nullable = true, .group = G_OUT,
     .metavar = "FILE",
     .help = "single mode: time series of key 0, admitted in the trailing window per algorithm "
             "and for the perfect window; --open-loop: each estimator's count; sweeps: one row per (k, s) with <alg>_over_pct and "
             "<alg>_peak_ratio columns"},
    {.name = "max-delay", .type = SL_OPT_INT, .offset = F(max_delay), .def = "-1", .min = -1,
     .max = T40, .group = G_OUT, .metavar = "MS",
     .help = "also run the shaper study: GCRA with max_delay_ms MS (delay instead of reject), "
             "departures' peak per window and admissions against a perfect FIFO shaper; -1 = off"},
    {.name = "open-loop", .type = SL_OPT_BOOL, .offset = F(open_loop), .group = G_OUT,
     .help = "Criteo's study instead: feed the same traffic to every estimator, nothing rejected, "
             "and record each one's count of the trailing window against the true count (key 0); "
             "--csv gets the series (t_s,true,<column>...), the table the errors, whole run and "
             "second half; leaky_bucket and gcra give a _backlog and an _admitted column"},
    {.name = "csv-step", .type = SL_OPT_INT, .offset = F(csv_step), .def = "0",
     .def_doc = "duration/20, >= 1", .min = 0, .max = T40, .group = G_OUT, .metavar = "MS",
     .help = "sampling step of the time series"},
};

static const sl_opt_table sim_table = {
    .program = "sluice sim",
    .flags_only = true,
    .about = "Runs traffic through the engine on a virtual clock, once per algorithm, and compares "
             "each\n"
             "decision with a perfect sliding window of the same limit (windows are (t - duration, "
             "t]).\n"
             "Prints a table, then one JSON object as the last line.\n",
    .epilog = "exit: 0 done, 2 usage (--csv-step longer than the traffic too), 3 failed\n",
    .opts = sim_opts,
    .nopts = sizeof sim_opts / sizeof sim_opts[0],
};

/* A comma-separated list of whole numbers in [lo, hi] ("" = none). */
static int parse_list(const char *name, const char *s, int64_t lo, int64_t hi, int64_t *out,
                      size_t *n)
{
    *n = 0;
    for (const char *p = s; *p;) {
        size_t len = strcspn(p, ",");
        char tok[32];
        int64_t v;
        if (len > 0) {
            if (len >= sizeof tok || *n == MAX_SWEEP)
                goto bad;
            memcpy(tok, p, len);
            tok[len] = 0;
            if (sl_opt_parse_int(tok, &v) || v < lo || v > hi)
                goto bad;
            out[(*n)++] = v;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
bad:
    fprintf(stderr, "sluice sim: bad value for --%s: '%s'\n", name, s);
    return -EINVAL;
}

/* The values the flags make and their checks: 0 to run, or -1 after a usage error's message. */
static int finish_opts(opts *o)
{
    o->keys = (uint32_t)o->keys_flag;
    o->seed = (uint64_t)o->seed_flag;
    o->max_events = (size_t)o->max_events_flag;
    o->p = (sl_sim_params){.limit = o->limit, .duration = o->duration, .burst = o->burst};
    o->split_mode = o->split_mode_flag ? SL_SIM_SPLIT_RANDOM : SL_SIM_SPLIT_RR;
    o->forward_admitted_only = o->forward_flag == 1;
    if (parse_list("split", o->split_list, 1, SL_SIM_MAX_NODES, o->split, &o->nsplit) ||
        parse_list("global-nodes", o->nodes_list, 1, SL_SIM_MAX_NODES, o->nodes, &o->nnodes) ||
        parse_list("global-sync", o->sync_list, 1, T40, o->sync, &o->nsync))
        return -1;
    if (o->nsync == 0) {
        fprintf(stderr, "sluice sim: bad value for --global-sync: '%s'\n", o->sync_list);
        return -1;
    }
    if (o->open_loop && (o->nsplit || o->nnodes || o->max_delay >= 0)) {
        fprintf(stderr, "sluice sim: --open-loop is a study of its own (no --split, --global-nodes, "
                        "--max-delay)\n");
        return -1;
    }
    if (o->nsplit && o->nnodes) {
        fprintf(stderr, "sluice sim: --split and --global-nodes are separate studies\n");
        return -1;
    }
    o->p.epoch_ms = o->start_ms;
    if (!o->csv_step)
        o->csv_step = o->p.duration / 20 > 0 ? o->p.duration / 20 : 1;
    return 0;
}

static int make_traffic(const opts *o, sl_traffic *t)
{
    int64_t span = (int64_t)llround(o->seconds * 1000.0);
    if (span < 1)
        span = 1;
    int rc;
    if (!strcmp(o->traffic, "poisson")) {
        rc = sl_traffic_poisson(t, o->rate, span, o->keys, o->seed);
    } else if (!strcmp(o->traffic, "bursty")) {
        rc = sl_traffic_bursty(t, o->rate, o->on_ms, o->off_ms, span, o->keys, o->seed);
    } else if (!strcmp(o->traffic, "constant")) {
        rc = sl_traffic_constant(t, o->rate, span, o->keys);
    } else if (!strcmp(o->traffic, "ramp")) {
        rc = sl_traffic_ramp(t, o->rate_start, o->rate, span, o->keys, o->seed);
    } else if (!strcmp(o->traffic, "edge")) {
        rc = sl_traffic_edge(t, o->p.limit, o->p.duration, o->p.epoch_ms, span, o->keys);
    } else if (!strcmp(o->traffic, "replay")) {
        if (!o->file) {
            fprintf(stderr, "sluice sim: --traffic replay needs --file\n");
            return -EINVAL;
        }
        FILE *f = fopen(o->file, "r");
        if (!f) {
            fprintf(stderr, "sluice sim: %s: %s\n", o->file, strerror(errno));
            return -errno;
        }
        size_t line;
        const char *err;
        rc = sl_traffic_replay(t, f, &line, &err);
        fclose(f);
        if (rc) {
            fprintf(stderr, "sluice sim: %s:%zu: %s\n", o->file, line, err ? err : strerror(-rc));
            return rc;
        }
    } else {
        fprintf(stderr, "sluice sim: unknown traffic '%s'\n", o->traffic);
        return -EINVAL;
    }
    if (rc == -E2BIG)
        fprintf(stderr, "sluice sim: traffic too large (more than --max-events %zu requests)\n",
                t->max_events);
    else if (rc)
        fprintf(stderr, "sluice sim: cannot generate traffic: %s\n", strerror(-rc));
    return rc;
}

static double over_pct(const sl_sim_result *r, const sl_sim_result *perfect)
{
    if (!perfect->admitted)
        return 0;
    return 100.0 * ((double)r->admitted - (double)perfect->admitted) / (double)perfect->admitted;
}

static json_t *result_json(const sl_sim_result *r, const sl_sim_result *perfect, int64_t limit)
{
    json_t *o = json_object();
    json_object_set_new(o, "algorithm", json_string(r->label));
    json_object_set_new(o, "requests", json_integer((json_int_t)r->requests));
    json_object_set_new(o, "admitted", json_integer((json_int_t)r->admitted));
    json_object_set_new(o, "rejected", json_integer((json_int_t)r->rejected));
    json_object_set_new(o, "peak", json_integer(r->peak));
    json_object_set_new(o, "over_limit", json_integer(r->over_limit));
    json_object_set_new(o, "peak_ratio", json_real(limit ? (double)r->peak / (double)limit : 0));
    json_object_set_new(o, "excess", json_integer((json_int_t)r->excess));
    json_object_set_new(o, "wrong_admit", json_integer((json_int_t)r->wrong_admit));
    json_object_set_new(o, "wrong_reject", json_integer((json_int_t)r->wrong_reject));
    json_object_set_new(o, "over_admission_pct",
                        json_real(round(over_pct(r, perfect) * 100) / 100));
    json_object_set_new(o, "bytes_per_key", json_real(round(r->bytes_per_key * 10) / 10));
    json_object_set_new(o, "node_limit", json_integer(r->node_limit));
    json_object_set_new(o, "errors", json_integer((json_int_t)r->errors));
    if (r->first_error)
        json_object_set_new(o, "error", json_string(r->first_error));
    return o;
}

/* The tables and prose: on stdout, unless --json asked for the JSON document alone. */
static void say(const opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const opts *o, const char *fmt, ...)
{
    if (o->json)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
}

static void print_row(const opts *o, const sl_sim_result *r, const sl_sim_result *perfect,
                      const char *prefix)
{
    say(o, "%s%-18s %9" PRIu64 " %9" PRIu64 " %+8.2f%% %6" PRId64 " %6" PRId64 " %7" PRIu64
           " %8" PRIu64 " %8" PRIu64 " %7.1f%s%s\n",
           prefix, r->label, r->admitted, r->rejected, over_pct(r, perfect), r->peak, r->over_limit,
           r->excess, r->wrong_admit, r->wrong_reject, r->bytes_per_key,
           r->first_error ? "  error: " : "", r->first_error ? r->first_error : "");
}

static const char *mode_name(const opts *o)
{
    if (o->open_loop)
        return "open-loop";
    if (o->nsplit)
        return o->split_mode == SL_SIM_SPLIT_RR ? "split-rr" : "split-random";
    return o->nnodes ? "global" : "single";
}

static void csv_label(FILE *f, const char *label, const char *suffix)
{
    for (const char *p = label; *p; p++)
        fputc(*p == ':' ? '_' : *p, f);
    fprintf(f, "_%s", suffix);
}

static int sim_run(opts *o);

/* After a usage error, from the option engine or from finish_opts. */
#define SIM_USAGE_HINT "'sluice sim --help' lists the options\n"

static int run(void *arg, const sl_cli_args *args)
{
    (void)args;
    if (finish_opts(arg)) {
        fputs(SIM_USAGE_HINT, stderr);
        return 2;
    }
    return sim_run(arg);
}

const sl_cli_command sl_cmd_sim = {
    .name = "sim", .summary = "measure algorithms against a perfect sliding window (virtual clock)",
    .table = &sim_table, .opts_size = sizeof(opts), .usage_hint = SIM_USAGE_HINT, .run = run};

/* The table's header line (a sweep puts k, sync_ms and limit/ before it). */
static void print_header(const opts *o)
{
    say(o, "%-18s %9s %9s %9s %6s %6s %7s %8s %8s %7s\n", "algorithm", "admitted", "rejected",
           "vs-perf", "peak", "over", "excess", "wrong+", "wrong-", "B/key");
}

static json_t *scenario_json(const opts *o, const sl_traffic *t)
{
    json_t *scen = json_object();
    json_object_set_new(scen, "traffic", json_string(o->traffic));
    json_object_set_new(scen, "requests", json_integer((json_int_t)t->n));
    json_object_set_new(scen, "keys", json_integer(t->nkeys));
    json_object_set_new(scen, "span_ms", json_integer(t->span_ms));
    json_object_set_new(scen, "mean_rate",
                        json_real(round(sl_traffic_mean_rate(t) * 1000) / 1000));
    json_object_set_new(scen, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(scen, "limit", json_integer(o->p.limit));
    json_object_set_new(scen, "duration", json_integer(o->p.duration));
    json_object_set_new(scen, "burst", json_integer(o->p.burst));
    json_object_set_new(scen, "mode", json_string(mode_name(o)));
    if (o->nnodes)
        json_object_set_new(scen, "global_forward",
                            json_string(o->forward_admitted_only ? "admitted" : "all"));
    return scen;
}

/* One limiter per algorithm: a row each, and with --csv the time series of key 0 (dec[a + 1]
 * holds algorithm a's decisions; the caller frees them). 0 or -errno (reported). */
static int run_single(const opts *o, sl_sim *s, const sl_traffic *t, const sl_sim_alg *algs,
                      size_t nalgs, uint8_t **dec, json_t *results, FILE *csv)
{
    int rc = 0;
    say(o, "\n");
    print_header(o);
    print_row(o, &s->perfect, &s->perfect, "");
    for (size_t a = 0; a < nalgs; a++) {
        sl_sim_result r;
        if (!(dec[a + 1] = malloc(t->n ? t->n : 1)) ||
            (rc = sl_sim_eval(s, &algs[a], NULL, dec[a + 1], &r))) {
            fprintf(stderr, "sluice sim: %s: %s\n", algs[a].label, strerror(rc ? -rc : ENOMEM));
            return rc ? rc : -ENOMEM;
        }
        print_row(o, &r, &s->perfect, "");
        json_array_append_new(results, result_json(&r, &s->perfect, o->p.limit));
    }
    if (csv) {
        const char *names[MAX_ALGS + 1] = {"perfect"};
        dec[0] = s->ref;
        for (size_t a = 0; a < nalgs; a++)
            names[a + 1] = algs[a].label;
        rc = sl_series_write(csv, t, 0, o->p.duration, o->csv_step, nalgs + 1, names,
                             (const uint8_t *const *)dec);
        dec[0] = NULL;
        if (rc)
            fprintf(stderr, "sluice sim: --csv: %s\n",
                    rc == -E2BIG ? "too many rows (raise --csv-step)" : strerror(-rc));
    }
    return rc;
}

/* The split or GLOBAL sweep: a row per (k, sync, algorithm), and with --csv a line per (k, sync).
 * 0 or -errno (reported). */
static int run_sweep(const opts *o, sl_sim *s, const sl_sim_alg *algs, size_t nalgs,
                     json_t *results, FILE *csv)
{
    bool global = o->nnodes > 0;
    const int64_t *ks = global ? o->nodes : o->split;
    size_t nks = global ? o->nnodes : o->nsplit, nss = global ? o->nsync : 1;
    if (csv) {
        fprintf(csv, "k,sync_ms");
        for (size_t a = 0; a < nalgs; a++) {
            fputc(',', csv);
            csv_label(csv, algs[a].label, "over_pct");
            fputc(',', csv);
            csv_label(csv, algs[a].label, "peak_ratio");
        }
        fputc('\n', csv);
    }
    say(o, "\n%4s %7s %6s ", "k", "sync_ms", "limit/");
    print_header(o);
    for (size_t i = 0; i < nks; i++) {
        for (size_t j = 0; j < nss; j++) {
            sl_sim_dist d = {
                .mode = global ? SL_SIM_GLOBAL : o->split_mode,
                .nodes = (unsigned)ks[i],
                .sync_ms = global ? o->sync[j] : 0,
                .seed = o->seed,
                .forward_admitted_only = o->forward_admitted_only,
            };
            if (csv)
                fprintf(csv, "%" PRId64 ",%" PRId64, ks[i], d.sync_ms);
            for (size_t a = 0; a < nalgs; a++) {
                sl_sim_result r;
                int rc = sl_sim_eval(s, &algs[a], &d, NULL, &r);
                if (rc) {
                    fprintf(stderr, "sluice sim: %s k=%" PRId64 ": %s\n", algs[a].label, ks[i],
                            strerror(-rc));
                    return rc;
                }
                char prefix[48];
                snprintf(prefix, sizeof prefix, "%4" PRId64 " %7" PRId64 " %6" PRId64 " ", ks[i],
                         d.sync_ms, r.node_limit);
                print_row(o, &r, &s->perfect, prefix);
                json_t *jr = result_json(&r, &s->perfect, o->p.limit);
                json_object_set_new(jr, "k", json_integer(ks[i]));
                if (global)
                    json_object_set_new(jr, "sync_ms", json_integer(d.sync_ms));
                json_array_append_new(results, jr);
                if (csv)
                    fprintf(csv, ",%.3f,%.4f", over_pct(&r, &s->perfect),
                            (double)r.peak / (double)o->p.limit);
            }
            if (csv)
                fputc('\n', csv);
        }
    }
    return 0;
}

static json_t *err_json(const sl_openloop_err *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "samples", json_integer((json_int_t)e->n));
    json_object_set_new(o, "mean_true", json_real(round(e->mean_true * 1000) / 1000));
    json_object_set_new(o, "mean_est", json_real(round(e->mean_est * 1000) / 1000));
    json_object_set_new(o, "mae", json_real(round(e->mae * 1000) / 1000));
    json_object_set_new(o, "max_err", json_real(e->max_err));
    json_object_set_new(o, "bias", json_real(round(e->bias * 1000) / 1000));
    json_object_set_new(o, "bias_pct",
                        json_real(e->mean_true > 0 ? round(1e4 * e->bias / e->mean_true) / 100 : 0));
    return o;
}

static const char *const kind_names[] = {"count", "backlog", "admitted"};

/* --open-loop: every column's series of key 0 (into csv if given), a markdown table of the errors
 * and their JSON under "open_loop". 0 or -errno (reported). */
static int run_open_loop(const opts *o, const sl_traffic *t, const sl_sim_alg *algs, size_t nalgs,
                         json_t *root, FILE *csv)
{
    sl_openloop_col cols[2 * MAX_ALGS];
    size_t ncols, samples = sl_openloop_samples(t, o->csv_step);
    if (samples > SL_OPENLOOP_MAX_SAMPLES) {
        fprintf(stderr, "sluice sim: --open-loop: too many samples (raise --csv-step)\n");
        return -E2BIG;
    }
    if (samples == 0) {
        fprintf(stderr, "sluice sim: --open-loop: the traffic is shorter than --csv-step\n");
        return -EINVAL;
    }
    sl_openloop_columns(algs, nalgs, cols, 2 * MAX_ALGS, &ncols); /* cannot overflow */
    double *series = malloc((ncols + 1) * samples * sizeof *series);
    if (!series) {
        fprintf(stderr, "sluice sim: --open-loop: %s\n", strerror(ENOMEM));
        return -ENOMEM;
    }
    double *truth = series;
    int rc = sl_openloop_true(t, 0, o->p.duration, o->csv_step, truth);
    for (size_t c = 0; c < ncols && !rc; c++) {
        const char *err = NULL;
        rc = sl_openloop_run(t, 0, &o->p, &cols[c], o->csv_step, series + (c + 1) * samples, &err);
        if (rc)
            fprintf(stderr, "sluice sim: --open-loop %s: %s\n", cols[c].label,
                    err ? err : strerror(-rc));
    }
    if (rc) {
        free(series);
        return rc;
    }
    if (csv) {
        fprintf(csv, "t_s,true");
        for (size_t c = 0; c < ncols; c++)
            fprintf(csv, ",%s", cols[c].label);
        fputc('\n', csv);
        for (size_t i = 0; i < samples; i++) {
            fprintf(csv, "%.3f,%g", (double)(o->csv_step * (int64_t)(i + 1)) / 1000.0, truth[i]);
            for (size_t c = 0; c < ncols; c++)
                fprintf(csv, ",%g", series[(c + 1) * samples + i]);
            fputc('\n', csv);
        }
    }
    say(o, "\nopen loop, key %s, %zu samples every %" PRId64 " ms; error = estimate - true count "
           "of (t - %" PRId64 " ms, t]; steady state = the second half (t > %.3f s)\n\n",
           t->keys[0], samples, o->csv_step, o->p.duration,
           (double)(o->csv_step * (int64_t)(samples / 2)) / 1000.0);
    say(o, "| estimator | reads | run MAE | run max | run bias | 2nd half true | 2nd half est "
           "| 2nd half MAE | 2nd half max | 2nd half bias |\n");
    say(o, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    json_t *arr = json_array();
    for (size_t c = 0; c < ncols; c++) {
        const double *est = series + (c + 1) * samples;
        sl_openloop_err whole, steady;
        sl_openloop_error(est, truth, 0, samples, &whole);
        sl_openloop_error(est, truth, samples / 2, samples, &steady);
        say(o, "| %s | %s | %.1f | %.0f | %+.1f | %.1f | %.1f | %.1f | %.0f | %+.1f (%+.1f %%) |\n",
               cols[c].label, kind_names[cols[c].kind], whole.mae, whole.max_err, whole.bias,
               steady.mean_true, steady.mean_est, steady.mae, steady.max_err, steady.bias,
               steady.mean_true > 0 ? 100.0 * steady.bias / steady.mean_true : 0.0);
        json_t *j = json_object();
        json_object_set_new(j, "column", json_string(cols[c].label));
        json_object_set_new(j, "algorithm", json_string(cols[c].alg.label));
        json_object_set_new(j, "kind", json_string(kind_names[cols[c].kind]));
        json_object_set_new(j, "whole", err_json(&whole));
        json_object_set_new(j, "steady", err_json(&steady));
        json_array_append_new(arr, j);
    }
    json_object_set_new(root, "open_loop", arr);
    say(o, "\nreads: count = the estimator's count of the window (nothing rejected); backlog = "
           "requests in the\nbucket (deep enough to refuse nothing); admitted = what the bucket "
           "with the run's limit and burst\nlets through in the window. MAE: mean |error|; max: "
           "largest |error|; bias: mean error.\n");
    free(series);
    return 0;
}

static int sim_run(opts *op)
{
    opts o = *op;
    int rc;
    sl_sim_alg algs[MAX_ALGS];
    size_t nalgs;
    if (sl_sim_alg_parse_list(o.algorithms, algs, MAX_ALGS, &nalgs)) {
        fprintf(stderr, "sluice sim: bad --algorithms '%s' (names: token_bucket, leaky_bucket[:B], "
                        "gcra[:B], fixed_window, sliding_window[:N], sliding_log; at most %d)\n",
                o.algorithms, MAX_ALGS);
        return 2;
    }

    sl_traffic t;
    sl_traffic_init(&t, o.max_events);
    sl_sim s = {0};
    uint8_t *dec[MAX_ALGS + 1] = {0};
    json_t *root = NULL;
    FILE *csv = NULL;
    int status = SL_CLI_EXIT_UNREACHABLE;
    if ((rc = make_traffic(&o, &t)))
        goto out;
    if (!o.open_loop && (rc = sl_sim_init(&s, &t, &o.p))) {
        fprintf(stderr, "sluice sim: %s\n", rc == -E2BIG ? "limit x keys too large for the perfect "
                                                           "window (8M slots)"
                                                         : strerror(-rc));
        goto out;
    }
    if (o.csv && !(csv = fopen(o.csv, "w"))) {
        fprintf(stderr, "sluice sim: %s: %s\n", o.csv, strerror(errno));
        goto out;
    }

    say(&o, "traffic %s: %zu requests, %u key(s), %.3f s, %.2f req/s per key (seed %" PRIu64 ")\n",
           o.traffic, t.n, t.nkeys, (double)t.span_ms / 1000.0, sl_traffic_mean_rate(&t), o.seed);
    say(&o, "limit %" PRId64 " per %" PRId64 " ms, burst %" PRId64 ", mode %s%s\n", o.p.limit,
           o.p.duration, o.p.burst, mode_name(&o),
           o.nnodes ? (o.forward_admitted_only ? " (forwarding admitted hits)"
                                               : " (forwarding every hit)")
                    : "");

    root = json_object();
    json_object_set_new(root, "scenario", scenario_json(&o, &t));
    if (o.open_loop) {
        rc = run_open_loop(&o, &t, algs, nalgs, root, csv);
        if (rc == -E2BIG || rc == -EINVAL) /* --csv-step does not fit the traffic */
            status = SL_CLI_EXIT_USAGE;
        if (rc)
            goto out;
        goto done;
    }
    json_object_set_new(root, "perfect", result_json(&s.perfect, &s.perfect, o.p.limit));
    json_t *results = json_array();
    json_object_set_new(root, "results", results);

    if (!o.nsplit && !o.nnodes)
        rc = run_single(&o, &s, &t, algs, nalgs, dec, results, csv);
    else
        rc = run_sweep(&o, &s, algs, nalgs, results, csv);
    if (rc)
        goto out;
    if (o.max_delay >= 0) {
        sl_sim_shape_result sr;
        if ((rc = sl_sim_shape(&s, o.max_delay, &sr))) {
            fprintf(stderr, "sluice sim: shaper study: %s\n", strerror(-rc));
            goto out;
        }
        double ratio = sr.perfect_admitted ? (double)sr.admitted / (double)sr.perfect_admitted : 1;
        say(&o, "\nshaper (gcra, max delay %" PRId64 " ms): admitted %" PRIu64 " (%" PRIu64
               " delayed, mean %.1f ms, max %" PRId64 " ms), perfect shaper %" PRIu64
               " (%.2f %%), peak departures %" PRId64 " per window (bound %" PRId64 ")\n",
               o.max_delay, sr.admitted, sr.delayed, sr.mean_delay, sr.max_delay_seen,
               sr.perfect_admitted, 100.0 * ratio, sr.peak, sr.peak_bound);
        json_t *sj = json_object();
        json_object_set_new(sj, "max_delay_ms", json_integer(o.max_delay));
        json_object_set_new(sj, "admitted", json_integer((json_int_t)sr.admitted));
        json_object_set_new(sj, "delayed", json_integer((json_int_t)sr.delayed));
        json_object_set_new(sj, "perfect_admitted", json_integer((json_int_t)sr.perfect_admitted));
        json_object_set_new(sj, "vs_perfect", json_real(ratio));
        json_object_set_new(sj, "mean_delay_ms", json_real(sr.mean_delay));
        json_object_set_new(sj, "max_delay_seen_ms", json_integer(sr.max_delay_seen));
        json_object_set_new(sj, "peak", json_integer(sr.peak));
        json_object_set_new(sj, "peak_bound", json_integer(sr.peak_bound));
        json_object_set_new(root, "shaper", sj);
    }
    say(&o, "\nvs-perf: admitted relative to the perfect window; peak: most admitted in one window;\n"
           "over: peak - limit; excess: admissions into a full window; wrong+/wrong-: admitted/\n"
           "rejected where the perfect window (run on the same stream) decided otherwise.\n");
done:
    if (csv) {
        if (fclose(csv)) {
            csv = NULL;
            fprintf(stderr, "sluice sim: --csv: %s\n", strerror(errno));
            goto out;
        }
        csv = NULL;
    }
    char *js = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(10));
    if (js) {
        printf("%s\n", js);
        free(js);
        status = 0;
    }
out:
    if (csv)
        fclose(csv);
    json_decref(root);
    for (size_t a = 0; a <= MAX_ALGS; a++)
        free(dec[a]);
    sl_sim_free(&s);
    sl_traffic_free(&t);
    fflush(stdout);
    return status;
}

/*
 * `sluice sim`: the accuracy lab. Generates (or replays) traffic on a virtual clock, runs it
 * through the real engine once per algorithm, and compares every decision with a perfect sliding
 * window (src/sim/sim.h defines the figures). It can also split the traffic over k limiters
 * (Levee's client-proxy) or model Gubernator's GLOBAL mode over k nodes with a sync period,
 * sweeping k and s.
 *
 * Output: a table for people, then, as the last line, one JSON object with every figure, for
 * scripts (scripts/plots.sh, docs/accuracy.md). The run is deterministic: the same options give the
 * same bytes.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/commands.h"
#include "sim/series.h"
#include "sim/sim.h"
#include "sim/traffic.h"

#define MAX_ALGS 16
#define MAX_SWEEP 32

static const char *const default_algorithms =
    "token_bucket,leaky_bucket,gcra,fixed_window,sliding_window:1,sliding_window:5,"
    "sliding_window:60,sliding_log";

static void usage(FILE *f)
{
    fprintf(f,
        "usage: sluice sim [options]\n"
        "\n"
        "Runs traffic through the engine on a virtual clock, once per algorithm, and compares each\n"
        "decision with a perfect sliding window of the same limit (windows are (t - duration, t]).\n"
        "Prints a table, then one JSON object as the last line.\n"
        "\n"
        "traffic:\n"
        "  --traffic KIND        poisson | bursty | ramp | edge | replay (default poisson); edge\n"
        "                        sends --limit requests per key at B-1 ms and at B ms for every\n"
        "                        other multiple B of --duration (a fixed window's worst case)\n"
        "  --rate R              requests/s per key: poisson rate, bursty rate while on, ramp end\n"
        "                        rate (default 2)\n"
        "  --rate-start R        ramp: rate at t = 0 (default 0)\n"
        "  --on-ms MS            bursty: length of an on period (default 2000)\n"
        "  --off-ms MS           bursty: length of an off period (default 8000)\n"
        "  --seconds S           length of generated traffic (default 600)\n"
        "  --keys K              number of keys, requests spread uniformly (default 1)\n"
        "  --seed N              PRNG seed for traffic and routing (default 1)\n"
        "  --file F              replay: lines '<t_ms> [<key>]' (blank or comma separated, '#'\n"
        "                        comments; timestamps in ms, the run starts at the smallest)\n"
        "  --max-events N        refuse traffic longer than N requests (default %zu)\n"
        "  --start-ms MS         virtual epoch ms of t = 0 (default %" PRId64 ", day-aligned)\n"
        "\n"
        "limit:\n"
        "  --limit L             requests per duration per key (default 100)\n"
        "  --duration MS         window / period in ms (default 60000; sliding_window:N needs a\n"
        "                        multiple of N)\n"
        "  --burst B             burst passed to the engine (leaky bucket, GCRA; 0 = engine default)\n"
        "  --algorithms LIST     comma-separated; sliding_window:N uses N sub-windows, gcra:B and\n"
        "                        leaky_bucket:B use burst B instead of --burst (default\n"
        "                        %s)\n"
        "\n"
        "distribution (sweeps; each takes a comma-separated list):\n"
        "  --split K[,K...]      k limiters with limit/k and burst/k each (Levee's DF groups)\n"
        "  --split-mode MODE     rr (a key's requests round-robin, as Levee's client-proxy) | random\n"
        "                        (default rr)\n"
        "  --global-nodes K[,K...]  Gubernator GLOBAL model: k nodes answering from local copies\n"
        "  --global-sync MS[,MS...] period of hit sends and owner broadcasts (default 100)\n"
        "  --global-forward WHAT all (every hit goes to the owner, as Gubernator) | admitted (only\n"
        "                        the hits a node admitted) (default all)\n"
        "\n"
        "output:\n"
        "  --csv FILE            single mode: time series of key 0, admitted in the trailing window\n"
        "                        per algorithm and for the perfect window; sweeps: one row per\n"
        "                        (k, s) with <alg>_over_pct and <alg>_peak_ratio columns\n"
        "  --csv-step MS         sampling step of the time series (default duration/20, >= 1)\n"
        "  -h, --help            this text\n",
        SL_TRAFFIC_DEFAULT_MAX_EVENTS, SL_SIM_DEFAULT_EPOCH_MS, default_algorithms);
}

typedef struct opts {
    const char *traffic;
    double rate, rate_start, seconds;
    int64_t on_ms, off_ms, start_ms, csv_step;
    uint32_t keys;
    uint64_t seed;
    size_t max_events;
    const char *file, *algorithms, *csv;
    sl_sim_params p;
    int64_t split[MAX_SWEEP];
    size_t nsplit;
    sl_sim_mode split_mode;
    int64_t nodes[MAX_SWEEP], sync[MAX_SWEEP];
    size_t nnodes, nsync;
    bool forward_admitted_only;
} opts;

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_list(const char *s, int64_t lo, int64_t hi, int64_t *out, size_t *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf)
        return -EINVAL;
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_SWEEP || parse_i64(tok, lo, hi, &out[*n]))
            return -EINVAL;
        (*n)++;
    }
    return *n ? 0 : -EINVAL;
}

enum {
    O_TRAFFIC = 256, O_RATE, O_RATE_START, O_ON, O_OFF, O_SECONDS, O_KEYS, O_SEED, O_FILE,
    O_MAX_EVENTS, O_START, O_LIMIT, O_DURATION, O_BURST, O_ALGS, O_SPLIT, O_SPLIT_MODE, O_GNODES,
    O_GSYNC, O_GFORWARD, O_CSV, O_CSV_STEP,
};

static int parse_opts(int argc, char **argv, opts *o)
{
    static const struct option longopts[] = {
        {"traffic", required_argument, 0, O_TRAFFIC},
        {"rate", required_argument, 0, O_RATE},
        {"rate-start", required_argument, 0, O_RATE_START},
        {"on-ms", required_argument, 0, O_ON},
        {"off-ms", required_argument, 0, O_OFF},
        {"seconds", required_argument, 0, O_SECONDS},
        {"keys", required_argument, 0, O_KEYS},
        {"seed", required_argument, 0, O_SEED},
        {"file", required_argument, 0, O_FILE},
        {"max-events", required_argument, 0, O_MAX_EVENTS},
        {"start-ms", required_argument, 0, O_START},
        {"limit", required_argument, 0, O_LIMIT},
        {"duration", required_argument, 0, O_DURATION},
        {"burst", required_argument, 0, O_BURST},
        {"algorithms", required_argument, 0, O_ALGS},
        {"split", required_argument, 0, O_SPLIT},
        {"split-mode", required_argument, 0, O_SPLIT_MODE},
        {"global-nodes", required_argument, 0, O_GNODES},
        {"global-sync", required_argument, 0, O_GSYNC},
        {"global-forward", required_argument, 0, O_GFORWARD},
        {"csv", required_argument, 0, O_CSV},
        {"csv-step", required_argument, 0, O_CSV_STEP},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    *o = (opts){
        .traffic = "poisson", .rate = 2, .seconds = 600, .on_ms = 2000, .off_ms = 8000,
        .start_ms = SL_SIM_DEFAULT_EPOCH_MS, .keys = 1, .seed = 1,
        .max_events = SL_TRAFFIC_DEFAULT_MAX_EVENTS, .algorithms = default_algorithms,
        .p = {.limit = 100, .duration = 60000, .burst = 0},
        .split_mode = SL_SIM_SPLIT_RR, .sync = {100}, .nsync = 1,
    };
    int64_t v;
    optind = 0; /* GNU: full reinitialisation, the dispatcher may have used getopt */
    for (;;) {
        int c = getopt_long(argc, argv, "h", longopts, NULL);
        if (c == -1)
            break;
        int bad = 0;
        switch (c) {
        case 'h': usage(stdout); return 1;
        case O_TRAFFIC: o->traffic = optarg; break;
        case O_RATE: bad = parse_double(optarg, 0, 1e9, &o->rate); break;
        case O_RATE_START: bad = parse_double(optarg, 0, 1e9, &o->rate_start); break;
        case O_ON: bad = parse_i64(optarg, 1, INT64_C(1) << 40, &o->on_ms); break;
        case O_OFF: bad = parse_i64(optarg, 0, INT64_C(1) << 40, &o->off_ms); break;
        case O_SECONDS: bad = parse_double(optarg, 0.001, 1e9, &o->seconds); break;
        case O_KEYS:
            bad = parse_i64(optarg, 1, SL_TRAFFIC_MAX_KEYS, &v);
            o->keys = (uint32_t)v;
            break;
        case O_SEED:
            bad = parse_i64(optarg, 0, INT64_MAX, &v);
            o->seed = (uint64_t)v;
            break;
        case O_FILE: o->file = optarg; break;
        case O_MAX_EVENTS:
            bad = parse_i64(optarg, 1, UINT32_MAX, &v);
            o->max_events = (size_t)v;
            break;
        case O_START: bad = parse_i64(optarg, 0, INT64_C(1) << 50, &o->start_ms); break;
        case O_LIMIT: bad = parse_i64(optarg, 1, INT64_C(1) << 40, &o->p.limit); break;
        case O_DURATION: bad = parse_i64(optarg, 1, INT64_C(1) << 40, &o->p.duration); break;
        case O_BURST: bad = parse_i64(optarg, 0, INT64_C(1) << 40, &o->p.burst); break;
        case O_ALGS: o->algorithms = optarg; break;
        case O_SPLIT: bad = parse_list(optarg, 1, SL_SIM_MAX_NODES, o->split, &o->nsplit); break;
        case O_SPLIT_MODE:
            if (!strcmp(optarg, "rr"))
                o->split_mode = SL_SIM_SPLIT_RR;
            else if (!strcmp(optarg, "random"))
                o->split_mode = SL_SIM_SPLIT_RANDOM;
            else
                bad = 1;
            break;
        case O_GNODES: bad = parse_list(optarg, 1, SL_SIM_MAX_NODES, o->nodes, &o->nnodes); break;
        case O_GSYNC: bad = parse_list(optarg, 1, INT64_C(1) << 40, o->sync, &o->nsync); break;
        case O_GFORWARD:
            if (!strcmp(optarg, "all"))
                o->forward_admitted_only = false;
            else if (!strcmp(optarg, "admitted"))
                o->forward_admitted_only = true;
            else
                bad = 1;
            break;
        case O_CSV: o->csv = optarg; break;
        case O_CSV_STEP: bad = parse_i64(optarg, 1, INT64_C(1) << 40, &o->csv_step); break;
        default: return -EINVAL;
        }
        if (bad) {
            fprintf(stderr, "sluice sim: bad value for --%s: '%s'\n",
                    longopts[c - O_TRAFFIC].name, optarg);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice sim: unexpected argument '%s'\n", argv[optind]);
        return -EINVAL;
    }
    if (o->nsplit && o->nnodes) {
        fprintf(stderr, "sluice sim: --split and --global-nodes are separate studies\n");
        return -EINVAL;
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

static void print_row(const sl_sim_result *r, const sl_sim_result *perfect, const char *prefix)
{
    printf("%s%-18s %9" PRIu64 " %9" PRIu64 " %+8.2f%% %6" PRId64 " %6" PRId64 " %7" PRIu64
           " %8" PRIu64 " %8" PRIu64 " %7.1f%s%s\n",
           prefix, r->label, r->admitted, r->rejected, over_pct(r, perfect), r->peak, r->over_limit,
           r->excess, r->wrong_admit, r->wrong_reject, r->bytes_per_key,
           r->first_error ? "  error: " : "", r->first_error ? r->first_error : "");
}

static const char *mode_name(const opts *o)
{
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

int sl_cmd_sim(int argc, char **argv)
{
    opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc == 1)
        return 0;
    if (rc) {
        fprintf(stderr, "'sluice sim --help' lists the options\n");
        return 2;
    }
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
    int status = 1;
    if ((rc = make_traffic(&o, &t)))
        goto out;
    if ((rc = sl_sim_init(&s, &t, &o.p))) {
        fprintf(stderr, "sluice sim: %s\n", rc == -E2BIG ? "limit x keys too large for the perfect "
                                                           "window (8M slots)"
                                                         : strerror(-rc));
        goto out;
    }
    if (o.csv && !(csv = fopen(o.csv, "w"))) {
        fprintf(stderr, "sluice sim: %s: %s\n", o.csv, strerror(errno));
        goto out;
    }

    printf("traffic %s: %zu requests, %u key(s), %.3f s, %.2f req/s per key (seed %" PRIu64 ")\n",
           o.traffic, t.n, t.nkeys, (double)t.span_ms / 1000.0, sl_traffic_mean_rate(&t), o.seed);
    printf("limit %" PRId64 " per %" PRId64 " ms, burst %" PRId64 ", mode %s%s\n", o.p.limit,
           o.p.duration, o.p.burst, mode_name(&o),
           o.nnodes ? (o.forward_admitted_only ? " (forwarding admitted hits)"
                                               : " (forwarding every hit)")
                    : "");

    root = json_object();
    json_t *scen = json_object();
    json_object_set_new(scen, "traffic", json_string(o.traffic));
    json_object_set_new(scen, "requests", json_integer((json_int_t)t.n));
    json_object_set_new(scen, "keys", json_integer(t.nkeys));
    json_object_set_new(scen, "span_ms", json_integer(t.span_ms));
    json_object_set_new(scen, "mean_rate",
                        json_real(round(sl_traffic_mean_rate(&t) * 1000) / 1000));
    json_object_set_new(scen, "seed", json_integer((json_int_t)o.seed));
    json_object_set_new(scen, "limit", json_integer(o.p.limit));
    json_object_set_new(scen, "duration", json_integer(o.p.duration));
    json_object_set_new(scen, "burst", json_integer(o.p.burst));
    json_object_set_new(scen, "mode", json_string(mode_name(&o)));
    if (o.nnodes)
        json_object_set_new(scen, "global_forward",
                            json_string(o.forward_admitted_only ? "admitted" : "all"));
    json_object_set_new(root, "scenario", scen);
    json_object_set_new(root, "perfect", result_json(&s.perfect, &s.perfect, o.p.limit));
    json_t *results = json_array();
    json_object_set_new(root, "results", results);

    const char *hdr = "%-18s %9s %9s %9s %6s %6s %7s %8s %8s %7s\n";
    if (!o.nsplit && !o.nnodes) {
        printf("\n");
        printf(hdr, "algorithm", "admitted", "rejected", "vs-perf", "peak", "over", "excess",
               "wrong+", "wrong-", "B/key");
        print_row(&s.perfect, &s.perfect, "");
        for (size_t a = 0; a < nalgs; a++) {
            sl_sim_result r;
            if (!(dec[a + 1] = malloc(t.n ? t.n : 1)) ||
                (rc = sl_sim_eval(&s, &algs[a], NULL, dec[a + 1], &r))) {
                fprintf(stderr, "sluice sim: %s: %s\n", algs[a].label, strerror(rc ? -rc : ENOMEM));
                goto out;
            }
            print_row(&r, &s.perfect, "");
            json_array_append_new(results, result_json(&r, &s.perfect, o.p.limit));
        }
        if (csv) {
            const char *names[MAX_ALGS + 1] = {"perfect"};
            dec[0] = s.ref;
            for (size_t a = 0; a < nalgs; a++)
                names[a + 1] = algs[a].label;
            rc = sl_series_write(csv, &t, 0, o.p.duration, o.csv_step, nalgs + 1, names,
                                 (const uint8_t *const *)dec);
            dec[0] = NULL;
            if (rc) {
                fprintf(stderr, "sluice sim: --csv: %s\n",
                        rc == -E2BIG ? "too many rows (raise --csv-step)" : strerror(-rc));
                goto out;
            }
        }
    } else {
        bool global = o.nnodes > 0;
        const int64_t *ks = global ? o.nodes : o.split;
        size_t nks = global ? o.nnodes : o.nsplit, nss = global ? o.nsync : 1;
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
        printf("\n%4s %7s %6s ", "k", "sync_ms", "limit/");
        printf(hdr, "algorithm", "admitted", "rejected", "vs-perf", "peak", "over", "excess",
               "wrong+", "wrong-", "B/key");
        for (size_t i = 0; i < nks; i++) {
            for (size_t j = 0; j < nss; j++) {
                sl_sim_dist d = {
                    .mode = global ? SL_SIM_GLOBAL : o.split_mode,
                    .nodes = (unsigned)ks[i],
                    .sync_ms = global ? o.sync[j] : 0,
                    .seed = o.seed,
                    .forward_admitted_only = o.forward_admitted_only,
                };
                if (csv)
                    fprintf(csv, "%" PRId64 ",%" PRId64, ks[i], d.sync_ms);
                for (size_t a = 0; a < nalgs; a++) {
                    sl_sim_result r;
                    if ((rc = sl_sim_eval(&s, &algs[a], &d, NULL, &r))) {
                        fprintf(stderr, "sluice sim: %s k=%" PRId64 ": %s\n", algs[a].label, ks[i],
                                strerror(-rc));
                        goto out;
                    }
                    char prefix[48];
                    snprintf(prefix, sizeof prefix, "%4" PRId64 " %7" PRId64 " %6" PRId64 " ", ks[i],
                             d.sync_ms, r.node_limit);
                    print_row(&r, &s.perfect, prefix);
                    json_t *jr = result_json(&r, &s.perfect, o.p.limit);
                    json_object_set_new(jr, "k", json_integer(ks[i]));
                    if (global)
                        json_object_set_new(jr, "sync_ms", json_integer(d.sync_ms));
                    json_array_append_new(results, jr);
                    if (csv)
                        fprintf(csv, ",%.3f,%.4f", over_pct(&r, &s.perfect),
                                (double)r.peak / (double)o.p.limit);
                }
                if (csv)
                    fputc('\n', csv);
            }
        }
    }
    printf("\nvs-perf: admitted relative to the perfect window; peak: most admitted in one window;\n"
           "over: peak - limit; excess: admissions into a full window; wrong+/wrong-: admitted/\n"
           "rejected where the perfect window (run on the same stream) decided otherwise.\n");
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The accuracy simulator: drives the real engine over a traffic (sim/traffic.h) on a virtual clock
 * and measures each algorithm against a perfect sliding-window limiter.
 *
 * Definitions (all per key; every request takes one hit; a window at time t is (t - duration, t]):
 *
 *   perfect limiter  admits a request at t iff it has admitted fewer than `limit` requests of that
 *                    key in the window at t. It is exact and runs on the same stream (sl_sim_ref).
 *   peak             the most requests the algorithm admitted for one key within any window.
 *   over_limit       max(0, peak - limit).
 *   excess           admissions that found the algorithm's own window already holding `limit`
 *                    admissions, i.e. the requests that pushed some window above the limit.
 *   wrong_admit      requests the algorithm admitted and the perfect limiter rejected,
 *   wrong_reject     requests the algorithm rejected and the perfect limiter admitted, each
 *                    comparing the two limiters' decisions on the same request of the same stream.
 *                    Each limiter follows its own history: once they disagree, later requests see
 *                    different windows, so these count divergence, not blame for one request.
 *   bytes_per_key    state held per key at the end of the run, from sl_engine_stats: one table
 *                    slot plus the side buffers (the bytes that are neither slots nor the empty
 *                    engine's fixed part) divided by the keys held. Empty slots are not counted.
 *                    The slot size is measured, not assumed: bytes gained / slots gained when a
 *                    scratch engine's table grows.
 *
 * Distribution studies run the same traffic through several engines.
 *
 * split k: Levee's client-proxy. k limiters, each with limit/k and burst/k (floored, at least 1); a
 * key's requests go round-robin across them, or each to a random one.
 *
 * global k s: Gubernator's GLOBAL behaviour. k nodes, each request reaching a random one. A node
 * answers from its own copy of the key (the owner, node key % k, from the authoritative one) and
 * queues the hit, admitted or not, as Gubernator v2 does. Every s ms each node sends its aggregated
 * hits to the owner, dated at the first of them and applied with DRAIN_OVER_LIMIT (Gubernator's
 * GetPeerRateLimits); then the owner reads each key that changed with a peek dated at its last
 * decision on it (Gubernator's broadcast re-sends the request with hits 0), and every other node
 * replaces its copy. The public engine API has no "install this state", so a copy is replaced by
 * removing the key and charging it the hits the owner has consumed (capacity - remaining, capacity
 * being what a peek at an untouched key reports): the owner's remaining, as UpdatePeerGlobals
 * installs. The charge is dated now, except for a token bucket, dated at the owner's window start
 * so that the copy expires with it (UpdatePeerGlobals sets ExpireAt = reset_time). Fractions (leaky
 * bucket) and the time structure inside a window (sliding log, sub-windows) are not carried, as
 * Gubernator's integer `remaining` does not carry them. With one node nothing is broadcast.
 * Network latency is zero: s stands for the whole sync delay.
 */
#ifndef SLUICE_SIM_SIM_H
#define SLUICE_SIM_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/traffic.h"
#include "sluice/engine.h"

#define SL_SIM_LABEL_MAX 32

/* Largest limit x keys the perfect limiter holds (8 bytes each): 64 MB. */
#define SL_SIM_MAX_REF_SLOTS ((uint64_t)8 << 20)
/* Most engines in one distribution run. */
#define SL_SIM_MAX_NODES 256

typedef struct sl_sim_alg {
    int32_t algorithm;   /* sl_algorithm */
    int32_t sub_windows; /* SLIDING_WINDOW only */
    int64_t burst;       /* LEAKY_BUCKET, GCRA: burst for this algorithm, or -1 = the run's burst */
    char label[SL_SIM_LABEL_MAX]; /* "sliding_window:5" */
} sl_sim_alg;

/* "gcra", "TOKEN_BUCKET", "sliding_window:60", "gcra:9". The number after ':' is the algorithm's
 * parameter: sub-windows for sliding_window (>= 1), burst for leaky_bucket and gcra (>= 0); other
 * algorithms take none. 0 or -EINVAL. */
int sl_sim_alg_parse(const char *spec, size_t len, sl_sim_alg *out);
/* A comma-separated list into out[max]; *n set. 0, -EINVAL (bad name) or -E2BIG (too many). */
int sl_sim_alg_parse_list(const char *list, sl_sim_alg *out, size_t max, size_t *n);

typedef struct sl_sim_params {
    int64_t limit;      /* per duration, per key */
    int64_t duration;   /* ms; also the length of the windows measured */
    int64_t burst;      /* passed to the engine (0 = its default) */
    int64_t epoch_ms;   /* virtual time of t = 0 */
} sl_sim_params;

/* 1699920000000: a multiple of a day in ms, so windows of 1 s, 1 min, 1 h align with t = 0. */
#define SL_SIM_DEFAULT_EPOCH_MS INT64_C(1699920000000)

typedef enum sl_sim_mode {
    SL_SIM_SINGLE = 0,      /* one engine */
    SL_SIM_SPLIT_RR,        /* k engines with limit/k, a key's requests round-robin */
    SL_SIM_SPLIT_RANDOM,    /* k engines with limit/k, each request to a random one */
    SL_SIM_GLOBAL,          /* Gubernator GLOBAL model: k nodes, sync every sync_ms */
} sl_sim_mode;

typedef struct sl_sim_dist {
    sl_sim_mode mode;
    unsigned nodes;     /* k (>= 1) for the distributed modes */
    int64_t sync_ms;    /* GLOBAL: sync period, >= 1 */
    uint64_t seed;      /* routing randomness (SPLIT_RANDOM, GLOBAL) */
    bool forward_admitted_only; /* GLOBAL: queue only the hits a node admitted (Gubernator queues
                                 * every hit, rejected or not) */
} sl_sim_dist;

typedef struct sl_sim_result {
    char label[SL_SIM_LABEL_MAX];
    uint64_t requests, admitted, rejected;
    uint64_t errors;          /* requests the engine answered with an error (counted as rejected) */
    const char *first_error;  /* the first such error, static; NULL if none */
    int64_t peak, over_limit;
    uint64_t excess;
    uint64_t wrong_admit, wrong_reject;
    uint64_t keys;            /* keys held by the (first) engine at the end */
    double bytes_per_key;     /* 0 if unknown (no keys held) */
    int64_t node_limit;       /* limit each engine enforced (limit/k for split) */
} sl_sim_result;

/* ---- the perfect sliding window ---- */

typedef struct sl_sim_ref sl_sim_ref;

/* -EINVAL for limit/duration < 1 or no keys, -E2BIG beyond SL_SIM_MAX_REF_SLOTS. */
int sl_sim_ref_new(uint32_t nkeys, int64_t limit, int64_t duration, sl_sim_ref **out);
void sl_sim_ref_free(sl_sim_ref *r);
/* Decide one request of `key` at t (t non-decreasing per key). True = admitted. */
bool sl_sim_ref_decide(sl_sim_ref *r, uint32_t key, int64_t t);

/* ---- a simulation over one traffic ---- */

typedef struct sl_sim {
    const sl_traffic *traffic;
    sl_sim_params params;
    uint8_t *ref;             /* perfect limiter's decisions, 1 = admitted */
    sl_sim_result perfect;    /* the perfect limiter scored like an algorithm (peak <= limit) */
    double slot_bytes;        /* store bytes per table slot, measured (see bytes_per_key) */
    double fixed_bytes;       /* store bytes of an empty engine that are not slots */
    uint32_t *by_key;         /* event indices grouped by key, time order within a key */
    size_t *key_start;        /* key k's events are by_key[key_start[k] .. key_start[k+1]) */
} sl_sim;

/* Index the traffic and run the perfect limiter. The traffic must outlive the sim. */
int sl_sim_init(sl_sim *s, const sl_traffic *t, const sl_sim_params *p);
void sl_sim_free(sl_sim *s);

/*
 * Run algorithm `a` (distributed as `d`, NULL = single engine) over the traffic; fill *res and, if
 * dec is not NULL, dec[i] = 1 when request i was admitted (traffic->n bytes). 0 or a negative errno
 * (engine creation failed, bad distribution); engine per-item errors are counted in res->errors.
 */
int sl_sim_eval(const sl_sim *s, const sl_sim_alg *a, const sl_sim_dist *d, uint8_t *dec,
                sl_sim_result *res);

/* Score decisions (dec[i] = admitted) against the perfect limiter: fills requests, admitted,
 * rejected, peak, over_limit, excess, wrong_admit, wrong_reject of *res. */
void sl_sim_score(const sl_sim *s, const uint8_t *dec, sl_sim_result *res);

#endif

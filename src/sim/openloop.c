/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The open-loop lab (see openloop.h for what each column means). One key's request times are
 * gathered once; the true count and an ADMITTED column come from two pointers over them (requests
 * entering and leaving the trailing window as the sample time advances), a COUNT or BACKLOG column
 * from the engine fed in time order and peeked at each sample.
 */
#include "sim/openloop.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/engine.h"

/* Name under which the lab's key lives in the engine. */
#define OL_NAME "openloop"

static bool is_bucket(int32_t algorithm)
{
    return algorithm == SL_LEAKY_BUCKET || algorithm == SL_GCRA;
}

int sl_openloop_columns(const sl_sim_alg *algs, size_t n, sl_openloop_col *out, size_t max,
                        size_t *nout)
{
    *nout = 0;
    for (size_t i = 0; i < n; i++) {
        bool bucket = is_bucket(algs[i].algorithm);
        for (int k = 0; k < (bucket ? 2 : 1); k++) {
            if (*nout == max)
                return -E2BIG;
            sl_openloop_col *c = &out[(*nout)++];
            c->alg = algs[i];
            c->kind = !bucket ? SL_OPENLOOP_COUNT : k == 0 ? SL_OPENLOOP_BACKLOG
                                                           : SL_OPENLOOP_ADMITTED;
            snprintf(c->label, sizeof c->label, "%s%s", algs[i].label,
                     !bucket ? "" : k == 0 ? "_backlog" : "_admitted");
        }
    }
    return 0;
}

size_t sl_openloop_samples(const sl_traffic *t, int64_t step_ms)
{
    return step_ms < 1 ? 0 : (size_t)(t->span_ms / step_ms);
}

/* The key's request times, in order, into a new array (*n set). */
static int key_times(const sl_traffic *t, uint32_t key, int64_t **out, size_t *n)
{
    size_t nk = 0;
    for (size_t i = 0; i < t->n; i++)
        nk += t->ev[i].key == key;
    int64_t *times = malloc((nk ? nk : 1) * sizeof *times);
    if (!times)
        return -ENOMEM;
    for (size_t i = 0, j = 0; i < t->n; i++)
        if (t->ev[i].key == key)
            times[j++] = t->ev[i].t_ms;
    *out = times;
    *n = nk;
    return 0;
}

/* Trailing-window counts at every sample of the requests marked in keep (NULL: all). */
static void trailing(const int64_t *times, const uint8_t *keep, size_t n, int64_t duration,
                     int64_t step, size_t samples, double *out)
{
    size_t hi = 0, lo = 0;
    int64_t inside = 0;
    for (size_t i = 0; i < samples; i++) {
        int64_t s = step * (int64_t)(i + 1);
        for (; hi < n && times[hi] <= s; hi++)
            inside += keep ? keep[hi] : 1;
        for (; lo < n && times[lo] <= s - duration; lo++)
            inside -= keep ? keep[lo] : 1;
        out[i] = (double)inside;
    }
}

/* The most requests in any window (t - duration, t]: the peak of the true count. */
static int64_t peak_count(const int64_t *times, size_t n, int64_t duration)
{
    int64_t peak = 0;
    for (size_t i = 0, lo = 0; i < n; i++) {
        while (times[lo] <= times[i] - duration)
            lo++;
        if ((int64_t)(i - lo + 1) > peak)
            peak = (int64_t)(i - lo + 1);
    }
    return peak;
}

static int check(const sl_traffic *t, uint32_t key, int64_t duration, int64_t step_ms)
{
    if (key >= t->nkeys || duration < 1 || step_ms < 1)
        return -EINVAL;
    if (sl_openloop_samples(t, step_ms) > SL_OPENLOOP_MAX_SAMPLES)
        return -E2BIG;
    return 0;
}

int sl_openloop_true(const sl_traffic *t, uint32_t key, int64_t duration, int64_t step_ms,
                     double *out)
{
    int rc = check(t, key, duration, step_ms);
    int64_t *times;
    size_t n;
    if (rc || (rc = key_times(t, key, &times, &n)))
        return rc;
    trailing(times, NULL, n, duration, step_ms, sl_openloop_samples(t, step_ms), out);
    free(times);
    return 0;
}

/* Feed the key's requests into engine e (the request template q, hits 1) and fill dec (may be
 * NULL) or peek at every sample into est (may be NULL). 0 or -EINVAL with *err on an engine error. */
static int feed(sl_engine *e, sl_request q, int64_t epoch, const int64_t *times, size_t n,
                int64_t step, size_t samples, int64_t capacity, uint8_t *dec, double *est,
                const char **err)
{
    sl_response resp;
    size_t j = 0;
    for (size_t i = 0; i <= samples; i++) {
        /* After the last sample, the requests left (dated after it) still get decisions. */
        int64_t s = i < samples ? step * (int64_t)(i + 1) : INT64_MAX;
        q.hits = 1;
        for (; j < n && times[j] <= s; j++) {
            sl_engine_decide(e, &q, &resp, epoch + times[j]);
            if (resp.error) {
                *err = resp.error;
                return -EINVAL;
            }
            if (dec)
                dec[j] = resp.status == SL_UNDER_LIMIT;
        }
        if (est && i < samples) {
            q.hits = 0;
            sl_engine_decide(e, &q, &resp, epoch + s);
            if (resp.error) {
                *err = resp.error;
                return -EINVAL;
            }
            est[i] = (double)(capacity - resp.remaining);
        }
    }
    return 0;
}

int sl_openloop_run(const sl_traffic *t, uint32_t key, const sl_sim_params *p,
                    const sl_openloop_col *c, int64_t step_ms, double *out, const char **err)
{
    *err = NULL;
    int rc = check(t, key, p->duration, step_ms);
    if (rc)
        return rc;
    if (p->limit < 1 || p->burst < 0)
        return -EINVAL;
    int64_t *times;
    size_t n;
    if ((rc = key_times(t, key, &times, &n)))
        return rc;
    size_t samples = sl_openloop_samples(t, step_ms);
    int64_t limit = p->limit, burst = c->alg.burst >= 0 ? c->alg.burst : p->burst;
    if (c->kind == SL_OPENLOOP_COUNT)
        limit = 2 * peak_count(times, n, p->duration) + 2; /* no count reaches it */
    else if (c->kind == SL_OPENLOOP_BACKLOG)
        burst = (int64_t)n + 1; /* deeper than every request the key makes */

    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    if (cfg.max_log_limit < limit)
        cfg.max_log_limit = limit;
    if (cfg.max_sub_windows < c->alg.sub_windows)
        cfg.max_sub_windows = c->alg.sub_windows;
    cfg.hash_seed = 0x5115ce5eedull; /* fixed: runs must repeat exactly */
    sl_engine *e = NULL;
    uint8_t *dec = c->kind == SL_OPENLOOP_ADMITTED ? malloc(n ? n : 1) : NULL;
    if ((c->kind == SL_OPENLOOP_ADMITTED && !dec) || (rc = sl_engine_new(&cfg, &e))) {
        free(times);
        free(dec);
        return rc ? rc : -ENOMEM;
    }
    const char *k = t->keys[key];
    sl_request q = {
        .name = OL_NAME,
        .name_len = sizeof OL_NAME - 1,
        .unique_key = k,
        .unique_key_len = strlen(k),
        .limit = limit,
        .duration = p->duration,
        .burst = burst,
        .algorithm = c->alg.algorithm,
        .sub_windows = c->alg.sub_windows,
    };
    int64_t capacity = 0;
    if (c->kind != SL_OPENLOOP_ADMITTED) {
        /* Capacity: what a peek at the untouched key reports; the peek leaves no state. */
        sl_response resp;
        q.hits = 0;
        sl_engine_decide(e, &q, &resp, p->epoch_ms);
        if (resp.error) {
            *err = resp.error;
            rc = -EINVAL;
        }
        capacity = resp.remaining;
        sl_engine_remove(e, OL_NAME, sizeof OL_NAME - 1, k, strlen(k));
    }
    if (!rc)
        rc = feed(e, q, p->epoch_ms, times, n, step_ms, samples, capacity, dec,
                  c->kind == SL_OPENLOOP_ADMITTED ? NULL : out, err);
    if (!rc && dec)
        trailing(times, dec, n, p->duration, step_ms, samples, out);
    sl_engine_free(e);
    free(times);
    free(dec);
    return rc;
}

void sl_openloop_error(const double *est, const double *truth, size_t from, size_t to,
                       sl_openloop_err *out)
{
    memset(out, 0, sizeof *out);
    double sum_t = 0, sum_e = 0, sum_abs = 0, sum_d = 0;
    for (size_t i = from; i < to; i++) {
        double d = est[i] - truth[i];
        sum_t += truth[i];
        sum_e += est[i];
        sum_abs += fabs(d);
        sum_d += d;
        if (fabs(d) > out->max_err)
            out->max_err = fabs(d);
    }
    out->n = to > from ? to - from : 0;
    if (out->n) {
        double n = (double)out->n;
        out->mean_true = sum_t / n;
        out->mean_est = sum_e / n;
        out->mae = sum_abs / n;
        out->bias = sum_d / n;
    }
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shaper study (see shape.h): the engine's GCRA with max_delay_ms on a virtual clock, each
 * admission's departure recorded, the peak departures per window counted per key, and a perfect
 * FIFO shaper run on the same arrivals for the admission ratio.
 */
#include "sim/shape.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SHAPE_NAME "sim.shape"

/* Perfect shaper for one key's arrivals (ms, in order): how many it admits. */
static uint64_t perfect_key(const sl_sim *s, size_t from, size_t to, int64_t max_delay)
{
    const double T = (double)s->params.duration / (double)s->params.limit;
    const double tau = (double)s->params.burst * T;
    double tat = -1e300; /* theoretical time the next slot is free, from the chain of departures */
    uint64_t n = 0;
    for (size_t j = from; j < to; j++) {
        double a = (double)s->traffic->ev[s->by_key[j]].t_ms;
        double c = tat - tau > a ? tat - tau : a; /* earliest conforming departure */
        if (c - a > (double)max_delay + 1e-9)
            continue;
        tat = (tat > c ? tat : c) + T;
        n++;
    }
    return n;
}

int sl_sim_shape(const sl_sim *s, int64_t max_delay_ms, sl_sim_shape_result *res)
{
    memset(res, 0, sizeof *res);
    const sl_traffic *t = s->traffic;
    int64_t *depart = malloc((t->n ? t->n : 1) * sizeof *depart);
    if (!depart)
        return -ENOMEM;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    sl_engine *e;
    int rc = sl_engine_new(&ec, &e);
    if (rc) {
        free(depart);
        return rc;
    }
    double delay_sum = 0;
    for (size_t i = 0; i < t->n; i++) {
        const sl_traffic_event *ev = &t->ev[i];
        const char *k = t->keys[ev->key];
        sl_request q = {.name = SHAPE_NAME, .name_len = sizeof SHAPE_NAME - 1, .unique_key = k,
                        .unique_key_len = strlen(k), .hits = 1, .limit = s->params.limit,
                        .duration = s->params.duration, .burst = s->params.burst,
                        .algorithm = SL_GCRA, .max_delay_ms = max_delay_ms};
        sl_response r;
        int64_t now = s->params.epoch_ms + ev->t_ms;
        sl_engine_decide(e, &q, &r, now);
        res->requests++;
        depart[i] = -1;
        if (r.error) {
            res->errors++;
            continue;
        }
        if (r.status != SL_UNDER_LIMIT)
            continue;
        res->admitted++;
        if (r.delay_ms > 0)
            res->delayed++;
        if (r.delay_ms > res->max_delay_seen)
            res->max_delay_seen = r.delay_ms;
        delay_sum += (double)r.delay_ms;
        depart[i] = ev->t_ms + r.delay_ms;
    }
    sl_engine_free(e);
    res->mean_delay = res->admitted ? delay_sum / (double)res->admitted : 0;
    res->peak_bound = s->params.limit + s->params.burst;

    /* Per key: departures leave in arrival order (each slot follows the one before), so a
     * two-pointer walk finds the most within any window (t - duration, t]. */
    int64_t *d = malloc((t->n ? t->n : 1) * sizeof *d);
    if (!d) {
        free(depart);
        return -ENOMEM;
    }
    for (uint32_t k = 0; k < t->nkeys; k++) {
        size_t from = s->key_start[k], to = s->key_start[k + 1], m = 0;
        for (size_t j = from; j < to; j++)
            if (depart[s->by_key[j]] >= 0)
                d[m++] = depart[s->by_key[j]];
        for (size_t a = 0, b = 0; b < m; b++) {
            if (b > 0 && d[b] < d[b - 1]) {
                rc = -EPROTO; /* out of order: a slot given before an earlier one */
                break;
            }
            while (d[b] - d[a] >= s->params.duration)
                a++;
            if ((int64_t)(b - a + 1) > res->peak)
                res->peak = (int64_t)(b - a + 1);
        }
        res->perfect_admitted += perfect_key(s, from, to, max_delay_ms);
    }
    free(d);
    free(depart);
    return rc;
}

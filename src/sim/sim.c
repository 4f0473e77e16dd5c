/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The accuracy simulator (see sim.h for the definitions of every figure it reports).
 *
 * Everything runs on one thread over a virtual clock: request i of the traffic is decided at
 * epoch_ms + t_i, by the real engine (sluice/engine.h), in traffic order. The perfect limiter
 * keeps, per key, a ring of the times of its last `limit` admissions: the window at t holds
 * `limit` admissions exactly when the oldest of those is still inside it, so each decision is O(1)
 * and exact. Scoring walks each key's events in time order with two pointers (the admissions entering
 * and leaving the window), so every figure is O(requests) per algorithm.
 */
#include "sim/sim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Name under which the simulator's keys live in the engine. */
#define SIM_NAME "sim"

/* ---- algorithm specs ---- */

int sl_sim_alg_parse(const char *spec, size_t len, sl_sim_alg *out)
{
    memset(out, 0, sizeof *out);
    while (len && isspace((unsigned char)*spec))
        spec++, len--;
    while (len && isspace((unsigned char)spec[len - 1]))
        len--;
    const char *colon = memchr(spec, ':', len);
    size_t nlen = colon ? (size_t)(colon - spec) : len;
    int alg = nlen ? sl_algorithm_from_name(spec, nlen) : -1;
    if (alg < 0 || alg == SL_CONCURRENCY) /* concurrency limits in-flight requests, not a rate */
        return -EINVAL;
    out->algorithm = alg;
    out->burst = -1;
    long v = 0;
    if (colon) {
        size_t dlen = len - nlen - 1;
        char digits[12];
        if (dlen == 0 || dlen >= sizeof digits || !isdigit((unsigned char)colon[1]))
            return -EINVAL;
        memcpy(digits, colon + 1, dlen);
        digits[dlen] = '\0';
        char *end;
        v = strtol(digits, &end, 10);
        if (*end || v < 0 || v > 1000000000)
            return -EINVAL;
        if (alg == SL_SLIDING_WINDOW && v >= 1)
            out->sub_windows = (int32_t)v;
        else if (alg == SL_LEAKY_BUCKET || alg == SL_GCRA)
            out->burst = v;
        else
            return -EINVAL;
    }
    const char *name = sl_algorithm_name(alg);
    size_t i = 0;
    for (; name && name[i] && i < SL_SIM_LABEL_MAX - 12; i++)
        out->label[i] = (char)tolower((unsigned char)name[i]);
    out->label[i] = '\0';
    if (colon)
        snprintf(out->label + i, SL_SIM_LABEL_MAX - i, ":%ld", v);
    return 0;
}

int sl_sim_alg_parse_list(const char *list, sl_sim_alg *out, size_t max, size_t *n)
{
    *n = 0;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (*n == max)
            return -E2BIG;
        int rc = sl_sim_alg_parse(p, len, &out[*n]);
        if (rc)
            return rc;
        (*n)++;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

/* ---- the perfect limiter ---- */

struct sl_sim_ref {
    int64_t limit, duration;
    uint32_t nkeys;
    int64_t *times;  /* nkeys rings of `limit` admission times */
    int64_t *count;  /* admissions in each ring (<= limit) */
    int64_t *head;   /* index of each ring's oldest admission */
};

int sl_sim_ref_new(uint32_t nkeys, int64_t limit, int64_t duration, sl_sim_ref **out)
{
    *out = NULL;
    if (nkeys == 0 || limit < 1 || duration < 1)
        return -EINVAL;
    if ((uint64_t)limit > SL_SIM_MAX_REF_SLOTS / nkeys)
        return -E2BIG;
    sl_sim_ref *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->limit = limit;
    r->duration = duration;
    r->nkeys = nkeys;
    r->times = malloc((size_t)limit * nkeys * sizeof *r->times);
    r->count = calloc(nkeys, sizeof *r->count);
    r->head = calloc(nkeys, sizeof *r->head);
    if (!r->times || !r->count || !r->head) {
        sl_sim_ref_free(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void sl_sim_ref_free(sl_sim_ref *r)
{
    if (!r)
        return;
    free(r->times);
    free(r->count);
    free(r->head);
    free(r);
}

bool sl_sim_ref_decide(sl_sim_ref *r, uint32_t key, int64_t t)
{
    int64_t *ring = r->times + (size_t)key * (size_t)r->limit;
    if (r->count[key] < r->limit) {
        ring[(r->head[key] + r->count[key]) % r->limit] = t;
        r->count[key]++;
        return true;
    }
    /* Full: the oldest of the last `limit` admissions decides. Out of the window (t - D, t] means
     * fewer than `limit` remain in it, and this admission takes the oldest's place in the ring. */
    if (ring[r->head[key]] > t - r->duration)
        return false;
    ring[r->head[key]] = t;
    r->head[key] = (r->head[key] + 1) % r->limit;
    return true;
}

/* ---- scoring ---- */

void sl_sim_score(const sl_sim *s, const uint8_t *dec, sl_sim_result *res)
{
    const sl_traffic *tr = s->traffic;
    const int64_t limit = s->params.limit, d = s->params.duration;
    res->requests = tr->n;
    res->admitted = res->rejected = 0;
    res->wrong_admit = res->wrong_reject = 0;
    res->peak = 0;
    res->excess = 0;
    for (size_t i = 0; i < tr->n; i++) {
        if (dec[i])
            res->admitted++;
        else
            res->rejected++;
        if (dec[i] && !s->ref[i])
            res->wrong_admit++;
        else if (!dec[i] && s->ref[i])
            res->wrong_reject++;
    }
    for (uint32_t k = 0; k < tr->nkeys; k++) {
        const uint32_t *ev = s->by_key + s->key_start[k];
        size_t n = s->key_start[k + 1] - s->key_start[k], lo = 0;
        int64_t inside = 0; /* admissions among ev[lo .. i] */
        for (size_t i = 0; i < n; i++) {
            if (!dec[ev[i]])
                continue;
            int64_t t = tr->ev[ev[i]].t_ms;
            for (; tr->ev[ev[lo]].t_ms <= t - d; lo++)
                inside -= dec[ev[lo]];
            if (inside >= limit)
                res->excess++;
            inside++;
            if (inside > res->peak)
                res->peak = inside;
        }
    }
    res->over_limit = res->peak > limit ? res->peak - limit : 0;
}

/* ---- setup ---- */

static void measure_slot(sl_sim *s);

int sl_sim_init(sl_sim *s, const sl_traffic *t, const sl_sim_params *p)
{
    memset(s, 0, sizeof *s);
    s->traffic = t;
    s->params = *p;
    if (p->limit < 1 || p->duration < 1 || p->burst < 0 || t->nkeys == 0)
        return -EINVAL;
    sl_sim_ref *ref;
    int rc = sl_sim_ref_new(t->nkeys, p->limit, p->duration, &ref);
    if (rc)
        return rc;
    s->ref = malloc(t->n ? t->n : 1);
    s->by_key = malloc((t->n ? t->n : 1) * sizeof *s->by_key);
    s->key_start = calloc((size_t)t->nkeys + 1, sizeof *s->key_start);
    if (!s->ref || !s->by_key || !s->key_start) {
        sl_sim_ref_free(ref);
        sl_sim_free(s);
        return -ENOMEM;
    }
    /* Counting sort by key; the traffic is in time order, so each key's events stay in it. */
    for (size_t i = 0; i < t->n; i++)
        s->key_start[t->ev[i].key + 1]++;
    for (uint32_t k = 0; k < t->nkeys; k++)
        s->key_start[k + 1] += s->key_start[k];
    size_t *fill = malloc((size_t)t->nkeys * sizeof *fill);
    if (!fill) {
        sl_sim_ref_free(ref);
        sl_sim_free(s);
        return -ENOMEM;
    }
    memcpy(fill, s->key_start, (size_t)t->nkeys * sizeof *fill);
    for (size_t i = 0; i < t->n; i++)
        s->by_key[fill[t->ev[i].key]++] = (uint32_t)i;
    free(fill);

    for (size_t i = 0; i < t->n; i++)
        s->ref[i] = sl_sim_ref_decide(ref, t->ev[i].key, t->ev[i].t_ms);
    sl_sim_ref_free(ref);
    measure_slot(s);
    snprintf(s->perfect.label, sizeof s->perfect.label, "perfect");
    sl_sim_score(s, s->ref, &s->perfect);
    s->perfect.node_limit = p->limit;
    s->perfect.bytes_per_key = (double)p->limit * sizeof(int64_t);
    return 0;
}

void sl_sim_free(sl_sim *s)
{
    free(s->ref);
    free(s->by_key);
    free(s->key_start);
    s->ref = NULL;
    s->by_key = NULL;
    s->key_start = NULL;
}

/* ---- running the engine ---- */

typedef struct runner {
    const sl_sim *s;
    const sl_sim_alg *a;
    sl_engine **eng;
    unsigned n;
    int64_t limit, burst; /* per engine */
    sl_sim_result *res;
} runner;

static int engines_new(runner *r, unsigned n)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    size_t want = (size_t)r->s->traffic->nkeys + 1024;
    if (cfg.max_keys < want)
        cfg.max_keys = want; /* evictions would be a store effect, not the algorithm's */
    if (cfg.max_log_limit < r->limit)
        cfg.max_log_limit = r->limit;
    if (cfg.max_sub_windows < r->a->sub_windows)
        cfg.max_sub_windows = r->a->sub_windows;
    cfg.hash_seed = 0x5115ce5eedull; /* fixed: runs must repeat exactly */
    r->eng = calloc(n, sizeof *r->eng);
    if (!r->eng)
        return -ENOMEM;
    r->n = n;
    for (unsigned i = 0; i < n; i++) {
        int rc = sl_engine_new(&cfg, &r->eng[i]);
        if (rc)
            return rc;
    }
    return 0;
}

static void engines_free(runner *r)
{
    for (unsigned i = 0; r->eng && i < r->n; i++)
        if (r->eng[i])
            sl_engine_free(r->eng[i]);
    free(r->eng);
    r->eng = NULL;
}

static void make_req(const runner *r, uint32_t key, int64_t hits, int32_t behavior,
                     int64_t created_at, sl_request *q)
{
    const char *k = r->s->traffic->keys[key];
    *q = (sl_request){
        .name = SIM_NAME,
        .name_len = sizeof SIM_NAME - 1,
        .unique_key = k,
        .unique_key_len = strlen(k),
        .hits = hits,
        .limit = r->limit,
        .duration = r->s->params.duration,
        .burst = r->burst,
        .created_at = created_at,
        .algorithm = r->a->algorithm,
        .behavior = behavior,
        .sub_windows = r->a->sub_windows,
    };
}

/* created_at 0 = now (the engine's rule). */
static bool decide(runner *r, sl_engine *e, uint32_t key, int64_t hits, int32_t behavior,
                   int64_t created_at, int64_t now, sl_response *resp)
{
    sl_request q;
    make_req(r, key, hits, behavior, created_at, &q);
    sl_engine_decide(e, &q, resp, now);
    if (resp->error) {
        if (!r->res->first_error)
            r->res->first_error = resp->error;
        r->res->errors++;
        return false;
    }
    return resp->status == SL_UNDER_LIMIT;
}

/* State bytes per key: one table slot plus the side buffers (what is neither a slot nor the empty
 * engine's fixed part) spread over the keys, across all engines. The table's empty slots are left
 * out: they depend on the load factor, not on the algorithm. */
static void measure_bytes(runner *r)
{
    const sl_sim *s = r->s;
    double side = 0;
    uint64_t keys = 0;
    for (unsigned i = 0; i < r->n; i++) {
        sl_engine_stats st;
        sl_engine_stats_get(r->eng[i], &st);
        double extra = (double)st.bytes - s->fixed_bytes - s->slot_bytes * (double)st.capacity;
        side += extra > 0 ? extra : 0;
        keys += st.keys;
    }
    r->res->keys = keys;
    r->res->bytes_per_key = keys ? s->slot_bytes + side / (double)keys : 0;
}

/* Bytes per table slot: grow a scratch engine's table with small token-bucket keys (no side
 * buffers) and divide the bytes gained by the slots gained. The rest of an empty engine's bytes is
 * its fixed part (store and shard headers). */
static void measure_slot(sl_sim *s)
{
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    sl_engine *e;
    if (sl_engine_new(&cfg, &e))
        return;
    sl_engine_stats st0, st;
    sl_engine_stats_get(e, &st0);
    char key[32];
    sl_request q = {.name = SIM_NAME, .name_len = sizeof SIM_NAME - 1, .unique_key = key, .hits = 1,
                    .limit = 1, .duration = 60000, .algorithm = SL_TOKEN_BUCKET};
    sl_response resp;
    st = st0;
    for (unsigned i = 0; i < (1u << 20) && st.capacity == st0.capacity; i++) {
        q.unique_key_len = (size_t)snprintf(key, sizeof key, "slot-probe-%u", i);
        sl_engine_decide(e, &q, &resp, SL_SIM_DEFAULT_EPOCH_MS);
        sl_engine_stats_get(e, &st);
    }
    if (st.capacity > st0.capacity && st.bytes > st0.bytes)
        s->slot_bytes = (double)(st.bytes - st0.bytes) / (double)(st.capacity - st0.capacity);
    else if (st0.capacity)
        s->slot_bytes = (double)st0.bytes / (double)st0.capacity;
    s->fixed_bytes = (double)st0.bytes - s->slot_bytes * (double)st0.capacity;
    if (s->fixed_bytes < 0)
        s->fixed_bytes = 0;
    sl_engine_free(e);
}

static int run_single(runner *r, uint8_t *dec)
{
    const sl_traffic *tr = r->s->traffic;
    int64_t epoch = r->s->params.epoch_ms;
    sl_response resp;
    for (size_t i = 0; i < tr->n; i++)
        dec[i] = decide(r, r->eng[0], tr->ev[i].key, 1, 0, 0, epoch + tr->ev[i].t_ms, &resp);
    return 0;
}

static int run_split(runner *r, const sl_sim_dist *d, uint8_t *dec)
{
    const sl_traffic *tr = r->s->traffic;
    int64_t epoch = r->s->params.epoch_ms;
    uint32_t *next = calloc(tr->nkeys, sizeof *next); /* round-robin position per key */
    if (!next)
        return -ENOMEM;
    sl_traffic_rng rng;
    sl_traffic_rng_seed(&rng, d->seed);
    sl_response resp;
    for (size_t i = 0; i < tr->n; i++) {
        uint32_t key = tr->ev[i].key, node;
        if (d->mode == SL_SIM_SPLIT_RR) {
            node = next[key];
            next[key] = (node + 1) % r->n;
        } else {
            node = sl_traffic_rng_below(&rng, r->n);
        }
        dec[i] = decide(r, r->eng[node], key, 1, 0, 0, epoch + tr->ev[i].t_ms, &resp);
    }
    free(next);
    return 0;
}

/* GLOBAL model state: per node, the hits queued for owners; per key, whether the owner's state
 * changed since its last broadcast. */
typedef struct global {
    int64_t *pending;      /* [node][key] hits queued at node for key's owner */
    int64_t *since;        /* [node][key] time of the first of those hits */
    uint32_t *queued;      /* [node][...] keys with pending hits at node */
    size_t *nqueued;       /* per node */
    uint8_t *dirty;        /* per key */
    uint32_t *changed;     /* keys with dirty set */
    size_t nchanged;
    int64_t *changed_at;   /* per key: time of the owner's last decision on it */
    int64_t capacity;      /* remaining of an untouched key (what "used" is measured from) */
} global;

static void mark_changed(global *g, uint32_t key, int64_t at)
{
    g->changed_at[key] = at;
    if (!g->dirty[key]) {
        g->dirty[key] = 1;
        g->changed[g->nchanged++] = key;
    }
}

static void global_tick(runner *r, global *g, int64_t now)
{
    const uint32_t nkeys = r->s->traffic->nkeys;
    sl_response resp;
    /* 1. Every node sends its aggregated hits to the owners. */
    for (unsigned n = 0; n < r->n; n++) {
        for (size_t j = 0; j < g->nqueued[n]; j++) {
            uint32_t key = g->queued[(size_t)n * nkeys + j];
            int64_t *hits = &g->pending[(size_t)n * nkeys + key];
            /* Gubernator aggregates a key's queued hits into its first request, created_at and
             * all, and the owner drains on over-limit (GetPeerRateLimits sets DRAIN_OVER_LIMIT). */
            decide(r, r->eng[key % r->n], key, *hits, SL_GLOBAL | SL_DRAIN_OVER_LIMIT,
                   g->since[(size_t)n * nkeys + key], now, &resp);
            *hits = 0;
            mark_changed(g, key, now);
        }
        g->nqueued[n] = 0;
    }
    /* 2. The owners broadcast; every other node replaces its copy. The owner reads its state with
     * a peek dated at its last decision on the key, as Gubernator's broadcast re-sends the queued
     * request's created_at with hits = 0. With a single node there is nobody to tell. */
    for (size_t j = 0; j < g->nchanged; j++) {
        uint32_t key = g->changed[j], owner = key % r->n;
        g->dirty[key] = 0;
        if (r->n == 1)
            continue;
        decide(r, r->eng[owner], key, 0, SL_GLOBAL, g->changed_at[key], now, &resp);
        int64_t used = resp.error ? 0 : g->capacity - resp.remaining;
        /* A token bucket copy must expire with the owner's window (Gubernator installs ExpireAt =
         * the owner's reset_time): date the charge at that window's start. Other algorithms are
         * charged now: their state is a level that drains with time from here. */
        int64_t at = 0;
        if (r->a->algorithm == SL_TOKEN_BUCKET && resp.reset_time > r->s->params.duration)
            at = resp.reset_time - r->s->params.duration;
        if (at > now)
            at = 0;
        const char *k = r->s->traffic->keys[key];
        for (unsigned n = 0; n < r->n; n++) {
            if (n == owner)
                continue;
            sl_engine_remove(r->eng[n], SIM_NAME, sizeof SIM_NAME - 1, k, strlen(k));
            if (used > 0)
                decide(r, r->eng[n], key, used, SL_DRAIN_OVER_LIMIT, at, now, &resp);
        }
    }
    g->nchanged = 0;
}

static int run_global(runner *r, const sl_sim_dist *d, uint8_t *dec)
{
    const sl_traffic *tr = r->s->traffic;
    const uint32_t nkeys = tr->nkeys;
    const int64_t epoch = r->s->params.epoch_ms, s = d->sync_ms;
    if ((uint64_t)r->n * nkeys > SL_SIM_MAX_REF_SLOTS)
        return -E2BIG;
    global g = {0};
    g.pending = calloc((size_t)r->n * nkeys, sizeof *g.pending);
    g.since = calloc((size_t)r->n * nkeys, sizeof *g.since);
    g.queued = malloc((size_t)r->n * nkeys * sizeof *g.queued);
    g.nqueued = calloc(r->n, sizeof *g.nqueued);
    g.dirty = calloc(nkeys, 1);
    g.changed = malloc((size_t)nkeys * sizeof *g.changed);
    g.changed_at = malloc((size_t)nkeys * sizeof *g.changed_at);
    int rc = 0;
    if (!g.pending || !g.since || !g.queued || !g.nqueued || !g.dirty || !g.changed ||
        !g.changed_at) {
        rc = -ENOMEM;
        goto out;
    }
    sl_response resp;
    /* Capacity: what a peek at an untouched key reports as remaining. Measured on key 0 of node 0
     * before any traffic, then forgotten. */
    decide(r, r->eng[0], 0, 0, 0, 0, epoch, &resp);
    g.capacity = resp.error ? r->limit : resp.remaining;
    sl_engine_remove(r->eng[0], SIM_NAME, sizeof SIM_NAME - 1, tr->keys[0], strlen(tr->keys[0]));
    r->res->errors = 0;
    r->res->first_error = NULL;

    sl_traffic_rng rng;
    sl_traffic_rng_seed(&rng, d->seed);
    int64_t next_tick = s;
    for (size_t i = 0; i < tr->n; i++) {
        int64_t t = tr->ev[i].t_ms;
        while (next_tick <= t) {
            global_tick(r, &g, epoch + next_tick);
            next_tick += s;
            bool idle = g.nchanged == 0;
            for (unsigned n = 0; idle && n < r->n; n++)
                idle = g.nqueued[n] == 0;
            if (idle && next_tick <= t)
                next_tick = t / s * s + s; /* nothing to sync: skip the silent ticks */
        }
        uint32_t key = tr->ev[i].key, owner = key % r->n;
        uint32_t node = sl_traffic_rng_below(&rng, r->n);
        if (node == owner) {
            dec[i] = decide(r, r->eng[owner], key, 1, SL_GLOBAL, 0, epoch + t, &resp);
            mark_changed(&g, key, epoch + t);
        } else {
            dec[i] = decide(r, r->eng[node], key, 1, 0, 0, epoch + t, &resp);
            if (!dec[i] && d->forward_admitted_only)
                continue;
            size_t at = (size_t)node * nkeys + key;
            if (g.pending[at]++ == 0) {
                g.queued[(size_t)node * nkeys + g.nqueued[node]++] = key;
                g.since[at] = epoch + t;
            }
        }
    }
out:
    free(g.pending);
    free(g.since);
    free(g.queued);
    free(g.nqueued);
    free(g.dirty);
    free(g.changed);
    free(g.changed_at);
    return rc;
}

int sl_sim_eval(const sl_sim *s, const sl_sim_alg *a, const sl_sim_dist *d, uint8_t *dec,
                sl_sim_result *res)
{
    static const sl_sim_dist single = {.mode = SL_SIM_SINGLE, .nodes = 1};
    if (!d)
        d = &single;
    memset(res, 0, sizeof *res);
    snprintf(res->label, sizeof res->label, "%s", a->label);
    unsigned n = d->mode == SL_SIM_SINGLE ? 1 : d->nodes;
    if (n < 1 || n > SL_SIM_MAX_NODES || (d->mode == SL_SIM_GLOBAL && d->sync_ms < 1))
        return -EINVAL;
    runner r = {.s = s, .a = a, .res = res, .limit = s->params.limit,
                .burst = a->burst >= 0 ? a->burst : s->params.burst};
    if (d->mode == SL_SIM_SPLIT_RR || d->mode == SL_SIM_SPLIT_RANDOM) {
        /* Levee divides the quota by the group size; at least 1 so every limiter can admit. */
        r.limit = s->params.limit / n > 0 ? s->params.limit / n : 1;
        if (r.burst > 0)
            r.burst = r.burst / n > 0 ? r.burst / n : 1;
    }
    res->node_limit = r.limit;
    uint8_t *own = NULL;
    if (!dec) {
        own = malloc(s->traffic->n ? s->traffic->n : 1);
        if (!own)
            return -ENOMEM;
        dec = own;
    }
    int rc = engines_new(&r, n);
    if (!rc) {
        switch (d->mode) {
        case SL_SIM_SINGLE: rc = run_single(&r, dec); break;
        case SL_SIM_SPLIT_RR:
        case SL_SIM_SPLIT_RANDOM: rc = run_split(&r, d, dec); break;
        case SL_SIM_GLOBAL: rc = run_global(&r, d, dec); break;
        default: rc = -EINVAL;
        }
    }
    if (!rc) {
        measure_bytes(&r);
        sl_sim_score(s, dec, res);
    }
    engines_free(&r);
    free(own);
    return rc;
}

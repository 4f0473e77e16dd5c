/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counters of ShouldRateLimit's outcomes per domain and rule, behind a cardinality guard (see
 * rlsmetrics.h). Series are created when a pair is first seen (under the mutex, outside the
 * decision path); after that a call costs a hash, a short scan and one lock.
 */
#include "api/rlsmetrics.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 128

typedef struct pair {
    uint64_t hash;
    char domain[NAME_MAX_BYTES + 1];
    char rule[NAME_MAX_BYTES + 1];
    sl_metrics_counter *c[SL_RLS_OUTCOME_COUNT];
} pair;

struct sl_rlsmetrics {
    pthread_mutex_t mu;
    sl_metrics_family *fam;
    uint32_t max, n;
    pair *pairs; /* max + 1: the last is "other" */
};

static const char *const outcome_names[SL_RLS_OUTCOME_COUNT] = {
    "ok", "over_limit", "shadow_over_limit", "unlimited", "no_limit", "near_limit",
};

const char *sl_rls_outcome_name(sl_rls_outcome o)
{
    return (unsigned)o < SL_RLS_OUTCOME_COUNT ? outcome_names[o] : "unknown";
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void copy_cut(char *dst, const char *s, size_t n)
{
    if (n > NAME_MAX_BYTES)
        n = NAME_MAX_BYTES;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static void series(sl_rlsmetrics *m, pair *p)
{
    for (int o = 0; o < SL_RLS_OUTCOME_COUNT; o++) {
        const char *v[3] = {p->domain, p->rule, outcome_names[o]};
        p->c[o] = sl_metrics_counter_get(m->fam, v, 3);
    }
}

int sl_rlsmetrics_new(sl_metrics *metrics, uint32_t max_names, sl_rlsmetrics **out)
{
    *out = NULL;
    if (!metrics)
        return 0;
    if (max_names > 1000)
        return -EINVAL;
    sl_rlsmetrics *m = calloc(1, sizeof *m);
    if (!m || !(m->pairs = calloc((size_t)max_names + 1, sizeof *m->pairs))) {
        free(m);
        return -ENOMEM;
    }
    pthread_mutex_init(&m->mu, NULL);
    m->max = max_names;
    int rc = sl_metrics_counter_family(metrics, "sluice_rls_descriptors_total",
                                       "Envoy RLS descriptors answered, by domain, rule and "
                                       "outcome (ok, over_limit, shadow_over_limit, unlimited, "
                                       "no_limit); pairs past --metrics-max-names count as "
                                       "\"other\".",
                                       "domain,rule,outcome", &m->fam);
    if (rc) {
        sl_rlsmetrics_free(m);
        return rc;
    }
    pair *other = &m->pairs[max_names];
    strcpy(other->domain, "other");
    strcpy(other->rule, "other");
    series(m, other);
    *out = m;
    return 0;
}

void sl_rlsmetrics_free(sl_rlsmetrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m->pairs);
    free(m);
}

/* The pair's entry (a known one, a new one while there is room, else "other"); under mu. */
static pair *find(sl_rlsmetrics *m, const char *d, size_t dl, const char *r, size_t rl)
{
    if (dl > NAME_MAX_BYTES)
        dl = NAME_MAX_BYTES;
    if (rl > NAME_MAX_BYTES)
        rl = NAME_MAX_BYTES;
    uint64_t h = fnv(fnv(1469598103934665603ULL, d, dl) ^ 0xff, r, rl);
    for (uint32_t i = 0; i < m->n; i++) {
        pair *p = &m->pairs[i];
        if (p->hash == h && strlen(p->domain) == dl && !memcmp(p->domain, d, dl) &&
            strlen(p->rule) == rl && !memcmp(p->rule, r, rl))
            return p;
    }
    if (m->n >= m->max)
        return &m->pairs[m->max];
    pair *p = &m->pairs[m->n++];
    p->hash = h;
    copy_cut(p->domain, d, dl);
    copy_cut(p->rule, r, rl);
    series(m, p);
    return p;
}

void sl_rlsmetrics_count(sl_rlsmetrics *m, const char *domain, size_t domain_len,
                         const char *const *rule, const uint8_t *outcome, size_t n)
{
    if (!m)
        return;
    if (!domain) {
        domain = SL_RLSMETRICS_UNKNOWN;
        domain_len = sizeof SL_RLSMETRICS_UNKNOWN - 1;
    }
    pthread_mutex_lock(&m->mu);
    pair *last = NULL;
    const char *last_rule = NULL;
    for (size_t i = 0; i < n; i++) {
        if (outcome[i] >= SL_RLS_OUTCOME_COUNT)
            continue;
        const char *r = rule[i] ? rule[i] : "";
        if (!last || r != last_rule) /* descriptors of one rule in a row: one lookup */
            last = find(m, domain, domain_len, r, strlen(r));
        last_rule = r;
        sl_metrics_counter_inc(last->c[outcome[i]]);
    }
    pthread_mutex_unlock(&m->mu);
}

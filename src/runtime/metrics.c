/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metrics registry and its two renderers (see metrics.h for the model and the formats).
 *
 * Memory layout. Counter and histogram cells live in chunks. A chunk holds `shards` slices of
 * CHUNK_CELLS 64-bit cells; a series owns the same run of cells [off, off+k) in every slice. So the
 * cells one thread touches (its shard's slice) are dense and shared with no other shard: a counter
 * increment is a relaxed fetch-add on a line only that shard's threads write. Chunks are never
 * moved or freed before the registry, so handles stay valid without locks on the hot path.
 *
 * The thread -> shard map is a thread-local number handed out round-robin from a process-wide
 * counter. It is not registry state (every registry reads it modulo its own shard count), which is
 * why it is the one piece of static mutable data here.
 */
#include "runtime/metrics.h"

#include "base/strbuf.h"
#include "base/utf8.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_CELLS 256 /* cells per shard slice: 2 KiB, a multiple of the 64-byte line */
#define CACHE_LINE 64

struct chunk {
    struct chunk *next;
    size_t used;     /* cells of each slice handed out */
    uint64_t *cells; /* shards * CHUNK_CELLS, 64-byte aligned */
};

struct series {
    uint64_t gauge_bits;     /* gauges: the double's bits; first, on the series' own line */
    uint64_t *cells;         /* counters/histograms: cell 0 of this series in shard 0's slice */
    unsigned shard_mask;
    unsigned nbuckets;       /* histograms: finite bounds */
    const int64_t *ibounds;  /* histograms: bounds in base units */
    struct sl_metrics_family *fam;
    struct series *next;
    char **values;           /* label values, one per family label (sanitised to valid UTF-8) */
    char *prom_labels;       /* `a="x",b="y"`, escaped; "" without labels */
    char *graphite_tags;     /* `;a=x;b=y`, sanitised */
};

struct sl_metrics_family {
    struct sl_metrics *reg;
    struct sl_metrics_family *next;
    sl_metrics_type type;
    char *name;
    char *help;
    size_t nlabels;
    char *label_names[SL_METRICS_MAX_LABELS];
    /* histograms */
    size_t nbounds;
    double bounds[SL_METRICS_MAX_BUCKETS];
    int64_t ibounds[SL_METRICS_MAX_BUCKETS];
    double scale;
    /* collectors */
    sl_metrics_collect_fn collect;
    void *collect_arg;
    struct series *series, *series_tail;
};

struct sl_metrics {
    pthread_mutex_t lock;
    unsigned shards;
    size_t max_series;
    size_t nseries;
    struct sl_metrics_family *families, *families_tail;
    struct chunk *chunks; /* newest first; new series take cells from the head */
};

/* ---------------------------------------------------------------------------------------------- */
/* Thread -> shard. */

static unsigned next_shard;                  /* round-robin source, atomic */
static _Thread_local unsigned tl_shard_plus1; /* 0 = not yet assigned */

static inline unsigned this_shard(void)
{
    unsigned v = tl_shard_plus1;
    if (__builtin_expect(v == 0, 0)) {
        v = __atomic_fetch_add(&next_shard, 1, __ATOMIC_RELAXED) + 1;
        if (v == 0) /* wrapped: 0 means "unassigned" */
            v = 1;
        tl_shard_plus1 = v;
    }
    return v - 1;
}

void sl_metrics_bind_thread(unsigned index)
{
    tl_shard_plus1 = index + 1 == 0 ? 1 : index + 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* Output: sl_strbuf builders. The renderers were never capped: their size follows the
 * registry's. */

static void out_init(sl_strbuf *o)
{
    sl_strbuf_init(o, SIZE_MAX);
}

/* Hand the text over: 0, or -ENOMEM with *out NULL. */
static int out_finish(sl_strbuf *o, char **out, size_t *len)
{
    if (sl_strbuf_take(o, out, len) != 0) {
        *out = NULL;
        if (len)
            *len = 0;
        return -ENOMEM;
    }
    return 0;
}

/* Shortest text that reads back as the same double; Prometheus spellings for the rest. */
static void fmt_double(char buf[40], double v)
{
    if (isnan(v)) {
        strcpy(buf, "NaN");
    } else if (isinf(v)) {
        strcpy(buf, v > 0 ? "+Inf" : "-Inf");
    } else {
        snprintf(buf, 40, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, 40, "%.17g", v);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Names, labels, escaping. */

static bool valid_metric_name(const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) > SL_METRICS_NAME_MAX)
        return false;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static bool valid_label_name(const char *s, size_t n)
{
    if (n == 0 || n > SL_METRICS_NAME_MAX || (n >= 2 && s[0] == '_' && s[1] == '_'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Copy of s with invalid UTF-8 bytes replaced by '?' (Prometheus requires UTF-8 label values). */
static char *dup_utf8(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d == NULL)
        return NULL;
    size_t i = 0;
    while (i < n) {
        size_t k = sl_utf8_seq((const uint8_t *)s + i, n - i);
        if (k == 0) {
            d[i++] = '?';
        } else {
            memcpy(d + i, s + i, k);
            i += k;
        }
    }
    d[n] = '\0';
    return d;
}

/* Prometheus label value: \ " and newline escaped. */
static void out_prom_value(sl_strbuf *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            sl_strbuf_append(o, "\\\\", 2);
        else if (*s == '"')
            sl_strbuf_append(o, "\\\"", 2);
        else if (*s == '\n')
            sl_strbuf_append(o, "\\n", 2);
        else
            sl_strbuf_putc(o, *s);
    }
}

/* HELP text: \ and newline escaped. */
static void out_prom_help(sl_strbuf *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            sl_strbuf_append(o, "\\\\", 2);
        else if (*s == '\n')
            sl_strbuf_append(o, "\\n", 2);
        else
            sl_strbuf_putc(o, *s);
    }
}

/* Graphite tag value: no ';', no leading '~', no spaces or control characters. */
static void out_graphite_value(sl_strbuf *o, const char *s)
{
    for (size_t i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ';' || c <= ' ' || c == 0x7f || (i == 0 && c == '~'))
            sl_strbuf_putc(o, '_');
        else
            sl_strbuf_putc(o, (char)c);
    }
}

static void out_prom_labels(sl_strbuf *o, const struct sl_metrics_family *f,
                            const char *const *values)
{
    for (size_t i = 0; i < f->nlabels; i++) {
        if (i)
            sl_strbuf_putc(o, ',');
        sl_strbuf_puts(o, f->label_names[i]);
        sl_strbuf_append(o, "=\"", 2);
        out_prom_value(o, values[i]);
        sl_strbuf_putc(o, '"');
    }
}

static void out_graphite_tags(sl_strbuf *o, const struct sl_metrics_family *f,
                              const char *const *values)
{
    for (size_t i = 0; i < f->nlabels; i++) {
        if (values[i][0] == '\0')
            continue;
        sl_strbuf_putc(o, ';');
        sl_strbuf_puts(o, f->label_names[i]);
        sl_strbuf_putc(o, '=');
        out_graphite_value(o, values[i]);
    }
}

/* ---------------------------------------------------------------------------------------------- */
/* Registry. */

void sl_metrics_config_default(sl_metrics_config *cfg)
{
    cfg->shards = 16;
    cfg->max_series = 4096;
}

int sl_metrics_new(const sl_metrics_config *cfg, sl_metrics **out)
{
    sl_metrics_config c;
    sl_metrics_config_default(&c);
    if (cfg != NULL) {
        if (cfg->shards)
            c.shards = cfg->shards;
        if (cfg->max_series)
            c.max_series = cfg->max_series;
    }
    *out = NULL;
    if ((c.shards & (c.shards - 1)) != 0 || c.shards > 4096)
        return -EINVAL;
    sl_metrics *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        free(m);
        return -ENOMEM;
    }
    m->shards = c.shards;
    m->max_series = c.max_series;
    *out = m;
    return 0;
}

static void series_free(struct series *s, size_t nlabels)
{
    if (s->values)
        for (size_t i = 0; i < nlabels; i++)
            free(s->values[i]);
    free(s->values);
    free(s->prom_labels);
    free(s->graphite_tags);
    free(s);
}

static void family_free(struct sl_metrics_family *f)
{
    struct series *s = f->series;
    while (s) {
        struct series *next = s->next;
        series_free(s, f->nlabels);
        s = next;
    }
    for (size_t i = 0; i < f->nlabels; i++)
        free(f->label_names[i]);
    free(f->name);
    free(f->help);
    free(f);
}

void sl_metrics_free(sl_metrics *m)
{
    if (m == NULL)
        return;
    struct sl_metrics_family *f = m->families;
    while (f) {
        struct sl_metrics_family *next = f->next;
        family_free(f);
        f = next;
    }
    struct chunk *c = m->chunks;
    while (c) {
        struct chunk *next = c->next;
        free(c->cells);
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* Cells [off, off+k) of a chunk with room, in every shard slice. Registry lock held. */
static uint64_t *alloc_cells(sl_metrics *m, size_t k)
{
    struct chunk *c = m->chunks;
    if (c == NULL || c->used + k > CHUNK_CELLS) {
        c = calloc(1, sizeof(*c));
        if (c == NULL)
            return NULL;
        size_t bytes = (size_t)m->shards * CHUNK_CELLS * sizeof(uint64_t);
        c->cells = aligned_alloc(CACHE_LINE, bytes);
        if (c->cells == NULL) {
            free(c);
            return NULL;
        }
        memset(c->cells, 0, bytes);
        c->next = m->chunks;
        m->chunks = c;
    }
    uint64_t *p = c->cells + c->used;
    c->used += k;
    return p;
}

static size_t cells_per_series(const struct sl_metrics_family *f)
{
    switch (f->type) {
    case SL_METRICS_COUNTER:
        return 1;
    case SL_METRICS_HISTOGRAM:
        return f->nbounds + 2; /* finite buckets, the +Inf overflow bucket, the sum */
    default:
        return 0;
    }
}

/* Registry lock held. values: nlabels UTF-8-clean strings, or NULL when nlabels == 0. */
static struct series *series_create(struct sl_metrics_family *f, const char *const *values)
{
    sl_metrics *m = f->reg;
    if (m->nseries >= m->max_series)
        return NULL;
    size_t size = (sizeof(struct series) + CACHE_LINE - 1) / CACHE_LINE * CACHE_LINE;
    struct series *s = aligned_alloc(CACHE_LINE, size);
    if (s == NULL)
        return NULL;
    memset(s, 0, sizeof(*s));
    s->fam = f;
    s->shard_mask = m->shards - 1;
    s->nbuckets = (unsigned)f->nbounds;
    s->ibounds = f->ibounds;
    double zero = 0.0;
    memcpy(&s->gauge_bits, &zero, sizeof(zero));
    if (f->nlabels) {
        s->values = calloc(f->nlabels, sizeof(char *));
        if (s->values == NULL)
            goto fail;
        for (size_t i = 0; i < f->nlabels; i++)
            if ((s->values[i] = strdup(values[i])) == NULL)
                goto fail;
    }
    sl_strbuf po, go;
    out_init(&po);
    out_init(&go);
    out_prom_labels(&po, f, (const char *const *)s->values);
    out_graphite_tags(&go, f, (const char *const *)s->values);
    if (out_finish(&po, &s->prom_labels, NULL) != 0) {
        sl_strbuf_free(&go);
        goto fail;
    }
    if (out_finish(&go, &s->graphite_tags, NULL) != 0)
        goto fail;
    size_t k = cells_per_series(f);
    if (k) {
        s->cells = alloc_cells(m, k);
        if (s->cells == NULL)
            goto fail;
    }
    if (f->series_tail)
        f->series_tail->next = s;
    else
        f->series = s;
    f->series_tail = s;
    m->nseries++;
    return s;
fail:
    series_free(s, f->nlabels);
    return NULL;
}

static int parse_labels(struct sl_metrics_family *f, const char *labels)
{
    if (labels == NULL)
        return 0;
    const char *p = labels;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (!valid_label_name(p, n) || f->nlabels == SL_METRICS_MAX_LABELS)
            return -EINVAL;
        if (f->type == SL_METRICS_HISTOGRAM && n == 2 && memcmp(p, "le", 2) == 0)
            return -EINVAL;
        for (size_t i = 0; i < f->nlabels; i++)
            if (strlen(f->label_names[i]) == n && memcmp(f->label_names[i], p, n) == 0)
                return -EINVAL;
        if ((f->label_names[f->nlabels] = strndup(p, n)) == NULL)
            return -ENOMEM;
        f->nlabels++;
        if (comma == NULL)
            break;
        p = comma + 1;
        if (*p == '\0') /* trailing comma */
            return -EINVAL;
    }
    return 0;
}

static int family_add(sl_metrics *m, sl_metrics_type type, const char *name, const char *help,
                      const char *labels, const double *bounds, size_t nbounds, double scale,
                      sl_metrics_collect_fn collect, void *arg, sl_metrics_family **out)
{
    if (out)
        *out = NULL;
    if (m == NULL || help == NULL || !valid_metric_name(name))
        return -EINVAL;
    if (type == SL_METRICS_COUNTER && !ends_with(name, "_total"))
        return -EINVAL;
    if (type != SL_METRICS_COUNTER && ends_with(name, "_total"))
        return -EINVAL;
    struct sl_metrics_family *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return -ENOMEM;
    f->reg = m;
    f->type = type;
    f->collect = collect;
    f->collect_arg = arg;
    int rc = parse_labels(f, labels);
    if (rc != 0)
        goto fail;
    if (type == SL_METRICS_HISTOGRAM) {
        rc = -EINVAL;
        if (bounds == NULL || nbounds == 0 || nbounds > SL_METRICS_MAX_BUCKETS)
            goto fail;
        f->scale = scale > 0 ? scale : 1.0;
        f->nbounds = nbounds;
        for (size_t i = 0; i < nbounds; i++) {
            double b = bounds[i] * f->scale;
            if (!isfinite(bounds[i]) || fabs(b) >= 9.2e18)
                goto fail;
            f->bounds[i] = bounds[i];
            /* Observations are integers: v <= b exactly when v <= floor(b). */
            f->ibounds[i] = (int64_t)floor(b);
            if (i > 0 && !(bounds[i] > bounds[i - 1] && f->ibounds[i] > f->ibounds[i - 1]))
                goto fail;
        }
    }
    rc = -ENOMEM;
    if ((f->name = strdup(name)) == NULL || (f->help = strdup(help)) == NULL)
        goto fail;

    pthread_mutex_lock(&m->lock);
    for (struct sl_metrics_family *g = m->families; g; g = g->next) {
        if (strcmp(g->name, name) == 0) {
            pthread_mutex_unlock(&m->lock);
            rc = -EEXIST;
            goto fail;
        }
    }
    if (f->nlabels == 0 && collect == NULL && series_create(f, NULL) == NULL) {
        pthread_mutex_unlock(&m->lock);
        rc = m->nseries >= m->max_series ? -ENOSPC : -ENOMEM;
        goto fail;
    }
    if (m->families_tail)
        m->families_tail->next = f;
    else
        m->families = f;
    m->families_tail = f;
    pthread_mutex_unlock(&m->lock);
    if (out)
        *out = f;
    return 0;
fail:
    family_free(f);
    return rc;
}

int sl_metrics_counter_family(sl_metrics *m, const char *name, const char *help,
                              const char *labels, sl_metrics_family **out)
{
    return family_add(m, SL_METRICS_COUNTER, name, help, labels, NULL, 0, 0, NULL, NULL, out);
}

int sl_metrics_gauge_family(sl_metrics *m, const char *name, const char *help, const char *labels,
                            sl_metrics_family **out)
{
    return family_add(m, SL_METRICS_GAUGE, name, help, labels, NULL, 0, 0, NULL, NULL, out);
}

int sl_metrics_histogram_family(sl_metrics *m, const char *name, const char *help,
                                const char *labels, const double *bounds, size_t nbounds,
                                double scale, sl_metrics_family **out)
{
    return family_add(m, SL_METRICS_HISTOGRAM, name, help, labels, bounds, nbounds, scale, NULL,
                      NULL, out);
}

int sl_metrics_collector(sl_metrics *m, sl_metrics_type type, const char *name, const char *help,
                         const char *labels, sl_metrics_collect_fn fn, void *arg)
{
    if (fn == NULL || (type != SL_METRICS_COUNTER && type != SL_METRICS_GAUGE))
        return -EINVAL;
    return family_add(m, type, name, help, labels, NULL, 0, 0, fn, arg, NULL);
}

static struct series *series_get(sl_metrics_family *f, sl_metrics_type type,
                                 const char *const *values, size_t nvalues)
{
    if (f == NULL || f->type != type || f->collect != NULL || nvalues != f->nlabels)
        return NULL;
    char *clean[SL_METRICS_MAX_LABELS] = {0};
    struct series *found = NULL;
    for (size_t i = 0; i < nvalues; i++) {
        if (values[i] == NULL || strlen(values[i]) > SL_METRICS_LABEL_VALUE_MAX)
            goto done;
        if ((clean[i] = dup_utf8(values[i])) == NULL)
            goto done;
    }
    sl_metrics *m = f->reg;
    pthread_mutex_lock(&m->lock);
    for (struct series *s = f->series; s && !found; s = s->next) {
        size_t i = 0;
        while (i < nvalues && strcmp(s->values[i], clean[i]) == 0)
            i++;
        if (i == nvalues)
            found = s;
    }
    if (found == NULL)
        found = series_create(f, (const char *const *)clean);
    pthread_mutex_unlock(&m->lock);
done:
    for (size_t i = 0; i < nvalues; i++)
        free(clean[i]);
    return found;
}

sl_metrics_counter *sl_metrics_counter_get(sl_metrics_family *f, const char *const *values,
                                           size_t nvalues)
{
    return (sl_metrics_counter *)series_get(f, SL_METRICS_COUNTER, values, nvalues);
}

sl_metrics_gauge *sl_metrics_gauge_get(sl_metrics_family *f, const char *const *values,
                                       size_t nvalues)
{
    return (sl_metrics_gauge *)series_get(f, SL_METRICS_GAUGE, values, nvalues);
}

sl_metrics_histogram *sl_metrics_histogram_get(sl_metrics_family *f, const char *const *values,
                                               size_t nvalues)
{
    return (sl_metrics_histogram *)series_get(f, SL_METRICS_HISTOGRAM, values, nvalues);
}

int sl_metrics_counter_new(sl_metrics *m, const char *name, const char *help,
                           sl_metrics_counter **out)
{
    sl_metrics_family *f;
    int rc = sl_metrics_counter_family(m, name, help, NULL, &f);
    *out = rc == 0 ? sl_metrics_counter_get(f, NULL, 0) : NULL;
    return rc;
}

int sl_metrics_gauge_new(sl_metrics *m, const char *name, const char *help,
                         sl_metrics_gauge **out)
{
    sl_metrics_family *f;
    int rc = sl_metrics_gauge_family(m, name, help, NULL, &f);
    *out = rc == 0 ? sl_metrics_gauge_get(f, NULL, 0) : NULL;
    return rc;
}

int sl_metrics_histogram_new(sl_metrics *m, const char *name, const char *help,
                             const double *bounds, size_t nbounds, double scale,
                             sl_metrics_histogram **out)
{
    sl_metrics_family *f;
    int rc = sl_metrics_histogram_family(m, name, help, NULL, bounds, nbounds, scale, &f);
    *out = rc == 0 ? sl_metrics_histogram_get(f, NULL, 0) : NULL;
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* Hot path. */

void sl_metrics_counter_add(sl_metrics_counter *c, uint64_t n)
{
    struct series *s = (struct series *)c;
    if (s == NULL)
        return;
    __atomic_fetch_add(&s->cells[(size_t)(this_shard() & s->shard_mask) * CHUNK_CELLS], n,
                       __ATOMIC_RELAXED);
}

void sl_metrics_counter_inc(sl_metrics_counter *c)
{
    sl_metrics_counter_add(c, 1);
}

void sl_metrics_gauge_set(sl_metrics_gauge *g, double v)
{
    struct series *s = (struct series *)g;
    if (s == NULL)
        return;
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    __atomic_store_n(&s->gauge_bits, bits, __ATOMIC_RELAXED);
}

void sl_metrics_gauge_add(sl_metrics_gauge *g, double delta)
{
    struct series *s = (struct series *)g;
    if (s == NULL)
        return;
    uint64_t old = __atomic_load_n(&s->gauge_bits, __ATOMIC_RELAXED), next;
    do {
        double v;
        memcpy(&v, &old, sizeof(v));
        v += delta;
        memcpy(&next, &v, sizeof(next));
    } while (!__atomic_compare_exchange_n(&s->gauge_bits, &old, next, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

/* First bucket whose bound is >= v; nb (the +Inf bucket) if none. */
static inline size_t bucket_index(const int64_t *b, size_t nb, int64_t v)
{
    size_t lo = 0, hi = nb;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void sl_metrics_histogram_observe(sl_metrics_histogram *h, int64_t v)
{
    struct series *s = (struct series *)h;
    if (s == NULL)
        return;
    size_t i = bucket_index(s->ibounds, s->nbuckets, v);
    uint64_t *cells = s->cells + (size_t)(this_shard() & s->shard_mask) * CHUNK_CELLS;
    __atomic_fetch_add(&cells[i], 1, __ATOMIC_RELAXED);
    /* Two's complement: negative observations subtract. */
    __atomic_fetch_add(&cells[s->nbuckets + 1], (uint64_t)v, __ATOMIC_RELAXED);
}

void sl_metrics_histogram_observe_f(sl_metrics_histogram *h, double v)
{
    struct series *s = (struct series *)h;
    if (s == NULL || isnan(v))
        return;
    double b = v * s->fam->scale;
    int64_t iv = b >= 9.2e18 ? INT64_MAX : b <= -9.2e18 ? INT64_MIN : (int64_t)llround(b);
    sl_metrics_histogram_observe(h, iv);
}

/* ---------------------------------------------------------------------------------------------- */
/* Reading. */

static uint64_t cell_sum(const struct series *s, size_t i)
{
    uint64_t sum = 0;
    for (size_t sh = 0; sh <= s->shard_mask; sh++)
        sum += __atomic_load_n(&s->cells[sh * CHUNK_CELLS + i], __ATOMIC_RELAXED);
    return sum;
}

uint64_t sl_metrics_counter_value(const sl_metrics_counter *c)
{
    const struct series *s = (const struct series *)c;
    return s ? cell_sum(s, 0) : 0;
}

double sl_metrics_gauge_value(const sl_metrics_gauge *g)
{
    const struct series *s = (const struct series *)g;
    if (s == NULL)
        return 0;
    uint64_t bits = __atomic_load_n(&s->gauge_bits, __ATOMIC_RELAXED);
    double v;
    memcpy(&v, &bits, sizeof(v));
    return v;
}

uint64_t sl_metrics_histogram_bucket(const sl_metrics_histogram *h, size_t i)
{
    const struct series *s = (const struct series *)h;
    if (s == NULL)
        return 0;
    if (i > s->nbuckets)
        i = s->nbuckets;
    uint64_t sum = 0;
    for (size_t b = 0; b <= i; b++)
        sum += cell_sum(s, b);
    return sum;
}

uint64_t sl_metrics_histogram_count(const sl_metrics_histogram *h)
{
    const struct series *s = (const struct series *)h;
    return s ? sl_metrics_histogram_bucket(h, s->nbuckets) : 0;
}

double sl_metrics_histogram_sum(const sl_metrics_histogram *h)
{
    const struct series *s = (const struct series *)h;
    if (s == NULL)
        return 0;
    return (double)(int64_t)cell_sum(s, s->nbuckets + 1) / s->fam->scale;
}

/* ---------------------------------------------------------------------------------------------- */
/* Rendering. */

enum format { FMT_PROM, FMT_GRAPHITE };

struct sl_metrics_sink {
    sl_strbuf *o;
    const struct sl_metrics_family *f;
    enum format fmt;
    const char *prefix; /* graphite: sanitised "prefix." or "" */
    const char *tags;   /* graphite: pre-rendered ";k=v" extra tags */
    int64_t ts;
};

static const char *type_name(sl_metrics_type t)
{
    return t == SL_METRICS_COUNTER ? "counter" : t == SL_METRICS_GAUGE ? "gauge" : "histogram";
}

/* One sample line. `labels` is the pre-rendered label text of the series (prom: `a="x"`;
 * graphite: `;a=x`); `le` an extra bucket bound or NULL. */
static void sample(struct sl_metrics_sink *k, const char *suffix, const char *labels,
                   const char *le, const char *value)
{
    sl_strbuf *o = k->o;
    if (k->fmt == FMT_PROM) {
        sl_strbuf_puts(o, k->f->name);
        sl_strbuf_puts(o, suffix);
        if (labels[0] != '\0' || le != NULL) {
            sl_strbuf_putc(o, '{');
            sl_strbuf_puts(o, labels);
            if (le != NULL)
                sl_strbuf_printf(o, "%sle=\"%s\"", labels[0] ? "," : "", le);
            sl_strbuf_putc(o, '}');
        }
        sl_strbuf_printf(o, " %s\n", value);
    } else {
        sl_strbuf_puts(o, k->prefix);
        sl_strbuf_puts(o, k->f->name);
        sl_strbuf_puts(o, suffix);
        sl_strbuf_puts(o, labels);
        if (le != NULL)
            sl_strbuf_printf(o, ";le=%s", le);
        sl_strbuf_puts(o, k->tags);
        sl_strbuf_printf(o, " %s %lld\n", value, (long long)k->ts);
    }
}

void sl_metrics_sink_emit(sl_metrics_sink *k, const char *const *values, size_t nvalues,
                          double value)
{
    if (k == NULL || nvalues != k->f->nlabels)
        return;
    if (k->fmt == FMT_GRAPHITE && !isfinite(value))
        return;
    char *clean[SL_METRICS_MAX_LABELS] = {0};
    bool ok = true;
    for (size_t i = 0; i < nvalues && ok; i++)
        ok = values[i] != NULL && (clean[i] = dup_utf8(values[i])) != NULL;
    if (ok) {
        sl_strbuf lo;
        out_init(&lo);
        if (k->fmt == FMT_PROM)
            out_prom_labels(&lo, k->f, (const char *const *)clean);
        else
            out_graphite_tags(&lo, k->f, (const char *const *)clean);
        char *labels;
        if (out_finish(&lo, &labels, NULL) == 0) {
            char v[40];
            fmt_double(v, value);
            sample(k, "", labels, NULL, v);
            free(labels);
        } else {
            k->o->err = -ENOMEM;
        }
    }
    for (size_t i = 0; i < nvalues; i++)
        free(clean[i]);
}

static void render_series(struct sl_metrics_sink *k, const struct series *s)
{
    const struct sl_metrics_family *f = k->f;
    const char *labels = k->fmt == FMT_PROM ? s->prom_labels : s->graphite_tags;
    char v[40];
    switch (f->type) {
    case SL_METRICS_COUNTER:
        snprintf(v, sizeof(v), "%llu", (unsigned long long)cell_sum(s, 0));
        sample(k, "", labels, NULL, v);
        break;
    case SL_METRICS_GAUGE: {
        double g = sl_metrics_gauge_value((const sl_metrics_gauge *)s);
        if (k->fmt == FMT_GRAPHITE && !isfinite(g))
            break;
        fmt_double(v, g);
        sample(k, "", labels, NULL, v);
        break;
    }
    case SL_METRICS_HISTOGRAM: {
        uint64_t cum = 0;
        char le[40];
        for (size_t b = 0; b <= f->nbounds; b++) {
            cum += cell_sum(s, b);
            if (b < f->nbounds)
                fmt_double(le, f->bounds[b]);
            else
                strcpy(le, "+Inf");
            snprintf(v, sizeof(v), "%llu", (unsigned long long)cum);
            sample(k, "_bucket", labels, le, v);
        }
        fmt_double(v, (double)(int64_t)cell_sum(s, f->nbounds + 1) / f->scale);
        sample(k, "_sum", labels, NULL, v);
        snprintf(v, sizeof(v), "%llu", (unsigned long long)cum);
        sample(k, "_count", labels, NULL, v);
        break;
    }
    }
}

static void render(sl_metrics *m, struct sl_metrics_sink *k)
{
    pthread_mutex_lock(&m->lock);
    for (const struct sl_metrics_family *f = m->families; f; f = f->next) {
        k->f = f;
        if (k->fmt == FMT_PROM) {
            sl_strbuf_printf(k->o, "# HELP %s ", f->name);
            out_prom_help(k->o, f->help);
            sl_strbuf_printf(k->o, "\n# TYPE %s %s\n", f->name, type_name(f->type));
        }
        if (f->collect != NULL)
            f->collect(f->collect_arg, k);
        else
            for (const struct series *s = f->series; s; s = s->next)
                render_series(k, s);
    }
    pthread_mutex_unlock(&m->lock);
}

int sl_metrics_render_prometheus(sl_metrics *m, char **out, size_t *len)
{
    sl_strbuf o;
    out_init(&o);
    struct sl_metrics_sink k = {.o = &o, .fmt = FMT_PROM, .prefix = "", .tags = ""};
    render(m, &k);
    return out_finish(&o, out, len);
}

int sl_metrics_render_graphite(sl_metrics *m, const char *prefix, const char *const *tags,
                               int64_t timestamp, char **out, size_t *len)
{
    sl_strbuf po, to, o;
    out_init(&po);
    out_init(&to);
    out_init(&o);
    if (prefix != NULL && prefix[0] != '\0') {
        /* Graphite path segments: keep [A-Za-z0-9_.:-], the rest becomes '_'. */
        for (const char *p = prefix; *p; p++) {
            char c = *p;
            bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == ':' || c == '-';
            sl_strbuf_putc(&po, ok ? c : '_');
        }
        size_t n = sl_strbuf_len(&po);
        if (n > 0 && sl_strbuf_str(&po)[n - 1] != '.')
            sl_strbuf_putc(&po, '.');
    }
    for (size_t i = 0; tags != NULL && tags[i] != NULL && tags[i + 1] != NULL; i += 2) {
        if (!valid_label_name(tags[i], strlen(tags[i])) || tags[i + 1][0] == '\0')
            continue;
        sl_strbuf_putc(&to, ';');
        sl_strbuf_puts(&to, tags[i]);
        sl_strbuf_putc(&to, '=');
        out_graphite_value(&to, tags[i + 1]);
    }
    struct sl_metrics_sink k = {.o = &o, .fmt = FMT_GRAPHITE, .prefix = sl_strbuf_str(&po),
                                .tags = sl_strbuf_str(&to), .ts = timestamp};
    if (sl_strbuf_error(&po) || sl_strbuf_error(&to))
        o.err = -ENOMEM;
    else
        render(m, &k);
    sl_strbuf_free(&po);
    sl_strbuf_free(&to);
    return out_finish(&o, out, len);
}

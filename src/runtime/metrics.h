/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metrics registry: one per node (no global registry, so that several nodes share a test process).
 * Counters, gauges and histograms are registered at startup as families with a fixed list of label
 * names; each combination of label values is a series, resolved once to a handle that the hot path
 * updates. The registry renders itself as Prometheus text exposition format 0.0.4 (what GET
 * /metrics serves) and as Graphite plaintext with tags (what the Graphite pusher sends).
 *
 * Hot path. Counter and histogram cells are sharded: every thread maps to one of `shards` shards
 * (round-robin on its first update, or explicitly with sl_metrics_bind_thread()), and a shard's
 * cells of all series sit together in memory, apart from other shards' cells, so that two workers
 * never write the same cache line. An update is one relaxed atomic add on the thread's shard (the
 * atomic makes it correct when more threads than shards share one). Render sums the shards.
 * Gauges are one atomic double each (set/add are rarer than counts). A NULL handle is accepted
 * and ignored by every update function, so a failed registration never crashes a caller.
 *
 * Series lookup (sl_metrics_*_get) takes the registry lock and scans the family: resolve handles
 * at startup (for labels with known values such as `method`, `algorithm`, `status`, keep an array
 * of handles), never per request. The number of series in a registry is capped (max_series): a
 * lookup past the cap returns NULL, so label values from clients cannot grow memory.
 *
 * Histograms have fixed bucket upper bounds given in the rendered unit (e.g. seconds) and observe
 * integers in a base unit `scale` times smaller (e.g. nanoseconds with scale 1e9), so that an
 * observation is integer adds only: one bucket cell and the sum cell. The count is the sum of the
 * bucket cells, so a rendered histogram is always self-consistent (+Inf bucket == _count).
 *
 * Callback families (sl_metrics_collector) produce their series at render time, e.g. the keys an
 * engine holds or its decision counts read from sl_engine_stats_get(). They run under the registry
 * lock and must not call back into the registry.
 *
 * Graphite rendering (sl_metrics_render_graphite): one line per series,
 *     <prefix>.<name>;<label>=<value>...;<extra tags> <value> <unix seconds>\n
 * Counters and gauges render as their value. Histograms render without quantiles, as the
 * Prometheus series do: <name>_count, <name>_sum (rendered unit) and one <name>_bucket series per
 * bound with a `le` tag holding the bound ("+Inf" for the last), cumulative counts. Label values
 * are made valid Graphite tag values: ';', '~' at the start, spaces and control characters become
 * '_'; a label with an empty value is left out (Graphite rejects empty tag values); non-finite
 * gauge values are skipped.
 *
 * Errors: registration returns 0 or a negative errno: -EINVAL (bad name, label, bounds or a
 * counter not ending in _total), -EEXIST (name taken), -ENOMEM.
 */
#ifndef SLUICE_RUNTIME_METRICS_H
#define SLUICE_RUNTIME_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef enum sl_metrics_type {
    SL_METRICS_COUNTER = 0,
    SL_METRICS_GAUGE = 1,
    SL_METRICS_HISTOGRAM = 2,
} sl_metrics_type;

#define SL_METRICS_MAX_LABELS 8
#define SL_METRICS_MAX_BUCKETS 32
#define SL_METRICS_NAME_MAX 128
#define SL_METRICS_LABEL_VALUE_MAX 256 /* longer label values are rejected (NULL handle) */

/* Latency buckets in seconds, 50us .. 5s (16 bounds), for histograms with scale 1e9 (ns). */
#define SL_METRICS_LATENCY_BUCKETS                                                                 \
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,    \
        1.0, 2.5, 5.0
#define SL_METRICS_LATENCY_NBUCKETS 16

typedef struct sl_metrics sl_metrics;
typedef struct sl_metrics_family sl_metrics_family;
typedef struct sl_metrics_counter sl_metrics_counter;
typedef struct sl_metrics_gauge sl_metrics_gauge;
typedef struct sl_metrics_histogram sl_metrics_histogram;
typedef struct sl_metrics_sink sl_metrics_sink;

typedef struct sl_metrics_config {
    unsigned shards;   /* power of two; 0 = 16. At least the number of worker threads. */
    size_t max_series; /* most series in the registry; 0 = 4096 */
} sl_metrics_config;

void sl_metrics_config_default(sl_metrics_config *cfg);
int sl_metrics_new(const sl_metrics_config *cfg, sl_metrics **out); /* cfg may be NULL */
void sl_metrics_free(sl_metrics *m);

/*
 * Registration (startup). `name` must match [a-zA-Z_:][a-zA-Z0-9_:]* (use sluice_*; counters end
 * in _total; units as suffixes: _seconds, _bytes). `labels` is a comma-separated list of label
 * names ("method,status"), or NULL / "" for none. A family without labels has one series, created
 * here; get it with sl_metrics_*_get(f, NULL, 0). `out` may be NULL.
 */
int sl_metrics_counter_family(sl_metrics *m, const char *name, const char *help,
                              const char *labels, sl_metrics_family **out);
int sl_metrics_gauge_family(sl_metrics *m, const char *name, const char *help, const char *labels,
                            sl_metrics_family **out);
/* `bounds`: nbounds (1..SL_METRICS_MAX_BUCKETS) strictly ascending finite upper bounds in the
 * rendered unit; +Inf is implicit. `scale`: base units per rendered unit (1e9: observe ns, render
 * seconds); values <= 0 mean 1. */
int sl_metrics_histogram_family(sl_metrics *m, const char *name, const char *help,
                                const char *labels, const double *bounds, size_t nbounds,
                                double scale, sl_metrics_family **out);

/* A family whose series `fn` emits at render time with sl_metrics_sink_emit(). Counter or gauge. */
typedef void (*sl_metrics_collect_fn)(void *arg, sl_metrics_sink *sink);
int sl_metrics_collector(sl_metrics *m, sl_metrics_type type, const char *name, const char *help,
                         const char *labels, sl_metrics_collect_fn fn, void *arg);
/* From inside a collector: one series; `values` has one entry per label of the family (NULL when
 * it has none). A call with the wrong number of values is ignored. */
void sl_metrics_sink_emit(sl_metrics_sink *sink, const char *const *values, size_t nvalues,
                          double value);

/* Convenience: one unlabelled series each (errors as above; *out NULL on failure). */
int sl_metrics_counter_new(sl_metrics *m, const char *name, const char *help,
                           sl_metrics_counter **out);
int sl_metrics_gauge_new(sl_metrics *m, const char *name, const char *help,
                         sl_metrics_gauge **out);
int sl_metrics_histogram_new(sl_metrics *m, const char *name, const char *help,
                             const double *bounds, size_t nbounds, double scale,
                             sl_metrics_histogram **out);

/* Find or create the series for these label values (in the family's label order). NULL if the
 * family has another type, nvalues differs from its label count, a value is longer than
 * SL_METRICS_LABEL_VALUE_MAX, the registry is at max_series, or memory ran out. */
sl_metrics_counter *sl_metrics_counter_get(sl_metrics_family *f, const char *const *values,
                                           size_t nvalues);
sl_metrics_gauge *sl_metrics_gauge_get(sl_metrics_family *f, const char *const *values,
                                       size_t nvalues);
sl_metrics_histogram *sl_metrics_histogram_get(sl_metrics_family *f, const char *const *values,
                                               size_t nvalues);

/* Hot path: lock-free, allocation-free; NULL handles are ignored. */
void sl_metrics_counter_inc(sl_metrics_counter *c);
void sl_metrics_counter_add(sl_metrics_counter *c, uint64_t n);
void sl_metrics_gauge_set(sl_metrics_gauge *g, double v);
void sl_metrics_gauge_add(sl_metrics_gauge *g, double delta);
/* v in the histogram's base unit (ns for latency histograms with scale 1e9). */
void sl_metrics_histogram_observe(sl_metrics_histogram *h, int64_t v);
/* v in the rendered unit (seconds); converted with the scale. */
void sl_metrics_histogram_observe_f(sl_metrics_histogram *h, double v);

/* Map the calling thread to shard (index % shards) in every registry: workers call this with their
 * index at start so that each has a shard of its own. Threads that do not call it are given
 * shards round-robin on their first update. */
void sl_metrics_bind_thread(unsigned index);

/* Current values (sums over shards), for tests and for code that reads its own metrics. */
uint64_t sl_metrics_counter_value(const sl_metrics_counter *c);
double sl_metrics_gauge_value(const sl_metrics_gauge *g);
uint64_t sl_metrics_histogram_count(const sl_metrics_histogram *h);
double sl_metrics_histogram_sum(const sl_metrics_histogram *h); /* rendered unit */
/* Cumulative count of observations <= bounds[i] (i == nbounds: all). */
uint64_t sl_metrics_histogram_bucket(const sl_metrics_histogram *h, size_t i);

/* Render into a malloc'd NUL-terminated string (*out, *len; free() it). 0 or -ENOMEM. */
int sl_metrics_render_prometheus(sl_metrics *m, char **out, size_t *len);
/* `prefix` ("sluice", "" or NULL for none) is joined to each name with '.'; `tags` is a
 * NULL-terminated list of name, value pairs added to every series (e.g. {"instance", id, NULL});
 * `timestamp` is unix seconds. */
int sl_metrics_render_graphite(sl_metrics *m, const char *prefix, const char *const *tags,
                               int64_t timestamp, char **out, size_t *len);

/* Content-Type of sl_metrics_render_prometheus's output. */
#define SL_METRICS_PROMETHEUS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif

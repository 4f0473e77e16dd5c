/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is limited (see who.h): the table of limit names with its cardinality guard, the
 * per-(limit, event) counters and sketches, and the JSON listing of the top keys.
 */
#include "protect/who.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/topk.h"

static const char *const event_names[SL_WHO_EVENT_COUNT] = {"rejected", "would_reject", "shed"};

typedef struct wname {
    uint64_t hash;
    size_t len;
    char name[SL_WHO_NAME_MAX + 1];
    uint64_t total[SL_WHO_EVENT_COUNT];
    sl_metrics_counter *counter[SL_WHO_EVENT_COUNT];
    sl_topk top[SL_WHO_EVENT_COUNT]; /* slots NULL until the first event of that kind */
} wname;

struct sl_who {
    sl_who_config cfg;
    pthread_mutex_t mu;
    sl_metrics_family *family; /* NULL without metrics */
    wname *names;              /* max_names + 1: the last is "other" */
    uint32_t n;                /* named entries in use */
};

void sl_who_config_default(sl_who_config *c)
{
    memset(c, 0, sizeof *c);
    c->max_names = 32;
    c->k = 32;
    c->half_life_ms = 60000;
}

const char *sl_who_event_name(sl_who_event ev)
{
    return (unsigned)ev < SL_WHO_EVENT_COUNT ? event_names[ev] : "unknown";
}

/* Printable ASCII, the rest as '?': label values and JSON strings stay valid whatever came in. */
static void clean(char *dst, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        dst[i] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
    }
}

static void set_name(wname *e, const char *s, size_t n)
{
    clean(e->name, s, n);
    e->name[n] = 0;
    e->len = n;
}

static void bind_counters(sl_who *w, wname *e)
{
    if (!w->family)
        return;
    for (int ev = 0; ev < SL_WHO_EVENT_COUNT; ev++) {
        const char *v[2] = {e->name, event_names[ev]};
        e->counter[ev] = sl_metrics_counter_get(w->family, v, 2);
    }
}

int sl_who_new(const sl_who_config *cfg, sl_who **out)
{
    if (!cfg || !out || cfg->max_names > SL_WHO_MAX_NAMES || cfg->k == 0 ||
        cfg->k > SL_WHO_MAX_K || cfg->k > SL_TOPK_MAX_CAPACITY || cfg->half_life_ms < 0)
        return -EINVAL;
    sl_who *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->cfg = *cfg;
    w->names = calloc((size_t)cfg->max_names + 1, sizeof *w->names);
    if (!w->names) {
        free(w);
        return -ENOMEM;
    }
    pthread_mutex_init(&w->mu, NULL);
    if (cfg->metrics) {
        int rc = sl_metrics_counter_family(
            cfg->metrics, "sluice_limit_events_total",
            "Rejections, shadow-mode would-rejects and sheds by limit (the first "
            "--metrics-max-names limit names; the rest as \"other\").",
            "limit,event", &w->family);
        if (rc) {
            sl_who_free(w);
            return rc;
        }
    }
    wname *other = &w->names[cfg->max_names];
    set_name(other, SL_WHO_OTHER, sizeof SL_WHO_OTHER - 1);
    bind_counters(w, other);
    *out = w;
    return 0;
}

void sl_who_free(sl_who *w)
{
    if (!w)
        return;
    if (w->names) {
        for (uint32_t i = 0; i <= w->cfg.max_names; i++)
            for (int ev = 0; ev < SL_WHO_EVENT_COUNT; ev++)
                sl_topk_free(&w->names[i].top[ev]);
        free(w->names);
    }
    pthread_mutex_destroy(&w->mu);
    free(w);
}

/* The entry of a limit name: a known one, a new one while there is room, else "other".
 * Under the mutex. */
static wname *entry_of(sl_who *w, const char *limit, size_t len)
{
    char name[SL_WHO_NAME_MAX];
    if (len > SL_WHO_NAME_MAX)
        len = SL_WHO_NAME_MAX;
    clean(name, limit, len); /* names are kept, hashed and compared as they are shown */
    uint64_t h = sl_topk_hash(name, len);
    for (uint32_t i = 0; i < w->n; i++) {
        wname *e = &w->names[i];
        if (e->hash == h && e->len == len && memcmp(e->name, name, len) == 0)
            return e;
    }
    if (w->n >= w->cfg.max_names)
        return &w->names[w->cfg.max_names];
    wname *e = &w->names[w->n++];
    e->hash = h;
    set_name(e, name, len);
    bind_counters(w, e);
    return e;
}

void sl_who_note(sl_who *w, const char *limit, size_t limit_len, sl_who_event ev, const char *key,
                 size_t key_len, int64_t now_ms)
{
    if (!w || (unsigned)ev >= SL_WHO_EVENT_COUNT)
        return;
    if (!limit)
        limit_len = 0;
    pthread_mutex_lock(&w->mu);
    wname *e = entry_of(w, limit ? limit : "", limit_len);
    e->total[ev]++;
    if (!e->top[ev].slots)
        sl_topk_init(&e->top[ev], w->cfg.k, w->cfg.half_life_ms, now_ms); /* -ENOMEM: no keys */
    sl_topk_add(&e->top[ev], key ? key : "", key ? key_len : 0, 1, now_ms);
    pthread_mutex_unlock(&w->mu);
    if (e->counter[ev])
        sl_metrics_counter_inc(e->counter[ev]);
}

static json_t *clean_string(const char *s, size_t n)
{
    char buf[SL_TOPK_KEY_MAX];
    if (n > sizeof buf)
        n = sizeof buf;
    clean(buf, s, n);
    return json_stringn(buf, n);
}

static int add_limit(json_t *arr, wname *e, int ev, size_t top, int64_t now_ms)
{
    sl_topk_entry ents[SL_WHO_MAX_K];
    size_t n = sl_topk_list(&e->top[ev], ents, top < SL_WHO_MAX_K ? top : SL_WHO_MAX_K, now_ms);
    json_t *keys = json_array();
    if (!keys)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        json_array_append_new(keys, json_pack("{s:o,s:I,s:I}", "key",
                                              clean_string(ents[i].key, ents[i].key_len), "count",
                                              (json_int_t)ents[i].count, "error",
                                              (json_int_t)ents[i].error));
    json_t *o = json_pack("{s:s,s:s,s:I,s:o}", "limit", e->name, "event", event_names[ev], "total",
                          (json_int_t)e->total[ev], "keys", keys);
    return o && json_array_append_new(arr, o) == 0 ? 0 : -ENOMEM;
}

int sl_who_top_json(sl_who *w, const char *limit_filter, size_t top, int64_t now_ms, char **out,
                    size_t *len)
{
    *out = NULL;
    *len = 0;
    json_t *arr = json_array();
    if (!arr)
        return -ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    for (uint32_t i = 0; i <= w->cfg.max_names && !rc; i++) {
        if (i < w->cfg.max_names && i >= w->n)
            i = w->cfg.max_names; /* unused named entries: straight to "other" */
        wname *e = &w->names[i];
        if (limit_filter && strcmp(limit_filter, e->name) != 0)
            continue;
        for (int ev = 0; ev < SL_WHO_EVENT_COUNT && !rc; ev++)
            if (e->total[ev])
                rc = add_limit(arr, e, ev, top, now_ms);
    }
    pthread_mutex_unlock(&w->mu);
    json_t *j = rc ? NULL
                   : json_pack("{s:I,s:I,s:o}", "half_life_ms", (json_int_t)w->cfg.half_life_ms,
                               "k", (json_int_t)w->cfg.k, "limits", arr);
    if (!j) {
        if (!rc)
            rc = -ENOMEM;
        else
            json_decref(arr);
        return rc;
    }
    *out = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!*out)
        return -ENOMEM;
    *len = strlen(*out);
    return 0;
}

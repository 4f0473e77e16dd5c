/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Traffic generators and trace replay for the simulator (see traffic.h).
 *
 * Arrival processes are generated in continuous time (double milliseconds) and then floored to the
 * millisecond, the engine's clock resolution; several events may therefore share a millisecond,
 * which is what a busy key sees in production too. The PRNG is xoshiro256** (Blackman and Vigna):
 * small, fast, and good enough for traffic; its seed goes through splitmix64 so that nearby seeds
 * (1, 2, 3) still give unrelated streams.
 */
#include "sim/traffic.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

/* ---- PRNG ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sl_traffic_rng_seed(sl_traffic_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sl_traffic_rng_next(sl_traffic_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sl_traffic_rng_unit(sl_traffic_rng *r)
{
    /* 53 random bits: every double in [0, 1) on the 2^-53 grid equally likely. */
    return (double)(sl_traffic_rng_next(r) >> 11) * 0x1.0p-53;
}

uint32_t sl_traffic_rng_below(sl_traffic_rng *r, uint32_t n)
{
    /* Lemire's multiply-and-reject: unbiased without a division on the common path. */
    uint64_t m = (uint64_t)(uint32_t)(sl_traffic_rng_next(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)-n % n;
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(sl_traffic_rng_next(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double sl_traffic_rng_exp(sl_traffic_rng *r, double mean)
{
    /* 1 - u is in (0, 1], so the log is finite. */
    return -mean * log(1.0 - sl_traffic_rng_unit(r));
}

/* ---- the event array ---- */

void sl_traffic_init(sl_traffic *t, size_t max_events)
{
    memset(t, 0, sizeof *t);
    if (max_events == 0)
        max_events = SL_TRAFFIC_DEFAULT_MAX_EVENTS;
    if (max_events > UINT32_MAX)
        max_events = UINT32_MAX; /* event indices are 32-bit in the simulator's key index */
    t->max_events = max_events;
}

void sl_traffic_clear(sl_traffic *t)
{
    for (uint32_t i = 0; i < t->nkeys; i++)
        free(t->keys[i]);
    free(t->keys);
    free(t->ev);
    size_t max = t->max_events;
    memset(t, 0, sizeof *t);
    t->max_events = max;
}

void sl_traffic_free(sl_traffic *t)
{
    sl_traffic_clear(t);
}

static int push(sl_traffic *t, int64_t t_ms, uint32_t key)
{
    if (t->n == t->cap) {
        if (t->n >= t->max_events)
            return -E2BIG;
        size_t cap = t->cap ? t->cap * 2 : 4096;
        if (cap > t->max_events)
            cap = t->max_events;
        sl_traffic_event *ev = realloc(t->ev, cap * sizeof *ev);
        if (!ev)
            return -ENOMEM;
        t->ev = ev;
        t->cap = cap;
    }
    t->ev[t->n++] = (sl_traffic_event){.t_ms = t_ms, .key = key};
    return 0;
}

static int add_key(sl_traffic *t, const char *name, size_t len)
{
    if (t->nkeys >= SL_TRAFFIC_MAX_KEYS)
        return -E2BIG;
    if ((t->nkeys & (t->nkeys - 1)) == 0) { /* grow at powers of two */
        size_t cap = t->nkeys ? (size_t)t->nkeys * 2 : 1;
        char **k = realloc(t->keys, cap * sizeof *k);
        if (!k)
            return -ENOMEM;
        t->keys = k;
    }
    char *s = malloc(len + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, name, len);
    s[len] = '\0';
    t->keys[t->nkeys++] = s;
    return 0;
}

static int name_keys(sl_traffic *t, uint32_t keys)
{
    char buf[16];
    for (uint32_t i = 0; i < keys; i++) {
        int n = snprintf(buf, sizeof buf, "k%u", i);
        int rc = add_key(t, buf, (size_t)n);
        if (rc)
            return rc;
    }
    return 0;
}

/* Common checks and setup of a generated traffic; `expected` is the mean event count. */
static int begin(sl_traffic *t, double expected, int64_t span_ms, uint32_t keys)
{
    sl_traffic_clear(t);
    if (span_ms <= 0 || keys == 0 || !(expected >= 0))
        return -EINVAL;
    if (keys > SL_TRAFFIC_MAX_KEYS)
        return -E2BIG;
    /* Refuse early what could not fit, rather than generate for minutes and then fail. */
    if (expected > (double)t->max_events)
        return -E2BIG;
    t->span_ms = span_ms;
    return name_keys(t, keys);
}

static int finish(sl_traffic *t, int rc)
{
    if (rc) {
        sl_traffic_clear(t);
        return rc;
    }
    return 0;
}

/* Poisson events at total rate `per_ms` (events per ms, all keys) in [from, to). */
static int poisson_span(sl_traffic *t, sl_traffic_rng *r, double per_ms, double from, double to,
                        uint32_t keys)
{
    if (per_ms <= 0)
        return 0;
    double mean = 1.0 / per_ms;
    for (double x = from + sl_traffic_rng_exp(r, mean); x < to; x += sl_traffic_rng_exp(r, mean)) {
        int rc = push(t, (int64_t)x, sl_traffic_rng_below(r, keys));
        if (rc)
            return rc;
    }
    return 0;
}

int sl_traffic_poisson(sl_traffic *t, double rate, int64_t span_ms, uint32_t keys, uint64_t seed)
{
    if (!(rate >= 0) || isinf(rate))
        return -EINVAL;
    int rc = begin(t, rate * keys * (double)span_ms / 1000.0, span_ms, keys);
    if (rc)
        return finish(t, rc);
    sl_traffic_rng r;
    sl_traffic_rng_seed(&r, seed);
    return finish(t, poisson_span(t, &r, rate * keys / 1000.0, 0, (double)span_ms, keys));
}

int sl_traffic_bursty(sl_traffic *t, double rate, int64_t on_ms, int64_t off_ms, int64_t span_ms,
                      uint32_t keys, uint64_t seed)
{
    if (!(rate >= 0) || isinf(rate) || on_ms <= 0 || off_ms < 0)
        return -EINVAL;
    double duty = (double)on_ms / (double)(on_ms + off_ms);
    int rc = begin(t, rate * keys * duty * (double)span_ms / 1000.0, span_ms, keys);
    if (rc)
        return finish(t, rc);
    sl_traffic_rng r;
    sl_traffic_rng_seed(&r, seed);
    for (int64_t c = 0; c < span_ms && !rc; c += on_ms + off_ms) {
        int64_t end = c + on_ms < span_ms ? c + on_ms : span_ms;
        rc = poisson_span(t, &r, rate * keys / 1000.0, (double)c, (double)end, keys);
    }
    return finish(t, rc);
}

int sl_traffic_constant(sl_traffic *t, double rate, int64_t span_ms, uint32_t keys)
{
    if (!(rate >= 0) || isinf(rate))
        return -EINVAL;
    int rc = begin(t, rate * keys * (double)span_ms / 1000.0, span_ms, keys);
    if (rc || rate == 0)
        return finish(t, rc);
    for (uint64_t i = 0; !rc; i++) {
        double x = (double)i * 1000.0 / rate;
        if (x >= (double)span_ms)
            break;
        for (uint32_t k = 0; k < keys && !rc; k++)
            rc = push(t, (int64_t)x, k);
    }
    return finish(t, rc);
}

int sl_traffic_ramp(sl_traffic *t, double rate0, double rate1, int64_t span_ms, uint32_t keys,
                    uint64_t seed)
{
    if (!(rate0 >= 0) || !(rate1 >= 0) || isinf(rate0) || isinf(rate1))
        return -EINVAL;
    int rc = begin(t, (rate0 + rate1) / 2 * keys * (double)span_ms / 1000.0, span_ms, keys);
    if (rc)
        return finish(t, rc);
    double top = (rate0 > rate1 ? rate0 : rate1) * keys / 1000.0; /* events per ms */
    if (top <= 0)
        return 0;
    sl_traffic_rng r;
    sl_traffic_rng_seed(&r, seed);
    /* Thinning (Lewis and Shedler): candidates at the peak rate, each kept with probability
     * rate(x) / peak, give a Poisson process of rate(x). */
    double span = (double)span_ms;
    for (double x = sl_traffic_rng_exp(&r, 1.0 / top); x < span && !rc;
         x += sl_traffic_rng_exp(&r, 1.0 / top)) {
        double here = (rate0 + (rate1 - rate0) * x / span) * keys / 1000.0;
        bool keep = sl_traffic_rng_unit(&r) * top < here;
        uint32_t key = sl_traffic_rng_below(&r, keys); /* drawn either way: stream stays aligned */
        if (keep)
            rc = push(t, (int64_t)x, key);
    }
    return finish(t, rc);
}

int sl_traffic_edge(sl_traffic *t, int64_t per_edge, int64_t duration, int64_t epoch_ms,
                    int64_t span_ms, uint32_t keys)
{
    if (per_edge < 0 || duration < 2)
        return -EINVAL;
    double edges = (double)span_ms / (double)duration / 2.0 + 1.0;
    int rc = begin(t, edges * 2.0 * (double)per_edge * keys, span_ms, keys);
    if (rc)
        return finish(t, rc);
    /* First multiple of duration strictly after the start, so B - 1 is inside the run. */
    int64_t first = (epoch_ms / duration + 1) * duration - epoch_ms;
    for (int64_t b = first; b < span_ms && !rc; b += 2 * duration)
        for (int64_t at = b - 1; at <= b && at < span_ms && !rc; at++)
            for (int64_t i = 0; i < per_edge && !rc; i++)
                for (uint32_t k = 0; k < keys && !rc; k++)
                    rc = push(t, at, k);
    return finish(t, rc);
}

/* ---- replay ---- */

typedef struct intern {
    uint32_t *slot; /* key index + 1; 0 = empty */
    size_t mask;
} intern;

static int intern_key(sl_traffic *t, intern *h, const char *s, size_t len, uint32_t *out)
{
    if ((size_t)t->nkeys * 2 >= h->mask + 1) { /* keep the load under one half */
        size_t cap = (h->mask + 1) * 2;
        uint32_t *slot = calloc(cap, sizeof *slot);
        if (!slot)
            return -ENOMEM;
        for (size_t i = 0; i <= h->mask; i++) {
            if (!h->slot[i])
                continue;
            const char *k = t->keys[h->slot[i] - 1];
            size_t j = XXH3_64bits(k, strlen(k)) & (cap - 1);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = h->slot[i];
        }
        free(h->slot);
        h->slot = slot;
        h->mask = cap - 1;
    }
    size_t j = XXH3_64bits(s, len) & h->mask;
    while (h->slot[j]) {
        const char *k = t->keys[h->slot[j] - 1];
        if (strlen(k) == len && !memcmp(k, s, len)) {
            *out = h->slot[j] - 1;
            return 0;
        }
        j = (j + 1) & h->mask;
    }
    int rc = add_key(t, s, len);
    if (rc)
        return rc;
    h->slot[j] = t->nkeys;
    *out = t->nkeys - 1;
    return 0;
}

static int cmp_event(const void *a, const void *b)
{
    const sl_traffic_event *x = a, *y = b;
    if (x->t_ms != y->t_ms)
        return x->t_ms < y->t_ms ? -1 : 1;
    return x->pad < y->pad ? -1 : x->pad > y->pad; /* file order: a stable sort */
}

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == ',' || c == '\r';
}

/* Largest timestamp accepted: ~31,000 years of milliseconds; keeps t - min and t + epoch exact. */
#define REPLAY_MAX_T ((int64_t)1 << 50)

int sl_traffic_replay(sl_traffic *t, FILE *f, size_t *err_line, const char **err)
{
    sl_traffic_clear(t);
    intern h = {.slot = calloc(64, sizeof(uint32_t)), .mask = 63};
    if (!h.slot)
        return -ENOMEM;
    char line[SL_TRAFFIC_MAX_KEY_LEN + 64];
    size_t lineno = 0;
    int rc = 0;
    bool sorted = true;
    int64_t tmin = INT64_MAX, tmax = INT64_MIN, prev = INT64_MIN;
    *err = NULL;
    *err_line = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n' && !feof(f)) {
            rc = -EINVAL, *err = "line too long";
            break;
        }
        char *p = line;
        while (is_sep(*p))
            p++;
        if (*p == '\n' || *p == '\0' || *p == '#')
            continue;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || (!is_sep(*end) && *end != '\n' && *end != '\0' && *end != '#')) {
            rc = -EINVAL, *err = "expected an integer timestamp in milliseconds";
            break;
        }
        if (v < 0 || v > REPLAY_MAX_T) {
            rc = -EINVAL, *err = "timestamp out of range";
            break;
        }
        p = end;
        while (is_sep(*p))
            p++;
        const char *key = "k0";
        size_t klen = 2;
        if (*p != '\n' && *p != '\0' && *p != '#') {
            key = p;
            while (*p && !is_sep(*p) && *p != '\n' && *p != '#')
                p++;
            klen = (size_t)(p - key);
            if (klen > SL_TRAFFIC_MAX_KEY_LEN) {
                rc = -EINVAL, *err = "key too long";
                break;
            }
            while (is_sep(*p))
                p++;
            if (*p != '\n' && *p != '\0' && *p != '#') {
                rc = -EINVAL, *err = "more than two columns";
                break;
            }
        }
        uint32_t k;
        if ((rc = intern_key(t, &h, key, klen, &k))) {
            *err = rc == -E2BIG ? "too many distinct keys" : "out of memory";
            break;
        }
        if ((rc = push(t, v, k))) {
            *err = rc == -E2BIG ? "too many events" : "out of memory";
            break;
        }
        t->ev[t->n - 1].pad = (uint32_t)(t->n - 1);
        if (v < prev)
            sorted = false;
        prev = v;
        tmin = v < tmin ? v : tmin;
        tmax = v > tmax ? v : tmax;
    }
    free(h.slot);
    if (!rc && ferror(f))
        rc = -EIO, *err = "read error";
    if (rc) {
        *err_line = lineno;
        sl_traffic_clear(t);
        return rc;
    }
    if (!sorted)
        qsort(t->ev, t->n, sizeof *t->ev, cmp_event);
    for (size_t i = 0; i < t->n; i++) {
        t->ev[i].t_ms -= tmin;
        t->ev[i].pad = 0;
    }
    t->span_ms = t->n ? tmax - tmin + 1 : 1;
    if (t->nkeys == 0)
        rc = name_keys(t, 1); /* an empty file still has its default key */
    return finish(t, rc);
}

double sl_traffic_mean_rate(const sl_traffic *t)
{
    if (t->span_ms <= 0 || t->nkeys == 0)
        return 0;
    return (double)t->n / (double)t->nkeys / ((double)t->span_ms / 1000.0);
}

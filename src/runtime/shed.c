/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker-utilization shedder (see shed.h and sluice/shed.h), and the priority names.
 *
 * Admission. A class with shed fraction f sheds its k-th call iff frac(k * phi) < f, phi the golden
 * ratio's fractional part (a Weyl sequence, in 64-bit fixed point: k * 0x9E3779B97F4A7C15 mod 2^64).
 * The points frac(k * phi) are spread more evenly than random ones (discrepancy O(log n / n)), so
 * the share of calls shed tracks f closely over short runs, without a random generator, and a
 * test can count exact outcomes. Each class has its own sequence, so a burst of test traffic does
 * not change which get calls are shed.
 *
 * Hysteresis. The level only moves after the smoothed utilization has stayed on one side of the
 * band [low, target] for a whole period (raise_after_ms / lower_after_ms), one step per period, and
 * a sample inside the band restarts both periods. A load that hovers around the target therefore
 * holds the level instead of moving it up and down on every sample.
 */
#include "runtime/shed.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const char *const prio_names[SL_PRIORITY_COUNT] = {
    [SL_PRIORITY_CRITICAL] = "critical",
    [SL_PRIORITY_POST] = "post",
    [SL_PRIORITY_GET] = "get",
    [SL_PRIORITY_TEST] = "test",
};

const char *sl_priority_name(sl_priority p)
{
    if ((int)p < 0 || p >= SL_PRIORITY_COUNT)
        return NULL;
    return prio_names[p];
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

int sl_priority_from_name(const char *s, size_t n)
{
    if (!s)
        return -EINVAL;
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    for (int p = 0; p < SL_PRIORITY_COUNT; p++) {
        const char *name = prio_names[p];
        if (strlen(name) != n)
            continue;
        size_t i = 0;
        while (i < n && lower(s[i]) == name[i])
            i++;
        if (i == n)
            return p;
    }
    return -EINVAL;
}

void sl_shedder_options_default(sl_shedder_options *o)
{
    o->target = 0.9;
    o->low = 0.7;
    o->raise_after_ms = 1000;
    o->lower_after_ms = 5000;
    o->raise_step = 0.25;
    o->lower_step = 0.1;
    o->smoothing = 0.5;
}

int sl_shedder_options_check(const sl_shedder_options *o, const char **why)
{
    const char *w = NULL;
    if (!(o->target > 0 && o->target <= 10))
        w = "target must be in (0, 10]";
    else if (!(o->low >= 0 && o->low <= o->target))
        w = "low must be in [0, target]";
    else if (o->raise_after_ms < 0 || o->lower_after_ms < 0)
        w = "raise_after_ms and lower_after_ms cannot be negative";
    else if (!(o->raise_step > 0 && o->raise_step <= SL_SHED_LEVEL_MAX) ||
             !(o->lower_step > 0 && o->lower_step <= SL_SHED_LEVEL_MAX))
        w = "raise_step and lower_step must be in (0, 3]";
    else if (!(o->smoothing > 0 && o->smoothing <= 1))
        w = "smoothing must be in (0, 1]";
    if (why)
        *why = w;
    return w ? -EINVAL : 0;
}

void sl_shed_init(sl_shed *s, const sl_shedder_options *cfg)
{
    memset(s, 0, sizeof *s);
    if (cfg)
        s->cfg = *cfg;
    else
        sl_shedder_options_default(&s->cfg);
    s->util = -1;
    s->last = INT64_MIN;
    s->over_since = -1;
    s->under_since = -1;
    atomic_init(&s->level, 0);
    atomic_init(&s->util_bits, 0);
    for (int p = 0; p < SL_PRIORITY_COUNT; p++) {
        atomic_init(&s->seq[p], 0);
        atomic_init(&s->shed[p], 0);
    }
    atomic_init(&s->raises, 0);
    atomic_init(&s->lowers, 0);
}

static uint32_t milli(double level)
{
    if (!(level > 0))
        return 0;
    double m = nearbyint(level * 1000);
    return m >= SL_SHED_MILLI_MAX ? SL_SHED_MILLI_MAX : (uint32_t)m;
}

static void set_util(sl_shed *s, double u)
{
    uint64_t bits;
    memcpy(&bits, &u, sizeof bits);
    atomic_store_explicit(&s->util_bits, bits, memory_order_relaxed);
}

int sl_shed_observe(sl_shed *s, int64_t now, double u)
{
    if (s->last != INT64_MIN && now < s->last)
        now = s->last;
    s->last = now;
    if (!(u >= 0)) /* NaN or negative */
        u = 0;
    if (u > 10)
        u = 10;
    s->util = s->util < 0 ? u : s->cfg.smoothing * u + (1 - s->cfg.smoothing) * s->util;
    set_util(s, s->util);

    uint32_t lv = atomic_load_explicit(&s->level, memory_order_relaxed);
    if (s->util > s->cfg.target) {
        s->under_since = -1;
        if (s->over_since < 0)
            s->over_since = now;
        if (now - s->over_since >= s->cfg.raise_after_ms) {
            s->over_since = now;
            if (lv < SL_SHED_MILLI_MAX) {
                uint32_t nl = milli(lv / 1000.0 + s->cfg.raise_step);
                atomic_store_explicit(&s->level, nl, memory_order_relaxed);
                atomic_fetch_add_explicit(&s->raises, 1, memory_order_relaxed);
                return 1;
            }
        }
    } else if (s->util < s->cfg.low) {
        s->over_since = -1;
        if (s->under_since < 0)
            s->under_since = now;
        if (now - s->under_since >= s->cfg.lower_after_ms) {
            s->under_since = now;
            if (lv > 0) {
                uint32_t nl = milli(lv / 1000.0 - s->cfg.lower_step);
                atomic_store_explicit(&s->level, nl, memory_order_relaxed);
                atomic_fetch_add_explicit(&s->lowers, 1, memory_order_relaxed);
                return -1;
            }
        }
    } else {
        s->over_since = -1;
        s->under_since = -1;
    }
    return 0;
}

/* Position of a class in the shedding order: test 0, get 1, post 2; critical is never shed. */
static int shed_order(sl_priority p)
{
    switch (p) {
    case SL_PRIORITY_POST: return 2;
    case SL_PRIORITY_GET: return 1;
    case SL_PRIORITY_CRITICAL: return -1;
    default: return 0;
    }
}

double sl_shed_fraction_at(uint32_t level_milli, sl_priority p)
{
    int o = shed_order(p);
    if (o < 0)
        return 0;
    double f = (double)level_milli / 1000.0 - o;
    return f <= 0 ? 0 : f >= 1 ? 1 : f;
}

sl_priority sl_shed_top_class(uint32_t level_milli)
{
    if (level_milli == 0)
        return SL_PRIORITY_CRITICAL;
    if (level_milli > 2000)
        return SL_PRIORITY_POST;
    if (level_milli > 1000)
        return SL_PRIORITY_GET;
    return SL_PRIORITY_TEST;
}

bool sl_shed_admit(sl_shed *s, sl_priority p)
{
    if ((int)p < 0 || p >= SL_PRIORITY_COUNT)
        p = SL_PRIORITY_TEST;
    uint64_t k = atomic_fetch_add_explicit(&s->seq[p], 1, memory_order_relaxed);
    if (p == SL_PRIORITY_CRITICAL)
        return true;
    double f = sl_shed_fraction_at(atomic_load_explicit(&s->level, memory_order_relaxed), p);
    if (f <= 0)
        return true;
    bool shed = true;
    if (f < 1) {
        uint64_t x = (k + 1) * UINT64_C(0x9E3779B97F4A7C15);
        /* x / 2^64 < f, in 53-bit precision */
        shed = (double)(x >> 11) < f * 9007199254740992.0;
    }
    if (shed)
        atomic_fetch_add_explicit(&s->shed[p], 1, memory_order_relaxed);
    return !shed;
}

uint32_t sl_shed_level_milli(const sl_shed *s)
{
    return atomic_load_explicit(&s->level, memory_order_relaxed);
}

double sl_shed_util(const sl_shed *s)
{
    uint64_t bits = atomic_load_explicit(&s->util_bits, memory_order_relaxed);
    double u;
    memcpy(&u, &bits, sizeof u);
    return u;
}

void sl_shed_set_level(sl_shed *s, uint32_t level_milli)
{
    if (level_milli > SL_SHED_MILLI_MAX)
        level_milli = SL_SHED_MILLI_MAX;
    atomic_store_explicit(&s->level, level_milli, memory_order_relaxed);
}

void sl_shed_stats(const sl_shed *s, sl_shedder_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int p = 0; p < SL_PRIORITY_COUNT; p++) {
        uint64_t seen = atomic_load_explicit(&s->seq[p], memory_order_relaxed);
        uint64_t shed = atomic_load_explicit(&s->shed[p], memory_order_relaxed);
        out->shed[p] = shed;
        out->admitted[p] = seen > shed ? seen - shed : 0;
    }
    out->raises = atomic_load_explicit(&s->raises, memory_order_relaxed);
    out->lowers = atomic_load_explicit(&s->lowers, memory_order_relaxed);
}

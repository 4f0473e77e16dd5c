/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key state codec and merge (see keystate.h for the record layout and the merge rule).
 *
 * The decoder trusts nothing: every field an algorithm divides by, indexes with or allocates from
 * is checked against the same bounds the algorithm itself would have enforced when it created the
 * state (a positive duration, the engine's max-log-limit / max-sub-windows /
 * max-concurrency-limit), so a decoded state is one the algorithms could have produced, and a
 * malformed record costs at most one bounded allocation before it is refused.
 */
#include "core/keystate.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "core/concurrency.h"

static int64_t limit_or(int64_t v, int64_t dflt)
{
    return v > 0 ? v : dflt;
}

/* ---------------------------------------------------------------- encode */

/* Tail words of a state. */
static uint64_t tail_words(const sl_state *st)
{
    switch (st->algorithm) {
    case SL_SLIDING_WINDOW:
        return st->aux32 > 1 ? st->aux32 : 0;
    case SL_SLIDING_LOG:
        return (uint64_t)st->u.log.len;
    case SL_CONCURRENCY:
        return 2 * (uint64_t)sl_conc_held(st);
    default:
        return 0;
    }
}

size_t sl_keystate_size(const sl_state *st)
{
    if (st->algorithm >= SL_ALGORITHM_COUNT)
        return 0;
    return SL_KEYSTATE_FIXED + 8 * (size_t)tail_words(st);
}

size_t sl_keystate_encode(uint64_t hash, int64_t expire_at, const sl_state *st, uint8_t *out,
                          size_t cap)
{
    size_t need = sl_keystate_size(st);
    if (!need || cap < need)
        return 0;
    uint64_t words = tail_words(st);
    memset(out, 0, SL_KEYSTATE_FIXED);
    out[0] = SL_KEYSTATE_VERSION;
    out[1] = st->algorithm;
    out[2] = st->status;
    out[4] = (uint8_t)st->aux16;
    out[5] = (uint8_t)(st->aux16 >> 8);
    sl_le_put32(out + 8, st->aux32);
    sl_le_put32(out + 12, (uint32_t)words);
    sl_le_put64(out + 16, hash);
    sl_le_put64(out + 24, (uint64_t)expire_at);
    uint64_t w[5];
    memcpy(w, st->u.raw, sizeof w);
    uint8_t *tail = out + SL_KEYSTATE_FIXED;
    switch (st->algorithm) {
    case SL_SLIDING_WINDOW:
        if (st->aux32 > 1) {
            for (uint32_t i = 0; i < st->aux32; i++)
                sl_le_put64(tail + 8 * i, (uint64_t)st->u.sw.ring[i]);
            w[4] = 0;
        }
        break;
    case SL_SLIDING_LOG: {
        const int64_t c = st->u.log.cap;
        for (int64_t i = 0; i < st->u.log.len; i++)
            sl_le_put64(tail + 8 * i, (uint64_t)st->u.log.ring[(st->u.log.head + i) % c]);
        w[0] = (uint64_t)c;
        w[1] = (uint64_t)st->u.log.duration;
        w[2] = 0;
        w[3] = (uint64_t)st->u.log.len;
        w[4] = 0;
        break;
    }
    case SL_CONCURRENCY: {
        int64_t limit;
        uint32_t len;
        const uint64_t *pairs = sl_conc_leases(st, &limit, &len);
        for (uint64_t i = 0; i < 2 * (uint64_t)len; i++)
            sl_le_put64(tail + 8 * i, pairs[i]);
        w[0] = (uint64_t)limit;
        w[1] = w[2] = w[3] = w[4] = 0;
        break;
    }
    case SL_TOKEN_BUCKET:
    case SL_FIXED_WINDOW:
        w[4] = 0; /* not part of the state */
        break;
    default:
        break;
    }
    for (int i = 0; i < 5; i++)
        sl_le_put64(out + 32 + 8 * i, w[i]);
    return need;
}

/* ---------------------------------------------------------------- decode */

static int64_t i64(uint64_t v)
{
    return (int64_t)v;
}

int sl_keystate_decode(const uint8_t *src, size_t len, const sl_alg_config *cfg, sl_keystate *out,
                       size_t *used)
{
    memset(out, 0, sizeof *out);
    out->st.algorithm = SL_ALG_NONE;
    if (len < SL_KEYSTATE_FIXED || src[0] != SL_KEYSTATE_VERSION || src[3] || src[6] || src[7])
        return -EINVAL;
    uint8_t alg = src[1], status = src[2];
    uint16_t aux16 = (uint16_t)(src[4] | src[5] << 8);
    uint32_t aux32 = sl_le_get32(src + 8), words = sl_le_get32(src + 12);
    if (alg >= SL_ALGORITHM_COUNT || (size_t)words > (len - SL_KEYSTATE_FIXED) / 8)
        return -EINVAL;
    int64_t w[5];
    for (int i = 0; i < 5; i++)
        w[i] = i64(sl_le_get64(src + 32 + 8 * i));
    const uint8_t *tail = src + SL_KEYSTATE_FIXED;
    sl_state st;
    memset(&st, 0, sizeof st);
    st.algorithm = alg;
    /* Only the token bucket keeps a status, only the fixed window aux16, only the sliding window
     * aux32. */
    if ((status && alg != SL_TOKEN_BUCKET) || status > SL_OVER_LIMIT ||
        (aux16 && alg != SL_FIXED_WINDOW) || aux16 > 1 || (aux32 && alg != SL_SLIDING_WINDOW))
        return -EINVAL;
    st.status = status;
    st.aux16 = aux16;
    st.aux32 = aux32;
    int64_t max_log = limit_or(cfg ? cfg->max_log_limit : 0, SL_ALG_DEFAULT_MAX_LOG_LIMIT);
    int64_t max_sub = limit_or(cfg ? cfg->max_sub_windows : 0, SL_ALG_DEFAULT_MAX_SUB_WINDOWS);
    int64_t max_conc = limit_or(cfg ? cfg->max_concurrency_limit : 0, SL_CONC_DEFAULT_MAX_LIMIT);
    if (max_sub > SL_ALG_MAX_SUB_WINDOWS)
        max_sub = SL_ALG_MAX_SUB_WINDOWS;

    switch (alg) {
    case SL_TOKEN_BUCKET:
    case SL_FIXED_WINDOW:
        if (words || w[0] < 0 || w[1] <= 0 || w[4])
            return -EINVAL;
        memcpy(st.u.raw, w, sizeof w);
        break;
    case SL_LEAKY_BUCKET: {
        double rem;
        memcpy(&rem, &w[2], sizeof rem);
        if (words || w[0] < 0 || w[1] <= 0 || w[4] < 0 || !isfinite(rem))
            return -EINVAL;
        memcpy(st.u.raw, w, sizeof w);
        break;
    }
    case SL_GCRA:
        /* tat, tat_frac, limit, duration, burst: the remainder is a fraction of 1/limit ms */
        if (words || w[2] <= 0 || w[3] <= 0 || w[4] < 0 || w[1] < 0 || w[1] >= w[2])
            return -EINVAL;
        memcpy(st.u.raw, w, sizeof w);
        break;
    case SL_SLIDING_WINDOW:
        if (aux32 < 1 || aux32 > (uint64_t)max_sub || w[0] < 0 || w[1] <= 0 ||
            words != (aux32 > 1 ? aux32 : 0) || (aux32 > 1 && w[4]))
            return -EINVAL;
        memcpy(st.u.raw, w, sizeof w);
        if (aux32 > 1) {
            int64_t *ring = malloc((size_t)aux32 * sizeof *ring);
            if (!ring)
                return -ENOMEM;
            for (uint32_t i = 0; i < aux32; i++)
                ring[i] = i64(sl_le_get64(tail + 8 * i));
            st.u.sw.ring = ring;
        }
        break;
    case SL_SLIDING_LOG: {
        int64_t cap = w[0], n = w[3];
        if (cap < 1 || cap > max_log || w[1] <= 0 || w[2] || w[4] || n < 0 || n > cap ||
            (uint64_t)n != words)
            return -EINVAL;
        for (int64_t i = 1; i < n; i++)
            if (i64(sl_le_get64(tail + 8 * i)) < i64(sl_le_get64(tail + 8 * (i - 1))))
                return -EINVAL;
        int64_t *ring = malloc((size_t)cap * sizeof *ring);
        if (!ring)
            return -ENOMEM;
        for (int64_t i = 0; i < n; i++)
            ring[i] = i64(sl_le_get64(tail + 8 * i));
        st.u.log.cap = cap;
        st.u.log.duration = w[1];
        st.u.log.ring = ring;
        st.u.log.head = 0;
        st.u.log.len = n;
        break;
    }
    case SL_CONCURRENCY: {
        if (w[0] < 0 || w[1] || w[2] || w[3] || w[4] || words == 0 || words % 2 ||
            words / 2 > (uint64_t)max_conc)
            return -EINVAL;
        uint32_t n = words / 2;
        uint64_t *pairs = malloc((size_t)words * sizeof *pairs);
        if (!pairs)
            return -ENOMEM;
        for (uint32_t i = 0; i < words; i++)
            pairs[i] = sl_le_get64(tail + 8 * i);
        int rc = 0;
        for (uint32_t i = 0; i < n && !rc; i++)
            if (!pairs[2 * i])
                rc = -EINVAL;
        if (!rc)
            rc = sl_conc_adopt(&st, w[0], pairs, n);
        free(pairs);
        if (rc)
            return rc;
        break;
    }
    default:
        return -EINVAL;
    }
    out->hash = sl_le_get64(src + 16);
    out->expire_at = i64(sl_le_get64(src + 24));
    out->st = st;
    *used = SL_KEYSTATE_FIXED + 8 * (size_t)words;
    return 0;
}

/* ---------------------------------------------------------------- merge */

/* Ordering of two states of one algorithm: > 0 when a is more restrictive than b. */
static int cmp64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

/* The leaky bucket's remaining once leaked to `now` (capped at the burst, as a decision would). */
static double lb_remaining(const sl_state *st, int64_t now)
{
    double r = st->u.lb.remaining;
    int64_t L = st->u.lb.limit, D = st->u.lb.duration, B = st->u.lb.burst ? st->u.lb.burst : L;
    if (L > 0 && now > st->u.lb.updated_at)
        r += (double)(now - st->u.lb.updated_at) * (double)L / (double)D;
    return r > (double)B ? (double)B : r;
}

static int64_t newest_log(const sl_state *st)
{
    if (!st->u.log.len)
        return INT64_MIN;
    return st->u.log.ring[(st->u.log.head + st->u.log.len - 1) % st->u.log.cap];
}

static int64_t newest_lease(const sl_state *st)
{
    int64_t limit, m = INT64_MIN;
    uint32_t len;
    const uint64_t *p = sl_conc_leases(st, &limit, &len);
    for (uint32_t i = 0; i < len; i++)
        if ((int64_t)p[2 * i + 1] > m)
            m = (int64_t)p[2 * i + 1];
    return m;
}

static int64_t sw_total(const sl_state *st)
{
    int64_t t = st->u.sw.cur;
    if (st->aux32 > 1) {
        for (uint32_t i = 0; i < st->aux32; i++)
            t += st->u.sw.ring[i];
    } else {
        t += st->u.sw.prev;
    }
    return t;
}

static int restrictiveness(const sl_state *a, int64_t a_exp, const sl_state *b, int64_t b_exp,
                           int64_t now)
{
    int c = 0;
    switch (a->algorithm) {
    case SL_TOKEN_BUCKET:
        c = cmp64(a->status == SL_OVER_LIMIT, b->status == SL_OVER_LIMIT);
        if (!c)
            c = cmp64(b->u.tb.remaining, a->u.tb.remaining);
        break;
    case SL_LEAKY_BUCKET: {
        double ra = lb_remaining(a, now), rb = lb_remaining(b, now);
        c = (rb > ra) - (rb < ra);
        break;
    }
    case SL_GCRA:
        c = cmp64(a->u.gcra.tat, b->u.gcra.tat);
        if (!c) { /* same ms: compare the fractions tat_frac / limit exactly */
            __int128 x = (__int128)a->u.gcra.tat_frac * b->u.gcra.limit;
            __int128 y = (__int128)b->u.gcra.tat_frac * a->u.gcra.limit;
            c = (x > y) - (x < y);
        }
        break;
    case SL_FIXED_WINDOW:
        c = cmp64(a->u.fw.window_start, b->u.fw.window_start);
        if (!c)
            c = cmp64(a->u.fw.count, b->u.fw.count);
        break;
    case SL_SLIDING_WINDOW:
        c = cmp64(a->u.sw.window_start, b->u.sw.window_start);
        if (!c)
            c = cmp64(sw_total(a), sw_total(b));
        break;
    case SL_SLIDING_LOG:
        c = cmp64(a->u.log.len, b->u.log.len);
        if (!c)
            c = cmp64(newest_log(a), newest_log(b));
        break;
    case SL_CONCURRENCY:
        c = cmp64(sl_conc_held(a), sl_conc_held(b));
        if (!c)
            c = cmp64(newest_lease(a), newest_lease(b));
        break;
    default:
        break;
    }
    if (!c) /* the later reset */
        c = cmp64(a_exp, b_exp);
    return c;
}

bool sl_keystate_merge(sl_state *held, int64_t *held_exp, sl_state *in, int64_t in_exp,
                       int64_t now)
{
    bool take;
    if (in->algorithm == SL_ALG_NONE)
        take = false;
    else if (held->algorithm == SL_ALG_NONE || sl_alg_expired(*held_exp, now))
        take = true;
    else if (held->algorithm != in->algorithm)
        take = false;
    else
        take = restrictiveness(in, in_exp, held, *held_exp, now) > 0;
    if (take) {
        sl_alg_release(held);
        *held = *in;
        *held_exp = in_exp;
    } else {
        sl_alg_release(in);
    }
    memset(in, 0, sizeof *in);
    in->algorithm = SL_ALG_NONE;
    return take;
}

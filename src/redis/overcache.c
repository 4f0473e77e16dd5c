/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The over-limit cache (see overcache.h).
 */
#include "redis/overcache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <xxhash.h>

struct sl_overcache_entry {
    uint64_t tag;         /* the key's hash; 0 = empty */
    uint32_t clears;      /* the slot's shared count of clears when learnt */
    int64_t until;        /* answered from here while now < until */
    int64_t limit, duration, burst, hits, reset_time;
    int32_t sub_windows;
    int32_t algorithm;
    int32_t gregorian;    /* SL_DURATION_IS_GREGORIAN, which changes what duration means */
};

#define MAX_ENTRIES (1u << 20)

int sl_overcache_shared_new(uint32_t entries, uint64_t seed, sl_overcache_shared **out)
{
    *out = NULL;
    if (!entries)
        return 0;
    uint32_t n = 1;
    while (n < entries && n < MAX_ENTRIES)
        n <<= 1;
    sl_overcache_shared *sh = calloc(1, sizeof *sh + n * sizeof sh->clears[0]);
    if (!sh)
        return -ENOMEM;
    sh->mask = n - 1;
    if (!seed && getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed = (uint64_t)(uintptr_t)sh ^ 0x9e3779b97f4a7c15ull;
    sh->seed = seed;
    *out = sh;
    return 0;
}

void sl_overcache_shared_free(sl_overcache_shared *sh)
{
    free(sh);
}

int sl_overcache_init(sl_overcache *c, sl_overcache_shared *sh)
{
    memset(c, 0, sizeof *c);
    if (!sh)
        return 0;
    if (!(c->e = calloc((size_t)sh->mask + 1, sizeof *c->e)))
        return -ENOMEM;
    c->sh = sh;
    return 0;
}

void sl_overcache_free(sl_overcache *c)
{
    free(c->e);
    memset(c, 0, sizeof *c);
}

static uint32_t clears_of(const sl_overcache *c, uint64_t t)
{
    return atomic_load_explicit(&c->sh->clears[t & c->sh->mask], memory_order_relaxed);
}

static uint64_t tag_of(const sl_overcache *c, const sl_request *q)
{
    /* the name's hash seeds the key's: "ab"+"c" and "a"+"bc" are apart */
    uint64_t h = XXH3_64bits_withSeed(q->name, q->name_len, c->sh->seed);
    h = XXH3_64bits_withSeed(q->unique_key, q->unique_key_len, h ^ q->name_len);
    return h ? h : 1;
}

/* What the cache may answer or learn from: counted hits on an algorithm whose rejection lasts
 * (not a lease), decided at the server's time (a client's created_at moves the window), without
 * a wait the caller accepts (GCRA's max_delay: a longer one may pass). */
static bool cacheable(const sl_request *q)
{
    return q->algorithm != SL_CONCURRENCY && q->created_at == 0 && q->max_delay_ms <= 0 &&
           !(q->behavior & SL_RESET_REMAINING);
}

static bool same_limit(const sl_overcache_entry *e, const sl_request *q)
{
    return e->limit == q->limit && e->duration == q->duration && e->algorithm == q->algorithm &&
           e->burst == q->burst && e->sub_windows == q->sub_windows &&
           e->gregorian == (q->behavior & SL_DURATION_IS_GREGORIAN);
}

bool sl_overcache_answer(sl_overcache *c, const sl_request *q, int64_t now, sl_response *resp)
{
    if (!c->e || q->hits <= 0 || !cacheable(q))
        return false;
    uint64_t t = tag_of(c, q);
    sl_overcache_entry *e = &c->e[t & c->sh->mask];
    if (e->tag != t || now >= e->until || q->hits < e->hits || !same_limit(e, q) ||
        e->clears != clears_of(c, t))
        return false;
    memset(resp, 0, sizeof *resp);
    resp->status = SL_OVER_LIMIT;
    resp->limit = e->limit;
    resp->remaining = 0;
    resp->reset_time = e->reset_time;
    resp->retry_after = e->until - now;
    return true;
}

void sl_overcache_learn(sl_overcache *c, const sl_request *q, int64_t now, const sl_response *r)
{
    if (!c->e || r->error)
        return;
    uint64_t t = tag_of(c, q);
    sl_overcache_entry *e = &c->e[t & c->sh->mask];
    if (q->hits < 0 || (q->behavior & SL_RESET_REMAINING)) /* room made: every worker forgets */
        atomic_fetch_add_explicit(&c->sh->clears[t & c->sh->mask], 1, memory_order_relaxed);
    bool keep = cacheable(q) && q->hits > 0 && r->status == SL_OVER_LIMIT && r->remaining == 0 &&
                r->retry_after > 0 && !(q->behavior & SL_SHADOW);
    if (!keep) {
        if (e->tag == t) /* an admission, a look, a give-back, a reset: it may have room now */
            e->tag = 0;
        return;
    }
    *e = (sl_overcache_entry){.tag = t, .clears = clears_of(c, t),
                              .until = now + r->retry_after, .limit = q->limit,
                              .duration = q->duration, .burst = q->burst,
                              .sub_windows = q->sub_windows, .hits = q->hits,
                              .reset_time = r->reset_time, .algorithm = q->algorithm,
                              .gregorian = q->behavior & SL_DURATION_IS_GREGORIAN};
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GLOBAL state (see global.h): a sharded chained hash table of entries keyed by the picker's hash
 * of name + "_" + unique_key, and two lists of entries waiting to be sent (hits for owners, keys
 * to broadcast). The shard (top bits) and bucket (low bits) come from the table's own hash of that
 * id, XXH3 of the 8 id bytes under a random per-table seed (a bijection: distinct ids stay
 * distinct): with the id's own bits, a client could brute-force keys whose ids share their low
 * and top bits, all in one chain (with the public seed, 2^16 tries a key for 1000 keys in one
 * bucket of a 1024-bucket shard), and every lookup of those keys would walk the whole chain. An entry on a list is never freed (its flag says so); only the taker clears it.
 * Lock order: a shard's mutex, then a list's mutex - never the other way round.
 */
#include "cluster/global.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/grow.h"
#include "base/strmap.h"
#include "core/gregorian.h"

#define NSHARDS 16
#define NAME_UNKNOWN UINT32_MAX

typedef struct gent {
    struct gent *next;
    uint64_t hash;
    char *key;               /* name + "_" + unique_key, NUL-terminated */
    uint32_t key_len;
    uint32_t name_len;       /* NAME_UNKNOWN when only a broadcast has been seen */
    /* the latest request's parameters */
    int64_t limit, duration, burst;
    int32_t algorithm, behavior, sub_windows;
    /* local copy: the owner's last state, minus what was admitted here since */
    bool has_base;
    bool local_over;         /* a hit was refused since the base arrived */
    int32_t base_status;
    int64_t base_remaining, base_limit, base_reset;
    int64_t used;
    /* hits waiting for the owner */
    int64_t unsent, unsent_admitted, first_at;
    int32_t extra_behavior;
    bool hits_waiting, touched_waiting;
    int64_t last_used;
} gent;

typedef struct shard {
    pthread_mutex_t mu;
    gent **buckets;
    size_t nb, count, sweep;
    size_t longest;          /* most entries one lookup walked */
    char pad[64];
} shard;

typedef struct wlist {
    pthread_mutex_t mu;
    gent **v;
    size_t n, cap;
} wlist;

struct sl_global {
    shard shards[NSHARDS];
    wlist hits, touched;
    size_t max_keys, batch_limit;
    uint64_t seed;           /* of the table hash */
    _Atomic size_t count;
    _Atomic uint64_t local_answers, updates, full;
    _Atomic unsigned sweep_shard;
};

int sl_global_new(const sl_global_config *cfg, sl_global **out)
{
    sl_global *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->max_keys = cfg && cfg->max_keys ? cfg->max_keys : 100000;
    g->batch_limit = cfg && cfg->batch_limit ? cfg->batch_limit : 1000;
    g->seed = cfg && cfg->hash_seed ? cfg->hash_seed : sl_strmap_seed(g);
    for (int i = 0; i < NSHARDS; i++) {
        pthread_mutex_init(&g->shards[i].mu, NULL);
        g->shards[i].nb = 64;
        g->shards[i].buckets = calloc(64, sizeof(gent *));
        if (!g->shards[i].buckets) {
            sl_global_free(g);
            return -ENOMEM;
        }
    }
    pthread_mutex_init(&g->hits.mu, NULL);
    pthread_mutex_init(&g->touched.mu, NULL);
    *out = g;
    return 0;
}

void sl_global_free(sl_global *g)
{
    if (!g)
        return;
    for (int i = 0; i < NSHARDS; i++) {
        shard *s = &g->shards[i];
        for (size_t b = 0; s->buckets && b < s->nb; b++) {
            gent *e = s->buckets[b];
            while (e) {
                gent *nx = e->next;
                free(e->key);
                free(e);
                e = nx;
            }
        }
        free(s->buckets);
        pthread_mutex_destroy(&s->mu);
    }
    free(g->hits.v);
    free(g->touched.v);
    pthread_mutex_destroy(&g->hits.mu);
    pthread_mutex_destroy(&g->touched.mu);
    free(g);
}

/* The table's hash of a key id (see the top). */
static inline uint64_t table_hash(const sl_global *g, uint64_t id)
{
    return XXH3_64bits_withSeed(&id, sizeof id, g->seed);
}

static inline void walked(shard *s, size_t n)
{
    if (n > s->longest)
        s->longest = n;
}

static shard *shard_of(sl_global *g, uint64_t h)
{
    return &g->shards[h >> 60];
}

static bool key_eq(const gent *e, const sl_request *r)
{
    size_t len = r->name_len + 1 + r->unique_key_len;
    return e->key_len == len && memcmp(e->key, r->name, r->name_len) == 0 &&
           e->key[r->name_len] == '_' &&
           memcmp(e->key + r->name_len + 1, r->unique_key, r->unique_key_len) == 0;
}

static gent *find_req(shard *s, uint64_t h, const sl_request *r)
{
    size_t n = 0;
    for (gent *e = s->buckets[h & (s->nb - 1)]; e; e = e->next, n++)
        if (e->hash == h && key_eq(e, r)) {
            walked(s, n + 1);
            return e;
        }
    walked(s, n);
    return NULL;
}

static gent *find_joined(shard *s, uint64_t h, const char *k, size_t len)
{
    size_t n = 0;
    for (gent *e = s->buckets[h & (s->nb - 1)]; e; e = e->next, n++)
        if (e->hash == h && e->key_len == len && memcmp(e->key, k, len) == 0) {
            walked(s, n + 1);
            return e;
        }
    walked(s, n);
    return NULL;
}

static void grow(shard *s)
{
    size_t nb = s->nb * 2;
    gent **nbk = calloc(nb, sizeof *nbk);
    if (!nbk)
        return; /* longer chains, still correct */
    for (size_t b = 0; b < s->nb; b++) {
        gent *e = s->buckets[b];
        while (e) {
            gent *nx = e->next;
            size_t i = e->hash & (nb - 1);
            e->next = nbk[i];
            nbk[i] = e;
            e = nx;
        }
    }
    free(s->buckets);
    s->buckets = nbk;
    s->nb = nb;
}

/* A new entry for a joined key (under the shard lock). NULL: full or out of memory. */
static gent *insert(sl_global *g, shard *s, uint64_t h, const char *k, size_t len)
{
    if (atomic_fetch_add(&g->count, 1) >= g->max_keys) {
        atomic_fetch_sub(&g->count, 1);
        return NULL;
    }
    gent *e = calloc(1, sizeof *e);
    char *kc = malloc(len + 1);
    if (!e || !kc) {
        free(e);
        free(kc);
        atomic_fetch_sub(&g->count, 1);
        return NULL;
    }
    memcpy(kc, k, len);
    kc[len] = '\0';
    e->hash = h;
    e->key = kc;
    e->key_len = (uint32_t)len;
    e->name_len = NAME_UNKNOWN;
    size_t i = h & (s->nb - 1);
    e->next = s->buckets[i];
    s->buckets[i] = e;
    if (++s->count > s->nb)
        grow(s);
    return e;
}

static gent *get_req(sl_global *g, shard *s, uint64_t h, const sl_request *r)
{
    gent *e = find_req(s, h, r);
    if (e)
        return e;
    size_t len = r->name_len + 1 + r->unique_key_len;
    char stackbuf[512];
    char *k = len <= sizeof stackbuf ? stackbuf : malloc(len);
    if (!k)
        return NULL;
    memcpy(k, r->name, r->name_len);
    k[r->name_len] = '_';
    memcpy(k + r->name_len + 1, r->unique_key, r->unique_key_len);
    e = insert(g, s, h, k, len);
    if (k != stackbuf)
        free(k);
    return e;
}

static void set_params(gent *e, const sl_request *r, int64_t now)
{
    e->name_len = (uint32_t)r->name_len;
    e->limit = r->limit;
    e->duration = r->duration;
    e->burst = r->burst;
    e->algorithm = r->algorithm;
    e->behavior = r->behavior;
    e->sub_windows = r->sub_windows;
    e->last_used = now;
}

/* Append e to a waiting list (under e's shard lock). Returns signals, or -ENOMEM. */
static int wait_on(sl_global *g, wlist *l, gent *e)
{
    pthread_mutex_lock(&l->mu);
    if (sl_grow(&l->v, &l->cap, l->n, 1, 64, 0)) {
        pthread_mutex_unlock(&l->mu);
        return -ENOMEM;
    }
    l->v[l->n++] = e;
    int sig = (l->n == 1 ? SL_GLOBAL_ARM : 0) | (l->n >= g->batch_limit ? SL_GLOBAL_FULL : 0);
    pthread_mutex_unlock(&l->mu);
    return sig;
}

/* Queue e on a waiting list unless it is there already (*waiting, e's flag for that list; under
 * e's shard lock). 0, with *signals set when it was queued now, or -ENOMEM. */
static int wait_once(sl_global *g, wlist *l, gent *e, bool *waiting, int *signals)
{
    if (*waiting)
        return 0;
    int sig = wait_on(g, l, e);
    if (sig < 0)
        return sig;
    *waiting = true;
    *signals = sig;
    return 0;
}

/* r's entry, its shard locked (*sp) and its parameters set from r; NULL, unlocked and counted in
 * `full`, when the table has no room for it. */
static gent *lock_entry(sl_global *g, uint64_t h, const sl_request *r, int64_t now, shard **sp)
{
    shard *s = shard_of(g, h);
    pthread_mutex_lock(&s->mu);
    gent *e = get_req(g, s, h, r);
    if (!e) {
        pthread_mutex_unlock(&s->mu);
        atomic_fetch_add_explicit(&g->full, 1, memory_order_relaxed);
        return NULL;
    }
    set_params(e, r, now);
    *sp = s;
    return e;
}

static int64_t fresh_reset(const gent *e, int64_t now)
{
    if (e->behavior & SL_DURATION_IS_GREGORIAN) {
        int64_t end;
        if (!sl_greg_expiration(now, e->duration, &end))
            return end;
    }
    return e->duration > INT64_MAX - now ? INT64_MAX : now + e->duration;
}

/* Bring the base up to date for a request at now: a whole new limit once the old one reset, and
 * a changed limit applied as Gubernator's buckets do (remaining moves by the difference). */
static void refresh_base(gent *e, const sl_request *r, int64_t now)
{
    if (!e->has_base || now >= e->base_reset) {
        e->has_base = true;
        e->base_status = SL_UNDER_LIMIT;
        e->base_limit = r->limit;
        e->base_remaining = r->limit;
        e->base_reset = fresh_reset(e, now);
        e->used = e->unsent_admitted;
        e->local_over = false;
    }
    if (r->limit != e->base_limit) {
        int64_t rem = e->base_remaining + (r->limit - e->base_limit);
        e->base_remaining = rem < 0 ? 0 : rem > r->limit ? r->limit : rem;
        e->base_limit = r->limit;
    }
    if (r->behavior & SL_RESET_REMAINING) {
        e->base_remaining = r->limit;
        e->base_status = SL_UNDER_LIMIT;
        e->used = 0;
        e->local_over = false;
    }
}

int sl_global_hit(sl_global *g, uint64_t key_hash, const sl_request *r, int64_t now,
                  sl_response *resp, int *signals)
{
    uint64_t h = table_hash(g, key_hash);
    *signals = 0;
    shard *s;
    gent *e = lock_entry(g, h, r, now, &s);
    if (!e)
        return -ENOSPC;
    refresh_base(e, r, now);

    int64_t rem = e->base_remaining - e->used;
    if (rem < 0)
        rem = 0;
    if (rem > r->limit)
        rem = r->limit;
    memset(resp, 0, sizeof *resp);
    resp->limit = r->limit;
    resp->reset_time = e->base_reset;
    if (r->hits > 0 && r->hits > rem) {
        resp->status = SL_OVER_LIMIT;
        e->local_over = true;
        if (r->behavior & SL_DRAIN_OVER_LIMIT) {
            e->used = e->base_remaining;
            rem = 0;
        }
        resp->remaining = rem;
        resp->retry_after = e->base_reset > now ? e->base_reset - now : 0;
    } else {
        /* a negative hit gives back, as the buckets do; never above the limit */
        int64_t after = rem - r->hits;
        if (after > r->limit)
            after = r->limit;
        e->used += rem - after;
        if (r->hits > 0)
            e->unsent_admitted += r->hits;
        resp->remaining = after;
        resp->status = (after == 0 && r->hits == 0 && (e->local_over ||
                        e->base_status == SL_OVER_LIMIT)) ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
    }

    int rc = 0;
    if (r->hits != 0) {
        if (e->unsent == 0 && !e->hits_waiting)
            e->first_at = r->created_at ? r->created_at : now;
        e->unsent += r->hits;
        e->extra_behavior |= r->behavior & SL_RESET_REMAINING;
        rc = wait_once(g, &g->hits, e, &e->hits_waiting, signals);
    }
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add_explicit(&g->local_answers, 1, memory_order_relaxed);
    return rc;
}

int sl_global_touch(sl_global *g, uint64_t key_hash, const sl_request *r, int64_t now,
                    int *signals)
{
    uint64_t h = table_hash(g, key_hash);
    *signals = 0;
    shard *s;
    gent *e = lock_entry(g, h, r, now, &s);
    if (!e)
        return -ENOSPC;
    int rc = wait_once(g, &g->touched, e, &e->touched_waiting, signals);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void sl_global_update(sl_global *g, uint64_t key_hash, const char *key, size_t key_len,
                      const sl_response *st, int32_t algorithm, int64_t duration, int64_t now)
{
    if (st->error)
        return;
    uint64_t h = table_hash(g, key_hash);
    shard *s = shard_of(g, h);
    pthread_mutex_lock(&s->mu);
    gent *e = find_joined(s, h, key, key_len);
    if (!e) {
        e = insert(g, s, h, key, key_len);
        if (!e) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        e->algorithm = algorithm;
        e->duration = duration;
        e->limit = st->limit;
        e->last_used = now;
    }
    e->has_base = true;
    e->base_status = st->status;
    e->base_limit = st->limit;
    e->base_remaining = st->remaining < 0 ? 0 : st->remaining;
    /* a reset_time in the past would make the next hit start a fresh limit: keep it */
    e->base_reset = st->reset_time;
    /* what was admitted here and not sent yet is not in the owner's state */
    e->used = e->unsent_admitted;
    e->local_over = false;
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add_explicit(&g->updates, 1, memory_order_relaxed);
}

static int take(sl_global *g, wlist *l, sl_batch *b, size_t max, bool hits)
{
    pthread_mutex_lock(&l->mu);
    size_t k = l->n < max ? l->n : max;
    pthread_mutex_unlock(&l->mu);
    if (k == 0)
        return 0;
    if (sl_batch_alloc_items(b, k))
        return -ENOMEM;
    gent **tmp = malloc(k * sizeof *tmp);
    if (!tmp)
        return -ENOMEM;
    pthread_mutex_lock(&l->mu);
    if (k > l->n)
        k = l->n;
    memcpy(tmp, l->v, k * sizeof *tmp);
    l->n -= k;
    memmove(l->v, l->v + k, l->n * sizeof *l->v);
    pthread_mutex_unlock(&l->mu);

    size_t out = 0;
    for (size_t i = 0; i < k; i++) {
        gent *e = tmp[i];
        shard *s = shard_of(g, e->hash);
        pthread_mutex_lock(&s->mu);
        sl_request *q = &b->reqs[out];
        char *name = sl_batch_strndup(b, e->key, e->name_len);
        char *ukey = sl_batch_strndup(b, e->key + e->name_len + 1, e->key_len - e->name_len - 1);
        if (name && ukey) {
            q->name = name;
            q->name_len = e->name_len;
            q->unique_key = ukey;
            q->unique_key_len = e->key_len - e->name_len - 1;
            q->limit = e->limit;
            q->duration = e->duration;
            q->burst = e->burst;
            q->algorithm = e->algorithm;
            q->sub_windows = e->sub_windows;
            q->behavior = e->behavior | SL_GLOBAL;
            if (hits) {
                q->hits = e->unsent;
                q->created_at = e->first_at;
                q->behavior |= e->extra_behavior;
            } else {
                q->behavior &= ~SL_RESET_REMAINING;
            }
            out++;
        }
        /* out of arena memory: the hits are dropped (bounded loss, logged by the caller's
         * count), the entry must not stay flagged without being listed */
        if (hits) {
            e->unsent = 0;
            e->unsent_admitted = 0;
            e->extra_behavior = 0;
            e->hits_waiting = false;
        } else {
            e->touched_waiting = false;
        }
        pthread_mutex_unlock(&s->mu);
    }
    free(tmp);
    b->n = out;
    return (int)out;
}

int sl_global_take_hits(sl_global *g, sl_batch *b, size_t max)
{
    return take(g, &g->hits, b, max, true);
}

int sl_global_take_touched(sl_global *g, sl_batch *b, size_t max)
{
    return take(g, &g->touched, b, max, false);
}

static size_t wlen(wlist *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

size_t sl_global_hits_waiting(sl_global *g)
{
    return wlen(&g->hits);
}

size_t sl_global_touched_waiting(sl_global *g)
{
    return wlen(&g->touched);
}

static bool lapsed(const gent *e, int64_t now)
{
    if (e->hits_waiting || e->touched_waiting)
        return false;
    int64_t d = e->duration > 0 && !(e->behavior & SL_DURATION_IS_GREGORIAN) ? e->duration : 0;
    int64_t idle_until = e->last_used > INT64_MAX - d ? INT64_MAX : e->last_used + d;
    int64_t until = e->base_reset > idle_until ? e->base_reset : idle_until;
    return now > until;
}

size_t sl_global_expire(sl_global *g, int64_t now, size_t max_work)
{
    size_t removed = 0, work = 0;
    for (int round = 0; round < NSHARDS && work < max_work; round++) {
        shard *s = &g->shards[atomic_fetch_add(&g->sweep_shard, 1) % NSHARDS];
        pthread_mutex_lock(&s->mu);
        size_t nb = s->nb;
        for (size_t step = 0; step < nb && work < max_work; step++) {
            size_t b = s->sweep++ & (s->nb - 1);
            gent **pp = &s->buckets[b];
            while (*pp) {
                gent *e = *pp;
                work++;
                if (lapsed(e, now)) {
                    *pp = e->next;
                    free(e->key);
                    free(e);
                    s->count--;
                    atomic_fetch_sub(&g->count, 1);
                    removed++;
                } else {
                    pp = &e->next;
                }
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
    return removed;
}

void sl_global_stats_get(sl_global *g, sl_global_stats *out)
{
    memset(out, 0, sizeof *out);
    out->keys = atomic_load(&g->count);
    out->hits_waiting = sl_global_hits_waiting(g);
    out->touched_waiting = sl_global_touched_waiting(g);
    out->local_answers = atomic_load(&g->local_answers);
    out->updates = atomic_load(&g->updates);
    out->full = atomic_load(&g->full);
    for (int i = 0; i < NSHARDS; i++) {
        pthread_mutex_lock(&g->shards[i].mu);
        if (g->shards[i].longest > out->longest_chain)
            out->longest_chain = g->shards[i].longest;
        pthread_mutex_unlock(&g->shards[i].mu);
    }
}

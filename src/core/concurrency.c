/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CONCURRENCY (see concurrency.h): a key's leases in an unordered array, with the earliest and the
 * latest expiry kept exact.
 *
 * Why an unordered array: a release names any lease, so no order makes removal cheaper than a
 * scan, and a scan of `len` 16-byte entries is a few microseconds even at the default cap of 10000.
 * Acquires cost O(1) while nothing has expired: the earliest expiry says when a pruning scan is
 * due, and that scan, like a release's, recomputes both bounds exactly, so reset_time ("when the
 * next slot frees") and the key's expiry (when its last lease does) are never stale.
 *
 * A renewal (hits 0 with the lease's id) sets that lease's expiry to now + duration; an unknown or
 * expired lease is the same error as its release.
 *
 * Expired leases are pruned before every decision and the pruning is kept even when the decision
 * then fails (a release of an unknown lease, an allocation failure): it changes no decision, since
 * an expired lease counts for nothing, and undoing it would cost a copy of the array.
 */
#include "core/concurrency.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/hex.h"
#include "core/satmath.h"
#include "sluice/clock.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

const char sl_conc_err_not_found[] = "lease not found: it was released already or it expired";
const char sl_conc_err_no_lease[] =
    "a CONCURRENCY release (hits -1) needs the lease id (metadata 'lease_id')";

typedef struct lease {
    uint64_t id;
    int64_t expires; /* the lease is gone at t >= expires */
} lease;

/* The algorithm's view of sl_state.u (40 bytes). */
typedef struct conc_state {
    int64_t limit;   /* the limit of the last decision (informative) */
    int64_t min_exp; /* earliest expiry among the held leases (exact; meaningless when len 0) */
    int64_t max_exp; /* latest expiry */
    lease *leases;
    uint32_t len, cap;
} conc_state;

_Static_assert(sizeof(conc_state) <= sizeof(((sl_state *)0)->u),
               "the CONCURRENCY state must fit sl_state's union");

static void load(const sl_state *st, conc_state *c)
{
    memcpy(c, &st->u, sizeof *c);
}

static void store(sl_state *st, const conc_state *c)
{
    memcpy(&st->u, c, sizeof *c);
}

/* ---------------------------------------------------------------- lease ids */

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void sl_conc_ids_init(sl_conc_ids *g, uint64_t seed)
{
    uint64_t k[2];
    if (seed) {
        k[0] = splitmix(seed);
        k[1] = splitmix(k[0]);
    } else if (getrandom(k, sizeof k, GRND_NONBLOCK) != (ssize_t)sizeof k) {
        /* no entropy yet (early boot): still differ per generator and per run */
        k[0] = splitmix((uint64_t)sl_mono_ns() ^ (uint64_t)(uintptr_t)g);
        k[1] = splitmix(k[0] ^ (uint64_t)sl_wall_ms());
    }
    g->k0 = k[0];
    g->k1 = k[1];
    atomic_init(&g->counter, 0);
}

static uint32_t feistel_round(uint32_t half, uint64_t key, unsigned round)
{
    uint64_t v = ((uint64_t)half << 8) | round;
    return (uint32_t)XXH3_64bits_withSeed(&v, sizeof v, key);
}

/* A keyed permutation of 64-bit words: distinct inputs, distinct outputs. */
static uint64_t permute(const sl_conc_ids *g, uint64_t x)
{
    uint32_t l = (uint32_t)(x >> 32), r = (uint32_t)x;
    for (unsigned round = 0; round < 4; round++) {
        uint32_t f = feistel_round(r, round & 1 ? g->k1 : g->k0, round);
        uint32_t nl = r;
        r = l ^ f;
        l = nl;
    }
    return ((uint64_t)l << 32) | r;
}

uint64_t sl_conc_ids_next(sl_conc_ids *g)
{
    for (;;) {
        uint64_t c = atomic_fetch_add_explicit(&g->counter, 1, memory_order_relaxed) + 1;
        uint64_t id = permute(g, c);
        if (id) /* one counter value in 2^64 maps to 0, which means "no lease" */
            return id;
    }
}

static bool held_id(const lease *ls, uint32_t len, uint64_t id)
{
    for (uint32_t i = 0; i < len; i++)
        if (ls[i].id == id)
            return true;
    return false;
}

static uint64_t new_id(sl_conc_ids *ids, const lease *ls, uint32_t len)
{
    if (ids)
        return sl_conc_ids_next(ids);
    for (;;) {
        uint64_t id = 0;
        if (getrandom(&id, sizeof id, GRND_NONBLOCK) != (ssize_t)sizeof id)
            id = splitmix((uint64_t)sl_mono_ns() ^ (uint64_t)(uintptr_t)ls ^ len);
        if (id && !held_id(ls, len, id))
            return id;
    }
}

int sl_conc_format_id(uint64_t id, char out[SL_CONC_ID_HEX + 1])
{
    return (int)sl_hex_format(id, SL_CONC_ID_HEX, false, out);
}

int sl_conc_parse_id(const char *s, size_t n, uint64_t *id)
{
    uint64_t v;
    if (!s || n != SL_CONC_ID_HEX || sl_hex_parse(s, n, &v) || v == 0)
        return -EINVAL;
    *id = v;
    return 0;
}

/* ---------------------------------------------------------------- the algorithm */

const char *sl_conc_check(const sl_request *req, uint64_t lease_id, int64_t max_limit)
{
    if (max_limit <= 0)
        max_limit = SL_CONC_DEFAULT_MAX_LIMIT;
    if (req->hits > 1 || req->hits < -1)
        return "CONCURRENCY takes hits 1 (acquire a lease), -1 (release it) or 0 (peek)";
    if (req->limit > max_limit)
        return "field 'limit' exceeds max-concurrency-limit for CONCURRENCY (memory is 16 bytes "
               "per lease)";
    if (req->behavior & SL_GLOBAL)
        return "behavior GLOBAL is not supported by CONCURRENCY (a lease lives on the key's owner)";
    if (req->hits == -1 && lease_id == 0)
        return sl_conc_err_no_lease;
    return NULL;
}

/* Recompute both expiry bounds over the held leases. */
static void bounds(conc_state *c)
{
    c->min_exp = INT64_MAX;
    c->max_exp = INT64_MIN;
    for (uint32_t i = 0; i < c->len; i++) {
        if (c->leases[i].expires < c->min_exp)
            c->min_exp = c->leases[i].expires;
        if (c->leases[i].expires > c->max_exp)
            c->max_exp = c->leases[i].expires;
    }
}

static void prune(conc_state *c, int64_t t)
{
    uint32_t i = 0;
    while (i < c->len) {
        if (c->leases[i].expires <= t)
            c->leases[i] = c->leases[--c->len]; /* order does not matter */
        else
            i++;
    }
    bounds(c);
}

/* Remove lease `id`; false when it is not held. */
static bool remove_lease(conc_state *c, uint64_t id)
{
    for (uint32_t i = 0; i < c->len; i++) {
        if (c->leases[i].id == id) {
            c->leases[i] = c->leases[--c->len];
            bounds(c);
            return true;
        }
    }
    return false;
}

/* Room for one more lease: grow x2, from 4, up to `limit`. 0 or -ENOMEM. */
static int reserve(conc_state *c, int64_t limit)
{
    if (c->len < c->cap)
        return 0;
    uint64_t cap = c->cap ? (uint64_t)c->cap * 2 : 4;
    if (cap > (uint64_t)limit)
        cap = (uint64_t)limit;
    if (cap <= c->len)
        cap = (uint64_t)c->len + 1;
    if (cap > UINT32_MAX)
        return -ENOMEM;
    lease *ls = realloc(c->leases, (size_t)cap * sizeof *ls);
    if (!ls)
        return -ENOMEM;
    c->leases = ls;
    c->cap = (uint32_t)cap;
    return 0;
}

static void clear(sl_state *st)
{
    memset(st, 0, sizeof *st);
    st->algorithm = SL_ALG_NONE;
}

/* Keep the state (or drop it when no lease is left). `was_conc`: st held this algorithm. */
static void commit(sl_state *st, int64_t *expire_at, conc_state *c, bool was_conc)
{
    if (c->len == 0) {
        free(c->leases);
        if (!was_conc)
            sl_alg_release(st); /* another algorithm's state (and its side buffer) */
        clear(st);
        return;
    }
    if (!was_conc)
        sl_alg_release(st);
    st->algorithm = SL_CONCURRENCY;
    st->status = 0;
    st->aux16 = 0;
    st->aux32 = 0;
    store(st, c);
    /* the key exists while its last lease does: gone at max_exp, i.e. expired after max_exp - 1 */
    *expire_at = c->max_exp == INT64_MAX ? INT64_MAX : c->max_exp - 1;
}

void sl_conc_decide(sl_state *st, int64_t *expire_at, const sl_request *req, uint64_t lease_in,
                    int64_t t, sl_conc_ids *ids, sl_response *resp, uint64_t *lease_out)
{
    const int64_t L = req->limit, D = req->duration, n = req->hits;
    sl_response zero = {0};
    *resp = zero;
    if (lease_out)
        *lease_out = 0;

    const bool was_conc = st->algorithm == SL_CONCURRENCY;
    conc_state c = {0};
    if (was_conc) {
        load(st, &c);
        if (req->behavior & SL_RESET_REMAINING)
            c.len = 0;
        if (c.len > 0 && t >= c.min_exp)
            prune(&c, t);
    }
    c.limit = L;

    bool over = false;
    if (n > 0) {
        if ((int64_t)c.len < L) {
            if (reserve(&c, L)) {
                commit(st, expire_at, &c, was_conc);
                resp->error = sl_alg_err_nomem;
                return;
            }
            lease *l = &c.leases[c.len];
            l->id = new_id(ids, c.leases, c.len);
            l->expires = sl_sat_add(t, D);
            if (c.len == 0 || l->expires < c.min_exp)
                c.min_exp = l->expires;
            if (c.len == 0 || l->expires > c.max_exp)
                c.max_exp = l->expires;
            c.len++;
            if (lease_out)
                *lease_out = l->id;
        } else {
            over = true;
        }
    } else if (n == 0 && lease_in != 0) {
        /* renew: the lease lives `duration` from now (a call that runs longer keeps its slot) */
        uint32_t i = 0;
        while (i < c.len && c.leases[i].id != lease_in)
            i++;
        if (i == c.len) {
            commit(st, expire_at, &c, was_conc);
            resp->error = sl_conc_err_not_found;
            return;
        }
        c.leases[i].expires = sl_sat_add(t, D);
        bounds(&c);
    } else if (n < 0) {
        if (!remove_lease(&c, lease_in)) {
            commit(st, expire_at, &c, was_conc);
            resp->error = sl_conc_err_not_found;
            return;
        }
    }

    resp->status = over ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
    resp->limit = L;
    resp->remaining = L - (int64_t)c.len > 0 ? L - (int64_t)c.len : 0;
    resp->reset_time = c.len > 0 ? c.min_exp : t;
    if (over)
        /* with leases held, the earliest frees a slot; with none (limit 0) nothing ever will, and
         * a lease's duration is the natural pace to ask again */
        resp->retry_after = c.len > 0 ? sl_max64(1, sl_sat_sub(c.min_exp, t)) : sl_max64(1, D);
    commit(st, expire_at, &c, was_conc);
}

uint64_t sl_conc_side_bytes(const sl_state *st)
{
    if (st->algorithm != SL_CONCURRENCY)
        return 0;
    conc_state c;
    load(st, &c);
    return c.leases ? (uint64_t)c.cap * sizeof(lease) : 0;
}

void sl_conc_release(sl_state *st)
{
    if (st->algorithm != SL_CONCURRENCY)
        return;
    conc_state c;
    load(st, &c);
    free(c.leases);
    c.leases = NULL;
    c.len = c.cap = 0;
    store(st, &c);
}

int64_t sl_conc_held(const sl_state *st)
{
    if (st->algorithm != SL_CONCURRENCY)
        return 0;
    conc_state c;
    load(st, &c);
    return c.len;
}

/* Leases alive at `now` decide: none is a fresh key, `limit` of them refuse the next acquire. */
sl_alg_info sl_conc_info(const sl_state *st, int64_t now)
{
    conc_state c;
    load(st, &c);
    int64_t live = 0;
    for (uint32_t i = 0; i < c.len; i++)
        if (c.leases[i].expires > now)
            live++;
    if (live == 0)
        return SL_INFO_FREE;
    return live >= c.limit ? SL_INFO_LIMITED : SL_INFO_HOLDS;
}

/* ---------------------------------------------------------------- state transfer (keystate.c) */

const uint64_t *sl_conc_leases(const sl_state *st, int64_t *limit, uint32_t *len)
{
    conc_state c;
    load(st, &c);
    *limit = c.limit;
    *len = c.len;
    _Static_assert(sizeof(lease) == 2 * sizeof(uint64_t), "a lease is (id, expires)");
    return (const uint64_t *)c.leases;
}

int sl_conc_adopt(sl_state *st, int64_t limit, const uint64_t *pairs, uint32_t len)
{
    if (len == 0)
        return -EINVAL;
    lease *ls = malloc((size_t)len * sizeof *ls);
    if (!ls)
        return -ENOMEM;
    conc_state c = {.limit = limit, .leases = ls, .len = len, .cap = len};
    for (uint32_t i = 0; i < len; i++) {
        ls[i].id = pairs[2 * i];
        ls[i].expires = (int64_t)pairs[2 * i + 1];
        if (i == 0 || ls[i].expires < c.min_exp)
            c.min_exp = ls[i].expires;
        if (i == 0 || ls[i].expires > c.max_exp)
            c.max_exp = ls[i].expires;
    }
    memset(st, 0, sizeof *st);
    st->algorithm = SL_CONCURRENCY;
    store(st, &c);
    return 0;
}

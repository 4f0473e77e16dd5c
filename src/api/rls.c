/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ShouldRateLimit (see rls.h): RateLimitRequest -> batch -> RateLimitResponse.
 *
 * Wire layout read (Envoy's field numbers):
 *   RateLimitRequest     1 domain (string)  2 descriptors (RateLimitDescriptor, repeated)
 *                        3 hits_addend (uint32)
 *   RateLimitDescriptor  1 entries (Entry, repeated)  2 limit (RateLimitOverride)
 *                        3 hits_addend (google.protobuf.UInt64Value: 1 value)
 *   Entry                1 key  2 value
 *   RateLimitOverride    1 requests_per_unit  2 unit
 * and written:
 *   RateLimitResponse    1 overall_code  2 statuses (repeated)  3 response_headers_to_add
 *   DescriptorStatus     1 code  2 current_limit  3 limit_remaining  4 duration_until_reset
 *   RateLimit            1 requests_per_unit  2 unit  3 name
 *   Duration             1 seconds  2 nanos
 *   HeaderValue          1 key  2 value
 * Unknown fields are skipped; a known field with another wire type is refused, as protobuf's
 * parsers refuse it.
 */
#include "api/rls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "core/satmath.h"
#include "wire/grpc_frame.h"
#include "wire/pbwire.h"

enum { CODE_OK = 1, CODE_OVER_LIMIT = 2 };
enum { K_NONE, K_UNLIMITED, K_LIMIT };

/* One engine item: a descriptor's limit (one of its rate_limits: blocks), or the descriptor's
 * answer without one. A descriptor's items are next to each other, in block order. */
typedef struct item {
    uint8_t kind;
    bool shadow;
    bool given_back;  /* admitted, then given back: another limit of its group rejected */
    bool quota;       /* quota mode: over its limit, it reports */
    int64_t want;     /* CheckRateLimit: the hits asked about (the engine only looks) */
    uint8_t unit;
    uint32_t rpu;
    uint32_t mult;    /* unit_multiplier, >= 1 */
    uint32_t desc;    /* the descriptor's index in the request */
    const char *name; /* rule name, "" for none */
    size_t name_len;
    const char *label; /* for metrics: the rule's name, else its path; NULL without a rule */
} item;

struct sl_rls_call {
    sl_rlsconf *conf;
    const sl_rls_config *cfg;
    const char *domain; /* the configured domain's name, NULL when unknown */
    size_t domain_len;
    size_t n;           /* items (the batch's) */
    size_t n_desc;      /* descriptors: the answer's statuses */
    bool whole;         /* all-or-nothing over the whole call, not per descriptor */
    bool groups;        /* some limit shares an all-or-nothing group with another */
    uint8_t mode;       /* sl_rls_mode */
    item *items;
};

/* ---- decoding ------------------------------------------------------------------------------ */

static size_t max_desc(const sl_rls_config *c)
{
    return c->max_descriptors ? c->max_descriptors : 1000;
}

static size_t max_ent(const sl_rls_config *c)
{
    return c->max_entries ? c->max_entries : 64;
}

#define BAD(msg)                                                                                   \
    do {                                                                                           \
        *err = msg;                                                                                \
        return -EINVAL;                                                                            \
    } while (0)

static bool text_ok(const sl_pb_rd *s)
{
    return sl_utf8_valid(s->p, (size_t)(s->end - s->p));
}

static int parse_entry(sl_pb_rd r, sl_rlsconf_entry *e, const char **err)
{
    static const char empty[1] = "";
    e->key = e->value = empty;
    e->key_len = e->value_len = 0;
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        if (!sl_pb_key(&r, &f, &wt))
            BAD("malformed descriptor entry");
        if (f == 1 || f == 2) {
            sl_pb_rd s;
            if (wt != SL_PB_LEN || !sl_pb_bytes(&r, &s))
                BAD("malformed descriptor entry");
            if (!text_ok(&s))
                BAD("descriptor entry is not valid UTF-8");
            if (f == 1) {
                e->key = (const char *)s.p;
                e->key_len = (size_t)(s.end - s.p);
            } else {
                e->value = (const char *)s.p;
                e->value_len = (size_t)(s.end - s.p);
            }
        } else if (!sl_pb_skip(&r, wt)) {
            BAD("malformed descriptor entry");
        }
    }
    return 0;
}

static int parse_override(sl_pb_rd r, sl_rls_desc *d, const char **err)
{
    d->has_limit = true;
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        uint64_t v;
        if (!sl_pb_key(&r, &f, &wt))
            BAD("malformed limit override");
        if (f == 1 || f == 2) {
            if (wt != SL_PB_VARINT || !sl_pb_varint(&r, &v))
                BAD("malformed limit override");
            if (f == 1)
                d->limit_rpu = (uint32_t)v;
            else
                d->limit_unit = (uint32_t)v;
        } else if (!sl_pb_skip(&r, wt)) {
            BAD("malformed limit override");
        }
    }
    return 0;
}

static int parse_hits(sl_pb_rd r, sl_rls_desc *d, const char **err)
{
    d->has_hits = true;
    d->hits = 0;
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        if (!sl_pb_key(&r, &f, &wt))
            BAD("malformed hits_addend");
        if (f == 1) {
            if (wt != SL_PB_VARINT || !sl_pb_varint(&r, &d->hits))
                BAD("malformed hits_addend");
        } else if (!sl_pb_skip(&r, wt)) {
            BAD("malformed hits_addend");
        }
    }
    return 0;
}

static int parse_desc(const sl_rls_config *cfg, sl_pb_rd r, sl_batch *b, sl_rls_desc *d,
                      const char **err)
{
    size_t n = 0;
    if (sl_pb_count_field(r.p, (size_t)(r.end - r.p), 1, max_ent(cfg), &n))
        BAD("malformed descriptor");
    if (n > max_ent(cfg)) {
        *err = "too many entries in a descriptor";
        return -E2BIG;
    }
    if (n && !(d->entries = sl_batch_alloc(b, n * sizeof *d->entries)))
        return -ENOMEM;
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        sl_pb_rd s;
        if (!sl_pb_key(&r, &f, &wt))
            BAD("malformed descriptor");
        if (f >= 1 && f <= 3) {
            if (wt != SL_PB_LEN || !sl_pb_bytes(&r, &s))
                BAD("malformed descriptor");
            int rc = f == 1   ? (d->n < n ? parse_entry(s, &d->entries[d->n++], err) : -EINVAL)
                     : f == 2 ? parse_override(s, d, err)
                              : parse_hits(s, d, err);
            if (rc) {
                if (!*err)
                    *err = "malformed descriptor";
                return rc;
            }
        } else if (!sl_pb_skip(&r, wt)) {
            BAD("malformed descriptor");
        }
    }
    return 0;
}

int sl_rls_parse(const sl_rls_config *cfg, const uint8_t *msg, size_t len, sl_batch *b,
                 sl_rls_req *out, const char **err)
{
    memset(out, 0, sizeof *out);
    *err = NULL;
    size_t n = 0;
    if (sl_pb_count_field(msg, len, 2, max_desc(cfg), &n))
        BAD("malformed RateLimitRequest");
    if (n > max_desc(cfg)) {
        *err = "too many descriptors";
        return -E2BIG;
    }
    if (n && !(out->descs = sl_batch_alloc(b, n * sizeof *out->descs)))
        return -ENOMEM;
    if (n)
        memset(out->descs, 0, n * sizeof *out->descs);
    sl_pb_rd r = {msg, msg + len};
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        sl_pb_rd s;
        uint64_t v;
        if (!sl_pb_key(&r, &f, &wt))
            BAD("malformed RateLimitRequest");
        if (f == 1 || f == 2) {
            if (wt != SL_PB_LEN || !sl_pb_bytes(&r, &s))
                BAD("malformed RateLimitRequest");
            if (f == 1) {
                if (!text_ok(&s))
                    BAD("domain is not valid UTF-8");
                out->domain = (const char *)s.p;
                out->domain_len = (size_t)(s.end - s.p);
            } else {
                if (out->n >= n)
                    BAD("malformed RateLimitRequest");
                int rc = parse_desc(cfg, s, b, &out->descs[out->n++], err);
                if (rc)
                    return rc;
            }
        } else if (f == 3) {
            if (wt != SL_PB_VARINT || !sl_pb_varint(&r, &v))
                BAD("malformed RateLimitRequest");
            out->hits_addend = (uint32_t)v;
        } else if (!sl_pb_skip(&r, wt)) {
            BAD("malformed RateLimitRequest");
        }
    }
    return 0;
}

/* ---- planning ------------------------------------------------------------------------------ */

/* "key=value|key=value" into the arena; an entry matched by a share_threshold wildcard counts
 * under the pattern (shared[i]) instead of its value. */
static char *unique_key(sl_batch *b, const sl_rls_desc *d, const char *const *shared, size_t *len)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n; i++)
        n += d->entries[i].key_len + 1 +
             (shared && shared[i] ? strlen(shared[i]) : d->entries[i].value_len) + 1;
    char *k = sl_batch_alloc(b, n + 1);
    if (!k)
        return NULL;
    char *w = k;
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            *w++ = '|';
        memcpy(w, d->entries[i].key, d->entries[i].key_len);
        w += d->entries[i].key_len;
        *w++ = '=';
        const char *v = shared && shared[i] ? shared[i] : d->entries[i].value;
        size_t vl = shared && shared[i] ? strlen(shared[i]) : d->entries[i].value_len;
        memcpy(w, v, vl);
        w += vl;
    }
    *w = 0;
    *len = (size_t)(w - k);
    return k;
}

static bool replaced(const sl_rlsconf_rule *const *rules, size_t n, const char *name)
{
    if (!name[0])
        return false;
    for (size_t i = 0; i < n; i++)
        for (const sl_rlsconf_rule *r = rules[i]; r; r = r->also)
            for (size_t j = 0; j < r->n_replaces; j++)
                if (!strcmp(r->replaces[j], name))
                    return true;
    return false;
}

static void mark_answered(sl_batch *b, size_t i)
{
    b->answered[i] = 1;
    b->n_answered++;
}

static int out_of_memory(sl_grpc_status *st)
{
    sl_grpc_status_set(st, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory");
    return -ENOMEM;
}

/* What is refused whole before any matching: a malformed message, an empty domain or descriptor
 * list, a limit override in a unit RLS does not know. */
static int check_request(const sl_rls_config *cfg, const uint8_t *msg, size_t len, sl_batch *b,
                         sl_rls_req *rq, sl_grpc_status *st)
{
    const char *err = NULL;
    int rc = sl_rls_parse(cfg, msg, len, b, rq, &err);
    if (rc == -ENOMEM)
        return out_of_memory(st);
    if (rc) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT, "%s", err ? err : "malformed request");
        return rc;
    }
    if (!rq->domain_len) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT, "rate limit domain must not be empty");
        return -EINVAL;
    }
    if (!rq->n) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT,
                          "rate limit descriptor list must not be empty");
        return -EINVAL;
    }
    for (size_t i = 0; i < rq->n; i++) {
        const sl_rls_desc *d = &rq->descs[i];
        if (d->has_limit && !sl_rls_unit_ms((int)d->limit_unit)) {
            sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT,
                              "descriptor %zu: limit override with an unknown unit", i);
            return -EINVAL;
        }
    }
    return 0;
}

/* The call record and the engine name every item carries, "<prefix><domain>", in b's arena. */
static int new_call(const sl_rls_config *cfg, const sl_rls_req *rq, sl_batch *b, sl_rls_call **out,
                    char **name, size_t *name_len, sl_grpc_status *st)
{
    sl_rls_call *c = sl_batch_alloc(b, sizeof *c);
    *name = sl_batch_alloc(b, sizeof SL_RLS_NAME_PREFIX + rq->domain_len);
    if (!c || !*name)
        return out_of_memory(st);
    memset(c, 0, sizeof *c);
    *name_len = sizeof SL_RLS_NAME_PREFIX - 1 + rq->domain_len;
    memcpy(*name, SL_RLS_NAME_PREFIX, sizeof SL_RLS_NAME_PREFIX - 1);
    memcpy(*name + sizeof SL_RLS_NAME_PREFIX - 1, rq->domain, rq->domain_len);
    (*name)[*name_len] = 0;
    c->cfg = cfg;
    c->n_desc = rq->n;
    c->whole = cfg->all_or_nothing;
    *out = c;
    return 0;
}

/* The rule chain of each descriptor (NULL: none, or an override, or no domain). *shared: per
 * descriptor, the entries a share_threshold rule keys on (NULL when the domain has no such rule).
 * *n_items: the engine items the call needs, one per block (at least one per descriptor). */
static int match_rules(const sl_rlsconf_domain *dom, const sl_rls_req *rq, sl_batch *b,
                       const sl_rlsconf_rule ***rules, const char ****shared, size_t *n_items,
                       sl_grpc_status *st)
{
    *shared = NULL;
    if (!(*rules = sl_batch_alloc(b, rq->n * sizeof **rules)) ||
        (sl_rlsconf_domain_shares(dom) && !(*shared = sl_batch_alloc(b, rq->n * sizeof **shared))))
        return out_of_memory(st);
    const char ***sh = *shared;
    *n_items = 0;
    for (size_t i = 0; i < rq->n; i++) {
        const sl_rls_desc *d = &rq->descs[i];
        (*rules)[i] = NULL;
        if (sh)
            sh[i] = NULL;
        if (dom && !d->has_limit) {
            if (sh && d->n && !(sh[i] = sl_batch_alloc(b, d->n * sizeof *sh[i])))
                return out_of_memory(st);
            (*rules)[i] = sl_rlsconf_match(dom, d->entries, d->n, sh && d->n ? sh[i] : NULL);
        }
        size_t k = 0;
        for (const sl_rlsconf_rule *r = (*rules)[i]; r; r = r->also)
            k++;
        *n_items += k ? k : 1;
    }
    return 0;
}

static void item_of_rule(item *it, const sl_rlsconf_rule *r)
{
    it->kind = r->unlimited ? K_UNLIMITED : K_LIMIT;
    it->rpu = r->requests_per_unit;
    it->unit = r->unit;
    it->mult = r->unit_multiplier;
    it->shadow = r->shadow;
    it->quota = r->quota;
    it->name = r->name;
    it->name_len = strlen(r->name);
    it->label = r->name[0] ? r->name : r->path;
}

/* The call's items: per descriptor, one per block of its rule chain (an override stands for a
 * rule of its own; no rule, or no domain: one K_NONE item); blocks another matched rule replaces
 * become K_NONE. */
static int plan_items(sl_rls_call *c, const sl_rlsconf_domain *dom, const sl_rls_req *rq,
                      sl_batch *b, const sl_rlsconf_rule **rules, size_t n_items,
                      const sl_rlsconf_rule ***by_item, sl_grpc_status *st)
{
    if (sl_batch_alloc_items(b, n_items) ||
        !(c->items = sl_batch_alloc(b, n_items * sizeof *c->items)) ||
        !(*by_item = sl_batch_alloc(b, n_items * sizeof **by_item)))
        return out_of_memory(st);
    memset(c->items, 0, n_items * sizeof *c->items); /* K_NONE */
    c->n = n_items;
    bool any_replaces = false;
    size_t j = 0;
    for (size_t i = 0; i < rq->n; i++) {
        const sl_rls_desc *d = &rq->descs[i];
        size_t first = j;
        for (const sl_rlsconf_rule *r = rules[i]; r; r = r->also, j++) {
            item_of_rule(&c->items[j], r);
            (*by_item)[j] = r;
            any_replaces |= r->n_replaces > 0;
        }
        if (j == first) {
            item *it = &c->items[j];
            (*by_item)[j] = NULL;
            if (dom && d->has_limit) {
                it->kind = K_LIMIT;
                it->rpu = d->limit_rpu;
                it->unit = (uint8_t)d->limit_unit;
                it->name = "";
                it->label = "override";
            }
            j++;
        }
        for (size_t k = first; k < j; k++) {
            c->items[k].desc = (uint32_t)i;
            c->items[k].quota |= c->cfg->quota_mode;
            if (!c->items[k].mult)
                c->items[k].mult = 1;
        }
    }
    for (size_t k = 0; any_replaces && k < n_items; k++) {
        const sl_rlsconf_rule *r = (*by_item)[k];
        if (r && !r->unlimited && replaced(rules, rq->n, r->name))
            c->items[k].kind = K_NONE;
    }
    return 0;
}

/* Whether item i shares its all-or-nothing group with another limit: the call's other items
 * (whole), or its descriptor's other blocks (next to it). */
static bool grouped(const sl_rls_call *c, size_t i)
{
    size_t limits = 0;
    if (c->whole) {
        for (size_t k = 0; k < c->n && limits < 2; k++)
            limits += c->items[k].kind == K_LIMIT;
        return limits > 1;
    }
    uint32_t d = c->items[i].desc;
    for (size_t k = i; k > 0 && c->items[k - 1].desc == d && limits < 1; k--)
        limits += c->items[k - 1].kind == K_LIMIT;
    for (size_t k = i + 1; k < c->n && c->items[k].desc == d && limits < 1; k++)
        limits += c->items[k].kind == K_LIMIT;
    return limits > 0;
}

/* The engine items of the limits (the others are answered at once). Suffix "#<k>" on the key of
 * a descriptor's block k > 0 keeps its counter apart from block 0's (which keeps the key a single
 * rate_limit: has, so adding blocks does not reset a running window). */
static int fill_items(sl_rls_call *c, const sl_rls_req *rq, sl_batch *b,
                      const sl_rlsconf_rule **by_item, const char ***shared, const char *name,
                      size_t name_len, sl_grpc_status *st)
{
    for (size_t i = 0; i < c->n; i++) {
        item *it = &c->items[i];
        const sl_rls_desc *d = &rq->descs[it->desc];
        sl_request *q = &b->reqs[i];
        q->name = name; /* on every item: identities judge the call by its domain */
        q->name_len = name_len;
        if (it->kind != K_LIMIT) {
            mark_answered(b, i);
            continue;
        }
        const sl_rlsconf_rule *r = by_item[i];
        size_t block = 0;
        while (block < i && c->items[i - block - 1].desc == it->desc)
            block++;
        const char *const *sh = shared && d->n && !d->has_limit ? shared[it->desc] : NULL;
        if (!(q->unique_key = unique_key(b, d, sh, &q->unique_key_len)))
            return out_of_memory(st);
        if (block) {
            char *k = sl_batch_alloc(b, q->unique_key_len + 8);
            if (!k)
                return out_of_memory(st);
            int w = snprintf(k, q->unique_key_len + 8, "%s#%zu", q->unique_key, block);
            q->unique_key = k;
            q->unique_key_len = (size_t)w;
        }
        uint64_t hits = d->has_hits ? d->hits : rq->hits_addend ? rq->hits_addend : 1;
        q->hits = hits > INT64_MAX ? INT64_MAX : (int64_t)hits;
        q->limit = it->rpu;
        q->duration = sl_rls_unit_ms(it->unit) * (int64_t)it->mult;
        q->algorithm = r ? r->algorithm : SL_FIXED_WINDOW;
        q->burst = r ? r->burst : 0;
        /* alone, a fixed window counts as envoyproxy/ratelimit's (every hit, rejected or not); in
         * an all-or-nothing group a rejection takes nothing, so the window counts what it admits.
         * A report charges every hit (another algorithm takes what is left: drain); a check only
         * looks. */
        bool g = c->mode == SL_RLS_SHOULD && grouped(c, i);
        c->groups |= g;
        q->behavior = q->algorithm == SL_FIXED_WINDOW && !g ? SL_COUNT_OVER_LIMIT : 0;
        if (c->mode == SL_RLS_REPORT && q->algorithm != SL_FIXED_WINDOW)
            q->behavior |= SL_DRAIN_OVER_LIMIT;
        if (c->mode == SL_RLS_CHECK) {
            it->want = q->hits;
            q->hits = 0;
        }
        if (it->shadow)
            q->behavior |= SL_SHADOW;
    }
    return 0;
}

int sl_rls_begin(const sl_rls_config *cfg, sl_rlsconf *conf, const uint8_t *msg, size_t len,
                 sl_batch *b, sl_rls_call **call, sl_grpc_status *st)
{
    return sl_rls_begin_mode(cfg, conf, SL_RLS_SHOULD, msg, len, b, call, st);
}

int sl_rls_begin_mode(const sl_rls_config *cfg, sl_rlsconf *conf, sl_rls_mode mode,
                      const uint8_t *msg, size_t len, sl_batch *b, sl_rls_call **call,
                      sl_grpc_status *st)
{
    sl_batch_reset(b);
    *call = NULL;
    sl_rls_req rq;
    sl_rls_call *c;
    const sl_rlsconf_rule **rules, **by_item;
    const char ***shared;
    char *name;
    size_t name_len, n_items;
    int rc = check_request(cfg, msg, len, b, &rq, st);
    if (!rc)
        rc = new_call(cfg, &rq, b, &c, &name, &name_len, st);
    if (rc)
        return rc;
    c->mode = (uint8_t)mode;
    if (mode != SL_RLS_SHOULD)
        c->whole = false; /* a check takes nothing, a report charges everything */
    const sl_rlsconf_domain *dom = sl_rlsconf_domain_find(conf, rq.domain, rq.domain_len);
    c->domain = dom ? sl_rlsconf_domain_name(dom, &c->domain_len) : NULL;
    if ((rc = match_rules(dom, &rq, b, &rules, &shared, &n_items, st)) ||
        (rc = plan_items(c, dom, &rq, b, rules, n_items, &by_item, st)) ||
        (rc = fill_items(c, &rq, b, by_item, shared, name, name_len, st)))
        return rc;
    if (conf)
        sl_rlsconf_ref(conf);
    c->conf = conf;
    *call = c;
    return 0;
}

void sl_rls_end(sl_rls_call *call)
{
    if (call) {
        sl_rlsconf_unref(call->conf);
        call->conf = NULL;
    }
}

/* ---- encoding ------------------------------------------------------------------------------ */

typedef struct status {
    uint32_t code;
    bool has_limit;
    bool near;        /* admitted, past the near-limit ratio */
    uint32_t remaining;
    int64_t reset_ms; /* >= 0 */
    const item *it;
} status;

/* ---- all or nothing ------------------------------------------------------------------------ */

/* Whether item i took its hits: decided under its limit, or over it but admitted (shadow mode,
 * the rule's or protection's). */
static bool admitted(const sl_rls_call *c, const sl_batch *b, size_t i)
{
    const sl_response *r = &b->resps[i];
    if (r->error)
        return false;
    if (r->status != SL_OVER_LIMIT || c->items[i].shadow || c->items[i].quota)
        return true; /* (a call whose every quota-mode descriptor is over: rejected_in) */
    const char *sh = sl_batch_meta_get(&b->resp_meta[i], "shadow");
    return sh && !strcmp(sh, "rate");
}

/* Whether items [from, to) hold a limit that did not admit, or are quota-mode limits that are
 * all over (the call is then refused, as envoyproxy/ratelimit refuses it). */
static bool rejected_in(const sl_rls_call *c, const sl_batch *b, size_t from, size_t to)
{
    size_t quota = 0, quota_over = 0;
    for (size_t k = from; k < to; k++) {
        if (c->items[k].kind != K_LIMIT)
            continue;
        if (!admitted(c, b, k))
            return true;
        if (c->items[k].quota && !c->items[k].shadow) {
            quota++;
            quota_over += !b->resps[k].error && b->resps[k].status == SL_OVER_LIMIT;
        }
    }
    return quota && quota == quota_over;
}

size_t sl_rls_descriptors(const sl_rls_call *c)
{
    return c->n_desc;
}

bool sl_rls_may_give_back(const sl_rls_call *c)
{
    return c && c->groups;
}

size_t sl_rls_giveback(sl_rls_call *c, const sl_batch *b, sl_batch *gb)
{
    size_t k = 0; /* (given_back is false until a batch to give back is there) */
    bool whole_rejected = c->whole && rejected_in(c, b, 0, c->n);
    for (size_t from = 0, to; from < c->n; from = to) { /* a descriptor's items at a time */
        for (to = from + 1; to < c->n && c->items[to].desc == c->items[from].desc; to++)
            ;
        bool rejected = c->whole ? whole_rejected : rejected_in(c, b, from, to);
        for (size_t i = from; i < to; i++) {
            bool back = rejected && c->items[i].kind == K_LIMIT && b->reqs[i].hits > 0 &&
                        grouped(c, i) && admitted(c, b, i);
            if (gb)
                c->items[i].given_back = back;
            k += back;
        }
    }
    if (!k || !gb)
        return k;
    size_t *pick = malloc(k * sizeof *pick), j = 0; /* not in gb's arena: reset by the copy */
    for (size_t i = 0; pick && i < c->n; i++)
        if (c->items[i].given_back)
            pick[j++] = i;
    int rc = pick ? sl_batch_giveback(gb, b, pick, k) : -ENOMEM;
    free(pick);
    if (!rc)
        return k;
    /* out of memory: the hits stay taken, as without all-or-nothing */
    for (size_t i = 0; i < c->n; i++)
        c->items[i].given_back = false;
    return 0;
}

static size_t varint_field_size(uint64_t v)
{
    return v ? 1 + sl_pb_varint_size(v) : 0;
}

static uint8_t *put_varint_field(uint8_t *w, uint8_t key, uint64_t v)
{
    if (!v)
        return w;
    *w++ = key;
    return sl_pb_put_varint(w, v);
}

/* RateLimit.unit_multiplier (4, a google.protobuf.UInt32Value, as Envoy's API proposal adds it),
 * only when the window is more than one unit. */
static size_t multiplier_size(const status *s)
{
    return s->it->mult > 1 ? 2 + varint_field_size(s->it->mult) : 0;
}

static size_t limit_size(const status *s)
{
    return varint_field_size(s->it->rpu) + varint_field_size(s->it->unit) +
           sl_pb_str_field_size(s->it->name_len) + multiplier_size(s);
}

static size_t duration_size(const status *s)
{
    return varint_field_size((uint64_t)(s->reset_ms / 1000)) +
           varint_field_size((uint64_t)(s->reset_ms % 1000) * 1000000);
}

static size_t status_size(const status *s)
{
    size_t n = varint_field_size(s->code) + varint_field_size(s->remaining);
    if (s->has_limit) {
        size_t l = limit_size(s), d = duration_size(s);
        n += 1 + sl_pb_varint_size(l) + l + 1 + sl_pb_varint_size(d) + d;
    }
    return n;
}

static uint8_t *put_status(uint8_t *w, const status *s)
{
    w = put_varint_field(w, 0x08, s->code);
    if (s->has_limit) {
        *w++ = 0x12;
        w = sl_pb_put_varint(w, limit_size(s));
        w = put_varint_field(w, 0x08, s->it->rpu);
        w = put_varint_field(w, 0x10, s->it->unit);
        w = sl_pb_put_str_field(w, 0x1a, s->it->name, s->it->name_len);
        if (s->it->mult > 1) {
            *w++ = 0x22;
            *w++ = (uint8_t)varint_field_size(s->it->mult);
            w = put_varint_field(w, 0x08, s->it->mult);
        }
    }
    w = put_varint_field(w, 0x18, s->remaining);
    if (s->has_limit) {
        *w++ = 0x22;
        w = sl_pb_put_varint(w, duration_size(s));
        w = put_varint_field(w, 0x08, (uint64_t)(s->reset_ms / 1000));
        w = put_varint_field(w, 0x10, (uint64_t)(s->reset_ms % 1000) * 1000000);
    }
    return w;
}

/* envoyproxy/ratelimit's near limit: what is used is past floor(limit x ratio). */
static bool near_limit(const sl_rls_config *cfg, uint32_t limit, uint32_t remaining)
{
    uint64_t permille = cfg->near_permille ? cfg->near_permille : 800;
    uint64_t used = remaining < limit ? (uint64_t)limit - remaining : 0;
    return used > (uint64_t)limit * permille / 1000;
}

static status status_of(const sl_rls_call *c, const sl_batch *b, size_t i, int64_t now)
{
    const item *it = &c->items[i];
    status s = {.code = CODE_OK, .it = it};
    if (it->kind == K_UNLIMITED) {
        s.remaining = UINT32_MAX;
    } else if (it->kind == K_LIMIT) {
        const sl_response *r = &b->resps[i];
        s.has_limit = true;
        bool over = r->status == SL_OVER_LIMIT || (c->mode == SL_RLS_CHECK && r->remaining < it->want);
        s.code = over && !it->shadow ? CODE_OVER_LIMIT : CODE_OK;
        int64_t rem = r->remaining;
        if (it->given_back) /* the answer says what is left now that the hits went back */
            rem = sl_sat_add(rem, b->reqs[i].hits) > r->limit ? r->limit
                                                               : sl_sat_add(rem, b->reqs[i].hits);
        s.remaining = rem < 0 ? 0 : rem > UINT32_MAX ? UINT32_MAX : (uint32_t)rem;
        s.reset_ms = r->reset_time > now ? r->reset_time - now : 0;
        s.near = s.code == CODE_OK && near_limit(c->cfg, it->rpu, s.remaining);
    }
    return s;
}

/* Descriptor d's status: of its first limit that rejected, else of its limit nearest its end
 * (least remaining), else of its only item (unlimited or no limit). *first: d's first item. */
static status desc_status(const sl_rls_call *c, const sl_batch *b, size_t *first, int64_t now)
{
    size_t i = *first;
    uint32_t d = c->items[i].desc;
    status best = status_of(c, b, i, now);
    for (i++; i < c->n && c->items[i].desc == d; i++) {
        status s = status_of(c, b, i, now);
        if (!s.has_limit || best.code == CODE_OVER_LIMIT)
            continue;
        if (!best.has_limit || s.code == CODE_OVER_LIMIT || s.remaining < best.remaining)
            best = s;
    }
    *first = i;
    return best;
}

static size_t header_size(size_t kl, size_t vl)
{
    size_t n = sl_pb_str_field_size(kl) + sl_pb_str_field_size(vl);
    return 1 + sl_pb_varint_size(n) + n;
}

static uint8_t *put_header(uint8_t *w, const char *k, const char *v)
{
    size_t kl = strlen(k), vl = strlen(v);
    *w++ = 0x1a;
    w = sl_pb_put_varint(w, sl_pb_str_field_size(kl) + sl_pb_str_field_size(vl));
    w = sl_pb_put_str_field(w, 0x0a, k, kl);
    return sl_pb_put_str_field(w, 0x12, v, vl);
}

/* ---- dynamic_metadata: a google.protobuf.Struct ------------------------------------------ */

/* Struct   1 fields (map<string, Value>: entries of 1 key, 2 value)
 * Value    2 number_value (double)  3 string_value  4 bool_value  5 struct_value  6 list_value
 * ListValue 1 values (repeated Value) */

static int put_len(sl_buf *b, uint8_t key, const void *p, size_t n)
{
    uint8_t hdr[11];
    hdr[0] = key;
    size_t h = (size_t)(sl_pb_put_varint(hdr + 1, n) - hdr);
    int rc = sl_buf_append(b, hdr, h);
    return rc ? rc : sl_buf_append(b, p, n);
}

/* A map entry {key, Value} of a Struct, whose Value bytes are v (a Value message). */
static int put_entry(sl_buf *st, const char *key, const sl_buf *v, sl_buf *tmp)
{
    sl_buf_reset(tmp);
    int rc = put_len(tmp, 0x0a, key, strlen(key));
    if (!rc)
        rc = put_len(tmp, 0x12, v->data, v->len);
    return rc ? rc : put_len(st, 0x0a, tmp->data, tmp->len);
}

static int value_str(sl_buf *v, const char *s, size_t n)
{
    sl_buf_reset(v);
    return put_len(v, 0x1a, s, n);
}

static int value_num(sl_buf *v, double d)
{
    uint8_t w[9] = {0x11};
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    for (int i = 0; i < 8; i++)
        w[1 + i] = (uint8_t)(u >> (8 * i));
    sl_buf_reset(v);
    return sl_buf_append(v, w, sizeof w);
}

static int value_bool(sl_buf *v, bool t)
{
    uint8_t w[2] = {0x20, t};
    sl_buf_reset(v);
    return sl_buf_append(v, w, sizeof w);
}

/* One status of the list: {index, rule, state, limit, remaining, quota_mode}. */
static int status_struct(size_t d, const status *s, sl_buf *st, sl_buf *v, sl_buf *tmp)
{
    const char *rule = s->it->label ? s->it->label : "";
    int rc = value_num(v, (double)d);
    if (!rc)
        rc = put_entry(st, "index", v, tmp);
    if (!rc && !(rc = value_str(v, rule, strlen(rule))))
        rc = put_entry(st, "rule", v, tmp);
    const char *state = s->near ? "near_limit" : "over_limit";
    if (!rc && !(rc = value_str(v, state, strlen(state))))
        rc = put_entry(st, "state", v, tmp);
    if (!rc && !(rc = value_num(v, s->it->rpu)))
        rc = put_entry(st, "limit", v, tmp);
    if (!rc && !(rc = value_num(v, s->remaining)))
        rc = put_entry(st, "remaining", v, tmp);
    if (!rc && !(rc = value_bool(v, s->it->quota)))
        rc = put_entry(st, "quota_mode", v, tmp);
    return rc;
}

/* RateLimitResponse.dynamic_metadata (6), appended: {"domain": ..., "descriptors": [the statuses
 * over or near their limits]} (docs/envoy.md). */
static int put_metadata(const sl_rls_call *c, const sl_batch *b, int64_t now, sl_buf *out)
{
    sl_buf list, top, one, v, tmp, item;
    sl_buf_init(&list, 0);
    sl_buf_init(&top, 0);
    sl_buf_init(&one, 0);
    sl_buf_init(&v, 0);
    sl_buf_init(&tmp, 0);
    sl_buf_init(&item, 0);
    int rc = 0;
    size_t d = 0;
    for (size_t i = 0; i < c->n && !rc; d++) {
        status s = desc_status(c, b, &i, now);
        if (!s.has_limit || (!s.near && s.code != CODE_OVER_LIMIT))
            continue;
        sl_buf_reset(&one);
        sl_buf_reset(&item);
        if (!(rc = status_struct(d, &s, &one, &v, &tmp)) &&
            !(rc = put_len(&item, 0x2a, one.data, one.len))) /* Value.struct_value */
            rc = put_len(&list, 0x0a, item.data, item.len);  /* ListValue.values */
    }
    if (!rc && !(rc = value_str(&v, c->domain ? c->domain : "", c->domain ? c->domain_len : 0)))
        rc = put_entry(&top, "domain", &v, &tmp);
    if (!rc) {
        sl_buf_reset(&v);
        if (!(rc = put_len(&v, 0x32, list.data, list.len))) /* Value.list_value */
            rc = put_entry(&top, "descriptors", &v, &tmp);
    }
    if (!rc)
        rc = put_len(out, 0x32, top.data, top.len);
    sl_buf_free(&list);
    sl_buf_free(&top);
    sl_buf_free(&one);
    sl_buf_free(&v);
    sl_buf_free(&tmp);
    sl_buf_free(&item);
    return rc;
}

int sl_rls_encode(const sl_rls_call *c, const sl_batch *b, int64_t now, sl_buf *out,
                  sl_grpc_status *st)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->items[i].kind == K_LIMIT && b->resps[i].error) {
            sl_grpc_status_set(st, SL_GRPC_UNAVAILABLE, "descriptor %zu: %s", i,
                              b->resps[i].error);
            return -EAGAIN;
        }
    size_t total = 0, quota = 0, quota_over = 0;
    bool hard_over = false, any_marked = false;
    const status *closest = NULL; /* the limited descriptor nearest its limit, for the headers */
    status near;
    for (size_t i = 0; i < c->n;) {
        status s = desc_status(c, b, &i, now);
        size_t n = status_size(&s);
        total += 1 + sl_pb_varint_size(n) + n;
        any_marked |= s.near || s.code == CODE_OVER_LIMIT;
        if (s.has_limit && s.it->quota && !s.it->shadow) {
            quota++;
            quota_over += s.code == CODE_OVER_LIMIT;
        } else if (s.code == CODE_OVER_LIMIT) {
            hard_over = true;
        }
        if (s.has_limit && (!closest || (s.code == CODE_OVER_LIMIT && closest->code != CODE_OVER_LIMIT) ||
                            (s.code == closest->code && s.remaining < closest->remaining))) {
            near = s;
            closest = &near;
        }
    }
    /* OVER_LIMIT when a limit is, or when every quota-mode one is (envoyproxy/ratelimit's rule) */
    uint32_t overall = hard_over || (quota && quota == quota_over) ? CODE_OVER_LIMIT : CODE_OK;
    if (c->mode == SL_RLS_REPORT)
        overall = CODE_OK; /* a report is a charge, not a question (limitador answers it so) */
    const sl_rls_config *cfg = c->cfg;
    const char *nl = cfg->header_limit[0] ? cfg->header_limit : "RateLimit-Limit";
    const char *nr = cfg->header_remaining[0] ? cfg->header_remaining : "RateLimit-Remaining";
    const char *ns = cfg->header_reset[0] ? cfg->header_reset : "RateLimit-Reset";
    char hl[16], hr[16], hs[24];
    bool headers = cfg->headers && closest;
    if (headers) {
        snprintf(hl, sizeof hl, "%u", closest->it->rpu);
        snprintf(hr, sizeof hr, "%u", closest->remaining);
        snprintf(hs, sizeof hs, "%lld", (long long)((closest->reset_ms + 999) / 1000));
        total += header_size(strlen(nl), strlen(hl)) + header_size(strlen(nr), strlen(hr)) +
                 header_size(strlen(ns), strlen(hs));
    }
    total += varint_field_size(overall);
    if (sl_buf_reserve(out, total))
        return -ENOMEM;
    uint8_t *w = (uint8_t *)out->data + out->len, *start = w;
    w = put_varint_field(w, 0x08, overall);
    for (size_t i = 0; i < c->n;) {
        status s = desc_status(c, b, &i, now);
        *w++ = 0x12;
        w = sl_pb_put_varint(w, status_size(&s));
        w = put_status(w, &s);
    }
    if (headers) {
        w = put_header(w, nl, hl);
        w = put_header(w, nr, hr);
        w = put_header(w, ns, hs);
    }
    out->len += (size_t)(w - start);
    if (cfg->dynamic_metadata && any_marked && put_metadata(c, b, now, out))
        return -ENOMEM;
    return 0;
}

static uint8_t outcome_of(const sl_rls_call *c, const sl_batch *b, size_t i)
{
    const item *it = &c->items[i];
    if (it->kind == K_NONE)
        return SL_RLS_NO_LIMIT;
    if (it->kind == K_UNLIMITED)
        return SL_RLS_UNLIMITED;
    const sl_response *r = &b->resps[i];
    if (r->error)
        return SL_RLS_OUTCOME_COUNT; /* the call failed: not a descriptor outcome */
    if (r->status == SL_OVER_LIMIT || (c->mode == SL_RLS_CHECK && r->remaining < it->want))
        return it->shadow ? SL_RLS_SHADOW_OVER : SL_RLS_OVER_LIMIT;
    /* protection's shadow mode (api/gubprotect.h: the rule's shadow_mode, or a switch in shadow
     * mode) turned a rejection into an admission */
    const char *sh = sl_batch_meta_get(&b->resp_meta[i], "shadow");
    if (sh && !strcmp(sh, "rate"))
        return SL_RLS_SHADOW_OVER;
    return SL_RLS_OK;
}

void sl_rls_count(const sl_rls_call *c, const sl_batch *b, sl_rlsmetrics *m)
{
    enum { CHUNK = 64 };
    const char *rules[CHUNK];
    uint8_t outcomes[CHUNK];
    if (!m || !c)
        return;
    for (size_t i = 0; i < c->n; i += CHUNK) {
        size_t k = c->n - i < CHUNK ? c->n - i : CHUNK;
        for (size_t j = 0; j < k; j++) {
            rules[j] = c->items[i + j].kind == K_NONE ? NULL : c->items[i + j].label;
            outcomes[j] = outcome_of(c, b, i + j);
        }
        sl_rlsmetrics_count(m, c->domain, c->domain_len, rules, outcomes, k);
        /* near_limit counts again, among those ok, the ones past the ratio (upstream's stat) */
        size_t near = 0;
        for (size_t j = 0; j < k; j++) {
            const sl_response *r = &b->resps[i + j];
            uint32_t rem = r->remaining < 0 ? 0 : r->remaining > UINT32_MAX ? UINT32_MAX
                                                                            : (uint32_t)r->remaining;
            if (outcomes[j] == SL_RLS_OK && c->items[i + j].kind == K_LIMIT &&
                near_limit(c->cfg, c->items[i + j].rpu, rem)) {
                rules[near] = rules[j];
                outcomes[near++] = SL_RLS_NEAR_LIMIT;
            }
        }
        if (near)
            sl_rlsmetrics_count(m, c->domain, c->domain_len, rules, outcomes, near);
    }
}

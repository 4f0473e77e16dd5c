/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gubernator calls under protection (see gubprotect.h). The whole call is shed for its most
 * important item's class (a batch is one unit of work for the worker). Kill switches and shadow
 * mode apply per item by its name; the fleet shedder gives each non-critical CONCURRENCY acquire
 * a fleet lease, returned with the item's own as "<conc>.<fleet>" (protect/leaseid.h).
 *
 * The fleet is one count for the cluster: its leases are items of one CONCURRENCY key
 * (sl_protect_fleet_key), which begin() collects into a batch of their own for the caller to
 * route to the key's owner before the call's items (acquires, and the fleet half of released
 * tokens); sl_gubprotect_fleet_done() applies the answers. An acquire the owner could not answer
 * (unreachable, or answered locally by --fail-open) falls back to this node's share of the fleet
 * (limit / nodes, on a key of its own). Fleet leases a rejected item must give back go out in a
 * third batch after the call (sl_gubprotect_giveback), fire and forget. Levee's /attempt routes
 * its resource's concurrency lease the same way, in the same batch as its fleet lease
 * (sl_gubprotect_lease_batch, _conc_taken, _lease_release).
 */
#include "api/gubprotect.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protect/leaseid.h"
#include "protect/plan.h"

#define META_PRIORITY "priority"
#define META_LEASE "lease_id"
#define META_KILLSWITCH "killswitch"
#define META_SHADOW "shadow"
#define META_REASON "reason"
#define META_SHED "shed"
#define META_FLEET "fleet"
#define META_FAIL_OPEN "fail_open"
#define META_REQ_ID "req_id"

enum { F_SHADOW = 1 };

/* One item of the fleet batch: which item of the call it serves, and what it does. */
typedef struct fleet_item {
    uint32_t item;
    bool release;
} fleet_item;

struct sl_gubprotect_call {
    size_t n;
    uint64_t *fleet; /* fleet lease per item, 0 = none */
    uint8_t *flags;
    /* the fleet's items, routed before the call's own (NULL: none); in the call's arena, its own
     * arena freed by end() */
    sl_batch *fb;
    fleet_item *fi;
    int64_t fleet_limit, fleet_duration;
    sl_killswitch_mode fleet_mode;
    sl_batch *giveback; /* fleet leases to give back after the call (heap; the caller routes it) */
};

static const char ERR_PRIORITY[] = "metadata 'priority' must be critical, post, get or test";
static const char ERR_LEASE[] = "metadata 'lease_id' is not a lease id";
static const char ERR_NOMEM[] = "out of memory";

static sl_gubprotect_call *call_state(sl_batch *b, sl_gubprotect_call **call)
{
    if (*call)
        return *call;
    sl_gubprotect_call *c = sl_batch_alloc(b, sizeof *c);
    uint64_t *fleet = sl_batch_alloc(b, b->n * sizeof *fleet + 1);
    uint8_t *flags = sl_batch_alloc(b, b->n + 1);
    if (!c || !fleet || !flags)
        return NULL;
    memset(fleet, 0, b->n * sizeof *fleet);
    memset(flags, 0, b->n);
    c->n = b->n;
    c->fleet = fleet;
    c->flags = flags;
    c->fb = NULL;
    c->fi = NULL;
    c->giveback = NULL;
    *call = c;
    return c;
}

/* Item j of fb: a lease of the fleet (res NULL) or of a resource's concurrency limit (its key
 * copied into fb's arena), hits 1 acquires (limit, duration), hits 0 renews and hits -1 releases
 * `lease`. 0, or -ENOMEM. */
static int lease_put(sl_protect *p, sl_batch *fb, size_t j, const char *res, size_t rlen,
                     int64_t hits, int64_t limit, int64_t duration, uint64_t lease)
{
    sl_request *q = &fb->reqs[j];
    memset(q, 0, sizeof *q);
    if (res) {
        sl_protect_conc_key(p, &q->name, &q->name_len);
        if (!(q->unique_key = sl_batch_strndup(fb, res, rlen)))
            return -ENOMEM;
        q->unique_key_len = rlen;
    } else {
        sl_protect_fleet_key(p, &q->name, &q->name_len, &q->unique_key, &q->unique_key_len);
    }
    q->hits = hits;
    q->limit = limit;
    q->duration = duration > 0 ? duration : 1;
    q->algorithm = SL_CONCURRENCY;
    q->lease_id = lease;
    if (lease) { /* a peer reads the lease from metadata */
        char hex[SL_CONC_ID_HEX + 1];
        sl_conc_format_id(lease, hex);
        if (sl_batch_meta_set(fb, &fb->req_meta[j], META_LEASE, hex))
            return -ENOMEM;
    }
    return 0;
}

static int fleet_put(sl_protect *p, sl_batch *fb, size_t j, int64_t hits, int64_t limit,
                     int64_t duration, uint64_t lease)
{
    return lease_put(p, fb, j, NULL, 0, hits, limit, duration, lease);
}

/* A fleet item appended to *fbp, a batch sized for one per call item (made on first use: in
 * host's arena, or on the heap). NULL: out of memory. */
static sl_request *fleet_add(sl_protect *p, sl_batch *host, sl_batch **fbp, fleet_item **fip,
                             size_t cap, size_t i, int64_t hits, int64_t limit,
                             int64_t duration, uint64_t lease, bool heap)
{
    sl_batch *fb = *fbp;
    if (!fb) {
        fb = heap ? malloc(sizeof *fb) : sl_batch_alloc(host, sizeof *fb);
        fleet_item *fi = heap ? NULL : sl_batch_alloc(host, cap * sizeof *fi + 1);
        if (!fb || (!heap && !fi)) {
            if (heap)
                free(fb);
            return NULL;
        }
        sl_batch_init(fb, 0);
        if (sl_batch_alloc_items(fb, cap)) {
            sl_batch_free(fb);
            if (heap)
                free(fb);
            return NULL;
        }
        fb->n = 0;
        *fbp = fb;
        if (fip)
            *fip = fi;
    }
    size_t j = fb->n;
    if (fleet_put(p, fb, j, hits, limit, duration, lease))
        return NULL;
    if (fip && *fip)
        (*fip)[j] = (fleet_item){.item = (uint32_t)i, .release = hits < 0};
    fb->n++;
    return &fb->reqs[j];
}

int sl_gubprotect_lease_batch(sl_protect *p, sl_batch *fb, const sl_gubprotect_lease *items,
                              size_t n)
{
    int rc = sl_batch_alloc_items(fb, n);
    if (rc)
        return rc;
    fb->n = n;
    for (size_t j = 0; j < n; j++) {
        const sl_gubprotect_lease *l = &items[j];
        if ((rc = lease_put(p, fb, j, l->res, l->res_len, l->hits, l->limit, l->duration_ms,
                            l->lease)))
            return rc;
    }
    return 0;
}

int sl_gubprotect_fleet_item(sl_protect *p, sl_batch *fb, int64_t hits, int64_t limit,
                             int64_t duration_ms, uint64_t lease)
{
    sl_gubprotect_lease l = {.hits = hits, .limit = limit, .duration_ms = duration_ms,
                             .lease = lease};
    return sl_gubprotect_lease_batch(p, fb, &l, 1);
}

sl_batch *sl_gubprotect_lease_release(sl_protect *p, uint64_t fleet, const char *res,
                                      size_t rlen, uint64_t conc, int64_t now)
{
    sl_gubprotect_lease l[2];
    size_t n = 0;
    if (fleet && sl_protect_fleet_give_local(p, fleet, now) != 1)
        l[n++] = (sl_gubprotect_lease){.hits = -1, .duration_ms = 1, .lease = fleet};
    if (conc && res && sl_protect_conc_give_local(p, res, rlen, conc, now) != 1)
        l[n++] = (sl_gubprotect_lease){.res = res, .res_len = rlen, .hits = -1, .duration_ms = 1,
                                       .lease = conc};
    if (!n)
        return NULL;
    sl_batch *g = malloc(sizeof *g);
    if (!g)
        return NULL; /* out of memory: the leases run out after their duration */
    sl_batch_init(g, 0);
    if (sl_gubprotect_lease_batch(p, g, l, n)) {
        sl_batch_free(g);
        free(g);
        return NULL;
    }
    return g;
}

sl_batch *sl_gubprotect_fleet_release(sl_protect *p, uint64_t lease, int64_t now)
{
    return sl_gubprotect_lease_release(p, lease, NULL, 0, 0, now);
}

int sl_gubprotect_fleet_released(sl_protect *p, const sl_response *r)
{
    int rc = !r->error ? 1 : !strcmp(r->error, sl_conc_err_not_found) ? 0 : -1;
    if (rc >= 0)
        sl_protect_lease_count(p, rc ? SL_PROTECT_LEASE_RELEASED : SL_PROTECT_LEASE_NOT_FOUND);
    return rc;
}

/* Give a fleet lease back: this node's fallback key first, else (a lease of the owner) a release
 * in the give-back batch. */
static void fleet_give(sl_protect *p, sl_gubprotect_call *c, uint64_t lease, int64_t now)
{
    if (!lease || sl_protect_fleet_give_local(p, lease, now) == 1)
        return;
    if (!fleet_add(p, NULL, &c->giveback, NULL, c->n, 0, -1, 0, 1, lease, true))
        return; /* out of memory: the lease runs out after its duration */
}

static void answer_item(sl_batch *b, size_t i, sl_status status, int64_t limit, int64_t remaining,
                        int64_t reset_time)
{
    sl_batch_answer(b, i, NULL);
    sl_response *r = &b->resps[i];
    r->status = status;
    r->limit = limit;
    r->remaining = remaining;
    r->reset_time = reset_time;
}

static void log_item_shadow(sl_protect *p, const sl_batch *b, size_t i, sl_ladder_limiter lim)
{
    if (!sl_protect_log_ok(p, SL_LOG_INFO))
        return;
    const sl_request *q = &b->reqs[i];
    const char *rid = sl_batch_meta_get(&b->req_meta[i], META_REQ_ID);
    char f_rid[SL_LOG_FIELD_BUF], f_name[SL_LOG_FIELD_BUF], f_key[SL_LOG_FIELD_BUF];
    sl_log_info(sl_protect_cfg(p)->log,
                "would_reject limiter=%s req_id=%s name=%s unique_key=%s (shadow mode: admitted)",
                sl_ladder_name(lim), sl_log_field(f_rid, rid, rid ? strlen(rid) : 0),
                sl_log_field(f_name, q->name, q->name_len),
                sl_log_field(f_key, q->unique_key, q->unique_key_len));
}

static int item_priority(const sl_protect_config *pc, const sl_batch *b, size_t i)
{
    const char *pm = sl_batch_meta_get(&b->req_meta[i], META_PRIORITY);
    return pm ? sl_priority_from_name(pm, strlen(pm)) : (int)pc->default_priority;
}

/* A peer call: the entry node applied everything else; only the lease ids matter here. */
static void peer_leases(sl_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        sl_request *q = &b->reqs[i];
        if (b->answered[i] || q->algorithm != SL_CONCURRENCY || q->hits > 0)
            continue;
        const char *t = sl_batch_meta_get(&b->req_meta[i], META_LEASE);
        if (q->hits == 0 && !t)
            continue; /* a peek */
        if (!t || (strlen(t) >= SL_CONC_ID_HEX && !sl_leaseid_parse_one(t, &q->lease_id)))
            continue; /* without one, the engine says a release needs it */
        sl_batch_answer(b, i, ERR_LEASE);
    }
}

/* A CONCURRENCY release always runs, whatever the switches say: it only frees capacity. The
 * fleet lease goes back here, the item's own to the engine through the router. */
static void release_item(sl_protect *p, sl_batch *b, size_t i, int64_t now,
                         sl_gubprotect_call **call)
{
    sl_request *q = &b->reqs[i];
    const char *t = sl_batch_meta_get(&b->req_meta[i], META_LEASE);
    uint64_t c = 0, f = 0;
    char dummy[1];
    size_t dl;
    if (!t)
        return; /* without one, the engine says a release needs it */
    if (sl_leaseid_parse(t, strlen(t), &c, &f, dummy, 0, &dl)) {
        sl_batch_answer(b, i, ERR_LEASE);
        return;
    }
    if (f && sl_protect_fleet_give_local(p, f, now) != 1) {
        /* the owner's lease: released through the fleet batch */
        sl_gubprotect_call *st = call_state(b, call);
        if (!st || !fleet_add(p, b, &st->fb, &st->fi, b->n, i, -1, 0, 1, f, false)) {
            sl_batch_answer(b, i, ERR_NOMEM);
            return;
        }
    }
    if (!c) /* only a fleet lease was held */
        answer_item(b, i, SL_UNDER_LIMIT, q->limit, q->limit, now);
    else
        q->lease_id = c;
}

/* A CONCURRENCY renewal (hits 0 with "lease_id") runs like a release, whatever the switches say:
 * the engine extends the item's own lease to now + duration (an unknown or expired one is its
 * not-found error). A fleet lease in the token is not renewed: it keeps its own duration. */
static void renew_item(sl_batch *b, size_t i)
{
    sl_request *q = &b->reqs[i];
    const char *t = sl_batch_meta_get(&b->req_meta[i], META_LEASE);
    uint64_t c = 0, f = 0;
    char dummy[1];
    size_t dl;
    if (sl_leaseid_parse(t, strlen(t), &c, &f, dummy, 0, &dl) || !c) {
        sl_batch_answer(b, i, ERR_LEASE);
        return;
    }
    q->lease_id = c;
}

/* Each item's priority (a malformed one answers the item), and the call's: its most important
 * item's, which the worker shedder judges the whole call by. */
static int call_priority(const sl_protect_config *pc, sl_batch *b)
{
    int call_prio = SL_PRIORITY_COUNT;
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        int pr = item_priority(pc, b, i);
        if (pr < 0) {
            sl_batch_answer(b, i, ERR_PRIORITY);
            continue;
        }
        if (pr < call_prio)
            call_prio = pr;
    }
    return call_prio == SL_PRIORITY_COUNT ? (int)pc->default_priority : call_prio;
}

/* The item's own limiter through the ladder, switched by the item's name: false when the item
 * is answered (admitted by a switch that is off, or out of memory); shadow mode (the switch's,
 * the item's behavior, or the worker shedder's) is flagged for end(). */
static bool item_switch(sl_plan *pl, sl_batch *b, size_t i, bool quiet, bool shed_shadow,
                        int64_t now, sl_gubprotect_call **call)
{
    const sl_request *q = &b->reqs[i];
    sl_meta *rm = &b->resp_meta[i];
    sl_killswitch_mode m = quiet ? SL_KILLSWITCH_ENFORCE
                                 : sl_ladder_mode(pl->ks, q->name, q->name_len);
    sl_ladder_limiter lim = pl->global == SL_KILLSWITCH_KILLED ? SL_LADDER_ALL
                            : q->algorithm == SL_CONCURRENCY  ? SL_LADDER_CONC
                                                              : SL_LADDER_RATE;
    if (!sl_ladder_runs(&pl->ladder, lim, m)) {
        answer_item(b, i, SL_UNDER_LIMIT, q->limit, q->limit, now);
        sl_batch_meta_add_ref(b, rm, META_KILLSWITCH, "on");
        return false;
    }
    if (m == SL_KILLSWITCH_SHADOW || (q->behavior & SL_SHADOW) || shed_shadow) {
        sl_gubprotect_call *c = call_state(b, call);
        if (!c) {
            sl_batch_answer(b, i, ERR_NOMEM);
            return false;
        }
        c->flags[i] |= F_SHADOW;
        if (shed_shadow)
            sl_batch_meta_add_ref(b, rm, META_SHADOW, "shed");
    }
    return true;
}

/* The fleet shedder for a CONCURRENCY acquire: a non-critical one holds a fleet lease, an item
 * of the fleet batch (the switch is asked before the priority: a critical item counts a fleet
 * that is switched off, as it always did). */
static void item_fleet(sl_plan *pl, sl_batch *b, size_t i, sl_gubprotect_call **call)
{
    sl_plan_lease fl;
    if (!sl_plan_fleet(pl, &fl) ||
        item_priority(sl_protect_cfg(pl->p), b, i) == SL_PRIORITY_CRITICAL)
        return;
    sl_gubprotect_call *c = call_state(b, call);
    if (!c ||
        !fleet_add(pl->p, b, &c->fb, &c->fi, b->n, i, 1, fl.limit, fl.duration_ms, 0, false)) {
        sl_batch_answer(b, i, ERR_NOMEM);
        return;
    }
    c->fleet_limit = fl.limit;
    c->fleet_duration = fl.duration_ms;
    c->fleet_mode = fl.mode;
}

int sl_gubprotect_begin(sl_protect *p, int worker, sl_batch *b, bool peer, int64_t now,
                        sl_gubprotect_call **call, sl_gubprotect_verdict *v)
{
    *call = NULL;
    v->shed = false;
    v->retry_after_s = 0;
    v->message[0] = 0;
    if (peer) {
        peer_leases(b);
        return 0;
    }
    sl_plan pl; /* the ladder's walk, as /attempt's (protect/plan.h) */
    sl_plan_start(&pl, p, worker);
    const bool quiet = sl_killswitch_snap_quiet(pl.ks);
    int call_prio = call_priority(sl_protect_cfg(p), b);

    /* the worker shedder sheds the whole call; in shadow mode its items say so */
    sl_plan_verdict shed = sl_plan_shed(&pl, call_prio);
    if (shed == SL_PLAN_REJECT) {
        v->shed = true;
        v->retry_after_s = (sl_protect_shed_retry_ms(p) + 999) / 1000;
        sl_protect_shed_reason(p, worker, (sl_priority)call_prio, v->message, sizeof v->message);
        return 1;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        const sl_request *q = &b->reqs[i];
        const bool conc = q->algorithm == SL_CONCURRENCY;
        if (conc && q->hits < 0)
            release_item(p, b, i, now, call);
        else if (conc && q->hits == 0 && sl_batch_meta_get(&b->req_meta[i], META_LEASE))
            renew_item(b, i);
        else if (item_switch(&pl, b, i, quiet, shed == SL_PLAN_SHADOW, now, call) && conc &&
                 q->hits > 0)
            item_fleet(&pl, b, i, call);
    }
    return 0;
}

/* The lease an answer names: the engine's (decided here) or the owner's (metadata). */
static uint64_t answer_lease(const sl_batch *b, size_t i)
{
    uint64_t c = b->resps[i].lease_id;
    if (!c) {
        const char *t = sl_batch_meta_get(&b->resp_meta[i], META_LEASE);
        if (t && strlen(t) == SL_CONC_ID_HEX)
            sl_leaseid_parse_one(t, &c);
    }
    return c;
}

/* "lease_id" for an item: the engine's id (here or from the owner's answer) and the fleet's. */
static void set_lease_meta(sl_batch *b, size_t i, uint64_t fleet)
{
    uint64_t c = answer_lease(b, i);
    if (!c && !fleet)
        return;
    char tok[SL_LEASEID_PAIR_SIZE];
    if (fleet)
        sl_leaseid_format(tok, sizeof tok, c, fleet, NULL, 0);
    else
        sl_conc_format_id(c, tok);
    sl_batch_meta_set(b, &b->resp_meta[i], META_LEASE, tok);
}

/* The owner's answer to lease item j of fb, of the fleet (res NULL) or of a resource's
 * concurrency limit: as sl_gubprotect_fleet_taken. */
static bool lease_taken(sl_protect *p, const sl_batch *fb, size_t j, const char *res, size_t rlen,
                        int64_t *limit, int64_t duration_ms, int nodes, int64_t now,
                        sl_response *r)
{
    const sl_response *fr = &fb->resps[j];
    *r = *fr;
    r->lease_id = answer_lease(fb, j);
    bool local = fr->error || sl_batch_meta_get(&fb->resp_meta[j], META_FAIL_OPEN);
    if (local) {
        /* the owner could not answer: give back what --fail-open took here on its key, and
         * take from this node's share instead */
        bool took = !fr->error && fr->status == SL_UNDER_LIMIT;
        *limit = sl_protect_share(*limit, nodes > 0 ? (uint32_t)nodes : 1);
        if (res) {
            if (took)
                sl_protect_conc_give(p, res, rlen, r->lease_id, now);
            sl_protect_conc_take_local(p, res, rlen, *limit, duration_ms, now, r);
        } else {
            if (took)
                sl_protect_fleet_give(p, r->lease_id, now);
            sl_protect_fleet_take_local(p, *limit, duration_ms, now, r);
        }
    } else if (!r->error && r->status == SL_UNDER_LIMIT) {
        sl_protect_lease_count(p, SL_PROTECT_LEASE_ACQUIRED);
    }
    return local;
}

bool sl_gubprotect_fleet_taken(sl_protect *p, const sl_batch *fb, size_t j, int64_t *limit,
                               int64_t duration_ms, int nodes, int64_t now, sl_response *r)
{
    return lease_taken(p, fb, j, NULL, 0, limit, duration_ms, nodes, now, r);
}

bool sl_gubprotect_conc_taken(sl_protect *p, const sl_batch *fb, size_t j, const char *res,
                              size_t rlen, int64_t *limit, int64_t duration_ms, int nodes,
                              int64_t now, sl_response *r)
{
    return lease_taken(p, fb, j, res, rlen, limit, duration_ms, nodes, now, r);
}

sl_batch *sl_gubprotect_fleet_batch(sl_gubprotect_call *call)
{
    return call && call->fb && call->fb->n ? call->fb : NULL;
}

void sl_gubprotect_fleet_done(sl_protect *p, sl_gubprotect_call *c, sl_batch *b, int nodes,
                              int64_t now)
{
    sl_batch *fb = c->fb;
    sl_ladder l;
    sl_protect_ladder(p, &l);
    for (size_t j = 0; j < fb->n; j++) {
        size_t i = c->fi[j].item;
        const sl_response *fr = &fb->resps[j];
        if (c->fi[j].release) {
            sl_protect_lease_count(p, !fr->error ? SL_PROTECT_LEASE_RELEASED
                                                 : SL_PROTECT_LEASE_NOT_FOUND);
            continue;
        }
        sl_response r;
        int64_t limit = c->fleet_limit;
        bool local = sl_gubprotect_fleet_taken(p, fb, j, &limit, c->fleet_duration, nodes, now, &r);
        uint64_t lease = r.lease_id;
        const sl_request *q = &b->reqs[i];
        sl_meta *rm = &b->resp_meta[i];
        if (r.error) {
            const char *e = sl_batch_strndup(b, r.error, strlen(r.error));
            sl_batch_answer(b, i, e ? e : ERR_NOMEM);
            continue;
        }
        if (local)
            sl_batch_meta_add_ref(b, rm, META_FLEET, "local");
        if (r.status == SL_OVER_LIMIT) {
            if (!sl_ladder_rejects(&l, SL_LADDER_FLEET, c->fleet_mode)) {
                sl_who_note(sl_protect_who(p), "fleet", 5, SL_WHO_WOULD_REJECT, q->unique_key,
                            q->unique_key_len, now);
                log_item_shadow(p, b, i, SL_LADDER_FLEET);
                sl_batch_meta_add_ref(b, rm, META_SHADOW, "fleet");
                continue;
            }
            sl_who_note(sl_protect_who(p), "fleet", 5, SL_WHO_SHED, q->unique_key,
                        q->unique_key_len, now);
            answer_item(b, i, SL_OVER_LIMIT, limit, 0, r.reset_time);
            sl_batch_meta_add_ref(b, rm, META_SHED, "fleet");
            sl_batch_meta_add_ref(b, rm, META_REASON,
                                  "shed: fleet capacity is reserved for critical calls");
            continue;
        }
        c->fleet[i] = lease;
    }
}

sl_batch *sl_gubprotect_giveback(sl_gubprotect_call *call)
{
    sl_batch *g = call ? call->giveback : NULL;
    if (call)
        call->giveback = NULL;
    return g;
}

void sl_gubprotect_giveback_done(sl_protect *p, sl_batch *g)
{
    for (size_t j = 0; j < g->n; j++)
        sl_protect_lease_count(p, !g->resps[j].error ? SL_PROTECT_LEASE_RELEASED
                                                     : SL_PROTECT_LEASE_NOT_FOUND);
    sl_batch_free(g);
    free(g);
}

void sl_gubprotect_end(sl_protect *p, sl_gubprotect_call *call, sl_batch *b, bool peer,
                       int64_t now)
{
    sl_ladder l;
    sl_protect_ladder(p, &l);
    if (call && call->fb) {
        sl_batch_free(call->fb);
        call->fb = NULL;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        sl_response *r = &b->resps[i];
        const sl_request *q = &b->reqs[i];
        const bool conc = q->algorithm == SL_CONCURRENCY;
        if (peer) {
            if (r->lease_id)
                set_lease_meta(b, i, 0);
            continue;
        }
        const bool mine = call && i < call->n;
        uint64_t fleet = mine ? call->fleet[i] : 0;
        if (r->error) {
            fleet_give(p, call, fleet, now);
            continue;
        }
        if (r->status == SL_OVER_LIMIT) {
            sl_ladder_limiter lim = conc ? SL_LADDER_CONC : SL_LADDER_RATE;
            sl_killswitch_mode m = mine && (call->flags[i] & F_SHADOW) ? SL_KILLSWITCH_SHADOW
                                                                       : SL_KILLSWITCH_ENFORCE;
            bool stands = sl_ladder_rejects(&l, lim, m);
            if (stands || m == SL_KILLSWITCH_SHADOW)
                sl_who_note(sl_protect_who(p), q->name, q->name_len,
                            stands ? SL_WHO_REJECTED : SL_WHO_WOULD_REJECT, q->unique_key,
                            q->unique_key_len, now);
            if (!stands) {
                r->status = SL_UNDER_LIMIT;
                sl_batch_meta_set(b, &b->resp_meta[i], META_SHADOW, sl_ladder_name(lim));
                log_item_shadow(p, b, i, lim);
            } else {
                sl_batch_meta_add_ref(b, &b->resp_meta[i], META_REASON,
                                      conc ? "concurrency limit reached: too many calls in flight"
                                           : "rate limit exceeded");
                fleet_give(p, call, fleet, now);
                fleet = 0;
            }
        }
        if (conc && q->hits > 0)
            set_lease_meta(b, i, fleet);
    }
}

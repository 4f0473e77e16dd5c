/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimtable: the member table of SWIM (gossip/swim.h; the protocol that drives it is
 * gossip/swim.c, the state both share is gossip/swim_int.h). This file holds the members, their
 * suspicion timers (Lifeguard's dynamic timeout, shortened by independent confirmations), the
 * dissemination queue (least-sent first, each update dropped after λ·log N sends) and the rules
 * that merge news about a member:
 *
 *   news about m          m unknown      m alive/suspect (inc i)        m dead/left (inc i)
 *   alive   inc j         add            j > i: alive, take addr/meta    j > i: alive again
 *   suspect inc j         ignore         j >= i: suspect (confirm if     ignore
 *                                        already suspect at j)
 *   dead/left inc j       ignore         j >= i: dead/left               ignore
 *
 * News about ourselves: anything that differs from our own state is contradicted (unless we are
 * leaving): an ALIVE at a higher incarnation or with another address or metadata, a suspect, dead
 * or left at an incarnation >= ours, by announcing ourselves alive at that incarnation + 1
 * (saturating at UINT32_MAX); a suspect, dead or left at a lower one means its sender missed that
 * announcement, so it is queued again (and rides first on the ack of a ping that carried it).
 * At UINT32_MAX on both sides only first-hand news (from the member itself) changes a member:
 * see swim.h "trust".
 * Every accepted change is queued once for piggybacking; a later change about the same member
 * replaces the queued one. It also answers the reading calls (members, version, stats).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/swim_int.h"

static const char *const drop_names[SL_SWIM_DROP_NREASONS] = {
    "malformed", "oversize", "version", "wrong_node", "unexpected", "queue_full", "table_full",
    "decrypt", "meta", "unknown_target", "sender", "replay", "stale", "rate_limited"};

const char *sl_swim_drop_name(sl_swim_drop d)
{
    return (unsigned)d < SL_SWIM_DROP_NREASONS ? drop_names[d] : "unknown";
}

/* --- small helpers */

static uint64_t name_hash(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a: only to tell confirmers apart */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h | 1;
}

static void to_public(const mem *m, const sl_swim *s, sl_swim_member *out)
{
    out->name = m->name;
    out->addr = m->addr;
    out->meta = m->meta;
    out->meta_len = m->meta_len;
    out->status = (sl_member_status)m->status;
    out->incarnation = m->inc;
    out->is_self = m == s->self;
}

void sl_swimint_changed(sl_swim *s, mem *m, int old)
{
    s->version++;
    if (s->c.cb.on_change) {
        sl_swim_member pm;
        to_public(m, s, &pm);
        s->c.cb.on_change(s->c.cb.ctx, &pm, old);
    }
}

void sl_swimint_set_status(sl_swim *s, mem *m, uint8_t st, uint64_t now)
{
    if (m->status != st) {
        s->count[m->status]--;
        s->count[st]++;
        m->status = st;
        m->since = now;
    }
}

/* --- dissemination queue */

void sl_swimint_queue(sl_swim *s, mem *m, const char *from)
{
    snprintf(m->bc_from, sizeof m->bc_from, "%s", from ? from : "");
    m->bc_sent = 0;
    if (m->bc_pos == NONE) {
        m->bc_pos = s->nbc;
        s->bcq[s->nbc++] = m;
    }
}

static void unqueue(sl_swim *s, mem *m)
{
    if (m->bc_pos == NONE)
        return;
    size_t i = m->bc_pos;
    s->bcq[i] = s->bcq[--s->nbc];
    s->bcq[i]->bc_pos = i;
    m->bc_pos = NONE;
}

static unsigned retransmit_limit(const sl_swim *s)
{
    double n = live_count(s);
    unsigned l = s->c.retransmit_mult * (unsigned)ceil(log10(n + 1));
    return l ? l : 1;
}

void sl_swimint_to_update(const mem *m, const char *from, sl_swimwire_update *u)
{
    u->status = m->status;
    u->incarnation = m->inc;
    u->name = (sl_swimwire_str){m->name, strlen(m->name)};
    u->addr = (sl_swimwire_str){m->addr, strlen(m->addr)};
    u->from = (sl_swimwire_str){from, strlen(from)};
    u->meta = m->meta;
    u->meta_len = m->status == SL_MEMBER_ALIVE ? m->meta_len : 0;
}

/* Append queued updates, least sent first, while they fit; drop those sent often enough. */
size_t sl_swimint_piggyback(sl_swim *s, uint8_t *buf, size_t len, const mem *skip)
{
    if (!s->nbc)
        return len;
    /* insertion sort by times sent: the queue is short and nearly sorted */
    for (size_t i = 1; i < s->nbc; i++) {
        mem *x = s->bcq[i];
        size_t j = i;
        while (j > 0 && s->bcq[j - 1]->bc_sent > x->bc_sent) {
            s->bcq[j] = s->bcq[j - 1];
            s->bcq[j]->bc_pos = j;
            j--;
        }
        s->bcq[j] = x;
        x->bc_pos = j;
    }
    unsigned limit = retransmit_limit(s);
    for (size_t i = 0; i < s->nbc; i++) {
        mem *m = s->bcq[i];
        if (m == skip)
            continue;
        sl_swimwire_update u;
        sl_swimint_to_update(m, m->bc_from, &u);
        int r = sl_swimwire_put_update(buf, SL_SWIMWIRE_MAX_UDP, len, &u);
        if (r < 0)
            break;
        len = (size_t)r;
        m->bc_sent++;
        s->st.updates_sent++;
    }
    for (size_t i = 0; i < s->nbc;) {
        mem *m = s->bcq[i];
        if (m->bc_sent >= limit)
            unqueue(s, m);
        else
            i++;
    }
    return len;
}

/* --- the member table */

mem *sl_swimint_add_member(sl_swim *s, const sl_swimwire_update *u, uint64_t now)
{
    if (s->n >= s->c.max_members) {
        s->st.dropped[SL_SWIM_DROP_TABLE_FULL]++;
        return NULL;
    }
    mem *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    memcpy(m->name, u->name.p, u->name.len);
    memcpy(m->addr, u->addr.p, u->addr.len);
    if (u->meta_len)
        memcpy(m->meta, u->meta, u->meta_len);
    m->meta_len = u->meta_len;
    m->inc = u->incarnation;
    m->status = SL_MEMBER_ALIVE;
    m->since = now;
    m->bc_pos = NONE;
    if (sl_strmap_put(&s->byname, 0, m->name, u->name.len, &m, NULL) < 0) {
        free(m);
        return NULL;
    }
    /* a random place at or after the probe cursor, so a newcomer is probed within a round */
    size_t lo = s->probe_pos < s->n ? s->probe_pos : s->n;
    size_t j = lo + (size_t)(rnd(s) % (s->n - lo + 1));
    s->v[s->n] = m;
    m->idx = s->n;
    if (j != s->n) {
        mem *o = s->v[j];
        s->v[j] = m;
        m->idx = j;
        s->v[s->n] = o;
        o->idx = s->n;
    }
    s->n++;
    s->count[SL_MEMBER_ALIVE]++;
    sl_swimint_changed(s, m, -1);
    return m;
}

void sl_swimint_remove_member(sl_swim *s, mem *m)
{
    unqueue(s, m);
    sl_strmap_remove(&s->byname, 0, m->name, strlen(m->name));
    size_t i = m->idx;
    s->v[i] = s->v[--s->n];
    s->v[i]->idx = i;
    s->count[m->status]--;
    s->version++;
    free(m);
}

/* --- suspicion */

static uint64_t suspicion_timeout(const sl_swim *s, unsigned confirmations)
{
    double n = live_count(s);
    double scale = n > 10 ? log10(n) : 1.0;
    double min = s->c.suspicion_min_mult * scale * s->c.probe_interval_ms;
    double max = s->c.suspicion_max_mult * min;
    /* K: confirmations expected, at most the members other than us and the suspect */
    double k = s->c.indirect_probes;
    if (n - 2 < k)
        k = n > 2 ? n - 2 : 0;
    if (k < 1)
        return (uint64_t)min;
    double c = confirmations < k ? confirmations : k;
    double t = max - (max - min) * log(c + 1) / log(k + 1);
    return (uint64_t)(t < min ? min : t);
}

void sl_swimint_suspect(sl_swim *s, mem *m, uint32_t inc, const char *from, size_t from_len,
                        uint64_t now)
{
    uint64_t fh = from_len ? name_hash(from, from_len) : 0;
    if (m->status == SL_MEMBER_SUSPECT && inc == m->inc) {
        if (!fh || m->n_confirm >= MAX_CONFIRM)
            return;
        for (unsigned i = 0; i < m->n_confirm; i++)
            if (m->confirm[i] == fh)
                return;
        m->confirm[m->n_confirm++] = fh;
        /* independent confirmations shorten the timer (counted after the first accuser) */
        m->susp_deadline = m->susp_start + suspicion_timeout(s, m->n_confirm - 1);
        if (m->n_confirm - 1 <= s->c.indirect_probes) {
            char f[SL_SWIM_MAX_NAME + 1];
            memcpy(f, from, from_len);
            f[from_len] = '\0';
            sl_swimint_queue(s, m, f);
        }
        return;
    }
    int old = m->status;
    m->inc = inc;
    if (old != SL_MEMBER_SUSPECT) {
        sl_swimint_set_status(s, m, SL_MEMBER_SUSPECT, now);
        m->susp_start = now;
        m->n_confirm = 0;
    }
    if (fh && m->n_confirm < MAX_CONFIRM)
        m->confirm[m->n_confirm++] = fh;
    m->susp_deadline =
        m->susp_start + suspicion_timeout(s, m->n_confirm ? m->n_confirm - 1 : 0);
    char f[SL_SWIM_MAX_NAME + 1];
    if (from_len)
        memcpy(f, from, from_len);
    f[from_len] = '\0';
    sl_swimint_queue(s, m, f);
    if (old != SL_MEMBER_SUSPECT)
        sl_swimint_changed(s, m, old);
}

static uint32_t inc_after(uint32_t inc)
{
    return inc == UINT32_MAX ? UINT32_MAX : inc + 1; /* saturate: a wrap to 0 would lose */
}

static void refute(sl_swim *s, uint32_t inc, int health)
{
    if (s->leaving)
        return;
    s->self->inc = inc_after(inc);
    s->st.refutations++;
    if (health)
        lhm_add(s, 1);
    sl_swimint_queue(s, s->self, "");
    s->version++;
}

static int same_str(const sl_swimwire_str *a, const char *b)
{
    return a->len == strlen(b) && memcmp(a->p, b, a->len) == 0;
}

/* --- merging news */

/* Whether u is first-hand: the member itself sent it (see swim.h "trust"). */
static int first_hand(const sl_swimwire_update *u, const sl_swimint_origin *o)
{
    if (!o || !o->from || !same_str(&u->addr, o->from))
        return 0;
    if (o->name_len && (o->name_len != u->name.len || memcmp(o->name, u->name.p, o->name_len)))
        return 0;
    return 1;
}

/* Take u's address and metadata (and alive) for m; tell if anything changed. */
static void take_alive(sl_swim *s, mem *m, const sl_swimwire_update *u, uint64_t now)
{
    int old = m->status;
    int moved = !same_str(&u->addr, m->addr);
    int remeta = u->meta_len != m->meta_len ||
                 (u->meta_len && memcmp(u->meta, m->meta, u->meta_len));
    m->inc = u->incarnation;
    memcpy(m->addr, u->addr.p, u->addr.len);
    m->addr[u->addr.len] = '\0';
    if (u->meta_len)
        memcpy(m->meta, u->meta, u->meta_len);
    m->meta_len = u->meta_len;
    sl_swimint_set_status(s, m, SL_MEMBER_ALIVE, now);
    sl_swimint_queue(s, m, "");
    if (old != SL_MEMBER_ALIVE || moved || remeta)
        sl_swimint_changed(s, m, old);
}

/* News about ourselves: anything that differs from our own state is contradicted. */
static void apply_self(sl_swim *s, const sl_swimwire_update *u)
{
    mem *m = s->self;
    if (s->leaving)
        return;
    if (u->status == SL_MEMBER_ALIVE) {
        int same = same_str(&u->addr, m->addr) && u->meta_len == m->meta_len &&
                   (!u->meta_len || memcmp(u->meta, m->meta, u->meta_len) == 0);
        if (u->incarnation < m->inc || (same && u->incarnation == m->inc))
            return; /* older news, or ours exactly: nothing to say */
        s->st.refuted_news++;
        /* someone announces us elsewhere, or with other metadata, or above our incarnation */
        refute(s, u->incarnation, 0);
        return;
    }
    s->st.refuted_news++;
    if (u->incarnation >= m->inc)
        refute(s, u->incarnation, u->status == SL_MEMBER_SUSPECT);
    else
        /* stale: the sender missed our refutation, say it again */
        sl_swimint_queue(s, s->self, "");
}

/* Merge one piece of news (see the table at the top). */
static void apply(sl_swim *s, const sl_swimwire_update *u, const sl_swimint_origin *o,
                  uint64_t now)
{
    s->st.updates_received++;
    mem *m = find(s, u->name.p, u->name.len);
    if (m == s->self) {
        apply_self(s, u);
        return;
    }
    /* at the ceiling, only the member itself can change what we hold (swim.h "trust") */
    int saturated = m && m->inc == UINT32_MAX && u->incarnation == UINT32_MAX;
    switch (u->status) {
    case SL_MEMBER_ALIVE:
        if (!m) {
            m = sl_swimint_add_member(s, u, now);
            if (m)
                sl_swimint_queue(s, m, "");
            return;
        }
        if (u->incarnation > m->inc)
            take_alive(s, m, u, now);
        else if (saturated && first_hand(u, o))
            take_alive(s, m, u, now);
        return;
    case SL_MEMBER_SUSPECT:
        if (saturated)
            return;
        if (m && (m->status == SL_MEMBER_ALIVE || m->status == SL_MEMBER_SUSPECT) &&
            u->incarnation >= m->inc)
            sl_swimint_suspect(s, m, u->incarnation, u->from.p, u->from.len, now);
        return;
    default:
        if (saturated && !(u->status == SL_MEMBER_LEFT && first_hand(u, o)))
            return;
        if (m && (m->status == SL_MEMBER_ALIVE || m->status == SL_MEMBER_SUSPECT ||
                  (saturated && m->status != u->status)) &&
            u->incarnation >= m->inc) {
            int old = m->status;
            m->inc = u->incarnation;
            sl_swimint_set_status(s, m, u->status, now);
            sl_swimint_queue(s, m, "");
            sl_swimint_changed(s, m, old);
        }
        return;
    }
}

int sl_swimint_apply_all(sl_swim *s, const sl_swimwire_msg *msg, const sl_swimint_origin *o,
                         uint64_t now)
{
    const uint8_t *cur = msg->updates;
    if (s->c.cb.check_member)
        for (unsigned i = 0; i < msg->n_updates; i++) {
            sl_swimwire_update u;
            sl_swimwire_next_update(&cur, &u);
            if (s->c.cb.check_member(s->c.cb.ctx, u.addr.p, u.addr.len, u.meta, u.meta_len) < 0) {
                s->st.dropped[SL_SWIM_DROP_META]++;
                return -EBADMSG;
            }
        }
    cur = msg->updates;
    for (unsigned i = 0; i < msg->n_updates; i++) {
        sl_swimwire_update u;
        sl_swimwire_next_update(&cur, &u);
        apply(s, &u, o, now);
    }
    return 0;
}

/* --- reading */

size_t sl_swim_member_count(const sl_swim *s)
{
    return s->n;
}

int sl_swim_member_at(const sl_swim *s, size_t i, sl_swim_member *out)
{
    if (i >= s->n)
        return -ENOENT;
    to_public(s->v[i], s, out);
    return 0;
}

int sl_swim_member_find(const sl_swim *s, const char *name, sl_swim_member *out)
{
    mem *m = find(s, name, strlen(name));
    if (!m)
        return -ENOENT;
    to_public(m, s, out);
    return 0;
}

uint64_t sl_swim_version(const sl_swim *s)
{
    return s->version;
}

void sl_swim_get_stats(const sl_swim *s, sl_swim_stats *out)
{
    *out = s->st;
    memcpy(out->members, s->count, sizeof out->members);
    out->lhm = s->lhm;
}

const char *sl_swim_name(const sl_swim *s)
{
    return s->self->name;
}

uint32_t sl_swim_incarnation(const sl_swim *s)
{
    return s->self->inc;
}

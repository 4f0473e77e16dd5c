/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swim: the SWIM + Lifeguard protocol state machine (what it does and why is in swim.h; the
 * member table, the merge rules and the dissemination queue are gossip/swimtable.c, the state
 * both share is gossip/swim_int.h). This file builds and frees the state, runs the probe round
 * (a direct ping, then k ping-req relays, Lifeguard's NACKs and local health multiplier; a probe
 * of a suspect carries its suspicion so it can refute), answers pings (a prober we hold dead
 * learns it first; a prober we do not know gets a push/pull, at most once a probe interval) and
 * relays, turns expired suspicions into deaths, gossips, joins through the seeds, exchanges full
 * state by push/pull, reaps the long dead, and leaves.
 */
#include "gossip/swim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/swim_int.h"

/* --- small helpers */

static int valid_name(const char *p, size_t n)
{
    if (n == 0 || n > SL_SWIM_MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f)
            return 0;
    return 1;
}

/* --- sending */

/* Send one datagram of `type`, a directed update first (news the receiver needs about itself),
 * then piggybacked updates. */
static void send_pkt(sl_swim *s, const char *addr, sl_swimwire_type type, uint32_t seq,
                     const char *target, const char *target_addr, mem *directed)
{
    int r = sl_swimwire_put_head(s->pkt, sizeof s->pkt, type, seq, 0, target, target_addr,
                                 s->self->name);
    if (r < 0)
        return;
    size_t len = (size_t)r;
    if (directed) {
        sl_swimwire_update u;
        sl_swimint_to_update(directed, "", &u);
        r = sl_swimwire_put_update(s->pkt, sizeof s->pkt, len, &u);
        if (r > 0)
            len = (size_t)r;
    }
    len = sl_swimint_piggyback(s, s->pkt, len, directed);
    if (type == SL_SWIMWIRE_GOSSIP && len == SL_SWIMWIRE_HEADER)
        return;  /* nothing to say */
    s->st.packets_sent++;
    s->st.bytes_sent += len;
    if (s->c.cb.send)
        s->c.cb.send(s->c.cb.ctx, addr, s->pkt, len);
}

/* --- construction */

void sl_swim_config_defaults(sl_swim_config *c)
{
#define D(f, v) if (!c->f) c->f = v
    D(probe_interval_ms, 1000);
    D(probe_timeout_ms, 500);
    D(indirect_probes, 3);
    D(retransmit_mult, 4);
    D(suspicion_min_mult, 4);
    D(suspicion_max_mult, 6);
    D(lhm_max, 8);
    D(gossip_interval_ms, 200);
    D(gossip_fanout, 3);
    D(pushpull_interval_ms, 30000);
    D(dead_keep_ms, 300000);
    D(max_members, 1024);
    D(max_stream_bytes, (size_t)1 << 20);
#undef D
}

int sl_swim_new(const sl_swim_config *cfg, uint64_t now, sl_swim **out, char *err,
                size_t errlen)
{
    *out = NULL;
    if (!cfg->name || !valid_name(cfg->name, strlen(cfg->name)) || !cfg->addr ||
        !valid_name(cfg->addr, strlen(cfg->addr))) {
        snprintf(err, errlen, "gossip name and address: 1..%d printable characters, no spaces",
                 SL_SWIM_MAX_NAME);
        return -EINVAL;
    }
    if (cfg->meta_len > SL_SWIM_MAX_META) {
        snprintf(err, errlen, "gossip metadata over %d bytes", SL_SWIM_MAX_META);
        return -EINVAL;
    }
    sl_swim *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->c = *cfg;
    sl_swim_config_defaults(&s->c);
    if (s->c.max_members < 2)
        s->c.max_members = 2;
    s->c.name = s->c.addr = NULL;
    s->c.meta = NULL;
    s->rng = cfg->seed ? cfg->seed : 0x9E3779B97F4A7C15ull;
    s->v = calloc(s->c.max_members, sizeof *s->v);
    s->bcq = calloc(s->c.max_members, sizeof *s->bcq);
    sl_strmap_init(&s->byname, sizeof(mem *), s->c.max_members, rnd(s));
    if (!s->v || !s->bcq) {
        sl_swim_free(s);
        return -ENOMEM;
    }
    sl_swimwire_update u = {
        .status = SL_MEMBER_ALIVE,
        .name = {cfg->name, strlen(cfg->name)},
        .addr = {cfg->addr, strlen(cfg->addr)},
        .meta = cfg->meta,
        .meta_len = cfg->meta_len,
    };
    s->self = sl_swimint_add_member(s, &u, now);
    if (!s->self) {
        sl_swim_free(s);
        return -ENOMEM;
    }
    s->next_probe_at = now + rnd(s) % s->c.probe_interval_ms;
    s->next_gossip_at = now + s->c.gossip_interval_ms;
    s->next_pp_at = now + s->c.pushpull_interval_ms;
    s->next_reap_at = now + s->c.probe_interval_ms;
    *out = s;
    return 0;
}

void sl_swim_free(sl_swim *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    for (size_t i = 0; i < s->nseeds; i++)
        free(s->seeds[i]);
    free(s->seeds);
    free(s->v);
    free(s->bcq);
    sl_strmap_free(&s->byname);
    free(s);
}

/* --- push/pull */

/* Send (PUSH) or answer with (PULL) our state: the whole table, or with self_only our own record
 * alone (what a stranger gets: enough for it to answer with its state, nothing about the rest). */
static void push_state(sl_swim *s, const char *addr, sl_swimwire_type type, int join,
                       int self_only, void (*reply)(void *, const uint8_t *, size_t), void *rctx)
{
    size_t cap = SL_SWIMWIRE_HEADER + 1 + s->n * SL_SWIMWIRE_MAX_UPDATE_BYTES;
    if (cap > s->c.max_stream_bytes)
        cap = s->c.max_stream_bytes;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return;
    int r = sl_swimwire_put_head(buf, cap, type, 0, (uint8_t)join, NULL, NULL, NULL);
    size_t len = r > 0 ? (size_t)r : 0;
    for (size_t i = 0; r > 0 && i < s->n; i++) {
        if (self_only && s->v[i] != s->self)
            continue;
        sl_swimwire_update u;
        sl_swimint_to_update(s->v[i], "", &u);
        r = sl_swimwire_put_update(buf, cap, len, &u);
        if (r > 0)
            len = (size_t)r;
    }
    if (len) {
        s->st.bytes_sent += len;
        if (type == SL_SWIMWIRE_PUSH) {
            s->st.pushpulls_sent++;
            if (s->c.cb.send_stream)
                s->c.cb.send_stream(s->c.cb.ctx, addr, buf, len);
        } else if (reply) {
            reply(rctx, buf, len);
        }
    }
    free(buf);
}

int sl_swim_recv_stream(sl_swim *s, const char *from, const uint8_t *p, size_t len,
                        uint64_t now, void (*reply)(void *, const uint8_t *, size_t), void *rctx)
{
    sl_swimwire_msg msg;
    const char *why;
    s->st.bytes_received += len;
    int r = sl_swimwire_decode(p, len, s->c.max_stream_bytes, &msg, &why);
    if (r < 0) {
        s->st.dropped[r == -EMSGSIZE ? SL_SWIM_DROP_OVERSIZE
                      : r == -EPROTONOSUPPORT ? SL_SWIM_DROP_VERSION
                                              : SL_SWIM_DROP_MALFORMED]++;
        return r;
    }
    if (msg.type != SL_SWIMWIRE_PUSH && msg.type != SL_SWIMWIRE_PULL) {
        s->st.dropped[SL_SWIM_DROP_UNEXPECTED]++;
        return -EBADMSG;
    }
    s->st.pushpulls_received++;
    if (sl_swimint_apply_all(s, &msg, NULL, now) < 0)
        return -EBADMSG;
    if (msg.type == SL_SWIMWIRE_PUSH)
        push_state(s, from, SL_SWIMWIRE_PULL, 0, 0, reply, rctx);
    return 0;
}

int sl_swim_join(sl_swim *s, const char *const *seeds, size_t n, uint64_t now)
{
    for (size_t i = 0; i < n; i++)
        if (!seeds[i] || !valid_name(seeds[i], strlen(seeds[i])))
            return -EINVAL;
    char **v = n ? calloc(n, sizeof *v) : NULL;
    if (n && !v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (!(v[i] = strdup(seeds[i]))) {
            while (i--)
                free(v[i]);
            free(v);
            return -ENOMEM;
        }
    for (size_t i = 0; i < s->nseeds; i++)
        free(s->seeds[i]);
    free(s->seeds);
    s->seeds = v;
    s->nseeds = n;
    s->next_join_at = now;
    sl_swim_tick(s, now);
    return 0;
}

/* --- receiving datagrams */

static void on_ping(sl_swim *s, const char *from, const sl_swimwire_msg *msg, uint64_t now)
{
    if (msg->target.len != strlen(s->self->name) ||
        memcmp(msg->target.p, s->self->name, msg->target.len)) {
        s->st.dropped[SL_SWIM_DROP_WRONG_NODE]++;
        return;
    }
    /* a prober that we hold dead or left learns it first, so it can refute */
    mem *src = find(s, msg->source.p, msg->source.len);
    if (!src && msg->source.len && now >= s->next_stranger_pp_at && !s->leaving) {
        /* a member that knows us and that we do not know (every gossiped copy of its join
         * missed us): exchange states with it now rather than at the next push/pull, at most
         * once a probe interval. We push our own record only: anyone can send a ping, and the
         * table is not for whoever asks; its answer (the PULL) is its whole state. */
        s->next_stranger_pp_at = now + s->c.probe_interval_ms;
        push_state(s, from, SL_SWIMWIRE_PUSH, 0, 1, NULL, NULL);
    }
    /* the news it needs about itself: held dead, left or suspect, or at another address */
    if (src && src->status == SL_MEMBER_ALIVE && strcmp(src->addr, from) == 0)
        src = NULL;
    send_pkt(s, from, SL_SWIMWIRE_ACK, msg->seq, NULL, NULL, src);
}

static void on_ping_req(sl_swim *s, const char *from, const sl_swimwire_msg *msg, uint64_t now)
{
    /* relay only to a member we know, at the address we know it by: a PING_REQ must not turn us
     * into a reflector towards any address its sender names */
    mem *t = find(s, msg->target.p, msg->target.len);
    if (!t || t == s->self || !(t->status == SL_MEMBER_ALIVE || t->status == SL_MEMBER_SUSPECT) ||
        msg->target_addr.len != strlen(t->addr) ||
        memcmp(msg->target_addr.p, t->addr, msg->target_addr.len)) {
        s->st.dropped[SL_SWIM_DROP_UNKNOWN_TARGET]++;
        return;
    }
    relay *r = NULL;
    for (int i = 0; i < SL_SWIM_MAX_RELAYS && !r; i++)
        if (!s->relays[i].used)
            r = &s->relays[i];
    if (!r) {
        s->st.dropped[SL_SWIM_DROP_QUEUE_FULL]++;
        return;
    }
    char target[SL_SWIM_MAX_NAME + 1], taddr[SL_SWIM_MAX_NAME + 1];
    memcpy(target, msg->target.p, msg->target.len);
    target[msg->target.len] = '\0';
    memcpy(taddr, msg->target_addr.p, msg->target_addr.len);
    taddr[msg->target_addr.len] = '\0';
    r->used = 1;
    r->seq = ++s->seq;
    r->orig_seq = msg->seq;
    snprintf(r->requester, sizeof r->requester, "%s", from);
    /* Lifeguard: a NACK after 80 % of the probe timeout tells the requester we are alive */
    r->nack_at = now + s->c.probe_timeout_ms * 8 / 10;
    send_pkt(s, taddr, SL_SWIMWIRE_PING, r->seq, target, NULL, NULL);
}

static void on_ack(sl_swim *s, const sl_swimwire_msg *msg, int nack)
{
    if (s->probe.active && msg->seq == s->probe.seq) {
        if (nack) {
            s->st.nacks_received++;
            s->probe.nacks++;
        } else {
            s->probe.acked = 1;
        }
        return;
    }
    if (!nack)
        for (int i = 0; i < SL_SWIM_MAX_RELAYS; i++) {
            relay *r = &s->relays[i];
            if (r->used && r->seq == msg->seq) {
                r->used = 0;
                send_pkt(s, r->requester, SL_SWIMWIRE_ACK, r->orig_seq, NULL, NULL, NULL);
                return;
            }
        }
    s->st.dropped[SL_SWIM_DROP_UNEXPECTED]++;
}

void sl_swim_recv(sl_swim *s, const char *from, const uint8_t *p, size_t len, uint64_t now)
{
    sl_swim_recv_sealed(s, from, NULL, p, len, now);
}

void sl_swim_recv_sealed(sl_swim *s, const char *from, const char *sender, const uint8_t *p,
                         size_t len, uint64_t now)
{
    sl_swimwire_msg msg;
    const char *why;
    s->st.packets_received++;
    s->st.bytes_received += len;
    int r = sl_swimwire_decode(p, len, SL_SWIMWIRE_MAX_UDP, &msg, &why);
    if (r < 0) {
        s->st.dropped[r == -EMSGSIZE ? SL_SWIM_DROP_OVERSIZE
                      : r == -EPROTONOSUPPORT ? SL_SWIM_DROP_VERSION
                                              : SL_SWIM_DROP_MALFORMED]++;
        return;
    }
    if (msg.type == SL_SWIMWIRE_PUSH || msg.type == SL_SWIMWIRE_PULL) {
        s->st.dropped[SL_SWIM_DROP_UNEXPECTED]++;
        return;
    }
    sl_swimint_origin o = {from, msg.source.p, msg.source.len};
    if (sender) {
        if (msg.source.len && !(msg.source.len == strlen(sender) &&
                                memcmp(msg.source.p, sender, msg.source.len) == 0)) {
            s->st.dropped[SL_SWIM_DROP_SENDER]++;
            return;
        }
        o.name = sender;
        o.name_len = strlen(sender);
    }
    /* updates first: a refutation riding on an ack must count before the ack is matched */
    uint64_t contradicted = s->st.refuted_news;
    if (sl_swimint_apply_all(s, &msg, &o, now) < 0)
        return;
    /* it holds wrong news about us: tell it first-hand, now (one datagram for one received, to
     * where it came from), so that it does not depend on our queue's random targets */
    if (s->st.refuted_news != contradicted && !s->leaving)
        send_pkt(s, from, SL_SWIMWIRE_GOSSIP, 0, NULL, NULL, s->self);
    switch (msg.type) {
    case SL_SWIMWIRE_PING:
        on_ping(s, from, &msg, now);
        break;
    case SL_SWIMWIRE_PING_REQ:
        on_ping_req(s, from, &msg, now);
        break;
    case SL_SWIMWIRE_ACK:
        on_ack(s, &msg, 0);
        break;
    case SL_SWIMWIRE_NACK:
        on_ack(s, &msg, 1);
        break;
    default:
        break;
    }
}

/* --- timers */

/* A random member other than us (and other than `not`) whose status is in `mask`. */
static mem *random_member(sl_swim *s, unsigned mask, const mem *not)
{
    if (s->n < 2)
        return NULL;
    for (int tries = 0; tries < 8; tries++) {
        mem *m = s->v[rnd(s) % s->n];
        if (m != s->self && m != not && (mask >> m->status & 1))
            return m;
    }
    size_t start = (size_t)(rnd(s) % s->n);
    for (size_t i = 0; i < s->n; i++) {
        mem *m = s->v[(start + i) % s->n];
        if (m != s->self && m != not && (mask >> m->status & 1))
            return m;
    }
    return NULL;
}

#define LIVE ((1u << SL_MEMBER_ALIVE) | (1u << SL_MEMBER_SUSPECT))

static mem *next_probe_target(sl_swim *s)
{
    for (size_t scanned = 0; scanned <= s->n; scanned++) {
        if (s->probe_pos >= s->n) {
            /* a new round in a new order (Fisher-Yates) */
            for (size_t i = s->n; i > 1; i--) {
                size_t j = (size_t)(rnd(s) % i);
                mem *t = s->v[i - 1];
                s->v[i - 1] = s->v[j];
                s->v[j] = t;
                s->v[i - 1]->idx = i - 1;
                s->v[j]->idx = j;
            }
            s->probe_pos = 0;
        }
        mem *m = s->v[s->probe_pos++];
        if (m != s->self && (LIVE >> m->status & 1))
            return m;
    }
    return NULL;
}

static void finish_probe(sl_swim *s, uint64_t now)
{
    s->probe.active = 0;
    if (s->probe.acked) {
        lhm_add(s, -1);
        return;
    }
    /* Lifeguard: our probe failed (+1), and relays that sent no NACK suggest the fault is ours */
    int delta = 1;
    if (s->probe.nacks_expected && s->probe.nacks < s->probe.nacks_expected)
        delta++;
    lhm_add(s, delta);
    mem *m = find(s, s->probe.target, strlen(s->probe.target));
    if (!m || !(LIVE >> m->status & 1))
        return;
    s->st.probes_failed++;
    if (m->status == SL_MEMBER_ALIVE)
        s->st.suspicions++;
    sl_swimint_suspect(s, m, m->inc, s->self->name, strlen(s->self->name), now);
}

static void probe_tick(sl_swim *s, uint64_t now)
{
    if (s->probe.active) {
        if (s->probe.acked && now >= s->probe.timeout_at) {
            finish_probe(s, now);
        } else if (!s->probe.acked && !s->probe.indirect_sent && now >= s->probe.timeout_at) {
            s->probe.indirect_sent = 1;
            mem *t = find(s, s->probe.target, strlen(s->probe.target));
            if (t) {
                mem *picked[16];
                unsigned k = s->c.indirect_probes < 16 ? s->c.indirect_probes : 16, np = 0;
                for (unsigned tries = 0; np < k && tries < 4 * k; tries++) {
                    mem *m = random_member(s, 1u << SL_MEMBER_ALIVE, t);
                    if (!m)
                        break;
                    int dup = 0;
                    for (unsigned i = 0; i < np; i++)
                        dup |= picked[i] == m;
                    if (!dup)
                        picked[np++] = m;
                }
                for (unsigned i = 0; i < np; i++) {
                    send_pkt(s, picked[i]->addr, SL_SWIMWIRE_PING_REQ, s->probe.seq, t->name,
                             t->addr, NULL);
                    s->st.indirect_probes_sent++;
                }
                s->probe.nacks_expected = np;
            }
        }
        if (s->probe.active && now >= s->probe.end_at)
            finish_probe(s, now);
    }
    if (!s->probe.active && now >= s->next_probe_at && !s->leaving) {
        uint64_t period = scaled(s, s->c.probe_interval_ms);
        s->next_probe_at = now + period;
        mem *m = next_probe_target(s);
        if (!m)
            return;
        s->probe.active = 1;
        s->probe.acked = s->probe.indirect_sent = 0;
        s->probe.nacks = s->probe.nacks_expected = 0;
        s->probe.seq = ++s->seq;
        snprintf(s->probe.target, sizeof s->probe.target, "%s", m->name);
        s->probe.timeout_at = now + scaled(s, s->c.probe_timeout_ms);
        s->probe.end_at = now + period;
        s->st.probes_sent++;
        /* a suspect hears its suspicion with the probe, so it can refute in time even if every
         * gossiped copy (λ·log N of them) missed it */
        send_pkt(s, m->addr, SL_SWIMWIRE_PING, s->probe.seq, m->name, NULL,
                 m->status == SL_MEMBER_SUSPECT ? m : NULL);
    }
}

static void gossip(sl_swim *s)
{
    for (unsigned i = 0; i < s->c.gossip_fanout && s->nbc; i++) {
        mem *m = random_member(s, LIVE, NULL);
        if (!m)
            break;
        send_pkt(s, m->addr, SL_SWIMWIRE_GOSSIP, 0, NULL, NULL, NULL);
    }
}

void sl_swim_tick(sl_swim *s, uint64_t now)
{
    probe_tick(s, now);
    for (int i = 0; i < SL_SWIM_MAX_RELAYS; i++) {
        relay *r = &s->relays[i];
        if (r->used && now >= r->nack_at) {
            r->used = 0;
            send_pkt(s, r->requester, SL_SWIMWIRE_NACK, r->orig_seq, NULL, NULL, NULL);
        }
    }
    if (s->count[SL_MEMBER_SUSPECT])
        for (size_t i = 0; i < s->n; i++) {
            mem *m = s->v[i];
            if (m->status == SL_MEMBER_SUSPECT && now >= m->susp_deadline) {
                sl_swimint_set_status(s, m, SL_MEMBER_DEAD, now);
                s->st.deaths++;
                sl_swimint_queue(s, m, "");
                sl_swimint_changed(s, m, SL_MEMBER_SUSPECT);
            }
        }
    if (now >= s->next_gossip_at) {
        s->next_gossip_at = now + s->c.gossip_interval_ms;
        gossip(s);
    }
    if (s->nseeds && live_count(s) <= 1 && now >= s->next_join_at && !s->leaving) {
        s->next_join_at = now + s->c.probe_interval_ms;
        for (size_t i = 0; i < s->nseeds; i++)
            if (strcmp(s->seeds[i], s->self->addr))
                push_state(s, s->seeds[i], SL_SWIMWIRE_PUSH, 1, 0, NULL, NULL);
    }
    if (s->c.pushpull_interval_ms && now >= s->next_pp_at) {
        s->next_pp_at = now + s->c.pushpull_interval_ms;
        mem *m = random_member(s, LIVE | 1u << SL_MEMBER_DEAD, NULL);
        if (m && !s->leaving)
            push_state(s, m->addr, SL_SWIMWIRE_PUSH, 0, 0, NULL, NULL);
    }
    if (now >= s->next_reap_at) {
        s->next_reap_at = now + s->c.probe_interval_ms;
        for (size_t i = 0; i < s->n;) {
            mem *m = s->v[i];
            if (m != s->self && m->status >= SL_MEMBER_DEAD && now - m->since >= s->c.dead_keep_ms)
                sl_swimint_remove_member(s, m);
            else
                i++;
        }
    }
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

uint64_t sl_swim_next_deadline(const sl_swim *s)
{
    uint64_t t = min64(s->next_gossip_at, s->next_reap_at);
    if (s->c.pushpull_interval_ms)
        t = min64(t, s->next_pp_at);
    if (s->probe.active)
        t = min64(t, s->probe.indirect_sent ? s->probe.end_at : s->probe.timeout_at);
    else if (!s->leaving)
        t = min64(t, s->next_probe_at);
    if (s->nseeds && live_count(s) <= 1)
        t = min64(t, s->next_join_at);
    for (int i = 0; i < SL_SWIM_MAX_RELAYS; i++)
        if (s->relays[i].used)
            t = min64(t, s->relays[i].nack_at);
    if (s->count[SL_MEMBER_SUSPECT])
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i]->status == SL_MEMBER_SUSPECT)
                t = min64(t, s->v[i]->susp_deadline);
    return t;
}

void sl_swim_count_drop(sl_swim *s, sl_swim_drop why)
{
    if ((unsigned)why < SL_SWIM_DROP_NREASONS)
        s->st.dropped[why]++;
}

void sl_swim_count_unauthenticated(sl_swim *s)
{
    s->st.unauthenticated++;
}

/* --- leaving, metadata */

void sl_swim_leave(sl_swim *s, uint64_t now)
{
    if (s->leaving)
        return;
    s->leaving = 1;
    s->probe.active = 0;
    if (s->self->inc < UINT32_MAX) /* saturate, never wrap */
        s->self->inc++;
    sl_swimint_set_status(s, s->self, SL_MEMBER_LEFT, now);
    sl_swimint_queue(s, s->self, "");
    sl_swimint_changed(s, s->self, SL_MEMBER_ALIVE);
    /* tell fanout members now; the queued update rides on later gossip as well */
    for (unsigned i = 0; i < s->c.gossip_fanout && s->nbc; i++) {
        mem *m = random_member(s, LIVE, NULL);
        if (!m)
            break;
        send_pkt(s, m->addr, SL_SWIMWIRE_GOSSIP, 0, NULL, NULL, NULL);
    }
}

int sl_swim_set_meta(sl_swim *s, const uint8_t *meta, size_t len, uint64_t now)
{
    if (len > SL_SWIM_MAX_META || s->leaving)
        return -EINVAL;
    if (len)
        memcpy(s->self->meta, meta, len);
    s->self->meta_len = len;
    if (s->self->inc < UINT32_MAX)
        s->self->inc++;
    sl_swimint_queue(s, s->self, "");
    sl_swimint_changed(s, s->self, SL_MEMBER_ALIVE);
    return 0;
}


/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simnet: a fake transport and a virtual clock for gossip/swim tests. N swim nodes in one process
 * exchange datagrams through a min-heap of in-flight packets, each delayed 1..max_delay ms and
 * lost with probability loss; a partition (group per node) or a killed node drops everything
 * crossing it. Push/pull streams travel the same way (a request, then its reply), never lost but
 * cut by partitions and kills. The clock only moves in sim_run(), in steps of STEP ms: due packets
 * are delivered, then every node whose next deadline has come is ticked. Header-only, for the
 * tests in this directory.
 */
#ifndef SLUICE_TEST_GOSSIP_SIMNET_H
#define SLUICE_TEST_GOSSIP_SIMNET_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/swim.h"
#include "gossip/swimmeta.h"

#define SIM_MAX 128
#define STEP 5

typedef struct sim sim;

typedef struct simnode {
    sim *net;
    int id;
    sl_swim *s;
    char name[32], addr[32];
    int alive;          /* 0: killed (no ticks, no packets) */
    int group;          /* partition group */
    uint64_t deadline;
    unsigned saw[SIM_MAX][4]; /* times this node saw node j enter each status */
    int view[SIM_MAX];  /* last status this node saw for node j, -1 unknown */
} simnode;

typedef struct ev {
    uint64_t at;
    int to, from;
    int kind;           /* 0 datagram, 1 stream request, 2 stream reply */
    size_t len;
    uint8_t *p;
} ev;

struct sim {
    uint64_t now;
    int n;
    simnode node[SIM_MAX];
    ev *heap;
    size_t nheap, capheap;
    double loss;
    unsigned max_delay;
    uint64_t rng;
    sl_swim_config base;  /* tunables for every node */
    uint64_t sent, lost;
};

/* Every node checks members' addresses and metadata as sluiced does. */
static inline int sim_check_member(void *ctx, const char *addr, size_t addr_len,
                                   const uint8_t *meta, size_t meta_len)
{
    const char *why;
    (void)ctx;
    return sl_swimmeta_check_member(addr, addr_len, meta, meta_len, &why);
}

static inline uint64_t sim_rnd(sim *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static inline int sim_id_of(const char *addr)
{
    int a, b;
    if (sscanf(addr, "10.0.%d.%d:7946", &a, &b) != 2)
        return -1;
    return a * 100 + b;
}

static inline void heap_push(sim *w, ev e)
{
    if (w->nheap == w->capheap) {
        w->capheap = w->capheap ? 2 * w->capheap : 1024;
        w->heap = realloc(w->heap, w->capheap * sizeof *w->heap);
    }
    size_t i = w->nheap++;
    while (i && w->heap[(i - 1) / 2].at > e.at) {
        w->heap[i] = w->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    w->heap[i] = e;
}

static inline ev heap_pop(sim *w)
{
    ev top = w->heap[0], last = w->heap[--w->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= w->nheap)
            break;
        if (c + 1 < w->nheap && w->heap[c + 1].at < w->heap[c].at)
            c++;
        if (w->heap[c].at >= last.at)
            break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (w->nheap)
        w->heap[i] = last;
    return top;
}

static inline int sim_connected(sim *w, int a, int b)
{
    return a >= 0 && b >= 0 && a < w->n && b < w->n && w->node[a].alive && w->node[b].alive &&
           w->node[a].group == w->node[b].group;
}

static inline void sim_post(sim *w, int from, int to, int kind, const uint8_t *p, size_t len, int lossy)
{
    w->sent++;
    if (!sim_connected(w, from, to) || (lossy && w->loss > 0 &&
                                        (double)(sim_rnd(w) % 1000000) < w->loss * 1e6)) {
        w->lost++;
        return;
    }
    ev e = {w->now + 1 + sim_rnd(w) % w->max_delay, to, from, kind, len, malloc(len ? len : 1)};
    memcpy(e.p, p, len);
    heap_push(w, e);
}

static inline void cb_send(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    simnode *n = ctx;
    sim_post(n->net, n->id, sim_id_of(addr), 0, p, len, 1);
}

static inline void cb_stream(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    simnode *n = ctx;
    sim_post(n->net, n->id, sim_id_of(addr), 1, p, len, 0);
}

static inline void cb_change(void *ctx, const sl_swim_member *m, int old)
{
    simnode *n = ctx;
    int j = sim_id_of(m->addr);
    if (j < 0 || j >= SIM_MAX)
        return;
    n->saw[j][m->status]++;
    n->view[j] = (int)m->status;
}

typedef struct reply_ctx {
    sim *w;
    int from, to;
} reply_ctx;

static inline void cb_reply(void *rctx, const uint8_t *p, size_t len)
{
    reply_ctx *r = rctx;
    sim_post(r->w, r->from, r->to, 2, p, len, 0);
}

static inline void sim_start_node(sim *w, int i)
{
    simnode *n = &w->node[i];
    n->net = w;
    n->id = i;
    snprintf(n->name, sizeof n->name, "node-%d", i);
    snprintf(n->addr, sizeof n->addr, "10.0.%d.%d:7946", i / 100, i % 100);
    for (int j = 0; j < SIM_MAX; j++)
        n->view[j] = -1;
    memset(n->saw, 0, sizeof n->saw);
    sl_swim_config c = w->base;
    c.name = n->name;
    c.addr = n->addr;
    char meta[32];
    int ml = snprintf(meta, sizeof meta, "svc=10.0.0.%d:1051", i);
    c.meta = (const uint8_t *)meta;
    c.meta_len = (size_t)ml;
    c.seed = 0x1234567ull * (uint64_t)(i + 1) + w->rng;
    c.cb = (sl_swim_callbacks){n, cb_send, cb_stream, cb_change, sim_check_member};
    char err[128];
    if (sl_swim_new(&c, w->now, &n->s, err, sizeof err) != 0)
        abort();
    n->alive = 1;
    n->deadline = sl_swim_next_deadline(n->s);
}

/* n nodes; node i > 0 joins through seed node 0 */
static inline void sim_init(sim *w, int n, const sl_swim_config *base, uint64_t seed)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->max_delay = 10;
    w->rng = seed | 1;
    w->now = 1000000;
    if (base)
        w->base = *base;
    for (int i = 0; i < n; i++)
        sim_start_node(w, i);
}

static inline void sim_join(sim *w, int i, int seed)
{
    const char *seeds[1] = {w->node[seed].addr};
    sl_swim_join(w->node[i].s, seeds, 1, w->now);
    w->node[i].deadline = sl_swim_next_deadline(w->node[i].s);
}

static inline void sim_kill(sim *w, int i)
{
    w->node[i].alive = 0;
}

static inline void sim_restart(sim *w, int i, int seed)
{
    sl_swim_free(w->node[i].s);
    sim_start_node(w, i);
    sim_join(w, i, seed);
}

static inline void sim_step(sim *w)
{
    w->now += STEP;
    while (w->nheap && w->heap[0].at <= w->now) {
        ev e = heap_pop(w);
        simnode *to = &w->node[e.to];
        if (sim_connected(w, e.from, e.to)) {
            if (e.kind == 0) {
                sl_swim_recv(to->s, w->node[e.from].addr, e.p, e.len, w->now);
            } else {
                reply_ctx r = {w, e.to, e.from};
                sl_swim_recv_stream(to->s, w->node[e.from].addr, e.p, e.len, w->now,
                                    e.kind == 1 ? cb_reply : NULL, &r);
            }
            to->deadline = sl_swim_next_deadline(to->s);
        }
        free(e.p);
    }
    for (int i = 0; i < w->n; i++) {
        simnode *n = &w->node[i];
        if (n->alive && n->deadline <= w->now) {
            sl_swim_tick(n->s, w->now);
            n->deadline = sl_swim_next_deadline(n->s);
        }
    }
}

/* Run for ms of virtual time, or until done(w) (checked every step); the elapsed ms. */
static inline uint64_t sim_run(sim *w, uint64_t ms, int (*done)(sim *))
{
    uint64_t start = w->now;
    while (w->now - start < ms) {
        sim_step(w);
        if (done && done(w))
            break;
    }
    return w->now - start;
}

static inline void sim_free(sim *w)
{
    for (int i = 0; i < w->n; i++)
        sl_swim_free(w->node[i].s);
    while (w->nheap)
        free(heap_pop(w).p);
    free(w->heap);
}

/* How many live nodes (other than j) see node j in status st. */
static inline int sim_seen_as(sim *w, int j, int st)
{
    int c = 0;
    for (int i = 0; i < w->n; i++) {
        if (i == j || !w->node[i].alive)
            continue;
        sl_swim_member m;
        if (sl_swim_member_find(w->node[i].s, w->node[j].name, &m) == 0 && (int)m.status == st)
            c++;
    }
    return c;
}

static inline int sim_live(sim *w)
{
    int c = 0;
    for (int i = 0; i < w->n; i++)
        c += w->node[i].alive;
    return c;
}

/* Every node but 0 joins through node 0. */
static inline void sim_join_all(sim *w)
{
    for (int i = 1; i < w->n; i++)
        sim_join(w, i, 0);
}

/* How many times a live node was seen dead by another (a false "dead"). */
static inline unsigned sim_false_deaths(sim *w)
{
    unsigned c = 0;
    for (int i = 0; i < w->n; i++)
        for (int j = 0; j < w->n; j++)
            if (i != j && w->node[j].alive)
                c += w->node[i].saw[j][SL_MEMBER_DEAD];
    return c;
}

/* Every live node sees every live node alive. */
static inline int sim_converged(sim *w)
{
    int live = sim_live(w);
    for (int i = 0; i < w->n; i++) {
        if (!w->node[i].alive)
            continue;
        sl_swim_stats st;
        sl_swim_get_stats(w->node[i].s, &st);
        if ((int)st.members[SL_MEMBER_ALIVE] != live)
            return 0;
    }
    return 1;
}

#endif

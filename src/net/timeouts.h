/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-phase timeout lists for a worker's connections (net/server.c): instead of a uv_timer per
 * connection (a heap operation per request), every connection sits in at most one of a few
 * intrusive doubly linked lists, one per phase (idle, reading, writing, ...). Within a list all
 * entries share one timeout and are appended with the time they entered, so each list is in
 * deadline order and a periodic tick only looks at heads.
 *
 * Header-only (static inline): moving a connection between lists happens on every request, and a
 * call there is not free. The owner embeds an sl_tnode in its connection and maps a node back with
 * offsetof; the tick period for a set of timeouts is sl_timeouts_tick_ms.
 */
#ifndef SL_NET_TIMEOUTS_H
#define SL_NET_TIMEOUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_tnode {
    struct sl_tnode *prev, *next;
    uint64_t stamp; /* when it entered its list (the loop's ms clock) */
    int list;       /* index of its list; -1: in none */
} sl_tnode;

typedef struct sl_tlist {
    sl_tnode *head, *tail;
} sl_tlist;

/* Take n out of its list (lists is the owner's array); a no-op when it is in none. */
static inline void sl_timeouts_remove(sl_tlist *lists, sl_tnode *n)
{
    if (n->list < 0)
        return;
    sl_tlist *l = &lists[n->list];
    if (n->prev)
        n->prev->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    else
        l->tail = n->prev;
    n->prev = n->next = NULL;
    n->list = -1;
}

/* Append n (in no list) to lists[which], entered at now. */
static inline void sl_timeouts_append(sl_tlist *lists, sl_tnode *n, int which, uint64_t now)
{
    sl_tlist *l = &lists[which];
    n->list = which;
    n->stamp = now;
    n->next = NULL;
    n->prev = l->tail;
    if (l->tail)
        l->tail->next = n;
    else
        l->head = n;
    l->tail = n;
}

/* Put n (in no list) into lists[which] as if it had entered at `stamp` (<= every later entry's
 * time of entry, e.g. when an HTTP/2 connection's oldest unfinished stream began): walks back
 * from the tail past the entries that entered later, so the list stays in deadline order. The
 * walk is as long as the number of those entries (in the reading list: connections that began a
 * request since `stamp` and are still receiving it). */
static inline void sl_timeouts_insert(sl_tlist *lists, sl_tnode *n, int which, uint64_t stamp)
{
    sl_tlist *l = &lists[which];
    sl_tnode *after = l->tail;
    while (after && after->stamp > stamp)
        after = after->prev;
    n->list = which;
    n->stamp = stamp;
    n->prev = after;
    n->next = after ? after->next : l->head;
    if (n->next)
        n->next->prev = n;
    else
        l->tail = n;
    if (after)
        after->next = n;
    else
        l->head = n;
}

/* True when n's timeout_ms has run out at now. */
static inline bool sl_timeouts_due(const sl_tnode *n, uint32_t timeout_ms, uint64_t now)
{
    return n->stamp + timeout_ms <= now;
}

/* The tick period for these timeouts (0 = none): a quarter of the shortest, within [5, 1000] ms,
 * so a connection overstays its timeout by at most a quarter of it. */
static inline uint32_t sl_timeouts_tick_ms(const uint32_t *timeout_ms, int n)
{
    uint32_t tick = 1000;
    for (int l = 0; l < n; l++)
        if (timeout_ms[l] && timeout_ms[l] / 4 < tick)
            tick = timeout_ms[l] / 4;
    return tick < 5 ? 5 : tick;
}

#endif

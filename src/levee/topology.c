/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The limiter set of a client-proxy (see topology.h): a small array under a mutex, with an
 * atomic version so the request path notices a change without taking the lock.
 */
#include "levee/topology.h"

#include <errno.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include "cluster/peer.h"

void sl_topology_init(sl_topology *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    atomic_store(&t->version, 1);
}

void sl_topology_destroy(sl_topology *t)
{
    pthread_mutex_destroy(&t->mu);
}

static long find(const sl_topology *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->m[i].name, name) == 0)
            return (long)i;
    return -1;
}

/* A limiter is alive, leaving or dead: the feed folds suspect into alive before it gets here. */
static bool valid(sl_member_status st)
{
    return st == SL_MEMBER_ALIVE || st == SL_MEMBER_LEFT || st == SL_MEMBER_DEAD;
}

static void bump(sl_topology *t)
{
    atomic_fetch_add_explicit(&t->version, 1, memory_order_release);
}

int sl_topology_add(sl_topology *t, const char *name, const char *addr, sl_member_status st)
{
    size_t nl = strlen(name), al = strlen(addr);
    if (!nl || nl >= SL_TOPOLOGY_MAX_NAME || !al || al >= SL_TOPOLOGY_MAX_ADDR ||
        !valid(st))
        return -EINVAL;
    pthread_mutex_lock(&t->mu);
    long i = find(t, name);
    int rc = 0;
    if (i < 0 && t->n == SL_TOPOLOGY_MAX_MEMBERS) {
        rc = -ENOSPC;
    } else {
        sl_member *m = &t->m[i < 0 ? t->n++ : (size_t)i];
        bool same = i >= 0 && m->status == st && !strcmp(m->service, addr);
        memcpy(m->name, name, nl + 1);
        memcpy(m->service, addr, al + 1);
        m->status = st;
        if (!same) /* a feed repeating what we have (a full view again) is no change */
            bump(t);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int sl_topology_remove(sl_topology *t, const char *name)
{
    pthread_mutex_lock(&t->mu);
    long i = find(t, name);
    if (i >= 0) {
        t->m[i] = t->m[--t->n];
        bump(t);
    }
    pthread_mutex_unlock(&t->mu);
    return i < 0 ? -ENOENT : 0;
}

int sl_topology_set_status(sl_topology *t, const char *name, sl_member_status st)
{
    if (!valid(st))
        return -EINVAL;
    pthread_mutex_lock(&t->mu);
    long i = find(t, name);
    if (i >= 0 && t->m[i].status != st) {
        t->m[i].status = st;
        bump(t);
    }
    pthread_mutex_unlock(&t->mu);
    return i < 0 ? -ENOENT : 0;
}

size_t sl_topology_copy(sl_topology *t, sl_member *out, size_t cap, uint64_t *version)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->n < cap ? t->n : cap;
    memcpy(out, t->m, n * sizeof *out);
    *version = atomic_load_explicit(&t->version, memory_order_relaxed);
    pthread_mutex_unlock(&t->mu);
    return n;
}

int sl_topology_parse(sl_topology *t, char *const *items, size_t n, const char **bad)
{
    *bad = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *it = items[i];
        const char *eq = strchr(it, '=');
        char name[SL_TOPOLOGY_MAX_NAME], host[SL_TOPOLOGY_MAX_ADDR];
        uint16_t port;
        size_t nl = eq ? (size_t)(eq - it) : 0;
        if (!eq || nl == 0 || nl >= sizeof name ||
            sl_peer_split_addr(eq + 1, host, sizeof host, &port)) {
            *bad = it;
            return -EINVAL;
        }
        memcpy(name, it, nl);
        name[nl] = '\0';
        pthread_mutex_lock(&t->mu);
        bool dup = find(t, name) >= 0;
        pthread_mutex_unlock(&t->mu);
        if (dup || sl_topology_add(t, name, eq + 1, SL_MEMBER_ALIVE)) {
            *bad = it;
            return -EINVAL;
        }
    }
    return 0;
}

int sl_topology_sync(sl_topology *t, char *const *items, size_t n, const char **bad,
                     bool *changed)
{
    *changed = false;
    sl_topology *next = malloc(sizeof *next);
    if (!next)
        return -ENOMEM;
    sl_topology_init(next);
    int rc = sl_topology_parse(next, items, n, bad);
    if (rc == 0) {
        pthread_mutex_lock(&t->mu);
        bool same = t->n == next->n;
        for (size_t i = 0; same && i < next->n; i++) {
            long j = find(t, next->m[i].name);
            same = j >= 0 && !strcmp(t->m[j].service, next->m[i].service) &&
                   t->m[j].status == SL_MEMBER_ALIVE;
        }
        if (!same) {
            t->n = next->n;
            memcpy(t->m, next->m, next->n * sizeof *t->m);
            bump(t);
            *changed = true;
        }
        pthread_mutex_unlock(&t->mu);
    }
    sl_topology_destroy(next);
    free(next);
    return rc;
}

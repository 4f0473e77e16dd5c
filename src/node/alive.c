/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Worker-loop liveness (node/alive.h). Round r is posted to every worker; worker i's step stores
 * r into seen[i] (release), and the next check reads every seen[i] (acquire): all equal to the
 * round posted means every loop ran it. Work per check: one small allocation per worker inside
 * sl_server_post, once per watchdog period; nothing on the request path.
 */
#include "node/alive.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    sl_alive *a;
    int worker;
} slot;

struct sl_alive {
    sl_server *srv;
    int workers;
    uint64_t round;          /* the round last posted (0: none yet); read by the steps */
    _Atomic uint64_t posted; /* the same, as the steps read it */
    slot *slots;
    _Atomic uint64_t *seen; /* per worker: the last round its loop ran */
};

int sl_alive_new(sl_server *srv, sl_alive **out)
{
    int nw = sl_server_workers(srv);
    sl_alive *a = calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->srv = srv;
    a->workers = nw;
    a->slots = calloc((size_t)nw, sizeof *a->slots);
    a->seen = calloc((size_t)nw, sizeof *a->seen);
    if (!a->slots || !a->seen) {
        sl_alive_free(a);
        return -ENOMEM;
    }
    for (int i = 0; i < nw; i++) {
        a->slots[i] = (slot){.a = a, .worker = i};
        atomic_init(&a->seen[i], 0);
    }
    atomic_init(&a->posted, 0);
    *out = a;
    return 0;
}

/* On worker s->worker's loop. */
static void step(void *ud)
{
    slot *s = ud;
    uint64_t r = atomic_load_explicit(&s->a->posted, memory_order_acquire);
    atomic_store_explicit(&s->a->seen[s->worker], r, memory_order_release);
}

int sl_alive_check(sl_alive *a)
{
    for (int i = 0; i < a->workers; i++)
        if (atomic_load_explicit(&a->seen[i], memory_order_acquire) != a->round)
            return 0;
    a->round++;
    atomic_store_explicit(&a->posted, a->round, memory_order_release);
    for (int i = 0; i < a->workers; i++) {
        int rc = sl_server_post(a->srv, i, step, &a->slots[i]);
        if (rc)
            return rc; /* the loops that got it still store the round; the rest never will */
    }
    return 1;
}

void sl_alive_free(sl_alive *a)
{
    if (!a)
        return;
    free(a->slots);
    free((void *)a->seen);
    free(a);
}

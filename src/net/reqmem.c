/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server-wide bound on buffered request bytes (see reqmem.h): a shared atomic count fed in
 * chunks by per-worker accounts.
 */
#include "net/reqmem.h"

#include <string.h>
#include <unistd.h>

void sl_reqmem_init(sl_reqmem *m, uint64_t limit, unsigned accounts)
{
    memset(m, 0, sizeof *m);
    m->limit = limit;
    m->slack = (uint64_t)accounts * 2 * SL_REQMEM_CHUNK;
}

uint64_t sl_reqmem_default(uint64_t phys_bytes)
{
    if (!phys_bytes) {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psize > 0)
            phys_bytes = (uint64_t)pages * (uint64_t)psize;
    }
    uint64_t v = phys_bytes / SL_REQMEM_PHYS_FRACTION;
    return v < SL_REQMEM_MIN_DEFAULT ? SL_REQMEM_MIN_DEFAULT : v;
}

static void note_peak(sl_reqmem *m, uint64_t now)
{
    uint64_t p = atomic_load_explicit(&m->peak, memory_order_relaxed);
    while (now > p &&
           !atomic_compare_exchange_weak_explicit(&m->peak, &p, now, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

void sl_reqmem_take(sl_reqmem_acct *a)
{
    size_t need = a->used - a->credit;
    size_t take = (need + SL_REQMEM_CHUNK - 1) / SL_REQMEM_CHUNK * SL_REQMEM_CHUNK;
    a->credit += take;
    uint64_t now = atomic_fetch_add_explicit(&a->m->used, take, memory_order_relaxed) + take;
    note_peak(a->m, now);
}

void sl_reqmem_give(sl_reqmem_acct *a)
{
    /* keep one chunk of slack so a worker at a chunk boundary does not move the atomic per
     * request */
    size_t keep = (a->used + SL_REQMEM_CHUNK - 1) / SL_REQMEM_CHUNK * SL_REQMEM_CHUNK +
                  SL_REQMEM_CHUNK;
    size_t give = a->credit - keep;
    a->credit = keep;
    atomic_fetch_sub_explicit(&a->m->used, give, memory_order_relaxed);
}

void sl_reqmem_count_refused(sl_reqmem *m)
{
    if (m)
        atomic_fetch_add_explicit(&m->refused, 1, memory_order_relaxed);
}

void sl_reqmem_count_closed(sl_reqmem *m)
{
    if (m)
        atomic_fetch_add_explicit(&m->closed, 1, memory_order_relaxed);
}

void sl_reqmem_stats_get(const sl_reqmem *m, sl_reqmem_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!m)
        return;
    out->limit = m->limit;
    out->used = atomic_load_explicit(&m->used, memory_order_relaxed);
    out->peak = atomic_load_explicit(&m->peak, memory_order_relaxed);
    out->refused = atomic_load_explicit(&m->refused, memory_order_relaxed);
    out->closed = atomic_load_explicit(&m->closed, memory_order_relaxed);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * When to renew which lease: the schedule of the client's lease renewer (internal; not installed).
 *
 * A held lease expires `duration` after it was taken or last renewed; the renewer renews it every
 * duration / 2, so one renewal may fail (or arrive late) and the next still lands in time. A
 * renewal that failed without an answer (timeout, transport, server error) is retried after
 * duration / 8, at least 10 ms: three more tries fit before the lease runs out. A renewal the
 * server answers "not found" (released elsewhere, or already expired) loses the lease for good:
 * it is no longer renewed, and says so.
 *
 * Pure state on the caller's clock: no I/O, no locking, no clock reads. A fixed table of `cap`
 * slots (the bound on held leases); a handle names a slot and a generation, so a stale handle
 * (its lease removed, its slot reused) is refused rather than aliasing the new lease. Tests drive
 * it on a virtual clock.
 */
#ifndef SLUICE_CLIENT_RENEWSCHED_H
#define SLUICE_CLIENT_RENEWSCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    SL_RENEW_FREE = 0, /* slot unused */
    SL_RENEW_HELD,     /* renewed on schedule */
    SL_RENEW_INFLIGHT, /* a renewal is out */
    SL_RENEW_LOST,     /* the server no longer knows it: not renewed any more */
} sl_renew_state;

typedef struct sl_renew_slot {
    sl_renew_state state;
    uint32_t gen;           /* bumped each time the slot is freed */
    int64_t interval_ms;    /* duration / 2 */
    int64_t retry_ms;       /* duration / 8, at least 10 */
    int64_t due_ms;         /* next renewal */
    bool removed;           /* removed while a renewal was out: freed when it completes */
    uint64_t renewals;      /* renewals the server confirmed */
    uint64_t failures;      /* renewals that got no answer */
} sl_renew_slot;

typedef struct sl_renewsched {
    sl_renew_slot *slots;
    size_t cap;
    size_t used; /* slots not FREE */
} sl_renewsched;

/* cap slots (1..65536). 0, -EINVAL, -ENOMEM. */
int sl_renewsched_init(sl_renewsched *s, size_t cap);
void sl_renewsched_free(sl_renewsched *s);

/* A lease of duration_ms (>= 2) taken or last renewed at now: its handle in *h (never 0).
 * 0, -EINVAL, -ENOSPC (cap leases held already). */
int sl_renewsched_add(sl_renewsched *s, int64_t now, int64_t duration_ms, uint64_t *h);
/* Stop renewing it. 0, or -ENOENT for an unknown or stale handle. A renewal still out completes
 * into nothing (sl_renewsched_done frees the slot then). */
int sl_renewsched_remove(sl_renewsched *s, uint64_t h);
/* The slot of a live handle (HELD, INFLIGHT or LOST), or NULL. */
const sl_renew_slot *sl_renewsched_get(const sl_renewsched *s, uint64_t h);

/* Up to max handles due at now, marked INFLIGHT (the caller sends their renewals). Returns how
 * many. */
size_t sl_renewsched_take_due(sl_renewsched *s, int64_t now, uint64_t *out, size_t max);
/* How a renewal ended: 0 renewed, -ENOENT lost (not found), anything else no answer (retry). */
void sl_renewsched_done(sl_renewsched *s, uint64_t h, int64_t now, int outcome);
/* When the next renewal is due (INT64_MAX when nothing is to be renewed). */
int64_t sl_renewsched_next_due(const sl_renewsched *s);

#endif

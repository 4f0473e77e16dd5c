/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A circuit breaker on timeouts for the fail-open client (internal; not installed).
 *
 * A hung server (it accepts connections but never answers) costs every call its full timeout. The
 * breaker counts consecutive timeouts; after `threshold` of them it OPENS: calls are refused at
 * once (the client then applies its failure policy without any I/O) for `cooldown_ns`. Then it is
 * HALF-OPEN: exactly one call, the probe, goes through while the others are still refused. The
 * probe answering (anything but a timeout) CLOSES the breaker; the probe timing out opens it again
 * for another cool-down. A call that started before the breaker opened and gets an answer while it
 * is open closes it too (the server is answering again); one that times out then changes nothing.
 *
 * Pure state machine on the caller's clock: no I/O, no locking, no clock reads (the client holds a
 * mutex around it and passes sl_mono_ns()); tests drive it on a virtual clock.
 */
#ifndef SLUICE_CLIENT_BREAKER_H
#define SLUICE_CLIENT_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { SL_BREAKER_CLOSED, SL_BREAKER_OPEN, SL_BREAKER_HALF_OPEN } sl_breaker_state;

typedef struct sl_breaker {
    unsigned threshold;      /* consecutive timeouts that open it; 0: never opens */
    int64_t cooldown_ns;     /* how long it stays open before a probe */
    sl_breaker_state state;
    unsigned consecutive;    /* timeouts in a row */
    int64_t open_until_ns;   /* OPEN: when a probe may go */
    bool probe_out;          /* HALF_OPEN: the probe is in flight */
    uint64_t trips;          /* times it opened (counting re-opens after a failed probe) */
} sl_breaker;

void sl_breaker_init(sl_breaker *b, unsigned threshold, int64_t cooldown_ns);

/* May a call start at `now`? true: go (*probe says whether it is the half-open probe); false: the
 * breaker is open, fail at once. */
bool sl_breaker_allow(sl_breaker *b, int64_t now, bool *probe);

/* The outcome of a call that was allowed: timed_out, or any answer / other failure. */
void sl_breaker_record(sl_breaker *b, bool timed_out, int64_t now);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_held: /attempt answers held for their X-Delay-Ms (X-Delay-Mode: hold, delay instead of
 * reject). An admitted, delayed answer is copied and answered by a libuv timer of the worker's
 * loop after the delay, so the caller sees the 200 when its slot comes. Each worker keeps its own
 * list (no locks: an exchange lives on its loop), bounded by a count; beyond it, or without a loop,
 * the caller answers at once and the client waits X-Delay-Ms itself. A stopping worker flushes its
 * list (everything answered at once).
 */
#ifndef SLUICE_NODE_HELD_H
#define SLUICE_NODE_HELD_H

#include <stdbool.h>
#include <stdint.h>

#include "api/answer.h"
#include "net/exchange.h"

typedef struct sl_held sl_held;

/* Called once a held answer has gone out, to count it as the caller counts an immediate one. */
typedef void (*sl_held_sent_fn)(void *ud, int outcome, int grpc_code, int64_t t0);

typedef struct sl_held_list {
    sl_held *head;
    uint32_t n;
    uint32_t max;          /* most answers held at once; 0 = never hold */
    sl_held_sent_fn sent;
    void *sent_ud;
} sl_held_list;

/* Hold the answer r to ex for delay_ms; false when it cannot be held (answer it now). */
bool sl_held_add(sl_held_list *l, sl_exchange *ex, const sl_answer *r, int64_t delay_ms, int64_t t0);
/* Answer everything held now (a stopping worker). */
void sl_held_flush(sl_held_list *l);
/* The X-Delay-Ms an admitted answer carries (0 when none, or not a 200). */
int64_t sl_held_delay_ms(const sl_answer *r);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker shedder's load signal: a libuv timer on each worker loop that samples the loop's
 * busy fraction every --shed-interval (libuv's idle-time metric) and feeds it to the protection
 * service (sl_protect_observe). It lives in the node because it is loop glue: the protection
 * service itself (src/protect/) takes samples and knows no event loop.
 *
 * The caller owns the sl_loadtick (one per worker, e.g. in the worker's own state); start and
 * stop run on that worker's loop thread.
 */
#ifndef SLUICE_NODE_LOADTICK_H
#define SLUICE_NODE_LOADTICK_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "protect/protect.h"

typedef struct sl_loadtick {
    sl_protect *p;
    int worker;
    uv_loop_t *loop;
    uv_timer_t timer;
    bool on;
    uint64_t last_ns;   /* uv_hrtime() of the previous sample */
    uint64_t last_idle; /* uv_metrics_idle_time() then */
} sl_loadtick;

/* Start sampling (nothing when --shed is off or the loop cannot measure its idle time, which
 * is logged). The timer never keeps a stopping loop alive. */
void sl_loadtick_start(sl_loadtick *t, sl_protect *p, int worker, uv_loop_t *loop);
/* Stop and close the timer (a no-op when it was not started). */
void sl_loadtick_stop(sl_loadtick *t);

#endif

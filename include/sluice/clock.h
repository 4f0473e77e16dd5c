/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clocks. The engine never reads time itself; callers pass `now`. A real clock reads
 * CLOCK_REALTIME (epoch milliseconds, what Gubernator's reset_time and created_at use); a virtual
 * clock only moves when told to, for tests and the simulator.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/export.h"

typedef struct sl_clock {
    bool is_virtual;
    int64_t virtual_ms; /* the virtual clock's time, epoch ms */
} sl_clock;

SL_EXPORT
void sl_clock_init_real(sl_clock *c);
SL_EXPORT
void sl_clock_init_virtual(sl_clock *c, int64_t start_ms);
SL_EXPORT
int64_t sl_clock_now_ms(const sl_clock *c);
SL_EXPORT
void sl_clock_advance(sl_clock *c, int64_t ms);  /* virtual clocks only; no-op on real ones */
SL_EXPORT
void sl_clock_set(sl_clock *c, int64_t ms);      /* virtual clocks only */

/* Monotonic nanoseconds, for latency measurements (not decisions). */
SL_EXPORT
int64_t sl_mono_ns(void);
/* Wall clock epoch milliseconds. */
SL_EXPORT
int64_t sl_wall_ms(void);

#endif

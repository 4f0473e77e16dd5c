/* SPDX-License-Identifier: Apache-2.0 */
/* Real and virtual clocks (see include/sluice/clock.h). */
#include "sluice/clock.h"

#include <time.h>

int64_t sl_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sl_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sl_clock_init_real(sl_clock *c)
{
    c->is_virtual = false;
    c->virtual_ms = 0;
}

void sl_clock_init_virtual(sl_clock *c, int64_t start_ms)
{
    c->is_virtual = true;
    c->virtual_ms = start_ms;
}

int64_t sl_clock_now_ms(const sl_clock *c)
{
    return c->is_virtual ? c->virtual_ms : sl_wall_ms();
}

void sl_clock_advance(sl_clock *c, int64_t ms)
{
    if (c->is_virtual)
        c->virtual_ms += ms;
}

void sl_clock_set(sl_clock *c, int64_t ms)
{
    if (c->is_virtual)
        c->virtual_ms = ms;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's circuit breaker on timeouts (client/breaker.h): closed -> open after `threshold`
 * consecutive timeouts, open -> half-open when the cool-down ends, half-open lets one probe through
 * and closes on its answer or re-opens on its timeout. Pure: the caller passes the time.
 */
#include "client/breaker.h"

void sl_breaker_init(sl_breaker *b, unsigned threshold, int64_t cooldown_ns)
{
    *b = (sl_breaker){.threshold = threshold, .cooldown_ns = cooldown_ns > 0 ? cooldown_ns : 0,
                      .state = SL_BREAKER_CLOSED};
}

static void trip(sl_breaker *b, int64_t now)
{
    b->state = SL_BREAKER_OPEN;
    b->open_until_ns = now + b->cooldown_ns;
    b->probe_out = false;
    b->trips++;
}

bool sl_breaker_allow(sl_breaker *b, int64_t now, bool *probe)
{
    *probe = false;
    switch (b->state) {
    case SL_BREAKER_CLOSED:
        return true;
    case SL_BREAKER_OPEN:
        if (now < b->open_until_ns)
            return false;
        b->state = SL_BREAKER_HALF_OPEN;
        b->probe_out = false;
        /* fall through */
    case SL_BREAKER_HALF_OPEN:
        if (b->probe_out)
            return false;
        b->probe_out = true;
        *probe = true;
        return true;
    }
    return true;
}

void sl_breaker_record(sl_breaker *b, bool timed_out, int64_t now)
{
    if (!timed_out) {
        b->consecutive = 0;
        b->state = SL_BREAKER_CLOSED;
        b->probe_out = false;
        return;
    }
    if (b->consecutive < UINT32_MAX)
        b->consecutive++;
    if (b->state == SL_BREAKER_HALF_OPEN)
        trip(b, now); /* the probe (or a call from before) timed out: another cool-down */
    else if (b->state == SL_BREAKER_CLOSED && b->threshold && b->consecutive >= b->threshold)
        trip(b, now);
    /* OPEN: a call started before it opened timed out; the cool-down stands */
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Retry helpers for callers of sluice-protected APIs (include/sluice/client.h, "retry"): capped
 * exponential backoff with full jitter from a caller-held xorshift state, and the wait before
 * retrying an attempt that was refused (Retry-After when the server sent one, else the backoff).
 * Pure: no clock, no global random state, no sleeping.
 */
#include "sluice/client.h"

uint64_t sl_client_rand_next(uint64_t *state)
{
    uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return x;
}

int64_t sl_client_backoff_ms(unsigned attempt, int64_t base_ms, int64_t cap_ms, uint64_t *rng)
{
    if (base_ms <= 0 || cap_ms <= 0)
        return 0;
    int64_t ceil = base_ms;
    for (unsigned i = 0; i < attempt && ceil < cap_ms; i++)
        ceil = ceil > cap_ms / 2 ? cap_ms : ceil * 2;
    if (ceil > cap_ms)
        ceil = cap_ms;
    /* full jitter: uniform in [0, ceil] */
    return (int64_t)(sl_client_rand_next(rng) % (uint64_t)(ceil + 1));
}

int64_t sl_client_retry_delay_ms(const sl_attempt_reply *r, unsigned attempt, int64_t base_ms,
                                 int64_t cap_ms, uint64_t *rng)
{
    if (r->outcome == SL_ATTEMPT_ACCEPTED)
        return -1;
    if (r->outcome == SL_ATTEMPT_FAILED && r->http_status >= 400 && r->http_status < 500 &&
        r->http_status != 408 && r->http_status != 429)
        return -1; /* the request itself is wrong: retrying will not help */
    int64_t j = sl_client_backoff_ms(attempt, base_ms, cap_ms, rng);
    if (r->retry_after_ms >= 0)
        return r->retry_after_ms + j / 4; /* not before the server said; spread a little after */
    return j;
}

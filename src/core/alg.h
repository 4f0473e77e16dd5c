/*
 * Rate-limit algorithms over one key's state. Internal to libsluice: the store (store.c) finds or
 * creates the key's slot under its shard lock and calls sl_alg_decide(); the algorithms never touch
 * the store, the clock or a lock.
 *
 * State is kept small so that a store slot is one 64-byte cache line: 8 bytes of hash, 8 of expiry,
 * 8 of header and 40 of algorithm state. Algorithms whose state grows with the limit (sliding log,
 * sliding window with sub-windows) keep a pointer to a side buffer they own; sl_alg_release() frees it.
 */
#ifndef SLUICE_CORE_ALG_H
#define SLUICE_CORE_ALG_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/engine.h"

#define SL_ALG_NONE 0xff /* algorithm byte of a state that holds nothing (a new key) */

typedef struct sl_state {
    uint8_t algorithm;   /* sl_algorithm, or SL_ALG_NONE */
    uint8_t status;      /* sticky status where the algorithm keeps one (token bucket) */
    uint16_t aux16;      /* algorithm-specific */
    uint32_t aux32;      /* algorithm-specific */
    union {
        struct { int64_t limit, duration, remaining, created_at; } tb;
        struct { int64_t limit, duration; double remaining; int64_t updated_at, burst; } lb;
        struct { int64_t tat_ns, t_ns, tau_ns, limit, duration; } gcra;
        struct { int64_t limit, duration, window_start, count; } fw;
        struct { int64_t limit, duration, window_start; void *side; int64_t count; } sw;
        struct { int64_t limit, duration; void *side; int64_t pad0, pad1; } log;
        int64_t raw[5];
    } u;
} sl_state;

_Static_assert(sizeof(sl_state) == 48, "sl_state must stay 48 bytes (64-byte store slot)");

/* Limits the engine was configured with that algorithms enforce. */
typedef struct sl_alg_config {
    int64_t max_log_limit;
    int32_t max_sub_windows;
} sl_alg_config;

/*
 * Decide `req` against `st` at `now` (epoch ms).
 *   st->algorithm == SL_ALG_NONE means the key is new (or was found expired: the store resets it).
 *   *expire_at is the key's expiry (epoch ms); the algorithm sets it. The store treats a key whose
 *   expire_at < now as absent (lazy expiry) and removes it after a decision that leaves
 *   st->algorithm == SL_ALG_NONE (e.g. an error on a new key).
 * Fills *resp completely. Never allocates except when creating a side buffer for a new key state
 * (sliding log / sub-windows); on allocation failure it answers with an error and keeps no state.
 * The request has already passed sl_request_validate().
 */
void sl_alg_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t now,
                   const sl_alg_config *cfg, sl_response *resp);

/* True when a key whose expiry is `expire_at` no longer exists at `now` (the store's lazy expiry
 * uses this, so that the algorithms decide the boundary, as Gubernator's cache does). */
bool sl_alg_expired(int64_t expire_at, int64_t now);

/* Free any side buffer the state owns and mark it SL_ALG_NONE. */
void sl_alg_release(sl_state *st);

/* Bytes of side buffers the state owns (for the store's memory accounting). */
uint64_t sl_alg_side_bytes(const sl_state *st);

#endif

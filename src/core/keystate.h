/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key state codec: one key's state (its store hash, its expiry and its sl_state with any side
 * buffer) as a self-contained byte record, and the merge of two states of one key. Pure: no I/O,
 * no clock, no lock; the store (sl_store_export / sl_store_import) and the snapshot file
 * (core/snapshot.c) are its users. The decoder takes bytes from disk or a peer and rejects anything
 * malformed; the sizes it allocates are bounded by the engine's limits (sl_alg_config).
 *
 * Record (all integers little-endian; 72 bytes + 8 per tail word):
 *
 *     0      1      2       3      4       6      8        12        16      24          32     72
 *     +------+------+-------+------+-------+------+--------+---------+-------+-----------+------+-----
 *     | ver  | alg  |status | 0    | aux16 | 0    | aux32  | words   | hash  | expire_at | w[5] | tail
 *     +------+------+-------+------+-------+------+--------+---------+-------+-----------+------+-----
 *
 *   ver      SL_KEYSTATE_VERSION; a record of another version is refused (never guessed at)
 *   w[5]     the algorithm's fixed fields (the union of sl_state, pointers written as 0):
 *              TOKEN_BUCKET limit, duration, remaining, created_at, 0
 *              LEAKY_BUCKET limit, duration, remaining (IEEE double bits), updated_at, burst
 *              GCRA         tat, tat_frac, limit, duration, burst
 *              FIXED_WINDOW limit, duration, window_start, count, 0
 *              SLIDING_WINDOW limit, duration, window_start, cur, prev (0 when aux32 > 1)
 *              SLIDING_LOG  cap, duration, 0, len, 0
 *              CONCURRENCY  limit, 0, 0, 0, 0 (the lease bounds are recomputed from the leases)
 *   tail     `words` 64-bit words: the sliding window's aux32 previous sub-window counts, the
 *            sliding log's len timestamps (oldest first), or CONCURRENCY's (id, expires) pairs.
 *
 * Merge ("the more restrictive state wins", whole states, never a mix of fields): the state that
 * leaves the key fewer hits now. Token bucket: an OVER_LIMIT status, then fewer remaining, then the
 * later reset (expiry). Leaky bucket: fewer remaining once both are leaked to `now`. GCRA: the
 * later TAT. Fixed and sliding windows: the later window, then the higher count. Sliding log and
 * concurrency: more entries (timestamps, leases) held, then the later newest one. States of two
 * different algorithms: the held one stays (it reflects the configuration in use here).
 */
#ifndef SLUICE_CORE_KEYSTATE_H
#define SLUICE_CORE_KEYSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/alg.h"

#define SL_KEYSTATE_VERSION 1
#define SL_KEYSTATE_FIXED 72 /* bytes of a record without its tail */

/* One key's state out of the store. A decoded one owns its side buffer: sl_alg_release(&k->st). */
typedef struct sl_keystate {
    uint64_t hash;      /* the store's key hash (engine-seeded) */
    int64_t expire_at;  /* epoch ms */
    sl_state st;
} sl_keystate;

/* Bytes sl_keystate_encode() writes for this state (0 for SL_ALG_NONE). */
size_t sl_keystate_size(const sl_state *st);

/* Write the record for (hash, expire_at, st) at out: bytes written, or 0 if cap is too small or
 * the state is SL_ALG_NONE. */
size_t sl_keystate_encode(uint64_t hash, int64_t expire_at, const sl_state *st, uint8_t *out,
                          size_t cap);

/*
 * Decode one record from the start of src: 0 with *out filled (owning a side buffer for the
 * sliding window with sub-windows, the sliding log and concurrency) and *used the record's bytes;
 * -EINVAL for anything malformed (short, another version, unknown algorithm, nonzero reserved
 * bytes, fields out of range, a tail larger than cfg's limits allow, unordered timestamps, lease id
 * 0), -ENOMEM. On error *out holds nothing to release. cfg may be NULL (the engine defaults).
 */
int sl_keystate_decode(const uint8_t *src, size_t len, const sl_alg_config *cfg, sl_keystate *out,
                       size_t *used);

/*
 * Merge `in` (with its expiry) into the held state `*held` / `*held_exp` at `now`: if `in` is more
 * restrictive (see above) it replaces the held state, whose side buffer is released; otherwise
 * `in` is released. Either way `in` is left SL_ALG_NONE. A held SL_ALG_NONE state (no key) always
 * takes `in`. Returns true if `in` was taken.
 */
bool sl_keystate_merge(sl_state *held, int64_t *held_exp, sl_state *in, int64_t in_exp,
                       int64_t now);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CONCURRENCY: at most `limit` calls in flight per key. An acquire (hits 1) takes a lease, named by
 * a 64-bit lease id, that lasts until it is released (hits -1 with that id) or until `duration` ms
 * have passed, so that a client that crashed holding leases cannot keep the capacity forever.
 * The key's leases live in a side buffer of 16 bytes per lease, grown on demand up to the limit
 * (itself capped by max-concurrency-limit). docs/protection.md describes the semantics.
 *
 * Lease ids come from a per-engine generator: a 64-bit counter passed through a keyed permutation
 * (a 4-round Feistel network whose round function is XXH3 keyed with a random secret). A
 * permutation of distinct counters gives distinct ids for the engine's whole life, and without
 * the secret the next id cannot be derived from the previous ones, so a client cannot release
 * another client's lease by guessing (it would have to find one of `limit` live ids among 2^64).
 *
 * The algorithm is written against sl_state's raw words (copied in and out), so that it does not
 * depend on a member of alg.h's union; the dispatch in alg.c passes the lease ids of the request
 * and the response (sl_request.lease_id / sl_response.lease_id).
 */
#ifndef SLUICE_CORE_CONCURRENCY_H
#define SLUICE_CORE_CONCURRENCY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/alg.h"

/* Largest CONCURRENCY limit accepted when the engine sets none (max-concurrency-limit): a key
 * with all its leases taken costs 16 bytes per unit of limit. */
#define SL_CONC_DEFAULT_MAX_LIMIT INT64_C(10000)

/* Characters of a lease id printed as hex (without the NUL). */
#define SL_CONC_ID_HEX 16

/* The lease-id generator of one engine. Any thread may draw ids concurrently. */
typedef struct sl_conc_ids {
    uint64_t k0, k1;            /* secret round keys */
    _Atomic uint64_t counter;
} sl_conc_ids;

/* seed 0: keys from getrandom() (tests pass a fixed seed to get repeatable ids). */
void sl_conc_ids_init(sl_conc_ids *g, uint64_t seed);
/* The next id: never 0, never repeated by this generator. */
uint64_t sl_conc_ids_next(sl_conc_ids *g);

/*
 * The CONCURRENCY checks sl_alg_check() adds for this algorithm: hits is -1, 0 or 1, the limit is
 * within max_limit (<= 0: SL_CONC_DEFAULT_MAX_LIMIT), no GLOBAL (a lease lives on the key's
 * owner; a local copy cannot release it), and a release names its lease (lease_id != 0).
 * Duration > 0 and limit >= 0 are sl_alg_check's common rules.
 */
const char *sl_conc_check(const sl_request *req, uint64_t lease_id, int64_t max_limit);

/*
 * Decide at `t` (the decision time: created_at, or now). lease_in: the lease a release names;
 * *lease_out (may be NULL) gets the id of the lease an admitted acquire took, else 0.
 *   hits  1  admitted iff fewer than `limit` unexpired leases are held: a new lease expiring at
 *            t + duration.
 *   hits -1  the lease named lease_in is removed; an unknown (released or expired) lease answers
 *            the error sl_conc_err_not_found.
 *   hits  0  a peek; with lease_in, a renewal: that lease now expires at t + duration (an unknown
 *            or expired lease answers sl_conc_err_not_found).
 * remaining = limit - leases held (>= 0); reset_time = when the next held lease expires (t when
 * none is held: a slot is free now); a rejected acquire gets retry_after = reset_time - t (an
 * upper bound: a release may come sooner). RESET_REMAINING drops every lease first. A key left
 * without leases goes back to SL_ALG_NONE. `ids` may be NULL (ids then come from getrandom(),
 * checked unique within the key: for tests of the algorithm alone).
 */
void sl_conc_decide(sl_state *st, int64_t *expire_at, const sl_request *req, uint64_t lease_in,
                    int64_t t, sl_conc_ids *ids, sl_response *resp, uint64_t *lease_out);

uint64_t sl_conc_side_bytes(const sl_state *st);
void sl_conc_release(sl_state *st);
/* Leases held by a CONCURRENCY state (expired ones included until the next decision). */
int64_t sl_conc_held(const sl_state *st);

/* State transfer (core/keystate.c). sl_conc_leases: the key's leases as `len` (id, expires) pairs
 * and its limit; the pointer is valid until the state changes. sl_conc_adopt: make st (whose old
 * content is ignored, not released) a CONCURRENCY state holding a copy of the `len` >= 1 pairs;
 * 0, -EINVAL (len 0) or -ENOMEM. */
const uint64_t *sl_conc_leases(const sl_state *st, int64_t *limit, uint32_t *len);
int sl_conc_adopt(sl_state *st, int64_t limit, const uint64_t *pairs, uint32_t len);

/* Lease ids as text: 16 lower-case hex digits. Parse accepts either case; 0 is not a lease id.
 * format returns SL_CONC_ID_HEX; parse returns 0 or -EINVAL. */
int sl_conc_format_id(uint64_t id, char out[SL_CONC_ID_HEX + 1]);
int sl_conc_parse_id(const char *s, size_t n, uint64_t *id);

extern const char sl_conc_err_not_found[];
extern const char sl_conc_err_no_lease[];

/* What the key holds at `now` (sl_alg_info_of, for eviction); st is a CONCURRENCY. */
sl_alg_info sl_conc_info(const sl_state *st, int64_t now);

#endif

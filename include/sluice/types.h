/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The numbers sluice's APIs share: algorithms, behaviour flags, statuses and Gregorian intervals,
 * with Gubernator's wire values. The engine (sluice/engine.h) and the client library
 * (sluice/client.h) both use them; neither's structs are here, so the client's ABI does not move
 * when the engine's request grows. Header only.
 */
#ifndef SLUICE_TYPES_H
#define SLUICE_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* Algorithm numbers are the Gubernator wire values: TOKEN_BUCKET 0 and LEAKY_BUCKET 1 as in
 * pb.gubernator.Algorithm; sluice's additions take the next numbers (docs/api.md). */
typedef enum sl_algorithm {
    SL_TOKEN_BUCKET = 0,
    SL_LEAKY_BUCKET = 1,
    SL_GCRA = 2,
    SL_FIXED_WINDOW = 3,
    SL_SLIDING_WINDOW = 4,
    SL_SLIDING_LOG = 5,
    SL_CONCURRENCY = 6,
    SL_ALGORITHM_COUNT
} sl_algorithm;

/* Behaviour flags: a bit set, with pb.gubernator.Behavior's values. */
enum sl_behavior {
    SL_BATCHING = 0,
    SL_NO_BATCHING = 1,
    SL_GLOBAL = 2,
    SL_DURATION_IS_GREGORIAN = 4,
    SL_RESET_REMAINING = 8,
    SL_MULTI_REGION = 16,
    SL_DRAIN_OVER_LIMIT = 32,
    /* sluice's: decide and count, but admit what would be rejected (shadow mode, a dark launch;
     * docs/protection.md). Far above Gubernator's bits to leave room for new ones. */
    SL_SHADOW = 1 << 20,
    /* sluice's: FIXED_WINDOW counts rejected hits too, and a key is over its limit while its count
     * is above it (envoyproxy/ratelimit's counting: its RLS answers use it). Other algorithms
     * ignore it. */
    SL_COUNT_OVER_LIMIT = 1 << 21,
};

typedef enum sl_status { SL_UNDER_LIMIT = 0, SL_OVER_LIMIT = 1 } sl_status;

/* Gregorian interval numbers carried in `duration` with SL_DURATION_IS_GREGORIAN (Gubernator's). */
enum sl_gregorian {
    SL_GREGORIAN_MINUTES = 0,
    SL_GREGORIAN_HOURS = 1,
    SL_GREGORIAN_DAYS = 2,
    SL_GREGORIAN_WEEKS = 3, /* rejected, as Gubernator does */
    SL_GREGORIAN_MONTHS = 4,
    SL_GREGORIAN_YEARS = 5,
};

/* Longest name and unique_key the engine accepts (bytes each); longer gets a per-item error (and
 * the client library refuses them before sending). */
#define SL_MAX_NAME_LEN 1024
#define SL_MAX_KEY_LEN 4096

#ifdef __cplusplus
}
#endif

#endif

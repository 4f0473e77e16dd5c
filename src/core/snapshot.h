/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot format: a whole key store as one byte string, for --state-dir (node/statedir.c does the
 * file I/O; this module is pure). A snapshot is a fixed header and a body of key state records
 * (core/keystate.h), one per key, in no particular order:
 *
 *     0          8         10       12         16          24       32            40       48
 *     +----------+---------+--------+----------+-----------+--------+-------------+--------+-----
 *     | magic    | version | flags  | hdr size | hash seed | keys   | body length | XXH64  | body
 *     | SLSNAP\0\n| u16 = 1 | u16    | u32 = 48 | u64       | u64    | u64         | u64    | ...
 *     +----------+---------+--------+----------+-----------+--------+-------------+--------+-----
 *
 * (little-endian). The checksum is XXH64 of the body with seed 0. The hash seed and the flags
 * (SL_SNAPSHOT_CLUSTER_KEYS: the engine hashed keys with cluster_keys) are the engine's: records
 * carry store hashes, so a snapshot is loaded into an engine created with that seed and mode.
 * A snapshot is accepted only whole: sl_snapshot_check() verifies the header, the exact length,
 * the checksum and that every record decodes, before anything is loaded.
 */
#ifndef SLUICE_CORE_SNAPSHOT_H
#define SLUICE_CORE_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "core/alg.h"
#include "core/store.h"

#define SL_SNAPSHOT_HEADER 48
#define SL_SNAPSHOT_VERSION 1
#define SL_SNAPSHOT_MAGIC "SLSNAP\0\n" /* 8 bytes */
#define SL_SNAPSHOT_CLUSTER_KEYS 1u    /* flags: store hashes are sl_engine_hash_of_id() */

typedef struct sl_snapshot_info {
    uint64_t seed;      /* the engine hash seed the records were taken with */
    unsigned flags;     /* SL_SNAPSHOT_CLUSTER_KEYS */
    uint64_t keys;      /* records in the body */
    uint64_t body_len;
} sl_snapshot_info;

/* Write the header for a body of `keys` records, `body_len` bytes, whose XXH64 (seed 0) is sum. */
void sl_snapshot_header(uint8_t out[SL_SNAPSHOT_HEADER], uint64_t seed, unsigned flags,
                        uint64_t keys, uint64_t body_len, uint64_t sum);

/*
 * Writer: the body of a store's snapshot, produced chunk by chunk into the caller's buffer (which
 * writes it wherever it likes), then its header. Each chunk walks the store with sl_store_export()
 * (bounded lock holds); a key too large for an empty buffer of `cap` bytes ends the walk with
 * -E2BIG; 1 MiB holds any key the default limits allow (a 10,000-entry log is 80 KB).
 */
typedef struct sl_snapshot_writer {
    sl_store *store;
    sl_store_cursor cur;
    int64_t now;
    uint64_t seed, keys, body_len;
    unsigned flags;
    void *xxh;          /* XXH64 state of the body */
} sl_snapshot_writer;

/* 0 or -ENOMEM. seed, flags: the engine's hash seed (sl_engine_hash_seed) and mode. */
int sl_snapshot_writer_init(sl_snapshot_writer *w, sl_store *s, uint64_t seed, unsigned flags,
                            int64_t now);
/* Fill buf with whole records: bytes written, 0 when the store has been walked, -E2BIG when one
 * key's record does not fit in cap bytes. */
long sl_snapshot_writer_next(sl_snapshot_writer *w, uint8_t *buf, size_t cap);
/* The header for everything written so far. */
void sl_snapshot_writer_header(const sl_snapshot_writer *w, uint8_t out[SL_SNAPSHOT_HEADER]);
void sl_snapshot_writer_free(sl_snapshot_writer *w);

/*
 * Validate a whole snapshot: 0 with *info filled, or -EINVAL with a static reason in *why
 * ("not a sluice snapshot", "unsupported snapshot version", "truncated", "checksum mismatch",
 * "malformed key record", "key count mismatch"), or -ENOMEM. cfg bounds the records as the engine
 * will (may be NULL: defaults). Loads nothing.
 */
int sl_snapshot_check(const uint8_t *buf, size_t len, const sl_alg_config *cfg,
                      sl_snapshot_info *info, const char **why);

/*
 * Load a snapshot that passed sl_snapshot_check() into s at `now`: each record is imported
 * (sl_store_import); expired keys are dropped. *loaded / *dropped (may be NULL) count them.
 * 0, or the decoder's error if a record fails after all (-ENOMEM), the keys before it loaded.
 */
int sl_snapshot_load(const uint8_t *buf, size_t len, const sl_alg_config *cfg, sl_store *s,
                     int64_t now, size_t *loaded, size_t *dropped);

#endif

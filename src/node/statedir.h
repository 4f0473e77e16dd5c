/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --state-dir: the key store kept across restarts in DIR/sluice.snapshot (format: core/snapshot.h).
 * Writing goes to DIR/sluice.snapshot.tmp, fsync()ed, then rename()d over the snapshot and the
 * directory fsync()ed, so a crash mid-write leaves the previous snapshot whole. Reading maps the
 * file and validates it whole (header, length, checksum, every record) before anything is loaded:
 * a truncated, corrupt or foreign snapshot is logged and skipped, and the node starts empty. The
 * temporary file is created with O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600): a link planted at its
 * name is never followed. With a key (the cluster's secret) the file ends with a trailer, "SLMAC1"
 * and two NULs then HMAC-SHA256 of the body followed by the header (auth/secret.h), and a read
 * with that key accepts only a snapshot whose tag verifies: the checksum finds corruption, the
 * tag a snapshot someone else wrote. Without a key the trailer is ignored.
 * An optional thread writes the snapshot every --snapshot-period; the store is walked with bounded
 * lock holds (sl_store_export), so requests are never blocked for long.
 */
#ifndef SLUICE_NODE_STATEDIR_H
#define SLUICE_NODE_STATEDIR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/alg.h"
#include "runtime/log.h"
#include "sluice/engine.h"

/* The key authenticating the snapshot (borrowed: it outlives every call given it); NULL or an
 * empty one: none. */
typedef struct sl_statedir_key {
    const uint8_t *p;   /* the key snapshots are written with, and read with */
    size_t n;
    const uint8_t *old; /* NULL, or a second key a read also accepts (a rotation), never written */
    size_t old_n;
} sl_statedir_key;

/* The trailer of an authenticated snapshot: 8 bytes of magic, then the tag. */
#define SL_STATEDIR_MAC_MAGIC "SLMAC1\0\0"
#define SL_STATEDIR_TRAILER (8 + 32)

/* A snapshot read and validated, not yet loaded (the engine must be created with its seed). */
typedef struct sl_statedir_snap {
    void *map;
    size_t len;                     /* the snapshot's bytes (without a trailer) */
    size_t map_len;                 /* the mapping's, the whole file */
    uint64_t seed;
    uint64_t keys;
    unsigned flags;                 /* SL_SNAPSHOT_CLUSTER_KEYS */
    int64_t start_ns, start_cpu_ns; /* when reading began: the load's figures include the check */
} sl_statedir_snap;

/*
 * Read and validate DIR's snapshot: true with *snap filled when there is a valid one; false when
 * there is none (not logged) or it is unreadable or invalid (logged as a warning with the reason).
 */
bool sl_statedir_read(const char *dir, const sl_alg_config *cfg, const sl_statedir_key *key,
                      sl_logger *log, sl_statedir_snap *snap);

/* Load a validated snapshot into the engine (created with snap->seed) at `now`, log the figures,
 * and release the mapping (e NULL: only release it). */
void sl_statedir_load(sl_statedir_snap *snap, sl_engine *e, const sl_alg_config *cfg,
                      int64_t now, sl_logger *log);

/* Write the engine's store to DIR's snapshot at `now`: 0 or a negative errno (logged either way).
 * flags: SL_SNAPSHOT_CLUSTER_KEYS when the engine was created with cluster_keys. Callers
 * serialise their writes. */
int sl_statedir_write(const char *dir, sl_engine *e, unsigned flags, const sl_statedir_key *key,
                      int64_t now, sl_logger *log);

/* Periodic writes on a thread of its own. */
typedef struct sl_statedir_timer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool running, stop;
    const char *dir;
    sl_engine *engine;
    unsigned flags;
    const sl_statedir_key *key;
    int64_t period_ms;
    sl_logger *log;
} sl_statedir_timer;

/* 0 or a negative errno; period_ms <= 0 starts nothing. */
int sl_statedir_timer_start(sl_statedir_timer *t, const char *dir, sl_engine *e, unsigned flags,
                            const sl_statedir_key *key, int64_t period_ms, sl_logger *log);
/* Stop and join (a no-op when not started); a write in progress completes first. */
void sl_statedir_timer_stop(sl_statedir_timer *t);

#endif

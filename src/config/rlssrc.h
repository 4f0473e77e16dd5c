/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_rlssrc: the envoyproxy/ratelimit configuration directory (--rls-config-dir) as a live
 * source. Every regular file named *.yaml or *.yml in the directory (not its subdirectories,
 * not hidden files) is one domain (config/rlsconf.h); files are read in name order. A load that
 * fails - any file malformed, two files with one domain, an unreadable directory - changes
 * nothing: the last good configuration keeps serving and the reason ("<file>: line N: why") is
 * returned, logged and kept in the status.
 *
 * Loads happen at start (a failure fails the start), on sl_rlssrc_reload() (SIGHUP) and, with a
 * poll period, whenever the directory's listing, sizes or modification times change (a thread
 * of its own compares a signature of them; editors that replace files by rename are seen too).
 *
 * etcd mode (sl_rlssrc_config.conn.source): every key under <root>/rls/ holds one file's text,
 * named in errors by its key ("rls/shop: line 3: ..."). The shared watched source loads them, then
 * applies each watch message's puts and deletes and builds the whole configuration again; a
 * configuration that does not build is logged and counted (load errors), and the last good one
 * keeps serving.
 *
 * Readers are RCU readers of config/watched.h: each worker keeps an sl_rlssrc_reader and calls
 * sl_rlssrc_read() per call (one atomic load while nothing changes).
 */
#ifndef SLUICE_CONFIG_RLSSRC_H
#define SLUICE_CONFIG_RLSSRC_H

#include <stdint.h>

#include "config/rlsconf.h"
#include "config/watched.h"
#include "runtime/log.h"
#include "runtime/metrics.h"

typedef struct sl_rlssrc sl_rlssrc;

/* Most files one directory may hold. */
#define SL_RLSSRC_MAX_FILES 4096

typedef struct sl_rlssrc_config {
    sl_watched_conn conn; /* etcd mode: conn.source, the node's shared source, attached before it
                             starts; else file mode: conn.file, the directory. conn.log may be
                             NULL; the other fields are not used (no etcd source of its own) */
    int64_t poll_ms;      /* look for changes this often; 0 = only on reload */
} sl_rlssrc_config;

/* File mode: read the directory once (0, or -errno with the reason in err) and start polling.
 * etcd mode: attach to the source (which loads once it starts). */
int sl_rlssrc_new(const sl_rlssrc_config *cfg, sl_rlssrc **out, char *err, size_t errlen);
void sl_rlssrc_free(sl_rlssrc *s); /* NULL is fine */

/* Read the directory again now. 0, or -errno with the reason in err (the last good one stays);
 * etcd mode: -EOPNOTSUPP (the watch keeps it current). */
int sl_rlssrc_reload(sl_rlssrc *s, char *err, size_t errlen);

typedef sl_watched_reader sl_rlssrc_reader; /* zero-initialise it */

/* The current configuration for a reader (valid until the reader's next read or release). */
const sl_rlsconf *sl_rlssrc_read(sl_rlssrc *s, sl_rlssrc_reader *r);
void sl_rlssrc_reader_release(sl_rlssrc_reader *r);

void sl_rlssrc_status_get(sl_rlssrc *s, sl_watched_status *out);

/* sluice_rls_config_domains (gauge: domains loaded), sluice_rls_config_loads_total and
 * sluice_rls_config_load_errors_total (counters), read at render time. metrics NULL: 0. */
int sl_rlssrc_register_metrics(sl_rlssrc *s, sl_metrics *metrics);

/* Load the directory into a new configuration (the pure part's I/O; used by the source and by
 * tests). 0, or -errno with the reason in err. */
int sl_rlssrc_load_dir(const char *dir, sl_rlsconf **out, char *err, size_t errlen);

#endif

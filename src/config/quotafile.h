/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The standalone quota file: the same tree Levee keeps in etcd, written as YAML, for a sluiced run
 * with --standalone and no etcd (--quota-file). The daemon re-reads it on SIGHUP through the quota
 * source (quotasrc.h); a file that fails to parse leaves the running quotas as they were.
 *
 *     limit:
 *       key_default: {rate: 10, burst: 5}
 *       subkey_default:
 *         GET: {rate: 100, burst: 10}
 *       key:
 *         api:
 *           quota: {rate: 1000, burst: 100}
 *           sublimit:
 *             POST: {rate: 50, burst: 5}
 *         api/v1/GET:
 *           quota: {rate: 200, burst: 20}
 *     factor:
 *       default: 1
 *       key:
 *         api: 2
 *
 * Every section is optional; unknown keys are errors (a typo must not silently drop a quota).
 * "burst" defaults to 0 and is rounded down, as in etcd values.
 */
#ifndef SLUICE_CONFIG_QUOTAFILE_H
#define SLUICE_CONFIG_QUOTAFILE_H

#include <stddef.h>

#include "config/quota.h"

/* Largest quota file read (bytes). */
#define SL_QUOTAFILE_MAX_BYTES ((size_t)16 << 20)

/* Parse YAML text into `t` (which should be empty). Returns 0, -EINVAL with a message naming the
 * line in err, -ENOSPC when the tree's max entries is exceeded, -ENOMEM. On error `t` holds a
 * partial tree: load into a fresh tree and publish it only on success. */
int sl_quotafile_parse(const char *text, size_t len, sl_quota_tree *t, char *err, size_t errlen);
/* Read and parse a file (-ENOENT etc. from opening it, -EFBIG past SL_QUOTAFILE_MAX_BYTES). */
int sl_quotafile_load(const char *path, sl_quota_tree *t, char *err, size_t errlen);

#endif

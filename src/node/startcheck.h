/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The start-up check: every file, directory and value a start of sluiced with these options would
 * read or rely on, read the way the start reads it, without binding a port or starting a thread:
 * the quota file, the --rls-config-dir rules, the admin token, peer secret and client identity
 * files, the TLS files (client port, peers, etcd, Redis), the gossip key ring, the state
 * directory, the cluster hash secret, the static peer list (each peer resolves; this node is in
 * it), and the Redis store's addresses and password file. Each problem is one line that names
 * the option, the file and what is wrong in plain words. sl_node_start runs it before it builds
 * anything, so a start fails on the first problem before any port is bound or anything is logged
 * as listening; `sluiced --check-config` runs it to report them all.
 */
#ifndef SLUICE_NODE_STARTCHECK_H
#define SLUICE_NODE_STARTCHECK_H

#include <stddef.h>

#include "config/config.h"
#include "config/diag.h"

/* Check o (a parsed, finalized sl_options), adding each problem to d. Returns how many were
 * found. */
size_t sl_startcheck_run(const sl_options *o, sl_diag *d);

#endif

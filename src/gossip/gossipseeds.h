/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gossipseeds: where a node joining the gossip overlay finds members besides --gossip-seeds: the
 * observers registered in etcd, as Levee's limiters find theirs. An observer puts
 * <prefix>/observer/<NAME> = {"gossip": "ip:port", "service": "ip:port"}; every such gossip
 * address is a seed. Read once at start; the overlay itself keeps the membership after that.
 */
#ifndef SLUICE_GOSSIP_GOSSIPSEEDS_H
#define SLUICE_GOSSIP_GOSSIPSEEDS_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "ctlplane/etcd.h"

/* The etcd client configuration of sluiced's --storage-* options (the strings stay the
 * options'): what every reader of the observer registrations connects with. */
void sl_gossipseeds_etcd_config(const sl_options *o, sl_etcd_config *out);

/* Most observers read (more are ignored). */
#define SL_GOSSIPSEEDS_MAX 64

/* The "gossip" address of one registration value into out: 0, or -EINVAL (not a JSON object
 * with a "gossip" string of 1..64 printable characters). */
int sl_gossipseeds_parse(const char *json, size_t len, char *out, size_t outlen);

/* Read <prefix>/observer/ from etcd (at most SL_GOSSIPSEEDS_MAX keys) and append each
 * observer's gossip address (malloc'd) to seeds[*n..max). Returns how many were added, or a
 * negative errno when etcd cannot be read (a malformed registration is skipped). */
int sl_gossipseeds_from_etcd(const sl_etcd_config *ec, const char *prefix, char **seeds,
                             size_t *n, size_t max);
/* The same two with another member of the value read instead of "gossip" (e.g. "service": the
 * observers' topology streams, for a client-proxy: levee/feed.h). */
int sl_gossipseeds_parse_field(const char *json, size_t len, const char *field, char *out,
                               size_t outlen);
int sl_gossipseeds_from_etcd_field(const sl_etcd_config *ec, const char *prefix,
                                   const char *field, char **seeds, size_t *n, size_t max);

#endif

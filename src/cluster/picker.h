/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer pickers: which peer owns a key. Every node must compute the same owner from the same peer
 * list, so a picker depends only on the set of addresses (it sorts and de-duplicates its own copy:
 * the order peers were listed in, or arrived from DNS or etcd, does not matter) and on a fixed hash
 * seed. The key is Gubernator's hash key, name + "_" + unique_key.
 *
 * Two kinds, chosen with --peer-picker (docs/cluster.md has the measured balance and movement):
 *
 *   ring  consistent hashing with `replicas` virtual nodes per peer: each peer places `replicas`
 *         points on a 64-bit circle, a key belongs to the first point at or after its hash.
 *         O(log(N * replicas)) per key; balance improves with replicas (512 by default).
 *   hrw   rendezvous hashing: every peer scores the key, the highest score wins. O(N) per key,
 *         no tables, and keys move only to or from the peer that joined or left.
 *
 * Both move about 1/N of the keys when one of N peers joins or leaves.
 *
 * Independently of the kind, sl_picker_group() answers "the DF peers that share a key" with
 * rendezvous top-DF, for Levee's limiter groups; its first member is the HRW owner.
 *
 * A picker is immutable once built, so any number of threads may query it.
 */
#ifndef SLUICE_CLUSTER_PICKER_H
#define SLUICE_CLUSTER_PICKER_H

#include <stddef.h>
#include <stdint.h>

struct sl_key_ids; /* core/store.h */

/* Picker kinds: the values of sl_peer_picker (config.h). */
enum { SL_PICKER_KIND_RING = 0, SL_PICKER_KIND_HRW = 1 };

/* The fixed seed of every hash a picker takes: it is part of the cluster protocol (nodes with
 * different seeds would disagree on owners). */
#define SL_PICKER_SEED 0x736c756963652121ULL

/* Most peers one picker holds. */
#define SL_PICKER_MAX_PEERS 4096

typedef struct sl_picker sl_picker;

/* Build a picker over addrs[0..n) (n may be 0: every owner query then answers SIZE_MAX).
 * replicas is used by the ring (1..65536). 0 or -EINVAL / -ENOMEM. */
int sl_picker_new(int kind, unsigned replicas, const char *const *addrs, size_t n,
                  sl_picker **out);
void sl_picker_free(sl_picker *p);

int sl_picker_kind(const sl_picker *p);
/* Peers held (after de-duplication) and the i-th in the picker's (sorted) order. */
size_t sl_picker_count(const sl_picker *p);
const char *sl_picker_addr(const sl_picker *p, size_t i);
/* Index of an address, or -1. */
long sl_picker_find(const sl_picker *p, const char *addr);

/* The hash of Gubernator's key name + "_" + unique_key (without building the string): the
 * cluster's key id (core/store.h's sl_key_id), keyed with the cluster's secret in ids (the
 * engine's, sl_engine_key_ids; NULL: the public seed, e.g. the proxy's choice of a limiter). */
uint64_t sl_picker_key_hash(const struct sl_key_ids *ids, const char *name, size_t name_len,
                            const char *key, size_t key_len);
/* The hash of an already joined key. sl_picker_hash(k) == sl_picker_key_hash(split of k). */
uint64_t sl_picker_hash(const struct sl_key_ids *ids, const char *key, size_t len);

/* Index of the owner of a key hash; SIZE_MAX when the picker is empty. */
size_t sl_picker_owner(const sl_picker *p, uint64_t key_hash);

/* Rendezvous top-df: the indexes of the df highest-scoring peers for the key, best first, in
 * out[0..min(df, count)). Returns how many were written. */
size_t sl_picker_group(const sl_picker *p, uint64_t key_hash, size_t df, size_t *out);

#endif

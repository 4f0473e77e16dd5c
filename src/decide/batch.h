/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_batch: one API call's worth of decisions - n engine requests and their responses, with
 * per-item metadata - and the arena that owns everything they point to.
 *
 * Every dialect adapter decodes its wire message into a batch (the requests' name and unique_key
 * point into the decoded message or into copies, all in the batch's arena), the daemon has the
 * node's decider (decide/decider.h) fill `resps`, and the adapter encodes the batch back. Nothing
 * in a batch is freed piecemeal: sl_batch_reset() drops it all at once and keeps memory for the
 * next call, so a connection that reuses its batch does not go back to malloc per call.
 *
 * Items the adapter already answered while decoding (a request Gubernator rejects before deciding,
 * e.g. an empty unique_key) have answered[i] = 1 and resps[i].error set: the caller skips them.
 *
 * A batch is used by one thread at a time, and must not be moved after sl_batch_init() (its
 * protobuf-c allocator points back at it).
 */
#ifndef SLUICE_DECIDE_BATCH_H
#define SLUICE_DECIDE_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "base/buf.h"
#include "sluice/engine.h"
#include "wire/grpc_frame.h"

/* Most items in one call (Gubernator's limit, for its clients and between its peers alike). */
#define SL_BATCH_MAX_ITEMS 1000

/* A request metadata key sluice's items carry across dialects and peers: SLIDING_WINDOW's
 * sub-windows per window (decimal, 0..2^31-1). */
#define SL_BATCH_META_SUB_WINDOWS "sub_windows"

/* One metadata entry. Strings are NUL-terminated and owned by the batch (or by the decoded
 * message it keeps). */
typedef struct sl_kv {
    const char *key;
    const char *val;
} sl_kv;

/* A small string map: a few entries, looked up by linear scan, in insertion order. */
typedef struct sl_meta {
    sl_kv *kv;
    uint32_t n, cap;
} sl_meta;

typedef struct sl_batch_chunk sl_batch_chunk;

typedef struct sl_batch {
    size_t n;
    sl_request *reqs;
    sl_response *resps;
    sl_meta *req_meta;   /* per item: the request's metadata (e.g. trace context, "sub_windows") */
    sl_meta *resp_meta;  /* per item: metadata to answer with (e.g. "owner") */
    uint8_t *answered;   /* per item: 1 = answered while decoding, do not decide */
    size_t n_answered;
    void *msg;           /* the decoded wire message (a ProtobufCMessage) the requests point
                            into; NULL when the adapter decoded straight into the batch */

    /* arena */
    sl_batch_chunk *chunks;
    size_t arena_bytes;  /* bytes held in chunks */
    size_t arena_cap;    /* most bytes the arena may hold */
    bool oom;            /* an allocation failed since the last reset */
    ProtobufCAllocator pb_alloc;
} sl_batch;

#define SL_BATCH_DEFAULT_ARENA_CAP ((size_t)32 << 20)

/* A batch decided: every item has its answer. What a decider calls, once (decide/decider.h). */
typedef void (*sl_batch_done_cb)(void *ud, sl_batch *b);

/* arena_cap: most bytes the batch may allocate (0 = SL_BATCH_DEFAULT_ARENA_CAP). */
void sl_batch_init(sl_batch *b, size_t arena_cap);
void sl_batch_free(sl_batch *b);

/* Forget all items and arena contents; keeps one chunk for reuse, big enough for what the batch
 * used since the last reset (up to 1 MiB and arena_cap). */
void sl_batch_reset(sl_batch *b);

/* Make room for n items (after a reset), all zeroed: n = 0 is valid. 0 or -ENOMEM. */
int sl_batch_alloc_items(sl_batch *b, size_t n);

/* Arena allocation, 16-byte aligned; NULL when out of memory or over arena_cap. */
void *sl_batch_alloc(sl_batch *b, size_t size);
/* Copy n bytes and a terminating NUL into the arena. */
char *sl_batch_strndup(sl_batch *b, const char *s, size_t n);

/* A protobuf-c allocator over the arena: messages unpacked with it need no freeing (its free is a
 * no-op) and live until the batch is reset. */
ProtobufCAllocator *sl_batch_pb_allocator(sl_batch *b);

/* Set key = val in m (a map of this batch), replacing an existing key. Both strings are copied
 * into the arena. 0 or -ENOMEM. Linear in the map's size: for the few entries sluice adds. */
int sl_batch_meta_set(sl_batch *b, sl_meta *m, const char *key, const char *val);
/* Append an entry without copying or looking for the key (constant time, so decoding a message
 * with many entries stays linear): key and val must live as long as the batch. 0 or -ENOMEM. */
int sl_batch_meta_add_ref(sl_batch *b, sl_meta *m, const char *key, const char *val);
/* The value of key in m, or NULL. With repeated keys the last one wins (as in protobuf maps). */
const char *sl_batch_meta_get(const sl_meta *m, const char *key);

/* Give-backs of items of b, for an all-or-nothing group that was refused: gb (reset here) gets
 * n items, item k the request b->reqs[pick[k]] with its hits negated, its strings copied into gb's
 * arena and the SHADOW bit cleared; the caller hands gb where b's items went. 0 or -ENOMEM. */
int sl_batch_giveback(sl_batch *gb, const sl_batch *b, const size_t *pick, size_t n);

/* Answer item i now with a (static or arena-owned) error; the caller will not decide it. */
void sl_batch_answer(sl_batch *b, size_t i, const char *error);

/* ---- protobuf-c messages in the arena (the dialects' and the peer codec's slow paths) ------- */

/* grpc-go's words for a message over the size limit (%zu got, %zu max), and for bad protobuf. */
#define SL_BATCH_PB_TOO_LARGE_FMT "grpc: received message larger than max (%zu vs. %zu)"
#define SL_BATCH_PB_UNMARSHAL_ERR                                                                  \
    "grpc: error unmarshalling request: cannot parse invalid wire-format data"

/* Unpack `len` bytes as `desc` into b's arena (the message lives until the batch is reset).
 * 0, or with *st filled: -EMSGSIZE over max_msg (RESOURCE_EXHAUSTED), -ENOMEM over the arena's cap
 * (RESOURCE_EXHAUSTED), -EINVAL malformed (INTERNAL, grpc-go's wording). */
int sl_batch_pb_unpack(sl_batch *b, const ProtobufCMessageDescriptor *desc, const uint8_t *msg,
                       size_t len, size_t max_msg, ProtobufCMessage **out, sl_grpc_status *st);
/* Append the packed message (its structs typically in a batch's arena) to out. 0 or -ENOMEM. */
int sl_batch_pb_pack(const ProtobufCMessage *m, sl_buf *out);

#endif

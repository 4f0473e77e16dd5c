/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_peerwire: the PeersV1 messages a node sends and reads as a client of its peers, beside the
 * cluster code that makes those calls (router.c forwards GetPeerRateLimits, globalsync.c sends
 * UpdatePeerGlobals, handoff.c TransferKeys), and the globals and TransferKeys messages the
 * receiving node decodes. Gubernator v2's pb.gubernator.PeersV1 (proto/peers.proto), through
 * protobuf-c structs in the batch's arena; TransferKeys (sluice's own) by hand over wire/pbwire.
 * The server side of GetPeerRateLimits, which carries 1000 items, is the Gubernator dialect's
 * fast decoder (api/gubernator.h, sl_gub_decode_peer_pb). No I/O.
 */
#ifndef SLUICE_CLUSTER_PEERWIRE_H
#define SLUICE_CLUSTER_PEERWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "decide/batch.h"
#include "sluice/engine.h"
#include "wire/grpc_frame.h"

/* The PeersV1 methods' gRPC paths (the server routes them in node/service.c). */
#define SL_PEERWIRE_PATH_GET_PEER_RATE_LIMITS "/pb.gubernator.PeersV1/GetPeerRateLimits"
#define SL_PEERWIRE_PATH_UPDATE_PEER_GLOBALS "/pb.gubernator.PeersV1/UpdatePeerGlobals"
#define SL_PEERWIRE_PATH_TRANSFER_KEYS "/pb.gubernator.PeersV1/TransferKeys"

/* Client side: a GetPeerRateLimitsReq carrying items idx[0..n) of b (idx NULL = all of b, n
 * ignored), with their request metadata (plus "sub_windows" if the request has some and the
 * metadata does not). */
int sl_peerwire_encode_req(sl_batch *b, const size_t *idx, size_t n, sl_buf *out);
/* Put a peer's GetPeerRateLimitsResp into b->resps[idx[k]] (and its metadata into resp_meta),
 * for the same idx as the request. The response is unpacked into b's arena. -EPROTO if the peer
 * answered a different number of items. */
int sl_peerwire_decode_resp(size_t max_msg, const uint8_t *msg, size_t len, sl_batch *b,
                            const size_t *idx, size_t n, sl_grpc_status *st);

/* One UpdatePeerGlobal: the owner's state for a GLOBAL key. */
typedef struct sl_peerwire_global {
    const char *key;     /* Gubernator's hash key: name + "_" + unique_key */
    size_t key_len;
    sl_response resp;    /* status, limit, remaining, reset_time */
    int32_t algorithm;
    int64_t duration;
    int64_t created_at;
} sl_peerwire_global;

int sl_peerwire_encode_globals(const sl_peerwire_global *g, size_t n, sl_buf *out);
/* Decode an UpdatePeerGlobalsReq into an array in b's arena (b is reset first). */
int sl_peerwire_decode_globals(size_t max_msg, const uint8_t *msg, size_t len, sl_batch *b,
                               sl_peerwire_global **out, size_t *n_out, sl_grpc_status *st);

/* PeersV1/TransferKeys (sluice's own method: handoff.c). The request carries one bytes
 * field of key state records, the response the number merged. Encoders write framed messages;
 * decoders take the unframed message and return -EINVAL for a malformed one. */
int sl_peerwire_encode_transfer_req(const uint8_t *records, size_t len, sl_buf *out);
int sl_peerwire_decode_transfer_req(const uint8_t *msg, size_t len, const uint8_t **records,
                                    size_t *records_len);
int sl_peerwire_encode_transfer_resp(int64_t accepted, sl_buf *out);
int sl_peerwire_decode_transfer_resp(const uint8_t *msg, size_t len, int64_t *accepted);

#endif

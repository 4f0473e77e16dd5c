/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Gubernator v2 dialect: pb.gubernator.V1 (GetRateLimits, HealthCheck, LiveCheck) and
 * pb.gubernator.PeersV1 (GetPeerRateLimits, UpdatePeerGlobals) messages <-> sl_batch.
 *
 * Decoding checks what Gubernator checks before deciding, with its codes and wording:
 *   more than max_items (1000) requests  -> OUT_OF_RANGE
 *       "Requests.RateLimits list too large; max size is '1000'"            (V1)
 *       "'PeerRequest.rate_limits' list too large; max size is '1000'"     (PeersV1)
 *   a message larger than max_msg         -> RESOURCE_EXHAUSTED (grpc-go's wording)
 *   bad protobuf                          -> INTERNAL "grpc: error unmarshalling request: ..."
 *   bad JSON body                         -> INVALID_ARGUMENT with the parser's message
 *   per item (answered at once, the item is not decided):
 *       empty unique_key  "field 'unique_key' cannot be empty"
 *       empty name        "field 'namespace' cannot be empty"
 * Everything else about a request (algorithm range, limits, Gregorian durations) is the engine's
 * to judge. Algorithm and Behavior numbers are sl_algorithm / sl_behavior unchanged. sluice's
 * extension parameters travel in the request metadata map:
 *   "sub_windows"   SLIDING_WINDOW: sub-windows per window (decimal, 0..2^31-1)
 *
 * Encoding writes one response per item in request order, each with its error (when set, the
 * other fields are zero, as Gubernator answers) and its resp_meta entries as `metadata`.
 *
 * GetRateLimits and GetPeerRateLimits - the calls that carry 1000 items - are decoded and encoded
 * by hand: requests go from the wire bytes straight into the batch, responses from the batch
 * straight into the buffer, with the bytes protobuf-c (or sl_gubjson_print()) would produce. What
 * the hand-written protobuf decoder declines (errors, unusual encodings) is decoded again by
 * protobuf-c, which then decides; JSON works the same way inside json/gubjson. The other messages
 * (health, PeersV1 client side, globals) go through protobuf-c structs. No I/O and no engine calls
 * here: the daemon runs decode -> engine/router -> encode. Over HTTP, an error becomes
 * `st->http_status` with the body from sl_gub_encode_error_json() (grpc-gateway's
 * {"code","message","details"}).
 */
#ifndef SLUICE_API_GUBERNATOR_H
#define SLUICE_API_GUBERNATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decide/batch.h"
#include "base/buf.h"
#include "json/gubjson.h"
#include "wire/grpc_frame.h"

/* gRPC method paths and the HTTP gateway's routes. */
#define SL_GUB_PATH_GET_RATE_LIMITS "/pb.gubernator.V1/GetRateLimits"
#define SL_GUB_PATH_HEALTH_CHECK "/pb.gubernator.V1/HealthCheck"
#define SL_GUB_PATH_LIVE_CHECK "/pb.gubernator.V1/LiveCheck"
#define SL_GUB_HTTP_GET_RATE_LIMITS "/v1/GetRateLimits" /* POST */
#define SL_GUB_HTTP_HEALTH_CHECK "/v1/HealthCheck"      /* GET */
#define SL_GUB_HTTP_LIVE_CHECK "/v1/LiveCheck"          /* GET */

/* Gubernator's maxBatchSize. */
#define SL_GUB_MAX_ITEMS SL_BATCH_MAX_ITEMS
/* The metadata key carrying SLIDING_WINDOW's sub-window count. */
#define SL_GUB_META_SUB_WINDOWS SL_BATCH_META_SUB_WINDOWS
/* Delay instead of reject (GCRA, docs/algorithms.md): how long the caller will wait (ms, request
 * metadata) and how long it must (ms, answer metadata of an admitted, delayed item). */
#define SL_GUB_META_MAX_DELAY "max_delay_ms"
#define SL_GUB_META_DELAY "delay_ms"

typedef struct sl_gub_config {
    size_t max_msg;          /* largest protobuf message accepted (bytes); default 1 MiB */
    size_t max_items;        /* most requests in one call; default 1000 */
    sl_gubjson_limits json;  /* JSON body limits; default max_body 1 MiB */
    bool reference_decoders; /* decode requests with protobuf-c / jansson only (the slower
                                reference the hand-written decoders fall back to); for tests
                                that compare the two. Default false. */
} sl_gub_config;

void sl_gub_config_default(sl_gub_config *c);


/* ---- V1 GetRateLimits ---------------------------------------------------------------------- */

/*
 * Decode a GetRateLimitsReq into b (which is reset first). 0 on success - per-item errors are
 * already in b->resps with b->answered[i] set - or a negative errno with *st filled:
 * -EMSGSIZE too large, -E2BIG too many items, -EINVAL malformed, -ENOMEM over the arena cap.
 */
int sl_gub_decode_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                     sl_grpc_status *st);
int sl_gub_decode_json(const sl_gub_config *c, const char *body, size_t len, sl_batch *b,
                       sl_grpc_status *st);

/* Append a GetRateLimitsResp for b's responses. 0 or -ENOMEM / -EMSGSIZE. Temporary structs are
 * taken from b's arena. */
/*
 * All or nothing for a Gubernator batch (sluice's extension): the items whose request metadata has
 * `all_or_nothing` = `true` form one group; when one of them was not admitted (over its limit, or
 * not decided), each one that was admitted with hits gives them back. Those items are copied into
 * gb (reset here; hits negated) for the caller to hand where b's items went, and answered
 * OVER_LIMIT with their remaining as it is once the hits are back and metadata `all_or_nothing`
 * `given back`. The number of items in gb (0: nothing to give back, or no memory: the hits then
 * stay taken). gb NULL: only the number, nothing changed.
 */
size_t sl_gub_all_or_nothing(sl_batch *b, sl_batch *gb);

int sl_gub_encode_pb(sl_batch *b, sl_buf *out);
int sl_gub_encode_json(sl_batch *b, sl_buf *out);

/* grpc-gateway's error body for st. */
int sl_gub_encode_error_json(const sl_grpc_status *st, sl_buf *out);

/* ---- V1 HealthCheck / LiveCheck -------------------------------------------------------------- */

typedef struct sl_gub_health {
    bool healthy;
    const char *message;           /* why not, when unhealthy (Gubernator joins reasons with '|') */
    int32_t peer_count;
    const char *advertise_address; /* this node's address if it is in the peer list, else NULL */
} sl_gub_health;

/* Gubernator answers an unhealthy HealthCheck with gRPC UNAVAILABLE (HTTP 503) carrying the
 * message, not with a HealthCheckResp. True when healthy; otherwise fills *st. */
bool sl_gub_health_ok(const sl_gub_health *h, sl_grpc_status *st);
/* HealthCheckResp: status "healthy"/"unhealthy", message, peer_count, advertise_address. */
int sl_gub_encode_health_pb(const sl_gub_health *h, sl_buf *out);
int sl_gub_encode_health_json(const sl_gub_health *h, sl_buf *out);
/* LiveCheckResp, an empty message: no bytes in protobuf, "{}" in JSON. */
int sl_gub_encode_live_pb(sl_buf *out);
int sl_gub_encode_live_json(sl_buf *out);

/* ---- PeersV1 --------------------------------------------------------------------------------- */

/* Server side of GetPeerRateLimits: like sl_gub_decode_pb, with the peer wording for too many
 * items, and - as Gubernator's owner does - DRAIN_OVER_LIMIT added to GLOBAL requests (peers
 * accumulate hits, so an owner drains rather than refuses a batch larger than what remains). */
int sl_gub_decode_peer_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                          sl_grpc_status *st);
/* GetPeerRateLimitsResp for b's responses. */
int sl_gub_encode_peer_resp_pb(sl_batch *b, sl_buf *out);

#endif

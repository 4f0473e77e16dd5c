/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's Gubernator gRPC calls: GetRateLimits (check), HealthCheck and LiveCheck over
 * HTTP/2 — the request (path, gRPC headers, the framed protobuf message) and the decoding of the
 * answer (status line, grpc-status / grpc-message, the one message) into the typed reply, with the
 * failure policy applied when there is no usable answer. No I/O: client/clientio.c moves the bytes.
 */
#ifndef SLUICE_CLIENT_GUBCALL_H
#define SLUICE_CLIENT_GUBCALL_H

#include "client/call.h"

/* A GetRateLimits call for items[0..n), ready to run. NULL with *rc -EINVAL / -E2BIG / -ENOMEM. */
sl_call *sl_gubcall_check(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                          int *rc);
/* A HealthCheck (kind K_HEALTH) or LiveCheck (K_LIVE) call, ready to run. NULL: -ENOMEM. */
sl_call *sl_gubcall_probe(sl_client *c, sl_call_kind kind, int timeout_ms);

/* Decode the answer (or err, when the transport failed) into k->r; the call's return code. */
int sl_gubcall_decode_check(sl_call *k, const sl_h2c_resp *resp, int err);
int sl_gubcall_decode_health(sl_call *k, const sl_h2c_resp *resp, int err);
int sl_gubcall_decode_live(sl_call *k, const sl_h2c_resp *resp, int err);

#endif

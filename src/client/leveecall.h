/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's Levee calls: POST /attempt (attempt, and acquire with X-Concurrency: acquire) and
 * POST /release — the request headers out, the status and RateLimit / Retry-After / X-Lease-Id
 * headers in, with the failure policy applied when there is no decision. No I/O:
 * client/clientio.c moves the bytes. The parsing of the answer's headers is public
 * (sl_attempt_reply_init / sl_attempt_reply_header in include/sluice/client.h) and lives here.
 */
#ifndef SLUICE_CLIENT_LEVEECALL_H
#define SLUICE_CLIENT_LEVEECALL_H

#include "client/call.h"

/* A call of kind K_ATTEMPT, K_ACQUIRE or K_RELEASE (lease_id: release only), ready to run. NULL
 * with *rc -EINVAL (no resource, a header value with control bytes or too long) / -ENOMEM. */
sl_call *sl_leveecall_new(sl_client *c, sl_call_kind kind, const sl_attempt *a,
                          const char *lease_id, int timeout_ms, int *rc);

/* Decode the answer (or err, when the transport failed) into k->r.attempt; the call's return
 * code. */
int sl_leveecall_decode(sl_call *k, const sl_h2c_resp *resp, int err);

#endif

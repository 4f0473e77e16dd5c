/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/2 server session (cleartext, prior knowledge) over nghttp2, sans I/O (driven by conn.c).
 *
 * Bytes go in through nghttp2_session_mem_recv and come out of nghttp2_session_mem_send into the
 * connection's output buffer, so one socket write carries every frame produced by a read batch.
 * Each request stream becomes an exchange; complete requests are collected during mem_recv and
 * dispatched after it returns. Oversized requests are answered 413/431 (gRPC: trailers-only
 * RESOURCE_EXHAUSTED); protocol errors are nghttp2's RST_STREAM/GOAWAY; a connection holding too
 * many request bytes refuses new data with RST_STREAM(REFUSED_STREAM).
 *
 * Debian 12 ships nghttp2 1.52: the ssize_t mem_recv/mem_send API (the *2 variants are 1.61+).
 */
#ifndef SLUICE_NET_H2_H
#define SLUICE_NET_H2_H

#include "net/proto.h"

/* The session conn.c installs for HTTP/2. */
extern const sl_proto_ops sl_h2_ops;

#endif

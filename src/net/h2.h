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

#include <stdbool.h>
#include <stddef.h>

#include "net/conn.h"

sl_h2 *sl_h2_new(sl_conn *c);
void sl_h2_free(sl_h2 *h);
void sl_h2_feed(sl_h2 *h, const char *p, size_t n);
void sl_h2_eof(sl_h2 *h);
void sl_h2_pump(sl_h2 *h);
void sl_h2_shutdown(sl_h2 *h);
bool sl_h2_wants_read(const sl_h2 *h);
bool sl_h2_done(const sl_h2 *h);
bool sl_h2_has_backlog(const sl_h2 *h);
sl_conn_phase sl_h2_phase(const sl_h2 *h);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/1.1 server connection state over llhttp, sans I/O (driven by conn.c).
 *
 * Requests are parsed one message at a time (the parser pauses after each), dispatched to the
 * handler, and kept in arrival order; answers are written to the connection's output in that
 * order even when handlers answer out of order (pipelining), the early ones waiting serialized in
 * their exchange. Parsing stops — the rest of the input is kept — while too many answers are owed,
 * too much output is unwritten or too many request bytes are held (backpressure, not an error).
 * Malformed or oversized requests get 400/413/431 with Connection: close and end the connection.
 */
#ifndef SLUICE_NET_H1_H
#define SLUICE_NET_H1_H

#include "net/proto.h"

/* The session conn.c installs for HTTP/1.1. */
extern const sl_proto_ops sl_h1_ops;

#endif

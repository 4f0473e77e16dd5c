/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What conn.c asks of a protocol session (h1.c, h2.c): one operations table per protocol, chosen
 * once when the connection knows its protocol, so conn.c calls through it and never asks again
 * which protocol it speaks. Only conn.c calls these; drivers use conn.h.
 *
 * A session begins with an sl_proto that points at its own table, rather than conn.c keeping a
 * `void *` beside a table: the session and its operations cannot be paired wrongly, the compiler
 * still rejects anything that is not a session, and the one cast back to sl_h1/sl_h2 (valid: the
 * base is the first member) sits in that module's table functions.
 */
#ifndef SLUICE_NET_PROTO_H
#define SLUICE_NET_PROTO_H

#include <stdbool.h>
#include <stddef.h>

#include "net/conn.h"
#include "net/exchange.h"

typedef struct sl_proto_ops {
    sl_http_proto proto; /* what sl_conn_proto() reports */
    /* NULL when out of memory. */
    sl_proto *(*new)(sl_conn *c);
    void (*free)(sl_proto *s);
    /* n > 0. Errors are answered in c->out or set c->fatal. */
    void (*feed)(sl_proto *s, const char *p, size_t n);
    void (*eof)(sl_proto *s);
    void (*pump)(sl_proto *s);
    void (*shutdown)(sl_proto *s);
    bool (*wants_read)(const sl_proto *s);
    bool (*done)(const sl_proto *s);
    bool (*has_backlog)(const sl_proto *s);
    sl_conn_phase (*phase)(const sl_proto *s);
} sl_proto_ops;

/* The first member of every session (struct sl_h1, struct sl_h2). */
struct sl_proto {
    const sl_proto_ops *ops;
};

#endif

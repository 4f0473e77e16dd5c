/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's I/O (internal): the pool of connections that synchronous calls borrow and drive on
 * the caller's thread, and the one I/O thread that multiplexes every asynchronous call on its own
 * connection. Both hand each outcome to sl_call_decode(), so sync and async answers agree.
 */
#ifndef SLUICE_CLIENT_CLIENTIO_H
#define SLUICE_CLIENT_CLIENTIO_H

#include "client/call.h"

/* Set up the pool, the queue and the wake-up fd of c (c->opt already final). 0 or -errno. */
int sl_clientio_init(sl_client *c);
/* Stop the I/O thread (pending async calls complete with -ECANCELED) and close every connection. */
void sl_clientio_fini(sl_client *c);

/* Run k on a pooled connection on this thread; k->r holds the reply. The call's return code. */
int sl_clientio_run_sync(sl_client *c, sl_call *k);
/* Queue k for the I/O thread (started on first use), which delivers it to its callback and frees
 * it. 0, or -ECANCELED (client stopping) / -EAGAIN (queue full, no thread): k is freed. */
int sl_clientio_run_async(sl_client *c, sl_call *k);

#endif

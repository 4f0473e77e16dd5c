/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Liveness of a server's worker loops, for a watchdog (sluiced's systemd WATCHDOG=1 pings): each
 * check posts a step to every worker loop (sl_server_post) and reports whether every step posted
 * by the previous check has run. A loop that is stuck (a blocked call, an endless loop) leaves its
 * step unrun, so the check says "not alive" and the watchdog ping is withheld until it runs. Only
 * one step per worker is ever outstanding: a stuck loop's queue does not grow.
 *
 * Checks are made from one thread (e.g. the daemon's signal thread), never from a worker.
 */
#ifndef SLUICE_NODE_ALIVE_H
#define SLUICE_NODE_ALIVE_H

#include "net/server.h"

typedef struct sl_alive sl_alive;

/* For srv's workers: 0, or -ENOMEM. */
int sl_alive_new(sl_server *srv, sl_alive **out);
/* 1 when every worker ran the step of the previous check (the first check: 1), then posts the
 * next round; 0 when one has not yet (nothing posted); a negative errno when posting failed (e.g.
 * -ESHUTDOWN once the server stops). */
int sl_alive_check(sl_alive *a);
/* After the server has stopped (sl_server_wait): its loops run no step any more. */
void sl_alive_free(sl_alive *a);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An embeddable sluice node: everything sluiced runs (engine, router, listener with its worker
 * threads, metrics, quota source), inside the caller's process, as Gubernator's "use it as a
 * library" allows. The node is configured with exactly sluiced's options (see `sluiced --help`);
 * several nodes can run in one process.
 *
 *   sl_node *n;
 *   char err[256];
 *   char *args[] = {"--listen-addr", "127.0.0.1:0", "--workers", "1"};
 *   if (sl_node_start(4, args, &n, err, sizeof err)) { fprintf(stderr, "%s\n", err); ... }
 *   sl_response resp;
 *   sl_node_decide(n, &req, &resp, 1);       // direct call, same answer a client would get
 *   ... clients reach it on 127.0.0.1:sl_node_port(n) ...
 *   sl_node_shutdown(n, 5000); sl_node_wait(n); sl_node_free(n);
 */
#ifndef SLUICE_NODE_H
#define SLUICE_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/engine.h"
#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_node sl_node;

/* Start a node from sluiced-style arguments (no program name in args). Listening has begun when it
 * returns 0. On failure returns a negative errno and writes the reason into err: a bad option, or a
 * file, directory or value the start relies on (the quota file, TLS files, a static peer list, ...,
 * all read before anything is bound), named with its option and said in plain words. */
SL_EXPORT
int sl_node_start(int argc, char *const *args, sl_node **out, char *err, size_t errlen);

/* The port the node listens on (useful with port 0). */
SL_EXPORT
uint16_t sl_node_port(const sl_node *n);

/* Decide n requests through the node's router (the owner decides in a cluster), waiting for the
 * answers. Thread-safe; must not be called from the node's own worker threads. 0 or -errno. */
SL_EXPORT
int sl_node_decide(sl_node *n, const sl_request *reqs, sl_response *resps, size_t count);

/* The node's engine, for in-process decisions that bypass the cluster. */
SL_EXPORT
sl_engine *sl_node_engine(sl_node *n);

/* Reload what can change at run time (the quota file), as SIGHUP does for sluiced. */
SL_EXPORT
void sl_node_reload(sl_node *n);

/* Liveness of the node's worker loops, for a watchdog: call it periodically from one thread (not
 * a worker). 1 when every worker loop has run the step posted by the previous call (the first
 * call: 1), and a new step is posted; 0 while one has not yet; a negative errno when the node is
 * stopping or out of memory. sluiced withholds its systemd WATCHDOG=1 ping unless it is 1. */
SL_EXPORT
int sl_node_alive(sl_node *n);

/* Graceful stop: stop accepting, finish in-flight calls, close within grace_ms (0: the node's
 * --shutdown-timeout). Thread-safe; not async-signal-safe (call it from a normal thread, e.g.
 * after sigwait). */
SL_EXPORT
void sl_node_shutdown(sl_node *n, uint32_t grace_ms);
/* True once a role gave up for good (a client-proxy that found no observer for
 * --observer-retry-window): the program should shut the node down and exit with an error. */
SL_EXPORT
bool sl_node_failed(sl_node *n);
/* Wait until the node has stopped; 0 on a clean stop. */
SL_EXPORT
int sl_node_wait(sl_node *n);
SL_EXPORT
void sl_node_free(sl_node *n);

#ifdef __cplusplus
}
#endif
#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin listener: sluiced's admin endpoints (the switchboard's /v1/admin/killswitch, its
 * status, the top keys, and /metrics), never on the client port. By default on a Unix socket
 * (--admin-socket, mode 0600: the file's owner and root are the only callers, so no token is
 * asked there); on TCP only when --admin-addr is given, and then every call must carry
 * "Authorization: Bearer <token>" of --admin-token-file (compared in constant time; read again
 * on SIGHUP), a TCP listener without a token file refuses to start, and one off loopback speaks
 * TLS with the client port's certificate (--tls-cert). Every call passes auth/webguard first:
 * Host must be the listener's address, a foreign Origin is refused, a state-changing call must
 * be application/json (refusals counted as outcome "forbidden", never logged one by one). A
 * taken address is an error, never a move. The same module serves the optional read-only
 * --metrics-addr listener (metrics only, no token). One worker thread, no SO_REUSEPORT: admin
 * calls are rare, and no other process may join the port. The status page (node/statuspage.h) is
 * served here too: GET /status and GET / without the token (the page holds no data), its data at
 * /v1/admin/status with it.
 */
#ifndef SLUICE_NODE_ADMINSRV_H
#define SLUICE_NODE_ADMINSRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/metrics.h"
#include "node/statuspage.h"
#include "protect/protect.h"
#include "tls/tls.h"

typedef struct sl_adminsrv sl_adminsrv;

typedef struct sl_adminsrv_config {
    const char *addr;          /* "ip:port" (TCP); ignored when socket_path is set */
    const char *socket_path;   /* a Unix socket instead of addr (admin only), mode 0600 */
    const char *token_file;    /* NULL or "": no token (refused for an admin listener on TCP) */
    sl_tls_ctx *tls;           /* server context for a TCP admin listener (required off
                                  loopback); the listener takes its own reference */
    bool admin;                /* serve /v1/admin/...; false: /metrics only (--metrics-addr) */
    sl_protect *protect;       /* the switchboard's owner; NULL: admin calls answer 503 */
    sl_metrics *metrics;       /* rendered at /metrics, and counts the listener's calls */
    uint32_t max_body_bytes;   /* largest request body */
    sl_statuspage_config status; /* the status page's parts (admin only); engine NULL: no page */
    const sl_adminsrv *counts_with; /* another admin listener of the node whose outcome counters
                                       this one adds to (one metric family for both) */
} sl_adminsrv_config;

/* Who is limited: GET, JSON top keys per limit and event (protect/who.h). */
#define SL_ADMINSRV_TOP_PATH "/v1/admin/top"
/* Its query, pure (tests/fuzz/fuzz_admin.c): "[?limit=NAME][&n=N]" of the request target
 * (path[0..len)), raw values (no percent-decoding), the first of each name. *limit gets NAME
 * (NUL-terminated; limit_size > SL_WHO_NAME_MAX) or "" when absent (*filter says which), *want N
 * (1..SL_WHO_MAX_K, default 10). 0, or -EINVAL with *why the 400's one line. */
int sl_adminsrv_top_query(const char *path, size_t len, char *limit, size_t limit_size,
                          bool *filter, size_t *want, const char **why);

/* Largest token file read (a token is at most 512 bytes; the rest is whitespace). */
#define SL_ADMINSRV_MAX_TOKEN_FILE 4096

/* Read the token, bind and serve: 0, or a negative errno with the reason in err. */
int sl_adminsrv_start(const sl_adminsrv_config *cfg, sl_adminsrv **out, char *err, size_t errlen);
uint16_t sl_adminsrv_port(const sl_adminsrv *a);
/* The Unix socket's path, or NULL for a TCP listener. */
const char *sl_adminsrv_socket(const sl_adminsrv *a);
/* SIGHUP: the TLS context for connections accepted from now on (a TLS listener only): 0, or
 * -EINVAL on a listener without TLS. */
int sl_adminsrv_set_tls(sl_adminsrv *a, sl_tls_ctx *ctx);
/* SIGHUP: read the token file again. 0: the new token is handed to the listener's thread (calls
 * it serves from then on need it); 1: the listener has no token file (nothing to do); a negative
 * errno with the reason in err (never the token): the current token stays. Any thread. */
int sl_adminsrv_reload_token(sl_adminsrv *a, char *err, size_t errlen);
/* Whether a token file holds a usable token, as a start would read it (the start-up check): 0, or
 * a negative errno with the reason in err (never the token). */
int sl_adminsrv_check_token_file(const char *path, char *err, size_t errlen);
/* Drain (callable from a signal handler, like sl_server_shutdown). */
void sl_adminsrv_shutdown(sl_adminsrv *a, uint32_t grace_ms);
/* Wait for the listener to end (after a shutdown) and free it. NULL is fine. */
void sl_adminsrv_free(sl_adminsrv *a);

#endif

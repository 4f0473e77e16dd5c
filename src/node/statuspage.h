/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admin status page: one self-contained HTML page (src/node/statuspage.html, inline CSS and
 * JS, no external asset, embedded into the binary at build time) served at GET /status and GET /
 * on the admin listener, and the one read-only JSON document it polls, GET /v1/admin/status:
 * this node and its peers with their health, the decisions so far (the page turns them into
 * rates and a chart), the switchboard (kill switches, shadow modes, each worker's shed level),
 * the quota source's state, and the top keys of "who is limited" (protect/who.h).
 *
 * The page holds no data and no secret, so it is served without the admin token (a browser
 * cannot send a bearer token on a navigation); everything it shows comes from
 * /v1/admin/status, which needs the token like every admin call. With a token the page asks for
 * it and sends it as "Authorization: Bearer" (kept in the tab's sessionStorage). Every figure is
 * inserted as text (textContent, never markup), and the page carries a Content-Security-Policy
 * whose only script and style are the page's own, named by a fresh nonce per response.
 *
 * Pure apart from sl_statuspage_nonce (getrandom): the node hands the parts in, the admin
 * listener (node/adminsrv.c) routes to it.
 */
#ifndef SLUICE_NODE_STATUSPAGE_H
#define SLUICE_NODE_STATUSPAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/router.h"
#include "config/config.h"
#include "config/quotasrc.h"
#include "node/service.h"
#include "protect/protect.h"
#include "sluice/engine.h"

#define SL_STATUSPAGE_PATH "/status"
#define SL_STATUSPAGE_JSON_PATH "/v1/admin/status"

/* Bounds of the JSON document (what input controls: peers, limit names; keys are cut at
 * SL_TOPK_KEY_MAX bytes by protect/who.c): at most this many peers, (limit, event) rows of the
 * top and keys per row. The switchboard's lists are bounded by the switchboard itself. */
#define SL_STATUSPAGE_MAX_PEERS 64
#define SL_STATUSPAGE_MAX_LIMITS 16
#define SL_STATUSPAGE_TOP_KEYS 10

/* A nonce: 32 hex digits (128 random bits). */
#define SL_STATUSPAGE_NONCE_LEN 32

/* The decisions of the last SL_STATUSPAGE_HISTORY seconds, sampled once a second by the node
 * (worker 0's timer) and served in the document, so that the page's chart starts from the
 * server's recent past instead of empty. Written by one thread, read by the admin thread. */
#define SL_STATUSPAGE_HISTORY 120
typedef struct sl_statuspage_history {
    pthread_mutex_t mu;
    int64_t t_ms[SL_STATUSPAGE_HISTORY + 1]; /* cumulative counters: n samples make n-1 rates */
    uint64_t under[SL_STATUSPAGE_HISTORY + 1], over[SL_STATUSPAGE_HISTORY + 1];
    size_t head, n;
} sl_statuspage_history;

void sl_statuspage_history_init(sl_statuspage_history *h);
void sl_statuspage_history_destroy(sl_statuspage_history *h);
/* One sample of the engine's decisions at now_ms (call it about once a second). */
void sl_statuspage_history_sample(sl_statuspage_history *h, sl_engine *e, int64_t now_ms);

typedef struct sl_statuspage_config {
    const char *instance;       /* --instance-id */
    const char *listen_addr;    /* the client port's address */
    const char *advertise_addr; /* the peer address; NULL or "" when standalone */
    int workers;
    int64_t started_ms;         /* wall ms when the node started */
    sl_engine *engine;          /* decisions and keys (required) */
    sl_router *router;          /* health and peers; NULL: standalone, healthy */
    sl_protect *protect;        /* switchboard, shed levels, top keys; NULL: none shown */
    sl_quotasrc *quotas;        /* the quota source; NULL: mode "none" */
    const sl_service *service;  /* the health verdict (HealthCheck's); NULL: the router's alone */
    sl_statuspage_history *history; /* the chart's past; NULL: none */
    const sl_options *opts;     /* the configuration summary; NULL: none */
} sl_statuspage_config;

/* The status document (malloc'd into *out, NUL-terminated; free() it):
 *   {"node":{...},"health":{...},"peers":[...],"peers_total":N,"decisions":{...},
 *    "switchboard":{...}|null,"quotas":{...},"top":{...}|null,
 *    "history":[{"t_ms","under","over"},...],"config":{...}}
 * (docs/operations.md, "Status page", lists the fields). 0 or -ENOMEM. Any thread. */
int sl_statuspage_json(const sl_statuspage_config *c, int64_t now_ms, char **out, size_t *len);

/* The page with `nonce` (SL_STATUSPAGE_NONCE_LEN lower-case hex digits) in its script and style
 * tags, and told whether to ask for the admin token (malloc'd into *out, NUL-terminated; free()
 * it). 0, -EINVAL for a nonce that is not that, or -ENOMEM. */
int sl_statuspage_html(const char *nonce, bool token, char **out, size_t *len);

/* The Content-Security-Policy header value for a page served with `nonce`, into buf (cut to
 * fit; a buffer of 512 bytes always fits). */
void sl_statuspage_csp(const char *nonce, char *buf, size_t cap);

/* A fresh nonce from getrandom into out (SL_STATUSPAGE_NONCE_LEN + 1 bytes). 0 or -errno. */
int sl_statuspage_nonce(char *out);

/* The page's source as embedded at build time (generated from src/node/statuspage.html by
 * CMakeLists.txt): its bytes, not NUL-terminated, and their count. */
extern const unsigned char sl_statuspage_src[];
extern const size_t sl_statuspage_src_len;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's admin endpoint, GET/POST /v1/admin/killswitch: read the switches, the
 * concurrency limits, the fleet and each worker's shed level as JSON, or override one switch on
 * this node. Bytes in, a JSON answer out; the admin listener (node/adminsrv.c, sluiced
 * --admin-addr, never the client port) routes to it after its token check.
 */
#ifndef SLUICE_PROTECT_ADMIN_H
#define SLUICE_PROTECT_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "protect/protect.h"

#define SL_ADMIN_PATH "/v1/admin/killswitch"

typedef struct sl_admin_response {
    int status;
    const char *content_type;
    char *body;              /* malloc'd; free() it */
    size_t body_len;
} sl_admin_response;

/*
 * GET: the switchboard as JSON (switches, concurrency limits, fleet, each worker's shed level).
 * POST {"name": "N", "on": true|false} or {"name": "N", "mode": "on"|"shadow"|"off"}: override the
 * switch N on this node ("*" = every limiter); answers the switch as JSON. 400 with a JSON error
 * for a bad body, 405 for another method, 503 without a switchboard.
 */
void sl_admin_handle(sl_protect *p, const char *method, const uint8_t *body, size_t len,
                     sl_admin_response *out);

#endif

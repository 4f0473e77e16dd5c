/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_webguard: whether an admin call can have come from a web page rather than an operator. A
 * browser lets any page it shows send a "simple" cross-origin POST (Content-Type text/plain,
 * form-urlencoded or multipart, no preflight) to any address, loopback included, and a page whose
 * name an attacker re-points at 127.0.0.1 (DNS rebinding) is same-origin with the admin port. So:
 *
 *   - Host: on TCP it must name the listener: its address exactly, "localhost:<port>" when it is
 *     bound to loopback or a wildcard address, or any IP literal with its port when it is bound
 *     to a wildcard address (a literal cannot be re-pointed; a DNS name can). Absent: refused. Checked for every call, reads
 *     included. A Unix socket has no address a page could name: no Host check there.
 *   - Origin: absent (curl, the CLI, a same-origin GET) or the listener's own origin, that is the
 *     scheme (https with TLS) and an authority the Host rule accepts. "null" and anything else are
 *     foreign. On a Unix socket any Origin is foreign: no page is served from it.
 *   - Content-Type: a state-changing call (any method but GET, HEAD and OPTIONS) must say
 *     application/json (parameters allowed), which no simple request can.
 *
 * Pure: strings in, a verdict and a static reason out.
 */
#ifndef SLUICE_AUTH_WEBGUARD_H
#define SLUICE_AUTH_WEBGUARD_H

#include <stdbool.h>
#include <stddef.h>

/* The listener a call arrived on. */
typedef struct sl_webguard_listener {
    const char *addr; /* "ip:port" / "[v6]:port" as bound (numeric); NULL: a Unix socket */
    bool tls;         /* the listener speaks TLS: its origin is https:// */
} sl_webguard_listener;

typedef enum sl_webguard_verdict {
    SL_WEBGUARD_OK = 0,
    SL_WEBGUARD_BAD_HOST,         /* Host absent or not the listener's (DNS rebinding) */
    SL_WEBGUARD_BAD_ORIGIN,       /* a foreign Origin */
    SL_WEBGUARD_BAD_CONTENT_TYPE, /* a state-changing call that is not application/json */
} sl_webguard_verdict;

/* One header's value, or {NULL, 0} when the request has none. */
typedef struct sl_webguard_value {
    const char *p;
    size_t n;
} sl_webguard_value;

/* Judge one call: method ("GET", "POST", ...), and its Host (HTTP/2: :authority), Origin and
 * Content-Type headers. SL_WEBGUARD_OK or the first rule it breaks, with a static reason in *why
 * (may be NULL) fit for the response body. */
sl_webguard_verdict sl_webguard_check(const sl_webguard_listener *l, const char *method,
                                      sl_webguard_value host, sl_webguard_value origin,
                                      sl_webguard_value content_type, const char **why);

/* Whether a method changes state (anything but GET, HEAD and OPTIONS). */
bool sl_webguard_changes_state(const char *method);

#endif

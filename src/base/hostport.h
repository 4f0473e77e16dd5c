/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_hostport: the syntax of one "host:port" or "[v6]:port" address, checked with a reason in plain
 * words ("port 99999 is out of range 1-65535", "'foo' has no port"), so that a start-up error says
 * what is wrong with an address and not only that it is wrong. Pure: no resolving (whether a name
 * resolves is the caller's question). auth/addr.c's sl_addr_split is this plus "localhost".
 */
#ifndef SLUICE_BASE_HOSTPORT_H
#define SLUICE_BASE_HOSTPORT_H

#include <stdbool.h>
#include <stddef.h>

/* Longest host kept (a DNS name is at most 253 bytes). */
#define SL_HOSTPORT_HOST_MAX 256

/*
 * Split addr into host (brackets removed, NUL-terminated, hostlen bytes at most) and port: 0, or
 * -EINVAL with the reason in why (whylen bytes; may be NULL): empty, no port, an empty host, an
 * unclosed '[', a port that is not a decimal number or outside 1-65535 (0 is allowed with
 * allow_zero: a listen address that asks for any free port), a host longer than hostlen - 1.
 */
int sl_hostport_parse(const char *addr, bool allow_zero, char *host, size_t hostlen,
                      unsigned short *port, char *why, size_t whylen);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimmeta: the text inside a gossip member's metadata blob, as sluice's roles write it:
 * "key=value" pairs, one a line ("service=10.0.0.1:1051\nrole=limiter"). SWIM itself treats the
 * blob as opaque bytes; this is the one place that knows its spelling, for the daemon that writes
 * it and for every consumer (--discovery gossip, an observer, a proxy) that reads it.
 */
#ifndef SLUICE_GOSSIP_SWIMMETA_H
#define SLUICE_GOSSIP_SWIMMETA_H

#include <stddef.h>
#include <stdint.h>

/* Append "key=value\n" to buf (len bytes used of cap): the new length, or -EMSGSIZE / -EINVAL
 * (a key or value holding '=' or a newline, an empty key). */
int sl_swimmeta_put(uint8_t *buf, size_t cap, size_t len, const char *key, const char *value);
/* Copy the value of key into out (NUL-terminated): its length, or -ENOENT, or -EMSGSIZE when it
 * does not fit in outlen. */
int sl_swimmeta_get(const uint8_t *meta, size_t len, const char *key, char *out, size_t outlen);

/* The longest key and value a member's metadata may hold. */
#define SL_SWIMMETA_MAX_KEY 32
#define SL_SWIMMETA_MAX_VALUE 128

/* Whether a member's metadata is well formed, as gossip takes it from the network: 0, or -EINVAL
 * with a static reason in *why. Empty is fine; else "key=value" lines, each ending in '\n' (the
 * last may not), keys 1..SL_SWIMMETA_MAX_KEY of [a-z0-9_-], each at most once, values at most
 * SL_SWIMMETA_MAX_VALUE printable ASCII bytes; `service` a numeric ip:port (IPv4, or [IPv6], port
 * 1..65535) and `role` one of limiter, proxy, observer. */
int sl_swimmeta_check(const uint8_t *meta, size_t len, const char **why);
/* Whether addr (len bytes, not NUL-terminated) is a numeric ip:port as above. */
int sl_swimmeta_check_addr(const char *addr, size_t len);
/* Both: a member's gossip address and its metadata. */
int sl_swimmeta_check_member(const char *addr, size_t addr_len, const uint8_t *meta,
                             size_t meta_len, const char **why);

#endif

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

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_peersig: the cluster secret's proof on a peer call (docs/cluster.md "Peer authentication").
 * A calling node adds one header, SL_PEERSIG_HEADER, whose value is
 *
 *     v1 <unix time in ms> <sender's advertised address> <HMAC-SHA256, 64 lowercase hex digits>
 *
 * and the MAC is taken, under the first secret of the set, over
 *
 *     "sluice-peer-v1\n" <path> "\n" <time> "\n" <sender> "\n" <SHA-256 of the body (32 bytes)>
 *
 * The receiving node recomputes it under each secret of its set (one or two: the second is
 * accepted during a rotation), compares in constant time (CRYPTO_memcmp), and refuses a time more
 * than the skew window away from its own clock; the caller then checks that the sender is a member
 * of its peer list. The clock is the caller's (`now` in, no clock read here), so unit tests run on
 * a virtual one. Sans-I/O apart from sl_peersig_keys_read; OpenSSL does SHA-256 and HMAC.
 *
 * A secret set is immutable and reference-counted; sl_peersig is the reloadable slot the node
 * holds (SIGHUP installs a new set, calls in flight keep the one they took). Secrets are wiped
 * (OPENSSL_cleanse) when the last reference goes.
 */
#ifndef SLUICE_AUTH_PEERSIG_H
#define SLUICE_AUTH_PEERSIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_PEERSIG_HEADER "x-sluice-peer-auth"
#define SL_PEERSIG_MIN_SECRET 16   /* bytes of one secret, at least (shorter ones are guessable) */
#define SL_PEERSIG_MAX_SECRET 512
#define SL_PEERSIG_MAX_KEYS 2      /* the current secret and, during a rotation, one more */
#define SL_PEERSIG_MAX_SENDER 300  /* bytes of the sender's address in a header */
#define SL_PEERSIG_MAX_FILE 4096   /* bytes of a secret file */
/* Longest header value sl_peersig_sign writes, its NUL included. */
#define SL_PEERSIG_VALUE_MAX (3 + 20 + 1 + SL_PEERSIG_MAX_SENDER + 1 + 64 + 1)

typedef struct sl_peersig_keys sl_peersig_keys;

/* A secret file's bytes: one or two secrets, one a line (blank lines and lines starting with '#'
 * ignored), each 16-512 bytes of visible ASCII. 0 and a set with one reference, or -EINVAL with
 * the reason in *why (static), or -ENOMEM. */
int sl_peersig_keys_parse(const char *buf, size_t n, sl_peersig_keys **out, const char **why);
/* The same from a file (at most SL_PEERSIG_MAX_FILE bytes, a regular file); the read bytes are
 * wiped. 0, or a negative errno with "<path>: <reason>" in err. */
int sl_peersig_keys_read(const char *path, sl_peersig_keys **out, char *err, size_t errlen);
size_t sl_peersig_keys_count(const sl_peersig_keys *k);
/* A key for another use of the cluster secret (label: what for, e.g. "snapshot"): HMAC-SHA256
 * under the set's secret i (0: the first, the one calls are signed with) of "sluice-derive-v1\n"
 * and the label, so that no use can stand for another. 0, or -EINVAL (no secret i), -ENOMEM. */
#define SL_PEERSIG_DERIVED_LEN 32
int sl_peersig_keys_derive(const sl_peersig_keys *k, size_t i, const char *label,
                           uint8_t out[SL_PEERSIG_DERIVED_LEN]);
void sl_peersig_keys_ref(sl_peersig_keys *k);
void sl_peersig_keys_unref(sl_peersig_keys *k); /* NULL is ignored */

/* The header value for a call of `path` with body [body, body+len) sent at ts_ms by `sender`,
 * under the set's first secret, into out (cap >= SL_PEERSIG_VALUE_MAX is always enough). Returns
 * the value's length, or -EINVAL (a sender that is empty, too long or has a space), -ENOMEM. */
int sl_peersig_sign(const sl_peersig_keys *k, const char *path, size_t path_len, int64_t ts_ms,
                    const char *sender, const void *body, size_t len, char *out, size_t cap);

/* Why a header value was refused. */
typedef enum sl_peersig_verdict {
    SL_PEERSIG_OK = 0,
    SL_PEERSIG_MALFORMED,  /* not "v1 <ms> <sender> <64 hex>" */
    SL_PEERSIG_SKEW,       /* its time is more than skew_ms away from now */
    SL_PEERSIG_BAD_MAC,    /* no secret of the set gives its MAC */
} sl_peersig_verdict;

/* Check a header value against the call (path, body) at now_ms. On SL_PEERSIG_OK *sender and
 * *sender_len point at the sender's address inside `value`: the caller must still check that it
 * is a member. The MAC is compared in constant time under every secret of the set. */
sl_peersig_verdict sl_peersig_verify(const sl_peersig_keys *k, const char *value, size_t vlen,
                                     const char *path, size_t path_len, const void *body,
                                     size_t len, int64_t now_ms, int64_t skew_ms,
                                     const char **sender, size_t *sender_len);
const char *sl_peersig_verdict_name(sl_peersig_verdict v); /* "malformed", "skew", "bad_mac" */

/* The node's reloadable slot of a secret set. Thread-safe. */
typedef struct sl_peersig sl_peersig;
sl_peersig *sl_peersig_new(sl_peersig_keys *k); /* takes its own reference; NULL: no memory */
void sl_peersig_free(sl_peersig *s);
void sl_peersig_set(sl_peersig *s, sl_peersig_keys *k); /* new calls use k (a reference taken) */
sl_peersig_keys *sl_peersig_get(sl_peersig *s);          /* the current set, referenced: unref it */

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_bearer: bearer tokens (RFC 6750) as sluice checks them: the token out of an Authorization
 * header value, a secret out of a token file's bytes, and a comparison whose time does not depend
 * on where two tokens first differ. Pure: bytes in, no I/O, no allocation.
 */
#ifndef SLUICE_AUTH_BEARER_H
#define SLUICE_AUTH_BEARER_H

#include <stdbool.h>
#include <stddef.h>

/* Shortest and longest token accepted (a short secret is guessable; a long one is an attack on
 * the header budget, which the HTTP limits bound anyway). */
#define SL_BEARER_MIN_LEN 16
#define SL_BEARER_MAX_LEN 512

/* A token byte: visible ASCII except space (RFC 6750's b64token is a subset of this). */
bool sl_bearer_char_ok(unsigned char c);

/* "Bearer <token>" (scheme case-insensitive, spaces around the token ignored): 0 with *tok
 * pointing into v, or -EINVAL (another scheme, an empty or over-long token, a bad byte). */
int sl_bearer_from_header(const char *v, size_t n, const char **tok, size_t *len);

/* A token file: the token, surrounded by optional whitespace (a trailing newline is usual).
 * 0 with *tok pointing into buf, or -EINVAL with a reason in *why (a static string). */
int sl_bearer_parse_secret(const char *buf, size_t n, const char **tok, size_t *len,
                           const char **why);

/* Whether a (the presented token) equals b (the secret), in time that depends only on blen. */
bool sl_bearer_equal(const char *a, size_t alen, const char *b, size_t blen);

#endif

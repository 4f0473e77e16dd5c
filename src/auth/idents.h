/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_idents: client identities (sluiced --client-tokens-file): bearer token, or the name of a
 * verified client certificate, -> a name and the limit-name / resource prefixes it may use.
 * Parsed from a small line format, looked up once per call (a hash of the token or certificate
 * name, then a constant-time compare with the one candidate), and asked whether a name is inside
 * an identity's prefixes. Pure: bytes in, no I/O.
 *
 * The format, one identity per line; '#' starts a comment line; blank lines are ignored:
 *
 *     <token> <name> <prefix>[,<prefix>...]
 *     cert:<certificate name> <name> <prefix>[,<prefix>...]
 *
 * token: 16..512 visible ASCII bytes (sl_bearer_char_ok), not starting with "cert:", unique in
 * the file; certificate name: 1..255 visible ASCII bytes, the identity the TLS layer gives a
 * verified client certificate (its first DNS subjectAltName, else its subject CN; tls/tls.h),
 * compared byte for byte, unique in the file; name: 1..128 bytes of [A-Za-z0-9_.:-]; prefixes:
 * 1..64 of them, each 1..256 visible bytes other than ',', "*" alone meaning every name. A limit
 * name (Gubernator `name`) or a resource (Levee `X-Resource`) is allowed when it starts with one
 * of the prefixes. Fields are separated by spaces or tabs. A token and a certificate name live in
 * separate spaces: a bearer token never finds a certificate's identity, and back.
 */
#ifndef SLUICE_AUTH_IDENTS_H
#define SLUICE_AUTH_IDENTS_H

#include <stdbool.h>
#include <stddef.h>

#define SL_IDENTS_MAX_FILE ((size_t)1 << 20) /* bytes of a tokens file */
#define SL_IDENTS_MAX 10000                  /* identities in a file */
#define SL_IDENTS_MAX_NAME 128
#define SL_IDENTS_MAX_PREFIXES 64
#define SL_IDENTS_MAX_PREFIX 256

typedef struct sl_idents sl_idents;
typedef struct sl_ident sl_ident;

/* Parse a tokens file's bytes: 0 and a set in *out (sl_idents_free it), or -EINVAL with
 * "line N: reason" in err (never the token itself), -EFBIG past SL_IDENTS_MAX_FILE, -ENOMEM. */
int sl_idents_parse(const char *buf, size_t len, sl_idents **out, char *err, size_t errlen);
void sl_idents_free(sl_idents *s);
size_t sl_idents_count(const sl_idents *s);

#define SL_IDENTS_CERT_PREFIX "cert:"
#define SL_IDENTS_MAX_CERT_NAME 255

/* The identity whose token is tok, or NULL. */
const sl_ident *sl_idents_find(const sl_idents *s, const char *tok, size_t len);
/* The identity of a "cert:<name>" line whose certificate name is name[0..len), or NULL. */
const sl_ident *sl_idents_find_cert(const sl_idents *s, const char *name, size_t len);
/* The identity's name (NUL-terminated). */
const char *sl_ident_name(const sl_ident *id);
/* Whether name[0..len) starts with one of the identity's prefixes. */
bool sl_ident_allows(const sl_ident *id, const char *name, size_t len);

#endif

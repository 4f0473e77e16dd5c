/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_secret: the one way a secret is read from its file and forgotten. A token, key or secret
 * file must be its owner's alone (group or others with any access: refused at start, with the
 * fix, "chmod 600 FILE", in the message: base/file.h SL_FILE_SECRET), and every buffer that held
 * one is wiped with OPENSSL_cleanse (which the compiler cannot drop as a dead store) before it is
 * freed, so that neither a core dump nor a later allocation shows it. Used for the admin token,
 * the client tokens, the gossip key ring, the CLI's token and (through SL_FILE_SECRET) the Redis
 * password and the cluster hash secret; TLS keys, which OpenSSL reads
 * itself, are checked with sl_file_check_secret.
 */
#ifndef SLUICE_AUTH_SECRET_H
#define SLUICE_AUTH_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* sl_file_read(path, max, SL_FILE_REGULAR | SL_FILE_SECRET, ...): the same results and message.
 * Free the buffer with sl_secret_free(buf, len). */
int sl_secret_read(const char *path, size_t max, char **out, size_t *len, char *err,
                   size_t errlen);

/* Wipe n bytes at p (NULL is fine). */
void sl_secret_wipe(void *p, size_t n);

/* Wipe n bytes at p, then free(p) (NULL is fine). */
void sl_secret_free(void *p, size_t n);

/* HMAC-SHA256 under a secret key, fed in pieces (OpenSSL's EVP_MAC): what authenticates data
 * kept outside the process with the cluster's secret (the --state-dir snapshot). */
#define SL_SECRET_MAC_LEN 32
typedef struct sl_secret_mac sl_secret_mac;
/* 0, -EINVAL (no key), or -ENOMEM. */
int sl_secret_mac_new(const void *key, size_t key_len, sl_secret_mac **out);
int sl_secret_mac_update(sl_secret_mac *m, const void *p, size_t n);
/* The tag into out; the object can only be freed afterwards. 0 or -EIO. */
int sl_secret_mac_final(sl_secret_mac *m, uint8_t out[SL_SECRET_MAC_LEN]);
void sl_secret_mac_free(sl_secret_mac *m);
/* Two tags compared in constant time. */
bool sl_secret_mac_equal(const uint8_t a[SL_SECRET_MAC_LEN], const uint8_t b[SL_SECRET_MAC_LEN]);

#endif

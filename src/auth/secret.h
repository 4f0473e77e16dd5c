/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_secret: the one way a secret is read from its file and forgotten. A token, key or secret
 * file must be its owner's alone (group or others with any access: refused at start, with the
 * fix, "chmod 600 FILE", in the message: base/file.h SL_FILE_SECRET), and every buffer that held
 * one is wiped with OPENSSL_cleanse (which the compiler cannot drop as a dead store) before it is
 * freed, so that neither a core dump nor a later allocation shows it. Used for the admin token,
 * the client tokens, the gossip key ring and the CLI's token; TLS keys, which OpenSSL reads
 * itself, are checked with sl_file_check_secret.
 */
#ifndef SLUICE_AUTH_SECRET_H
#define SLUICE_AUTH_SECRET_H

#include <stddef.h>

/* sl_file_read(path, max, SL_FILE_REGULAR | SL_FILE_SECRET, ...): the same results and message.
 * Free the buffer with sl_secret_free(buf, len). */
int sl_secret_read(const char *path, size_t max, char **out, size_t *len, char *err,
                   size_t errlen);

/* Wipe n bytes at p (NULL is fine). */
void sl_secret_wipe(void *p, size_t n);

/* Wipe n bytes at p, then free(p) (NULL is fine). */
void sl_secret_free(void *p, size_t n);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Secret files read and wiped (see secret.h). */
#include "auth/secret.h"

#include <stdlib.h>

#include <openssl/crypto.h>

#include "base/file.h"

int sl_secret_read(const char *path, size_t max, char **out, size_t *len, char *err,
                   size_t errlen)
{
    return sl_file_read(path, max, SL_FILE_REGULAR | SL_FILE_SECRET, out, len, err, errlen);
}

void sl_secret_wipe(void *p, size_t n)
{
    if (p && n)
        OPENSSL_cleanse(p, n);
}

void sl_secret_free(void *p, size_t n)
{
    sl_secret_wipe(p, n);
    free(p);
}

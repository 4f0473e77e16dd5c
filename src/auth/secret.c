/* SPDX-License-Identifier: Apache-2.0 */
/* Secret files read and wiped (see secret.h). */
#include "auth/secret.h"

#include <errno.h>
#include <stdlib.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

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

struct sl_secret_mac {
    EVP_MAC *mac;
    EVP_MAC_CTX *ctx;
};

void sl_secret_mac_free(sl_secret_mac *m)
{
    if (!m)
        return;
    EVP_MAC_CTX_free(m->ctx); /* OpenSSL wipes the key it holds */
    EVP_MAC_free(m->mac);
    free(m);
}

int sl_secret_mac_new(const void *key, size_t key_len, sl_secret_mac **out)
{
    *out = NULL;
    if (!key || !key_len)
        return -EINVAL;
    sl_secret_mac *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    if (!(m->mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) || !(m->ctx = EVP_MAC_CTX_new(m->mac)) ||
        EVP_MAC_init(m->ctx, key, key_len, params) != 1) {
        sl_secret_mac_free(m);
        return -ENOMEM;
    }
    *out = m;
    return 0;
}

int sl_secret_mac_update(sl_secret_mac *m, const void *p, size_t n)
{
    return n == 0 || EVP_MAC_update(m->ctx, p, n) == 1 ? 0 : -EIO;
}

int sl_secret_mac_final(sl_secret_mac *m, uint8_t out[SL_SECRET_MAC_LEN])
{
    size_t len = 0;
    return EVP_MAC_final(m->ctx, out, &len, SL_SECRET_MAC_LEN) == 1 && len == SL_SECRET_MAC_LEN
               ? 0
               : -EIO;
}

bool sl_secret_mac_equal(const uint8_t a[SL_SECRET_MAC_LEN], const uint8_t b[SL_SECRET_MAC_LEN])
{
    return CRYPTO_memcmp(a, b, SL_SECRET_MAC_LEN) == 0;
}

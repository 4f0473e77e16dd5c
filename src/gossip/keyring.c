/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyring: AES-256-GCM sealing and opening of gossip packets under a ring of shared keys, and the
 * key ring file's parser (the format and the rotation procedure are in keyring.h). OpenSSL stays
 * behind this file: no header of the gossip layer exposes it.
 */
#include "gossip/keyring.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "base/file.h"
#include "base/hex.h"

#define FORMAT 0x01
#define NONCE 12
#define TAG 16

struct sl_keyring {
    size_t n;
    uint8_t key[SL_KEYRING_MAX_KEYS][SL_KEYRING_KEY_BYTES];
};

int sl_keyring_parse(const char *text, size_t len, sl_keyring **out, char *err, size_t errlen)
{
    *out = NULL;
    sl_keyring *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    size_t lineno = 0;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        lineno++;
        size_t a = i, b = e;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
            b--;
        i = e + 1;
        if (a == b || text[a] == '#')
            continue;
        if (b - a != 2 * SL_KEYRING_KEY_BYTES) {
            snprintf(err, errlen, "key ring line %zu: a key is %d hex digits", lineno,
                     2 * SL_KEYRING_KEY_BYTES);
            goto bad;
        }
        if (k->n == SL_KEYRING_MAX_KEYS) {
            snprintf(err, errlen, "key ring: more than %d keys", SL_KEYRING_MAX_KEYS);
            goto bad;
        }
        for (size_t j = 0; j < SL_KEYRING_KEY_BYTES; j++) {
            int v = sl_hex_byte(text + a + 2 * j);
            if (v < 0) {
                snprintf(err, errlen, "key ring line %zu: not a hex digit", lineno);
                goto bad;
            }
            k->key[k->n][j] = (uint8_t)v;
        }
        k->n++;
    }
    if (!k->n) {
        snprintf(err, errlen, "key ring: no key");
        goto bad;
    }
    *out = k;
    return 0;
bad:
    sl_keyring_free(k);
    return -EINVAL;
}

int sl_keyring_load(const char *path, sl_keyring **out, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int r = sl_file_read(path, SL_KEYRING_MAX_FILE, SL_FILE_REGULAR | SL_FILE_SECRET, &text, &len,
                         err, errlen);
    if (r < 0)
        return r;
    r = sl_keyring_parse(text, len, out, err, errlen);
    OPENSSL_cleanse(text, len); /* the keys' hex does not linger in freed memory */
    free(text);
    return r;
}

void sl_keyring_free(sl_keyring *k)
{
    if (k) {
        OPENSSL_cleanse(k, sizeof *k); /* no key bytes left in freed memory */
        free(k);
    }
}

size_t sl_keyring_count(const sl_keyring *k)
{
    return k ? k->n : 0;
}

/* One GCM pass; enc: seal (writes the tag), else open (checks it). */
static int gcm(const uint8_t *key, int enc, const uint8_t *nonce, const uint8_t *aad,
               const uint8_t *in, size_t len, uint8_t *out, uint8_t *tag)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int ok = c != NULL, n = 0;
    ok = ok && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE, NULL) == 1;
    ok = ok && EVP_CipherInit_ex(c, NULL, NULL, key, nonce, enc) == 1;
    ok = ok && EVP_CipherUpdate(c, NULL, &n, aad, 1) == 1;
    ok = ok && EVP_CipherUpdate(c, out, &n, in, (int)len) == 1;
    if (ok && !enc)
        ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG, tag) == 1;
    ok = ok && EVP_CipherFinal_ex(c, out + n, &n) == 1;
    if (ok && enc)
        ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG, tag) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -1;
}

int sl_keyring_seal(const sl_keyring *k, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    if (!k || !k->n)
        return -EIO;
    if (len > (size_t)1 << 30 || cap < len + SL_KEYRING_OVERHEAD)
        return -EMSGSIZE;
    out[0] = FORMAT;
    if (RAND_bytes(out + 1, NONCE) != 1)
        return -EIO;
    if (gcm(k->key[0], 1, out + 1, out, in, len, out + 1 + NONCE, out + 1 + NONCE + len) < 0)
        return -EIO;
    return (int)(len + SL_KEYRING_OVERHEAD);
}

int sl_keyring_open(const sl_keyring *k, const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
    if (!k || len < SL_KEYRING_OVERHEAD || in[0] != FORMAT || len > (size_t)1 << 30)
        return -EBADMSG;
    size_t plen = len - SL_KEYRING_OVERHEAD;
    if (cap < plen)
        return -EMSGSIZE;
    uint8_t tag[TAG];
    memcpy(tag, in + len - TAG, TAG);
    for (size_t i = 0; i < k->n; i++)
        if (gcm(k->key[i], 0, in + 1, in, in + 1 + NONCE, plen, out, tag) == 0)
            return (int)plen;
    return -EBADMSG;
}

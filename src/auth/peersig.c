/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster secret's proof on peer calls (see peersig.h): secret sets, signing, verifying, and
 * the reloadable slot.
 */
#include "auth/peersig.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/sha.h>

#include "auth/bearer.h"
#include "base/file.h"
#include "base/hex.h"

/* Each secret is kept as a keyed HMAC context, the template every call duplicates: fetching
 * the algorithms and keying them once per set, not per call, takes the signature from ~7 us to
 * about a microsecond (OpenSSL 3's one-shot HMAC() and SHA256() fetch their implementations
 * every time), and a small pool of re-initialised copies saves the copy per call. */
#define POOL 8 /* contexts kept per secret for reuse (about one per worker thread) */

typedef struct mac_slot {
    atomic_flag busy;
    EVP_MAC_CTX *c; /* a copy of the template, re-initialised per call (same key); NULL at first */
} mac_slot;

struct sl_peersig_keys {
    _Atomic int refs;
    size_t n;
    EVP_MD *sha256;
    EVP_MAC_CTX *mac[SL_PEERSIG_MAX_KEYS];
    mac_slot pool[SL_PEERSIG_MAX_KEYS][POOL]; /* taken with a test-and-set, never waited for */
};

static const char domain[] = "sluice-peer-v1\n";

/* A keyed HMAC-SHA256 context (the template), or NULL. */
static EVP_MAC_CTX *keyed(const char *key, size_t len)
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *c = mac ? EVP_MAC_CTX_new(mac) : NULL;
    EVP_MAC_free(mac); /* the context holds its own reference */
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (c && EVP_MAC_init(c, (const unsigned char *)key, len, params) != 1) {
        EVP_MAC_CTX_free(c);
        c = NULL;
    }
    return c;
}

int sl_peersig_keys_parse(const char *buf, size_t n, sl_peersig_keys **out, const char **why)
{
    sl_peersig_keys *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    atomic_init(&k->refs, 1);
    for (size_t i = 0; i < SL_PEERSIG_MAX_KEYS; i++)
        for (size_t j = 0; j < POOL; j++)
            atomic_flag_clear(&k->pool[i][j].busy);
    if (!(k->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL))) {
        free(k);
        return -ENOMEM;
    }
    const char *p = buf, *end = buf + n;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *a = p, *b = le;
        p = nl ? nl + 1 : end;
        while (a < b && (*a == ' ' || *a == '\t' || *a == '\r'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
            b--;
        if (a == b || *a == '#')
            continue;
        size_t l = (size_t)(b - a);
        for (size_t i = 0; i < l; i++)
            if (!sl_bearer_char_ok((unsigned char)a[i])) {
                *why = "a secret is one line of visible ASCII characters, without spaces";
                goto bad;
            }
        if (l < SL_PEERSIG_MIN_SECRET) {
            *why = "a secret shorter than 16 bytes";
            goto bad;
        }
        if (l > SL_PEERSIG_MAX_SECRET) {
            *why = "a secret longer than 512 bytes";
            goto bad;
        }
        if (k->n == SL_PEERSIG_MAX_KEYS) {
            *why = "more than two secrets (the current one, and one more during a rotation)";
            goto bad;
        }
        if (!(k->mac[k->n] = keyed(a, l))) {
            sl_peersig_keys_unref(k);
            return -ENOMEM;
        }
        k->n++;
    }
    if (k->n == 0) {
        *why = "no secret in the file";
        goto bad;
    }
    *out = k;
    return 0;
bad:
    sl_peersig_keys_unref(k);
    return -EINVAL;
}

int sl_peersig_keys_read(const char *path, sl_peersig_keys **out, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    int rc = sl_file_read(path, SL_PEERSIG_MAX_FILE, SL_FILE_REGULAR | SL_FILE_SECRET, &buf, &len,
                          err, errlen); /* the owner's alone (base/file.h) */
    if (rc)
        return rc;
    const char *why = NULL;
    rc = sl_peersig_keys_parse(buf, len, out, &why);
    OPENSSL_cleanse(buf, len);
    free(buf);
    if (rc == -EINVAL && errlen)
        snprintf(err, errlen, "%s: %s", path, why);
    return rc;
}

int sl_peersig_keys_derive(const sl_peersig_keys *k, size_t i, const char *label,
                           uint8_t out[SL_PEERSIG_DERIVED_LEN])
{
    if (!k || i >= k->n)
        return -EINVAL;
    EVP_MAC_CTX *c = EVP_MAC_CTX_dup(k->mac[i]);
    size_t len = 0;
    int ok = c && EVP_MAC_update(c, (const unsigned char *)"sluice-derive-v1\n", 17) == 1 &&
             EVP_MAC_update(c, (const unsigned char *)label, strlen(label)) == 1 &&
             EVP_MAC_final(c, out, &len, SL_PEERSIG_DERIVED_LEN) == 1 &&
             len == SL_PEERSIG_DERIVED_LEN;
    EVP_MAC_CTX_free(c);
    return ok ? 0 : -ENOMEM;
}

size_t sl_peersig_keys_count(const sl_peersig_keys *k)
{
    return k ? k->n : 0;
}

void sl_peersig_keys_ref(sl_peersig_keys *k)
{
    atomic_fetch_add(&k->refs, 1);
}

void sl_peersig_keys_unref(sl_peersig_keys *k)
{
    if (k && atomic_fetch_sub(&k->refs, 1) == 1) {
        for (size_t i = 0; i < k->n; i++) {
            EVP_MAC_CTX_free(k->mac[i]); /* OpenSSL wipes the key it holds */
            for (size_t j = 0; j < POOL; j++)
                EVP_MAC_CTX_free(k->pool[i][j].c);
        }
        EVP_MD_free(k->sha256);
        OPENSSL_cleanse(k, sizeof *k);
        free(k);
    }
}

/* HMAC-SHA256 of the signed string under key i into mac. 0 or -ENOMEM. */
static int mac_of(const sl_peersig_keys *k, size_t i, const char *path, size_t path_len,
                  const char *ts, size_t ts_len, const char *sender, size_t sender_len,
                  const unsigned char digest[SHA256_DIGEST_LENGTH],
                  unsigned char mac[SHA256_DIGEST_LENGTH])
{
    /* the signed string: bounded (path at most a few hundred bytes, by the callers' caps) */
    unsigned char msg[sizeof domain + 512 + 24 + SL_PEERSIG_MAX_SENDER + SHA256_DIGEST_LENGTH];
    if (path_len > 512 || ts_len > 22 || sender_len > SL_PEERSIG_MAX_SENDER)
        return -EINVAL;
    size_t m = 0;
    memcpy(msg, domain, sizeof domain - 1);
    m += sizeof domain - 1;
    memcpy(msg + m, path, path_len);
    m += path_len;
    msg[m++] = '\n';
    memcpy(msg + m, ts, ts_len);
    m += ts_len;
    msg[m++] = '\n';
    memcpy(msg + m, sender, sender_len);
    m += sender_len;
    msg[m++] = '\n';
    memcpy(msg + m, digest, SHA256_DIGEST_LENGTH);
    m += SHA256_DIGEST_LENGTH;
    /* a free pooled context (re-initialised under its key), else a copy of the template */
    mac_slot *slot = NULL;
    sl_peersig_keys *mk = (sl_peersig_keys *)k; /* the pool is the set's only mutable part */
    for (size_t j = 0; j < POOL && !slot; j++)
        if (!atomic_flag_test_and_set_explicit(&mk->pool[i][j].busy, memory_order_acquire))
            slot = &mk->pool[i][j];
    EVP_MAC_CTX *c = NULL;
    if (slot && slot->c && EVP_MAC_init(slot->c, NULL, 0, NULL) == 1)
        c = slot->c;
    else if (slot && (EVP_MAC_CTX_free(slot->c), slot->c = EVP_MAC_CTX_dup(k->mac[i])))
        c = slot->c;
    else if (!slot)
        c = EVP_MAC_CTX_dup(k->mac[i]);
    size_t ml = 0;
    int ok = c && EVP_MAC_update(c, msg, m) == 1 &&
             EVP_MAC_final(c, mac, &ml, SHA256_DIGEST_LENGTH) == 1 && ml == SHA256_DIGEST_LENGTH;
    if (slot)
        atomic_flag_clear_explicit(&slot->busy, memory_order_release);
    else
        EVP_MAC_CTX_free(c);
    return ok ? 0 : -ENOMEM;
}

/* SHA-256 of the body with the set's fetched digest. */
static bool digest_of(const sl_peersig_keys *k, const void *body, size_t len,
                      unsigned char out[SHA256_DIGEST_LENGTH])
{
    return EVP_Digest(body ? body : (const void *)"", len, out, NULL, k->sha256, NULL) == 1;
}

static bool sender_ok(const char *s, size_t n)
{
    if (n == 0 || n > SL_PEERSIG_MAX_SENDER)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!sl_bearer_char_ok((unsigned char)s[i]))
            return false;
    return true;
}

int sl_peersig_sign(const sl_peersig_keys *k, const char *path, size_t path_len, int64_t ts_ms,
                    const char *sender, const void *body, size_t len, char *out, size_t cap)
{
    size_t sl = sender ? strlen(sender) : 0;
    if (!k || !k->n || !sender_ok(sender, sl) || ts_ms < 0)
        return -EINVAL;
    char ts[24];
    int tl = snprintf(ts, sizeof ts, "%lld", (long long)ts_ms);
    unsigned char digest[SHA256_DIGEST_LENGTH], mac[SHA256_DIGEST_LENGTH];
    if (!digest_of(k, body, len, digest))
        return -ENOMEM;
    int rc = mac_of(k, 0, path, path_len, ts, (size_t)tl, sender, sl, digest, mac);
    if (rc)
        return rc;
    if (cap < 3 + (size_t)tl + 1 + sl + 1 + 2 * SHA256_DIGEST_LENGTH + 1)
        return -ENOSPC;
    int n = snprintf(out, cap, "v1 %s %s ", ts, sender);
    for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++, n += 2)
        sl_hex_put(out + n, mac[i], false);
    out[n] = '\0';
    return n;
}

sl_peersig_verdict sl_peersig_verify(const sl_peersig_keys *k, const char *value, size_t vlen,
                                     const char *path, size_t path_len, const void *body,
                                     size_t len, int64_t now_ms, int64_t skew_ms,
                                     const char **sender, size_t *sender_len)
{
    /* "v1 " <ts> " " <sender> " " <64 hex> */
    if (!k || !k->n || vlen < 3 + 1 + 1 + 1 + 1 + 64 || memcmp(value, "v1 ", 3) != 0)
        return SL_PEERSIG_MALFORMED;
    const char *ts = value + 3, *end = value + vlen;
    const char *sp = memchr(ts, ' ', (size_t)(end - ts));
    if (!sp || sp == ts || sp - ts > 16) /* 16 digits: ms until the year 318857, no overflow */
        return SL_PEERSIG_MALFORMED;
    int64_t t = 0;
    for (const char *c = ts; c < sp; c++) {
        if (*c < '0' || *c > '9' || (c == ts && *c == '0' && sp - ts > 1))
            return SL_PEERSIG_MALFORMED;
        t = t * 10 + (*c - '0');
    }
    const char *snd = sp + 1;
    const char *hex = end - 64;
    if (hex <= snd + 1 || hex[-1] != ' ' || !sender_ok(snd, (size_t)(hex - 1 - snd)))
        return SL_PEERSIG_MALFORMED;
    unsigned char want[SHA256_DIGEST_LENGTH];
    for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++) {
        int b = sl_hex_byte(hex + 2 * i);
        if (b < 0)
            return SL_PEERSIG_MALFORMED;
        want[i] = (unsigned char)b;
    }
    if (t > now_ms + skew_ms || t < now_ms - skew_ms)
        return SL_PEERSIG_SKEW;
    unsigned char digest[SHA256_DIGEST_LENGTH], mac[SHA256_DIGEST_LENGTH];
    if (!digest_of(k, body, len, digest))
        return SL_PEERSIG_BAD_MAC;
    int good = 0;
    for (size_t i = 0; i < k->n; i++) /* every secret, whatever the first gave */
        if (!mac_of(k, i, path, path_len, ts, (size_t)(sp - ts), snd, (size_t)(hex - 1 - snd),
                    digest, mac))
            good |= CRYPTO_memcmp(mac, want, sizeof mac) == 0;
    if (!good)
        return SL_PEERSIG_BAD_MAC;
    *sender = snd;
    *sender_len = (size_t)(hex - 1 - snd);
    return SL_PEERSIG_OK;
}

const char *sl_peersig_verdict_name(sl_peersig_verdict v)
{
    switch (v) {
    case SL_PEERSIG_OK:
        return "ok";
    case SL_PEERSIG_MALFORMED:
        return "malformed";
    case SL_PEERSIG_SKEW:
        return "skew";
    case SL_PEERSIG_BAD_MAC:
        return "bad_mac";
    }
    return "?";
}

struct sl_peersig {
    pthread_mutex_t mu;
    sl_peersig_keys *k;
};

sl_peersig *sl_peersig_new(sl_peersig_keys *k)
{
    sl_peersig *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    if (k)
        sl_peersig_keys_ref(k);
    s->k = k;
    return s;
}

void sl_peersig_free(sl_peersig *s)
{
    if (!s)
        return;
    sl_peersig_keys_unref(s->k);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void sl_peersig_set(sl_peersig *s, sl_peersig_keys *k)
{
    if (k)
        sl_peersig_keys_ref(k);
    pthread_mutex_lock(&s->mu);
    sl_peersig_keys *old = s->k;
    s->k = k;
    pthread_mutex_unlock(&s->mu);
    sl_peersig_keys_unref(old);
}

sl_peersig_keys *sl_peersig_get(sl_peersig *s)
{
    pthread_mutex_lock(&s->mu);
    sl_peersig_keys *k = s->k;
    if (k)
        sl_peersig_keys_ref(k);
    pthread_mutex_unlock(&s->mu);
    return k;
}

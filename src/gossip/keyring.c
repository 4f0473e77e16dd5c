/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyring: AES-256-GCM sealing and opening of gossip packets under a ring of shared keys, the
 * key ring file's parser and the replay guard (the format, the rotation procedure and the replay
 * scheme with its reasons are in keyring.h). OpenSSL stays
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
#include "base/strmap.h"

#define FORMAT 0x02
#define NONCE SL_KEYRING_NONCE
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
               size_t aadlen, const uint8_t *in, size_t len, uint8_t *out, uint8_t *tag)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int ok = c != NULL, n = 0;
    ok = ok && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1;
    ok = ok && EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE, NULL) == 1;
    ok = ok && EVP_CipherInit_ex(c, NULL, NULL, key, nonce, enc) == 1;
    ok = ok && EVP_CipherUpdate(c, NULL, &n, aad, (int)aadlen) == 1;
    ok = ok && EVP_CipherUpdate(c, out, &n, in, (int)len) == 1;
    if (ok && !enc)
        ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG, tag) == 1;
    ok = ok && EVP_CipherFinal_ex(c, out + n, &n) == 1;
    if (ok && enc)
        ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG, tag) == 1;
    EVP_CIPHER_CTX_free(c);
    return ok ? 0 : -1;
}

int sl_keyring_seal(const sl_keyring *k, const char *sender, uint64_t ts_ms, const uint8_t *in,
                    size_t len, uint8_t *out, size_t cap)
{
    if (!k || !k->n)
        return -EIO;
    size_t sl = sender ? strlen(sender) : 0;
    if (!sl || sl > SL_KEYRING_MAX_SENDER)
        return -EINVAL;
    for (size_t i = 0; i < sl; i++)
        if ((unsigned char)sender[i] <= 0x20 || (unsigned char)sender[i] >= 0x7f)
            return -EINVAL;
    size_t aad = 2 + sl + 8;
    if (len > (size_t)1 << 30 || cap < len + SL_KEYRING_OVERHEAD + sl)
        return -EMSGSIZE;
    out[0] = FORMAT;
    out[1] = (uint8_t)sl;
    memcpy(out + 2, sender, sl);
    for (int i = 0; i < 8; i++)
        out[2 + sl + i] = (uint8_t)(ts_ms >> (56 - 8 * i));
    uint8_t *nonce = out + aad;
    if (RAND_bytes(nonce, NONCE) != 1)
        return -EIO;
    if (gcm(k->key[0], 1, nonce, out, aad, in, len, nonce + NONCE, nonce + NONCE + len) < 0)
        return -EIO;
    return (int)(len + SL_KEYRING_OVERHEAD + sl);
}

int sl_keyring_open(const sl_keyring *k, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                    sl_keyring_sealed *info)
{
    if (!k || len < SL_KEYRING_OVERHEAD + 1 || in[0] != FORMAT || len > (size_t)1 << 30)
        return -EBADMSG;
    size_t sl = in[1];
    if (!sl || sl > SL_KEYRING_MAX_SENDER || len < SL_KEYRING_OVERHEAD + sl)
        return -EBADMSG;
    for (size_t i = 0; i < sl; i++)
        if (in[2 + i] <= 0x20 || in[2 + i] >= 0x7f)
            return -EBADMSG; /* a name is printable ASCII, and never holds a NUL */
    size_t aad = 2 + sl + 8, plen = len - SL_KEYRING_OVERHEAD - sl;
    if (cap < plen)
        return -EMSGSIZE;
    const uint8_t *nonce = in + aad;
    uint8_t tag[TAG];
    memcpy(tag, in + len - TAG, TAG);
    for (size_t i = 0; i < k->n; i++)
        if (gcm(k->key[i], 0, nonce, in, aad, nonce + NONCE, plen, out, tag) == 0) {
            if (info) {
                memcpy(info->sender, in + 2, sl);
                info->sender[sl] = '\0';
                uint64_t ts = 0;
                for (int j = 0; j < 8; j++)
                    ts = ts << 8 | in[2 + sl + j];
                info->ts_ms = ts;
                memcpy(info->nonce, nonce, NONCE);
            }
            return (int)plen;
        }
    return -EBADMSG;
}

/* --- the replay guard (the scheme and why are in keyring.h) */

typedef struct seen {
    uint64_t ts, nonce;
} seen;

typedef struct sender {
    char name[SL_KEYRING_MAX_SENDER + 1];
    int used;
    uint64_t floor;    /* nothing at or below this timestamp is accepted any more */
    uint64_t newest;   /* the newest timestamp accepted */
    uint64_t heard;    /* our clock when last heard, for eviction */
    unsigned n;
    seen recent[SL_KEYRING_GUARD_RECENT];
} sender;

struct sl_keyring_guard {
    uint64_t window;
    size_t max, used;
    uint64_t evicted_floor; /* the newest timestamp of any sender forgotten */
    sl_strmap byname;       /* name -> index into snd */
    sender *snd;
};

int sl_keyring_guard_new(uint64_t window_ms, size_t max_senders, sl_keyring_guard **out)
{
    *out = NULL;
    if (!window_ms || !max_senders)
        return -EINVAL;
    sl_keyring_guard *g = calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->snd = calloc(max_senders, sizeof *g->snd);
    if (!g->snd) {
        free(g);
        return -ENOMEM;
    }
    g->window = window_ms;
    g->max = max_senders;
    uint64_t seed;
    if (RAND_bytes((unsigned char *)&seed, sizeof seed) != 1)
        seed = (uint64_t)(uintptr_t)g;
    sl_strmap_init(&g->byname, sizeof(size_t), max_senders, seed);
    *out = g;
    return 0;
}

void sl_keyring_guard_free(sl_keyring_guard *g)
{
    if (!g)
        return;
    sl_strmap_free(&g->byname);
    free(g->snd);
    free(g);
}

static uint64_t nonce64(const uint8_t *n)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | n[i];
    return v;
}

/* The sender's entry, a new one (forgetting the least recently heard sender when full), or NULL. */
static sender *sender_of(sl_keyring_guard *g, const char *name, uint64_t now)
{
    size_t len = strlen(name);
    sl_strmap_ent *e = sl_strmap_find(&g->byname, 0, name, len);
    if (e)
        return &g->snd[*(size_t *)sl_strmap_val(e)];
    size_t idx;
    if (g->used < g->max) {
        idx = g->used++;
    } else {
        idx = 0;
        for (size_t i = 1; i < g->max; i++)
            if (g->snd[i].heard < g->snd[idx].heard)
                idx = i;
        sender *o = &g->snd[idx];
        if (o->newest > g->evicted_floor)
            g->evicted_floor = o->newest;
        sl_strmap_remove(&g->byname, 0, o->name, strlen(o->name));
    }
    if (sl_strmap_put(&g->byname, 0, name, len, &idx, NULL) < 0)
        return NULL;
    sender *s = &g->snd[idx];
    memset(s, 0, sizeof *s);
    memcpy(s->name, name, len + 1);
    s->used = 1;
    s->floor = g->evicted_floor;
    s->heard = now;
    return s;
}

int sl_keyring_guard_check(sl_keyring_guard *g, const sl_keyring_sealed *info, uint64_t now_ms)
{
    uint64_t ts = info->ts_ms;
    /* differences, not sums: a timestamp near UINT64_MAX must not wrap into the window */
    if ((now_ms > ts && now_ms - ts > g->window) || (ts > now_ms && ts - now_ms > g->window))
        return -ESTALE;
    sender *s = sender_of(g, info->sender, now_ms);
    if (!s)
        return -ESTALE;
    s->heard = now_ms;
    if (ts <= s->floor)
        return -ESTALE;
    uint64_t nv = nonce64(info->nonce);
    unsigned oldest = 0;
    for (unsigned i = 0; i < s->n; i++) {
        if (s->recent[i].ts == ts && s->recent[i].nonce == nv)
            return -EALREADY;
        if (s->recent[i].ts < s->recent[oldest].ts)
            oldest = i;
    }
    if (s->n < SL_KEYRING_GUARD_RECENT) {
        s->recent[s->n++] = (seen){ts, nv};
    } else {
        /* older than all we remember: we cannot tell it from a replay */
        if (ts <= s->recent[oldest].ts)
            return -ESTALE;
        /* forget the oldest; nothing at or below it is accepted from now on */
        s->floor = s->recent[oldest].ts;
        s->recent[oldest] = (seen){ts, nv};
    }
    if (ts > s->newest)
        s->newest = ts;
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for auth/peersig: a peer secret file's bytes and an x-sluice-peer-auth header
 * value (the part of the input before the first newline; the rest is the body). Arbitrary bytes
 * never crash or overrun; a parsed file holds one or two secrets; a value is accepted only if it
 * is exactly the signature sl_peersig_sign makes for its own time and sender; and a signature of
 * the input's body verifies, while the same signature over one changed byte of the body does not.
 * A broken property traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "auth/peersig.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)
#define PATH "/pb.gubernator.PeersV1/UpdatePeerGlobals"
#define NOW 1795972524601LL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    sl_peersig_keys *file = NULL;
    const char *why = NULL;
    if (sl_peersig_keys_parse(text, size, &file, &why) == 0) {
        size_t n = sl_peersig_keys_count(file);
        CHECK(n >= 1 && n <= SL_PEERSIG_MAX_KEYS);
        sl_peersig_keys_unref(file);
    } else {
        CHECK(file == NULL && why != NULL);
    }

    static const char secret[] = "fuzz-secret-0123456789abcdef";
    sl_peersig_keys *k = NULL;
    CHECK(sl_peersig_keys_parse(secret, sizeof secret - 1, &k, &why) == 0);
    const uint8_t *nl = memchr(data, '\n', size);
    size_t vlen = nl ? (size_t)(nl - data) : size;
    const uint8_t *body = nl ? nl + 1 : data + size;
    size_t blen = size - (size_t)(body - data);

    const char *snd = NULL;
    size_t sl = 0;
    sl_peersig_verdict v = sl_peersig_verify(k, text, vlen, PATH, sizeof PATH - 1, body, blen,
                                             NOW, 30000, &snd, &sl);
    if (v == SL_PEERSIG_OK) { /* only a real signature: sign again with its time and sender */
        CHECK(sl > 0 && sl <= SL_PEERSIG_MAX_SENDER && snd >= text && snd + sl <= text + vlen);
        char sender[SL_PEERSIG_MAX_SENDER + 1], again[SL_PEERSIG_VALUE_MAX];
        memcpy(sender, snd, sl);
        sender[sl] = '\0';
        long long ts = 0;
        for (const char *c = text + 3; *c != ' '; c++)
            ts = ts * 10 + (*c - '0');
        int n = sl_peersig_sign(k, PATH, sizeof PATH - 1, ts, sender, body, blen, again,
                                sizeof again);
        CHECK(n > 0 && (size_t)n == vlen && !memcmp(again, text, vlen));
    }

    /* the round trip over this body, and a changed byte */
    char sig[SL_PEERSIG_VALUE_MAX];
    int n = sl_peersig_sign(k, PATH, sizeof PATH - 1, NOW, "10.0.0.1:5454", body, blen, sig,
                            sizeof sig);
    CHECK(n > 0);
    CHECK(sl_peersig_verify(k, sig, (size_t)n, PATH, sizeof PATH - 1, body, blen, NOW, 0, &snd,
                            &sl) == SL_PEERSIG_OK);
    if (blen) {
        uint8_t copy[4096];
        size_t cl = blen < sizeof copy ? blen : sizeof copy;
        memcpy(copy, body, cl);
        copy[cl / 2] ^= 1;
        CHECK(sl_peersig_verify(k, sig, (size_t)n, PATH, sizeof PATH - 1, copy, cl, NOW, 0, &snd,
                                &sl) != SL_PEERSIG_OK || cl != blen);
    }
    sl_peersig_keys_unref(k);
    return 0;
}

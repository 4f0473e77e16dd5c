/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyring: optional encryption of gossip packets with AES-256-GCM (OpenSSL EVP) under a shared
 * key ring. The first key seals every outgoing packet; any key of the ring opens an incoming one,
 * so keys rotate without a restart and without a flag day: add the new key second everywhere
 * (reload), then move it first everywhere, then drop the old one.
 *
 * Key ring file: one key a line, 64 hex digits (32 bytes); blank lines and lines starting with '#'
 * are ignored; at most SL_KEYRING_MAX_KEYS keys; the file is read with a byte cap.
 *
 * Sealed packet:  0x01 (format) | nonce (12 random bytes) | ciphertext | tag (16 bytes)
 * with the format byte as additional authenticated data. A random 96-bit nonce per packet: the
 * collision bound (2^32 packets per key) is far above a key's lifetime at gossip rates.
 *
 * A ring is immutable once built; the driver swaps in a new one on reload.
 */
#ifndef SLUICE_GOSSIP_KEYRING_H
#define SLUICE_GOSSIP_KEYRING_H

#include <stddef.h>
#include <stdint.h>

#define SL_KEYRING_KEY_BYTES 32
#define SL_KEYRING_MAX_KEYS 16
#define SL_KEYRING_OVERHEAD (1 + 12 + 16)
#define SL_KEYRING_MAX_FILE 4096

typedef struct sl_keyring sl_keyring;

/* Parse a key ring from text. 0, or -EINVAL with the reason (and line) in err, or -ENOMEM. */
int sl_keyring_parse(const char *text, size_t len, sl_keyring **out, char *err, size_t errlen);
/* Read and parse the file at path (at most SL_KEYRING_MAX_FILE bytes). */
int sl_keyring_load(const char *path, sl_keyring **out, char *err, size_t errlen);
void sl_keyring_free(sl_keyring *k);
size_t sl_keyring_count(const sl_keyring *k);

/* Seal len bytes of in into out (cap bytes): the sealed length, or -EMSGSIZE / -EIO. */
int sl_keyring_seal(const sl_keyring *k, const uint8_t *in, size_t len, uint8_t *out, size_t cap);
/* Open a sealed packet into out: the plaintext length, or -EBADMSG when no key opens it (or it is
 * not a sealed packet), -EMSGSIZE when out is too small. */
int sl_keyring_open(const sl_keyring *k, const uint8_t *in, size_t len, uint8_t *out, size_t cap);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * keyring: authentication and encryption of gossip packets with AES-256-GCM (OpenSSL EVP) under a
 * shared key ring, and the replay guard that goes with it. The first key seals every outgoing
 * packet; any key of the ring opens an incoming one, so keys rotate without a restart and without
 * a flag day: add the new key second everywhere (reload), then move it first everywhere, then
 * drop the old one.
 *
 * Key ring file: one key a line, 64 hex digits (32 bytes); blank lines and lines starting with '#'
 * are ignored; at most SL_KEYRING_MAX_KEYS keys; the file is read with a byte cap.
 *
 * Sealed packet (format 2):
 *
 *   0x02 | sender length u8 | sender (1..64 printable ASCII bytes, no space)
 *        | timestamp u64 BE (ms since the epoch)
 *        | nonce (12 random bytes) | ciphertext | tag (16 bytes)
 *
 * Everything before the nonce is additional authenticated data: who sealed it and when cannot be
 * changed without the key. A random 96-bit nonce per packet: the collision bound (2^32 packets per
 * key) is far above a key's lifetime at gossip rates. Format 1 (no sender, no time) is refused:
 * accepting it would let a captured packet be replayed forever.
 *
 * The replay guard (sl_keyring_guard) decides whether an opened packet is fresh: its timestamp
 * must be within the window of the receiver's clock (either side: clocks differ), and inside the
 * window the same packet is accepted once. It remembers, per sender, the (timestamp, nonce) of its
 * last SL_KEYRING_GUARD_RECENT packets and a floor: when a sender's cache is full, its oldest entry
 * is forgotten and the floor rises to that entry's timestamp, and nothing at or below the floor is
 * accepted. So every packet is either in the cache (a replay, refused) or at or below the floor
 * (refused), and memory is bounded by senders x SL_KEYRING_GUARD_RECENT. Why not a per-sender
 * sequence high-water mark alone: gossip is UDP, reordered and lost, and a sender restarts with
 * its counter at zero; why not one global nonce cache: one busy sender would evict everyone
 * else's entries. A reordered packet older than a sender's last SL_KEYRING_GUARD_RECENT is refused
 * (SWIM shrugs off a lost datagram). The sender table is bounded too: a full table forgets its
 * least recently heard sender and then refuses, from senders it does not hold, anything not newer
 * than the newest packet it forgot. Only holders of a key reach the guard, so its senders are
 * members.
 *
 * A ring is immutable once built; the driver swaps in a new one on reload.
 */
#ifndef SLUICE_GOSSIP_KEYRING_H
#define SLUICE_GOSSIP_KEYRING_H

#include <stddef.h>
#include <stdint.h>

#define SL_KEYRING_KEY_BYTES 32
#define SL_KEYRING_MAX_KEYS 16
#define SL_KEYRING_MAX_SENDER 64
#define SL_KEYRING_NONCE 12
/* format, sender length, timestamp, nonce, tag: add the sender's length for a packet's overhead */
#define SL_KEYRING_OVERHEAD (1 + 1 + 8 + SL_KEYRING_NONCE + 16)
#define SL_KEYRING_MAX_OVERHEAD (SL_KEYRING_OVERHEAD + SL_KEYRING_MAX_SENDER)
#define SL_KEYRING_MAX_FILE 4096
/* (timestamp, nonce) pairs remembered per sender */
#define SL_KEYRING_GUARD_RECENT 64

typedef struct sl_keyring sl_keyring;

/* Parse a key ring from text. 0, or -EINVAL with the reason (and line) in err, or -ENOMEM. */
int sl_keyring_parse(const char *text, size_t len, sl_keyring **out, char *err, size_t errlen);
/* Read and parse the file at path (at most SL_KEYRING_MAX_FILE bytes). */
int sl_keyring_load(const char *path, sl_keyring **out, char *err, size_t errlen);
void sl_keyring_free(sl_keyring *k);
size_t sl_keyring_count(const sl_keyring *k);

/* Who sealed a packet and when (from its authenticated data), and its nonce. */
typedef struct sl_keyring_sealed {
    char sender[SL_KEYRING_MAX_SENDER + 1];
    uint64_t ts_ms;
    uint8_t nonce[SL_KEYRING_NONCE];
} sl_keyring_sealed;

/* Seal len bytes of in into out (cap bytes) as sent by `sender` (1..64 bytes) at ts_ms: the sealed
 * length (len + SL_KEYRING_OVERHEAD + strlen(sender)), or -EINVAL (sender) / -EMSGSIZE / -EIO. */
int sl_keyring_seal(const sl_keyring *k, const char *sender, uint64_t ts_ms, const uint8_t *in,
                    size_t len, uint8_t *out, size_t cap);
/* Open a sealed packet into out: the plaintext length and, when info is not NULL, its sender,
 * time and nonce; or -EBADMSG when no key opens it (or it is not a format-2 sealed packet),
 * -EMSGSIZE when out is too small. A pure function of its inputs (the fuzzer drives it). */
int sl_keyring_open(const sl_keyring *k, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                    sl_keyring_sealed *info);

typedef struct sl_keyring_guard sl_keyring_guard;

/* A replay guard with a window of window_ms either side of now, for at most max_senders senders.
 * 0 or -ENOMEM / -EINVAL. */
int sl_keyring_guard_new(uint64_t window_ms, size_t max_senders, sl_keyring_guard **out);
void sl_keyring_guard_free(sl_keyring_guard *g);
/* Whether an opened packet is fresh at now_ms: 0 (and it is remembered), -ESTALE (outside the
 * window, or at or below the sender's floor) or -EALREADY (seen before). */
int sl_keyring_guard_check(sl_keyring_guard *g, const sl_keyring_sealed *info, uint64_t now_ms);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimwire: the SWIM gossip wire format, as pure functions over buffers (no state, no I/O). The
 * protocol (gossip/swim.c) encodes with sl_swimwire_put_* into a caller's buffer and decodes with
 * sl_swimwire_decode(), which validates a whole packet before anyone reads a field: a version it
 * does not speak, an unknown type, a field past its cap, a truncated or over-long packet are all
 * refused with a static reason (the caller drops and counts it). Decoded strings point into the
 * packet; they are not NUL-terminated.
 *
 * Every packet, datagram or stream, is
 *
 *    0        1        2        3
 *   +--------+--------+--------+--------+
 *   |  'S'   |  'W'   | version|  type  |     version = SL_SWIMWIRE_VERSION (1)
 *   +--------+--------+--------+--------+
 *   | update count (u16, big endian)    |     at most SL_SWIMWIRE_MAX_UPDATES
 *   +-----------------------------------+
 *   | body (by type, below)             |
 *   +-----------------------------------+
 *   | updates...                        |
 *   +-----------------------------------+
 *
 *   PING      seq u32 | target str8 | source str8          (probe; target guards a reused address)
 *   PING_REQ  seq u32 | target str8 | target-addr str8 | source str8     (probe it for me)
 *   ACK       seq u32 | source str8
 *   NACK      seq u32 | source str8                        (Lifeguard: "I tried, no answer")
 *   GOSSIP    (empty body: updates only)
 *   PUSH      flags u8                                     (stream: my full state, answer with yours)
 *   PULL      flags u8                                     (stream: the answer to a PUSH)
 *
 *   update:   status u8 | incarnation u32 | name str8 | addr str8 | from str8 | meta str16
 *
 * str8 is a length byte then that many bytes (names and addresses: 1..SL_SWIMWIRE_MAX_NAME
 * printable ASCII, `from` may be empty); str16 a big-endian u16 length then the bytes (meta: at
 * most SL_SWIMWIRE_MAX_META, opaque). Datagrams are at most SL_SWIMWIRE_MAX_UDP bytes so they pass
 * any path MTU without fragments; streams at most the caller's cap.
 */
#ifndef SLUICE_GOSSIP_SWIMWIRE_H
#define SLUICE_GOSSIP_SWIMWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/member.h"

#define SL_SWIMWIRE_VERSION 1
#define SL_SWIMWIRE_HEADER 6      /* magic, version, type, update count */
#define SL_SWIMWIRE_MAX_NAME 64       /* a member name or an "ip:port" */
#define SL_SWIMWIRE_MAX_META 256      /* a member's metadata blob */
#define SL_SWIMWIRE_MAX_UDP 1400      /* one datagram, under a 1500-byte MTU with IP/UDP headers */
#define SL_SWIMWIRE_MAX_UPDATES 8192  /* updates in one packet (a push carries the whole table) */
/* The largest encoded update: status, incarnation, three str8 and one str16. */
#define SL_SWIMWIRE_MAX_UPDATE_BYTES (1 + 4 + 3 * (1 + SL_SWIMWIRE_MAX_NAME) + 2 + SL_SWIMWIRE_MAX_META)

typedef enum {
    SL_SWIMWIRE_PING = 1,
    SL_SWIMWIRE_PING_REQ = 2,
    SL_SWIMWIRE_ACK = 3,
    SL_SWIMWIRE_NACK = 4,
    SL_SWIMWIRE_GOSSIP = 5,
    SL_SWIMWIRE_PUSH = 6,
    SL_SWIMWIRE_PULL = 7,
} sl_swimwire_type;

/* A member's status on the wire. They are sl_member_status's numbers, so the protocol keeps and
 * compares a status byte as it comes; the assertion keeps the two from drifting apart. */
enum { SL_SWIMWIRE_ALIVE = 0, SL_SWIMWIRE_SUSPECT = 1, SL_SWIMWIRE_DEAD = 2, SL_SWIMWIRE_LEFT = 3 };
_Static_assert(SL_SWIMWIRE_ALIVE == (int)SL_MEMBER_ALIVE &&
                   SL_SWIMWIRE_SUSPECT == (int)SL_MEMBER_SUSPECT &&
                   SL_SWIMWIRE_DEAD == (int)SL_MEMBER_DEAD &&
                   SL_SWIMWIRE_LEFT == (int)SL_MEMBER_LEFT,
               "gossip's status bytes are sl_member_status's numbers");

typedef struct sl_swimwire_str {
    const char *p;
    size_t len;
} sl_swimwire_str;

typedef struct sl_swimwire_update {
    uint8_t status;
    uint32_t incarnation;
    sl_swimwire_str name, addr, from;
    const uint8_t *meta;
    size_t meta_len;
} sl_swimwire_update;

typedef struct sl_swimwire_msg {
    sl_swimwire_type type;
    uint32_t seq;
    uint8_t flags;
    sl_swimwire_str target, target_addr, source;
    unsigned n_updates;
    const uint8_t *updates;  /* the encoded updates, already validated: read with _next_update */
    const uint8_t *end;
} sl_swimwire_msg;

/*
 * Validate and decode one packet of len bytes (at most max_len: 0 means SL_SWIMWIRE_MAX_UDP).
 * 0, or -EBADMSG (malformed), -EMSGSIZE (over max_len), -EPROTONOSUPPORT (another version) with a
 * static reason in *err.
 */
int sl_swimwire_decode(const uint8_t *p, size_t len, size_t max_len, sl_swimwire_msg *out,
                       const char **err);
/* The next of msg's updates into *u (call n_updates times; *cur starts at msg->updates). */
void sl_swimwire_next_update(const uint8_t **cur, sl_swimwire_update *u);

/*
 * Encoding into buf[0..cap): each returns the new length, or -EMSGSIZE when it does not fit or a
 * field is over its cap (the buffer is then unchanged from the caller's point of view: keep the
 * old length). _put_head writes the header and body and a zero update count; _put_update appends
 * one update and bumps that count.
 */
int sl_swimwire_put_head(uint8_t *buf, size_t cap, sl_swimwire_type type, uint32_t seq,
                         uint8_t flags, const char *target, const char *target_addr,
                         const char *source);
int sl_swimwire_put_update(uint8_t *buf, size_t cap, size_t len, const sl_swimwire_update *u);
/* Bytes one update takes encoded. */
size_t sl_swimwire_update_size(const sl_swimwire_update *u);

/*
 * The push/pull stream's framing: a u32 big-endian length (1..cap), then that many bytes (the
 * message, sealed when there is a key ring). A reader with no I/O of its own, for a driver that is
 * handed bytes where it said (libuv's alloc/read pair): _room says where the next bytes go and
 * how many fit, _got says n arrived there. Zero-initialise it; _free releases the buffer.
 */
#define SL_SWIMWIRE_FRAME_HDR 4
typedef struct sl_swimwire_frame {
    uint8_t hdr[SL_SWIMWIRE_FRAME_HDR];
    size_t hdr_got;
    uint8_t *buf;   /* the message, once its length is known */
    size_t want, got;
} sl_swimwire_frame;

void sl_swimwire_frame_room(sl_swimwire_frame *f, uint8_t **p, size_t *room);
/* 0: more to come; 1: a whole message in f->buf (f->want bytes); -EMSGSIZE: a length of 0 or
 * over cap; -ENOMEM. After 1 or an error the frame takes no more bytes. */
int sl_swimwire_frame_got(sl_swimwire_frame *f, size_t n, size_t cap);
void sl_swimwire_frame_free(sl_swimwire_frame *f);

#endif

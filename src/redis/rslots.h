/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Redis Cluster routing, sans-I/O: which of the cluster's 16384 slots a key hashes to (CRC16,
 * the XMODEM variant, of the key's hash tag), the slot -> master table read from a CLUSTER SLOTS
 * reply, and the redirections a master answers with (-MOVED slot host:port: the slot lives there
 * now; -ASK slot host:port: this one command goes there, after ASKING) with what each means for
 * the table. Nothing here sends or receives: redis/rstore.c and redis/rstorectl.c own the
 * connections and ask this module where a key goes and what to do with an error.
 *
 * Bounds: at most SL_RSLOTS_NODES_MAX masters and SL_RSLOTS_HOST_MAX bytes a host, whatever a
 * reply holds (a reply naming more is refused, not truncated). Whole-table refreshes asked for by
 * MOVED answers are rate-limited (sl_rslots_refresh_due), since a resharding sends one MOVED per
 * key moved.
 */
#ifndef SLUICE_REDIS_RSLOTS_H
#define SLUICE_REDIS_RSLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h> /* redisReply: the parsed reply, not the connection */

#define SL_RSLOTS_SLOTS 16384
#define SL_RSLOTS_NODES_MAX 128
#define SL_RSLOTS_HOST_MAX 64    /* an IP address, or a host name of up to 63 bytes */
#define SL_RSLOTS_NONE 0xFFFF    /* a slot no master serves */

/* CRC16 as Redis Cluster computes it: polynomial 0x1021, initial value 0, no reflection, no
 * final XOR ("123456789" -> 0x31C3). */
uint16_t sl_rslots_crc16(const void *data, size_t len);

/* The slot of a key: CRC16 of its hash tag modulo 16384. The tag is what lies between the first
 * '{' and the first '}' after it when that is not empty; otherwise the whole key is hashed. */
unsigned sl_rslots_key_slot(const char *key, size_t len);

typedef struct sl_rslots_node {
    char host[SL_RSLOTS_HOST_MAX];
    int port;
} sl_rslots_node;

typedef struct sl_rslots {
    uint16_t owner[SL_RSLOTS_SLOTS];          /* node index, or SL_RSLOTS_NONE */
    sl_rslots_node node[SL_RSLOTS_NODES_MAX];
    size_t n_nodes;
    int64_t refresh_every_ms;                 /* least time between two refreshes */
    int64_t last_refresh_ms;                  /* when the last one was allowed; INT64_MIN: never */
} sl_rslots;

/* An empty table: no slot served, no node, refreshes at most every refresh_every_ms. */
void sl_rslots_init(sl_rslots *t, int64_t refresh_every_ms);

/* The node index of host:port (host of hl bytes), added if new. The index, or -ENOSPC (the
 * table is full), or -EINVAL (an empty or too long host, a port out of 1..65535). */
int sl_rslots_node_add(sl_rslots *t, const char *host, size_t hl, int port);

/* The master serving `slot`, or NULL. */
const sl_rslots_node *sl_rslots_owner(const sl_rslots *t, unsigned slot);

/*
 * Fill t (emptied first; its refresh rate and last refresh are kept) from a CLUSTER SLOTS reply:
 * an array of [start, end, [host, port, id, ...], replicas...]. A master whose host is "" or "?"
 * (Redis does not know its address) is taken to be from_host, the server that answered.
 * 0, or -EPROTO (not such a reply: a range outside 0..16383 or reversed, a port out of range),
 * or -ENOSPC (more masters than SL_RSLOTS_NODES_MAX); then t is left empty.
 */
int sl_rslots_from_reply(sl_rslots *t, const redisReply *r, const char *from_host);

/* What an error answer means for routing. */
typedef enum sl_rslots_kind {
    SL_RSLOTS_OTHER = 0, /* not a redirection */
    SL_RSLOTS_MOVED,     /* the slot is served by host:port from now on */
    SL_RSLOTS_ASK,       /* this one command goes to host:port, preceded by ASKING */
} sl_rslots_kind;

typedef struct sl_rslots_redirect {
    sl_rslots_kind kind;
    unsigned slot;
    char host[SL_RSLOTS_HOST_MAX]; /* "" when the answer gave none (the answering server's) */
    int port;
} sl_rslots_redirect;

/* Read an error answer's text (hiredis's, without the '-'; a leading '-' is accepted too):
 * "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>". Returns the kind, SL_RSLOTS_OTHER
 * for any other error or a malformed redirection (a slot past 16383, no port). */
sl_rslots_kind sl_rslots_redirect_parse(const char *s, size_t len, sl_rslots_redirect *rd);

/*
 * Act on a parsed redirection (host "" taken as from_host): MOVED points the slot at its node
 * (added if new), ASK only finds or adds the node. Returns the node index to send to (with
 * ASKING first for ASK), or a negative errno from sl_rslots_node_add. *refresh is set when a MOVED
 * also asks for a whole-table refresh now (sl_rslots_refresh_due); it is never set for ASK.
 */
int sl_rslots_redirect_apply(sl_rslots *t, const sl_rslots_redirect *rd, const char *from_host,
                             int64_t now_ms, bool *refresh);

/* Whether a whole-table refresh may start at now_ms (refresh_every_ms since the last one
 * allowed); when it may, now_ms becomes the last one. */
bool sl_rslots_refresh_due(sl_rslots *t, int64_t now_ms);

#endif

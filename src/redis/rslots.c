/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Redis Cluster routing (see rslots.h): CRC16 and hash tags, the slot table and its filling from
 * CLUSTER SLOTS, and the reading of MOVED / ASK answers. Pure functions over caller-owned memory.
 */
#include "redis/rslots.h"

#include <errno.h>
#include <string.h>

uint16_t sl_rslots_crc16(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned sl_rslots_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close && close != open + 1)
            return sl_rslots_crc16(open + 1, (size_t)(close - open - 1)) & (SL_RSLOTS_SLOTS - 1);
    }
    return sl_rslots_crc16(key, len) & (SL_RSLOTS_SLOTS - 1);
}

static void empty(sl_rslots *t)
{
    for (size_t i = 0; i < SL_RSLOTS_SLOTS; i++)
        t->owner[i] = SL_RSLOTS_NONE;
    t->n_nodes = 0;
}

void sl_rslots_init(sl_rslots *t, int64_t refresh_every_ms)
{
    empty(t);
    t->refresh_every_ms = refresh_every_ms;
    t->last_refresh_ms = INT64_MIN;
}

int sl_rslots_node_add(sl_rslots *t, const char *host, size_t hl, int port)
{
    if (hl == 0 || hl >= SL_RSLOTS_HOST_MAX || port < 1 || port > 65535 || memchr(host, 0, hl))
        return -EINVAL;
    for (size_t i = 0; i < t->n_nodes; i++)
        if (t->node[i].port == port && strlen(t->node[i].host) == hl &&
            memcmp(t->node[i].host, host, hl) == 0)
            return (int)i;
    if (t->n_nodes == SL_RSLOTS_NODES_MAX)
        return -ENOSPC;
    sl_rslots_node *n = &t->node[t->n_nodes];
    memcpy(n->host, host, hl);
    n->host[hl] = '\0';
    n->port = port;
    return (int)t->n_nodes++;
}

const sl_rslots_node *sl_rslots_owner(const sl_rslots *t, unsigned slot)
{
    if (slot >= SL_RSLOTS_SLOTS || t->owner[slot] == SL_RSLOTS_NONE)
        return NULL;
    return &t->node[t->owner[slot]];
}

/* An integer element (RESP2 and RESP3 both send slot numbers and ports as integers). */
static bool int_of(const redisReply *e, long long lo, long long hi, long long *out)
{
    if (!e || e->type != REDIS_REPLY_INTEGER || e->integer < lo || e->integer > hi)
        return false;
    *out = e->integer;
    return true;
}

/* One [start, end, [host, port, ...], ...] entry. */
static int entry(sl_rslots *t, const redisReply *e, const char *from_host)
{
    long long start, end, port;
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        !int_of(e->element[0], 0, SL_RSLOTS_SLOTS - 1, &start) ||
        !int_of(e->element[1], start, SL_RSLOTS_SLOTS - 1, &end))
        return -EPROTO;
    const redisReply *m = e->element[2];
    if (!m || m->type != REDIS_REPLY_ARRAY || m->elements < 2 || !m->element[0] ||
        m->element[0]->type != REDIS_REPLY_STRING || !int_of(m->element[1], 1, 65535, &port))
        return -EPROTO;
    const char *host = m->element[0]->str;
    size_t hl = m->element[0]->len;
    if (hl == 0 || (hl == 1 && host[0] == '?')) {
        host = from_host ? from_host : "";
        hl = strlen(host);
    }
    int idx = sl_rslots_node_add(t, host, hl, (int)port);
    if (idx < 0)
        return idx == -ENOSPC ? -ENOSPC : -EPROTO;
    for (long long s = start; s <= end; s++)
        t->owner[s] = (uint16_t)idx;
    return 0;
}

int sl_rslots_from_reply(sl_rslots *t, const redisReply *r, const char *from_host)
{
    empty(t);
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return -EPROTO;
    for (size_t i = 0; i < r->elements; i++) {
        int rc = r->element[i] ? entry(t, r->element[i], from_host) : -EPROTO;
        if (rc) {
            empty(t);
            return rc;
        }
    }
    return 0;
}

/* A decimal number of 1..5 digits at most `max`, ending at `end` or a non-digit. */
static bool number(const char **p, const char *end, long max, long *out)
{
    long v = 0;
    const char *s = *p;
    while (s < end && *s >= '0' && *s <= '9' && s - *p < 6)
        v = v * 10 + (*s++ - '0');
    if (s == *p || s - *p > 5 || v > max)
        return false;
    *p = s;
    *out = v;
    return true;
}

sl_rslots_kind sl_rslots_redirect_parse(const char *s, size_t len, sl_rslots_redirect *rd)
{
    memset(rd, 0, sizeof *rd);
    const char *p = s, *end = s + len;
    if (p < end && *p == '-')
        p++;
    sl_rslots_kind kind;
    if ((size_t)(end - p) > 6 && memcmp(p, "MOVED ", 6) == 0)
        kind = SL_RSLOTS_MOVED, p += 6;
    else if ((size_t)(end - p) > 4 && memcmp(p, "ASK ", 4) == 0)
        kind = SL_RSLOTS_ASK, p += 4;
    else
        return SL_RSLOTS_OTHER;
    long slot, port;
    if (!number(&p, end, SL_RSLOTS_SLOTS - 1, &slot) || p == end || *p++ != ' ')
        return SL_RSLOTS_OTHER;
    /* host:port to the end (or to a line end); the host is what precedes the last ':' */
    const char *a = p;
    while (p < end && *p != '\r' && *p != '\n' && *p != ' ')
        p++;
    const char *aend = p;
    const char *colon = NULL;
    for (const char *q = a; q < aend; q++)
        if (*q == ':')
            colon = q;
    if (!colon)
        return SL_RSLOTS_OTHER;
    const char *pp = colon + 1;
    if (!number(&pp, aend, 65535, &port) || pp != aend || port == 0)
        return SL_RSLOTS_OTHER;
    const char *h = a;
    size_t hl = (size_t)(colon - a);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']')
        h++, hl -= 2;
    if (hl >= SL_RSLOTS_HOST_MAX || memchr(h, 0, hl))
        return SL_RSLOTS_OTHER;
    memcpy(rd->host, h, hl);
    rd->host[hl] = '\0';
    rd->kind = kind;
    rd->slot = (unsigned)slot;
    rd->port = (int)port;
    return kind;
}

bool sl_rslots_refresh_due(sl_rslots *t, int64_t now_ms)
{
    if (t->last_refresh_ms != INT64_MIN && now_ms - t->last_refresh_ms < t->refresh_every_ms)
        return false;
    t->last_refresh_ms = now_ms;
    return true;
}

int sl_rslots_redirect_apply(sl_rslots *t, const sl_rslots_redirect *rd, const char *from_host,
                             int64_t now_ms, bool *refresh)
{
    *refresh = false;
    if (rd->kind != SL_RSLOTS_MOVED && rd->kind != SL_RSLOTS_ASK)
        return -EINVAL;
    const char *host = rd->host[0] ? rd->host : from_host ? from_host : "";
    int idx = sl_rslots_node_add(t, host, strlen(host), rd->port);
    if (idx < 0 || rd->kind == SL_RSLOTS_ASK)
        return idx;
    if (rd->slot >= SL_RSLOTS_SLOTS)
        return -EINVAL;
    t->owner[rd->slot] = (uint16_t)idx;
    *refresh = sl_rslots_refresh_due(t, now_ms);
    return idx;
}

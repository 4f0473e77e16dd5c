/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimwire: encoder and validating decoder of the SWIM gossip packets (the layout is drawn in
 * swimwire.h). The decoder walks the whole packet once, checking every length against what is
 * left and every field against its cap, before it hands anything out, so the protocol never reads
 * a field of a packet that turns out to be malformed further on.
 */
#include "gossip/swimwire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct rd {
    const uint8_t *p, *end;
    const char *err;
} rd;

static int need(rd *r, size_t n, const char *what)
{
    if ((size_t)(r->end - r->p) < n) {
        r->err = what;
        return -1;
    }
    return 0;
}

static int u8(rd *r, uint8_t *v)
{
    if (need(r, 1, "truncated"))
        return -1;
    *v = *r->p++;
    return 0;
}

static int u16(rd *r, uint16_t *v)
{
    if (need(r, 2, "truncated"))
        return -1;
    *v = (uint16_t)(r->p[0] << 8 | r->p[1]);
    r->p += 2;
    return 0;
}

static int u32(rd *r, uint32_t *v)
{
    if (need(r, 4, "truncated"))
        return -1;
    *v = (uint32_t)r->p[0] << 24 | (uint32_t)r->p[1] << 16 | (uint32_t)r->p[2] << 8 | r->p[3];
    r->p += 4;
    return 0;
}

/* A name or address: 1..MAX_NAME printable ASCII bytes, no spaces (empty allowed if may_empty). */
static int str8(rd *r, sl_swimwire_str *s, int may_empty)
{
    uint8_t n;
    if (u8(r, &n))
        return -1;
    if (n > SL_SWIMWIRE_MAX_NAME || (n == 0 && !may_empty)) {
        r->err = n ? "name too long" : "empty name";
        return -1;
    }
    if (need(r, n, "truncated"))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (r->p[i] <= 0x20 || r->p[i] >= 0x7f) {
            r->err = "name not printable ASCII";
            return -1;
        }
    s->p = (const char *)r->p;
    s->len = n;
    r->p += n;
    return 0;
}

static int update(rd *r, sl_swimwire_update *u)
{
    uint16_t ml;
    if (u8(r, &u->status) || u32(r, &u->incarnation))
        return -1;
    if (u->status > SL_SWIMWIRE_LEFT) {
        r->err = "unknown member status";
        return -1;
    }
    if (str8(r, &u->name, 0) || str8(r, &u->addr, 0) || str8(r, &u->from, 1) || u16(r, &ml))
        return -1;
    if (ml > SL_SWIMWIRE_MAX_META) {
        r->err = "metadata too long";
        return -1;
    }
    if (need(r, ml, "truncated"))
        return -1;
    u->meta = r->p;
    u->meta_len = ml;
    r->p += ml;
    return 0;
}

int sl_swimwire_decode(const uint8_t *p, size_t len, size_t max_len, sl_swimwire_msg *out,
                       const char **err)
{
    static const char *no_err;
    if (!err)
        err = &no_err;
    if (!max_len)
        max_len = SL_SWIMWIRE_MAX_UDP;
    memset(out, 0, sizeof *out);
    if (len > max_len) {
        *err = "packet too large";
        return -EMSGSIZE;
    }
    if (len < SL_SWIMWIRE_HEADER || p[0] != 'S' || p[1] != 'W') {
        *err = "not a gossip packet";
        return -EBADMSG;
    }
    if (p[2] != SL_SWIMWIRE_VERSION) {
        *err = "unsupported version";
        return -EPROTONOSUPPORT;
    }
    rd r = {p + 4, p + len, NULL};
    uint16_t n;
    (void)u16(&r, &n);
    out->type = (sl_swimwire_type)p[3];
    int bad = 0;
    switch (out->type) {
    case SL_SWIMWIRE_PING:
        bad = u32(&r, &out->seq) || str8(&r, &out->target, 0) || str8(&r, &out->source, 0);
        break;
    case SL_SWIMWIRE_PING_REQ:
        bad = u32(&r, &out->seq) || str8(&r, &out->target, 0) || str8(&r, &out->target_addr, 0) ||
              str8(&r, &out->source, 0);
        break;
    case SL_SWIMWIRE_ACK:
    case SL_SWIMWIRE_NACK:
        bad = u32(&r, &out->seq) || str8(&r, &out->source, 0);
        break;
    case SL_SWIMWIRE_GOSSIP:
        break;
    case SL_SWIMWIRE_PUSH:
    case SL_SWIMWIRE_PULL:
        bad = u8(&r, &out->flags);
        break;
    default:
        *err = "unknown packet type";
        return -EBADMSG;
    }
    if (!bad && n > SL_SWIMWIRE_MAX_UPDATES) {
        r.err = "too many updates";
        bad = 1;
    }
    out->updates = r.p;
    for (unsigned i = 0; !bad && i < n; i++) {
        sl_swimwire_update u;
        bad = update(&r, &u) != 0;
    }
    if (!bad && r.p != r.end) {
        r.err = "trailing bytes";
        bad = 1;
    }
    if (bad) {
        *err = r.err;
        return -EBADMSG;
    }
    out->n_updates = n;
    out->end = r.end;
    return 0;
}

void sl_swimwire_next_update(const uint8_t **cur, sl_swimwire_update *u)
{
    rd r = {*cur, *cur + SL_SWIMWIRE_MAX_UPDATE_BYTES, NULL};
    (void)update(&r, u);  /* validated by sl_swimwire_decode */
    *cur = r.p;
}

/* --- encoding */

typedef struct wr {
    uint8_t *buf;
    size_t cap, len;
    int bad;
} wr;

static void put(wr *w, const void *p, size_t n)
{
    if (w->bad || w->cap - w->len < n) {
        w->bad = 1;
        return;
    }
    if (n)
        memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put8(wr *w, uint8_t v)
{
    put(w, &v, 1);
}

static void put16(wr *w, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(w, b, 2);
}

static void put32(wr *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(w, b, 4);
}

static void putstr(wr *w, const char *p, size_t n, int may_empty)
{
    if (n > SL_SWIMWIRE_MAX_NAME || (!n && !may_empty)) {
        w->bad = 1;
        return;
    }
    put8(w, (uint8_t)n);
    put(w, p, n);
}

static void putcstr(wr *w, const char *s)
{
    putstr(w, s ? s : "", s ? strlen(s) : 0, 0);
}

int sl_swimwire_put_head(uint8_t *buf, size_t cap, sl_swimwire_type type, uint32_t seq,
                         uint8_t flags, const char *target, const char *target_addr,
                         const char *source)
{
    wr w = {buf, cap, 0, 0};
    put(&w, "SW", 2);
    put8(&w, SL_SWIMWIRE_VERSION);
    put8(&w, (uint8_t)type);
    put16(&w, 0);
    switch (type) {
    case SL_SWIMWIRE_PING:
        put32(&w, seq);
        putcstr(&w, target);
        putcstr(&w, source);
        break;
    case SL_SWIMWIRE_PING_REQ:
        put32(&w, seq);
        putcstr(&w, target);
        putcstr(&w, target_addr);
        putcstr(&w, source);
        break;
    case SL_SWIMWIRE_ACK:
    case SL_SWIMWIRE_NACK:
        put32(&w, seq);
        putcstr(&w, source);
        break;
    case SL_SWIMWIRE_GOSSIP:
        break;
    case SL_SWIMWIRE_PUSH:
    case SL_SWIMWIRE_PULL:
        put8(&w, flags);
        break;
    default:
        return -EMSGSIZE;
    }
    return w.bad ? -EMSGSIZE : (int)w.len;
}

size_t sl_swimwire_update_size(const sl_swimwire_update *u)
{
    return 1 + 4 + 1 + u->name.len + 1 + u->addr.len + 1 + u->from.len + 2 + u->meta_len;
}

int sl_swimwire_put_update(uint8_t *buf, size_t cap, size_t len, const sl_swimwire_update *u)
{
    if (len < SL_SWIMWIRE_HEADER || len > cap || u->meta_len > SL_SWIMWIRE_MAX_META ||
        u->status > SL_SWIMWIRE_LEFT)
        return -EMSGSIZE;
    unsigned n = (unsigned)buf[4] << 8 | buf[5];
    if (n >= SL_SWIMWIRE_MAX_UPDATES)
        return -EMSGSIZE;
    wr w = {buf, cap, len, 0};
    put8(&w, u->status);
    put32(&w, u->incarnation);
    putstr(&w, u->name.p, u->name.len, 0);
    putstr(&w, u->addr.p, u->addr.len, 0);
    putstr(&w, u->from.p, u->from.len, 1);
    put16(&w, (uint16_t)u->meta_len);
    put(&w, u->meta, u->meta_len);
    if (w.bad)
        return -EMSGSIZE;
    n++;
    buf[4] = (uint8_t)(n >> 8);
    buf[5] = (uint8_t)n;
    return (int)w.len;
}

/* --- the stream framing */

void sl_swimwire_frame_room(sl_swimwire_frame *f, uint8_t **p, size_t *room)
{
    if (f->hdr_got < SL_SWIMWIRE_FRAME_HDR) {
        *p = f->hdr + f->hdr_got;
        *room = SL_SWIMWIRE_FRAME_HDR - f->hdr_got;
    } else if (f->buf) {
        *p = f->buf + f->got;
        *room = f->want - f->got;
    } else {
        *p = NULL;
        *room = 0;
    }
}

int sl_swimwire_frame_got(sl_swimwire_frame *f, size_t n, size_t cap)
{
    if (f->hdr_got < SL_SWIMWIRE_FRAME_HDR) {
        if (n > SL_SWIMWIRE_FRAME_HDR - f->hdr_got)
            return -EMSGSIZE;
        f->hdr_got += n;
        if (f->hdr_got < SL_SWIMWIRE_FRAME_HDR)
            return 0;
        size_t want = (size_t)f->hdr[0] << 24 | (size_t)f->hdr[1] << 16 |
                      (size_t)f->hdr[2] << 8 | f->hdr[3];
        if (want == 0 || want > cap)
            return -EMSGSIZE;
        if (!(f->buf = malloc(want)))
            return -ENOMEM;
        f->want = want;
        return 0;
    }
    if (!f->buf || n > f->want - f->got)
        return -EMSGSIZE;
    f->got += n;
    return f->got == f->want ? 1 : 0;
}

void sl_swimwire_frame_free(sl_swimwire_frame *f)
{
    free(f->buf);
    f->buf = NULL;
}

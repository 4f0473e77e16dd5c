/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The observer's topology update codec (see topowire.h). Field numbers follow
 * proto/levee_topology.proto: TopologyUpdate{1 version, 2 full, 3 members},
 * Member{1 name, 2 role, 3 service, 4 status, 5 incarnation, 6 gossip}.
 */
#include "wire/topowire.h"

#include <errno.h>
#include <string.h>

#include "wire/grpc_frame.h"
#include "wire/pbwire.h"

/* MemberStatus's numbers. They are sl_member_status's, so a status is written and read as it
 * is; the assertion keeps the two from drifting apart. */
enum { PB_ALIVE = 0, PB_SUSPECT = 1, PB_DEAD = 2, PB_LEFT = 3 };
_Static_assert(PB_ALIVE == (int)SL_MEMBER_ALIVE &&
                   PB_SUSPECT == (int)SL_MEMBER_SUSPECT &&
                   PB_DEAD == (int)SL_MEMBER_DEAD && PB_LEFT == (int)SL_MEMBER_LEFT,
               "MemberStatus's numbers are sl_member_status's");

static size_t cut(const char *s, size_t cap)
{
    return strnlen(s, cap);
}

static size_t member_size(const sl_topowire_member *m)
{
    return sl_pb_str_field_size(cut(m->mb.name, SL_TOPOWIRE_MAX_NAME)) +
           sl_pb_str_field_size(cut(m->mb.role, SL_TOPOWIRE_MAX_ROLE)) +
           sl_pb_str_field_size(cut(m->mb.service, SL_TOPOWIRE_MAX_ADDR)) +
           sl_pb_i64_field_size(m->mb.status) + sl_pb_i64_field_size(m->incarnation) +
           sl_pb_str_field_size(cut(m->gossip, SL_TOPOWIRE_MAX_ADDR));
}

int sl_topowire_encode(sl_buf *out, uint64_t version, bool full, const sl_topowire_member *m,
                       size_t n)
{
    size_t total = (version ? 1 + sl_pb_varint_size(version) : 0) + (full ? 2 : 0);
    for (size_t i = 0; i < n; i++) {
        size_t ms = member_size(&m[i]);
        total += 1 + sl_pb_varint_size(ms) + ms;
    }
    size_t mark;
    int rc = sl_grpc_frame_begin(out, &mark);
    if (rc || (rc = sl_buf_reserve(out, total)))
        return rc;
    uint8_t *w = (uint8_t *)out->data + out->len, *start = w;
    if (version) {
        *w++ = 0x08;
        w = sl_pb_put_varint(w, version);
    }
    if (full) {
        *w++ = 0x10;
        *w++ = 1;
    }
    for (size_t i = 0; i < n; i++) {
        const sl_topowire_member *x = &m[i];
        *w++ = 0x1a;
        w = sl_pb_put_varint(w, member_size(x));
        w = sl_pb_put_str_field(w, 0x0a, x->mb.name, cut(x->mb.name, SL_TOPOWIRE_MAX_NAME));
        w = sl_pb_put_str_field(w, 0x12, x->mb.role, cut(x->mb.role, SL_TOPOWIRE_MAX_ROLE));
        w = sl_pb_put_str_field(w, 0x1a, x->mb.service, cut(x->mb.service, SL_TOPOWIRE_MAX_ADDR));
        w = sl_pb_put_i64_field(w, 0x20, x->mb.status);
        w = sl_pb_put_i64_field(w, 0x28, x->incarnation);
        w = sl_pb_put_str_field(w, 0x32, x->gossip, cut(x->gossip, SL_TOPOWIRE_MAX_ADDR));
    }
    out->len += (size_t)(w - start);
    return sl_grpc_frame_end(out, mark);
}

static bool get_str(sl_pb_rd *r, char *dst, size_t cap)
{
    sl_pb_rd s;
    if (!sl_pb_bytes(r, &s))
        return false;
    size_t n = (size_t)(s.end - s.p);
    if (n > cap || memchr(s.p, 0, n))
        return false;
    memset(dst, 0, cap + 1); /* a repeated field leaves nothing of the earlier value */
    memcpy(dst, s.p, n);
    return true;
}

static bool decode_member(sl_pb_rd *r, sl_topowire_member *m)
{
    memset(m, 0, sizeof *m);
    while (r->p < r->end) {
        uint32_t f;
        unsigned wt;
        uint64_t v;
        if (!sl_pb_key(r, &f, &wt))
            return false;
        bool ok;
        if (wt == 2 && (f == 1 || f == 2 || f == 3 || f == 6)) {
            ok = f == 1   ? get_str(r, m->mb.name, SL_TOPOWIRE_MAX_NAME)
                 : f == 2 ? get_str(r, m->mb.role, SL_TOPOWIRE_MAX_ROLE)
                 : f == 3 ? get_str(r, m->mb.service, SL_TOPOWIRE_MAX_ADDR)
                          : get_str(r, m->gossip, SL_TOPOWIRE_MAX_ADDR);
        } else if (wt == 0 && (f == 4 || f == 5)) {
            ok = sl_pb_varint(r, &v);
            if (ok && f == 4) {
                ok = v <= PB_LEFT;
                m->mb.status = (sl_member_status)v;
            } else if (ok) {
                m->incarnation = (uint32_t)v;
            }
        } else {
            ok = sl_pb_skip(r, wt);
        }
        if (!ok)
            return false;
    }
    return true;
}

int sl_topowire_decode(const uint8_t *p, size_t n, sl_topowire_update *u,
                       sl_topowire_member *members, size_t cap)
{
    memset(u, 0, sizeof *u);
    if (!n)
        return 0; /* an empty message (a heartbeat with every field at its default) */
    sl_pb_rd r = {p, p + n};
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        uint64_t v;
        if (!sl_pb_key(&r, &f, &wt))
            return -EINVAL;
        if (wt == 0 && (f == 1 || f == 2)) {
            if (!sl_pb_varint(&r, &v))
                return -EINVAL;
            if (f == 1)
                u->version = v;
            else
                u->full = v != 0;
        } else if (wt == 2 && f == 3) {
            sl_pb_rd sub;
            if (!sl_pb_bytes(&r, &sub))
                return -EINVAL;
            if (u->n == cap)
                return -E2BIG;
            if (!decode_member(&sub, &members[u->n]))
                return -EINVAL;
            u->n++;
        } else if (!sl_pb_skip(&r, wt)) {
            return -EINVAL;
        }
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* The PeersV1 codec (peerwire.h): protobuf-c structs built in a batch's arena and packed, or
 * unpacked into it; TransferKeys' two one-field messages by hand. */
#include "cluster/peerwire.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gubernator.pb-c.h"
#include "peers.pb-c.h"
#include "wire/pbwire.h"

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

static void resp_from_engine(Pb__Gubernator__RateLimitResp *r, const sl_response *s)
{
    if (s->error) {
        /* Gubernator's error answers carry only the error (and metadata) */
        r->error = (char *)s->error;
        return;
    }
    r->status = s->status == SL_OVER_LIMIT ? PB__GUBERNATOR__STATUS__OVER_LIMIT
                                           : PB__GUBERNATOR__STATUS__UNDER_LIMIT;
    r->limit = s->limit;
    r->remaining = s->remaining;
    r->reset_time = s->reset_time;
}

/* ---- PeersV1 client side --------------------------------------------------------------------- */

static int build_peer_req(sl_batch *b, size_t i, Pb__Gubernator__RateLimitReq *r)
{
    const sl_request *q = &b->reqs[i];
    const sl_meta *m = &b->req_meta[i];
    pb__gubernator__rate_limit_req__init(r);
    /* the engine's strings need not be NUL-terminated; protobuf-c's must be */
    r->name = q->name ? sl_batch_strndup(b, q->name, q->name_len) : sl_batch_strndup(b, "", 0);
    r->unique_key = q->unique_key ? sl_batch_strndup(b, q->unique_key, q->unique_key_len)
                                  : sl_batch_strndup(b, "", 0);
    if (!r->name || !r->unique_key)
        return -ENOMEM;
    r->hits = q->hits;
    r->limit = q->limit;
    r->duration = q->duration;
    r->burst = q->burst;
    r->created_at = q->created_at;
    r->algorithm = (Pb__Gubernator__Algorithm)q->algorithm;
    r->behavior = (Pb__Gubernator__Behavior)q->behavior;
    bool add_sw = q->sub_windows != 0 && !sl_batch_meta_get(m, SL_BATCH_META_SUB_WINDOWS);
    size_t n = m->n + (add_sw ? 1 : 0);
    if (n == 0)
        return 0;
    Pb__Gubernator__RateLimitReq__MetadataEntry **arr = sl_batch_alloc(b, n * sizeof *arr);
    Pb__Gubernator__RateLimitReq__MetadataEntry *es = sl_batch_alloc(b, n * sizeof *es);
    if (!arr || !es)
        return -ENOMEM;
    for (size_t k = 0; k < n; k++) {
        pb__gubernator__rate_limit_req__metadata_entry__init(&es[k]);
        arr[k] = &es[k];
        if (k < m->n) {
            es[k].key = (char *)m->kv[k].key;
            es[k].value = (char *)m->kv[k].val;
        }
    }
    if (add_sw) {
        char tmp[16];
        snprintf(tmp, sizeof tmp, "%d", (int)q->sub_windows);
        es[n - 1].key = (char *)SL_BATCH_META_SUB_WINDOWS;
        es[n - 1].value = sl_batch_strndup(b, tmp, strlen(tmp));
        if (!es[n - 1].value)
            return -ENOMEM;
    }
    r->n_metadata = n;
    r->metadata = arr;
    return 0;
}

int sl_peerwire_encode_req(sl_batch *b, const size_t *idx, size_t n, sl_buf *out)
{
    if (!idx)
        n = b->n;
    Pb__Gubernator__GetPeerRateLimitsReq m;
    pb__gubernator__get_peer_rate_limits_req__init(&m);
    if (n) {
        Pb__Gubernator__RateLimitReq **arr = sl_batch_alloc(b, n * sizeof *arr);
        Pb__Gubernator__RateLimitReq *rs = sl_batch_alloc(b, n * sizeof *rs);
        if (!arr || !rs)
            return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
            size_t i = idx ? idx[k] : k;
            if (i >= b->n)
                return -EINVAL;
            int rc = build_peer_req(b, i, &rs[k]);
            if (rc)
                return rc;
            arr[k] = &rs[k];
        }
        m.requests = arr;
        m.n_requests = n;
    }
    return sl_batch_pb_pack(&m.base, out);
}

int sl_peerwire_decode_resp(size_t max_msg, const uint8_t *msg, size_t len, sl_batch *b,
                            const size_t *idx, size_t n, sl_grpc_status *st)
{
    sl_grpc_status_ok(st);
    if (!idx)
        n = b->n;
    ProtobufCMessage *pm;
    int rc = sl_batch_pb_unpack(b, &pb__gubernator__get_peer_rate_limits_resp__descriptor, msg, len, max_msg, &pm, st);
    if (rc)
        return rc;
    Pb__Gubernator__GetPeerRateLimitsResp *m = (Pb__Gubernator__GetPeerRateLimitsResp *)pm;
    if (m->n_rate_limits != n) {
        sl_grpc_status_set(st, SL_GRPC_INTERNAL, "peer answered %zu rate limits for %zu requests",
                          m->n_rate_limits, n);
        return -EPROTO;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = idx ? idx[k] : k;
        if (i >= b->n) {
            sl_grpc_status_set(st, SL_GRPC_INTERNAL, "item index %zu out of range", i);
            return -EINVAL;
        }
        const Pb__Gubernator__RateLimitResp *r = m->rate_limits[k];
        sl_response *s = &b->resps[i];
        memset(s, 0, sizeof *s);
        s->status =
            r->status == PB__GUBERNATOR__STATUS__OVER_LIMIT ? SL_OVER_LIMIT : SL_UNDER_LIMIT;
        s->limit = r->limit;
        s->remaining = r->remaining;
        s->reset_time = r->reset_time;
        s->error = r->error && r->error[0] ? r->error : NULL;
        for (size_t j = 0; j < r->n_metadata; j++) {
            const Pb__Gubernator__RateLimitResp__MetadataEntry *e = r->metadata[j];
            if (sl_batch_meta_add_ref(b, &b->resp_meta[i], str_or_empty(e->key),
                                      str_or_empty(e->value)))
                return sl_grpc_status_too_large(st, -ENOMEM,
                                 "message too large to decode within the memory limit");
        }
    }
    return 0;
}

/* ---- UpdatePeerGlobals ----------------------------------------------------------------------- */

int sl_peerwire_encode_globals(const sl_peerwire_global *g, size_t n, sl_buf *out)
{
    /* a private arena for the temporary structs: there is no batch here */
    sl_batch tmp;
    sl_batch_init(&tmp, 0);
    Pb__Gubernator__UpdatePeerGlobalsReq m;
    pb__gubernator__update_peer_globals_req__init(&m);
    int rc = 0;
    if (n) {
        Pb__Gubernator__UpdatePeerGlobal **arr = sl_batch_alloc(&tmp, n * sizeof *arr);
        Pb__Gubernator__UpdatePeerGlobal *gs = sl_batch_alloc(&tmp, n * sizeof *gs);
        Pb__Gubernator__RateLimitResp *rs = sl_batch_alloc(&tmp, n * sizeof *rs);
        if (!arr || !gs || !rs)
            rc = -ENOMEM;
        for (size_t k = 0; !rc && k < n; k++) {
            pb__gubernator__update_peer_global__init(&gs[k]);
            pb__gubernator__rate_limit_resp__init(&rs[k]);
            gs[k].key = g[k].key ? sl_batch_strndup(&tmp, g[k].key, g[k].key_len)
                                 : sl_batch_strndup(&tmp, "", 0);
            if (!gs[k].key) {
                rc = -ENOMEM;
                break;
            }
            resp_from_engine(&rs[k], &g[k].resp);
            gs[k].status = &rs[k];
            gs[k].algorithm = (Pb__Gubernator__Algorithm)g[k].algorithm;
            gs[k].duration = g[k].duration;
            gs[k].created_at = g[k].created_at;
            arr[k] = &gs[k];
        }
        m.globals = arr;
        m.n_globals = n;
    }
    if (!rc)
        rc = sl_batch_pb_pack(&m.base, out);
    sl_batch_free(&tmp);
    return rc;
}

int sl_peerwire_decode_globals(size_t max_msg, const uint8_t *msg, size_t len, sl_batch *b,
                               sl_peerwire_global **out, size_t *n_out, sl_grpc_status *st)
{
    sl_batch_reset(b);
    sl_grpc_status_ok(st);
    *out = NULL;
    *n_out = 0;
    ProtobufCMessage *pm;
    int rc = sl_batch_pb_unpack(b, &pb__gubernator__update_peer_globals_req__descriptor, msg, len, max_msg, &pm, st);
    if (rc)
        return rc;
    b->msg = pm;
    Pb__Gubernator__UpdatePeerGlobalsReq *m = (Pb__Gubernator__UpdatePeerGlobalsReq *)pm;
    if (m->n_globals == 0)
        return 0;
    sl_peerwire_global *gs = sl_batch_alloc(b, m->n_globals * sizeof *gs);
    if (!gs)
        return sl_grpc_status_too_large(st, -ENOMEM, "message too large to decode within the memory limit");
    for (size_t k = 0; k < m->n_globals; k++) {
        const Pb__Gubernator__UpdatePeerGlobal *g = m->globals[k];
        sl_peerwire_global *o = &gs[k];
        memset(o, 0, sizeof *o);
        o->key = str_or_empty(g->key);
        o->key_len = strlen(o->key);
        if (g->status) {
            o->resp.status = g->status->status == PB__GUBERNATOR__STATUS__OVER_LIMIT ? SL_OVER_LIMIT
                                                                                   : SL_UNDER_LIMIT;
            o->resp.limit = g->status->limit;
            o->resp.remaining = g->status->remaining;
            o->resp.reset_time = g->status->reset_time;
            o->resp.error = g->status->error && g->status->error[0] ? g->status->error : NULL;
        }
        o->algorithm = (int32_t)g->algorithm;
        o->duration = g->duration;
        o->created_at = g->created_at;
    }
    *out = gs;
    *n_out = m->n_globals;
    return 0;
}

/* ---- PeersV1/TransferKeys -------------------------------------------------------------------- */

int sl_peerwire_encode_transfer_req(const uint8_t *records, size_t len, sl_buf *out)
{
    size_t mark;
    int rc = sl_grpc_frame_begin(out, &mark);
    if (!rc)
        rc = sl_buf_reserve(out, 1 + 10 + len);
    if (rc)
        return rc;
    uint8_t *w = out->data + out->len;
    *w++ = 1 << 3 | SL_PB_LEN;
    w = sl_pb_put_varint(w, len);
    if (len)
        memcpy(w, records, len);
    out->len = (size_t)(w - out->data) + len;
    return sl_grpc_frame_end(out, mark);
}

/* The last occurrence of field `want` (wire type wt: SL_PB_LEN into *bytes, SL_PB_VARINT into
 * *v), skipping every other field. 0 (the field may be absent: outputs untouched) or -EINVAL. */
static int last_field(const uint8_t *msg, size_t len, uint32_t want, unsigned wt_want,
                      sl_pb_rd *bytes, uint64_t *v)
{
    sl_pb_rd r = {msg, msg + len};
    while (r.p < r.end) {
        uint32_t field;
        unsigned wt;
        if (!sl_pb_key(&r, &field, &wt))
            return -EINVAL;
        bool ok = field != want || wt != wt_want ? sl_pb_skip(&r, wt)
                  : wt == SL_PB_LEN              ? sl_pb_bytes(&r, bytes)
                                                 : sl_pb_varint(&r, v);
        if (!ok)
            return -EINVAL;
    }
    return 0;
}

int sl_peerwire_decode_transfer_req(const uint8_t *msg, size_t len, const uint8_t **records,
                                    size_t *records_len)
{
    sl_pb_rd sub = {NULL, NULL};
    int rc = last_field(msg, len, 1, SL_PB_LEN, &sub, NULL);
    *records = rc ? NULL : sub.p; /* the last one wins, as protobuf's merge of a scalar */
    *records_len = rc ? 0 : (size_t)(sub.end - sub.p);
    return rc;
}

int sl_peerwire_encode_transfer_resp(int64_t accepted, sl_buf *out)
{
    size_t mark;
    int rc = sl_grpc_frame_begin(out, &mark);
    if (!rc && accepted)
        rc = sl_buf_reserve(out, sl_pb_i64_field_size(accepted));
    if (rc)
        return rc;
    if (accepted)
        out->len = (size_t)(sl_pb_put_i64_field(out->data + out->len, 1 << 3 | SL_PB_VARINT,
                                                accepted) - out->data);
    return sl_grpc_frame_end(out, mark);
}

int sl_peerwire_decode_transfer_resp(const uint8_t *msg, size_t len, int64_t *accepted)
{
    uint64_t v = 0;
    int rc = last_field(msg, len, 1, SL_PB_VARINT, NULL, &v);
    *accepted = rc ? 0 : (int64_t)v;
    return rc;
}

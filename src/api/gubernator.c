/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gubernator v2 adapter: wire messages <-> sl_batch (see gubernator.h for the rules it applies).
 *
 * Everything a call decodes lives in the batch's arena. Before decoding protobuf, the top level of
 * the message is scanned to count the requests: a message with more than max_items is refused
 * without materialising them (an empty RateLimitReq is 2 bytes on the wire but ~100 in memory,
 * so decoding first would let a 1 MiB message cost ~50 MiB), and the batch gets exactly that
 * many items.
 *
 * The hot calls (GetRateLimits, GetPeerRateLimits: up to 1000 items each) skip protobuf-c, whose
 * unpack-into-structs and pack-from-structs cost about as much as deciding the items: see
 * "the hand-written protobuf decoder" and "responses" below. protobuf-c stays the reference
 * decoder: what the hand-written one declines, it decodes, and the fuzzer compares the two.
 */
#include "api/gubernator.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/grpc_frame.h"
#include "wire/pbwire.h"

void sl_gub_config_default(sl_gub_config *c)
{
    c->max_msg = SL_GRPC_DEFAULT_MAX_MSG;
    c->max_items = SL_GUB_MAX_ITEMS;
    sl_gubjson_limits_default(&c->json);
    c->reference_decoders = false;
}


/* ---- protobuf helpers ------------------------------------------------------------------------ */

#define UNMARSHAL_ERR SL_BATCH_PB_UNMARSHAL_ERR

/* The checks before decoding: the size, and (too_many_fmt set) the number of requests, counted
 * without materialising them. *n_items gets that count. */
static int precheck(const sl_gub_config *c, const uint8_t *msg, size_t len, size_t max_items,
                    const char *too_many_fmt, size_t *n_items, sl_grpc_status *st)
{
    *n_items = 0;
    if (len > c->max_msg)
        return sl_grpc_status_too_large(st, -EMSGSIZE, SL_BATCH_PB_TOO_LARGE_FMT, len, c->max_msg);
    if (too_many_fmt) {
        if (sl_pb_count_field(msg, len, 1, max_items, n_items)) {
            sl_grpc_status_set(st, SL_GRPC_INTERNAL, UNMARSHAL_ERR);
            return -EINVAL;
        }
        if (*n_items > max_items) {
            sl_grpc_status_set(st, SL_GRPC_OUT_OF_RANGE, too_many_fmt, max_items);
            return -E2BIG;
        }
    }
    return 0;
}


/* ---- requests -------------------------------------------------------------------------------- */

#define TOO_MANY_V1 "Requests.RateLimits list too large; max size is '%zu'"
#define TOO_MANY_PEER "'PeerRequest.rate_limits' list too large; max size is '%zu'"

static const char ERR_EMPTY_KEY[] = "field 'unique_key' cannot be empty";
static const char ERR_EMPTY_NAME[] = "field 'namespace' cannot be empty";
static const char ERR_SUB_WINDOWS[] =
    "metadata 'sub_windows' must be an integer from 0 to 2147483647";

static const char ERR_MAX_DELAY[] =
    "metadata 'max_delay_ms' must be an integer from 0 to 9223372036854775807";

/* A decimal from 0 to max, digits only. */
static bool parse_count(const char *s, int64_t max, int64_t *out)
{
    int64_t v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (max - (*s - '0')) / 10)
            return false;
        v = v * 10 + (*s - '0');
    }
    *out = v;
    return true;
}

static bool parse_sub_windows(const char *s, int32_t *out)
{
    int64_t v;
    if (!parse_count(s, INT32_MAX, &v))
        return false;
    *out = (int32_t)v;
    return true;
}

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* Gubernator's checks on item i once its fields are in, and the extensions in its metadata. */
static int check_request(sl_batch *b, size_t i, bool peer)
{
    sl_request *q = &b->reqs[i];
    if (peer && (q->behavior & SL_GLOBAL))
        q->behavior |= SL_DRAIN_OVER_LIMIT;
    /* Gubernator checks the key before the name */
    if (q->unique_key_len == 0) {
        sl_batch_answer(b, i, ERR_EMPTY_KEY);
        return 0;
    }
    if (q->name_len == 0) {
        sl_batch_answer(b, i, ERR_EMPTY_NAME);
        return 0;
    }
    const char *sw = sl_batch_meta_get(&b->req_meta[i], SL_GUB_META_SUB_WINDOWS);
    if (sw && !parse_sub_windows(sw, &q->sub_windows))
        sl_batch_answer(b, i, ERR_SUB_WINDOWS);
    const char *md = b->req_meta[i].n ? sl_batch_meta_get(&b->req_meta[i], SL_GUB_META_MAX_DELAY)
                                      : NULL;
    if (md && !parse_count(md, INT64_MAX, &q->max_delay_ms))
        sl_batch_answer(b, i, ERR_MAX_DELAY);
    return 0;
}

/* Fill b's items from decoded RateLimitReqs (which live in b's arena). */
static int fill_requests(sl_batch *b, Pb__Gubernator__RateLimitReq **rq, size_t n, bool peer,
                         sl_grpc_status *st)
{
    if (sl_batch_alloc_items(b, n))
        return sl_grpc_status_too_large(st, -ENOMEM,
                                        "message too large to decode within the memory limit");
    for (size_t i = 0; i < n; i++) {
        const Pb__Gubernator__RateLimitReq *r = rq[i];
        sl_request *q = &b->reqs[i];
        q->name = str_or_empty(r->name);
        q->name_len = strlen(q->name);
        q->unique_key = str_or_empty(r->unique_key);
        q->unique_key_len = strlen(q->unique_key);
        q->hits = r->hits;
        q->limit = r->limit;
        q->duration = r->duration;
        q->burst = r->burst;
        q->created_at = r->created_at;
        q->algorithm = (int32_t)r->algorithm;
        q->behavior = (int32_t)r->behavior;
        for (size_t k = 0; k < r->n_metadata; k++) {
            const Pb__Gubernator__RateLimitReq__MetadataEntry *e = r->metadata[k];
            if (sl_batch_meta_add_ref(b, &b->req_meta[i], str_or_empty(e->key),
                                      str_or_empty(e->value)))
                return sl_grpc_status_too_large(st, -ENOMEM,
                                 "message too large to decode within the memory limit");
        }
        check_request(b, i, peer);
    }
    return 0;
}

/* ---- the hand-written protobuf decoder -------------------------------------------------------- */

/*
 * GetRateLimitsReq / GetPeerRateLimitsReq straight into the batch: one pass, names, keys and
 * metadata copied into the arena (NUL-terminated, as protobuf-c leaves them), no message structs.
 * It reads the wire format as protobuf-c 1.4 does - the same varint widths and truncations, the
 * last of a repeated scalar wins, unknown fields skipped, a known field with the wrong wire type
 * refused - and declines anything unusual (a 5-byte length, a group, a truncated field): the
 * caller then resets the batch and runs protobuf-c, which decides and words the error.
 */

/* A copy of a string field in the arena, NUL-terminated; *len stops at an embedded NUL, as
 * strlen() on protobuf-c's copy would. An absent field is "". */
static const char *pb_str(sl_batch *b, const sl_pb_rd *s, size_t *len)
{
    size_t n = s->p ? (size_t)(s->end - s->p) : 0;
    char *c = sl_batch_alloc(b, n + 1);
    if (!c)
        return NULL;
    if (len) {
        /* A byte loop, in the message rather than in the fresh copy: names and keys are short,
         * and memchr()'s wide loads cost more than the rest of the decoding here (over bytes
         * just stored they also stall on store forwarding). */
        size_t k = 0;
        while (k < n && s->p[k])
            k++;
        *len = k;
    }
    if (n)
        memcpy(c, s->p, n);
    c[n] = 0;
    return c;
}

/* RateLimitReq.MetadataEntry { string key = 1; string value = 2; } -> item i's req_meta. */
static int pb_meta_entry(sl_batch *b, size_t i, sl_pb_rd r)
{
    sl_pb_rd key = {0}, val = {0};
    while (r.p < r.end) {
        uint32_t field;
        unsigned wt;
        if (!sl_pb_key(&r, &field, &wt))
            return -EINVAL;
        if (field == 1 || field == 2) {
            if (wt != 2 || !sl_pb_bytes(&r, field == 1 ? &key : &val))
                return -EINVAL;
        } else if (!sl_pb_skip(&r, wt)) {
            return -EINVAL;
        }
    }
    const char *k = pb_str(b, &key, NULL), *v = pb_str(b, &val, NULL);
    if (!k || !v || sl_batch_meta_add_ref(b, &b->req_meta[i], k, v))
        return -ENOMEM;
    return 0;
}

/* One RateLimitReq into item i: what protobuf-c's unpack and fill_requests() make of it. */
static int pb_rate_limit_req(sl_batch *b, size_t i, sl_pb_rd r, bool peer)
{
    sl_request *q = &b->reqs[i]; /* zeroed: absent fields stay 0 */
    sl_pb_rd name = {0}, key = {0};
    while (r.p < r.end) {
        uint32_t field;
        unsigned wt;
        uint64_t v;
        if (!sl_pb_key(&r, &field, &wt))
            return -EINVAL;
        /* tested in the order fields usually come: predictable branches, where a switch's
         * jump table mispredicted on every field */
        if (field == 1 || field == 2) {
            if (wt != 2 || !sl_pb_bytes(&r, field == 1 ? &name : &key))
                return -EINVAL;
        } else if (field <= 10 && field != 9) {
            if (wt != 0 || !sl_pb_varint(&r, &v))
                return -EINVAL;
            if (field == 3)
                q->hits = (int64_t)v;
            else if (field == 4)
                q->limit = (int64_t)v;
            else if (field == 5)
                q->duration = (int64_t)v;
            else if (field == 6)
                q->algorithm = (int32_t)(uint32_t)v; /* enums: protobuf-c keeps 32 bits */
            else if (field == 7)
                q->behavior = (int32_t)(uint32_t)v;
            else if (field == 8)
                q->burst = (int64_t)v;
            else
                q->created_at = (int64_t)v;
        } else if (field == 9) {
            sl_pb_rd e;
            if (wt != 2 || !sl_pb_bytes(&r, &e))
                return -EINVAL;
            int rc = pb_meta_entry(b, i, e);
            if (rc)
                return rc;
        } else if (!sl_pb_skip(&r, wt)) {
            return -EINVAL;
        }
    }
    q->name = pb_str(b, &name, &q->name_len);
    q->unique_key = pb_str(b, &key, &q->unique_key_len);
    if (!q->name || !q->unique_key)
        return -ENOMEM;
    return check_request(b, i, peer);
}

/* 0, or -EINVAL (declined: run protobuf-c) / -ENOMEM. n is the count of requests (precheck). */
static int fast_decode_reqs(const uint8_t *msg, size_t len, size_t n, sl_batch *b, bool peer)
{
    if (sl_batch_alloc_items(b, n))
        return -ENOMEM;
    sl_pb_rd r = {msg, msg + len};
    size_t i = 0;
    while (r.p < r.end) {
        uint32_t field;
        unsigned wt;
        if (!sl_pb_key(&r, &field, &wt))
            return -EINVAL;
        if (field != 1) {
            if (!sl_pb_skip(&r, wt))
                return -EINVAL;
            continue;
        }
        sl_pb_rd item;
        if (wt != 2 || i == n || !sl_pb_bytes(&r, &item))
            return -EINVAL;
        int rc = pb_rate_limit_req(b, i++, item, peer);
        if (rc)
            return rc;
    }
    return i == n ? 0 : -EINVAL;
}

static int decode_reqs_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                          sl_grpc_status *st, bool peer)
{
    sl_batch_reset(b);
    sl_grpc_status_ok(st);
    size_t n;
    int rc = precheck(c, msg, len, c->max_items, peer ? TOO_MANY_PEER : TOO_MANY_V1, &n, st);
    if (rc)
        return rc;
    if (!c->reference_decoders && fast_decode_reqs(msg, len, n, b, peer) == 0)
        return 0;
    /* declined (or failed): protobuf-c decides, on a clean batch */
    sl_batch_reset(b);
    ProtobufCMessage *m;
    const ProtobufCMessageDescriptor *d =
        peer ? &pb__gubernator__get_peer_rate_limits_req__descriptor
             : &pb__gubernator__get_rate_limits_req__descriptor;
    rc = sl_batch_pb_unpack(b, d, msg, len, c->max_msg, &m, st);
    if (rc)
        return rc;
    b->msg = m;
    /* GetRateLimitsReq and GetPeerRateLimitsReq are both { repeated RateLimitReq requests = 1; } */
    if (peer) {
        Pb__Gubernator__GetPeerRateLimitsReq *r = (Pb__Gubernator__GetPeerRateLimitsReq *)m;
        return fill_requests(b, r->requests, r->n_requests, true, st);
    }
    Pb__Gubernator__GetRateLimitsReq *r = (Pb__Gubernator__GetRateLimitsReq *)m;
    return fill_requests(b, r->requests, r->n_requests, false, st);
}

int sl_gub_decode_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                     sl_grpc_status *st)
{
    return decode_reqs_pb(c, msg, len, b, st, false);
}

int sl_gub_decode_peer_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                          sl_grpc_status *st)
{
    return decode_reqs_pb(c, msg, len, b, st, true);
}

int sl_gub_decode_json(const sl_gub_config *c, const char *body, size_t len, sl_batch *b,
                       sl_grpc_status *st)
{
    sl_batch_reset(b);
    sl_grpc_status_ok(st);
    const ProtobufCMessageDescriptor *d = &pb__gubernator__get_rate_limits_req__descriptor;
    ProtobufCMessage *m = NULL;
    char err[sizeof st->message];
    int rc = -EAGAIN;
    if (!c->reference_decoders)
        rc = sl_gubjson_parse_with(SL_GUBJSON_PARSE_FAST, d, body, len, &c->json,
                                   sl_batch_pb_allocator(b), &m, err, sizeof err);
    if (rc == -EAGAIN) {
        /* declined: the reference parser decides (and words the error), on a clean batch */
        sl_batch_reset(b);
        rc = sl_gubjson_parse_with(SL_GUBJSON_PARSE_REFERENCE, d, body, len, &c->json,
                                   sl_batch_pb_allocator(b), &m, err, sizeof err);
    }
    Pb__Gubernator__GetRateLimitsReq *r = (Pb__Gubernator__GetRateLimitsReq *)m;
    if (rc == -EMSGSIZE)
        return sl_grpc_status_too_large(st, rc, "%s", err);
    if (rc == -ENOMEM)
        return sl_grpc_status_too_large(st, rc,
                                        "request too large to decode within the memory limit");
    if (rc) {
        sl_grpc_status_set(st, SL_GRPC_INVALID_ARGUMENT, "%s", err);
        return rc;
    }
    b->msg = r;
    if (r->n_requests > c->max_items) {
        sl_grpc_status_set(st, SL_GRPC_OUT_OF_RANGE, TOO_MANY_V1, c->max_items);
        return -E2BIG;
    }
    return fill_requests(b, r->requests, r->n_requests, false, st);
}

/* ---- responses ------------------------------------------------------------------------------- */

/*
 * GetRateLimitsResp and GetPeerRateLimitsResp are both { repeated RateLimitResp = 1; }, written
 * here straight from the batch: protobuf-c would need a struct per item (and per metadata entry)
 * and two descriptor walks. The bytes are protobuf-c's: fields in number order, proto3 zero
 * values left out, int64 as 10-byte varints when negative. The JSON is what sl_gubjson_print()
 * makes of the same message. The tests compare both with protobuf-c / the printer.
 */

static size_t meta_entry_size(const sl_kv *kv)
{
    return sl_pb_str_field_size(kv->key ? strlen(kv->key) : 0) +
           sl_pb_str_field_size(kv->val ? strlen(kv->val) : 0);
}

/* The size of item i's RateLimitResp (without its own key and length). An error answer carries
 * only the error and metadata, as Gubernator answers. */
static size_t resp_size(const sl_batch *b, size_t i)
{
    const sl_response *s = &b->resps[i];
    size_t n = 0;
    if (s->error) {
        n = sl_pb_str_field_size(strlen(s->error));
    } else {
        n = (s->status == SL_OVER_LIMIT ? 2 : 0) + sl_pb_i64_field_size(s->limit) +
            sl_pb_i64_field_size(s->remaining) + sl_pb_i64_field_size(s->reset_time);
    }
    const sl_meta *m = &b->resp_meta[i];
    for (uint32_t k = 0; k < m->n; k++) {
        size_t e = meta_entry_size(&m->kv[k]);
        n += 1 + sl_pb_varint_size(e) + e;
    }
    return n;
}

static uint8_t *put_resp(uint8_t *w, const sl_batch *b, size_t i, size_t size)
{
    const sl_response *s = &b->resps[i];
    *w++ = 0x0a; /* field 1, length-delimited */
    w = sl_pb_put_varint(w, size);
    if (s->error) {
        w = sl_pb_put_str_field(w, 0x2a, s->error, strlen(s->error));
    } else {
        if (s->status == SL_OVER_LIMIT) {
            *w++ = 0x08;
            *w++ = PB__GUBERNATOR__STATUS__OVER_LIMIT;
        }
        w = sl_pb_put_i64_field(w, 0x10, s->limit);
        w = sl_pb_put_i64_field(w, 0x18, s->remaining);
        w = sl_pb_put_i64_field(w, 0x20, s->reset_time);
    }
    const sl_meta *m = &b->resp_meta[i];
    for (uint32_t k = 0; k < m->n; k++) {
        const sl_kv *kv = &m->kv[k];
        size_t kn = kv->key ? strlen(kv->key) : 0, vn = kv->val ? strlen(kv->val) : 0;
        *w++ = 0x32; /* field 6, length-delimited */
        w = sl_pb_put_varint(w, sl_pb_str_field_size(kn) + sl_pb_str_field_size(vn));
        w = sl_pb_put_str_field(w, 0x0a, kv->key, kn);
        w = sl_pb_put_str_field(w, 0x12, kv->val, vn);
    }
    return w;
}

/* An admitted item the engine delayed says so in its metadata ("delay_ms"), which also carries
 * it back from an owner to the node the caller asked. */
static int delay_meta(sl_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        const sl_response *s = &b->resps[i];
        if (__builtin_expect(s->delay_ms > 0, 0) && !s->error) {
            char tmp[24];
            int n = snprintf(tmp, sizeof tmp, "%lld", (long long)s->delay_ms);
            const char *v = sl_batch_strndup(b, tmp, (size_t)n);
            if (!v || sl_batch_meta_set(b, &b->resp_meta[i], SL_GUB_META_DELAY, v))
                return -ENOMEM;
        }
    }
    return 0;
}

/* Two passes: the sizes (kept in the arena), then the bytes, into one exact reservation. */
static int encode_resps_pb(sl_batch *b, sl_buf *out)
{
    int drc = delay_meta(b);
    if (drc)
        return drc;
    size_t *sizes = b->n ? sl_batch_alloc(b, b->n * sizeof *sizes) : NULL;
    if (b->n && !sizes)
        return -ENOMEM;
    size_t total = 0;
    for (size_t i = 0; i < b->n; i++) {
        sizes[i] = resp_size(b, i);
        total += 1 + sl_pb_varint_size(sizes[i]) + sizes[i];
    }
    if (total == 0)
        return 0; /* (out->data may still be NULL) */
    int rc = sl_buf_reserve(out, total);
    if (rc)
        return rc;
    uint8_t *w = out->data + out->len;
    for (size_t i = 0; i < b->n; i++)
        w = put_resp(w, b, i, sizes[i]);
    out->len += total;
    return 0;
}

/* Decimal int64 ending at `end`, quoted; returns its first byte. */
static char *put_quoted_i64(char *end, int64_t v)
{
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    *--end = '"';
    do {
        *--end = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--end = '-';
    *--end = '"';
    return end;
}

static inline size_t put(char *w, const char *s, size_t n)
{
    memcpy(w, s, n);
    return n;
}

#define LIT(s) s, sizeof s - 1

/* ,"name":"-123" */
static size_t put_i64_member(char *w, const char *name, size_t name_len, int64_t v)
{
    char tmp[24];
    char *s = put_quoted_i64(tmp + sizeof tmp, v);
    return put(w, name, name_len) + put(w + name_len, s, (size_t)(tmp + sizeof tmp - s));
}

/* One RateLimitResp as sl_gubjson_print() prints it: every field, in field order. */
static int encode_resp_json(const sl_batch *b, size_t i, sl_buf *out)
{
    const sl_response *s = &b->resps[i];
    sl_response zero = {0};
    const sl_response *v = s->error ? &zero : s;
    char tmp[192]; /* the longest fixed part is 151 bytes */
    size_t n = v->status == SL_OVER_LIMIT ? put(tmp, LIT("{\"status\":\"OVER_LIMIT\""))
                                          : put(tmp, LIT("{\"status\":\"UNDER_LIMIT\""));
    n += put_i64_member(tmp + n, LIT(",\"limit\":"), v->limit);
    n += put_i64_member(tmp + n, LIT(",\"remaining\":"), v->remaining);
    n += put_i64_member(tmp + n, LIT(",\"reset_time\":"), v->reset_time);
    const sl_meta *m = &b->resp_meta[i];
    if (!s->error && m->n == 0) {
        /* the common answer: one append */
        n += put(tmp + n, LIT(",\"error\":\"\",\"metadata\":{}}"));
        return sl_buf_append(out, tmp, n);
    }
    n += put(tmp + n, LIT(",\"error\":"));
    int rc = sl_buf_append(out, tmp, n);
    if (!rc)
        rc = s->error ? sl_gubjson_print_string(out, s->error, strlen(s->error))
                      : sl_buf_append(out, LIT("\"\""));
    if (!rc)
        rc = sl_buf_append(out, LIT(",\"metadata\":{"));
    for (uint32_t k = 0; !rc && k < m->n; k++) {
        const char *key = m->kv[k].key ? m->kv[k].key : "";
        const char *val = m->kv[k].val ? m->kv[k].val : "";
        if (k)
            rc = sl_buf_append(out, ",", 1);
        if (!rc)
            rc = sl_gubjson_print_string(out, key, strlen(key));
        if (!rc)
            rc = sl_buf_append(out, ":", 1);
        if (!rc)
            rc = sl_gubjson_print_string(out, val, strlen(val));
    }
    return rc ? rc : sl_buf_append(out, LIT("}}"));
}

int sl_gub_encode_pb(sl_batch *b, sl_buf *out)
{
    return encode_resps_pb(b, out);
}

int sl_gub_encode_json(sl_batch *b, sl_buf *out)
{
    size_t mark = out->len;
    int rc = delay_meta(b);
    if (!rc)
        rc = sl_buf_append(out, LIT("{\"responses\":["));
    for (size_t i = 0; !rc && i < b->n; i++) {
        if (i)
            rc = sl_buf_append(out, ",", 1);
        if (!rc)
            rc = encode_resp_json(b, i, out);
    }
    if (!rc)
        rc = sl_buf_append(out, LIT("]}"));
    if (rc)
        out->len = mark; /* never leave half a document behind */
    return rc;
}

int sl_gub_encode_peer_resp_pb(sl_batch *b, sl_buf *out)
{
    return encode_resps_pb(b, out);
}

int sl_gub_encode_error_json(const sl_grpc_status *st, sl_buf *out)
{
    return sl_gubjson_print_error(out, st->code, st->message);
}

/* ---- health ---------------------------------------------------------------------------------- */

bool sl_gub_health_ok(const sl_gub_health *h, sl_grpc_status *st)
{
    if (h->healthy) {
        sl_grpc_status_ok(st);
        return true;
    }
    sl_grpc_status_set(st, SL_GRPC_UNAVAILABLE, "%s", h->message ? h->message : "unhealthy");
    return false;
}

static void build_health(const sl_gub_health *h, Pb__Gubernator__HealthCheckResp *m)
{
    pb__gubernator__health_check_resp__init(m);
    m->status = (char *)(h->healthy ? "healthy" : "unhealthy");
    if (h->message)
        m->message = (char *)h->message;
    m->peer_count = h->peer_count;
    if (h->advertise_address)
        m->advertise_address = (char *)h->advertise_address;
}

int sl_gub_encode_health_pb(const sl_gub_health *h, sl_buf *out)
{
    Pb__Gubernator__HealthCheckResp m;
    build_health(h, &m);
    return sl_batch_pb_pack(&m.base, out);
}

int sl_gub_encode_health_json(const sl_gub_health *h, sl_buf *out)
{
    Pb__Gubernator__HealthCheckResp m;
    build_health(h, &m);
    return sl_gubjson_print(&m.base, out);
}

int sl_gub_encode_live_pb(sl_buf *out)
{
    Pb__Gubernator__LiveCheckResp m;
    pb__gubernator__live_check_resp__init(&m);
    return sl_batch_pb_pack(&m.base, out);
}

int sl_gub_encode_live_json(sl_buf *out)
{
    Pb__Gubernator__LiveCheckResp m;
    pb__gubernator__live_check_resp__init(&m);
    return sl_gubjson_print(&m.base, out);
}

/* ---- all or nothing ------------------------------------------------------------------------ */

static bool in_group(const sl_batch *b, size_t i)
{
    const char *v = b->req_meta ? sl_batch_meta_get(&b->req_meta[i], "all_or_nothing") : NULL;
    return v && !strcmp(v, "true");
}

/* Whether item i took its hits: decided, and under its limit or admitted by shadow mode. */
static bool took(const sl_batch *b, size_t i)
{
    const sl_response *r = &b->resps[i];
    if (r->error)
        return false;
    if (r->status != SL_OVER_LIMIT)
        return true;
    const char *sh = sl_batch_meta_get(&b->resp_meta[i], "shadow");
    return sh != NULL;
}

size_t sl_gub_all_or_nothing(sl_batch *b, sl_batch *gb)
{
    size_t members = 0, back = 0;
    bool refused = false;
    for (size_t i = 0; i < b->n; i++)
        if (in_group(b, i)) {
            members++;
            refused |= !took(b, i);
        }
    if (members < 2 || !refused)
        return 0;
    for (size_t i = 0; i < b->n; i++)
        back += in_group(b, i) && took(b, i) && b->reqs[i].hits > 0;
    if (!back || !gb)
        return back;
    size_t *pick = malloc(back * sizeof *pick), k = 0; /* not in gb's arena: reset by the copy */
    for (size_t i = 0; pick && i < b->n; i++)
        if (in_group(b, i) && took(b, i) && b->reqs[i].hits > 0)
            pick[k++] = i;
    int rc = pick ? sl_batch_giveback(gb, b, pick, back) : -ENOMEM;
    for (size_t j = 0; !rc && j < back; j++) {
        size_t i = pick[j];
        sl_response *r = &b->resps[i];
        int64_t rem = r->remaining > INT64_MAX - b->reqs[i].hits ? INT64_MAX
                                                                 : r->remaining + b->reqs[i].hits;
        r->remaining = rem > r->limit ? r->limit : rem;
        r->status = SL_OVER_LIMIT;
        (void)sl_batch_meta_set(b, &b->resp_meta[i], "all_or_nothing", "given back"); /* a word */
    }
    free(pick);
    return rc ? 0 : back;
}

/*
 * Gubernator v2 adapter: wire messages <-> sl_batch (see gubernator.h for the rules it applies).
 *
 * Decoded messages are unpacked into the batch's arena, and the requests point into them, so a
 * call costs a handful of arena bumps and no copies of names or keys. Before unpacking protobuf,
 * the top level of the message is scanned to count the requests: a message with more than
 * max_items is refused without materialising them (an empty RateLimitReq is 2 bytes on the wire
 * but ~100 in memory, so unpacking first would let a 1 MiB message cost ~50 MiB).
 */
#include "api/gubernator.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "wire/grpc_frame.h"

void sl_gub_config_default(sl_gub_config *c)
{
    c->max_msg = SL_GRPC_DEFAULT_MAX_MSG;
    c->max_items = SL_GUB_MAX_ITEMS;
    sl_gubjson_limits_default(&c->json);
}

void sl_gub_status_set(sl_gub_status *st, int code, const char *fmt, ...)
{
    st->code = code;
    st->http_status = sl_grpc_code_to_http(code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
}

static void status_ok(sl_gub_status *st)
{
    st->code = SL_GRPC_OK;
    st->http_status = 200;
    st->message[0] = 0;
}

/* Size errors are RESOURCE_EXHAUSTED as grpc-go reports them, but over HTTP a 413 says what
 * happened better than grpc-gateway's 429 for that code. */
static int too_large(sl_gub_status *st, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int too_large(sl_gub_status *st, int rc, const char *fmt, ...)
{
    st->code = SL_GRPC_RESOURCE_EXHAUSTED;
    st->http_status = 413;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->message, sizeof st->message, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- protobuf helpers ------------------------------------------------------------------------ */

static bool read_varint(const uint8_t *p, size_t n, size_t *pos, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64 && *pos < n; shift += 7) {
        uint8_t byte = p[(*pos)++];
        r |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Count the top-level occurrences of length-delimited field `field`, stopping once more than
 * `stop_after` are seen. -EINVAL if the top level is not well-formed protobuf. */
static int count_field(const uint8_t *p, size_t n, uint32_t field, size_t stop_after,
                       size_t *count)
{
    size_t pos = 0;
    *count = 0;
    while (pos < n) {
        uint64_t tag, v;
        if (!read_varint(p, n, &pos, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
            return -EINVAL;
        switch (tag & 7) {
        case 0:
            if (!read_varint(p, n, &pos, &v))
                return -EINVAL;
            break;
        case 1:
            if (n - pos < 8)
                return -EINVAL;
            pos += 8;
            break;
        case 2:
            if (!read_varint(p, n, &pos, &v) || v > n - pos)
                return -EINVAL;
            pos += (size_t)v;
            if ((tag >> 3) == field && ++*count > stop_after)
                return 0;
            break;
        case 5:
            if (n - pos < 4)
                return -EINVAL;
            pos += 4;
            break;
        default:
            return -EINVAL; /* groups do not exist in proto3; 6 and 7 are not wire types */
        }
    }
    return 0;
}

static int pack(const ProtobufCMessage *m, sl_buf *out)
{
    size_t sz = protobuf_c_message_get_packed_size(m);
    int rc = sl_buf_reserve(out, sz);
    if (rc)
        return rc;
    out->len += protobuf_c_message_pack(m, out->data + out->len);
    return 0;
}

#define UNMARSHAL_ERR "grpc: error unmarshalling request: cannot parse invalid wire-format data"

/* Unpack `len` bytes as `desc` into b's arena, after the size and item-count checks. */
static int unpack(const sl_gub_config *c, const ProtobufCMessageDescriptor *desc,
                  const uint8_t *msg, size_t len, size_t max_items, const char *too_many_fmt,
                  sl_batch *b, ProtobufCMessage **out, sl_gub_status *st)
{
    if (len > c->max_msg)
        return too_large(st, -EMSGSIZE, "grpc: received message larger than max (%zu vs. %zu)",
                         len, c->max_msg);
    if (too_many_fmt) {
        size_t n;
        if (count_field(msg, len, 1, max_items, &n)) {
            sl_gub_status_set(st, SL_GRPC_INTERNAL, UNMARSHAL_ERR);
            return -EINVAL;
        }
        if (n > max_items) {
            sl_gub_status_set(st, SL_GRPC_OUT_OF_RANGE, too_many_fmt, max_items);
            return -E2BIG;
        }
    }
    *out = protobuf_c_message_unpack(desc, sl_batch_pb_allocator(b), len, msg);
    if (!*out) {
        if (b->oom)
            return too_large(st, -ENOMEM, "message too large to decode within the memory limit");
        sl_gub_status_set(st, SL_GRPC_INTERNAL, UNMARSHAL_ERR);
        return -EINVAL;
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

static bool parse_sub_windows(const char *s, int32_t *out)
{
    int64_t v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        v = v * 10 + (*s - '0');
        if (v > INT32_MAX)
            return false;
    }
    *out = (int32_t)v;
    return true;
}

static const char *str_or_empty(const char *s)
{
    return s ? s : "";
}

/* Fill b's items from decoded RateLimitReqs (which live in b's arena). */
static int fill_requests(sl_batch *b, Pb__Gubernator__RateLimitReq **rq, size_t n, bool peer,
                         sl_gub_status *st)
{
    if (sl_batch_alloc_items(b, n))
        return too_large(st, -ENOMEM, "message too large to decode within the memory limit");
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
        if (peer && (q->behavior & SL_GLOBAL))
            q->behavior |= SL_DRAIN_OVER_LIMIT;
        for (size_t k = 0; k < r->n_metadata; k++) {
            const Pb__Gubernator__RateLimitReq__MetadataEntry *e = r->metadata[k];
            if (sl_batch_meta_add_ref(b, &b->req_meta[i], str_or_empty(e->key),
                                      str_or_empty(e->value)))
                return too_large(st, -ENOMEM,
                                 "message too large to decode within the memory limit");
        }
        /* Gubernator checks the key before the name */
        if (q->unique_key_len == 0) {
            sl_batch_answer(b, i, ERR_EMPTY_KEY);
            continue;
        }
        if (q->name_len == 0) {
            sl_batch_answer(b, i, ERR_EMPTY_NAME);
            continue;
        }
        const char *sw = sl_batch_meta_get(&b->req_meta[i], SL_GUB_META_SUB_WINDOWS);
        if (sw && !parse_sub_windows(sw, &q->sub_windows))
            sl_batch_answer(b, i, ERR_SUB_WINDOWS);
    }
    return 0;
}

static int decode_reqs_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                          sl_gub_status *st, bool peer)
{
    sl_batch_reset(b);
    status_ok(st);
    ProtobufCMessage *m;
    const ProtobufCMessageDescriptor *d =
        peer ? &pb__gubernator__get_peer_rate_limits_req__descriptor
             : &pb__gubernator__get_rate_limits_req__descriptor;
    int rc = unpack(c, d, msg, len, c->max_items, peer ? TOO_MANY_PEER : TOO_MANY_V1, b, &m, st);
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
                     sl_gub_status *st)
{
    return decode_reqs_pb(c, msg, len, b, st, false);
}

int sl_gub_decode_peer_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                          sl_gub_status *st)
{
    return decode_reqs_pb(c, msg, len, b, st, true);
}

int sl_gub_decode_json(const sl_gub_config *c, const char *body, size_t len, sl_batch *b,
                       sl_gub_status *st)
{
    sl_batch_reset(b);
    status_ok(st);
    Pb__Gubernator__GetRateLimitsReq *r;
    char err[sizeof st->message];
    int rc = sl_gubjson_parse_get_rate_limits_req(body, len, &c->json, sl_batch_pb_allocator(b),
                                                  &r, err, sizeof err);
    if (rc == -EMSGSIZE)
        return too_large(st, rc, "%s", err);
    if (rc == -ENOMEM)
        return too_large(st, rc, "request too large to decode within the memory limit");
    if (rc) {
        sl_gub_status_set(st, SL_GRPC_INVALID_ARGUMENT, "%s", err);
        return rc;
    }
    b->msg = r;
    if (r->n_requests > c->max_items) {
        sl_gub_status_set(st, SL_GRPC_OUT_OF_RANGE, TOO_MANY_V1, c->max_items);
        return -E2BIG;
    }
    return fill_requests(b, r->requests, r->n_requests, false, st);
}

/* ---- responses ------------------------------------------------------------------------------- */

/* Metadata entries for a response, from an sl_meta (arena-allocated). */
static int build_resp_meta(sl_batch *b, const sl_meta *m, Pb__Gubernator__RateLimitResp *r)
{
    if (m->n == 0)
        return 0;
    Pb__Gubernator__RateLimitResp__MetadataEntry **arr = sl_batch_alloc(b, m->n * sizeof *arr);
    Pb__Gubernator__RateLimitResp__MetadataEntry *es = sl_batch_alloc(b, m->n * sizeof *es);
    if (!arr || !es)
        return -ENOMEM;
    for (uint32_t k = 0; k < m->n; k++) {
        pb__gubernator__rate_limit_resp__metadata_entry__init(&es[k]);
        es[k].key = (char *)m->kv[k].key;
        es[k].value = (char *)m->kv[k].val;
        arr[k] = &es[k];
    }
    r->n_metadata = m->n;
    r->metadata = arr;
    return 0;
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

/* The array of RateLimitResp for all of b's items. */
static int build_resps(sl_batch *b, Pb__Gubernator__RateLimitResp ***out)
{
    *out = NULL;
    if (b->n == 0)
        return 0;
    Pb__Gubernator__RateLimitResp **arr = sl_batch_alloc(b, b->n * sizeof *arr);
    Pb__Gubernator__RateLimitResp *rs = sl_batch_alloc(b, b->n * sizeof *rs);
    if (!arr || !rs)
        return -ENOMEM;
    for (size_t i = 0; i < b->n; i++) {
        Pb__Gubernator__RateLimitResp *r = &rs[i];
        pb__gubernator__rate_limit_resp__init(r);
        resp_from_engine(r, &b->resps[i]);
        if (build_resp_meta(b, &b->resp_meta[i], r))
            return -ENOMEM;
        arr[i] = r;
    }
    *out = arr;
    return 0;
}

static int build_get_rate_limits_resp(sl_batch *b, Pb__Gubernator__GetRateLimitsResp *m)
{
    pb__gubernator__get_rate_limits_resp__init(m);
    int rc = build_resps(b, &m->responses);
    if (!rc)
        m->n_responses = b->n;
    return rc;
}

int sl_gub_encode_pb(sl_batch *b, sl_buf *out)
{
    Pb__Gubernator__GetRateLimitsResp m;
    int rc = build_get_rate_limits_resp(b, &m);
    return rc ? rc : pack(&m.base, out);
}

int sl_gub_encode_json(sl_batch *b, sl_buf *out)
{
    Pb__Gubernator__GetRateLimitsResp m;
    int rc = build_get_rate_limits_resp(b, &m);
    return rc ? rc : sl_gubjson_print(&m.base, out);
}

int sl_gub_encode_peer_resp_pb(sl_batch *b, sl_buf *out)
{
    Pb__Gubernator__GetPeerRateLimitsResp m;
    pb__gubernator__get_peer_rate_limits_resp__init(&m);
    int rc = build_resps(b, &m.rate_limits);
    if (rc)
        return rc;
    m.n_rate_limits = b->n;
    return pack(&m.base, out);
}

int sl_gub_encode_error_json(const sl_gub_status *st, sl_buf *out)
{
    return sl_gubjson_print_error(out, st->code, st->message);
}

/* ---- health ---------------------------------------------------------------------------------- */

bool sl_gub_health_ok(const sl_gub_health *h, sl_gub_status *st)
{
    if (h->healthy) {
        status_ok(st);
        return true;
    }
    sl_gub_status_set(st, SL_GRPC_UNAVAILABLE, "%s", h->message ? h->message : "unhealthy");
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
    return pack(&m.base, out);
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
    return pack(&m.base, out);
}

int sl_gub_encode_live_json(sl_buf *out)
{
    Pb__Gubernator__LiveCheckResp m;
    pb__gubernator__live_check_resp__init(&m);
    return sl_gubjson_print(&m.base, out);
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
    bool add_sw = q->sub_windows != 0 && !sl_batch_meta_get(m, SL_GUB_META_SUB_WINDOWS);
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
        es[n - 1].key = (char *)SL_GUB_META_SUB_WINDOWS;
        es[n - 1].value = sl_batch_strndup(b, tmp, strlen(tmp));
        if (!es[n - 1].value)
            return -ENOMEM;
    }
    r->n_metadata = n;
    r->metadata = arr;
    return 0;
}

int sl_gub_encode_peer_req_pb(sl_batch *b, const size_t *idx, size_t n, sl_buf *out)
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
    return pack(&m.base, out);
}

int sl_gub_decode_peer_resp_pb(const sl_gub_config *c, const uint8_t *msg, size_t len,
                               sl_batch *b, const size_t *idx, size_t n, sl_gub_status *st)
{
    status_ok(st);
    if (!idx)
        n = b->n;
    ProtobufCMessage *pm;
    int rc = unpack(c, &pb__gubernator__get_peer_rate_limits_resp__descriptor, msg, len, 0, NULL,
                    b, &pm, st);
    if (rc)
        return rc;
    Pb__Gubernator__GetPeerRateLimitsResp *m = (Pb__Gubernator__GetPeerRateLimitsResp *)pm;
    if (m->n_rate_limits != n) {
        sl_gub_status_set(st, SL_GRPC_INTERNAL, "peer answered %zu rate limits for %zu requests",
                          m->n_rate_limits, n);
        return -EPROTO;
    }
    for (size_t k = 0; k < n; k++) {
        size_t i = idx ? idx[k] : k;
        if (i >= b->n) {
            sl_gub_status_set(st, SL_GRPC_INTERNAL, "item index %zu out of range", i);
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
                return too_large(st, -ENOMEM,
                                 "message too large to decode within the memory limit");
        }
    }
    return 0;
}

/* ---- UpdatePeerGlobals ----------------------------------------------------------------------- */

int sl_gub_encode_globals_pb(const sl_gub_global *g, size_t n, sl_buf *out)
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
        rc = pack(&m.base, out);
    sl_batch_free(&tmp);
    return rc;
}

int sl_gub_decode_globals_pb(const sl_gub_config *c, const uint8_t *msg, size_t len, sl_batch *b,
                             sl_gub_global **out, size_t *n_out, sl_gub_status *st)
{
    sl_batch_reset(b);
    status_ok(st);
    *out = NULL;
    *n_out = 0;
    ProtobufCMessage *pm;
    int rc = unpack(c, &pb__gubernator__update_peer_globals_req__descriptor, msg, len, 0, NULL, b,
                    &pm, st);
    if (rc)
        return rc;
    b->msg = pm;
    Pb__Gubernator__UpdatePeerGlobalsReq *m = (Pb__Gubernator__UpdatePeerGlobalsReq *)pm;
    if (m->n_globals == 0)
        return 0;
    sl_gub_global *gs = sl_batch_alloc(b, m->n_globals * sizeof *gs);
    if (!gs)
        return too_large(st, -ENOMEM, "message too large to decode within the memory limit");
    for (size_t k = 0; k < m->n_globals; k++) {
        const Pb__Gubernator__UpdatePeerGlobal *g = m->globals[k];
        sl_gub_global *o = &gs[k];
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

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's Gubernator gRPC calls (client/gubcall.h): GetRateLimits, HealthCheck and LiveCheck.
 *
 * Out: the path, the gRPC request headers (content-type, te, grpc-timeout from the call's timeout)
 * and the protobuf message framed with wire/grpc_frame. In: :status and grpc-status decide whether
 * there is an answer at all; a unary answer is exactly one uncompressed message; grpc-message is
 * percent-decoded. A check that gets no usable answer is answered per item by the failure policy
 * (fail open: UNDER_LIMIT with the item's full limit; fail closed: OVER_LIMIT with an error), so
 * the caller always receives one result per item it asked about. A call sluiced's worker shedder
 * refused (grpc-status UNAVAILABLE with the "sluice-shed" trailer) is not a failure: every item is
 * answered OVER_LIMIT with metadata "shed" and "reason", never failed open.
 */
#include "client/gubcall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gubernator.pb-c.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define PATH_GET_RATE_LIMITS "/pb.gubernator.V1/GetRateLimits"
#define PATH_HEALTH_CHECK "/pb.gubernator.V1/HealthCheck"
#define PATH_LIVE_CHECK "/pb.gubernator.V1/LiveCheck"
#define GRPC_UNAVAILABLE 14
#define SHED_MAX 16      /* bytes of the "sluice-shed" value kept ("worker", "fleet") */
#define REASON_MAX 512   /* bytes of the shed reason kept per item */

static const char err_fail_closed[] = "sluice client: call failed (fail closed)";

/* ------------------------------------------------------------------ gRPC framing */

static void add_grpc_headers(sl_call *k)
{
    /* grpc-timeout allows 8 digits; milliseconds cover ~27 hours */
    snprintf(k->grpc_timeout, sizeof k->grpc_timeout, "%dm", k->timeout_ms);
    sl_call_add_hdr(k, "content-type", "application/grpc", 16);
    sl_call_add_hdr(k, "te", "trailers", 8);
    sl_call_add_hdr(k, "grpc-timeout", k->grpc_timeout, strlen(k->grpc_timeout));
    sl_call_add_hdr(k, "user-agent", "sluice-client", 13);
}

/* The request body: msg as one gRPC message (wire/grpc_frame does the 5-byte prefix). */
static int grpc_frame(sl_call *k, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m), mark;
    sl_buf_init(&k->body, 0);
    int rc = sl_buf_reserve(&k->body, SL_GRPC_HDR_LEN + n);
    if (rc == 0)
        rc = sl_grpc_frame_begin(&k->body, &mark);
    if (rc < 0)
        return rc;
    k->body.len += protobuf_c_message_pack(m, k->body.data + k->body.len);
    return sl_grpc_frame_end(&k->body, mark);
}

/* The one message of a unary gRPC answer. 0, or -EPROTO when the body is not exactly one
 * uncompressed frame. An empty body is an empty message. */
static int grpc_unframe(const uint8_t *b, size_t n, const uint8_t **msg, size_t *len)
{
    if (n == 0) {
        *msg = b;
        *len = 0;
        return 0;
    }
    sl_grpc_msg m;
    const char *err;
    if (sl_grpc_frame_decode(b, n, n, &m, &err) < 0 || m.compressed || m.frame_len != n)
        return -EPROTO;
    *msg = m.data;
    *len = m.len;
    return 0;
}

/* Status line of a gRPC answer: 0 when :status 200 and grpc-status 0. */
static int grpc_status_of(const sl_h2c_resp *r, int *grpc_status, const sl_h2c_field **msg)
{
    *grpc_status = -1;
    *msg = sl_h2c_resp_find(r, "grpc-message");
    const sl_h2c_field *f = sl_h2c_resp_find(r, "grpc-status");
    if (f) {
        int64_t v = sl_call_header_int(f->value, f->value_len);
        *grpc_status = v < 0 || v > 1000 ? 2 /* UNKNOWN */ : (int)v;
    }
    if (r->status != 200 || *grpc_status != 0)
        return *grpc_status == 4 /* DEADLINE_EXCEEDED */ ? -ETIMEDOUT : -EPROTO;
    return 0;
}

/* grpc-message is percent-encoded: decode it into dst (cap bytes, truncated, NUL-terminated). */
static void grpc_message_copy(char *dst, size_t cap, const sl_h2c_field *f)
{
    sl_buf b;
    sl_buf_init(&b, f->value_len + 16); /* decoding never grows it */
    if (sl_grpc_message_decode(f->value, f->value_len, &b) == 0)
        sl_call_copy_trunc(dst, cap, b.data, b.len);
    else
        sl_call_copy_trunc(dst, cap, f->value, f->value_len);
    sl_buf_free(&b);
}

/* ------------------------------------------------------------------ check: request */

static int build_check(sl_call *k, const sl_client_item *items, size_t n)
{
    if (n == 0 || !items)
        return -EINVAL;
    if (n > SL_CLIENT_MAX_ITEMS)
        return -E2BIG;
    size_t nmd = 0, sbytes = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_client_request *q = &items[i].req;
        if ((q->name_len && !q->name) || (q->unique_key_len && !q->unique_key) ||
            q->name_len > SL_MAX_NAME_LEN || q->unique_key_len > SL_MAX_KEY_LEN ||
            (items[i].metadata_count && !items[i].metadata) || items[i].metadata_count > 64)
            return -EINVAL;
        for (size_t j = 0; j < items[i].metadata_count; j++)
            if (!items[i].metadata[j].key || !items[i].metadata[j].value)
                return -EINVAL;
        nmd += items[i].metadata_count + (q->sub_windows > 1);
        sbytes += q->name_len + 1 + q->unique_key_len + 1 + 16;
    }
    Pb__Gubernator__RateLimitReq *reqs = calloc(n, sizeof *reqs);
    Pb__Gubernator__RateLimitReq **preqs = calloc(n, sizeof *preqs);
    Pb__Gubernator__RateLimitReq__MetadataEntry *mds = calloc(nmd ? nmd : 1, sizeof *mds);
    Pb__Gubernator__RateLimitReq__MetadataEntry **pmds = calloc(nmd ? nmd : 1, sizeof *pmds);
    char *scratch = malloc(sbytes);
    k->limits = malloc(n * sizeof *k->limits);
    int rc = -ENOMEM;
    if (!reqs || !preqs || !mds || !pmds || !scratch || !k->limits)
        goto out;

    char *sp = scratch;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_client_request *q = &items[i].req;
        Pb__Gubernator__RateLimitReq *r = &reqs[i];
        pb__gubernator__rate_limit_req__init(r);
        r->name = sp;
        if (q->name_len)
            memcpy(sp, q->name, q->name_len);
        sp[q->name_len] = 0;
        sp += q->name_len + 1;
        r->unique_key = sp;
        if (q->unique_key_len)
            memcpy(sp, q->unique_key, q->unique_key_len);
        sp[q->unique_key_len] = 0;
        sp += q->unique_key_len + 1;
        r->hits = q->hits;
        r->limit = q->limit;
        r->duration = q->duration;
        r->algorithm = (Pb__Gubernator__Algorithm)q->algorithm;
        r->behavior = (Pb__Gubernator__Behavior)q->behavior;
        r->burst = q->burst;
        r->created_at = q->created_at;
        r->metadata = &pmds[m];
        for (size_t j = 0; j < items[i].metadata_count; j++) {
            pb__gubernator__rate_limit_req__metadata_entry__init(&mds[m]);
            mds[m].key = (char *)items[i].metadata[j].key;
            mds[m].value = (char *)items[i].metadata[j].value;
            pmds[m] = &mds[m];
            m++;
            r->n_metadata++;
        }
        if (q->sub_windows > 1) {
            pb__gubernator__rate_limit_req__metadata_entry__init(&mds[m]);
            mds[m].key = "sub_windows";
            mds[m].value = sp;
            sp += snprintf(sp, 16, "%d", (int)q->sub_windows) + 1;
            pmds[m] = &mds[m];
            m++;
            r->n_metadata++;
        }
        preqs[i] = r;
        k->limits[i] = q->limit;
    }
    Pb__Gubernator__GetRateLimitsReq msg = PB__GUBERNATOR__GET_RATE_LIMITS_REQ__INIT;
    msg.n_requests = n;
    msg.requests = preqs;
    k->nitems = n;
    rc = grpc_frame(k, &msg.base);
out:
    free(reqs);
    free(preqs);
    free(mds);
    free(pmds);
    free(scratch);
    return rc;
}

/* ------------------------------------------------------------------ check: reply */

typedef struct arena {
    sl_client_kv *kv;
    char *s;
} arena;

static char *arena_str(arena *a, const char *src, size_t n)
{
    char *d = a->s;
    memcpy(d, src, n);
    d[n] = 0;
    a->s += n + 1;
    return d;
}

/* Allocate items + kvs + string bytes in one block. */
static int reply_alloc(sl_client_check_reply *out, size_t n, size_t nkv, size_t sbytes, arena *a)
{
    size_t sz = n * sizeof(sl_client_result) + nkv * sizeof(sl_client_kv) + sbytes;
    char *blk = calloc(1, sz ? sz : 1);
    if (!blk)
        return -ENOMEM;
    out->priv_ = blk;
    out->items = (sl_client_result *)blk;
    out->count = n;
    a->kv = (sl_client_kv *)(blk + n * sizeof(sl_client_result));
    a->s = (char *)(a->kv + nkv);
    return 0;
}

/* The call failed: answer every item per the policy. */
static int check_fail(sl_call *k, int err, const sl_h2c_field *gmsg)
{
    sl_client *c = k->c;
    sl_client_check_reply *out = &k->r.check;
    arena a;
    out->err = err;
    sl_call_count_failure(c, err);
    if (reply_alloc(out, k->nitems, 0, gmsg ? gmsg->value_len + 1 : 0, &a) < 0) {
        out->count = 0;
        return c->opt.fail_closed ? err : 0;
    }
    if (gmsg) {
        out->grpc_message = a.s;
        grpc_message_copy(a.s, gmsg->value_len + 1, gmsg);
    }
    for (size_t i = 0; i < k->nitems; i++) {
        sl_client_response *r = &out->items[i].resp;
        r->limit = k->limits[i];
        if (c->opt.fail_closed) {
            r->status = SL_OVER_LIMIT;
            r->remaining = 0;
            r->error = err_fail_closed;
        } else {
            r->status = SL_UNDER_LIMIT;
            r->remaining = k->limits[i];
        }
    }
    if (c->opt.fail_closed) {
        atomic_fetch_add(&c->failed_closed, 1);
        return err;
    }
    out->failed_open = true;
    atomic_fetch_add(&c->failed_open, 1);
    return 0;
}

/* The whole call was shed (UNAVAILABLE + "sluice-shed"): every item OVER_LIMIT, remaining 0,
 * reset at Retry-After, with metadata "shed" (the trailer's value) and "reason" (grpc-message). */
static int check_shed(sl_call *k, const sl_h2c_resp *resp, const sl_h2c_field *shed,
                      const sl_h2c_field *gmsg)
{
    sl_client_check_reply *out = &k->r.check;
    char who[SHED_MAX + 1], why[REASON_MAX + 1];
    sl_call_copy_trunc(who, sizeof who, shed->value, shed->value_len);
    why[0] = 0;
    if (gmsg)
        grpc_message_copy(why, sizeof why, gmsg);
    size_t wl = strlen(who) + 1, yl = strlen(why) + 1;
    arena a;
    if (reply_alloc(out, k->nitems, 2 * k->nitems, k->nitems * (wl + yl + 12) + (gmsg ? gmsg->value_len + 1 : 0), &a) < 0)
        return check_fail(k, -ENOMEM, gmsg);
    const sl_h2c_field *ra = sl_h2c_resp_find(resp, "retry-after");
    int64_t ra_s = ra ? sl_call_header_int(ra->value, ra->value_len) : -1;
    int64_t reset = sl_wall_ms() + (ra_s > 0 && ra_s < 86400 ? ra_s * 1000 : 1000);
    out->shed = true;
    for (size_t i = 0; i < k->nitems; i++) {
        sl_client_result *o = &out->items[i];
        o->resp.status = SL_OVER_LIMIT;
        o->resp.limit = k->limits[i];
        o->resp.remaining = 0;
        o->resp.reset_time = reset;
        o->metadata = a.kv;
        o->metadata_count = 2;
        a.kv[0].key = arena_str(&a, "shed", 4);
        a.kv[0].value = arena_str(&a, who, wl - 1);
        a.kv[1].key = arena_str(&a, "reason", 6);
        a.kv[1].value = arena_str(&a, why, yl - 1);
        a.kv += 2;
    }
    if (gmsg) {
        out->grpc_message = a.s;
        grpc_message_copy(a.s, gmsg->value_len + 1, gmsg);
    }
    atomic_fetch_add(&k->c->shed, 1);
    return 0;
}

int sl_gubcall_decode_check(sl_call *k, const sl_h2c_resp *resp, int err)
{
    sl_client_check_reply *out = &k->r.check;
    memset(out, 0, sizeof *out);
    out->grpc_status = -1;
    const sl_h2c_field *gmsg = NULL;
    if (err)
        return check_fail(k, err, NULL);
    out->http_status = resp->status;
    if ((err = resp->err))
        return check_fail(k, err, NULL);
    if ((err = grpc_status_of(resp, &out->grpc_status, &gmsg))) {
        const sl_h2c_field *shed = sl_h2c_resp_find(resp, "sluice-shed");
        if (shed && out->grpc_status == GRPC_UNAVAILABLE && shed->value_len)
            return check_shed(k, resp, shed, gmsg);
        return check_fail(k, err, gmsg);
    }
    const uint8_t *msg;
    size_t mlen;
    if (grpc_unframe(resp->body->data, resp->body->len, &msg, &mlen) < 0)
        return check_fail(k, -EPROTO, NULL);
    Pb__Gubernator__GetRateLimitsResp *m = pb__gubernator__get_rate_limits_resp__unpack(NULL, mlen, msg);
    if (!m || m->n_responses != k->nitems) {
        if (m)
            pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
        return check_fail(k, -EPROTO, NULL);
    }
    size_t nkv = 0, sbytes = 0;
    for (size_t i = 0; i < m->n_responses; i++) {
        const Pb__Gubernator__RateLimitResp *r = m->responses[i];
        if (r->error && r->error[0])
            sbytes += strlen(r->error) + 1;
        nkv += r->n_metadata;
        for (size_t j = 0; j < r->n_metadata; j++)
            sbytes += strlen(r->metadata[j]->key) + strlen(r->metadata[j]->value) + 2;
    }
    arena a;
    if (reply_alloc(out, m->n_responses, nkv, sbytes, &a) < 0) {
        pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
        return check_fail(k, -ENOMEM, NULL);
    }
    for (size_t i = 0; i < m->n_responses; i++) {
        const Pb__Gubernator__RateLimitResp *r = m->responses[i];
        sl_client_result *o = &out->items[i];
        o->resp.status = r->status == PB__GUBERNATOR__STATUS__OVER_LIMIT ? SL_OVER_LIMIT
                                                                          : SL_UNDER_LIMIT;
        o->resp.limit = r->limit;
        o->resp.remaining = r->remaining;
        o->resp.reset_time = r->reset_time;
        if (r->error && r->error[0])
            o->resp.error = arena_str(&a, r->error, strlen(r->error));
        o->metadata = a.kv;
        o->metadata_count = r->n_metadata;
        for (size_t j = 0; j < r->n_metadata; j++) {
            const char *key = r->metadata[j]->key, *val = r->metadata[j]->value;
            a.kv->key = arena_str(&a, key, strlen(key));
            a.kv->value = arena_str(&a, val, strlen(val));
            if (strcmp(key, "shed") == 0 && o->resp.status == SL_OVER_LIMIT)
                out->shed = true;
            a.kv++;
        }
    }
    pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
    if (out->shed)
        atomic_fetch_add(&k->c->shed, 1);
    return 0;
}

/* ------------------------------------------------------------------ health / live */

int sl_gubcall_decode_health(sl_call *k, const sl_h2c_resp *resp, int err)
{
    sl_health_reply *out = &k->r.health;
    memset(out, 0, sizeof *out);
    out->grpc_status = -1;
    if (!err)
        err = resp->err;
    const sl_h2c_field *gmsg = NULL;
    if (!err && (grpc_status_of(resp, &out->grpc_status, &gmsg) < 0 && out->grpc_status < 0))
        err = -EPROTO; /* not a gRPC answer at all */
    if (err) {
        out->err = err;
        sl_call_count_failure(k->c, err);
        return err;
    }
    const uint8_t *msg;
    size_t mlen;
    Pb__Gubernator__HealthCheckResp *m = NULL;
    if (grpc_unframe(resp->body->data, resp->body->len, &msg, &mlen) == 0 && resp->body->len)
        m = pb__gubernator__health_check_resp__unpack(NULL, mlen, msg);
    if (out->grpc_status == 0 && !m) {
        out->err = -EPROTO;
        sl_call_count_failure(k->c, -EPROTO);
        return -EPROTO;
    }
    if (m) {
        sl_call_copy_trunc(out->status, sizeof out->status, m->status, strlen(m->status));
        sl_call_copy_trunc(out->message, sizeof out->message, m->message, strlen(m->message));
        sl_call_copy_trunc(out->advertise_address, sizeof out->advertise_address, m->advertise_address,
                   strlen(m->advertise_address));
        out->peer_count = m->peer_count;
        pb__gubernator__health_check_resp__free_unpacked(m, NULL);
    }
    if (out->grpc_status != 0) {
        if (!out->status[0])
            strcpy(out->status, "unhealthy");
        if (!out->message[0] && gmsg)
            grpc_message_copy(out->message, sizeof out->message, gmsg);
    }
    out->healthy = out->grpc_status == 0 && strcmp(out->status, "healthy") == 0;
    return 0;
}

int sl_gubcall_decode_live(sl_call *k, const sl_h2c_resp *resp, int err)
{
    int gs;
    const sl_h2c_field *gmsg;
    if (!err && !(err = resp->err))
        err = grpc_status_of(resp, &gs, &gmsg);
    if (err)
        sl_call_count_failure(k->c, err);
    return err;
}

/* ------------------------------------------------------------------ the calls */

sl_call *sl_gubcall_check(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                          int *rc)
{
    sl_call *k = sl_call_new(c, K_CHECK, timeout_ms);
    if (!k) {
        *rc = -ENOMEM;
        return NULL;
    }
    k->path = PATH_GET_RATE_LIMITS;
    add_grpc_headers(k);
    if ((*rc = build_check(k, items, n)) < 0) {
        sl_call_free(k);
        return NULL;
    }
    return k;
}

sl_call *sl_gubcall_probe(sl_client *c, sl_call_kind kind, int timeout_ms)
{
    sl_call *k = sl_call_new(c, kind, timeout_ms);
    if (!k)
        return NULL;
    k->path = kind == K_HEALTH ? PATH_HEALTH_CHECK : PATH_LIVE_CHECK;
    add_grpc_headers(k);
    Pb__Gubernator__HealthCheckReq hreq = PB__GUBERNATOR__HEALTH_CHECK_REQ__INIT;
    Pb__Gubernator__LiveCheckReq lreq = PB__GUBERNATOR__LIVE_CHECK_REQ__INIT;
    if (grpc_frame(k, kind == K_HEALTH ? &hreq.base : &lreq.base) < 0) {
        sl_call_free(k);
        return NULL;
    }
    return k;
}

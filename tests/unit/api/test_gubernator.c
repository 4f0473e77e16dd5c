/* SPDX-License-Identifier: Apache-2.0 */
/* Gubernator adapter: pb/JSON -> sl_batch -> pb/JSON, Gubernator's validation, PeersV1, health,
 * and the batch arena. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "decide/batch.h"
#include "api/gubernator.h"
#include "cluster/peerwire.h"
#include "wire/grpc_frame.h"
#include "../../support/gub_reference.h"

typedef Pb__Gubernator__RateLimitReq RLReq;
#define ENTRY_INIT PB__GUBERNATOR__RATE_LIMIT_REQ__METADATA_ENTRY__INIT

/* Pack a GetRateLimitsReq (or, with peer, a GetPeerRateLimitsReq) of n requests into *out. */
static uint8_t *pack_reqs(RLReq **rs, size_t n, bool peer, size_t *len)
{
    Pb__Gubernator__GetRateLimitsReq m = PB__GUBERNATOR__GET_RATE_LIMITS_REQ__INIT;
    Pb__Gubernator__GetPeerRateLimitsReq pm = PB__GUBERNATOR__GET_PEER_RATE_LIMITS_REQ__INIT;
    m.n_requests = pm.n_requests = n;
    m.requests = pm.requests = rs;
    const ProtobufCMessage *msg = peer ? &pm.base : &m.base;
    *len = protobuf_c_message_get_packed_size(msg);
    uint8_t *p = malloc(*len ? *len : 1);
    protobuf_c_message_pack(msg, p);
    return p;
}

static void fill_req(RLReq *r, const char *name, const char *key)
{
    pb__gubernator__rate_limit_req__init(r);
    r->name = (char *)name;
    r->unique_key = (char *)key;
    r->hits = 1;
    r->limit = 10;
    r->duration = 1000;
}

static sl_gub_config cfg(void)
{
    sl_gub_config c;
    sl_gub_config_default(&c);
    return c;
}

static char *buf_str(sl_buf *b)
{
    sl_buf_append(b, "", 1);
    b->len--;
    return (char *)b->data;
}

static void test_decode_pb_fields(void **state)
{
    (void)state;
    RLReq a, b2;
    fill_req(&a, "requests_per_sec", "account:1");
    a.hits = 3;
    a.limit = 100;
    a.duration = 60000;
    a.burst = 200;
    a.created_at = 1700000000123;
    a.algorithm = PB__GUBERNATOR__ALGORITHM__SLIDING_WINDOW;
    a.behavior = PB__GUBERNATOR__BEHAVIOR__GLOBAL | PB__GUBERNATOR__BEHAVIOR__NO_BATCHING;
    Pb__Gubernator__RateLimitReq__MetadataEntry e1 = ENTRY_INIT;
    Pb__Gubernator__RateLimitReq__MetadataEntry e2 = ENTRY_INIT;
    e1.key = "traceparent";
    e1.value = "00-abc";
    e2.key = "sub_windows";
    e2.value = "12";
    Pb__Gubernator__RateLimitReq__MetadataEntry *es[] = {&e1, &e2};
    a.n_metadata = 2;
    a.metadata = es;
    fill_req(&b2, "n", "k");
    b2.algorithm = 6; /* CONCURRENCY */
    RLReq *rs[] = {&a, &b2};
    size_t len;
    uint8_t *p = pack_reqs(rs, 2, false, &len);

    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), 0);
    assert_int_equal(st.code, SL_GRPC_OK);
    assert_int_equal(b.n, 2);
    assert_int_equal(b.n_answered, 0);
    const sl_request *q = &b.reqs[0];
    assert_int_equal(q->name_len, strlen("requests_per_sec"));
    assert_memory_equal(q->name, "requests_per_sec", q->name_len);
    assert_memory_equal(q->unique_key, "account:1", q->unique_key_len);
    assert_int_equal(q->hits, 3);
    assert_int_equal(q->limit, 100);
    assert_int_equal(q->duration, 60000);
    assert_int_equal(q->burst, 200);
    assert_int_equal(q->created_at, 1700000000123);
    assert_int_equal(q->algorithm, SL_SLIDING_WINDOW);
    assert_int_equal(q->behavior, SL_GLOBAL | SL_NO_BATCHING);
    assert_int_equal(q->sub_windows, 12);
    assert_string_equal(sl_batch_meta_get(&b.req_meta[0], "traceparent"), "00-abc");
    assert_int_equal(b.reqs[1].algorithm, SL_CONCURRENCY);
    assert_int_equal(b.reqs[1].sub_windows, 0);
    assert_int_equal(b.req_meta[1].n, 0);
    free(p);
    sl_batch_free(&b);
}

static void test_item_validation(void **state)
{
    (void)state;
    RLReq r[5];
    fill_req(&r[0], "n", "");
    fill_req(&r[1], "", "k");
    fill_req(&r[2], "", ""); /* the key is checked first */
    fill_req(&r[3], "n", "k");
    fill_req(&r[4], "n", "k");
    Pb__Gubernator__RateLimitReq__MetadataEntry e = ENTRY_INIT;
    e.key = "sub_windows";
    e.value = "-1";
    Pb__Gubernator__RateLimitReq__MetadataEntry *es[] = {&e};
    r[4].n_metadata = 1;
    r[4].metadata = es;
    RLReq *rs[] = {&r[0], &r[1], &r[2], &r[3], &r[4]};
    size_t len;
    uint8_t *p = pack_reqs(rs, 5, false, &len);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), 0);
    assert_int_equal(b.n_answered, 4);
    assert_string_equal(b.resps[0].error, "field 'unique_key' cannot be empty");
    assert_string_equal(b.resps[1].error, "field 'namespace' cannot be empty");
    assert_string_equal(b.resps[2].error, "field 'unique_key' cannot be empty");
    assert_int_equal(b.answered[3], 0);
    assert_null(b.resps[3].error);
    assert_int_equal(b.answered[4], 1);
    assert_non_null(strstr(b.resps[4].error, "sub_windows"));
    /* errors encode with zero values, in order, next to decided items */
    b.resps[3] = (sl_response){.status = SL_OVER_LIMIT, .limit = 10, .remaining = 0,
                               .reset_time = 1700000001000};
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_gub_encode_json(&b, &out), 0);
    assert_string_equal(
        buf_str(&out),
        "{\"responses\":["
        "{\"status\":\"UNDER_LIMIT\",\"limit\":\"0\",\"remaining\":\"0\",\"reset_time\":\"0\","
        "\"error\":\"field 'unique_key' cannot be empty\",\"metadata\":{}},"
        "{\"status\":\"UNDER_LIMIT\",\"limit\":\"0\",\"remaining\":\"0\",\"reset_time\":\"0\","
        "\"error\":\"field 'namespace' cannot be empty\",\"metadata\":{}},"
        "{\"status\":\"UNDER_LIMIT\",\"limit\":\"0\",\"remaining\":\"0\",\"reset_time\":\"0\","
        "\"error\":\"field 'unique_key' cannot be empty\",\"metadata\":{}},"
        "{\"status\":\"OVER_LIMIT\",\"limit\":\"10\",\"remaining\":\"0\","
        "\"reset_time\":\"1700000001000\",\"error\":\"\",\"metadata\":{}},"
        "{\"status\":\"UNDER_LIMIT\",\"limit\":\"0\",\"remaining\":\"0\",\"reset_time\":\"0\","
        "\"error\":\"metadata 'sub_windows' must be an integer from 0 to 2147483647\","
        "\"metadata\":{}}]}");
    sl_buf_free(&out);
    free(p);
    sl_batch_free(&b);
}

static void check_too_many(const sl_grpc_status *st, const char *want)
{
    assert_int_equal(st->code, SL_GRPC_OUT_OF_RANGE);
    assert_int_equal(st->http_status, 400);
    assert_string_equal(st->message, want);
}

static void test_1000_vs_1001_pb(void **state)
{
    (void)state;
    RLReq *rs[1001];
    RLReq *items = calloc(1001, sizeof *items);
    for (size_t i = 0; i < 1001; i++) {
        fill_req(&items[i], "n", "k");
        rs[i] = &items[i];
    }
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    size_t len;
    uint8_t *p = pack_reqs(rs, 1000, false, &len);
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), 0);
    assert_int_equal(b.n, 1000);
    free(p);
    p = pack_reqs(rs, 1001, false, &len);
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), -E2BIG);
    check_too_many(&st, "Requests.RateLimits list too large; max size is '1000'");
    free(p);
    /* peers have their own wording */
    p = pack_reqs(rs, 1001, true, &len);
    assert_int_equal(sl_gub_decode_peer_pb(&c, p, len, &b, &st), -E2BIG);
    check_too_many(&st, "'PeerRequest.rate_limits' list too large; max size is '1000'");
    free(p);
    p = pack_reqs(rs, 1000, true, &len);
    assert_int_equal(sl_gub_decode_peer_pb(&c, p, len, &b, &st), 0);
    free(p);
    /* the limit is a parameter */
    c.max_items = 2;
    p = pack_reqs(rs, 3, false, &len);
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), -E2BIG);
    check_too_many(&st, "Requests.RateLimits list too large; max size is '2'");
    free(p);
    /* the error body over HTTP */
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_gub_encode_error_json(&st, &out), 0);
    assert_string_equal(buf_str(&out), "{\"code\":11,\"message\":\"Requests.RateLimits list too "
                                       "large; max size is '2'\",\"details\":[]}");
    sl_buf_free(&out);
    free(items);
    sl_batch_free(&b);
}

static void test_1000_vs_1001_json(void **state)
{
    (void)state;
    sl_buf body;
    sl_buf_init(&body, 0);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    for (int n = 1000; n <= 1001; n++) {
        sl_buf_reset(&body);
        sl_buf_append_str(&body, "{\"requests\":[");
        for (int i = 0; i < n; i++)
            sl_buf_printf(&body, "%s{\"name\":\"n\",\"uniqueKey\":\"k%d\",\"hits\":1,"
                                 "\"limit\":\"10\",\"duration\":1000}",
                          i ? "," : "", i);
        sl_buf_append_str(&body, "]}");
        int rc = sl_gub_decode_json(&c, (char *)body.data, body.len, &b, &st);
        if (n == 1000) {
            assert_int_equal(rc, 0);
            assert_int_equal(b.n, 1000);
            assert_memory_equal(b.reqs[999].unique_key, "k999", 4);
        } else {
            assert_int_equal(rc, -E2BIG);
            check_too_many(&st, "Requests.RateLimits list too large; max size is '1000'");
        }
    }
    sl_buf_free(&body);
    sl_batch_free(&b);
}

static void test_json_and_pb_agree(void **state)
{
    (void)state;
    const char *json = "{\"requests\":[{\"name\":\"n\",\"uniqueKey\":\"k\",\"hits\":\"2\","
                       "\"limit\":5,\"duration\":\"1000\",\"algorithm\":\"GCRA\",\"behavior\":"
                       "\"GLOBAL\",\"burst\":7,\"createdAt\":\"11\",\"metadata\":{\"sub_windows\":"
                       "\"3\"}}]}";
    RLReq r;
    fill_req(&r, "n", "k");
    r.hits = 2;
    r.limit = 5;
    r.algorithm = 2;
    r.behavior = 2;
    r.burst = 7;
    r.created_at = 11;
    Pb__Gubernator__RateLimitReq__MetadataEntry e = ENTRY_INIT;
    e.key = "sub_windows";
    e.value = "3";
    Pb__Gubernator__RateLimitReq__MetadataEntry *es[] = {&e};
    r.n_metadata = 1;
    r.metadata = es;
    RLReq *rs[] = {&r};
    size_t len;
    uint8_t *p = pack_reqs(rs, 1, false, &len);
    sl_gub_config c = cfg();
    sl_batch bj, bp;
    sl_batch_init(&bj, 0);
    sl_batch_init(&bp, 0);
    sl_grpc_status st;
    assert_int_equal(sl_gub_decode_json(&c, json, strlen(json), &bj, &st), 0);
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &bp, &st), 0);
    assert_int_equal(bj.n, 1);
    sl_request a = bj.reqs[0], b = bp.reqs[0];
    assert_memory_equal(a.name, b.name, 2);
    assert_memory_equal(a.unique_key, b.unique_key, 2);
    a.name = b.name = NULL;
    a.unique_key = b.unique_key = NULL;
    assert_memory_equal(&a, &b, sizeof a);
    assert_int_equal(a.sub_windows, 3);
    free(p);
    sl_batch_free(&bj);
    sl_batch_free(&bp);
}

static void test_decode_errors(void **state)
{
    (void)state;
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    /* malformed protobuf: truncated length, bad wire type, truncated sub-message */
    static const struct {
        const char *bytes;
        size_t len;
    } bad[] = {
        {"\x0a\x05\x0a", 3},
        {"\x0b", 1},
        {"\x0f\x00", 2},
        {"\x0a\x02\x0a\x05", 4},
        {"\x0a\x03\x18\xff\xff", 5},
        {"\x00\x00", 2},
        {"\x0a\x02\x4a\x00\x0a\x01", 6},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = sl_gub_decode_pb(&c, (const uint8_t *)bad[i].bytes, bad[i].len, &b, &st);
        if (rc != -EINVAL || st.code != SL_GRPC_INTERNAL)
            fail_msg("case %zu: rc %d code %d", i, rc, st.code);
        assert_non_null(strstr(st.message, "grpc: error unmarshalling request"));
    }
    /* empty message: zero requests, fine */
    assert_int_equal(sl_gub_decode_pb(&c, (const uint8_t *)"", 0, &b, &st), 0);
    assert_int_equal(b.n, 0);
    /* unknown fields are skipped */
    assert_int_equal(sl_gub_decode_pb(&c, (const uint8_t *)"\x10\x01\x1a\x00", 4, &b, &st), 0);
    /* too large */
    c.max_msg = 3;
    assert_int_equal(sl_gub_decode_pb(&c, (const uint8_t *)"\x10\x01\x1a\x00", 4, &b, &st),
                     -EMSGSIZE);
    assert_int_equal(st.code, SL_GRPC_RESOURCE_EXHAUSTED);
    assert_string_equal(st.message, "grpc: received message larger than max (4 vs. 3)");
    c = cfg();
    /* bad JSON: INVALID_ARGUMENT, HTTP 400 */
    const char *j = "{\"requests\":[{\"hits\":\"x\"}]}";
    assert_int_equal(sl_gub_decode_json(&c, j, strlen(j), &b, &st), -EINVAL);
    assert_int_equal(st.code, SL_GRPC_INVALID_ARGUMENT);
    assert_int_equal(st.http_status, 400);
    assert_non_null(strstr(st.message, "requests[0].hits"));
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_gub_encode_error_json(&st, &out), 0);
    json_error_t je;
    json_t *root = json_loads(buf_str(&out), 0, &je);
    assert_non_null(root);
    assert_int_equal(json_integer_value(json_object_get(root, "code")), 3);
    assert_string_equal(json_string_value(json_object_get(root, "message")), st.message);
    assert_int_equal(json_array_size(json_object_get(root, "details")), 0);
    json_decref(root);
    sl_buf_free(&out);
    c.json.max_body = 10;
    assert_int_equal(sl_gub_decode_json(&c, j, strlen(j), &b, &st), -EMSGSIZE);
    assert_int_equal(st.http_status, 413);
    sl_batch_free(&b);
}

static void test_arena_cap(void **state)
{
    (void)state;
    /* a message well under max_msg whose decoded form exceeds the arena cap */
    RLReq items[500];
    RLReq *rs[500];
    for (size_t i = 0; i < 500; i++) {
        fill_req(&items[i], "n", "k");
        rs[i] = &items[i];
    }
    size_t len;
    uint8_t *p = pack_reqs(rs, 500, false, &len);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 32 << 10);
    sl_grpc_status st;
    int rc = sl_gub_decode_pb(&c, p, len, &b, &st);
    assert_int_equal(rc, -ENOMEM);
    assert_int_equal(st.code, SL_GRPC_RESOURCE_EXHAUSTED);
    assert_true(b.arena_bytes <= 32 << 10);
    sl_batch_free(&b);
    sl_batch_init(&b, 0);
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), 0);
    free(p);
    sl_batch_free(&b);
}

static void test_encode_pb_round_trip(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    b.resps[0] = (sl_response){.status = SL_UNDER_LIMIT, .limit = 5, .remaining = 4,
                               .reset_time = 1000};
    b.resps[1] = (sl_response){.status = SL_OVER_LIMIT, .limit = 5, .remaining = 0,
                               .reset_time = 2000, .retry_after = 7};
    sl_batch_answer(&b, 2, "boom");
    assert_int_equal(sl_batch_meta_set(&b, &b.resp_meta[1], "owner", "10.0.0.2:1051"), 0);
    assert_int_equal(sl_batch_meta_set(&b, &b.resp_meta[2], "owner", "x"), 0);
    sl_buf out;
    sl_buf_init(&out, 0);
    size_t mark;
    assert_int_equal(sl_grpc_frame_begin(&out, &mark), 0);
    assert_int_equal(sl_gub_encode_pb(&b, &out), 0);
    assert_int_equal(sl_grpc_frame_end(&out, mark), 0);
    sl_grpc_msg gm;
    const char *err;
    assert_int_equal(sl_grpc_frame_decode(out.data, out.len, 1 << 20, &gm, &err), 0);
    Pb__Gubernator__GetRateLimitsResp *m =
        pb__gubernator__get_rate_limits_resp__unpack(NULL, gm.len, gm.data);
    assert_non_null(m);
    assert_int_equal(m->n_responses, 3);
    assert_int_equal(m->responses[0]->status, PB__GUBERNATOR__STATUS__UNDER_LIMIT);
    assert_int_equal(m->responses[0]->limit, 5);
    assert_int_equal(m->responses[0]->remaining, 4);
    assert_int_equal(m->responses[0]->reset_time, 1000);
    assert_string_equal(m->responses[0]->error, "");
    assert_int_equal(m->responses[1]->status, PB__GUBERNATOR__STATUS__OVER_LIMIT);
    assert_int_equal(m->responses[1]->n_metadata, 1);
    assert_string_equal(m->responses[1]->metadata[0]->key, "owner");
    assert_string_equal(m->responses[1]->metadata[0]->value, "10.0.0.2:1051");
    assert_string_equal(m->responses[2]->error, "boom");
    assert_string_equal(m->responses[2]->metadata[0]->value, "x");
    pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
    sl_buf_free(&out);
    sl_batch_free(&b);
}

static void test_peers(void **state)
{
    (void)state;
    sl_gub_config c = cfg();
    /* server side: GLOBAL requests from a peer get DRAIN_OVER_LIMIT */
    RLReq r[2];
    fill_req(&r[0], "n", "a");
    r[0].behavior = PB__GUBERNATOR__BEHAVIOR__GLOBAL;
    fill_req(&r[1], "n", "b");
    RLReq *rs[] = {&r[0], &r[1]};
    size_t len;
    uint8_t *p = pack_reqs(rs, 2, true, &len);
    sl_batch srv;
    sl_batch_init(&srv, 0);
    sl_grpc_status st;
    assert_int_equal(sl_gub_decode_peer_pb(&c, p, len, &srv, &st), 0);
    assert_int_equal(srv.reqs[0].behavior, SL_GLOBAL | SL_DRAIN_OVER_LIMIT);
    assert_int_equal(srv.reqs[1].behavior, 0);
    free(p);

    /* client side: forward items 2 and 0 of a batch built by hand */
    sl_batch cl;
    sl_batch_init(&cl, 0);
    assert_int_equal(sl_batch_alloc_items(&cl, 3), 0);
    static const char names[] = "nameXkeyA"; /* not NUL-terminated where the request ends */
    for (size_t i = 0; i < 3; i++)
        cl.reqs[i] = (sl_request){.name = names, .name_len = 4, .unique_key = names + 5,
                                  .unique_key_len = 3, .hits = (int64_t)i, .limit = 9,
                                  .algorithm = SL_SLIDING_WINDOW};
    cl.reqs[2].sub_windows = 6;
    assert_int_equal(sl_batch_meta_set(&cl, &cl.req_meta[2], "traceparent", "t"), 0);
    size_t idx[] = {2, 0};
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_peerwire_encode_req(&cl, idx, 2, &out), 0);
    assert_int_equal(sl_gub_decode_peer_pb(&c, out.data, out.len, &srv, &st), 0);
    assert_int_equal(srv.n, 2);
    assert_int_equal(srv.reqs[0].hits, 2);
    assert_int_equal(srv.reqs[0].name_len, 4);
    assert_memory_equal(srv.reqs[0].name, "name", 5); /* NUL-terminated on the far side */
    assert_memory_equal(srv.reqs[0].unique_key, "key", 4);
    assert_int_equal(srv.reqs[0].sub_windows, 6);
    assert_string_equal(sl_batch_meta_get(&srv.req_meta[0], "traceparent"), "t");
    assert_int_equal(srv.reqs[1].hits, 0);
    assert_int_equal(srv.reqs[1].sub_windows, 0);

    /* the owner answers; the answers land at the forwarded indices */
    srv.resps[0] = (sl_response){.status = SL_OVER_LIMIT, .limit = 9, .remaining = 0,
                                 .reset_time = 77};
    sl_batch_answer(&srv, 1, "nope");
    assert_int_equal(sl_batch_meta_set(&srv, &srv.resp_meta[0], "owner", "me"), 0);
    sl_buf_reset(&out);
    assert_int_equal(sl_gub_encode_peer_resp_pb(&srv, &out), 0);
    assert_int_equal(sl_peerwire_decode_resp(c.max_msg, out.data, out.len, &cl, idx, 2, &st), 0);
    sl_batch_reset(&srv); /* the client's copy does not depend on the server's batch */
    assert_int_equal(cl.resps[2].status, SL_OVER_LIMIT);
    assert_int_equal(cl.resps[2].reset_time, 77);
    assert_null(cl.resps[2].error);
    assert_string_equal(sl_batch_meta_get(&cl.resp_meta[2], "owner"), "me");
    assert_string_equal(cl.resps[0].error, "nope");
    assert_int_equal(cl.resps[1].limit, 0);
    /* a peer answering the wrong number of items is an error */
    size_t one[] = {1};
    assert_int_equal(sl_peerwire_decode_resp(c.max_msg, out.data, out.len, &cl, one, 1, &st),
                     -EPROTO);
    assert_int_equal(st.code, SL_GRPC_INTERNAL);
    /* all items (idx NULL) */
    sl_buf_reset(&out);
    assert_int_equal(sl_peerwire_encode_req(&cl, NULL, 0, &out), 0);
    assert_int_equal(sl_gub_decode_peer_pb(&c, out.data, out.len, &srv, &st), 0);
    assert_int_equal(srv.n, 3);
    sl_buf_free(&out);
    sl_batch_free(&srv);
    sl_batch_free(&cl);
}

static void test_globals(void **state)
{
    (void)state;
    sl_peerwire_global g[2] = {
        {.key = "n_k1xx", .key_len = 4, .resp = {.status = SL_OVER_LIMIT, .limit = 5,
                                                   .remaining = 0, .reset_time = 99},
         .algorithm = SL_LEAKY_BUCKET, .duration = 1000, .created_at = 5},
        {.key = "n_k2", .key_len = 4, .algorithm = SL_GCRA},
    };
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_peerwire_encode_globals(g, 2, &out), 0);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    sl_peerwire_global *d;
    size_t n;
    assert_int_equal(sl_peerwire_decode_globals(c.max_msg, out.data, out.len, &b, &d, &n, &st), 0);
    assert_int_equal(n, 2);
    assert_string_equal(d[0].key, "n_k1");
    assert_int_equal(d[0].key_len, 4);
    assert_int_equal(d[0].resp.status, SL_OVER_LIMIT);
    assert_int_equal(d[0].resp.limit, 5);
    assert_int_equal(d[0].resp.reset_time, 99);
    assert_int_equal(d[0].algorithm, SL_LEAKY_BUCKET);
    assert_int_equal(d[0].duration, 1000);
    assert_int_equal(d[0].created_at, 5);
    assert_string_equal(d[1].key, "n_k2");
    assert_int_equal(d[1].algorithm, SL_GCRA);
    assert_int_equal(sl_peerwire_decode_globals(c.max_msg, (const uint8_t *)"\x0a\x09", 2, &b, &d, &n, &st),
                     -EINVAL);
    sl_buf_free(&out);
    sl_batch_free(&b);
}

static void test_health_and_live(void **state)
{
    (void)state;
    sl_gub_health h = {.healthy = true, .peer_count = 3, .advertise_address = "10.0.0.1:1051"};
    sl_grpc_status st;
    assert_true(sl_gub_health_ok(&h, &st));
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_gub_encode_health_json(&h, &out), 0);
    assert_string_equal(buf_str(&out), "{\"status\":\"healthy\",\"message\":\"\",\"peer_count\":3,"
                                       "\"advertise_address\":\"10.0.0.1:1051\"}");
    sl_buf_reset(&out);
    assert_int_equal(sl_gub_encode_health_pb(&h, &out), 0);
    Pb__Gubernator__HealthCheckResp *m =
        pb__gubernator__health_check_resp__unpack(NULL, out.len, out.data);
    assert_non_null(m);
    assert_string_equal(m->status, "healthy");
    assert_int_equal(m->peer_count, 3);
    pb__gubernator__health_check_resp__free_unpacked(m, NULL);

    h = (sl_gub_health){.healthy = false, .message = "this instance is not found in the peer list",
                        .peer_count = 1};
    assert_false(sl_gub_health_ok(&h, &st));
    assert_int_equal(st.code, SL_GRPC_UNAVAILABLE);
    assert_int_equal(st.http_status, 503);
    assert_string_equal(st.message, "this instance is not found in the peer list");
    sl_buf_reset(&out);
    assert_int_equal(sl_gub_encode_health_json(&h, &out), 0);
    assert_non_null(strstr(buf_str(&out), "\"status\":\"unhealthy\""));

    sl_buf_reset(&out);
    assert_int_equal(sl_gub_encode_live_pb(&out), 0);
    assert_int_equal(out.len, 0);
    assert_int_equal(sl_gub_encode_live_json(&out), 0);
    assert_string_equal(buf_str(&out), "{}");
    sl_buf_free(&out);
}

static void test_batch_arena_and_meta(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 1 << 20);
    /* alignment and reuse after reset */
    void *p1 = sl_batch_alloc(&b, 3);
    void *p2 = sl_batch_alloc(&b, 5);
    assert_int_equal((uintptr_t)p1 % 16, 0);
    assert_int_equal((uintptr_t)p2 % 16, 0);
    void *big = sl_batch_alloc(&b, 200 << 10);
    assert_non_null(big);
    void *p3 = sl_batch_alloc(&b, 8); /* still served from the first chunk */
    assert_ptr_equal((char *)p2 + 16, p3);
    assert_null(sl_batch_alloc(&b, 2 << 20)); /* over the cap */
    assert_true(b.oom);
    sl_batch_reset(&b);
    assert_false(b.oom);
    assert_true(b.arena_bytes <= 1 << 20);
    void *q = sl_batch_alloc(&b, 3);
    assert_non_null(q);
    /* metadata: set replaces, add_ref appends, get takes the last */
    assert_int_equal(sl_batch_alloc_items(&b, 1), 0);
    sl_meta *m = &b.resp_meta[0];
    for (int i = 0; i < 20; i++) {
        char k[8], v[8];
        snprintf(k, sizeof k, "k%d", i);
        snprintf(v, sizeof v, "v%d", i);
        assert_int_equal(sl_batch_meta_set(&b, m, k, v), 0);
    }
    assert_int_equal(sl_batch_meta_set(&b, m, "k3", "again"), 0);
    assert_int_equal(m->n, 20);
    assert_string_equal(sl_batch_meta_get(m, "k3"), "again");
    assert_string_equal(sl_batch_meta_get(m, "k19"), "v19");
    assert_null(sl_batch_meta_get(m, "k20"));
    assert_int_equal(sl_batch_meta_add_ref(&b, m, "k19", "later"), 0);
    assert_string_equal(sl_batch_meta_get(m, "k19"), "later");
    sl_batch_answer(&b, 0, "e");
    sl_batch_answer(&b, 0, "e2");
    assert_int_equal(b.n_answered, 1);
    sl_batch_answer(&b, 5, "out of range is ignored");
    sl_batch_free(&b);
}

/* ---- the hand-written codecs against protobuf-c and the generic printer ---------------------- */

/* Decode msg with the hand-written decoder and with protobuf-c alone: same outcome, same batch.
 * want_fast: the hand-written decoder must take it itself (it leaves b->msg NULL; protobuf-c
 * sets it). Returns the rc. */
static int decode_both(const uint8_t *msg, size_t len, bool peer, bool want_fast,
                       sl_grpc_status *st)
{
    sl_gub_config c = cfg();
    sl_batch f, r;
    sl_batch_init(&f, 0);
    sl_batch_init(&r, 0);
    sl_grpc_status rst;
    int rc = peer ? sl_gub_decode_peer_pb(&c, msg, len, &f, st) : sl_gub_decode_pb(&c, msg, len, &f, st);
    c.reference_decoders = true;
    int rrc = peer ? sl_gub_decode_peer_pb(&c, msg, len, &r, &rst)
                   : sl_gub_decode_pb(&c, msg, len, &r, &rst);
    assert_int_equal(rc, rrc);
    assert_int_equal(st->code, rst.code);
    assert_string_equal(st->message, rst.message);
    if (want_fast) {
        assert_int_equal(rc, 0);
        assert_null(f.msg);
    }
    if (rc == 0) {
        assert_int_equal(f.n, r.n);
        assert_int_equal(f.n_answered, r.n_answered);
        for (size_t i = 0; i < f.n; i++) {
            sl_request a = f.reqs[i], b = r.reqs[i];
            assert_int_equal(a.name_len, b.name_len);
            assert_memory_equal(a.name, b.name, a.name_len + 1);
            assert_int_equal(a.unique_key_len, b.unique_key_len);
            assert_memory_equal(a.unique_key, b.unique_key, a.unique_key_len + 1);
            a.name = b.name = a.unique_key = b.unique_key = NULL;
            assert_memory_equal(&a, &b, sizeof a);
            assert_int_equal(f.answered[i], r.answered[i]);
            if (f.resps[i].error || r.resps[i].error)
                assert_string_equal(f.resps[i].error, r.resps[i].error);
            assert_int_equal(f.req_meta[i].n, r.req_meta[i].n);
            for (uint32_t k = 0; k < f.req_meta[i].n; k++) {
                assert_string_equal(f.req_meta[i].kv[k].key, r.req_meta[i].kv[k].key);
                assert_string_equal(f.req_meta[i].kv[k].val, r.req_meta[i].kv[k].val);
            }
        }
    }
    sl_batch_free(&f);
    sl_batch_free(&r);
    return rc;
}

static void test_pb_decoder_matches_protobuf_c(void **state)
{
    (void)state;
    /* what protoc-made clients send, built with protobuf-c */
    RLReq a, b2, c2;
    fill_req(&a, "requests_per_sec", "account:1");
    a.hits = -1;
    a.limit = INT64_MAX;
    a.duration = INT64_MIN;
    a.burst = -300;
    a.created_at = 1700000000123;
    a.algorithm = 4;
    a.behavior = -1; /* an int32 enum travels as a 10-byte varint */
    Pb__Gubernator__RateLimitReq__MetadataEntry e1 = ENTRY_INIT, e2 = ENTRY_INIT, e3 = ENTRY_INIT;
    e1.key = "traceparent";
    e1.value = "00-abc";
    e2.key = "sub_windows";
    e2.value = "12";
    e3.key = "";
    e3.value = "";
    Pb__Gubernator__RateLimitReq__MetadataEntry *es[] = {&e1, &e2, &e3};
    a.n_metadata = 3;
    a.metadata = es;
    fill_req(&b2, "", "k");
    fill_req(&c2, "n", "k");
    Pb__Gubernator__RateLimitReq__MetadataEntry bad = ENTRY_INIT;
    bad.key = "sub_windows";
    bad.value = "99999999999";
    Pb__Gubernator__RateLimitReq__MetadataEntry *bs[] = {&bad};
    c2.n_metadata = 1;
    c2.metadata = bs;
    c2.behavior = PB__GUBERNATOR__BEHAVIOR__GLOBAL;
    RLReq *rs[] = {&a, &b2, &c2};
    sl_grpc_status st;
    for (int peer = 0; peer < 2; peer++) {
        size_t len;
        uint8_t *p = pack_reqs(rs, 3, peer, &len);
        assert_int_equal(decode_both(p, len, peer, true, &st), 0);
        free(p);
    }
    /* what other encoders may send: fields out of order and repeated (the last wins), unknown
     * fields of every wire type, a name with a NUL, non-minimal varints, metadata entries with
     * unknown fields and missing keys, big field numbers */
    static const uint8_t msg[] = {
        0x12, 0x02, 0x08, 0x01,                   /* top-level unknown field 2 (length) */
        0x0a, 0x38,                               /* requests[0], 56 bytes */
        0x18, 0x05,                               /* hits 5 */
        0x12, 0x03, 'k', 0, 'x',                  /* unique_key "k\0x" */
        0x0a, 0x01, 'a', 0x0a, 0x01, 'n',         /* name "a", then "n": the last wins */
        0x18, 0x87, 0x80, 0x00,                   /* hits 7, as a non-minimal varint */
        0x58, 0x01,                               /* field 11, varint */
        0x61, 1, 2, 3, 4, 5, 6, 7, 8,             /* field 12, 64-bit */
        0x6a, 0x00,                               /* field 13, empty */
        0x75, 1, 2, 3, 4,                         /* field 14, 32-bit */
        0x4a, 0x07, 0x18, 0x01, 0x0a, 0x01, 'k',  /* metadata {unknown 3, key "k", value ""} */
        0x12, 0x00,
        0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01,       /* field 2^29-1, varint */
        0x38, 0x80, 0x80, 0x80, 0x80, 0x10,       /* behavior with only bit 32 set: 0 */
        0x10, 0x01,                               /* top-level unknown field 2, varint */
    };
    assert_int_equal(decode_both(msg, sizeof msg, false, true, &st), 0);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_gub_decode_pb(&c, msg, sizeof msg, &b, &st), 0);
    assert_int_equal(b.n, 1);
    assert_string_equal(b.reqs[0].name, "n");
    assert_int_equal(b.reqs[0].unique_key_len, 1); /* up to the NUL, as strlen() saw it */
    assert_int_equal(b.reqs[0].hits, 7);
    assert_int_equal(b.reqs[0].behavior, 0);
    assert_string_equal(sl_batch_meta_get(&b.req_meta[0], "k"), "");
    sl_batch_free(&b);

    /* malformed inside an item: both refuse it alike (the hand-written decoder declines, and
     * protobuf-c words the error) */
    static const struct {
        const char *bytes;
        size_t len;
    } bad_items[] = {
        {"\x0a\x02\x08\x02", 4},             /* name as a varint */
        {"\x0a\x02\x18\x80", 4},             /* truncated varint */
        {"\x0a\x03\x4a\x01\x08", 5},         /* metadata entry cut short */
        {"\x0a\x02\x4a\x00\x0a\x01", 6},     /* a second item cut short */
        {"\x0a\x04\x4a\x02\x08\x01", 6},     /* metadata key as a varint */
        {"\x0a\x02\x1b\x00", 4},             /* a group */
        {"\x0a\x02\x1e\x00", 4},             /* wire type 6 */
        {"\x0a\x03\x19\x00\x00", 5},         /* hits as a 64-bit field */
        {"\x08\x01", 2},                     /* requests as a varint */
        {"\x0a\x0b\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 13}, /* an 11-byte varint */
        {"\x0a\x02\x00\x01", 4},             /* field number 0 in an item */
        {"\x0a\x04\x4a\x02\x00\x01", 6},     /* ... and in a metadata entry */
    };
    for (size_t i = 0; i < sizeof bad_items / sizeof bad_items[0]; i++)
        assert_int_not_equal(decode_both((const uint8_t *)bad_items[i].bytes, bad_items[i].len,
                                         false, false, &st),
                             0);
}

/* GetRateLimitsResp for b, packed by protobuf-c and printed by the generic printer: what the
 * adapter produced before its encoders were written by hand. */
static void reference_resp(const sl_batch *b, sl_buf *pb, sl_buf *json)
{
    gub_ref r;
    assert_true(gub_ref_build(&r, b));
    assert_int_equal(gub_ref_pack(&r, pb), 0);
    assert_int_equal(sl_gubjson_print(&r.msg.base, json), 0);
    gub_ref_free(&r);
}

static void test_encoders_match_protobuf_c_and_printer(void **state)
{
    (void)state;
    static const int64_t vals[] = {0, 1, -1, 127, 128, 16383, 16384, 1700000001000, INT64_MAX,
                                   INT64_MIN, -128, 1000000000};
    uint64_t seed = 42;
    for (int round = 0; round < 200; round++) {
        sl_batch b;
        sl_batch_init(&b, 0);
        size_t n = (size_t)round % 7;
        assert_int_equal(sl_batch_alloc_items(&b, n), 0);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            uint64_t r = seed >> 11;
            b.resps[i] = (sl_response){.status = (int32_t)(r & 1),
                                       .limit = vals[(r >> 1) % 12],
                                       .remaining = vals[(r >> 5) % 12],
                                       .reset_time = vals[(r >> 9) % 12],
                                       .retry_after = 5};
            if ((r >> 13) % 5 == 0)
                sl_batch_answer(&b, i, (r >> 16) & 1 ? "" : "bad \"thing\"\n\x01\xff");
            if ((r >> 17) % 3 == 0)
                assert_int_equal(sl_batch_meta_set(&b, &b.resp_meta[i], "owner", "10.0.0.1:81"), 0);
            if ((r >> 19) % 4 == 0)
                assert_int_equal(sl_batch_meta_set(&b, &b.resp_meta[i], "", (r >> 21) & 1 ? "" :
                                 "\xc3\xa9\"\\"), 0);
            if ((r >> 23) % 5 == 0) {
                static char big[300];
                memset(big, 'x', sizeof big - 1); /* a length that needs two varint bytes */
                assert_int_equal(sl_batch_meta_set(&b, &b.resp_meta[i], "long", big), 0);
            }
        }
        sl_buf pb, pb2, js, js2;
        sl_buf_init(&pb, 0);
        sl_buf_init(&pb2, 0);
        sl_buf_init(&js, 0);
        sl_buf_init(&js2, 0);
        assert_int_equal(sl_gub_encode_pb(&b, &pb), 0);
        assert_int_equal(sl_gub_encode_json(&b, &js), 0);
        reference_resp(&b, &pb2, &js2);
        assert_int_equal(pb.len, pb2.len);
        assert_memory_equal(pb.data, pb2.data, pb.len);
        assert_string_equal(buf_str(&js), buf_str(&js2));
        /* the peer answer is the same message under another name */
        sl_buf_reset(&pb);
        assert_int_equal(sl_gub_encode_peer_resp_pb(&b, &pb), 0);
        assert_int_equal(pb.len, pb2.len);
        assert_memory_equal(pb.data, pb2.data, pb.len);
        sl_buf_free(&pb);
        sl_buf_free(&pb2);
        sl_buf_free(&js);
        sl_buf_free(&js2);
        sl_batch_free(&b);
    }
}

/* Encoders append after what the buffer holds, and a cap leaves the buffer as it was. */
static void test_encoders_append_and_respect_the_cap(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_batch_alloc_items(&b, 2), 0);
    b.resps[0] = (sl_response){.status = SL_OVER_LIMIT, .limit = 5, .reset_time = 9};
    sl_buf out;
    sl_buf_init(&out, 16);
    assert_int_equal(sl_buf_append(&out, "hdr", 3), 0);
    assert_int_equal(sl_gub_encode_pb(&b, &out), 0); /* 0a 06 08 01 10 05 20 09, 0a 00 */
    assert_int_equal(out.len, 3 + 10);
    assert_memory_equal(out.data, "hdr\x0a\x06\x08\x01\x10\x05\x20\x09\x0a\x00", 13);
    assert_int_equal(sl_gub_encode_pb(&b, &out), -EMSGSIZE);
    assert_int_equal(out.len, 13);
    assert_int_equal(sl_gub_encode_json(&b, &out), -EMSGSIZE);
    assert_int_equal(out.len, 13);
    sl_buf_free(&out);
    sl_batch_free(&b);
}

/* A batch reused for the same 1000-item call settles on one chunk and allocates nothing more. */
static void test_batch_reuse_settles(void **state)
{
    (void)state;
    RLReq *items = calloc(1000, sizeof *items);
    RLReq *rs[1000];
    char keys[1000][8];
    for (size_t i = 0; i < 1000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%zu", i);
        fill_req(&items[i], "name", keys[i]);
        rs[i] = &items[i];
    }
    size_t len;
    uint8_t *p = pack_reqs(rs, 1000, false, &len);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    sl_buf out;
    sl_buf_init(&out, 0);
    for (int call = 0; call < 4; call++) {
        size_t held = b.arena_bytes; /* what the last reset kept */
        assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), 0);
        assert_int_equal(b.n, 1000);
        sl_buf_reset(&out);
        assert_int_equal(sl_gub_encode_pb(&b, &out), 0);
        if (call > 0)
            assert_int_equal(b.arena_bytes, held); /* no chunk added during the call */
        sl_batch_reset(&b);
        assert_true(b.arena_bytes <= 1 << 20);
    }
    sl_buf_free(&out);
    sl_batch_free(&b);
    free(p);
    free(items);
}

/* Delay instead of reject: metadata max_delay_ms reaches the engine's request (a bad value is a
 * per-item error), and an admitted item with delay_ms answers metadata delay_ms, in JSON and
 * protobuf alike. */
static void test_max_delay_metadata(void **state)
{
    (void)state;
    RLReq r[3];
    Pb__Gubernator__RateLimitReq__MetadataEntry e0 = ENTRY_INIT, e1 = ENTRY_INIT, e2 = ENTRY_INIT;
    e0.key = "max_delay_ms";
    e0.value = "250";
    e1.key = "max_delay_ms";
    e1.value = "9223372036854775808"; /* one past INT64_MAX */
    e2.key = "max_delay_ms";
    e2.value = "1s";
    Pb__Gubernator__RateLimitReq__MetadataEntry *es0[] = {&e0}, *es1[] = {&e1}, *es2[] = {&e2};
    Pb__Gubernator__RateLimitReq__MetadataEntry **es[] = {es0, es1, es2};
    for (int i = 0; i < 3; i++) {
        fill_req(&r[i], "n", "k");
        r[i].n_metadata = 1;
        r[i].metadata = es[i];
    }
    RLReq *rs[] = {&r[0], &r[1], &r[2]};
    size_t len;
    uint8_t *p = pack_reqs(rs, 3, false, &len);
    sl_gub_config c = cfg();
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_grpc_status st;
    assert_int_equal(sl_gub_decode_pb(&c, p, len, &b, &st), 0);
    assert_int_equal(b.reqs[0].max_delay_ms, 250);
    assert_int_equal(b.answered[0], 0);
    assert_non_null(strstr(b.resps[1].error, "max_delay_ms"));
    assert_non_null(strstr(b.resps[2].error, "max_delay_ms"));
    b.resps[0] = (sl_response){.status = SL_UNDER_LIMIT, .limit = 10, .remaining = 0,
                               .reset_time = 1700000001000, .delay_ms = 120};
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_gub_encode_json(&b, &out), 0);
    assert_non_null(strstr(buf_str(&out), "\"reset_time\":\"1700000001000\",\"error\":\"\","
                                          "\"metadata\":{\"delay_ms\":\"120\"}}"));
    sl_buf pb;
    sl_buf_init(&pb, 0);
    assert_int_equal(sl_gub_encode_pb(&b, &pb), 0);
    Pb__Gubernator__GetRateLimitsResp *m =
        pb__gubernator__get_rate_limits_resp__unpack(NULL, pb.len, pb.data);
    assert_non_null(m);
    assert_int_equal(m->n_responses, 3);
    assert_int_equal(m->responses[0]->n_metadata, 1);
    assert_string_equal(m->responses[0]->metadata[0]->key, "delay_ms");
    assert_string_equal(m->responses[0]->metadata[0]->value, "120");
    assert_int_equal(m->responses[1]->n_metadata, 0);
    pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
    sl_buf_free(&pb);
    sl_buf_free(&out);
    free(p);
    sl_batch_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_delay_metadata),
        cmocka_unit_test(test_decode_pb_fields),
        cmocka_unit_test(test_item_validation),
        cmocka_unit_test(test_1000_vs_1001_pb),
        cmocka_unit_test(test_1000_vs_1001_json),
        cmocka_unit_test(test_json_and_pb_agree),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_arena_cap),
        cmocka_unit_test(test_encode_pb_round_trip),
        cmocka_unit_test(test_peers),
        cmocka_unit_test(test_globals),
        cmocka_unit_test(test_health_and_live),
        cmocka_unit_test(test_batch_arena_and_meta),
        cmocka_unit_test(test_pb_decoder_matches_protobuf_c),
        cmocka_unit_test(test_encoders_match_protobuf_c_and_printer),
        cmocka_unit_test(test_encoders_append_and_respect_the_cap),
        cmocka_unit_test(test_batch_reuse_settles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

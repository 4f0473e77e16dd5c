/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the client's call codecs without a connection (client/call.h, gubcall.h, leveecall.h):
 * what a call puts on the wire (path, headers, the framed GetRateLimitsReq, the X-* headers) and
 * how an answer built here by hand — or no answer, only an errno — becomes the typed reply, under
 * the fail-open and the fail-closed policy. The client is created for a port nobody listens on
 * and never connects: nothing here runs I/O. (test_client.c runs the same calls over a real
 * HTTP/2 peer.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/call.h"
#include "client/gubcall.h"
#include "client/leveecall.h"
#include "gubernator.pb-c.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

static sl_client *client_new(bool fail_closed)
{
    sl_client_options o;
    sl_client_options_default(&o);
    o.fail_closed = fail_closed;
    sl_client *c;
    assert_int_equal(sl_client_new("127.0.0.1:1", &o, &c), 0);
    return c;
}

static const sl_h2c_field *hdr(const sl_call *k, const char *name)
{
    for (size_t i = 0; i < k->nhdrs; i++)
        if (strcmp(k->hdrs[i].name, name) == 0)
            return &k->hdrs[i];
    return NULL;
}

static void assert_hdr(const sl_call *k, const char *name, const char *value)
{
    const sl_h2c_field *f = hdr(k, name);
    assert_non_null(f);
    assert_int_equal(f->value_len, strlen(value));
    assert_memory_equal(f->value, value, f->value_len);
}

/* A framed GetRateLimitsResp with one item per (status, remaining) pair. */
static void check_answer(sl_buf *body, size_t n, const int *status, const int64_t *remaining)
{
    Pb__Gubernator__RateLimitResp r[4], *pr[4];
    Pb__Gubernator__RateLimitResp__MetadataEntry md = PB__GUBERNATOR__RATE_LIMIT_RESP__METADATA_ENTRY__INIT;
    Pb__Gubernator__RateLimitResp__MetadataEntry *pmd = &md;
    md.key = "owner";
    md.value = "node-1";
    for (size_t i = 0; i < n; i++) {
        pb__gubernator__rate_limit_resp__init(&r[i]);
        r[i].status = status[i];
        r[i].limit = 10;
        r[i].remaining = remaining[i];
        r[i].reset_time = 1234;
        r[i].error = i == 1 ? "bad item" : "";
        r[i].n_metadata = 1;
        r[i].metadata = &pmd;
        pr[i] = &r[i];
    }
    Pb__Gubernator__GetRateLimitsResp m = PB__GUBERNATOR__GET_RATE_LIMITS_RESP__INIT;
    m.n_responses = n;
    m.responses = pr;
    size_t len = pb__gubernator__get_rate_limits_resp__get_packed_size(&m);
    uint8_t *tmp = malloc(len ? len : 1);
    assert_non_null(tmp);
    pb__gubernator__get_rate_limits_resp__pack(&m, tmp);
    sl_buf_init(body, 0);
    assert_int_equal(sl_grpc_frame_append(body, tmp, len), 0);
    free(tmp);
}

static sl_call *two_item_check(sl_client *c)
{
    sl_client_item items[2];
    memset(items, 0, sizeof items);
    items[0].req = (sl_client_request){.name = "api", .name_len = 3, .unique_key = "u1", .unique_key_len = 2,
                                .hits = 1, .limit = 10, .duration = 1000, .sub_windows = 4};
    items[1].req = (sl_client_request){.name = "db", .name_len = 2, .unique_key = "u2", .unique_key_len = 2,
                                .hits = 2, .limit = 7, .duration = 1000};
    int rc = 0;
    sl_call *k = sl_gubcall_check(c, items, 2, 50, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(k);
    return k;
}

static void test_check_request(void **state)
{
    (void)state;
    sl_client *c = client_new(false);
    sl_call *k = two_item_check(c);
    assert_string_equal(k->path, "/pb.gubernator.V1/GetRateLimits");
    assert_hdr(k, "content-type", "application/grpc");
    assert_hdr(k, "te", "trailers");
    assert_hdr(k, "grpc-timeout", "50m");

    sl_grpc_msg m;
    const char *err;
    assert_int_equal(sl_grpc_frame_decode(k->body.data, k->body.len, k->body.len, &m, &err), 0);
    assert_false(m.compressed);
    assert_int_equal(m.frame_len, k->body.len);
    Pb__Gubernator__GetRateLimitsReq *q = pb__gubernator__get_rate_limits_req__unpack(NULL, m.len, m.data);
    assert_non_null(q);
    assert_int_equal(q->n_requests, 2);
    assert_string_equal(q->requests[0]->name, "api");
    assert_string_equal(q->requests[0]->unique_key, "u1");
    assert_int_equal(q->requests[0]->limit, 10);
    assert_int_equal(q->requests[0]->n_metadata, 1);
    assert_string_equal(q->requests[0]->metadata[0]->key, "sub_windows");
    assert_string_equal(q->requests[0]->metadata[0]->value, "4");
    assert_int_equal(q->requests[1]->n_metadata, 0);
    assert_int_equal(q->requests[1]->hits, 2);
    pb__gubernator__get_rate_limits_req__free_unpacked(q, NULL);
    sl_call_free(k);

    /* bad arguments never become a call */
    int rc = 0;
    assert_null(sl_gubcall_check(c, NULL, 0, 50, &rc));
    assert_int_equal(rc, -EINVAL);
    sl_client_free(c);
}

static void test_check_answer(void **state)
{
    (void)state;
    sl_client *c = client_new(false);
    sl_call *k = two_item_check(c);
    sl_buf body;
    const int status[2] = {0, 1};
    const int64_t remaining[2] = {9, 0};
    check_answer(&body, 2, status, remaining);
    sl_h2c_field f[] = {{"grpc-status", 11, "0", 1}};
    sl_h2c_resp resp = {.status = 200, .fields = f, .nfields = 1, .body = &body};
    sl_call_decode(k, &resp, 0);
    assert_int_equal(k->rc, 0);
    sl_client_check_reply *r = &k->r.check;
    assert_int_equal(r->err, 0);
    assert_false(r->failed_open);
    assert_int_equal(r->http_status, 200);
    assert_int_equal(r->grpc_status, 0);
    assert_int_equal(r->count, 2);
    assert_int_equal(r->items[0].resp.status, SL_UNDER_LIMIT);
    assert_int_equal(r->items[0].resp.remaining, 9);
    assert_int_equal(r->items[0].resp.reset_time, 1234);
    assert_null(r->items[0].resp.error);
    assert_int_equal(r->items[1].resp.status, SL_OVER_LIMIT);
    assert_string_equal(r->items[1].resp.error, "bad item");
    assert_int_equal(r->items[1].metadata_count, 1);
    assert_string_equal(r->items[1].metadata[0].key, "owner");
    assert_string_equal(r->items[1].metadata[0].value, "node-1");
    sl_client_check_reply_free(r);
    sl_call_free(k);

    /* the answer holds one item for two asked: malformed, so the policy answers */
    k = two_item_check(c);
    sl_buf_free(&body);
    check_answer(&body, 1, status, remaining);
    sl_call_decode(k, &resp, 0);
    assert_int_equal(k->rc, 0);
    assert_int_equal(k->r.check.err, -EPROTO);
    assert_true(k->r.check.failed_open);
    assert_int_equal(k->r.check.count, 2);
    sl_client_check_reply_free(&k->r.check);
    sl_call_free(k);
    sl_buf_free(&body);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.failed_open, 1);
    assert_int_equal(st.transport_errors, 1);
    sl_client_free(c);
}

/* grpc-status UNAVAILABLE with a percent-encoded message, then no answer at all (-ETIMEDOUT). */
static void check_failures(bool fail_closed)
{
    sl_client *c = client_new(fail_closed);
    sl_call *k = two_item_check(c);
    sl_buf body;
    sl_buf_init(&body, 0);
    sl_h2c_field f[] = {{"grpc-status", 11, "14", 2}, {"grpc-message", 12, "down%20now", 10}};
    sl_h2c_resp resp = {.status = 200, .fields = f, .nfields = 2, .body = &body};
    sl_call_decode(k, &resp, 0);
    sl_client_check_reply *r = &k->r.check;
    assert_int_equal(k->rc, fail_closed ? -EPROTO : 0);
    assert_int_equal(r->err, -EPROTO);
    assert_int_equal(r->grpc_status, 14);
    assert_string_equal(r->grpc_message, "down now");
    assert_int_equal(r->failed_open, !fail_closed);
    assert_int_equal(r->count, 2);
    for (size_t i = 0; i < 2; i++) {
        int64_t limit = i == 0 ? 10 : 7;
        assert_int_equal(r->items[i].resp.limit, limit);
        assert_int_equal(r->items[i].resp.status, fail_closed ? SL_OVER_LIMIT : SL_UNDER_LIMIT);
        assert_int_equal(r->items[i].resp.remaining, fail_closed ? 0 : limit);
        if (fail_closed)
            assert_non_null(r->items[i].resp.error);
        else
            assert_null(r->items[i].resp.error);
    }
    sl_client_check_reply_free(r);
    sl_call_free(k);

    k = two_item_check(c);
    sl_call_decode(k, NULL, -ETIMEDOUT);
    assert_int_equal(k->rc, fail_closed ? -ETIMEDOUT : 0);
    assert_int_equal(k->r.check.err, -ETIMEDOUT);
    assert_int_equal(k->r.check.grpc_status, -1);
    assert_null(k->r.check.grpc_message);
    sl_client_check_reply_free(&k->r.check);
    sl_call_free(k);
    sl_buf_free(&body);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.timeouts, 1);
    assert_int_equal(st.transport_errors, 1);
    assert_int_equal(st.failed_open, fail_closed ? 0 : 2);
    assert_int_equal(st.failed_closed, fail_closed ? 2 : 0);
    sl_client_free(c);
}

static void test_check_fail_open(void **state)
{
    (void)state;
    check_failures(false);
}

static void test_check_fail_closed(void **state)
{
    (void)state;
    check_failures(true);
}

/* A call sluiced's worker shedder refused (UNAVAILABLE + "sluice-shed") is a decision under either
 * policy: every item OVER_LIMIT with metadata shed/reason, not failed open, not a failure; an item
 * the fleet shedder refused carries "shed" itself. */
static void check_shed(bool fail_closed)
{
    sl_client *c = client_new(fail_closed);
    sl_call *k = two_item_check(c);
    sl_buf body;
    sl_buf_init(&body, 0);
    sl_h2c_field f[] = {{"grpc-status", 11, "14", 2},
                        {"sluice-shed", 11, "worker", 6},
                        {"retry-after", 11, "5", 1},
                        {"grpc-message", 12, "sheds%20get", 11}};
    sl_h2c_resp resp = {.status = 200, .fields = f, .nfields = 4, .body = &body};
    int64_t before = sl_wall_ms();
    sl_call_decode(k, &resp, 0);
    sl_client_check_reply *r = &k->r.check;
    assert_int_equal(k->rc, 0);
    assert_int_equal(r->err, 0);
    assert_false(r->failed_open);
    assert_true(r->shed);
    assert_int_equal(r->grpc_status, 14);
    assert_string_equal(r->grpc_message, "sheds get");
    assert_int_equal(r->count, 2);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(r->items[i].resp.status, SL_OVER_LIMIT);
        assert_int_equal(r->items[i].resp.remaining, 0);
        assert_int_equal(r->items[i].resp.limit, i == 0 ? 10 : 7);
        assert_null(r->items[i].resp.error);
        assert_true(r->items[i].resp.reset_time >= before + 5000);
        assert_string_equal(sl_client_result_meta(&r->items[i], "shed"), "worker");
        assert_string_equal(sl_client_result_meta(&r->items[i], "reason"), "sheds get");
        assert_null(sl_client_result_meta(&r->items[i], "lease_id"));
    }
    sl_client_check_reply_free(r);
    sl_call_free(k);

    /* the same status without the marker did not come from a shedder: the policy answers */
    k = two_item_check(c);
    resp.nfields = 1;
    sl_call_decode(k, &resp, 0);
    assert_false(k->r.check.shed);
    assert_int_equal(k->r.check.err, -EPROTO);
    assert_int_equal(k->r.check.failed_open, !fail_closed);
    sl_client_check_reply_free(&k->r.check);
    sl_call_free(k);

    /* an item with metadata "shed" (the fleet shedder) marks the reply */
    Pb__Gubernator__RateLimitResp it[2], *pit[2] = {&it[0], &it[1]};
    Pb__Gubernator__RateLimitResp__MetadataEntry md = PB__GUBERNATOR__RATE_LIMIT_RESP__METADATA_ENTRY__INIT;
    Pb__Gubernator__RateLimitResp__MetadataEntry *pmd = &md;
    md.key = "shed";
    md.value = "fleet";
    for (int i = 0; i < 2; i++) {
        pb__gubernator__rate_limit_resp__init(&it[i]);
        it[i].limit = 8;
    }
    it[1].status = PB__GUBERNATOR__STATUS__OVER_LIMIT;
    it[1].n_metadata = 1;
    it[1].metadata = &pmd;
    Pb__Gubernator__GetRateLimitsResp m = PB__GUBERNATOR__GET_RATE_LIMITS_RESP__INIT;
    m.n_responses = 2;
    m.responses = pit;
    uint8_t tmp[256];
    size_t len = pb__gubernator__get_rate_limits_resp__pack(&m, tmp);
    assert_int_equal(sl_grpc_frame_append(&body, tmp, len), 0);
    sl_h2c_field ok[] = {{"grpc-status", 11, "0", 1}};
    sl_h2c_resp okr = {.status = 200, .fields = ok, .nfields = 1, .body = &body};
    k = two_item_check(c);
    sl_call_decode(k, &okr, 0);
    assert_int_equal(k->rc, 0);
    assert_true(k->r.check.shed);
    assert_null(sl_client_result_meta(&k->r.check.items[0], "shed"));
    assert_string_equal(sl_client_result_meta(&k->r.check.items[1], "shed"), "fleet");
    sl_client_check_reply_free(&k->r.check);
    sl_call_free(k);
    sl_buf_free(&body);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.shed, 2);
    assert_int_equal(st.transport_errors, 1);
    assert_int_equal(st.failed_open, fail_closed ? 0 : 1);
    assert_int_equal(st.failed_closed, fail_closed ? 1 : 0);
    sl_client_free(c);
}

static void test_check_shed_fail_open(void **state)
{
    (void)state;
    check_shed(false);
}

static void test_check_shed_fail_closed(void **state)
{
    (void)state;
    check_shed(true);
}

static void test_health_probe(void **state)
{
    (void)state;
    sl_client *c = client_new(false);
    sl_call *k = sl_gubcall_probe(c, K_HEALTH, 0);
    assert_non_null(k);
    assert_string_equal(k->path, "/pb.gubernator.V1/HealthCheck");
    assert_hdr(k, "grpc-timeout", "200m"); /* the client's default timeout */
    assert_int_equal(k->body.len, SL_GRPC_HDR_LEN); /* an empty message, framed */

    Pb__Gubernator__HealthCheckResp h = PB__GUBERNATOR__HEALTH_CHECK_RESP__INIT;
    h.status = "healthy";
    h.message = "";
    h.advertise_address = "10.0.0.1:1051";
    h.peer_count = 3;
    uint8_t tmp[128];
    size_t len = pb__gubernator__health_check_resp__pack(&h, tmp);
    sl_buf body;
    sl_buf_init(&body, 0);
    assert_int_equal(sl_grpc_frame_append(&body, tmp, len), 0);
    sl_h2c_field f[] = {{"grpc-status", 11, "0", 1}};
    sl_h2c_resp resp = {.status = 200, .fields = f, .nfields = 1, .body = &body};
    sl_call_decode(k, &resp, 0);
    assert_int_equal(k->rc, 0);
    assert_true(k->r.health.healthy);
    assert_int_equal(k->r.health.peer_count, 3);
    assert_string_equal(k->r.health.advertise_address, "10.0.0.1:1051");
    sl_call_free(k);

    /* LiveCheck reads only the status line: OK, then a 503 without grpc-status */
    k = sl_gubcall_probe(c, K_LIVE, 10);
    assert_string_equal(k->path, "/pb.gubernator.V1/LiveCheck");
    sl_call_decode(k, &resp, 0);
    assert_int_equal(k->rc, 0);
    sl_h2c_resp bad = {.status = 503, .fields = NULL, .nfields = 0, .body = &body};
    sl_call_decode(k, &bad, 0);
    assert_int_equal(k->rc, -EPROTO);
    sl_call_free(k);
    sl_buf_free(&body);
    sl_client_free(c);
}

static void test_levee_request(void **state)
{
    (void)state;
    sl_client *c = client_new(false);
    sl_attempt a = {.resource = "api", .prefix = "/v1", .req_id = "r-1"};
    int rc = 0;
    sl_call *k = sl_leveecall_new(c, K_ACQUIRE, &a, NULL, 0, &rc);
    assert_non_null(k);
    assert_string_equal(k->path, "/attempt");
    assert_hdr(k, "x-resource", "api");
    assert_hdr(k, "x-prefix", "/v1");
    assert_hdr(k, "x-req-id", "r-1");
    assert_hdr(k, "x-concurrency", "acquire");
    assert_null(hdr(k, "x-method"));
    assert_int_equal(k->body.len, 0);
    sl_call_free(k);

    k = sl_leveecall_new(c, K_RELEASE, NULL, "L-1", 0, &rc);
    assert_non_null(k);
    assert_string_equal(k->path, "/release");
    assert_hdr(k, "x-lease-id", "L-1");
    sl_call_free(k);

    /* no resource; a value with CR LF */
    assert_null(sl_leveecall_new(c, K_ATTEMPT, NULL, NULL, 0, &rc));
    assert_int_equal(rc, -EINVAL);
    sl_attempt smuggle = {.resource = "api\r\nx-evil: 1"};
    assert_null(sl_leveecall_new(c, K_ATTEMPT, &smuggle, NULL, 0, &rc));
    assert_int_equal(rc, -EINVAL);
    sl_client_free(c);
}

static sl_call *levee_answer(sl_client *c, sl_call_kind kind, int status, const sl_h2c_field *f,
                             size_t nf, const char *body_text)
{
    sl_attempt a = {.resource = "api"};
    int rc = 0;
    sl_call *k = sl_leveecall_new(c, kind, &a, kind == K_RELEASE ? "L-9" : NULL, 0, &rc);
    assert_non_null(k);
    sl_buf body;
    sl_buf_init(&body, 0);
    assert_int_equal(sl_buf_append_str(&body, body_text), 0);
    sl_h2c_resp resp = {.status = status, .fields = f, .nfields = nf, .body = &body};
    sl_call_decode(k, &resp, 0);
    sl_buf_free(&body);
    return k;
}

static void test_levee_answer(void **state)
{
    (void)state;
    sl_client *c = client_new(false);
    sl_h2c_field rej[] = {{"retry-after", 11, "3", 1},
                          {"ratelimit", 9, "\"api\";r=0;t=3", 13},
                          {"ratelimit-policy", 16, "\"api\";q=10;w=60", 15}};
    sl_call *k = levee_answer(c, K_ATTEMPT, 429, rej, 3, "");
    sl_attempt_reply *r = &k->r.attempt;
    assert_int_equal(k->rc, 0);
    assert_int_equal(r->outcome, SL_ATTEMPT_REJECTED);
    assert_false(r->allowed);
    assert_int_equal(r->retry_after_ms, 3000);
    assert_int_equal(r->rl_remaining, 0);
    assert_int_equal(r->rl_reset_s, 3);
    assert_int_equal(r->rl_limit, 10);
    assert_int_equal(r->rl_window_s, 60);
    assert_false(r->shed); /* a 429 is a limit, not a shed */
    sl_call_free(k);

    /* 503 with a RateLimit field is shedding (a decision); without, a failure: fail open */
    k = levee_answer(c, K_ATTEMPT, 503, rej + 1, 1, "");
    assert_int_equal(k->r.attempt.outcome, SL_ATTEMPT_REJECTED);
    assert_true(k->r.attempt.shed);
    assert_false(k->r.attempt.allowed);
    assert_false(k->r.attempt.failed_open);
    sl_call_free(k);
    k = levee_answer(c, K_ATTEMPT, 503, NULL, 0, "overloaded\r\n");
    assert_int_equal(k->rc, 0);
    assert_int_equal(k->r.attempt.outcome, SL_ATTEMPT_FAILED);
    assert_true(k->r.attempt.allowed);
    assert_true(k->r.attempt.failed_open);
    assert_int_equal(k->r.attempt.err, -EPROTO);
    assert_string_equal(k->r.attempt.message, "overloaded");
    sl_call_free(k);

    sl_h2c_field lease[] = {{"x-lease-id", 10, "L-9", 3}};
    k = levee_answer(c, K_ACQUIRE, 200, lease, 1, "");
    assert_true(k->r.attempt.allowed);
    assert_string_equal(k->r.attempt.lease_id, "L-9");
    sl_call_free(k);

    /* a release has no policy: 404 is -ENOENT (not counted as a failure), 204 is taken */
    k = levee_answer(c, K_RELEASE, 404, NULL, 0, "");
    assert_int_equal(k->rc, -ENOENT);
    assert_false(k->r.attempt.allowed);
    sl_call_free(k);
    k = levee_answer(c, K_RELEASE, 204, NULL, 0, "");
    assert_int_equal(k->rc, 0);
    assert_true(k->r.attempt.allowed);
    sl_call_free(k);

    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.failed_open, 1);
    assert_int_equal(st.transport_errors, 1);
    assert_int_equal(st.shed, 1);
    sl_client_free(c);
}

static void test_levee_fail_closed(void **state)
{
    (void)state;
    sl_client *c = client_new(true);
    sl_attempt a = {.resource = "api"};
    int rc = 0;
    sl_call *k = sl_leveecall_new(c, K_ATTEMPT, &a, NULL, 0, &rc);
    sl_call_decode(k, NULL, -ECONNREFUSED);
    assert_int_equal(k->rc, -ECONNREFUSED);
    assert_false(k->r.attempt.allowed);
    assert_false(k->r.attempt.failed_open);
    assert_int_equal(k->r.attempt.http_status, 0);
    sl_call_free(k);
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.failed_closed, 1);
    sl_client_free(c);
}

static void test_header_int(void **state)
{
    (void)state;
    assert_int_equal(sl_call_header_int("42", 2), 42);
    assert_int_equal(sl_call_header_int(" \t\"7\"", 5), 7);
    assert_int_equal(sl_call_header_int("12abc", 5), 12);
    assert_int_equal(sl_call_header_int("", 0), -1);
    assert_int_equal(sl_call_header_int("-3", 2), -1);
    assert_int_equal(sl_call_header_int("99999999999999999999", 20), -1);
    assert_int_equal(sl_call_header_int("123", 2), 12); /* only the n bytes given */

    char buf[4];
    sl_call_copy_trunc(buf, sizeof buf, "abcdef", 6);
    assert_string_equal(buf, "abc");
    sl_call_copy_trunc(buf, sizeof buf, "xy", 0);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_request),
        cmocka_unit_test(test_check_answer),
        cmocka_unit_test(test_check_fail_open),
        cmocka_unit_test(test_check_fail_closed),
        cmocka_unit_test(test_check_shed_fail_open),
        cmocka_unit_test(test_check_shed_fail_closed),
        cmocka_unit_test(test_health_probe),
        cmocka_unit_test(test_levee_request),
        cmocka_unit_test(test_levee_answer),
        cmocka_unit_test(test_levee_fail_closed),
        cmocka_unit_test(test_header_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* protojson for the Gubernator gateway: input forms, every-field output, errors and limits. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "json/gubjson.h"
#include "json/gubjson_fast.h"
#include "json/gubjson_ref.h"

typedef Pb__Gubernator__GetRateLimitsReq Req;

static char err[256];

/* Parse with malloc; the caller frees with free_req(). */
static int parse(const char *json, Req **out)
{
    return sl_gubjson_parse_get_rate_limits_req(json, strlen(json), NULL, NULL, out, err,
                                                sizeof err);
}

static void free_req(Req *r)
{
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
}

static const char *meta(const Pb__Gubernator__RateLimitReq *r, const char *key)
{
    for (size_t i = 0; i < r->n_metadata; i++)
        if (strcmp(r->metadata[i]->key, key) == 0)
            return r->metadata[i]->value;
    return NULL;
}

static void test_snake_case_full(void **state)
{
    (void)state;
    Req *r;
    assert_int_equal(parse("{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"hits\":\"2\","
                           "\"limit\":10,\"duration\":\"60000\",\"algorithm\":\"LEAKY_BUCKET\","
                           "\"behavior\":\"GLOBAL\",\"burst\":\"20\",\"metadata\":{\"a\":\"b\","
                           "\"sub_windows\":\"4\"},\"created_at\":\"1700000000000\"}]}",
                           &r),
                     0);
    assert_int_equal(r->n_requests, 1);
    const Pb__Gubernator__RateLimitReq *q = r->requests[0];
    assert_string_equal(q->name, "n");
    assert_string_equal(q->unique_key, "k");
    assert_int_equal(q->hits, 2);
    assert_int_equal(q->limit, 10);
    assert_int_equal(q->duration, 60000);
    assert_int_equal(q->algorithm, PB__GUBERNATOR__ALGORITHM__LEAKY_BUCKET);
    assert_int_equal(q->behavior, PB__GUBERNATOR__BEHAVIOR__GLOBAL);
    assert_int_equal(q->burst, 20);
    assert_int_equal(q->created_at, 1700000000000LL);
    assert_int_equal(q->n_metadata, 2);
    assert_string_equal(meta(q, "a"), "b");
    assert_string_equal(meta(q, "sub_windows"), "4");
    free_req(r);
}

static void test_camel_case_and_number_forms(void **state)
{
    (void)state;
    Req *r;
    assert_int_equal(parse("{\"requests\":[{\"name\":\"n\",\"uniqueKey\":\"k\",\"hits\":1e2,"
                           "\"limit\":\"1E1\",\"duration\":60000.0,\"algorithm\":2,"
                           "\"behavior\":3,\"createdAt\":-5,\"burst\":\"-9223372036854775808\"},"
                           "{\"name\":\"m\",\"unique_key\":\"j\",\"algorithm\":\"SLIDING_WINDOW\","
                           "\"behavior\":\"NO_BATCHING|GLOBAL | DRAIN_OVER_LIMIT\",\"limit\":"
                           "\"9223372036854775807\"}]}",
                           &r),
                     0);
    assert_int_equal(r->n_requests, 2);
    const Pb__Gubernator__RateLimitReq *a = r->requests[0], *b = r->requests[1];
    assert_string_equal(a->unique_key, "k");
    assert_int_equal(a->hits, 100);
    assert_int_equal(a->limit, 10);
    assert_int_equal(a->duration, 60000);
    assert_int_equal(a->algorithm, PB__GUBERNATOR__ALGORITHM__GCRA);
    assert_int_equal(a->behavior, 3);
    assert_int_equal(a->created_at, -5);
    assert_true(a->burst == INT64_MIN);
    assert_int_equal(b->algorithm, PB__GUBERNATOR__ALGORITHM__SLIDING_WINDOW);
    assert_int_equal(b->behavior, 1 | 2 | 32);
    assert_true(b->limit == INT64_MAX);
    free_req(r);
}

static void test_nulls_unknowns_and_empty(void **state)
{
    (void)state;
    Req *r;
    /* null = unset; unknown fields (any shape) are ignored */
    assert_int_equal(parse("{\"requests\":[{\"name\":null,\"hits\":null,\"metadata\":null,"
                           "\"future\":{\"x\":[1,{\"y\":null}]}}],\"other\":true}",
                           &r),
                     0);
    assert_int_equal(r->n_requests, 1);
    assert_string_equal(r->requests[0]->name, "");
    assert_int_equal(r->requests[0]->hits, 0);
    assert_int_equal(r->requests[0]->n_metadata, 0);
    free_req(r);
    assert_int_equal(parse("{\"requests\":null}", &r), 0);
    assert_int_equal(r->n_requests, 0);
    free_req(r);
    assert_int_equal(parse("", &r), 0);
    assert_int_equal(r->n_requests, 0);
    free_req(r);
    assert_int_equal(parse(" \r\n\t", &r), 0);
    free_req(r);
    assert_int_equal(parse("{}", &r), 0);
    free_req(r);
}

/* Each of these must fail with -EINVAL and a message mentioning `want`. */
static void test_bad_inputs(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"{\"requests\":[", "invalid JSON"},
        {"{\"requests\":[]} x", "invalid JSON"},
        {"{\"requests\":[]}{}", "invalid JSON"},
        {"[1]", "must be a JSON object"},
        {"\"x\"", "must be a JSON object"},
        {"null", "must be a JSON object"},
        {"{\"requests\":\"x\"}", "requests"},
        {"{\"requests\":{}}", "requests"},
        {"{\"requests\":[1]}", "requests[0]"},
        {"{\"requests\":[null]}", "requests[0]"},
        {"{\"requests\":[{\"hits\":\"abc\"}]}", "int64 field requests[0].hits: \"abc\""},
        {"{\"requests\":[{},{\"hits\":1.5}]}", "requests[1].hits"},
        {"{\"requests\":[{\"hits\":\"1.5\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\" 1\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"+1\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"007\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"0x10\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"9223372036854775808\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"-9223372036854775809\"}]}", "hits"},
        {"{\"requests\":[{\"hits\":1e19}]}", "hits"},
        {"{\"requests\":[{\"hits\":true}]}", "hits"},
        {"{\"requests\":[{\"hits\":[]}]}", "hits"},
        {"{\"requests\":[{\"hits\":\"NaN\"}]}", "hits"},
        {"{\"requests\":[{\"name\":5}]}", "string field requests[0].name"},
        {"{\"requests\":[{\"algorithm\":\"BOGUS\"}]}", "enum field requests[0].algorithm"},
        {"{\"requests\":[{\"algorithm\":1.5}]}", "algorithm"},
        {"{\"requests\":[{\"algorithm\":4294967296}]}", "algorithm"},
        {"{\"requests\":[{\"algorithm\":\"GCRA|LEAKY_BUCKET\"}]}", "algorithm"},
        {"{\"requests\":[{\"behavior\":\"GLOBAL|\"}]}", "behavior"},
        {"{\"requests\":[{\"behavior\":\"GLOBAL|NOPE\"}]}", "behavior"},
        {"{\"requests\":[{\"metadata\":[]}]}", "metadata"},
        {"{\"requests\":[{\"metadata\":{\"a\":1}}]}", "metadata[\"a\"]"},
        {"{\"requests\":[{\"metadata\":{\"a\":null}}]}", "metadata"},
        {"{\"requests\":[{\"hits\":1,\"hits\":2}]}", "duplicate"},
        {"{\"requests\":[{\"unique_key\":\"a\",\"uniqueKey\":\"b\"}]}",
         "duplicate field requests[0].unique_key"},
        {"{\"requests\":[{\"name\":\"\\u0000\"}]}", "invalid JSON"},
        {"{\"requests\":[{\"name\":\"\xff\"}]}", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Req *r = (Req *)1;
        int rc = parse(cases[i].json, &r);
        if (rc != -EINVAL || !strstr(err, cases[i].want))
            fail_msg("case %zu %s: rc %d, err '%s', want '%s'", i, cases[i].json, rc, err,
                     cases[i].want);
        assert_null(r);
    }
}

static void test_limits(void **state)
{
    (void)state;
    sl_gubjson_limits lim;
    sl_gubjson_limits_default(&lim);
    assert_int_equal(lim.max_body, 1 << 20);
    Req *r;
    /* body size */
    lim.max_body = 20;
    const char *body = "{\"requests\":[{},{},{}]}"; /* 23 bytes */
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(body, strlen(body), &lim, NULL, &r, err,
                                                          sizeof err),
                     -EMSGSIZE);
    assert_non_null(strstr(err, "too large"));
    lim.max_body = 23;
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(body, strlen(body), &lim, NULL, &r, err,
                                                          sizeof err),
                     0);
    free_req(r);
    /* depth: 4 levels pass at max_depth 4, 5 do not; brackets inside strings do not count */
    sl_gubjson_limits_default(&lim);
    lim.max_depth = 4;
    body = "{\"requests\":[{\"metadata\":{\"k\":\"[[[[{{{{\"}}]}";
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(body, strlen(body), &lim, NULL, &r, err,
                                                          sizeof err),
                     0);
    free_req(r);
    body = "{\"x\":[[[[]]]]}";
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(body, strlen(body), &lim, NULL, &r, err,
                                                          sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "deeper"));
    /* default depth stops a bracket bomb long before jansson's own limit */
    char bomb[4096];
    memset(bomb, '[', sizeof bomb);
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(bomb, sizeof bomb, NULL, NULL, &r, err,
                                                          sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "deeper than 16"));
    /* tokens */
    lim.max_depth = 16;
    lim.max_tokens = 8;
    body = "{\"x\":[1,2,3,4,5,6,7,8,9]}";
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(body, strlen(body), &lim, NULL, &r, err,
                                                          sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "more than 8"));
    lim.max_tokens = 12;
    assert_int_equal(sl_gubjson_parse_get_rate_limits_req(body, strlen(body), &lim, NULL, &r, err,
                                                          sizeof err),
                     0);
    free_req(r);
}

/* An allocator that fails the k-th allocation, to check that every error path frees what it
 * built (ASan's leak checker runs these tests). */
typedef struct {
    int left;
    int live;
} fail_alloc;

static void *fa_alloc(void *d, size_t n)
{
    fail_alloc *f = d;
    if (f->left-- == 0)
        return NULL;
    f->live++;
    return malloc(n);
}

static void fa_free(void *d, void *p)
{
    fail_alloc *f = d;
    if (p)
        f->live--;
    free(p);
}

static void test_allocation_failures_free_everything(void **state)
{
    (void)state;
    const char *body = "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"metadata\":{\"a\":"
                       "\"b\",\"c\":\"d\"}},{\"name\":\"x\",\"hits\":\"oops\"}]}";
    const char *good = "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"metadata\":{\"a\":"
                       "\"b\",\"c\":\"d\"}},{\"name\":\"x\"}]}";
    bool succeeded = false;
    for (int k = 0; k < 64 && !succeeded; k++) {
        fail_alloc f = {.left = k};
        ProtobufCAllocator a = {fa_alloc, fa_free, &f};
        Req *r;
        int rc = sl_gubjson_parse_get_rate_limits_req(good, strlen(good), NULL, &a, &r, err,
                                                      sizeof err);
        if (rc == 0) {
            succeeded = true;
            protobuf_c_message_free_unpacked(&r->base, &a);
        } else {
            assert_int_equal(rc, -ENOMEM);
        }
        assert_int_equal(f.live, 0);
        f.left = k;
        rc = sl_gubjson_parse_get_rate_limits_req(body, strlen(body), NULL, &a, &r, err,
                                                  sizeof err);
        assert_true(rc == -ENOMEM || rc == -EINVAL);
        assert_int_equal(f.live, 0);
    }
    assert_true(succeeded);
}

static void test_print_every_field(void **state)
{
    (void)state;
    Pb__Gubernator__RateLimitResp r0 = PB__GUBERNATOR__RATE_LIMIT_RESP__INIT;
    Pb__Gubernator__RateLimitResp r1 = PB__GUBERNATOR__RATE_LIMIT_RESP__INIT;
    r1.status = PB__GUBERNATOR__STATUS__OVER_LIMIT;
    r1.limit = 10;
    r1.remaining = -1;
    r1.reset_time = INT64_MAX;
    r1.error = "bad \"x\"\n";
    Pb__Gubernator__RateLimitResp__MetadataEntry e =
        PB__GUBERNATOR__RATE_LIMIT_RESP__METADATA_ENTRY__INIT;
    e.key = "owner";
    e.value = "10.0.0.1:81";
    Pb__Gubernator__RateLimitResp__MetadataEntry *es[] = {&e};
    r1.n_metadata = 1;
    r1.metadata = es;
    Pb__Gubernator__RateLimitResp *rs[] = {&r0, &r1};
    Pb__Gubernator__GetRateLimitsResp m = PB__GUBERNATOR__GET_RATE_LIMITS_RESP__INIT;
    m.n_responses = 2;
    m.responses = rs;
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_gubjson_print(&m.base, &b), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal(
        (char *)b.data,
        "{\"responses\":[{\"status\":\"UNDER_LIMIT\",\"limit\":\"0\",\"remaining\":\"0\","
        "\"reset_time\":\"0\",\"error\":\"\",\"metadata\":{}},{\"status\":\"OVER_LIMIT\","
        "\"limit\":\"10\",\"remaining\":\"-1\",\"reset_time\":\"9223372036854775807\","
        "\"error\":\"bad \\\"x\\\"\\n\",\"metadata\":{\"owner\":\"10.0.0.1:81\"}}]}");
    /* and it is JSON that parses back */
    json_error_t je;
    json_t *j = json_loads((char *)b.data, 0, &je);
    assert_non_null(j);
    json_decref(j);

    /* an empty response still has its list */
    sl_buf_reset(&b);
    m.n_responses = 0;
    assert_int_equal(sl_gubjson_print(&m.base, &b), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)b.data, "{\"responses\":[]}");
    sl_buf_free(&b);
}

static void test_print_health_live_error_and_peers(void **state)
{
    (void)state;
    sl_buf b;
    sl_buf_init(&b, 0);
    Pb__Gubernator__HealthCheckResp h = PB__GUBERNATOR__HEALTH_CHECK_RESP__INIT;
    h.status = "healthy";
    h.peer_count = 3;
    assert_int_equal(sl_gubjson_print(&h.base, &b), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)b.data, "{\"status\":\"healthy\",\"message\":\"\",\"peer_count\":3,"
                                        "\"advertise_address\":\"\"}");
    sl_buf_reset(&b);
    Pb__Gubernator__LiveCheckResp l = PB__GUBERNATOR__LIVE_CHECK_RESP__INIT;
    assert_int_equal(sl_gubjson_print(&l.base, &b), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)b.data, "{}");
    sl_buf_reset(&b);
    assert_int_equal(sl_gubjson_print_error(&b, 11, "too \"many\""), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)b.data,
                        "{\"code\":11,\"message\":\"too \\\"many\\\"\",\"details\":[]}");
    /* an unset sub-message prints null; an enum value without a name prints its number */
    sl_buf_reset(&b);
    Pb__Gubernator__UpdatePeerGlobal g = PB__GUBERNATOR__UPDATE_PEER_GLOBAL__INIT;
    g.key = "n_k";
    g.algorithm = 42;
    assert_int_equal(sl_gubjson_print(&g.base, &b), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)b.data, "{\"key\":\"n_k\",\"status\":null,\"algorithm\":42,"
                                        "\"duration\":\"0\",\"created_at\":\"0\"}");
    sl_buf_free(&b);
}

static void test_print_string_escapes(void **state)
{
    (void)state;
    sl_buf b;
    sl_buf_init(&b, 0);
    const char s[] = "a\x01\t\\/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
                     "|\xff|\xc3|\xed\xa0\x80|\xc0\xaf";
    assert_int_equal(sl_gubjson_print_string(&b, s, sizeof s - 1), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)b.data,
                        "\"a\\u0001\\t\\\\/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80|\\ufffd|\\ufffd|"
                        "\\ufffd\\ufffd\\ufffd|\\ufffd\\ufffd\"");
    json_error_t je;
    json_t *j = json_loads((char *)b.data, JSON_DECODE_ANY, &je);
    assert_non_null(j);
    json_decref(j);
    sl_buf_free(&b);
}

/* print(parse(x)) is a fixed point, and parse(print(m)) == m, for requests with every field. */
static void test_round_trip(void **state)
{
    (void)state;
    const char *in = "{\"requests\":[{\"uniqueKey\":\"k\\u00e9\",\"name\":\"n\",\"hits\":3,"
                     "\"algorithm\":6,\"behavior\":\"GLOBAL|DURATION_IS_GREGORIAN\",\"limit\":5,"
                     "\"duration\":\"1\",\"burst\":7,\"metadata\":{\"x\":\"y\"},\"createdAt\":9}]}";
    Req *r;
    assert_int_equal(parse(in, &r), 0);
    sl_buf a, b;
    sl_buf_init(&a, 0);
    sl_buf_init(&b, 0);
    assert_int_equal(sl_gubjson_print(&r->base, &a), 0);
    sl_buf_append(&a, "", 1);
    assert_string_equal((char *)a.data,
                        "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\xc3\xa9\","
                        "\"hits\":\"3\","
                        "\"limit\":\"5\",\"duration\":\"1\",\"algorithm\":\"CONCURRENCY\","
                        "\"behavior\":6,\"burst\":\"7\",\"metadata\":{\"x\":\"y\"},"
                        "\"created_at\":\"9\"}]}");
    Req *r2;
    assert_int_equal(parse((char *)a.data, &r2), 0);
    assert_int_equal(sl_gubjson_print(&r2->base, &b), 0);
    sl_buf_append(&b, "", 1);
    assert_string_equal((char *)a.data, (char *)b.data);
    /* and the protobuf encodings agree */
    size_t n1 = protobuf_c_message_get_packed_size(&r->base);
    size_t n2 = protobuf_c_message_get_packed_size(&r2->base);
    assert_int_equal(n1, n2);
    uint8_t *p1 = malloc(n1), *p2 = malloc(n2);
    protobuf_c_message_pack(&r->base, p1);
    protobuf_c_message_pack(&r2->base, p2);
    assert_memory_equal(p1, p2, n1);
    free(p1);
    free(p2);
    free_req(r);
    free_req(r2);
    sl_buf_free(&a);
    sl_buf_free(&b);
}

static void test_parse_other_messages(void **state)
{
    (void)state;
    /* the parser is generic: a HealthCheckResp (int32, strings) and peers' nested messages */
    const char *h = "{\"status\":\"unhealthy\",\"peerCount\":\"2\",\"message\":\"m\"}";
    ProtobufCMessage *m;
    assert_int_equal(sl_gubjson_parse(&pb__gubernator__health_check_resp__descriptor, h,
                                      strlen(h), NULL, NULL, &m, err, sizeof err),
                     0);
    Pb__Gubernator__HealthCheckResp *hr = (Pb__Gubernator__HealthCheckResp *)m;
    assert_string_equal(hr->status, "unhealthy");
    assert_int_equal(hr->peer_count, 2);
    protobuf_c_message_free_unpacked(m, NULL);
    h = "{\"peer_count\":2147483648}";
    assert_int_equal(sl_gubjson_parse(&pb__gubernator__health_check_resp__descriptor, h,
                                      strlen(h), NULL, NULL, &m, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "int32 field peer_count"));
    const char *g = "{\"globals\":[{\"key\":\"a_b\",\"status\":{\"status\":\"OVER_LIMIT\","
                    "\"limit\":\"5\",\"metadata\":{\"k\":\"v\"}},\"algorithm\":\"GCRA\"}]}";
    assert_int_equal(sl_gubjson_parse(&pb__gubernator__update_peer_globals_req__descriptor, g,
                                      strlen(g), NULL, NULL, &m, err, sizeof err),
                     0);
    Pb__Gubernator__UpdatePeerGlobalsReq *u = (Pb__Gubernator__UpdatePeerGlobalsReq *)m;
    assert_int_equal(u->n_globals, 1);
    assert_string_equal(u->globals[0]->key, "a_b");
    assert_int_equal(u->globals[0]->status->status, PB__GUBERNATOR__STATUS__OVER_LIMIT);
    assert_int_equal(u->globals[0]->status->limit, 5);
    assert_int_equal(u->globals[0]->algorithm, PB__GUBERNATOR__ALGORITHM__GCRA);
    protobuf_c_message_free_unpacked(m, NULL);
    g = "{\"globals\":[{\"status\":{\"limit\":\"x\"}}]}";
    assert_int_equal(sl_gubjson_parse(&pb__gubernator__update_peer_globals_req__descriptor, g,
                                      strlen(g), NULL, NULL, &m, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "globals[0].status.limit"));
}

/* ---- the hand-written parser against the reference ------------------------------------------ */

static const ProtobufCMessageDescriptor *const REQ = &pb__gubernator__get_rate_limits_req__descriptor;

static uint8_t *pack_msg(const ProtobufCMessage *m, size_t *n)
{
    *n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(*n ? *n : 1);
    protobuf_c_message_pack(m, p);
    return p;
}

/* The fast parser must take `json` (want_fast) or decline it, and whatever it takes must be what
 * the reference builds. Returns the reference's rc. */
static int check_agree(const char *json, size_t len, const sl_gubjson_limits *lim, bool want_fast)
{
    ProtobufCMessage *f = NULL, *r = NULL;
    char ferr[256];
    int rf = sl_gubjson_parse_with(SL_GUBJSON_PARSE_FAST, REQ, json, len, lim, NULL, &f, ferr,
                                   sizeof ferr);
    int rr = sl_gubjson_parse_with(SL_GUBJSON_PARSE_REFERENCE, REQ, json, len, lim, NULL, &r, err,
                                   sizeof err);
    if (want_fast && rf != 0)
        fail_msg("the fast parser declined %.*s (reference: %d %s)", (int)len, json, rr, err);
    if (!want_fast && rf == 0)
        fail_msg("the fast parser took %.*s", (int)len, json);
    if (rf == 0) {
        assert_int_equal(rr, 0);
        size_t nf, nr;
        uint8_t *pf = pack_msg(f, &nf), *pr = pack_msg(r, &nr);
        assert_int_equal(nf, nr);
        assert_memory_equal(pf, pr, nf);
        free(pf);
        free(pr);
        protobuf_c_message_free_unpacked(f, NULL);
    } else {
        assert_int_equal(rf, -EAGAIN);
        assert_null(f);
    }
    if (r)
        protobuf_c_message_free_unpacked(r, NULL);
    /* and AUTO is the reference */
    ProtobufCMessage *a = NULL;
    char aerr[256];
    int ra = sl_gubjson_parse(REQ, json, len, lim, NULL, &a, aerr, sizeof aerr);
    assert_int_equal(ra, rr);
    if (ra)
        assert_string_equal(aerr, err);
    if (a)
        protobuf_c_message_free_unpacked(a, NULL);
    return rr;
}

static void test_fast_parser_takes_valid_forms(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "",
        "  \r\n\t ",
        "{}",
        " {\"requests\":[]} \n",
        "{\"requests\":null}",
        "{\"requests\":[{\"name\":\"bench\",\"unique_key\":\"k42\",\"hits\":1,\"limit\":1000000000,"
        "\"duration\":60000}]}",
        "{ \"requests\" : [ { \"name\" : \"n\" , \"uniqueKey\" : \"k\" } , { } , {\"hits\":null} ] }",
        /* every field, every number form */
        "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"hits\":\"2\",\"limit\":1e3,"
        "\"duration\":60000.0,\"algorithm\":\"LEAKY_BUCKET\",\"behavior\":\"GLOBAL | NO_BATCHING\","
        "\"burst\":-5,\"createdAt\":\"1700000000000\",\"metadata\":{\"a\":\"b\",\"sub_windows\":"
        "\"4\"}},{\"algorithm\":6,\"behavior\":-1,\"hits\":\"-9223372036854775808\",\"limit\":"
        "9223372036854775807,\"burst\":\"1E1\",\"duration\":-0,\"created_at\":-0.0}]}",
        /* escapes and UTF-8 in values (and \u escapes that decode to a key already seen raw are
         * not duplicates in a value) */
        "{\"requests\":[{\"name\":\"n\\u00e9\\n\\\"x\\\"\\ud83d\\ude00\\/\\b\\f\\r\\t\\\\\","
        "\"unique_key\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\x7f\",\"metadata\":{\"\\u0041\":"
        "\"\\u0041\",\"B\":\"\"}}]}",
        /* unknown fields of every shape, ignored */
        "{\"x\":{\"y\":[1,2.5e-3,-0,true,false,null,{\"z\":\"w\",\"\":[]}],\"\":{}},\"requests\":"
        "[{\"name\":\"a\",\"future\":{\"q\":[[],{}]},\"nums\":[1E+2,1e-400,-12.5]}],\"o\":\"v\"}",
        /* a snake_case name and another field's camelCase name are different fields */
        "{\"requests\":[{\"created_at\":1,\"uniqueKey\":\"k\",\"name\":\"n\"}]}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(check_agree(ok[i], strlen(ok[i]), NULL, true), 0);
}

static void test_fast_parser_declines(void **state)
{
    (void)state;
    /* errors: the reference words them (these are test_bad_inputs' and jansson's own) */
    static const char *const bad[] = {
        "{\"requests\":[",
        "{\"requests\":[]} x",
        "{\"requests\":[]}{}",
        "[1]",
        "null",
        "{\"requests\":[{\"hits\":\"abc\"}]}",
        "{\"requests\":[{},{\"hits\":1.5}]}",
        "{\"requests\":[{\"hits\":\"007\"}]}",
        "{\"requests\":[{\"hits\":1e19}]}",
        "{\"requests\":[{\"algorithm\":1.0}]}",
        "{\"requests\":[{\"algorithm\":4294967296}]}",
        "{\"requests\":[{\"behavior\":\"GLOBAL|\"}]}",
        "{\"requests\":[{\"metadata\":{\"a\":null}}]}",
        "{\"requests\":[{\"metadata\":{\"a\":1}}]}",
        "{\"requests\":[null]}",
        "{\"requests\":[{\"hits\":1,\"hits\":2}]}",
        "{\"requests\":[{\"unique_key\":\"a\",\"uniqueKey\":\"b\"}]}",
        "{\"requests\":[{\"name\":\"\\u0000\"}]}",
        "{\"requests\":[{\"name\":\"\xff\"}]}",
        "{\"requests\":[{\"name\":\"\xc3\"}]}",
        "{\"requests\":[{\"name\":\"\xed\xa0\x80\"}]}",
        "{\"requests\":[{\"name\":\"\x01\"}]}",
        "{\"requests\":[{\"name\":\"\\ud800\"}]}",
        "{\"requests\":[{\"name\":\"\\udc00\"}]}",
        "{\"requests\":[{\"name\":\"\\ud800\\u0041\"}]}",
        "{\"requests\":[{\"name\":\"\\x\"}]}",
        "{\"requests\":[{\"name\":\"\\u12g4\"}]}",
        "{\"requests\":[{\"name\":\"x}]}",
        /* jansson refuses these anywhere, known field or not */
        "{\"x\":99999999999999999999}",
        "{\"x\":-9223372036854775809}",
        "{\"x\":1e400}",
        "{\"x\":01}",
        "{\"x\":1.}",
        "{\"x\":.5}",
        "{\"x\":-}",
        "{\"x\":+1}",
        "{\"x\":tru}",
        "{\"x\":[1,]}",
        "{\"x\":{\"a\":1,}}",
        "{\"x\":{\"a\":1,\"a\":2}}",
        "{\"x\":1,\"x\":2}",
        "{\"requests\":[{\"metadata\":{\"a\":\"1\",\"a\":\"2\"}}]}",
        "{\"requests\":[{\"metadata\":{\"a\":\"1\",\"\\u0061\":\"2\"}}]}",
        "{\"x\":\"\\u0000\"}",
        "{\"x\" 1}",
        "{'x':1}",
        "\xef\xbb\xbf{}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(check_agree(bad[i], strlen(bad[i]), NULL, false), 0);
    /* a NUL byte inside the body */
    assert_int_not_equal(check_agree("{\"x\":\"a\0b\"}", 11, NULL, false), 0);
    assert_int_not_equal(check_agree("{}\0", 3, NULL, false), 0);

    /* valid, but left to the reference: a key written with escapes, many unknown keys, a big
     * metadata map, nesting deeper than the fast parser recurses */
    static const char *const rare[] = {
        "{\"\\u0072equests\":[{\"name\":\"n\"}]}",
        "{\"requests\":[{\"na\\u006de\":\"n\"}]}",
        "{\"x\":{\"\\u0061\":1}}",
    };
    for (size_t i = 0; i < sizeof rare / sizeof rare[0]; i++)
        assert_int_equal(check_agree(rare[i], strlen(rare[i]), NULL, false), 0);
    sl_buf b;
    sl_buf_init(&b, 0);
    sl_buf_append_str(&b, "{\"requests\":[{\"metadata\":{");
    for (int i = 0; i < 40; i++)
        sl_buf_printf(&b, "%s\"k%d\":\"v\"", i ? "," : "", i);
    sl_buf_append_str(&b, "}}]}");
    assert_int_equal(check_agree((char *)b.data, b.len, NULL, false), 0);
    sl_buf_reset(&b);
    sl_buf_append_str(&b, "{");
    for (int i = 0; i < 40; i++)
        sl_buf_printf(&b, "\"u%d\":%d,", i, i);
    sl_buf_append_str(&b, "\"requests\":[]}");
    assert_int_equal(check_agree((char *)b.data, b.len, NULL, false), 0);
    sl_gubjson_limits lim;
    sl_gubjson_limits_default(&lim);
    lim.max_depth = 100;
    sl_buf_reset(&b);
    sl_buf_append_str(&b, "{\"x\":");
    for (int i = 0; i < 40; i++)
        sl_buf_append_str(&b, "[");
    for (int i = 0; i < 40; i++)
        sl_buf_append_str(&b, "]");
    sl_buf_append_str(&b, "}");
    assert_int_equal(check_agree((char *)b.data, b.len, &lim, false), 0);
    /* ... while 32 entries are its own */
    sl_buf_reset(&b);
    sl_buf_append_str(&b, "{\"requests\":[{\"metadata\":{");
    for (int i = 0; i < 32; i++)
        sl_buf_printf(&b, "%s\"k%d\":\"v\"", i ? "," : "", i);
    sl_buf_append_str(&b, "}}]}");
    assert_int_equal(check_agree((char *)b.data, b.len, NULL, true), 0);
    sl_buf_free(&b);
}

/* The limits hold on the fast path exactly where the prescan puts them. */
static void test_fast_parser_limits(void **state)
{
    (void)state;
    sl_gubjson_limits lim;
    sl_gubjson_limits_default(&lim);
    lim.max_depth = 4;
    const char *body = "{\"requests\":[{\"metadata\":{\"k\":\"[[[[{{{{\"}}]}";
    check_agree(body, strlen(body), &lim, true);
    body = "{\"x\":[[[[]]]]}";
    check_agree(body, strlen(body), &lim, false);
    body = "{\"x\":[[[]]]}";
    check_agree(body, strlen(body), &lim, true);
    lim.max_depth = 16;
    lim.max_tokens = 11; /* { : [ and 8 commas */
    body = "{\"x\":[1,2,3,4,5,6,7,8,9]}";
    check_agree(body, strlen(body), &lim, true);
    lim.max_tokens = 10;
    check_agree(body, strlen(body), &lim, false);
    assert_non_null(strstr(err, "more than 10"));
}

static void test_fast_parser_allocation_failures(void **state)
{
    (void)state;
    const char *body = "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"metadata\":{\"a\":"
                       "\"b\",\"c\":\"d\"}},{\"name\":\"x\"},{},{},{},{\"hits\":\"oops\"}]}";
    const char *good = "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"metadata\":{\"a\":"
                       "\"b\",\"c\":\"d\"}},{\"name\":\"x\"},{},{},{},{}]}";
    bool succeeded = false;
    for (int k = 0; k < 64 && !succeeded; k++) {
        fail_alloc f = {.left = k};
        ProtobufCAllocator a = {fa_alloc, fa_free, &f};
        ProtobufCMessage *m = NULL;
        int rc = sl_gubjson_parse_with(SL_GUBJSON_PARSE_FAST, REQ, good, strlen(good), NULL, &a,
                                       &m, err, sizeof err);
        if (rc == 0) {
            succeeded = true;
            protobuf_c_message_free_unpacked(m, &a);
        } else {
            assert_int_equal(rc, -EAGAIN);
            assert_null(m);
        }
        assert_int_equal(f.live, 0);
        f.left = k;
        rc = sl_gubjson_parse_with(SL_GUBJSON_PARSE_FAST, REQ, body, strlen(body), NULL, &a, &m,
                                   err, sizeof err);
        assert_int_equal(rc, -EAGAIN);
        assert_int_equal(f.live, 0);
    }
    assert_true(succeeded);
}

/* The two parsers called directly (what sl_gubjson_parse_with() dispatches to). */
static void test_fast_and_reference_modules(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *d = &pb__gubernator__get_rate_limits_req__descriptor;
    sl_gubjson_limits lim;
    sl_gubjson_limits_default(&lim);
    const char *plain = "{\"requests\":[{\"name\":\"n\",\"uniqueKey\":\"k\",\"hits\":\"3\"}]}";
    ProtobufCMessage *f = NULL, *r = NULL;
    assert_int_equal(sl_gubjson_fast_parse(d, plain, strlen(plain), &lim, NULL, &f), 0);
    assert_int_equal(sl_gubjson_ref_parse(d, plain, strlen(plain), &lim, NULL, &r, err, sizeof err),
                     0);
    const Req *fr = (const Req *)f, *rr = (const Req *)r;
    assert_int_equal(fr->n_requests, 1);
    assert_int_equal(rr->n_requests, 1);
    assert_string_equal(fr->requests[0]->unique_key, "k");
    assert_string_equal(rr->requests[0]->unique_key, "k");
    assert_int_equal(fr->requests[0]->hits, 3);
    assert_int_equal(rr->requests[0]->hits, 3);
    protobuf_c_message_free_unpacked(f, NULL);
    protobuf_c_message_free_unpacked(r, NULL);

    /* a key written with an escape: the fast parser declines, the reference takes it */
    const char *esc = "{\"requests\":[{\"unique\\u005fkey\":\"k\"}]}";
    f = (ProtobufCMessage *)1;
    assert_int_equal(sl_gubjson_fast_parse(d, esc, strlen(esc), &lim, NULL, &f), -EAGAIN);
    assert_int_equal(sl_gubjson_ref_parse(d, esc, strlen(esc), &lim, NULL, &r, err, sizeof err), 0);
    assert_string_equal(((const Req *)r)->requests[0]->unique_key, "k");
    protobuf_c_message_free_unpacked(r, NULL);

    /* an error: declined, and the reference words it */
    const char *bad = "{\"requests\":[{\"hits\":\"ten\"}]}";
    assert_int_equal(sl_gubjson_fast_parse(d, bad, strlen(bad), &lim, NULL, &f), -EAGAIN);
    assert_int_equal(sl_gubjson_ref_parse(d, bad, strlen(bad), &lim, NULL, &r, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "requests[0].hits"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snake_case_full),
        cmocka_unit_test(test_camel_case_and_number_forms),
        cmocka_unit_test(test_nulls_unknowns_and_empty),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_allocation_failures_free_everything),
        cmocka_unit_test(test_print_every_field),
        cmocka_unit_test(test_print_health_live_error_and_peers),
        cmocka_unit_test(test_print_string_escapes),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_parse_other_messages),
        cmocka_unit_test(test_fast_parser_takes_valid_forms),
        cmocka_unit_test(test_fast_parser_declines),
        cmocka_unit_test(test_fast_parser_limits),
        cmocka_unit_test(test_fast_parser_allocation_failures),
        cmocka_unit_test(test_fast_and_reference_modules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

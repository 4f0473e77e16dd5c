/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service (node/service.c) driven without sockets: each request is an sl_exchange built
 * through the net layer's exchange API and answered into a capturing owner, with a real engine,
 * standalone router, quota file, switchboard, protection service and metrics, on a fixed clock.
 * Covered: routing by path and transport (gRPC and HTTP, query strings, unknown paths and
 * methods: 404, 405, UNIMPLEMENTED), gRPC framing errors (truncated, compressed, two messages,
 * too large), GetRateLimits over gRPC (protobuf) and JSON, HealthCheck and LiveCheck, /metrics,
 * the one rendering of /attempt and /release (status, headers, Content-Type with a body only),
 * with and without protection, /attempt's absence without quotas, the admin endpoint's absence
 * from the client port (it has a listener of its own, node/adminsrv.c), a call shed by the worker shedder (HTTP 503 + Retry-After, gRPC UNAVAILABLE), and the
 * call and attempt counters.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gubernator.pb-c.h"
#include "net/exchange.h"
#include "node/service.h"
#include "protect/protect.h"
#include "wire/grpc_frame.h"

#define T0 1700000000000LL
#define M(s) (s), strlen(s)

/* What the service answered, as the connection would have sent it. */
typedef struct answer {
    int calls;
    int status;
    char headers[2048]; /* "name: value\n" ... */
    size_t nheaders;
    char body[256 * 1024];
    size_t body_len;
    int grpc_status;    /* -1 without the trailer */
    char grpc_message[512];
} answer;

typedef struct fx {
    sl_engine *engine;
    sl_router *router;
    sl_decider decider; /* a standalone node's: the engine (node/nodeparts.c) */
    sl_metrics *metrics;
    sl_quotasrc *quotas;
    sl_killswitch *ks;
    sl_protect *protect;
    sl_service *svc;
    sl_http_ctx *ctx;
    char qpath[64];
    answer a;
} fx;

static int capture(void *owner, sl_exchange *ex, const sl_http_response *r)
{
    answer *a = &((fx *)owner)->a;
    a->calls++;
    a->status = r->status;
    size_t o = 0;
    a->headers[0] = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        int n = snprintf(a->headers + o, sizeof a->headers - o, "%.*s: %.*s\n",
                         (int)r->headers[i].name_len, r->headers[i].name,
                         (int)r->headers[i].value_len, r->headers[i].value);
        assert_true(n > 0 && (size_t)n < sizeof a->headers - o);
        o += (size_t)n;
    }
    a->nheaders = r->nheaders;
    assert_true(r->body_len < sizeof a->body);
    if (r->body_len)
        memcpy(a->body, r->body, r->body_len);
    a->body[r->body_len] = 0;
    a->body_len = r->body_len;
    a->grpc_status = -1;
    a->grpc_message[0] = 0;
    /* grpc-status and grpc-message: trailers, or headers of a trailers-only answer */
    for (size_t i = 0; i < r->ntrailers + r->nheaders; i++) {
        const sl_http_header *t = i < r->ntrailers ? &r->trailers[i]
                                                   : &r->headers[i - r->ntrailers];
        if (t->name_len == 11 && !memcmp(t->name, "grpc-status", 11))
            a->grpc_status = atoi(t->value);
        else if (t->name_len == 12 && !memcmp(t->name, "grpc-message", 12))
            snprintf(a->grpc_message, sizeof a->grpc_message, "%.*s", (int)t->value_len, t->value);
    }
    return 0;
}

static const sl_exchange_ops capture_ops = {.respond = capture};

static uint32_t put_str(sl_exchange *ex, const char *s, size_t n)
{
    int64_t off = sl_exchange_put(ex, s, n);
    assert_true(off >= 0);
    assert_true(sl_exchange_put(ex, "", 1) >= 0); /* the view's strings are NUL-terminated */
    return (uint32_t)off;
}

/* One request: method, path, NULL-terminated name/value pairs, a body. The answer is in f->a. */
static answer *send_req(fx *f, bool grpc, const char *method, const char *path,
                        const char *const *hdrs, const void *body, size_t len)
{
    memset(&f->a, 0, sizeof f->a);
    sl_exchange *ex = sl_exchange_new(f->ctx, &capture_ops, f);
    assert_non_null(ex);
    ex->method_off = put_str(ex, M(method));
    ex->method_len = (uint32_t)strlen(method);
    ex->path_off = put_str(ex, M(path));
    ex->path_len = (uint32_t)strlen(path);
    for (; hdrs && hdrs[0]; hdrs += 2) {
        uint32_t n = put_str(ex, M(hdrs[0])), v = put_str(ex, M(hdrs[1]));
        assert_int_equal(sl_exchange_add_header(ex, n, (uint32_t)strlen(hdrs[0]), v,
                                                (uint32_t)strlen(hdrs[1])), 0);
    }
    if (len) {
        int64_t off = sl_exchange_put(ex, body, len);
        assert_true(off >= 0);
        ex->body_off = (uint32_t)off;
        ex->body_len = len;
    }
    ex->req.grpc = grpc;
    sl_exchange_finish_request(ex, grpc ? SL_HTTP_2 : SL_HTTP_1);
    sl_exchange_dispatch(ex);
    assert_int_equal(f->a.calls, 1); /* answered at once: a standalone node */
    assert_int_equal(sl_http_ctx_pending(f->ctx), 0);
    sl_exchange_unref(ex); /* the owner's reference */
    return &f->a;
}

static answer *get(fx *f, const char *path)
{
    return send_req(f, false, "GET", path, NULL, NULL, 0);
}

static answer *post(fx *f, const char *path, const char *const *hdrs, const char *body)
{
    return send_req(f, false, "POST", path, hdrs, body, body ? strlen(body) : 0);
}

static bool has_header(const answer *a, const char *line)
{
    return strstr(a->headers, line) != NULL;
}

static void assert_has(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("'%s' lacks '%s'", hay, needle);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char quota_file[] =
    "limit:\n"
    "  key:\n"
    "    api: {quota: {rate: 1, burst: 0}}\n"
    "    many: {quota: {rate: 1000, burst: 1000}}\n"
    "concurrency:\n"
    "  default: {limit: 1, duration: 10s}\n";

typedef struct opts {
    bool quotas;
    bool protect;
} opts;

static fx *fx_new(opts o)
{
    fx *f = calloc(1, sizeof *f);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    assert_int_equal(sl_metrics_new(NULL, &f->metrics), 0);
    sl_router_config rc = {.engine = f->engine, .engine_cfg = &ec, .workers = 1};
    assert_int_equal(sl_router_new(&rc, &f->router), 0);
    snprintf(f->qpath, sizeof f->qpath, "/tmp/sluice-service-XXXXXX");
    int fd = mkstemp(f->qpath);
    assert_true(fd >= 0);
    close(fd);
    write_file(f->qpath, quota_file);
    f->decider = sl_decider_local(f->engine);
    sl_service_config sc = {.engine = f->engine, .router = f->router, .metrics = f->metrics,
                            .workers = 1, .decider = &f->decider};
    sl_gub_config_default(&sc.gub);
    sc.gub.max_items = 4;
    sc.gub.max_msg = 4096;
    sc.gub.json.max_body = 4096;
    sl_levee_config_default(&sc.levee);
    if (o.quotas) {
        sl_quotasrc_config qc = {.conn.file = f->qpath};
        assert_int_equal(sl_quotasrc_new(&qc, &f->quotas), 0);
        sc.quotas = f->quotas;
    }
    if (o.protect) {
        sl_killswitch_config kc = {.conn.file = f->qpath};
        assert_int_equal(sl_killswitch_new(&kc, &f->ks), 0);
        sl_protect_config pc;
        sl_protect_config_default(&pc);
        pc.engine = f->engine;
        pc.switches = f->ks;
        pc.metrics = f->metrics;
        pc.workers = 1;
        pc.shed_opts.raise_after_ms = 0;
        pc.shed_opts.raise_step = 1;
        pc.shed_opts.smoothing = 1;
        assert_int_equal(sl_protect_new(&pc, &f->protect), 0);
        sc.protect = f->protect;
    }
    assert_int_equal(sl_service_new(&sc, &f->svc), 0);
    f->ctx = sl_http_ctx_new(NULL, sl_service_handle, f->svc);
    assert_non_null(f->ctx);
    sl_http_ctx_set_now(f->ctx, T0);
    return f;
}

static void fx_free(fx *f)
{
    sl_http_ctx_free(f->ctx);
    sl_service_worker_stop(f->svc, 0);
    sl_service_free(f->svc);
    if (f->protect) {
        sl_protect_worker_stop(f->protect, 0);
        sl_protect_free(f->protect);
    }
    sl_killswitch_free(f->ks);
    sl_quotasrc_free(f->quotas);
    sl_router_free(f->router);
    sl_metrics_free(f->metrics);
    sl_engine_free(f->engine);
    unlink(f->qpath);
    free(f);
}

static char *metrics_text(fx *f)
{
    answer *a = get(f, "/metrics");
    assert_int_equal(a->status, 200);
    return a->body;
}

/* ---------------------------------------------------------------- HTTP routes */

static void test_http_routes(void **state)
{
    (void)state;
    fx *f = fx_new((opts){0});
    answer *a = get(f, "/v1/HealthCheck");
    assert_int_equal(a->status, 200);
    assert_true(has_header(a, "content-type: application/json\n"));
    assert_has(a->body, "\"status\":\"healthy\"");
    a = get(f, "/v1/LiveCheck?probe=1"); /* a query string is not part of the route */
    assert_int_equal(a->status, 200);
    assert_string_equal(a->body, "{}");
    a = get(f, "/v1/LiveCheckX");
    assert_int_equal(a->status, 404);
    assert_string_equal(a->body, "not found\n");
    assert_true(has_header(a, "content-type: text/plain; charset=utf-8\n"));
    a = get(f, "/");
    assert_int_equal(a->status, 404);
    /* a route with the wrong method */
    a = get(f, "/v1/GetRateLimits");
    assert_int_equal(a->status, 405);
    assert_string_equal(a->body, "method not allowed: use POST\n");
    a = post(f, "/v1/HealthCheck", NULL, "{}");
    assert_int_equal(a->status, 405);
    assert_string_equal(a->body, "method not allowed: use GET\n");
    a = send_req(f, false, "HEAD", "/v1/LiveCheck", NULL, NULL, 0);
    assert_int_equal(a->status, 200);
    /* without quotas there is no /attempt, and without protection no /release or admin */
    a = post(f, "/attempt", NULL, NULL);
    assert_int_equal(a->status, 404);
    a = post(f, "/release", NULL, NULL);
    assert_int_equal(a->status, 404);
    a = get(f, "/v1/admin/killswitch");
    assert_int_equal(a->status, 404);
    /* /metrics, and the calls counted so far */
    char *m = metrics_text(f);
    assert_has(m, "sluice_calls_total{method=\"other\",transport=\"http\",code=\"NOT_FOUND\"} 5");
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"http\",code=\"UNIMPLEMENTED\"} 1");
    assert_has(m, "sluice_calls_total{method=\"LiveCheck\",transport=\"http\",code=\"OK\"} 2");
    a = post(f, "/metrics", NULL, NULL);
    assert_int_equal(a->status, 405);
    fx_free(f);
}

static void test_json_rate_limits(void **state)
{
    (void)state;
    fx *f = fx_new((opts){0});
    const char *req = "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"hits\":1,\"limit\":2,"
                      "\"duration\":60000}]}";
    answer *a = post(f, "/v1/GetRateLimits", NULL, req);
    assert_int_equal(a->status, 200);
    assert_true(has_header(a, "content-type: application/json\n"));
    assert_has(a->body, "\"remaining\":\"1\"");
    a = post(f, "/v1/GetRateLimits", NULL, req);
    assert_has(a->body, "\"remaining\":\"0\"");
    a = post(f, "/v1/GetRateLimits", NULL, req);
    assert_has(a->body, "\"status\":\"OVER_LIMIT\"");
    /* a bad body is the call's error, in grpc-gateway's form */
    a = post(f, "/v1/GetRateLimits", NULL, "{\"requests\":");
    assert_int_equal(a->status, 400);
    assert_has(a->body, "\"code\":3");
    /* more items than --max-batch (4 here): OUT_OF_RANGE, HTTP 400 */
    a = post(f, "/v1/GetRateLimits", NULL,
             "{\"requests\":[{\"name\":\"a\"},{\"name\":\"a\"},{\"name\":\"a\"},{\"name\":\"a\"},"
             "{\"name\":\"a\"}]}");
    assert_int_equal(a->status, 400);
    assert_has(a->body, "\"message\":");
    /* a body over the JSON limit (4096 here): 413, RESOURCE_EXHAUSTED */
    static char big[5000];
    memset(big, ' ', sizeof big - 1);
    memcpy(big, "{\"requests\":[]}", 15);
    a = post(f, "/v1/GetRateLimits", NULL, big);
    assert_int_equal(a->status, 413);
    assert_has(a->body, "\"code\":8");
    char *m = metrics_text(f);
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"http\",code=\"RESOURCE_EXHAUSTED\"} 1");
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"http\",code=\"OK\"} 3");
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"http\",code=\"INVALID_ARGUMENT\"} 1");
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"http\",code=\"OUT_OF_RANGE\"} 1");
    fx_free(f);
}

/* ---------------------------------------------------------------- gRPC */

/* A GetRateLimitsReq of one item, framed (flags byte as given). */
static size_t grpc_req(uint8_t *out, size_t cap, uint8_t flags, const char *name, int64_t limit)
{
    Pb__Gubernator__RateLimitReq item = PB__GUBERNATOR__RATE_LIMIT_REQ__INIT;
    item.name = (char *)name;
    item.unique_key = "k";
    item.hits = 1;
    item.limit = limit;
    item.duration = 60000;
    Pb__Gubernator__RateLimitReq *items[1] = {&item};
    Pb__Gubernator__GetRateLimitsReq req = PB__GUBERNATOR__GET_RATE_LIMITS_REQ__INIT;
    req.n_requests = 1;
    req.requests = items;
    size_t n = pb__gubernator__get_rate_limits_req__get_packed_size(&req);
    assert_true(n + 5 <= cap);
    out[0] = flags;
    out[1] = (uint8_t)(n >> 24);
    out[2] = (uint8_t)(n >> 16);
    out[3] = (uint8_t)(n >> 8);
    out[4] = (uint8_t)n;
    pb__gubernator__get_rate_limits_req__pack(&req, out + 5);
    return n + 5;
}

static Pb__Gubernator__GetRateLimitsResp *grpc_resp(const answer *a)
{
    assert_int_equal(a->status, 200);
    assert_int_equal(a->grpc_status, 0);
    assert_true(a->body_len >= 5);
    assert_int_equal(a->body[0], 0);
    Pb__Gubernator__GetRateLimitsResp *r = pb__gubernator__get_rate_limits_resp__unpack(
        NULL, a->body_len - 5, (const uint8_t *)a->body + 5);
    assert_non_null(r);
    return r;
}

static void test_grpc(void **state)
{
    (void)state;
    fx *f = fx_new((opts){0});
    uint8_t msg[256];
    size_t n = grpc_req(msg, sizeof msg, 0, "g", 1);
    answer *a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, msg, n);
    Pb__Gubernator__GetRateLimitsResp *r = grpc_resp(a);
    assert_int_equal(r->n_responses, 1);
    assert_int_equal(r->responses[0]->status, PB__GUBERNATOR__STATUS__UNDER_LIMIT);
    assert_int_equal(r->responses[0]->remaining, 0);
    pb__gubernator__get_rate_limits_resp__free_unpacked(r, NULL);
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, msg, n);
    r = grpc_resp(a);
    assert_int_equal(r->responses[0]->status, PB__GUBERNATOR__STATUS__OVER_LIMIT);
    pb__gubernator__get_rate_limits_resp__free_unpacked(r, NULL);

    /* framing errors */
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, msg, 3);
    assert_int_equal(a->grpc_status, SL_GRPC_INVALID_ARGUMENT);
    assert_has(a->grpc_message, "truncated");
    uint8_t two[512];
    memcpy(two, msg, n);
    memcpy(two + n, msg, n);
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, two, 2 * n);
    assert_int_equal(a->grpc_status, SL_GRPC_INVALID_ARGUMENT);
    assert_has(a->grpc_message, "exactly one message");
    /* the compressed flag without grpc-encoding: the client's bug (INTERNAL, as the spec says) */
    n = grpc_req(msg, sizeof msg, 1, "g", 1);
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, msg, n);
    assert_int_equal(a->grpc_status, SL_GRPC_INTERNAL);
    assert_has(a->grpc_message, "without grpc-encoding");
    static uint8_t big[5 + 5000];
    big[3] = 5000 >> 8;
    big[4] = 5000 & 255; /* over max_msg (4096) */
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, big, sizeof big);
    assert_int_equal(a->grpc_status, SL_GRPC_RESOURCE_EXHAUSTED);
    /* a protobuf that is not a GetRateLimitsReq: INTERNAL, as Gubernator's unmarshal error */
    static const uint8_t junk[] = {0, 0, 0, 0, 2, 0xff, 0xff};
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, NULL, junk, sizeof junk);
    assert_int_equal(a->grpc_status, SL_GRPC_INTERNAL);
    assert_true(a->grpc_message[0] != 0);

    /* the other methods, and an unknown one */
    static const uint8_t empty[5] = {0};
    a = send_req(f, true, "POST", SL_GUB_PATH_HEALTH_CHECK, NULL, empty, 5);
    assert_int_equal(a->grpc_status, 0);
    assert_true(a->body_len > 5);
    a = send_req(f, true, "POST", SL_GUB_PATH_LIVE_CHECK, NULL, empty, 5);
    assert_int_equal(a->grpc_status, 0);
    assert_int_equal(a->body_len, 5);
    a = send_req(f, true, "POST", "/pb.gubernator.V1/Nope", NULL, empty, 5);
    assert_int_equal(a->grpc_status, SL_GRPC_UNIMPLEMENTED);
    assert_has(a->grpc_message, "unknown service or method");
    char *m = metrics_text(f);
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"grpc\",code=\"OK\"} 2");
    assert_has(m, "sluice_calls_total{method=\"other\",transport=\"grpc\",code=\"UNIMPLEMENTED\"} 1");
    fx_free(f);
}

/* ---------------------------------------------------------------- /attempt */

static const char *const api_hdrs[] = {"X-Resource", "api", "X-Req-Id", "r-1", NULL};

static void test_attempt_levee_only(void **state)
{
    (void)state;
    fx *f = fx_new((opts){.quotas = true});
    answer *a = post(f, "/attempt", api_hdrs, NULL);
    assert_int_equal(a->status, 200);
    assert_string_equal(a->headers, "X-Req-Id: r-1\n"); /* no body: no Content-Type */
    assert_int_equal(a->body_len, 0);
    a = post(f, "/attempt", api_hdrs, NULL);
    assert_int_equal(a->status, 429);
    assert_true(has_header(a, "X-Req-Id: r-1\n"));
    assert_true(has_header(a, "Retry-After: 1\n"));
    assert_true(has_header(a, "RateLimit-Policy: \"api\";q=1;w=1;sluice-burst=0\n"));
    assert_true(has_header(a, "RateLimit: \"api\";r=0;t=1\n"));
    assert_false(has_header(a, "content-type"));
    /* a reason comes with its Content-Type, last */
    static const char *const none[] = {"X-Req-Id", "r-2", NULL};
    a = post(f, "/attempt", none, NULL);
    assert_int_equal(a->status, 400);
    assert_string_equal(a->body, "missing X-Resource header\n");
    assert_string_equal(a->headers, "X-Req-Id: r-2\ncontent-type: text/plain; charset=utf-8\n");
    static const char *const unknown[] = {"X-Resource", "unknown", NULL};
    a = post(f, "/attempt", unknown, NULL);
    assert_int_equal(a->status, 500);
    assert_string_equal(a->body, "no quota for resource\n");
    a = get(f, "/attempt");
    assert_int_equal(a->status, 405);
    /* X-Priority means nothing without protection */
    static const char *const prio[] = {"X-Resource", "many", "X-Priority", "urgent", NULL};
    a = post(f, "/attempt", prio, NULL);
    assert_int_equal(a->status, 200);
    a = post(f, "/release", NULL, NULL);
    assert_int_equal(a->status, 404);
    char *m = metrics_text(f);
    assert_has(m, "sluice_levee_attempts_total{outcome=\"accepted\"} 2");
    assert_has(m, "sluice_levee_attempts_total{outcome=\"rejected\"} 1");
    assert_has(m, "sluice_levee_attempts_total{outcome=\"malformed\"} 1");
    assert_has(m, "sluice_levee_attempts_total{outcome=\"failed\"} 1");
    assert_has(m, "sluice_calls_total{method=\"Attempt\",transport=\"http\",code=\"RESOURCE_EXHAUSTED\"} 1");
    assert_has(m, "sluice_calls_total{method=\"Attempt\",transport=\"http\",code=\"INTERNAL\"} 1");
    fx_free(f);
}

/* The header line of `name` ("" when absent), value only. */
static const char *header_value(const answer *a, const char *name, char *buf, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "%s: ", name);
    const char *p = strstr(a->headers, key);
    buf[0] = 0;
    if (p) {
        p += strlen(key);
        size_t n = strcspn(p, "\n");
        snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    }
    return buf;
}

static void test_attempt_protected(void **state)
{
    (void)state;
    fx *f = fx_new((opts){.quotas = true, .protect = true});
    answer *a = post(f, "/attempt", api_hdrs, NULL);
    assert_int_equal(a->status, 200);
    a = post(f, "/attempt", api_hdrs, NULL);
    assert_int_equal(a->status, 429);
    assert_string_equal(a->body, "rate limit exceeded for \"api\"; retry in 1 s\n");
    assert_true(has_header(a, "RateLimit-Policy: \"api\";q=1;w=1;sluice-burst=0\n"));
    assert_true(has_header(a, "content-type: text/plain; charset=utf-8\n"));
    /* a lease, its release, and the release again */
    static const char *const acq[] = {"X-Resource", "many", "X-Concurrency", "acquire",
                                      "X-Priority", "critical", NULL};
    a = post(f, "/attempt", acq, NULL);
    assert_int_equal(a->status, 200);
    char id[160];
    header_value(a, "X-Lease-Id", id, sizeof id);
    assert_int_equal(strlen(id), 16 + 1 + 16 + 1 + 4);
    a = post(f, "/attempt", acq, NULL);
    assert_int_equal(a->status, 429);
    assert_true(has_header(a, "RateLimit-Policy: \"concurrency\";q=1\n"));
    const char *rel[] = {"X-Lease-Id", id, "X-Req-Id", "r-9", NULL};
    a = post(f, "/release", rel, NULL);
    assert_int_equal(a->status, 200);
    assert_string_equal(a->headers, "X-Req-Id: r-9\n");
    a = post(f, "/release", rel, NULL);
    assert_int_equal(a->status, 404);
    assert_string_equal(a->body, "lease not found: it was released already or it expired\n");
    a = post(f, "/release", NULL, NULL);
    assert_int_equal(a->status, 400);
    a = get(f, "/release");
    assert_int_equal(a->status, 405);

    /* the admin endpoint is not on the client port (issue 11): 404, and nothing switched */
    a = post(f, "/v1/admin/killswitch", NULL, "{\"name\": \"levee\", \"on\": true}");
    assert_int_equal(a->status, 404);
    a = get(f, "/v1/admin/killswitch");
    assert_int_equal(a->status, 404);
    a = post(f, "/attempt", api_hdrs, NULL);
    assert_int_equal(a->status, 429);
    /* switched through the switchboard itself (what the admin listener calls), /attempt obeys */
    assert_int_equal(sl_killswitch_set(f->ks, "levee", 5, SL_KILLSWITCH_KILLED), 0);
    a = post(f, "/attempt", api_hdrs, NULL);
    assert_int_equal(a->status, 200);
    assert_true(has_header(a, "X-Sluice-Killswitch: rate\n"));

    char *m = metrics_text(f);
    assert_has(m, "sluice_calls_total{method=\"Release\",transport=\"http\",code=\"OK\"} 1");
    assert_has(m, "sluice_calls_total{method=\"Release\",transport=\"http\",code=\"NOT_FOUND\"} 1");
    assert_has(m, "sluice_calls_total{method=\"other\",transport=\"http\",code=\"NOT_FOUND\"} 2");
    assert_false(strstr(m, "method=\"Admin\""));
    assert_has(m, "sluice_levee_attempts_total{outcome=\"rejected\"} 3");
    fx_free(f);
}

static void test_shed(void **state)
{
    (void)state;
    fx *f = fx_new((opts){.quotas = true, .protect = true});
    /* raise_after 0, step 1: three samples above the target -> level 3, all but critical */
    for (int i = 0; i < 3; i++)
        sl_protect_observe(f->protect, 0, 1000 + i * 100, 0.99);
    static const char *const test_prio[] = {"X-Resource", "many", "X-Priority", "test", NULL};
    answer *a = post(f, "/attempt", test_prio, NULL);
    assert_int_equal(a->status, 503);
    assert_true(has_header(a, "Retry-After: 5\n"));
    assert_true(has_header(a, "RateLimit: \"shed\";r=0;t=5\n"));
    assert_has(a->body, "sluiced is overloaded and sheds test traffic");
    /* a Gubernator call of test priority: the whole call is shed */
    const char *req = "{\"requests\":[{\"name\":\"n\",\"unique_key\":\"k\",\"hits\":1,\"limit\":2,"
                      "\"duration\":60000,\"metadata\":{\"priority\":\"test\"}}]}";
    a = post(f, "/v1/GetRateLimits", NULL, req);
    assert_int_equal(a->status, 503);
    assert_true(has_header(a, "retry-after: 5\n"));
    assert_true(has_header(a, "content-type: application/json\n"));
    assert_has(a->body, "\"code\":14");
    assert_has(a->body, "sheds test traffic");
    uint8_t msg[256];
    size_t n = grpc_req(msg, sizeof msg, 0, "g", 1);
    static const char *const crit[] = {"x", "y", NULL};
    /* gRPC without metadata: critical by default, never shed */
    a = send_req(f, true, "POST", SL_GUB_PATH_GET_RATE_LIMITS, crit, msg, n);
    assert_int_equal(a->grpc_status, 0);
    char *m = metrics_text(f);
    assert_has(m, "sluice_calls_total{method=\"GetRateLimits\",transport=\"http\",code=\"UNAVAILABLE\"} 1");
    assert_has(m, "sluice_calls_total{method=\"Attempt\",transport=\"http\",code=\"UNAVAILABLE\"} 1");
    assert_has(m, "sluice_levee_attempts_total{outcome=\"rejected\"} 1"); /* shed is rejected */
    assert_has(m, "sluice_protect_events_total{limiter=\"shed\",event=\"rejected\"} 2");
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_routes),       cmocka_unit_test(test_json_rate_limits),
        cmocka_unit_test(test_grpc),              cmocka_unit_test(test_attempt_levee_only),
        cmocka_unit_test(test_attempt_protected), cmocka_unit_test(test_shed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer client tests against a real HTTP/2 gRPC server on loopback (the project's own sl_server,
 * nghttp2 underneath) whose handler echoes, fails with a gRPC status, or answers late. The client
 * runs on the test's own libuv loop. Checked: unary calls and their answers, one connection for
 * many calls (including concurrent ones), gRPC errors with their message, deadlines (the call
 * fails at its deadline, the connection keeps working), a refused connection fails the call and
 * then fails new calls at once during the backoff, a server that goes away fails the calls in
 * flight and a new server on the same port is reached again, close cancels what is in flight.
 * No sleeps: the loop runs until the expected callbacks ran, with a guard timer. Bounds on loop
 * time are causal where they can be (the deadline test checks the server had not answered yet)
 * and otherwise far below the deadline they tell apart, with room for a busy machine under ASan.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "auth/peersig.h"
#include "cluster/peer.h"
#include "net/server.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

/* ---- server ---- */

typedef struct late {
    uv_timer_t t;
    sl_exchange *ex;
    uint8_t body[64];
    size_t len;
} late;

/* The cluster secret /t.S/Signed checks calls against (set before the server starts). */
static sl_peersig_keys *server_keys;

/* Answers the server sent to /t.S/Slow (the server runs on its own thread). */
static atomic_int slow_answers;

static void late_closed(uv_handle_t *h)
{
    free(h->data);
}

static void late_fire(uv_timer_t *t)
{
    late *l = t->data;
    if (sl_exchange_alive(l->ex) && !strcmp(sl_exchange_request(l->ex)->path, "/t.S/Slow"))
        atomic_fetch_add(&slow_answers, 1);
    sl_exchange_respond_grpc(l->ex, l->body, l->len, 0, NULL);
    uv_close((uv_handle_t *)t, late_closed);
}

/* The client went away before the answer: answer now (a no-op), so the server can stop at once. */
static void late_cancel(void *ud, sl_exchange *ex)
{
    (void)ex;
    late *l = ud;
    uv_timer_stop(&l->t);
    sl_exchange_respond_grpc(l->ex, l->body, l->len, 0, NULL);
    uv_close((uv_handle_t *)&l->t, late_closed);
}

static void handle(void *ud, sl_exchange *ex)
{
    (void)ud;
    const sl_http_request *rq = sl_exchange_request(ex);
    if (!rq->grpc && strcmp(rq->path, "/plain") == 0) { /* sl_peer_http: echo x-in, a 429 */
        const sl_http_header *in = sl_http_header_find(rq, "x-in");
        sl_http_header h[1] = {{"x-out", 5, in ? in->value : "", in ? in->value_len : 0}};
        sl_http_response r = {.status = 429, .headers = h, .nheaders = 1, .body = rq->body,
                              .body_len = rq->body_len};
        sl_exchange_respond(ex, &r);
        return;
    }
    if (!rq->grpc) {
        sl_exchange_respond_simple(ex, 404, NULL, NULL, 0);
        return;
    }
    if (strcmp(rq->path, "/t.S/Signed") == 0) { /* echo the sender a good signature names */
        const sl_http_header *h = sl_http_header_find(rq, SL_PEERSIG_HEADER);
        const char *snd = NULL;
        size_t sl = 0;
        if (!h || sl_peersig_verify(server_keys, h->value, h->value_len, rq->path, rq->path_len,
                                    rq->body, rq->body_len, sl_wall_ms(), 30000, &snd,
                                    &sl) != SL_PEERSIG_OK)
            sl_exchange_respond_grpc_status(ex, 16, h ? "bad signature" : "no signature");
        else {
            sl_buf out;
            sl_buf_init(&out, 0);
            sl_grpc_frame_append(&out, snd, sl);
            sl_exchange_respond_grpc(ex, out.data, out.len, 0, NULL);
            sl_buf_free(&out);
        }
        return;
    }
    if (strcmp(rq->path, "/t.S/Echo") == 0) {
        sl_exchange_respond_grpc(ex, rq->body, rq->body_len, 0, NULL);
    } else if (strcmp(rq->path, "/t.S/Fail") == 0) {
        sl_exchange_respond_grpc_status(ex, 5, "no such thing: 100%");
    } else if (strcmp(rq->path, "/t.S/Late") == 0 || strcmp(rq->path, "/t.S/Slow") == 0) {
        late *l = calloc(1, sizeof *l);
        l->ex = ex;
        l->len = rq->body_len < sizeof l->body ? rq->body_len : sizeof l->body;
        memcpy(l->body, rq->body, l->len);
        uv_timer_init(sl_exchange_loop(ex), &l->t);
        l->t.data = l;
        if (strcmp(rq->path, "/t.S/Slow") == 0) {
            sl_exchange_set_cancel(ex, late_cancel, l);
            uv_timer_start(&l->t, late_fire, 3000, 0);
        } else {
            uv_timer_start(&l->t, late_fire, 300, 0);
        }
    } else {
        sl_exchange_respond_grpc_status(ex, 12, "unimplemented");
    }
}

static sl_server *start_server(uint16_t port)
{
    sl_server_config c;
    sl_server_config_defaults(&c);
    c.host = "127.0.0.1";
    c.port = port;
    c.workers = 1;
    c.handler = handle;
    sl_server *s;
    assert_int_equal(sl_server_start(&s, &c), 0);
    return s;
}

static void stop_server(sl_server *s)
{
    sl_server_shutdown(s, 0);
    sl_server_wait(s);
    sl_server_free(s);
}

/* ---- client side ---- */

typedef struct result {
    int calls;
    int err;
    int grpc_status;
    char message[256];
    uint8_t msg[256];
    size_t len;
} result;

typedef struct fixture {
    uv_loop_t loop;
    uv_timer_t guard;
    bool guard_fired;
    int want, got;
} fixture;

static fixture F;

static void on_result(void *ud, const sl_peer_result *r)
{
    result *res = ud;
    res->calls++;
    res->err = r->err;
    res->grpc_status = r->grpc_status;
    snprintf(res->message, sizeof res->message, "%s", r->message);
    res->len = r->len < sizeof res->msg ? r->len : sizeof res->msg;
    if (r->msg)
        memcpy(res->msg, r->msg, res->len);
    F.got++;
}

static void on_guard(uv_timer_t *t)
{
    (void)t;
    F.guard_fired = true;
}

/* Run the client loop until `n` more callbacks have run (fails after 15 s). */
static void run_until(int n)
{
    F.want = F.got + n;
    F.guard_fired = false;
    uv_timer_start(&F.guard, on_guard, 15000, 0);
    while (F.got < F.want && !F.guard_fired)
        uv_run(&F.loop, UV_RUN_ONCE);
    uv_timer_stop(&F.guard);
    assert_false(F.guard_fired);
}

static sl_buf framed(const char *text)
{
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_grpc_frame_append(&b, text, strlen(text)), 0);
    return b;
}

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof F);
    uv_loop_init(&F.loop);
    uv_timer_init(&F.loop, &F.guard);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    uv_close((uv_handle_t *)&F.guard, NULL);
    /* let closed handles finish (the peer frees itself once they have) */
    while (uv_run(&F.loop, UV_RUN_NOWAIT))
        ;
    assert_int_equal(uv_loop_close(&F.loop), 0);
    return 0;
}

static uint16_t free_port(void)
{
    /* bind port 0, read it, let it go: the next bind on it works (nothing else binds here) */
    uv_tcp_t t;
    uv_tcp_init(&F.loop, &t);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_bind(&t, (const struct sockaddr *)&a, 0);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&t, (struct sockaddr *)&ss, &len);
    uint16_t port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&F.loop, UV_RUN_NOWAIT);
    return port;
}

static sl_peer *new_peer(uint16_t port)
{
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
    sl_peer_config pc = {.loop = &F.loop, .addr = addr, .backoff_min_ms = 200,
                         .backoff_max_ms = 400};
    sl_peer *p;
    assert_int_equal(sl_peer_new(&pc, &p), 0);
    return p;
}

static void test_split_addr(void **state)
{
    (void)state;
    char host[64];
    uint16_t port;
    assert_int_equal(sl_peer_split_addr("10.1.2.3:1051", host, sizeof host, &port), 0);
    assert_string_equal(host, "10.1.2.3");
    assert_int_equal(port, 1051);
    assert_int_equal(sl_peer_split_addr("[::1]:80", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(sl_peer_split_addr("peer-0.sluice:9", host, sizeof host, &port), 0);
    assert_int_equal(sl_peer_split_addr("nohost", host, sizeof host, &port), -EINVAL);
    assert_int_equal(sl_peer_split_addr("a:0", host, sizeof host, &port), -EINVAL);
    assert_int_equal(sl_peer_split_addr("a:70000", host, sizeof host, &port), -EINVAL);
    assert_int_equal(sl_peer_split_addr("::1:80", host, sizeof host, &port), -EINVAL);
    assert_int_equal(sl_peer_split_addr(":80", host, sizeof host, &port), -EINVAL);
}

static void test_calls_share_a_connection(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    sl_peer *p = new_peer(port);
    result r[20];
    memset(r, 0, sizeof r);
    /* ten concurrent calls before the connection is even up, then ten more */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 10; i++) {
            char text[32];
            snprintf(text, sizeof text, "hello %d", round * 10 + i);
            sl_buf b = framed(text);
            assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b, 2000, on_result, &r[round * 10 + i]),
                             0);
            assert_int_equal(b.len, 0); /* taken */
            sl_buf_free(&b);
        }
        assert_int_equal(sl_peer_inflight(p), 10);
        run_until(10);
    }
    for (int i = 0; i < 20; i++) {
        char text[32];
        snprintf(text, sizeof text, "hello %d", i);
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].err, 0);
        assert_int_equal(r[i].grpc_status, 0);
        assert_int_equal(r[i].len, strlen(text));
        assert_memory_equal(r[i].msg, text, strlen(text));
    }
    sl_peer_stats st;
    sl_peer_stats_get(p, &st);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.calls, 20);
    assert_int_equal(st.ok, 20);
    assert_true(sl_peer_connected(p));
    sl_peer_close(p);
    stop_server(srv);
}

typedef struct http_result {
    int calls, err, status;
    char out[32], body[32];
} http_result;

static void on_http(void *ud, const sl_peer_http_result *r)
{
    http_result *h = ud;
    h->calls++;
    h->err = r->err;
    h->status = r->status;
    for (size_t i = 0; i < r->nfields; i++)
        if (r->fields[i].name_len == 5 && !memcmp(r->fields[i].name, "x-out", 5))
            snprintf(h->out, sizeof h->out, "%.*s", (int)r->fields[i].value_len, r->fields[i].value);
    snprintf(h->body, sizeof h->body, "%.*s", (int)r->len, (const char *)r->body);
    F.got++;
}

/* sl_peer_http: a plain HTTP/2 call on the peer's connection, the answer relayed as it came
 * (status, headers, body), next to a gRPC call on the same connection. */
static void test_http_call(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    sl_peer *p = new_peer(port);
    http_result h = {0};
    sl_buf body;
    sl_buf_init(&body, 0);
    sl_buf_append(&body, "abc", 3);
    sl_h2c_field f[1] = {{"x-in", 4, "hello", 5}};
    assert_int_equal(sl_peer_http(p, "POST", "/plain", f, 1, &body, 2000, on_http, &h), 0);
    assert_int_equal(body.len, 0); /* taken */
    result r = {0};
    sl_buf b = framed("grpc too");
    assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b, 2000, on_result, &r), 0);
    run_until(2);
    assert_int_equal(h.calls, 1);
    assert_int_equal(h.err, 0);
    assert_int_equal(h.status, 429);
    assert_string_equal(h.out, "hello");
    assert_string_equal(h.body, "abc");
    assert_int_equal(r.err, 0);
    assert_int_equal(r.len, strlen("grpc too"));
    sl_peer_stats st;
    sl_peer_stats_get(p, &st);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.ok, 2);
    sl_buf_free(&body);
    sl_buf_free(&b);
    sl_peer_close(p);
    stop_server(srv);
}

static void test_grpc_error(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    sl_peer *p = new_peer(port);
    result r = {0};
    sl_buf b = framed("x");
    assert_int_equal(sl_peer_call(p, "/t.S/Fail", &b, 2000, on_result, &r), 0);
    run_until(1);
    assert_int_equal(r.err, 0);
    assert_int_equal(r.grpc_status, 5);
    assert_string_equal(r.message, "no such thing: 100%");
    assert_int_equal(r.len, 0);
    sl_buf_free(&b);
    sl_peer_close(p);
    stop_server(srv);
}

/* With a cluster secret every call carries its signature (auth/peersig.h) over the path, the
 * body and this node's advertised address, which the server verifies; without one, none. */
static void test_signed_calls(void **state)
{
    (void)state;
    static const char secret[] = "peer-test-secret-0123456789abcdef\n";
    const char *why = NULL;
    assert_int_equal(sl_peersig_keys_parse(secret, sizeof secret - 1, &server_keys, &why), 0);
    sl_peersig *slot = sl_peersig_new(server_keys);
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", port);
    sl_peer_config pc = {.loop = &F.loop, .addr = addr, .sig = slot, .sender = "10.0.0.1:5454"};
    sl_peer *signed_peer, *plain;
    assert_int_equal(sl_peer_new(&pc, &signed_peer), 0);
    /* a signing peer needs its sender */
    sl_peer_config nosender = pc;
    nosender.sender = NULL;
    sl_peer *bad;
    assert_int_equal(sl_peer_new(&nosender, &bad), -EINVAL);
    plain = new_peer(port);
    result r[2];
    memset(r, 0, sizeof r);
    sl_buf b = framed("body");
    assert_int_equal(sl_peer_call(signed_peer, "/t.S/Signed", &b, 2000, on_result, &r[0]), 0);
    b = framed("body");
    assert_int_equal(sl_peer_call(plain, "/t.S/Signed", &b, 2000, on_result, &r[1]), 0);
    run_until(2);
    assert_int_equal(r[0].err, 0);
    assert_int_equal(r[0].grpc_status, 0);
    assert_int_equal(r[0].len, strlen("10.0.0.1:5454"));
    assert_memory_equal(r[0].msg, "10.0.0.1:5454", r[0].len);
    assert_int_equal(r[1].grpc_status, 16);
    assert_string_equal(r[1].message, "no signature");
    sl_buf_free(&b);
    sl_peer_close(signed_peer);
    sl_peer_close(plain);
    stop_server(srv);
    sl_peersig_free(slot);
    sl_peersig_keys_unref(server_keys);
    server_keys = NULL;
}

static void test_deadline(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    sl_peer *p = new_peer(port);
    result slow = {0}, fast = {0};
    sl_buf b = framed("late");
    int answered = atomic_load(&slow_answers);
    uint64_t t0 = uv_now(&F.loop);
    assert_int_equal(sl_peer_call(p, "/t.S/Slow", &b, 50, on_result, &slow), 0);
    run_until(1);
    uv_update_time(&F.loop);
    assert_int_equal(slow.err, -ETIMEDOUT);
    assert_true(uv_now(&F.loop) - t0 >= 50);
    /* at its deadline, not at the answer: the server (3 s) had not answered yet. The bound is
     * slack for a busy machine under ASan, still far below the answer. */
    assert_int_equal(atomic_load(&slow_answers), answered);
    assert_true(uv_now(&F.loop) - t0 < 1500);
    /* the connection still serves */
    sl_buf b2 = framed("again");
    assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b2, 2000, on_result, &fast), 0);
    run_until(1);
    assert_int_equal(fast.err, 0);
    assert_memory_equal(fast.msg, "again", 5);
    sl_peer_stats st;
    sl_peer_stats_get(p, &st);
    assert_int_equal(st.timeouts, 1);
    assert_int_equal(st.connects, 1);
    sl_buf_free(&b);
    sl_buf_free(&b2);
    sl_peer_close(p);
    stop_server(srv);
}

static void test_refused_then_backoff_then_recovers(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_peer *p = new_peer(port);
    result r = {0};
    sl_buf b = framed("x");
    assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b, 20000, on_result, &r), 0);
    uint64_t t0 = uv_now(&F.loop);
    run_until(1);
    assert_int_equal(r.err, -ECONNREFUSED);
    assert_true(uv_now(&F.loop) - t0 < 10000); /* quickly, not at the 20 s deadline */
    /* in the backoff, calls fail at once and keep their buffer */
    b = framed("y");
    assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b, 2000, on_result, &r), -ECONNREFUSED);
    assert_true(b.len > 0);
    assert_int_equal(r.calls, 1);
    /* a server comes; once the backoff is over the next call gets through */
    sl_server *srv = start_server(port);
    int rc;
    uv_timer_t wait;
    uv_timer_init(&F.loop, &wait);
    do {
        /* let loop time pass without a busy spin: a short timer on the client loop */
        uv_timer_start(&wait, on_guard, 20, 0);
        uv_run(&F.loop, UV_RUN_ONCE);
        rc = sl_peer_call(p, "/t.S/Echo", &b, 2000, on_result, &r);
    } while (rc == -ECONNREFUSED);
    uv_close((uv_handle_t *)&wait, NULL);
    assert_int_equal(rc, 0);
    run_until(1);
    assert_int_equal(r.err, 0);
    assert_memory_equal(r.msg, "y", 1);
    sl_buf_free(&b);
    sl_peer_close(p);
    stop_server(srv);
}

static void test_server_goes_away(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    sl_peer *p = new_peer(port);
    result ok = {0}, lost = {0};
    sl_buf b = framed("1");
    assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b, 2000, on_result, &ok), 0);
    run_until(1);
    assert_int_equal(ok.err, 0);
    /* a call in flight when the server dies fails, promptly */
    b = framed("2");
    assert_int_equal(sl_peer_call(p, "/t.S/Late", &b, 20000, on_result, &lost), 0);
    uv_run(&F.loop, UV_RUN_NOWAIT); /* sent */
    stop_server(srv);
    uint64_t t0 = uv_now(&F.loop);
    run_until(1);
    assert_true(lost.err == -ECONNRESET || lost.err == -ECONNREFUSED);
    assert_true(uv_now(&F.loop) - t0 < 10000); /* when the server went, not at the deadline */
    /* a new server on the port: the next call reconnects at once (the old one had worked) */
    srv = start_server(port);
    result again = {0};
    b = framed("3");
    assert_int_equal(sl_peer_call(p, "/t.S/Echo", &b, 2000, on_result, &again), 0);
    run_until(1);
    assert_int_equal(again.err, 0);
    sl_peer_stats st;
    sl_peer_stats_get(p, &st);
    assert_int_equal(st.connects, 2);
    sl_buf_free(&b);
    sl_peer_close(p);
    stop_server(srv);
}

static void test_close_cancels(void **state)
{
    (void)state;
    uint16_t port = free_port();
    sl_server *srv = start_server(port);
    sl_peer *p = new_peer(port);
    result r[3];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 3; i++) {
        sl_buf b = framed("z");
        assert_int_equal(sl_peer_call(p, "/t.S/Late", &b, 3000, on_result, &r[i]), 0);
        sl_buf_free(&b);
    }
    uv_run(&F.loop, UV_RUN_NOWAIT);
    sl_peer_close(p);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].calls, 1);
        assert_int_equal(r[i].err, -ECANCELED);
    }
    stop_server(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_addr),
        cmocka_unit_test_setup_teardown(test_calls_share_a_connection, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_call, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grpc_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signed_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_then_backoff_then_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_goes_away, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_cancels, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

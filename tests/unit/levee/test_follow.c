/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client-proxy following its topology, in one process with real servers: three "limiters"
 * (sl_server, answering 200 with X-Who: their name), the proxy (sl_proxy on its own sl_server
 * worker thread) and a client (sl_peer_http on the test's loop). The test thread changes the
 * topology while the proxy runs, as a gossip feed would: a LEAVING limiter gets no new request, a
 * removed one neither, an added one takes its share at once, a DEAD one none; a listed limiter
 * whose port is closed costs no request (failover to the next by HRW, marked down). DF is 1 (no
 * quota source): a resource goes to its HRW owner among the alive limiters.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cluster/peer.h"
#include "net/server.h"
#include "levee/proxy.h"

#define NRES 24

static void limiter_handle(void *ud, sl_exchange *ex)
{
    const char *who = ud;
    sl_http_header h[1] = {{"x-who", 5, who, strlen(who)}};
    sl_http_response r = {.status = 200, .headers = h, .nheaders = 1};
    sl_exchange_respond(ex, &r);
}

static void not_found(void *ud, sl_exchange *ex)
{
    (void)ud;
    sl_exchange_respond_simple(ex, 404, NULL, NULL, 0);
}

static void px_start(void *ud, int worker, uv_loop_t *loop)
{
    sl_proxy_worker_start(ud, worker, loop);
}

static void px_stop(void *ud, int worker, uv_loop_t *loop)
{
    (void)loop;
    sl_proxy_worker_stop(ud, worker);
}

static sl_server *serve(sl_http_handler h, void *ud, sl_proxy *hooks)
{
    sl_server_config c;
    sl_server_config_defaults(&c);
    c.host = "127.0.0.1";
    c.port = 0;
    c.workers = 1;
    c.handler = h;
    c.handler_ud = ud;
    if (hooks) {
        c.on_worker_start = px_start;
        c.on_worker_stop = px_stop;
        c.hooks_ud = hooks;
    }
    sl_server *s;
    assert_int_equal(sl_server_start(&s, &c), 0);
    return s;
}

static void stop(sl_server *s)
{
    sl_server_shutdown(s, 0);
    sl_server_wait(s);
    sl_server_free(s);
}

static uv_loop_t loop;
static int got;
static char who[NRES][8];
static int status[NRES];

static void on_http(void *ud, const sl_peer_http_result *r)
{
    int i = (int)(intptr_t)ud;
    status[i] = r->err ? r->err : r->status;
    who[i][0] = '\0';
    for (size_t k = 0; k < r->nfields; k++)
        if (r->fields[k].name_len == 5 && !memcmp(r->fields[k].name, "x-who", 5))
            snprintf(who[i], sizeof who[i], "%.*s", (int)r->fields[k].value_len,
                     r->fields[k].value);
    got++;
}

/* One /attempt per resource r0..r23 through the proxy; who answered each, in who[]. */
static void round_trip(sl_peer *client)
{
    got = 0;
    for (int i = 0; i < NRES; i++) {
        char res[16];
        snprintf(res, sizeof res, "r%d", i);
        sl_h2c_field f[1] = {{"x-resource", 10, res, strlen(res)}};
        assert_int_equal(sl_peer_http(client, "POST", "/attempt", f, 1, NULL, 5000, on_http,
                                      (void *)(intptr_t)i), 0);
    }
    while (got < NRES)
        uv_run(&loop, UV_RUN_ONCE);
    for (int i = 0; i < NRES; i++)
        assert_int_equal(status[i], 200);
}

static int answered_by(const char *name)
{
    int n = 0;
    for (int i = 0; i < NRES; i++)
        n += strcmp(who[i], name) == 0;
    return n;
}

static void addr_of(sl_server *s, char *out, size_t size)
{
    snprintf(out, size, "127.0.0.1:%u", sl_server_port(s));
}

static void test_follows_topology_changes(void **state)
{
    (void)state;
    uv_loop_init(&loop);
    sl_server *lim[3];
    char addr[3][64];
    const char *names[3] = {"A", "B", "C"};
    for (int i = 0; i < 3; i++) {
        lim[i] = serve(limiter_handle, (void *)names[i], NULL);
        addr_of(lim[i], addr[i], sizeof addr[i]);
    }
    static sl_topology topo;
    sl_topology_init(&topo);
    assert_int_equal(sl_topology_add(&topo, "A", addr[0], SL_MEMBER_ALIVE), 0);
    assert_int_equal(sl_topology_add(&topo, "B", addr[1], SL_MEMBER_ALIVE), 0);
    sl_proxy_config pc = {.topology = &topo, .workers = 1, .timeout_ms = 2000,
                          .probe_interval_ms = 50, .fallback = not_found};
    sl_proxy *px;
    assert_int_equal(sl_proxy_new(&pc, &px), 0);
    sl_server *front = serve(sl_proxy_handle, px, px);
    char faddr[64];
    addr_of(front, faddr, sizeof faddr);
    sl_peer_config cc = {.loop = &loop, .addr = faddr};
    sl_peer *client;
    assert_int_equal(sl_peer_new(&cc, &client), 0);

    round_trip(client);
    int a = answered_by("A"), b = answered_by("B");
    assert_int_equal(a + b, NRES);
    assert_true(a > 0 && b > 0);

    sl_topology_set_status(&topo, "A", SL_MEMBER_LEFT); /* a graceful stop begins */
    round_trip(client);
    assert_int_equal(answered_by("B"), NRES);

    sl_topology_set_status(&topo, "A", SL_MEMBER_ALIVE);
    sl_topology_remove(&topo, "B");
    round_trip(client);
    assert_int_equal(answered_by("A"), NRES);

    sl_topology_add(&topo, "C", addr[2], SL_MEMBER_ALIVE); /* a limiter joins */
    round_trip(client);
    int c = answered_by("C");
    assert_true(c > 0 && c < NRES);
    assert_int_equal(answered_by("A") + c, NRES);

    sl_topology_set_status(&topo, "C", SL_MEMBER_DEAD);
    round_trip(client);
    assert_int_equal(answered_by("A"), NRES);

    /* a listed limiter nobody answers for: its resources fail over to A, nothing is lost */
    stop(lim[2]);
    sl_topology_set_status(&topo, "C", SL_MEMBER_ALIVE);
    round_trip(client);
    assert_int_equal(answered_by("A"), NRES);
    round_trip(client); /* marked down: straight to A now */
    assert_int_equal(answered_by("A"), NRES);

    sl_peer_close(client);
    while (uv_run(&loop, UV_RUN_NOWAIT))
        ;
    stop(front);
    sl_proxy_free(px);
    stop(lim[0]);
    stop(lim[1]);
    sl_topology_destroy(&topo);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follows_topology_changes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Router tests: three nodes in one process, each an engine + a router + a real server on
 * loopback (2 workers), wired like the daemon's service (a small handler here: GetRateLimits ->
 * sl_router_submit, PeersV1 -> sl_router_peer_rate_limits / sl_router_update_globals). The test
 * talks gRPC to them with the peer client on its own loop.
 *
 * Checked: every node names the same owner for a key and the cluster admits exactly `limit`
 * whichever nodes the requests reach; forwarded items travel in batches; GLOBAL answers come
 * from the local copy at once and converge on the owner's state after a sync; a dead owner gives
 * per-item errors quickly (never a hang), --fail-open answers locally and says so; a new peer
 * list moves keys and calls succeed again; HealthCheck reports peer_count and failing peers; a
 * standalone router decides everything locally.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/gubernator.h"
#include "cluster/peer.h"
#include "cluster/picker.h"
#include "cluster/router.h"
#include "cluster/peerwire.h"
#include "net/server.h"
#include "sluice/clock.h"
#include "wire/grpc_frame.h"

#define NNODES 3

/* ---- a node ---- */

typedef struct node {
    char addr[32];
    uint16_t port;
    sl_engine *engine;
    sl_router *router;
    sl_server *server;
    sl_gub_config gub;
    _Atomic int peer_calls, from_peer; /* PeersV1 calls received, and those sl_router_is_peer
                                          recognised (what node/service.c lets through) */
} node;

typedef struct call {
    node *n;
    sl_exchange *ex;
    sl_batch b;
} call;

static void answer(void *ud, sl_batch *b)
{
    call *c = ud;
    sl_buf out;
    sl_buf_init(&out, 0);
    size_t mark;
    sl_grpc_frame_begin(&out, &mark);
    sl_gub_encode_peer_resp_pb(b, &out); /* same wire shape as GetRateLimitsResp */
    sl_grpc_frame_end(&out, mark);
    sl_exchange_respond_grpc(c->ex, out.data, out.len, 0, NULL);
    sl_buf_free(&out);
    sl_batch_free(&c->b);
    free(c);
}

static void handle(void *ud, sl_exchange *ex)
{
    node *n = ud;
    const sl_http_request *rq = sl_exchange_request(ex);
    sl_grpc_msg m;
    const char *e;
    if (!rq->grpc || sl_grpc_frame_decode(rq->body, rq->body_len, 1 << 20, &m, &e)) {
        sl_exchange_respond_grpc_status(ex, 3, "bad request");
        return;
    }
    int worker = sl_exchange_worker(ex);
    int64_t now = sl_exchange_now_ms(ex);
    if (strncmp(rq->path, "/pb.gubernator.PeersV1/", 23) == 0) {
        n->peer_calls++;
        n->from_peer += sl_router_is_peer(n->router, worker, rq->peer);
    }
    call *c = calloc(1, sizeof *c);
    c->n = n;
    c->ex = ex;
    sl_batch_init(&c->b, 0);
    sl_grpc_status st;
    if (strcmp(rq->path, SL_PEERWIRE_PATH_UPDATE_PEER_GLOBALS) == 0) {
        sl_peerwire_global *g;
        size_t ng;
        if (sl_peerwire_decode_globals(n->gub.max_msg, m.data, m.len, &c->b, &g, &ng, &st) == 0)
            sl_router_update_globals(n->router, worker, g, ng, now);
        static const uint8_t empty[5] = {0};
        sl_exchange_respond_grpc(ex, empty, 5, 0, NULL);
        sl_batch_free(&c->b);
        free(c);
        return;
    }
    bool peer = strcmp(rq->path, SL_PEERWIRE_PATH_GET_PEER_RATE_LIMITS) == 0;
    int rc = peer ? sl_gub_decode_peer_pb(&n->gub, m.data, m.len, &c->b, &st)
                  : sl_gub_decode_pb(&n->gub, m.data, m.len, &c->b, &st);
    if (rc) {
        sl_exchange_respond_grpc_status(ex, st.code, st.message);
        sl_batch_free(&c->b);
        free(c);
        return;
    }
    /* through the router's deciders, as a clustered node's service hands them its batches
     * (sl_router_peer_rate_limits and sl_router_submit behind them) */
    sl_decider d = peer ? sl_router_peer_decider(n->router) : sl_router_decider(n->router);
    sl_decider_submit(&d, worker, &c->b, now, answer, c);
}

/* As a node runs them: the router as its membership, then again as its decider (ignored). */
static void hook_start(void *ud, int worker, uv_loop_t *loop)
{
    node *n = ud;
    sl_router_worker_start(n->router, worker, loop);
    sl_decider d = sl_router_decider(n->router);
    sl_decider_worker_start(&d, worker, loop);
}

static void hook_stop(void *ud, int worker, uv_loop_t *loop)
{
    (void)loop;
    node *n = ud;
    sl_decider d = sl_router_decider(n->router);
    sl_decider_worker_stop(&d, worker);
    sl_router_worker_stop(n->router, worker);
}

static node N[NNODES];
static const char *ADDRS[NNODES];

/* ---- the test's client loop ---- */

static uv_loop_t L;
static uv_timer_t guard, pause_t;
static bool guard_fired, paused;
static int got, want;

static void on_guard(uv_timer_t *t)
{
    (void)t;
    guard_fired = true;
}

static void on_pause(uv_timer_t *t)
{
    (void)t;
    paused = true;
}

static void run_until(int n)
{
    want = got + n;
    guard_fired = false;
    uv_timer_start(&guard, on_guard, 5000, 0);
    while (got < want && !guard_fired)
        uv_run(&L, UV_RUN_ONCE);
    uv_timer_stop(&guard);
    assert_false(guard_fired);
}

/* Let `ms` of real time pass on the client loop (the cluster works meanwhile). */
static void pass_ms(uint64_t ms)
{
    paused = false;
    uv_timer_start(&pause_t, on_pause, ms, 0);
    while (!paused)
        uv_run(&L, UV_RUN_ONCE);
}

static uint16_t free_port(void)
{
    uv_tcp_t t;
    uv_tcp_init(&L, &t);
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_bind(&t, (const struct sockaddr *)&a, 0);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    uv_tcp_getsockname(&t, (struct sockaddr *)&ss, &len);
    uint16_t port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&L, UV_RUN_NOWAIT);
    return port;
}

static void node_start(node *n, bool fail_open, int64_t sync_ms)
{
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    assert_int_equal(sl_engine_new(&ec, &n->engine), 0);
    sl_gub_config_default(&n->gub);
    sl_router_config rc = {
        .engine = n->engine,
        .discovery = SL_DISCOVERY_STATIC,
        .workers = 2,
        .advertise_addr = n->addr,
        .peers = ADDRS,
        .n_peers = NNODES,
        .picker = SL_PICKER_RING,
        .replicas = 128,
        .batch_wait_ns = 500000,
        .batch_timeout_ns = 300000000,
        .global_sync_wait_ns = sync_ms * 1000000,
        .fail_open = fail_open,
    };
    assert_int_equal(sl_router_new(&rc, &n->router), 0);
    sl_server_config sc;
    sl_server_config_defaults(&sc);
    sc.host = "127.0.0.1";
    sc.port = n->port;
    sc.workers = 2;
    sc.handler = handle;
    sc.handler_ud = n;
    sc.on_worker_start = hook_start;
    sc.on_worker_stop = hook_stop;
    sc.hooks_ud = n;
    assert_int_equal(sl_server_start(&n->server, &sc), 0);
    assert_int_equal(sl_router_start(n->router, n->server), 0);
}

static void node_stop(node *n)
{
    if (!n->server)
        return;
    sl_router_stop(n->router);
    sl_server_shutdown(n->server, 0);
    sl_server_wait(n->server);
    sl_server_free(n->server);
    sl_router_free(n->router);
    sl_engine_free(n->engine);
    n->server = NULL;
}

static int setup_opts(bool fail_open)
{
    memset(N, 0, sizeof N);
    uv_loop_init(&L);
    uv_timer_init(&L, &guard);
    uv_timer_init(&L, &pause_t);
    got = want = 0;
    for (int i = 0; i < NNODES; i++) {
        N[i].port = free_port();
        snprintf(N[i].addr, sizeof N[i].addr, "127.0.0.1:%u", N[i].port);
        ADDRS[i] = N[i].addr;
    }
    for (int i = 0; i < NNODES; i++)
        node_start(&N[i], fail_open, 30);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    return setup_opts(false);
}

static int setup_fail_open(void **state)
{
    (void)state;
    return setup_opts(true);
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NNODES; i++)
        node_stop(&N[i]);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_close((uv_handle_t *)&pause_t, NULL);
    while (uv_run(&L, UV_RUN_NOWAIT))
        ;
    uv_loop_close(&L);
    return 0;
}

/* ---- calls ---- */

typedef struct answer_rec {
    int err;
    int status;
    int64_t remaining;
    char error[300];
    char owner[64];
    char fail_open[200];
} answer_rec;

typedef struct pending {
    answer_rec *out;
    size_t n;
} pending;

static void on_answer(void *ud, const sl_peer_result *r)
{
    pending *p = ud;
    if (r->err || r->grpc_status) {
        for (size_t k = 0; k < p->n; k++)
            p->out[k].err = r->err ? r->err : -EIO;
    } else {
        sl_batch b;
        sl_batch_init(&b, 0);
        sl_batch_alloc_items(&b, p->n);
        sl_gub_config gc;
        sl_gub_config_default(&gc);
        sl_grpc_status st;
        assert_int_equal(sl_peerwire_decode_resp(gc.max_msg, r->msg, r->len, &b, NULL, p->n, &st), 0);
        for (size_t k = 0; k < p->n; k++) {
            answer_rec *a = &p->out[k];
            a->status = b.resps[k].status;
            a->remaining = b.resps[k].remaining;
            snprintf(a->error, sizeof a->error, "%s", b.resps[k].error ? b.resps[k].error : "");
            const char *o = sl_batch_meta_get(&b.resp_meta[k], "owner");
            snprintf(a->owner, sizeof a->owner, "%s", o ? o : "");
            const char *f = sl_batch_meta_get(&b.resp_meta[k], "fail_open");
            snprintf(a->fail_open, sizeof a->fail_open, "%s", f ? f : "");
        }
        sl_batch_free(&b);
    }
    free(p);
    got++;
}

/* Start a GetRateLimits call with n requests of key key_fmt % k to `p`. */
static void send_call(sl_peer *p, const char *key_prefix, size_t first, size_t n, int64_t hits,
                      int64_t limit, int32_t behavior, answer_rec *out)
{
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_batch_alloc_items(&b, n);
    for (size_t k = 0; k < n; k++) {
        char key[64];
        snprintf(key, sizeof key, "%s%zu", key_prefix, first + k);
        sl_request *q = &b.reqs[k];
        q->name = "rl";
        q->name_len = 2;
        q->unique_key = sl_batch_strndup(&b, key, strlen(key));
        q->unique_key_len = strlen(key);
        q->hits = hits;
        q->limit = limit;
        q->duration = 60000;
        q->behavior = behavior;
    }
    sl_buf buf;
    sl_buf_init(&buf, 0);
    size_t mark;
    sl_grpc_frame_begin(&buf, &mark);
    sl_peerwire_encode_req(&b, NULL, 0, &buf);
    sl_grpc_frame_end(&buf, mark);
    pending *pd = malloc(sizeof *pd);
    pd->out = out;
    pd->n = n;
    assert_int_equal(sl_peer_call(p, SL_GUB_PATH_GET_RATE_LIMITS, &buf, 3000, on_answer, pd), 0);
    sl_buf_free(&buf);
    sl_batch_free(&b);
}

static sl_peer *client(node *n)
{
    sl_peer_config pc = {.loop = &L, .addr = n->addr};
    sl_peer *p;
    assert_int_equal(sl_peer_new(&pc, &p), 0);
    return p;
}

static const char *owner_of(const char *key)
{
    sl_picker *pk;
    assert_int_equal(sl_picker_new(SL_PICKER_RING, 128, ADDRS, NNODES, &pk), 0);
    static char buf[64];
    snprintf(buf, sizeof buf, "%s",
             sl_picker_addr(pk, sl_picker_owner(pk, sl_picker_key_hash(NULL, "rl", 2, key, strlen(key)))));
    sl_picker_free(pk);
    return buf;
}

/* ---- tests ---- */

static void test_exact_limit_and_same_owner(void **state)
{
    (void)state;
    sl_peer *c[NNODES];
    for (int i = 0; i < NNODES; i++)
        c[i] = client(&N[i]);
    answer_rec ans[30];
    memset(ans, 0, sizeof ans);
    /* 30 single-hit calls on one key, spread over the three nodes, all in flight at once */
    for (int k = 0; k < 30; k++)
        send_call(c[k % NNODES], "acct", 7, 1, 1, 10, 0, &ans[k]);
    run_until(30);
    int admitted = 0;
    const char *owner = owner_of("acct7");
    for (int k = 0; k < 30; k++) {
        assert_int_equal(ans[k].err, 0);
        assert_string_equal(ans[k].error, "");
        assert_string_equal(ans[k].owner, owner);
        if (ans[k].status == SL_UNDER_LIMIT)
            admitted++;
    }
    assert_int_equal(admitted, 10);
    /* many keys in one call: each answered, each by its owner */
    answer_rec many[300];
    memset(many, 0, sizeof many);
    send_call(c[0], "k", 0, 300, 1, 5, 0, many);
    run_until(1);
    int per_owner[NNODES] = {0};
    for (int k = 0; k < 300; k++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", k);
        assert_string_equal(many[k].error, "");
        assert_string_equal(many[k].owner, owner_of(key));
        assert_int_equal(many[k].remaining, 4);
        for (int i = 0; i < NNODES; i++)
            if (strcmp(many[k].owner, N[i].addr) == 0)
                per_owner[i]++;
    }
    for (int i = 0; i < NNODES; i++)
        assert_true(per_owner[i] > 50);
    /* the 200-odd remote items of that call went in a few peer calls, not one each */
    sl_router_stats st;
    sl_router_stats_get(N[0].router, &st);
    printf("node0: forwarded %" PRIu64 " items in %" PRIu64 " peer calls\n", st.forwarded,
           st.peer_calls);
    assert_true(st.forwarded >= 150);
    assert_true(st.peer_calls * 20 < st.forwarded);
    /* every forwarded call came from a member of the peer list (all on 127.0.0.1 here) */
    int received = 0;
    for (int i = 0; i < NNODES; i++) {
        received += N[i].peer_calls;
        assert_int_equal(N[i].from_peer, N[i].peer_calls);
    }
    assert_true(received > 0);
    for (int i = 0; i < NNODES; i++)
        sl_peer_close(c[i]);
}

static void test_no_batching_and_health(void **state)
{
    (void)state;
    sl_peer *c = client(&N[1]);
    answer_rec a[20];
    memset(a, 0, sizeof a);
    send_call(c, "nb", 0, 20, 1, 3, SL_NO_BATCHING, a);
    run_until(1);
    for (int k = 0; k < 20; k++) {
        char key[16];
        snprintf(key, sizeof key, "nb%d", k);
        assert_string_equal(a[k].error, "");
        assert_string_equal(a[k].owner, owner_of(key));
    }
    bool healthy;
    int32_t peers;
    char why[256];
    sl_router_health(N[1].router, &healthy, &peers, why, sizeof why);
    assert_true(healthy);
    assert_int_equal(peers, 3);
    assert_int_equal(sl_router_peer_count(N[1].router), 3);
    sl_peer_close(c);
}

static void test_global_converges(void **state)
{
    (void)state;
    sl_peer *c[NNODES];
    for (int i = 0; i < NNODES; i++)
        c[i] = client(&N[i]);
    const char *owner = owner_of("g0");
    int own = 0;
    for (int i = 0; i < NNODES; i++)
        if (strcmp(N[i].addr, owner) == 0)
            own = i;
    /* 10 hits on each node: non-owners answer from their fresh local copy */
    answer_rec a[30];
    memset(a, 0, sizeof a);
    for (int k = 0; k < 30; k++)
        send_call(c[k / 10], "g", 0, 1, 1, 100, SL_GLOBAL, &a[k]);
    run_until(30);
    for (int k = 0; k < 30; k++) {
        assert_string_equal(a[k].error, "");
        assert_string_equal(a[k].owner, owner);
        assert_int_equal(a[k].status, SL_UNDER_LIMIT);
    }
    /* two sync intervals later (30 ms each) every node's copy says what the owner says */
    pass_ms(150);
    answer_rec peek[NNODES];
    memset(peek, 0, sizeof peek);
    for (int i = 0; i < NNODES; i++)
        send_call(c[i], "g", 0, 1, 0, 100, SL_GLOBAL, &peek[i]);
    run_until(NNODES);
    for (int i = 0; i < NNODES; i++) {
        printf("node %d (%s): remaining %" PRId64 "\n", i, i == own ? "owner" : "non-owner",
               peek[i].remaining);
        assert_int_equal(peek[i].remaining, 70);
    }
    sl_router_stats st;
    sl_router_stats_get(N[own].router, &st);
    assert_true(st.broadcasts >= 1);
    for (int i = 0; i < NNODES; i++)
        sl_peer_close(c[i]);
}

/* Keys owned by node 2, among k0..k199. */
static int keys_of(int node_idx, int *out, int max)
{
    int n = 0;
    for (int k = 0; k < 200 && n < max; k++) {
        char key[16];
        snprintf(key, sizeof key, "d%d", k);
        if (strcmp(owner_of(key), N[node_idx].addr) == 0)
            out[n++] = k;
    }
    return n;
}

static void test_dead_owner_errors_then_new_list(void **state)
{
    (void)state;
    int ks[10];
    assert_int_equal(keys_of(2, ks, 10), 10);
    node_stop(&N[2]);
    sl_peer *c = client(&N[0]);
    answer_rec a[10];
    memset(a, 0, sizeof a);
    uint64_t t0 = uv_now(&L);
    for (int i = 0; i < 10; i++)
        send_call(c, "d", (size_t)ks[i], 1, 1, 5, 0, &a[i]);
    run_until(10);
    uv_update_time(&L);
    assert_true(uv_now(&L) - t0 < 1000); /* an error, quickly: not a hang */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(a[i].err, 0);
        assert_non_null(strstr(a[i].error, "from peer"));
        assert_non_null(strstr(a[i].error, N[2].addr));
    }
    bool healthy;
    int32_t peers;
    char why[256];
    sl_router_health(N[0].router, &healthy, &peers, why, sizeof why);
    assert_false(healthy);
    assert_non_null(strstr(why, N[2].addr));
    /* the membership source drops the dead node: the same keys now succeed */
    for (int i = 0; i < 2; i++)
        sl_router_set_peers(N[i].router, ADDRS, 2);
    pass_ms(20);
    memset(a, 0, sizeof a);
    for (int i = 0; i < 10; i++)
        send_call(c, "d", (size_t)ks[i], 1, 1, 5, 0, &a[i]);
    run_until(10);
    for (int i = 0; i < 10; i++) {
        assert_string_equal(a[i].error, "");
        assert_true(strcmp(a[i].owner, N[0].addr) == 0 || strcmp(a[i].owner, N[1].addr) == 0);
    }
    sl_router_health(N[0].router, &healthy, &peers, why, sizeof why);
    assert_true(healthy);
    assert_int_equal(peers, 2);
    sl_peer_close(c);
}

static void test_fail_open(void **state)
{
    (void)state;
    int ks[5];
    assert_int_equal(keys_of(2, ks, 5), 5);
    node_stop(&N[2]);
    sl_peer *c = client(&N[1]);
    answer_rec a[5];
    memset(a, 0, sizeof a);
    for (int i = 0; i < 5; i++)
        send_call(c, "d", (size_t)ks[i], 1, 1, 5, 0, &a[i]);
    run_until(5);
    for (int i = 0; i < 5; i++) {
        assert_string_equal(a[i].error, "");
        assert_int_equal(a[i].status, SL_UNDER_LIMIT);
        assert_int_equal(a[i].remaining, 4);
        assert_string_equal(a[i].owner, N[2].addr);
        assert_true(a[i].fail_open[0] != '\0');
    }
    sl_router_stats st;
    sl_router_stats_get(N[1].router, &st);
    assert_int_equal(st.fail_open, 5);
    sl_peer_close(c);
}

static void done_standalone(void *ud, sl_batch *b)
{
    (void)b;
    *(int *)ud += 1;
}

static void test_standalone(void **state)
{
    (void)state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    sl_engine *e;
    assert_int_equal(sl_engine_new(&ec, &e), 0);
    sl_router_config rc = {.engine = e};
    sl_router *r;
    assert_int_equal(sl_router_new(&rc, &r), 0);
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_batch_alloc_items(&b, 2);
    for (int i = 0; i < 2; i++) {
        b.reqs[i] = (sl_request){.name = "n", .name_len = 1, .unique_key = "u",
                                 .unique_key_len = 1, .hits = 1, .limit = 2, .duration = 1000};
    }
    int calls = 0;
    sl_router_submit(r, 0, &b, 1000, done_standalone, &calls);
    assert_int_equal(calls, 1);
    /* standalone: nobody is a peer */
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    assert_false(sl_router_is_peer(r, 0, (const struct sockaddr *)&lo));
    assert_int_equal(b.resps[1].remaining, 0);
    assert_null(sl_batch_meta_get(&b.resp_meta[0], "owner"));
    bool healthy;
    int32_t peers;
    char why[16];
    sl_router_health(r, &healthy, &peers, why, sizeof why);
    assert_true(healthy);
    assert_int_equal(peers, 1);
    sl_batch_free(&b);
    sl_router_free(r);
    sl_engine_free(e);
}

/* A standalone router's deciders: each answers before it returns, from the engine, without an
 * owner; the worker hooks have nothing to do. */
static void test_standalone_deciders(void **state)
{
    (void)state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    sl_engine *e;
    assert_int_equal(sl_engine_new(&ec, &e), 0);
    sl_router_config rc = {.engine = e};
    sl_router *r;
    assert_int_equal(sl_router_new(&rc, &r), 0);
    sl_decider d = sl_router_decider(r), pd = sl_router_peer_decider(r);
    assert_string_equal(d.ops->name, "router");
    assert_string_equal(pd.ops->name, "peers");
    sl_decider_worker_start(&d, 0, NULL);
    sl_batch b;
    sl_batch_init(&b, 0);
    sl_batch_alloc_items(&b, 2);
    for (int i = 0; i < 2; i++)
        b.reqs[i] = (sl_request){.name = "n", .name_len = 1, .unique_key = i ? "v" : "u",
                                 .unique_key_len = 1, .hits = 1, .limit = 5, .duration = 1000};
    int calls = 0;
    sl_decider_submit(&d, 0, &b, 1000, done_standalone, &calls);
    assert_int_equal(calls, 1);
    assert_int_equal(b.resps[0].remaining, 4);
    assert_int_equal(b.resps[1].remaining, 4);
    sl_batch_answer(&b, 1, "answered while decoding"); /* skipped */
    sl_decider_submit(&pd, 0, &b, 1000, done_standalone, &calls);
    assert_int_equal(calls, 2);
    assert_int_equal(b.resps[0].remaining, 3);
    assert_string_equal(b.resps[1].error, "answered while decoding");
    assert_null(sl_batch_meta_get(&b.resp_meta[0], "owner"));
    sl_decider_worker_stop(&d, 0);
    sl_batch_free(&b);
    sl_router_free(r);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standalone),
        cmocka_unit_test(test_standalone_deciders),
        cmocka_unit_test_setup_teardown(test_exact_limit_and_same_owner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_batching_and_health, setup, teardown),
        cmocka_unit_test_setup_teardown(test_global_converges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_owner_errors_then_new_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_open, setup_fail_open, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

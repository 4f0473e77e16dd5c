/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client-proxy's observer feed (levee/feed.h). sl_feed_apply: limiters only, alive and
 * suspect -> ALIVE, left -> LEFT, dead -> DEAD, a full view removes what it does not list, a
 * repeated view is no change. Then the feed against a real server (sl_server) streaming gRPC
 * with the net layer's server streaming: the full view and a change land in the topology, an
 * observer that goes away is left for the next one, and when none answers for the retry window
 * on_fatal runs.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/server.h"
#include "levee/feed.h"

static sl_topowire_member mk(const char *name, const char *role, const char *svc,
                             sl_member_status st)
{
    sl_topowire_member m;
    memset(&m, 0, sizeof m);
    snprintf(m.mb.name, sizeof m.mb.name, "%s", name);
    snprintf(m.mb.role, sizeof m.mb.role, "%s", role);
    snprintf(m.mb.service, sizeof m.mb.service, "%s", svc);
    m.mb.status = st;
    return m;
}

static const sl_member *find(sl_topology *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->m[i].name, name))
            return &t->m[i];
    return NULL;
}

static void test_apply(void **state)
{
    static sl_topology t;
    sl_topology_init(&t);
    sl_topology_add(&t, "stale", "10.0.0.9:1", SL_MEMBER_ALIVE);
    sl_topowire_member v[5] = {mk("l1", "limiter", "10.0.0.1:1", SL_MEMBER_ALIVE),
                               mk("l2", "limiter", "10.0.0.2:1", SL_MEMBER_SUSPECT),
                               mk("l3", "limiter", "10.0.0.3:1", SL_MEMBER_LEFT),
                               mk("o1", "observer", "10.0.0.4:1", SL_MEMBER_ALIVE),
                               mk("p1", "limiter", "", SL_MEMBER_ALIVE)}; /* no service */
    sl_topowire_update u = {.version = 5, .full = true, .n = 5};
    assert_true(sl_feed_apply(&t, &u, v) > 0);
    assert_int_equal(t.n, 3);
    assert_null(find(&t, "stale"));
    assert_null(find(&t, "o1"));
    assert_int_equal(find(&t, "l1")->status, SL_MEMBER_ALIVE);
    assert_int_equal(find(&t, "l2")->status, SL_MEMBER_ALIVE);
    assert_int_equal(find(&t, "l3")->status, SL_MEMBER_LEFT);
    assert_string_equal(find(&t, "l1")->service, "10.0.0.1:1");
    /* the same view again: no change, no version step */
    uint64_t ver = sl_topology_version(&t);
    assert_int_equal(sl_feed_apply(&t, &u, v), 0);
    assert_int_equal(sl_topology_version(&t), ver);
    /* a change: l1 dead */
    sl_topowire_member d = mk("l1", "limiter", "10.0.0.1:1", SL_MEMBER_DEAD);
    sl_topowire_update c = {.version = 6, .n = 1};
    assert_int_equal(sl_feed_apply(&t, &c, &d), 1);
    assert_int_equal(find(&t, "l1")->status, SL_MEMBER_DEAD);
    assert_int_equal(t.n, 3); /* a change is not a full view: nothing removed */
    sl_topology_destroy(&t);
}

/* ---- a real streaming server ---- */

static void watch_handler(void *ud, sl_exchange *ex)
{
    (void)ud;
    sl_http_header ct = SL_HTTP_HEADER("content-type", "application/grpc");
    sl_http_response head = {.status = 200, .headers = &ct, .nheaders = 1};
    assert_int_equal(sl_exchange_stream_open(ex, &head), 0);
    sl_topowire_member v[2] = {mk("a", "limiter", "127.0.0.1:1001", SL_MEMBER_ALIVE),
                               mk("b", "limiter", "127.0.0.1:1002", SL_MEMBER_ALIVE)};
    sl_topowire_member left = mk("b", "limiter", "127.0.0.1:1002", SL_MEMBER_LEFT);
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_topowire_encode(&b, 1, true, v, 2), 0);
    assert_int_equal(sl_topowire_encode(&b, 2, false, &left, 1), 0);
    assert_int_equal(sl_exchange_stream_push(ex, b.data, b.len, 1 << 20), 0);
    sl_buf_free(&b);
    /* then the stream ends, as when an observer stops */
    sl_http_header tr = SL_HTTP_HEADER("grpc-status", "14");
    assert_int_equal(sl_exchange_stream_close(ex, &tr, 1), 0);
}

static sl_server *serve(void)
{
    sl_server_config c;
    sl_server_config_defaults(&c);
    c.host = "127.0.0.1";
    c.port = 0;
    c.workers = 1;
    c.handler = watch_handler;
    sl_server *s;
    assert_int_equal(sl_server_start(&s, &c), 0);
    return s;
}

static _Atomic int fatal;

static void on_fatal(void *ud, const char *why)
{
    (void)ud;
    assert_non_null(strstr(why, "no observer answered"));
    atomic_fetch_add(&fatal, 1);
}

/* Wait (bounded) for a condition another thread makes true. */
#define WAIT_FOR(cond)                                                                            \
    do {                                                                                          \
        for (int i_ = 0; i_ < 500 && !(cond); i_++)                                               \
            usleep(10000);                                                                        \
        assert_true(cond);                                                                        \
    } while (0)

static void test_stream_then_gives_up(void **state)
{
    static sl_topology t;
    sl_topology_init(&t);
    sl_server *s = serve();
    char addr[32], dead[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", sl_server_port(s));
    snprintf(dead, sizeof dead, "127.0.0.1:1"); /* nobody: connection refused */
    const char *obs[2] = {dead, addr};
    sl_feed_config c = {.topology = &t, .observers = obs, .n_observers = 2, .timeout_ms = 500,
                        .retry_window_ms = 300, .on_fatal = on_fatal};
    sl_feed *f;
    assert_int_equal(sl_feed_start(&c, &f), 0);
    WAIT_FOR(t.n == 2 && find(&t, "b") && find(&t, "b")->status == SL_MEMBER_LEFT);
    assert_int_equal(find(&t, "a")->status, SL_MEMBER_ALIVE);
    assert_string_equal(find(&t, "a")->service, "127.0.0.1:1001");
    /* the observer is gone for good: after the retry window, on_fatal once */
    sl_server_shutdown(s, 0);
    sl_server_wait(s);
    sl_server_free(s);
    WAIT_FOR(atomic_load(&fatal) == 1);
    assert_int_equal(t.n, 2); /* the last view stays */
    sl_feed_free(f);
    assert_int_equal(atomic_load(&fatal), 1);
    sl_topology_destroy(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply),
        cmocka_unit_test(test_stream_then_gives_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The observer (levee/observer.h) with real parts on loopback: an observer's gossip node, a
 * server whose handler is the observer, limiters joining the overlay, and a client-proxy's feed
 * (levee/feed.h) subscribed to the stream. Checked: the full view reaches the feed (limiters
 * only), a limiter that joins later appears, one that leaves gracefully becomes LEAVING, the
 * watcher gauge counts the stream, a stream past --observer-max-watchers is refused, everything
 * but Watch goes to the fallback, and the registration value is the JSON the Levee document
 * prints.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../support/freeport.h"

#include "gossip/swimmeta.h"
#include "levee/observer.h"
#include "levee/feed.h"

typedef struct gnode {
    char gaddr[32], svc[32];
    uint8_t meta[SL_SWIM_MAX_META];
    sl_gossipnode *g;
} gnode;

static void gstart(gnode *n, const char *name, const char *role, const char *seed)
{
    snprintf(n->gaddr, sizeof n->gaddr, "127.0.0.1:%d", sl_test_free_port());
    snprintf(n->svc, sizeof n->svc, "10.9.0.%d:5454", (int)strlen(name) + (int)name[0] % 50);
    int ml = sl_swimmeta_put(n->meta, sizeof n->meta, 0, "service", n->svc);
    ml = sl_swimmeta_put(n->meta, sizeof n->meta, (size_t)ml, "role", role);
    const char *seeds[1] = {seed};
    sl_gossipnode_config c = {
        .addr = n->gaddr, .name = name, .seeds = seeds, .n_seeds = seed ? 1 : 0,
        .meta = n->meta, .meta_len = (size_t)ml,
        .tun = {.probe_interval_ms = 100, .probe_timeout_ms = 50, .gossip_interval_ms = 20,
                .pushpull_interval_ms = 1000},
    };
    char err[256] = "";
    if (sl_gossipnode_start(&c, &n->g, err, sizeof err))
        fail_msg("gossip start: %s", err);
}

static void fallback(void *ud, sl_exchange *ex)
{
    (void)ud;
    sl_exchange_respond_simple(ex, 204, NULL, NULL, 0);
}

static sl_observer *obs;

static void w_start(void *ud, int worker, uv_loop_t *loop)
{
    (void)ud;
    sl_observer_worker_start(obs, worker, loop);
}

static void w_stop(void *ud, int worker, uv_loop_t *loop)
{
    (void)ud;
    (void)loop;
    sl_observer_worker_stop(obs, worker);
}

static const sl_member *find(sl_topology *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->m[i].name, name))
            return &t->m[i];
    return NULL;
}

static size_t count(sl_topology *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

static sl_member_status status_of(sl_topology *t, const char *name)
{
    pthread_mutex_lock(&t->mu);
    const sl_member *m = find(t, name);
    sl_member_status st = m ? m->status : (sl_member_status)-1;
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* Wait (bounded) for what other threads make true. */
#define WAIT_FOR(cond)                                                                            \
    do {                                                                                          \
        for (int i_ = 0; i_ < 500 && !(cond); i_++)                                               \
            usleep(10000);                                                                        \
        assert_true(cond);                                                                        \
    } while (0)

static void test_stream_to_a_feed(void **state)
{
    gnode o, l1, l2;
    gstart(&o, "obs", "observer", NULL);
    gstart(&l1, "l1", "limiter", o.gaddr);
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    char err[256];
    sl_observer_config oc = {.gossip = o.g, .workers = 1, .heartbeat_ms = 50,
                             .max_watchers = 1, .max_queue_bytes = 1 << 16, .metrics = m,
                             .fallback = fallback};
    assert_int_equal(sl_observer_new(&oc, &obs, err, sizeof err), 0);
    sl_server_config sc;
    sl_server_config_defaults(&sc);
    sc.host = "127.0.0.1";
    sc.port = 0;
    sc.workers = 1;
    sc.handler = sl_observer_handle;
    sc.handler_ud = obs;
    sc.on_worker_start = w_start;
    sc.on_worker_stop = w_stop;
    sl_server *srv;
    assert_int_equal(sl_server_start(&srv, &sc), 0);
    assert_int_equal(sl_observer_start(obs, srv), 0);

    static sl_topology t;
    sl_topology_init(&t);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", sl_server_port(srv));
    const char *list[1] = {addr};
    sl_feed_config fc = {.topology = &t, .observers = list, .n_observers = 1,
                         .timeout_ms = 2000, .retry_window_ms = 60000};
    sl_feed *f;
    assert_int_equal(sl_feed_start(&fc, &f), 0);
    WAIT_FOR(status_of(&t, "l1") == SL_MEMBER_ALIVE);
    assert_int_equal(count(&t), 1); /* the observer itself is not a limiter */
    assert_string_equal(find(&t, "l1")->service, l1.svc);

    /* a limiter joins later: it appears; it leaves gracefully: LEAVING */
    gstart(&l2, "l2", "limiter", o.gaddr);
    WAIT_FOR(status_of(&t, "l2") == SL_MEMBER_ALIVE);
    sl_gossipnode_stop(l2.g);
    WAIT_FOR(status_of(&t, "l2") == SL_MEMBER_LEFT);

    /* one watcher at most: a second stream is refused (RESOURCE_EXHAUSTED), the first stays */
    static sl_topology t2;
    sl_topology_init(&t2);
    fc.topology = &t2;
    fc.retry_window_ms = 300;
    sl_feed *f2;
    assert_int_equal(sl_feed_start(&fc, &f2), 0);
    usleep(400000);
    assert_int_equal(count(&t2), 0);
    sl_feed_free(f2);
    sl_topology_destroy(&t2);

    char *text;
    size_t len;
    assert_int_equal(sl_metrics_render_prometheus(m, &text, &len), 0);
    assert_non_null(strstr(text, "sluice_observer_watchers 1"));
    assert_non_null(strstr(text, "sluice_observer_events_total"));
    free(text);

    sl_feed_free(f);
    sl_observer_stop(obs);
    sl_server_shutdown(srv, 0);
    sl_server_wait(srv);
    sl_server_free(srv);
    sl_observer_free(obs);
    obs = NULL;
    sl_gossipnode_free(l2.g);
    sl_gossipnode_free(l1.g);
    sl_gossipnode_free(o.g);
    sl_metrics_free(m);
    sl_topology_destroy(&t);
}

static void test_registration_value(void **state)
{
    char out[128];
    int n = sl_observer_registration("1.2.3.4:7373", "1.2.3.4:5454", out, sizeof out);
    assert_string_equal(out, "{\"gossip\": \"1.2.3.4:7373\", \"service\": \"1.2.3.4:5454\"}");
    assert_int_equal(n, (int)strlen(out));
    assert_int_equal(sl_observer_registration("a\"b", "x", out, sizeof out), -EINVAL);
    assert_int_equal(sl_observer_registration("1.2.3.4:7373", "1.2.3.4:5454", out, 10), -ENOSPC);
}

static void test_needs_the_overlay(void **state)
{
    sl_observer *o;
    char err[256];
    sl_observer_config oc = {.workers = 1, .heartbeat_ms = 50, .fallback = fallback};
    assert_int_equal(sl_observer_new(&oc, &o, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "gossip"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_to_a_feed),
        cmocka_unit_test(test_registration_value),
        cmocka_unit_test(test_needs_the_overlay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

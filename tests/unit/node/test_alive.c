/* SPDX-License-Identifier: Apache-2.0 */
/* node/alive: the watchdog's liveness check over a real server with two worker loops. Worker 1 is
 * held inside a posted step (a blocked loop): checks say "not alive" and post nothing more until
 * it is released; a later step posted behind the check's tells when the check's step has run, so
 * the test waits on a condition, never on the clock. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "node/alive.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool blocked;  /* worker 1 is inside block() */
    bool release;  /* block() may return */
    int marks;     /* mark() calls run */
} gate;

static void block(void *ud)
{
    gate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->blocked = true;
    pthread_cond_broadcast(&g->cv);
    while (!g->release)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void mark(void *ud)
{
    gate *g = ud;
    pthread_mutex_lock(&g->mu);
    g->marks++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Post mark() to every worker and wait until all ran: whatever was posted before has run. */
static void flush(sl_server *srv, gate *g)
{
    pthread_mutex_lock(&g->mu);
    int want = g->marks + sl_server_workers(srv);
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < sl_server_workers(srv); i++)
        assert_int_equal(sl_server_post(srv, i, mark, g), 0);
    pthread_mutex_lock(&g->mu);
    while (g->marks < want)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void handler(void *ud, sl_exchange *ex)
{
    sl_exchange_respond_simple(ex, 404, "text/plain", "", 0);
}

static void test_stuck_worker_withholds_the_ping(void **state)
{
    (void)state;
    sl_server_config cfg;
    sl_server_config_defaults(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.workers = 2;
    cfg.handler = handler;
    sl_server *srv;
    assert_int_equal(sl_server_start(&srv, &cfg), 0);
    gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

    sl_alive *a;
    assert_int_equal(sl_alive_new(srv, &a), 0);
    assert_int_equal(sl_alive_check(a), 1); /* first check: nothing outstanding */
    flush(srv, &g);
    assert_int_equal(sl_alive_check(a), 1); /* both loops ran round 1 */

    /* worker 1 blocks before it can run round 2's step */
    flush(srv, &g);
    assert_int_equal(sl_server_post(srv, 1, block, &g), 0);
    pthread_mutex_lock(&g.mu);
    while (!g.blocked)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
    assert_int_equal(sl_alive_check(a), 1); /* round 1 was done; round 2 posted */
    assert_int_equal(sl_alive_check(a), 0); /* worker 1 cannot have run it */
    assert_int_equal(sl_alive_check(a), 0); /* and still not: no ping while it is stuck */

    pthread_mutex_lock(&g.mu);
    g.release = true;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    flush(srv, &g); /* behind round 2's step on each loop */
    assert_int_equal(sl_alive_check(a), 1);

    sl_server_shutdown(srv, 1000);
    assert_int_equal(sl_server_wait(srv), 0);
    assert_int_equal(sl_alive_check(a), -ESHUTDOWN); /* stopped: never alive again */
    sl_server_free(srv);
    sl_alive_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stuck_worker_withholds_the_ping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

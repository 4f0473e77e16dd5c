/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One call's walk of the protection ladder (protect/plan.c), with a real engine, switchboard
 * (from a file: a fleet and a concurrency limit) and metrics: the global switch; the worker
 * shedder's three verdicts (pass, reject, shadow) and what it skips (critical calls, --shed off
 * is the fixture's default elsewhere, "*" off); the fleet and concurrency steps, their leases'
 * limits and modes, a switch that turns them off (noted); and a walk resumed with its ladder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/killswitchsrc.h"
#include "protect/plan.h"

#define M(s) (s), strlen(s)

typedef struct fx {
    sl_engine *engine;
    sl_metrics *metrics;
    sl_killswitch *ks;
    sl_protect *p;
    char path[64];
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    assert_int_equal(sl_metrics_new(NULL, &f->metrics), 0);
    snprintf(f->path, sizeof f->path, "/tmp/sluice-plan-XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    static const char board[] = "concurrency:\n  key:\n    one: {limit: 3, duration: 10s}\n"
                                "fleet: {capacity: 10, reserve: 0.2, duration: 30s}\n";
    assert_int_equal(write(fd, board, sizeof board - 1), (ssize_t)(sizeof board - 1));
    close(fd);
    sl_killswitch_config kc = {.conn.file = f->path};
    assert_int_equal(sl_killswitch_new(&kc, &f->ks), 0);
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    pc.metrics = f->metrics;
    pc.switches = f->ks;
    pc.workers = 1;
    pc.shed_opts.raise_after_ms = 0;
    pc.shed_opts.raise_step = 0.5;
    pc.shed_opts.smoothing = 1;
    assert_int_equal(sl_protect_new(&pc, &f->p), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sl_protect_worker_stop(f->p, 0);
    sl_protect_free(f->p);
    sl_killswitch_free(f->ks);
    sl_metrics_free(f->metrics);
    sl_engine_free(f->engine);
    unlink(f->path);
    free(f);
    return 0;
}

static bool has_metric(fx *f, const char *line)
{
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(f->metrics, &txt, &len), 0);
    bool ok = strstr(txt, line) != NULL;
    free(txt);
    return ok;
}

static void test_global_and_shed(void **state)
{
    fx *f = *state;
    sl_plan pl;
    sl_plan_start(&pl, f->p, 0);
    assert_true(sl_plan_all(&pl));
    /* an idle worker sheds nothing; critical calls are never asked */
    assert_int_equal(sl_plan_shed(&pl, SL_PRIORITY_TEST), SL_PLAN_PASS);
    for (int i = 0; i < 6; i++) /* level 3: everything but critical is shed */
        sl_protect_observe(f->p, 0, 1000 + i * 100, 0.99);
    assert_int_equal(sl_plan_shed(&pl, SL_PRIORITY_CRITICAL), SL_PLAN_PASS);
    assert_int_equal(sl_plan_shed(&pl, SL_PRIORITY_TEST), SL_PLAN_REJECT);
    assert_true(
        has_metric(f, "sluice_protect_events_total{limiter=\"shed\",event=\"rejected\"} 1"));
    /* shadow: the shed would reject, the call goes on, the ladder notes it */
    assert_int_equal(sl_killswitch_set(f->ks, M("shed"), SL_KILLSWITCH_SHADOW), 0);
    sl_plan_start(&pl, f->p, 0);
    assert_int_equal(sl_plan_shed(&pl, SL_PRIORITY_GET), SL_PLAN_SHADOW);
    assert_int_equal(pl.ladder.shadowed, 1u << SL_LADDER_SHED);
    /* killed: the shedder does not run */
    assert_int_equal(sl_killswitch_set(f->ks, M("shed"), SL_KILLSWITCH_KILLED), 0);
    sl_plan_start(&pl, f->p, 0);
    assert_int_equal(sl_plan_shed(&pl, SL_PRIORITY_GET), SL_PLAN_PASS);
    assert_int_equal(pl.ladder.killed, 1u << SL_LADDER_SHED);
    /* "*" off: nothing runs, not even the shedder's switch is asked */
    assert_int_equal(sl_killswitch_set(f->ks, M("*"), SL_KILLSWITCH_KILLED), 0);
    sl_plan_start(&pl, f->p, 0);
    assert_false(sl_plan_all(&pl));
    assert_int_equal(sl_plan_shed(&pl, SL_PRIORITY_GET), SL_PLAN_PASS);
    assert_int_equal(pl.ladder.killed, 1u << SL_LADDER_ALL);
}

static void test_leases(void **state)
{
    fx *f = *state;
    sl_plan pl;
    sl_plan_start(&pl, f->p, 0);
    sl_plan_lease l;
    assert_true(sl_plan_fleet(&pl, &l));
    assert_int_equal(l.limit, 8); /* (1 - 0.2) * 10: the cluster's */
    assert_int_equal(l.duration_ms, 30000);
    assert_int_equal(l.mode, SL_KILLSWITCH_ENFORCE);
    assert_non_null(l.fleet);
    assert_int_equal(sl_protect_fleet_limit(l.fleet, 2), 4); /* a node's share */
    assert_true(sl_plan_conc(&pl, M("one"), &l));
    assert_int_equal(l.limit, 3);
    assert_int_equal(l.duration_ms, 10000);
    assert_false(sl_plan_conc(&pl, M("other"), &l)); /* no limit for it */
    assert_int_equal(pl.ladder.killed | pl.ladder.shadowed, 0);
    /* switched: shadow runs with its mode, killed does not run and is noted */
    assert_int_equal(sl_killswitch_set(f->ks, M("fleet"), SL_KILLSWITCH_SHADOW), 0);
    assert_int_equal(sl_killswitch_set(f->ks, M("concurrency"), SL_KILLSWITCH_KILLED), 0);
    sl_plan_start(&pl, f->p, 0);
    assert_true(sl_plan_fleet(&pl, &l));
    assert_int_equal(l.mode, SL_KILLSWITCH_SHADOW);
    assert_false(sl_plan_conc(&pl, M("one"), &l));
    assert_int_equal(pl.ladder.killed, 1u << SL_LADDER_CONC);
    assert_true(has_metric(
        f, "sluice_protect_events_total{limiter=\"concurrency\",event=\"killswitch\"} 1"));
    /* a walk that waited goes on with its ladder, and the switches as they are now */
    sl_ladder saved = pl.ladder;
    assert_int_equal(sl_killswitch_set(f->ks, M("concurrency"), SL_KILLSWITCH_ENFORCE), 0);
    sl_plan_resume(&pl, f->p, 0, &saved);
    assert_int_equal(pl.ladder.killed, 1u << SL_LADDER_CONC);
    assert_true(sl_plan_conc(&pl, M("one"), &l));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {T(test_global_and_shed), T(test_leases)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

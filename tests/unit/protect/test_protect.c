/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protection service (protect/protect.c) with a real engine and metrics on a virtual clock:
 * leases of the fleet and of a resource's concurrency limit taken, refused at the limit, given
 * back once (then not found) and counted; the group size, shares and the fleet's non-critical
 * limit; the worker shedder fed by samples (levels, admission by class, its reason and retry
 * time, --shed off, the spare worker slot) and its metrics; the switchboard view; the log rate
 * limit; and the configuration errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protect/protect.h"

#define T0 1700000000000LL
#define M(s) (s), strlen(s)

typedef struct fx {
    sl_engine *engine;
    sl_metrics *metrics;
    sl_protect *p;
    FILE *logf;
    sl_logger log;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    assert_int_equal(sl_metrics_new(NULL, &f->metrics), 0);
    f->logf = tmpfile();
    sl_log_init(&f->log, f->logf, SL_LOG_DEBUG, "t");
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    pc.metrics = f->metrics;
    pc.log = &f->log;
    pc.workers = 2;
    pc.shed_opts.raise_after_ms = 0;
    pc.shed_opts.raise_step = 0.5;
    pc.shed_opts.smoothing = 1;
    pc.log_per_second = 2;
    assert_int_equal(sl_protect_new(&pc, &f->p), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sl_protect_free(f->p);
    sl_metrics_free(f->metrics);
    sl_engine_free(f->engine);
    fclose(f->logf);
    free(f);
    return 0;
}

static char *render(fx *f)
{
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(f->metrics, &txt, &len), 0);
    return txt;
}

static void assert_metric(fx *f, const char *line)
{
    char *txt = render(f);
    if (!strstr(txt, line)) {
        free(txt);
        fail_msg("no '%s'", line);
    }
    free(txt);
}

static void test_leases(void **state)
{
    fx *f = *state;
    sl_response r;
    uint64_t ids[3];
    for (int i = 0; i < 3; i++) {
        sl_protect_fleet_take(f->p, 3, 30000, T0, &r);
        assert_null(r.error);
        assert_int_equal(r.status, SL_UNDER_LIMIT);
        assert_true(r.lease_id != 0);
        ids[i] = r.lease_id;
    }
    sl_protect_fleet_take(f->p, 3, 30000, T0, &r);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.retry_after, 30000);
    assert_int_equal(sl_protect_fleet_give(f->p, ids[1], T0), 1);
    assert_int_equal(sl_protect_fleet_give(f->p, ids[1], T0), 0); /* once */
    assert_int_equal(sl_protect_fleet_give(f->p, 0, T0), 0);      /* no lease: nothing */
    sl_protect_fleet_take(f->p, 3, 30000, T0, &r);
    assert_int_equal(r.status, SL_UNDER_LIMIT);

    /* a resource's concurrency limit is per resource, apart from the fleet */
    sl_protect_conc_take(f->p, M("search"), 1, 10000, T0, &r);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    uint64_t c = r.lease_id;
    sl_protect_conc_take(f->p, M("search"), 1, 10000, T0, &r);
    assert_int_equal(r.status, SL_OVER_LIMIT);
    sl_protect_conc_take(f->p, M("other"), 1, 10000, T0, &r);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    assert_int_equal(sl_protect_conc_give(f->p, M("other"), c, T0), 0); /* another key's id */
    assert_int_equal(sl_protect_conc_give(f->p, M("search"), c, T0), 1);
    /* a lease not given back frees after its duration */
    sl_protect_conc_take(f->p, M("search"), 1, 10000, T0, &r);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    sl_protect_conc_take(f->p, M("search"), 1, 10000, T0 + 10000, &r);
    assert_int_equal(r.status, SL_UNDER_LIMIT);
    /* a bad limit is the engine's error */
    sl_protect_conc_take(f->p, M("search"), -1, 10000, T0, &r);
    assert_non_null(r.error);

    assert_metric(f, "sluice_leases_total{event=\"acquired\"} 8");
    assert_metric(f, "sluice_leases_total{event=\"released\"} 2");
    assert_metric(f, "sluice_leases_total{event=\"not_found\"} 2");
}

static void test_shares(void **state)
{
    (void)state;
    assert_int_equal(sl_protect_share(10, 1), 10);
    assert_int_equal(sl_protect_share(10, 3), 3);
    assert_int_equal(sl_protect_share(1, 3), 1); /* at least 1 */
    assert_int_equal(sl_protect_share(0, 3), 0);
    assert_int_equal(sl_protect_share(10, 0), 10);
    sl_killswitch_fleet fl = {.capacity = 10, .reserve = 0.2, .duration_ms = 30000};
    assert_int_equal(sl_protect_fleet_limit(&fl, 1), 8);
    assert_int_equal(sl_protect_fleet_limit(&fl, 2), 4);
    fl.capacity = 1;
    assert_int_equal(sl_protect_fleet_limit(&fl, 3), 0);
    fl.reserve = 0;
    fl.capacity = 7;
    assert_int_equal(sl_protect_fleet_limit(&fl, 1), 7);

    /* the group size: the override, then factor/key/<R>, then factor/default, then 1 */
    assert_int_equal(sl_protect_group_size(0, NULL, M("r")), 1);
    assert_int_equal(sl_protect_group_size(4, NULL, M("r")), 4);
    sl_quota_tree *t;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    const char *err = NULL;
    static const char *const kv[][2] = {{"/levee/factor/default", "2"},
                                        {"/levee/factor/key/big", "5"}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(sl_quota_tree_apply_put(t, "/levee", M(kv[i][0]), M(kv[i][1]), &err), 0);
    sl_quota_snap *snap;
    assert_int_equal(sl_quota_snap_new(t, true, 1, 0, &snap), 0);
    assert_int_equal(sl_protect_group_size(0, snap, M("big")), 5);
    assert_int_equal(sl_protect_group_size(0, snap, M("small")), 2);
    assert_int_equal(sl_protect_group_size(0, snap, NULL, 0), 2);
    assert_int_equal(sl_protect_group_size(3, snap, M("big")), 3);
    sl_quota_snap_unref(snap);
}

static void test_shedder(void **state)
{
    fx *f = *state;
    assert_int_equal(sl_protect_workers(f->p), 2);
    /* raise_after 0, step 0.5: three samples above the target -> 1.5 */
    assert_true(sl_protect_shed_level(f->p, 1) == 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl_protect_observe(f->p, 1, 1000 + i * 100, 0.99), 1);
    assert_true(sl_protect_shed_level(f->p, 1) == 1.5);
    assert_true(sl_protect_shed_util(f->p, 1) > 0.98);
    assert_true(sl_protect_shed_level(f->p, 0) == 0); /* per worker */
    int shed[SL_PRIORITY_COUNT] = {0};
    for (int p = 0; p < SL_PRIORITY_COUNT; p++)
        for (int i = 0; i < 100; i++)
            shed[p] += !sl_protect_shed_admit(f->p, 1, (sl_priority)p);
    assert_int_equal(shed[SL_PRIORITY_CRITICAL], 0);
    assert_int_equal(shed[SL_PRIORITY_POST], 0);
    assert_in_range(shed[SL_PRIORITY_GET], 48, 52);
    assert_int_equal(shed[SL_PRIORITY_TEST], 100);
    assert_true(sl_protect_shed_admit(f->p, 0, SL_PRIORITY_TEST));
    char why[200];
    size_t n = sl_protect_shed_reason(f->p, 1, SL_PRIORITY_GET, why, sizeof why);
    assert_int_equal(n, strlen(why));
    assert_string_equal(why, "sluiced is overloaded and sheds get traffic (test 100%, get 50%); "
                             "retry in 5 s");
    assert_int_equal(sl_protect_shed_retry_ms(f->p), 5000); /* --shed-lower-after */
    /* a reason cut to the caller's room stays terminated */
    n = sl_protect_shed_reason(f->p, 1, SL_PRIORITY_GET, why, 10);
    assert_int_equal(n, 9);
    assert_string_equal(why, "sluiced i");
    /* the move was logged */
    fflush(f->logf);
    rewind(f->logf);
    char line[512];
    bool seen = false;
    while (fgets(line, sizeof line, f->logf))
        seen |= strstr(line, "msg=\"worker shed level raised\" worker=1 level=1.500") != NULL;
    assert_true(seen);
    /* worker -1 (and out of range) is the spare slot, apart from the workers */
    sl_protect_observe(f->p, -1, 1000, 0.99);
    assert_true(sl_protect_shed_level(f->p, 7) == 0.5);
    assert_true(sl_protect_shed_level(f->p, 0) == 0);
    /* the metrics: the level and utilization per worker, the calls by class */
    assert_metric(f, "sluice_shed_level{worker=\"1\"} 1.5");
    assert_metric(f, "sluice_shed_level{worker=\"0\"} 0");
    assert_metric(f, "sluice_shed_calls_total{priority=\"test\",outcome=\"shed\"} 100");
    assert_metric(f, "sluice_shed_calls_total{priority=\"test\",outcome=\"admitted\"} 1");
    assert_metric(f, "sluice_worker_utilization{worker=\"1\"} 0.99");
}

static void test_shed_off(void **state)
{
    fx *f = *state;
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    pc.shed = false;
    pc.shed_opts.low = 2; /* not checked when the shedder is off */
    sl_protect *p;
    assert_int_equal(sl_protect_new(&pc, &p), 0);
    assert_int_equal(sl_protect_workers(p), 1);
    for (int i = 0; i < 5; i++)
        sl_protect_observe(p, 0, 1000 + i * 2000, 1.0);
    assert_true(sl_protect_shed_admit(p, 0, SL_PRIORITY_TEST));
    assert_null(sl_protect_switches(p, 0)); /* no switchboard */
    assert_string_equal(sl_protect_cfg(p)->name ? sl_protect_cfg(p)->name : "", "");
    assert_int_equal(sl_protect_cfg(p)->shed_interval_ms, 100);
    sl_protect_free(p);
}

static void test_switches_and_ladder(void **state)
{
    fx *f = *state;
    sl_killswitch *ks;
    sl_killswitch_config kc = {0};
    assert_int_equal(sl_killswitch_new(&kc, &ks), 0);
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    pc.switches = ks;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    pc.metrics = m;
    sl_protect *p;
    assert_int_equal(sl_protect_new(&pc, &p), 0);
    assert_int_equal(sl_killswitch_set(ks, M("fleet"), SL_KILLSWITCH_KILLED), 0);
    const sl_killswitch_snap *s = sl_protect_switches(p, 0);
    assert_non_null(s);
    assert_int_equal(sl_ladder_mode_of(s, SL_LADDER_FLEET), SL_KILLSWITCH_KILLED);
    sl_ladder l;
    sl_protect_ladder(p, &l);
    assert_false(sl_ladder_runs(&l, SL_LADDER_FLEET, SL_KILLSWITCH_KILLED));
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(m, &txt, &len), 0);
    assert_non_null(strstr(txt, "sluice_protect_events_total{limiter=\"fleet\",event=\"killswitch\"} 1"));
    free(txt);
    sl_protect_worker_stop(p, 0); /* releases the worker's snapshot */
    sl_protect_free(p);
    sl_metrics_free(m);
    sl_killswitch_free(ks);
}

static void test_log_limit(void **state)
{
    fx *f = *state;
    /* 2 lines a second: of 50 quick calls, 2 pass, or 4 if a second turned meanwhile */
    int ok = 0;
    for (int i = 0; i < 50; i++)
        ok += sl_protect_log_ok(f->p, SL_LOG_INFO);
    assert_in_range(ok, 2, 4);
    /* below the logger's level nothing is counted */
    sl_logger quiet;
    sl_log_init(&quiet, f->logf, SL_LOG_ERROR, "q");
    sl_protect_config pc = *sl_protect_cfg(f->p);
    pc.log = &quiet;
    pc.metrics = NULL;
    sl_protect *p;
    assert_int_equal(sl_protect_new(&pc, &p), 0);
    assert_false(sl_protect_log_ok(p, SL_LOG_INFO));
    sl_protect_free(p);
}

static void test_config_errors(void **state)
{
    fx *f = *state;
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    sl_protect *p = NULL;
    assert_int_equal(sl_protect_new(&pc, &p), -EINVAL); /* no engine */
    assert_int_equal(sl_protect_new(NULL, &p), -EINVAL);
    pc.engine = f->engine;
    pc.shed_opts.low = 2;
    assert_int_equal(sl_protect_new(&pc, &p), -EINVAL);
    pc.shed_opts.low = 0.5;
    char name[SL_MAX_NAME_LEN + 8];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    pc.name = name;
    assert_int_equal(sl_protect_new(&pc, &p), -EINVAL); /* "<name>.fleet" too long */
    pc.name = "lv";
    assert_int_equal(sl_protect_new(&pc, &p), 0);
    sl_protect_free(p);
    sl_protect_free(NULL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_leases),  T(test_shares),   T(test_shedder),       T(test_shed_off),
        T(test_switches_and_ladder),       T(test_log_limit),     T(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

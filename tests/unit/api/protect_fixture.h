/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fixture of the protection dialects' tests (test_attempt.c, test_gubprotect.c): a real
 * engine, quota snapshot, switchboard (from a file), metrics registry and protection service with
 * one worker, on a virtual clock. The switchboard: concurrency 20 per resource (1 for "one"),
 * 10 s leases; a fleet of 10 with a reserve of 0.2, 30 s leases.
 *
 * Include after <cmocka.h>.
 */
#ifndef SLUICE_TEST_PROTECT_FIXTURE_H
#define SLUICE_TEST_PROTECT_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/levee.h"
#include "protect/protect.h"

#define T0 1700000000000LL
#define M(s) (s), strlen(s)

typedef struct fx {
    sl_engine *engine;
    sl_quota_snap *snap;
    sl_levee_config lcfg;
    sl_killswitch *ks;
    sl_metrics *metrics;
    sl_protect *p;
    char path[64];
    int64_t now;
    FILE *logf;
    sl_logger log;
} fx;

static inline void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static inline void quotas(fx *f, const char *const *kv)
{
    sl_quota_tree *t;
    assert_int_equal(sl_quota_tree_new(0, &t), 0);
    for (; kv && *kv; kv++) {
        const char *eq = strchr(*kv, '=');
        char key[256];
        snprintf(key, sizeof key, "/levee/%.*s", (int)(eq - *kv), *kv);
        const char *err = NULL;
        assert_int_equal(sl_quota_tree_apply_put(t, "/levee", key, strlen(key), eq + 1,
                                                 strlen(eq + 1), &err), 0);
    }
    sl_quota_snap_unref(f->snap);
    assert_int_equal(sl_quota_snap_new(t, true, 1, 0, &f->snap), 0);
}

static const char switchboard[] __attribute__((unused)) =
    "concurrency:\n"
    "  default: {limit: 20, duration: 10s}\n"
    "  key:\n"
    "    one: {limit: 1, duration: 10s}\n"
    "fleet: {capacity: 10, reserve: 0.2, duration: 30s}\n";

static inline int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    sl_levee_config_default(&f->lcfg);
    f->lcfg.no_quota = SL_LEVEE_NO_QUOTA_ALLOW;
    quotas(f, NULL);
    snprintf(f->path, sizeof f->path, "/tmp/sluice-protect-XXXXXX");
    int fd = mkstemp(f->path);
    assert_true(fd >= 0);
    close(fd);
    write_file(f->path, switchboard);
    f->logf = tmpfile();
    sl_log_init(&f->log, f->logf, SL_LOG_DEBUG, "t");
    sl_killswitch_config kc = {.conn.file = f->path, .conn.log = &f->log};
    assert_int_equal(sl_killswitch_new(&kc, &f->ks), 0);
    assert_int_equal(sl_metrics_new(NULL, &f->metrics), 0);
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    pc.switches = f->ks;
    pc.metrics = f->metrics;
    pc.log = &f->log;
    pc.workers = 1;
    pc.shed_opts.raise_after_ms = 0;
    pc.shed_opts.raise_step = 0.5;
    pc.shed_opts.smoothing = 1;
    assert_int_equal(sl_protect_new(&pc, &f->p), 0);
    f->now = T0;
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fx *f = *state;
    sl_protect_worker_stop(f->p, 0);
    sl_protect_worker_stop(f->p, -1);
    sl_protect_free(f->p);
    sl_killswitch_free(f->ks);
    sl_metrics_free(f->metrics);
    sl_quota_snap_unref(f->snap);
    sl_engine_free(f->engine);
    fclose(f->logf);
    unlink(f->path);
    free(f);
    return 0;
}

static inline void set_switch(fx *f, const char *name, sl_killswitch_mode m)
{
    assert_int_equal(sl_killswitch_set(f->ks, M(name), m), 0);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard: value parsers (modes, concurrency limits, fleet), the quota-file sections
 * (loaded at start, reloaded, a bad file keeps the current switches, unknown fields are errors,
 * the quota tree's own sections are left alone), snapshots and readers (a reader sees a change on
 * its next read, the old snapshot stays valid until then), admin overrides and their precedence,
 * the entry cap, metrics, and the etcd mode against a REAL etcd (/usr/bin/etcd on free loopback
 * ports; skipped without it): switches, concurrency limits and the fleet arrive through the watch
 * within 1 s, a malformed value removes its entry, an etcd write ends an admin override.
 *
 * etcd is a real process, so the etcd test polls with deadlines (never a fixed sleep a result
 * depends on).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../support/etcdproc.h"
#include "../../support/skip.h"

#include "ctlplane/etcd.h"
#include "config/killswitch.h"
#include "config/quotasrc.h"
#include "config/watched.h"
#include "sluice/clock.h"

#define M(s) (s), strlen(s)

static void test_modes(void **state)
{
    (void)state;
    assert_int_equal(sl_killswitch_parse_mode(M("on")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_parse_mode(M(" TRUE\n")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_parse_mode(M("\"on\"")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_parse_mode(M("shadow")), SL_KILLSWITCH_SHADOW);
    assert_int_equal(sl_killswitch_parse_mode(M("dry-run")), SL_KILLSWITCH_SHADOW);
    assert_int_equal(sl_killswitch_parse_mode(M("off")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_parse_mode(M("0")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_parse_mode(M("onn")), -EINVAL);
    assert_int_equal(sl_killswitch_parse_mode(M("")), -EINVAL);
    assert_int_equal(sl_killswitch_parse_mode(NULL, 0), -EINVAL);
    assert_string_equal(sl_killswitch_mode_name(SL_KILLSWITCH_KILLED), "killed");
    assert_string_equal(sl_killswitch_mode_name(SL_KILLSWITCH_SHADOW), "shadow");
    assert_string_equal(sl_killswitch_mode_name(SL_KILLSWITCH_ENFORCE), "enforce");
}

static void test_values(void **state)
{
    (void)state;
    sl_killswitch_conc c;
    const char *err = NULL;
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 20, \"duration\": 1500}"), &c, &err),
                     0);
    assert_int_equal(c.limit, 20);
    assert_int_equal(c.duration_ms, 1500);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 3, \"duration\": \"1m30s\"}"), &c,
                                              &err), 0);
    assert_int_equal(c.duration_ms, 90000);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 3}"), &c, &err), 0);
    assert_int_equal(c.duration_ms, 60000);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"duration\": 5}"), &c, &err), -EINVAL);
    assert_non_null(err);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": -1}"), &c, &err), -EINVAL);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 1.5}"), &c, &err), -EINVAL);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 1, \"duration\": 0}"), &c, &err),
                     -EINVAL);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 1, \"duration\": \"soon\"}"), &c,
                                              &err), -EINVAL);
    assert_int_equal(sl_killswitch_parse_conc(M("{\"limit\": 1, \"ttl\": 5}"), &c, &err),
                     -EINVAL);
    assert_int_equal(sl_killswitch_parse_conc(M("[1]"), &c, &err), -EINVAL);
    assert_int_equal(sl_killswitch_parse_conc(M("{"), &c, &err), -EINVAL);

    sl_killswitch_fleet f;
    assert_int_equal(sl_killswitch_parse_fleet(M("{\"capacity\": 100, \"reserve\": 0.25, "
                                                 "\"duration\": \"10s\"}"), &f, &err), 0);
    assert_int_equal(f.capacity, 100);
    assert_true(f.reserve == 0.25);
    assert_int_equal(f.duration_ms, 10000);
    assert_int_equal(sl_killswitch_parse_fleet(M("{\"capacity\": 10}"), &f, &err), 0);
    assert_true(f.reserve == 0.2);
    assert_int_equal(sl_killswitch_parse_fleet(M("{\"reserve\": 0.2}"), &f, &err), -EINVAL);
    assert_int_equal(sl_killswitch_parse_fleet(M("{\"capacity\": 10, \"reserve\": 1}"), &f, &err),
                     -EINVAL);
    assert_int_equal(sl_killswitch_parse_fleet(M("{\"capacity\": 0}"), &f, &err), -EINVAL);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char file1[] =
    "limit:\n"
    "  key_default: {rate: 10, burst: 5}\n"
    "factor:\n"
    "  default: 1\n"
    "killswitch:\n"
    "  \"*\": off\n"
    "  search: on\n"
    "  new-limit: shadow\n"
    "concurrency:\n"
    "  default: {limit: 20, duration: 60s}\n"
    "  key:\n"
    "    reports: {limit: 2, duration: 1500}\n"
    "fleet: {capacity: 100, reserve: 0.2, duration: 30s}\n";

static void test_file(void **state)
{
    (void)state;
    char path[] = "/tmp/sluice-ks-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, file1);
    FILE *logf = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, logf, SL_LOG_DEBUG, "t");
    sl_killswitch_config cfg = {.conn.file = path, .conn.log = &lg};
    sl_killswitch *ks = NULL;
    assert_int_equal(sl_killswitch_new(&cfg, &ks), 0);
    assert_int_equal(sl_killswitch_wait_loaded(ks, 0), 0);

    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_true(sl_killswitch_snap_loaded(s));
    assert_false(sl_killswitch_snap_quiet(s));
    assert_int_equal(sl_killswitch_snap_global(s), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_snap_mode(s, M("search")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_snap_mode(s, M("new-limit")), SL_KILLSWITCH_SHADOW);
    assert_int_equal(sl_killswitch_snap_mode(s, M("other")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_snap_mode(s, "search", 5), SL_KILLSWITCH_ENFORCE);
    sl_killswitch_conc c;
    assert_true(sl_killswitch_snap_concurrency(s, M("reports"), &c));
    assert_int_equal(c.limit, 2);
    assert_int_equal(c.duration_ms, 1500);
    assert_true(sl_killswitch_snap_concurrency(s, M("anything"), &c));
    assert_int_equal(c.limit, 20);
    assert_int_equal(c.duration_ms, 60000);
    const sl_killswitch_fleet *f = sl_killswitch_snap_fleet(s);
    assert_non_null(f);
    assert_int_equal(f->capacity, 100);
    assert_int_equal(f->duration_ms, 30000);

    sl_killswitch_status st;
    sl_killswitch_status_get(ks, &st);
    assert_int_equal(st.source, SL_KILLSWITCH_FILE);
    assert_true(st.loaded && st.connected);
    assert_int_equal(st.switches, 2);
    assert_int_equal(st.concurrency, 2);
    assert_true(st.fleet);

    /* a reload: the reader sees it on its next read; the old snapshot is valid until then */
    write_file(path, "killswitch:\n  \"*\": on\n");
    char err[256];
    assert_int_equal(sl_killswitch_reload(ks, err, sizeof err), 0);
    assert_int_equal(sl_killswitch_snap_mode(s, M("search")), SL_KILLSWITCH_KILLED);
    const sl_killswitch_snap *s2 = sl_killswitch_read(ks, &r);
    assert_ptr_not_equal(s2, s);
    assert_int_equal(sl_killswitch_snap_global(s2), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_snap_mode(s2, M("search")), SL_KILLSWITCH_ENFORCE);
    assert_false(sl_killswitch_snap_concurrency(s2, M("reports"), &c));
    assert_null(sl_killswitch_snap_fleet(s2));
    assert_ptr_equal(sl_killswitch_read(ks, &r), s2); /* nothing changed: the same snapshot */

    /* a bad file keeps the current switches and says why, with the line */
    write_file(path, "killswitch:\n  search: maybe\n");
    assert_int_equal(sl_killswitch_reload(ks, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "line 2"));
    assert_ptr_equal(sl_killswitch_read(ks, &r), s2);
    write_file(path, "concurrency:\n  default: {limit: 2, ttl: 5}\n");
    assert_int_equal(sl_killswitch_reload(ks, err, sizeof err), -EINVAL);
    write_file(path, "fleet: {capacity: 10, reserve: 1.5}\n");
    assert_int_equal(sl_killswitch_reload(ks, err, sizeof err), -EINVAL);
    write_file(path, "concurrency:\n  keys: {}\n");
    assert_int_equal(sl_killswitch_reload(ks, err, sizeof err), -EINVAL);
    unlink(path);
    assert_true(sl_killswitch_reload(ks, err, sizeof err) < 0);
    assert_ptr_equal(sl_killswitch_read(ks, &r), s2);

    sl_killswitch_reader_release(&r);
    sl_killswitch_free(ks);

    /* a missing file fails at start (and logs why: the logger's stream must still be open) */
    assert_true(sl_killswitch_new(&cfg, &ks) < 0);
    fclose(logf);
}

static int count_switch(void *ud, const char *name, size_t len, sl_killswitch_mode mode,
                        bool admin)
{
    int *n = ud;
    (*n)++;
    return 0;
}

static void test_admin(void **state)
{
    (void)state;
    sl_killswitch_config cfg = {.max_entries = 3};
    sl_killswitch *ks = NULL;
    assert_int_equal(sl_killswitch_new(&cfg, &ks), 0);
    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_true(sl_killswitch_snap_loaded(s));
    assert_true(sl_killswitch_snap_quiet(s));
    assert_int_equal(sl_killswitch_snap_mode(s, M("x")), SL_KILLSWITCH_ENFORCE);

    assert_int_equal(sl_killswitch_set(ks, M("x"), SL_KILLSWITCH_KILLED), 0);
    s = sl_killswitch_read(ks, &r);
    assert_false(sl_killswitch_snap_quiet(s));
    assert_int_equal(sl_killswitch_snap_mode(s, M("x")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_set(ks, M("*"), SL_KILLSWITCH_SHADOW), 0);
    s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_global(s), SL_KILLSWITCH_SHADOW);
    /* switching off again: quiet once nothing is set */
    assert_int_equal(sl_killswitch_set(ks, M("x"), SL_KILLSWITCH_ENFORCE), 0);
    assert_int_equal(sl_killswitch_set(ks, M("*"), SL_KILLSWITCH_ENFORCE), 0);
    s = sl_killswitch_read(ks, &r);
    assert_true(sl_killswitch_snap_quiet(s));
    assert_int_equal(sl_killswitch_snap_global(s), SL_KILLSWITCH_ENFORCE);

    /* bad input and the entry cap */
    assert_int_equal(sl_killswitch_set(ks, "", 0, SL_KILLSWITCH_KILLED), -EINVAL);
    assert_int_equal(sl_killswitch_set(ks, M("y"), (sl_killswitch_mode)7), -EINVAL);
    char big[SL_KILLSWITCH_MAX_NAME + 2];
    memset(big, 'a', sizeof big);
    assert_int_equal(sl_killswitch_set(ks, big, sizeof big, SL_KILLSWITCH_KILLED), -EINVAL);
    assert_int_equal(sl_killswitch_set(ks, M("y"), SL_KILLSWITCH_KILLED), 0);
    assert_int_equal(sl_killswitch_set(ks, M("z"), SL_KILLSWITCH_KILLED), -ENOSPC); /* x,*,y */
    int n = 0;
    sl_killswitch_visit(ks, count_switch, NULL, &n);
    assert_int_equal(n, 1);

    /* metrics render the set switches */
    sl_metrics *m = NULL;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    assert_int_equal(sl_killswitch_register_metrics(ks, m), 0);
    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(m, &txt, &len), 0);
    assert_non_null(strstr(txt, "sluice_killswitch{name=\"y\",mode=\"killed\",origin=\"admin\"} 1"));
    assert_non_null(strstr(txt, "sluice_switch_source_loaded{source=\"none\"} 1"));
    assert_non_null(strstr(txt, "sluice_switches_set{source=\"none\"} 1"));
    free(txt);
    sl_metrics_free(m);

    sl_killswitch_reader_release(&r);
    sl_killswitch_free(ks);
}

/* A file switch overridden by the admin call, until a reload changes that switch. */
static void test_override_precedence(void **state)
{
    (void)state;
    char path[] = "/tmp/sluice-ks-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "killswitch:\n  a: on\n  b: on\n");
    sl_killswitch_config cfg = {.conn.file = path};
    sl_killswitch *ks = NULL;
    assert_int_equal(sl_killswitch_new(&cfg, &ks), 0);
    sl_killswitch_reader r = {0};
    assert_int_equal(sl_killswitch_set(ks, M("a"), SL_KILLSWITCH_ENFORCE), 0);
    assert_int_equal(sl_killswitch_set(ks, M("b"), SL_KILLSWITCH_SHADOW), 0);
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_mode(s, M("a")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_snap_mode(s, M("b")), SL_KILLSWITCH_SHADOW);
    /* a reload that leaves a and b as they were keeps the overrides */
    assert_int_equal(sl_killswitch_reload(ks, NULL, 0), 0);
    s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_mode(s, M("a")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_snap_mode(s, M("b")), SL_KILLSWITCH_SHADOW);
    /* the file changes b: the file's newer word wins for b, a stays overridden */
    write_file(path, "killswitch:\n  a: on\n  b: off\n");
    assert_int_equal(sl_killswitch_reload(ks, NULL, 0), 0);
    s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_mode(s, M("a")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_snap_mode(s, M("b")), SL_KILLSWITCH_ENFORCE);
    sl_killswitch_status st;
    sl_killswitch_status_get(ks, &st);
    assert_int_equal(st.overrides, 0); /* a's override says enforce: nothing set */
    assert_int_equal(st.switches, 0);
    sl_killswitch_reader_release(&r);
    sl_killswitch_free(ks);
    unlink(path);
}

/* ---------------------------------------------------------------- etcd */

static sl_test_etcd g_etcd;

static int64_t now_ms(void)
{
    return sl_mono_ns() / 1000000;
}

static void nap(void)
{
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
}

static sl_etcd *etcd_client(void)
{
    const char *eps[] = {g_etcd.url};
    sl_etcd_config cfg = {.endpoints = eps, .n_endpoints = 1, .connect_timeout_ms = 500,
                          .request_timeout_ms = 2000};
    sl_etcd *e = NULL;
    assert_int_equal(sl_etcd_new(&cfg, &e), 0);
    return e;
}

static int etcd_setup(void **state)
{
    if (!sl_test_etcd_installed()) {
        print_message("%s not installed: skipping the etcd tests\n", SL_TEST_ETCD_BIN);
        return 0;
    }
    if (sl_test_etcd_init(&g_etcd, "/tmp/sluice-ks-etcd-XXXXXX") != 0 ||
        sl_test_etcd_start(&g_etcd) != 0)
        return -1;
    return sl_test_etcd_wait_ready(&g_etcd, 30000) == 0 ? 0 : -1;
}

static int etcd_teardown(void **state)
{
    if (g_etcd.pid > 0) {
        sl_test_etcd_stop(&g_etcd, SIGTERM);
        sl_test_etcd_cleanup(&g_etcd);
    }
    return 0;
}

static void put(sl_etcd *e, const char *k, const char *v)
{
    assert_int_equal(sl_etcd_put(e, k, strlen(k), v, strlen(v), 0, NULL), 0);
}

/* Poll the reader until cond holds; fail after 1 s (the bound the switchboard promises). */
#define WITHIN_1S(ks, r, s, cond)                                                                  \
    do {                                                                                           \
        int64_t t_end_ = now_ms() + 1000;                                                          \
        for (;;) {                                                                                 \
            (s) = sl_killswitch_read((ks), (r));                                                   \
            if (cond)                                                                              \
                break;                                                                             \
            if (now_ms() > t_end_)                                                                 \
                fail_msg("not within 1 s: %s", #cond);                                             \
            nap();                                                                                 \
        }                                                                                          \
    } while (0)

static void test_etcd(void **state)
{
    (void)state;
    SL_NEED(SL_TEST_ETCD_BIN, "etcd-server");
    assert_true(g_etcd.pid > 0); /* installed, so the group set-up started it */
    sl_etcd *e = etcd_client();
    put(e, "/ks/killswitch/api", "on");
    put(e, "/ks/killswitch/bad", "perhaps");
    put(e, "/ks/concurrency/default", "{\"limit\": 7, \"duration\": \"2s\"}");
    put(e, "/ks/limit/key/api/quota", "{\"rate\": 1}"); /* the quota tree's, ignored */
    put(e, "/ksx/killswitch/other", "on");             /* another root */

    FILE *logf = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, logf, SL_LOG_DEBUG, "t");
    const char *eps[] = {g_etcd.url};
    sl_killswitch_config cfg = {.conn.etcd_endpoints = eps, .conn.n_endpoints = 1,
                                .conn.prefix = "/ks/",
                                .conn.log = &lg};
    sl_killswitch *ks = NULL;
    assert_int_equal(sl_killswitch_new(&cfg, &ks), 0);
    assert_int_equal(sl_killswitch_wait_loaded(ks, 5000), 0);
    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_mode(s, M("api")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_snap_mode(s, M("bad")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_snap_mode(s, M("other")), SL_KILLSWITCH_ENFORCE);
    sl_killswitch_conc c;
    assert_true(sl_killswitch_snap_concurrency(s, M("x"), &c));
    assert_int_equal(c.limit, 7);
    assert_int_equal(c.duration_ms, 2000);
    sl_killswitch_status st;
    sl_killswitch_status_get(ks, &st);
    assert_int_equal(st.source, SL_KILLSWITCH_ETCD);
    assert_int_equal(st.invalid, 1);
    assert_int_equal(st.switches, 1);

    /* changes arrive through the watch within 1 s */
    int64_t t0 = now_ms();
    put(e, "/ks/killswitch/*", "on");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_global(s) == SL_KILLSWITCH_KILLED);
    print_message("global kill switch seen after %lld ms\n", (long long)(now_ms() - t0));
    put(e, "/ks/killswitch/new", "shadow");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_mode(s, M("new")) == SL_KILLSWITCH_SHADOW);
    put(e, "/ks/concurrency/key/reports", "{\"limit\": 2}");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_concurrency(s, M("reports"), &c) && c.limit == 2);
    put(e, "/ks/fleet", "{\"capacity\": 50, \"reserve\": 0.1}");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_fleet(s) && sl_killswitch_snap_fleet(s)->capacity == 50);
    assert_int_equal(sl_etcd_delete(e, M("/ks/killswitch/*"), false, NULL, NULL), 0);
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_global(s) == SL_KILLSWITCH_ENFORCE);
    /* a malformed value removes what was there */
    put(e, "/ks/concurrency/key/reports", "{\"limit\": \"two\"}");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_concurrency(s, M("reports"), &c) && c.limit == 7);
    assert_int_equal(sl_etcd_delete(e, M("/ks/fleet"), false, NULL, NULL), 0);
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_fleet(s) == NULL);

    /* an admin override holds until etcd writes that switch again */
    assert_int_equal(sl_killswitch_set(ks, M("api"), SL_KILLSWITCH_ENFORCE), 0);
    s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_mode(s, M("api")), SL_KILLSWITCH_ENFORCE);
    put(e, "/ks/killswitch/unrelated", "on");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_mode(s, M("unrelated")) == SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_killswitch_snap_mode(s, M("api")), SL_KILLSWITCH_ENFORCE);
    put(e, "/ks/killswitch/api", "shadow");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_mode(s, M("api")) == SL_KILLSWITCH_SHADOW);

    sl_killswitch_status_get(ks, &st);
    assert_true(st.connected);
    assert_true(st.updates >= 9);
    assert_true(sl_killswitch_reload(ks, NULL, 0) == -EOPNOTSUPP);

    sl_killswitch_reader_release(&r);
    sl_killswitch_free(ks);
    sl_etcd_free(e);
    fclose(logf);
}

/* One source, one thread, one watch stream feeding both the quotas and the switchboard (as the
 * node runs them): each sees its own keys, from the first load and through the watch. */
static void test_etcd_shared_watch(void **state)
{
    (void)state;
    SL_NEED(SL_TEST_ETCD_BIN, "etcd-server");
    assert_true(g_etcd.pid > 0); /* installed, so the group set-up started it */
    sl_etcd *e = etcd_client();
    put(e, "/sh/killswitch/api", "on");
    put(e, "/sh/limit/key/api/quota", "{\"rate\": 10, \"burst\": 2}");

    FILE *logf = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, logf, SL_LOG_DEBUG, "t");
    const char *eps[] = {g_etcd.url};
    sl_watched_conn sc = {.etcd_endpoints = eps, .n_endpoints = 1, .prefix = "/sh",
                                   .log = &lg};
    sl_watched_source *src = NULL;
    assert_int_equal(sl_watched_source_new(&sc, &src), 0);
    sl_quotasrc_config qc = {.conn.source = src, .conn.log = &lg};
    sl_quotasrc *q = NULL;
    assert_int_equal(sl_quotasrc_new(&qc, &q), 0);
    sl_killswitch_config kc = {.conn.source = src, .conn.log = &lg};
    sl_killswitch *ks = NULL;
    assert_int_equal(sl_killswitch_new(&kc, &ks), 0);
    /* not started yet: nothing is read before every feed has attached */
    assert_int_equal(sl_killswitch_wait_loaded(ks, 50), -ETIMEDOUT);
    assert_int_equal(sl_watched_source_start(src), 0);
    sl_killswitch_config late = {.conn.source = src, .conn.log = &lg};
    sl_killswitch *ks2 = NULL;
    assert_int_equal(sl_killswitch_new(&late, &ks2), -EBUSY);
    sl_watched_source_free(src); /* the feeds keep it */
    assert_int_equal(sl_quotasrc_wait_loaded(q, 5000), 0);
    assert_int_equal(sl_killswitch_wait_loaded(ks, 5000), 0);

    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_killswitch_snap_mode(s, M("api")), SL_KILLSWITCH_KILLED);
    sl_quotasrc_reader qr = {0};
    const sl_quota_snap *qs = sl_quotasrc_read(q, &qr);
    sl_quota_path path = {0};
    assert_int_equal(sl_quota_path_parse(M("limit/key/api/quota"), &path), 0);
    sl_quota quota;
    assert_true(sl_quota_tree_get_quota(qs->tree, &path, &quota));
    assert_int_equal(sl_quota_tree_count(qs->tree), 1);

    /* both follow the same watch */
    put(e, "/sh/killswitch/api", "shadow");
    WITHIN_1S(ks, &r, s, sl_killswitch_snap_mode(s, M("api")) == SL_KILLSWITCH_SHADOW);
    put(e, "/sh/limit/key/web/quota", "{\"rate\": 5}");
    int64_t t_end = now_ms() + 1000;
    while ((qs = sl_quotasrc_read(q, &qr)), sl_quota_tree_count(qs->tree) != 2) {
        if (now_ms() > t_end)
            fail_msg("the quota put did not arrive within 1 s");
        nap();
    }
    sl_quotasrc_status qst;
    sl_quotasrc_status_get(q, &qst);
    sl_killswitch_status kst;
    sl_killswitch_status_get(ks, &kst);
    assert_true(qst.connected);
    assert_true(kst.connected);
    assert_int_equal(qst.mode, SL_QUOTASRC_ETCD);
    assert_int_equal(kst.source, SL_KILLSWITCH_ETCD);

    /* one thread and one watch: established once, for both */
    fflush(logf);
    rewind(logf);
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, logf);
    buf[n] = 0;
    const char *first = strstr(buf, "etcd watch established");
    assert_non_null(first);
    assert_null(strstr(first + 1, "etcd watch established"));
    assert_non_null(strstr(buf, "what=\"quotas and switches\""));

    sl_killswitch_reader_release(&r);
    sl_quotasrc_reader_release(&qr);
    sl_killswitch_free(ks);
    /* the quotas still follow the watch after the switchboard has left it */
    put(e, "/sh/limit/key/more/quota", "{\"rate\": 5}");
    t_end = now_ms() + 1000;
    while ((qs = sl_quotasrc_read(q, &qr)), sl_quota_tree_count(qs->tree) != 3) {
        if (now_ms() > t_end)
            fail_msg("the quota put did not arrive within 1 s");
        nap();
    }
    sl_quotasrc_reader_release(&qr);
    int64_t t0 = now_ms();
    sl_quotasrc_free(q); /* the last feed: stops the thread */
    assert_true(now_ms() - t0 < 2000);
    sl_etcd_free(e);
    fclose(logf);
}

/* etcd down at start: not loaded, an empty (enforcing) snapshot, and free() returns promptly. */
static void test_etcd_unreachable(void **state)
{
    (void)state;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", sl_test_free_port());
    const char *eps[] = {url};
    sl_killswitch_config cfg = {.conn.etcd_endpoints = eps, .conn.n_endpoints = 1,
                                .conn.connect_timeout_ms = 100, .conn.request_timeout_ms = 200};
    sl_killswitch *ks = NULL;
    assert_int_equal(sl_killswitch_new(&cfg, &ks), 0);
    assert_int_equal(sl_killswitch_wait_loaded(ks, 300), -ETIMEDOUT);
    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_false(sl_killswitch_snap_loaded(s));
    assert_true(sl_killswitch_snap_quiet(s));
    sl_killswitch_status st;
    sl_killswitch_status_get(ks, &st);
    assert_false(st.connected);
    assert_true(st.last_error[0] != 0);
    sl_killswitch_reader_release(&r);
    int64_t t0 = now_ms();
    sl_killswitch_free(ks);
    assert_true(now_ms() - t0 < 2000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_admin),
        cmocka_unit_test(test_override_precedence),
        cmocka_unit_test(test_etcd_unreachable),
    };
    const struct CMUnitTest etcd_tests[] = {
        cmocka_unit_test(test_etcd),
        cmocka_unit_test(test_etcd_shared_watch),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rc += cmocka_run_group_tests_name("etcd", etcd_tests, etcd_setup, etcd_teardown);
    return sl_skip_exit(rc);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watched-source tests without a running etcd (the etcd range+watch loop is exercised against a
 * real etcd through its users, in test_etcd.c and test_killswitch.c): the snapshot slot's
 * generations and references (a reader keeps its snapshot until its next read, every snapshot is
 * freed exactly once), file-mode reloads and their status, mode none, the root normalisation,
 * an unreachable etcd: not loaded, errors counted, and a stop that does not wait out the
 * backoff; and one source shared by several feeds.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/watched.h"
#include "sluice/clock.h"

typedef struct tsnap {
    int value;
    uint64_t generation;
    atomic_int refs;
} tsnap;

static atomic_int g_made, g_freed;

static tsnap *tsnap_new(int value)
{
    tsnap *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->value = value;
    atomic_init(&s->refs, 1);
    atomic_fetch_add(&g_made, 1);
    return s;
}

static void t_ref(void *p)
{
    atomic_fetch_add(&((tsnap *)p)->refs, 1);
}

static void t_unref(void *p)
{
    tsnap *s = p;
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        atomic_fetch_add(&g_freed, 1);
        free(s);
    }
}

static void t_stamp(void *p, uint64_t g)
{
    ((tsnap *)p)->generation = g;
}

typedef struct user {
    sl_watched *w;
    int file_loads;
} user;

/* The file holds a number; "io" fails without a reason, anything else with one. */
static int t_load_file(void *ud, const char *path, char *err, size_t errlen)
{
    user *u = ud;
    u->file_loads++;
    char buf[32] = {0};
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (!strncmp(buf, "io", 2))
        return -EIO;
    char *end;
    long v = strtol(buf, &end, 10);
    if (end == buf) {
        snprintf(err, errlen, "%s: not a number", path);
        return -EINVAL;
    }
    sl_watched_publish(u->w, tsnap_new((int)v));
    return 0;
}

static int t_load(void *ud, const sl_etcd_kvs *kvs, size_t n, int64_t revision)
{
    fail_msg("no etcd answers in these tests");
    return -EIO;
}

static int t_events(void *ud, const sl_etcd_event *ev, size_t n, int64_t revision)
{
    fail_msg("no etcd answers in these tests");
    return -EIO;
}

static sl_watched_config base_config(user *u)
{
    return (sl_watched_config){
        .what = "things",
        .ops = {.ref = t_ref, .unref = t_unref, .stamp = t_stamp, .load = t_load,
                .events = t_events, .load_file = t_load_file},
        .ud = u,
    };
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_file_mode(void **state)
{
    atomic_store(&g_made, 0);
    atomic_store(&g_freed, 0);
    char path[] = "/tmp/sluice-watched-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "7");

    user u = {0};
    sl_watched_config cfg = base_config(&u);
    cfg.conn.file = path;
    assert_int_equal(sl_watched_new(&cfg, &u.w), 0);
    assert_int_equal(sl_watched_mode_of(u.w), SL_WATCHED_FILE);
    assert_int_equal(sl_watched_wait_loaded(u.w, 0), -ETIMEDOUT); /* not started */
    assert_int_equal(sl_watched_publish(u.w, tsnap_new(0)), 1);
    assert_int_equal(sl_watched_start(u.w), 0);
    assert_int_equal(u.file_loads, 1);
    assert_int_equal(sl_watched_wait_loaded(u.w, 0), 0);

    sl_watched_status st;
    sl_watched_status_get(u.w, &st);
    assert_int_equal(st.mode, SL_WATCHED_FILE);
    assert_true(st.loaded && st.connected);
    assert_int_equal(st.loads, 1);
    assert_int_equal(st.load_errors, 0);
    assert_int_equal(st.generation, 2);
    assert_true(st.last_change_ms > 0);
    assert_string_equal(st.endpoint, path);
    assert_string_equal(st.last_error, "");
    assert_int_equal(atomic_load(&g_freed), 1); /* the first snapshot: nobody held it */

    /* A reader takes one reference and keeps it while the generation stays. */
    uint64_t gen = 0;
    tsnap *r = sl_watched_read(u.w, NULL, &gen);
    assert_int_equal(r->value, 7);
    assert_int_equal(gen, 2);
    assert_int_equal(r->generation, 2);
    assert_int_equal(atomic_load(&r->refs), 2);
    assert_ptr_equal(sl_watched_read(u.w, r, &gen), r);
    assert_int_equal(atomic_load(&r->refs), 2);

    /* A reload publishes; the reader's snapshot stays valid until its next read. */
    write_file(path, "8");
    char err[128] = "stale";
    assert_int_equal(sl_watched_reload(u.w, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(r->value, 7);
    assert_int_equal(atomic_load(&r->refs), 1);
    assert_int_equal(atomic_load(&g_freed), 1);
    tsnap *r2 = sl_watched_read(u.w, r, &gen);
    assert_int_equal(r2->value, 8);
    assert_int_equal(gen, 3);
    assert_int_equal(atomic_load(&g_freed), 2); /* the reader moved past 7 */

    /* A failed reload keeps the snapshot and says why. */
    write_file(path, "x");
    assert_int_equal(sl_watched_reload(u.w, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a number"));
    write_file(path, "io");
    assert_int_equal(sl_watched_reload(u.w, err, sizeof err), -EIO);
    assert_string_equal(err, strerror(EIO));
    assert_int_equal(sl_watched_reload(u.w, NULL, 0), -EIO);
    sl_watched_status_get(u.w, &st);
    assert_int_equal(st.loads, 2);
    assert_int_equal(st.load_errors, 3);
    assert_int_equal(st.generation, 3);
    assert_true(st.connected);
    assert_string_equal(st.last_error, strerror(EIO));
    assert_ptr_equal(sl_watched_read(u.w, r2, &gen), r2);

    /* A good reload clears the error. */
    write_file(path, "9");
    assert_int_equal(sl_watched_reload(u.w, NULL, 0), 0);
    sl_watched_status_get(u.w, &st);
    assert_string_equal(st.last_error, "");
    assert_int_equal(st.loads, 3);

    tsnap *a = sl_watched_acquire(u.w);
    assert_int_equal(a->value, 9);
    t_unref(a);
    sl_watched_count_invalid(u.w, 2);
    sl_watched_status_get(u.w, &st);
    assert_int_equal(st.invalid, 2);

    t_unref(r2);
    sl_watched_free(u.w);
    assert_int_equal(atomic_load(&g_freed), atomic_load(&g_made));
    unlink(path);
}

static void test_file_missing(void **state)
{
    user u = {0};
    sl_watched_config cfg = base_config(&u);
    cfg.conn.file = "/nonexistent/sluice-watched";
    assert_int_equal(sl_watched_new(&cfg, &u.w), 0);
    sl_watched_publish(u.w, tsnap_new(0));
    assert_int_equal(sl_watched_start(u.w), -ENOENT);
    sl_watched_status st;
    sl_watched_status_get(u.w, &st);
    assert_false(st.loaded);
    assert_int_equal(st.load_errors, 1);
    assert_string_equal(st.last_error, strerror(ENOENT));
    sl_watched_free(u.w);
}

static void test_none_mode(void **state)
{
    user u = {0};
    sl_watched_config cfg = base_config(&u);
    cfg.ops.load_file = NULL; /* never called */
    assert_int_equal(sl_watched_new(&cfg, &u.w), 0);
    assert_int_equal(sl_watched_mode_of(u.w), SL_WATCHED_NONE);
    assert_null(sl_watched_etcd(u.w));
    sl_watched_publish(u.w, tsnap_new(1));
    assert_int_equal(sl_watched_start(u.w), 0);
    assert_int_equal(sl_watched_wait_loaded(u.w, 0), 0);
    char err[64];
    assert_int_equal(sl_watched_reload(u.w, err, sizeof err), 0);
    sl_watched_status st;
    sl_watched_status_get(u.w, &st);
    assert_true(st.loaded && st.connected);
    assert_int_equal(st.loads, 0);
    assert_int_equal(st.generation, 1);
    /* the root: default, and trailing slashes dropped */
    assert_string_equal(sl_watched_root(u.w), "/sluice");
    assert_string_equal(sl_watched_watch_prefix(u.w), "/sluice/");
    sl_watched_free(u.w);

    cfg.conn.prefix = "/x/y//";
    assert_int_equal(sl_watched_new(&cfg, &u.w), 0);
    assert_string_equal(sl_watched_root(u.w), "/x/y");
    assert_string_equal(sl_watched_watch_prefix(u.w), "/x/y/");
    sl_watched_free(u.w); /* nothing published: nothing to free */
}

/* The log written so far holds `text`; closes the log. */
static void assert_log_has(FILE *logf, const char *text)
{
    fflush(logf);
    rewind(logf);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, logf);
    buf[n] = 0;
    fclose(logf);
    assert_non_null(strstr(buf, text));
}

static void test_etcd_unreachable(void **state)
{
    const char *url = "http://127.0.0.1:1"; /* tcpmux: nobody listens on loopback */
    const char *eps[] = {url};
    FILE *logf = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, logf, SL_LOG_DEBUG, "t");
    user u = {0};
    sl_watched_config cfg = base_config(&u);
    cfg.conn.etcd_endpoints = eps;
    cfg.conn.n_endpoints = 1;
    cfg.conn.connect_timeout_ms = 200;
    cfg.conn.backoff_min_ms = 60000; /* the thread sits in its backoff when we stop it */
    cfg.conn.log = &lg;
    assert_int_equal(sl_watched_new(&cfg, &u.w), 0);
    assert_int_equal(sl_watched_mode_of(u.w), SL_WATCHED_ETCD);
    assert_non_null(sl_watched_etcd(u.w));
    sl_watched_publish(u.w, tsnap_new(0));
    assert_int_equal(sl_watched_start(u.w), 0);
    assert_int_equal(sl_watched_wait_loaded(u.w, 300), -ETIMEDOUT);

    char err[128];
    assert_int_equal(sl_watched_reload(u.w, err, sizeof err), -EOPNOTSUPP);
    assert_string_equal(err, "things come from etcd and are watched: nothing to reload");

    /* the first range has failed by now (connection refused is immediate on loopback) */
    sl_watched_status st;
    sl_watched_status_get(u.w, &st);
    assert_int_equal(st.mode, SL_WATCHED_ETCD);
    assert_false(st.loaded);
    assert_false(st.connected);
    assert_int_equal(st.load_errors, 1);
    assert_int_equal(st.loads, 0);
    assert_true(st.last_error[0] != 0);
    assert_string_equal(st.endpoint, url);

    uint64_t gen = 0;
    tsnap *r = sl_watched_read(u.w, NULL, &gen);
    assert_int_equal(r->value, 0);
    assert_int_equal(gen, 1);
    t_unref(r);

    int64_t t0 = sl_mono_ns();
    sl_watched_free(u.w);
    assert_true(sl_mono_ns() - t0 < INT64_C(2000000000)); /* not the 30..60 s backoff */

    assert_log_has(logf, "etcd unavailable, serving last known things");
}

/* One source shared by feeds: each feed has its own slot and status, the thread's failures are
 * counted in every feed, a feed cannot join once the source runs, at most SL_WATCHED_MAX_FEEDS
 * feeds, and the source lives until its last feed leaves (then stops promptly). */
static void test_shared_source(void **state)
{
    (void)state;
    const char *eps[] = {"http://127.0.0.1:1"};
    FILE *logf = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, logf, SL_LOG_DEBUG, "t");
    sl_watched_conn sc = {.etcd_endpoints = eps, .n_endpoints = 1, .prefix = "/s/",
                                   .connect_timeout_ms = 200, .backoff_min_ms = 60000,
                                   .log = &lg};
    sl_watched_source *src = NULL;
    assert_int_equal(sl_watched_source_new(&sc, &src), 0);
    assert_int_equal(sl_watched_source_mode(src), SL_WATCHED_ETCD);
    user a = {0}, b = {0}, c = {0};
    sl_watched_config ca = base_config(&a), cb = base_config(&b), cc = base_config(&c);
    ca.conn.source = cb.conn.source = cc.conn.source = src;
    ca.what = "apples";
    cb.what = "pears";
    assert_int_equal(sl_watched_new(&ca, &a.w), 0);
    assert_int_equal(sl_watched_new(&cb, &b.w), 0);
    assert_string_equal(sl_watched_root(a.w), "/s");
    assert_ptr_equal(sl_watched_etcd(a.w), sl_watched_etcd(b.w));
    sl_watched_publish(a.w, tsnap_new(1));
    sl_watched_publish(b.w, tsnap_new(2));
    assert_int_equal(sl_watched_start(a.w), 0); /* a shared source: not this feed's to start */
    assert_int_equal(sl_watched_wait_loaded(a.w, 50), -ETIMEDOUT);
    assert_int_equal(sl_watched_source_start(src), 0);
    assert_int_equal(sl_watched_new(&cc, &c.w), -EBUSY);
    sl_watched_source_free(src); /* the feeds keep it */

    /* the one thread's failed load is every feed's */
    sl_watched_status sa, sb;
    int64_t t_end = sl_mono_ns() + INT64_C(2000000000);
    do {
        sl_watched_status_get(a.w, &sa);
        sl_watched_status_get(b.w, &sb);
    } while ((sa.load_errors == 0 || sb.load_errors == 0) && sl_mono_ns() < t_end);
    assert_int_equal(sa.load_errors, 1);
    assert_int_equal(sb.load_errors, 1);
    assert_false(sa.loaded || sb.loaded);
    /* each feed its own slot */
    uint64_t ga = 0, gb = 0;
    tsnap *ra = sl_watched_read(a.w, NULL, &ga), *rb = sl_watched_read(b.w, NULL, &gb);
    assert_int_equal(ra->value, 1);
    assert_int_equal(rb->value, 2);
    t_unref(ra);
    t_unref(rb);

    int64_t t0 = sl_mono_ns();
    sl_watched_free(a.w);
    sl_watched_free(b.w); /* the last feed: stops the thread, mid-backoff */
    assert_true(sl_mono_ns() - t0 < INT64_C(2000000000));
    assert_log_has(logf, "serving last known apples and pears");

    /* at most SL_WATCHED_MAX_FEEDS feeds; none mode needs no thread */
    sl_watched_conn none = {0};
    assert_int_equal(sl_watched_source_new(&none, &src), 0);
    user u[SL_WATCHED_MAX_FEEDS + 1];
    memset(u, 0, sizeof u);
    for (int i = 0; i <= SL_WATCHED_MAX_FEEDS; i++) {
        sl_watched_config cfg = base_config(&u[i]);
        cfg.conn.source = src;
        assert_int_equal(sl_watched_new(&cfg, &u[i].w), i < SL_WATCHED_MAX_FEEDS ? 0 : -ENOSPC);
    }
    sl_watched_source_free(src);
    for (int i = 0; i < SL_WATCHED_MAX_FEEDS; i++) {
        assert_int_equal(sl_watched_wait_loaded(u[i].w, 0), 0);
        sl_watched_free(u[i].w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_mode),
        cmocka_unit_test(test_file_missing),
        cmocka_unit_test(test_none_mode),
        cmocka_unit_test(test_etcd_unreachable),
        cmocka_unit_test(test_shared_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

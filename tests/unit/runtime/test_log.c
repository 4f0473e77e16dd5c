/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the logger: line format on a virtual clock, levels, escaping, truncation, and
 * whole lines under concurrent writers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "runtime/log.h"
#include "sluice/clock.h"

/* Everything written to f so far, as a malloc'd string. */
static char *slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    assert_true(n >= 0);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    rewind(f);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    return s;
}

static void test_line_format(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    sl_clock clk;
    sl_clock_init_virtual(&clk, INT64_C(1700000000123));
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_INFO, "node1");
    sl_log_set_clock(&lg, &clk);
    sl_log_info(&lg, "listening addr=%s workers=%d", "127.0.0.1:5454", 2);
    sl_clock_advance(&clk, 1001);
    sl_log_error(&lg, "bind failed err=%s", "EADDRINUSE");
    sl_log_warn(&lg, "slow peer=%s", "b");
    char *s = slurp(f);
    assert_string_equal(s, "ts=2023-11-14T22:13:20.123Z level=info instance=node1 msg=listening "
                           "addr=127.0.0.1:5454 workers=2\n"
                           "ts=2023-11-14T22:13:21.124Z level=error instance=node1 "
                           "msg=\"bind failed\" err=EADDRINUSE\n"
                           "ts=2023-11-14T22:13:21.124Z level=warn instance=node1 msg=slow peer=b\n");
    free(s);
    fclose(f);
}

static void test_levels(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    sl_clock clk;
    sl_clock_init_virtual(&clk, 0);
    sl_logger lg;
    sl_log_init(&lg, f, sl_log_level_for_verbose(false), NULL);
    sl_log_set_clock(&lg, &clk);
    assert_int_equal(sl_log_get_level(&lg), SL_LOG_INFO);
    assert_false(sl_log_enabled(&lg, SL_LOG_DEBUG));
    assert_true(sl_log_enabled(&lg, SL_LOG_INFO));
    sl_log_debug(&lg, "hidden");
    sl_log_set_level(&lg, sl_log_level_for_verbose(true));
    assert_int_equal(sl_log_get_level(&lg), SL_LOG_DEBUG);
    sl_log_debug(&lg, "shown");
    sl_log_set_level(&lg, SL_LOG_ERROR);
    sl_log_warn(&lg, "hidden too");
    sl_log_write(&lg, SL_LOG_ERROR, "err n=%d", 1);
    char *s = slurp(f);
    /* No instance: no instance= field. */
    assert_string_equal(s, "ts=1970-01-01T00:00:00.000Z level=debug msg=shown\n"
                           "ts=1970-01-01T00:00:00.000Z level=error msg=err n=1\n");
    free(s);
    fclose(f);

    assert_int_equal(sl_log_level_from_name("DEBUG"), SL_LOG_DEBUG);
    assert_int_equal(sl_log_level_from_name("warning"), SL_LOG_WARN);
    assert_int_equal(sl_log_level_from_name("error"), SL_LOG_ERROR);
    assert_int_equal(sl_log_level_from_name("loud"), -EINVAL);
    assert_int_equal(sl_log_level_from_name(NULL), -EINVAL);
    assert_string_equal(sl_log_level_name(SL_LOG_INFO), "info");
    assert_false(sl_log_enabled(NULL, SL_LOG_ERROR));
    sl_log_error(NULL, "a NULL logger discards %s", "this");
}

static void test_escaping_and_instance(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    sl_clock clk;
    sl_clock_init_virtual(&clk, 0);
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_INFO, "node 1\n=x");
    sl_log_set_clock(&lg, &clk);
    sl_log_info(&lg, "key=%s", "evil\nlevel=error forged\r\t\x01\x7f");
    char *s = slurp(f);
    /* one quoted value: the newline neither ends the line nor starts a field */
    assert_string_equal(s, "ts=1970-01-01T00:00:00.000Z level=info instance=node_1__x msg=\"\" "
                           "key=\"evil\\nlevel=error forged\\r\\t\\u0001\\u007f\"\n");
    free(s);
    fclose(f);
}

static void test_truncation(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_INFO, "n");
    char big[3 * SL_LOG_LINE_MAX];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    sl_log_info(&lg, "v=%s", big);
    /* Escapes that expand 1 -> 4 bytes are cut whole, never half-written. */
    memset(big, '\x02', sizeof(big) - 1);
    sl_log_info(&lg, "%s", big);
    char *s = slurp(f);
    char *nl = strchr(s, '\n');
    assert_non_null(nl);
    assert_true((size_t)(nl - s + 1) <= SL_LOG_LINE_MAX);
    assert_memory_equal(nl - 7, "msg=...", 7); /* a field too long for the line is dropped */
    char *second = nl + 1;
    char *nl2 = strchr(second, '\n');
    assert_non_null(nl2);
    assert_true((size_t)(nl2 - second + 1) <= SL_LOG_LINE_MAX);
    assert_memory_equal(nl2 - 7, "msg=...", 7); /* escapes are never cut halfway */
    assert_string_equal(nl2 + 1, "");
    free(s);
    fclose(f);
}

static void test_format_time(void **state)
{
    (void)state;
    char b[32];
    assert_int_equal(sl_log_format_time(b, sizeof(b), 0), 24);
    assert_string_equal(b, "1970-01-01T00:00:00.000Z");
    sl_log_format_time(b, sizeof(b), -1);
    assert_string_equal(b, "1969-12-31T23:59:59.999Z");
    sl_log_format_time(b, sizeof(b), INT64_C(951782400000) + 86399999); /* leap day 2000 */
    assert_string_equal(b, "2000-02-29T23:59:59.999Z");
}

struct writer {
    sl_logger *lg;
    int id;
};

enum { WRITERS = 4, LINES = 2000 };

static void *write_lines(void *p)
{
    struct writer *w = p;
    for (int i = 0; i < LINES; i++)
        sl_log_info(w->lg, "writer=%d seq=%d pad=%0200d end", w->id, i, i);
    return NULL;
}

static void test_concurrent_lines_whole(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_INFO, "n");
    pthread_t th[WRITERS];
    struct writer w[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (struct writer){&lg, i};
        assert_int_equal(pthread_create(&th[i], NULL, write_lines, &w[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    char *s = slurp(f);
    int next[WRITERS] = {0};
    int lines = 0;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        int id = -1, seq = -1;
        char *p = strstr(line, " writer=");
        assert_non_null(p);
        assert_int_equal(sscanf(p, " writer=%d seq=%d", &id, &seq), 2);
        assert_true(id >= 0 && id < WRITERS);
        assert_int_equal(seq, next[id]); /* each writer's lines in order, none lost */
        next[id]++;
        assert_true(strncmp(line + 27, " level=info instance=n msg=\"\" writer=", 37) == 0);
        char *pad = strstr(p, " pad=");
        assert_non_null(pad);
        assert_int_equal(strspn(pad + 6, "0123456789"), 200); /* pad="<200 digits> end" */
        assert_string_equal(pad + 6 + 200, " end\"");
        lines++;
    }
    assert_int_equal(lines, WRITERS * LINES);
    free(s);
    fclose(f);
}

/* Per-request lines: at most the budget a second, the rest counted and reported once by the next
 * admitted line; a second budget (a component's own) counts apart. */
static void test_request_budget(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    sl_clock clk;
    sl_clock_init_virtual(&clk, INT64_C(1700000000000));
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_INFO, NULL);
    sl_log_set_clock(&lg, &clk);
    sl_log_set_request_rate(&lg, 3);
    for (int i = 0; i < 100; i++)
        sl_log_req(&lg, SL_LOG_WARN, "req %d", i);
    sl_clock_advance(&clk, 1000);
    sl_log_req(&lg, SL_LOG_WARN, "req %d", 100);
    /* below the level: not counted as suppressed */
    for (int i = 0; i < 10; i++)
        sl_log_req(&lg, SL_LOG_DEBUG, "debug %d", i);
    sl_log_budget own = {.per_second = 1};
    assert_true(sl_log_budget_take(&lg, &own, SL_LOG_INFO));
    assert_false(sl_log_budget_take(&lg, &own, SL_LOG_INFO));
    char *txt = slurp(f);
    int lines = 0;
    for (char *p = txt; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 5);
    assert_non_null(strstr(txt, "msg=\"req 0\"\n"));
    assert_non_null(strstr(txt, "msg=\"req 2\"\n"));
    assert_null(strstr(txt, "msg=\"req 3\"\n"));
    assert_non_null(strstr(txt, "level=warn msg=\"... 97 similar lines suppressed\"\n"));
    assert_non_null(strstr(txt, "msg=\"req 100\"\n"));
    assert_null(strstr(txt, "debug"));
    free(txt);
    fclose(f);
}

/* JSON lines, quoted values taken whole, journald priorities, a held start-up. */
static void test_json_journal_hold(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    sl_clock clk;
    sl_clock_init_virtual(&clk, 0);
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_DEBUG, "n1");
    sl_log_set_clock(&lg, &clk);
    sl_log_set_format(&lg, SL_LOG_JSON);
    sl_log_info(&lg, "peer down addr=[::1]:17460 n=-12 why=\"a \\\"b\\\" c\" tail=x y");
    sl_log_set_format(&lg, SL_LOG_LOGFMT);
    sl_log_set_journal(&lg, true);
    sl_log_error(&lg, "boom");
    sl_log_debug(&lg, "fine");
    sl_log_set_journal(&lg, false);
    sl_log_hold(&lg);
    sl_log_info(&lg, "second");
    sl_log_write_now(&lg, SL_LOG_INFO, "first version=1");
    sl_log_release(&lg);
    sl_log_info(&lg, "third");
    char *s = slurp(f);
    assert_string_equal(
        s, "{\"ts\":\"1970-01-01T00:00:00.000Z\",\"level\":\"info\",\"instance\":\"n1\","
           "\"msg\":\"peer down\",\"addr\":\"[::1]:17460\",\"n\":-12,\"why\":\"a \\\"b\\\" c\","
           "\"tail\":\"x y\"}\n"
           "<3>ts=1970-01-01T00:00:00.000Z level=error instance=n1 msg=boom\n"
           "<7>ts=1970-01-01T00:00:00.000Z level=debug instance=n1 msg=fine\n"
           "ts=1970-01-01T00:00:00.000Z level=info instance=n1 msg=first version=1\n"
           "ts=1970-01-01T00:00:00.000Z level=info instance=n1 msg=second\n"
           "ts=1970-01-01T00:00:00.000Z level=info instance=n1 msg=third\n");
    free(s);
    fclose(f);
    assert_int_equal(sl_log_format_from_name("json"), SL_LOG_JSON);
    assert_int_equal(sl_log_format_from_name("logfmt"), SL_LOG_LOGFMT);
    assert_int_equal(sl_log_format_from_name("text"), -EINVAL);
    /* JOURNAL_STREAM names a file's device and inode */
    FILE *g = tmpfile();
    struct stat st;
    assert_int_equal(fstat(fileno(g), &st), 0);
    char js[64];
    snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    assert_true(sl_log_journal_fd(fileno(g)));
    assert_false(sl_log_journal_fd(fileno(f = tmpfile())));
    setenv("JOURNAL_STREAM", "garbage", 1);
    assert_false(sl_log_journal_fd(fileno(g)));
    unsetenv("JOURNAL_STREAM");
    assert_false(sl_log_journal_fd(fileno(g)));
    fclose(f);
    fclose(g);
}

/* Client-chosen fields are cut and escaped: no line can be grown or given forged pairs. */
static void test_field(void **state)
{
    (void)state;
    char buf[SL_LOG_FIELD_BUF];
    assert_string_equal(sl_log_field(buf, "abc-123", 7), "abc-123");
    assert_string_equal(sl_log_field(buf, NULL, 5), "");
    assert_string_equal(sl_log_field(buf, "a b=\"c\"\\\n\xff", 10),
                        "a\\x20b\\x3d\\x22c\\x22\\x5c\\x0a\\xff");
    char big[5000];
    memset(big, 'x', sizeof big);
    sl_log_field(buf, big, sizeof big);
    assert_int_equal(strlen(buf), SL_LOG_FIELD_MAX + 3);
    assert_memory_equal(buf + SL_LOG_FIELD_MAX, "...", 3);
    /* the worst case fills the buffer exactly */
    memset(big, '\n', sizeof big);
    sl_log_field(buf, big, sizeof big);
    assert_int_equal(strlen(buf), SL_LOG_FIELD_MAX * 4 + 3);
}

/* Issue 11's log amplification, on virtual time: 376,000 failing requests with long client fields
 * over 60 s write at most (budget + 1) lines a second, each bounded. */
static void test_flood_writes_bounded_bytes(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    sl_clock clk;
    sl_clock_init_virtual(&clk, INT64_C(1700000000000));
    sl_logger lg;
    sl_log_init(&lg, f, SL_LOG_INFO, "node1");
    sl_log_set_clock(&lg, &clk);
    char rid[4096];
    memset(rid, 'r', sizeof rid);
    for (int i = 0; i < 376000; i++) {
        if (i % 6267 == 0)
            sl_clock_advance(&clk, 1000);
        char a[SL_LOG_FIELD_BUF], b[SL_LOG_FIELD_BUF];
        if (sl_log_budget_take(&lg, NULL, SL_LOG_WARN))
            sl_log_write(&lg, SL_LOG_WARN, "attempt req_id=%s resource=%s status=500",
                         sl_log_field(a, rid, sizeof rid), sl_log_field(b, rid, sizeof rid));
    }
    long bytes = ftell(f);
    /* 60 seconds x (20 + 1 suppressed-count) lines x under 300 bytes each */
    assert_true(bytes > 0);
    assert_true(bytes < 61L * 21 * 300);
    print_message("flood: 376000 requests -> %ld log bytes\n", bytes);
    fclose(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_format),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_escaping_and_instance),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_format_time),
        cmocka_unit_test(test_json_journal_hold),
        cmocka_unit_test(test_concurrent_lines_whole),
        cmocka_unit_test(test_request_budget),
        cmocka_unit_test(test_field),
        cmocka_unit_test(test_flood_writes_bounded_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

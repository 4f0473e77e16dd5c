/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is limited, on a virtual clock: per-limit counters with their label values, the cardinality
 * guard (names past max_names count as "other", their keys in other's sketches), names and keys
 * with bytes outside printable ASCII, the JSON listing (order, per-limit filter, top bound, decay)
 * and option checks.
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

#include "runtime/metrics.h"
#include "protect/who.h"

static void note(sl_who *w, const char *lim, sl_who_event ev, const char *key, int64_t now)
{
    sl_who_note(w, lim, strlen(lim), ev, key, strlen(key), now);
}

/* The value of one series of sluice_limit_events_total, from the Prometheus text (0: absent). */
static uint64_t series(sl_metrics *m, const char *lim, const char *ev)
{
    char *txt;
    size_t len;
    assert_int_equal(sl_metrics_render_prometheus(m, &txt, &len), 0);
    char want[128];
    snprintf(want, sizeof want, "sluice_limit_events_total{limit=\"%s\",event=\"%s\"} ", lim, ev);
    const char *p = strstr(txt, want);
    uint64_t v = p ? strtoull(p + strlen(want), NULL, 10) : 0;
    free(txt);
    return v;
}

static char *json(sl_who *w, const char *filter, size_t top, int64_t now)
{
    char *out;
    size_t len;
    assert_int_equal(sl_who_top_json(w, filter, top, now, &out, &len), 0);
    assert_int_equal(strlen(out), len);
    return out;
}

static void test_counters_and_guard(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_who_config c;
    sl_who_config_default(&c);
    c.max_names = 2;
    c.metrics = m;
    sl_who *w;
    assert_int_equal(sl_who_new(&c, &w), 0);
    note(w, "a", SL_WHO_REJECTED, "k1", 0);
    note(w, "a", SL_WHO_REJECTED, "k1", 0);
    note(w, "b", SL_WHO_WOULD_REJECT, "k2", 0);
    note(w, "c", SL_WHO_SHED, "k3", 0); /* third name: other */
    note(w, "d", SL_WHO_SHED, "k4", 0);
    note(w, "a", SL_WHO_SHED, "k1", 0); /* known names stay named */
    assert_int_equal(series(m, "a", "rejected"), 2);
    assert_int_equal(series(m, "a", "shed"), 1);
    assert_int_equal(series(m, "b", "would_reject"), 1);
    assert_int_equal(series(m, "other", "shed"), 2);
    assert_int_equal(series(m, "c", "shed"), 0);
    char *j = json(w, NULL, 10, 0);
    assert_non_null(strstr(j, "{\"limit\":\"a\",\"event\":\"rejected\",\"total\":2,"
                              "\"keys\":[{\"key\":\"k1\",\"count\":2,\"error\":0}]}"));
    assert_non_null(strstr(j, "{\"limit\":\"other\",\"event\":\"shed\",\"total\":2,"));
    assert_non_null(strstr(j, "\"key\":\"k3\""));
    assert_non_null(strstr(j, "\"key\":\"k4\""));
    assert_null(strstr(j, "\"limit\":\"c\""));
    assert_non_null(strstr(j, "\"half_life_ms\":60000,\"k\":32,"));
    free(j);
    /* one limit */
    j = json(w, "b", 10, 0);
    assert_null(strstr(j, "\"limit\":\"a\""));
    assert_non_null(strstr(j, "\"limit\":\"b\",\"event\":\"would_reject\",\"total\":1"));
    free(j);
    sl_who_free(w);
    sl_metrics_free(m);
}

static void test_order_bound_decay_and_bytes(void **state)
{
    (void)state;
    sl_who_config c;
    sl_who_config_default(&c);
    c.k = 4;
    c.half_life_ms = 1000;
    sl_who *w;
    assert_int_equal(sl_who_new(&c, &w), 0); /* no metrics: fine */
    for (int i = 0; i < 5; i++)
        note(w, "lim", SL_WHO_REJECTED, "heavy", 0);
    for (int i = 0; i < 2; i++)
        note(w, "lim", SL_WHO_REJECTED, "light", 0);
    sl_who_note(w, "li\x01m", 4, SL_WHO_REJECTED, "k\"\xff", 3, 0);
    sl_who_note(w, "li\x02m", 4, SL_WHO_REJECTED, "k\"\xfe", 3, 0); /* the same name, shown */
    char *j = json(w, "lim", 1, 0);
    assert_non_null(strstr(j, "\"keys\":[{\"key\":\"heavy\",\"count\":5,\"error\":0}]"));
    assert_null(strstr(j, "light"));
    free(j);
    j = json(w, NULL, 10, 0);
    /* '"' is printable: JSON-escaped; the other bytes as '?' */
    assert_non_null(strstr(j, "\"limit\":\"li?m\",\"event\":\"rejected\",\"total\":2,"));
    assert_non_null(strstr(j, "\"key\":\"k\\\"?\",\"count\":1,"));
    free(j);
    /* two half-lives later: 5 -> 1, 2 -> 0 (gone); the total stays */
    j = json(w, "lim", 10, 2000);
    assert_non_null(strstr(j, "\"total\":7,\"keys\":[{\"key\":\"heavy\",\"count\":1,\"error\":0}]"));
    free(j);
    sl_who_free(w);
}

static void test_options(void **state)
{
    (void)state;
    sl_who_config c;
    sl_who *w;
    sl_who_config_default(&c);
    c.max_names = SL_WHO_MAX_NAMES + 1;
    assert_int_equal(sl_who_new(&c, &w), -EINVAL);
    sl_who_config_default(&c);
    c.k = 0;
    assert_int_equal(sl_who_new(&c, &w), -EINVAL);
    sl_who_config_default(&c);
    c.half_life_ms = -1;
    assert_int_equal(sl_who_new(&c, &w), -EINVAL);
    /* max_names 0: everything is "other" */
    sl_who_config_default(&c);
    c.max_names = 0;
    assert_int_equal(sl_who_new(&c, &w), 0);
    note(w, "x", SL_WHO_SHED, "k", 0);
    char *j = json(w, NULL, 10, 0);
    assert_non_null(strstr(j, "\"limit\":\"other\",\"event\":\"shed\",\"total\":1"));
    free(j);
    sl_who_free(w);
    sl_who_free(NULL);
    assert_string_equal(sl_who_event_name(SL_WHO_WOULD_REJECT), "would_reject");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counters_and_guard),
        cmocka_unit_test(test_order_bound_decay_and_bytes),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

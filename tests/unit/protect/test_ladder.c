/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kill -> shadow -> enforce ladder (protect/ladder.c): the limiters' names and switches, a
 * mode combined with the global switch (and a quiet switchboard), what each mode does before a
 * limiter runs and to its rejection (notes and counters), and the header list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "protect/ladder.h"

#define M(s) (s), strlen(s)

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(sl_ladder_name(SL_LADDER_RATE), "rate");
    assert_string_equal(sl_ladder_name(SL_LADDER_CONC), "concurrency");
    assert_string_equal(sl_ladder_name(SL_LADDER_FLEET), "fleet");
    assert_string_equal(sl_ladder_name(SL_LADDER_SHED), "shed");
    assert_string_equal(sl_ladder_name(SL_LADDER_ALL), "all");
    assert_string_equal(sl_ladder_name(SL_LADDER_NONE), "none");
    assert_string_equal(sl_ladder_name((sl_ladder_limiter)99), "unknown");
    size_t n;
    assert_string_equal(sl_ladder_switch(SL_LADDER_CONC, &n), "concurrency");
    assert_int_equal(n, 11);
    assert_string_equal(sl_ladder_switch(SL_LADDER_FLEET, &n), "fleet");
    assert_int_equal(n, 5);
    assert_string_equal(sl_ladder_switch(SL_LADDER_SHED, &n), "shed");
    assert_int_equal(n, 4);
    assert_string_equal(sl_ladder_switch(SL_LADDER_ALL, &n), "*");
    assert_int_equal(n, 1);
    assert_null(sl_ladder_switch(SL_LADDER_RATE, &n)); /* by quota or item name */
    assert_int_equal(n, 0);
}

static void test_modes(void **state)
{
    (void)state;
    sl_killswitch *ks;
    sl_killswitch_config kc = {0};
    assert_int_equal(sl_killswitch_new(&kc, &ks), 0);
    sl_killswitch_reader r = {0};
    /* nothing set: enforce for every name, NULL snapshot included */
    assert_int_equal(sl_ladder_mode(NULL, M("x")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_ladder_mode(sl_killswitch_read(ks, &r), M("x")), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_killswitch_set(ks, M("fleet"), SL_KILLSWITCH_SHADOW), 0);
    assert_int_equal(sl_killswitch_set(ks, M("api"), SL_KILLSWITCH_KILLED), 0);
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_ladder_mode_of(s, SL_LADDER_FLEET), SL_KILLSWITCH_SHADOW);
    assert_int_equal(sl_ladder_mode_of(s, SL_LADDER_SHED), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_ladder_mode_of(s, SL_LADDER_RATE), SL_KILLSWITCH_ENFORCE);
    assert_int_equal(sl_ladder_mode(s, M("api")), SL_KILLSWITCH_KILLED);
    /* the global switch: the stronger of the two wins */
    assert_int_equal(sl_killswitch_set(ks, M("*"), SL_KILLSWITCH_SHADOW), 0);
    s = sl_killswitch_read(ks, &r);
    assert_int_equal(sl_ladder_mode_of(s, SL_LADDER_SHED), SL_KILLSWITCH_SHADOW);
    assert_int_equal(sl_ladder_mode(s, M("api")), SL_KILLSWITCH_KILLED);
    assert_int_equal(sl_ladder_mode_of(s, SL_LADDER_ALL), SL_KILLSWITCH_SHADOW);
    sl_killswitch_reader_release(&r);
    sl_killswitch_free(ks);
}

static bool has(const char *txt, const char *s)
{
    return strstr(txt, s) != NULL;
}

static void test_rungs_and_counters(void **state)
{
    (void)state;
    sl_metrics *m;
    assert_int_equal(sl_metrics_new(NULL, &m), 0);
    sl_ladder_counters c;
    assert_int_equal(sl_ladder_register_metrics(m, &c), 0);
    sl_ladder l;
    sl_ladder_init(&l, &c);

    /* enforce: runs, and its rejection stands */
    assert_true(sl_ladder_runs(&l, SL_LADDER_CONC, SL_KILLSWITCH_ENFORCE));
    assert_true(sl_ladder_rejects(&l, SL_LADDER_CONC, SL_KILLSWITCH_ENFORCE));
    /* shadow: runs, its rejection admits and is noted */
    assert_true(sl_ladder_runs(&l, SL_LADDER_SHED, SL_KILLSWITCH_SHADOW));
    assert_false(sl_ladder_rejects(&l, SL_LADDER_SHED, SL_KILLSWITCH_SHADOW));
    /* killed: does not run; a rejection known late (a quota's own switch) admits too */
    assert_false(sl_ladder_runs(&l, SL_LADDER_FLEET, SL_KILLSWITCH_KILLED));
    assert_false(sl_ladder_rejects(&l, SL_LADDER_RATE, SL_KILLSWITCH_KILLED));
    assert_int_equal(l.shadowed, 1u << SL_LADDER_SHED);
    assert_int_equal(l.killed, (1u << SL_LADDER_FLEET) | (1u << SL_LADDER_RATE));
    sl_ladder_count(&l, SL_LADDER_ALL, SL_LADDER_KILLSWITCH); /* counted, not noted */
    assert_int_equal(l.killed, (1u << SL_LADDER_FLEET) | (1u << SL_LADDER_RATE));

    char *txt = NULL;
    size_t len = 0;
    assert_int_equal(sl_metrics_render_prometheus(m, &txt, &len), 0);
    assert_true(has(txt, "sluice_protect_events_total{limiter=\"concurrency\",event=\"rejected\"} 1"));
    assert_true(has(txt, "sluice_protect_events_total{limiter=\"shed\",event=\"would_reject\"} 1"));
    assert_true(has(txt, "sluice_protect_events_total{limiter=\"fleet\",event=\"killswitch\"} 1"));
    assert_true(has(txt, "sluice_protect_events_total{limiter=\"rate\",event=\"killswitch\"} 1"));
    assert_true(has(txt, "sluice_protect_events_total{limiter=\"all\",event=\"killswitch\"} 1"));
    assert_true(has(txt, "sluice_protect_events_total{limiter=\"rate\",event=\"rejected\"} 0"));
    assert_false(has(txt, "limiter=\"none\""));
    free(txt);
    sl_metrics_free(m);

    /* without counters the ladder still notes */
    sl_ladder_init(&l, NULL);
    assert_false(sl_ladder_rejects(&l, SL_LADDER_CONC, SL_KILLSWITCH_SHADOW));
    assert_int_equal(l.shadowed, 1u << SL_LADDER_CONC);
    /* and registering without a registry counts nothing */
    assert_int_equal(sl_ladder_register_metrics(NULL, &c), 0);
    assert_null(c.c[SL_LADDER_RATE][SL_LADDER_REJECTED]);
}

static void test_list(void **state)
{
    (void)state;
    char buf[96];
    assert_int_equal(sl_ladder_list(0, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    size_t n = sl_ladder_list((1u << SL_LADDER_SHED) | (1u << SL_LADDER_RATE), buf, sizeof buf);
    assert_string_equal(buf, "rate, shed");
    assert_int_equal(n, 10);
    sl_ladder_list(1u << SL_LADDER_ALL, buf, sizeof buf);
    assert_string_equal(buf, "*");
    sl_ladder_list(0x3e, buf, sizeof buf);
    assert_string_equal(buf, "rate, concurrency, fleet, shed, *");
    /* a name that does not fit is left out, the ones after it that fit are not */
    sl_ladder_list(0x3e, buf, 12);
    assert_string_equal(buf, "rate, fleet");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_rungs_and_counters),
        cmocka_unit_test(test_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

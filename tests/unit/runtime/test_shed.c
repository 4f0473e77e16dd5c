/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker-utilization shedder on a virtual clock: priority names, the shed order (test, get,
 * post, never critical), admission counts that match the level's fractions, the level's ramp up
 * under a sustained overload and back down after it with the configured periods and steps, the
 * hysteresis band (a load hovering around the target or alternating across it does not move the
 * level up and down), smoothing of a single spike, time going backwards, and option checks.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/shed.h"

static void test_priority_names(void **state)
{
    (void)state;
    assert_int_equal(sl_priority_from_name("critical", 8), SL_PRIORITY_CRITICAL);
    assert_int_equal(sl_priority_from_name("POST", 4), SL_PRIORITY_POST);
    assert_int_equal(sl_priority_from_name(" Get ", 5), SL_PRIORITY_GET);
    assert_int_equal(sl_priority_from_name("test", 4), SL_PRIORITY_TEST);
    assert_int_equal(sl_priority_from_name("tests", 5), -EINVAL);
    assert_int_equal(sl_priority_from_name("tes", 3), -EINVAL);
    assert_int_equal(sl_priority_from_name("", 0), -EINVAL);
    assert_int_equal(sl_priority_from_name(NULL, 0), -EINVAL);
    for (int p = 0; p < SL_PRIORITY_COUNT; p++) {
        const char *n = sl_priority_name((sl_priority)p);
        assert_int_equal(sl_priority_from_name(n, strlen(n)), p);
    }
    assert_null(sl_priority_name(SL_PRIORITY_COUNT));
}

static void test_shed_order(void **state)
{
    (void)state;
    assert_true(sl_shed_fraction_at(0, SL_PRIORITY_TEST) == 0);
    assert_true(fabs(sl_shed_fraction_at(400, SL_PRIORITY_TEST) - 0.4) < 1e-12);
    assert_true(sl_shed_fraction_at(400, SL_PRIORITY_GET) == 0);
    assert_true(sl_shed_fraction_at(1500, SL_PRIORITY_TEST) == 1);
    assert_true(fabs(sl_shed_fraction_at(1500, SL_PRIORITY_GET) - 0.5) < 1e-12);
    assert_true(sl_shed_fraction_at(1500, SL_PRIORITY_POST) == 0);
    assert_true(fabs(sl_shed_fraction_at(2250, SL_PRIORITY_POST) - 0.25) < 1e-12);
    for (uint32_t l = 0; l <= SL_SHED_MILLI_MAX; l += 50)
        assert_true(sl_shed_fraction_at(l, SL_PRIORITY_CRITICAL) == 0);
    assert_true(sl_shed_fraction_at(3000, SL_PRIORITY_POST) == 1);
    assert_int_equal(sl_shed_top_class(0), SL_PRIORITY_CRITICAL);
    assert_int_equal(sl_shed_top_class(10), SL_PRIORITY_TEST);
    assert_int_equal(sl_shed_top_class(1000), SL_PRIORITY_TEST);
    assert_int_equal(sl_shed_top_class(1001), SL_PRIORITY_GET);
    assert_int_equal(sl_shed_top_class(3000), SL_PRIORITY_POST);
}

static int shed_of(sl_shed *s, sl_priority p, int n)
{
    int shed = 0;
    for (int i = 0; i < n; i++)
        shed += !sl_shed_admit(s, p);
    return shed;
}

static void test_admission_counts(void **state)
{
    (void)state;
    sl_shed s;
    sl_shed_init(&s, NULL);
    assert_int_equal(shed_of(&s, SL_PRIORITY_TEST, 1000), 0);

    sl_shed_set_level(&s, 250);
    int t = shed_of(&s, SL_PRIORITY_TEST, 1000);
    assert_in_range(t, 248, 252);
    assert_int_equal(shed_of(&s, SL_PRIORITY_GET, 1000), 0);
    /* small windows are close too: any 40 consecutive calls shed 10 +- 2 */
    for (int w = 0; w < 20; w++)
        assert_in_range(shed_of(&s, SL_PRIORITY_TEST, 40), 8, 12);

    sl_shed_set_level(&s, 1700);
    assert_int_equal(shed_of(&s, SL_PRIORITY_TEST, 500), 500);
    assert_in_range(shed_of(&s, SL_PRIORITY_GET, 1000), 698, 702);
    assert_int_equal(shed_of(&s, SL_PRIORITY_POST, 500), 0);
    assert_int_equal(shed_of(&s, SL_PRIORITY_CRITICAL, 500), 0);

    sl_shed_set_level(&s, 99999); /* clamped: everything but critical */
    assert_int_equal(sl_shed_level_milli(&s), SL_SHED_MILLI_MAX);
    assert_int_equal(shed_of(&s, SL_PRIORITY_POST, 300), 300);
    assert_int_equal(shed_of(&s, SL_PRIORITY_CRITICAL, 300), 0);
    /* an unknown class is treated as test */
    assert_false(sl_shed_admit(&s, (sl_priority)17));

    sl_shedder_stats st;
    sl_shed_stats(&s, &st);
    assert_int_equal(st.admitted[SL_PRIORITY_CRITICAL], 800);
    assert_int_equal(st.shed[SL_PRIORITY_CRITICAL], 0);
    assert_int_equal(st.shed[SL_PRIORITY_POST], 300);
    assert_int_equal(st.admitted[SL_PRIORITY_POST], 500);
}

static sl_shedder_options opts(void)
{
    sl_shedder_options o;
    sl_shedder_options_default(&o);
    o.target = 0.8;
    o.low = 0.5;
    o.raise_after_ms = 1000;
    o.lower_after_ms = 3000;
    o.raise_step = 0.5;
    o.lower_step = 0.25;
    o.smoothing = 1; /* the raw signal, to check the periods exactly */
    return o;
}

static void test_ramp_up_and_down(void **state)
{
    (void)state;
    sl_shedder_options o = opts();
    sl_shed s;
    sl_shed_init(&s, &o);
    int64_t now = 1000000;
    /* overloaded, sampled every 100 ms: the first raise a full period after the first sample
     * above target, then one per period, up to the maximum */
    uint32_t prev = 0;
    int raises = 0;
    int64_t first_raise = -1;
    for (int i = 0; i < 100; i++, now += 100) {
        int moved = sl_shed_observe(&s, now, 0.99);
        uint32_t lv = sl_shed_level_milli(&s);
        assert_true(lv >= prev); /* monotone while overloaded */
        assert_true(moved >= 0);
        if (moved > 0) {
            raises++;
            if (first_raise < 0)
                first_raise = now;
            assert_int_equal(lv - prev, 500);
        }
        prev = lv;
    }
    assert_int_equal(first_raise, 1000000 + 1000);
    assert_int_equal(raises, 6); /* 0 -> 3.0 in steps of 0.5 */
    assert_int_equal(sl_shed_level_milli(&s), 3000);
    assert_int_equal(shed_of(&s, SL_PRIORITY_POST, 10), 10);

    /* the load goes away: lowering is slower (3 s per 0.25 step), monotone, down to 0 */
    int lowers = 0;
    int64_t start = now, last_lower = -1;
    for (int i = 0; i < 500; i++, now += 100) {
        int moved = sl_shed_observe(&s, now, 0.1);
        uint32_t lv = sl_shed_level_milli(&s);
        assert_true(lv <= prev);
        assert_true(moved <= 0);
        if (moved < 0) {
            lowers++;
            assert_int_equal(prev - lv, 250);
            if (last_lower >= 0)
                assert_int_equal(now - last_lower, 3000);
            else
                assert_int_equal(now - start, 3000);
            last_lower = now;
        }
        prev = lv;
    }
    assert_int_equal(lowers, 12);
    assert_int_equal(sl_shed_level_milli(&s), 0);
    sl_shedder_stats st;
    sl_shed_stats(&s, &st);
    assert_int_equal(st.raises, 6);
    assert_int_equal(st.lowers, 12);
}

static void test_hysteresis(void **state)
{
    (void)state;
    sl_shedder_options o = opts();
    sl_shed s;
    sl_shed_init(&s, &o);
    int64_t now = 0;
    /* raise to 1.0 */
    for (; sl_shed_level_milli(&s) < 1000; now += 100)
        sl_shed_observe(&s, now, 0.95);
    /* inside the band the level holds, for any length of time */
    for (int i = 0; i < 1000; i++, now += 100)
        assert_int_equal(sl_shed_observe(&s, now, i % 2 ? 0.55 : 0.79), 0);
    assert_int_equal(sl_shed_level_milli(&s), 1000);
    /* a load alternating above target and inside the band never stays above for a period */
    for (int i = 0; i < 1000; i++, now += 100)
        assert_int_equal(sl_shed_observe(&s, now, i % 5 == 4 ? 0.7 : 0.95), 0);
    assert_int_equal(sl_shed_level_milli(&s), 1000);
    /* and one alternating below low and inside the band never lowers */
    for (int i = 0; i < 1000; i++, now += 100)
        assert_int_equal(sl_shed_observe(&s, now, i % 20 == 19 ? 0.6 : 0.2), 0);
    assert_int_equal(sl_shed_level_milli(&s), 1000);
    /* a load that swings across the whole band every 500 ms (shorter than either period) moves
     * nothing either: no flapping */
    for (int i = 0; i < 1000; i++, now += 100)
        assert_int_equal(sl_shed_observe(&s, now, (i / 5) % 2 ? 0.99 : 0.01), 0);
    assert_int_equal(sl_shed_level_milli(&s), 1000);
}

static void test_smoothing(void **state)
{
    (void)state;
    sl_shedder_options o = opts();
    o.smoothing = 0.25;
    o.raise_after_ms = 0; /* raise on the first smoothed sample above target */
    sl_shed s;
    sl_shed_init(&s, &o);
    int64_t now = 0;
    for (int i = 0; i < 20; i++, now += 100)
        sl_shed_observe(&s, now, 0.3);
    /* one sample at 1.0 moves the average to 0.475: no raise */
    assert_int_equal(sl_shed_observe(&s, now, 1.0), 0);
    assert_true(fabs(sl_shed_util(&s) - 0.475) < 1e-9);
    assert_int_equal(sl_shed_level_milli(&s), 0);
    /* a sustained overload gets through: 0.475 -> 0.606 -> 0.705 -> 0.778 -> 0.834 */
    int n = 0;
    while (sl_shed_observe(&s, now += 100, 1.0) == 0)
        n++;
    assert_int_equal(n, 3);
}

static void test_clock_and_signal_edges(void **state)
{
    (void)state;
    sl_shedder_options o = opts();
    sl_shed s;
    sl_shed_init(&s, &o);
    sl_shed_observe(&s, 10000, 0.95);
    /* the clock steps back: no time passes, so no raise until a full period later */
    assert_int_equal(sl_shed_observe(&s, 5000, 0.95), 0);
    assert_int_equal(sl_shed_observe(&s, 10999, 0.95), 0);
    assert_int_equal(sl_shed_observe(&s, 11000, 0.95), 1);
    /* NaN and negative count as idle, huge values are capped */
    sl_shed_observe(&s, 11100, NAN);
    assert_true(sl_shed_util(&s) == 0);
    sl_shed_observe(&s, 11200, 1e300);
    assert_true(sl_shed_util(&s) == 10);
}

static void test_options(void **state)
{
    (void)state;
    sl_shedder_options o;
    sl_shedder_options_default(&o);
    const char *why = NULL;
    assert_int_equal(sl_shedder_options_check(&o, &why), 0);
    assert_null(why);
    o.low = o.target + 0.1;
    assert_int_equal(sl_shedder_options_check(&o, &why), -EINVAL);
    assert_non_null(why);
    sl_shedder_options_default(&o);
    o.raise_step = 0;
    assert_int_equal(sl_shedder_options_check(&o, NULL), -EINVAL);
    sl_shedder_options_default(&o);
    o.smoothing = 1.5;
    assert_int_equal(sl_shedder_options_check(&o, NULL), -EINVAL);
    sl_shedder_options_default(&o);
    o.lower_after_ms = -1;
    assert_int_equal(sl_shedder_options_check(&o, NULL), -EINVAL);
    sl_shedder_options_default(&o);
    o.target = NAN;
    assert_int_equal(sl_shedder_options_check(&o, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_names),
        cmocka_unit_test(test_shed_order),
        cmocka_unit_test(test_admission_counts),
        cmocka_unit_test(test_ramp_up_and_down),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_smoothing),
        cmocka_unit_test(test_clock_and_signal_edges),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

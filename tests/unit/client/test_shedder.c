/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client library's worker-utilization shedder (sluice/shed.h), as a service uses it for its
 * own worker pool: busy / total workers sampled on a virtual clock, admission by class while the
 * pool is overloaded and after it recovers, options, and concurrent admission from several
 * threads while a monitor observes (run under TSan/ASan, the counts must still add up).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sluice/shed.h"

static void test_pool(void **state)
{
    (void)state;
    sl_shedder_options o;
    sl_shedder_options_default(&o);
    o.raise_after_ms = 500;
    o.lower_after_ms = 2000;
    o.raise_step = 0.5;
    o.lower_step = 0.5;
    o.smoothing = 1;
    sl_shedder *s = NULL;
    assert_int_equal(sl_shedder_new(&o, &s), 0);
    int64_t now = 0;
    /* 32 of 32 workers busy for 2 s: four raises, level 2 (test and get shed) */
    for (int i = 0; i <= 20; i++, now += 100)
        sl_shedder_observe_workers(s, now, 32, 32);
    assert_true(sl_shedder_level(s) == 2.0);
    assert_true(sl_shedder_fraction(s, SL_PRIORITY_GET) == 1.0);
    assert_true(sl_shedder_fraction(s, SL_PRIORITY_POST) == 0.0);
    assert_true(sl_shedder_utilization(s) == 1.0);
    assert_false(sl_shedder_admit(s, SL_PRIORITY_TEST));
    assert_false(sl_shedder_admit(s, SL_PRIORITY_GET));
    assert_true(sl_shedder_admit(s, SL_PRIORITY_POST));
    assert_true(sl_shedder_admit(s, SL_PRIORITY_CRITICAL));
    /* 8 of 32 busy: down by 0.5 every 2 s */
    int lowered = 0;
    for (int i = 0; i < 100; i++, now += 100)
        lowered += sl_shedder_observe_workers(s, now, 8, 32) < 0;
    assert_int_equal(lowered, 4);
    assert_true(sl_shedder_level(s) == 0.0);
    assert_true(sl_shedder_admit(s, SL_PRIORITY_TEST));
    /* no workers: idle */
    assert_int_equal(sl_shedder_observe_workers(s, now, 0, 0), 0);
    sl_shedder_stats st;
    sl_shedder_stats_get(s, &st);
    assert_int_equal(st.raises, 4);
    assert_int_equal(st.lowers, 4);
    assert_int_equal(st.shed[SL_PRIORITY_TEST], 1);
    assert_int_equal(st.admitted[SL_PRIORITY_TEST], 1);
    sl_shedder_free(s);

    /* defaults, and bad options */
    assert_int_equal(sl_shedder_new(NULL, &s), 0);
    assert_true(sl_shedder_level(s) == 0);
    sl_shedder_free(s);
    o.low = 2;
    assert_int_equal(sl_shedder_new(&o, &s), -EINVAL);
    assert_int_equal(sl_shedder_new(NULL, NULL), -EINVAL);
}

typedef struct worker_arg {
    sl_shedder *s;
    int shed;
} worker_arg;

static void *admit_many(void *arg)
{
    worker_arg *w = arg;
    for (int i = 0; i < 20000; i++)
        w->shed += !sl_shedder_admit(w->s, SL_PRIORITY_TEST);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    sl_shedder_options o;
    sl_shedder_options_default(&o);
    o.raise_after_ms = 0;
    o.raise_step = 0.5;
    o.smoothing = 1;
    sl_shedder *s = NULL;
    assert_int_equal(sl_shedder_new(&o, &s), 0);
    sl_shedder_observe(s, 0, 1.0); /* level 0.5: half of test */
    pthread_t t[4];
    worker_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (worker_arg){s, 0};
        assert_int_equal(pthread_create(&t[i], NULL, admit_many, &a[i]), 0);
    }
    int64_t now = 0;
    for (int i = 0; i < 1000; i++)
        sl_shedder_observe(s, now += 1, 0.8); /* inside the band: the level holds */
    int shed = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        shed += a[i].shed;
    }
    /* 80000 calls at 50 %: the sequence is shared, so the total stays exact within a few */
    assert_in_range(shed, 39990, 40010);
    sl_shedder_stats st;
    sl_shedder_stats_get(s, &st);
    assert_int_equal(st.shed[SL_PRIORITY_TEST], (uint64_t)shed);
    assert_int_equal(st.shed[SL_PRIORITY_TEST] + st.admitted[SL_PRIORITY_TEST], 80000);
    sl_shedder_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

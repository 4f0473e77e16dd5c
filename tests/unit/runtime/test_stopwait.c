/* SPDX-License-Identifier: Apache-2.0 */
/* sl_stopwait: deadline arithmetic, a raised stop flag, a timeout, and a stop from another thread. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "runtime/stopwait.h"

static int64_t ts_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

static void test_deadline(void **state)
{
    (void)state;
    const int64_t cases[] = {0, 1, 999, 1000, 1001, 2500, 86400001};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct timespec before, d;
        clock_gettime(CLOCK_MONOTONIC, &before);
        sl_stopwait_deadline(&d, CLOCK_MONOTONIC, cases[i]);
        assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000);
        /* the deadline is ms after a reading taken no earlier than `before` */
        assert_true(ts_ns(&d) >= ts_ns(&before) + cases[i] * 1000000);
    }
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool stop;
} fixture;

static void fixture_init(fixture *f)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&f->stop, false);
}

static void fixture_destroy(fixture *f)
{
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

static void test_already_stopped(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    atomic_store(&f.stop, true);
    /* an hour-long wait returns at once: the flag is checked before sleeping */
    assert_true(sl_stopwait_ms(&f.mu, &f.cv, CLOCK_MONOTONIC, &f.stop, 3600000));
    fixture_destroy(&f);
}

static void test_timeout(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    /* a zero wait times out at once and reports "not stopped" */
    assert_false(sl_stopwait_ms(&f.mu, &f.cv, CLOCK_MONOTONIC, &f.stop, 0));
    fixture_destroy(&f);
}

static void *stopper(void *arg)
{
    fixture *f = arg;
    pthread_mutex_lock(&f->mu);
    atomic_store(&f->stop, true);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void test_stop_wakes(void **state)
{
    (void)state;
    fixture f;
    fixture_init(&f);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stopper, &f), 0);
    /* an hour-long wait ends when the other thread raises the flag */
    assert_true(sl_stopwait_ms(&f.mu, &f.cv, CLOCK_MONOTONIC, &f.stop, 3600000));
    pthread_join(th, NULL);
    fixture_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deadline),
        cmocka_unit_test(test_already_stopped),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_stop_wakes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

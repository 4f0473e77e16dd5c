/* SPDX-License-Identifier: Apache-2.0 */
/* node/held: which answers are held, and for how long (the timer path itself runs in
 * tests/system/test_delay.py against a real sluiced). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/held.h"

static void put(sl_answer *r, const char *name, const char *value)
{
    sl_answer_header *h = &r->headers[r->n_headers++];
    h->name = name;
    h->name_len = strlen(name);
    h->value = value;
    h->value_len = strlen(value);
}

static void test_delay_of_admitted_answer(void **state)
{
    (void)state;
    sl_answer r = {.status = 200};
    assert_int_equal(sl_held_delay_ms(&r), 0); /* no X-Delay-Ms: not delayed */
    put(&r, "RateLimit-Policy", "q;q=10;w=1");
    put(&r, "X-Delay-Ms", "250");
    assert_int_equal(sl_held_delay_ms(&r), 250);
}

static void test_only_admitted_answers_are_held(void **state)
{
    (void)state;
    sl_answer r = {.status = 429};
    put(&r, "X-Delay-Ms", "250");
    assert_int_equal(sl_held_delay_ms(&r), 0);
}

static void test_delay_never_overflows(void **state)
{
    (void)state;
    sl_answer r = {.status = 200};
    put(&r, "X-Delay-Ms", "99999999999999999999999999");
    int64_t v = sl_held_delay_ms(&r); /* the digits stop counting before int64 would wrap */
    assert_true(v > INT64_MAX / 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delay_of_admitted_answer),
        cmocka_unit_test(test_only_admitted_answers_are_held),
        cmocka_unit_test(test_delay_never_overflows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

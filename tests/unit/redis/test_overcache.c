/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The over-limit cache in front of Redis (redis/overcache): a rejection with nothing left is
 * answered locally until it could pass again, for at least as many hits and the same limit; an
 * admission, a look, a give-back or a reset clears it; leases, client times and shadow mode are
 * never cached; a give-back on one worker clears the key on every worker; a full table only
 * evicts. Virtual time: `now` is an argument.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "redis/overcache.h"

static sl_request req(const char *key, int64_t hits)
{
    return (sl_request){.name = "n", .name_len = 1, .unique_key = key,
                        .unique_key_len = strlen(key), .hits = hits, .limit = 10,
                        .duration = 60000, .algorithm = SL_FIXED_WINDOW};
}

/* A worker's table of `entries` over a shared part of its own (freed by done()). */
static sl_overcache_shared *sh_of(uint32_t entries, uint64_t seed)
{
    sl_overcache_shared *sh;
    assert_int_equal(sl_overcache_shared_new(entries, seed, &sh), 0);
    return sh;
}

static void open_cache(sl_overcache *c, sl_overcache_shared *sh)
{
    assert_int_equal(sl_overcache_init(c, sh), 0);
}

static const sl_response over = {.status = SL_OVER_LIMIT, .limit = 10, .remaining = 0,
                                 .reset_time = 60000, .retry_after = 50000};

static void test_rejection_answered_until_it_could_pass(void **state)
{
    (void)state;
    sl_overcache c;
    sl_overcache_shared *sh = sh_of(100, 42);
    open_cache(&c, sh);
    sl_request q = req("k", 2);
    sl_response r;
    assert_false(sl_overcache_answer(&c, &q, 10000, &r));
    sl_overcache_learn(&c, &q, 10000, &over); /* until 60000 */
    assert_true(sl_overcache_answer(&c, &q, 10001, &r));
    assert_int_equal(r.status, SL_OVER_LIMIT);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.limit, 10);
    assert_int_equal(r.reset_time, 60000);
    assert_int_equal(r.retry_after, 49999);
    q.hits = 5; /* more hits: rejected as well */
    assert_true(sl_overcache_answer(&c, &q, 30000, &r));
    q.hits = 1; /* fewer: may pass, ask Redis */
    assert_false(sl_overcache_answer(&c, &q, 30000, &r));
    q.hits = 2;
    assert_false(sl_overcache_answer(&c, &q, 60000, &r)); /* could pass again */
    sl_request other = q;
    other.limit = 20; /* another limit for the key: not what was learnt */
    assert_false(sl_overcache_answer(&c, &other, 20000, &r));
    other = q;
    other.behavior = SL_DURATION_IS_GREGORIAN;
    assert_false(sl_overcache_answer(&c, &other, 20000, &r));
    sl_request k2 = req("k2", 2);
    assert_false(sl_overcache_answer(&c, &k2, 20000, &r));
    sl_overcache_free(&c);
    sl_overcache_shared_free(sh);
}

static void test_what_makes_room_clears(void **state)
{
    (void)state;
    sl_overcache c;
    sl_overcache_shared *sh = sh_of(8, 7);
    open_cache(&c, sh);
    sl_request q = req("k", 1);
    sl_response r;
    const sl_response under = {.status = SL_UNDER_LIMIT, .limit = 10, .remaining = 3};
    const sl_request clear[] = {req("k", -1), req("k", 0), req("k", 1)};
    const sl_response *answer[] = {&under, &under, &under};
    for (size_t i = 0; i < 3; i++) {
        sl_overcache_learn(&c, &q, 0, &over);
        assert_true(sl_overcache_answer(&c, &q, 1, &r));
        sl_overcache_learn(&c, &clear[i], 2, answer[i]);
        assert_false(sl_overcache_answer(&c, &q, 3, &r));
    }
    sl_overcache_learn(&c, &q, 0, &over);
    sl_request reset = q;
    reset.behavior = SL_RESET_REMAINING;
    assert_false(sl_overcache_answer(&c, &reset, 1, &r)); /* a reset always goes to Redis */
    sl_overcache_learn(&c, &reset, 1, &under);
    assert_false(sl_overcache_answer(&c, &q, 2, &r));
    /* an error teaches nothing and clears nothing */
    sl_overcache_learn(&c, &q, 0, &over);
    const sl_response failed = {.error = "redis store unavailable"};
    sl_overcache_learn(&c, &q, 1, &failed);
    assert_true(sl_overcache_answer(&c, &q, 2, &r));
    /* remaining left, no retry_after: not kept */
    sl_request k = req("x", 1);
    sl_response some = over;
    some.remaining = 1;
    sl_overcache_learn(&c, &k, 0, &some);
    assert_false(sl_overcache_answer(&c, &k, 1, &r));
    some = over;
    some.retry_after = 0;
    sl_overcache_learn(&c, &k, 0, &some);
    assert_false(sl_overcache_answer(&c, &k, 1, &r));
    sl_overcache_free(&c);
    sl_overcache_shared_free(sh);
}

static void test_never_cached(void **state)
{
    (void)state;
    sl_overcache c;
    sl_overcache_shared *sh = sh_of(8, 7);
    open_cache(&c, sh);
    sl_response r;
    sl_request lease = req("l", 1);
    lease.algorithm = SL_CONCURRENCY;
    sl_request dated = req("d", 1);
    dated.created_at = 5;
    sl_request shadow = req("s", 1);
    shadow.behavior = SL_SHADOW;
    const sl_request *qs[] = {&lease, &dated, &shadow};
    for (size_t i = 0; i < 3; i++) {
        sl_overcache_learn(&c, qs[i], 0, &over);
        assert_false(sl_overcache_answer(&c, qs[i], 1, &r));
    }
    sl_overcache_free(&c);
    sl_overcache_shared_free(sh);
}

static void test_give_back_clears_every_worker(void **state)
{
    (void)state;
    sl_overcache_shared *sh = sh_of(64, 3);
    sl_overcache a, b;
    open_cache(&a, sh);
    open_cache(&b, sh);
    sl_request q = req("k", 1), back = req("k", -1);
    sl_response r;
    const sl_response under = {.status = SL_UNDER_LIMIT, .limit = 10, .remaining = 1};
    sl_overcache_learn(&a, &q, 0, &over);
    sl_overcache_learn(&b, &q, 0, &over);
    assert_true(sl_overcache_answer(&b, &q, 1, &r));
    sl_overcache_learn(&a, &back, 2, &under); /* given back through worker a */
    assert_false(sl_overcache_answer(&a, &q, 3, &r));
    assert_false(sl_overcache_answer(&b, &q, 3, &r));
    sl_overcache_learn(&b, &q, 4, &over); /* learnt again after the clear: answered again */
    assert_true(sl_overcache_answer(&b, &q, 5, &r));
    sl_overcache_free(&a);
    sl_overcache_free(&b);
    sl_overcache_shared_free(sh);
}

static void test_off_and_bounded(void **state)
{
    (void)state;
    sl_overcache c;
    sl_overcache_shared *sh = sh_of(0, 1); /* off */
    assert_null(sh);
    open_cache(&c, sh);
    sl_request q = req("k", 1);
    sl_response r;
    sl_overcache_learn(&c, &q, 0, &over);
    assert_false(sl_overcache_answer(&c, &q, 1, &r));
    sl_overcache_free(&c);
    /* 4 slots, 1000 keys: every answer given is still right, the newest entries win */
    sh = sh_of(3, 9);
    open_cache(&c, sh);
    assert_int_equal(sh->mask, 3);
    char keys[1000][8];
    for (int i = 0; i < 1000; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        sl_request k = req(keys[i], 1);
        sl_overcache_learn(&c, &k, 0, &over);
    }
    int answered = 0;
    for (int i = 0; i < 1000; i++) {
        sl_request k = req(keys[i], 1);
        answered += sl_overcache_answer(&c, &k, 1, &r);
    }
    assert_true(answered >= 1 && answered <= 4);
    sl_request last = req(keys[999], 1);
    assert_true(sl_overcache_answer(&c, &last, 1, &r));
    sl_overcache_free(&c);
    sl_overcache_shared_free(sh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rejection_answered_until_it_could_pass),
        cmocka_unit_test(test_what_makes_room_clears),
        cmocka_unit_test(test_never_cached),
        cmocka_unit_test(test_give_back_clears_every_worker),
        cmocka_unit_test(test_off_and_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the client's lease renewal: the schedule (client/renewsched.h) on a virtual clock —
 * renewals every duration / 2, retries after duration / 8 when a renewal got no answer, a lease
 * the server no longer knows is lost and never renewed again, the bound on held leases, stale
 * handles, a lease stopped while its renewal is out — and the renewer's arguments and bounds
 * (include/sluice/client.h), without a server: the client is created for a port nobody listens on
 * and nothing here waits for a renewal (tests/system/test_protect.py runs it against sluiced).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "client/renewsched.h"
#include "sluice/client.h"

static void test_schedule_every_half_duration(void **state)
{
    (void)state;
    sl_renewsched s;
    assert_int_equal(sl_renewsched_init(&s, 4), 0);
    uint64_t h, out[4];
    assert_int_equal(sl_renewsched_add(&s, 1000, 3000, &h), 0);
    assert_int_not_equal(h, 0);
    assert_int_equal(sl_renewsched_next_due(&s), 2500);
    assert_int_equal(sl_renewsched_take_due(&s, 2499, out, 4), 0);
    assert_int_equal(sl_renewsched_take_due(&s, 2500, out, 4), 1);
    assert_int_equal(out[0], h);
    /* in flight: not due again, not in next_due */
    assert_int_equal(sl_renewsched_take_due(&s, 9999, out, 4), 0);
    assert_int_equal(sl_renewsched_next_due(&s), INT64_MAX);
    sl_renewsched_done(&s, h, 2520, 0);
    const sl_renew_slot *sl = sl_renewsched_get(&s, h);
    assert_non_null(sl);
    assert_int_equal(sl->state, SL_RENEW_HELD);
    assert_int_equal(sl->renewals, 1);
    assert_int_equal(sl_renewsched_next_due(&s), 4020);

    /* three durations of work: renewed every half duration, never later than the expiry */
    int64_t now = 2520, expires = 2520 + 3000;
    for (int i = 0; i < 5; i++) {
        now = sl_renewsched_next_due(&s);
        assert_true(now < expires);
        assert_int_equal(sl_renewsched_take_due(&s, now, out, 4), 1);
        sl_renewsched_done(&s, out[0], now + 5, 0);
        expires = now + 5 + 3000;
    }
    assert_int_equal(sl_renewsched_get(&s, h)->renewals, 6);
    sl_renewsched_free(&s);
}

static void test_schedule_retry_and_lost(void **state)
{
    (void)state;
    sl_renewsched s;
    assert_int_equal(sl_renewsched_init(&s, 2), 0);
    uint64_t h, out[2];
    assert_int_equal(sl_renewsched_add(&s, 0, 800, &h), 0);
    assert_int_equal(sl_renewsched_take_due(&s, 400, out, 2), 1);
    /* no answer: retried after duration / 8, still before the lease runs out */
    sl_renewsched_done(&s, h, 600, -ETIMEDOUT);
    assert_int_equal(sl_renewsched_next_due(&s), 700);
    assert_int_equal(sl_renewsched_get(&s, h)->failures, 1);
    assert_int_equal(sl_renewsched_take_due(&s, 700, out, 2), 1);
    /* not found: lost, never renewed again, still reported */
    sl_renewsched_done(&s, h, 710, -ENOENT);
    assert_int_equal(sl_renewsched_get(&s, h)->state, SL_RENEW_LOST);
    assert_int_equal(sl_renewsched_next_due(&s), INT64_MAX);
    assert_int_equal(sl_renewsched_take_due(&s, 100000, out, 2), 0);
    assert_int_equal(sl_renewsched_remove(&s, h), 0);
    assert_null(sl_renewsched_get(&s, h));

    /* the retry never drops under 10 ms */
    assert_int_equal(sl_renewsched_add(&s, 0, 16, &h), 0);
    assert_int_equal(sl_renewsched_take_due(&s, 8, out, 2), 1);
    sl_renewsched_done(&s, h, 8, -EIO);
    assert_int_equal(sl_renewsched_next_due(&s), 18);
    sl_renewsched_free(&s);
}

static void test_schedule_bound_and_stale_handles(void **state)
{
    (void)state;
    sl_renewsched s;
    assert_int_equal(sl_renewsched_init(&s, 0), -EINVAL);
    assert_int_equal(sl_renewsched_init(&s, 65537), -EINVAL);
    assert_int_equal(sl_renewsched_init(&s, 2), 0);
    uint64_t a, b, c, out[2];
    assert_int_equal(sl_renewsched_add(&s, 0, 1, &a), -EINVAL);
    assert_int_equal(sl_renewsched_add(&s, 0, 100, &a), 0);
    assert_int_equal(sl_renewsched_add(&s, 0, 200, &b), 0);
    assert_int_equal(sl_renewsched_add(&s, 0, 300, &c), -ENOSPC);
    assert_int_equal(sl_renewsched_remove(&s, a), 0);
    assert_int_equal(sl_renewsched_remove(&s, a), -ENOENT);
    assert_int_equal(sl_renewsched_add(&s, 0, 300, &c), 0);
    /* c reuses a's slot: a's handle does not reach it */
    assert_int_not_equal(a, c);
    assert_null(sl_renewsched_get(&s, a));
    assert_int_equal(sl_renewsched_remove(&s, a), -ENOENT);
    assert_non_null(sl_renewsched_get(&s, c));
    assert_int_equal(sl_renewsched_remove(&s, 0), -ENOENT);
    assert_int_equal(sl_renewsched_remove(&s, 99), -ENOENT);

    /* stopped while its renewal is out: gone for the caller, its slot freed when it completes */
    assert_int_equal(sl_renewsched_take_due(&s, 100, out, 2), 1); /* b is due at 100, c at 150 */
    uint64_t due = out[0];
    assert_int_equal(due, b);
    assert_int_equal(sl_renewsched_remove(&s, due), 0);
    assert_null(sl_renewsched_get(&s, due));
    assert_int_equal(sl_renewsched_add(&s, 0, 300, out + 1), -ENOSPC); /* still in flight */
    sl_renewsched_done(&s, due, 160, 0);
    assert_null(sl_renewsched_get(&s, due));
    uint64_t d;
    assert_int_equal(sl_renewsched_add(&s, 160, 300, &d), 0);
    sl_renewsched_done(&s, due, 170, 0); /* a late duplicate completion changes nothing */
    assert_int_equal(sl_renewsched_get(&s, d)->state, SL_RENEW_HELD);
    sl_renewsched_free(&s);
}

static void test_renewer_arguments_and_bound(void **state)
{
    (void)state;
    sl_client *c;
    assert_int_equal(sl_client_new("127.0.0.1:1", NULL, &c), 0);
    sl_client_renewer_options o;
    sl_client_renewer_options_default(&o);
    assert_int_equal(o.max_leases, 1024);
    sl_client_renewer *r;
    o.max_leases = 0;
    assert_int_equal(sl_client_renewer_new(c, &o, &r), -EINVAL);
    o.max_leases = 2;
    assert_int_equal(sl_client_renewer_new(c, &o, &r), 0);

    sl_attempt a = {.resource = "jobs"};
    uint64_t h1, h2, h3;
    assert_int_equal(sl_client_renewer_add_levee(r, &a, "", 60000, &h1), -EINVAL);
    assert_int_equal(sl_client_renewer_add_levee(r, &a, "L1", 1, &h1), -EINVAL);
    assert_int_equal(sl_client_renewer_add_levee(r, &a, "L1", 60000, &h1), 0);
    sl_client_item it;
    memset(&it, 0, sizeof it);
    it.req = (sl_client_request){.name = "jobs", .name_len = 4, .unique_key = "k", .unique_key_len = 1,
                          .hits = 1, .limit = 5, .duration = 60000};
    assert_int_equal(sl_client_renewer_add_item(r, &it, "0011223344556677", &h2), 0);
    assert_int_equal(sl_client_renewer_add_item(r, &it, "8899aabbccddeeff", &h3), -ENOSPC);
    assert_int_equal(sl_client_renewer_count(r), 2);

    sl_client_lease_status st;
    assert_int_equal(sl_client_renewer_status(r, h1, &st), 0);
    assert_false(st.lost);
    assert_int_equal(st.renewals, 0);
    /* stopping frees the place; the handle is gone */
    assert_int_equal(sl_client_renewer_stop(r, h1), 0);
    assert_int_equal(sl_client_renewer_stop(r, h1), -ENOENT);
    assert_int_equal(sl_client_renewer_status(r, h1, &st), -ENOENT);
    assert_int_equal(sl_client_renewer_count(r), 1);
    assert_int_equal(sl_client_renewer_add_levee(r, NULL, "L3", 60000, &h3), 0);
    /* releasing with nobody listening: the release's own error (fail-open never applies) */
    int rc = sl_client_renewer_release(r, h3, 100);
    assert_true(rc < 0 && rc != -ENOENT);
    assert_int_equal(sl_client_renewer_release(r, h3, 100), -ENOENT);
    /* freed with a lease still held: nothing is released or leaked */
    sl_client_renewer_free(r);
    sl_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schedule_every_half_duration),
        cmocka_unit_test(test_schedule_retry_and_lost),
        cmocka_unit_test(test_schedule_bound_and_stale_handles),
        cmocka_unit_test(test_renewer_arguments_and_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

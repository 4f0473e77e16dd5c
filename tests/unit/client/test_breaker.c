/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the client's circuit breaker on timeouts (client/breaker.h) on a virtual clock, for the
 * retry/backoff-with-jitter helpers of include/sluice/client.h, and for the breaker inside a real
 * client against a hung server: a listening socket that never accepts, so the TCP connect completes
 * (the kernel's backlog) and nothing ever answers. After the breaker opens, calls fail open at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/breaker.h"
#include "sluice/client.h"
#include "sluice/clock.h"

#define MS 1000000LL

static void test_opens_after_threshold_timeouts(void **state)
{
    (void)state;
    sl_breaker b;
    sl_breaker_init(&b, 3, 1000 * MS);
    bool probe;
    int64_t t = 0;
    for (int i = 0; i < 2; i++) {
        assert_true(sl_breaker_allow(&b, t, &probe));
        assert_false(probe);
        sl_breaker_record(&b, true, t += 100 * MS);
    }
    assert_int_equal(b.state, SL_BREAKER_CLOSED);
    /* an answer in between resets the count */
    sl_breaker_record(&b, false, t);
    for (int i = 0; i < 2; i++)
        sl_breaker_record(&b, true, t += 100 * MS);
    assert_int_equal(b.state, SL_BREAKER_CLOSED);
    sl_breaker_record(&b, true, t += 100 * MS);
    assert_int_equal(b.state, SL_BREAKER_OPEN);
    assert_int_equal(b.trips, 1);
    /* open: refused for the whole cool-down */
    assert_false(sl_breaker_allow(&b, t, &probe));
    assert_false(sl_breaker_allow(&b, t + 999 * MS, &probe));
    /* a call from before the trip timing out now does not extend the cool-down */
    sl_breaker_record(&b, true, t + 500 * MS);
    assert_int_equal(b.trips, 1);
    assert_int_equal(b.open_until_ns, t + 1000 * MS);
    /* one from before that gets an answer: the server answers again, closed at once */
    sl_breaker_record(&b, false, t + 600 * MS);
    assert_int_equal(b.state, SL_BREAKER_CLOSED);
    assert_true(sl_breaker_allow(&b, t + 600 * MS, &probe));
    assert_false(probe);
}

static void test_half_open_lets_one_probe(void **state)
{
    (void)state;
    sl_breaker b;
    sl_breaker_init(&b, 1, 1000 * MS);
    bool probe;
    sl_breaker_record(&b, true, 0);
    assert_int_equal(b.state, SL_BREAKER_OPEN);
    int64_t t = 1000 * MS;
    assert_true(sl_breaker_allow(&b, t, &probe));
    assert_true(probe);
    assert_int_equal(b.state, SL_BREAKER_HALF_OPEN);
    /* while the probe is out, everyone else still fails fast */
    assert_false(sl_breaker_allow(&b, t + 1, &probe));
    assert_false(sl_breaker_allow(&b, t + 50 * MS, &probe));
    /* the probe times out: another full cool-down from then */
    sl_breaker_record(&b, true, t + 100 * MS);
    assert_int_equal(b.state, SL_BREAKER_OPEN);
    assert_int_equal(b.trips, 2);
    assert_false(sl_breaker_allow(&b, t + 1099 * MS, &probe));
    assert_true(sl_breaker_allow(&b, t + 1100 * MS, &probe));
    assert_true(probe);
    /* the probe gets an answer: closed, everyone goes */
    sl_breaker_record(&b, false, t + 1150 * MS);
    assert_int_equal(b.state, SL_BREAKER_CLOSED);
    assert_int_equal(b.consecutive, 0);
    for (int i = 0; i < 5; i++) {
        assert_true(sl_breaker_allow(&b, t + 1200 * MS, &probe));
        assert_false(probe);
    }
}

static void test_threshold_zero_never_opens(void **state)
{
    (void)state;
    sl_breaker b;
    sl_breaker_init(&b, 0, 1000 * MS);
    bool probe;
    for (int i = 0; i < 100; i++)
        sl_breaker_record(&b, true, i * MS);
    assert_int_equal(b.state, SL_BREAKER_CLOSED);
    assert_true(sl_breaker_allow(&b, 100 * MS, &probe));
    assert_int_equal(b.trips, 0);
}

static void test_backoff_full_jitter_capped(void **state)
{
    (void)state;
    uint64_t rng = 42;
    for (unsigned attempt = 0; attempt < 40; attempt++) {
        int64_t ceil = 100;
        for (unsigned i = 0; i < attempt && ceil < 5000; i++)
            ceil *= 2;
        if (ceil > 5000)
            ceil = 5000;
        int64_t lo = INT64_MAX, hi = -1;
        for (int i = 0; i < 400; i++) {
            int64_t d = sl_client_backoff_ms(attempt, 100, 5000, &rng);
            assert_true(d >= 0 && d <= ceil);
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
        }
        /* jitter spreads over the range: not all the same, reaches both halves */
        assert_true(lo < ceil / 2);
        assert_true(hi > ceil / 2);
    }
    assert_int_equal(sl_client_backoff_ms(3, 0, 100, &rng), 0);
    assert_int_equal(sl_client_backoff_ms(3, 10, 0, &rng), 0);
    /* same seed, same sequence; seed 0 works */
    uint64_t a = 7, b = 7, z = 0;
    for (int i = 0; i < 10; i++)
        assert_int_equal(sl_client_backoff_ms(2, 10, 1000, &a), sl_client_backoff_ms(2, 10, 1000, &b));
    assert_true(sl_client_rand_next(&z) != 0);
}

static void test_retry_delay(void **state)
{
    (void)state;
    uint64_t rng = 1;
    sl_attempt_reply r;
    sl_attempt_reply_init(&r);
    r.outcome = SL_ATTEMPT_ACCEPTED;
    r.http_status = 200;
    assert_int_equal(sl_client_retry_delay_ms(&r, 0, 100, 1000, &rng), -1);
    /* 429 with Retry-After: never sooner than asked, at most a quarter of the backoff later */
    r.outcome = SL_ATTEMPT_REJECTED;
    r.http_status = 429;
    r.retry_after_ms = 2000;
    for (int i = 0; i < 100; i++) {
        int64_t d = sl_client_retry_delay_ms(&r, 2, 100, 1000, &rng);
        assert_true(d >= 2000 && d <= 2000 + 100);
    }
    /* 503 shed without Retry-After: backoff, not "go ahead" */
    r.http_status = 503;
    r.retry_after_ms = -1;
    for (int i = 0; i < 100; i++) {
        int64_t d = sl_client_retry_delay_ms(&r, 1, 100, 1000, &rng);
        assert_true(d >= 0 && d <= 200);
    }
    /* a 400: do not retry; a 500 or no answer: retry with backoff */
    r.outcome = SL_ATTEMPT_FAILED;
    r.http_status = 400;
    assert_int_equal(sl_client_retry_delay_ms(&r, 0, 100, 1000, &rng), -1);
    r.http_status = 0;
    assert_true(sl_client_retry_delay_ms(&r, 0, 100, 1000, &rng) >= 0);
}

/* A hung server: listens (connects complete in the backlog), never accepts, never answers. */
static int hung_listener(char *addr, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 64), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(addr, cap, "127.0.0.1:%u", ntohs(sa.sin_port));
    return fd;
}

static atomic_int async_done;
static int async_err;
static bool async_open;

static void on_attempt(void *ud, int rc, const sl_attempt_reply *r)
{
    (void)ud;
    (void)rc;
    async_err = r->err;
    async_open = r->failed_open;
    atomic_store(&async_done, 1);
}

static void test_hung_server_calls_return_at_once(void **state)
{
    (void)state;
    char addr[64];
    int lfd = hung_listener(addr, sizeof addr);
    sl_client_options o;
    sl_client_options_default(&o);
    o.timeout_ms = 100;
    o.breaker_timeouts = 3;
    o.breaker_cooldown_ms = 60000; /* no probe during this test */
    sl_client *c;
    assert_int_equal(sl_client_new(addr, &o, &c), 0);
    sl_attempt a = {.resource = "api"};
    sl_attempt_reply r;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sl_client_attempt(c, &a, 0, &r), 0);
        assert_int_equal(r.err, -ETIMEDOUT);
        assert_true(r.failed_open);
    }
    sl_client_stats st;
    sl_client_stats_get(c, &st);
    assert_int_equal(st.timeouts, 3);
    assert_int_equal(st.breaker_trips, 1);
    assert_true(st.breaker_open);

    /* 50 more calls, each would cost 100 ms against the hung server: they return at once */
    int64_t t0 = sl_mono_ns();
    for (int i = 0; i < 25; i++) {
        assert_int_equal(sl_client_attempt(c, &a, 0, &r), 0);
        assert_true(r.allowed);
        assert_true(r.failed_open);
        assert_int_equal(r.err, -EHOSTDOWN);
        sl_client_item it = {.req = {.name = "n", .unique_key = "k", .hits = 1, .limit = 5,
                                     .duration = 1000}};
        sl_client_check_reply cr;
        assert_int_equal(sl_client_check(c, &it, 1, 0, &cr), 0);
        assert_true(cr.failed_open);
        assert_int_equal(cr.err, -EHOSTDOWN);
        assert_int_equal(cr.items[0].resp.status, SL_UNDER_LIMIT);
        sl_client_check_reply_free(&cr);
    }
    int64_t ms = (sl_mono_ns() - t0) / 1000000;
    assert_true(ms < 2500); /* 50 timeouts would take 5000 ms */

    /* async calls too, on the I/O thread */
    assert_int_equal(sl_client_attempt_async(c, &a, 0, on_attempt, NULL), 0);
    while (!atomic_load(&async_done))
        usleep(1000);
    assert_int_equal(async_err, -EHOSTDOWN);
    assert_true(async_open);

    /* health reports on the server: it is not gated, and still times out */
    sl_health_reply h;
    assert_true(sl_client_health(c, 50, &h) < 0);

    sl_client_stats_get(c, &st);
    assert_int_equal(st.breaker_rejected, 51);
    assert_int_equal(st.failed_open, 54);
    assert_int_equal(st.transport_errors, 0);
    assert_int_equal(st.breaker_probes, 0);

    /* failing closed, an open breaker denies at once with the error */
    sl_client_free(c);
    o.fail_closed = true;
    assert_int_equal(sl_client_new(addr, &o, &c), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl_client_attempt(c, &a, 0, &r), -ETIMEDOUT);
    assert_int_equal(sl_client_attempt(c, &a, 0, &r), -EHOSTDOWN);
    assert_false(r.allowed);
    sl_client_stats_get(c, &st);
    assert_int_equal(st.failed_closed, 4);
    sl_client_free(c);
    close(lfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_opens_after_threshold_timeouts),
        cmocka_unit_test(test_half_open_lets_one_probe),
        cmocka_unit_test(test_threshold_zero_never_opens),
        cmocka_unit_test(test_backoff_full_jitter_capped),
        cmocka_unit_test(test_retry_delay),
        cmocka_unit_test(test_hung_server_calls_return_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

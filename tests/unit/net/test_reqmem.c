/* SPDX-License-Identifier: Apache-2.0 */
/* The server-wide bound on buffered request bytes (net/reqmem.h): chunked accounts, the shared
 * count, the default's sizing, and HTTP/1.1's 503 past the bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "net/conn.h"
#include "net/exchange.h"
#include "net/reqmem.h"

#define CH SL_REQMEM_CHUNK

static void test_accounts_take_and_give_chunks(void **state)
{
    sl_reqmem m;
    sl_reqmem_init(&m, 10 * CH, 0);
    sl_reqmem_acct a = {.m = &m}, b = {.m = &m};
    sl_reqmem_charge(&a, 1);
    assert_int_equal(m.used, CH); /* one chunk of credit */
    sl_reqmem_charge(&a, CH - 1);
    assert_int_equal(m.used, CH); /* within the credit: the atomic did not move */
    sl_reqmem_charge(&a, 1);
    assert_int_equal(m.used, 2 * CH);
    sl_reqmem_charge(&b, 3 * CH + 5);
    assert_int_equal(m.used, 6 * CH);
    assert_false(sl_reqmem_over(&m));
    /* never below the exact sum, at most two chunks above it per account */
    assert_true(m.used >= a.used + b.used);
    assert_true(m.used <= a.used + b.used + 4 * CH);
    sl_reqmem_charge(&b, 5 * CH);
    assert_true(sl_reqmem_over(&m));
    /* releasing gives credit back once an account holds more than two spare chunks */
    sl_reqmem_release(&b, 8 * CH + 5);
    assert_int_equal(b.used, 0);
    assert_int_equal(b.credit, CH);
    assert_int_equal(m.used, 2 * CH + CH);
    assert_false(sl_reqmem_over(&m));
    sl_reqmem_release(&a, CH + 1);
    assert_int_equal(a.used, 0);
    assert_int_equal(m.used, 3 * CH); /* a keeps its two chunks: less than two spare + slack */
    sl_reqmem_stats st;
    sl_reqmem_stats_get(&m, &st);
    assert_int_equal(st.limit, 10 * CH);
    assert_true(st.peak >= 11 * CH);
    /* without a shared count an account still counts, and never refuses */
    sl_reqmem_acct none = {0};
    sl_reqmem_charge(&none, 100);
    assert_int_equal(none.used, 100);
    assert_false(sl_reqmem_over(NULL));
    sl_reqmem unbounded;
    sl_reqmem_init(&unbounded, 0, 1);
    sl_reqmem_acct u = {.m = &unbounded};
    sl_reqmem_charge(&u, 1u << 30);
    assert_false(sl_reqmem_over(&unbounded));
    /* with two accounts' slack, spare credit alone never makes it over: the exact sum must pass
     * the limit */
    sl_reqmem s2;
    sl_reqmem_init(&s2, 4 * CH, 2);
    assert_int_equal(s2.slack, 4 * CH);
    sl_reqmem_acct x = {.m = &s2}, y = {.m = &s2};
    sl_reqmem_charge(&x, 2 * CH + 1);
    sl_reqmem_charge(&y, 2 * CH - 1); /* exact sum 4 chunks: not over */
    sl_reqmem_release(&x, 0);
    assert_false(sl_reqmem_over(&s2));
    sl_reqmem_charge(&y, 4 * CH + 2); /* exact sum past limit + slack */
    assert_true(sl_reqmem_over(&s2));
}

static void test_default_is_sized_to_the_machine(void **state)
{
    assert_int_equal(sl_reqmem_default((uint64_t)16 << 30), (uint64_t)2 << 30);
    assert_int_equal(sl_reqmem_default((uint64_t)256 << 20), SL_REQMEM_MIN_DEFAULT);
    assert_true(sl_reqmem_default(0) >= SL_REQMEM_MIN_DEFAULT);
}

static int calls;
static void handler(void *ud, sl_exchange *ex)
{
    calls++;
    sl_exchange_respond_simple(ex, 200, "text/plain", "ok", 2);
}

static int status_of(sl_conn *c)
{
    sl_buf *o = sl_conn_out(c);
    int st = o->len > 12 ? atoi((const char *)o->data + 9) : 0;
    sl_buf_reset(o);
    return st;
}

/* Two HTTP/1.1 connections of one ctx: one holds an unfinished body past the bound; on the other
 * a request bringing a large body gets 503 (and is not handed to the handler) while a small one
 * is still served; once the holder is gone large ones are served again. */
static void test_h1_refused_past_the_bound(void **state)
{
    sl_reqmem m;
    sl_reqmem_init(&m, 100 * 1024, 0);
    sl_http_ctx *ctx = sl_http_ctx_new(NULL, handler, NULL);
    sl_http_ctx_set_reqmem(ctx, &m);
    sl_conn *holder = sl_conn_new(ctx, NULL, NULL, NULL);
    sl_conn *other = sl_conn_new(ctx, NULL, NULL, NULL);
    const char head[] = "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n";
    assert_int_equal(sl_conn_feed(holder, head, sizeof head - 1), 0);
    static char body[150 * 1024];
    memset(body, 'x', sizeof body);
    assert_int_equal(sl_conn_feed(holder, body, sizeof body), 0);
    assert_true(holder->req_bytes >= sizeof body);
    assert_true(sl_reqmem_over(&m));
    const char get[] = "GET /y HTTP/1.1\r\nHost: a\r\n\r\n";
    calls = 0;
    assert_int_equal(sl_conn_feed(other, get, sizeof get - 1), 0);
    assert_int_equal(status_of(other), 200); /* small: served */
    assert_int_equal(calls, 1);
    const char big[] = "POST /y HTTP/1.1\r\nHost: a\r\nContent-Length: 20000\r\n\r\n";
    assert_int_equal(sl_conn_feed(other, big, sizeof big - 1), 0);
    assert_int_equal(status_of(other), 503);
    assert_int_equal(calls, 1);
    assert_true(sl_conn_done(other));
    sl_reqmem_stats st;
    sl_reqmem_stats_get(&m, &st);
    assert_int_equal(st.refused, 1);
    sl_net_stats ns = {0};
    sl_http_ctx_stats(ctx, &ns);
    assert_int_equal(ns.protocol_errors, 0); /* our bound, not the client's error */
    sl_conn_free(other);
    sl_conn_free(holder);
    assert_false(sl_reqmem_over(&m));
    sl_conn *again = sl_conn_new(ctx, NULL, NULL, NULL);
    assert_int_equal(sl_conn_feed(again, big, sizeof big - 1), 0);
    static char body2[20000];
    assert_int_equal(sl_conn_feed(again, body2, sizeof body2), 0);
    assert_int_equal(status_of(again), 200);
    assert_int_equal(calls, 2);
    sl_conn_free(again);
    sl_http_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accounts_take_and_give_chunks),
        cmocka_unit_test(test_default_is_sized_to_the_machine),
        cmocka_unit_test(test_h1_refused_past_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

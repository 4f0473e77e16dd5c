/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decider interface and the local engine's decider (decide/decider.c). Checked: submit
 * answers every item from the engine and calls done exactly once before it returns, with the
 * batch it was given; items already answered are skipped (their error kept) and the others still
 * decided; an empty batch is answered too; the worker hooks are no-ops for the engine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "decide/decider.h"

typedef struct seen {
    int calls;
    sl_batch *b;
} seen;

static void done(void *ud, sl_batch *b)
{
    seen *s = ud;
    s->calls++;
    s->b = b;
}

static void fill(sl_batch *b, size_t n)
{
    static const char *const keys[] = {"a", "b", "c"};
    assert_int_equal(sl_batch_alloc_items(b, n), 0);
    for (size_t i = 0; i < n; i++)
        b->reqs[i] = (sl_request){.name = "n", .name_len = 1, .unique_key = keys[i],
                                  .unique_key_len = 1, .hits = 1, .limit = 5, .duration = 1000};
}

static void test_local(void **state)
{
    (void)state;
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    sl_engine *e;
    assert_int_equal(sl_engine_new(&ec, &e), 0);
    sl_decider d = sl_decider_local(e);
    assert_string_equal(d.ops->name, "local");
    assert_ptr_equal(d.self, e);
    sl_decider_worker_start(&d, 0, NULL); /* nothing per worker */

    sl_batch b;
    sl_batch_init(&b, 0);
    fill(&b, 3);
    seen s = {0};
    sl_decider_submit(&d, 0, &b, 1000, done, &s);
    assert_int_equal(s.calls, 1);
    assert_ptr_equal(s.b, &b);
    for (size_t i = 0; i < 3; i++) {
        assert_null(b.resps[i].error);
        assert_int_equal(b.resps[i].remaining, 4);
    }

    /* one item answered while decoding: kept, the others decided one by one */
    sl_batch_reset(&b);
    fill(&b, 3);
    sl_batch_answer(&b, 1, "bad item");
    sl_decider_submit(&d, 0, &b, 1000, done, &s);
    assert_int_equal(s.calls, 2);
    assert_int_equal(b.resps[0].remaining, 3);
    assert_string_equal(b.resps[1].error, "bad item");
    assert_int_equal(b.resps[2].remaining, 3);

    /* nothing to decide: still answered, once */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 0), 0);
    sl_decider_submit(&d, 0, &b, 1000, done, &s);
    assert_int_equal(s.calls, 3);

    sl_decider_worker_stop(&d, 0);
    sl_batch_free(&b);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batches and their arena (decide/batch.c). Checked: items come zeroed, n = 0 is valid, a count
 * whose size overflows is refused; arena allocations are 16-byte aligned, copies are
 * NUL-terminated and independent of their source; the arena never holds more than its cap
 * (allocations past it fail and set `oom`, which a reset clears); a big one-off allocation does
 * not waste the current chunk; a reset keeps one chunk big enough for the last call (at most
 * 1 MiB), so a repeated call allocates nothing new; metadata maps replace on set, keep insertion
 * order, grow, copy (set) or reference (add_ref) their strings, and the last of repeated keys
 * wins; answering an item marks it once and replaces its response; the protobuf-c allocator
 * draws on the arena.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decide/batch.h"

static void test_items_zeroed(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(b.arena_cap, SL_BATCH_DEFAULT_ARENA_CAP);
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.n_answered, 0);
    for (size_t i = 0; i < 3; i++) {
        assert_null(b.reqs[i].name);
        assert_int_equal(b.reqs[i].hits, 0);
        assert_null(b.resps[i].error);
        assert_int_equal(b.req_meta[i].n, 0);
        assert_int_equal(b.resp_meta[i].n, 0);
        assert_int_equal(b.answered[i], 0);
    }
    /* items are reused after a reset: zeroed again */
    b.reqs[1].hits = 5;
    b.answered[2] = 1;
    sl_batch_reset(&b);
    assert_int_equal(b.n, 0);
    assert_null(b.reqs);
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    assert_int_equal(b.reqs[1].hits, 0);
    assert_int_equal(b.answered[2], 0);
    /* none at all */
    sl_batch_reset(&b);
    assert_int_equal(sl_batch_alloc_items(&b, 0), 0);
    assert_int_equal(b.n, 0);
    assert_null(b.reqs);
    assert_null(b.answered);
    /* a count whose size overflows, and one over the cap */
    assert_int_equal(sl_batch_alloc_items(&b, SIZE_MAX / 8), -ENOMEM);
    sl_batch_free(&b);
    sl_batch_init(&b, 64 << 10);
    assert_int_equal(sl_batch_alloc_items(&b, 10000), -ENOMEM);
    assert_true(b.oom);
    sl_batch_free(&b);
}

static void test_alloc_alignment_and_copies(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    void *prev = NULL;
    for (size_t size = 0; size < 100; size += 7) {
        void *p = sl_batch_alloc(&b, size);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        assert_ptr_not_equal(p, prev); /* size 0 still gets its own byte */
        prev = p;
    }
    char src[] = "hello world";
    char *c = sl_batch_strndup(&b, src, 5);
    assert_string_equal(c, "hello");
    src[0] = 'j';
    assert_string_equal(c, "hello"); /* a copy */
    assert_string_equal(sl_batch_strndup(&b, "", 0), "");
    assert_null(sl_batch_strndup(&b, src, SIZE_MAX));
    assert_null(sl_batch_alloc(&b, SIZE_MAX - 3));
    assert_true(b.oom);
    sl_batch_reset(&b);
    assert_false(b.oom);
    sl_batch_free(&b);
}

static void test_arena_cap(void **state)
{
    (void)state;
    const size_t cap = 256 << 10;
    sl_batch b;
    sl_batch_init(&b, cap);
    size_t got = 0;
    while (sl_batch_alloc(&b, 1000))
        got += 1000;
    assert_true(b.oom);
    assert_true(b.arena_bytes <= cap);
    assert_true(got > cap / 2); /* the cap is what stops it, not something smaller */
    assert_null(sl_batch_alloc(&b, cap + 1)); /* one allocation over the cap */
    /* after a reset the batch works again, within the same cap */
    sl_batch_reset(&b);
    assert_false(b.oom);
    assert_non_null(sl_batch_alloc(&b, 1000));
    assert_true(b.arena_bytes <= cap);
    sl_batch_free(&b);
}

static void test_big_allocation_keeps_current_chunk(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    char *small = sl_batch_alloc(&b, 16);
    char *big = sl_batch_alloc(&b, 100000);
    assert_non_null(big);
    memset(big, 1, 100000);
    char *next = sl_batch_alloc(&b, 16);
    assert_ptr_equal(next, small + 16); /* still from the first chunk */
    sl_batch_free(&b);
}

static void test_reset_keeps_room_for_the_last_call(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    /* a call that needs ~300 KiB in small pieces (several 64 KiB chunks) */
    for (int i = 0; i < 300; i++)
        assert_non_null(sl_batch_alloc(&b, 1024));
    size_t used_bytes = b.arena_bytes;
    assert_true(used_bytes >= 300 * 1024);
    sl_batch_reset(&b);
    size_t kept = b.arena_bytes;
    assert_true(kept >= 300 * 1024); /* one chunk that holds the whole call */
    assert_true(kept <= (size_t)1 << 20);
    assert_non_null(b.chunks);
    /* the same call again: nothing new is allocated */
    for (int i = 0; i < 300; i++)
        assert_non_null(sl_batch_alloc(&b, 1024));
    assert_int_equal(b.arena_bytes, kept);

    /* a call of several MiB: what is kept is capped at 1 MiB */
    for (int i = 0; i < 40; i++)
        assert_non_null(sl_batch_alloc(&b, 100 << 10));
    sl_batch_reset(&b);
    assert_true(b.arena_bytes <= (size_t)1 << 20);
    sl_batch_free(&b);
    assert_null(b.chunks);
    assert_int_equal(b.arena_bytes, 0);
}

static void test_meta(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_batch_alloc_items(&b, 1), 0);
    sl_meta *m = &b.resp_meta[0];
    assert_null(sl_batch_meta_get(m, "owner"));
    char key[] = "owner", val[] = "10.0.0.1:81";
    assert_int_equal(sl_batch_meta_set(&b, m, key, val), 0);
    key[0] = 'X';
    val[0] = '9';
    assert_string_equal(sl_batch_meta_get(m, "owner"), "10.0.0.1:81"); /* copies */
    assert_int_equal(sl_batch_meta_set(&b, m, "owner", "10.0.0.2:81"), 0);
    assert_int_equal(m->n, 1); /* replaced, not added */
    assert_string_equal(sl_batch_meta_get(m, "owner"), "10.0.0.2:81");
    /* many entries: the map grows and keeps its order */
    char k[16], v[16];
    for (int i = 0; i < 20; i++) {
        snprintf(k, sizeof k, "k%d", i);
        snprintf(v, sizeof v, "v%d", i);
        assert_int_equal(sl_batch_meta_set(&b, m, k, v), 0);
    }
    assert_int_equal(m->n, 21);
    assert_string_equal(m->kv[0].key, "owner");
    assert_string_equal(m->kv[20].key, "k19");
    assert_string_equal(sl_batch_meta_get(m, "k7"), "v7");
    /* add_ref: no copy, no lookup; with repeated keys the last wins */
    static const char rk[] = "trace", rv1[] = "a", rv2[] = "b";
    sl_meta *q = &b.req_meta[0];
    assert_int_equal(sl_batch_meta_add_ref(&b, q, rk, rv1), 0);
    assert_int_equal(sl_batch_meta_add_ref(&b, q, rk, rv2), 0);
    assert_int_equal(q->n, 2);
    assert_ptr_equal(q->kv[0].val, rv1);
    assert_ptr_equal(sl_batch_meta_get(q, "trace"), rv2);
    sl_batch_free(&b);
}

static void test_answer(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    assert_int_equal(sl_batch_alloc_items(&b, 3), 0);
    b.resps[1].remaining = 7;
    b.resps[1].status = SL_OVER_LIMIT;
    sl_batch_answer(&b, 1, "field 'unique_key' cannot be empty");
    assert_int_equal(b.answered[1], 1);
    assert_int_equal(b.n_answered, 1);
    assert_string_equal(b.resps[1].error, "field 'unique_key' cannot be empty");
    assert_int_equal(b.resps[1].remaining, 0); /* the response is replaced, not patched */
    assert_int_equal(b.resps[1].status, 0);
    sl_batch_answer(&b, 1, "another");
    assert_int_equal(b.n_answered, 1); /* counted once */
    assert_string_equal(b.resps[1].error, "another");
    sl_batch_answer(&b, 3, "out of range"); /* ignored */
    assert_int_equal(b.n_answered, 1);
    assert_int_equal(b.answered[0] + b.answered[2], 0);
    sl_batch_free(&b);
}

static void test_pb_allocator(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    ProtobufCAllocator *a = sl_batch_pb_allocator(&b);
    assert_int_equal(b.arena_bytes, 0);
    void *p = a->alloc(a->allocator_data, 100);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    assert_true(b.arena_bytes > 0);
    a->free(a->allocator_data, p); /* a no-op: the arena goes at reset */
    void *q = a->alloc(a->allocator_data, 100);
    assert_ptr_equal(q, (char *)p + 112);
    sl_batch_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items_zeroed),
        cmocka_unit_test(test_alloc_alignment_and_copies),
        cmocka_unit_test(test_arena_cap),
        cmocka_unit_test(test_big_allocation_keeps_current_chunk),
        cmocka_unit_test(test_reset_keeps_room_for_the_last_call),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_answer),
        cmocka_unit_test(test_pb_allocator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* sl_pb: varints (widths, truncation, the 10-byte limit), keys, length-delimited fields, skipping,
 * the top-level field count, and the writer against hand-encoded bytes and the reader. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/pbwire.h"

#define RD(a) ((sl_pb_rd){(a), (a) + sizeof(a)})

static void test_varint(void **state)
{
    (void)state;
    uint64_t v;
    const uint8_t one[] = {0x05};
    sl_pb_rd r = RD(one);
    assert_true(sl_pb_varint(&r, &v));
    assert_int_equal(v, 5);
    assert_ptr_equal(r.p, r.end);
    const uint8_t two[] = {0xac, 0x02, 0x99};
    r = RD(two);
    assert_true(sl_pb_varint(&r, &v));
    assert_int_equal(v, 300);
    assert_int_equal(r.end - r.p, 1);
    /* -1 as int64: ten bytes */
    const uint8_t neg[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    r = RD(neg);
    assert_true(sl_pb_varint(&r, &v));
    assert_int_equal(v, UINT64_MAX);
    /* bits past 64 are dropped, as protobuf-c does */
    const uint8_t over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    r = RD(over);
    assert_true(sl_pb_varint(&r, &v));
    assert_int_equal(v, UINT64_MAX);
    /* eleven bytes, truncated, empty */
    const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    r = RD(eleven);
    assert_false(sl_pb_varint(&r, &v));
    const uint8_t cut[] = {0x80, 0x80};
    r = RD(cut);
    assert_false(sl_pb_varint(&r, &v));
    assert_ptr_equal(r.p, cut); /* a failed read does not move the cursor */
    r = (sl_pb_rd){cut, cut};
    assert_false(sl_pb_varint(&r, &v));
}

static void test_key_bytes(void **state)
{
    (void)state;
    uint32_t field;
    unsigned wt;
    const uint8_t k1[] = {0x0a};
    sl_pb_rd r = RD(k1);
    assert_true(sl_pb_key(&r, &field, &wt));
    assert_int_equal(field, 1);
    assert_int_equal(wt, SL_PB_LEN);
    const uint8_t k0[] = {0x02};
    r = RD(k0);
    assert_false(sl_pb_key(&r, &field, &wt)); /* field 0 */
    /* field 1000, varint: (1000 << 3) = 8000 = 0xc0 0x3e */
    const uint8_t big[] = {0xc0, 0x3e};
    r = RD(big);
    assert_true(sl_pb_key(&r, &field, &wt));
    assert_int_equal(field, 1000);
    assert_int_equal(wt, 0);
    /* a 6-byte key is refused */
    const uint8_t k6[] = {0x88, 0x80, 0x80, 0x80, 0x80, 0x00};
    r = RD(k6);
    assert_false(sl_pb_key(&r, &field, &wt));

    const uint8_t f[] = {0x03, 'a', 'b', 'c', 0x7f};
    r = RD(f);
    sl_pb_rd sub;
    assert_true(sl_pb_bytes(&r, &sub));
    assert_int_equal(sub.end - sub.p, 3);
    assert_memory_equal(sub.p, "abc", 3);
    assert_int_equal(r.end - r.p, 1);
    const uint8_t shortf[] = {0x04, 'a'};
    r = RD(shortf);
    assert_false(sl_pb_bytes(&r, &sub));
    /* a 5-byte length is declined */
    const uint8_t len5[] = {0x80, 0x80, 0x80, 0x80, 0x00};
    r = RD(len5);
    assert_false(sl_pb_bytes(&r, &sub));
}

static void test_skip(void **state)
{
    (void)state;
    const uint8_t v[] = {0x96, 0x01};
    sl_pb_rd r = RD(v);
    assert_true(sl_pb_skip(&r, SL_PB_VARINT));
    assert_ptr_equal(r.p, r.end);
    const uint8_t f64[8] = {0};
    r = RD(f64);
    assert_true(sl_pb_skip(&r, SL_PB_I64));
    r = (sl_pb_rd){f64, f64 + 7};
    assert_false(sl_pb_skip(&r, SL_PB_I64));
    r = (sl_pb_rd){f64, f64 + 4};
    assert_true(sl_pb_skip(&r, SL_PB_I32));
    assert_ptr_equal(r.p, r.end);
    const uint8_t l[] = {0x02, 'x', 'y'};
    r = RD(l);
    assert_true(sl_pb_skip(&r, SL_PB_LEN));
    assert_ptr_equal(r.p, r.end);
    for (unsigned wt = 3; wt <= 7; wt++) {
        if (wt == 5)
            continue;
        r = RD(l);
        assert_false(sl_pb_skip(&r, wt));
    }
}

static void test_count_field(void **state)
{
    (void)state;
    size_t n;
    /* 1:"a", 2:varint 7, 1:"", 3:fixed32, 1:"bc" */
    const uint8_t m[] = {0x0a, 0x01, 'a', 0x10, 0x07, 0x0a, 0x00, 0x1d, 1, 2, 3, 4,
                         0x0a, 0x02, 'b', 'c'};
    assert_int_equal(sl_pb_count_field(m, sizeof m, 1, 100, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(sl_pb_count_field(m, sizeof m, 2, 100, &n), 0);
    assert_int_equal(n, 0); /* field 2 is a varint here, not length-delimited */
    /* stops once past stop_after */
    assert_int_equal(sl_pb_count_field(m, sizeof m, 1, 1, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(sl_pb_count_field(m, 0, 1, 1, &n), 0);
    assert_int_equal(n, 0);
    /* malformed: truncated, field 0, a group, a length past the end */
    assert_int_equal(sl_pb_count_field(m, sizeof m - 1, 1, 100, &n), -EINVAL);
    const uint8_t f0[] = {0x02, 0x00};
    assert_int_equal(sl_pb_count_field(f0, sizeof f0, 1, 100, &n), -EINVAL);
    const uint8_t grp[] = {0x0b};
    assert_int_equal(sl_pb_count_field(grp, sizeof grp, 1, 100, &n), -EINVAL);
    const uint8_t far[] = {0x0a, 0x05, 'a'};
    assert_int_equal(sl_pb_count_field(far, sizeof far, 1, 100, &n), -EINVAL);
    /* unlike sl_pb_bytes, the scan takes a 5-byte (non-minimal) length */
    const uint8_t wide[] = {0x0a, 0x81, 0x80, 0x80, 0x80, 0x00, 'z'};
    assert_int_equal(sl_pb_count_field(wide, sizeof wide, 1, 100, &n), 0);
    assert_int_equal(n, 1);
}

static void test_write(void **state)
{
    (void)state;
    const uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, (1ull << 35) - 1, 1ull << 35,
                             (uint64_t)INT64_MAX, UINT64_MAX};
    const size_t sizes[] = {1, 1, 1, 2, 2, 2, 3, 5, 6, 9, 10};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint8_t buf[16];
        assert_int_equal(sl_pb_varint_size(vals[i]), sizes[i]);
        uint8_t *end = sl_pb_put_varint(buf, vals[i]);
        assert_int_equal(end - buf, sizes[i]);
        sl_pb_rd r = {buf, end};
        uint64_t back;
        assert_true(sl_pb_varint(&r, &back));
        assert_int_equal(back, vals[i]);
        assert_ptr_equal(r.p, end);
    }
    uint8_t buf[32];
    assert_int_equal(sl_pb_str_field_size(0), 0);
    assert_ptr_equal(sl_pb_put_str_field(buf, 0x0a, "", 0), buf);
    assert_int_equal(sl_pb_str_field_size(3), 5);
    uint8_t *w = sl_pb_put_str_field(buf, 0x0a, "abc", 3);
    const uint8_t want_s[] = {0x0a, 0x03, 'a', 'b', 'c'};
    assert_int_equal(w - buf, 5);
    assert_memory_equal(buf, want_s, 5);
    assert_int_equal(sl_pb_i64_field_size(0), 0);
    assert_ptr_equal(sl_pb_put_i64_field(buf, 0x10, 0), buf);
    assert_int_equal(sl_pb_i64_field_size(150), 3);
    w = sl_pb_put_i64_field(buf, 0x10, 150);
    const uint8_t want_i[] = {0x10, 0x96, 0x01};
    assert_int_equal(w - buf, 3);
    assert_memory_equal(buf, want_i, 3);
    assert_int_equal(sl_pb_i64_field_size(-1), 11);
    w = sl_pb_put_i64_field(buf, 0x18, -1);
    assert_int_equal(w - buf, 11);
    sl_pb_rd r = {buf, w};
    uint32_t field;
    unsigned wt;
    uint64_t v;
    assert_true(sl_pb_key(&r, &field, &wt));
    assert_int_equal(field, 3);
    assert_true(sl_pb_varint(&r, &v));
    assert_int_equal((int64_t)v, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varint),
        cmocka_unit_test(test_key_bytes),
        cmocka_unit_test(test_skip),
        cmocka_unit_test(test_count_field),
        cmocka_unit_test(test_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

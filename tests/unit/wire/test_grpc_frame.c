/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC framing, status codes, grpc-message percent-encoding, grpc-timeout, content-type. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/grpc_frame.h"

static void test_decode_whole_and_partial(void **state)
{
    (void)state;
    const uint8_t f[] = {0, 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 0};
    sl_grpc_msg m;
    const char *err;
    /* every strict prefix of the first frame is incomplete */
    for (size_t n = 0; n < 8; n++) {
        assert_int_equal(sl_grpc_frame_decode(f, n, 100, &m, &err), -EAGAIN);
        assert_null(err);
        assert_int_equal(m.frame_len, n < 5 ? 5 : 8);
    }
    assert_int_equal(sl_grpc_frame_decode(f, sizeof f, 100, &m, &err), 0);
    assert_int_equal(m.len, 3);
    assert_memory_equal(m.data, "abc", 3);
    assert_false(m.compressed);
    assert_int_equal(m.frame_len, 8);
    /* the second, empty message follows */
    assert_int_equal(sl_grpc_frame_decode(f + 8, sizeof f - 8, 100, &m, &err), 0);
    assert_int_equal(m.len, 0);
    assert_int_equal(m.frame_len, 5);
}

static void test_decode_limits_and_flags(void **state)
{
    (void)state;
    sl_grpc_msg m;
    const char *err;
    /* a 2 MiB length is refused from the header alone */
    const uint8_t big[] = {0, 0, 0x20, 0, 0};
    assert_int_equal(sl_grpc_frame_decode(big, sizeof big, SL_GRPC_DEFAULT_MAX_MSG, &m, &err),
                     -EMSGSIZE);
    assert_non_null(err);
    /* exactly the maximum is fine (incomplete here) */
    const uint8_t max[] = {0, 0, 0x10, 0, 0};
    assert_int_equal(sl_grpc_frame_decode(max, sizeof max, SL_GRPC_DEFAULT_MAX_MSG, &m, &err),
                     -EAGAIN);
    assert_int_equal(m.frame_len, 5 + (1 << 20));
    const uint8_t huge[] = {0, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(sl_grpc_frame_decode(huge, sizeof huge, SIZE_MAX, &m, &err), -EAGAIN);
    assert_int_equal(m.frame_len, (size_t)5 + 0xffffffffu);
    const uint8_t comp[] = {1, 0, 0, 0, 1, 'x'};
    assert_int_equal(sl_grpc_frame_decode(comp, sizeof comp, 10, &m, &err), 0);
    assert_true(m.compressed);
    const uint8_t bad[] = {2, 0, 0, 0, 0};
    assert_int_equal(sl_grpc_frame_decode(bad, sizeof bad, 10, &m, &err), -EPROTO);
    assert_non_null(err);
    assert_int_equal(sl_grpc_frame_decode(bad, 1, 10, &m, &err), -EPROTO);
}

static void test_encode(void **state)
{
    (void)state;
    uint8_t h[5];
    assert_int_equal(sl_grpc_frame_header(h, 0x01020304, true), 0);
    const uint8_t want[] = {1, 1, 2, 3, 4};
    assert_memory_equal(h, want, 5);
    if (sizeof(size_t) > 4)
        assert_int_equal(sl_grpc_frame_header(h, (size_t)UINT32_MAX + 1, false), -EMSGSIZE);

    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_grpc_frame_append(&b, "hello", 5), 0);
    size_t mark;
    assert_int_equal(sl_grpc_frame_begin(&b, &mark), 0);
    assert_int_equal(mark, 10);
    assert_int_equal(sl_buf_append(&b, "xy", 2), 0);
    assert_int_equal(sl_grpc_frame_end(&b, mark), 0);
    assert_int_equal(sl_grpc_frame_end(&b, b.len), -EINVAL);

    sl_grpc_msg m;
    const char *err;
    assert_int_equal(sl_grpc_frame_decode(b.data, b.len, 100, &m, &err), 0);
    assert_int_equal(m.len, 5);
    assert_memory_equal(m.data, "hello", 5);
    assert_int_equal(sl_grpc_frame_decode(b.data + m.frame_len, b.len - m.frame_len, 100, &m, &err),
                     0);
    assert_int_equal(m.len, 2);
    assert_memory_equal(m.data, "xy", 2);
    sl_buf_free(&b);

    /* a capped buffer refuses rather than grows */
    sl_buf_init(&b, 6);
    assert_int_equal(sl_grpc_frame_append(&b, "hello", 5), -EMSGSIZE);
    sl_buf_free(&b);
}

static void test_codes(void **state)
{
    (void)state;
    assert_string_equal(sl_grpc_code_name(SL_GRPC_OK), "OK");
    assert_string_equal(sl_grpc_code_name(SL_GRPC_OUT_OF_RANGE), "OUT_OF_RANGE");
    assert_string_equal(sl_grpc_code_name(16), "UNAUTHENTICATED");
    assert_null(sl_grpc_code_name(17));
    assert_null(sl_grpc_code_name(-1));
    assert_int_equal(sl_grpc_code_to_http(SL_GRPC_OK), 200);
    assert_int_equal(sl_grpc_code_to_http(SL_GRPC_OUT_OF_RANGE), 400);
    assert_int_equal(sl_grpc_code_to_http(SL_GRPC_INVALID_ARGUMENT), 400);
    assert_int_equal(sl_grpc_code_to_http(SL_GRPC_UNAVAILABLE), 503);
    assert_int_equal(sl_grpc_code_to_http(SL_GRPC_RESOURCE_EXHAUSTED), 429);
    assert_int_equal(sl_grpc_code_to_http(SL_GRPC_UNIMPLEMENTED), 501);
    assert_int_equal(sl_grpc_code_to_http(99), 500);
}

static void test_percent(void **state)
{
    (void)state;
    sl_buf b;
    sl_buf_init(&b, 0);
    const char msg[] = "50% off\n\xc3\xa9t\xc3\xa9 ~";
    assert_int_equal(sl_grpc_message_encode(msg, strlen(msg), &b), 0);
    assert_int_equal(sl_buf_append(&b, "", 1), 0);
    assert_string_equal((char *)b.data, "50%25 off%0A%C3%A9t%C3%A9 ~");
    sl_buf dec;
    sl_buf_init(&dec, 0);
    assert_int_equal(sl_grpc_message_decode((char *)b.data, b.len - 1, &dec), 0);
    assert_int_equal(dec.len, strlen(msg));
    assert_string_equal((char *)dec.data, msg);
    /* malformed escapes pass through */
    sl_buf_reset(&dec);
    assert_int_equal(sl_grpc_message_decode("a%zzb%4%", 8, &dec), 0);
    assert_string_equal((char *)dec.data, "a%zzb%4%");
    sl_buf_reset(&dec);
    assert_int_equal(sl_grpc_message_decode("%41%62", 6, &dec), 0);
    assert_string_equal((char *)dec.data, "Ab");
    sl_buf_free(&b);
    sl_buf_free(&dec);
}

static void test_timeout(void **state)
{
    (void)state;
    int64_t ms = -1;
    assert_int_equal(sl_grpc_timeout_parse("1S", 2, &ms), 0);
    assert_int_equal(ms, 1000);
    assert_int_equal(sl_grpc_timeout_parse("250m", 4, &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(sl_grpc_timeout_parse("2H", 2, &ms), 0);
    assert_int_equal(ms, 7200000);
    assert_int_equal(sl_grpc_timeout_parse("3M", 2, &ms), 0);
    assert_int_equal(ms, 180000);
    assert_int_equal(sl_grpc_timeout_parse("1u", 2, &ms), 0);
    assert_int_equal(ms, 1);
    assert_int_equal(sl_grpc_timeout_parse("1500000n", 8, &ms), 0);
    assert_int_equal(ms, 2);
    assert_int_equal(sl_grpc_timeout_parse("99999999H", 9, &ms), 0);
    assert_int_equal(ms, (int64_t)99999999 * 3600000);
    assert_int_equal(sl_grpc_timeout_parse("123456789S", 10, &ms), -EINVAL);
    assert_int_equal(sl_grpc_timeout_parse("S", 1, &ms), -EINVAL);
    assert_int_equal(sl_grpc_timeout_parse("10x", 3, &ms), -EINVAL);
    assert_int_equal(sl_grpc_timeout_parse("-1S", 3, &ms), -EINVAL);
}

static void test_content_type(void **state)
{
    (void)state;
#define CT(s) sl_grpc_content_type_ok(s, strlen(s))
    assert_true(CT("application/grpc"));
    assert_true(CT("application/grpc+proto"));
    assert_true(CT("Application/GRPC; charset=utf-8"));
    assert_true(CT("application/grpc+proto;x=y"));
    assert_false(CT("application/grpc+json"));
    assert_false(CT("application/grpcx"));
    assert_false(CT("application/json"));
    assert_false(CT(""));
#undef CT
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_whole_and_partial),
        cmocka_unit_test(test_decode_limits_and_flags),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_codes),
        cmocka_unit_test(test_percent),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_content_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

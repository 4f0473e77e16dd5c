/* SPDX-License-Identifier: Apache-2.0 */
/* sl_protojson: field lookup by proto and camelCase names, map fields, element sizes, the integer
 * and enum conversions both JSON parsers share, allocation through a ProtobufCAllocator. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gubernator.pb-c.h"
#include "json/protojson.h"

static const ProtobufCMessageDescriptor *req = &pb__gubernator__rate_limit_req__descriptor;

static const char *field(const char *key, unsigned *hint)
{
    const ProtobufCFieldDescriptor *f = sl_protojson_find_field(req, key, strlen(key), hint);
    return f ? f->name : NULL;
}

static void test_camel(void **state)
{
    (void)state;
    assert_true(sl_protojson_is_camel_of("uniqueKey", 9, "unique_key"));
    assert_true(sl_protojson_is_camel_of("hits", 4, "hits"));
    assert_true(sl_protojson_is_camel_of("createdAt", 9, "created_at"));
    assert_false(sl_protojson_is_camel_of("unique_key", 10, "unique_key"));
    assert_false(sl_protojson_is_camel_of("uniquekey", 9, "unique_key"));
    assert_false(sl_protojson_is_camel_of("uniqueKeyX", 10, "unique_key"));
    assert_false(sl_protojson_is_camel_of("uniqueKe", 8, "unique_key"));
    /* the key need not be NUL-terminated: only n bytes count */
    assert_true(sl_protojson_is_camel_of("uniqueKey\"junk", 9, "unique_key"));
}

static void test_find_field(void **state)
{
    (void)state;
    unsigned hint = 0;
    assert_string_equal(field("name", &hint), "name");
    assert_string_equal(field("unique_key", &hint), "unique_key");
    assert_string_equal(field("uniqueKey", &hint), "unique_key");
    assert_string_equal(field("created_at", &hint), "created_at");
    /* the exact search wraps around from the hint */
    assert_string_equal(field("hits", &hint), "hits");
    assert_string_equal(field("createdAt", &hint), "created_at");
    assert_null(field("created", &hint));
    assert_null(field("", &hint));
    assert_null(field("Hits", &hint));
    hint = 0;
    assert_string_equal(field("metadata", &hint), "metadata");
}

static void test_maps_and_sizes(void **state)
{
    (void)state;
    unsigned hint = 0;
    const ProtobufCFieldDescriptor *meta = sl_protojson_find_field(req, "metadata", 8, &hint);
    const ProtobufCFieldDescriptor *name = sl_protojson_find_field(req, "name", 4, &hint);
    assert_non_null(meta);
    assert_true(sl_protojson_is_map_entry(meta));
    assert_false(sl_protojson_is_map_entry(name));
    /* a repeated message that is not a map entry */
    const ProtobufCFieldDescriptor *reqs = protobuf_c_message_descriptor_get_field_by_name(
        &pb__gubernator__get_rate_limits_req__descriptor, "requests");
    assert_false(sl_protojson_is_map_entry(reqs));
    assert_int_equal(sl_protojson_scalar_size(PROTOBUF_C_TYPE_INT64), 8);
    assert_int_equal(sl_protojson_scalar_size(PROTOBUF_C_TYPE_INT32), 4);
    assert_int_equal(sl_protojson_scalar_size(PROTOBUF_C_TYPE_ENUM), sizeof(int));
    assert_int_equal(sl_protojson_scalar_size(PROTOBUF_C_TYPE_STRING), sizeof(char *));
    assert_int_equal(sl_protojson_scalar_size(PROTOBUF_C_TYPE_MESSAGE), sizeof(void *));
    assert_int_equal(sl_protojson_scalar_size(PROTOBUF_C_TYPE_BOOL), sizeof(protobuf_c_boolean));
}

static void test_ints(void **state)
{
    (void)state;
    int64_t v;
#define T2I(s, u) sl_protojson_text_to_int(s, strlen(s), u, &v)
    assert_true(T2I("10", false));
    assert_int_equal(v, 10);
    assert_true(T2I("-9223372036854775808", false));
    assert_int_equal(v, INT64_MIN);
    assert_false(T2I("9223372036854775808", false));
    assert_true(T2I("18446744073709551615", true));
    assert_int_equal((uint64_t)v, UINT64_MAX);
    assert_false(T2I("18446744073709551616", true));
    assert_false(T2I("-1", true));
    assert_true(T2I("-0", true));
    assert_int_equal(v, 0);
    assert_true(T2I("1e1", false));
    assert_int_equal(v, 10);
    assert_true(T2I("2.0", false));
    assert_int_equal(v, 2);
    assert_false(T2I("2.5", false));
    assert_false(T2I("01", false));
    assert_false(T2I(" 1", false));
    assert_false(T2I("", false));
    assert_false(T2I("1e", false));
    assert_false(T2I("0x10", false));
#undef T2I
    assert_true(sl_protojson_double_to_int(3.0, false, &v));
    assert_int_equal(v, 3);
    assert_false(sl_protojson_double_to_int(3.5, false, &v));
    assert_false(sl_protojson_double_to_int(-1.0, true, &v));
    assert_false(sl_protojson_double_to_int(9223372036854775808.0, false, &v));
    assert_true(sl_protojson_double_to_int(9223372036854775808.0, true, &v));
    assert_false(sl_protojson_double_to_int(NAN, false, &v));
    assert_false(sl_protojson_double_to_int(INFINITY, false, &v));
}

static void test_enums(void **state)
{
    (void)state;
    const ProtobufCEnumDescriptor *b = &pb__gubernator__behavior__descriptor;
    const ProtobufCEnumDescriptor *a = &pb__gubernator__algorithm__descriptor;
    int e;
#define E(d, s) sl_protojson_enum_from_name(d, s, strlen(s), &e)
    assert_true(E(b, "GLOBAL"));
    assert_int_equal(e, 2);
    assert_true(E(b, "GLOBAL|NO_BATCHING"));
    assert_int_equal(e, 3);
    assert_true(E(b, " RESET_REMAINING | DRAIN_OVER_LIMIT "));
    assert_int_equal(e, 8 | 32);
    assert_false(E(b, "GLOBAL|"));
    assert_false(E(b, "GLOBAL|NOPE"));
    assert_false(E(b, "global"));
    assert_true(E(a, "LEAKY_BUCKET"));
    assert_int_equal(e, 1);
    /* only Behavior combines flags */
    assert_false(E(a, "TOKEN_BUCKET|LEAKY_BUCKET"));
#undef E
}

static int allocs, frees;

static void *count_alloc(void *d, size_t n)
{
    (void)d;
    allocs++;
    return malloc(n);
}

static void count_free(void *d, void *p)
{
    (void)d;
    frees++;
    free(p);
}

static void test_alloc(void **state)
{
    (void)state;
    ProtobufCAllocator a = {count_alloc, count_free, NULL};
    ProtobufCMessage *m = sl_protojson_new_message(&a, req);
    assert_non_null(m);
    assert_ptr_equal(m->descriptor, req);
    assert_int_equal(((Pb__Gubernator__RateLimitReq *)m)->hits, 0);
    char *z = sl_protojson_alloc(&a, 0); /* a zero-size request still gets a byte */
    assert_non_null(z);
    assert_int_equal(allocs, 2);
    sl_protojson_free(&a, z);
    sl_protojson_free(&a, NULL);
    protobuf_c_message_free_unpacked(m, &a);
    assert_int_equal(frees, 2);
    m = sl_protojson_new_message(NULL, req);
    assert_non_null(m);
    protobuf_c_message_free_unpacked(m, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_camel),
        cmocka_unit_test(test_find_field),
        cmocka_unit_test(test_maps_and_sizes),
        cmocka_unit_test(test_ints),
        cmocka_unit_test(test_enums),
        cmocka_unit_test(test_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* api/grpczip: gRPC's gzip and deflate message encodings, the names, and the inflate cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/grpczip.h"
#include "wire/grpc_frame.h"

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(sl_grpczip_parse(NULL, 0), SL_GRPCZIP_IDENTITY);
    assert_int_equal(sl_grpczip_parse("identity", 8), SL_GRPCZIP_IDENTITY);
    assert_int_equal(sl_grpczip_parse("gzip", 4), SL_GRPCZIP_GZIP);
    assert_int_equal(sl_grpczip_parse("deflate", 7), SL_GRPCZIP_DEFLATE);
    assert_int_equal(sl_grpczip_parse("snappy", 6), SL_GRPCZIP_UNSUPPORTED);
    assert_int_equal(sl_grpczip_parse("GZIP", 4), SL_GRPCZIP_UNSUPPORTED);
    assert_int_equal(sl_grpczip_parse("gzi", 3), SL_GRPCZIP_UNSUPPORTED);
    const char *a = "identity, deflate,gzip";
    assert_true(sl_grpczip_accepts(a, strlen(a), SL_GRPCZIP_GZIP));
    assert_true(sl_grpczip_accepts(a, strlen(a), SL_GRPCZIP_DEFLATE));
    assert_false(sl_grpczip_accepts("gzipx,deflat", 12, SL_GRPCZIP_GZIP));
    assert_false(sl_grpczip_accepts("gzipx,deflat", 12, SL_GRPCZIP_DEFLATE));
    assert_false(sl_grpczip_accepts(NULL, 0, SL_GRPCZIP_GZIP));
    assert_true(sl_grpczip_accepts(NULL, 0, SL_GRPCZIP_IDENTITY));
    /* what every answer advertises names the two it decodes */
    assert_true(sl_grpczip_accepts(SL_GRPC_ACCEPT_ENCODING, strlen(SL_GRPC_ACCEPT_ENCODING),
                                   SL_GRPCZIP_GZIP));
    assert_true(sl_grpczip_accepts(SL_GRPC_ACCEPT_ENCODING, strlen(SL_GRPC_ACCEPT_ENCODING),
                                   SL_GRPCZIP_DEFLATE));
    assert_string_equal(sl_grpczip_name(SL_GRPCZIP_GZIP), "gzip");
    assert_string_equal(sl_grpczip_name(SL_GRPCZIP_DEFLATE), "deflate");
}

static void roundtrip(sl_grpczip_enc e)
{
    uint8_t msg[3000];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)(i % 7 == 0 ? i : 'a');
    sl_buf z, back;
    sl_buf_init(&z, 0);
    sl_buf_init(&back, 0);
    assert_int_equal(sl_grpczip_deflate(e, msg, sizeof msg, &z), 0);
    assert_true(z.len < sizeof msg);
    /* the wrapper is the one each name means: gzip's magic, or a zlib header */
    if (e == SL_GRPCZIP_GZIP)
        assert_true(z.data[0] == 0x1f && z.data[1] == 0x8b);
    else
        assert_int_equal((z.data[0] * 256 + z.data[1]) % 31, 0);
    assert_int_equal(sl_grpczip_inflate(e, z.data, z.len, sizeof msg, &back), 0);
    assert_int_equal(back.len, sizeof msg);
    assert_memory_equal(back.data, msg, sizeof msg);
    /* exactly the cap is fine; one byte less is too large */
    sl_buf_reset(&back);
    assert_int_equal(sl_grpczip_inflate(e, z.data, z.len, sizeof msg - 1, &back), -EMSGSIZE);
    /* truncated, corrupt, trailing bytes, the other wrapper */
    sl_buf_reset(&back);
    assert_int_equal(sl_grpczip_inflate(e, z.data, z.len - 3, sizeof msg, &back), -EINVAL);
    sl_buf_reset(&back);
    uint8_t bad[4096];
    memcpy(bad, z.data, z.len);
    bad[z.len] = 0;
    assert_int_equal(sl_grpczip_inflate(e, bad, z.len + 1, sizeof msg, &back), -EINVAL);
    bad[2] ^= 0xff;
    sl_buf_reset(&back);
    assert_int_equal(sl_grpczip_inflate(e, bad, z.len, sizeof msg, &back), -EINVAL);
    sl_buf_reset(&back);
    sl_grpczip_enc other = e == SL_GRPCZIP_GZIP ? SL_GRPCZIP_DEFLATE : SL_GRPCZIP_GZIP;
    assert_int_equal(sl_grpczip_inflate(other, z.data, z.len, sizeof msg, &back), -EINVAL);
    sl_buf_free(&z);
    sl_buf_free(&back);
}

static void test_roundtrips(void **state)
{
    (void)state;
    roundtrip(SL_GRPCZIP_GZIP);
    roundtrip(SL_GRPCZIP_DEFLATE);
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_grpczip_deflate(SL_GRPCZIP_IDENTITY, (const uint8_t *)"x", 1, &b), -EINVAL);
    assert_int_equal(sl_grpczip_inflate(SL_GRPCZIP_UNSUPPORTED, (const uint8_t *)"x", 1, 9, &b),
                     -EINVAL);
    /* an empty message compresses and inflates to nothing */
    assert_int_equal(sl_grpczip_deflate(SL_GRPCZIP_GZIP, NULL, 0, &b), 0);
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_grpczip_inflate(SL_GRPCZIP_GZIP, b.data, b.len, 10, &out), 0);
    assert_int_equal(out.len, 0);
    sl_buf_free(&b);
    sl_buf_free(&out);
}

/* A bomb: 64 MiB of zeros in ~64 KiB. Refused having produced no more than the cap and a chunk. */
static void test_bomb(void **state)
{
    (void)state;
    size_t big = (size_t)64 << 20;
    uint8_t *zeros = calloc(1, big);
    assert_non_null(zeros);
    uLongf zl = compressBound((uLong)big);
    uint8_t *z = malloc(zl);
    assert_non_null(z);
    assert_int_equal(compress2(z, &zl, zeros, (uLong)big, 9), Z_OK);
    free(zeros);
    assert_true(zl < (1 << 20));
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_grpczip_inflate(SL_GRPCZIP_DEFLATE, z, zl, 1 << 20, &out), -EMSGSIZE);
    assert_true(out.len <= (1 << 20) + 1);
    assert_true(out.alloc <= (size_t)4 << 20);
    sl_buf_free(&out);
    free(z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_roundtrips),
        cmocka_unit_test(test_bomb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

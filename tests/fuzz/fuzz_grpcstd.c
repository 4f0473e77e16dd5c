/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for gRPC's standard services' codecs and the message encodings
 * (api/grpcstd, api/grpczip): arbitrary bytes as a ServerReflectionRequest (answered from the
 * built-in descriptors: every answer is well-formed protobuf at its top level), as a
 * HealthCheckRequest, and as a gzip and a deflate message inflated under a small cap (never more
 * than the cap comes out, whatever the input: the decompression-bomb bound).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/grpcstd.h"
#include "api/grpczip.h"
#include "wire/pbwire.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl_grpcstd_refl *refl;
    if (!refl)
        CHECK(sl_grpcstd_refl_new(sl_grpcstd_descriptor_set, sl_grpcstd_descriptor_set_len,
                                  &refl) == 0);
    sl_grpcstd_refl_req q;
    int rc = sl_grpcstd_refl_decode(data, size, &q);
    CHECK(rc == 0 || rc == -EINVAL);
    if (rc == 0) {
        CHECK(q.arg_len <= size && q.host_len <= size);
        sl_buf out;
        sl_buf_init(&out, 0);
        CHECK(sl_grpcstd_refl_answer(refl, &q, data, size, &out) == 0);
        size_t fields;
        CHECK(sl_pb_count_field(out.data ? out.data : (const uint8_t *)"", out.len, 2, 100,
                                &fields) == 0);
        CHECK(fields == 1); /* original_request, echoed once */
        sl_buf_free(&out);
    }
    const char *svc;
    size_t n;
    rc = sl_grpcstd_health_decode(data, size, &svc, &n);
    CHECK(rc == 0 || rc == -EINVAL);
    CHECK(rc || n <= size);
    for (int e = SL_GRPCZIP_GZIP; e <= SL_GRPCZIP_DEFLATE; e++) {
        sl_buf z;
        sl_buf_init(&z, 0);
        rc = sl_grpczip_inflate((sl_grpczip_enc)e, data, size, 4096, &z);
        CHECK(rc == 0 || rc == -EINVAL || rc == -EMSGSIZE);
        CHECK(z.len <= 4096 + 1);
        if (rc == 0) { /* what inflates deflates and inflates back the same */
            sl_buf again, back;
            sl_buf_init(&again, 0);
            sl_buf_init(&back, 0);
            CHECK(sl_grpczip_deflate((sl_grpczip_enc)e, z.data, z.len, &again) == 0);
            CHECK(sl_grpczip_inflate((sl_grpczip_enc)e, again.data, again.len, 4096, &back) == 0);
            CHECK(back.len == z.len && (!z.len || memcmp(back.data, z.data, z.len) == 0));
            sl_buf_free(&again);
            sl_buf_free(&back);
        }
        sl_buf_free(&z);
    }
    return 0;
}

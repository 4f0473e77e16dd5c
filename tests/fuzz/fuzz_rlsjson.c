/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for POST /json's transcoder (api/rlsjson): arbitrary bytes as a protojson
 * RateLimitRequest (when it converts, the protobuf must be well formed for api/rls's decoder,
 * which then either plans it or refuses it with a reason) and as a protobuf RateLimitResponse to
 * print (when it prints, the output must be JSON).
 */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/rls.h"
#include "api/rlsjson.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_buf pb;
    sl_buf_init(&pb, 0);
    const char *err = NULL;
    int rc = sl_rlsjson_request((const char *)data, size, &pb, &err);
    CHECK(rc == 0 || err);
    if (rc == 0) {
        static const sl_rls_config cfg = {.max_descriptors = 64, .max_entries = 16};
        sl_batch b;
        sl_batch_init(&b, 1 << 20);
        sl_rls_req rq;
        const char *why = NULL;
        int prc = sl_rls_parse(&cfg, (const uint8_t *)pb.data, pb.len, &b, &rq, &why);
        CHECK(prc == 0 || prc == -E2BIG || (prc == -EINVAL && why) || prc == -ENOMEM);
        sl_batch_free(&b);
    }
    sl_buf_free(&pb);
    sl_buf out;
    sl_buf_init(&out, 0);
    int overall = -1;
    if (sl_rlsjson_response(data, size, &out, &overall) == 0) {
        json_error_t je;
        json_t *j = json_loadb((const char *)out.data, out.len, JSON_ALLOW_NUL, &je);
        CHECK(j && json_is_object(j));
        CHECK(overall >= 0 && overall <= 2);
        json_decref(j);
    }
    sl_buf_free(&out);
    return 0;
}

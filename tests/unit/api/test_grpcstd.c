/* SPDX-License-Identifier: Apache-2.0 */
/* api/grpcstd: grpc.health.v1's messages and server reflection over the built-in descriptors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpcstd.h"
#include "wire/pbwire.h"

static void test_health(void **state)
{
    (void)state;
    const char *svc;
    size_t n;
    assert_int_equal(sl_grpcstd_health_decode(NULL, 0, &svc, &n), 0);
    assert_int_equal(n, 0);
    static const uint8_t req[] = {0x0a, 3, 'a', '.', 'B', 0x10, 1};
    assert_int_equal(sl_grpcstd_health_decode(req, sizeof req, &svc, &n), 0);
    assert_int_equal(n, 3);
    assert_memory_equal(svc, "a.B", 3);
    assert_int_equal(sl_grpcstd_health_decode(req, 4, &svc, &n), -EINVAL); /* truncated */
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_grpcstd_health_encode(SL_GRPCSTD_NOT_SERVING, &b), 0);
    assert_int_equal(b.len, 2);
    assert_int_equal(b.data[0], 0x08);
    assert_int_equal(b.data[1], 2);
    sl_buf_reset(&b);
    assert_int_equal(sl_grpcstd_health_encode(SL_GRPCSTD_UNKNOWN, &b), 0);
    assert_int_equal(b.len, 0); /* proto3: the default is absent */
    sl_buf_free(&b);
}

/* The fields numbered `field` of a message, in order (length-delimited ones only). */
static size_t fields(const uint8_t *m, size_t n, uint32_t field, sl_pb_rd *out, size_t max)
{
    sl_pb_rd r = {m, m + n};
    size_t k = 0;
    while (r.p < r.end) {
        uint32_t f = 0;
        unsigned wt = 0;
        assert_true(sl_pb_key(&r, &f, &wt));
        sl_pb_rd sub;
        if (wt == SL_PB_LEN) {
            assert_true(sl_pb_bytes(&r, &sub));
            if (f == field && k < max)
                out[k++] = sub;
        } else {
            assert_true(sl_pb_skip(&r, wt));
        }
    }
    return k;
}

static sl_grpcstd_refl *refl(void)
{
    sl_grpcstd_refl *r;
    assert_int_equal(sl_grpcstd_refl_new(sl_grpcstd_descriptor_set,
                                         sl_grpcstd_descriptor_set_len, &r), 0);
    return r;
}

static void ask(const sl_grpcstd_refl *r, const uint8_t *req, size_t n, sl_buf *out)
{
    sl_grpcstd_refl_req q;
    assert_int_equal(sl_grpcstd_refl_decode(req, n, &q), 0);
    sl_buf_reset(out);
    assert_int_equal(sl_grpcstd_refl_answer(r, &q, req, n, out), 0);
}

static void test_reflection_index(void **state)
{
    (void)state;
    sl_grpcstd_refl *r = refl();
    assert_int_equal(sl_grpcstd_refl_services(r), 6);
    assert_true(sl_grpcstd_refl_files(r) >= 10);
    assert_true(sl_grpcstd_refl_serves(r, "pb.gubernator.V1", 16));
    assert_true(sl_grpcstd_refl_serves(r, "grpc.health.v1.Health", 21));
    assert_false(sl_grpcstd_refl_serves(r, "pb.gubernator", 13));
    assert_false(sl_grpcstd_refl_serves(r, "pb.gubernator.V2", 16));

    sl_buf out;
    sl_buf_init(&out, 0);
    sl_pb_rd f[16], g[16];
    /* list_services: each ServiceResponse's name; original_request echoed */
    static const uint8_t list[] = {0x3a, 1, '*'};
    ask(r, list, sizeof list, &out);
    assert_int_equal(fields(out.data, out.len, 2, f, 16), 1);
    assert_int_equal(f[0].end - f[0].p, sizeof list);
    assert_int_equal(fields(out.data, out.len, 6, f, 16), 1);
    size_t ns = fields(f[0].p, (size_t)(f[0].end - f[0].p), 1, g, 16);
    assert_int_equal(ns, 6);
    bool saw_rls = false;
    for (size_t i = 0; i < ns; i++) {
        sl_pb_rd name[1];
        assert_int_equal(fields(g[i].p, (size_t)(g[i].end - g[i].p), 1, name, 1), 1);
        if (name[0].end - name[0].p == 43 &&
            !memcmp(name[0].p, "envoy.service.ratelimit.v3.RateLimitService", 43))
            saw_rls = true;
    }
    assert_true(saw_rls);

    /* a method's symbol: its file first, then its imports, each once */
    static const uint8_t sym[] = "\x22\x3b" "envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit";
    ask(r, sym, sizeof sym - 1, &out);
    assert_int_equal(fields(out.data, out.len, 4, f, 16), 1);
    size_t nf = fields(f[0].p, (size_t)(f[0].end - f[0].p), 1, g, 16);
    assert_true(nf >= 6);
    sl_pb_rd name[1];
    assert_int_equal(fields(g[0].p, (size_t)(g[0].end - g[0].p), 1, name, 1), 1);
    assert_int_equal(name[0].end - name[0].p, 36);
    assert_memory_equal(name[0].p, "envoy/service/ratelimit/v3/rls.proto", 36);

    /* a message (with a leading dot), a file by name, a nested field path */
    static const uint8_t msg[] = "\x22\x1f.pb.gubernator.GetRateLimitsReq";
    ask(r, msg, sizeof msg - 1, &out);
    assert_int_equal(fields(out.data, out.len, 4, f, 16), 1);
    static const uint8_t file[] = "\x1a\x1bgrpc/health/v1/health.proto";
    ask(r, file, sizeof file - 1, &out);
    assert_int_equal(fields(out.data, out.len, 4, f, 16), 1);
    assert_int_equal(fields(f[0].p, (size_t)(f[0].end - f[0].p), 1, g, 16), 1);

    /* unknown symbol and file: error_response NOT_FOUND; no request: UNIMPLEMENTED */
    static const uint8_t nosym[] = "\x22\x06no.Sym";
    ask(r, nosym, sizeof nosym - 1, &out);
    assert_int_equal(fields(out.data, out.len, 7, f, 16), 1);
    assert_int_equal(f[0].p[0], 0x08);
    assert_int_equal(f[0].p[1], 5);
    static const uint8_t prefix_only[] = "\x22\x0dpb.gubernator";
    ask(r, prefix_only, sizeof prefix_only - 1, &out);
    assert_int_equal(fields(out.data, out.len, 7, f, 16), 1);
    static const uint8_t host_only[] = "\x0a\x01h";
    ask(r, host_only, sizeof host_only - 1, &out);
    assert_int_equal(fields(out.data, out.len, 7, f, 16), 1);
    assert_int_equal(f[0].p[1], 12);
    assert_int_equal(fields(out.data, out.len, 1, f, 16), 1); /* valid_host */

    /* malformed requests */
    sl_grpcstd_refl_req q;
    static const uint8_t trunc[] = {0x22, 9, 'a'};
    assert_int_equal(sl_grpcstd_refl_decode(trunc, sizeof trunc, &q), -EINVAL);
    sl_buf_free(&out);
    sl_grpcstd_refl_free(r);
}

/* Every cut of the descriptor set is refused or indexed, never read past (ASan watches). */
static void test_malformed_sets(void **state)
{
    (void)state;
    size_t n = sl_grpcstd_descriptor_set_len;
    for (size_t cut = 0; cut < n; cut += 97) {
        uint8_t *copy = malloc(cut + 1);
        assert_non_null(copy);
        memcpy(copy, sl_grpcstd_descriptor_set, cut);
        sl_grpcstd_refl *r = NULL;
        int rc = sl_grpcstd_refl_new(copy, cut, &r);
        assert_true(rc == 0 || rc == -EINVAL);
        sl_grpcstd_refl_free(r);
        free(copy);
    }
    /* a file whose dependency is not in the set */
    static const uint8_t lone[] = {0x0a, 8, 0x0a, 1, 'a', 0x1a, 3, 'b', '.', 'p'};
    sl_grpcstd_refl *r = NULL;
    assert_int_equal(sl_grpcstd_refl_new(lone, sizeof lone, &r), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health),
        cmocka_unit_test(test_reflection_index),
        cmocka_unit_test(test_malformed_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

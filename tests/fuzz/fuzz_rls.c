/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the Envoy RLS adapter (api/rls): a RateLimitRequest from arbitrary bytes,
 * planned against a fixed envoyproxy/ratelimit configuration (every kind of rule: values, keys
 * alone, nesting, wildcards, share_threshold, unlimited, shadow, replaces, another algorithm).
 * When it decodes, every planned item is answered (alternately under and over its limit) and the
 * response is encoded; the encoding must be well-formed protobuf with one status per descriptor.
 * Decoding must agree with the plan: an accepted request has a domain and descriptors. The
 * all-or-nothing give-back (sl_rls_giveback) runs on the same answers.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/rls.h"
#include "wire/pbwire.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char conf_text[] =
    "domain: d\n"
    "descriptors:\n"
    "  - key: ip\n"
    "    rate_limit: {unit: minute, requests_per_unit: 3, name: n1}\n"
    "  - key: ip\n"
    "    value: 1\n"
    "    rate_limit: {unit: second, requests_per_unit: 0, replaces: [{name: n2}]}\n"
    "  - key: m\n"
    "    value: x\n"
    "    descriptors:\n"
    "      - key: to\n"
    "        rate_limit: {unit: day, requests_per_unit: 5, name: n2}\n"
    "  - key: u\n"
    "    rate_limit: {unlimited: true}\n"
    "  - key: s\n"
    "    shadow_mode: true\n"
    "    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: gcra, burst: 3}\n"
    "  - key: p\n"
    "    value: /a/*/b*\n"
    "    share_threshold: true\n"
    "    rate_limit: {unit: week, requests_per_unit: 2}\n"
    "  - key: q\n"
    "    quota_mode: true\n"
    "    rate_limit: {unit: minute, requests_per_unit: 2}\n"
    "  - key: two\n"
    "    rate_limits:\n"
    "      - {unit: second, requests_per_unit: 4}\n"
    "      - {unit: minute, unit_multiplier: 5, requests_per_unit: 9, algorithm: token_bucket}\n";

static sl_rlsconf *conf;

static int count_statuses(const uint8_t *p, size_t n)
{
    sl_pb_rd r = {p, p + n};
    int statuses = 0;
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        CHECK(sl_pb_key(&r, &f, &wt));
        if (wt == SL_PB_LEN) {
            sl_pb_rd s;
            CHECK(sl_pb_bytes(&r, &s));
            statuses += f == 2;
        } else {
            uint64_t v;
            CHECK(wt == SL_PB_VARINT && sl_pb_varint(&r, &v));
        }
    }
    return statuses;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!conf) {
        char err[256];
        CHECK(sl_rlsconf_new(&conf) == 0);
        CHECK(sl_rlsconf_add(conf, "f.yaml", conf_text, strlen(conf_text), err, sizeof err) == 0);
    }
    static const sl_rls_config cfg = {.max_descriptors = 64, .max_entries = 16, .headers = true,
                                      .dynamic_metadata = true, .header_reset = "X-Reset"};
    sl_batch b;
    sl_batch_init(&b, 1 << 20);
    sl_rls_call *call = NULL;
    sl_grpc_status st;
    if (sl_rls_begin(&cfg, conf, data, size, &b, &call, &st) == 0) {
        CHECK(call && b.n > 0);
        for (size_t i = 0; i < b.n; i++) {
            if (b.answered[i])
                continue;
            CHECK(b.reqs[i].unique_key && b.reqs[i].name);
            b.resps[i] = (sl_response){.status = (int32_t)(i & 1), .limit = b.reqs[i].limit,
                                       .remaining = (int64_t)(i * 7) - 3,
                                       .reset_time = (int64_t)(i * 1000)};
        }
        sl_buf out;
        sl_buf_init(&out, 0);
        CHECK(sl_rls_encode(call, &b, 500, &out, &st) == 0);
        CHECK(count_statuses(out.data, out.len) == (int)sl_rls_descriptors(call));
        sl_batch gb;
        sl_batch_init(&gb, 0);
        size_t k = sl_rls_giveback(call, &b, &gb);
        CHECK(k == 0 || gb.n == k);
        for (size_t i = 0; i < k; i++)
            CHECK(gb.reqs[i].hits < 0 && gb.reqs[i].unique_key);
        sl_batch_free(&gb);
        sl_buf_reset(&out);
        CHECK(sl_rls_encode(call, &b, 500, &out, &st) == 0); /* with the give-backs */
        sl_buf_free(&out);
        sl_rls_end(call);
    }
    sl_batch_free(&b);
    return 0;
}

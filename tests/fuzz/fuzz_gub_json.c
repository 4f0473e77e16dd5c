/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the Gubernator JSON gateway decoder (json/gubjson via api/gubernator).
 * Properties: a decode either succeeds or fails with a message and a gateway status; a decoded
 * request printed as protojson parses back and prints identically (a fixed point); responses
 * and error bodies are valid JSON, and the hand-written response encoder prints what the generic
 * printer prints. The hand-written parser and the reference parser (jansson) agree: whatever the
 * hand-written one accepts, the reference accepts with the same message (compared packed).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/gubernator.h"
#include "wire/grpc_frame.h"
#include "../support/gub_reference.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(const sl_buf *b)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)b->data, b->len, 0, &je);
    CHECK(j != NULL && json_is_object(j));
    json_decref(j);
}

static uint8_t *packed(const ProtobufCMessage *m, size_t *n)
{
    *n = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(*n ? *n : 1);
    CHECK(p != NULL);
    protobuf_c_message_pack(m, p);
    return p;
}

/* The fast parser against the reference, with malloc and with limits as the gateway sets them. */
static void check_parsers_agree(const uint8_t *data, size_t size, const sl_gubjson_limits *lim)
{
    const ProtobufCMessageDescriptor *d = &pb__gubernator__get_rate_limits_req__descriptor;
    ProtobufCMessage *f = NULL, *r = NULL;
    char err[256];
    int rf = sl_gubjson_parse_with(SL_GUBJSON_PARSE_FAST, d, (const char *)data, size, lim, NULL,
                                   &f, err, sizeof err);
    int rr = sl_gubjson_parse_with(SL_GUBJSON_PARSE_REFERENCE, d, (const char *)data, size, lim,
                                   NULL, &r, err, sizeof err);
    CHECK(rf == 0 || rf == -EAGAIN || rf == -EMSGSIZE);
    if (rf == -EMSGSIZE)
        CHECK(rr == -EMSGSIZE);
    if (rf == 0) {
        CHECK(rr == 0);
        size_t nf, nr;
        uint8_t *pf = packed(f, &nf), *pr = packed(r, &nr);
        CHECK(nf == nr && memcmp(pf, pr, nf) == 0);
        free(pf);
        free(pr);
    }
    if (f)
        protobuf_c_message_free_unpacked(f, NULL);
    if (r)
        protobuf_c_message_free_unpacked(r, NULL);
}

/* GetRateLimitsResp as the adapter used to build it, printed by the generic printer. */
static void print_reference(const sl_batch *b, sl_buf *out)
{
    gub_ref r;
    CHECK(gub_ref_build(&r, b));
    CHECK(sl_gubjson_print(&r.msg.base, out) == 0);
    gub_ref_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_gub_config c;
    sl_gub_config_default(&c);
    c.json.max_depth = 8;
    sl_batch b;
    sl_batch_init(&b, 8 << 20);
    sl_grpc_status st;
    sl_buf out;
    sl_buf_init(&out, 0);

    check_parsers_agree(data, size, &c.json);

    int rc = sl_gub_decode_json(&c, (const char *)data, size, &b, &st);
    if (rc == 0) {
        /* fixed point: print -> parse -> print (output has every field, so lift the limits) */
        CHECK(sl_gubjson_print((const ProtobufCMessage *)b.msg, &out) == 0);
        sl_gubjson_limits lim = {.max_body = SIZE_MAX, .max_depth = 64, .max_tokens = SIZE_MAX};
        Pb__Gubernator__GetRateLimitsReq *again;
        char err[256];
        CHECK(sl_gubjson_parse_get_rate_limits_req((const char *)out.data, out.len, &lim, NULL,
                                                   &again, err, sizeof err) == 0);
        sl_buf out2;
        sl_buf_init(&out2, 0);
        CHECK(sl_gubjson_print(&again->base, &out2) == 0);
        CHECK(out2.len == out.len && memcmp(out2.data, out.data, out.len) == 0);
        protobuf_c_message_free_unpacked(&again->base, NULL);
        /* what the printer makes, the hand-written parser takes */
        ProtobufCMessage *fast;
        CHECK(sl_gubjson_parse_with(SL_GUBJSON_PARSE_FAST,
                                    &pb__gubernator__get_rate_limits_req__descriptor,
                                    (const char *)out.data, out.len, &lim, NULL, &fast, err,
                                    sizeof err) == 0);
        protobuf_c_message_free_unpacked(fast, NULL);

        for (size_t i = 0; i < b.n; i++) {
            if (b.answered[i])
                continue;
            b.resps[i] = (sl_response){.status = (int32_t)(i & 1), .limit = b.reqs[i].limit,
                                       .remaining = b.reqs[i].hits,
                                       .reset_time = b.reqs[i].created_at};
            if (b.req_meta[i].n)
                CHECK(sl_batch_meta_set(&b, &b.resp_meta[i], b.req_meta[i].kv[0].key,
                                        b.req_meta[i].kv[0].val) == 0);
        }
        sl_buf_reset(&out);
        CHECK(sl_gub_encode_json(&b, &out) == 0);
        check_json(&out);
        sl_buf_reset(&out2);
        print_reference(&b, &out2);
        CHECK(out2.len == out.len && memcmp(out2.data, out.data, out.len) == 0);
        sl_buf_free(&out2);
    } else {
        CHECK(st.message[0] != 0);
        CHECK(st.code == SL_GRPC_INVALID_ARGUMENT || st.code == SL_GRPC_OUT_OF_RANGE ||
              st.code == SL_GRPC_RESOURCE_EXHAUSTED);
        CHECK(st.http_status == 400 || st.http_status == 413);
        sl_buf_reset(&out);
        CHECK(sl_gub_encode_error_json(&st, &out) == 0);
        check_json(&out);
    }
    /* and the gateway decodes the same with the reference decoders alone */
    sl_grpc_status st2;
    sl_batch b2;
    sl_batch_init(&b2, 8 << 20);
    c.reference_decoders = true;
    int rc2 = sl_gub_decode_json(&c, (const char *)data, size, &b2, &st2);
    CHECK(rc2 == rc && st2.code == st.code && strcmp(st2.message, st.message) == 0);
    if (rc == 0) {
        CHECK(b2.n == b.n && b2.n_answered == b.n_answered);
        for (size_t i = 0; i < b.n; i++) {
            const sl_request *x = &b.reqs[i], *y = &b2.reqs[i];
            CHECK(x->name_len == y->name_len && memcmp(x->name, y->name, x->name_len) == 0);
            CHECK(x->unique_key_len == y->unique_key_len &&
                  memcmp(x->unique_key, y->unique_key, x->unique_key_len) == 0);
            CHECK(x->hits == y->hits && x->limit == y->limit && x->duration == y->duration &&
                  x->burst == y->burst && x->created_at == y->created_at &&
                  x->algorithm == y->algorithm && x->behavior == y->behavior &&
                  x->sub_windows == y->sub_windows);
            CHECK(b.answered[i] == b2.answered[i]);
            CHECK(b.req_meta[i].n == b2.req_meta[i].n);
        }
    }
    sl_batch_free(&b2);
    sl_buf_free(&out);
    sl_batch_free(&b);
    return 0;
}

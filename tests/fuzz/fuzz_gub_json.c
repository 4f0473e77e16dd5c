/*
 * libFuzzer driver for the Gubernator JSON gateway decoder (wire/gubjson via api/gubernator).
 * Properties: a decode either succeeds or fails with a message and a gateway status; a decoded
 * request printed as protojson parses back and prints identically (a fixed point); responses
 * and error bodies are valid JSON.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "api/gubernator.h"
#include "wire/grpc_frame.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(const sl_buf *b)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)b->data, b->len, 0, &je);
    CHECK(j != NULL && json_is_object(j));
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_gub_config c;
    sl_gub_config_default(&c);
    c.json.max_depth = 8;
    sl_batch b;
    sl_batch_init(&b, 8 << 20);
    sl_gub_status st;
    sl_buf out;
    sl_buf_init(&out, 0);

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
        sl_buf_free(&out2);

        for (size_t i = 0; i < b.n; i++)
            if (!b.answered[i])
                b.resps[i] = (sl_response){.limit = b.reqs[i].limit, .remaining = b.reqs[i].hits};
        sl_buf_reset(&out);
        CHECK(sl_gub_encode_json(&b, &out) == 0);
        check_json(&out);
    } else {
        CHECK(st.message[0] != 0);
        CHECK(st.code == SL_GRPC_INVALID_ARGUMENT || st.code == SL_GRPC_OUT_OF_RANGE ||
              st.code == SL_GRPC_RESOURCE_EXHAUSTED);
        CHECK(st.http_status == 400 || st.http_status == 413);
        sl_buf_reset(&out);
        CHECK(sl_gub_encode_error_json(&st, &out) == 0);
        check_json(&out);
    }
    sl_buf_free(&out);
    sl_batch_free(&b);
    return 0;
}

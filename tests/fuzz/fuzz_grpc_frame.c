/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for wire/grpc_frame: frame decoding over arbitrary bytes (every decoded frame
 * must lie inside the input and respect the maximum), grpc-message percent-encoding
 * (decode(encode(x)) == x, and decoding arbitrary text never overruns), grpc-timeout and
 * content-type parsing. A broken property traps, which libFuzzer reports as a crash.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/grpc_frame.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* frames, with a small maximum so both sides of the size check are reached */
    size_t max = size ? (size_t)(data[0] & 0x3f) * 16 : 0;
    size_t off = 0;
    unsigned sum = 0;
    while (off < size) {
        sl_grpc_msg m;
        const char *err;
        int rc = sl_grpc_frame_decode(data + off, size - off, max, &m, &err);
        if (rc == -EAGAIN) {
            CHECK(m.frame_len > size - off);
            break;
        }
        if (rc) {
            CHECK(err != NULL && (rc == -EMSGSIZE || rc == -EPROTO));
            break;
        }
        CHECK(m.len <= max && m.frame_len == m.len + SL_GRPC_HDR_LEN && m.frame_len <= size - off);
        for (size_t i = 0; i < m.len; i++)
            sum += m.data[i];
        off += m.frame_len;
    }
    (void)sum;

    /* re-framing what we got reproduces the input prefix */
    if (size >= SL_GRPC_HDR_LEN) {
        sl_grpc_msg m;
        const char *err;
        if (sl_grpc_frame_decode(data, size, SIZE_MAX, &m, &err) == 0 && !m.compressed) {
            sl_buf b;
            sl_buf_init(&b, 0);
            CHECK(sl_grpc_frame_append(&b, m.data, m.len) == 0);
            CHECK(b.len == m.frame_len && memcmp(b.data, data, b.len) == 0);
            sl_buf_free(&b);
        }
    }

    /* percent-encoding round trip, and lenient decoding of arbitrary text */
    sl_buf enc, dec;
    sl_buf_init(&enc, 0);
    sl_buf_init(&dec, 0);
    CHECK(sl_grpc_message_encode((const char *)data, size, &enc) == 0);
    for (size_t i = 0; i < enc.len; i++)
        CHECK(enc.data[i] >= 0x20 && enc.data[i] <= 0x7e);
    CHECK(sl_grpc_message_decode((const char *)enc.data, enc.len, &dec) == 0);
    CHECK(dec.len == size && (size == 0 || memcmp(dec.data, data, size) == 0));
    sl_buf_reset(&dec);
    CHECK(sl_grpc_message_decode((const char *)data, size, &dec) == 0);
    CHECK(dec.len <= size);
    sl_buf_free(&enc);
    sl_buf_free(&dec);

    int64_t ms;
    if (sl_grpc_timeout_parse((const char *)data, size, &ms) == 0)
        CHECK(ms >= 0);
    (void)sl_grpc_content_type_ok((const char *)data, size);
    return 0;
}

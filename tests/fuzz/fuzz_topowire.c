/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for wire/topowire: decoding arbitrary bytes as an observer's topology update
 * (every member's strings terminated within their caps, the count within the array), and any
 * update that decodes encodes again and decodes to the same members.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "wire/grpc_frame.h"
#include "wire/topowire.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl_topowire_member m[8], again[8];
    sl_topowire_update u;
    int rc = sl_topowire_decode(data, size, &u, m, 8);
    CHECK(rc == 0 || rc == -EINVAL || rc == -E2BIG);
    if (rc)
        return 0;
    CHECK(u.n <= 8);
    for (size_t i = 0; i < u.n; i++) {
        CHECK(strlen(m[i].mb.name) <= SL_TOPOWIRE_MAX_NAME);
        CHECK(strlen(m[i].mb.role) <= SL_TOPOWIRE_MAX_ROLE);
        CHECK(strlen(m[i].mb.service) <= SL_TOPOWIRE_MAX_ADDR);
        CHECK(strlen(m[i].gossip) <= SL_TOPOWIRE_MAX_ADDR);
        CHECK(m[i].mb.status <= SL_MEMBER_LEFT);
    }
    sl_buf b;
    sl_buf_init(&b, 0);
    CHECK(sl_topowire_encode(&b, u.version, u.full, m, u.n) == 0);
    sl_topowire_update u2;
    CHECK(sl_topowire_decode((const uint8_t *)b.data + SL_GRPC_HDR_LEN, b.len - SL_GRPC_HDR_LEN,
                             &u2, again, 8) == 0);
    CHECK(u2.version == u.version && u2.full == u.full && u2.n == u.n);
    for (size_t i = 0; i < u.n; i++)
        CHECK(!memcmp(&m[i], &again[i], sizeof m[i]));
    sl_buf_free(&b);
    return 0;
}

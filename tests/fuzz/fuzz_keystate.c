/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for core/keystate: decoding arbitrary bytes as a sequence of key state records.
 * Every record accepted re-encodes to exactly the bytes it was decoded from (the format has one
 * spelling per state), merging two decoded copies keeps one and frees the other, and the decoder
 * never reads past the input or leaks (ASan). The same bytes are also read as a PeersV1
 * TransferKeysReq, whose records go through the same checks. A broken property traps.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/gubernator.h"
#include "cluster/peerwire.h"
#include "core/keystate.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void records(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    records(data, size);
    /* the same bytes as a TransferKeysReq (PeersV1): its one bytes field holds records */
    const uint8_t *recs;
    size_t n;
    if (sl_peerwire_decode_transfer_req(data, size, &recs, &n) == 0) {
        CHECK(n <= size && (n == 0 || (recs >= data && recs + n <= data + size)));
        records(recs, n);
    }
    return 0;
}

static void records(const uint8_t *data, size_t size)
{
    /* small limits so that both sides of every bound are reached */
    const sl_alg_config cfg = {.max_log_limit = 64, .max_sub_windows = 16,
                               .max_concurrency_limit = 64};
    size_t off = 0;
    while (off < size) {
        sl_keystate a, b;
        size_t used, used2;
        if (sl_keystate_decode(data + off, size - off, &cfg, &a, &used))
            break;
        CHECK(used >= SL_KEYSTATE_FIXED && used <= size - off);
        CHECK(sl_keystate_size(&a.st) == used);
        uint8_t *re = malloc(used);
        CHECK(re && sl_keystate_encode(a.hash, a.expire_at, &a.st, re, used) == used);
        CHECK(memcmp(re, data + off, used) == 0);
        CHECK(sl_keystate_encode(a.hash, a.expire_at, &a.st, re, used - 1) == 0);
        free(re);
        CHECK(sl_keystate_decode(data + off, size - off, &cfg, &b, &used2) == 0 && used2 == used);
        int64_t exp = a.expire_at;
        sl_keystate_merge(&a.st, &exp, &b.st, b.expire_at, a.expire_at);
        CHECK(b.st.algorithm == SL_ALG_NONE);
        sl_alg_release(&a.st);
        off += used;
    }
}

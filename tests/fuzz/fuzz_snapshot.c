/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for core/snapshot: the whole-file check over arbitrary bytes, and, so that the
 * fuzzer reaches the records behind the checksum, the same bytes as the body of a snapshot whose
 * header is made right for them (the seed's XXH64 and record count). A snapshot that passes the
 * check loads into a small store whose invariants must then hold (sl_store_check), however full
 * it gets. A broken property traps.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/keystate.h"
#include "core/snapshot.h"
#include "core/store.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const sl_alg_config CFG = {.max_log_limit = 64, .max_sub_windows = 16,
                                  .max_concurrency_limit = 64};

static void check_and_load(const uint8_t *buf, size_t len)
{
    sl_snapshot_info info;
    const char *why = NULL;
    if (sl_snapshot_check(buf, len, &CFG, &info, &why)) {
        CHECK(why != NULL);
        return;
    }
    sl_store_config sc = {.max_keys = 32, .shards = 2, .alg = CFG};
    sl_store *s = NULL;
    CHECK(sl_store_new(&sc, &s) == 0);
    size_t loaded = 0, dropped = 0;
    CHECK(sl_snapshot_load(buf, len, &CFG, s, 1700000000000, &loaded, &dropped) == 0);
    CHECK(loaded + dropped == info.keys);
    CHECK(sl_store_check(s) == 0);
    sl_store_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_and_load(data, size);

    /* the input as a body, under a header made right for it */
    uint64_t keys = 0;
    for (size_t off = 0; off < size; keys++) {
        sl_keystate k;
        size_t used;
        if (sl_keystate_decode(data + off, size - off, &CFG, &k, &used))
            break;
        sl_alg_release(&k.st);
        off += used;
    }
    uint8_t *buf = malloc(SL_SNAPSHOT_HEADER + size + 1);
    CHECK(buf != NULL);
    sl_snapshot_header(buf, 7, 0, keys, size, XXH64(data, size, 0));
    if (size)
        memcpy(buf + SL_SNAPSHOT_HEADER, data, size);
    check_and_load(buf, SL_SNAPSHOT_HEADER + size);
    free(buf);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers shared by test_global.c and test_globalsync.c: a GLOBAL token-bucket request for
 * limit "rl" and the key hash the router would give it. */
#ifndef SLUICE_TESTS_GLOBAL_REQ_H
#define SLUICE_TESTS_GLOBAL_REQ_H

#include <string.h>

#include "cluster/picker.h"
#include "sluice/engine.h"

static inline sl_request global_req(const char *key, int64_t hits, int64_t limit,
                                    int64_t duration_ms)
{
    sl_request r = {0};
    r.name = "rl";
    r.name_len = 2;
    r.unique_key = key;
    r.unique_key_len = strlen(key);
    r.hits = hits;
    r.limit = limit;
    r.duration = duration_ms;
    r.algorithm = SL_TOKEN_BUCKET;
    r.behavior = SL_GLOBAL;
    return r;
}

static inline uint64_t hash_of(const sl_request *r)
{
    return sl_picker_key_hash(NULL, r->name, r->name_len, r->unique_key, r->unique_key_len);
}

#endif

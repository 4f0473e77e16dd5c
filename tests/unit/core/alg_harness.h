/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test harness for the algorithms: one key's state driven exactly as the store drives it
 * (src/core/store.c), on a virtual clock. Per request: validate (sl_request_validate); if the key
 * exists and sl_alg_expired(expire_at, now), release it (lazy expiry); decide; a state left at
 * SL_ALG_NONE means the key is gone. On top, every answer is checked against the invariants all
 * algorithms share: an error changes nothing, remaining is never negative, retry_after is never
 * negative and is 0 on admission, side buffers are accounted.
 *
 * Include after <cmocka.h>.
 */
#ifndef SLUICE_TEST_ALG_HARNESS_H
#define SLUICE_TEST_ALG_HARNESS_H

#include <stdint.h>
#include <string.h>

#include "core/alg.h"
#include "sluice/engine.h"

typedef struct alg_h {
    sl_state st;
    int64_t expire_at;
    int64_t now;
    sl_alg_config cfg;
    unsigned expirations; /* keys the harness found expired and reset */
} alg_h;

static inline void ah_init(alg_h *h, int64_t now)
{
    memset(h, 0, sizeof(*h));
    h->st.algorithm = SL_ALG_NONE;
    h->now = now;
}

static inline void ah_free(alg_h *h)
{
    sl_alg_release(&h->st);
    assert_int_equal(sl_alg_side_bytes(&h->st), 0);
}

static inline void ah_advance(alg_h *h, int64_t ms) { h->now += ms; }

static inline bool ah_held(const alg_h *h) { return h->st.algorithm != SL_ALG_NONE; }

static inline sl_request ah_req(int32_t algorithm, int64_t hits, int64_t limit, int64_t duration)
{
    sl_request r;
    memset(&r, 0, sizeof(r));
    r.name = "test";
    r.name_len = 4;
    r.unique_key = "account:1234";
    r.unique_key_len = 12;
    r.algorithm = algorithm;
    r.hits = hits;
    r.limit = limit;
    r.duration = duration;
    return r;
}

static inline sl_response ah_decide(alg_h *h, const sl_request *req)
{
    sl_response r;
    memset(&r, 0x5a, sizeof(r)); /* the algorithm must fill every field */
    sl_engine_config ec;
    memset(&ec, 0, sizeof(ec));
    ec.max_log_limit = h->cfg.max_log_limit;
    ec.max_sub_windows = h->cfg.max_sub_windows;
    const char *err = sl_request_validate(req, &ec);
    if (err) {
        memset(&r, 0, sizeof(r));
        r.error = err;
        return r;
    }
    if (ah_held(h) && sl_alg_expired(h->expire_at, h->now)) {
        sl_alg_release(&h->st);
        h->expire_at = 0;
        h->expirations++;
    }
    sl_state before = h->st;
    int64_t expire_before = h->expire_at;
    sl_alg_decide(&h->st, &h->expire_at, req, h->now, &h->cfg, &r);
    if (r.error) {
        assert_memory_equal(&before, &h->st, sizeof(before));
        assert_int_equal(expire_before, h->expire_at);
        assert_int_equal(r.status, 0);
        assert_int_equal(r.remaining, 0);
        return r;
    }
    assert_true(r.status == SL_UNDER_LIMIT || r.status == SL_OVER_LIMIT);
    assert_true(r.remaining >= 0);
    assert_true(r.retry_after >= 0);
    if (r.status == SL_UNDER_LIMIT)
        assert_int_equal(r.retry_after, 0);
    if (!ah_held(h))
        assert_int_equal(sl_alg_side_bytes(&h->st), 0);
    return r;
}

/* Shorthand: decide and check status and remaining. */
#define AH_EXPECT(h, req, st_, rem_)                                                               \
    do {                                                                                           \
        sl_response r_ = ah_decide((h), (req));                                                    \
        assert_null(r_.error);                                                                     \
        assert_int_equal(r_.status, (st_));                                                        \
        assert_int_equal(r_.remaining, (rem_));                                                    \
    } while (0)

#endif

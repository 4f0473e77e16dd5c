/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test support (tests and fuzzers only): a batch's answers as a GetRateLimitsResp built from
 * protobuf-c structs, the way the adapter answered before its encoders were written by hand.
 * Packed by protobuf-c or printed by the generic JSON printer, it is the reference the fast
 * encoders must match byte for byte.
 */
#ifndef SLUICE_TESTS_GUB_REFERENCE_H
#define SLUICE_TESTS_GUB_REFERENCE_H

#include <stdbool.h>
#include <stdlib.h>

#include "decide/batch.h"
#include "gubernator.pb-c.h"
#include "base/buf.h"

typedef struct gub_ref {
    Pb__Gubernator__GetRateLimitsResp msg;
    Pb__Gubernator__RateLimitResp *rs, **ps;
    Pb__Gubernator__RateLimitResp__MetadataEntry *es, **pe;
} gub_ref;

static inline void gub_ref_free(gub_ref *r)
{
    free(r->rs);
    free(r->ps);
    free(r->es);
    free(r->pe);
}

/* Build r->msg for b's responses (strings point into b). False when memory ran out. */
static inline bool gub_ref_build(gub_ref *r, const sl_batch *b)
{
    Pb__Gubernator__GetRateLimitsResp init = PB__GUBERNATOR__GET_RATE_LIMITS_RESP__INIT;
    r->msg = init;
    size_t ne = 0;
    for (size_t i = 0; i < b->n; i++)
        ne += b->resp_meta[i].n;
    r->rs = calloc(b->n + 1, sizeof *r->rs);
    r->ps = calloc(b->n + 1, sizeof *r->ps);
    r->es = calloc(ne + 1, sizeof *r->es);
    r->pe = calloc(ne + 1, sizeof *r->pe);
    if (!r->rs || !r->ps || !r->es || !r->pe) {
        gub_ref_free(r);
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        const sl_response *s = &b->resps[i];
        Pb__Gubernator__RateLimitResp *m = &r->rs[i];
        pb__gubernator__rate_limit_resp__init(m);
        if (s->error) {
            m->error = (char *)s->error;
        } else {
            m->status = s->status == SL_OVER_LIMIT ? 1 : 0;
            m->limit = s->limit;
            m->remaining = s->remaining;
            m->reset_time = s->reset_time;
        }
        m->metadata = &r->pe[k];
        m->n_metadata = b->resp_meta[i].n;
        for (uint32_t j = 0; j < b->resp_meta[i].n; j++, k++) {
            pb__gubernator__rate_limit_resp__metadata_entry__init(&r->es[k]);
            r->es[k].key = (char *)b->resp_meta[i].kv[j].key;
            r->es[k].value = (char *)b->resp_meta[i].kv[j].val;
            r->pe[k] = &r->es[k];
        }
        r->ps[i] = m;
    }
    r->msg.n_responses = b->n;
    r->msg.responses = r->ps;
    return true;
}

/* Append r->msg as protobuf-c packs it. 0 or the sl_buf error. */
static inline int gub_ref_pack(const gub_ref *r, sl_buf *out)
{
    size_t n = protobuf_c_message_get_packed_size(&r->msg.base);
    int rc = sl_buf_reserve(out, n + 1);
    if (rc)
        return rc;
    out->len += protobuf_c_message_pack(&r->msg.base, out->data + out->len);
    return 0;
}

#endif

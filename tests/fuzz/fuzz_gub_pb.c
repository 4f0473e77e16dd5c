/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the Gubernator protobuf decoders (api/gubernator): GetRateLimitsReq,
 * GetPeerRateLimitsReq, UpdatePeerGlobalsReq and GetPeerRateLimitsResp from arbitrary bytes.
 * When a request decodes, the batch is answered and encoded to protobuf (which must be byte for
 * byte what protobuf-c packs for the same responses) and to JSON (which must be valid JSON), and
 * forwarded as a peer request (which must decode back to the same requests). The hand-written
 * request decoder and protobuf-c (the reference, reference_decoders) must agree on every input:
 * same outcome, same status, same requests.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/gubernator.h"
#include "cluster/peerwire.h"
#include "../support/gub_reference.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void answer(sl_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->answered[i])
            continue;
        /* (unsigned: the difference of two fuzzed int64s may overflow) */
        b->resps[i] = (sl_response){
            .status = (int32_t)(i & 1), .limit = b->reqs[i].limit,
            .remaining = (int64_t)((uint64_t)b->reqs[i].limit - (uint64_t)b->reqs[i].hits),
            .reset_time = b->reqs[i].created_at};
        if (i % 3 == 0)
            CHECK(sl_batch_meta_set(b, &b->resp_meta[i], "owner", "127.0.0.1:1051") == 0);
        /* the request's own metadata back, whatever bytes it holds (empty keys, escapes) */
        if (b->req_meta[i].n)
            CHECK(sl_batch_meta_add_ref(b, &b->resp_meta[i], b->req_meta[i].kv[0].key,
                                        b->req_meta[i].kv[0].val) == 0);
    }
}


static void check_encodings(sl_batch *b)
{
    sl_buf out;
    sl_buf_init(&out, 0);
    CHECK(sl_gub_encode_pb(b, &out) == 0);
    Pb__Gubernator__GetRateLimitsResp *m =
        pb__gubernator__get_rate_limits_resp__unpack(NULL, out.len, out.data);
    CHECK(m != NULL && m->n_responses == b->n);
    pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
    /* the bytes protobuf-c packs for the same answers */
    gub_ref r;
    sl_buf ref;
    sl_buf_init(&ref, 0);
    CHECK(gub_ref_build(&r, b) && gub_ref_pack(&r, &ref) == 0);
    gub_ref_free(&r);
    size_t rlen = ref.len;
    CHECK(rlen == out.len && memcmp(ref.data, out.data, rlen) == 0);
    sl_buf_free(&ref);
    /* GetPeerRateLimitsResp has the same layout */
    sl_buf_reset(&out);
    CHECK(sl_gub_encode_peer_resp_pb(b, &out) == 0);
    CHECK(out.len == rlen);
    sl_buf_reset(&out);
    CHECK(sl_gub_encode_json(b, &out) == 0);
    json_error_t je;
    json_t *j = json_loadb((const char *)out.data, out.len, 0, &je);
    CHECK(j != NULL && json_array_size(json_object_get(j, "responses")) == b->n);
    json_decref(j);
    sl_buf_free(&out);
}

static void check_forward(sl_batch *b, const sl_gub_config *c)
{
    sl_buf out;
    sl_buf_init(&out, 0);
    CHECK(sl_peerwire_encode_req(b, NULL, 0, &out) == 0);
    sl_batch o;
    sl_batch_init(&o, 0);
    sl_grpc_status st;
    CHECK(sl_gub_decode_peer_pb(c, out.data, out.len, &o, &st) == 0);
    CHECK(o.n == b->n);
    for (size_t i = 0; i < b->n; i++) {
        const sl_request *x = &b->reqs[i], *y = &o.reqs[i];
        CHECK(x->name_len == y->name_len && memcmp(x->name, y->name, x->name_len) == 0);
        CHECK(x->unique_key_len == y->unique_key_len &&
              memcmp(x->unique_key, y->unique_key, x->unique_key_len) == 0);
        CHECK(x->hits == y->hits && x->limit == y->limit && x->duration == y->duration &&
              x->burst == y->burst && x->created_at == y->created_at &&
              x->algorithm == y->algorithm);
    }
    /* and the owner's answer comes back to the same items */
    answer(&o);
    sl_buf_reset(&out);
    CHECK(sl_gub_encode_peer_resp_pb(&o, &out) == 0);
    CHECK(sl_peerwire_decode_resp(c->max_msg, out.data, out.len, b, NULL, 0, &st) == 0);
    sl_batch_free(&o);
    sl_buf_free(&out);
}

/* The same bytes decoded by protobuf-c alone give the same outcome and the same batch. */
static void check_reference(const sl_gub_config *c0, const uint8_t *data, size_t size, bool peer,
                            int rc, const sl_grpc_status *st, const sl_batch *b)
{
    sl_gub_config c = *c0;
    c.reference_decoders = true;
    sl_batch r;
    sl_batch_init(&r, 8 << 20);
    sl_grpc_status rst;
    int rrc = peer ? sl_gub_decode_peer_pb(&c, data, size, &r, &rst)
                   : sl_gub_decode_pb(&c, data, size, &r, &rst);
    CHECK(rrc == rc && rst.code == st->code && strcmp(rst.message, st->message) == 0);
    if (rc == 0) {
        CHECK(r.n == b->n && r.n_answered == b->n_answered);
        for (size_t i = 0; i < b->n; i++) {
            const sl_request *x = &b->reqs[i], *y = &r.reqs[i];
            CHECK(x->name_len == y->name_len && memcmp(x->name, y->name, x->name_len + 1) == 0);
            CHECK(x->unique_key_len == y->unique_key_len &&
                  memcmp(x->unique_key, y->unique_key, x->unique_key_len + 1) == 0);
            CHECK(x->hits == y->hits && x->limit == y->limit && x->duration == y->duration &&
                  x->burst == y->burst && x->created_at == y->created_at &&
                  x->algorithm == y->algorithm && x->behavior == y->behavior &&
                  x->sub_windows == y->sub_windows);
            CHECK(b->answered[i] == r.answered[i]);
            CHECK((b->resps[i].error == NULL) == (r.resps[i].error == NULL));
            CHECK(!b->resps[i].error || strcmp(b->resps[i].error, r.resps[i].error) == 0);
            CHECK(b->req_meta[i].n == r.req_meta[i].n);
            for (uint32_t k = 0; k < b->req_meta[i].n; k++) {
                CHECK(strcmp(b->req_meta[i].kv[k].key, r.req_meta[i].kv[k].key) == 0);
                CHECK(strcmp(b->req_meta[i].kv[k].val, r.req_meta[i].kv[k].val) == 0);
            }
        }
    }
    sl_batch_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_gub_config c;
    sl_gub_config_default(&c);
    sl_batch b;
    sl_batch_init(&b, 8 << 20);
    sl_grpc_status st;

    int rc = sl_gub_decode_pb(&c, data, size, &b, &st);
    check_reference(&c, data, size, false, rc, &st, &b);
    if (rc == 0) {
        CHECK(b.n <= c.max_items);
        answer(&b);
        check_encodings(&b);
        check_forward(&b, &c);
    } else {
        CHECK(st.code != 0 && st.message[0] != 0);
    }

    rc = sl_gub_decode_peer_pb(&c, data, size, &b, &st);
    check_reference(&c, data, size, true, rc, &st, &b);
    if (rc == 0) {
        for (size_t i = 0; i < b.n; i++)
            CHECK(!(b.reqs[i].behavior & SL_GLOBAL) || (b.reqs[i].behavior & SL_DRAIN_OVER_LIMIT));
    }

    sl_peerwire_global *g;
    size_t n;
    if (sl_peerwire_decode_globals(c.max_msg, data, size, &b, &g, &n, &st) == 0) {
        sl_buf out;
        sl_buf_init(&out, 0);
        CHECK(sl_peerwire_encode_globals(g, n, &out) == 0);
        sl_buf_free(&out);
    }

    /* a peer's answer for a batch of 3 */
    sl_batch_reset(&b);
    CHECK(sl_batch_alloc_items(&b, 3) == 0);
    size_t idx[] = {2, 0, 1};
    if (sl_peerwire_decode_resp(c.max_msg, data, size, &b, idx, 3, &st) == 0)
        check_encodings(&b);

    sl_batch_free(&b);
    return 0;
}

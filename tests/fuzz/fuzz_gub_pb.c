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

/* GetRateLimitsResp as protobuf-c packs it for b's responses (the adapter's former encoder). */
static uint8_t *pack_reference(const sl_batch *b, size_t *len)
{
    Pb__Gubernator__GetRateLimitsResp m = PB__GUBERNATOR__GET_RATE_LIMITS_RESP__INIT;
    Pb__Gubernator__RateLimitResp *rs = calloc(b->n + 1, sizeof *rs);
    Pb__Gubernator__RateLimitResp **ps = calloc(b->n + 1, sizeof *ps);
    size_t ne = 0;
    for (size_t i = 0; i < b->n; i++)
        ne += b->resp_meta[i].n;
    Pb__Gubernator__RateLimitResp__MetadataEntry *es = calloc(ne + 1, sizeof *es);
    Pb__Gubernator__RateLimitResp__MetadataEntry **pe = calloc(ne + 1, sizeof *pe);
    CHECK(rs && ps && es && pe);
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++) {
        const sl_response *s = &b->resps[i];
        pb__gubernator__rate_limit_resp__init(&rs[i]);
        if (s->error) {
            rs[i].error = (char *)s->error;
        } else {
            rs[i].status = s->status == SL_OVER_LIMIT ? 1 : 0;
            rs[i].limit = s->limit;
            rs[i].remaining = s->remaining;
            rs[i].reset_time = s->reset_time;
        }
        rs[i].metadata = &pe[k];
        rs[i].n_metadata = b->resp_meta[i].n;
        for (uint32_t j = 0; j < b->resp_meta[i].n; j++, k++) {
            pb__gubernator__rate_limit_resp__metadata_entry__init(&es[k]);
            es[k].key = (char *)b->resp_meta[i].kv[j].key;
            es[k].value = (char *)b->resp_meta[i].kv[j].val;
            pe[k] = &es[k];
        }
        ps[i] = &rs[i];
    }
    m.n_responses = b->n;
    m.responses = ps;
    *len = protobuf_c_message_get_packed_size(&m.base);
    uint8_t *p = malloc(*len + 1);
    CHECK(p != NULL);
    protobuf_c_message_pack(&m.base, p);
    free(rs);
    free(ps);
    free(es);
    free(pe);
    return p;
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
    size_t rlen;
    uint8_t *ref = pack_reference(b, &rlen);
    CHECK(rlen == out.len && memcmp(ref, out.data, rlen) == 0);
    free(ref);
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
    CHECK(sl_gub_encode_peer_req_pb(b, NULL, 0, &out) == 0);
    sl_batch o;
    sl_batch_init(&o, 0);
    sl_gub_status st;
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
    CHECK(sl_gub_decode_peer_resp_pb(c, out.data, out.len, b, NULL, 0, &st) == 0);
    sl_batch_free(&o);
    sl_buf_free(&out);
}

/* The same bytes decoded by protobuf-c alone give the same outcome and the same batch. */
static void check_reference(const sl_gub_config *c0, const uint8_t *data, size_t size, bool peer,
                            int rc, const sl_gub_status *st, const sl_batch *b)
{
    sl_gub_config c = *c0;
    c.reference_decoders = true;
    sl_batch r;
    sl_batch_init(&r, 8 << 20);
    sl_gub_status rst;
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
    sl_gub_status st;

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

    sl_gub_global *g;
    size_t n;
    if (sl_gub_decode_globals_pb(&c, data, size, &b, &g, &n, &st) == 0) {
        sl_buf out;
        sl_buf_init(&out, 0);
        CHECK(sl_gub_encode_globals_pb(g, n, &out) == 0);
        sl_buf_free(&out);
    }

    /* a peer's answer for a batch of 3 */
    sl_batch_reset(&b);
    CHECK(sl_batch_alloc_items(&b, 3) == 0);
    size_t idx[] = {2, 0, 1};
    if (sl_gub_decode_peer_resp_pb(&c, data, size, &b, idx, 3, &st) == 0)
        check_encodings(&b);

    sl_batch_free(&b);
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Key state transfer tests, on a virtual clock: for every algorithm, a key's state exported from
 * one store (sl_store_export + sl_keystate_encode) and imported into another (sl_keystate_decode +
 * sl_store_import) answers exactly as the original; a merge keeps the more restrictive state
 * whichever side it arrives on; the decoder refuses malformed records; a snapshot round-trips and
 * a truncated, corrupt or foreign one is refused whole; with cluster keys, a held key's id (and so
 * its owner) is recovered from its store hash and its state answers the same in another engine.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "core/alg.h"
#include "core/keystate.h"
#include "core/snapshot.h"
#include "core/store.h"

#define T0 INT64_C(1700000000000)
#define KEY UINT64_C(0x1234567890abcdef)

static const sl_alg_config ALG = {.max_log_limit = 1000, .max_sub_windows = 16,
                                  .max_concurrency_limit = 1000};

static sl_store *store_new(void)
{
    sl_store_config cfg = {.max_keys = 1000, .shards = 4, .alg = ALG};
    sl_store *s = NULL;
    assert_int_equal(sl_store_new(&cfg, &s), 0);
    return s;
}

static sl_request req_for(int32_t alg, int64_t hits)
{
    sl_request r = {.name = "n", .name_len = 1, .unique_key = "k", .unique_key_len = 1,
                    .hits = hits, .limit = 10, .duration = 60000, .algorithm = alg};
    if (alg == SL_GCRA || alg == SL_LEAKY_BUCKET)
        r.burst = 5;
    if (alg == SL_CONCURRENCY && hits > 1)
        r.hits = 1;
    return r;
}

/* hits as n separate requests for CONCURRENCY (one lease each), one request otherwise */
static void hit(sl_store *s, int32_t alg, int64_t n, int64_t t)
{
    sl_response resp;
    if (alg == SL_CONCURRENCY) {
        for (int64_t i = 0; i < n; i++) {
            sl_request r = req_for(alg, 1);
            sl_store_decide(s, KEY, &r, t + i, &resp);
            assert_null(resp.error);
        }
        return;
    }
    sl_request r = req_for(alg, n);
    sl_store_decide(s, KEY, &r, t, &resp);
    assert_null(resp.error);
}

static sl_response peek(sl_store *s, int32_t alg, int64_t t)
{
    sl_request r = req_for(alg, 0);
    sl_response resp;
    sl_store_decide(s, KEY, &r, t, &resp);
    assert_null(resp.error);
    return resp;
}

typedef struct buf {
    uint8_t data[1 << 16];
    size_t len;
    int keys;
} buf;

static bool collect(uint64_t hash, int64_t expire_at, const sl_state *st, void *ctx)
{
    buf *b = ctx;
    size_t n = sl_keystate_encode(hash, expire_at, st, b->data + b->len, sizeof b->data - b->len);
    assert_true(n > 0);
    assert_int_equal(n, sl_keystate_size(st));
    b->len += n;
    b->keys++;
    return true;
}

static void export_all(sl_store *s, int64_t now, buf *b)
{
    sl_store_cursor cur = {0, 0};
    while (cur.shard < sl_store_shards(s))
        sl_store_export(s, &cur, now, 7, collect, b); /* small steps: the cursor resumes */
}

static void import_all(sl_store *s, const buf *b, int64_t now)
{
    for (size_t off = 0; off < b->len;) {
        sl_keystate k;
        size_t used;
        assert_int_equal(sl_keystate_decode(b->data + off, b->len - off, &ALG, &k, &used), 0);
        sl_store_import(s, k.hash, now, &k.st, k.expire_at);
        off += used;
    }
}

static void assert_same(sl_response a, sl_response b)
{
    assert_int_equal(a.status, b.status);
    assert_int_equal(a.remaining, b.remaining);
    assert_int_equal(a.reset_time, b.reset_time);
    assert_int_equal(a.retry_after, b.retry_after);
}

static const int32_t ALGS[] = {SL_TOKEN_BUCKET, SL_LEAKY_BUCKET,   SL_GCRA,       SL_FIXED_WINDOW,
                               SL_SLIDING_WINDOW, SL_SLIDING_LOG, SL_CONCURRENCY};

static void test_round_trip_every_algorithm(void **state)
{
    (void)state;
    for (size_t a = 0; a < sizeof ALGS / sizeof *ALGS; a++) {
        sl_store *src = store_new(), *dst = store_new();
        hit(src, ALGS[a], 3, T0);
        hit(src, ALGS[a], 2, T0 + 1500);
        buf *b = calloc(1, sizeof *b);
        export_all(src, T0 + 2000, b);
        assert_int_equal(b->keys, 1);
        import_all(dst, b, T0 + 2000);
        assert_int_equal(sl_store_check(dst), 0);
        for (int64_t t = T0 + 2000; t < T0 + 130000; t += 7000)
            assert_same(peek(src, ALGS[a], t), peek(dst, ALGS[a], t));
        free(b);
        sl_store_free(src);
        sl_store_free(dst);
    }
}

static void test_sub_windows_round_trip(void **state)
{
    (void)state;
    sl_store *src = store_new(), *dst = store_new();
    sl_request r = req_for(SL_SLIDING_WINDOW, 2);
    r.sub_windows = 4;
    sl_response resp, x, y;
    for (int i = 0; i < 4; i++)
        sl_store_decide(src, KEY, &r, T0 + i * 16000, &resp);
    buf *b = calloc(1, sizeof *b);
    export_all(src, T0 + 50000, b);
    assert_int_equal(b->len, SL_KEYSTATE_FIXED + 4 * 8);
    import_all(dst, b, T0 + 50000);
    r.hits = 0;
    for (int64_t t = T0 + 50000; t < T0 + 200000; t += 5000) {
        sl_store_decide(src, KEY, &r, t, &x);
        sl_store_decide(dst, KEY, &r, t, &y);
        assert_same(x, y);
    }
    free(b);
    sl_store_free(src);
    sl_store_free(dst);
}

/* Two stores with the same key, one more used than the other: importing either into the other
 * leaves the more used one's answers. */
static void test_merge_keeps_the_restrictive_state(void **state)
{
    (void)state;
    for (size_t a = 0; a < sizeof ALGS / sizeof *ALGS; a++) {
        int32_t alg = ALGS[a];
        sl_store *more = store_new(), *less = store_new(), *ref = store_new();
        hit(more, alg, 4, T0);
        hit(ref, alg, 4, T0);
        hit(less, alg, 1, T0);
        int64_t now = T0 + 100;
        buf *bm = calloc(1, sizeof *bm), *bl = calloc(1, sizeof *bl);
        export_all(more, now, bm);
        export_all(less, now, bl);
        import_all(less, bm, now); /* the restrictive state arrives: it wins */
        import_all(more, bl, now); /* the lenient one arrives: ignored */
        sl_response r_ref = peek(ref, alg, now + 1);
        assert_same(peek(less, alg, now + 1), r_ref);
        assert_same(peek(more, alg, now + 1), r_ref);
        assert_int_equal(sl_store_check(less), 0);
        free(bm);
        free(bl);
        sl_store_free(more);
        sl_store_free(less);
        sl_store_free(ref);
    }
}

/* An exhausted token bucket stays exhausted through a merge with a fresh-looking copy. */
static void test_merge_over_limit_token_bucket(void **state)
{
    (void)state;
    sl_store *a = store_new(), *b = store_new();
    hit(a, SL_TOKEN_BUCKET, 10, T0);
    hit(a, SL_TOKEN_BUCKET, 1, T0 + 1); /* OVER_LIMIT */
    hit(b, SL_TOKEN_BUCKET, 2, T0 + 5);
    buf *ba = calloc(1, sizeof *ba);
    export_all(a, T0 + 10, ba);
    import_all(b, ba, T0 + 10);
    sl_response r = peek(b, SL_TOKEN_BUCKET, T0 + 11);
    assert_int_equal(r.remaining, 0);
    free(ba);
    sl_store_free(a);
    sl_store_free(b);
}

static void test_expired_import_is_dropped(void **state)
{
    (void)state;
    sl_store *a = store_new(), *b = store_new();
    hit(a, SL_FIXED_WINDOW, 3, T0);
    buf *ba = calloc(1, sizeof *ba);
    export_all(a, T0, ba);
    assert_int_equal(ba->keys, 1);
    sl_keystate k;
    size_t used;
    assert_int_equal(sl_keystate_decode(ba->data, ba->len, &ALG, &k, &used), 0);
    assert_false(sl_store_import(b, k.hash, k.expire_at + 1, &k.st, k.expire_at));
    assert_int_equal(k.st.algorithm, SL_ALG_NONE);
    free(ba);
    sl_store_free(a);
    sl_store_free(b);
}

/* Every prefix of a valid record is refused; so are another version, reserved bytes, an
 * unordered log, a lease id 0 and a tail beyond the configured limits. */
static void test_decoder_refuses_malformed(void **state)
{
    (void)state;
    for (size_t a = 0; a < sizeof ALGS / sizeof *ALGS; a++) {
        sl_store *s = store_new();
        hit(s, ALGS[a], 3, T0);
        buf *b = calloc(1, sizeof *b);
        export_all(s, T0, b);
        sl_keystate k;
        size_t used;
        for (size_t n = 0; n < b->len; n++)
            assert_int_equal(sl_keystate_decode(b->data, n, &ALG, &k, &used), -EINVAL);
        uint8_t rec[4096];
        memcpy(rec, b->data, b->len);
        rec[0] = 2;
        assert_int_equal(sl_keystate_decode(rec, b->len, &ALG, &k, &used), -EINVAL);
        memcpy(rec, b->data, b->len);
        rec[3] = 1;
        assert_int_equal(sl_keystate_decode(rec, b->len, &ALG, &k, &used), -EINVAL);
        memcpy(rec, b->data, b->len);
        rec[1] = SL_ALGORITHM_COUNT;
        assert_int_equal(sl_keystate_decode(rec, b->len, &ALG, &k, &used), -EINVAL);
        free(b);
        sl_store_free(s);
    }
    /* a log of 3 entries with the second one older than the first */
    sl_store *s = store_new();
    hit(s, SL_SLIDING_LOG, 1, T0 + 10);
    hit(s, SL_SLIDING_LOG, 2, T0 + 20);
    buf *b = calloc(1, sizeof *b);
    export_all(s, T0 + 20, b);
    sl_keystate k;
    size_t used;
    assert_int_equal(sl_keystate_decode(b->data, b->len, &ALG, &k, &used), 0);
    sl_alg_release(&k.st);
    b->data[SL_KEYSTATE_FIXED + 8] = 0; /* low byte of entry 1 */
    b->data[SL_KEYSTATE_FIXED + 9] = 0;
    assert_int_equal(sl_keystate_decode(b->data, b->len, &ALG, &k, &used), -EINVAL);
    /* the same log with a configured max-log-limit below its capacity */
    sl_alg_config small = ALG;
    small.max_log_limit = 5;
    b->len = 0;
    export_all(s, T0 + 20, b);
    assert_int_equal(sl_keystate_decode(b->data, b->len, &small, &k, &used), -EINVAL);
    sl_store_free(s);
    /* a lease id 0 */
    s = store_new();
    hit(s, SL_CONCURRENCY, 2, T0);
    b->len = 0;
    export_all(s, T0, b);
    memset(b->data + SL_KEYSTATE_FIXED, 0, 8);
    assert_int_equal(sl_keystate_decode(b->data, b->len, &ALG, &k, &used), -EINVAL);
    free(b);
    sl_store_free(s);
}

/* --- snapshots ------------------------------------------------------------------------------ */

typedef struct snap {
    uint8_t *data;
    size_t len;
} snap;

static snap snapshot_of(sl_store *s, int64_t now, size_t chunk)
{
    sl_snapshot_writer w;
    assert_int_equal(sl_snapshot_writer_init(&w, s, 42, 0, now), 0);
    uint8_t *out = malloc(1 << 20);
    size_t len = SL_SNAPSHOT_HEADER;
    uint8_t *tmp = malloc(chunk);
    long n;
    while ((n = sl_snapshot_writer_next(&w, tmp, chunk)) > 0) {
        assert_true(len + (size_t)n <= (1 << 20));
        memcpy(out + len, tmp, (size_t)n);
        len += (size_t)n;
    }
    assert_int_equal(n, 0);
    sl_snapshot_writer_header(&w, out);
    sl_snapshot_writer_free(&w);
    free(tmp);
    return (snap){out, len};
}

static void fill(sl_store *s, int keys, int64_t t)
{
    for (int i = 0; i < keys; i++) {
        int32_t alg = ALGS[i % 7];
        sl_request r = req_for(alg, 1 + i % 3);
        if (alg == SL_CONCURRENCY)
            r.hits = 1;
        sl_response resp;
        sl_store_decide(s, KEY + (uint64_t)i * 7919, &r, t, &resp);
        assert_null(resp.error);
    }
}

static void test_snapshot_round_trip(void **state)
{
    (void)state;
    sl_store *s = store_new();
    fill(s, 500, T0);
    snap sn = snapshot_of(s, T0 + 1, 1000); /* small chunks: many calls */
    sl_snapshot_info info;
    const char *why;
    assert_int_equal(sl_snapshot_check(sn.data, sn.len, &ALG, &info, &why), 0);
    assert_int_equal(info.keys, 500);
    assert_int_equal(info.seed, 42);
    sl_store *d = store_new();
    size_t loaded, dropped;
    assert_int_equal(sl_snapshot_load(sn.data, sn.len, &ALG, d, T0 + 1, &loaded, &dropped), 0);
    assert_int_equal(loaded, 500);
    assert_int_equal(dropped, 0);
    assert_int_equal(sl_store_check(d), 0);
    for (int i = 0; i < 500; i++) {
        sl_state a, b;
        int64_t ea, eb;
        uint64_t h = KEY + (uint64_t)i * 7919;
        assert_true(sl_store_get(s, h, T0 + 1, &a, &ea));
        assert_true(sl_store_get(d, h, T0 + 1, &b, &eb));
        assert_int_equal(ea, eb);
        assert_int_equal(a.algorithm, b.algorithm);
        assert_int_equal(sl_keystate_size(&a), sl_keystate_size(&b));
    }
    /* loaded much later: every key has expired and is dropped */
    sl_store *late = store_new();
    assert_int_equal(
        sl_snapshot_load(sn.data, sn.len, &ALG, late, T0 + 86400000, &loaded, &dropped), 0);
    assert_int_equal(loaded, 0);
    assert_int_equal(dropped, 500);
    free(sn.data);
    sl_store_free(s);
    sl_store_free(d);
    sl_store_free(late);
}

static void test_snapshot_refused_whole(void **state)
{
    (void)state;
    sl_store *s = store_new();
    fill(s, 50, T0);
    snap sn = snapshot_of(s, T0, 1 << 16);
    sl_snapshot_info info;
    const char *why;
    /* every truncation */
    for (size_t n = 0; n < sn.len; n += 1 + n / 16) {
        assert_int_equal(sl_snapshot_check(sn.data, n, &ALG, &info, &why), -EINVAL);
        assert_non_null(why);
    }
    /* a flipped bit anywhere in the body */
    for (size_t i = SL_SNAPSHOT_HEADER; i < sn.len; i += 97) {
        sn.data[i] ^= 0x10;
        assert_int_equal(sl_snapshot_check(sn.data, sn.len, &ALG, &info, &why), -EINVAL);
        assert_string_equal(why, "checksum mismatch");
        sn.data[i] ^= 0x10;
    }
    /* foreign and future files */
    uint8_t save = sn.data[0];
    sn.data[0] = 'X';
    assert_int_equal(sl_snapshot_check(sn.data, sn.len, &ALG, &info, &why), -EINVAL);
    assert_string_equal(why, "not a sluice snapshot");
    sn.data[0] = save;
    sn.data[8] = 9;
    assert_int_equal(sl_snapshot_check(sn.data, sn.len, &ALG, &info, &why), -EINVAL);
    assert_string_equal(why, "unsupported snapshot version");
    sn.data[8] = SL_SNAPSHOT_VERSION;
    /* a valid checksum over a malformed record (crafted): still refused */
    sn.data[SL_SNAPSHOT_HEADER] = 7; /* record version */
    uint8_t hdr[SL_SNAPSHOT_HEADER];
    sl_snapshot_header(hdr, 42, 0, 50, sn.len - SL_SNAPSHOT_HEADER,
                       XXH64(sn.data + SL_SNAPSHOT_HEADER, sn.len - SL_SNAPSHOT_HEADER, 0));
    memcpy(sn.data, hdr, sizeof hdr);
    assert_int_equal(sl_snapshot_check(sn.data, sn.len, &ALG, &info, &why), -EINVAL);
    assert_string_equal(why, "malformed key record");
    assert_int_equal(sl_snapshot_check(sn.data, sn.len, &ALG, &info, &why), -EINVAL);
    free(sn.data);
    sl_store_free(s);
}

/* --- cluster keys: a key's owner can be found from its store hash, and its state moved to an
 * engine with another seed ---------------------------------------------------------------------- */

static bool first_key(uint64_t hash, int64_t expire_at, const sl_state *st, void *ctx)
{
    (void)expire_at;
    (void)st;
    *(uint64_t *)ctx = hash;
    return false;
}

static void test_cluster_keys_move_between_engines(void **state)
{
    (void)state;
    uint64_t x = 1;
    sl_engine_config c;
    sl_engine_config_default(&c);
    c.max_keys = 1000;
    c.cluster_keys = true;
    c.hash_seed = 11;
    sl_engine *a, *b;
    assert_int_equal(sl_engine_new(&c, &a), 0);
    c.hash_seed = 22;
    assert_int_equal(sl_engine_new(&c, &b), 0);
    for (int i = 0; i < 1000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        assert_int_equal(sl_engine_hash_of_id(a, sl_engine_id_of_hash(a, x)), x);
        assert_int_equal(sl_engine_id_of_hash(a, sl_engine_hash_of_id(a, x)), x);
    }
    sl_request r = req_for(SL_TOKEN_BUCKET, 7);
    r.name = "acct";
    r.name_len = 4;
    r.unique_key = "42";
    r.unique_key_len = 2;
    sl_response ra, rb;
    sl_engine_decide(a, &r, &ra, T0);
    /* the one key a holds: its id is the picker's hash of "acct_42" */
    uint64_t ha = 0;
    sl_store_cursor cur = {0, 0};
    while (cur.shard < sl_store_shards(sl_engine_store(a)) && !ha)
        sl_store_export(sl_engine_store(a), &cur, T0, 1000, first_key, &ha);
    assert_true(ha != 0);
    uint64_t id = sl_engine_id_of_hash(a, ha);
    assert_int_equal(id, sl_key_id(NULL, "acct", 4, "42", 2));
    /* moved to b under b's hash of the same id, it answers there as it did in a */
    sl_state st;
    int64_t exp;
    assert_true(sl_store_get(sl_engine_store(a), ha, T0, &st, &exp));
    uint64_t hb = sl_engine_hash_of_id(b, id);
    assert_true(hb != ha);
    assert_true(sl_store_import(sl_engine_store(b), hb, T0, &st, exp));
    r.hits = 0;
    sl_engine_decide(a, &r, &ra, T0 + 5);
    sl_engine_decide(b, &r, &rb, T0 + 5);
    assert_int_equal(rb.remaining, 3);
    assert_same(ra, rb);
    sl_engine_free(a);
    sl_engine_free(b);
}

/* issue 25: with the cluster's secret the key id is keyed: it differs from the public id and
 * from the id under another secret, the joined and split forms agree, and a clustered engine
 * holds a key under its keyed id (what hand-off sends and the picker places). Short material is
 * refused. */
static void test_keyed_cluster_ids(void **state)
{
    (void)state;
    sl_key_ids pub, k1, k2;
    assert_int_equal(sl_key_ids_init(&pub, NULL, 0), 0);
    assert_false(pub.keyed);
    assert_int_equal(sl_key_ids_init(&k1, "0123456789abcdef", 16), 0);
    assert_int_equal(sl_key_ids_init(&k2, "0123456789abcdeF", 16), 0);
    assert_int_equal(sl_key_ids_init(&k2, "short", 5), -EINVAL);
    assert_int_equal(sl_key_ids_init(&k2, "0123456789abcdeF", 16), 0);
    assert_true(k1.keyed && k2.keyed && k1.fingerprint != k2.fingerprint);
    uint64_t idp = sl_key_id(&pub, "acct", 4, "42", 2), id1 = sl_key_id(&k1, "acct", 4, "42", 2);
    assert_int_equal(idp, sl_key_id(NULL, "acct", 4, "42", 2));
    assert_true(id1 != idp);
    assert_true(id1 != sl_key_id(&k2, "acct", 4, "42", 2));
    assert_int_equal(id1, sl_key_id_joined(&k1, "acct_42", 7));
    char name[300], key[400], joined[701];
    memset(name, 'n', sizeof name);
    memset(key, 'k', sizeof key);
    memcpy(joined, name, 300);
    joined[300] = '_';
    memcpy(joined + 301, key, 400);
    assert_int_equal(sl_key_id(&k1, name, 300, key, 400), sl_key_id_joined(&k1, joined, 701));
    /* a clustered engine with the secret holds acct_42 under its keyed id */
    sl_engine_config c;
    sl_engine_config_default(&c);
    c.max_keys = 1000;
    c.cluster_keys = true;
    sl_engine *e;
    assert_int_equal(sl_engine_new(&c, &e), 0);
    sl_engine_set_key_ids(e, &k1);
    assert_int_equal(sl_engine_key_ids(e)->fingerprint, k1.fingerprint);
    sl_request r = req_for(SL_TOKEN_BUCKET, 7);
    r.name = "acct";
    r.name_len = 4;
    r.unique_key = "42";
    r.unique_key_len = 2;
    sl_response resp;
    sl_engine_decide(e, &r, &resp, T0);
    uint64_t h = 0;
    sl_store_cursor cur = {0, 0};
    while (cur.shard < sl_store_shards(sl_engine_store(e)) && !h)
        sl_store_export(sl_engine_store(e), &cur, T0, 1000, first_key, &h);
    assert_int_equal(sl_engine_id_of_hash(e, h), id1);
    sl_engine_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_algorithm),
        cmocka_unit_test(test_sub_windows_round_trip),
        cmocka_unit_test(test_merge_keeps_the_restrictive_state),
        cmocka_unit_test(test_merge_over_limit_token_bucket),
        cmocka_unit_test(test_expired_import_is_dropped),
        cmocka_unit_test(test_decoder_refuses_malformed),
        cmocka_unit_test(test_snapshot_round_trip),
        cmocka_unit_test(test_snapshot_refused_whole),
        cmocka_unit_test(test_cluster_keys_move_between_engines),
        cmocka_unit_test(test_keyed_cluster_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

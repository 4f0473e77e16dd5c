/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Snapshot format (see snapshot.h): the header's encoding, the whole-file validation and the load
 * into a store. Validation decodes every record (and frees it) before the load decodes them again:
 * the second decode costs tens of nanoseconds a key, and in exchange a snapshot is either loaded
 * whole or not at all, with no staging copy of the store in memory.
 */
#include "core/snapshot.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "base/le.h"
#include "core/keystate.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

void sl_snapshot_header(uint8_t out[SL_SNAPSHOT_HEADER], uint64_t seed, unsigned flags,
                        uint64_t keys, uint64_t body_len, uint64_t sum)
{
    memcpy(out, SL_SNAPSHOT_MAGIC, 8);
    uint8_t v[8];
    sl_le_put64(v, (uint64_t)SL_SNAPSHOT_VERSION | (uint64_t)(flags & 0xffff) << 16 |
                 (uint64_t)SL_SNAPSHOT_HEADER << 32);
    memcpy(out + 8, v, 8);
    sl_le_put64(out + 16, seed);
    sl_le_put64(out + 24, keys);
    sl_le_put64(out + 32, body_len);
    sl_le_put64(out + 40, sum);
}

int sl_snapshot_check(const uint8_t *buf, size_t len, const sl_alg_config *cfg,
                      sl_snapshot_info *info, const char **why)
{
    *why = NULL;
    if (len < 8 || memcmp(buf, SL_SNAPSHOT_MAGIC, 8)) {
        *why = "not a sluice snapshot";
        return -EINVAL;
    }
    if (len < SL_SNAPSHOT_HEADER) {
        *why = "truncated";
        return -EINVAL;
    }
    unsigned flags = sl_le_get32(buf + 8) >> 16;
    if ((sl_le_get32(buf + 8) & 0xffff) != SL_SNAPSHOT_VERSION || sl_le_get32(buf + 12) != SL_SNAPSHOT_HEADER ||
        (flags & ~SL_SNAPSHOT_CLUSTER_KEYS)) {
        *why = "unsupported snapshot version";
        return -EINVAL;
    }
    sl_snapshot_info in = {.seed = sl_le_get64(buf + 16), .flags = flags, .keys = sl_le_get64(buf + 24),
                           .body_len = sl_le_get64(buf + 32)};
    if (in.body_len != len - SL_SNAPSHOT_HEADER) {
        *why = in.body_len > len - SL_SNAPSHOT_HEADER ? "truncated" : "trailing bytes";
        return -EINVAL;
    }
    const uint8_t *body = buf + SL_SNAPSHOT_HEADER;
    if (XXH64(body, (size_t)in.body_len, 0) != sl_le_get64(buf + 40)) {
        *why = "checksum mismatch";
        return -EINVAL;
    }
    uint64_t n = 0;
    for (size_t off = 0; off < in.body_len; n++) {
        sl_keystate k;
        size_t used;
        int rc = sl_keystate_decode(body + off, (size_t)in.body_len - off, cfg, &k, &used);
        if (rc) {
            *why = rc == -ENOMEM ? "out of memory" : "malformed key record";
            return rc;
        }
        sl_alg_release(&k.st);
        off += used;
    }
    if (n != in.keys) {
        *why = "key count mismatch";
        return -EINVAL;
    }
    *info = in;
    return 0;
}

int sl_snapshot_load(const uint8_t *buf, size_t len, const sl_alg_config *cfg, sl_store *s,
                     int64_t now, size_t *loaded, size_t *dropped)
{
    size_t ok = 0, gone = 0;
    int rc = 0;
    if (len < SL_SNAPSHOT_HEADER)
        rc = -EINVAL;
    const uint8_t *body = buf + SL_SNAPSHOT_HEADER;
    size_t blen = rc ? 0 : len - SL_SNAPSHOT_HEADER;
    for (size_t off = 0; off < blen;) {
        sl_keystate k;
        size_t used;
        if ((rc = sl_keystate_decode(body + off, blen - off, cfg, &k, &used)))
            break;
        off += used;
        if (sl_store_import(s, k.hash, now, &k.st, k.expire_at))
            ok++;
        else
            gone++;
    }
    if (loaded)
        *loaded = ok;
    if (dropped)
        *dropped = gone;
    return rc;
}

/* ---------------------------------------------------------------- writer */

typedef struct chunk {
    uint8_t *buf;
    size_t cap, len;
    uint64_t keys;
    bool too_big;
} chunk;

static bool put_key(uint64_t hash, int64_t expire_at, const sl_state *st, void *ctx)
{
    chunk *c = ctx;
    size_t n = sl_keystate_encode(hash, expire_at, st, c->buf + c->len, c->cap - c->len);
    if (!n) {
        c->too_big = c->len == 0;
        return false;
    }
    c->len += n;
    c->keys++;
    return true;
}

int sl_snapshot_writer_init(sl_snapshot_writer *w, sl_store *s, uint64_t seed, unsigned flags,
                            int64_t now)
{
    memset(w, 0, sizeof *w);
    w->xxh = XXH64_createState();
    if (!w->xxh)
        return -ENOMEM;
    XXH64_reset(w->xxh, 0);
    w->store = s;
    w->seed = seed;
    w->flags = flags;
    w->now = now;
    return 0;
}

/* Slots examined per export call: bounds how long one shard lock is held. */
#define WRITER_WORK 4096

long sl_snapshot_writer_next(sl_snapshot_writer *w, uint8_t *buf, size_t cap)
{
    chunk c = {.buf = buf, .cap = cap};
    unsigned shards = sl_store_shards(w->store);
    while (w->cur.shard < shards) {
        sl_store_cursor before = w->cur;
        sl_store_export(w->store, &w->cur, w->now, WRITER_WORK, put_key, &c);
        if (c.too_big)
            return -E2BIG;
        if (w->cur.shard == before.shard && w->cur.pos == before.pos)
            break; /* stopped on a key that does not fit: the buffer is full */
        if (cap - c.len < SL_KEYSTATE_FIXED)
            break;
    }
    XXH64_update(w->xxh, buf, c.len);
    w->keys += c.keys;
    w->body_len += c.len;
    return (long)c.len;
}

void sl_snapshot_writer_header(const sl_snapshot_writer *w, uint8_t out[SL_SNAPSHOT_HEADER])
{
    sl_snapshot_header(out, w->seed, w->flags, w->keys, w->body_len, XXH64_digest(w->xxh));
}

void sl_snapshot_writer_free(sl_snapshot_writer *w)
{
    if (w->xxh)
        XXH64_freeState(w->xxh);
    w->xxh = NULL;
}

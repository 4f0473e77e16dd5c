/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hand-off of key state on membership change (see handoff.h): the sender's walk and batches, and
 * the receiver's merge.
 */
#include "cluster/handoff.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "cluster/peerwire.h"
#include "core/keystate.h"
#include "core/store.h"
#include "sluice/clock.h"

#define DEFAULT_BATCH_BYTES (256u * 1024)
#define DEFAULT_STEP_WORK 4096u
/* A walk that left keys behind (a call failed: e.g. a new peer listed in DNS before it listens)
 * runs again after retry_ms, at most `retries` times, for the keys still here. */
#define DEFAULT_RETRY_MS 1000
#define DEFAULT_RETRIES 5

/* One peer's batch being filled. */
typedef struct outq {
    sl_buf recs;
    uint64_t *hashes;           /* store hashes of the keys in recs (removed here once taken) */
    size_t n, cap;
    bool inflight;              /* a call to this peer is running (this walk's) */
} outq;

/* A call in flight. */
typedef struct sent {
    sl_handoff *h;
    uint64_t gen;
    size_t peer;
    uint64_t *hashes;
    size_t n;
    size_t bytes;
} sent;

struct sl_handoff {
    sl_handoff_config cfg;
    uv_timer_t timer;
    int refs;                   /* the timer handle + calls in flight */
    bool closing;
    /* the walk */
    bool walking;
    uint64_t gen;
    const sl_picker *picker;
    long self;
    void *token;
    sl_store_cursor cur;
    outq *outs;
    size_t npeers;
    size_t inflight;            /* this walk's calls running */
    bool failed_logged;
    int64_t t0;
    /* keys taken by peers during this walk: removed when it ends, since removing a key shifts
     * others back into slots the walk may have passed (they would be missed) */
    uint64_t *taken;
    size_t ntaken, captaken;
    int retries;
    bool swept;                 /* the second pass is running (see step) */
    sl_handoff_stats st;
};

static void unref(sl_handoff *h)
{
    if (--h->refs == 0)
        free(h);
}

static void on_timer_closed(uv_handle_t *t)
{
    unref(t->data);
}

static void drop_outs(sl_handoff *h)
{
    for (size_t i = 0; i < h->npeers; i++) {
        sl_buf_free(&h->outs[i].recs);
        free(h->outs[i].hashes);
    }
    free(h->outs);
    h->outs = NULL;
    h->npeers = 0;
}

static void remove_taken(sl_handoff *h)
{
    sl_store *s = sl_engine_store(h->cfg.engine);
    for (size_t i = 0; i < h->ntaken; i++)
        sl_store_remove(s, h->taken[i]);
    free(h->taken);
    h->taken = NULL;
    h->ntaken = h->captaken = 0;
}

/* Keys a peer took: removed now, or at the end of the walk in progress. */
static void keys_taken(sl_handoff *h, const uint64_t *hashes, size_t n, bool defer)
{
    if (defer && sl_grow(&h->taken, &h->captaken, h->ntaken, n, 4096, 0))
        defer = false; /* no memory to wait: remove now (the walk may miss a few keys) */
    if (defer) {
        memcpy(h->taken + h->ntaken, hashes, n * sizeof *hashes);
        h->ntaken += n;
        return;
    }
    sl_store *s = sl_engine_store(h->cfg.engine);
    for (size_t i = 0; i < n; i++)
        sl_store_remove(s, hashes[i]);
}

static void end_walk(sl_handoff *h)
{
    remove_taken(h);
    if (!h->walking)
        return;
    h->walking = false;
    drop_outs(h);
    if (h->cfg.release)
        h->cfg.release(h->cfg.ud, h->token);
    h->token = NULL;
    h->picker = NULL;
}

static void schedule(sl_handoff *h);
static void on_timer(uv_timer_t *t);

/* A batch of n keys was not taken (err < 0): they stay here. Logged once per walk. */
static void batch_failed(sl_handoff *h, size_t n, int err)
{
    h->st.failed_calls++;
    h->st.failed_keys += n;
    if (h->cfg.m_failed)
        sl_metrics_counter_add(h->cfg.m_failed, n);
    if (!h->failed_logged && h->cfg.log)
        sl_log_warn(h->cfg.log, "hand-off of %zu keys failed: %s (they stay here)", n,
                    strerror(-err));
    h->failed_logged = true;
}

static void on_sent(void *ud, int err)
{
    sent *c = ud;
    sl_handoff *h = c->h;
    if (!h->closing) {
        if (err == 0) {
            keys_taken(h, c->hashes, c->n, h->walking);
            if (h->cfg.m_sent)
                sl_metrics_counter_add(h->cfg.m_sent, c->n);
            if (h->cfg.m_bytes)
                sl_metrics_counter_add(h->cfg.m_bytes, c->bytes);
            h->st.keys += c->n;
            h->st.bytes += c->bytes;
            h->st.calls++;
        } else {
            batch_failed(h, c->n, err);
        }
        if (c->gen == h->gen && h->walking) {
            h->outs[c->peer].inflight = false;
            h->inflight--;
            schedule(h);
        }
    }
    free(c->hashes);
    free(c);
    unref(h);
}

/* Send peer i's batch (not empty, nothing in flight to it). */
static void send_batch(sl_handoff *h, size_t i)
{
    outq *q = &h->outs[i];
    sent *c = calloc(1, sizeof *c);
    sl_buf framed;
    sl_buf_init(&framed, 0);
    int rc = c ? sl_peerwire_encode_transfer_req(q->recs.data, q->recs.len, &framed) : -ENOMEM;
    if (!rc) {
        *c = (sent){h, h->gen, i, q->hashes, q->n, q->recs.len};
        rc = h->cfg.send(h->cfg.ud, i, &framed, on_sent, c);
    }
    sl_buf_free(&framed);
    if (rc) {
        batch_failed(h, q->n, rc);
        free(c);
        q->n = 0; /* the hashes array is reused */
    } else {
        h->refs++;
        h->inflight++;
        q->inflight = true;
        q->hashes = NULL;
        q->n = q->cap = 0;
    }
    sl_buf_reset(&q->recs);
}

typedef struct walk_ctx {
    sl_handoff *h;
    const sl_engine *e;
} walk_ctx;

/* Under a shard lock: append the key to its owner's batch, unless that batch is full. */
static bool take_key(uint64_t hash, int64_t expire_at, const sl_state *st, void *ud)
{
    walk_ctx *w = ud;
    sl_handoff *h = w->h;
    uint64_t id = sl_engine_id_of_hash(w->e, hash);
    size_t o = sl_picker_owner(h->picker, id);
    if (o == SIZE_MAX || (long)o == h->self || o >= h->npeers)
        return true;
    outq *q = &h->outs[o];
    if (q->recs.len >= h->cfg.batch_bytes)
        return false; /* resume at this key once the batch has gone */
    size_t need = sl_keystate_size(st);
    if (sl_grow(&q->hashes, &q->cap, q->n, 1, 1024, 0))
        return false;
    if (sl_buf_reserve(&q->recs, need))
        return false;
    sl_keystate_encode(id, expire_at, st, q->recs.data + q->recs.len, need);
    q->recs.len += need;
    q->hashes[q->n++] = hash;
    return true;
}

static void step(sl_handoff *h)
{
    if (!h->walking || h->closing)
        return;
    bool blocked = false;
    for (size_t i = 0; i < h->npeers; i++) {
        outq *q = &h->outs[i];
        if (q->recs.len >= h->cfg.batch_bytes) {
            if (!q->inflight)
                send_batch(h, i);
            else
                blocked = true;
        }
    }
    if (blocked)
        return; /* an ack resumes the walk */
    sl_store *s = sl_engine_store(h->cfg.engine);
    if (h->cur.shard < sl_store_shards(s)) {
        walk_ctx w = {h, h->cfg.engine};
        sl_store_export(s, &h->cur, sl_wall_ms(), h->cfg.step_work, take_key, &w);
        schedule(h);
        return;
    }
    /* walked: send what is left, then wait for the calls */
    bool pending = false;
    for (size_t i = 0; i < h->npeers; i++) {
        outq *q = &h->outs[i];
        if (q->recs.len && !q->inflight)
            send_batch(h, i);
        if (q->recs.len || q->inflight)
            pending = true;
    }
    if (pending || h->inflight)
        return;
    /* A second pass, once the taken keys are removed: a key that another key's removal (expiry,
     * eviction) or a table growth moved into a slot the first pass had already visited was
     * missed; the second pass finds only such keys (the others are gone or stay). */
    if (!h->swept) {
        remove_taken(h);
        h->swept = true;
        h->cur = (sl_store_cursor){0, 0};
        schedule(h);
        return;
    }
    /* a leaving node (self -1) does not retry: its shutdown deadline runs */
    if (h->st.failed_keys && h->self >= 0 && h->retries < h->cfg.retries) {
        remove_taken(h);
        h->retries++;
        h->swept = false;
        h->st.failed_keys = 0;
        h->cur = (sl_store_cursor){0, 0};
        uv_timer_start(&h->timer, on_timer, (uint64_t)h->cfg.retry_ms, 0);
        return;
    }
    h->st.walks_done++;
    h->st.last_ms = sl_wall_ms();
    if (h->cfg.log)
        sl_log_info(h->cfg.log,
                    "hand-off done keys=%llu bytes=%llu calls=%llu failed_keys=%llu ms=%.1f",
                    (unsigned long long)h->st.keys, (unsigned long long)h->st.bytes,
                    (unsigned long long)h->st.calls, (unsigned long long)h->st.failed_keys,
                    (double)(sl_mono_ns() - h->t0) / 1e6);
    if (h->cfg.done)
        h->cfg.done(h->cfg.ud, h->token);
    end_walk(h);
}

static void on_timer(uv_timer_t *t)
{
    step(t->data);
}

static void schedule(sl_handoff *h)
{
    if (!h->closing)
        uv_timer_start(&h->timer, on_timer, 0, 0);
}

int sl_handoff_new(const sl_handoff_config *cfg, sl_handoff **out)
{
    sl_handoff *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->cfg = *cfg;
    if (!h->cfg.batch_bytes)
        h->cfg.batch_bytes = DEFAULT_BATCH_BYTES;
    if (!h->cfg.step_work)
        h->cfg.step_work = DEFAULT_STEP_WORK;
    if (!h->cfg.retries)
        h->cfg.retries = DEFAULT_RETRIES;
    if (h->cfg.retries < 0)
        h->cfg.retries = 0;
    if (h->cfg.retry_ms <= 0)
        h->cfg.retry_ms = DEFAULT_RETRY_MS;
    uv_timer_init(cfg->loop, &h->timer);
    h->timer.data = h;
    h->refs = 1;
    *out = h;
    return 0;
}

void sl_handoff_close(sl_handoff *h)
{
    if (!h)
        return;
    end_walk(h);
    h->closing = true;
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, on_timer_closed);
}

void sl_handoff_begin(sl_handoff *h, const sl_picker *picker, long self, void *token)
{
    end_walk(h);
    size_t n = sl_picker_count(picker);
    h->outs = calloc(n ? n : 1, sizeof *h->outs);
    if (!h->outs) {
        if (h->cfg.release)
            h->cfg.release(h->cfg.ud, token);
        return;
    }
    for (size_t i = 0; i < n; i++)
        sl_buf_init(&h->outs[i].recs, 0);
    h->npeers = n;
    h->picker = picker;
    h->self = self;
    h->token = token;
    h->cur = (sl_store_cursor){0, 0};
    h->gen++;
    h->inflight = 0;
    h->walking = true;
    h->failed_logged = false;
    h->retries = 0;
    h->swept = false;
    h->t0 = sl_mono_ns();
    h->st.walks++;
    h->st.keys = h->st.bytes = h->st.calls = h->st.failed_calls = h->st.failed_keys = 0;
    schedule(h);
}

bool sl_handoff_busy(const sl_handoff *h)
{
    return h->walking;
}

void sl_handoff_stats_get(const sl_handoff *h, sl_handoff_stats *out)
{
    *out = h->st;
}

size_t sl_handoff_receive(sl_engine *e, const sl_alg_config *cfg, const uint8_t *records,
                          size_t len, int64_t now, size_t *bad)
{
    sl_store *s = sl_engine_store(e);
    size_t merged = 0;
    if (bad)
        *bad = 0;
    for (size_t off = 0; off < len;) {
        sl_keystate k;
        size_t used;
        if (sl_keystate_decode(records + off, len - off, cfg, &k, &used)) {
            if (bad)
                *bad = 1;
            break;
        }
        off += used;
        if (sl_store_import(s, sl_engine_hash_of_id(e, k.hash), now, &k.st, k.expire_at))
            merged++;
    }
    return merged;
}

int64_t sl_handoff_latest_expiry(int64_t now, int64_t duration)
{
    int64_t span = duration <= SL_GREGORIAN_YEARS ? 366LL * 86400 * 1000 : duration;
    if (span < 1000)
        span = 1000;
    if (span > (INT64_MAX - 1000) / 2)
        return INT64_MAX;
    int64_t d = 2 * span + 1000;
    return now > INT64_MAX - d ? INT64_MAX : now + d;
}

/* The span a state's expiry is judged by: its duration (GCRA: times its burst over its limit). */
static int64_t state_duration(const sl_state *st)
{
    switch (st->algorithm) {
    case SL_GCRA: {
        int64_t d = st->u.gcra.duration, L = st->u.gcra.limit, B = st->u.gcra.burst;
        if (L > 0 && B > L && d > 0)
            d = d > INT64_MAX / (B / L + 1) ? INT64_MAX / 4 : d * (B / L + 1);
        return d;
    }
    case SL_CONCURRENCY:
        return 12LL * 3600 * 1000; /* leases: their own durations, bounded by a day */
    default:
        return st->u.raw[1]; /* tb, lb, fw, sw: duration; the log: duration */
    }
}

int sl_handoff_check(const sl_alg_config *cfg, const uint8_t *records, size_t len, int64_t now,
                     size_t max_keys, size_t *bad_at)
{
    size_t i = 0;
    *bad_at = 0;
    for (size_t off = 0; off < len; i++) {
        if (max_keys && i >= max_keys)
            return -E2BIG;
        sl_keystate k;
        size_t used;
        *bad_at = i;
        if (sl_keystate_decode(records + off, len - off, cfg, &k, &used))
            return -EINVAL;
        off += used;
        bool late = k.expire_at > sl_handoff_latest_expiry(now, state_duration(&k.st));
        sl_alg_release(&k.st);
        if (late)
            return -ERANGE;
    }
    return 0;
}

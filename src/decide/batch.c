/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Batches and their arena (see batch.h). The arena is a list of chunks bump-allocated from the
 * front; a request bigger than the usual chunk gets a chunk of its own. Its total is capped, so a
 * hostile message cannot make one call hold more than arena_cap bytes, whatever it decodes to.
 * A reset keeps one chunk, sized for what the last call used (at most KEEP_MAX).
 */
#include "decide/batch.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

struct sl_batch_chunk {
    sl_batch_chunk *next;
    size_t size; /* bytes in data */
    size_t used;
    alignas(16) unsigned char data[];
};

#define CHUNK_SIZE ((size_t)64 << 10)
#define KEEP_MAX ((size_t)1 << 20)
#define ALIGN 16

static void *pb_arena_alloc(void *data, size_t size)
{
    return sl_batch_alloc(data, size);
}

static void pb_arena_free(void *data, void *p)
{
    (void)data;
    (void)p; /* the arena is dropped as a whole */
}

void sl_batch_init(sl_batch *b, size_t arena_cap)
{
    memset(b, 0, sizeof *b);
    b->arena_cap = arena_cap ? arena_cap : SL_BATCH_DEFAULT_ARENA_CAP;
    b->pb_alloc.alloc = pb_arena_alloc;
    b->pb_alloc.free = pb_arena_free;
    b->pb_alloc.allocator_data = b;
}

static void clear_items(sl_batch *b)
{
    b->n = 0;
    b->reqs = NULL;
    b->resps = NULL;
    b->req_meta = b->resp_meta = NULL;
    b->answered = NULL;
    b->n_answered = 0;
    b->msg = NULL;
    b->oom = false;
}

void sl_batch_free(sl_batch *b)
{
    sl_batch_chunk *c = b->chunks;
    while (c) {
        sl_batch_chunk *next = c->next;
        free(c);
        c = next;
    }
    b->chunks = NULL;
    b->arena_bytes = 0;
    clear_items(b);
}

void sl_batch_reset(sl_batch *b)
{
    sl_batch_chunk *keep = NULL;
    size_t used = 0;
    for (sl_batch_chunk *c = b->chunks, *next; c; c = next) {
        next = c->next;
        used += c->used;
        if (c->size <= KEEP_MAX && (!keep || c->size > keep->size)) {
            if (keep)
                free(keep);
            keep = c;
        } else {
            free(c);
        }
    }
    /* If the call needed more than the kept chunk holds, keep one chunk that holds it all (up to
     * KEEP_MAX) instead: a connection that repeats a 1000-item call then allocates nothing per
     * call, where it used to malloc and free several chunks (and fault their pages in again). */
    size_t want = (used + 4095) & ~(size_t)4095;
    if (want > KEEP_MAX)
        want = KEEP_MAX;
    if (want > (keep ? keep->size : CHUNK_SIZE) && want <= b->arena_cap) {
        sl_batch_chunk *nc = malloc(sizeof *nc + want);
        if (nc) {
            free(keep);
            nc->size = want;
            keep = nc;
        }
    }
    b->chunks = keep;
    b->arena_bytes = 0;
    if (keep) {
        keep->next = NULL;
        keep->used = 0;
        b->arena_bytes = keep->size;
    }
    clear_items(b);
}

void *sl_batch_alloc(sl_batch *b, size_t size)
{
    if (size == 0)
        size = 1;
    if (size > SIZE_MAX - ALIGN) {
        b->oom = true;
        return NULL;
    }
    size = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    sl_batch_chunk *c = b->chunks;
    if (c && c->size - c->used >= size) {
        void *p = c->data + c->used;
        c->used += size;
        return p;
    }
    size_t csize = size > CHUNK_SIZE / 4 ? size : CHUNK_SIZE;
    if (csize > b->arena_cap || b->arena_bytes > b->arena_cap - csize) {
        b->oom = true;
        return NULL;
    }
    sl_batch_chunk *nc = malloc(sizeof *nc + csize);
    if (!nc) {
        b->oom = true;
        return NULL;
    }
    nc->size = csize;
    nc->used = size;
    b->arena_bytes += csize;
    /* A big one-off chunk goes behind the current one, so the current chunk's free space is still
     * used by the small allocations that follow. */
    if (c && csize != CHUNK_SIZE && c->size - c->used >= ALIGN * 4) {
        nc->next = c->next;
        c->next = nc;
    } else {
        nc->next = c;
        b->chunks = nc;
    }
    return nc->data;
}

char *sl_batch_strndup(sl_batch *b, const char *s, size_t n)
{
    if (n == SIZE_MAX)
        return NULL;
    char *p = sl_batch_alloc(b, n + 1);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

ProtobufCAllocator *sl_batch_pb_allocator(sl_batch *b)
{
    return &b->pb_alloc;
}

int sl_batch_alloc_items(sl_batch *b, size_t n)
{
    size_t one = sizeof(sl_request) + sizeof(sl_response) + 2 * sizeof(sl_meta) + 1;
    if (n > SIZE_MAX / one)
        return -ENOMEM;
    b->n = 0;
    b->n_answered = 0;
    if (n == 0) {
        b->reqs = NULL;
        b->resps = NULL;
        b->req_meta = b->resp_meta = NULL;
        b->answered = NULL;
        return 0;
    }
    sl_request *reqs = sl_batch_alloc(b, n * sizeof *reqs);
    sl_response *resps = sl_batch_alloc(b, n * sizeof *resps);
    sl_meta *rqm = sl_batch_alloc(b, n * sizeof *rqm);
    sl_meta *rsm = sl_batch_alloc(b, n * sizeof *rsm);
    uint8_t *ans = sl_batch_alloc(b, n);
    if (!reqs || !resps || !rqm || !rsm || !ans)
        return -ENOMEM;
    memset(reqs, 0, n * sizeof *reqs);
    memset(resps, 0, n * sizeof *resps);
    memset(rqm, 0, n * sizeof *rqm);
    memset(rsm, 0, n * sizeof *rsm);
    memset(ans, 0, n);
    b->reqs = reqs;
    b->resps = resps;
    b->req_meta = rqm;
    b->resp_meta = rsm;
    b->answered = ans;
    b->n = n;
    return 0;
}

/* Room for one more entry. The old array stays in the arena until reset: maps are small. */
static int meta_grow(sl_batch *b, sl_meta *m)
{
    if (m->n < m->cap)
        return 0;
    uint32_t cap = m->cap ? m->cap * 2 : 4;
    if (cap < m->cap)
        return -ENOMEM;
    sl_kv *kv = sl_batch_alloc(b, (size_t)cap * sizeof *kv);
    if (!kv)
        return -ENOMEM;
    if (m->n)
        memcpy(kv, m->kv, (size_t)m->n * sizeof *kv);
    m->kv = kv;
    m->cap = cap;
    return 0;
}

int sl_batch_meta_add_ref(sl_batch *b, sl_meta *m, const char *key, const char *val)
{
    int rc = meta_grow(b, m);
    if (rc)
        return rc;
    m->kv[m->n].key = key;
    m->kv[m->n].val = val;
    m->n++;
    return 0;
}

int sl_batch_meta_set(sl_batch *b, sl_meta *m, const char *key, const char *val)
{
    char *v = sl_batch_strndup(b, val, strlen(val));
    if (!v)
        return -ENOMEM;
    for (uint32_t i = m->n; i-- > 0;) {
        if (strcmp(m->kv[i].key, key) == 0) {
            m->kv[i].val = v;
            return 0;
        }
    }
    char *k = sl_batch_strndup(b, key, strlen(key));
    if (!k)
        return -ENOMEM;
    return sl_batch_meta_add_ref(b, m, k, v);
}

const char *sl_batch_meta_get(const sl_meta *m, const char *key)
{
    for (uint32_t i = m->n; i-- > 0;)
        if (strcmp(m->kv[i].key, key) == 0)
            return m->kv[i].val;
    return NULL;
}

void sl_batch_answer(sl_batch *b, size_t i, const char *error)
{
    if (i >= b->n)
        return;
    if (!b->answered[i]) {
        b->answered[i] = 1;
        b->n_answered++;
    }
    memset(&b->resps[i], 0, sizeof b->resps[i]);
    b->resps[i].error = error;
}

int sl_batch_pb_unpack(sl_batch *b, const ProtobufCMessageDescriptor *desc, const uint8_t *msg,
                       size_t len, size_t max_msg, ProtobufCMessage **out, sl_grpc_status *st)
{
    *out = NULL;
    if (len > max_msg)
        return sl_grpc_status_too_large(st, -EMSGSIZE, SL_BATCH_PB_TOO_LARGE_FMT, len, max_msg);
    *out = protobuf_c_message_unpack(desc, sl_batch_pb_allocator(b), len, msg);
    if (*out)
        return 0;
    if (b->oom)
        return sl_grpc_status_too_large(st, -ENOMEM,
                                        "message too large to decode within the memory limit");
    sl_grpc_status_set(st, SL_GRPC_INTERNAL, SL_BATCH_PB_UNMARSHAL_ERR);
    return -EINVAL;
}

int sl_batch_pb_pack(const ProtobufCMessage *m, sl_buf *out)
{
    size_t sz = protobuf_c_message_get_packed_size(m);
    int rc = sl_buf_reserve(out, sz);
    if (rc)
        return rc;
    out->len += protobuf_c_message_pack(m, out->data + out->len);
    return 0;
}

int sl_batch_giveback(sl_batch *gb, const sl_batch *b, const size_t *pick, size_t n)
{
    sl_batch_reset(gb);
    if (sl_batch_alloc_items(gb, n))
        return -ENOMEM;
    for (size_t k = 0; k < n; k++) {
        const sl_request *q = &b->reqs[pick[k]];
        sl_request *g = &gb->reqs[k];
        *g = *q;
        g->hits = -q->hits;
        g->behavior &= ~SL_SHADOW;
        if (!(g->name = sl_batch_strndup(gb, q->name, q->name_len)) ||
            !(g->unique_key = sl_batch_strndup(gb, q->unique_key, q->unique_key_len)))
            return -ENOMEM;
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store's scripts (see rscript.h): the table of embedded Lua sources, the EVALSHA / EVAL
 * call for many requests (one space-separated text argument per item) and the reading of a
 * script's answer (binary records, one per item). The sources are compiled in from
 * src/redis/lua/NAME.lua, each after src/redis/lua/common/prelude.lua (what they share), by
 * CMakeLists.txt: file(READ ... HEX) writes each into a generated build/gen/store_lua.c as
 * `const sl_rscript sl_lua_<NAME>` with the SHA1 of the joined text, the name Redis knows it by,
 * so the scripts stay readable Lua files and the binary needs nothing at run time.
 */
#include "redis/rscript.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <xxhash.h>

#include "sluice/clock.h"

#include "base/grow.h"
#include "base/hex.h"

#include "core/concurrency.h"
#include "core/gregorian.h"
#include "core/satmath.h"

/* generated */
extern const sl_rscript sl_lua_tokenbucket;
extern const sl_rscript sl_lua_leakybucket;
extern const sl_rscript sl_lua_fixedwindow;
extern const sl_rscript sl_lua_slidinglog;
extern const sl_rscript sl_lua_gcra;
extern const sl_rscript sl_lua_slidingwindow;
extern const sl_rscript sl_lua_concurrency;

const char sl_rscript_err_unsupported[] =
    "this algorithm is not available with --store redis (docs/store.md)";
const char sl_rscript_err_range[] =
    "limit, duration or burst too large for --store redis (docs/store.md)";

const sl_rscript *sl_rscript_of(int32_t algorithm)
{
    switch (algorithm) {
    case SL_TOKEN_BUCKET:
        return &sl_lua_tokenbucket;
    case SL_LEAKY_BUCKET:
        return &sl_lua_leakybucket;
    case SL_FIXED_WINDOW:
        return &sl_lua_fixedwindow;
    case SL_SLIDING_LOG:
        return &sl_lua_slidinglog;
    case SL_GCRA:
        return &sl_lua_gcra;
    case SL_SLIDING_WINDOW:
        return &sl_lua_slidingwindow;
    case SL_CONCURRENCY:
        return &sl_lua_concurrency;
    default:
        return NULL;
    }
}

static void num(sl_rscript_args *a, int i, int64_t v)
{
    if (!a) /* checking only */
        return;
    int n = snprintf(a->num[i], sizeof a->num[i], "%" PRId64, v);
    a->len[i] = (size_t)n;
}

/* A lease id in hex (sl_conc_format_id), or "0" for none. */
static void hex_id(sl_rscript_args *a, int i, uint64_t id)
{
    if (!a)
        return;
    if (id == 0) {
        a->num[i][0] = '0';
        a->len[i] = 1;
        return;
    }
    a->len[i] = (size_t)sl_conc_format_id(id, a->num[i]);
}

/* The engine's own lease ids are a sequence per node; these are random (rscript.h). */
uint64_t sl_rscript_new_lease(const sl_request *req)
{
    if (req->algorithm != SL_CONCURRENCY || req->hits <= 0)
        return 0;
    uint64_t id = 0;
    while (id == 0)
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = (uint64_t)sl_mono_ns() * UINT64_C(0x9e3779b97f4a7c15); /* no entropy yet */
    return id;
}

/* The arguments after the common ones (hits limit duration t now margin reset drain): what each
 * script needs computed in C, where the engine's own functions give the same values. */
static const char *extra_args(sl_rscript_args *cmd, int i, const sl_request *req, int64_t t,
                              int64_t now, const sl_engine_config *cfg, uint64_t lease)
{
    const bool greg = (req->behavior & SL_DURATION_IS_GREGORIAN) != 0;
    const char *err = NULL;
    switch (req->algorithm) {
    case SL_TOKEN_BUCKET: { /* greg, the interval ends holding now and t, max_count */
        int64_t gnow = 0, gt = 0;
        if (greg && !(err = sl_greg_expiration(now, req->duration, &gnow)))
            err = sl_greg_expiration(t, req->duration, &gt);
        num(cmd, i++, greg);
        num(cmd, i++, gnow);
        num(cmd, i++, gt);
        num(cmd, i++, cfg ? cfg->max_count : 0);
        break;
    }
    case SL_LEAKY_BUCKET: { /* burst, the ms limit hits take, how long a hit keeps the item */
        int64_t d = req->duration, item = req->duration, expire = 0;
        if (greg && !(err = sl_greg_duration(now, req->duration, &d)) &&
            !(err = sl_greg_expiration(now, req->duration, &expire)))
            item = sl_sat_sub(expire, now);
        num(cmd, i++, req->burst == 0 ? req->limit : req->burst);
        num(cmd, i++, d);
        num(cmd, i++, item);
        break;
    }
    case SL_FIXED_WINDOW: { /* greg, the window holding t */
        int64_t start, end;
        if (greg) {
            err = sl_greg_interval(t, req->duration, &start, &end);
        } else {
            start = sl_sat_mul(sl_floor_div(t, req->duration), req->duration);
            end = sl_sat_add(start, req->duration);
        }
        num(cmd, i++, greg);
        num(cmd, i++, err ? 0 : start);
        num(cmd, i++, err ? 0 : end);
        break;
    }
    case SL_SLIDING_LOG: /* the common arguments only */
        break;
    case SL_SLIDING_WINDOW: /* sub-windows (0 or 1: the classic two-window estimate) */
        num(cmd, i++, req->sub_windows > 1 ? req->sub_windows : 1);
        break;
    case SL_CONCURRENCY: /* the request's lease, and the id an acquire would take */
        hex_id(cmd, i++, req->lease_id);
        hex_id(cmd, i++, req->hits > 0 ? lease : 0);
        break;
    case SL_GCRA: /* burst (extra hits at once, not a bucket size), how long the caller waits */
        num(cmd, i++, req->burst);
        num(cmd, i++, req->max_delay_ms > 0 ? req->max_delay_ms : 0);
        break;
    default:
        return sl_rscript_err_unsupported;
    }
    if (cmd)
        cmd->n = i;
    return err;
}

const char *sl_rscript_args_of(sl_rscript_args *a, const sl_request *req, int64_t now,
                               const sl_engine_config *cfg, int64_t margin_ms, uint64_t lease)
{
    if (!sl_rscript_of(req->algorithm))
        return sl_rscript_err_unsupported;
    const int64_t t = req->created_at != 0 ? req->created_at : now;
    if (a)
        a->t = t;
    int i = 0;
    num(a, i++, req->hits);
    num(a, i++, req->limit);
    num(a, i++, req->duration);
    num(a, i++, t);
    num(a, i++, now);
    num(a, i++, margin_ms);
    num(a, i++, (req->behavior & SL_RESET_REMAINING) != 0);
    num(a, i++, req->algorithm == SL_FIXED_WINDOW && (req->behavior & SL_COUNT_OVER_LIMIT) ? 2
                : (req->behavior & SL_DRAIN_OVER_LIMIT) != 0);
    return extra_args(a, i, req, t, now, cfg, lease);
}

size_t sl_rscript_key(char *buf, const sl_request *req)
{
    /* name_len <= SL_MAX_NAME_LEN (4 digits) and unique_key_len <= SL_MAX_KEY_LEN: validated */
    int k = snprintf(buf, 16, "sl:{%zu:", req->name_len);
    memcpy(buf + k, req->name, req->name_len);
    k += (int)req->name_len;
    buf[k++] = ':';
    memcpy(buf + k, req->unique_key, req->unique_key_len);
    k += (int)req->unique_key_len;
    buf[k++] = '}';
    return (size_t)k;
}

/* A key of a call, for finding one that is there twice: sorted by hash, then length and bytes
 * (so that even keys crafted to share a hash cannot keep two equal ones apart), twins end up
 * side by side. */
typedef struct keyref {
    uint64_t h;
    const char *p;
    size_t len;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
    const keyref *x = a, *y = b;
    if (x->h != y->h)
        return x->h < y->h ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return memcmp(x->p, y->p, x->len);
}

/* Whether the n keys argv[0..n-1] are all different (n log n whatever the keys). */
static int keys_distinct(sl_rscript_cmd *c, const char *const *argv, const size_t *len, size_t n,
                         bool *distinct)
{
    *distinct = true;
    if (n < 2)
        return 0;
    if (sl_grow_reserve(&c->scratch, &c->scratch_cap, 0, n, sizeof(keyref), 64, 0))
        return -ENOMEM;
    keyref *k = c->scratch;
    for (size_t i = 0; i < n; i++)
        k[i] = (keyref){XXH3_64bits(argv[i], len[i]), argv[i], len[i]};
    qsort(k, n, sizeof *k, keyref_cmp);
    for (size_t i = 1; i < n && *distinct; i++)
        *distinct = keyref_cmp(&k[i - 1], &k[i]) != 0;
    return 0;
}

int sl_rscript_cmd_build(sl_rscript_cmd *c, int32_t alg, bool eval, const sl_rscript_item *items,
                         size_t n, const sl_engine_config *cfg, int64_t margin_ms)
{
    const sl_rscript *s = sl_rscript_of(alg);
    if (!s || n == 0)
        return -EINVAL;
    /* sizes: every key and SL_RSCRIPT_ARGS numbers of 24 bytes (a space included) per item, and
     * the key count */
    size_t keys = 0;
    for (size_t i = 0; i < n; i++)
        keys += 16 + items[i].req->name_len + items[i].req->unique_key_len;
    size_t bytes = 24 + keys + n * SL_RSCRIPT_ARGS * 24;
    size_t args = 3 + 2 * n + 1;
    size_t lcap = c->args_cap; /* both arrays have args_cap entries: argv is grown last */
    if (sl_grow(&c->bytes, &c->bytes_cap, 0, bytes, 64, 0) ||
        sl_grow(&c->argvlen, &lcap, 0, args, 64, 0) ||
        sl_grow(&c->argv, &c->args_cap, 0, args, 64, 0))
        return -ENOMEM;
    c->argv[0] = eval ? "EVAL" : "EVALSHA";
    c->argvlen[0] = eval ? 4 : 7;
    c->argv[1] = eval ? s->src : s->sha;
    c->argvlen[1] = eval ? s->len : 40;
    char *b = c->bytes;
    c->argv[2] = b;
    c->argvlen[2] = (size_t)snprintf(b, 24, "%zu", n);
    b += c->argvlen[2];
    int argc = 3;
    for (size_t i = 0; i < n; i++) { /* KEYS */
        c->argv[argc] = b;
        c->argvlen[argc] = sl_rscript_key(b, items[i].req);
        b += c->argvlen[argc++];
    }
    const char *prev = NULL; /* the last item written out in full, and its length */
    size_t prevlen = 0;
    for (size_t i = 0; i < n; i++) { /* ARGV: one string per item, "" for the one before it */
        sl_rscript_args a;
        sl_rscript_args_of(&a, items[i].req, items[i].now, cfg, margin_ms,
                           items[i].lease); /* accepted before */
        c->argv[argc] = b;
        for (int j = 0; j < a.n; j++) {
            if (j)
                *b++ = ' ';
            memcpy(b, a.num[j], a.len[j]);
            b += a.len[j];
        }
        size_t len = (size_t)(b - c->argv[argc]);
        if (prev && len == prevlen && memcmp(prev, c->argv[argc], len) == 0) {
            b = (char *)c->argv[argc]; /* the same item: its bytes are not kept */
            len = 0;
        } else {
            prev = c->argv[argc];
            prevlen = len;
        }
        c->argvlen[argc] = len;
        argc++;
    }
    bool distinct;
    if (keys_distinct(c, c->argv + 3, c->argvlen + 3, n, &distinct))
        return -ENOMEM;
    if (distinct) {
        c->argv[argc] = "d";
        c->argvlen[argc++] = 1;
    }
    c->argc = argc;
    return 0;
}

void sl_rscript_cmd_free(sl_rscript_cmd *c)
{
    free(c->argv);
    free(c->argvlen);
    free(c->bytes);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

/* A record: six little-endian doubles, or CONCURRENCY's five and the lease id in hex. */
#define RECORD_NUMS 6
#define RECORD_SIZE (RECORD_NUMS * 8)
#define RECORD_CONC_SIZE (5 * 8 + SL_CONC_ID_HEX)

size_t sl_rscript_answer_size(int32_t alg)
{
    if (!sl_rscript_of(alg))
        return 0;
    return alg == SL_CONCURRENCY ? RECORD_CONC_SIZE : RECORD_SIZE;
}

/* The little-endian double at p, as an int64 the way the scripts' numbers were formatted before
 * (sl_f2i: saturating, NaN 0, truncated toward zero). */
static int64_t record_num(const unsigned char *p)
{
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--)
        u = u << 8 | p[i];
    double d;
    memcpy(&d, &u, sizeof d);
    return sl_f2i(d);
}

/* One item's numbers (status limit remaining reset_time retry_after delay_ms) into *resp. */
static int answer(const int64_t v[RECORD_NUMS], int64_t t, const sl_engine_config *cfg,
                  sl_response *resp)
{
    memset(resp, 0, sizeof *resp);
    if (v[0] == -1 || v[0] == -2) {
        resp->error = v[0] == -1 ? sl_rscript_err_range : sl_conc_err_not_found;
        return 0;
    }
    if (v[0] != SL_UNDER_LIMIT && v[0] != SL_OVER_LIMIT)
        return -EPROTO;
    resp->status = (int32_t)v[0];
    resp->limit = v[1];
    resp->remaining = v[2];
    resp->reset_time = v[3];
    resp->retry_after = v[4];
    resp->delay_ms = v[5];
    /* as sl_alg_decide: with the engine's bounds on, no reset_time before 1970 */
    if (resp->reset_time < 0 && cfg && cfg->max_count > 0 && t >= 0)
        resp->reset_time = t;
    return 0;
}

int sl_rscript_answer_read(int32_t alg, const char *buf, size_t len, size_t k, int64_t t,
                           const sl_engine_config *cfg, sl_response *resp)
{
    const size_t size = sl_rscript_answer_size(alg);
    memset(resp, 0, sizeof *resp);
    if (size == 0 || !buf || k >= len / size)
        return -EPROTO;
    const unsigned char *p = (const unsigned char *)buf + k * size;
    int64_t v[RECORD_NUMS];
    for (int i = 0; i < 5; i++)
        v[i] = record_num(p + 8 * i);
    uint64_t lease = 0;
    if (alg == SL_CONCURRENCY) {
        v[5] = 0; /* no delay: the lease id is where delay_ms is for the others */
        if (sl_hex_parse((const char *)p + 40, SL_CONC_ID_HEX, &lease))
            return -EPROTO;
    } else {
        v[5] = record_num(p + 40);
    }
    int rc = answer(v, t, cfg, resp);
    if (rc == 0 && !resp->error)
        resp->lease_id = lease;
    return rc;
}

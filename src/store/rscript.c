/*
 * The Redis store's scripts (see rscript.h): the table of embedded Lua sources, the EVALSHA / EVAL
 * command of one request and the reading of a script's answer. The sources are compiled in from
 * src/store/lua/NAME.lua by CMakeLists.txt: file(READ ... HEX) writes each into a generated
 * build/gen/store_lua.c as `const sl_rscript sl_lua_<file>` with the SHA1 (file(SHA1)) that Redis
 * names it by, so the scripts stay readable Lua files and the binary needs nothing at run time.
 */
#include "store/rscript.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/gregorian.h"
#include "core/satmath.h"

/* generated */
extern const sl_rscript sl_lua_tokenbucket;
extern const sl_rscript sl_lua_leakybucket;
extern const sl_rscript sl_lua_fixedwindow;

const char sl_rscript_err_unsupported[] =
    "this algorithm is not available with --store redis (docs/store.md)";

const sl_rscript *sl_rscript_of(int32_t algorithm)
{
    switch (algorithm) {
    case SL_TOKEN_BUCKET:
        return &sl_lua_tokenbucket;
    case SL_LEAKY_BUCKET:
        return &sl_lua_leakybucket;
    case SL_FIXED_WINDOW:
        return &sl_lua_fixedwindow;
    default:
        return NULL;
    }
}

static void arg(sl_rscript_cmd *c, const char *s, size_t n)
{
    c->argv[c->argc] = s;
    c->argvlen[c->argc] = n;
    c->argc++;
}

static void num(sl_rscript_cmd *c, int i, int64_t v)
{
    int n = snprintf(c->num[i], sizeof c->num[i], "%" PRId64, v);
    arg(c, c->num[i], (size_t)n);
}

/* The arguments after the common ones (hits limit duration t now margin reset drain): what each
 * script needs computed in C, where the engine's own functions give the same values. */
static const char *extra_args(sl_rscript_cmd *cmd, int i, const sl_request *req, int64_t t,
                              int64_t now, const sl_engine_config *cfg)
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
    default:
        return sl_rscript_err_unsupported;
    }
    cmd->argc = 4 + i;
    return err;
}

const char *sl_rscript_build(sl_rscript_cmd *cmd, const sl_request *req, int64_t now,
                             const sl_engine_config *cfg, bool eval, int64_t margin_ms)
{
    const sl_rscript *s = sl_rscript_of(req->algorithm);
    if (!s)
        return sl_rscript_err_unsupported;
    const int64_t t = req->created_at != 0 ? req->created_at : now;
    cmd->t = t;
    cmd->argc = 0;
    if (eval)
        arg(cmd, "EVAL", 4), arg(cmd, s->src, s->len);
    else
        arg(cmd, "EVALSHA", 7), arg(cmd, s->sha, 40);
    arg(cmd, "1", 1);
    /* name_len <= SL_MAX_NAME_LEN (4 digits) and unique_key_len <= SL_MAX_KEY_LEN: validated */
    int k = snprintf(cmd->key, sizeof cmd->key, "sl:%zu:", req->name_len);
    memcpy(cmd->key + k, req->name, req->name_len);
    k += (int)req->name_len;
    cmd->key[k++] = ':';
    memcpy(cmd->key + k, req->unique_key, req->unique_key_len);
    k += (int)req->unique_key_len;
    arg(cmd, cmd->key, (size_t)k);

    int i = 0;
    num(cmd, i++, req->hits);
    num(cmd, i++, req->limit);
    num(cmd, i++, req->duration);
    num(cmd, i++, t);
    num(cmd, i++, now);
    num(cmd, i++, margin_ms);
    num(cmd, i++, (req->behavior & SL_RESET_REMAINING) != 0);
    num(cmd, i++, (req->behavior & SL_DRAIN_OVER_LIMIT) != 0);
    return extra_args(cmd, i, req, t, now, cfg);
}

int sl_rscript_answer(const long long *v, size_t n, int64_t t, const sl_engine_config *cfg,
                      sl_response *resp)
{
    memset(resp, 0, sizeof *resp);
    if (n != SL_RSCRIPT_ANSWER || (v[0] != SL_UNDER_LIMIT && v[0] != SL_OVER_LIMIT))
        return -EPROTO;
    resp->status = (int32_t)v[0];
    resp->limit = v[1];
    resp->remaining = v[2];
    resp->reset_time = v[3];
    resp->retry_after = v[4];
    /* as sl_alg_decide: with the engine's bounds on, no reset_time before 1970 */
    if (resp->reset_time < 0 && cfg && cfg->max_count > 0 && t >= 0)
        resp->reset_time = t;
    return 0;
}

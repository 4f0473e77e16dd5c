/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The algorithms' front door: request validation, the dispatch from a request to its algorithm's
 * module, names, and the state life cycle (expiry rule, release, side-buffer accounting).
 *
 * Validation is in two parts. The name checks (empty, too long) need the strings and are done once
 * per request by sl_request_validate(). The numeric checks (sl_alg_check) are also re-run by
 * sl_alg_decide(), so that no path into an algorithm can bring a negative limit or an unsupported
 * Gregorian interval to arithmetic that assumes otherwise. Every error is a static string and leaves
 * the state untouched.
 */
#include "core/alg.h"

#include <stddef.h>

#include "core/concurrency.h"
#include "core/gcra.h"
#include "core/gregorian.h"
#include "core/leakybucket.h"
#include "core/slidelog.h"
#include "core/tokenbucket.h"
#include "core/window.h"

const char sl_alg_err_nomem[] = "out of memory for the key's state";

static const char *const names[SL_ALGORITHM_COUNT] = {
    [SL_TOKEN_BUCKET] = "TOKEN_BUCKET",   [SL_LEAKY_BUCKET] = "LEAKY_BUCKET",
    [SL_GCRA] = "GCRA",                   [SL_FIXED_WINDOW] = "FIXED_WINDOW",
    [SL_SLIDING_WINDOW] = "SLIDING_WINDOW", [SL_SLIDING_LOG] = "SLIDING_LOG",
    [SL_CONCURRENCY] = "CONCURRENCY",
};

const char *sl_algorithm_name(int32_t algorithm)
{
    if (algorithm < 0 || algorithm >= SL_ALGORITHM_COUNT)
        return NULL;
    return names[algorithm];
}

static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

int sl_algorithm_from_name(const char *s, size_t n)
{
    if (!s)
        return -1;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        const char *name = names[a];
        size_t i = 0;
        while (i < n && name[i] && upper(s[i]) == name[i])
            i++;
        if (i == n && name[i] == '\0')
            return a;
    }
    return -1;
}

static int64_t max_log_limit(const sl_alg_config *cfg)
{
    return cfg && cfg->max_log_limit > 0 ? cfg->max_log_limit : SL_ALG_DEFAULT_MAX_LOG_LIMIT;
}

static int32_t max_sub_windows(const sl_alg_config *cfg)
{
    int32_t m = cfg && cfg->max_sub_windows > 0 ? cfg->max_sub_windows
                                                : SL_ALG_DEFAULT_MAX_SUB_WINDOWS;
    return m > SL_ALG_MAX_SUB_WINDOWS ? SL_ALG_MAX_SUB_WINDOWS : m;
}

const char *sl_alg_check(const sl_request *req, const sl_alg_config *cfg)
{
    const int32_t a = req->algorithm;
    if (a < 0 || a >= SL_ALGORITHM_COUNT)
        return "field 'algorithm' is not a known algorithm";
    if (req->limit < 0)
        return "field 'limit' cannot be negative";
    if (req->burst < 0)
        return "field 'burst' cannot be negative";

    const bool bucket = a == SL_TOKEN_BUCKET || a == SL_LEAKY_BUCKET;
    if (req->behavior & SL_DURATION_IS_GREGORIAN) {
        if (!bucket && a != SL_FIXED_WINDOW)
            return "behavior DURATION_IS_GREGORIAN is only supported by TOKEN_BUCKET, "
                   "LEAKY_BUCKET and FIXED_WINDOW";
        const char *err = sl_greg_check(req->duration);
        if (err)
            return err;
    } else if (req->duration < 0) {
        return "field 'duration' cannot be negative";
    } else if (!bucket && req->duration == 0) {
        if (a == SL_CONCURRENCY)
            return "field 'duration' must be positive for CONCURRENCY (it is a lease's life)";
        /* Gubernator's buckets accept 0 (an item that expires at once); a window of 0 ms or a GCRA
         * with an infinite rate has no meaning. */
        return "field 'duration' must be positive for GCRA, FIXED_WINDOW, SLIDING_WINDOW and "
               "SLIDING_LOG";
    }

    if (a == SL_CONCURRENCY)
        return sl_conc_check(req, req->lease_id, cfg ? cfg->max_concurrency_limit : 0);
    if (a == SL_SLIDING_LOG && req->limit > max_log_limit(cfg))
        return "field 'limit' exceeds max-log-limit for SLIDING_LOG (memory is 8 bytes per unit "
               "of limit per key)";
    if (a == SL_SLIDING_WINDOW) {
        if (req->sub_windows < 0)
            return "field 'sub_windows' cannot be negative";
        if (req->sub_windows > max_sub_windows(cfg))
            return "field 'sub_windows' exceeds max-sub-windows";
        if (req->sub_windows > 1 && req->duration % req->sub_windows != 0)
            return "field 'duration' must be a multiple of 'sub_windows'";
    }
    return NULL;
}

/* Values that are valid integers but impossible as rate limits, whose answers would overflow
 * (remaining near INT64_MAX, reset_time saturated): bounded by the engine's configuration. A hits
 * of INT64_MIN (whose negation overflows) is out of any bound. */
static const char *check_bounds(const sl_request *req, const sl_engine_config *cfg)
{
    if (!cfg)
        return NULL;
    const int64_t m = cfg->max_count;
    if (m > 0) {
        if (req->hits < -m || req->hits > m)
            return "field 'hits' is out of range (more than max-count either way)";
        if (req->limit > m)
            return "field 'limit' exceeds max-count";
        if (req->burst > m)
            return "field 'burst' exceeds max-count";
    }
    if (cfg->max_duration_ms > 0 && !(req->behavior & SL_DURATION_IS_GREGORIAN) &&
        req->duration > cfg->max_duration_ms)
        return "field 'duration' exceeds max-duration";
    return NULL;
}

const char *sl_request_check_time(const sl_request *req, const sl_engine_config *cfg,
                                  int64_t now_ms)
{
    const int64_t skew = cfg ? cfg->max_clock_skew_ms : 0;
    if (skew <= 0 || req->created_at == 0)
        return NULL;
    /* |created_at - now| > skew, without overflow: compare against the saturated window */
    int64_t lo = now_ms < INT64_MIN + skew ? INT64_MIN : now_ms - skew;
    int64_t hi = now_ms > INT64_MAX - skew ? INT64_MAX : now_ms + skew;
    if (req->created_at < lo || req->created_at > hi)
        return "field 'created_at' is further from the server's clock than max-clock-skew";
    return NULL;
}

const char *sl_request_validate(const sl_request *req, const sl_engine_config *cfg)
{
    /* Gubernator checks unique_key first, then the name (which its messages call the namespace). */
    if (!req->unique_key || req->unique_key_len == 0)
        return "field 'unique_key' cannot be empty";
    if (!req->name || req->name_len == 0)
        return "field 'namespace' cannot be empty";
    if (req->name_len > SL_MAX_NAME_LEN)
        return "field 'name' is longer than 1024 bytes";
    if (req->unique_key_len > SL_MAX_KEY_LEN)
        return "field 'unique_key' is longer than 4096 bytes";
    const char *err = check_bounds(req, cfg);
    if (err)
        return err;
    sl_alg_config ac = {0};
    if (cfg) {
        ac.max_log_limit = cfg->max_log_limit;
        ac.max_sub_windows = cfg->max_sub_windows;
        ac.max_concurrency_limit = cfg->max_concurrency_limit;
    }
    return sl_alg_check(req, &ac);
}

bool sl_alg_expired(int64_t expire_at, int64_t now)
{
    return expire_at < now;
}

void sl_alg_release(sl_state *st)
{
    if (st->algorithm == SL_SLIDING_LOG)
        sl_slog_release(st);
    else if (st->algorithm == SL_SLIDING_WINDOW)
        sl_win_release(st);
    else if (st->algorithm == SL_CONCURRENCY)
        sl_conc_release(st);
    st->algorithm = SL_ALG_NONE;
    st->status = 0;
    st->aux16 = 0;
    st->aux32 = 0;
}

sl_alg_info sl_alg_info_of(const sl_state *st, int64_t expire_at, int64_t now)
{
    if (sl_alg_expired(expire_at, now))
        return SL_INFO_FREE;
    switch (st->algorithm) {
    case SL_TOKEN_BUCKET:
        return sl_tb_info(st);
    case SL_LEAKY_BUCKET:
        return sl_lb_info(st, now);
    case SL_GCRA:
        return sl_gcra_info(st, now);
    case SL_FIXED_WINDOW:
        return sl_win_fixed_info(st);
    case SL_SLIDING_WINDOW:
        return sl_win_sliding_info(st);
    case SL_SLIDING_LOG:
        return sl_slog_info(st, now);
    case SL_CONCURRENCY:
        return sl_conc_info(st, now);
    default:
        return SL_INFO_FREE; /* SL_ALG_NONE: nothing held */
    }
}

uint64_t sl_alg_side_bytes(const sl_state *st)
{
    if (st->algorithm == SL_SLIDING_LOG)
        return sl_slog_side_bytes(st);
    if (st->algorithm == SL_SLIDING_WINDOW)
        return sl_win_side_bytes(st);
    if (st->algorithm == SL_CONCURRENCY)
        return sl_conc_side_bytes(st);
    return 0;
}

void sl_alg_decide(sl_state *st, int64_t *expire_at, const sl_request *req, int64_t now,
                   const sl_alg_config *cfg, sl_response *resp)
{
    sl_response zero = {0};
    *resp = zero;
    if ((resp->error = sl_alg_check(req, cfg)))
        return;
    /* Decisions are made at the time the request was made (Gubernator's created_at, 0 = now), so
     * that a request forwarded between peers is decided as of its arrival. */
    const int64_t t = req->created_at != 0 ? req->created_at : now;

    switch (req->algorithm) {
    case SL_TOKEN_BUCKET:
        sl_tb_decide(st, expire_at, req, t, now, resp);
        if (__builtin_expect(cfg && cfg->max_count > 0 && st->algorithm == SL_TOKEN_BUCKET &&
                                 st->u.tb.remaining > cfg->max_count,
                             0)) {
            st->u.tb.remaining = cfg->max_count;
            if (resp->remaining > cfg->max_count)
                resp->remaining = cfg->max_count;
        }
        break;
    case SL_LEAKY_BUCKET:
        sl_lb_decide(st, expire_at, req, t, now, resp);
        break;
    case SL_GCRA:
        sl_gcra_decide(st, expire_at, req, t, resp);
        break;
    case SL_FIXED_WINDOW:
        sl_win_fixed_decide(st, expire_at, req, t, resp);
        break;
    case SL_SLIDING_WINDOW:
        sl_win_sliding_decide(st, expire_at, req, t, resp);
        break;
    case SL_SLIDING_LOG:
        sl_slog_decide(st, expire_at, req, t, resp);
        break;
    case SL_CONCURRENCY:
        sl_conc_decide(st, expire_at, req, req->lease_id, t, cfg ? cfg->lease_ids : NULL, resp,
                       &resp->lease_id);
        break;
    default:
        break; /* rejected by sl_alg_check */
    }
    /* With the engine's bounds on, never answer a reset_time before 1970: Gubernator's leaky-bucket
     * formula goes there after a large give-back (its "reset_time in the past" is kept otherwise).
     * The bucket is full: it resets at t. */
    if (__builtin_expect(resp->reset_time < 0, 0) && cfg && cfg->max_count > 0 && t >= 0)
        resp->reset_time = t;
}

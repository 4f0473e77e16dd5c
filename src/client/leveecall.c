/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's Levee calls (client/leveecall.h): POST /attempt and /release.
 *
 * Out: X-Resource, X-Prefix, X-Method, X-Req-Id, X-Priority (and X-Lease-Id, X-Concurrency), each
 * checked for control bytes and copied into the call. A renewal is an /attempt with X-Concurrency:
 * renew and the lease id; like a release it has no failure policy. In: 200 accepts (any 2xx for a
 * release or renewal);
 * 429, or 503 carrying a RateLimit field (sluice shedding load), rejects — a decision, not a
 * failure; anything else fails the call, and the failure policy answers. The RateLimit headers are
 * read in every draft's spelling (sl_attempt_reply_header).
 */
#include "client/leveecall.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATH_ATTEMPT "/attempt"
#define PATH_RELEASE "/release"
#define MAX_HEADER_VALUE 4096 /* longest X-* value we send (a resource is a key) */

static bool ieq(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    return an == bn && strncasecmp(a, b, an) == 0;
}

/* Header values must not smuggle CR/LF or other control bytes (HTTP/2 forbids them). */
static bool header_value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n > MAX_HEADER_VALUE)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return false;
    }
    return true;
}

/* ------------------------------------------------------------------ attempt / acquire / release */

void sl_attempt_reply_init(sl_attempt_reply *r)
{
    memset(r, 0, sizeof *r);
    r->outcome = SL_ATTEMPT_FAILED;
    r->retry_after_ms = -1;
    r->rl_limit = r->rl_remaining = r->rl_reset_s = r->rl_window_s = -1;
}

/* RateLimit / RateLimit-Policy parameters, in any of the drafts' spellings: "limit=10, remaining=3,
 * reset=5" (draft 6/7), "\"name\";r=3;t=5" and "\"name\";q=10;w=60" (draft 8+), "10;w=60" (draft 7
 * policy). The first value of each kind wins (several policies: the first is the one that binds). */
static void parse_rl_params(sl_attempt_reply *r, const char *v, size_t n, bool policy)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && v[j] != ',' && v[j] != ';')
            j++;
        const char *tok = v + i;
        size_t tl = j - i;
        while (tl && (*tok == ' ' || *tok == '\t')) {
            tok++;
            tl--;
        }
        const char *eq = memchr(tok, '=', tl);
        if (eq) {
            size_t kl = (size_t)(eq - tok);
            int64_t val = sl_call_header_int(eq + 1, tl - kl - 1);
            if (ieq(tok, kl, "limit") || ieq(tok, kl, "q")) {
                if (r->rl_limit < 0)
                    r->rl_limit = val;
            } else if (ieq(tok, kl, "remaining") || ieq(tok, kl, "r")) {
                if (r->rl_remaining < 0)
                    r->rl_remaining = val;
            } else if (ieq(tok, kl, "reset") || ieq(tok, kl, "t")) {
                if (r->rl_reset_s < 0)
                    r->rl_reset_s = val;
            } else if (ieq(tok, kl, "w")) {
                if (r->rl_window_s < 0)
                    r->rl_window_s = val;
            }
        } else if (policy && tl && tok[0] >= '0' && tok[0] <= '9' && r->rl_limit < 0) {
            r->rl_limit = sl_call_header_int(tok, tl);
        }
        i = j + 1;
    }
}

void sl_attempt_reply_header(sl_attempt_reply *r, const char *name, size_t nl, const char *value,
                             size_t vl)
{
    while (vl && (value[vl - 1] == ' ' || value[vl - 1] == '\t' || value[vl - 1] == '\r' ||
                  value[vl - 1] == '\n'))
        vl--;
    while (vl && (*value == ' ' || *value == '\t')) {
        value++;
        vl--;
    }
    if (ieq(name, nl, "retry-after")) {
        int64_t s = sl_call_header_int(value, vl);
        if (s >= 0 && s < INT64_MAX / 1000)
            r->retry_after_ms = s * 1000;
    } else if (ieq(name, nl, "ratelimit")) {
        sl_call_copy_trunc(r->ratelimit, sizeof r->ratelimit, value, vl);
        parse_rl_params(r, value, vl, false);
    } else if (ieq(name, nl, "ratelimit-policy")) {
        sl_call_copy_trunc(r->ratelimit_policy, sizeof r->ratelimit_policy, value, vl);
        parse_rl_params(r, value, vl, true);
    } else if (ieq(name, nl, "ratelimit-limit") || ieq(name, nl, "x-ratelimit-limit")) {
        if (r->rl_limit < 0)
            r->rl_limit = sl_call_header_int(value, vl);
    } else if (ieq(name, nl, "ratelimit-remaining") || ieq(name, nl, "x-ratelimit-remaining")) {
        if (r->rl_remaining < 0)
            r->rl_remaining = sl_call_header_int(value, vl);
    } else if (ieq(name, nl, "ratelimit-reset") || ieq(name, nl, "x-ratelimit-reset")) {
        if (r->rl_reset_s < 0)
            r->rl_reset_s = sl_call_header_int(value, vl);
    } else if (ieq(name, nl, "x-lease-id")) {
        sl_call_copy_trunc(r->lease_id, sizeof r->lease_id, value, vl);
    }
}

static int build_levee(sl_call *k, const sl_attempt *a, const char *lease_id)
{
    const char *vals[5] = {0};
    static const char *const names[5] = {"x-resource", "x-prefix", "x-method", "x-req-id",
                                         "x-priority"};
    if (a) {
        vals[0] = a->resource;
        vals[1] = a->prefix;
        vals[2] = a->method;
        vals[3] = a->req_id;
        vals[4] = a->priority;
    }
    bool lease_call = k->kind == K_RELEASE || k->kind == K_RENEW;
    if (!lease_call && (!vals[0] || !vals[0][0]))
        return -EINVAL;
    size_t total = 0;
    for (int i = 0; i < 5; i++) {
        if (vals[i] && !header_value_ok(vals[i]))
            return -EINVAL;
        total += vals[i] ? strlen(vals[i]) + 1 : 0;
    }
    if (lease_id) {
        if (!header_value_ok(lease_id))
            return -EINVAL;
        total += strlen(lease_id) + 1;
    }
    k->strs = malloc(total ? total : 1);
    if (!k->strs)
        return -ENOMEM;
    char *p = k->strs;
    for (int i = 0; i < 5; i++) {
        if (!vals[i] || !vals[i][0])
            continue;
        size_t n = strlen(vals[i]);
        memcpy(p, vals[i], n + 1);
        sl_call_add_hdr(k, names[i], p, n);
        p += n + 1;
    }
    if (lease_id) {
        size_t n = strlen(lease_id);
        memcpy(p, lease_id, n + 1);
        sl_call_add_hdr(k, "x-lease-id", p, n);
    }
    if (k->kind == K_ACQUIRE)
        sl_call_add_hdr(k, "x-concurrency", "acquire", 7);
    else if (k->kind == K_RENEW)
        sl_call_add_hdr(k, "x-concurrency", "renew", 5);
    sl_call_add_hdr(k, "user-agent", "sluice-client", 13);
    k->path = k->kind == K_RELEASE ? PATH_RELEASE : PATH_ATTEMPT;
    return 0;
}

int sl_leveecall_decode(sl_call *k, const sl_h2c_resp *resp, int err)
{
    sl_client *c = k->c;
    sl_attempt_reply *out = &k->r.attempt;
    sl_attempt_reply_init(out);
    const bool lease_call = k->kind == K_RELEASE || k->kind == K_RENEW;
    if (!err)
        err = resp->err;
    if (!err) {
        out->http_status = resp->status;
        for (size_t i = 0; i < resp->nfields; i++)
            sl_attempt_reply_header(out, resp->fields[i].name, resp->fields[i].name_len,
                                    resp->fields[i].value, resp->fields[i].value_len);
        if (resp->status == 200 || (lease_call && resp->status / 100 == 2)) {
            out->outcome = SL_ATTEMPT_ACCEPTED;
        } else if ((resp->status == 429 || (resp->status == 503 && out->ratelimit[0])) &&
                   !lease_call) {
            /* 503 with a RateLimit field is sluice shedding load: a decision, not a failure */
            out->outcome = SL_ATTEMPT_REJECTED;
        } else {
            err = lease_call && resp->status == 404 ? -ENOENT : -EPROTO;
        }
        if (out->outcome != SL_ATTEMPT_ACCEPTED) { /* the server's words, for the caller to pass on */
            size_t n = resp->body->len;
            while (n && (resp->body->data[n - 1] == '\n' || resp->body->data[n - 1] == '\r'))
                n--;
            sl_call_copy_trunc(out->message, sizeof out->message, resp->body->data, n);
        }
    }
    out->err = err;
    if (lease_call) {
        out->allowed = out->outcome == SL_ATTEMPT_ACCEPTED;
        if (err && err != -ENOENT)
            sl_call_count_failure(c, err);
        return err;
    }
    if (out->outcome == SL_ATTEMPT_ACCEPTED) {
        out->allowed = true;
        return 0;
    }
    if (out->outcome == SL_ATTEMPT_REJECTED) {
        if (out->http_status == 503) { /* a shedder's: back off, never fail open */
            out->shed = true;
            atomic_fetch_add(&c->shed, 1);
        }
        return 0;
    }
    sl_call_count_failure(c, err);
    if (c->opt.fail_closed) {
        atomic_fetch_add(&c->failed_closed, 1);
        return err;
    }
    out->allowed = true;
    out->failed_open = true;
    atomic_fetch_add(&c->failed_open, 1);
    return 0;
}

sl_call *sl_leveecall_new(sl_client *c, sl_call_kind kind, const sl_attempt *a,
                          const char *lease_id, int timeout_ms, int *rc)
{
    sl_call *k = sl_call_new(c, kind, timeout_ms);
    if (!k) {
        *rc = -ENOMEM;
        return NULL;
    }
    if ((*rc = build_levee(k, a, lease_id)) < 0) {
        sl_call_free(k);
        return NULL;
    }
    return k;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client's call record (client/call.h): creating and freeing a call, turning its outcome into
 * the typed reply by kind (the protocol modules decode, this picks which), handing an async call's
 * reply to its callback, the circuit breaker's gate and its record of every gated outcome, and the few helpers every protocol module needs (counting a failure,
 * truncating copies, reading an integer header value).
 */
#include "client/call.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/gubcall.h"
#include "client/leveecall.h"
#include "sluice/clock.h"

sl_call *sl_call_new(sl_client *c, sl_call_kind kind, int timeout_ms)
{
    sl_call *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->c = c;
    k->kind = kind;
    k->timeout_ms = timeout_ms > 0 ? timeout_ms : c->opt.timeout_ms;
    k->deadline_ns = sl_mono_ns() + (int64_t)k->timeout_ms * 1000000;
    return k;
}

void sl_call_free(sl_call *k)
{
    sl_buf_free(&k->body);
    free(k->strs);
    free(k->limits);
    free(k);
}

void sl_call_add_hdr(sl_call *k, const char *name, const char *value, size_t vlen)
{
    k->hdrs[k->nhdrs++] = (sl_h2c_field){name, strlen(name), value, vlen};
}

bool sl_call_gate(sl_call *k)
{
    if (k->kind == K_HEALTH || k->kind == K_LIVE)
        return true; /* they report on the server: they must reach it */
    sl_client *c = k->c;
    bool probe;
    pthread_mutex_lock(&c->brk_mu);
    bool ok = sl_breaker_allow(&c->brk, sl_mono_ns(), &probe);
    pthread_mutex_unlock(&c->brk_mu);
    if (!ok) {
        atomic_fetch_add(&c->breaker_rejected, 1);
        return false;
    }
    if (probe)
        atomic_fetch_add(&c->breaker_probes, 1);
    k->gated = true;
    return true;
}

void sl_call_decode(sl_call *k, const sl_h2c_resp *resp, int err)
{
    if (k->gated) {
        int e = err ? err : resp ? resp->err : 0;
        sl_client *c = k->c;
        pthread_mutex_lock(&c->brk_mu);
        sl_breaker_record(&c->brk, e == -ETIMEDOUT, sl_mono_ns());
        pthread_mutex_unlock(&c->brk_mu);
    }
    switch (k->kind) {
    case K_CHECK:
        k->rc = sl_gubcall_decode_check(k, resp, err);
        break;
    case K_HEALTH:
        k->rc = sl_gubcall_decode_health(k, resp, err);
        break;
    case K_LIVE:
        k->rc = sl_gubcall_decode_live(k, resp, err);
        break;
    case K_ATTEMPT:
    case K_ACQUIRE:
    case K_RELEASE:
    case K_RENEW:
        k->rc = sl_leveecall_decode(k, resp, err);
        break;
    }
}

void sl_call_deliver(sl_call *k)
{
    /* before the callback: a caller woken by it must see the call as no longer pending */
    atomic_fetch_sub(&k->c->async_pending, 1);
    switch (k->kind) {
    case K_CHECK:
        k->cb.check(k->ud, k->rc, &k->r.check);
        sl_client_check_reply_free(&k->r.check);
        break;
    case K_HEALTH:
    case K_LIVE:
        k->cb.health(k->ud, k->rc, &k->r.health);
        break;
    case K_ATTEMPT:
    case K_ACQUIRE:
    case K_RELEASE:
    case K_RENEW:
        k->cb.attempt(k->ud, k->rc, &k->r.attempt);
        break;
    }
    sl_call_free(k);
}

void sl_call_count_failure(sl_client *c, int err)
{
    if (err == -ETIMEDOUT)
        atomic_fetch_add(&c->timeouts, 1);
    else if (err == -EHOSTDOWN)
        ; /* the breaker refused it: counted as breaker_rejected */
    else
        atomic_fetch_add(&c->transport_errors, 1);
}

void sl_call_copy_trunc(char *dst, size_t cap, const void *src, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = 0;
}

int64_t sl_call_header_int(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '"'))
        i++;
    if (i == n || s[i] < '0' || s[i] > '9')
        return -1;
    int64_t v = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

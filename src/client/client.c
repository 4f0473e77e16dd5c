/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libsluice client (include/sluice/client.h): gRPC GetRateLimits / HealthCheck / LiveCheck and
 * Levee's /attempt and /release over HTTP/2 (cleartext or TLS), with a fail-open (or fail-closed)
 * policy.
 *
 * This file is the public face: options and their defaults, the client's lifecycle and counters,
 * and one short function per call, sync and async, that builds the call with its protocol module
 * (client/gubcall.c, client/leveecall.c) and runs it on the I/O of client/clientio.c. The call
 * record and how the modules share it: client/call.h.
 */
#include "sluice/client.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/call.h"
#include "client/clientio.h"
#include "client/gubcall.h"
#include "client/leveecall.h"

/* ------------------------------------------------------------------ options, lifecycle */

void sl_client_options_default(sl_client_options *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = 200;
    o->connect_timeout_ms = 1000;
    o->reconnect_backoff_ms = 100;
    o->fail_closed = false;
    o->max_sync_conns = 8;
    o->max_async_pending = 4096;
    o->max_response_bytes = (size_t)4 << 20;
    o->breaker_timeouts = 5;
    o->breaker_cooldown_ms = 1000;
}

/* The TLS context the options ask for into t->tls (NULL: cleartext), and the server name. */
static int tls_setup(sl_h2conn_target *t, const sl_client_options *o, const char *addr)
{
    bool want = o->tls || o->tls_ca_file || o->tls_cert_file || o->tls_key_file ||
                o->tls_server_name || (addr && strncmp(addr, "https://", 8) == 0);
    if (!want)
        return 0;
    const char *files[] = {o->tls_ca_file, o->tls_cert_file, o->tls_key_file};
    for (size_t i = 0; i < 3; i++)
        if (files[i] && access(files[i], R_OK) != 0)
            return -errno;
    if (!o->tls_cert_file != !o->tls_key_file)
        return -EINVAL; /* a certificate needs its key and the other way round */
    if (o->tls_server_name) {
        size_t n = strlen(o->tls_server_name);
        if (n >= sizeof t->server_name)
            return -EINVAL;
        memcpy(t->server_name, o->tls_server_name, n + 1);
    }
    sl_tls_config tc = {.cert_file = o->tls_cert_file, .key_file = o->tls_key_file,
                        .ca_file = o->tls_ca_file, .system_ca = true, .alpn = "h2"};
    char err[256];
    return sl_tls_ctx_new(&t->tls, &tc, err, sizeof err);
}

int sl_client_new(const char *addr, const sl_client_options *opt, sl_client **out)
{
    *out = NULL;
    sl_client *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    if (opt)
        c->opt = *opt;
    else
        sl_client_options_default(&c->opt);
    sl_client_options d;
    sl_client_options_default(&d);
    if (c->opt.timeout_ms <= 0)
        c->opt.timeout_ms = d.timeout_ms;
    if (c->opt.connect_timeout_ms <= 0)
        c->opt.connect_timeout_ms = d.connect_timeout_ms;
    if (c->opt.reconnect_backoff_ms < 0)
        c->opt.reconnect_backoff_ms = 0;
    if (c->opt.max_sync_conns == 0)
        c->opt.max_sync_conns = d.max_sync_conns;
    if (c->opt.max_async_pending == 0)
        c->opt.max_async_pending = d.max_async_pending;
    if (c->opt.max_response_bytes == 0)
        c->opt.max_response_bytes = d.max_response_bytes;
    if (c->opt.breaker_timeouts == 0)
        c->opt.breaker_timeouts = d.breaker_timeouts;
    if (c->opt.breaker_cooldown_ms <= 0)
        c->opt.breaker_cooldown_ms = d.breaker_cooldown_ms;
    sl_breaker_init(&c->brk, c->opt.breaker_timeouts > 0 ? (unsigned)c->opt.breaker_timeouts : 0,
                    (int64_t)c->opt.breaker_cooldown_ms * 1000000);
    pthread_mutex_init(&c->brk_mu, NULL);

    int rc = sl_h2conn_target_init(&c->target, addr, SL_CLIENT_DEFAULT_PORT);
    if (rc < 0) {
        pthread_mutex_destroy(&c->brk_mu);
        free(c);
        return rc;
    }
    c->target.connect_timeout_ns = (int64_t)c->opt.connect_timeout_ms * 1000000;
    c->target.backoff_ns = (int64_t)c->opt.reconnect_backoff_ms * 1000000;
    c->target.max_body = c->opt.max_response_bytes;
    rc = tls_setup(&c->target, &c->opt, addr);
    /* the option strings belong to the caller: nothing keeps them past this call */
    c->opt.tls_ca_file = c->opt.tls_cert_file = c->opt.tls_key_file = NULL;
    c->opt.tls_server_name = NULL;
    if (rc == 0)
        rc = sl_clientio_init(c);
    if (rc < 0) {
        sl_tls_ctx_unref(c->target.tls);
        pthread_mutex_destroy(&c->brk_mu);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void sl_client_free(sl_client *c)
{
    if (!c)
        return;
    sl_clientio_fini(c);
    sl_tls_ctx_unref(c->target.tls);
    pthread_mutex_destroy(&c->brk_mu);
    free(c);
}

void sl_client_stats_get(sl_client *c, sl_client_stats *o)
{
    memset(o, 0, sizeof *o);
    o->calls = atomic_load(&c->calls);
    o->failed_open = atomic_load(&c->failed_open);
    o->failed_closed = atomic_load(&c->failed_closed);
    o->timeouts = atomic_load(&c->timeouts);
    o->transport_errors = atomic_load(&c->transport_errors);
    o->connects = atomic_load(&c->target.connects);
    o->connect_failures = atomic_load(&c->target.connect_failures);
    o->async_pending = atomic_load(&c->async_pending);
    o->async_rejected = atomic_load(&c->async_rejected);
    o->breaker_rejected = atomic_load(&c->breaker_rejected);
    o->breaker_probes = atomic_load(&c->breaker_probes);
    o->shed = atomic_load(&c->shed);
    o->tls_failures = atomic_load(&c->target.tls_failures);
    pthread_mutex_lock(&c->brk_mu);
    o->breaker_trips = c->brk.trips;
    o->breaker_open = c->brk.state != SL_BREAKER_CLOSED;
    pthread_mutex_unlock(&c->brk_mu);
}

const char *sl_client_tls_error(sl_client *c)
{
    const char *e = atomic_load(&c->target.tls_error);
    return e ? e : "";
}

/* ------------------------------------------------------------------ Gubernator calls */

const char *sl_client_result_meta(const sl_client_result *r, const char *key)
{
    if (!r || !key)
        return NULL;
    for (size_t i = 0; i < r->metadata_count; i++)
        if (strcmp(r->metadata[i].key, key) == 0)
            return r->metadata[i].value;
    return NULL;
}

void sl_client_check_reply_free(sl_client_check_reply *r)
{
    if (!r)
        return;
    free(r->priv_);
    memset(r, 0, sizeof *r);
}

int sl_client_check(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                    sl_client_check_reply *out)
{
    memset(out, 0, sizeof *out);
    int rc;
    sl_call *k = sl_gubcall_check(c, items, n, timeout_ms, &rc);
    if (!k)
        return rc;
    rc = sl_clientio_run_sync(c, k);
    *out = k->r.check;
    sl_call_free(k);
    return rc;
}

int sl_client_check_async(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                          sl_client_check_cb cb, void *ud)
{
    if (!cb)
        return -EINVAL;
    int rc;
    sl_call *k = sl_gubcall_check(c, items, n, timeout_ms, &rc);
    if (!k)
        return rc;
    k->cb.check = cb;
    k->ud = ud;
    return sl_clientio_run_async(c, k);
}

int sl_client_health(sl_client *c, int timeout_ms, sl_health_reply *out)
{
    memset(out, 0, sizeof *out);
    sl_call *k = sl_gubcall_probe(c, K_HEALTH, timeout_ms);
    if (!k)
        return out->err = -ENOMEM;
    int rc = sl_clientio_run_sync(c, k);
    *out = k->r.health;
    sl_call_free(k);
    return rc;
}

int sl_client_health_async(sl_client *c, int timeout_ms, sl_client_health_cb cb, void *ud)
{
    if (!cb)
        return -EINVAL;
    sl_call *k = sl_gubcall_probe(c, K_HEALTH, timeout_ms);
    if (!k)
        return -ENOMEM;
    k->cb.health = cb;
    k->ud = ud;
    return sl_clientio_run_async(c, k);
}

int sl_client_live(sl_client *c, int timeout_ms)
{
    sl_call *k = sl_gubcall_probe(c, K_LIVE, timeout_ms);
    if (!k)
        return -ENOMEM;
    int rc = sl_clientio_run_sync(c, k);
    sl_call_free(k);
    return rc;
}

/* ------------------------------------------------------------------ Levee calls */

static int levee_sync(sl_client *c, sl_call_kind kind, const sl_attempt *a, const char *lease_id,
                      int timeout_ms, sl_attempt_reply *out)
{
    sl_attempt_reply tmp;
    if (!out)
        out = &tmp;
    sl_attempt_reply_init(out);
    int rc;
    sl_call *k = sl_leveecall_new(c, kind, a, lease_id, timeout_ms, &rc);
    if (!k) {
        out->err = rc;
        return rc;
    }
    rc = sl_clientio_run_sync(c, k);
    *out = k->r.attempt;
    sl_call_free(k);
    return rc;
}

static int levee_async(sl_client *c, sl_call_kind kind, const sl_attempt *a, const char *lease_id,
                       int timeout_ms, sl_client_attempt_cb cb, void *ud)
{
    if (!cb)
        return -EINVAL;
    int rc;
    sl_call *k = sl_leveecall_new(c, kind, a, lease_id, timeout_ms, &rc);
    if (!k)
        return rc;
    k->cb.attempt = cb;
    k->ud = ud;
    return sl_clientio_run_async(c, k);
}

int sl_client_attempt(sl_client *c, const sl_attempt *a, int timeout_ms, sl_attempt_reply *out)
{
    return levee_sync(c, K_ATTEMPT, a, NULL, timeout_ms, out);
}

int sl_client_acquire(sl_client *c, const sl_attempt *a, int timeout_ms, sl_attempt_reply *out)
{
    return levee_sync(c, K_ACQUIRE, a, NULL, timeout_ms, out);
}

int sl_client_release(sl_client *c, const sl_attempt *a, const char *lease_id, int timeout_ms,
                      sl_attempt_reply *out)
{
    if (!lease_id || !lease_id[0]) {
        if (out) {
            sl_attempt_reply_init(out);
            out->outcome = SL_ATTEMPT_ACCEPTED;
        }
        return 0;
    }
    return levee_sync(c, K_RELEASE, a, lease_id, timeout_ms, out);
}

int sl_client_renew(sl_client *c, const sl_attempt *a, const char *lease_id, int timeout_ms,
                    sl_attempt_reply *out)
{
    if (!lease_id || !lease_id[0])
        return -EINVAL;
    return levee_sync(c, K_RENEW, a, lease_id, timeout_ms, out);
}

int sl_client_renew_async(sl_client *c, const sl_attempt *a, const char *lease_id, int timeout_ms,
                          sl_client_attempt_cb cb, void *ud)
{
    if (!lease_id || !lease_id[0])
        return -EINVAL;
    return levee_async(c, K_RENEW, a, lease_id, timeout_ms, cb, ud);
}

int sl_client_attempt_async(sl_client *c, const sl_attempt *a, int timeout_ms,
                            sl_client_attempt_cb cb, void *ud)
{
    return levee_async(c, K_ATTEMPT, a, NULL, timeout_ms, cb, ud);
}

int sl_client_acquire_async(sl_client *c, const sl_attempt *a, int timeout_ms,
                            sl_client_attempt_cb cb, void *ud)
{
    return levee_async(c, K_ACQUIRE, a, NULL, timeout_ms, cb, ud);
}

int sl_client_release_async(sl_client *c, const sl_attempt *a, const char *lease_id,
                            int timeout_ms, sl_client_attempt_cb cb, void *ud)
{
    if (!lease_id || !lease_id[0])
        return -EINVAL;
    return levee_async(c, K_RELEASE, a, lease_id, timeout_ms, cb, ud);
}

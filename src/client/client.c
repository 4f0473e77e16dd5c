/*
 * libsluice client (include/sluice/client.h): gRPC GetRateLimits / HealthCheck / LiveCheck and
 * Levee's /attempt and /release over cleartext HTTP/2, with a fail-open (or fail-closed) policy.
 *
 * Every call, sync or async, becomes one `call`: an HTTP/2 request (built here, bytes owned by the
 * call) plus what is needed to turn any outcome into a typed reply — the response, or only an errno
 * when the transport failed, in which case the policy synthesizes the answer. finish_call() is that
 * single place, so the sync and async paths cannot disagree about what a failure means.
 *
 * Sync calls borrow a connection from a pool and drive it on the caller's thread (sl_h2c_roundtrip).
 * Async calls go through a mutex-protected queue to one I/O thread that multiplexes them on its own
 * connection; it polls an eventfd beside the connection so a new call wakes it at once. A server
 * GOAWAY moves that connection to a draining list and opens a fresh one, so in-flight calls finish
 * where they started while new ones go to the new connection.
 */
#include "sluice/client.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "client/h2conn.h"
#include "gubernator.pb-c.h"
#include "sluice/clock.h"
#include "base/buf.h"
#include "wire/grpc_frame.h"

#define PATH_GET_RATE_LIMITS "/pb.gubernator.V1/GetRateLimits"
#define PATH_HEALTH_CHECK "/pb.gubernator.V1/HealthCheck"
#define PATH_LIVE_CHECK "/pb.gubernator.V1/LiveCheck"
#define PATH_ATTEMPT "/attempt"
#define PATH_RELEASE "/release"
#define MAX_HEADER_VALUE 4096 /* longest X-* value we send (a resource is a key) */
#define MAX_DRAINING 8        /* GOAWAY'd connections still finishing their streams */

static const char err_fail_closed[] = "sluice client: call failed (fail closed)";

typedef enum { K_CHECK, K_HEALTH, K_LIVE, K_ATTEMPT, K_ACQUIRE, K_RELEASE } call_kind;

typedef struct call {
    struct call *next;
    sl_client *c;
    call_kind kind;
    int64_t deadline_ns;
    int timeout_ms;
    const char *path;
    sl_h2c_field hdrs[10];
    size_t nhdrs;
    char grpc_timeout[16];
    sl_buf body;        /* the request body, until a connection takes it */
    char *strs;         /* copies of header values */
    int64_t *limits;    /* check: each item's limit, for synthesized answers */
    size_t nitems;
    /* completion */
    bool async;
    union {
        sl_client_check_cb check;
        sl_client_health_cb health;
        sl_client_attempt_cb attempt;
    } cb;
    void *ud;
    int rc;
    union {
        sl_client_check_reply check;
        sl_health_reply health;
        sl_attempt_reply attempt;
    } r;
} call;

struct sl_client {
    sl_client_options opt;
    sl_h2conn_target target;

    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    sl_h2conn **idle;
    size_t nidle;
    unsigned nconns;

    pthread_mutex_t q_mu;
    bool io_started, stopping;
    pthread_t io;
    int wake_fd;
    call *q_head, *q_tail;

    _Atomic uint64_t calls, failed_open, failed_closed, timeouts, transport_errors;
    _Atomic uint64_t async_pending, async_rejected;
};

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

    int rc = sl_h2conn_target_init(&c->target, addr, SL_CLIENT_DEFAULT_PORT);
    if (rc < 0) {
        free(c);
        return rc;
    }
    c->target.connect_timeout_ns = (int64_t)c->opt.connect_timeout_ms * 1000000;
    c->target.backoff_ns = (int64_t)c->opt.reconnect_backoff_ms * 1000000;
    c->target.max_body = c->opt.max_response_bytes;

    c->idle = calloc(c->opt.max_sync_conns, sizeof *c->idle);
    c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!c->idle || c->wake_fd < 0) {
        rc = c->wake_fd < 0 ? -errno : -ENOMEM;
        if (c->wake_fd >= 0)
            close(c->wake_fd);
        free(c->idle);
        free(c);
        return rc;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->pool_cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->pool_mu, NULL);
    pthread_mutex_init(&c->q_mu, NULL);
    *out = c;
    return 0;
}

static void wake_io(sl_client *c)
{
    uint64_t one = 1;
    ssize_t w = write(c->wake_fd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is already non-zero, the thread will wake anyway */
}

void sl_client_free(sl_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->q_mu);
    c->stopping = true;
    bool started = c->io_started;
    pthread_mutex_unlock(&c->q_mu);
    if (started) {
        wake_io(c);
        pthread_join(c->io, NULL);
    }
    for (size_t i = 0; i < c->nidle; i++)
        sl_h2conn_free(c->idle[i]);
    free(c->idle);
    close(c->wake_fd);
    pthread_mutex_destroy(&c->pool_mu);
    pthread_cond_destroy(&c->pool_cv);
    pthread_mutex_destroy(&c->q_mu);
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
}

/* ------------------------------------------------------------------ small helpers */

static int64_t deadline_after(int timeout_ms)
{
    return sl_mono_ns() + (int64_t)timeout_ms * 1000000;
}

static void count_failure(sl_client *c, int err)
{
    if (err == -ETIMEDOUT)
        atomic_fetch_add(&c->timeouts, 1);
    else
        atomic_fetch_add(&c->transport_errors, 1);
}

static void copy_trunc(char *dst, size_t cap, const void *src, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, src, n);
    dst[n] = 0;
}

static bool ieq(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    return an == bn && strncasecmp(a, b, an) == 0;
}

/* Leading non-negative integer of [s, s+n) (spaces skipped); -1 if none. */
static int64_t parse_int(const char *s, size_t n)
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

static void add_hdr(call *k, const char *name, const char *value, size_t vlen)
{
    k->hdrs[k->nhdrs++] = (sl_h2c_field){name, strlen(name), value, vlen};
}

static void call_free(call *k)
{
    sl_buf_free(&k->body);
    free(k->strs);
    free(k->limits);
    free(k);
}

/* ------------------------------------------------------------------ gRPC framing */

static void add_grpc_headers(call *k)
{
    /* grpc-timeout allows 8 digits; milliseconds cover ~27 hours */
    snprintf(k->grpc_timeout, sizeof k->grpc_timeout, "%dm", k->timeout_ms);
    add_hdr(k, "content-type", "application/grpc", 16);
    add_hdr(k, "te", "trailers", 8);
    add_hdr(k, "grpc-timeout", k->grpc_timeout, strlen(k->grpc_timeout));
    add_hdr(k, "user-agent", "sluice-client", 13);
}

static int grpc_frame(call *k, const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    sl_buf_init(&k->body, 0);
    int rc = sl_buf_reserve(&k->body, SL_GRPC_HDR_LEN + n);
    if (rc < 0)
        return rc;
    rc = sl_grpc_frame_header(k->body.data, n, false);
    if (rc < 0)
        return rc;
    protobuf_c_message_pack(m, k->body.data + SL_GRPC_HDR_LEN);
    k->body.len = SL_GRPC_HDR_LEN + n;
    return 0;
}

/* The one message of a unary gRPC answer. 0, or -EPROTO when the body is not exactly one
 * uncompressed frame. An empty body is an empty message. */
static int grpc_unframe(const uint8_t *b, size_t n, const uint8_t **msg, size_t *len)
{
    if (n == 0) {
        *msg = b;
        *len = 0;
        return 0;
    }
    sl_grpc_msg m;
    const char *err;
    if (sl_grpc_frame_decode(b, n, n, &m, &err) < 0 || m.compressed || m.frame_len != n)
        return -EPROTO;
    *msg = m.data;
    *len = m.len;
    return 0;
}

/* Status line of a gRPC answer: 0 when :status 200 and grpc-status 0. */
static int grpc_status_of(const sl_h2c_resp *r, int *grpc_status, const sl_h2c_field **msg)
{
    *grpc_status = -1;
    *msg = sl_h2c_resp_find(r, "grpc-message");
    const sl_h2c_field *f = sl_h2c_resp_find(r, "grpc-status");
    if (f) {
        int64_t v = parse_int(f->value, f->value_len);
        *grpc_status = v < 0 || v > 1000 ? 2 /* UNKNOWN */ : (int)v;
    }
    if (r->status != 200 || *grpc_status != 0)
        return *grpc_status == 4 /* DEADLINE_EXCEEDED */ ? -ETIMEDOUT : -EPROTO;
    return 0;
}

/* grpc-message is percent-encoded: decode it into dst (cap bytes, truncated, NUL-terminated). */
static void grpc_message_copy(char *dst, size_t cap, const sl_h2c_field *f)
{
    sl_buf b;
    sl_buf_init(&b, f->value_len + 16); /* decoding never grows it */
    if (sl_grpc_message_decode(f->value, f->value_len, &b) == 0)
        copy_trunc(dst, cap, b.data, b.len);
    else
        copy_trunc(dst, cap, f->value, f->value_len);
    sl_buf_free(&b);
}

/* ------------------------------------------------------------------ check: request */

void sl_client_check_reply_free(sl_client_check_reply *r)
{
    if (!r)
        return;
    free(r->priv_);
    memset(r, 0, sizeof *r);
}

static int build_check(call *k, const sl_client_item *items, size_t n)
{
    if (n == 0 || !items)
        return -EINVAL;
    if (n > SL_CLIENT_MAX_ITEMS)
        return -E2BIG;
    size_t nmd = 0, sbytes = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_request *q = &items[i].req;
        if ((q->name_len && !q->name) || (q->unique_key_len && !q->unique_key) ||
            q->name_len > SL_MAX_NAME_LEN || q->unique_key_len > SL_MAX_KEY_LEN ||
            (items[i].metadata_count && !items[i].metadata) || items[i].metadata_count > 64)
            return -EINVAL;
        for (size_t j = 0; j < items[i].metadata_count; j++)
            if (!items[i].metadata[j].key || !items[i].metadata[j].value)
                return -EINVAL;
        nmd += items[i].metadata_count + (q->sub_windows > 1);
        sbytes += q->name_len + 1 + q->unique_key_len + 1 + 16;
    }
    Pb__Gubernator__RateLimitReq *reqs = calloc(n, sizeof *reqs);
    Pb__Gubernator__RateLimitReq **preqs = calloc(n, sizeof *preqs);
    Pb__Gubernator__RateLimitReq__MetadataEntry *mds = calloc(nmd ? nmd : 1, sizeof *mds);
    Pb__Gubernator__RateLimitReq__MetadataEntry **pmds = calloc(nmd ? nmd : 1, sizeof *pmds);
    char *scratch = malloc(sbytes);
    k->limits = malloc(n * sizeof *k->limits);
    int rc = -ENOMEM;
    if (!reqs || !preqs || !mds || !pmds || !scratch || !k->limits)
        goto out;

    char *sp = scratch;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_request *q = &items[i].req;
        Pb__Gubernator__RateLimitReq *r = &reqs[i];
        pb__gubernator__rate_limit_req__init(r);
        r->name = sp;
        if (q->name_len)
            memcpy(sp, q->name, q->name_len);
        sp[q->name_len] = 0;
        sp += q->name_len + 1;
        r->unique_key = sp;
        if (q->unique_key_len)
            memcpy(sp, q->unique_key, q->unique_key_len);
        sp[q->unique_key_len] = 0;
        sp += q->unique_key_len + 1;
        r->hits = q->hits;
        r->limit = q->limit;
        r->duration = q->duration;
        r->algorithm = (Pb__Gubernator__Algorithm)q->algorithm;
        r->behavior = (Pb__Gubernator__Behavior)q->behavior;
        r->burst = q->burst;
        r->created_at = q->created_at;
        r->metadata = &pmds[m];
        for (size_t j = 0; j < items[i].metadata_count; j++) {
            pb__gubernator__rate_limit_req__metadata_entry__init(&mds[m]);
            mds[m].key = (char *)items[i].metadata[j].key;
            mds[m].value = (char *)items[i].metadata[j].value;
            pmds[m] = &mds[m];
            m++;
            r->n_metadata++;
        }
        if (q->sub_windows > 1) {
            pb__gubernator__rate_limit_req__metadata_entry__init(&mds[m]);
            mds[m].key = "sub_windows";
            mds[m].value = sp;
            sp += snprintf(sp, 16, "%d", (int)q->sub_windows) + 1;
            pmds[m] = &mds[m];
            m++;
            r->n_metadata++;
        }
        preqs[i] = r;
        k->limits[i] = q->limit;
    }
    Pb__Gubernator__GetRateLimitsReq msg = PB__GUBERNATOR__GET_RATE_LIMITS_REQ__INIT;
    msg.n_requests = n;
    msg.requests = preqs;
    k->nitems = n;
    rc = grpc_frame(k, &msg.base);
out:
    free(reqs);
    free(preqs);
    free(mds);
    free(pmds);
    free(scratch);
    return rc;
}

/* ------------------------------------------------------------------ check: reply */

typedef struct arena {
    sl_client_kv *kv;
    char *s;
} arena;

static char *arena_str(arena *a, const char *src, size_t n)
{
    char *d = a->s;
    memcpy(d, src, n);
    d[n] = 0;
    a->s += n + 1;
    return d;
}

/* Allocate items + kvs + string bytes in one block. */
static int reply_alloc(sl_client_check_reply *out, size_t n, size_t nkv, size_t sbytes, arena *a)
{
    size_t sz = n * sizeof(sl_client_result) + nkv * sizeof(sl_client_kv) + sbytes;
    char *blk = calloc(1, sz ? sz : 1);
    if (!blk)
        return -ENOMEM;
    out->priv_ = blk;
    out->items = (sl_client_result *)blk;
    out->count = n;
    a->kv = (sl_client_kv *)(blk + n * sizeof(sl_client_result));
    a->s = (char *)(a->kv + nkv);
    return 0;
}

/* The call failed: answer every item per the policy. */
static int check_fail(call *k, int err, const sl_h2c_field *gmsg)
{
    sl_client *c = k->c;
    sl_client_check_reply *out = &k->r.check;
    arena a;
    out->err = err;
    count_failure(c, err);
    if (reply_alloc(out, k->nitems, 0, gmsg ? gmsg->value_len + 1 : 0, &a) < 0) {
        out->count = 0;
        return c->opt.fail_closed ? err : 0;
    }
    if (gmsg) {
        out->grpc_message = a.s;
        grpc_message_copy(a.s, gmsg->value_len + 1, gmsg);
    }
    for (size_t i = 0; i < k->nitems; i++) {
        sl_response *r = &out->items[i].resp;
        r->limit = k->limits[i];
        if (c->opt.fail_closed) {
            r->status = SL_OVER_LIMIT;
            r->remaining = 0;
            r->error = err_fail_closed;
        } else {
            r->status = SL_UNDER_LIMIT;
            r->remaining = k->limits[i];
        }
    }
    if (c->opt.fail_closed) {
        atomic_fetch_add(&c->failed_closed, 1);
        return err;
    }
    out->failed_open = true;
    atomic_fetch_add(&c->failed_open, 1);
    return 0;
}

static int decode_check(call *k, const sl_h2c_resp *resp, int err)
{
    sl_client_check_reply *out = &k->r.check;
    memset(out, 0, sizeof *out);
    out->grpc_status = -1;
    const sl_h2c_field *gmsg = NULL;
    if (err)
        return check_fail(k, err, NULL);
    out->http_status = resp->status;
    if ((err = resp->err) || (err = grpc_status_of(resp, &out->grpc_status, &gmsg)))
        return check_fail(k, err, gmsg);
    const uint8_t *msg;
    size_t mlen;
    if (grpc_unframe(resp->body->data, resp->body->len, &msg, &mlen) < 0)
        return check_fail(k, -EPROTO, NULL);
    Pb__Gubernator__GetRateLimitsResp *m = pb__gubernator__get_rate_limits_resp__unpack(NULL, mlen, msg);
    if (!m || m->n_responses != k->nitems) {
        if (m)
            pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
        return check_fail(k, -EPROTO, NULL);
    }
    size_t nkv = 0, sbytes = 0;
    for (size_t i = 0; i < m->n_responses; i++) {
        const Pb__Gubernator__RateLimitResp *r = m->responses[i];
        if (r->error && r->error[0])
            sbytes += strlen(r->error) + 1;
        nkv += r->n_metadata;
        for (size_t j = 0; j < r->n_metadata; j++)
            sbytes += strlen(r->metadata[j]->key) + strlen(r->metadata[j]->value) + 2;
    }
    arena a;
    if (reply_alloc(out, m->n_responses, nkv, sbytes, &a) < 0) {
        pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
        return check_fail(k, -ENOMEM, NULL);
    }
    for (size_t i = 0; i < m->n_responses; i++) {
        const Pb__Gubernator__RateLimitResp *r = m->responses[i];
        sl_client_result *o = &out->items[i];
        o->resp.status = r->status == PB__GUBERNATOR__STATUS__OVER_LIMIT ? SL_OVER_LIMIT
                                                                          : SL_UNDER_LIMIT;
        o->resp.limit = r->limit;
        o->resp.remaining = r->remaining;
        o->resp.reset_time = r->reset_time;
        if (r->error && r->error[0])
            o->resp.error = arena_str(&a, r->error, strlen(r->error));
        o->metadata = a.kv;
        o->metadata_count = r->n_metadata;
        for (size_t j = 0; j < r->n_metadata; j++) {
            const char *key = r->metadata[j]->key, *val = r->metadata[j]->value;
            a.kv->key = arena_str(&a, key, strlen(key));
            a.kv->value = arena_str(&a, val, strlen(val));
            a.kv++;
        }
    }
    pb__gubernator__get_rate_limits_resp__free_unpacked(m, NULL);
    return 0;
}

/* ------------------------------------------------------------------ health / live */

static int decode_health(call *k, const sl_h2c_resp *resp, int err)
{
    sl_health_reply *out = &k->r.health;
    memset(out, 0, sizeof *out);
    out->grpc_status = -1;
    if (!err)
        err = resp->err;
    const sl_h2c_field *gmsg = NULL;
    if (!err && (grpc_status_of(resp, &out->grpc_status, &gmsg) < 0 && out->grpc_status < 0))
        err = -EPROTO; /* not a gRPC answer at all */
    if (err) {
        out->err = err;
        count_failure(k->c, err);
        return err;
    }
    const uint8_t *msg;
    size_t mlen;
    Pb__Gubernator__HealthCheckResp *m = NULL;
    if (grpc_unframe(resp->body->data, resp->body->len, &msg, &mlen) == 0 && resp->body->len)
        m = pb__gubernator__health_check_resp__unpack(NULL, mlen, msg);
    if (out->grpc_status == 0 && !m) {
        out->err = -EPROTO;
        count_failure(k->c, -EPROTO);
        return -EPROTO;
    }
    if (m) {
        copy_trunc(out->status, sizeof out->status, m->status, strlen(m->status));
        copy_trunc(out->message, sizeof out->message, m->message, strlen(m->message));
        copy_trunc(out->advertise_address, sizeof out->advertise_address, m->advertise_address,
                   strlen(m->advertise_address));
        out->peer_count = m->peer_count;
        pb__gubernator__health_check_resp__free_unpacked(m, NULL);
    }
    if (out->grpc_status != 0) {
        if (!out->status[0])
            strcpy(out->status, "unhealthy");
        if (!out->message[0] && gmsg)
            grpc_message_copy(out->message, sizeof out->message, gmsg);
    }
    out->healthy = out->grpc_status == 0 && strcmp(out->status, "healthy") == 0;
    return 0;
}

static int decode_live(call *k, const sl_h2c_resp *resp, int err)
{
    int gs;
    const sl_h2c_field *gmsg;
    if (!err && !(err = resp->err))
        err = grpc_status_of(resp, &gs, &gmsg);
    if (err)
        count_failure(k->c, err);
    return err;
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
            int64_t val = parse_int(eq + 1, tl - kl - 1);
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
            r->rl_limit = parse_int(tok, tl);
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
        int64_t s = parse_int(value, vl);
        if (s >= 0 && s < INT64_MAX / 1000)
            r->retry_after_ms = s * 1000;
    } else if (ieq(name, nl, "ratelimit")) {
        copy_trunc(r->ratelimit, sizeof r->ratelimit, value, vl);
        parse_rl_params(r, value, vl, false);
    } else if (ieq(name, nl, "ratelimit-policy")) {
        copy_trunc(r->ratelimit_policy, sizeof r->ratelimit_policy, value, vl);
        parse_rl_params(r, value, vl, true);
    } else if (ieq(name, nl, "ratelimit-limit") || ieq(name, nl, "x-ratelimit-limit")) {
        if (r->rl_limit < 0)
            r->rl_limit = parse_int(value, vl);
    } else if (ieq(name, nl, "ratelimit-remaining") || ieq(name, nl, "x-ratelimit-remaining")) {
        if (r->rl_remaining < 0)
            r->rl_remaining = parse_int(value, vl);
    } else if (ieq(name, nl, "ratelimit-reset") || ieq(name, nl, "x-ratelimit-reset")) {
        if (r->rl_reset_s < 0)
            r->rl_reset_s = parse_int(value, vl);
    } else if (ieq(name, nl, "x-lease-id")) {
        copy_trunc(r->lease_id, sizeof r->lease_id, value, vl);
    }
}

static int build_levee(call *k, const sl_attempt *a, const char *lease_id)
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
    if (k->kind != K_RELEASE && (!vals[0] || !vals[0][0]))
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
        add_hdr(k, names[i], p, n);
        p += n + 1;
    }
    if (lease_id) {
        size_t n = strlen(lease_id);
        memcpy(p, lease_id, n + 1);
        add_hdr(k, "x-lease-id", p, n);
    }
    if (k->kind == K_ACQUIRE)
        add_hdr(k, "x-concurrency", "acquire", 7);
    add_hdr(k, "user-agent", "sluice-client", 13);
    k->path = k->kind == K_RELEASE ? PATH_RELEASE : PATH_ATTEMPT;
    return 0;
}

static int decode_attempt(call *k, const sl_h2c_resp *resp, int err)
{
    sl_client *c = k->c;
    sl_attempt_reply *out = &k->r.attempt;
    sl_attempt_reply_init(out);
    if (!err)
        err = resp->err;
    if (!err) {
        out->http_status = resp->status;
        for (size_t i = 0; i < resp->nfields; i++)
            sl_attempt_reply_header(out, resp->fields[i].name, resp->fields[i].name_len,
                                    resp->fields[i].value, resp->fields[i].value_len);
        if (resp->status == 200 || (k->kind == K_RELEASE && resp->status / 100 == 2)) {
            out->outcome = SL_ATTEMPT_ACCEPTED;
        } else if ((resp->status == 429 || (resp->status == 503 && out->ratelimit[0])) &&
                   k->kind != K_RELEASE) {
            /* 503 with a RateLimit field is sluice shedding load: a decision, not a failure */
            out->outcome = SL_ATTEMPT_REJECTED;
        } else {
            err = k->kind == K_RELEASE && resp->status == 404 ? -ENOENT : -EPROTO;
            size_t n = resp->body->len;
            while (n && (resp->body->data[n - 1] == '\n' || resp->body->data[n - 1] == '\r'))
                n--;
            copy_trunc(out->message, sizeof out->message, resp->body->data, n);
        }
    }
    out->err = err;
    if (k->kind == K_RELEASE) {
        out->allowed = out->outcome == SL_ATTEMPT_ACCEPTED;
        if (err && err != -ENOENT)
            count_failure(c, err);
        return err;
    }
    if (out->outcome == SL_ATTEMPT_ACCEPTED) {
        out->allowed = true;
        return 0;
    }
    if (out->outcome == SL_ATTEMPT_REJECTED)
        return 0;
    count_failure(c, err);
    if (c->opt.fail_closed) {
        atomic_fetch_add(&c->failed_closed, 1);
        return err;
    }
    out->allowed = true;
    out->failed_open = true;
    atomic_fetch_add(&c->failed_open, 1);
    return 0;
}

/* ------------------------------------------------------------------ completion */

/* Turn the outcome (a response, or err when there is none) into the typed reply and rc. */
static void decode_call(call *k, const sl_h2c_resp *resp, int err)
{
    switch (k->kind) {
    case K_CHECK:
        k->rc = decode_check(k, resp, err);
        break;
    case K_HEALTH:
        k->rc = decode_health(k, resp, err);
        break;
    case K_LIVE:
        k->rc = decode_live(k, resp, err);
        break;
    case K_ATTEMPT:
    case K_ACQUIRE:
    case K_RELEASE:
        k->rc = decode_attempt(k, resp, err);
        break;
    }
}

/* Async: deliver to the callback and free the call. */
static void deliver(call *k)
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
        k->cb.attempt(k->ud, k->rc, &k->r.attempt);
        break;
    }
    call_free(k);
}

static void on_h2_done(void *ud, const sl_h2c_resp *resp)
{
    call *k = ud;
    decode_call(k, resp, 0);
    if (k->async)
        deliver(k);
}

static void make_req(call *k, sl_h2conn_req *req)
{
    *req = (sl_h2conn_req){.method = "POST", .path = k->path, .headers = k->hdrs,
                           .nheaders = k->nhdrs, .body = &k->body,
                           .deadline_ns = k->deadline_ns};
}

/* ------------------------------------------------------------------ sync path */

static int pool_get(sl_client *c, int64_t deadline_ns, sl_h2conn **out)
{
    pthread_mutex_lock(&c->pool_mu);
    while (c->nidle == 0 && c->nconns >= c->opt.max_sync_conns) {
        struct timespec ts = {.tv_sec = deadline_ns / 1000000000,
                              .tv_nsec = deadline_ns % 1000000000};
        if (pthread_cond_timedwait(&c->pool_cv, &c->pool_mu, &ts) == ETIMEDOUT &&
            c->nidle == 0 && c->nconns >= c->opt.max_sync_conns) {
            pthread_mutex_unlock(&c->pool_mu);
            return -ETIMEDOUT;
        }
    }
    if (c->nidle) {
        *out = c->idle[--c->nidle];
        pthread_mutex_unlock(&c->pool_mu);
        return 0;
    }
    c->nconns++;
    pthread_mutex_unlock(&c->pool_mu);
    int rc = sl_h2conn_new(&c->target, out);
    if (rc < 0) {
        pthread_mutex_lock(&c->pool_mu);
        c->nconns--;
        pthread_cond_signal(&c->pool_cv);
        pthread_mutex_unlock(&c->pool_mu);
    }
    return rc;
}

static void pool_put(sl_client *c, sl_h2conn *h)
{
    pthread_mutex_lock(&c->pool_mu);
    c->idle[c->nidle++] = h;
    pthread_cond_signal(&c->pool_cv);
    pthread_mutex_unlock(&c->pool_mu);
}

static int run_sync(sl_client *c, call *k)
{
    atomic_fetch_add(&c->calls, 1);
    sl_h2conn *h;
    int rc = pool_get(c, k->deadline_ns, &h);
    if (rc == 0) {
        sl_h2conn_refresh(h);
        sl_h2conn_req req;
        make_req(k, &req);
        rc = sl_h2conn_roundtrip(h, &req, on_h2_done, k);
        pool_put(c, h);
    }
    if (rc < 0)
        decode_call(k, NULL, rc);
    return k->rc;
}

static call *call_new(sl_client *c, call_kind kind, int timeout_ms)
{
    call *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->c = c;
    k->kind = kind;
    k->timeout_ms = timeout_ms > 0 ? timeout_ms : c->opt.timeout_ms;
    k->deadline_ns = deadline_after(k->timeout_ms);
    return k;
}

/* ------------------------------------------------------------------ async path */

static void io_submit(sl_client *c, sl_h2conn **active, sl_h2conn **draining, size_t *ndraining, call *k)
{
    sl_h2conn_req req;
    make_req(k, &req);
    int rc = -ENOMEM;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!*active && sl_h2conn_new(&c->target, active) < 0) {
            rc = -ENOMEM;
            break;
        }
        rc = sl_h2conn_submit(*active, &req, on_h2_done, k);
        if (rc != -EAGAIN)
            break;
        /* GOAWAY with streams in flight: let them drain there, start afresh for new calls */
        if (*ndraining == MAX_DRAINING) {
            sl_h2conn_free(draining[0]);
            memmove(draining, draining + 1, (MAX_DRAINING - 1) * sizeof *draining);
            (*ndraining)--;
        }
        draining[(*ndraining)++] = *active;
        *active = NULL;
    }
    if (rc < 0) {
        decode_call(k, NULL, rc);
        deliver(k);
    }
}

static void *io_main(void *arg)
{
    sl_client *c = arg;
    sl_h2conn *active = NULL;
    sl_h2conn *draining[MAX_DRAINING];
    size_t ndraining = 0;
    for (;;) {
        pthread_mutex_lock(&c->q_mu);
        call *list = c->q_head;
        c->q_head = c->q_tail = NULL;
        bool stopping = c->stopping;
        pthread_mutex_unlock(&c->q_mu);

        while (list) {
            call *k = list;
            list = k->next;
            k->next = NULL;
            if (stopping) {
                decode_call(k, NULL, -ECANCELED);
                deliver(k);
            } else {
                io_submit(c, &active, draining, &ndraining, k);
            }
        }
        if (stopping)
            break;

        struct pollfd pfd[2 + MAX_DRAINING];
        sl_h2conn *conns[1 + MAX_DRAINING];
        size_t nconns = 0;
        if (active)
            conns[nconns++] = active;
        for (size_t i = 0; i < ndraining; i++)
            conns[nconns++] = draining[i];
        pfd[0] = (struct pollfd){.fd = c->wake_fd, .events = POLLIN};
        int64_t dl = INT64_MAX;
        for (size_t i = 0; i < nconns; i++) {
            sl_h2conn_pollfd(conns[i], &pfd[1 + i]);
            int64_t d = sl_h2conn_next_deadline(conns[i]);
            if (d < dl)
                dl = d;
        }
        int64_t now = sl_mono_ns();
        int tmo = dl == INT64_MAX ? -1 : dl <= now ? 0 : (int)((dl - now + 999999) / 1000000);
        int n = poll(pfd, 1 + nconns, tmo);
        if (n < 0)
            memset(pfd, 0, sizeof pfd); /* EINTR: just run deadlines */
        if (pfd[0].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(c->wake_fd, &v, sizeof v);
            (void)r;
        }
        now = sl_mono_ns();
        for (size_t i = 0; i < nconns; i++)
            sl_h2conn_process(conns[i], pfd[1 + i].fd >= 0 ? pfd[1 + i].revents : 0, now);
        for (size_t i = 0; i < ndraining;) {
            if (sl_h2conn_finished(draining[i])) {
                sl_h2conn_free(draining[i]);
                draining[i] = draining[--ndraining];
            } else {
                i++;
            }
        }
    }
    sl_h2conn_free(active);
    for (size_t i = 0; i < ndraining; i++)
        sl_h2conn_free(draining[i]);
    return NULL;
}

static int run_async(sl_client *c, call *k)
{
    k->async = true;
    pthread_mutex_lock(&c->q_mu);
    if (c->stopping) {
        pthread_mutex_unlock(&c->q_mu);
        call_free(k);
        return -ECANCELED;
    }
    if (atomic_load(&c->async_pending) >= c->opt.max_async_pending) {
        pthread_mutex_unlock(&c->q_mu);
        atomic_fetch_add(&c->async_rejected, 1);
        call_free(k);
        return -EAGAIN;
    }
    if (!c->io_started) {
        if (pthread_create(&c->io, NULL, io_main, c) != 0) {
            pthread_mutex_unlock(&c->q_mu);
            call_free(k);
            return -EAGAIN;
        }
        c->io_started = true;
    }
    atomic_fetch_add(&c->async_pending, 1);
    atomic_fetch_add(&c->calls, 1);
    if (c->q_tail)
        c->q_tail->next = k;
    else
        c->q_head = k;
    c->q_tail = k;
    pthread_mutex_unlock(&c->q_mu);
    wake_io(c);
    return 0;
}

/* ------------------------------------------------------------------ public calls */

static call *check_call(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                        int *rc)
{
    call *k = call_new(c, K_CHECK, timeout_ms);
    if (!k) {
        *rc = -ENOMEM;
        return NULL;
    }
    k->path = PATH_GET_RATE_LIMITS;
    add_grpc_headers(k);
    if ((*rc = build_check(k, items, n)) < 0) {
        call_free(k);
        return NULL;
    }
    return k;
}

int sl_client_check(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                    sl_client_check_reply *out)
{
    memset(out, 0, sizeof *out);
    int rc;
    call *k = check_call(c, items, n, timeout_ms, &rc);
    if (!k)
        return rc;
    rc = run_sync(c, k);
    *out = k->r.check;
    call_free(k);
    return rc;
}

int sl_client_check_async(sl_client *c, const sl_client_item *items, size_t n, int timeout_ms,
                          sl_client_check_cb cb, void *ud)
{
    if (!cb)
        return -EINVAL;
    int rc;
    call *k = check_call(c, items, n, timeout_ms, &rc);
    if (!k)
        return rc;
    k->cb.check = cb;
    k->ud = ud;
    return run_async(c, k);
}

static call *grpc_empty_call(sl_client *c, call_kind kind, int timeout_ms)
{
    call *k = call_new(c, kind, timeout_ms);
    if (!k)
        return NULL;
    k->path = kind == K_HEALTH ? PATH_HEALTH_CHECK : PATH_LIVE_CHECK;
    add_grpc_headers(k);
    Pb__Gubernator__HealthCheckReq hreq = PB__GUBERNATOR__HEALTH_CHECK_REQ__INIT;
    Pb__Gubernator__LiveCheckReq lreq = PB__GUBERNATOR__LIVE_CHECK_REQ__INIT;
    if (grpc_frame(k, kind == K_HEALTH ? &hreq.base : &lreq.base) < 0) {
        call_free(k);
        return NULL;
    }
    return k;
}

int sl_client_health(sl_client *c, int timeout_ms, sl_health_reply *out)
{
    memset(out, 0, sizeof *out);
    call *k = grpc_empty_call(c, K_HEALTH, timeout_ms);
    if (!k)
        return out->err = -ENOMEM;
    int rc = run_sync(c, k);
    *out = k->r.health;
    call_free(k);
    return rc;
}

int sl_client_health_async(sl_client *c, int timeout_ms, sl_client_health_cb cb, void *ud)
{
    if (!cb)
        return -EINVAL;
    call *k = grpc_empty_call(c, K_HEALTH, timeout_ms);
    if (!k)
        return -ENOMEM;
    k->cb.health = cb;
    k->ud = ud;
    return run_async(c, k);
}

int sl_client_live(sl_client *c, int timeout_ms)
{
    call *k = grpc_empty_call(c, K_LIVE, timeout_ms);
    if (!k)
        return -ENOMEM;
    int rc = run_sync(c, k);
    call_free(k);
    return rc;
}

static call *levee_call(sl_client *c, call_kind kind, const sl_attempt *a, const char *lease_id,
                        int timeout_ms, int *rc)
{
    call *k = call_new(c, kind, timeout_ms);
    if (!k) {
        *rc = -ENOMEM;
        return NULL;
    }
    if ((*rc = build_levee(k, a, lease_id)) < 0) {
        call_free(k);
        return NULL;
    }
    return k;
}

static int levee_sync(sl_client *c, call_kind kind, const sl_attempt *a, const char *lease_id,
                      int timeout_ms, sl_attempt_reply *out)
{
    sl_attempt_reply tmp;
    if (!out)
        out = &tmp;
    sl_attempt_reply_init(out);
    int rc;
    call *k = levee_call(c, kind, a, lease_id, timeout_ms, &rc);
    if (!k) {
        out->err = rc;
        return rc;
    }
    rc = run_sync(c, k);
    *out = k->r.attempt;
    call_free(k);
    return rc;
}

static int levee_async(sl_client *c, call_kind kind, const sl_attempt *a, const char *lease_id,
                       int timeout_ms, sl_client_attempt_cb cb, void *ud)
{
    if (!cb)
        return -EINVAL;
    int rc;
    call *k = levee_call(c, kind, a, lease_id, timeout_ms, &rc);
    if (!k)
        return rc;
    k->cb.attempt = cb;
    k->ud = ud;
    return run_async(c, k);
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

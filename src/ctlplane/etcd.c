/* SPDX-License-Identifier: Apache-2.0 */
/*
 * etcd v3 over its JSON gateway with libcurl (see etcd.h for the model: endpoints, failover,
 * threads, errors).
 *
 * The gateway speaks protobuf's JSON mapping: bytes fields are base64, int64 fields are decimal
 * strings, fields equal to their default value are left out (a PUT event has no "type", a lease
 * that is gone has no "TTL"). A watch is one long POST whose response body is a stream of JSON
 * objects, one per line: {"result":{"header":..,"created":true}}, then {"result":{"header":..,
 * "events":[..]}} as the store changes, or {"result":{..,"canceled":true,"compact_revision":..}}
 * when etcd ends it. Base64 is written here (40 lines) because none of the libraries the project
 * links exposes it.
 */
#include "ctlplane/etcd.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/grow.h"

struct sl_etcd {
    char *endpoints[SL_ETCD_MAX_ENDPOINTS];
    size_t n;
    atomic_size_t cur;
    atomic_uint_fast64_t failovers;
    int64_t connect_timeout_ms;
    int64_t request_timeout_ms;
    size_t max_response;
    char *tls[3];            /* CA bundle, client certificate, key (NULL: unset) */
    pthread_mutex_t mu;      /* the unary handle */
    CURL *curl;
    pthread_mutex_t info_mu; /* last_error */
    char last_error[256];
};

struct sl_etcd_watch {
    sl_etcd *e;
    CURLM *multi;
    atomic_bool stop;
};

/* ---------------------------------------------------------------- base64 */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const char *src, size_t len)
{
    const unsigned char *s = (const unsigned char *)src;
    char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *o++ = b64chars[v >> 18 & 63], *o++ = b64chars[v >> 12 & 63];
        *o++ = b64chars[v >> 6 & 63], *o++ = b64chars[v & 63];
    }
    if (len - i == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        *o++ = b64chars[v >> 18 & 63], *o++ = b64chars[v >> 12 & 63], *o++ = '=', *o++ = '=';
    } else if (len - i == 2) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8;
        *o++ = b64chars[v >> 18 & 63], *o++ = b64chars[v >> 12 & 63];
        *o++ = b64chars[v >> 6 & 63], *o++ = '=';
    }
    *o = 0;
    return out;
}

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Decode into a malloc'd NUL-terminated buffer; NULL on bad input or no memory. */
static char *b64_decode(const char *s, size_t len, size_t *out_len)
{
    char *out = malloc(len / 4 * 3 + 4);
    if (!out)
        return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=')
            break;
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits & 0xff);
        }
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

/* ---------------------------------------------------------------- helpers */

/* "<url>: <message>", cut to fit (the return value is checked only to say truncation is fine). */
static void set_error(sl_etcd *e, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&e->info_mu);
    if (snprintf(e->last_error, sizeof e->last_error, "%s: %s", a ? a : "", b ? b : "") < 0)
        e->last_error[0] = 0;
    pthread_mutex_unlock(&e->info_mu);
}

const char *sl_etcd_last_error(sl_etcd *e, char *buf, size_t size)
{
    pthread_mutex_lock(&e->info_mu);
    snprintf(buf, size, "%s", e->last_error);
    pthread_mutex_unlock(&e->info_mu);
    return buf;
}

const char *sl_etcd_current_endpoint(sl_etcd *e, char *buf, size_t size)
{
    snprintf(buf, size, "%s", e->endpoints[atomic_load(&e->cur) % e->n]);
    return buf;
}

uint64_t sl_etcd_failovers(sl_etcd *e)
{
    return atomic_load(&e->failovers);
}

static int64_t jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    if (json_is_string(v))
        return strtoll(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return (int64_t)json_integer_value(v);
    return 0;
}

static json_t *jb64(const char *s, size_t len)
{
    char *enc = b64_encode(s, len);
    if (!enc)
        return NULL;
    json_t *j = json_string(enc);
    free(enc);
    return j;
}

static json_t *jint64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return json_string(buf);
}

size_t sl_etcd_prefix_end(const char *prefix, size_t len, char *out)
{
    memcpy(out, prefix, len);
    for (size_t i = len; i-- > 0;) {
        if ((unsigned char)out[i] < 0xff) {
            out[i]++;
            return i + 1;
        }
    }
    return 0;
}

static int set_range(json_t *req, const char *key, size_t key_len, bool prefix)
{
    if (json_object_set_new(req, "key", jb64(key, key_len)))
        return -ENOMEM;
    if (!prefix)
        return 0;
    char *end = malloc(key_len + 1);
    if (!end)
        return -ENOMEM;
    size_t n = sl_etcd_prefix_end(key, key_len, end);
    int rc;
    if (n == 0)
        rc = json_object_set_new(req, "range_end", jb64("\0", 1)); /* "\0": every key */
    else
        rc = json_object_set_new(req, "range_end", jb64(end, n));
    free(end);
    return rc ? -ENOMEM : 0;
}

static int kv_from_json(json_t *j, sl_etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    json_t *k = json_object_get(j, "key"), *v = json_object_get(j, "value");
    const char *ks = json_is_string(k) ? json_string_value(k) : "";
    const char *vs = json_is_string(v) ? json_string_value(v) : "";
    kv->key = b64_decode(ks, strlen(ks), &kv->key_len);
    kv->value = b64_decode(vs, strlen(vs), &kv->value_len);
    if (!kv->key || !kv->value) {
        free(kv->key);
        free(kv->value);
        kv->key = kv->value = NULL;
        return -EPROTO;
    }
    kv->create_revision = jint(j, "create_revision");
    kv->mod_revision = jint(j, "mod_revision");
    kv->version = jint(j, "version");
    kv->lease = jint(j, "lease");
    return 0;
}

void sl_etcd_kvs_free(sl_etcd_kvs *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->kvs[i].key);
        free(r->kvs[i].value);
    }
    free(r->kvs);
    memset(r, 0, sizeof *r);
}

/* A range answer (a JSON object) into *out: 0, -EPROTO (a key or value that is not base64) or
 * -ENOMEM, *out then empty. */
static int range_from_json(json_t *resp, sl_etcd_kvs *out)
{
    out->revision = jint(json_object_get(resp, "header"), "revision");
    out->more = json_is_true(json_object_get(resp, "more"));
    json_t *kvs = json_object_get(resp, "kvs");
    size_t n = json_is_array(kvs) ? json_array_size(kvs) : 0;
    if (n) {
        out->kvs = calloc(n, sizeof *out->kvs);
        if (!out->kvs) {
            memset(out, 0, sizeof *out);
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            int rc = kv_from_json(json_array_get(kvs, i), &out->kvs[out->n]);
            if (rc) {
                sl_etcd_kvs_free(out);
                return rc;
            }
            out->n++;
        }
    }
    return 0;
}

int sl_etcd_range_decode(const char *body, size_t len, sl_etcd_kvs *out)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    json_t *j = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        return -EPROTO;
    }
    int rc = range_from_json(j, out);
    json_decref(j);
    return rc;
}

int sl_etcd_split_endpoints(char *list, const char **out, size_t max)
{
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(list, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (n == max)
            return -EINVAL;
        out[n++] = t;
    }
    return n ? (int)n : -EINVAL;
}

/* ---------------------------------------------------------------- lifecycle */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void sl_etcd_cli_defaults(const char **addrs, const char **root)
{
    *addrs = getenv("SLUICE_STORAGE_ADDRS");
    *root = getenv("SLUICE_STORAGE_PREFIX");
    if (!*addrs || !**addrs)
        *addrs = "http://127.0.0.1:2379";
    if (!*root || !**root)
        *root = "/sluice";
}

int sl_etcd_new_from_list(const char *list, long timeout_ms, sl_etcd **out)
{
    char *copy = strdup(list);
    if (!copy)
        return -ENOMEM;
    const char *eps[SL_ETCD_MAX_ENDPOINTS];
    int n = sl_etcd_split_endpoints(copy, eps, SL_ETCD_MAX_ENDPOINTS);
    int rc = -EINVAL;
    if (n > 0) {
        sl_etcd_config ec = {.endpoints = eps, .n_endpoints = (size_t)n,
                             .request_timeout_ms = timeout_ms > 0 ? timeout_ms : 5000};
        rc = sl_etcd_new(&ec, out);
    }
    free(copy);
    return rc;
}

int sl_etcd_new(const sl_etcd_config *cfg, sl_etcd **out)
{
    if (!cfg || cfg->n_endpoints == 0 || cfg->n_endpoints > SL_ETCD_MAX_ENDPOINTS)
        return -EINVAL;
    pthread_once(&curl_once, curl_init_once);
    sl_etcd *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    for (size_t i = 0; i < cfg->n_endpoints; i++) {
        const char *s = cfg->endpoints[i];
        size_t l = strlen(s);
        while (l && s[l - 1] == '/')
            l--;
        e->endpoints[i] = strndup(s, l);
        if (!e->endpoints[i] || l == 0) {
            e->n = i + 1;
            sl_etcd_free(e);
            return l == 0 ? -EINVAL : -ENOMEM;
        }
    }
    e->n = cfg->n_endpoints;
    e->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 1000;
    e->request_timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 5000;
    e->max_response = cfg->max_response ? cfg->max_response : SL_ETCD_DEFAULT_MAX_RESPONSE;
    const char *tls[3] = {cfg->tls.ca_file, cfg->tls.cert_file, cfg->tls.key_file};
    for (int i = 0; i < 3; i++)
        if (tls[i] && tls[i][0] && !(e->tls[i] = strdup(tls[i]))) {
            sl_etcd_free(e);
            return -ENOMEM;
        }
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->info_mu, NULL);
    e->curl = curl_easy_init();
    if (!e->curl) {
        sl_etcd_free(e);
        return -ENOMEM;
    }
    *out = e;
    return 0;
}

void sl_etcd_free(sl_etcd *e)
{
    if (!e)
        return;
    if (e->curl)
        curl_easy_cleanup(e->curl);
    for (size_t i = 0; i < e->n; i++)
        free(e->endpoints[i]);
    for (int i = 0; i < 3; i++)
        free(e->tls[i]);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->info_mu);
    free(e);
}

/* ---------------------------------------------------------------- unary calls */

typedef struct body {
    char *p;
    size_t len, cap, max;
    bool overflow;
} body;

static size_t body_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    body *b = ud;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->max) {
        b->overflow = true;
        return 0;
    }
    if (sl_grow(&b->p, &b->cap, b->len, n + 1, 4096, 0))
        return 0;
    memcpy(b->p + b->len, ptr, n);
    b->len += n;
    b->p[b->len] = 0;
    return n;
}

static int curl_errno(CURLcode c)
{
    switch (c) {
    case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
    case CURLE_WRITE_ERROR: return -EMSGSIZE;
    case CURLE_OUT_OF_MEMORY: return -ENOMEM;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: return -ECONNREFUSED;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return -EINVAL;
    default: return -ECONNRESET;
    }
}

/* gRPC status codes the gateway puts in "code" that callers tell apart. */
static int grpc_errno(int64_t code)
{
    switch (code) {
    case 3: return -EINVAL;  /* INVALID_ARGUMENT */
    case 5: return -ENOENT;  /* NOT_FOUND (a lease) */
    case 11: return -ERANGE; /* OUT_OF_RANGE (a compacted revision) */
    default: return -EIO;
    }
}

static void common_opts(sl_etcd *e, CURL *c)
{
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)e->connect_timeout_ms);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 10L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    if (e->tls[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, e->tls[0]);
    if (e->tls[1])
        curl_easy_setopt(c, CURLOPT_SSLCERT, e->tls[1]);
    if (e->tls[2])
        curl_easy_setopt(c, CURLOPT_SSLKEY, e->tls[2]);
}

/* No "Expect: 100-continue" on larger bodies: it would cost a round trip per call. */
static struct curl_slist *json_headers(void)
{
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;
    return h2 ? h2 : h;
}

/* POST `req` to `path` on the current endpoint, failing over; *resp gets the parsed answer. */
static int call(sl_etcd *e, const char *path, json_t *req, json_t **resp)
{
    char *payload = json_dumps(req, JSON_COMPACT);
    if (!payload)
        return -ENOMEM;
    int rc = -ECONNREFUSED;
    char url[512];
    struct curl_slist *hdrs = json_headers();
    pthread_mutex_lock(&e->mu);
    size_t start = atomic_load(&e->cur) % e->n;
    for (size_t a = 0; a < e->n; a++) {
        size_t ep = (start + a) % e->n;
        snprintf(url, sizeof url, "%s%s", e->endpoints[ep], path);
        body b = {.max = e->max_response};
        CURL *c = e->curl;
        curl_easy_reset(c);
        common_opts(e, c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->request_timeout_ms);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (cc != CURLE_OK) {
            rc = b.overflow ? -EMSGSIZE : curl_errno(cc);
            set_error(e, "%s: %s", url, curl_easy_strerror(cc));
            free(b.p);
            if (rc == -EMSGSIZE || rc == -ENOMEM || rc == -EINVAL)
                break;
            continue;
        }
        json_error_t jerr;
        json_t *j = b.p ? json_loadb(b.p, b.len, 0, &jerr) : NULL;
        free(b.p);
        if (status >= 200 && status < 300) {
            if (!json_is_object(j)) {
                json_decref(j);
                set_error(e, "%s: %s", url, "answer is not a JSON object");
                rc = -EPROTO;
                break;
            }
            if (a > 0) {
                atomic_store(&e->cur, ep);
                atomic_fetch_add(&e->failovers, 1);
            }
            *resp = j;
            rc = 0;
            break;
        }
        json_t *msg = json_object_get(j, "message");
        if (!json_is_string(msg))
            msg = json_object_get(j, "error");
        char sbuf[32];
        snprintf(sbuf, sizeof sbuf, "HTTP %ld", status);
        set_error(e, "%s: %s", url, json_is_string(msg) ? json_string_value(msg) : sbuf);
        rc = status >= 500 ? -ECONNREFUSED : grpc_errno(jint(j, "code"));
        json_decref(j);
        if (status < 500)
            break; /* the request itself is wrong: another endpoint answers the same */
    }
    pthread_mutex_unlock(&e->mu);
    curl_slist_free_all(hdrs);
    free(payload);
    return rc;
}

int sl_etcd_range(sl_etcd *e, const char *key, size_t key_len, bool prefix, int64_t limit,
                  bool keys_only, sl_etcd_kvs *out)
{
    memset(out, 0, sizeof *out);
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = set_range(req, key, key_len, prefix);
    if (!rc && limit > 0)
        rc = json_object_set_new(req, "limit", jint64(limit)) ? -ENOMEM : 0;
    if (!rc && keys_only)
        rc = json_object_set_new(req, "keys_only", json_true()) ? -ENOMEM : 0;
    if (!rc)
        rc = call(e, "/v3/kv/range", req, &resp);
    json_decref(req);
    if (rc)
        return rc;
    rc = range_from_json(resp, out);
    json_decref(resp);
    return rc;
}

int sl_etcd_put(sl_etcd *e, const char *key, size_t key_len, const char *val, size_t val_len,
                int64_t lease, int64_t *revision)
{
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = 0;
    if (json_object_set_new(req, "key", jb64(key, key_len)) ||
        json_object_set_new(req, "value", jb64(val, val_len)) ||
        (lease && json_object_set_new(req, "lease", jint64(lease))))
        rc = -ENOMEM;
    if (!rc)
        rc = call(e, "/v3/kv/put", req, &resp);
    json_decref(req);
    if (rc)
        return rc;
    if (revision)
        *revision = jint(json_object_get(resp, "header"), "revision");
    json_decref(resp);
    return 0;
}

int sl_etcd_delete(sl_etcd *e, const char *key, size_t key_len, bool prefix, int64_t *deleted,
                   int64_t *revision)
{
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = set_range(req, key, key_len, prefix);
    if (!rc)
        rc = call(e, "/v3/kv/deleterange", req, &resp);
    json_decref(req);
    if (rc)
        return rc;
    if (deleted)
        *deleted = jint(resp, "deleted");
    if (revision)
        *revision = jint(json_object_get(resp, "header"), "revision");
    json_decref(resp);
    return 0;
}

int sl_etcd_compact(sl_etcd *e, int64_t revision)
{
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = json_object_set_new(req, "revision", jint64(revision)) ? -ENOMEM : 0;
    if (!rc)
        rc = call(e, "/v3/kv/compaction", req, &resp);
    json_decref(req);
    json_decref(resp);
    return rc;
}

int sl_etcd_lease_grant(sl_etcd *e, int64_t ttl_s, int64_t id, int64_t *id_out,
                        int64_t *ttl_out)
{
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = 0;
    if (json_object_set_new(req, "TTL", jint64(ttl_s)) ||
        (id && json_object_set_new(req, "ID", jint64(id))))
        rc = -ENOMEM;
    if (!rc)
        rc = call(e, "/v3/lease/grant", req, &resp);
    json_decref(req);
    if (rc)
        return rc;
    if (id_out)
        *id_out = jint(resp, "ID");
    if (ttl_out)
        *ttl_out = jint(resp, "TTL");
    json_decref(resp);
    return 0;
}

int sl_etcd_lease_keepalive(sl_etcd *e, int64_t id, int64_t *ttl_out)
{
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = json_object_set_new(req, "ID", jint64(id)) ? -ENOMEM : 0;
    if (!rc)
        rc = call(e, "/v3/lease/keepalive", req, &resp);
    json_decref(req);
    if (rc)
        return rc;
    /* keepalive is a stream on the gRPC side: the gateway wraps its one answer in "result" */
    json_t *r = json_object_get(resp, "result");
    int64_t ttl = jint(r ? r : resp, "TTL");
    json_decref(resp);
    if (ttl_out)
        *ttl_out = ttl;
    return ttl > 0 ? 0 : -ENOENT;
}

int sl_etcd_lease_revoke(sl_etcd *e, int64_t id)
{
    json_t *req = json_object(), *resp = NULL;
    if (!req)
        return -ENOMEM;
    int rc = json_object_set_new(req, "ID", jint64(id)) ? -ENOMEM : 0;
    if (!rc)
        rc = call(e, "/v3/lease/revoke", req, &resp);
    json_decref(req);
    json_decref(resp);
    return rc;
}

/* ---------------------------------------------------------------- watch */

int sl_etcd_watch_new(sl_etcd *e, sl_etcd_watch **out)
{
    sl_etcd_watch *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->e = e;
    w->multi = curl_multi_init();
    if (!w->multi) {
        free(w);
        return -ENOMEM;
    }
    atomic_init(&w->stop, false);
    *out = w;
    return 0;
}

void sl_etcd_watch_free(sl_etcd_watch *w)
{
    if (!w)
        return;
    curl_multi_cleanup(w->multi);
    free(w);
}

void sl_etcd_watch_stop(sl_etcd_watch *w)
{
    atomic_store(&w->stop, true);
    curl_multi_wakeup(w->multi);
}

static void free_events(sl_etcd_event *ev, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(ev[i].kv.key);
        free(ev[i].kv.value);
    }
    free(ev);
}

void sl_etcd_stream_init(sl_etcd_stream *st, size_t max, sl_etcd_watch_cb cb, void *ud)
{
    memset(st, 0, sizeof *st);
    st->max = max ? max : SL_ETCD_DEFAULT_MAX_RESPONSE;
    st->cb = cb;
    st->ud = ud;
}

void sl_etcd_stream_free(sl_etcd_stream *st)
{
    free(st->line);
    st->line = NULL;
    st->len = st->cap = 0;
}

/* One complete line of the stream. Returns 0 to go on, or the value to end the watch with. */
static int watch_message(sl_etcd_stream *st, const char *s, size_t len)
{
    json_error_t jerr;
    json_t *j = json_loadb(s, len, 0, &jerr);
    if (!json_is_object(j)) {
        json_decref(j);
        snprintf(st->err, sizeof st->err, "watch: a message is not JSON");
        return -EPROTO;
    }
    json_t *r = json_object_get(j, "result");
    if (!json_is_object(r)) {
        json_t *er = json_object_get(j, "error");
        json_t *m = json_is_object(er) ? json_object_get(er, "message") : json_object_get(j, "message");
        snprintf(st->err, sizeof st->err, "watch: %s",
                 json_is_string(m) ? json_string_value(m)
                 : json_is_string(er) ? json_string_value(er) : "error from etcd");
        json_decref(j);
        return -EIO;
    }
    sl_etcd_watch_msg msg = {0};
    msg.revision = jint(json_object_get(r, "header"), "revision");
    msg.created = json_is_true(json_object_get(r, "created"));
    msg.canceled = json_is_true(json_object_get(r, "canceled"));
    msg.compact_revision = jint(r, "compact_revision");
    json_t *evs = json_object_get(r, "events");
    size_t n = json_is_array(evs) ? json_array_size(evs) : 0;
    sl_etcd_event *ev = n ? calloc(n, sizeof *ev) : NULL;
    if (n && !ev) {
        json_decref(j);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(evs, i);
        json_t *t = json_object_get(x, "type");
        ev[i].type = json_is_string(t) && !strcmp(json_string_value(t), "DELETE") ? SL_ETCD_DELETE
                                                                                 : SL_ETCD_PUT;
        if (kv_from_json(json_object_get(x, "kv"), &ev[i].kv)) {
            free_events(ev, i);
            json_decref(j);
            snprintf(st->err, sizeof st->err, "watch: bad base64 in an event");
            return -EPROTO;
        }
    }
    json_decref(j);
    msg.events = ev;
    msg.n_events = n;
    int rc = st->cb(st->ud, &msg); /* before `created` is set: cb can tell the first */
    if (msg.created)
        st->created = true;
    free_events(ev, n);
    if (rc)
        return rc;
    if (msg.canceled) {
        snprintf(st->err, sizeof st->err, "watch canceled by etcd (compact revision %lld)",
                 (long long)msg.compact_revision);
        return msg.compact_revision ? -ERANGE : -EIO;
    }
    return 0;
}

int sl_etcd_stream_feed(sl_etcd_stream *st, const char *p, size_t n)
{
    if (st->result)
        return st->result;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(p + i, '\n', n - i);
        size_t take = nl ? (size_t)(nl - (p + i)) : n - i;
        if (take) {
            int rc = 0;
            if (st->len + take + 1 > st->max)
                rc = -EMSGSIZE;
            else if (sl_grow(&st->line, &st->cap, st->len, take + 1, 4096, 0))
                rc = -ENOMEM;
            if (rc) {
                snprintf(st->err, sizeof st->err, "watch: message too large or out of memory");
                return st->result = rc;
            }
            memcpy(st->line + st->len, p + i, take);
            st->len += take;
            st->line[st->len] = 0;
        }
        i += take;
        if (nl) {
            i++;
            if (st->len) {
                int rc = watch_message(st, st->line, st->len);
                st->len = 0;
                if (rc)
                    return st->result = rc;
            }
        }
    }
    return 0;
}

typedef struct wstate {
    sl_etcd_watch *w;
    sl_etcd_stream st;  /* the stream's decoder, calling deliver */
    sl_etcd_watch_cb cb;
    void *ud;
    size_t ep;          /* the endpoint this stream runs on */
    bool moved;         /* it is not the one the run started from */
} wstate;

/* A message of the stream: the first "created" makes this endpoint the current one. */
static int deliver(void *ud, const sl_etcd_watch_msg *msg)
{
    wstate *ws = ud;
    if (msg->created && !ws->st.created) {
        if (ws->moved) {
            atomic_store(&ws->w->e->cur, ws->ep);
            atomic_fetch_add(&ws->w->e->failovers, 1);
        }
    }
    return ws->cb(ws->ud, msg);
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    wstate *ws = ud;
    size_t n = size * nmemb;
    return sl_etcd_stream_feed(&ws->st, ptr, n) ? 0 : n; /* 0 aborts the transfer */
}

static int xfer_check(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    sl_etcd_watch *w = ud;
    return atomic_load(&w->stop) ? 1 : 0;
}

int sl_etcd_watch_run(sl_etcd_watch *w, const char *key, size_t key_len, bool prefix,
                      int64_t start_revision, sl_etcd_watch_cb cb, void *ud)
{
    sl_etcd *e = w->e;
    if (atomic_load(&w->stop))
        return -ECANCELED;
    json_t *req = json_object(), *cr = json_object();
    if (!req || !cr || json_object_set_new(req, "create_request", cr)) {
        json_decref(req);
        return -ENOMEM;
    }
    int rc = set_range(cr, key, key_len, prefix);
    if (!rc && start_revision > 0)
        rc = json_object_set_new(cr, "start_revision", jint64(start_revision)) ? -ENOMEM : 0;
    char *payload = rc ? NULL : json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!payload)
        return rc ? rc : -ENOMEM;

    struct curl_slist *hdrs = json_headers();
    size_t start = atomic_load(&e->cur) % e->n;
    rc = -ECONNREFUSED;
    for (size_t a = 0; a < e->n; a++) {
        size_t ep = (start + a) % e->n;
        char url[512];
        snprintf(url, sizeof url, "%s/v3/watch", e->endpoints[ep]);
        wstate ws = {.w = w, .cb = cb, .ud = ud, .ep = ep, .moved = a > 0};
        sl_etcd_stream_init(&ws.st, e->max_response, deliver, &ws);
        CURL *c = curl_easy_init();
        if (!c) {
            rc = -ENOMEM;
            break;
        }
        common_opts(e, c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &ws);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, xfer_check);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
        curl_multi_add_handle(w->multi, c);
        CURLcode done = CURLE_OK;
        bool finished = false;
        while (!finished) {
            int running = 0;
            curl_multi_perform(w->multi, &running);
            int left;
            CURLMsg *m;
            while ((m = curl_multi_info_read(w->multi, &left)))
                if (m->msg == CURLMSG_DONE) {
                    done = m->data.result;
                    finished = true;
                }
            if (finished || atomic_load(&w->stop))
                break;
            curl_multi_poll(w->multi, NULL, 0, 1000, NULL);
        }
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_multi_remove_handle(w->multi, c);
        curl_easy_cleanup(c);
        sl_etcd_stream_free(&ws.st);
        if (atomic_load(&w->stop)) {
            rc = -ECANCELED;
            break;
        }
        if (ws.st.result) {
            rc = ws.st.result;
            set_error(e, "%s: %s", url, ws.st.err);
            if (ws.st.created || rc != -EIO || status < 500)
                break;
            continue; /* the gateway answered an error before the watch began: try another */
        }
        if (ws.st.created) {
            /* the stream was up and ended: the endpoint went away or closed it */
            set_error(e, "%s: %s", url,
                      done == CURLE_OK ? "watch stream closed" : curl_easy_strerror(done));
            rc = -ECONNRESET;
            break;
        }
        rc = done == CURLE_OK ? -EPROTO : curl_errno(done);
        if (done == CURLE_OK && status >= 500)
            rc = -ECONNREFUSED;
        set_error(e, "%s: %s", url,
                  done == CURLE_OK ? "watch ended before it was created" : curl_easy_strerror(done));
        if (rc == -EMSGSIZE || rc == -ENOMEM || rc == -EINVAL)
            break;
    }
    if (rc == 0)
        rc = -EPROTO;
    curl_slist_free_all(hdrs);
    free(payload);
    return rc;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes discovery (see k8s.h): the list/watch protocol of the Kubernetes API over
 * EndpointSlices or Pods, as a pure member set fed by JSON answers (jansson), and the source
 * thread that fetches those answers with libcurl (a multi handle, so sl_k8s_stop can wake a watch
 * that is waiting for the next event).
 */
#include "ctlplane/k8s.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/file.h"
#include "base/grow.h"
#include "runtime/stopwait.h"

struct sl_k8s_obj {
    char *name;
    char **addrs;
    size_t n;
};

/* ---- the pure half ---------------------------------------------------------------------------- */

void sl_k8s_set_init(sl_k8s_set *s, sl_k8s_mode mode, const char *port_name, int port,
                     size_t max_bytes)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    snprintf(s->port_name, sizeof s->port_name, "%s", port_name && *port_name ? port_name : "grpc");
    s->port = port;
    s->max_bytes = max_bytes ? max_bytes : SL_K8S_MAX_BYTES_DEFAULT;
    sl_strbuf_init(&s->line, s->max_bytes + 1);
}

static void obj_free(sl_k8s_obj *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->addrs[i]);
    free(o->addrs);
    free(o->name);
    memset(o, 0, sizeof *o);
}

static void objs_free(sl_k8s_obj *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        obj_free(&v[i]);
    free(v);
}

void sl_k8s_set_free(sl_k8s_set *s)
{
    objs_free(s->objs, s->n);
    sl_strbuf_free(&s->line);
    memset(s, 0, sizeof *s);
}

static const char *jstr(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* An address from the API: an IP or a DNS name, nothing that could smuggle anything else. */
static bool addr_ok(const char *a)
{
    size_t n = strlen(a);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '.' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

static int add_addr(sl_k8s_obj *o, const char *ip, int port)
{
    if (!addr_ok(ip) || port <= 0 || port > 65535)
        return 0; /* not a usable peer: skipped */
    if (o->n >= SL_K8S_MAX_OBJECTS)
        return -EMSGSIZE;
    char buf[300];
    if (strchr(ip, ':'))
        snprintf(buf, sizeof buf, "[%s]:%d", ip, port);
    else
        snprintf(buf, sizeof buf, "%s:%d", ip, port);
    char **v = realloc(o->addrs, (o->n + 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    o->addrs = v;
    if (!(v[o->n] = strdup(buf)))
        return -ENOMEM;
    o->n++;
    return 0;
}

static int int_port(json_t *v)
{
    if (!json_is_integer(v))
        return 0;
    json_int_t p = json_integer_value(v);
    return p > 0 && p <= 65535 ? (int)p : 0;
}

/* The port of an EndpointSlice: --k8s-port, or the port named --k8s-port-name. 0: none. */
static int slice_port(const sl_k8s_set *s, json_t *slice)
{
    if (s->port > 0)
        return s->port;
    json_t *ports = json_object_get(slice, "ports");
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p) {
        const char *name = jstr(p, "name");
        if (name && strcmp(name, s->port_name) == 0)
            return int_port(json_object_get(p, "port"));
    }
    return 0;
}

static int parse_slice(const sl_k8s_set *s, json_t *slice, sl_k8s_obj *o)
{
    int port = slice_port(s, slice);
    if (!port)
        return 0;
    json_t *eps = json_object_get(slice, "endpoints");
    if (eps && !json_is_array(eps) && !json_is_null(eps))
        return -EPROTO;
    size_t i;
    json_t *ep;
    json_array_foreach(eps, i, ep) {
        if (!json_is_object(ep))
            return -EPROTO;
        json_t *cond = json_object_get(ep, "conditions");
        /* the API: a ready condition left out means ready; terminating means leaving */
        json_t *ready = json_object_get(cond, "ready");
        if (json_is_false(ready) || json_is_true(json_object_get(cond, "terminating")))
            continue;
        json_t *addrs = json_object_get(ep, "addresses");
        if (!json_is_array(addrs))
            return -EPROTO;
        size_t j;
        json_t *a;
        json_array_foreach(addrs, j, a) {
            if (!json_is_string(a))
                return -EPROTO;
            int rc = add_addr(o, json_string_value(a), port);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int pod_port(const sl_k8s_set *s, json_t *pod)
{
    if (s->port > 0)
        return s->port;
    json_t *cs = json_object_get(json_object_get(pod, "spec"), "containers");
    size_t i, j;
    json_t *c, *p;
    json_array_foreach(cs, i, c) {
        json_array_foreach(json_object_get(c, "ports"), j, p) {
            const char *name = jstr(p, "name");
            if (name && strcmp(name, s->port_name) == 0)
                return int_port(json_object_get(p, "containerPort"));
        }
    }
    return 0;
}

static int parse_pod(const sl_k8s_set *s, json_t *pod, sl_k8s_obj *o)
{
    json_t *meta = json_object_get(pod, "metadata");
    json_t *del = json_object_get(meta, "deletionTimestamp");
    if (del && !json_is_null(del))
        return 0; /* terminating */
    json_t *status = json_object_get(pod, "status");
    const char *ip = jstr(status, "podIP");
    if (!ip)
        return 0;
    bool ready = false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c) {
        const char *t = jstr(c, "type"), *st = jstr(c, "status");
        if (t && st && strcmp(t, "Ready") == 0)
            ready = strcmp(st, "True") == 0;
    }
    if (!ready)
        return 0;
    int port = pod_port(s, pod);
    return port ? add_addr(o, ip, port) : 0;
}

/* Parse an object (slice or pod) into o (name and addresses). */
static int parse_obj(const sl_k8s_set *s, json_t *obj, sl_k8s_obj *o)
{
    memset(o, 0, sizeof *o);
    if (!json_is_object(obj))
        return -EPROTO;
    const char *name = jstr(json_object_get(obj, "metadata"), "name");
    if (!name || !*name || strlen(name) > 253)
        return -EPROTO;
    if (!(o->name = strdup(name)))
        return -ENOMEM;
    int rc = s->mode == SL_K8S_PODS ? parse_pod(s, obj, o) : parse_slice(s, obj, o);
    if (rc)
        obj_free(o);
    return rc;
}

/* Copy a resourceVersion from metadata: 0, or -EPROTO when it is missing (when required) or
 * too long. */
static int take_rv(char *rv, json_t *obj, bool required)
{
    const char *v = jstr(json_object_get(obj, "metadata"), "resourceVersion");
    if (!v)
        return required ? -EPROTO : 0;
    size_t n = strlen(v);
    if (n == 0 || n >= 64)
        return -EPROTO;
    memcpy(rv, v, n + 1);
    return 0;
}

static json_t *load(const sl_k8s_set *s, const char *json, size_t len, int *rc)
{
    if (len > s->max_bytes) {
        *rc = -EMSGSIZE;
        return NULL;
    }
    json_error_t e;
    json_t *root = json_loadb(json, len, 0, &e);
    *rc = json_is_object(root) ? 0 : -EPROTO;
    if (*rc) {
        json_decref(root);
        return NULL;
    }
    return root;
}

int sl_k8s_set_list(sl_k8s_set *s, const char *json, size_t len)
{
    int rc;
    json_t *root = load(s, json, len, &rc);
    if (!root)
        return rc;
    char rv[64] = "";
    json_t *items = json_object_get(root, "items");
    sl_k8s_obj *v = NULL;
    size_t n = 0;
    if ((rc = take_rv(rv, root, true)))
        goto out;
    if (!json_is_array(items) && !json_is_null(items)) {
        rc = -EPROTO;
        goto out;
    }
    size_t cnt = json_array_size(items);
    if (cnt > SL_K8S_MAX_OBJECTS) {
        rc = -EMSGSIZE;
        goto out;
    }
    if (!(v = calloc(cnt ? cnt : 1, sizeof *v))) {
        rc = -ENOMEM;
        goto out;
    }
    for (; n < cnt; n++)
        if ((rc = parse_obj(s, json_array_get(items, n), &v[n])))
            goto out;
    objs_free(s->objs, s->n);
    s->objs = v;
    s->n = s->cap = cnt;
    v = NULL;
    memcpy(s->rv, rv, sizeof rv);
    sl_strbuf_reset(&s->line);
    sl_strbuf_clear_error(&s->line);
    rc = SL_K8S_CHANGED;
out:
    objs_free(v, n);
    json_decref(root);
    return rc;
}

static sl_k8s_obj *find(sl_k8s_set *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->objs[i].name, name) == 0)
            return &s->objs[i];
    return NULL;
}

static bool same_addrs(const sl_k8s_obj *a, const sl_k8s_obj *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->addrs[i], b->addrs[i]) != 0)
            return false;
    return true;
}

static int upsert(sl_k8s_set *s, sl_k8s_obj *o)
{
    sl_k8s_obj *old = find(s, o->name);
    if (old) {
        bool same = same_addrs(old, o);
        obj_free(old);
        *old = *o;
        return same ? 0 : SL_K8S_CHANGED;
    }
    if (s->n >= SL_K8S_MAX_OBJECTS) {
        obj_free(o);
        return -EMSGSIZE;
    }
    if (sl_grow(&s->objs, &s->cap, s->n, 1, 8, SL_K8S_MAX_OBJECTS)) {
        obj_free(o);
        return -ENOMEM;
    }
    s->objs[s->n++] = *o;
    return o->n ? SL_K8S_CHANGED : 0;
}

static int remove_obj(sl_k8s_set *s, const char *name)
{
    sl_k8s_obj *o = find(s, name);
    if (!o)
        return 0;
    bool had = o->n > 0;
    obj_free(o);
    *o = s->objs[--s->n];
    return had ? SL_K8S_CHANGED : 0;
}

int sl_k8s_set_event(sl_k8s_set *s, const char *json, size_t len)
{
    int rc;
    json_t *root = load(s, json, len, &rc);
    if (!root)
        return rc;
    const char *type = jstr(root, "type");
    json_t *obj = json_object_get(root, "object");
    char rv[64] = "";
    rc = -EPROTO;
    if (!type || !json_is_object(obj))
        goto out;
    if (strcmp(type, "ERROR") == 0) {
        /* a Status: 410 Gone (Expired) says our resourceVersion is too old */
        json_t *code = json_object_get(obj, "code");
        rc = json_is_integer(code) && json_integer_value(code) == 410 ? SL_K8S_GONE : -EPROTO;
        goto out;
    }
    if ((rc = take_rv(rv, obj, true)))
        goto out;
    if (strcmp(type, "BOOKMARK") == 0) {
        rc = 0;
    } else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
        sl_k8s_obj o;
        if ((rc = parse_obj(s, obj, &o)))
            goto out;
        rc = upsert(s, &o);
    } else if (strcmp(type, "DELETED") == 0) {
        const char *name = jstr(json_object_get(obj, "metadata"), "name");
        rc = name ? remove_obj(s, name) : -EPROTO;
    } else {
        rc = -EPROTO;
    }
    if (rc >= 0)
        memcpy(s->rv, rv, sizeof rv);
out:
    json_decref(root);
    return rc;
}

static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\r' && p[i] != '\t')
            return false;
    return true;
}

int sl_k8s_set_feed(sl_k8s_set *s, const char *data, size_t n)
{
    int result = 0;
    while (n) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (sl_strbuf_append(&s->line, data, take))
            return -EMSGSIZE;
        data += take;
        n -= take;
        if (!nl)
            break;
        data++;
        n--;
        const char *line = sl_strbuf_str(&s->line);
        size_t len = sl_strbuf_len(&s->line);
        int rc = blank(line, len) ? 0 : sl_k8s_set_event(s, line, len);
        sl_strbuf_reset(&s->line);
        if (rc < 0 || rc == SL_K8S_GONE)
            return rc;
        if (rc == SL_K8S_CHANGED)
            result = SL_K8S_CHANGED;
    }
    return result;
}

int sl_k8s_set_addrs(const sl_k8s_set *s, char ***out)
{
    size_t total = 0;
    for (size_t i = 0; i < s->n; i++)
        total += s->objs[i].n;
    char **v = calloc(total ? total : 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        for (size_t j = 0; j < s->objs[i].n; j++) {
            if (!(v[k] = strdup(s->objs[i].addrs[j]))) {
                while (k)
                    free(v[--k]);
                free(v);
                return -ENOMEM;
            }
            k++;
        }
    *out = v;
    return (int)k;
}

int64_t sl_k8s_backoff_ms(unsigned attempt, uint32_t rnd)
{
    int64_t d = SL_K8S_BACKOFF_MIN_MS;
    for (unsigned i = 0; i < attempt && d < SL_K8S_BACKOFF_MAX_MS; i++)
        d *= 2;
    if (d > SL_K8S_BACKOFF_MAX_MS)
        d = SL_K8S_BACKOFF_MAX_MS;
    return d - (int64_t)(rnd % (uint32_t)(d / 4 + 1));
}

/* Append s percent-encoded (everything but RFC 3986 unreserved characters). */
static void put_enc(sl_strbuf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
            c == '-' || c == '.' || c == '_' || c == '~') {
            sl_strbuf_putc(b, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            sl_strbuf_append(b, e, 3);
        }
    }
}

int sl_k8s_path(char *out, size_t cap, sl_k8s_mode mode, const char *ns, const char *service,
                const char *selector, int watch, const char *rv, int64_t timeout_s)
{
    sl_strbuf b;
    sl_strbuf_init_fixed(&b, out, cap);
    if (mode == SL_K8S_PODS)
        sl_strbuf_puts(&b, "/api/v1/namespaces/");
    else
        sl_strbuf_puts(&b, "/apis/discovery.k8s.io/v1/namespaces/");
    put_enc(&b, ns);
    if (mode == SL_K8S_PODS) {
        sl_strbuf_puts(&b, "/pods?labelSelector=");
        put_enc(&b, selector);
    } else {
        sl_strbuf_puts(&b, "/endpointslices?labelSelector=");
        put_enc(&b, "kubernetes.io/service-name=");
        put_enc(&b, service);
    }
    if (watch) {
        sl_strbuf_puts(&b, "&watch=1&allowWatchBookmarks=true");
        if (rv && *rv) {
            sl_strbuf_puts(&b, "&resourceVersion=");
            put_enc(&b, rv);
        }
        sl_strbuf_printf(&b, "&timeoutSeconds=%lld", (long long)timeout_s);
    }
    if (sl_strbuf_error(&b))
        return -ENAMETOOLONG;
    return (int)sl_strbuf_len(&b);
}

/* ---- the source ------------------------------------------------------------------------------- */

#define MAX_TOKEN 65536

struct sl_k8s {
    sl_logger *log;
    sl_k8s_fn fn;
    void *ud;
    char *api, *ns, *service, *selector, *token_file, *ca_file;
    bool has_ca;
    sl_k8s_config cfg;
    sl_k8s_set set;
    CURLM *multi;
    pthread_t th;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_bool stop;
    /* bearer token, read again when its file changes */
    char *token;
    struct stat token_st;
    /* one transfer */
    sl_strbuf body;   /* list answer, or the body of a failed watch */
    bool watching;
    int feed_rc;      /* first error or SL_K8S_GONE of a watch stream */
    bool got_event;
    uint32_t rnd;
};

/* Wait up to ms or until stopped. Returns true when stopped. */
static bool wait_ms(sl_k8s *k, int64_t ms)
{
    return sl_stopwait_ms(&k->mu, &k->cv, CLOCK_REALTIME, &k->stop, ms);
}

static void report(sl_k8s *k)
{
    char **v = NULL;
    int n = sl_k8s_set_addrs(&k->set, &v);
    if (n < 0)
        return;
    k->fn(k->ud, v, (size_t)n);
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Read the token again if its file changed (rotation). No file: no token (kubectl proxy). */
static void refresh_token(sl_k8s *k)
{
    struct stat st;
    if (stat(k->token_file, &st) != 0) {
        free(k->token);
        k->token = NULL;
        return;
    }
    if (k->token && st.st_ino == k->token_st.st_ino && st.st_size == k->token_st.st_size &&
        st.st_mtim.tv_sec == k->token_st.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == k->token_st.st_mtim.tv_nsec)
        return;
    char *t = NULL;
    size_t len = 0;
    char err[256];
    int rc = sl_file_read(k->token_file, MAX_TOKEN, 0, &t, &len, err, sizeof err);
    if (rc) {
        sl_log_warn(k->log, "k8s: cannot read the token: %s", err);
        return;
    }
    while (len && (t[len - 1] == '\n' || t[len - 1] == '\r' || t[len - 1] == ' '))
        t[--len] = '\0';
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] < 0x21 || (unsigned char)t[i] > 0x7e) {
            sl_log_warn(k->log, "k8s: the token file %s holds a character a token cannot have",
                        k->token_file);
            free(t);
            return;
        }
    free(k->token);
    k->token = t;
    k->token_st = st;
    sl_log_info(k->log, "k8s: bearer token read from %s", k->token_file);
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
    CURL *h = ((void **)ud)[0];
    sl_k8s *k = ((void **)ud)[1];
    size_t n = size * nmemb;
    if (atomic_load(&k->stop))
        return 0;
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (!k->watching || code != 200)
        return sl_strbuf_append(&k->body, p, n) ? 0 : n; /* over the cap: abort */
    int rc = sl_k8s_set_feed(&k->set, p, n);
    if (rc == SL_K8S_CHANGED) {
        k->got_event = true;
        report(k);
    } else if (rc < 0 || rc == SL_K8S_GONE) {
        k->feed_rc = rc;
        return 0;
    } else if (n) {
        k->got_event = true;
    }
    return n;
}

/* One request. Returns the HTTP status (0 when none came), *cres the transfer's result. */
static long request(sl_k8s *k, const char *path, bool watch, CURLcode *cres)
{
    refresh_token(k);
    char url[4096];
    snprintf(url, sizeof url, "%s%s", k->api, path);
    CURL *h = curl_easy_init();
    if (!h) {
        *cres = CURLE_OUT_OF_MEMORY;
        return 0;
    }
    void *ud[2] = {h, k};
    struct curl_slist *hdr = curl_slist_append(NULL, "Accept: application/json");
    char auth[MAX_TOKEN + 32];
    if (k->token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", k->token);
        struct curl_slist *t = curl_slist_append(hdr, auth);
        if (t)
            hdr = t;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (k->has_ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, k->ca_file);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)k->cfg.request_timeout_ms);
    /* a watch waits for events: a peer that vanished without a FIN is found by keep-alives */
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 10L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     watch ? (long)(k->cfg.watch_timeout_s + 30) * 1000L
                           : (long)k->cfg.request_timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
    k->watching = watch;
    if (watch)
        sl_strbuf_reset(&k->set.line); /* a broken stream's partial event is not resumed */
    k->feed_rc = 0;
    k->got_event = false;
    sl_strbuf_reset(&k->body);
    sl_strbuf_clear_error(&k->body);
    *cres = CURLE_OK;
    curl_multi_add_handle(k->multi, h);
    int running = 1;
    while (running && !atomic_load(&k->stop)) {
        if (curl_multi_perform(k->multi, &running) != CURLM_OK)
            break;
        if (running)
            curl_multi_poll(k->multi, NULL, 0, 1000, NULL);
    }
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(k->multi, &left)))
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == h)
            *cres = msg->data.result;
    if (running)
        *cres = CURLE_ABORTED_BY_CALLBACK;
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_multi_remove_handle(k->multi, h);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    return code;
}

/* List and report. 0, or <0 (logged). */
static int do_list(sl_k8s *k)
{
    char path[2048];
    if (sl_k8s_path(path, sizeof path, k->set.mode, k->ns, k->service, k->selector, 0, NULL, 0) <
        0)
        return -ENAMETOOLONG;
    CURLcode cres;
    long code = request(k, path, false, &cres);
    if (atomic_load(&k->stop))
        return -ECANCELED;
    if (sl_strbuf_error(&k->body)) {
        sl_log_warn(k->log, "k8s: list answer larger than %zu bytes (--k8s-max-bytes)",
                    k->set.max_bytes);
        return -EMSGSIZE;
    }
    if (cres != CURLE_OK || code != 200) {
        sl_log_warn(k->log, "k8s: list failed: %s, HTTP %ld", curl_easy_strerror(cres), code);
        return -EIO;
    }
    int rc = sl_k8s_set_list(&k->set, sl_strbuf_str(&k->body), sl_strbuf_len(&k->body));
    if (rc < 0) {
        sl_log_warn(k->log, "k8s: bad list answer: %s", strerror(-rc));
        return rc;
    }
    sl_log_debug(k->log, "k8s: listed %zu objects at resourceVersion %s", k->set.n, k->set.rv);
    report(k);
    return 0;
}

/* Watch until the stream ends. 0: ended normally, after events or a second at least (resume
 * from the last resourceVersion at once);
 * SL_K8S_GONE: list again; <0: broken (back off, then resume); -EPROTO/-EMSGSIZE: list again
 * after a backoff. */
static int do_watch(sl_k8s *k)
{
    char path[2048];
    if (sl_k8s_path(path, sizeof path, k->set.mode, k->ns, k->service, k->selector, 1,
                    k->set.rv, k->cfg.watch_timeout_s) < 0)
        return -ENAMETOOLONG;
    CURLcode cres;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long code = request(k, path, true, &cres);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (atomic_load(&k->stop))
        return -ECANCELED;
    if (k->feed_rc == SL_K8S_GONE || code == 410) {
        sl_log_info(k->log, "k8s: resourceVersion %s expired (410 Gone), listing again", k->set.rv);
        return SL_K8S_GONE;
    }
    if (k->feed_rc < 0) {
        sl_log_warn(k->log, "k8s: bad watch event (%s), listing again", strerror(-k->feed_rc));
        return k->feed_rc;
    }
    if (code != 200) {
        sl_log_warn(k->log, "k8s: watch failed: %s, HTTP %ld", curl_easy_strerror(cres), code);
        return -EIO;
    }
    if (cres != CURLE_OK && cres != CURLE_OPERATION_TIMEDOUT) {
        sl_log_warn(k->log, "k8s: watch stream broke: %s", curl_easy_strerror(cres));
        return k->got_event ? -EAGAIN : -EIO;
    }
    /* a server that ends every watch at once must not make us spin: that is a failure too */
    if (!k->got_event && t1.tv_sec - t0.tv_sec < 1) {
        sl_log_warn(k->log, "k8s: the watch ended at once, without an event");
        return -EIO;
    }
    return 0;
}

static void *k8s_thread(void *arg)
{
    sl_k8s *k = arg;
    unsigned attempt = 0;
    bool need_list = true;
    while (!atomic_load(&k->stop)) {
        if (need_list) {
            if (do_list(k)) {
                k->rnd = k->rnd * 1103515245u + 12345u;
                if (wait_ms(k, sl_k8s_backoff_ms(attempt++, k->rnd >> 8)))
                    break;
                continue;
            }
            need_list = false;
            attempt = 0;
        }
        int rc = do_watch(k);
        if (rc == -ECANCELED)
            break;
        if (rc == 0)
            continue; /* the server ended the watch (timeoutSeconds): resume */
        if (rc == SL_K8S_GONE) {
            need_list = true;
            continue;
        }
        if (rc == -EPROTO || rc == -EMSGSIZE)
            need_list = true;
        if (rc == -EAGAIN)
            attempt = 0; /* the stream worked for a while: start the backoff over */
        k->rnd = k->rnd * 1103515245u + 12345u;
        if (wait_ms(k, sl_k8s_backoff_ms(attempt++, k->rnd >> 8)))
            break;
    }
    return NULL;
}

static void k8s_free(sl_k8s *k)
{
    if (k->multi)
        curl_multi_cleanup(k->multi);
    sl_k8s_set_free(&k->set);
    sl_strbuf_free(&k->body);
    free(k->token);
    free(k->api);
    free(k->ns);
    free(k->service);
    free(k->selector);
    free(k->token_file);
    free(k->ca_file);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    free(k);
}

static char *dup_or(const char *s, const char *def)
{
    return strdup(s && *s ? s : def);
}

/* The API address from the environment, as in-cluster clients find it. */
static char *api_from_env(void)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port || strlen(host) > 255 || strlen(port) > 5)
        return NULL;
    char buf[300];
    snprintf(buf, sizeof buf, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
             port);
    return strdup(buf);
}

static int read_namespace(sl_k8s *k)
{
    char *t = NULL;
    size_t len = 0;
    char err[256];
    int rc = sl_file_read(SL_K8S_SA_DIR "/namespace", 256, 0, &t, &len, err, sizeof err);
    if (rc) {
        sl_log_warn(k->log, "k8s: no --k8s-namespace and %s", err);
        return -EINVAL;
    }
    while (len && (t[len - 1] == '\n' || t[len - 1] == ' '))
        t[--len] = '\0';
    k->ns = t;
    return len ? 0 : -EINVAL;
}

int sl_k8s_start(const sl_k8s_config *cfg, sl_logger *log, sl_k8s_fn fn, void *ud,
                 sl_k8s **out)
{
    *out = NULL;
    bool svc = cfg->service && *cfg->service, sel = cfg->selector && *cfg->selector;
    if (!fn || svc == sel)
        return -EINVAL;
    sl_k8s *k = calloc(1, sizeof *k);
    if (!k)
        return -ENOMEM;
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    k->log = log;
    k->fn = fn;
    k->ud = ud;
    k->cfg = *cfg;
    if (!k->cfg.watch_timeout_s)
        k->cfg.watch_timeout_s = 300;
    if (!k->cfg.request_timeout_ms)
        k->cfg.request_timeout_ms = 10000;
    sl_k8s_set_init(&k->set, sel ? SL_K8S_PODS : SL_K8S_SLICES, cfg->port_name, cfg->port,
                    cfg->max_bytes);
    sl_strbuf_init(&k->body, k->set.max_bytes + 1);
    k->rnd = (uint32_t)(uintptr_t)k ^ (uint32_t)time(NULL);
    int rc = -ENOMEM;
    k->api = cfg->api && *cfg->api ? strdup(cfg->api) : api_from_env();
    k->service = dup_or(cfg->service, "");
    k->selector = dup_or(cfg->selector, "");
    k->token_file = dup_or(cfg->token_file, SL_K8S_SA_DIR "/token");
    k->ca_file = dup_or(cfg->ca_file, SL_K8S_SA_DIR "/ca.crt");
    if (!k->service || !k->selector || !k->token_file || !k->ca_file)
        goto fail;
    if (!k->api) {
        sl_log_warn(log, "k8s: no --k8s-api and no KUBERNETES_SERVICE_HOST/_PORT");
        rc = -EINVAL;
        goto fail;
    }
    while (strlen(k->api) > 1 && k->api[strlen(k->api) - 1] == '/')
        k->api[strlen(k->api) - 1] = '\0';
    if (cfg->ns && *cfg->ns) {
        if (!(k->ns = strdup(cfg->ns)))
            goto fail;
    } else if ((rc = read_namespace(k))) {
        goto fail;
    }
    struct stat st;
    k->has_ca = stat(k->ca_file, &st) == 0;
    if (!k->has_ca && cfg->ca_file && *cfg->ca_file) {
        sl_log_warn(log, "k8s: --k8s-ca-file %s: %s", k->ca_file, strerror(errno));
        rc = -EINVAL;
        goto fail;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!(k->multi = curl_multi_init())) {
        rc = -ENOMEM;
        goto fail;
    }
    if (pthread_create(&k->th, NULL, k8s_thread, k)) {
        rc = -EAGAIN;
        goto fail;
    }
    k->started = true;
    sl_log_info(log, "k8s: watching %s %s in namespace %s at %s",
                sel ? "pods" : "the EndpointSlices of service", sel ? k->selector : k->service,
                k->ns, k->api);
    *out = k;
    return 0;
fail:
    k8s_free(k);
    return rc;
}

void sl_k8s_stop(sl_k8s *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&k->mu);
    atomic_store(&k->stop, true);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    if (k->multi)
        curl_multi_wakeup(k->multi);
    if (k->started)
        pthread_join(k->th, NULL);
    k8s_free(k);
}

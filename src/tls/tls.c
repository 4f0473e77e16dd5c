/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TLS record layer over OpenSSL memory BIOs (see tls.h): contexts loaded from PEM files,
 * sessions that take network bytes and plaintext and give back the other, the ALPN choice, and
 * the verified peer's identity.
 */
#include "tls/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/file.h"

/* Unread network bytes a session holds at most: the caller reads after every feed, so only a
 * partial record (<= 16 KiB + overhead) is ever left; this bounds a caller that does not. */
#define MAX_IN_HELD ((size_t)256 * 1024)
/* Encrypted output held at most (the connection's own output cap plus record overhead). */
#define OUT_CAP (((size_t)64 << 20) + ((size_t)4 << 20))
#define ID_MAX 255
#define SAN_MAX 16 /* subjectAltNames kept after the identity */

struct sl_tls_ctx {
    SSL_CTX *ssl;
    _Atomic int refs;
    bool server;
    unsigned char alpn[64]; /* client: wire-format ALPN list */
    unsigned alpn_len;
};

struct sl_tls {
    sl_tls_ctx *ctx;
    SSL *ssl;
    BIO *rbio, *wbio;
    sl_buf out;
    bool ready, seen_first;
    sl_tls_failure fail;
    const char *why;
    char alpn[16];
    char *identity;
};

/* What OpenSSL's error queue says about a file, in plain words: the first system error (the file
 * is missing or unreadable), else the first PEM or key error we can name, else its own reason. */
static void file_reason(char *buf, size_t size)
{
    unsigned long e, named = 0, any = 0;
    while ((e = ERR_get_error()) != 0) {
        if (!any)
            any = e;
        if (ERR_SYSTEM_ERROR(e)) {
            int sys = (int)ERR_GET_REASON(e);
            if (sys == EACCES)
                snprintf(buf, size, "permission denied: uid %ld cannot read it", (long)getuid());
            else if (sys == ENOENT)
                snprintf(buf, size, "no such file");
            else
                snprintf(buf, size, "%s", strerror(sys));
            ERR_clear_error();
            return;
        }
        int lib = ERR_GET_LIB(e), why = ERR_GET_REASON(e);
        if (lib == ERR_LIB_OSSL_DECODER && !named)
            named = ERR_PACK(ERR_LIB_PEM, 0, PEM_R_NO_START_LINE); /* no key decoder took it */
        if (!named && ((lib == ERR_LIB_PEM && why == PEM_R_NO_START_LINE) ||
                       (lib == ERR_LIB_X509 && why == X509_R_KEY_VALUES_MISMATCH)))
            named = e;
    }
    if (named && ERR_GET_LIB(named) == ERR_LIB_PEM)
        snprintf(buf, size, "not PEM (no '-----BEGIN' line; want a PEM file)");
    else if (named)
        snprintf(buf, size, "the key does not match the certificate");
    else if (any && ERR_reason_error_string(any))
        snprintf(buf, size, "%s", ERR_reason_error_string(any));
    else
        snprintf(buf, size, "failed");
}

/* "option 'tls-cert': certificate F: <reason>" (without the option part when none is known). */
static int ctx_fail(char *err, size_t errlen, const char *what, const char *opt, const char *file)
{
    char why[256];
    file_reason(why, sizeof why);
    if (err && errlen)
        snprintf(err, errlen, "%s%s%s%s%s%s: %s", opt ? "option '" : "", opt ? opt : "",
                 opt ? "': " : "", what, file ? " " : "", file ? file : "", why);
    return -EINVAL;
}

/* A server picks h2 when the client offers it, else http/1.1; no overlap: no ALPN. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg)
{
    static const char *const prefs[] = {"h2", "http/1.1"};
    for (size_t k = 0; k < 2; k++) {
        size_t pl = strlen(prefs[k]);
        for (unsigned i = 0; i < inlen;) {
            unsigned l = in[i];
            if (i + 1 + l > inlen)
                break;
            if (l == pl && memcmp(in + i + 1, prefs[k], pl) == 0) {
                *out = in + i + 1;
                *outlen = (unsigned char)l;
                return SSL_TLSEXT_ERR_OK;
            }
            i += 1 + l;
        }
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static int alpn_wire(sl_tls_ctx *c, const char *list)
{
    const char *p = list && *list ? list : "h2";
    c->alpn_len = 0;
    if (strcmp(p, "none") == 0) /* a protocol without ALPN (Redis) */
        return 0;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0 || n > 32 || c->alpn_len + 1 + n > sizeof c->alpn)
            return -EINVAL;
        c->alpn[c->alpn_len++] = (unsigned char)n;
        memcpy(c->alpn + c->alpn_len, p, n);
        c->alpn_len += (unsigned)n;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

int sl_tls_ctx_new(sl_tls_ctx **out, const sl_tls_config *cfg, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (cfg->server && (!cfg->cert_file || !cfg->key_file)) {
        snprintf(err, errlen, "a TLS server needs a certificate and a key");
        return -EINVAL;
    }
    if (cfg->server && cfg->client_auth != SL_TLS_AUTH_NONE && !cfg->ca_file) {
        snprintf(err, errlen, "client certificates need a CA bundle");
        return -EINVAL;
    }
    sl_tls_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->server = cfg->server;
    atomic_init(&c->refs, 1);
    if (!cfg->server && alpn_wire(c, cfg->alpn) != 0) {
        free(c);
        snprintf(err, errlen, "bad ALPN list");
        return -EINVAL;
    }
    ERR_clear_error();
    c->ssl = SSL_CTX_new(cfg->server ? TLS_server_method() : TLS_client_method());
    int rc = 0;
    if (!c->ssl) {
        rc = ctx_fail(err, errlen, "SSL_CTX_new", NULL, NULL);
        goto fail;
    }
    SSL_CTX_set_min_proto_version(c->ssl, TLS1_2_VERSION);
    SSL_CTX_set_mode(c->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
    /* Renegotiation is a DoS lever and HTTP/2 forbids it. */
    SSL_CTX_set_options(c->ssl, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (cfg->cert_file && cfg->cert_file[0]) {
        if (SSL_CTX_use_certificate_chain_file(c->ssl, cfg->cert_file) != 1) {
            rc = ctx_fail(err, errlen, "certificate", cfg->cert_opt, cfg->cert_file);
            goto fail;
        }
        /* a private key group or others can read is refused, with the fix in the message (a
         * missing one is OpenSSL's error below) */
        if (cfg->key_file && sl_file_check_secret(cfg->key_file, err, errlen) == -EACCES) {
            rc = -EACCES;
            goto fail;
        }
        if (!cfg->key_file ||
            SSL_CTX_use_PrivateKey_file(c->ssl, cfg->key_file, SSL_FILETYPE_PEM) != 1) {
            unsigned long e = ERR_peek_last_error();
            if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH) {
                ERR_clear_error(); /* OpenSSL 3 checks the pair as it loads the key */
                if (err && errlen)
                    snprintf(err, errlen, "%s%s%skey %s does not match the certificate %s",
                             cfg->key_opt ? "option '" : "", cfg->key_opt ? cfg->key_opt : "",
                             cfg->key_opt ? "': " : "", cfg->key_file, cfg->cert_file);
                rc = -EINVAL;
            } else {
                rc = ctx_fail(err, errlen, "key", cfg->key_opt, cfg->key_file);
            }
            goto fail;
        }
        if (SSL_CTX_check_private_key(c->ssl) != 1) {
            ERR_clear_error();
            if (err && errlen)
                snprintf(err, errlen, "%s%s%skey %s does not match the certificate %s",
                         cfg->key_opt ? "option '" : "", cfg->key_opt ? cfg->key_opt : "",
                         cfg->key_opt ? "': " : "", cfg->key_file, cfg->cert_file);
            rc = -EINVAL;
            goto fail;
        }
    }
    const char *cas[2] = {cfg->ca_file, cfg->ca_file2};
    for (int i = 0; i < 2; i++) {
        if (cas[i] && cas[i][0] && SSL_CTX_load_verify_locations(c->ssl, cas[i], NULL) != 1) {
            rc = ctx_fail(err, errlen, "CA bundle", i ? cfg->ca2_opt : cfg->ca_opt, cas[i]);
            goto fail;
        }
    }
    if (cfg->server) {
        SSL_CTX_set_alpn_select_cb(c->ssl, select_alpn, NULL);
        int mode = SSL_VERIFY_NONE;
        if (cfg->client_auth == SL_TLS_AUTH_REQUEST)
            mode = SSL_VERIFY_PEER;
        else if (cfg->client_auth == SL_TLS_AUTH_REQUIRE)
            mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        STACK_OF(X509_NAME) *names = mode != SSL_VERIFY_NONE ? sk_X509_NAME_new_null() : NULL;
        for (int i = 0; i < 2 && names; i++)
            if (cas[i] && cas[i][0] && !SSL_add_file_cert_subjects_to_stack(names, cas[i]))
                ERR_clear_error();
        if (names)
            SSL_CTX_set_client_CA_list(c->ssl, names); /* takes it */
        SSL_CTX_set_verify(c->ssl, mode, NULL);
        static const unsigned char sid[] = "sluice";
        SSL_CTX_set_session_id_context(c->ssl, sid, sizeof sid - 1);
        /* No server-side session cache: it is a lock shared by every worker on each handshake
         * and memory any client can fill. Resumption still works with (stateless) tickets. */
        SSL_CTX_set_session_cache_mode(c->ssl, SSL_SESS_CACHE_OFF);
    } else {
        if (c->alpn_len && SSL_CTX_set_alpn_protos(c->ssl, c->alpn, c->alpn_len) != 0) {
            rc = ctx_fail(err, errlen, "ALPN", NULL, NULL);
            goto fail;
        }
        bool own_ca = cfg->ca_file && cfg->ca_file[0];
        if (!own_ca && cfg->system_ca && SSL_CTX_set_default_verify_paths(c->ssl) != 1) {
            rc = ctx_fail(err, errlen, "system CA store", NULL, NULL);
            goto fail;
        }
        SSL_CTX_set_verify(c->ssl, own_ca || cfg->system_ca ? SSL_VERIFY_PEER : SSL_VERIFY_NONE,
                           NULL);
    }
    *out = c;
    return 0;
fail:
    SSL_CTX_free(c->ssl);
    free(c);
    return rc;
}

sl_tls_ctx *sl_tls_ctx_ref(sl_tls_ctx *ctx)
{
    if (ctx)
        atomic_fetch_add(&ctx->refs, 1);
    return ctx;
}

void sl_tls_ctx_unref(sl_tls_ctx *ctx)
{
    if (!ctx || atomic_fetch_sub(&ctx->refs, 1) != 1)
        return;
    SSL_CTX_free(ctx->ssl);
    free(ctx);
}

struct sl_tls_slot {
    pthread_mutex_t mu;
    sl_tls_ctx *ctx;
};

sl_tls_slot *sl_tls_slot_new(sl_tls_ctx *ctx)
{
    sl_tls_slot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->ctx = sl_tls_ctx_ref(ctx);
    return s;
}

void sl_tls_slot_free(sl_tls_slot *s)
{
    if (!s)
        return;
    sl_tls_ctx_unref(s->ctx);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void sl_tls_slot_set(sl_tls_slot *s, sl_tls_ctx *ctx)
{
    sl_tls_ctx_ref(ctx);
    pthread_mutex_lock(&s->mu);
    sl_tls_ctx *old = s->ctx;
    s->ctx = ctx;
    pthread_mutex_unlock(&s->mu);
    sl_tls_ctx_unref(old); /* sessions under it hold their own references */
}

sl_tls *sl_tls_slot_session(sl_tls_slot *s, const char *server_name)
{
    pthread_mutex_lock(&s->mu);
    sl_tls *t = sl_tls_new(s->ctx, server_name);
    pthread_mutex_unlock(&s->mu);
    return t;
}

/* The name a client's server must prove: an IP literal against IP subjectAltNames (and no SNI),
 * else a DNS name, also sent as SNI. 0 or -EINVAL. */
static int client_name(SSL *ssl, const char *name)
{
    unsigned char ip[16];
    if (inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1)
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -EINVAL;
    if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1)
        return -EINVAL;
    return 0;
}

sl_tls *sl_tls_new(sl_tls_ctx *ctx, const char *server_name)
{
    sl_tls *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ssl = SSL_new(ctx->ssl);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        SSL_free(t->ssl);
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (ctx->server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
        if (server_name && server_name[0] && client_name(t->ssl, server_name) != 0) {
            SSL_free(t->ssl);
            free(t);
            ERR_clear_error();
            return NULL;
        }
    }
    sl_buf_init(&t->out, OUT_CAP);
    t->ctx = sl_tls_ctx_ref(ctx);
    return t;
}

void sl_tls_free(sl_tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* frees both BIOs */
    sl_buf_free(&t->out);
    free(t->identity);
    sl_tls_ctx_unref(t->ctx);
    free(t);
}

/* Move what OpenSSL wrote into `out`. */
static int drain(sl_tls *t)
{
    size_t n = (size_t)BIO_ctrl_pending(t->wbio);
    if (!n)
        return 0;
    int rc = sl_buf_reserve(&t->out, n);
    if (rc)
        return rc;
    int got = BIO_read(t->wbio, t->out.data + t->out.len, (int)n);
    if (got > 0)
        t->out.len += (size_t)got;
    return 0;
}

int sl_tls_feed(sl_tls *t, const void *data, size_t len)
{
    if (!len)
        return 0;
    if (!t->seen_first && t->ctx->server) {
        t->seen_first = true;
        /* A TLS connection opens with a handshake record (content type 22). */
        if (((const uint8_t *)data)[0] != 0x16) {
            t->fail = SL_TLS_FAIL_PLAINTEXT;
            t->why = "not a TLS handshake";
        }
    }
    if ((size_t)BIO_ctrl_pending(t->rbio) + len > MAX_IN_HELD)
        return -EMSGSIZE;
    if (len > INT32_MAX || BIO_write(t->rbio, data, (int)len) != (int)len)
        return -ENOMEM;
    return 0;
}

/* A name as the certificate spells it, into name (NUL-terminated), when it is 1 to ID_MAX bytes
 * of printable ASCII; else "" (the name is not used). Nothing is cut or replaced: a name that
 * would print as another name ("a.test\0.evil", a cut long name, or two UTF-8 names made '?')
 * would give two certificates one identity. */
static void take_name(const unsigned char *s, int n, char *name)
{
    name[0] = '\0';
    if (!s || n < 1 || n > ID_MAX)
        return;
    for (int i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e)
            return;
    memcpy(name, s, (size_t)n);
    name[n] = '\0';
}

/* The i-th subjectAltName as text into name (DNS as written, IP as inet_ntop gives it; other
 * kinds, and a DNS name take_name refuses: ""). */
static void san_text(const GENERAL_NAME *g, char *name)
{
    name[0] = '\0';
    if (g->type == GEN_DNS) {
        take_name(ASN1_STRING_get0_data(g->d.dNSName), ASN1_STRING_length(g->d.dNSName), name);
    } else if (g->type == GEN_IPADD) {
        const unsigned char *s = ASN1_STRING_get0_data(g->d.iPAddress);
        int n = ASN1_STRING_length(g->d.iPAddress);
        if (n == 4 || n == 16)
            inet_ntop(n == 4 ? AF_INET : AF_INET6, s, name, ID_MAX + 1);
    }
}

/* The subject's (first) CN, in UTF-8 whatever its ASN.1 string type, through take_name. */
static void cn_text(X509 *x, char *name)
{
    name[0] = '\0';
    X509_NAME *subj = X509_get_subject_name(x);
    int at = subj ? X509_NAME_get_index_by_NID(subj, NID_commonName, -1) : -1;
    X509_NAME_ENTRY *e = at >= 0 ? X509_NAME_get_entry(subj, at) : NULL;
    unsigned char *utf8 = NULL;
    int n = e ? ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(e)) : -1;
    if (n > 0)
        take_name(utf8, n, name);
    OPENSSL_free(utf8);
}

/* The identity (first DNS SAN, else the CN), then every DNS and IP SAN (at most SAN_MAX), each
 * NUL-terminated, the list ended by an empty name: what sl_tls_peer_identity returns. NULL when
 * the certificate names nothing usable, or on no memory. */
static char *identity_of(X509 *x)
{
    char name[ID_MAX + 1];
    name[0] = '\0';
    GENERAL_NAMES *sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    int nsans = sans ? sk_GENERAL_NAME_num(sans) : 0;
    for (int i = 0; i < nsans && !name[0]; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        if (g->type == GEN_DNS)
            san_text(g, name);
    }
    if (!name[0])
        cn_text(x, name);
    char *id = name[0] ? malloc((size_t)(SAN_MAX + 2) * (ID_MAX + 1)) : NULL;
    if (!id) {
        GENERAL_NAMES_free(sans);
        return NULL;
    }
    size_t at = strlen(name) + 1;
    memcpy(id, name, at);
    for (int i = 0, k = 0; i < nsans && k < SAN_MAX; i++) {
        san_text(sk_GENERAL_NAME_value(sans, i), name);
        if (!name[0])
            continue;
        size_t n = strlen(name) + 1;
        memcpy(id + at, name, n);
        at += n;
        k++;
    }
    id[at] = '\0';
    char *fit = realloc(id, at + 1);
    GENERAL_NAMES_free(sans);
    return fit ? fit : id;
}

static void take_identity(sl_tls *t)
{
    X509 *x = SSL_get0_peer_certificate(t->ssl);
    if (x && SSL_get_verify_result(t->ssl) == X509_V_OK)
        t->identity = identity_of(x);
}

char *sl_tls_cert_identity(const uint8_t *der, size_t len)
{
    if (len > INT32_MAX)
        return NULL;
    const unsigned char *p = der;
    X509 *x = d2i_X509(NULL, &p, (long)len);
    char *id = x ? identity_of(x) : NULL;
    X509_free(x);
    return id;
}

static void on_ready(sl_tls *t)
{
    t->ready = true;
    const unsigned char *a = NULL;
    unsigned al = 0;
    SSL_get0_alpn_selected(t->ssl, &a, &al);
    if (a && al < sizeof t->alpn) {
        memcpy(t->alpn, a, al);
        t->alpn[al] = '\0';
    }
    take_identity(t);
}

static ssize_t failed(sl_tls *t)
{
    if (t->fail == SL_TLS_OK) {
        unsigned long e = ERR_peek_last_error();
        int reason = ERR_GET_REASON(e);
        long v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK || reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
            reason == SSL_R_CERTIFICATE_VERIFY_FAILED ||
            reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
            reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
            reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
            reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
            t->fail = SL_TLS_FAIL_CERT;
        else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_HTTP_REQUEST)
            t->fail = SL_TLS_FAIL_PLAINTEXT;
        else
            t->fail = SL_TLS_FAIL_PROTOCOL;
        t->why = e ? ERR_reason_error_string(e) : NULL;
        if (!t->why && v != X509_V_OK)
            t->why = X509_verify_cert_error_string(v);
    }
    ERR_clear_error();
    return -EPROTO;
}

ssize_t sl_tls_read(sl_tls *t, void *buf, size_t cap)
{
    if (t->fail != SL_TLS_OK) {
        drain(t);
        return -EPROTO;
    }
    ERR_clear_error();
    if (!t->ready) {
        int r = SSL_do_handshake(t->ssl);
        int drc = drain(t);
        if (r != 1) {
            int e = SSL_get_error(t->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return drc ? drc : 0;
            return failed(t);
        }
        on_ready(t);
    }
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    int n = SSL_read(t->ssl, buf, (int)cap);
    int drc = drain(t); /* post-handshake messages (TLS 1.3 tickets, key updates) */
    if (drc)
        return drc;
    if (n > 0)
        return n;
    int e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    if (e == SSL_ERROR_ZERO_RETURN)
        return -ECONNRESET;
    return failed(t);
}

ssize_t sl_tls_write(sl_tls *t, const void *data, size_t len)
{
    if (t->fail != SL_TLS_OK)
        return -EPROTO;
    if (!t->ready)
        return 0;
    size_t done = 0;
    ERR_clear_error();
    while (done < len) {
        size_t k = len - done;
        if (k > (size_t)1 << 30)
            k = (size_t)1 << 30;
        int n = SSL_write(t->ssl, (const uint8_t *)data + done, (int)k);
        int drc = drain(t);
        if (drc)
            return drc;
        if (n <= 0) {
            int e = SSL_get_error(t->ssl, n);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                break;
            return failed(t);
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

sl_buf *sl_tls_out(sl_tls *t)
{
    return &t->out;
}

void sl_tls_close(sl_tls *t)
{
    if (t->ready && t->fail == SL_TLS_OK) {
        SSL_shutdown(t->ssl);
        drain(t);
    }
    ERR_clear_error();
}

bool sl_tls_ready(const sl_tls *t)
{
    return t->ready;
}

sl_tls_failure sl_tls_failure_get(const sl_tls *t)
{
    return t->fail;
}

const char *sl_tls_alpn(const sl_tls *t)
{
    return t->alpn;
}

const char *sl_tls_peer_identity(const sl_tls *t)
{
    return t->identity;
}

const char *sl_tls_error(const sl_tls *t)
{
    return t->why ? t->why : "";
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sans-I/O TLS layer (tls/tls.h): a client and a server session talking through memory —
 * handshake, ALPN (h2, http/1.1), data both ways, client certificates (none, request, require),
 * an expired certificate and one from another CA refused, plaintext to a server session, a
 * reload (a new context while a session of the old one keeps working), and the bound on unread
 * input. The certificates are made here with OpenSSL in a temporary directory. Last, the session
 * under a real server (net/server.c): an HTTP/1.1 request over TLS whose handler sees the client
 * certificate's name (sl_exchange_peer_identity), the handshake counters, and a handshake that
 * never starts, closed at its deadline; and an HTTP/2 request through h2client/h2sock.c's TLS moves
 * (the clients' path), with a client certificate and with the wrong CA.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "h2client/h2sock.h"
#include "net/server.h"
#include "tls/tls.h"
#include "../../support/testcerts.h"

static sl_tls_ctx *server_ctx(const char *cert, sl_tls_auth auth, const char *ca)
{
    char c[64], k[64];
    snprintf(c, sizeof c, "%s.pem", cert);
    snprintf(k, sizeof k, "%s.key", cert);
    sl_tls_config cfg = {.server = true,
                         .cert_file = path(c),
                         .key_file = path(k),
                         .ca_file = ca ? path(ca) : NULL,
                         .client_auth = auth};
    sl_tls_ctx *x;
    char err[256];
    int rc = sl_tls_ctx_new(&x, &cfg, err, sizeof err);
    if (rc)
        fail_msg("server ctx: %s", err);
    return x;
}

static sl_tls_ctx *client_ctx(const char *cert, const char *ca, const char *alpn)
{
    char c[64], k[64];
    snprintf(c, sizeof c, "%s.pem", cert ? cert : "");
    snprintf(k, sizeof k, "%s.key", cert ? cert : "");
    sl_tls_config cfg = {.cert_file = cert ? path(c) : NULL,
                         .key_file = cert ? path(k) : NULL,
                         .ca_file = ca ? path(ca) : NULL,
                         .alpn = alpn};
    sl_tls_ctx *x;
    char err[256];
    int rc = sl_tls_ctx_new(&x, &cfg, err, sizeof err);
    if (rc)
        fail_msg("client ctx: %s", err);
    return x;
}

/* Move bytes from a's output into b, then let b read; plaintext read is appended to got. */
static ssize_t pass(sl_tls *a, sl_tls *b, char *got, size_t *glen, size_t gcap)
{
    sl_buf *o = sl_tls_out(a);
    if (o->len) {
        assert_int_equal(sl_tls_feed(b, o->data, o->len), 0);
        sl_buf_consume(o, o->len);
    }
    for (;;) {
        char buf[4096];
        ssize_t n = sl_tls_read(b, buf, sizeof buf);
        if (n <= 0)
            return n;
        if (got) {
            assert_true(*glen + (size_t)n <= gcap);
            memcpy(got + *glen, buf, (size_t)n);
            *glen += (size_t)n;
        }
    }
}

/* Run the handshake: returns 0, or the first negative result of either side. */
static int handshake(sl_tls *cl, sl_tls *sv)
{
    ssize_t r = sl_tls_read(cl, NULL, 0); /* ClientHello */
    assert_true(r == 0);
    for (int round = 0; round < 10; round++) {
        ssize_t a = pass(cl, sv, NULL, NULL, 0);
        ssize_t b = pass(sv, cl, NULL, NULL, 0);
        if (a < 0)
            return (int)a;
        if (b < 0)
            return (int)b;
        if (sl_tls_ready(cl) && sl_tls_ready(sv) && !sl_tls_out(cl)->len &&
            !sl_tls_out(sv)->len)
            return 0;
    }
    return -ETIMEDOUT;
}

static void exchange_data(sl_tls *cl, sl_tls *sv)
{
    char got[256];
    size_t glen = 0;
    assert_int_equal(sl_tls_write(cl, "ping", 4), 4);
    assert_int_equal(pass(cl, sv, got, &glen, sizeof got), 0);
    assert_int_equal(glen, 4);
    assert_memory_equal(got, "ping", 4);
    glen = 0;
    assert_int_equal(sl_tls_write(sv, "pong!", 5), 5);
    assert_int_equal(pass(sv, cl, got, &glen, sizeof got), 0);
    assert_int_equal(glen, 5);
    assert_memory_equal(got, "pong!", 5);
}

static void test_handshake_alpn_h2(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_NONE, NULL);
    sl_tls_ctx *c = client_ctx(NULL, "ca.pem", "h2,http/1.1");
    sl_tls *sv = sl_tls_new(s, NULL), *cl = sl_tls_new(c, "localhost");
    assert_false(sl_tls_ready(sv));
    assert_int_equal(sl_tls_write(sv, "early", 5), 0); /* nothing taken before the handshake */
    assert_int_equal(handshake(cl, sv), 0);
    assert_string_equal(sl_tls_alpn(sv), "h2");
    assert_string_equal(sl_tls_alpn(cl), "h2");
    assert_null(sl_tls_peer_identity(sv)); /* no client certificate */
    assert_string_equal(sl_tls_peer_identity(cl), "localhost");
    exchange_data(cl, sv);
    /* a close_notify ends the other side's reads */
    sl_tls_close(cl);
    assert_int_equal(pass(cl, sv, NULL, NULL, 0), -ECONNRESET);
    sl_tls_free(cl);
    sl_tls_free(sv);
    sl_tls_ctx_unref(c);
    sl_tls_ctx_unref(s);
}

static void test_alpn_http11_and_none(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_NONE, NULL);
    sl_tls_ctx *c1 = client_ctx(NULL, "ca.pem", "http/1.1");
    sl_tls_ctx *c2 = client_ctx(NULL, "ca.pem", "spdy/3");
    sl_tls *sv = sl_tls_new(s, NULL), *cl = sl_tls_new(c1, NULL);
    assert_int_equal(handshake(cl, sv), 0);
    assert_string_equal(sl_tls_alpn(sv), "http/1.1");
    exchange_data(cl, sv);
    sl_tls_free(cl);
    sl_tls_free(sv);
    sv = sl_tls_new(s, NULL);
    cl = sl_tls_new(c2, NULL);
    assert_int_equal(handshake(cl, sv), 0); /* no common protocol: no ALPN, still served */
    assert_string_equal(sl_tls_alpn(sv), "");
    sl_tls_free(cl);
    sl_tls_free(sv);
    /* "none": a client (of Redis) that offers no protocol at all */
    sl_tls_ctx *c3 = client_ctx(NULL, "ca.pem", "none");
    sv = sl_tls_new(s, NULL);
    cl = sl_tls_new(c3, NULL);
    assert_int_equal(handshake(cl, sv), 0);
    assert_string_equal(sl_tls_alpn(sv), "");
    assert_string_equal(sl_tls_alpn(cl), "");
    exchange_data(cl, sv);
    sl_tls_free(cl);
    sl_tls_free(sv);
    sl_tls_ctx_unref(c3);
    sl_tls_ctx_unref(c1);
    sl_tls_ctx_unref(c2);
    sl_tls_ctx_unref(s);
}

/* Client certificates: identity from the SAN, else the CN; request accepts none; require refuses
 * none, an expired one, and one from another CA. */
static void test_client_auth(void **state)
{
    sl_tls_ctx *req = server_ctx("server", SL_TLS_AUTH_REQUEST, "ca.pem");
    sl_tls_ctx *must = server_ctx("server", SL_TLS_AUTH_REQUIRE, "ca.pem");
    struct {
        sl_tls_ctx *srv;
        const char *cert;
        int ok;
        const char *identity;
    } cases[] = {
        {req, NULL, 1, NULL},
        {req, "client", 1, "a.peers.test"},
        {must, "client", 1, "a.peers.test"},
        {must, "cnonly", 1, "just-a-cn"},
        {must, NULL, 0, NULL},
        {must, "expired", 0, NULL},
        {must, "stranger", 0, NULL},
        {req, "stranger", 0, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_tls_ctx *c = client_ctx(cases[i].cert, "ca.pem", NULL);
        sl_tls *sv = sl_tls_new(cases[i].srv, NULL), *cl = sl_tls_new(c, "localhost");
        int rc = handshake(cl, sv);
        if (cases[i].ok) {
            assert_int_equal(rc, 0);
            if (cases[i].identity) {
                const char *id = sl_tls_peer_identity(sv);
                assert_string_equal(id, cases[i].identity);
                /* then every DNS and IP subjectAltName, the list ended by an empty name */
                const char *n = id + strlen(id) + 1;
                if (!strcmp(cases[i].cert, "client")) {
                    const char *sans[] = {"a.peers.test", "b.peers.test", "10.1.2.3"};
                    for (size_t k = 0; k < 3; k++, n += strlen(n) + 1)
                        assert_string_equal(n, sans[k]);
                }
                assert_string_equal(n, "");
            } else
                assert_null(sl_tls_peer_identity(sv));
            exchange_data(cl, sv);
        } else {
            /* the server refuses; in TLS 1.3 the client learns it on its next read */
            if (rc == 0)
                rc = (int)pass(sv, cl, NULL, NULL, 0);
            assert_int_equal(rc, -EPROTO);
            assert_int_equal(sl_tls_failure_get(sv), SL_TLS_FAIL_CERT);
            assert_false(sl_tls_ready(sv) && sl_tls_failure_get(sv) == SL_TLS_OK);
            assert_true(sl_tls_error(sv)[0] != '\0');
        }
        sl_tls_free(cl);
        sl_tls_free(sv);
        sl_tls_ctx_unref(c);
    }
    sl_tls_ctx_unref(req);
    sl_tls_ctx_unref(must);
}

/* A client certificate signed by (ca, cak) with a CN of type cntype (cn, cnlen bytes; NULL: none)
 * and DNS subjectAltNames as given (bytes, so a name may hold a NUL), written as <name>.pem/.key. */
static void crafted_cert(const char *name, X509 *ca, EVP_PKEY *cak, int cntype, const char *cn,
                         int cnlen, const char *const *dns, const int *dnslen, int ndns)
{
    EVP_PKEY *k = make_key();
    X509 *x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1000 + ndns + cnlen);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, k);
    if (cn)
        assert_int_equal(X509_NAME_add_entry_by_NID(X509_get_subject_name(x), NID_commonName,
                                                    cntype, (const unsigned char *)cn, cnlen,
                                                    -1, 0), 1);
    X509_set_issuer_name(x, X509_get_subject_name(ca));
    if (ndns) {
        GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
        for (int i = 0; i < ndns; i++) {
            GENERAL_NAME *g = GENERAL_NAME_new();
            ASN1_IA5STRING *ia5 = ASN1_IA5STRING_new();
            assert_int_equal(ASN1_STRING_set(ia5, dns[i], dnslen[i]), 1);
            GENERAL_NAME_set0_value(g, GEN_DNS, ia5);
            sk_GENERAL_NAME_push(gens, g);
        }
        assert_int_equal(X509_add1_ext_i2d(x, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT), 1);
        GENERAL_NAMES_free(gens);
    }
    assert_true(X509_sign(x, cak, EVP_sha256()) > 0);
    char n[64];
    snprintf(n, sizeof n, "%s.pem", name);
    write_pem(n, x, NULL);
    snprintf(n, sizeof n, "%s.key", name);
    write_pem(n, NULL, k);
    /* the same list from the DER alone */
    unsigned char *der = NULL;
    int dl = i2d_X509(x, &der);
    assert_true(dl > 0);
    char *id = sl_tls_cert_identity(der, (size_t)dl);
    snprintf(n, sizeof n, "%s.id", name);
    FILE *f = fopen(path(n), "w");
    fputs(id ? id : "(none)", f);
    fclose(f);
    free(id);
    OPENSSL_free(der);
    X509_free(x);
    EVP_PKEY_free(k);
}

/* Names that would print as another name give no identity (found by reading the identity code
 * while writing fuzz_certident; its corpus holds san_dns_nul, cn_nul, long_dns, cn_bmp): a DNS
 * subjectAltName or a CN with an embedded NUL ("good.test\0.evil.example" was "good.test"), a
 * name over 255 bytes (it was cut to its first 255), a UTF-8 CN ("Jos\xc3\xa9" was "Jos??", as
 * was every other two-byte ending). A BMPString CN is read as the text it is. */
static void test_client_identity_names(void **state)
{
    EVP_PKEY *cak = make_key();
    X509 *ca = make_cert("Craft CA", NULL, cak, NULL, NULL, 0, 86400, true);
    write_pem("craftca.pem", ca, NULL);
    static const char nul_san[] = "good.test\0.evil.example";
    static const char long_san[] =
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        ".test";
    const char *sans1[] = {nul_san};
    const int lens1[] = {(int)sizeof nul_san - 1};
    const char *sans2[] = {long_san, "ok.test"};
    const int lens2[] = {(int)sizeof long_san - 1, 7};
    static const char bmp[] = "\0c\0l\0i\0e\0n\0t\0-\0b";
    crafted_cert("nulsan", ca, cak, MBSTRING_ASC, "cn-fallback", -1, sans1, lens1, 1);
    crafted_cert("nulcn", ca, cak, V_ASN1_UTF8STRING, "admin\0evil", 10, NULL, NULL, 0);
    crafted_cert("longsan", ca, cak, MBSTRING_ASC, "x", -1, sans2, lens2, 2);
    crafted_cert("utf8cn", ca, cak, V_ASN1_UTF8STRING, "Jos\xc3\xa9", 5, NULL, NULL, 0);
    crafted_cert("bmpcn", ca, cak, V_ASN1_BMPSTRING, bmp, (int)sizeof bmp - 1, NULL, NULL, 0);
    X509_free(ca);
    EVP_PKEY_free(cak);
    struct {
        const char *cert, *identity, *second;
    } cases[] = {
        {"nulsan", "cn-fallback", ""},
        {"nulcn", NULL, NULL},
        {"longsan", "ok.test", "ok.test"},
        {"utf8cn", NULL, NULL},
        {"bmpcn", "client-b", ""},
    };
    sl_tls_ctx *must = server_ctx("server", SL_TLS_AUTH_REQUIRE, "craftca.pem");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_tls_ctx *c = client_ctx(cases[i].cert, "ca.pem", NULL);
        sl_tls *sv = sl_tls_new(must, NULL), *cl = sl_tls_new(c, "localhost");
        assert_int_equal(handshake(cl, sv), 0);
        const char *id = sl_tls_peer_identity(sv);
        if (cases[i].identity) {
            assert_non_null(id);
            assert_string_equal(id, cases[i].identity);
            assert_string_equal(id + strlen(id) + 1, cases[i].second);
        } else {
            assert_null(id);
        }
        char n[64], got[300] = "";
        snprintf(n, sizeof n, "%s.id", cases[i].cert);
        FILE *f = fopen(path(n), "r");
        assert_non_null(f);
        assert_non_null(fgets(got, sizeof got, f));
        fclose(f);
        assert_string_equal(got, cases[i].identity ? cases[i].identity : "(none)");
        sl_tls_free(cl);
        sl_tls_free(sv);
        sl_tls_ctx_unref(c);
    }
    sl_tls_ctx_unref(must);
}

/* A client that does not trust the server's CA refuses it; a name mismatch too. */
static void test_client_verifies_server(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_NONE, NULL);
    sl_tls_ctx *wrong = client_ctx(NULL, "wrongca.pem", NULL);
    sl_tls_ctx *right = client_ctx(NULL, "ca.pem", NULL);
    sl_tls *sv = sl_tls_new(s, NULL), *cl = sl_tls_new(wrong, NULL);
    assert_int_equal(handshake(cl, sv), -EPROTO);
    assert_int_equal(sl_tls_failure_get(cl), SL_TLS_FAIL_CERT);
    sl_tls_free(cl);
    sl_tls_free(sv);
    sv = sl_tls_new(s, NULL);
    cl = sl_tls_new(right, "not-this-host.example");
    assert_int_equal(handshake(cl, sv), -EPROTO);
    assert_int_equal(sl_tls_failure_get(cl), SL_TLS_FAIL_CERT);
    sl_tls_free(cl);
    sl_tls_free(sv);
    sl_tls_ctx_unref(s);
    sl_tls_ctx_unref(wrong);
    sl_tls_ctx_unref(right);
}

/* A server name that is an IP address is matched against the certificate's IP subjectAltNames
 * (no DNS match, no SNI); a client told to use the system's trust store does not trust the
 * test CA. */
static void test_client_checks_ip_names_and_system_store(void **state)
{
    sl_tls_ctx *s = server_ctx("client", SL_TLS_AUTH_NONE, NULL); /* SANs a.peers.test, IP 10.1.2.3 */
    sl_tls_ctx *c = client_ctx(NULL, "ca.pem", NULL);
    const char *names[] = {"10.1.2.3", "b.peers.test", "10.1.2.4", "::1", "127.0.0.1"};
    const int want[] = {0, 0, -EPROTO, -EPROTO, -EPROTO};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        sl_tls *sv = sl_tls_new(s, NULL), *cl = sl_tls_new(c, names[i]);
        assert_non_null(cl);
        assert_int_equal(handshake(cl, sv), want[i]);
        if (want[i])
            assert_int_equal(sl_tls_failure_get(cl), SL_TLS_FAIL_CERT);
        sl_tls_free(cl);
        sl_tls_free(sv);
    }
    sl_tls_config sys = {.system_ca = true};
    sl_tls_ctx *x;
    char err[256];
    assert_int_equal(sl_tls_ctx_new(&x, &sys, err, sizeof err), 0);
    sl_tls *sv = sl_tls_new(s, NULL), *cl = sl_tls_new(x, NULL);
    assert_int_equal(handshake(cl, sv), -EPROTO);
    assert_int_equal(sl_tls_failure_get(cl), SL_TLS_FAIL_CERT);
    sl_tls_free(cl);
    sl_tls_free(sv);
    sl_tls_ctx_unref(x);
    sl_tls_ctx_unref(c);
    sl_tls_ctx_unref(s);
}

static void test_plaintext_refused(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_NONE, NULL);
    sl_tls *sv = sl_tls_new(s, NULL);
    const char *req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(sl_tls_feed(sv, req, strlen(req)), 0);
    char buf[64];
    assert_int_equal(sl_tls_read(sv, buf, sizeof buf), -EPROTO);
    assert_int_equal(sl_tls_failure_get(sv), SL_TLS_FAIL_PLAINTEXT);
    assert_int_equal(sl_tls_read(sv, buf, sizeof buf), -EPROTO); /* stays failed */
    assert_true(sl_tls_write(sv, "x", 1) < 0);
    sl_tls_free(sv);
    /* garbage that starts like a handshake record is a protocol failure */
    sv = sl_tls_new(s, NULL);
    static const uint8_t junk[] = {0x16, 0x03, 0x01, 0x00, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_int_equal(sl_tls_feed(sv, junk, sizeof junk), 0);
    assert_int_equal(sl_tls_read(sv, buf, sizeof buf), -EPROTO);
    assert_int_equal(sl_tls_failure_get(sv), SL_TLS_FAIL_PROTOCOL);
    sl_tls_free(sv);
    sl_tls_ctx_unref(s);
}

/* Input a caller leaves unread is bounded. */
static void test_input_bound(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_NONE, NULL);
    sl_tls *sv = sl_tls_new(s, NULL);
    static uint8_t chunk[64 * 1024];
    chunk[0] = 0x16;
    int rc = 0;
    for (int i = 0; i < 16 && rc == 0; i++)
        rc = sl_tls_feed(sv, chunk, sizeof chunk);
    assert_int_equal(rc, -EMSGSIZE);
    sl_tls_free(sv);
    sl_tls_ctx_unref(s);
}

/* Reload through a slot: a new context serves new sessions with the new certificate (which
 * requires client certificates) while a session of the old one (whose last other reference went
 * with the slot's switch) keeps working. */
static void test_reload_keeps_old_sessions(void **state)
{
    sl_tls_ctx *old = server_ctx("server", SL_TLS_AUTH_NONE, NULL);
    sl_tls_slot *slot = sl_tls_slot_new(old);
    sl_tls_ctx_unref(old); /* the slot holds it now */
    sl_tls_ctx *c = client_ctx(NULL, "ca.pem", NULL);
    sl_tls *sv1 = sl_tls_slot_session(slot, NULL), *cl1 = sl_tls_new(c, NULL);
    assert_int_equal(handshake(cl1, sv1), 0);
    assert_string_equal(sl_tls_peer_identity(cl1), "localhost");
    sl_tls_ctx *fresh = server_ctx("server2", SL_TLS_AUTH_REQUIRE, "ca.pem");
    sl_tls_slot_set(slot, fresh); /* only sv1 holds the old context now */
    sl_tls_ctx_unref(fresh);
    sl_tls *sv2 = sl_tls_slot_session(slot, NULL), *cl2 = sl_tls_new(c, NULL);
    assert_int_equal(handshake(cl2, sv2), -EPROTO); /* the new policy: no client certificate */
    sl_tls_free(cl2);
    sl_tls_free(sv2);
    sl_tls_ctx *cc = client_ctx("client", "ca.pem", NULL);
    sv2 = sl_tls_slot_session(slot, NULL);
    cl2 = sl_tls_new(cc, NULL);
    assert_int_equal(handshake(cl2, sv2), 0);
    assert_string_equal(sl_tls_peer_identity(sv2), "a.peers.test");
    exchange_data(cl2, sv2);
    exchange_data(cl1, sv1);
    sl_tls_free(cl1);
    sl_tls_free(sv1); /* last reference of the old context */
    sl_tls_free(cl2);
    sl_tls_free(sv2);
    sl_tls_slot_free(slot);
    sl_tls_ctx_unref(cc);
    sl_tls_ctx_unref(c);
}

static void test_bad_config(void **state)
{
    sl_tls_ctx *x = NULL;
    char err[256];
    sl_tls_config cfg = {.server = true};
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), -EINVAL);
    cfg.cert_file = path("server.pem");
    cfg.key_file = path("client.key"); /* not the certificate's key */
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "key"));
    cfg.key_file = path("missing.key");
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), -EINVAL);
    /* a key others can read: refused, with the fix */
    cfg.key_file = path("server.key");
    assert_int_equal(chmod(cfg.key_file, 0644), 0);
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), -EACCES);
    assert_non_null(strstr(err, "chmod 600 "));
    assert_int_equal(chmod(cfg.key_file, 0600), 0);
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), 0);
    sl_tls_ctx_unref(x);
    x = NULL;
    cfg.client_auth = SL_TLS_AUTH_REQUIRE; /* no CA */
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), -EINVAL);
    cfg.ca_file = path("nope.pem");
    assert_int_equal(sl_tls_ctx_new(&x, &cfg, err, sizeof err), -EINVAL);
    sl_tls_config cl = {.alpn = "h2,,x"};
    assert_int_equal(sl_tls_ctx_new(&x, &cl, err, sizeof err), -EINVAL);
    assert_null(x);
}

/* ---- under the server ---- */

static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static char seen_identity[64];

static void identity_handler(void *ud, sl_exchange *ex)
{
    const char *id = sl_exchange_peer_identity(ex);
    pthread_mutex_lock(&seen_mu);
    snprintf(seen_identity, sizeof seen_identity, "%s", id ? id : "(none)");
    pthread_mutex_unlock(&seen_mu);
    sl_exchange_respond_simple(ex, 200, "text/plain", id ? id : "-", id ? strlen(id) : 1);
}

static int dial(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(0x7f000001)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    return fd;
}

static void send_out(int fd, sl_tls *t)
{
    sl_buf *o = sl_tls_out(t);
    while (o->len) {
        ssize_t n = send(fd, o->data, o->len, MSG_NOSIGNAL);
        assert_true(n > 0);
        sl_buf_consume(o, (size_t)n);
    }
}

/* Read from fd into the session until `want` appears in the plaintext or the server closes;
 * returns what was read (0 bytes on a close before any). */
static size_t read_until(int fd, sl_tls *t, const char *want, char *got, size_t cap)
{
    size_t len = 0;
    got[0] = '\0';
    for (int i = 0; i < 200; i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            break;
        uint8_t buf[16384];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            break;
        assert_int_equal(sl_tls_feed(t, buf, (size_t)n), 0);
        ssize_t m;
        while ((m = sl_tls_read(t, got + len, cap - 1 - len)) > 0)
            len += (size_t)m;
        got[len] = '\0';
        send_out(fd, t);
        if (m < 0 || (want && strstr(got, want)))
            break;
    }
    return len;
}

static void test_under_server(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_REQUEST, "ca.pem");
    sl_server_config cfg;
    sl_server_config_defaults(&cfg);
    cfg.host = "127.0.0.1";
    cfg.handler = identity_handler;
    cfg.tls = s;
    cfg.tls_handshake_timeout_ms = 200;
    sl_server *srv;
    assert_int_equal(sl_server_start(&srv, &cfg), 0);
    sl_tls_ctx_unref(s); /* the server holds its own */
    uint16_t port = sl_server_port(srv);

    /* with a client certificate, then without one */
    const char *certs[] = {"client", NULL};
    const char *want[] = {"a.peers.test", "(none)"};
    for (int k = 0; k < 2; k++) {
        sl_tls_ctx *c = client_ctx(certs[k], "ca.pem", "http/1.1");
        sl_tls *cl = sl_tls_new(c, "localhost");
        int fd = dial(port);
        assert_int_equal(sl_tls_read(cl, NULL, 0), 0);
        send_out(fd, cl);
        char got[4096];
        while (!sl_tls_ready(cl)) {
            read_until(fd, cl, NULL, got, sizeof got);
            assert_int_equal(sl_tls_failure_get(cl), SL_TLS_OK);
        }
        assert_string_equal(sl_tls_alpn(cl), "http/1.1");
        const char *rq = "GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n";
        assert_int_equal(sl_tls_write(cl, rq, strlen(rq)), (ssize_t)strlen(rq));
        send_out(fd, cl);
        read_until(fd, cl, k == 0 ? "a.peers.test" : "\r\n\r\n-", got, sizeof got);
        assert_non_null(strstr(got, "HTTP/1.1 200"));
        pthread_mutex_lock(&seen_mu);
        assert_string_equal(seen_identity, want[k]);
        pthread_mutex_unlock(&seen_mu);
        close(fd);
        sl_tls_free(cl);
        sl_tls_ctx_unref(c);
    }

    /* a reload: the next connection is served under the new context */
    sl_tls_ctx *fresh = server_ctx("server2", SL_TLS_AUTH_NONE, NULL);
    assert_int_equal(sl_server_set_tls(srv, fresh), 0);
    sl_tls_ctx_unref(fresh);

    /* a connection that never starts its handshake is closed at the deadline */
    int idle = dial(port);
    struct pollfd p = {.fd = idle, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    char b;
    assert_true(recv(idle, &b, 1, 0) <= 0);
    close(idle);

    sl_tls_stats st;
    for (int i = 0; i < 500; i++) { /* counters are bumped on the worker thread */
        sl_server_tls_stats(srv, &st);
        if (st.timed_out == 1)
            break;
        usleep(10000);
    }
    assert_int_equal(st.handshakes, 2);
    assert_int_equal(st.timed_out, 1);
    assert_int_equal(st.reloads, 1);
    sl_server_shutdown(srv, 1000);
    assert_int_equal(sl_server_wait(srv), 0);
    sl_server_free(srv);
}

typedef struct h2_seen {
    bool done;
    int err, status;
    char body[64];
} h2_seen;

static void h2_done(void *ud, const sl_h2c_resp *r)
{
    h2_seen *w = ud;
    w->done = true;
    w->err = r->err;
    w->status = r->status;
    size_t n = r->body->len < sizeof w->body - 1 ? r->body->len : sizeof w->body - 1;
    if (n)
        memcpy(w->body, r->body->data, n);
    w->body[n] = '\0';
}

/* One HTTP/2 request to srv through h2client/h2sock.c's TLS moves (what client/h2conn.c and
 * cluster/peer.c run): the answer, or -EKEYREJECTED from a read when the handshake fails. */
static int h2_over_tls(uint16_t port, sl_tls_ctx *ctx, const char *name, h2_seen *w)
{
    sl_h2c *sess;
    assert_int_equal(sl_h2c_new(NULL, &sess), 0);
    sl_tls *cl = sl_tls_new(ctx, name);
    assert_non_null(cl);
    int fd = dial(port);
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    assert_int_equal(sl_tls_read(cl, NULL, 0), 0); /* the ClientHello */
    sl_h2c_req rq = {.method = "GET", .scheme = "https", .authority = "localhost",
                     .path = "/who", .deadline = INT64_MAX};
    assert_int_equal(sl_h2c_submit(sess, &rq, h2_done, w), 0);
    sl_buf plain;
    sl_buf_init(&plain, 0);
    int rc = 0;
    for (int i = 0; i < 200 && !w->done && rc == 0; i++) {
        rc = sl_h2sock_tls_write(sess, cl, fd, &plain, 65536);
        assert_int_equal(rc, 0);
        if (!sl_tls_ready(cl)) /* frames wait for the handshake; only its bytes went */
            assert_true(plain.len > 0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            break;
        uint8_t buf[16384]; /* for the ciphertext and the plaintext both, as h2conn.c does */
        rc = sl_h2sock_tls_read(sess, cl, fd, buf, sizeof buf, buf, sizeof buf, 8);
    }
    close(fd);
    sl_h2c_free(sess, -ECONNRESET);
    sl_buf_free(&plain);
    sl_tls_free(cl);
    return rc;
}

static void test_h2_through_h2sock_tls(void **state)
{
    sl_tls_ctx *s = server_ctx("server", SL_TLS_AUTH_REQUEST, "ca.pem");
    sl_server_config cfg;
    sl_server_config_defaults(&cfg);
    cfg.host = "127.0.0.1";
    cfg.handler = identity_handler;
    cfg.tls = s;
    sl_server *srv;
    assert_int_equal(sl_server_start(&srv, &cfg), 0);
    sl_tls_ctx_unref(s);
    uint16_t port = sl_server_port(srv);

    sl_tls_ctx *good = client_ctx("client", "ca.pem", "h2");
    h2_seen w = {0};
    assert_int_equal(h2_over_tls(port, good, "localhost", &w), 0);
    assert_true(w.done);
    assert_int_equal(w.err, 0);
    assert_int_equal(w.status, 200);
    assert_string_equal(w.body, "a.peers.test"); /* the server saw our certificate */

    sl_tls_ctx *wrong = client_ctx(NULL, "wrongca.pem", "h2");
    h2_seen w2 = {0};
    assert_int_equal(h2_over_tls(port, wrong, "localhost", &w2), -EKEYREJECTED);
    assert_true(w2.done); /* the stream ended with the session */
    assert_int_equal(w2.status, 0);

    sl_tls_ctx_unref(good);
    sl_tls_ctx_unref(wrong);
    sl_server_shutdown(srv, 1000);
    assert_int_equal(sl_server_wait(srv), 0);
    sl_server_free(srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handshake_alpn_h2),
        cmocka_unit_test(test_alpn_http11_and_none),
        cmocka_unit_test(test_client_auth),
        cmocka_unit_test(test_client_identity_names),
        cmocka_unit_test(test_client_verifies_server),
        cmocka_unit_test(test_client_checks_ip_names_and_system_store),
        cmocka_unit_test(test_plaintext_refused),
        cmocka_unit_test(test_input_bound),
        cmocka_unit_test(test_reload_keeps_old_sessions),
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_under_server),
        cmocka_unit_test(test_h2_through_h2sock_tls),
    };
    return cmocka_run_group_tests(tests, sl_testcerts_setup, sl_testcerts_teardown);
}

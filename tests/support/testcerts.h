/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test certificates for the unit tests that speak TLS (net/test_tls.c, client/test_client_tls.c),
 * made with OpenSSL in a temporary directory by the group setup: ca.pem; server.pem/.key (CN
 * localhost, SAN localhost); server2 (a second server certificate, CN reloaded); client (CN
 * peer-a, SANs a.peers.test, b.peers.test, IP 10.1.2.3); cnonly (no SAN); an expired client;
 * wrongca.pem and a certificate it signed (stranger). path(name) is a file in that directory.
 * Include after <cmocka.h>; link OpenSSL.
 */
#ifndef SLUICE_TESTS_TESTCERTS_H
#define SLUICE_TESTS_TESTCERTS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

static char dir[64];

static char *path(const char *name)
{
    static char buf[8][128];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 128, "%s/%s", dir, name);
    return p;
}

static EVP_PKEY *make_key(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    return k;
}

/* A certificate for cn (with a DNS SAN when san != NULL), signed by (ca, cakey), or self-signed
 * when ca is NULL; valid from `from` to `to` seconds relative to now. */
static X509 *make_cert(const char *cn, const char *san, EVP_PKEY *key, X509 *ca, EVP_PKEY *cakey,
                       long from, long to, bool is_ca)
{
    static long serial = 1;
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), from);
    X509_gmtime_adj(X509_getm_notAfter(x), to);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : n);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, ca ? ca : x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints,
                                              is_ca ? "critical,CA:TRUE" : "CA:FALSE");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    if (san) {
        char v[160];
        snprintf(v, sizeof v, "DNS:%s", san);
        ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, v);
        X509_add_ext(x, ext, -1);
        X509_EXTENSION_free(ext);
    }
    assert_true(X509_sign(x, ca ? cakey : key, EVP_sha256()) > 0);
    return x;
}

static void write_pem(const char *name, X509 *x, EVP_PKEY *k)
{
    FILE *f = fopen(path(name), "w");
    assert_non_null(f);
    if (x)
        assert_int_equal(PEM_write_X509(f, x), 1);
    if (k)
        assert_int_equal(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
    if (k) /* a key must be the owner's alone (tls.c refuses it otherwise) */
        assert_int_equal(chmod(path(name), 0600), 0);
}

/* ca.pem; server.pem/.key (CN localhost, SAN localhost); server2 (a second server certificate,
 * CN reloaded); client (CN peer-a, SANs a.peers.test, b.peers.test, IP 10.1.2.3); expired
 * client; wrongca.pem and a client signed by it. */
static int sl_testcerts_setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/sl_tls_XXXXXX");
    assert_non_null(mkdtemp(dir));
    EVP_PKEY *cak = make_key(), *cak2 = make_key();
    X509 *ca = make_cert("Test CA", NULL, cak, NULL, NULL, 0, 86400, true);
    X509 *ca2 = make_cert("Other CA", NULL, cak2, NULL, NULL, 0, 86400, true);
    write_pem("ca.pem", ca, NULL);
    write_pem("wrongca.pem", ca2, NULL);
    struct {
        const char *name, *cn, *san;
        X509 *ca;
        EVP_PKEY *cak;
        long from, to;
    } certs[] = {
        {"server", "localhost", "localhost", ca, cak, 0, 86400},
        {"server2", "reloaded", "localhost", ca, cak, 0, 86400},
        {"client", "peer-a", "a.peers.test,DNS:b.peers.test,IP:10.1.2.3", ca, cak, 0, 86400},
        {"cnonly", "just-a-cn", NULL, ca, cak, 0, 86400},
        {"expired", "old", NULL, ca, cak, -7200, -3600},
        {"stranger", "stranger", NULL, ca2, cak2, 0, 86400},
    };
    for (size_t i = 0; i < sizeof certs / sizeof certs[0]; i++) {
        EVP_PKEY *k = make_key();
        X509 *x = make_cert(certs[i].cn, certs[i].san, k, certs[i].ca, certs[i].cak,
                            certs[i].from, certs[i].to, false);
        char n[64];
        snprintf(n, sizeof n, "%s.pem", certs[i].name);
        write_pem(n, x, NULL);
        snprintf(n, sizeof n, "%s.key", certs[i].name);
        write_pem(n, NULL, k);
        X509_free(x);
        EVP_PKEY_free(k);
    }
    X509_free(ca);
    X509_free(ca2);
    EVP_PKEY_free(cak);
    EVP_PKEY_free(cak2);
    return 0;
}

static int sl_testcerts_teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif

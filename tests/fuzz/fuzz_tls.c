/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for tls/tls: a server session fed arbitrary network bytes (split where the
 * first byte says), as a TLS port receives them from anyone. Every result must be one of the
 * documented ones (bytes, 0, -EPROTO, -ECONNRESET, -EMSGSIZE), a failed session must stay failed
 * and say why, and output must never exceed a few records. The certificate is made once, in
 * memory, and written to a temporary file for sl_tls_ctx_new.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "tls/tls.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sl_tls_ctx *make_ctx(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    CHECK(k && x);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, k);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"fuzz", -1, -1, 0);
    X509_set_issuer_name(x, n);
    CHECK(X509_sign(x, k, EVP_sha256()) > 0);
    char path[] = "/tmp/fuzz_tls_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    CHECK(f && PEM_write_X509(f, x) == 1 &&
          PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
    sl_tls_config cfg = {.server = true, .cert_file = path, .key_file = path};
    sl_tls_ctx *ctx = NULL;
    char err[256];
    CHECK(sl_tls_ctx_new(&ctx, &cfg, err, sizeof err) == 0);
    unlink(path);
    X509_free(x);
    EVP_PKEY_free(k);
    return ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sl_tls_ctx *ctx;
    if (!ctx)
        ctx = make_ctx();
    sl_tls *t = sl_tls_new(ctx, NULL);
    CHECK(t);
    size_t cut = size ? 1 + data[0] % 64 : 0;
    size_t off = size ? 1 : 0;
    bool failed = false;
    while (off < size && !failed) {
        size_t n = size - off < cut ? size - off : cut;
        int frc = sl_tls_feed(t, data + off, n);
        CHECK(frc == 0 || frc == -EMSGSIZE);
        off += n;
        for (;;) {
            char buf[512];
            ssize_t r = sl_tls_read(t, buf, sizeof buf);
            CHECK(r <= (ssize_t)sizeof buf);
            if (r == 0)
                break;
            if (r < 0) {
                CHECK(r == -EPROTO || r == -ECONNRESET);
                if (r == -EPROTO) {
                    CHECK(sl_tls_failure_get(t) != SL_TLS_OK);
                    CHECK(sl_tls_read(t, buf, sizeof buf) == -EPROTO);
                }
                failed = true;
                break;
            }
        }
        CHECK(sl_tls_out(t)->len < (size_t)1 << 20);
        sl_buf_consume(sl_tls_out(t), sl_tls_out(t)->len);
    }
    sl_tls_free(t);
    return 0;
}

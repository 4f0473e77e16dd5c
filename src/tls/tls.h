/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_tls: the TLS record layer, sans I/O. OpenSSL 3 runs over two memory BIOs: bytes from the
 * network go in (sl_tls_feed), plaintext comes out (sl_tls_read); plaintext goes in
 * (sl_tls_write), bytes for the network come out (sl_tls_out). The handshake is driven by those
 * same calls. Nothing here touches a socket, so a client and a server session can be tested by
 * passing bytes between them in memory, and the same code serves the listening server
 * (net/server.c), the peer client (cluster/peer.c) and unit tests.
 *
 * A context (sl_tls_ctx) holds what is loaded from files: certificate, key, CA bundle, ALPN and
 * client-certificate policy. It is reference-counted: a session holds a reference for its whole
 * life, so a reload (a new context for new connections, see sl_server_set_tls) never disturbs
 * the sessions that started under the old one.
 *
 * OpenSSL types stay inside tls.c: users of this header do not compile against OpenSSL.
 */
#ifndef SLUICE_TLS_TLS_H
#define SLUICE_TLS_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"

typedef struct sl_tls_ctx sl_tls_ctx;
typedef struct sl_tls sl_tls;

/* Client certificates, asked of clients by a server context. */
typedef enum sl_tls_auth {
    SL_TLS_AUTH_NONE = 0,    /* not asked for */
    SL_TLS_AUTH_REQUEST = 1, /* asked for; a client may send none, one it sends must verify */
    SL_TLS_AUTH_REQUIRE = 2, /* a verified certificate is required */
} sl_tls_auth;

typedef struct sl_tls_config {
    bool server;
    const char *cert_file; /* PEM chain; required for a server, optional for a client */
    const char *key_file;  /* PEM private key matching cert_file */
    const char *ca_file;   /* PEM bundle the peer's certificate must chain to: a server's client
                              certificates, a client's server certificate. A client without it
                              does not verify (not recommended). */
    const char *ca_file2;  /* optional second bundle trusted alike (e.g. the peers' CA) */
    /* For messages: the options that named cert_file, key_file, ca_file, ca_file2 ("tls-cert"),
     * so that an error says "option 'tls-cert': certificate F: not PEM ..."; NULL = none. */
    const char *cert_opt, *key_opt, *ca_opt, *ca2_opt;
    bool system_ca;        /* client without ca_file: verify against the system's trust store
                              (OpenSSL's default paths) instead of not at all */
    sl_tls_auth client_auth; /* server: client certificates (needs ca_file unless NONE) */
    const char *alpn;      /* client: protocols offered, comma-separated; default "h2";
                              "none": no ALPN extension (a protocol that has none: Redis).
                              A server offers h2 and http/1.1, h2 first. */
} sl_tls_config;

/* Why a session failed, for counters. */
typedef enum sl_tls_failure {
    SL_TLS_OK = 0,
    SL_TLS_FAIL_PLAINTEXT, /* the first bytes were not a TLS handshake record */
    SL_TLS_FAIL_CERT,      /* the peer's certificate was missing, expired or not from the CA */
    SL_TLS_FAIL_PROTOCOL,  /* any other handshake or record error, or an alert from the peer */
} sl_tls_failure;

/* Load a context. 0, or a negative errno with a message (OpenSSL's reason) in err. */
int sl_tls_ctx_new(sl_tls_ctx **out, const sl_tls_config *cfg, char *err, size_t errlen);
/* References: every holder (a server's current context, each session) holds one. Thread-safe. */
sl_tls_ctx *sl_tls_ctx_ref(sl_tls_ctx *ctx);
void sl_tls_ctx_unref(sl_tls_ctx *ctx);

/* A slot holding the current context of a listener or a client, replaced on reload while other
 * threads start sessions from it: each session takes a reference to the context current when it
 * starts, so a replacement never disturbs sessions already running. Thread-safe. */
typedef struct sl_tls_slot sl_tls_slot;
/* NULL on no memory; takes its own reference to ctx. */
sl_tls_slot *sl_tls_slot_new(sl_tls_ctx *ctx);
void sl_tls_slot_free(sl_tls_slot *s);
/* Sessions started from now on use ctx (the slot takes a reference, drops the old one's). */
void sl_tls_slot_set(sl_tls_slot *s, sl_tls_ctx *ctx);
/* sl_tls_new under the current context. */
sl_tls *sl_tls_slot_session(sl_tls_slot *s, const char *server_name);

/* A session under ctx (takes a reference). server_name: a client's SNI and the name its
 * server's certificate must carry (NULL: no name check, the CA check alone); an IP address
 * (v4 or v6 text) is matched against the certificate's IP subjectAltNames and sends no SNI, as
 * RFC 6066 asks. NULL on no memory or a name OpenSSL refuses. */
sl_tls *sl_tls_new(sl_tls_ctx *ctx, const char *server_name);
void sl_tls_free(sl_tls *t);

/* Bytes from the network. 0, or -EMSGSIZE when more than a few records' worth is held unread
 * (the caller must sl_tls_read after each feed). */
int sl_tls_feed(sl_tls *t, const void *data, size_t len);
/* Drive the handshake and decrypt: plaintext into buf (up to cap). > 0 bytes, 0 nothing more
 * until more is fed, or a negative errno: -ECONNRESET the peer closed the session, -EPROTO the
 * session failed (sl_tls_failure says why). Output it produced (handshake, alerts) is in
 * sl_tls_out. A client calls it once before feeding anything to start its handshake. */
ssize_t sl_tls_read(sl_tls *t, void *buf, size_t cap);
/* Encrypt plaintext into sl_tls_out. Before the handshake completes nothing is taken: returns the
 * bytes taken (all of them once ready), or a negative errno (-ENOMEM, -EPROTO). */
ssize_t sl_tls_write(sl_tls *t, const void *data, size_t len);
/* Bytes for the network; the caller consumes from the front (sl_buf_consume). */
sl_buf *sl_tls_out(sl_tls *t);
/* Queue a close_notify alert in sl_tls_out. */
void sl_tls_close(sl_tls *t);

/* The handshake completed. */
bool sl_tls_ready(const sl_tls *t);
sl_tls_failure sl_tls_failure_get(const sl_tls *t);
/* The protocol ALPN chose ("h2", "http/1.1"), "" when none; valid once ready. */
const char *sl_tls_alpn(const sl_tls *t);
/* The verified peer certificate's identity: its first DNS subjectAltName, else its subject CN
 * (1 to 255 bytes of printable ASCII; a name with any other byte, an embedded NUL, or longer, is
 * not used: never cut or rewritten into another name). NULL when the peer sent no
 * certificate or it did not verify. Valid once ready, for the session's life. After the
 * identity's NUL come the certificate's DNS and IP subjectAltNames (at most 16, IPs as text),
 * each NUL-terminated, the list ended by an empty string (auth/addr.h sl_addr_names_host). */
const char *sl_tls_peer_identity(const sl_tls *t);
/* The same list read from a DER certificate (not verified here: a session reads it this way from
 * a certificate that verified), malloc'd (free() it); NULL for bad DER, a certificate that names
 * nothing usable, or no memory. For tests and tests/fuzz/fuzz_certident.c. */
char *sl_tls_cert_identity(const uint8_t *der, size_t len);
/* OpenSSL's last reason for a failure (static text), for a log line. */
const char *sl_tls_error(const sl_tls *t);

/* Counters of a TLS listener (net/server.c), summed over its workers. */
typedef struct sl_tls_stats {
    uint64_t handshakes;     /* completed */
    uint64_t fail_plaintext; /* plaintext sent to the TLS port */
    uint64_t fail_cert;      /* client certificate missing, expired or from another CA */
    uint64_t fail_protocol;  /* other handshake failures */
    uint64_t timed_out;      /* handshake not done within the handshake deadline */
    uint64_t reloads;        /* contexts installed after the first (SIGHUP) */
} sl_tls_stats;

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The handler interface of the network layer: one request/response pair ("exchange") as the
 * handlers above see it, whatever the protocol underneath (HTTP/1.1 or HTTP/2, gRPC or not).
 *
 * The server calls ONE handler, `(void *ud, sl_exchange *ex)`, when a request is complete. The
 * handler reads the request view (sl_exchange_request) and answers with one of the respond calls,
 * either right away or later from the same loop thread (e.g. after a peer replied). Every exchange
 * handed to the handler must be answered exactly once; after the respond call the pointer is dead.
 * If the client went away first, the respond is a cheap no-op (the exchange is reference-counted:
 * one reference for the connection, one for the handler), and an optional cancel callback tells
 * the handler early so it can skip work.
 *
 * Threading: an exchange belongs to the loop thread it arrived on (sl_exchange_loop). Another
 * thread hands a response over by posting a closure to that loop (sl_server_post, which wraps a
 * uv_async_t) and responding from inside it. Nothing here takes a lock.
 *
 * sl_http_ctx is the per-loop state the protocol code shares: limits, handler, the cached clock
 * and Date header, the exchange pool (no malloc per request once warm) and the counters. The
 * sans-I/O connection code (conn/h1/h2) needs only a ctx, so tests and fuzzers drive it without
 * sockets; the libuv shell (server.c) keeps one ctx per worker.
 */
#ifndef SLUICE_NET_EXCHANGE_H
#define SLUICE_NET_EXCHANGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <uv.h>

#include "base/buf.h"
#include "net/reqmem.h"

typedef enum sl_http_proto { SL_HTTP_1 = 1, SL_HTTP_2 = 2 } sl_http_proto;

/* A header field. Strings are NUL-terminated as well as sized. HTTP/2 names are lowercase;
 * HTTP/1.1 names keep the client's case (look them up with sl_http_header_find). */
typedef struct sl_http_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sl_http_header;

/* Builds an sl_http_header from two string literals. */
#define SL_HTTP_HEADER(n, v) ((sl_http_header){(n), sizeof(n) - 1, (v), sizeof(v) - 1})

/* The request as a handler sees it. Everything points into the exchange and stays valid until
 * the exchange is answered (even if the connection died meanwhile). */
typedef struct sl_http_request {
    const char *method;           /* "GET", "POST", ... (NUL-terminated) */
    size_t method_len;
    const char *path;             /* request-target / :path, query included (NUL-terminated) */
    size_t path_len;
    const sl_http_header *headers; /* regular headers; for HTTP/2 :authority appears as "host" */
    size_t nheaders;
    const uint8_t *body;          /* whole body, de-chunked; NUL-terminated past body_len */
    size_t body_len;
    sl_http_proto proto;
    bool grpc;                    /* HTTP/2 POST with content-type application/grpc* */
    bool early;                   /* dispatched at its headers (sl_http_early_cb): no body yet */
    /* HTTP/2: the gRPC fields every call reads, found while the header block was decoded (NULL
     * when absent), so that no handler scans the headers for them */
    const sl_http_header *grpc_encoding, *grpc_accept_encoding, *grpc_timeout;
    const struct sockaddr *peer;  /* client address (AF_INET/AF_INET6), NULL if unknown */
} sl_http_request;

/* A response. The body, headers and trailers are copied before the call returns.
 * Content-Length and Connection are managed by the server (ignored if given). Trailers are sent
 * on HTTP/2 only (they are how gRPC carries grpc-status); HTTP/1.1 drops them. */
typedef struct sl_http_response {
    int status; /* 100..999 */
    const sl_http_header *headers;
    size_t nheaders;
    const void *body;
    size_t body_len;
    const sl_http_header *trailers;
    size_t ntrailers;
} sl_http_response;

#define SL_HTTP_MAX_TRAILERS 8

typedef struct sl_exchange sl_exchange;
typedef struct sl_http_ctx sl_http_ctx;

typedef void (*sl_http_handler)(void *ud, sl_exchange *ex);
typedef void (*sl_exchange_cancel_cb)(void *ud, sl_exchange *ex);
/* HTTP/2 gRPC only: asked when a request's header block has ended and its body has not, with
 * the request's method and path (nothing else of the view is set). True: hand it to the handler now
 * (request->early is set), e.g. to answer an unknown method with UNIMPLEMENTED without waiting
 * for a body the client may never end, or to serve a bidirectional stream
 * (sl_exchange_set_recv). False: as usual, when the request is complete. */
typedef bool (*sl_http_early_cb)(void *ud, const sl_http_request *rq);
/* The bytes of a request dispatched early, as they arrive (DATA payloads, gRPC frames cut
 * anywhere), and end = true once the client has half-closed. Called on the loop thread while
 * the exchange is owed; not after the answer or the cancel callback. */
typedef void (*sl_exchange_recv_cb)(void *ud, sl_exchange *ex, const uint8_t *data, size_t len,
                                    bool end);

/* Limits of the protocol layer (the server adds connection-level ones). 0 means the default. */
typedef struct sl_http_limits {
    size_t max_header_bytes;    /* request line/pseudo-headers + names + values: 16 KiB -> 431 */
    uint32_t max_headers;       /* header fields per request: 100 -> 431 */
    size_t max_body_bytes;      /* 1 MiB + 64 (gRPC framing and slack) -> 413 */
    uint32_t h1_max_pipeline;   /* requests parsed ahead of their responses: 64 (backpressure) */
    uint32_t h2_max_streams;    /* SETTINGS_MAX_CONCURRENT_STREAMS: 256 */
    uint32_t h2_window;         /* SETTINGS_INITIAL_WINDOW_SIZE and connection window: 1 MiB */
    size_t conn_buffer_bytes;   /* request bytes held per connection (parsed, unanswered): 8 MiB;
                                   h1 stops parsing above it, h2 refuses the stream */
    size_t out_high_water;      /* pending output above which a connection stops reading: 1 MiB */
    size_t conn_unsent_bytes;   /* h2: bytes of answers submitted and not yet sent (a peer's shut
                                   flow-control window holds them) per connection, above which it
                                   stops reading: 4 MiB */
    size_t unsent_bytes;        /* the same summed over the ctx's connections, above which every
                                   connection holding unsent answers stops reading: 256 MiB */
    uint32_t max_conn_errors;   /* protocol errors and refused requests (431, 413, invalid
                                   frames) one connection may provoke before it is closed
                                   (HTTP/2: GOAWAY ENHANCE_YOUR_CALM): 16 */
} sl_http_limits;

void sl_http_limits_defaults(sl_http_limits *l);

/* Counters of one loop (sum them over workers with sl_server_stats). Written by one thread only,
 * with relaxed atomics so a reader on another thread gets untorn values without a locked
 * instruction on the hot path. */
enum {
    SL_NET_CONNS_OPEN,
    SL_NET_CONNS_ACCEPTED,
    SL_NET_CONNS_REFUSED,      /* over max_conns */
    SL_NET_CONNS_TIMED_OUT,    /* idle, read, write or linger timeout */
    SL_NET_REQUESTS_H1,
    SL_NET_REQUESTS_H2,
    SL_NET_REQUESTS_GRPC,      /* also counted in REQUESTS_H2 */
    SL_NET_PROTOCOL_ERRORS,    /* malformed HTTP/1.1, HTTP/2 protocol errors, limit violations */
    SL_NET_BYTES_IN,
    SL_NET_BYTES_OUT,
    SL_NET_CONNS_CALMED,       /* closed for provoking max_conn_errors errors */
    SL_NET_ACCEPT_PAUSES,      /* accepting paused at the file-descriptor limit (EMFILE/ENFILE) */
    SL_NET_STAT_COUNT
};

typedef struct sl_net_stats {
    uint64_t conns_open, conns_accepted, conns_refused, conns_timed_out;
    uint64_t requests_h1, requests_h2, requests_grpc;
    uint64_t protocol_errors, bytes_in, bytes_out;
    uint64_t conns_calmed, accept_pauses;
} sl_net_stats;

/* ---- the request and the answer (handler side) ---- */

const sl_http_request *sl_exchange_request(const sl_exchange *ex);
/* TLS with client certificates: the identity of the verified certificate the client presented
 * (its first DNS subjectAltName, else its subject CN; see tls/tls.h), e.g. to serve PeersV1
 * only to a certificate that names a peer. NULL on plaintext, without a verified certificate,
 * or once the connection is gone. Valid until the exchange is answered. The certificate's DNS
 * and IP subjectAltNames follow the identity's NUL (the list format of sl_tls_peer_identity). */
const char *sl_exchange_peer_identity(const sl_exchange *ex);
/* Case-insensitive lookup of the first header with this name, or NULL. */
const sl_http_header *sl_http_header_find(const sl_http_request *r, const char *name);
/* True when the request's path is p, with or without a query string. Inline: the handlers'
 * routing calls it several times per request. */
static inline bool sl_http_path_is(const sl_http_request *rq, const char *p)
{
    size_t n = strlen(p);
    if (rq->path_len < n || memcmp(rq->path, p, n) != 0)
        return false;
    return rq->path_len == n || rq->path[n] == '?';
}

/* Answer. 0, or -ENOTCONN if the client is gone (the call was a no-op, the exchange is released
 * all the same), -EINVAL on a status outside 200..599 or more than SL_HTTP_MAX_TRAILERS trailers
 * (the client then gets a 500), -ENOMEM. In every case the exchange is consumed: answering twice
 * is a bug (the second call may touch a recycled exchange). */
int sl_exchange_respond(sl_exchange *ex, const sl_http_response *r);
/* Status + optional content type + body. */
int sl_exchange_respond_simple(sl_exchange *ex, int status, const char *content_type,
                               const void *body, size_t body_len);
/* A gRPC success or error with a message: HEADERS(:status 200, content-type application/grpc),
 * DATA(msg: already length-prefixed by the caller's gRPC framing), trailers(grpc-status,
 * grpc-message). grpc_message may be NULL; it is percent-encoded as gRPC requires and cut at
 * 1 KiB. */
int sl_exchange_respond_grpc(sl_exchange *ex, const void *msg, size_t msg_len, int grpc_status,
                             const char *grpc_message);
/* The same with grpc-encoding: `encoding` (NULL: none), for a message compressed with it, and
 * grpc-accept-encoding: SL_GRPC_ACCEPT_ENCODING when `advertise` or `encoding` (for a client that
 * negotiates encodings: it sent grpc-accept-encoding or grpc-encoding). */
int sl_exchange_respond_grpc_enc(sl_exchange *ex, const void *msg, size_t msg_len,
                                 int grpc_status, const char *grpc_message, const char *encoding,
                                 bool advertise);
/* A trailers-only gRPC answer (one HEADERS frame carrying grpc-status), for errors. It carries
 * grpc-accept-encoding: SL_GRPC_ACCEPT_ENCODING, so that a client whose encoding was refused
 * falls back. */
int sl_exchange_respond_grpc_status(sl_exchange *ex, int grpc_status, const char *grpc_message);

/* ---- server streaming (HTTP/2 only): one answer sent as it is made ----
 * _open sends the answer's HEADERS (status and headers of `head`; its body and trailers are
 * ignored, no content-length) and leaves the exchange owed: the handler then pushes DATA bytes
 * as they come, from the exchange's loop thread, and ends with _close (trailers, e.g. gRPC's
 * grpc-status), which consumes the exchange like a respond call. What is pushed and not yet sent
 * (the client's flow-control window holds it) is queued in the exchange; _push refuses to queue
 * past max_queued bytes, so a slow consumer costs a bounded amount and the handler closes it.
 * A streaming exchange is owed, so the connection has no timeout of ours while it is open (the
 * handler keeps its own: heartbeats, a maximum life). The cancel callback tells of a client
 * that went away; _close is still needed to release. */
/* 0; -ENOTSUP on HTTP/1.1 (answer with a respond call instead), -ENOTCONN, -EINVAL (not owed or
 * already streaming), -ENOMEM. */
int sl_exchange_stream_open(sl_exchange *ex, const sl_http_response *head);
/* 0; -ENOBUFS (queued + len > max_queued: nothing queued), -ENOTCONN, -EINVAL (not streaming),
 * -ENOMEM. */
int sl_exchange_stream_push(sl_exchange *ex, const void *data, size_t len, size_t max_queued);
/* Bytes pushed and not yet handed to the protocol. */
size_t sl_exchange_stream_queued(const sl_exchange *ex);
/* End the stream with these trailers (at most SL_HTTP_MAX_TRAILERS). Consumes the exchange;
 * 0 or -ENOTCONN (a no-op), -EINVAL, -ENOMEM. */
int sl_exchange_stream_close(sl_exchange *ex, const sl_http_header *trailers, size_t ntrailers);

/* Told once, on the loop thread, when the connection starts draining (the server shuts down, or
 * sends GOAWAY) while the handler still owes this answer: a stream that would stay open (a
 * watch) ends now with its own last words instead of holding the drain to its grace period. */
void sl_exchange_set_drain(sl_exchange *ex, sl_exchange_cancel_cb cb, void *ud);

/* Take the rest of an early-dispatched request's body through cb (see sl_exchange_recv_cb);
 * without it, what follows the headers of such a request is dropped. */
void sl_exchange_set_recv(sl_exchange *ex, sl_exchange_recv_cb cb, void *ud);

/* Called at most once, on the loop thread, if the connection (or HTTP/2 stream) dies while the
 * handler still owes the answer. The handler must still respond (a no-op by then) to release. */
void sl_exchange_set_cancel(sl_exchange *ex, sl_exchange_cancel_cb cb, void *ud);
/* False once the client is gone (responding would be a no-op). */
bool sl_exchange_alive(const sl_exchange *ex);
/* The loop the exchange lives on (NULL when driven without a server, e.g. in tests). */
uv_loop_t *sl_exchange_loop(const sl_exchange *ex);
/* The worker index (0..workers-1) of that loop, for sl_server_post. */
int sl_exchange_worker(const sl_exchange *ex);
/* The loop's cached wall clock, epoch ms, moved once per loop iteration. */
int64_t sl_exchange_now_ms(const sl_exchange *ex);
/* A free pointer for the handler (e.g. its pending-call record). */
void sl_exchange_set_user(sl_exchange *ex, void *user);
void *sl_exchange_user(const sl_exchange *ex);

/* ---- per-loop context ---- */

/* limits may be NULL (defaults). The ctx copies them. */
sl_http_ctx *sl_http_ctx_new(const sl_http_limits *limits, sl_http_handler handler, void *ud);
/* The early-dispatch question (NULL: none), asked with the handler's ud. */
void sl_http_ctx_set_early(sl_http_ctx *ctx, sl_http_early_cb early);
/* Frees now, or when the last exchange a handler still holds is answered. */
void sl_http_ctx_free(sl_http_ctx *ctx);
/* Server use: bind the ctx to a loop so `now` follows uv_now(loop) + a wall-clock offset. */
void sl_http_ctx_attach_loop(sl_http_ctx *ctx, uv_loop_t *loop, int worker);
/* Re-sync the wall-clock offset (follows steps only; `now` is monotonic otherwise). The server
 * calls it on every timeout tick (at most a second apart). */
void sl_http_ctx_resync_clock(sl_http_ctx *ctx);
/* Without a loop (tests, fuzzers) `now` is whatever was set last. */
void sl_http_ctx_set_now(sl_http_ctx *ctx, int64_t now_ms);
int64_t sl_http_ctx_now_ms(const sl_http_ctx *ctx);
const sl_http_limits *sl_http_ctx_limits(const sl_http_ctx *ctx);
void sl_http_ctx_stats(const sl_http_ctx *ctx, sl_net_stats *add_to);
/* Share the server's bound on buffered request bytes (net/reqmem.h); m may be NULL (none). Set
 * before the first connection. */
void sl_http_ctx_set_reqmem(sl_http_ctx *ctx, sl_reqmem *m);
/* Exchanges handed to the handler and not answered yet (for tests and drain). */
size_t sl_http_ctx_pending(const sl_http_ctx *ctx);

/* ===========================================================================================
 * Below: shared by the protocol modules of src/net only. Handlers use the functions above.
 * =========================================================================================== */

typedef struct sl_hdr_off {
    uint32_t name, name_len, value, value_len; /* offsets into the exchange arena */
} sl_hdr_off;

/* What an owning connection (h1/h2) does when the handler answers. */
typedef struct sl_exchange_ops {
    int (*respond)(void *owner, sl_exchange *ex, const sl_http_response *r);
    /* Streaming (NULL: not supported). open sends the head; push queues ex->resp bytes already
     * appended; end sends what is queued then the trailers stored after it. */
    int (*stream_open)(void *owner, sl_exchange *ex, const sl_http_response *head);
    void (*stream_more)(void *owner, sl_exchange *ex);
} sl_exchange_ops;

enum sl_exchange_state {
    SL_EX_RECV = 0,    /* request being received */
    SL_EX_DISPATCHED,  /* handler owes the answer */
    SL_EX_RESPONDED,   /* answered; the owner may still be sending it */
};

struct sl_exchange {
    sl_http_request req;         /* the view; filled by sl_exchange_finish_request */
    sl_http_ctx *ctx;
    const sl_exchange_ops *ops;
    void *owner;                 /* h1/h2 connection; NULL once detached */
    sl_exchange *next, *prev;    /* owner's lists; ctx free list */
    sl_exchange *qnext;          /* h2: dispatch list */
    sl_exchange *rnext, *rprev;  /* h2: requests being received, oldest first */
    int32_t stream_id;           /* HTTP/2 */
    uint8_t refs;                /* owner + handler */
    uint8_t state;
    bool keepalive;              /* h1: the connection may carry another request after this */
    bool is_head;                /* HEAD: no body in the answer */
    bool headers_done;           /* later fields (chunked/h2 trailers) are dropped */
    bool ready;                  /* h1: answer serialized in resp, waiting for its turn */
    bool queued;                 /* h2: on the dispatch list */
    bool counted;                /* h2: counted as receiving */
    bool close_after;            /* h1: answer carries Connection: close */
    bool http10;
    bool streaming;              /* h2: answer sent as it is pushed (sl_exchange_stream_open) */
    bool stream_end;             /* streaming: closed; trailers follow the queued bytes */
    bool rst_after;              /* h2: answered at its headers: RST_STREAM(NO_ERROR) once sent */
    uint8_t h_enc, h_accept, h_timeout; /* h2: 1 + the index of those headers (0: absent) */
    uint16_t reject;             /* status to answer instead of dispatching (413/431/400) */
    const char *method_static;   /* h1 method name from llhttp (static string) */
    uint32_t method_off, method_len, path_off, path_len;
    uint32_t body_off;
    size_t body_len;
    size_t hdr_bytes;            /* bytes counted against max_header_bytes */
    size_t held;                 /* bytes charged to the owner's conn_buffer_bytes */
    size_t unsent;               /* h2: answer bytes charged to conn_unsent_bytes/unsent_bytes */
    size_t charged;              /* request bytes charged to the ctx's request-memory account
                                    (net/reqmem.h): the arena's allocation, from the first put;
                                    released when the exchange is */
    size_t *conn_mem;            /* the owning connection's count of the same (sl_conn.req_bytes);
                                    NULL once detached */
    int64_t recv_start;          /* h2: when the stream began (ctx clock, ms): its read deadline */
    sl_buf arena;                /* request bytes */
    sl_hdr_off *hoff;
    sl_http_header *hview;
    uint32_t nh, hcap;
    sl_buf resp;                 /* h1: serialized answer waiting its turn; h2: body + trailers */
    size_t resp_off;             /* h2: body bytes already handed to nghttp2 */
    size_t resp_body_len;
    uint32_t ntrailers;
    sl_hdr_off trailers[SL_HTTP_MAX_TRAILERS]; /* offsets into resp */
    sl_exchange_cancel_cb cancel_cb;
    void *cancel_ud;
    void *user;
    sl_exchange_cancel_cb drain_cb; /* the connection drains (sl_exchange_set_drain) */
    void *drain_ud;
    sl_exchange_recv_cb recv_cb; /* an early-dispatched request's body, as it comes */
    void *recv_ud;
    const char *peer_identity;   /* the connection's (conn.h); read only while owner != NULL */
    struct sockaddr_storage peer; /* copied: the view must outlive the connection */
    bool has_peer;
};

struct sl_http_ctx {
    sl_http_limits lim;
    sl_http_handler handler;
    void *handler_ud;
    sl_http_early_cb early;
    uv_loop_t *loop;
    int worker;
    int64_t wall_offset;      /* epoch ms - uv_now(loop) */
    int64_t now_ms;           /* used when loop == NULL */
    int64_t date_sec;         /* second the cached Date line was made for */
    char date_line[64];       /* "Date: ...\r\n" */
    size_t date_len;
    sl_exchange *free_list;
    size_t nfree;
    size_t outstanding;       /* exchanges allocated and not returned */
    size_t pending;           /* dispatched, not answered */
    size_t unsent;            /* h2 answer bytes submitted and not sent, over all connections */
    sl_reqmem_acct mem;       /* request bytes held by this ctx's exchanges (net/reqmem.h) */
    bool dying;
    _Atomic uint64_t stat[SL_NET_STAT_COUNT];
};

static inline void sl_net_stat_add(sl_http_ctx *ctx, int which, uint64_t n)
{
    atomic_store_explicit(&ctx->stat[which],
                          atomic_load_explicit(&ctx->stat[which], memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* A fresh exchange from the pool (refs = 1, the owner's), or NULL on allocation failure. */
sl_exchange *sl_exchange_new(sl_http_ctx *ctx, const sl_exchange_ops *ops, void *owner);
/* Drop one reference; the last returns the exchange to the pool. */
void sl_exchange_unref(sl_exchange *ex);
/* The owner lets go: the handler's respond becomes a no-op; fires the cancel callback. */
void sl_exchange_detach(sl_exchange *ex);
/* Charge the arena's growth to the request-memory accounts (net/reqmem.h): what is charged is
 * the arena's allocation (a reused exchange's kept buffer included), so the accounts move once
 * per request and per growth, not per header. */
void sl_exchange_charge(sl_exchange *ex);
/* Append bytes to the request arena; returns the offset or -errno. Inline: a put that does not
 * grow the arena costs the append and one compare. */
static inline int64_t sl_exchange_put(sl_exchange *ex, const void *p, size_t n)
{
    size_t off = ex->arena.len;
    int rc = sl_buf_append(&ex->arena, p, n);
    if (rc)
        return rc;
    if (__builtin_expect(ex->arena.alloc != ex->charged, 0))
        sl_exchange_charge(ex);
    return (int64_t)off;
}
/* Record a header from arena offsets. -E2BIG past max_headers. */
int sl_exchange_add_header(sl_exchange *ex, uint32_t name, uint32_t name_len, uint32_t value,
                           uint32_t value_len);
/* Build the request view (pointers into the arena). */
void sl_exchange_finish_request(sl_exchange *ex, sl_http_proto proto);
/* Hand to the handler (takes the handler's reference). */
void sl_exchange_dispatch(sl_exchange *ex);
/* Answer from inside the net layer (errors, limits): like a handler would. */
void sl_exchange_respond_error(sl_exchange *ex, int status, const char *text);
/* The cached "Date: ...\r\n" line for the ctx's current second. */
const char *sl_http_ctx_date_line(sl_http_ctx *ctx, size_t *len);
/* "OK", "Not Found", ... ("Unknown" for others). */
const char *sl_http_reason(int status);
/* Case-insensitive equality of a sized name with a lowercase C string. */
bool sl_http_name_eq(const char *name, size_t len, const char *lower);
/* Header names the server writes itself or that HTTP/2 forbids: skipped in user headers. */
bool sl_http_hop_header(const char *name, size_t len);

#endif

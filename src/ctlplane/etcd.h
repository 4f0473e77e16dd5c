/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small etcd v3 client over the JSON gRPC gateway (etcd 3.4+: POST <endpoint>/v3/kv/range,
 * /v3/kv/put, /v3/kv/deleterange, /v3/kv/compaction, /v3/watch, /v3/lease/grant,
 * /v3/lease/keepalive, /v3/lease/revoke), built on libcurl. Keys and values travel base64-encoded in JSON; 64-bit
 * integers arrive as JSON strings. sluice needs only these few calls, so a gRPC stack for etcd
 * would be a large dependency for little gain.
 *
 * Endpoints and failover. The client holds a list of endpoint URLs ("http://127.0.0.1:2379") and
 * a current one. A call that fails at the transport level (connection refused, timeout) or gets a
 * 5xx from the gateway is retried once on each other endpoint in turn, and the first that answers
 * becomes current. An answer with a 4xx status is the caller's error and is not retried.
 *
 * Threads. Unary calls (range, put, delete, leases) share one libcurl handle under a mutex, so one
 * client may be used from several threads (the quota source's watcher and a cluster module's lease
 * keep-alive, say). A watch runs on its own sl_etcd_watch object with its own handle, blocking the
 * calling thread; sl_etcd_watch_stop() from any thread ends it promptly (curl_multi_wakeup).
 *
 * Errors: 0 or a negative errno. -ECONNREFUSED: no endpoint answered; -ETIMEDOUT; -EPROTO: an
 * answer that is not the JSON expected; -EIO: the gateway answered an error status (its message
 * is kept, see sl_etcd_last_error()); -ECANCELED: a watch was stopped.
 */
#ifndef SLUICE_CTLPLANE_ETCD_H
#define SLUICE_CTLPLANE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_ETCD_MAX_ENDPOINTS 16
/* Cap on one unary answer and on one watch message (bytes): a range of the whole quota tree must
 * fit; a misbehaving peer must not make the client buffer without bound. */
#define SL_ETCD_DEFAULT_MAX_RESPONSE ((size_t)64 << 20)

/* TLS to https:// endpoints (PEM files; NULL or "" = unset): the CA bundle that etcd's
 * certificate must chain to (unset: the system's), and a client certificate with its key. */
typedef struct sl_etcd_tls {
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
} sl_etcd_tls;

typedef struct sl_etcd_config {
    const char *const *endpoints; /* URLs without a trailing path; at least one */
    size_t n_endpoints;
    int64_t connect_timeout_ms;   /* 0 = 1000 */
    int64_t request_timeout_ms;   /* unary calls; 0 = 5000 */
    size_t max_response;          /* 0 = SL_ETCD_DEFAULT_MAX_RESPONSE */
    sl_etcd_tls tls;
} sl_etcd_config;

typedef struct sl_etcd sl_etcd;

typedef struct sl_etcd_kv {
    char *key;               /* NUL-terminated copies (keys and values may hold NUL too: use _len) */
    size_t key_len;
    char *value;
    size_t value_len;
    int64_t create_revision;
    int64_t mod_revision;
    int64_t version;
    int64_t lease;
} sl_etcd_kv;

typedef struct sl_etcd_kvs {
    sl_etcd_kv *kvs;
    size_t n;
    int64_t revision;        /* the store's revision when the answer was made (header.revision) */
    bool more;
} sl_etcd_kvs;

void sl_etcd_kvs_free(sl_etcd_kvs *r);

/* Split a comma-separated endpoint list ("http://a:2379,http://b:2379") into `out` (pointers into
 * the caller's string, which is modified). Returns the count, or -EINVAL when empty or too many. */
int sl_etcd_split_endpoints(char *list, const char **out, size_t max);

int sl_etcd_new(const sl_etcd_config *cfg, sl_etcd **out);
/* A client for a comma-separated endpoint list (what --storage-addrs holds), with the request
 * timeout in ms (<= 0: 5000). -EINVAL for a bad list, -ENOMEM; the endpoints are copied. */
int sl_etcd_new_from_list(const char *list, long timeout_ms, sl_etcd **out);
/* Where a command-line tool finds etcd before its flags: $SLUICE_STORAGE_ADDRS, else
 * http://127.0.0.1:2379; the tree's root: $SLUICE_STORAGE_PREFIX, else /sluice. */
void sl_etcd_cli_defaults(const char **addrs, const char **root);
void sl_etcd_free(sl_etcd *e);

/* The endpoint the next call tries first, and how many times a call moved to another one. */
const char *sl_etcd_current_endpoint(sl_etcd *e, char *buf, size_t size);
uint64_t sl_etcd_failovers(sl_etcd *e);
/* The last error text (gateway message or curl's), copied into buf. */
const char *sl_etcd_last_error(sl_etcd *e, char *buf, size_t size);

/* The key range that holds every key starting with `prefix` (etcd's "prefix end": the prefix
 * with its last byte below 0xff incremented). `out` must have room for len bytes; returns the
 * length, or 0 when the prefix is empty or all 0xff (meaning "to the end": pass "\0"). */
size_t sl_etcd_prefix_end(const char *prefix, size_t len, char *out);

/* Range: one key, or every key with the prefix when `prefix` is true. limit 0 = no limit.
 * keys_only leaves values empty. */
int sl_etcd_range(sl_etcd *e, const char *key, size_t key_len, bool prefix, int64_t limit,
                  bool keys_only, sl_etcd_kvs *out);
/* Put; lease 0 = none. *revision (may be NULL) gets the revision of the write. */
int sl_etcd_put(sl_etcd *e, const char *key, size_t key_len, const char *val, size_t val_len,
                int64_t lease, int64_t *revision);
/* Delete one key or a prefix; *deleted (may be NULL) gets the number of keys removed. */
int sl_etcd_delete(sl_etcd *e, const char *key, size_t key_len, bool prefix, int64_t *deleted,
                   int64_t *revision);

/* Compact the history up to `revision` (watches from older revisions then get -ERANGE). */
int sl_etcd_compact(sl_etcd *e, int64_t revision);

/* Leases: grant with a TTL (seconds; id 0 lets etcd choose), refresh once (one keep-alive round
 * trip; *ttl gets the remaining TTL, 0 when the lease is gone: -ENOENT), revoke. */
int sl_etcd_lease_grant(sl_etcd *e, int64_t ttl_s, int64_t id, int64_t *id_out,
                        int64_t *ttl_out);
int sl_etcd_lease_keepalive(sl_etcd *e, int64_t id, int64_t *ttl_out);
int sl_etcd_lease_revoke(sl_etcd *e, int64_t id);

/* ---- watch ---- */

typedef enum sl_etcd_event_type { SL_ETCD_PUT = 0, SL_ETCD_DELETE = 1 } sl_etcd_event_type;

typedef struct sl_etcd_event {
    sl_etcd_event_type type;
    sl_etcd_kv kv;           /* for a delete: key and mod_revision only */
} sl_etcd_event;

typedef struct sl_etcd_watch_msg {
    int64_t revision;         /* header.revision */
    bool created;             /* the watch is established (first message) */
    bool canceled;            /* etcd ended the watch (compaction, ...) */
    int64_t compact_revision; /* with canceled: the oldest revision still available */
    const sl_etcd_event *events;
    size_t n_events;
} sl_etcd_watch_msg;

/* Called for every message on the watching thread; return nonzero to end the watch (run then
 * returns that value). */
typedef int (*sl_etcd_watch_cb)(void *ud, const sl_etcd_watch_msg *msg);

typedef struct sl_etcd_watch sl_etcd_watch;

int sl_etcd_watch_new(sl_etcd *e, sl_etcd_watch **out);
void sl_etcd_watch_free(sl_etcd_watch *w);

/*
 * Watch `key` (or the prefix) from `start_revision` (0 = from now), delivering messages to cb
 * until the stream ends. Tries the endpoints like a unary call until one accepts the watch.
 * Returns: the callback's nonzero value; -ECANCELED after sl_etcd_watch_stop(); -ERANGE when etcd
 * canceled the watch because start_revision was compacted (re-read and watch again); or a
 * transport error (-ECONNRESET when an established stream broke). Never returns 0.
 */
int sl_etcd_watch_run(sl_etcd_watch *w, const char *key, size_t key_len, bool prefix,
                      int64_t start_revision, sl_etcd_watch_cb cb, void *ud);
/* From any thread: make the current and every later run return -ECANCELED promptly. */
void sl_etcd_watch_stop(sl_etcd_watch *w);

/* ---- the answers' codecs, apart from the transport ----
 * Pure (no curl, no I/O): sl_etcd_range and sl_etcd_watch_run decode through them, and so does
 * tests/fuzz/fuzz_etcd.c. */

/* A /v3/kv/range answer's body (JSON; keys and values base64) into *out, which is zeroed first
 * and freed with sl_etcd_kvs_free: 0, -EPROTO (not a JSON object, or a key or value that is not
 * base64; *out then empty) or -ENOMEM. */
int sl_etcd_range_decode(const char *body, size_t len, sl_etcd_kvs *out);

/* The body of a /v3/watch answer as it arrives: split into lines of at most `max` bytes, each a
 * JSON message given to cb as an sl_etcd_watch_msg (what sl_etcd_watch_run delivers). The fields
 * below `ud` are the decoder's. */
typedef struct sl_etcd_stream {
    sl_etcd_watch_cb cb;
    void *ud;
    size_t max;           /* cap on one message (bytes); 0 = SL_ETCD_DEFAULT_MAX_RESPONSE */
    bool created;         /* a message said "created" (set after cb saw the first one) */
    int result;           /* nonzero once the stream ended: what sl_etcd_stream_feed returned */
    char err[200];        /* why, for a log line */
    char *line;           /* the message being received */
    size_t len, cap;
} sl_etcd_stream;

void sl_etcd_stream_init(sl_etcd_stream *st, size_t max, sl_etcd_watch_cb cb, void *ud);
/* Feed bytes. 0 to go on; else the value the watch ends with, as sl_etcd_watch_run returns it
 * (cb's nonzero value, -EPROTO a message that is not JSON or bad base64, -EIO an error message
 * or a cancel, -ERANGE a cancel for compaction, -EMSGSIZE a line over max, -ENOMEM); once
 * nonzero, every later call returns it again. */
int sl_etcd_stream_feed(sl_etcd_stream *st, const char *p, size_t n);
void sl_etcd_stream_free(sl_etcd_stream *st);

#endif

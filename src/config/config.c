/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluiced's options (see config.h): the table that says which options exist, with their defaults,
 * bounds, help and --help groups, and the parse that applies the sources in order and then the
 * computed defaults and the rules that span several options. The machinery is config/opt.c.
 */
#include "config/config.h"

#include <errno.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/hostport.h"
#include "config/diag.h"
#include "config/opt_int.h"

/* The offset of a field, and a compile error if the field's type is not T: the table cannot point
 * an option of one type at a field of another. */
#define FIELD(f, T)                                                                                \
    (offsetof(sl_options, f) + 0 * sizeof(char[_Generic(((sl_options *)0)->f, T : 1, default : -1)]))

#define MS (INT64_C(1000000))
#define SEC (1000 * MS)

#define G_GENERAL "General"
#define G_LIMITS "Limits"
#define G_ENGINE "Engine"
#define G_QUOTAS "Quotas (Levee)"
#define G_METRICS "Metrics"
#define G_CLUSTER "Cluster"
#define G_PROTECT "Protection"
#define G_TLS "TLS"
#define G_ACCESS "Access"

static const char *const no_quota_choices[] = {"allow", "deny", "error", NULL};
static const char *const attempt_headers_choices[] = {"rejections", "always", NULL};
static const char *const discovery_choices[] = {"none", "static", "dns", "etcd", "k8s", "gossip",
                                                NULL};
static const char *const picker_choices[] = {"ring", "hrw", NULL};
static const char *const peer_auth_choices[] = {"auto", "secret", "mtls", "insecure", "address",
                                                "none", NULL};
static const char *const priority_choices[] = {"critical", "post", "get", "test", NULL};
static const char *const tls_client_auth_choices[] = {"none", "request", "require", NULL};
static const char *const role_choices[] = {"limiter", "observer", "proxy", NULL};
static const char *const store_choices[] = {"memory", "redis", NULL};
/* in sl_log_level's and sl_log_format's order (runtime/log.h) */
static const char *const log_level_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const log_format_choices[] = {"logfmt", "json", NULL};

static const sl_opt daemon_opts[] = {
    /* General */
    {.name = "config", .short_name = 'c', .type = SL_OPT_STRING, .offset = FIELD(config, char *),
     .group = G_GENERAL, .metavar = "FILE", .file_forbidden = true,
     .help = "YAML file of options (a flat mapping of option: value)"},
    {.name = "instance-id", .type = SL_OPT_STRING, .offset = FIELD(instance_id, char *),
     .def_doc = "the host name", .group = G_GENERAL, .metavar = "ID",
     .help = "name of this node in logs, metrics and the cluster"},
    {.name = "listen-addr", .type = SL_OPT_STRING, .offset = FIELD(listen_addr, char *),
     .def = "127.0.0.1:5454", .group = G_GENERAL, .metavar = "ADDR",
     .help = "ip:port of the client API (HTTP/1.1, h2c, gRPC)"},
    {.name = "listen-unix", .type = SL_OPT_LIST, .offset = FIELD(listen_unix, sl_opt_list),
     .group = G_GENERAL, .metavar = "PATHS",
     .help = "Unix stream sockets serving the client API too (every dialect, HTTP/1.1 and h2c), "
             "for a sidecar on the same host: at most 8, each path under 108 bytes"},
    {.name = "listen-unix-mode", .type = SL_OPT_STRING,
     .offset = FIELD(listen_unix_mode, char *), .def = "0660", .group = G_GENERAL,
     .metavar = "MODE", .help = "the --listen-unix files' mode, in octal"},
    {.name = "workers", .type = SL_OPT_INT, .offset = FIELD(workers, int64_t), .def = "0",
     .def_doc = "the number of CPUs", .min = 0, .max = 1024, .group = G_GENERAL,
     .help = "event-loop threads sharing the port; 0 = one per CPU"},
    {.name = "verbose", .short_name = 'v', .type = SL_OPT_BOOL, .offset = FIELD(verbose, bool),
     .def = "false", .group = G_GENERAL, .help = "log at debug level"},
    {.name = "log-request-lines", .type = SL_OPT_INT, .offset = FIELD(log_request_lines, int64_t),
     .def = "20", .min = 1, .max = 100000, .group = G_GENERAL,
     .help = "per-request log lines a second at most (the rest are counted: \"N similar lines "
             "suppressed\")"},
    {.name = "log-level", .type = SL_OPT_ENUM, .offset = FIELD(log_level, int), .def = "info",
     .choices = log_level_choices, .group = G_GENERAL,
     .help = "least severe lines logged (--verbose: debug)"},
    {.name = "log-format", .type = SL_OPT_ENUM, .offset = FIELD(log_format, int),
     .def = "logfmt", .choices = log_format_choices, .group = G_GENERAL,
     .help = "log lines as logfmt (ts= level= msg= key=value) or JSON, one object a line"},

    /* Limits */
    {.name = "max-conns", .type = SL_OPT_INT, .offset = FIELD(max_conns, int64_t), .def = "10000",
     .min = 1, .max = 10000000, .group = G_LIMITS,
     .help = "most client connections open at once"},
    {.name = "max-header-bytes", .type = SL_OPT_SIZE, .offset = FIELD(max_header_bytes, uint64_t),
     .def = "16KiB", .min = 1024, .max = 16 << 20, .group = G_LIMITS,
     .help = "largest request head (HTTP/1.1 headers, HTTP/2 header list)"},
    {.name = "max-body-bytes", .type = SL_OPT_SIZE, .offset = FIELD(max_body_bytes, uint64_t),
     .def = "1MiB", .min = 1024, .max = 1 << 30, .group = G_LIMITS,
     .help = "largest request body or gRPC message"},
    {.name = "idle-timeout", .type = SL_OPT_DURATION, .offset = FIELD(idle_timeout_ns, int64_t),
     .def = "60s", .min = 1 * MS, .max = 86400 * SEC, .group = G_LIMITS,
     .help = "close a client connection idle this long"},
    {.name = "read-timeout", .type = SL_OPT_DURATION, .offset = FIELD(read_timeout_ns, int64_t),
     .def = "10s", .min = 1 * MS, .max = 3600 * SEC, .group = G_LIMITS,
     .help = "close a connection slower than this to send a request (each HTTP/2 stream's own)"},
    {.name = "max-streams", .type = SL_OPT_INT, .offset = FIELD(max_streams, int64_t),
     .def = "256", .min = 1, .max = 65535, .group = G_LIMITS,
     .help = "concurrent HTTP/2 streams per connection"},
    {.name = "write-timeout", .type = SL_OPT_DURATION, .offset = FIELD(write_timeout_ns, int64_t),
     .def = "30s", .min = 1 * MS, .max = 3600 * SEC, .group = G_LIMITS,
     .help = "close a connection whose answers do not move this long (a client that does not "
             "read or keeps its HTTP/2 window shut)"},
    {.name = "max-conn-body-bytes", .type = SL_OPT_SIZE,
     .offset = FIELD(max_conn_body_bytes, uint64_t), .def = "8MiB", .min = 1024, .max = 1 << 30,
     .group = G_LIMITS, .help = "request bytes (unfinished or unanswered) held per connection"},
    {.name = "max-conn-unsent-bytes", .type = SL_OPT_SIZE,
     .offset = FIELD(max_conn_unsent_bytes, uint64_t), .def = "4MiB", .min = 1024,
     .max = 1 << 30, .group = G_LIMITS,
     .help = "HTTP/2 answers held unsent per connection; above it new streams are refused"},
    {.name = "max-unsent-bytes", .type = SL_OPT_SIZE, .offset = FIELD(max_unsent_bytes, uint64_t),
     .def = "256MiB", .min = 1024, .max = (uint64_t)1 << 40, .group = G_LIMITS,
     .help = "HTTP/2 answers held unsent over all connections"},
    {.name = "max-request-memory", .type = SL_OPT_SIZE,
     .offset = FIELD(max_request_memory, uint64_t), .def = "0", .min = 0,
     .max = (uint64_t)1 << 50, .group = G_LIMITS,
     .help = "request bytes buffered over all connections, past which requests with a body over "
             "16KiB get 503 (gRPC RESOURCE_EXHAUSTED) and the connections holding the most are "
             "closed; 0: 1/8 of physical memory, at least 64MiB"},
    {.name = "max-conn-errors", .type = SL_OPT_INT, .offset = FIELD(max_conn_errors, int64_t),
     .def = "16", .min = 1, .max = 1000000, .group = G_LIMITS,
     .help = "protocol errors and refused requests before a connection is closed"},
    {.name = "shutdown-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(shutdown_timeout_ns, int64_t), .def = "5s", .min = 0, .max = 3600 * SEC,
     .group = G_LIMITS, .help = "on SIGTERM or SIGINT, time left for requests in flight"},
    {.name = "max-batch", .type = SL_OPT_INT, .offset = FIELD(max_batch, int64_t), .def = "1000",
     .min = 1, .max = 1000000, .group = G_LIMITS,
     .help = "most requests in one GetRateLimits call"},

    /* TLS */
    {.name = "tls-cert", .type = SL_OPT_STRING, .offset = FIELD(tls_cert, char *),
     .group = G_TLS, .metavar = "FILE",
     .help = "PEM certificate chain: the client port speaks TLS only (ALPN h2, http/1.1)"},
    {.name = "tls-key", .type = SL_OPT_STRING, .offset = FIELD(tls_key, char *), .group = G_TLS,
     .metavar = "FILE", .help = "PEM private key of --tls-cert (both reload on SIGHUP)"},
    {.name = "tls-ca", .type = SL_OPT_STRING, .offset = FIELD(tls_ca, char *), .group = G_TLS,
     .metavar = "FILE", .help = "PEM CA bundle that client certificates must chain to"},
    {.name = "tls-client-auth", .type = SL_OPT_ENUM, .offset = FIELD(tls_client_auth, int),
     .def = "none", .choices = tls_client_auth_choices, .group = G_TLS,
     .help = "client certificates: not asked, asked (verified if sent), or required"},
    {.name = "tls-handshake-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(tls_handshake_timeout_ns, int64_t), .def = "10s", .min = 1 * MS,
     .max = 600 * SEC, .group = G_TLS,
     .help = "close a TLS connection whose handshake is not done within this"},
    {.name = "peer-tls-cert", .type = SL_OPT_STRING, .offset = FIELD(peer_tls_cert, char *),
     .def_doc = "--tls-cert", .group = G_TLS, .metavar = "FILE",
     .help = "certificate this node shows its peers (peer calls use TLS when the port does)"},
    {.name = "peer-tls-key", .type = SL_OPT_STRING, .offset = FIELD(peer_tls_key, char *),
     .def_doc = "--tls-key", .group = G_TLS, .metavar = "FILE",
     .help = "private key of --peer-tls-cert"},
    {.name = "peer-tls-ca", .type = SL_OPT_STRING, .offset = FIELD(peer_tls_ca, char *),
     .group = G_TLS, .metavar = "FILE",
     .help = "CA bundle that peers' certificates must chain to (its own option: the client "
             "CA --tls-ca is not trusted for peers); with it, peer calls need a certificate "
             "naming a peer, and each peer's certificate must name the address called"},
    {.name = "storage-tls-ca", .type = SL_OPT_STRING, .offset = FIELD(storage_tls_ca, char *),
     .group = G_TLS, .metavar = "FILE", .help = "CA bundle for https:// etcd endpoints"},
    {.name = "storage-tls-cert", .type = SL_OPT_STRING, .offset = FIELD(storage_tls_cert, char *),
     .group = G_TLS, .metavar = "FILE", .help = "client certificate shown to etcd"},
    {.name = "storage-tls-key", .type = SL_OPT_STRING, .offset = FIELD(storage_tls_key, char *),
     .group = G_TLS, .metavar = "FILE", .help = "private key of --storage-tls-cert"},

    /* Engine */
    {.name = "gc-max-keys", .type = SL_OPT_INT, .offset = FIELD(gc_max_keys, int64_t),
     .def = "1000000", .min = 1, .max = INT64_C(1) << 40, .group = G_ENGINE,
     .help = "most keys held; past it idle keys are collected, LRU first"},
    {.name = "max-memory", .type = SL_OPT_SIZE, .offset = FIELD(max_memory, uint64_t),
     .def = "256MiB", .min = 0, .max = UINT64_C(1) << 50, .group = G_ENGINE,
     .help = "most bytes the key store holds, side buffers (sliding logs, sub-windows, leases) "
             "included; past it keys are evicted as at gc-max-keys; 0 = keys only"},
    {.name = "gc-period", .type = SL_OPT_DURATION, .offset = FIELD(gc_period_ns, int64_t),
     .def = "1s", .min = 1 * MS, .max = 86400 * SEC, .group = G_ENGINE,
     .help = "how often the collector of inactive keys runs"},
    {.name = "gc-collect", .type = SL_OPT_DURATION, .offset = FIELD(gc_collect_ns, int64_t),
     .def = "0", .min = 0, .max = 18 * 3600 * SEC, .group = G_ENGINE,
     .help = "collect keys without hits for this long (Levee's GC); 0 = off (a collected key "
             "starts afresh, so keep it above your longest limit duration)"},
    {.name = "gc-collect-free", .type = SL_OPT_DURATION,
     .offset = FIELD(gc_collect_free_ns, int64_t), .def = "10s", .min = 0,
     .max = 18 * 3600 * SEC, .group = G_ENGINE,
     .help = "collect information-free keys (state equal to a fresh key's: nothing is reset) "
             "without hits for this long, every gc-period; 0 = off"},
    {.name = "gc-max-work", .type = SL_OPT_INT, .offset = FIELD(gc_max_work, int64_t),
     .def = "10000", .min = 1, .max = INT64_C(1) << 32, .group = G_ENGINE,
     .help = "most key slots one collector run examines (bounds its pause)"},
    {.name = "shards", .type = SL_OPT_INT, .offset = FIELD(shards, int64_t), .def = "64",
     .min = 1, .max = 65536, .group = G_ENGINE,
     .help = "key store shards, each with its own lock (a power of two)"},
    {.name = "max-log-limit", .type = SL_OPT_INT, .offset = FIELD(max_log_limit, int64_t),
     .def = "10000", .min = 1, .max = 100000000, .group = G_ENGINE,
     .help = "largest SLIDING_LOG limit (memory per key grows with it)"},
    {.name = "max-sub-windows", .type = SL_OPT_INT, .offset = FIELD(max_sub_windows, int64_t),
     .def = "60", .min = 1, .max = 100000, .group = G_ENGINE,
     .help = "most sub-windows accepted for SLIDING_WINDOW"},
    {.name = "max-count", .type = SL_OPT_INT, .offset = FIELD(max_count, int64_t),
     .def = "9007199254740992", .min = 1, .max = INT64_MAX, .group = G_ENGINE,
     .help = "largest limit, burst and |hits| accepted (default 2^53); more is a per-item error"},
    {.name = "max-duration", .type = SL_OPT_DURATION, .offset = FIELD(max_duration_ns, int64_t),
     .def = "876600h", .min = 1 * MS, .max = INT64_C(876600) * 3600 * SEC, .group = G_ENGINE,
     .help = "longest limit duration accepted (default 100 years); more is a per-item error"},
    {.name = "max-clock-skew", .type = SL_OPT_DURATION,
     .offset = FIELD(max_clock_skew_ns, int64_t), .def = "10s", .min = 0,
     .max = 86400 * SEC, .group = G_ENGINE,
     .help = "a request's created_at further than this from the server's clock is a per-item "
             "error; 0 = any created_at"},
    /* Engine: state kept across restarts (node/statedir.c) */
    {.name = "state-dir", .type = SL_OPT_STRING, .offset = FIELD(state_dir, char *),
     .group = G_ENGINE, .metavar = "DIR",
     .help = "keep the key store in DIR/sluice.snapshot: written on graceful shutdown, loaded "
             "at start (expired keys dropped); unset = keys live in memory only"},
    {.name = "snapshot-period", .type = SL_OPT_DURATION,
     .offset = FIELD(snapshot_period_ns, int64_t), .def = "0", .min = 0, .max = 86400 * SEC,
     .group = G_ENGINE,
     .help = "with --state-dir, also write the snapshot this often (a crash loses at most this "
             "much); 0 = only on shutdown"},
    /* Engine: where state lives (src/redis/, docs/store.md) */
    {.name = "store", .type = SL_OPT_ENUM, .offset = FIELD(store, int), .def = "memory",
     .choices = store_choices, .group = G_ENGINE,
     .help = "where limit state lives: this node's memory, or Redis (--redis-addrs; "
             "stateless nodes)"},
    {.name = "redis-addrs", .type = SL_OPT_LIST, .offset = FIELD(redis_addrs, sl_opt_list),
     .group = G_ENGINE, .metavar = "ADDRS",
     .help = "Redis server addresses (ip:port) for --store redis, tried in turn"},
    {.name = "redis-sentinel", .type = SL_OPT_LIST, .offset = FIELD(redis_sentinel, sl_opt_list),
     .group = G_ENGINE, .metavar = "ADDRS",
     .help = "Redis Sentinel addresses (ip:port), in place of --redis-addrs: asked for "
             "--redis-master's address, and again on a failover"},
    {.name = "redis-master", .type = SL_OPT_STRING, .offset = FIELD(redis_master, char *),
     .group = G_ENGINE, .metavar = "NAME",
     .help = "the master's name the sentinels monitor (with --redis-sentinel)"},
    {.name = "redis-cluster", .type = SL_OPT_BOOL, .offset = FIELD(redis_cluster, bool),
     .def = "false", .group = G_ENGINE,
     .help = "Redis Cluster: --redis-addrs are seed nodes; keys go to their slot's master and "
             "the topology is followed (MOVED, failover)"},
    {.name = "redis-cluster-refresh", .type = SL_OPT_DURATION,
     .offset = FIELD(redis_cluster_refresh_ns, int64_t), .def = "100ms", .min = 10 * MS,
     .max = 60 * SEC, .group = G_ENGINE,
     .help = "least time between two reads of the Redis Cluster topology by one worker (on MOVED, "
             "a master lost)"},
    {.name = "redis-user", .type = SL_OPT_STRING, .offset = FIELD(redis_user, char *),
     .group = G_ENGINE, .metavar = "NAME",
     .help = "Redis ACL user (AUTH user password); unset = AUTH password"},
    {.name = "redis-password-file", .type = SL_OPT_STRING,
     .offset = FIELD(redis_password_file, char *), .group = G_ENGINE, .metavar = "FILE",
     .help = "file holding the Redis password; unset = no AUTH"},
    {.name = "redis-timeout", .type = SL_OPT_DURATION, .offset = FIELD(redis_timeout_ns, int64_t),
     .def = "500ms", .min = 1 * MS, .max = 600 * SEC, .group = G_ENGINE,
     .help = "deadline to connect to Redis and for each answer; past it the connection is made "
             "again and its requests fail (or --fail-open)"},
    {.name = "redis-batch-items", .type = SL_OPT_INT, .offset = FIELD(redis_batch_items, int64_t),
     .def = "100", .min = 1, .max = 1000, .group = G_ENGINE,
     .help = "most items of one call decided by one script call in Redis (a longer script "
             "holds Redis longer)"},
    {.name = "redis-over-limit-cache", .type = SL_OPT_INT,
     .offset = FIELD(redis_over_limit_cache, int64_t), .def = "4096", .min = 0,
     .max = 1 << 20, .group = G_ENGINE,
     .help = "keys per worker remembered as over their limit (rejected with nothing left) and "
             "answered OVER_LIMIT without a round trip until they could pass again; 0 = off"},
    {.name = "redis-max-reply", .type = SL_OPT_SIZE, .offset = FIELD(redis_max_reply, uint64_t),
     .def = "64MiB", .min = 1 << 20, .max = 1 << 30, .group = G_ENGINE,
     .help = "longest Redis reply read (its bytes; its array elements at 64 bytes each); a "
             "longer one closes its connection (counted)"},
    {.name = "redis-max-queued", .type = SL_OPT_SIZE,
     .offset = FIELD(redis_max_queued, uint64_t), .def = "64MiB", .min = 64 * 1024,
     .max = 1 << 30, .group = G_ENGINE,
     .help = "commands waiting to be written per Redis connection; past it, per-item errors"},
    {.name = "redis-tls", .type = SL_OPT_BOOL, .offset = FIELD(redis_tls, bool), .def = "false",
     .group = G_ENGINE,
     .help = "speak TLS to Redis (its tls-port); the certificate is checked against "
             "--redis-tls-ca, else the system's CAs"},
    {.name = "redis-tls-ca", .type = SL_OPT_STRING, .offset = FIELD(redis_tls_ca, char *),
     .group = G_ENGINE, .metavar = "FILE",
     .help = "PEM CA bundle Redis's certificate must chain to; unset = the system's CAs"},
    {.name = "redis-tls-cert", .type = SL_OPT_STRING, .offset = FIELD(redis_tls_cert, char *),
     .group = G_ENGINE, .metavar = "FILE",
     .help = "PEM client certificate shown to Redis (tls-auth-clients yes)"},
    {.name = "redis-tls-key", .type = SL_OPT_STRING, .offset = FIELD(redis_tls_key, char *),
     .group = G_ENGINE, .metavar = "FILE", .help = "PEM private key of --redis-tls-cert"},
    {.name = "redis-tls-server-name", .type = SL_OPT_STRING,
     .offset = FIELD(redis_tls_server_name, char *), .group = G_ENGINE, .metavar = "NAME",
     .def_doc = "the address's IP",
     .help = "name Redis's certificate must carry (and the SNI); an IP matches IP SANs"},

    /* Quotas (Levee) */
    {.name = "standalone", .type = SL_OPT_BOOL, .offset = FIELD(standalone, bool), .def = "false",
     .group = G_QUOTAS, .help = "run alone: no cluster membership and no peers"},
    {.name = "storage-prefix", .type = SL_OPT_STRING, .offset = FIELD(storage_prefix, char *),
     .def = "/sluice", .group = G_QUOTAS, .metavar = "PREFIX",
     .help = "root of the etcd tree (<prefix>/limit, <prefix>/factor)"},
    {.name = "storage-addrs", .type = SL_OPT_LIST, .offset = FIELD(storage_addrs, sl_opt_list),
     .group = G_QUOTAS, .metavar = "URLS", .help = "etcd endpoints, e.g. http://127.0.0.1:2379"},
    {.name = "quota-file", .type = SL_OPT_STRING, .offset = FIELD(quota_file, char *),
     .group = G_QUOTAS, .metavar = "FILE",
     .help = "file of quotas for POST /attempt, instead of etcd"},
    {.name = "no-quota", .type = SL_OPT_ENUM, .offset = FIELD(no_quota, int), .def = "error",
     .choices = no_quota_choices, .group = G_QUOTAS,
     .help = "/attempt answer with no quota nor key_default: 200/429/500"},
    {.name = "attempt-headers", .type = SL_OPT_ENUM, .offset = FIELD(attempt_headers, int),
     .def = "rejections", .choices = attempt_headers_choices, .group = G_QUOTAS,
     .help = "RateLimit-Policy / RateLimit on /attempt answers: rejections (429) only, or always"},
    {.name = "attempt-max-delay", .type = SL_OPT_DURATION,
     .offset = FIELD(attempt_max_delay_ns, int64_t), .def = "30s", .min = 0, .max = 3600 * SEC,
     .group = G_QUOTAS,
     .help = "longest X-Max-Delay an /attempt may ask for (larger asks are cut to it); 0 = never delay"},
    {.name = "attempt-max-held", .type = SL_OPT_INT, .offset = FIELD(attempt_max_held, int64_t),
     .def = "1000", .min = 0, .max = 1000000, .group = G_QUOTAS,
     .help = "X-Delay-Mode: hold: delayed /attempt answers one worker holds at once (beyond: "
             "answered at once with X-Delay-Ms); 0 = never hold"},
    {.name = "storage-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(storage_timeout_ns, int64_t), .def = "2s", .min = 1 * MS, .max = 600 * SEC,
     .group = G_QUOTAS, .help = "timeout of one etcd request"},
    /* Envoy RLS v3 (api/rls.h, config/rlssrc.h) */
    {.name = "rls-config-dir", .type = SL_OPT_STRING, .offset = FIELD(rls_config_dir, char *),
     .group = G_QUOTAS, .metavar = "DIR",
     .help = "directory of envoyproxy/ratelimit YAML files (*.yaml, *.yml) for Envoy's "
             "ShouldRateLimit; unset = <storage-prefix>/rls/ in etcd with --storage-addrs, else "
             "every descriptor OK without a limit"},
    {.name = "rls-poll-period", .type = SL_OPT_DURATION,
     .offset = FIELD(rls_poll_period_ns, int64_t), .def = "1s", .min = 0, .max = 3600 * SEC,
     .group = G_QUOTAS,
     .help = "look for changes in --rls-config-dir this often (SIGHUP also reloads); 0 = only "
             "on SIGHUP"},
    {.name = "rls-response-headers", .type = SL_OPT_BOOL,
     .offset = FIELD(rls_response_headers, bool), .def = "false", .group = G_QUOTAS,
     .help = "ShouldRateLimit answers carry RateLimit-Limit, -Remaining and -Reset for Envoy to "
             "add to the response"},
    {.name = "rls-all-or-nothing", .type = SL_OPT_BOOL,
     .offset = FIELD(rls_all_or_nothing, bool), .def = "false", .group = G_QUOTAS,
     .help = "a ShouldRateLimit call is counted only if every descriptor passes (a rejected call "
             "gives back what it took); envoyproxy/ratelimit's "
             "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true in the environment sets it too"},
    {.name = "rls-quota-mode", .type = SL_OPT_BOOL, .offset = FIELD(rls_quota_mode, bool),
     .def = "false", .group = G_QUOTAS,
     .help = "every RLS limit in quota mode, as a rule's quota_mode: over its limit a descriptor "
             "reports OVER_LIMIT, and the call is refused only when every quota-mode descriptor "
             "is over (envoyproxy/ratelimit's QUOTA_MODE=true sets it too)"},
    {.name = "rls-near-limit-ratio", .type = SL_OPT_DOUBLE,
     .offset = FIELD(rls_near_limit_ratio, double), .def = "0.8", .dmin = 0.001, .dmax = 1.0,
     .group = G_QUOTAS,
     .help = "an admitted RLS descriptor that has used more than this share of its limit is near "
             "it: counted as outcome near_limit and named in the dynamic metadata "
             "(NEAR_LIMIT_RATIO)"},
    {.name = "rls-dynamic-metadata", .type = SL_OPT_BOOL,
     .offset = FIELD(rls_dynamic_metadata, bool), .def = "false", .group = G_QUOTAS,
     .help = "ShouldRateLimit answers carry dynamic_metadata naming the descriptors over or near "
             "their limits (docs/envoy.md; RESPONSE_DYNAMIC_METADATA)"},
    {.name = "rls-header-limit", .type = SL_OPT_STRING, .offset = FIELD(rls_header_limit, char *),
     .def = "RateLimit-Limit", .group = G_QUOTAS, .metavar = "NAME",
     .help = "name of the limit header of --rls-response-headers (LIMIT_LIMIT_HEADER)"},
    {.name = "rls-header-remaining", .type = SL_OPT_STRING,
     .offset = FIELD(rls_header_remaining, char *), .def = "RateLimit-Remaining",
     .group = G_QUOTAS, .metavar = "NAME",
     .help = "name of the remaining header of --rls-response-headers (LIMIT_REMAINING_HEADER)"},
    {.name = "rls-header-reset", .type = SL_OPT_STRING, .offset = FIELD(rls_header_reset, char *),
     .def = "RateLimit-Reset", .group = G_QUOTAS, .metavar = "NAME",
     .help = "name of the reset header of --rls-response-headers (LIMIT_RESET_HEADER)"},
    {.name = "rls-max-descriptors", .type = SL_OPT_INT,
     .offset = FIELD(rls_max_descriptors, int64_t), .def = "1000", .min = 1, .max = 100000,
     .group = G_QUOTAS, .help = "most descriptors in one ShouldRateLimit request"},
    {.name = "rls-max-entries", .type = SL_OPT_INT, .offset = FIELD(rls_max_entries, int64_t),
     .def = "64", .min = 1, .max = 4096, .group = G_QUOTAS,
     .help = "most entries in one ShouldRateLimit descriptor"},

    /* Metrics */
    {.name = "graphite-addr", .type = SL_OPT_STRING, .offset = FIELD(graphite_addr, char *),
     .group = G_METRICS, .metavar = "ADDR",
     .help = "Graphite collector ip:port[/udp|/tcp] (no suffix: tcp); empty = off"},
    {.name = "graphite-period", .type = SL_OPT_DURATION,
     .offset = FIELD(graphite_period_ns, int64_t), .def = "10s", .min = 100 * MS,
     .max = 86400 * SEC, .group = G_METRICS, .help = "how often metrics are pushed to Graphite"},
    {.name = "graphite-prefix", .type = SL_OPT_STRING, .offset = FIELD(graphite_prefix, char *),
     .def = "sluice", .group = G_METRICS, .metavar = "PREFIX",
     .help = "put before metric names sent to Graphite (prefix.name)"},

    /* Cluster */
    {.name = "discovery", .type = SL_OPT_ENUM, .offset = FIELD(discovery, int), .def = "none",
     .choices = discovery_choices, .group = G_CLUSTER,
     .help = "peer list source: none (one node), --peers, DNS, etcd, Kubernetes, gossip"},
    {.name = "peers", .type = SL_OPT_LIST, .offset = FIELD(peers, sl_opt_list), .group = G_CLUSTER,
     .metavar = "ADDRS", .help = "peer addresses (host:port) for --discovery=static"},
    {.name = "dns-name", .type = SL_OPT_STRING, .offset = FIELD(dns_name, char *),
     .group = G_CLUSTER, .metavar = "NAME",
     .help = "name whose A/AAAA records are the peers, for --discovery=dns"},
    {.name = "dns-server", .type = SL_OPT_STRING, .offset = FIELD(dns_server, char *),
     .group = G_CLUSTER, .metavar = "IP:PORT",
     .help = "DNS server (IPv4) for --discovery=dns instead of the system resolver"},
    {.name = "dns-period", .type = SL_OPT_DURATION, .offset = FIELD(dns_period_ns, int64_t),
     .def = "5s", .min = 100 * MS, .max = 86400 * SEC, .group = G_CLUSTER,
     .help = "how often the DNS name is resolved again"},
    {.name = "advertise-addr", .type = SL_OPT_STRING, .offset = FIELD(advertise_addr, char *),
     .def_doc = "--listen-addr", .group = G_CLUSTER, .metavar = "ADDR",
     .help = "address other peers reach this node at"},
    {.name = "peer-picker", .type = SL_OPT_ENUM, .offset = FIELD(peer_picker, int), .def = "ring",
     .choices = picker_choices, .group = G_CLUSTER,
     .help = "key owner choice: consistent-hash ring or rendezvous (HRW)"},
    {.name = "replicas", .type = SL_OPT_INT, .offset = FIELD(replicas, int64_t), .def = "512",
     .min = 1, .max = 65536, .group = G_CLUSTER, .help = "virtual nodes per peer on the ring"},
    {.name = "cluster-hash-secret-file", .type = SL_OPT_STRING,
     .offset = FIELD(cluster_hash_secret_file, char *), .group = G_CLUSTER, .metavar = "FILE",
     .help = "a secret (at least 16 bytes, the same on every node) that keys the cluster's key "
             "ids, so clients cannot choose keys that share another key's state; none: the "
             "public id (read at start only; changing it moves every key)"},
    {.name = "batch-wait", .type = SL_OPT_DURATION, .offset = FIELD(batch_wait_ns, int64_t),
     .def = "500us", .min = 0, .max = 10 * SEC, .group = G_CLUSTER,
     .help = "gather requests for one owner this long before forwarding"},
    {.name = "batch-limit", .type = SL_OPT_INT, .offset = FIELD(batch_limit, int64_t),
     .def = "1000", .min = 1, .max = 1000000, .group = G_CLUSTER,
     .help = "most requests in one forwarded batch (full: sent at once)"},
    {.name = "batch-timeout", .type = SL_OPT_DURATION, .offset = FIELD(batch_timeout_ns, int64_t),
     .def = "500ms", .min = 1 * MS, .max = 600 * SEC, .group = G_CLUSTER,
     .help = "timeout of one forwarded batch"},
    {.name = "global-sync-wait", .type = SL_OPT_DURATION,
     .offset = FIELD(global_sync_wait_ns, int64_t), .def = "100ms", .min = 1 * MS,
     .max = 600 * SEC, .group = G_CLUSTER,
     .help = "how often GLOBAL hits and owner state are sent"},
    {.name = "global-batch-limit", .type = SL_OPT_INT,
     .offset = FIELD(global_batch_limit, int64_t), .def = "1000", .min = 1, .max = 1000000,
     .group = G_CLUSTER, .help = "most keys in one GLOBAL update or broadcast"},
    {.name = "fail-open", .type = SL_OPT_BOOL, .offset = FIELD(fail_open, bool), .def = "false",
     .group = G_CLUSTER,
     .help = "allow, instead of failing, when a key's owner (or the Redis store) is "
             "unreachable"},
    {.name = "peer-lease-ttl", .type = SL_OPT_DURATION,
     .offset = FIELD(peer_lease_ttl_ns, int64_t), .def = "5s", .min = 1 * SEC, .max = 3600 * SEC,
     .group = G_CLUSTER, .help = "TTL of this node's membership lease in etcd"},
    {.name = "k8s-api", .type = SL_OPT_STRING, .offset = FIELD(k8s_api, char *),
     .def_doc = "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT", .group = G_CLUSTER,
     .metavar = "URL", .help = "Kubernetes API server, for --discovery=k8s"},
    {.name = "k8s-namespace", .type = SL_OPT_STRING, .offset = FIELD(k8s_namespace, char *),
     .def_doc = "the pod's own", .group = G_CLUSTER, .metavar = "NS",
     .help = "namespace of the Service or pods"},
    {.name = "k8s-service", .type = SL_OPT_STRING, .offset = FIELD(k8s_service, char *),
     .group = G_CLUSTER, .metavar = "NAME",
     .help = "Service whose ready EndpointSlice endpoints are the peers"},
    {.name = "k8s-selector", .type = SL_OPT_STRING, .offset = FIELD(k8s_selector, char *),
     .group = G_CLUSTER, .metavar = "LABELS",
     .help = "instead of --k8s-service: ready pods matching this label selector"},
    {.name = "k8s-port-name", .type = SL_OPT_STRING, .offset = FIELD(k8s_port_name, char *),
     .def = "grpc", .group = G_CLUSTER, .metavar = "NAME",
     .help = "named port of the slice (or container) peers listen on"},
    {.name = "k8s-port", .type = SL_OPT_INT, .offset = FIELD(k8s_port, int64_t), .def = "0",
     .min = 0, .max = 65535, .group = G_CLUSTER,
     .help = "peer port, instead of --k8s-port-name; 0 = by name"},
    {.name = "k8s-token-file", .type = SL_OPT_STRING, .offset = FIELD(k8s_token_file, char *),
     .def = "/var/run/secrets/kubernetes.io/serviceaccount/token", .group = G_CLUSTER,
     .metavar = "FILE", .help = "bearer token, read again when it changes"},
    {.name = "k8s-ca-file", .type = SL_OPT_STRING, .offset = FIELD(k8s_ca_file, char *),
     .def = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt", .group = G_CLUSTER,
     .metavar = "FILE", .help = "CA bundle the API server's certificate is checked against"},
    {.name = "k8s-max-bytes", .type = SL_OPT_SIZE, .offset = FIELD(k8s_max_bytes, uint64_t),
     .def = "4MiB", .min = 4096, .max = 1024 * 1024 * 1024, .group = G_CLUSTER,
     .help = "largest list answer or watch event accepted from the API"},
    {.name = "k8s-watch-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(k8s_watch_timeout_ns, int64_t), .def = "5m", .min = 1 * SEC,
     .max = 3600 * SEC, .group = G_CLUSTER,
     .help = "timeoutSeconds of one watch (then it resumes)"},
    /* Cluster: SWIM gossip */
    {.name = "gossip-addr", .type = SL_OPT_STRING, .offset = FIELD(gossip_addr, char *),
     .def_doc = "off", .group = G_CLUSTER, .metavar = "IP:PORT",
     .help = "join the SWIM gossip overlay: UDP and TCP on this numeric ip:port"},
    {.name = "gossip-seeds", .type = SL_OPT_LIST, .offset = FIELD(gossip_seeds, sl_opt_list),
     .group = G_CLUSTER, .metavar = "ADDRS",
     .help = "gossip addresses (ip:port) of members to join through"},
    {.name = "gossip-name", .type = SL_OPT_STRING, .offset = FIELD(gossip_name, char *),
     .def_doc = "--advertise-addr", .group = G_CLUSTER, .metavar = "NAME",
     .help = "this node's unique name in the gossip overlay"},
    {.name = "gossip-keyring-file", .type = SL_OPT_STRING,
     .offset = FIELD(gossip_keyring_file, char *), .group = G_CLUSTER, .metavar = "FILE",
     .help = "AES-256-GCM keys (64 hex digits a line; the first seals), read again on SIGHUP; "
             "required unless --gossip-addr is loopback or --gossip-insecure"},
    {.name = "gossip-insecure", .type = SL_OPT_BOOL, .offset = FIELD(gossip_insecure, bool),
     .def = "false", .group = G_CLUSTER,
     .help = "gossip without a key ring on a non-loopback address: anyone who can reach it can "
             "join or rewrite the cluster (logged; packets counted as unauthenticated)"},
    {.name = "gossip-replay-window", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_replay_window_ns, int64_t), .def = "30s", .min = 1 * SEC,
     .max = 3600 * SEC, .group = G_CLUSTER,
     .help = "sealed gossip packets older (or newer) than this by our clock are refused; "
             "within it each is taken once"},
    {.name = "gossip-probe-interval", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_probe_interval_ns, int64_t), .def = "1s", .min = 10 * MS,
     .max = 60 * SEC, .group = G_CLUSTER, .help = "how often a member is probed"},
    {.name = "gossip-probe-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_probe_timeout_ns, int64_t), .def = "500ms", .min = 1 * MS,
     .max = 60 * SEC, .group = G_CLUSTER,
     .help = "wait this long for a direct ack before asking others to probe"},
    {.name = "gossip-indirect-probes", .type = SL_OPT_INT,
     .offset = FIELD(gossip_indirect_probes, int64_t), .def = "3", .min = 1, .max = 16,
     .group = G_CLUSTER, .help = "members asked to probe for us (k)"},
    {.name = "gossip-retransmit-mult", .type = SL_OPT_INT,
     .offset = FIELD(gossip_retransmit_mult, int64_t), .def = "4", .min = 1, .max = 100,
     .group = G_CLUSTER, .help = "an update is sent this many times log10(members + 1)"},
    {.name = "gossip-suspicion-mult", .type = SL_OPT_INT,
     .offset = FIELD(gossip_suspicion_mult, int64_t), .def = "4", .min = 1, .max = 100,
     .group = G_CLUSTER,
     .help = "shortest suspicion: this many probe intervals times log10(members)"},
    {.name = "gossip-suspicion-max-mult", .type = SL_OPT_INT,
     .offset = FIELD(gossip_suspicion_max_mult, int64_t), .def = "6", .min = 1, .max = 100,
     .group = G_CLUSTER, .help = "longest suspicion (no confirmations): this many shortest"},
    {.name = "gossip-interval", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_interval_ns, int64_t), .def = "200ms", .min = 1 * MS,
     .max = 60 * SEC, .group = G_CLUSTER, .help = "how often queued updates are gossiped"},
    {.name = "gossip-fanout", .type = SL_OPT_INT, .offset = FIELD(gossip_fanout, int64_t),
     .def = "3", .min = 1, .max = 64, .group = G_CLUSTER,
     .help = "members each gossip round goes to"},
    {.name = "gossip-pushpull-interval", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_pushpull_interval_ns, int64_t), .def = "30s", .min = 0,
     .max = 86400 * SEC, .group = G_CLUSTER,
     .help = "full-state exchange with one member over TCP this often; 0 = never"},
    {.name = "gossip-dead-keep", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_dead_keep_ns, int64_t), .def = "5m", .min = 1 * SEC,
     .max = 86400 * SEC, .group = G_CLUSTER,
     .help = "dead and left members are remembered this long"},
    {.name = "gossip-max-members", .type = SL_OPT_INT,
     .offset = FIELD(gossip_max_members, int64_t), .def = "1024", .min = 2, .max = 8192,
     .group = G_CLUSTER, .help = "most members the gossip table holds"},
    {.name = "gossip-max-stream-bytes", .type = SL_OPT_SIZE,
     .offset = FIELD(gossip_max_stream_bytes, uint64_t), .def = "1MiB", .min = 4096,
     .max = 64 * 1024 * 1024, .group = G_CLUSTER,
     .help = "largest push/pull message accepted or sent"},
    {.name = "gossip-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(gossip_timeout_ns, int64_t), .def = "5s", .min = 10 * MS, .max = 600 * SEC,
     .group = G_CLUSTER, .help = "deadline of one push/pull exchange"},

    /* Roles (Levee's cluster) */
    {.name = "role", .type = SL_OPT_ENUM, .offset = FIELD(role, int), .def = "limiter",
     .choices = role_choices, .group = G_CLUSTER,
     .help = "limiter (decides), proxy (Levee's client-proxy: relays /attempt to each resource's "
             "DF limiters) or observer (streams the overlay's topology to proxies)"},
    {.name = "observer-name", .type = SL_OPT_STRING, .offset = FIELD(observer_name, char *),
     .group = G_CLUSTER, .metavar = "NAME",
     .help = "unique name of an observer (<storage-prefix>/observer/<NAME>)"},
    {.name = "observer-heartbeat", .type = SL_OPT_DURATION,
     .offset = FIELD(observer_heartbeat_ns, int64_t), .def = "1s", .min = 10 * MS,
     .max = 60 * SEC, .group = G_CLUSTER,
     .help = "role observer: empty update sent to each watcher this often (liveness)"},
    {.name = "observer-max-watchers", .type = SL_OPT_INT,
     .offset = FIELD(observer_max_watchers, int64_t), .def = "1024", .min = 1, .max = 100000,
     .group = G_CLUSTER, .help = "role observer: topology streams open at once at most"},
    {.name = "observer-max-queue-bytes", .type = SL_OPT_SIZE,
     .offset = FIELD(observer_max_queue_bytes, uint64_t), .def = "1MiB", .min = 4096,
     .max = 64 * 1024 * 1024, .group = G_CLUSTER,
     .help = "role observer: unsent bytes one watcher may hold before it is closed (slow)"},
    {.name = "observer-lease-ttl", .type = SL_OPT_DURATION,
     .offset = FIELD(observer_lease_ttl_ns, int64_t), .def = "10s", .min = 2 * SEC,
     .max = 3600 * SEC, .group = G_CLUSTER,
     .help = "role observer: TTL of the etcd lease its registration lives under"},
    {.name = "leave-drain", .type = SL_OPT_DURATION, .offset = FIELD(leave_drain_ns, int64_t),
     .def = "500ms", .min = 0, .max = 60 * SEC, .group = G_CLUSTER,
     .help = "role limiter in the overlay: after announcing LEFT on SIGTERM, keep answering this "
             "long (proxies stop sending) before the port closes (within shutdown-timeout)"},
    {.name = "observers", .type = SL_OPT_LIST, .offset = FIELD(observers, sl_opt_list),
     .group = G_CLUSTER, .metavar = "LIST",
     .help = "role proxy: observers to follow, host:port,... (else those in etcd)"},
    {.name = "observer-timeout", .type = SL_OPT_DURATION,
     .offset = FIELD(observer_timeout_ns, int64_t), .def = "3s", .min = 10 * MS,
     .max = 600 * SEC, .group = G_CLUSTER,
     .help = "role proxy: silence (no update, no heartbeat) after which an observer is left"},
    {.name = "observer-retry-window", .type = SL_OPT_DURATION,
     .offset = FIELD(observer_retry_window_ns, int64_t), .def = "30s", .min = 100 * MS,
     .max = 3600 * SEC, .group = G_CLUSTER,
     .help = "role proxy: exit with an error when no observer answered for this long"},
    {.name = "proxy-limiters", .type = SL_OPT_LIST, .offset = FIELD(proxy_limiters, sl_opt_list),
     .group = G_CLUSTER, .metavar = "LIST",
     .help = "role proxy: the limiters, name=host:port,... (at most 256; read again on SIGHUP)"},
    {.name = "proxy-timeout", .type = SL_OPT_DURATION, .offset = FIELD(proxy_timeout_ns, int64_t),
     .def = "1s", .min = 1 * MS, .max = 60 * SEC, .group = G_CLUSTER,
     .help = "role proxy: deadline of one call to a limiter (connect included)"},
    {.name = "proxy-max-inflight", .type = SL_OPT_INT,
     .offset = FIELD(proxy_max_inflight, int64_t), .def = "10000", .min = 1, .max = 1000000,
     .group = G_CLUSTER,
     .help = "role proxy: calls to limiters one worker has in flight at most (beyond: 503)"},
    {.name = "proxy-probe-interval", .type = SL_OPT_DURATION,
     .offset = FIELD(proxy_probe_interval_ns, int64_t), .def = "500ms", .min = 10 * MS,
     .max = 600 * SEC, .group = G_CLUSTER,
     .help = "role proxy: how often a limiter marked down is probed (GET /v1/LiveCheck)"},

    /* Protection */
    {.name = "shed", .type = SL_OPT_BOOL, .offset = FIELD(shed, bool), .def = "true",
     .group = G_PROTECT,
     .help = "shed calls by priority when a worker loop is overloaded (test first, never critical)"},
    {.name = "shed-target", .type = SL_OPT_INT, .offset = FIELD(shed_target, int64_t),
     .def = "90", .min = 1, .max = 100, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "busy share of a worker loop above which shedding rises"},
    {.name = "shed-low", .type = SL_OPT_INT, .offset = FIELD(shed_low, int64_t), .def = "70",
     .min = 0, .max = 100, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "busy share below which shedding falls (<= shed-target: the band holds)"},
    {.name = "shed-raise-after", .type = SL_OPT_DURATION,
     .offset = FIELD(shed_raise_after_ns, int64_t), .def = "1s", .min = 0, .max = 3600 * SEC,
     .group = G_PROTECT, .help = "over shed-target this long before each raise"},
    {.name = "shed-lower-after", .type = SL_OPT_DURATION,
     .offset = FIELD(shed_lower_after_ns, int64_t), .def = "5s", .min = 0, .max = 3600 * SEC,
     .group = G_PROTECT, .help = "under shed-low this long before each lowering"},
    {.name = "shed-raise-step", .type = SL_OPT_INT, .offset = FIELD(shed_raise_step, int64_t),
     .def = "25", .min = 1, .max = 300, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "shed share added per raise, in percent of one traffic class"},
    {.name = "shed-lower-step", .type = SL_OPT_INT, .offset = FIELD(shed_lower_step, int64_t),
     .def = "10", .min = 1, .max = 300, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "shed share removed per lowering, in percent of one traffic class"},
    {.name = "shed-smoothing", .type = SL_OPT_INT, .offset = FIELD(shed_smoothing, int64_t),
     .def = "50", .min = 1, .max = 100, .group = G_PROTECT, .metavar = "PERCENT",
     .help = "weight of a new load sample in the moving average (100 = none)"},
    {.name = "shed-interval", .type = SL_OPT_DURATION, .offset = FIELD(shed_interval_ns, int64_t),
     .def = "100ms", .min = 10 * MS, .max = 60 * SEC, .group = G_PROTECT,
     .help = "how often each worker samples its load"},
    {.name = "default-priority", .type = SL_OPT_ENUM, .offset = FIELD(default_priority, int),
     .def = "critical", .choices = priority_choices, .group = G_PROTECT,
     .help = "priority of calls without X-Priority / metadata priority (and no X-Method)"},
    {.name = "max-concurrency-limit", .type = SL_OPT_INT,
     .offset = FIELD(max_concurrency_limit, int64_t), .def = "10000", .min = 1,
     .max = 100000000, .group = G_PROTECT,
     .help = "largest CONCURRENCY limit (16 bytes per lease held)"},
    {.name = "max-switches", .type = SL_OPT_INT, .offset = FIELD(max_switches, int64_t),
     .def = "4096", .min = 1, .max = 1000000, .group = G_PROTECT,
     .help = "most kill switches and concurrency entries held"},
    /* Who is limited (protect/who.h) */
    {.name = "metrics-max-names", .type = SL_OPT_INT, .offset = FIELD(metrics_max_names, int64_t),
     .def = "32", .min = 0, .max = 1000, .group = G_PROTECT, .metavar = "N",
     .help = "limit names with their own label in sluice_limit_events_total and their own top "
             "keys; later names count as \"other\""},
    {.name = "top-keys", .type = SL_OPT_INT, .offset = FIELD(top_keys, int64_t), .def = "32",
     .min = 1, .max = 1000, .group = G_PROTECT, .metavar = "K",
     .help = "keys kept per limit and event for GET /v1/admin/top (space-saving sketch)"},
    {.name = "top-half-life", .type = SL_OPT_DURATION, .offset = FIELD(top_half_life_ns, int64_t),
     .def = "60s", .min = 0, .max = 86400 * SEC, .group = G_PROTECT,
     .help = "top-key counts halve this often (0 = never): the ranking follows recent traffic"},
    /* Access: who may do what (docs/operations.md, "Access") */
    {.name = "admin-api", .type = SL_OPT_BOOL, .offset = FIELD(admin_api, bool), .def = "true",
     .group = G_ACCESS,
     .help = "serve the admin endpoints (/v1/admin/..., the status page) on --admin-socket "
             "and, if given, --admin-addr; false = no admin listener at all"},
    {.name = "admin-socket", .type = SL_OPT_STRING, .offset = FIELD(admin_socket, char *),
     .def_doc = "$RUNTIME_DIRECTORY/admin.sock, else $XDG_RUNTIME_DIR/sluice/admin.sock, else "
                "/run/sluice/admin.sock",
     .group = G_ACCESS, .metavar = "PATH",
     .help = "Unix socket of the admin endpoints, mode 0600 (its owner and root may call it; no "
             "token asked); a live socket there is a start-up error, a stale one is replaced"},
    {.name = "admin-addr", .type = SL_OPT_STRING, .offset = FIELD(admin_addr, char *),
     .def_doc = "none: the admin API is on --admin-socket only",
     .group = G_ACCESS, .metavar = "ADDR",
     .help = "also serve the admin endpoints on this ip:port (never the client port); needs "
             "--admin-token-file (every call over TCP carries the token), and off loopback TLS "
             "(--tls-cert); a taken address is a start-up error"},
    {.name = "admin-token-file", .type = SL_OPT_STRING,
     .offset = FIELD(admin_token_file, char *), .group = G_ACCESS, .metavar = "FILE",
     .help = "file holding the admin bearer token (16..512 visible ASCII bytes, mode 0600); "
             "every call to --admin-addr needs 'Authorization: Bearer <token>' (read again on "
             "SIGHUP)"},
    {.name = "allow-core-dumps", .type = SL_OPT_BOOL, .offset = FIELD(allow_core_dumps, bool),
     .def = "false", .group = G_ACCESS,
     .help = "let sluiced dump core (false: PR_SET_DUMPABLE 0, so neither a core file nor a "
             "ptrace by another process of the same user shows its tokens and keys)"},
    /* Peers: who may make peer calls (docs/cluster.md, "Peer authentication") */
    {.name = "peer-auth", .type = SL_OPT_ENUM, .offset = FIELD(peer_auth, int),
     .def = "auto", .choices = peer_auth_choices, .group = G_ACCESS,
     .help = "what a peer call (PeersV1, GLOBAL sync, hand-off) must prove: secret = the HMAC of "
             "--peer-secret-file; mtls = a verified certificate naming a peer (--peer-tls-ca); "
             "auto = secret or mtls, whichever is configured, and on a loopback-only cluster "
             "with neither the caller's IP (with a warning); insecure = anyone (logged, "
             "counted); address = the caller's IP only (deprecated: an address is not a "
             "credential); none = insecure (deprecated)"},
    {.name = "peer-secret-file", .type = SL_OPT_STRING, .offset = FIELD(peer_secret_file, char *),
     .group = G_ACCESS, .metavar = "FILE",
     .help = "the cluster secret: one or two lines of 16..512 visible ASCII bytes (the first "
             "signs, both are accepted: a rotation); every peer call carries its HMAC-SHA256 "
             "(read again on SIGHUP)"},
    {.name = "peer-auth-skew", .type = SL_OPT_DURATION,
     .offset = FIELD(peer_auth_skew_ns, int64_t), .def = "30s", .min = 1 * SEC,
     .max = 3600 * SEC, .group = G_ACCESS,
     .help = "a signed peer call whose time is further than this from the node's clock is "
             "refused"},
    {.name = "peer-max-globals", .type = SL_OPT_INT, .offset = FIELD(peer_max_globals, int64_t),
     .def = "10000", .min = 1, .max = 1000000, .group = G_ACCESS, .metavar = "N",
     .help = "most GLOBAL states one UpdatePeerGlobals call may carry (at least "
             "--global-batch-limit); more is refused"},
    {.name = "peer-max-transfer-keys", .type = SL_OPT_INT,
     .offset = FIELD(peer_max_transfer_keys, int64_t), .def = "100000", .min = 1,
     .max = 10000000, .group = G_ACCESS, .metavar = "N",
     .help = "most key states one TransferKeys call (hand-off) may carry; more is refused"},
    {.name = "client-tokens-file", .type = SL_OPT_STRING,
     .offset = FIELD(client_tokens_file, char *), .group = G_ACCESS, .metavar = "FILE",
     .help = "client identities, one '<token> <name> <prefix>[,<prefix>...]' a line, or "
             "'cert:<certificate name> <name> <prefixes>' for a verified client certificate (at "
             "most 1 MiB, 10000 identities; read again on SIGHUP); when set, GetRateLimits, "
             "/attempt and /release need 'Authorization: Bearer <token>' or such a certificate, "
             "and names / resources inside its prefixes"},
    {.name = "metrics-addr", .type = SL_OPT_STRING, .offset = FIELD(metrics_addr, char *),
     .group = G_ACCESS, .metavar = "ADDR",
     .help = "also serve GET /metrics (read-only, no token) on this ip:port"},
};

static const sl_opt_table daemon_table = {
    .program = "sluiced",
    .version = true,
    .env_prefix = "SLUICE_",
    /* modes src/daemon/main.c takes before the options are parsed */
    .other_help = "      --check-config                read every option, file and directory a "
                  "start would, report\n"
                  "                                    every problem, bind nothing; exit 0 (all "
                  "good) or 2\n"
                  "      --print-config                print the effective options, each with "
                  "where it came from\n"
                  "                                    (default, file:line, env, flag), secrets "
                  "redacted; exit 0 or 2\n",
    .opts = daemon_opts,
    .nopts = sizeof(daemon_opts) / sizeof(daemon_opts[0]),
};

const sl_opt_table *sl_config_daemon_table(void)
{
    return &daemon_table;
}

void sl_config_help(FILE *out)
{
    sl_opt_help(&daemon_table, out);
}

void sl_config_dump(const sl_options *o, FILE *out)
{
    sl_opt_dump(&daemon_table, o, out);
}

void sl_config_free(sl_options *o)
{
    sl_opt_free(&daemon_table, o);
}

/* The --config value from flags (last one wins), or NULL. */
static const char *args_config(int argc, char *const *argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strncmp(a, "--config=", 9) == 0)
            path = a + 9;
        else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < argc)
            path = argv[++i];
    }
    return path;
}

static int replace_str(char **dst, const char *src, char *err, size_t errlen)
{
    char *s = strdup(src);
    if (s == NULL)
        return sl_opt_fail(err, errlen, -ENOMEM, "out of memory");
    free(*dst);
    *dst = s;
    return 0;
}

/* " (flag --x)": where option `name`'s value came from, when the parse tracks it (not for a
 * default), written into finalize()'s buffer wbuf; else "". */
#define where(tr, name) where_((tr), (name), wbuf, sizeof wbuf)
static const char *where_(const sl_opt_track *tr, const char *name, char *buf, size_t size)
{
    const sl_opt *o = sl_opt_find(&daemon_table, name);
    if (!tr || !tr->origin || !o || strcmp(tr->origin[o - daemon_opts], "default") == 0)
        return "";
    snprintf(buf, size, " (%s)", tr->origin[o - daemon_opts]);
    return buf;
}

/* The origin of a value finalize() computed, when the option was left at its default. */
static void computed(const sl_opt_track *tr, const char *name, const char *how)
{
    const sl_opt *o = sl_opt_find(&daemon_table, name);
    if (tr && tr->origin && o && strcmp(tr->origin[o - daemon_opts], "default") == 0)
        snprintf(tr->origin[o - daemon_opts], SL_OPT_ORIGIN_MAX, "%s", how);
}

/* One problem of finalize(): into the check's list and on, or the parse's error. */
#define PROBLEM(...)                                                                               \
    do {                                                                                           \
        int prc_ = sl_opt_problem(tr, err, errlen, -EINVAL, __VA_ARGS__);                          \
        if (!(tr && tr->diag))                                                                     \
            return prc_;                                                                           \
        if (first == 0)                                                                            \
            first = prc_;                                                                          \
    } while (0)

/* A host:port option's syntax (base/hostport.h), the reason in plain words. */
#define check_addr(value, name, allow_zero)                                                        \
    do {                                                                                           \
        char h_[SL_HOSTPORT_HOST_MAX], why_[256];                                                  \
        unsigned short p_;                                                                         \
        if (sl_hostport_parse((value), (allow_zero), h_, sizeof h_, &p_, why_, sizeof why_))       \
            PROBLEM("option '%s': %s%s", (name), why_, where(tr, (name)));                         \
    } while (0)

/* Computed defaults and rules that span options. */
static int finalize(sl_options *o, const sl_opt_track *tr, char *err, size_t errlen)
{
    int rc, first = 0;
    char wbuf[SL_OPT_ORIGIN_MAX + 4];
    if (o->instance_id[0] == '\0') {
        char host[256];
        if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
            snprintf(host, sizeof(host), "sluice");
        host[sizeof(host) - 1] = '\0';
        if ((rc = replace_str(&o->instance_id, host, err, errlen)) != 0)
            return rc;
        computed(tr, "instance-id", "computed: the host name");
    }
    if (o->workers == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->workers = n < 1 ? 1 : n > 1024 ? 1024 : n;
        computed(tr, "workers", "computed: the number of CPUs");
    }
    if (o->listen_addr[0] == '\0')
        PROBLEM("option 'listen-addr': must not be empty%s", where(tr, "listen-addr"));
    else
        check_addr(o->listen_addr, "listen-addr", true);
    if (o->listen_unix.n > 8)
        PROBLEM("option 'listen-unix': at most 8 paths, not %zu%s", o->listen_unix.n,
                where(tr, "listen-unix"));
    for (size_t k = 0; k < o->listen_unix.n; k++)
        if (!o->listen_unix.items[k][0] || strlen(o->listen_unix.items[k]) > 107)
            PROBLEM("option 'listen-unix': '%s' is not a socket path (1 to 107 bytes)%s",
                    o->listen_unix.items[k], where(tr, "listen-unix"));
    {
        char *end;
        unsigned long mode = strtoul(o->listen_unix_mode, &end, 8);
        if (!o->listen_unix_mode[0] || *end || mode > 0777)
            PROBLEM("option 'listen-unix-mode': '%s' is not a mode in octal (e.g. 0660)%s",
                    o->listen_unix_mode, where(tr, "listen-unix-mode"));
    }
    bool advertise_given = o->advertise_addr[0] != '\0';
    if (!advertise_given) {
        if ((rc = replace_str(&o->advertise_addr, o->listen_addr, err, errlen)) != 0)
            return rc;
        computed(tr, "advertise-addr", "computed: listen-addr");
    }
    if (advertise_given && o->discovery != SL_DISCOVERY_NONE)
        check_addr(o->advertise_addr, "advertise-addr", false);
    if (o->admin_addr[0] != '\0')
        check_addr(o->admin_addr, "admin-addr", true);
    if (o->metrics_addr[0] != '\0')
        check_addr(o->metrics_addr, "metrics-addr", true);
    if (o->gossip_addr[0] != '\0')
        check_addr(o->gossip_addr, "gossip-addr", true);
    if (o->peers.n != 0 && o->discovery == SL_DISCOVERY_NONE)
        PROBLEM("option 'peers': a peer list needs --discovery static (with discovery 'none' "
                "the list would be ignored)%s", where(tr, "peers"));
    if (o->discovery == SL_DISCOVERY_STATIC)
        for (size_t i = 0; i < o->peers.n; i++)
            check_addr(o->peers.items[i], "peers", false);
    if ((o->shards & (o->shards - 1)) != 0)
        PROBLEM("option 'shards': %lld is not a power of two",
                    (long long)o->shards);
    if (o->discovery == SL_DISCOVERY_STATIC && o->peers.n == 0)
        PROBLEM("option 'peers': required with discovery=static");
    if (o->discovery == SL_DISCOVERY_DNS && o->dns_name[0] == '\0')
        PROBLEM("option 'dns-name': required with discovery=dns");
    if (o->discovery == SL_DISCOVERY_ETCD && o->storage_addrs.n == 0)
        PROBLEM("option 'storage-addrs': required with discovery=etcd");
    if (o->discovery == SL_DISCOVERY_GOSSIP && o->gossip_addr[0] == '\0')
        PROBLEM("option 'gossip-addr': required with discovery=gossip");
    if (o->discovery == SL_DISCOVERY_K8S && (o->k8s_service[0] == '\0') == (o->k8s_selector[0] == '\0'))
        PROBLEM(
                           "option 'k8s-service': one of k8s-service and k8s-selector with discovery=k8s");
    if (o->shed_low > o->shed_target)
        PROBLEM("option 'shed-low': %lld is above shed-target (%lld)",
                    (long long)o->shed_low, (long long)o->shed_target);
    if (o->tls_key[0] != '\0' && o->tls_cert[0] == '\0')
        PROBLEM("option 'tls-key': --tls-key needs --tls-cert (the certificate of that key)%s",
                where(tr, "tls-key"));
    if (o->tls_cert[0] != '\0' && o->tls_key[0] == '\0')
        PROBLEM("option 'tls-cert': --tls-cert needs --tls-key (the certificate's private key)%s",
                where(tr, "tls-cert"));
    if (o->tls_client_auth != SL_TLS_CLIENT_AUTH_NONE && o->tls_ca[0] == '\0')
        PROBLEM("option 'tls-client-auth': needs tls-ca");
    if (o->tls_cert[0] == '\0' && o->tls_client_auth != SL_TLS_CLIENT_AUTH_NONE)
        PROBLEM("option 'tls-client-auth': needs tls-cert");
    if ((o->storage_tls_cert[0] != '\0') != (o->storage_tls_key[0] != '\0'))
        PROBLEM(
                           "option 'storage-tls-cert': needs storage-tls-key, and back");
    /* Peers: with TLS on the port, peer calls speak TLS too, with the server's files unless the
     * peer-tls-* options name others. */
    if (o->peer_tls_cert[0] == '\0' && o->tls_cert[0] != '\0' &&
        ((rc = replace_str(&o->peer_tls_cert, o->tls_cert, err, errlen)) != 0 ||
         (rc = replace_str(&o->peer_tls_key, o->tls_key, err, errlen)) != 0))
        return rc;
    if ((o->peer_tls_cert[0] != '\0') != (o->peer_tls_key[0] != '\0'))
        PROBLEM("option 'peer-tls-cert': needs peer-tls-key, and back");
    if (o->peer_auth == SL_PEER_AUTH_SECRET && o->peer_secret_file[0] == '\0')
        PROBLEM("option 'peer-auth': secret needs peer-secret-file");
    if (o->peer_auth == SL_PEER_AUTH_MTLS && (o->peer_tls_cert[0] == '\0' || o->peer_tls_ca[0] == '\0'))
        PROBLEM("option 'peer-auth': mtls needs peer TLS (tls-cert or peer-tls-cert) and "
                "peer-tls-ca");
    if (o->peer_max_globals < o->global_batch_limit)
        PROBLEM("option 'peer-max-globals': %lld is below global-batch-limit (%lld): the peers' "
                "own updates would be refused",
                (long long)o->peer_max_globals, (long long)o->global_batch_limit);
    if (o->role == SL_ROLE_PROXY && o->proxy_limiters.n == 0 && o->observers.n == 0 &&
        o->storage_addrs.n == 0)
        PROBLEM("option 'proxy-limiters': required with "
                           "role=proxy (or observers, or storage-addrs to find them in etcd)");
    if (o->redis_sentinel.n && o->redis_addrs.n)
        PROBLEM("option 'redis-sentinel': the sentinels say where the server is; give "
                "redis-addrs or redis-sentinel, not both");
    if (o->redis_sentinel.n && o->redis_cluster)
        PROBLEM("option 'redis-sentinel': a Redis Cluster has no sentinels; give redis-cluster or "
                "redis-sentinel, not both");
    if (o->redis_sentinel.n && !o->redis_master[0])
        PROBLEM("option 'redis-master': required with redis-sentinel (the name in the sentinels' "
                "'sentinel monitor' line)");
    if (o->store == SL_STORE_REDIS && o->redis_addrs.n == 0 && o->redis_sentinel.n == 0)
        PROBLEM("option 'redis-addrs': required with store=redis (or redis-sentinel and "
                "redis-master)");
    if (o->standalone && o->discovery != SL_DISCOVERY_NONE)
        PROBLEM(
                    "option 'standalone': cannot be combined with discovery=%s",
                    discovery_choices[o->discovery]);
    return first;
}

/* envoyproxy/ratelimit's own variables, honoured as it names them, under sluice's variables and
 * flags (so a migrated deployment keeps its environment). */
static int load_upstream_env(const sl_opt_table *t, sl_options *o, char *const *envp,
                             const sl_opt_track *tr, char *err, size_t errlen)
{
    int first = 0;
    static const char *const vars[][2] = {
        {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "rls-all-or-nothing"},
        {"QUOTA_MODE", "rls-quota-mode"},
        {"NEAR_LIMIT_RATIO", "rls-near-limit-ratio"},
        {"RESPONSE_DYNAMIC_METADATA", "rls-dynamic-metadata"},
        {"LIMIT_RESPONSE_HEADERS_ENABLED", "rls-response-headers"},
        {"LIMIT_LIMIT_HEADER", "rls-header-limit"},
        {"LIMIT_REMAINING_HEADER", "rls-header-remaining"},
        {"LIMIT_RESET_HEADER", "rls-header-reset"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = sl_opt_getenv(envp, vars[i][0]);
        char src[64];
        snprintf(src, sizeof src, "env %s", vars[i][0]);
        int rc = v ? sl_opt_store(t, tr, o, sl_opt_find(t, vars[i][1]), v, false, src, err,
                                  errlen)
                   : 0;
        if (rc != 0 && !(tr && tr->diag))
            return rc;
        if (rc != 0 && first == 0)
            first = rc;
    }
    return first;
}

int sl_config_parse(sl_options *o, int argc, char *const *argv, char *const *envp, char *err,
                    size_t errlen)
{
    return sl_config_check(o, argc, argv, envp, NULL, NULL, err, errlen);
}

int sl_config_check(sl_options *o, int argc, char *const *argv, char *const *envp, sl_diag *diag,
                    char (*origin)[SL_OPT_ORIGIN_MAX], char *err, size_t errlen)
{
    const sl_opt_table *t = &daemon_table;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    /* Origins are always tracked, so that a message can say where a bad value came from. */
    char (*own)[SL_OPT_ORIGIN_MAX] = NULL;
    if (origin == NULL && (own = calloc(t->nopts, sizeof *own)) == NULL)
        return sl_opt_fail(err, errlen, -ENOMEM, "out of memory");
    sl_opt_track tr = {.diag = diag, .origin = origin ? origin : own};
    int rc = sl_opt_defaults_ex(t, o, &tr, err, errlen), first = 0;
    if (rc != 0)
        goto out;
    if ((rc = sl_opt_special(t, argc, argv)) != 0)
        goto out;
    /* The file comes first, so its name must be known before env and flags are applied. */
    const char *path = args_config(argc, argv);
    if (path == NULL)
        path = sl_opt_getenv(envp, "SLUICE_CONFIG");
    if (path != NULL && path[0] != '\0')
        rc = sl_opt_load_file_ex(t, o, path, &tr, err, errlen);
    if (rc != 0 && (first = rc, !diag))
        goto out;
    rc = load_upstream_env(t, o, envp, &tr, err, errlen);
    if (rc != 0 && (first = first ? first : rc, !diag))
        goto out;
    rc = sl_opt_load_env_ex(t, o, envp, &tr, err, errlen);
    if (rc != 0 && (first = first ? first : rc, !diag))
        goto out;
    rc = sl_opt_load_args_ex(t, o, argc, argv, &tr, err, errlen);
    if (rc != 0 && (first = first ? first : rc, !diag))
        goto out;
    rc = finalize(o, &tr, err, errlen);
    if (first != 0)
        rc = first;
out:
    free(own);
    return rc;
}

int sl_config_admin_socket(const char *explicit_path, char *buf, size_t buflen, char *dir,
                           size_t dirlen)
{
    const char *rd = getenv("RUNTIME_DIRECTORY"), *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    const char *d = "";
    if (explicit_path && explicit_path[0]) {
        n = snprintf(buf, buflen, "%s", explicit_path);
    } else if (rd && rd[0]) {
        /* systemd may list several directories, separated by ':': the first is ours */
        size_t l = strcspn(rd, ":");
        n = snprintf(buf, buflen, "%.*s/admin.sock", (int)l, rd);
    } else if (xdg && xdg[0]) {
        n = snprintf(buf, buflen, "%s/sluice/admin.sock", xdg);
        d = buf;
    } else {
        n = snprintf(buf, buflen, "/run/sluice/admin.sock");
        d = buf;
    }
    if (n < 0 || (size_t)n >= buflen)
        return -ENAMETOOLONG;
    if (dir && dirlen) {
        size_t l = d[0] ? (size_t)(strrchr(d, '/') - d) : 0;
        if (l >= dirlen)
            return -ENAMETOOLONG;
        memcpy(dir, d, l);
        dir[l] = 0;
    }
    return 0;
}

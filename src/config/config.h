/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluiced's options: the `sl_options` struct, its table (which options exist, their defaults, bounds
 * and help) and the parse that fills it from defaults, the YAML file (--config FILE or
 * SLUICE_CONFIG), the environment (SLUICE_*) and flags, lowest to highest precedence, then checks
 * the options against each other. The syntax of every source is the option engine's
 * (config/opt.h).
 */
#ifndef SLUICE_CONFIG_CONFIG_H
#define SLUICE_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/opt.h"

typedef enum sl_no_quota {
    SL_NO_QUOTA_ALLOW = 0, /* 200 */
    SL_NO_QUOTA_DENY = 1,  /* 429 */
    SL_NO_QUOTA_ERROR = 2, /* 500, Levee's "failed" */
} sl_no_quota;

typedef enum sl_discovery {
    SL_DISCOVERY_NONE = 0,
    SL_DISCOVERY_STATIC = 1,
    SL_DISCOVERY_DNS = 2,
    SL_DISCOVERY_ETCD = 3,
    SL_DISCOVERY_K8S = 4,
    SL_DISCOVERY_GOSSIP = 5,
} sl_discovery;

typedef enum sl_tls_client_auth {
    SL_TLS_CLIENT_AUTH_NONE = 0,
    SL_TLS_CLIENT_AUTH_REQUEST = 1,
    SL_TLS_CLIENT_AUTH_REQUIRE = 2,
} sl_tls_client_auth;

typedef enum sl_role {
    SL_ROLE_LIMITER = 0,  /* today's node: decides /attempt and the Gubernator API */
    SL_ROLE_OBSERVER = 1, /* Levee's observer: streams the topology (levee/observer.h) */
    SL_ROLE_PROXY = 2,    /* Levee's client-proxy: /attempt relayed to each resource's DF group */
} sl_role;
typedef enum sl_store_kind {
    SL_STORE_MEMORY = 0,
    SL_STORE_REDIS = 1,
} sl_store_kind;

/* --peer-auth (docs/cluster.md, "Peer authentication"). */
typedef enum sl_peer_auth {
    SL_PEER_AUTH_AUTO = 0,     /* secret, else mtls, else (loopback-only) address with a warning */
    SL_PEER_AUTH_SECRET = 1,   /* the HMAC of --peer-secret-file */
    SL_PEER_AUTH_MTLS = 2,     /* a verified certificate naming a member */
    SL_PEER_AUTH_INSECURE = 3, /* anyone: the explicit opt-out */
    SL_PEER_AUTH_ADDRESS = 4,  /* deprecated: the caller's source IP is a member's */
    SL_PEER_AUTH_NONE = 5,     /* deprecated alias of insecure */
} sl_peer_auth;

typedef enum sl_peer_picker {
    SL_PICKER_RING = 0,
    SL_PICKER_HRW = 1,
} sl_peer_picker;

/* sluiced's options. Durations are nanoseconds (_ns), sizes bytes. */
typedef struct sl_options {
    /* General */
    char *config;
    char *instance_id;         /* defaults to the host name */
    char *listen_addr;
    sl_opt_list listen_unix;
    char *listen_unix_mode;
    int64_t workers;           /* defaults to the number of online CPUs */
    bool verbose;
    int64_t log_request_lines;
    int log_level;  /* sl_log_level */
    int log_format; /* sl_log_format */
    /* Limits */
    int64_t max_conns;
    uint64_t max_header_bytes;
    uint64_t max_body_bytes;
    int64_t idle_timeout_ns;
    int64_t read_timeout_ns;
    int64_t max_streams;
    int64_t write_timeout_ns;
    uint64_t max_conn_body_bytes;
    uint64_t max_conn_unsent_bytes;
    uint64_t max_unsent_bytes;
    uint64_t max_request_memory; /* 0: sized to the machine (net/reqmem.h) */
    int64_t max_conn_errors;
    int64_t shutdown_timeout_ns;
    int64_t max_batch;
    /* TLS ("" = unset) */
    char *tls_cert;
    char *tls_key;
    char *tls_ca;
    int tls_client_auth;       /* sl_tls_client_auth */
    int64_t tls_handshake_timeout_ns;
    char *peer_tls_cert;       /* default tls_cert (with tls_key) */
    char *peer_tls_key;
    char *peer_tls_ca;         /* "" = peers' certificates not verified (no default) */
    char *storage_tls_ca;
    char *storage_tls_cert;
    char *storage_tls_key;
    /* Engine */
    int64_t gc_max_keys;
    int64_t gc_period_ns;
    int64_t gc_collect_ns;
    int64_t gc_collect_free_ns;
    uint64_t max_memory;
    int64_t max_count;
    int64_t max_duration_ns;
    int64_t max_clock_skew_ns;
    int64_t gc_max_work;
    int64_t shards;
    int64_t max_log_limit;
    int64_t max_sub_windows;
    char *state_dir;           /* --state-dir: NULL = no snapshots */
    int64_t snapshot_period_ns;
    int store;                 /* sl_store_kind: --store */
    sl_opt_list redis_addrs;
    sl_opt_list redis_sentinel;
    char *redis_master;
    char *redis_user;          /* "" = AUTH password */
    char *redis_password_file; /* "" = no AUTH */
    bool redis_cluster;        /* redis_addrs are Redis Cluster seed nodes */
    int64_t redis_cluster_refresh_ns;
    int64_t redis_timeout_ns;
    int64_t redis_batch_items;
    int64_t redis_over_limit_cache;
    uint64_t redis_max_reply;  /* bytes of one reply */
    uint64_t redis_max_queued; /* bytes of commands waiting per connection */
    bool redis_tls;
    char *redis_tls_ca;        /* "" = the system's trust store */
    char *redis_tls_cert;      /* "" = no client certificate */
    char *redis_tls_key;
    char *redis_tls_server_name; /* "" = each address's IP */
    /* Quotas (Levee) */
    bool standalone;
    char *storage_prefix;
    sl_opt_list storage_addrs;
    char *quota_file;
    int no_quota;              /* sl_no_quota */
    int attempt_headers;       /* 0 = rejections, 1 = always */
    int64_t attempt_max_delay_ns; /* longest X-Max-Delay honoured (delay instead of reject) */
    int64_t attempt_max_held;  /* X-Delay-Mode: hold: answers held at once per worker */
    int64_t storage_timeout_ns;
    /* Envoy RLS v3 */
    char *rls_config_dir;      /* NULL = no configuration: every descriptor OK */
    int64_t rls_poll_period_ns;
    bool rls_response_headers;
    bool rls_all_or_nothing;
    bool rls_quota_mode;
    bool rls_dynamic_metadata;
    double rls_near_limit_ratio;
    char *rls_header_limit, *rls_header_remaining, *rls_header_reset;
    int64_t rls_max_descriptors;
    int64_t rls_max_entries;
    /* Metrics */
    char *graphite_addr;
    int64_t graphite_period_ns;
    char *graphite_prefix;
    /* Cluster */
    int discovery;             /* sl_discovery */
    sl_opt_list peers;
    char *dns_name;
    char *dns_server;          /* "" = the system resolver */
    int64_t dns_period_ns;
    char *advertise_addr;      /* defaults to listen_addr */
    int peer_picker;           /* sl_peer_picker */
    int64_t replicas;
    char *cluster_hash_secret_file; /* "" = unkeyed key ids (core/store.h) */
    int64_t batch_wait_ns;
    int64_t batch_limit;
    int64_t batch_timeout_ns;
    int64_t global_sync_wait_ns;
    int64_t global_batch_limit;
    bool fail_open;
    int64_t peer_lease_ttl_ns;
    /* Cluster: Kubernetes discovery (ctlplane/k8s.h) */
    char *k8s_api;             /* "" = KUBERNETES_SERVICE_HOST/_PORT */
    char *k8s_namespace;       /* "" = the service account's namespace file */
    char *k8s_service;
    char *k8s_selector;
    char *k8s_port_name;
    int64_t k8s_port;          /* 0 = by name */
    char *k8s_token_file;
    char *k8s_ca_file;
    uint64_t k8s_max_bytes;
    int64_t k8s_watch_timeout_ns;
    /* Cluster: SWIM gossip (gossip/gossipnode.h, gossip/swim.h) */
    char *gossip_addr;         /* "" = no gossip */
    sl_opt_list gossip_seeds;
    char *gossip_name;         /* "" = --advertise-addr */
    char *gossip_keyring_file; /* "" = no key ring: loopback or gossip_insecure only */
    bool gossip_insecure;      /* no key ring on a non-loopback gossip address */
    int64_t gossip_replay_window_ns; /* sealed packets' age either side of our clock */
    int64_t gossip_probe_interval_ns;
    int64_t gossip_probe_timeout_ns;
    int64_t gossip_indirect_probes;
    int64_t gossip_retransmit_mult;
    int64_t gossip_suspicion_mult;
    int64_t gossip_suspicion_max_mult;
    int64_t gossip_interval_ns;
    int64_t gossip_fanout;
    int64_t gossip_pushpull_interval_ns;
    int64_t gossip_dead_keep_ns;
    int64_t gossip_max_members;
    uint64_t gossip_max_stream_bytes;
    int64_t gossip_timeout_ns;
    /* Roles (Levee's cluster: limiter, observer, client-proxy; levee/proxy.h) */
    int role;                  /* sl_role */
    char *observer_name;       /* Levee's observer-name */
    int64_t observer_heartbeat_ns;   /* role observer (levee/observer.h) */
    int64_t observer_max_watchers;
    uint64_t observer_max_queue_bytes;
    int64_t observer_lease_ttl_ns;
    int64_t leave_drain_ns;          /* role limiter with gossip: answer on after LEFT */
    sl_opt_list observers;           /* role proxy: observers to follow (levee/feed.h) */
    int64_t observer_timeout_ns;
    int64_t observer_retry_window_ns;
    sl_opt_list proxy_limiters; /* name=host:port, the proxy's static limiter set */
    int64_t proxy_timeout_ns;
    int64_t proxy_max_inflight;
    int64_t proxy_probe_interval_ns;
    /* Protection */
    bool shed;
    int64_t shed_target;          /* percent of a worker loop's time busy */
    int64_t shed_low;             /* percent */
    int64_t shed_raise_after_ns;
    int64_t shed_lower_after_ns;
    int64_t shed_raise_step;      /* percent of a traffic class */
    int64_t shed_lower_step;
    int64_t shed_smoothing;       /* percent weight of a new sample */
    int64_t shed_interval_ns;
    int default_priority;         /* sl_priority: critical, post, get, test */
    int64_t metrics_max_names;    /* who is limited: named limits (--metrics-max-names) */
    int64_t top_keys;             /* keys per limit and event (--top-keys) */
    int64_t top_half_life_ns;     /* --top-half-life */
    int64_t max_concurrency_limit;
    int64_t max_switches;
    bool admin_api;
    char *admin_socket;        /* "" = the runtime directory's (sl_config_admin_socket) */
    char *admin_addr;          /* "" = no admin listener on TCP */
    char *admin_token_file;    /* "" = no token (then no TCP admin listener) */
    bool allow_core_dumps;     /* false: sluiced sets PR_SET_DUMPABLE 0 (daemon/main.c) */
    char *metrics_addr;        /* "" = /metrics on the client port only */
    char *client_tokens_file;  /* "" = no client identities */
    int peer_auth;             /* sl_peer_auth (--peer-auth) */
    char *peer_secret_file;    /* "" = no cluster secret */
    int64_t peer_auth_skew_ns; /* --peer-auth-skew */
    int64_t peer_max_globals;  /* UpdatePeerGlobals cap (--peer-max-globals) */
    int64_t peer_max_transfer_keys; /* TransferKeys cap (--peer-max-transfer-keys) */
} sl_options;

/* The admin socket's path: explicit if not NULL and not "", else the default in the runtime
 * directory: $RUNTIME_DIRECTORY/admin.sock (systemd's RuntimeDirectory=), else
 * $XDG_RUNTIME_DIR/sluice/admin.sock, else /run/sluice/admin.sock. Into buf (NUL-terminated):
 * 0, or -ENAMETOOLONG. dir (dirlen 0: not wanted) gets the directory sluiced creates (mode
 * 0700) if missing: "" for $RUNTIME_DIRECTORY and an explicit path, which must exist. sluiced and
 * the CLI share it, so `sluice top` finds the node without options. */
int sl_config_admin_socket(const char *explicit_path, char *buf, size_t buflen, char *dir,
                           size_t dirlen);

/* sluiced's table (program "sluiced", prefix "SLUICE_"). */
const sl_opt_table *sl_config_daemon_table(void);

/*
 * Fill *o from defaults, the file named by --config / SLUICE_CONFIG, the environment (envp; NULL =
 * the process's) and argv, then resolve computed defaults (instance-id, workers, advertise-addr)
 * and check options against each other (e.g. --discovery=static needs --peers). Returns 0,
 * SL_OPT_HELP, SL_OPT_VERSION, or a negative errno with the message in err. *o must be
 * zeroed before the first call; call sl_config_free() afterwards in every case.
 */
int sl_config_parse(sl_options *o, int argc, char *const *argv, char *const *envp, char *err,
                    size_t errlen);
/*
 * The same parse for a check (sluiced --check-config, --print-config): with diag set, every problem
 * is added to it, not only the first (the return is the first's errno, its text in err); with
 * origin set (sl_config_daemon_table()->nopts entries), each option's entry says where its value
 * came from: "default", "file F:LINE", "env NAME", "flag --name", "computed: ...".
 */
struct sl_diag;
int sl_config_check(sl_options *o, int argc, char *const *argv, char *const *envp,
                    struct sl_diag *diag, char (*origin)[SL_OPT_ORIGIN_MAX], char *err,
                    size_t errlen);
void sl_config_free(sl_options *o);
void sl_config_help(FILE *out);                       /* sluiced --help */
void sl_config_dump(const sl_options *o, FILE *out);  /* effective options as YAML */

#endif

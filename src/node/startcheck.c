/* SPDX-License-Identifier: Apache-2.0 */
/* The start-up check (see startcheck.h): each part reads what the start reads, with the same
 * readers (quota file, RLS directory, token files, TLS contexts, key ring), and words the
 * problem with the option that named it. */
#include "node/startcheck.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/addr.h"
#include "auth/idents.h"
#include "auth/peersig.h"
#include "base/file.h"
#include "base/hostport.h"
#include "config/quota.h"
#include "core/store.h"
#include "config/quotafile.h"
#include "config/rlsconf.h"
#include "config/rlssrc.h"
#include "gossip/keyring.h"
#include "node/adminsrv.h"
#include "node/reload.h"
#include "tls/tls.h"

static void check_quota_file(const sl_options *o, sl_diag *d)
{
    if (o->storage_addrs.n || !o->quota_file || !o->quota_file[0])
        return; /* etcd holds the quotas: its first read is the start's */
    sl_quota_tree *t;
    if (sl_quota_tree_new(0, &t)) {
        sl_diag_add(d, "option 'quota-file': out of memory");
        return;
    }
    char err[512];
    if (sl_quotafile_load(o->quota_file, t, err, sizeof err))
        sl_diag_add(d, "option 'quota-file': %s", err);
    sl_quota_tree_free(t);
}

static void check_rls_dir(const sl_options *o, sl_diag *d)
{
    if (!o->rls_config_dir || !o->rls_config_dir[0])
        return;
    sl_rlsconf *c = NULL;
    char err[512];
    size_t dl = strlen(o->rls_config_dir);
    if (sl_rlssrc_load_dir(o->rls_config_dir, &c, err, sizeof err)) {
        if (strncmp(err, o->rls_config_dir, dl) == 0) /* about the directory itself */
            sl_diag_add(d, "option 'rls-config-dir': %s", err);
        else /* "FILE: line N: ..." about one of its files */
            sl_diag_add(d, "option 'rls-config-dir': %s%s%s", o->rls_config_dir,
                        dl && o->rls_config_dir[dl - 1] == '/' ? "" : "/", err);
    }
    sl_rlsconf_unref(c);
}

/* The text after a message's first word (the option's name, which the caller puts in quotes). */
static const char *after_word(const char *s)
{
    const char *sp = strchr(s, ' ');
    return sp ? sp + 1 : s;
}

static void check_tokens(const sl_options *o, sl_diag *d)
{
    char err[512];
    /* the readers' messages are "admin-token-file F: reason" */
    if (o->admin_token_file[0] &&
        sl_adminsrv_check_token_file(o->admin_token_file, err, sizeof err))
        sl_diag_add(d, "option 'admin-token-file': %s", after_word(err));
    if (o->peer_secret_file[0]) { /* "F: reason", never the secret */
        sl_peersig_keys *k = NULL;
        if (sl_peersig_keys_read(o->peer_secret_file, &k, err, sizeof err))
            sl_diag_add(d, "option 'peer-secret-file': %s", err);
        sl_peersig_keys_unref(k);
    }
    if (o->client_tokens_file[0]) {
        sl_idents *ids = NULL;
        if (sl_reload_read_idents(o->client_tokens_file, &ids, err, sizeof err))
            sl_diag_add(d, "option 'client-tokens-file': %s", after_word(err));
        if (ids)
            sl_idents_free(ids);
    }
}

/* One file an option names that only a later connection reads (etcd's and Redis's TLS files):
 * readable and PEM now. */
static void check_pem_file(const char *opt, const char *what, const char *path, sl_diag *d)
{
    if (!path || !path[0])
        return;
    char *buf = NULL, err[512];
    size_t len = 0;
    int rc = sl_file_read(path, (size_t)1 << 20, SL_FILE_REGULAR, &buf, &len, err, sizeof err);
    if (rc)
        sl_diag_add(d, "option '%s': %s %s", opt, what, err);
    else if (!strstr(buf, "-----BEGIN "))
        sl_diag_add(d, "option '%s': %s %s: not PEM (no '-----BEGIN' line; want a PEM file)", opt,
                    what, path);
    if (buf)
        memset(buf, 0, len); /* a key file */
    free(buf);
}

static void check_tls(const sl_options *o, sl_diag *d)
{
    char err[768];
    sl_tls_ctx *ctx = NULL;
    if (o->tls_cert[0] && o->tls_key[0]) {
        if (sl_reload_read_server_tls(o, &ctx, err, sizeof err))
            sl_diag_add(d, "%s", err);
        sl_tls_ctx_unref(ctx);
        ctx = NULL;
    }
    bool peer_own = o->peer_tls_cert[0] && strcmp(o->peer_tls_cert, o->tls_cert) != 0;
    bool peer_ca = o->peer_tls_ca[0] && strcmp(o->peer_tls_ca, o->tls_ca) != 0;
    if (o->discovery != SL_DISCOVERY_NONE && o->peer_tls_cert[0] && o->peer_tls_key[0] &&
        (peer_own || peer_ca || !o->tls_cert[0])) {
        if (sl_reload_read_peer_tls(o, &ctx, err, sizeof err))
            sl_diag_add(d, "%s", err);
        sl_tls_ctx_unref(ctx);
    }
    check_pem_file("storage-tls-ca", "CA bundle", o->storage_tls_ca, d);
    check_pem_file("storage-tls-cert", "certificate", o->storage_tls_cert, d);
    check_pem_file("storage-tls-key", "key", o->storage_tls_key, d);
    if (o->redis_tls) {
        check_pem_file("redis-tls-ca", "CA bundle", o->redis_tls_ca, d);
        check_pem_file("redis-tls-cert", "certificate", o->redis_tls_cert, d);
        check_pem_file("redis-tls-key", "key", o->redis_tls_key, d);
    }
}

static void check_keyring(const sl_options *o, sl_diag *d)
{
    if (!o->gossip_keyring_file || !o->gossip_keyring_file[0])
        return;
    sl_keyring *k = NULL;
    char err[512];
    if (sl_keyring_load(o->gossip_keyring_file, &k, err, sizeof err))
        sl_diag_add(d, "option 'gossip-keyring-file': %s", err);
    if (k)
        sl_keyring_free(k);
}

static void check_state_dir(const sl_options *o, sl_diag *d)
{
    if (!o->state_dir || !o->state_dir[0])
        return;
    struct stat st;
    if (stat(o->state_dir, &st) != 0) {
        if (errno != ENOENT) {
            sl_diag_add(d, "option 'state-dir': %s: %s", o->state_dir, strerror(errno));
            return;
        }
        /* the start makes it: its parent must exist and be writable */
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", o->state_dir);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = '\0';
        else if (slash)
            *slash = '\0';
        else
            snprintf(parent, sizeof parent, ".");
        if (access(parent, W_OK | X_OK) != 0)
            sl_diag_add(d, "option 'state-dir': %s does not exist and cannot be made: %s: %s",
                        o->state_dir, parent,
                        errno == EACCES ? "permission denied" : strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode))
        sl_diag_add(d, "option 'state-dir': %s: not a directory", o->state_dir);
    else if (access(o->state_dir, W_OK | X_OK) != 0)
        sl_diag_add(d, "option 'state-dir': %s: permission denied: uid %ld cannot write in it",
                    o->state_dir, (long)getuid());
}

/* --cluster-hash-secret-file: readable, and enough material to key the cluster's key ids (read,
 * wiped and freed as the start does; never quoted). */
static void check_cluster_secret(const sl_options *o, sl_diag *d)
{
    const char *path = o->cluster_hash_secret_file;
    if (!path || !path[0] || o->discovery == SL_DISCOVERY_NONE)
        return; /* only a clustered engine keys its ids */
    char *buf = NULL, err[512];
    size_t len = 0;
    if (sl_file_read(path, 4096, SL_FILE_REGULAR | SL_FILE_SECRET, &buf, &len, err,
                     sizeof err)) {
        sl_diag_add(d, "option 'cluster-hash-secret-file': %s", err);
        return;
    }
    size_t n = len;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    sl_key_ids ids;
    if (sl_key_ids_init(&ids, buf, n))
        sl_diag_add(d, "option 'cluster-hash-secret-file': --cluster-hash-secret-file %s: %zu "
                    "bytes, at least %d needed (e.g. head -c 32 /dev/urandom | base64 > FILE)",
                    path, n, SL_KEY_IDS_MIN_MATERIAL);
    explicit_bzero(&ids, sizeof ids);
    explicit_bzero(buf, len);
    free(buf);
}

/* A static peer list: every peer resolves, and this node is one of them (the router finds
 * itself by its advertise address, spelled as in the list). */
static void check_peers(const sl_options *o, sl_diag *d)
{
    if (o->discovery != SL_DISCOVERY_STATIC)
        return;
    bool self = false;
    for (size_t i = 0; i < o->peers.n; i++) {
        const char *p = o->peers.items[i];
        self |= strcmp(p, o->advertise_addr) == 0;
        char host[SL_HOSTPORT_HOST_MAX], port[8];
        unsigned short pn;
        if (sl_hostport_parse(p, false, host, sizeof host, &pn, NULL, 0))
            continue; /* the parse said why */
        snprintf(port, sizeof port, "%u", (unsigned)pn);
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
        struct addrinfo *res = NULL;
        int g = getaddrinfo(host, port, &hints, &res);
        if (g != 0)
            sl_diag_add(d, "option 'peers': peer '%s' does not resolve: %s", p,
                        g == EAI_SYSTEM ? strerror(errno) : gai_strerror(g));
        if (res)
            freeaddrinfo(res);
    }
    if (!self && o->peers.n) {
        char list[512];
        size_t off = 0;
        list[0] = '\0';
        for (size_t i = 0; i < o->peers.n && off < sizeof list; i++)
            off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "",
                                    o->peers.items[i]);
        sl_diag_add(d, "option 'peers': this node (%s) is not in the peer list (%s): add it, or "
                    "set --advertise-addr to the address the peers know this node by",
                    o->advertise_addr, list);
    }
}

/* The client port listens on an IP address (or "localhost"): a name would fail at bind. */
static void check_listen_ip(const sl_options *o, sl_diag *d)
{
    char host[SL_HOSTPORT_HOST_MAX];
    unsigned short port;
    unsigned char buf[16];
    if (sl_addr_split(o->listen_addr, host, sizeof host, &port))
        return; /* the parse said why */
    if (inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1)
        sl_diag_add(d, "option 'listen-addr': '%s' is not an IP address (listen on a numeric "
                    "IPv4 or [IPv6] address, 0.0.0.0 for all; advertise a name with "
                    "--advertise-addr)", host);
}

/* --store redis: each address is an IP and a port (the store does not resolve names), and the
 * password file can be read (never quoted). */
static void check_redis(const sl_options *o, sl_diag *d)
{
    if (o->store != SL_STORE_REDIS)
        return;
    for (size_t i = 0; i < o->redis_addrs.n; i++) {
        char host[SL_HOSTPORT_HOST_MAX], why[256];
        unsigned short port;
        unsigned char buf[16];
        if (sl_hostport_parse(o->redis_addrs.items[i], false, host, sizeof host, &port, why,
                              sizeof why))
            sl_diag_add(d, "option 'redis-addrs': %s", why);
        else if (inet_pton(AF_INET, host, buf) != 1 && inet_pton(AF_INET6, host, buf) != 1)
            sl_diag_add(d, "option 'redis-addrs': '%s' is not an IP address (the Redis store "
                        "connects to IP:port addresses)", host);
    }
    if (o->redis_password_file && o->redis_password_file[0]) {
        char *buf = NULL, err[512];
        size_t len = 0;
        if (sl_file_read(o->redis_password_file, 4096, SL_FILE_REGULAR | SL_FILE_SECRET, &buf,
                         &len, err, sizeof err))
            sl_diag_add(d, "option 'redis-password-file': %s", err);
        if (buf)
            explicit_bzero(buf, len); /* memset may be dropped as a dead store */
        free(buf);
    }
}

size_t sl_startcheck_run(const sl_options *o, sl_diag *d)
{
    size_t before = sl_diag_count(d);
    check_listen_ip(o, d);
    check_quota_file(o, d);
    check_rls_dir(o, d);
    check_tokens(o, d);
    check_tls(o, d);
    check_keyring(o, d);
    check_state_dir(o, d);
    check_cluster_secret(o, d);
    check_peers(o, d);
    check_redis(o, d);
    return sl_diag_count(d) - before;
}

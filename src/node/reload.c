/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A node's files, read at start and again on SIGHUP (see reload.h): the TLS contexts, the client
 * identities with the deferred free of a swapped-out set, and a static peer list.
 */
#include "node/reload.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/secret.h"
#include "base/file.h"

/* The client port's context from --tls-cert/--tls-key/--tls-ca/--tls-client-auth. */
int sl_reload_read_server_tls(const sl_options *o, sl_tls_ctx **out, char *err, size_t errlen)
{
    sl_tls_config tc = {
        .server = true,
        .cert_file = o->tls_cert,
        .key_file = o->tls_key,
        .ca_file = o->tls_ca[0] ? o->tls_ca : NULL,
        .client_auth = (sl_tls_auth)o->tls_client_auth,
        .cert_opt = "tls-cert",
        .key_opt = "tls-key",
        .ca_opt = "tls-ca",
        .ca2_opt = "peer-tls-ca",
    };
    /* In a cluster with a peer CA, the port asks for client certificates (require stays
     * require) and trusts the peer CA too, so that a peer's certificate is verified and its
     * name recorded on the connection (sl_exchange_peer_identity). */
    if (o->discovery != SL_DISCOVERY_NONE && o->peer_tls_ca[0]) {
        if (tc.client_auth == SL_TLS_AUTH_NONE)
            tc.client_auth = SL_TLS_AUTH_REQUEST;
        if (!tc.ca_file) {
            tc.ca_file = o->peer_tls_ca;
            tc.ca_opt = "peer-tls-ca";
        }
        else if (strcmp(tc.ca_file, o->peer_tls_ca) != 0)
            tc.ca_file2 = o->peer_tls_ca;
    }
    return sl_tls_ctx_new(out, &tc, err, errlen);
}

/* Peer calls speak TLS when the client port does (peers call each other's client port), with
 * --peer-tls-cert/--peer-tls-key/--peer-tls-ca (defaults: the --tls-* files). */
int sl_reload_read_peer_tls(const sl_options *o, sl_tls_ctx **out, char *err, size_t errlen)
{
    sl_tls_config tc = {
        .cert_file = o->peer_tls_cert[0] ? o->peer_tls_cert : NULL,
        .key_file = o->peer_tls_key[0] ? o->peer_tls_key : NULL,
        .ca_file = o->peer_tls_ca[0] ? o->peer_tls_ca : NULL,
        .alpn = "h2",
        .cert_opt = "peer-tls-cert",
        .key_opt = "peer-tls-key",
        .ca_opt = "peer-tls-ca",
    };
    char e[512];
    int rc = sl_tls_ctx_new(out, &tc, e, sizeof e);
    if (rc)
        snprintf(err, errlen, "peer TLS: %s", e);
    return rc;
}

/* --client-tokens-file into *out: 0, or a negative errno with the reason in err (never a
 * token). */
int sl_reload_read_idents(const char *path, sl_idents **out, char *err, size_t errlen)
{
    char *buf = NULL, ferr[1024];
    size_t len = 0;
    int rc = sl_secret_read(path, SL_IDENTS_MAX_FILE, &buf, &len, ferr, sizeof ferr);
    if (rc) {
        snprintf(err, errlen, "client-tokens-file %s", ferr);
        return rc;
    }
    rc = sl_idents_parse(buf, len, out, ferr, sizeof ferr);
    sl_secret_free(buf, len);
    if (rc)
        snprintf(err, errlen, "client-tokens-file %s: %s", path, ferr);
    return rc;
}

/* SIGHUP: certificates and keys read again; new connections get them, open ones keep theirs. */
void sl_reload_tls(const sl_options *o, sl_server *srv, sl_tls_slot *peer_tls, sl_logger *log)
{
    if ((!o->tls_cert[0] || !srv) && !peer_tls)
        return;
    sl_tls_ctx *ctx;
    char err[256];
    if (o->tls_cert[0] && srv) {
        if (sl_reload_read_server_tls(o, &ctx, err, sizeof err)) {
            sl_log_error(log, "reload of the TLS certificate failed, keeping the current one: %s",
                         err);
            return;
        }
        sl_server_set_tls(srv, ctx);
        sl_tls_ctx_unref(ctx);
    }
    if (peer_tls) {
        if (sl_reload_read_peer_tls(o, &ctx, err, sizeof err)) {
            sl_log_error(log, "reload of the peer TLS certificate failed, keeping the current "
                                  "one: %s", err);
            return;
        }
        sl_tls_slot_set(peer_tls, ctx);
        sl_tls_ctx_unref(ctx);
    }
    sl_log_info(log, "reload: TLS certificate and key read again");
}

/* A swapped-out identity set, freed once every worker has run a posted step: by then no call
 * that could have read it is still running (a worker runs one callback at a time). */
typedef struct idents_retire {
    sl_idents *old;
    _Atomic int left;
    _Atomic bool keep; /* a post failed on a live worker: never free (a leak beats a use after) */
} idents_retire;


static void idents_retire_step(void *ud)
{
    idents_retire *r = ud;
    if (atomic_fetch_sub(&r->left, 1) == 1) {
        if (!atomic_load(&r->keep))
            sl_idents_free(r->old);
        free(r);
    }
}

void sl_reload_idents(const sl_options *o, sl_idents **cur, sl_service *svc, sl_server *srv,
                      sl_logger *log)
{
    const char *path = o->client_tokens_file;
    if (!path[0] || !*cur || !svc || !srv)
        return;
    sl_idents *next;
    char err[512];
    if (sl_reload_read_idents(path, &next, err, sizeof err)) {
        sl_log_error(log, "reload of the client tokens file failed, keeping the current "
                              "identities: %s", err);
        return;
    }
    idents_retire *r = calloc(1, sizeof *r);
    if (!r) {
        sl_idents_free(next);
        sl_log_error(log, "reload of the client tokens file failed, keeping the current "
                              "identities: out of memory");
        return;
    }
    r->old = *cur;
    int workers = (int)o->workers;
    atomic_init(&r->left, workers + 1);
    atomic_init(&r->keep, false);
    sl_service_swap_idents(svc, next);
    *cur = next;
    for (int i = 0; i < workers; i++) {
        int rc = sl_server_post(srv, i, idents_retire_step, r);
        if (rc && rc != -ESHUTDOWN)
            atomic_store(&r->keep, true);
        if (rc)
            idents_retire_step(r);
    }
    idents_retire_step(r); /* this thread's share */
    sl_log_info(log, "reload: client identities read again count=%zu",
                sl_idents_count(next));
}

/* SIGHUP with a static list: read the options again (the --config file may list other peers;
 * flags and the environment win over it, as at start) and apply a changed list: the hand-off then
 * moves the keys whose owner changed (cluster/handoff.h). */
void sl_reload_peers(sl_options *opts, int argc, char **argv, sl_router *router, sl_logger *log)
{
    if (opts->discovery != SL_DISCOVERY_STATIC || !argv)
        return;
    sl_options o;
    memset(&o, 0, sizeof o);
    char err[256];
    int rc = sl_config_parse(&o, argc, argv, NULL, err, sizeof err);
    if (rc) {
        sl_log_error(log, "reload: options not read again, keeping the peer list: %s",
                     rc > 0 ? "unexpected --help or --version" : err);
    } else if (o.discovery != SL_DISCOVERY_STATIC) {
        sl_log_error(log, "reload: discovery changes need a restart; keeping the peer list");
    } else {
        bool same = o.peers.n == opts->peers.n;
        for (size_t i = 0; same && i < o.peers.n; i++)
            same = strcmp(o.peers.items[i], opts->peers.items[i]) == 0;
        if (same) {
            sl_log_info(log, "reload: peer list unchanged");
        } else {
            sl_router_set_peers(router, (const char *const *)o.peers.items, o.peers.n);
            sl_opt_list t = opts->peers;
            opts->peers = o.peers;
            o.peers = t;
            sl_log_info(log, "reload: peer list read again: %zu peers", opts->peers.n);
        }
    }
    sl_config_free(&o);
}

void sl_reload_peer_secret(const sl_options *o, sl_peersig *slot, sl_logger *log)
{
    if (!o->peer_secret_file[0] || !slot)
        return;
    sl_peersig_keys *k;
    char err[384];
    if (sl_peersig_keys_read(o->peer_secret_file, &k, err, sizeof err)) {
        sl_log_error(log, "reload of the peer secret failed, keeping the current one: %s", err);
        return;
    }
    sl_peersig_set(slot, k);
    sl_log_info(log, "reload: peer secret read again: %zu secret%s", sl_peersig_keys_count(k),
                sl_peersig_keys_count(k) == 1 ? "" : "s");
    sl_peersig_keys_unref(k);
}

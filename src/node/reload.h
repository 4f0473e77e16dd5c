/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a node reads from files at start and reads again on SIGHUP (sl_node_reload, node.c): the
 * client port's and the peer calls' TLS contexts (--tls-*, --peer-tls-*), the client identities
 * (--client-tokens-file) and, with a static list, the peer list from the options. A reload that
 * cannot read the new value keeps the current one and logs why; each reload logs its outcome.
 * New connections get new TLS contexts, open ones keep theirs; a swapped-out identity set is
 * freed once every worker has passed a posted step (no call can still read it).
 */
#ifndef SLUICE_NODE_RELOAD_H
#define SLUICE_NODE_RELOAD_H

#include <stddef.h>

#include "auth/idents.h"
#include "cluster/router.h"
#include "auth/peersig.h"
#include "config/config.h"
#include "runtime/log.h"
#include "net/server.h"
#include "tls/tls.h"
#include "node/service.h"

/* The readers, at start and on reload: 0, or a negative errno with the reason in err. */
/* The client port's context from --tls-cert/--tls-key/--tls-ca/--tls-client-auth (in a cluster
 * with --peer-tls-ca, also asking for and trusting peers' certificates). */
int sl_reload_read_server_tls(const sl_options *o, sl_tls_ctx **out, char *err, size_t errlen);
/* The peer calls' client context from --peer-tls-cert/--peer-tls-key/--peer-tls-ca. */
int sl_reload_read_peer_tls(const sl_options *o, sl_tls_ctx **out, char *err, size_t errlen);
/* --client-tokens-file at path into *out (the reason in err never holds a token). */
int sl_reload_read_idents(const char *path, sl_idents **out, char *err, size_t errlen);

/* SIGHUP: read the TLS files again into srv (and peer_tls, when not NULL). Nothing without
 * --tls-cert or a server. */
void sl_reload_tls(const sl_options *o, sl_server *srv, sl_tls_slot *peer_tls, sl_logger *log);
/* SIGHUP: --peer-secret-file read again into slot (nothing without one); a file that does not
 * read keeps the current secrets, logged. */
void sl_reload_peer_secret(const sl_options *o, sl_peersig *slot, sl_logger *log);
/* SIGHUP: read --client-tokens-file again and swap *cur for the new set in svc; the old set is
 * freed once every worker of srv has run a posted step. Nothing without a current set. */
void sl_reload_idents(const sl_options *o, sl_idents **cur, sl_service *svc, sl_server *srv,
                      sl_logger *log);
/* SIGHUP with a static list: parse argv again (the --config file may list other peers; flags
 * and the environment win, as at start) and give a changed list to router (the hand-off moves
 * the keys whose owner changed); opts->peers then holds it. */
void sl_reload_peers(sl_options *opts, int argc, char **argv, sl_router *router, sl_logger *log);

#endif

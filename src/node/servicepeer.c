/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Service: who may make a PeersV1 call (docs/cluster.md, "Peer authentication"). Issue 25: an
 * address is not a credential. The node resolves --peer-auth once (node/nodeparts.c) into one of
 *
 *   secret    the call carries SL_PEERSIG_HEADER (auth/peersig.h): an HMAC-SHA256 under the
 *             cluster secret over the path, a time, the sender's advertised address and the
 *             body's digest; a missing or wrong one is UNAUTHENTICATED, a time outside the skew
 *             window too, and a good one from a sender that is not in the peer list (for
 *             TransferKeys: nor in the previous one) is PERMISSION_DENIED;
 *   mtls      the connection's verified client certificate names the host of a member (the
 *             certificate's identity, DNS or IP subjectAltNames: sl_router_names_peer);
 *   address   (deprecated, and the loopback-only default) the source IP is a member's;
 *   insecure  anyone: the explicit opt-out, each call counted (sluice_peer_insecure_calls_total).
 *
 * Every refusal is counted by reason (sluice_peer_refused_total) and in sluice_peer_denied_total,
 * and logged through the per-request budget (sl_log_req). A call taken without a credential
 * (address, insecure) while client tokens are on is a client call: GetPeerRateLimits must carry a
 * known token whose prefixes hold every item (node/service.c), and UpdatePeerGlobals and
 * TransferKeys are refused, so the tokens cannot be bypassed through PeersV1.
 */
#include "node/service_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "auth/peersig.h"
#include "cluster/handoff.h"
#include "config/config.h"
#include "runtime/log.h"

static const char *const reason_names[SL_SVC_PEER_REFUSED_COUNT] = {
    "unauthenticated", "bad_signature", "skew", "not_member", "client_tokens",
    "too_many_globals", "too_many_keys", "expiry",
};

int sl_service_peer_metrics(sl_service *s)
{
    sl_metrics *m = s->cfg.metrics;
    sl_metrics_family *f;
    int rc = sl_metrics_counter_family(m, "sluice_peer_refused_total",
                                       "PeersV1 calls refused, by reason: no credential, a bad "
                                       "signature, a signature outside the skew window, a caller "
                                       "that is not a member, client tokens without a peer "
                                       "credential, or out-of-bound state (too many globals or "
                                       "keys, an expiry past the limit's duration).",
                                       "reason", &f);
    if (rc)
        return rc;
    for (int i = 0; i < SL_SVC_PEER_REFUSED_COUNT; i++) {
        const char *v[1] = {reason_names[i]};
        s->peer_refused[i] = sl_metrics_counter_get(f, v, 1);
    }
    rc = sl_metrics_counter_family(m, "sluice_peer_insecure_calls_total",
                                   "PeersV1 calls taken without a credential under "
                                   "--peer-auth insecure (the explicit opt-out).",
                                   "", &f);
    if (rc)
        return rc;
    s->peer_insecure = sl_metrics_counter_get(f, NULL, 0);
    return 0;
}

static void caller_text(const struct sockaddr *sa, char *out, size_t cap)
{
    snprintf(out, cap, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)cap);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)cap);
}

void sl_service_peer_refuse(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int method,
                            int reason, int code, const char *msg, int64_t t0)
{
    sl_metrics_counter_inc(s->peer_refused[reason]);
    if (reason <= SL_SVC_PEER_TOKENS)
        sl_metrics_counter_inc(s->peer_denied);
    char ip[INET6_ADDRSTRLEN + 1];
    caller_text(rq->peer, ip, sizeof ip);
    sl_log_req(s->cfg.log, SL_LOG_WARN, "peer call refused: method=%s reason=%s from=%s",
               sl_service_method_name(method), reason_names[reason], ip);
    sl_service_answer_error(s, ex, method, T_GRPC, code, msg, t0);
}

static bool member(sl_service *s, sl_exchange *ex, const char *addr, size_t len, bool former)
{
    char buf[SL_PEERSIG_MAX_SENDER + 1];
    if (len >= sizeof buf)
        return false;
    memcpy(buf, addr, len);
    buf[len] = '\0';
    return sl_router_has_member(s->cfg.router, sl_exchange_worker(ex), buf, former);
}

static bool admit_secret(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int method,
                         bool former, int64_t t0)
{
    const sl_http_header *h = sl_http_header_find(rq, SL_PEERSIG_HEADER);
    if (!h) {
        sl_service_peer_refuse(s, ex, rq, method, SL_SVC_PEER_UNAUTHENTICATED,
                               SL_GRPC_UNAUTHENTICATED,
                               "peer calls need the cluster secret's signature (" SL_PEERSIG_HEADER
                               ")", t0);
        return false;
    }
    sl_peersig_keys *k = sl_peersig_get(s->cfg.peersig);
    const char *snd = NULL;
    size_t sl = 0;
    sl_peersig_verdict v =
        sl_peersig_verify(k, h->value, h->value_len, rq->path, rq->path_len, rq->body,
                          rq->body_len, sl_exchange_now_ms(ex), s->cfg.peer_skew_ms, &snd, &sl);
    sl_peersig_keys_unref(k);
    if (v == SL_PEERSIG_SKEW) {
        sl_service_peer_refuse(s, ex, rq, method, SL_SVC_PEER_SKEW, SL_GRPC_UNAUTHENTICATED,
                               "peer signature outside the clock-skew window", t0);
        return false;
    }
    if (v != SL_PEERSIG_OK) {
        sl_service_peer_refuse(s, ex, rq, method, SL_SVC_PEER_BAD_SIGNATURE,
                               SL_GRPC_UNAUTHENTICATED, "bad peer signature", t0);
        return false;
    }
    if (!member(s, ex, snd, sl, former)) {
        sl_service_peer_refuse(s, ex, rq, method, SL_SVC_PEER_NOT_MEMBER,
                               SL_GRPC_PERMISSION_DENIED,
                               "the signing sender is not a member of the peer list", t0);
        return false;
    }
    return true;
}

bool sl_service_peer_admit(sl_service *s, sl_exchange *ex, const sl_http_request *rq, int method,
                           bool former, int64_t t0, bool *proven)
{
    *proven = false;
    int w = sl_exchange_worker(ex);
    switch (s->cfg.peer_auth) {
    case SL_PEER_AUTH_SECRET:
        return (*proven = admit_secret(s, ex, rq, method, former, t0));
    case SL_PEER_AUTH_MTLS: {
        const char *names = sl_exchange_peer_identity(ex);
        if (sl_router_names_peer(s->cfg.router, w, names, former))
            return (*proven = true);
        sl_service_peer_refuse(s, ex, rq, method,
                               names ? SL_SVC_PEER_NOT_MEMBER : SL_SVC_PEER_UNAUTHENTICATED,
                               SL_GRPC_PERMISSION_DENIED,
                               "PeersV1 is served to the members of the peer list only (a "
                               "verified certificate naming a peer)", t0);
        return false;
    }
    case SL_PEER_AUTH_INSECURE:
        sl_metrics_counter_inc(s->peer_insecure);
        return true;
    default: /* address (deprecated, the loopback-only default) */
        if (former ? sl_router_was_peer(s->cfg.router, w, rq->peer)
                   : sl_router_is_peer(s->cfg.router, w, rq->peer))
            return true;
        sl_service_peer_refuse(s, ex, rq, method, SL_SVC_PEER_NOT_MEMBER,
                               SL_GRPC_PERMISSION_DENIED,
                               "PeersV1 is served to the members of the peer list only", t0);
        return false;
    }
}

size_t sl_service_globals_out_of_bound(const sl_peerwire_global *g, size_t n, int64_t now)
{
    for (size_t i = 0; i < n; i++)
        if (g[i].resp.reset_time > sl_handoff_latest_expiry(now, g[i].duration))
            return i + 1;
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer views (see view.h): building one from a peer list (picker, self index, health slots, the
 * peers' IPs), reference counting, and the peer identity checks over a view's members.
 */
#include "cluster/view.h"

#include <errno.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

static void view_free(sl_view *v)
{
    sl_picker_free(v->picker);
    free(v->health);
    free(v->ips);
    free(v);
}

void sl_view_ref(sl_view *v)
{
    atomic_fetch_add(&v->refs, 1);
}

void sl_view_unref(sl_view *v)
{
    if (v && atomic_fetch_sub(&v->refs, 1) == 1)
        view_free(v);
}

static int view_add_ip(sl_view *v, const sl_addr_ip *ip)
{
    if (sl_grow(&v->ips, &v->capips, v->nips, 1, 8, 0))
        return -ENOMEM;
    v->ips[v->nips++] = *ip;
    return 0;
}

/* The IPs the peers' calls come from (PeersV1 callers are judged by them): a numeric address's
 * own, a name's as the resolver gives them now (at most 8; resolve false: names are left out,
 * for the worker-start view of this node alone, which must not block its loop). */
static int view_ips(sl_view *v, bool resolve)
{
    for (size_t i = 0; i < v->n; i++) {
        const char *a = sl_picker_addr(v->picker, i);
        sl_addr_ip ip;
        char host[256];
        if (!sl_addr_ip_of(a, &ip)) {
            if (view_add_ip(v, &ip))
                return -ENOMEM;
            continue;
        }
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        if (!resolve || sl_addr_host(a, host, sizeof host) || getaddrinfo(host, NULL, &hints, &res))
            continue;
        int k = 0, rc = 0;
        for (struct addrinfo *ai = res; ai && k < 8 && !rc; ai = ai->ai_next, k++)
            if (!sl_addr_ip_of_sockaddr(ai->ai_addr, &ip))
                rc = view_add_ip(v, &ip);
        freeaddrinfo(res);
        if (rc)
            return rc;
    }
    return 0;
}

sl_view *sl_view_new(int picker, unsigned replicas, const char *self_addr,
                     const char *const *addrs, size_t n, bool resolve)
{
    sl_view *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    atomic_init(&v->refs, 1);
    if (sl_picker_new(picker, replicas, addrs, n, &v->picker)) {
        free(v);
        return NULL;
    }
    v->n = sl_picker_count(v->picker);
    v->self = sl_picker_find(v->picker, self_addr);
    v->health = calloc(v->n ? v->n : 1, sizeof *v->health);
    if (!v->health || view_ips(v, resolve)) {
        view_free(v);
        return NULL;
    }
    return v;
}

bool sl_view_has_ip(const sl_view *v, const struct sockaddr *sa)
{
    sl_addr_ip ip;
    if (!v || !sa || sl_addr_ip_of_sockaddr(sa, &ip))
        return false;
    for (size_t i = 0; i < v->nips; i++)
        if (!memcmp(&ip, &v->ips[i], sizeof ip))
            return true;
    return false;
}

bool sl_view_names(const sl_view *v, const char *names)
{
    for (size_t i = 0; v && i < v->n; i++)
        if (sl_addr_names_host(names, sl_picker_addr(v->picker, i)))
            return true;
    return false;
}

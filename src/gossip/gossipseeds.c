/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gossipseeds: the observers registered in etcd as gossip seeds (see gossipseeds.h). The value's
 * JSON is parsed with jansson; only one member is read ("gossip" for seeds, "service" for a
 * client-proxy looking for observers).
 */
#include "gossip/gossipseeds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void sl_gossipseeds_etcd_config(const sl_options *o, sl_etcd_config *out)
{
    *out = (sl_etcd_config){
        .endpoints = (const char *const *)o->storage_addrs.items,
        .n_endpoints = o->storage_addrs.n,
        .request_timeout_ms = o->storage_timeout_ns / 1000000,
        .tls = {o->storage_tls_ca, o->storage_tls_cert, o->storage_tls_key},
    };
}

int sl_gossipseeds_parse(const char *json, size_t len, char *out, size_t outlen)
{
    return sl_gossipseeds_parse_field(json, len, "gossip", out, outlen);
}

int sl_gossipseeds_parse_field(const char *json, size_t len, const char *field, char *out,
                               size_t outlen)
{
    json_error_t jerr;
    json_t *v = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    const char *g = v ? json_string_value(json_object_get(v, field)) : NULL;
    size_t n = g ? strlen(g) : 0;
    int ok = g && n > 0 && n <= 64 && n < outlen;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)g[i] > 0x20 && (unsigned char)g[i] < 0x7f;
    if (ok)
        memcpy(out, g, n + 1);
    json_decref(v);
    return ok ? 0 : -EINVAL;
}

int sl_gossipseeds_from_etcd(const sl_etcd_config *ec, const char *prefix, char **seeds,
                             size_t *n, size_t max)
{
    return sl_gossipseeds_from_etcd_field(ec, prefix, "gossip", seeds, n, max);
}

int sl_gossipseeds_from_etcd_field(const sl_etcd_config *ec, const char *prefix,
                                   const char *field, char **seeds, size_t *n, size_t max)
{
    sl_etcd *e;
    int rc = sl_etcd_new(ec, &e);
    if (rc)
        return rc;
    char key[512];
    int kl = snprintf(key, sizeof key, "%s/observer/", prefix);
    if (kl < 0 || (size_t)kl >= sizeof key) {
        sl_etcd_free(e);
        return -EINVAL;
    }
    sl_etcd_kvs kvs = {0};
    rc = sl_etcd_range(e, key, (size_t)kl, true, SL_GOSSIPSEEDS_MAX, false, &kvs);
    sl_etcd_free(e);
    if (rc)
        return rc;
    int added = 0;
    for (size_t i = 0; i < kvs.n && *n < max; i++) {
        char addr[65];
        if (sl_gossipseeds_parse_field(kvs.kvs[i].value, kvs.kvs[i].value_len, field, addr,
                                       sizeof addr))
            continue;
        if (!(seeds[*n] = strdup(addr)))
            break;
        (*n)++;
        added++;
    }
    sl_etcd_kvs_free(&kvs);
    return added;
}

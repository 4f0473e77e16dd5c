/* SPDX-License-Identifier: Apache-2.0 */
/* The admin plane's browser checks: Host, Origin, Content-Type (see webguard.h). */
#include "auth/webguard.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "auth/addr.h"

bool sl_webguard_changes_state(const char *method)
{
    return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
           strcmp(method, "OPTIONS") != 0;
}

static bool eq_nocase(const char *a, size_t an, const char *b)
{
    return an == strlen(b) && strncasecmp(a, b, an) == 0;
}

/* Whether the bracket-less host text h[0..n) is an IP literal (v4, or v6 that came bracketed). */
static bool is_ip_literal(const char *h, size_t n)
{
    char buf[64];
    unsigned char bin[16];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, h, n);
    buf[n] = 0;
    return inet_pton(AF_INET, buf, bin) == 1 || inet_pton(AF_INET6, buf, bin) == 1;
}

/* Whether authority a[0..n) ("host[:port]", "[v6][:port]") names the listener l (TCP). */
static bool authority_ok(const sl_webguard_listener *l, const char *a, size_t n)
{
    char lhost[64];
    unsigned short lport;
    if (sl_addr_split(l->addr, lhost, sizeof lhost, &lport) || n == 0)
        return false;
    /* split the authority: host text (brackets removed) and the port (default by scheme) */
    const char *h = a, *port = NULL;
    size_t hn;
    if (a[0] == '[') {
        const char *rb = memchr(a, ']', n);
        if (!rb)
            return false;
        h = a + 1;
        hn = (size_t)(rb - h);
        size_t rest = n - (size_t)(rb + 1 - a);
        if (rest) {
            if (rb[1] != ':')
                return false;
            port = rb + 2;
        }
    } else {
        const char *colon = memchr(a, ':', n);
        hn = colon ? (size_t)(colon - a) : n;
        if (colon)
            port = colon + 1;
        if (memchr(a, '[', n) || memchr(a, ']', n))
            return false;
    }
    unsigned long p = l->tls ? 443 : 80;
    if (port) {
        size_t pn = n - (size_t)(port - a);
        if (pn == 0 || pn > 5)
            return false;
        p = 0;
        for (size_t i = 0; i < pn; i++) {
            if (port[i] < '0' || port[i] > '9')
                return false;
            p = p * 10 + (unsigned long)(port[i] - '0');
        }
    }
    if (p != lport || hn == 0)
        return false;
    if (eq_nocase(h, hn, lhost))
        return true;
    char hb[64];
    if (hn >= sizeof hb)
        return false;
    memcpy(hb, h, hn);
    hb[hn] = 0;
    /* the same IP spelled another way (e.g. "::1" vs "0:0:0:0:0:0:0:1") */
    sl_addr_ip want, got;
    char lh[80];
    snprintf(lh, sizeof lh, strchr(lhost, ':') ? "[%s]:1" : "%s:1", lhost);
    char hp[80];
    snprintf(hp, sizeof hp, memchr(h, ':', hn) ? "[%s]:1" : "%s:1", hb);
    bool ip = is_ip_literal(h, hn);
    if (ip && !sl_addr_ip_of(lh, &want) && !sl_addr_ip_of(hp, &got) &&
        !memcmp(&want, &got, sizeof want))
        return true;
    /* bound to every address: any IP literal (it cannot be re-pointed), never a name */
    bool wildcard = !strcmp(lhost, "0.0.0.0") || !strcmp(lhost, "::");
    /* "localhost" names this machine for every browser (it never asks DNS for it) */
    if ((wildcard || sl_addr_is_loopback(l->addr)) && eq_nocase(h, hn, "localhost"))
        return true;
    return wildcard && ip;
}

/* Whether origin o[0..n) is the listener's own: "<scheme>://<authority>" with nothing after. */
static bool origin_ok(const sl_webguard_listener *l, const char *o, size_t n)
{
    if (!l->addr)
        return false; /* a Unix socket serves no page: every origin is foreign */
    const char *scheme = l->tls ? "https://" : "http://";
    size_t sn = strlen(scheme);
    if (n <= sn || strncasecmp(o, scheme, sn) != 0)
        return false;
    const char *a = o + sn;
    size_t an = n - sn;
    if (memchr(a, '/', an) || memchr(a, '@', an) || memchr(a, '?', an) || memchr(a, '#', an))
        return false;
    return authority_ok(l, a, an);
}

/* Whether a Content-Type value is application/json, parameters allowed. */
static bool is_json(const char *v, size_t n)
{
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    static const char mt[] = "application/json";
    size_t ml = sizeof mt - 1;
    if (n < ml || strncasecmp(v, mt, ml) != 0)
        return false;
    v += ml, n -= ml;
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    return n == 0 || *v == ';';
}

static sl_webguard_verdict verdict(sl_webguard_verdict v, const char *reason, const char **why)
{
    if (why)
        *why = reason;
    return v;
}

sl_webguard_verdict sl_webguard_check(const sl_webguard_listener *l, const char *method,
                                      sl_webguard_value host, sl_webguard_value origin,
                                      sl_webguard_value content_type, const char **why)
{
    if (l->addr && (!host.p || !authority_ok(l, host.p, host.n)))
        return verdict(SL_WEBGUARD_BAD_HOST, "Host is not this admin listener's address", why);
    if (origin.p && !origin_ok(l, origin.p, origin.n))
        return verdict(SL_WEBGUARD_BAD_ORIGIN, "cross-origin admin calls are refused", why);
    if (sl_webguard_changes_state(method) && (!content_type.p || !is_json(content_type.p,
                                                                          content_type.n)))
        return verdict(SL_WEBGUARD_BAD_CONTENT_TYPE,
                       "a state-changing admin call needs Content-Type: application/json", why);
    return verdict(SL_WEBGUARD_OK, "", why);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Address checks (see addr.h): parse numeric hosts with inet_pton and compare raw IPs.
 */
#include "auth/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hostport.h"

int sl_addr_host(const char *addr, char *buf, size_t buflen)
{
    if (!addr || !buflen)
        return -EINVAL;
    const char *h = addr;
    size_t hl;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end)
            return -EINVAL;
        h = addr + 1;
        hl = (size_t)(end - h);
    } else {
        const char *colon = strchr(addr, ':');
        /* one colon: host:port; none: a bare host; more: a bare IPv6 literal */
        if (colon && !strchr(colon + 1, ':'))
            hl = (size_t)(colon - addr);
        else
            hl = strlen(addr);
    }
    if (hl == 0 || hl >= buflen)
        return -EINVAL;
    memcpy(buf, h, hl);
    buf[hl] = '\0';
    if (!strcmp(buf, "localhost"))
        snprintf(buf, buflen, "127.0.0.1");
    return 0;
}

int sl_addr_split(const char *addr, char *host, size_t hostlen, unsigned short *port)
{
    if (sl_hostport_parse(addr, true, host, hostlen, port, NULL, 0))
        return -EINVAL;
    if (!strcmp(host, "localhost"))
        snprintf(host, hostlen, "127.0.0.1");
    return 0;
}

/* name as an IP when it is an IP literal (no port, no brackets) or "localhost": 0 or -EINVAL. */
static int literal_ip(const char *name, sl_addr_ip *out)
{
    uint8_t *ip = out->b;
    struct in_addr a4;
    if (!strcmp(name, "localhost"))
        name = "127.0.0.1";
    if (inet_pton(AF_INET, name, &a4) == 1) {
        memset(ip, 0, 10);
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &a4, 4);
        return 0;
    }
    return inet_pton(AF_INET6, name, ip) == 1 ? 0 : -EINVAL;
}

int sl_addr_ip_of(const char *addr, sl_addr_ip *out)
{
    char host[INET6_ADDRSTRLEN + 8];
    if (sl_addr_host(addr, host, sizeof host))
        return -EINVAL;
    return literal_ip(host, out);
}

int sl_addr_ip_of_sockaddr(const struct sockaddr *sa, sl_addr_ip *out)
{
    uint8_t *ip = out->b;
    if (!sa)
        return -EINVAL;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        memset(ip, 0, 10);
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &s4->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    return -EINVAL;
}

bool sl_addr_is_loopback(const char *addr)
{
    static const uint8_t v6_lo[16] = {[15] = 1};
    sl_addr_ip a;
    if (sl_addr_ip_of(addr, &a))
        return false;
    const uint8_t *ip = a.b;
    if (!memcmp(ip, v6_lo, 16))
        return true;
    static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
    return !memcmp(ip, mapped, 12) && ip[12] == 127;
}

bool sl_addr_same_ip(const struct sockaddr *sa, const char *addr)
{
    sl_addr_ip a, b;
    return !sl_addr_ip_of_sockaddr(sa, &a) && !sl_addr_ip_of(addr, &b) && !memcmp(&a, &b, 16);
}

bool sl_addr_in_list(const struct sockaddr *sa, const char *const *addrs, size_t n)
{
    sl_addr_ip a, b;
    if (sl_addr_ip_of_sockaddr(sa, &a))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!sl_addr_ip_of(addrs[i], &b) && !memcmp(&a, &b, 16))
            return true;
    return false;
}

/* Length of a DNS name without one trailing dot. */
static size_t dns_len(const char *s)
{
    size_t n = strlen(s);
    return n > 1 && s[n - 1] == '.' ? n - 1 : n;
}

bool sl_addr_names_host(const char *names, const char *addr)
{
    char host[256];
    if (!names || sl_addr_host(addr, host, sizeof host))
        return false;
    sl_addr_ip hip, nip;
    bool host_is_ip = literal_ip(host, &hip) == 0;
    size_t hl = dns_len(host);
    int k = 0;
    for (const char *n = names; *n && k < 64; n += strlen(n) + 1, k++) {
        if (literal_ip(n, &nip) == 0) {
            if (host_is_ip && !memcmp(&hip, &nip, sizeof hip))
                return true;
        } else if (!host_is_ip && dns_len(n) == hl && !strncasecmp(n, host, hl)) {
            return true;
        }
    }
    return false;
}

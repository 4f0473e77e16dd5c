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
    if (!addr)
        return -EINVAL;
    const char *h = addr, *colon;
    size_t hl;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':')
            return -EINVAL;
        h = addr + 1;
        hl = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return -EINVAL;
        hl = (size_t)(colon - addr);
    }
    if (hl == 0 || hl >= hostlen)
        return -EINVAL;
    char *endp;
    long p = strtol(colon + 1, &endp, 10);
    if (*endp || p < 0 || p > 65535 || endp == colon + 1)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (!strcmp(host, "localhost"))
        snprintf(host, hostlen, "127.0.0.1");
    *port = (unsigned short)p;
    return 0;
}

int sl_addr_ip_of(const char *addr, sl_addr_ip *out)
{
    uint8_t *ip = out->b;
    char host[INET6_ADDRSTRLEN + 8];
    if (sl_addr_host(addr, host, sizeof host))
        return -EINVAL;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1) {
        memset(ip, 0, 10);
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &a4, 4);
        return 0;
    }
    return inet_pton(AF_INET6, host, ip) == 1 ? 0 : -EINVAL;
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

/* SPDX-License-Identifier: Apache-2.0 */
/* One host:port address's syntax, with the reason when it is wrong (see hostport.h). */
#include "base/hostport.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 4))) static int bad(char *why, size_t whylen, const char *fmt,
                                                     ...)
{
    if (why && whylen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

int sl_hostport_parse(const char *addr, bool allow_zero, char *host, size_t hostlen,
                      unsigned short *port, char *why, size_t whylen)
{
    if (!addr || !addr[0])
        return bad(why, whylen, "the address is empty (want host:port, e.g. 127.0.0.1:5454)");
    const char *h = addr, *colon;
    size_t hl;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end)
            return bad(why, whylen, "'%s' has no ']' after the IPv6 address", addr);
        if (end[1] != ':')
            return bad(why, whylen, "'%s' has no port (want [v6]:port, e.g. [::1]:5454)", addr);
        h = addr + 1;
        hl = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return bad(why, whylen, "'%s' has no port (want host:port, e.g. %s:5454)", addr,
                       addr);
        hl = (size_t)(colon - addr);
    }
    if (memchr(h, '[', hl) || memchr(h, ']', hl))
        return bad(why, whylen, "'%s': '[' and ']' only go around an IPv6 address ([v6]:port)",
                   addr);
    if (hl == 0)
        return bad(why, whylen, "'%s' has no host (want host:port, e.g. 127.0.0.1%s)", addr,
                   colon);
    if (hl >= hostlen)
        return bad(why, whylen, "the host of '%s' is longer than %zu bytes", addr, hostlen - 1);
    const char *p = colon + 1;
    if (!*p)
        return bad(why, whylen, "'%s' has an empty port", addr);
    uint32_t v = 0;
    for (const char *q = p; *q; q++) {
        if (*q < '0' || *q > '9')
            return bad(why, whylen, "port '%s' is not a number", p);
        if (v <= 65535)
            v = v * 10 + (uint32_t)(*q - '0');
    }
    if (v > 65535 || (v == 0 && !allow_zero))
        return bad(why, whylen, "port %s is out of range 1-65535", p);
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (unsigned short)v;
    return 0;
}

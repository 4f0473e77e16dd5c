/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sd_notify's datagram protocol (daemon/notify.h): the address from $NOTIFY_SOCKET's value (a path,
 * or '@' for the abstract namespace, where the name is the bytes after a leading NUL and the
 * address length says where it ends), one sendto() per state change, and the watchdog variables'
 * parsing. The socket is non-blocking: a manager that does not read must never stall sluiced.
 */
#include "daemon/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sl_notify_open(sl_notify *n, const char *socket_path)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    if (!socket_path || !socket_path[0])
        return 0;
    if (socket_path[0] != '/' && socket_path[0] != '@')
        return -EINVAL;
    size_t len = strlen(socket_path);
    if (len >= sizeof n->addr.sun_path || (socket_path[0] == '@' && len < 2))
        return len < 2 ? -EINVAL : -ENAMETOOLONG;
    n->addr.sun_family = AF_UNIX;
    memcpy(n->addr.sun_path, socket_path, len);
    if (socket_path[0] == '@') {
        n->addr.sun_path[0] = 0; /* abstract: no terminating NUL, the length delimits the name */
        n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    } else {
        n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    n->fd = fd;
    return 0;
}

int sl_notify_send(const sl_notify *n, const char *state)
{
    if (n->fd < 0)
        return 0;
    size_t len = strlen(state);
    if (len > SL_NOTIFY_MAX)
        return -EMSGSIZE;
    ssize_t w;
    do {
        w = sendto(n->fd, state, len, MSG_NOSIGNAL, (const struct sockaddr *)&n->addr, n->addrlen);
    } while (w < 0 && errno == EINTR);
    if (w < 0)
        return -errno;
    return (size_t)w == len ? 0 : -EIO;
}

void sl_notify_close(sl_notify *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

/* A positive decimal number that fits, or 0. */
static uint64_t parse_positive(const char *s)
{
    if (!s || *s < '0' || *s > '9')
        return 0;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return 0;
    return (uint64_t)v;
}

uint64_t sl_notify_watchdog_usec(const char *usec, const char *pid, long self)
{
    if (pid && (uint64_t)self != parse_positive(pid))
        return 0;
    return parse_positive(usec);
}

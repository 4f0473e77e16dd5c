/* SPDX-License-Identifier: Apache-2.0 */
/* The accepting end of a worker: socket, accept loop, pause at the file limit (see listener.h). */
#define _GNU_SOURCE /* accept4 */
#include "net/listener.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Connections accepted per readiness event, and the retry delays after EMFILE/ENFILE. */
#define ACCEPT_BATCH 64
#define ACCEPT_RETRY_MIN_MS 10
#define ACCEPT_RETRY_MAX_MS 1000

int sl_listener_socket(const struct sockaddr *sa, socklen_t len, int backlog)
{
    return sl_listener_socket_ex(sa, len, backlog, true);
}

int sl_listener_socket_ex(const struct sockaddr *sa, socklen_t len, int backlog, bool reuseport)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one)) ||
        bind(fd, sa, len) || listen(fd, backlog)) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

/* Whether a listening socket answers at path (a live server) rather than a file left behind. */
static bool unix_alive(const struct sockaddr_un *un)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int rc;
    do
        rc = connect(fd, (const struct sockaddr *)un, sizeof *un);
    while (rc < 0 && errno == EINTR);
    bool alive = rc == 0 || (errno != ECONNREFUSED && errno != ENOENT);
    close(fd);
    return alive;
}

int sl_listener_unix_socket(const char *path, int backlog)
{
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    if (!path || !path[0] || strlen(path) >= sizeof un.sun_path)
        return -ENAMETOOLONG;
    memcpy(un.sun_path, path, strlen(path) + 1);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode))
            return -EEXIST; /* never remove what is not a socket */
        if (unix_alive(&un))
            return -EADDRINUSE;
        if (unlink(path) && errno != ENOENT)
            return -errno;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* chmod between bind and listen: until listen, a connect is refused, so no one gets in
     * through the umask's mode */
    if (bind(fd, (const struct sockaddr *)&un, sizeof un)) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (chmod(path, 0600) || listen(fd, backlog)) {
        int e = -errno;
        unlink(path);
        close(fd);
        return e;
    }
    return fd;
}

int sl_listener_probe_free(const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, rc = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) || bind(fd, sa, len))
        rc = -errno;
    close(fd);
    return rc;
}

static void on_listen(uv_poll_t *p, int status, int events);

static void on_retry(uv_timer_t *t)
{
    sl_listener *l = t->data;
    if (!l->stopped)
        uv_poll_start(&l->poll, UV_READABLE, on_listen);
}

/* Out of file descriptors: stop watching the listener (the kernel keeps new connections in its
 * backlog) and look again later, backing off while the limit holds. */
static void pause_accept(sl_listener *l)
{
    uv_poll_stop(&l->poll);
    sl_net_stat_add(l->ctx, SL_NET_ACCEPT_PAUSES, 1);
    uint32_t b = l->backoff_ms;
    b = b ? (b * 2 > ACCEPT_RETRY_MAX_MS ? ACCEPT_RETRY_MAX_MS : b * 2) : ACCEPT_RETRY_MIN_MS;
    l->backoff_ms = b;
    uv_timer_start(&l->retry, on_retry, b, 0);
}

static void on_listen(uv_poll_t *p, int status, int events)
{
    (void)events;
    sl_listener *l = p->data;
    if (status < 0 || l->stopped)
        return;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_accept(l);
            return; /* EAGAIN: all taken */
        }
        l->backoff_ms = 0;
        l->on_accept(l->ud, fd);
    }
}

int sl_listener_init(sl_listener *l, uv_loop_t *loop, int fd, sl_http_ctx *ctx,
                     sl_listener_accept_cb on_accept, void *ud)
{
    l->fd = fd;
    l->ctx = ctx;
    l->on_accept = on_accept;
    l->ud = ud;
    l->backoff_ms = 0;
    l->stopped = false;
    int rc = uv_poll_init(loop, &l->poll, fd);
    if (rc)
        return rc;
    l->poll.data = l;
    uv_timer_init(loop, &l->retry);
    l->retry.data = l;
    return 0;
}

int sl_listener_start(sl_listener *l)
{
    return uv_poll_start(&l->poll, UV_READABLE, on_listen);
}

static void on_poll_closed(uv_handle_t *h)
{
    sl_listener_release_fd(h->data);
}

void sl_listener_stop(sl_listener *l)
{
    l->stopped = true;
    uv_timer_stop(&l->retry);
    uv_close((uv_handle_t *)&l->poll, on_poll_closed);
}

void sl_listener_close_timer(sl_listener *l)
{
    uv_close((uv_handle_t *)&l->retry, NULL);
}

void sl_listener_close_handles(sl_listener *l)
{
    if (!uv_is_closing((uv_handle_t *)&l->poll))
        uv_close((uv_handle_t *)&l->poll, NULL);
    if (!uv_is_closing((uv_handle_t *)&l->retry))
        uv_close((uv_handle_t *)&l->retry, NULL);
}

void sl_listener_release_fd(sl_listener *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

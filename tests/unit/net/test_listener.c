/* SPDX-License-Identifier: Apache-2.0 */
/* sl_listener: the socket (a taken port is seen as taken), accepting on a loop, and the stop that
 * closes the socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/listener.h"

static struct sockaddr_in loopback(uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return a;
}

static uint16_t port_of(int fd)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    return ntohs(a.sin_port);
}

static void test_socket_and_probe(void **state)
{
    (void)state;
    struct sockaddr_in a = loopback(0);
    int fd = sl_listener_socket((struct sockaddr *)&a, sizeof a, 16);
    assert_true(fd >= 0);
    uint16_t port = port_of(fd);
    assert_true(port > 0);
    struct sockaddr_in taken = loopback(port);
    /* a plain bind sees the port taken, although SO_REUSEPORT would let another listener join */
    assert_int_equal(sl_listener_probe_free((struct sockaddr *)&taken, sizeof taken), -EADDRINUSE);
    int fd2 = sl_listener_socket((struct sockaddr *)&taken, sizeof taken, 16);
    assert_true(fd2 >= 0);
    close(fd2);
    close(fd);
    assert_int_equal(sl_listener_probe_free((struct sockaddr *)&taken, sizeof taken), 0);
}

typedef struct accepted {
    sl_listener *l;
    int fds[4];
    int n;
} accepted;

static void on_accept(void *ud, int fd)
{
    accepted *a = ud;
    assert_true(a->n < 4);
    a->fds[a->n++] = fd;
    if (a->n == 2)
        sl_listener_stop(a->l); /* closes the poll handle, then the socket */
}

static void test_accept_then_stop(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct sockaddr_in a = loopback(0);
    int fd = sl_listener_socket((struct sockaddr *)&a, sizeof a, 16);
    assert_true(fd >= 0);
    struct sockaddr_in to = loopback(port_of(fd));
    sl_http_limits lim;
    sl_http_limits_defaults(&lim);
    sl_http_ctx *ctx = sl_http_ctx_new(&lim, NULL, NULL);
    assert_non_null(ctx);
    sl_listener l;
    accepted acc = {.l = &l};
    assert_int_equal(sl_listener_init(&l, &loop, fd, ctx, on_accept, &acc), 0);
    assert_int_equal(sl_listener_start(&l), 0);
    int cl[2];
    for (int i = 0; i < 2; i++) {
        cl[i] = socket(AF_INET, SOCK_STREAM, 0);
        assert_int_equal(connect(cl[i], (struct sockaddr *)&to, sizeof to), 0);
    }
    /* the listener's handles are the loop's only active ones until the stop closes the poll */
    while (acc.n < 2)
        uv_run(&loop, UV_RUN_ONCE);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(l.fd, -1);
    for (int i = 0; i < acc.n; i++) {
        int fl = 0;
        socklen_t fl_len = sizeof fl;
        assert_int_equal(getsockopt(acc.fds[i], SOL_SOCKET, SO_TYPE, &fl, &fl_len), 0);
        assert_int_equal(fl, SOCK_STREAM);
        close(acc.fds[i]);
    }
    sl_listener_close_timer(&l);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    close(cl[0]);
    close(cl[1]);
    /* the port is free again: the stop closed the listening socket */
    assert_int_equal(sl_listener_probe_free((struct sockaddr *)&to, sizeof to), 0);
    sl_http_ctx_free(ctx);
}

/* A Unix socket: mode 0600, a live one is taken, a stale one replaced, a file never removed. */
static void test_unix_socket(void **state)
{
    (void)state;
    char dir[] = "/tmp/sl_test_listener.XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/admin.sock", dir);
    int fd = sl_listener_unix_socket(path, 16);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    /* someone listens there: taken, and left alone */
    assert_int_equal(sl_listener_unix_socket(path, 16), -EADDRINUSE);
    assert_int_equal(lstat(path, &st), 0);
    /* the listener gone, its file left behind: replaced */
    close(fd);
    fd = sl_listener_unix_socket(path, 16);
    assert_true(fd >= 0);
    close(fd);
    unlink(path);
    /* a regular file in the way: refused, not removed */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(sl_listener_unix_socket(path, 16), -EEXIST);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    unlink(path);
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    assert_int_equal(sl_listener_unix_socket(longp, 16), -ENAMETOOLONG);
    rmdir(dir);
}

/* Without SO_REUSEPORT no other socket joins the port, even one that asks for it. */
static void test_exclusive(void **state)
{
    (void)state;
    struct sockaddr_in a = loopback(0);
    int fd = sl_listener_socket_ex((struct sockaddr *)&a, sizeof a, 16, false);
    assert_true(fd >= 0);
    struct sockaddr_in taken = loopback(port_of(fd));
    assert_int_equal(sl_listener_socket((struct sockaddr *)&taken, sizeof taken, 16), -EADDRINUSE);
    assert_int_equal(sl_listener_socket_ex((struct sockaddr *)&taken, sizeof taken, 16, false),
                     -EADDRINUSE);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_socket_and_probe),
        cmocka_unit_test(test_accept_then_stop),
        cmocka_unit_test(test_unix_socket),
        cmocka_unit_test(test_exclusive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP/2 clients' socket calls (h2client/h2sock.h) on real sockets: a connect that completes and
 * one that is refused, the session's frames written out and read back, a peer that closes, and
 * writes to a peer that hung up with SIGPIPE left at its default action (a SIGPIPE reaching the
 * process would end this test).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "h2client/h2sock.h"

#define WAIT_MS 5000

static int listener(struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    *sin = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    assert_int_equal(bind(fd, (struct sockaddr *)sin, sizeof *sin), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t len = sizeof *sin;
    assert_int_equal(getsockname(fd, (struct sockaddr *)sin, &len), 0);
    return fd;
}

/* Wait for writability, then ask how the connect went. */
static int connect_outcome(int fd, bool now)
{
    if (now)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    return sl_h2sock_connect_result(fd);
}

static void on_done(void *ud, const sl_h2c_resp *r)
{
    int *err = ud;
    *err = r->err;
}

static void test_connect(void **state)
{
    (void)state;
    struct sockaddr_in sin;
    int lfd = listener(&sin);
    bool now;
    int fd = sl_h2sock_connect((struct sockaddr *)&sin, sizeof sin, &now);
    assert_true(fd >= 0);
    assert_int_equal(connect_outcome(fd, now), 0);
    close(fd);
    close(lfd); /* the port is free again: connecting now is refused */
    fd = sl_h2sock_connect((struct sockaddr *)&sin, sizeof sin, &now);
    if (fd >= 0) {
        assert_int_equal(connect_outcome(fd, now), -ECONNREFUSED);
        close(fd);
    } else {
        assert_int_equal(fd, -ECONNREFUSED);
    }
}

/* connect_from: the connection leaves from the given source IP (how a peer client shows its
 * advertised IP); a source that is not local leaves the choice to the kernel. */
static void test_connect_from(void **state)
{
    (void)state;
    struct sockaddr_in sin;
    int lfd = listener(&sin);
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002)};
    bool now;
    int fd = sl_h2sock_connect_from((struct sockaddr *)&sin, sizeof sin, (struct sockaddr *)&src,
                                    sizeof src, &now);
    assert_true(fd >= 0);
    assert_int_equal(connect_outcome(fd, now), 0);
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    int afd = accept(lfd, (struct sockaddr *)&from, &len);
    assert_true(afd >= 0);
    assert_int_equal(ntohl(from.sin_addr.s_addr), 0x7f000002);
    close(afd);
    close(fd);
    /* 192.0.2.1 (TEST-NET-1) is not local: no bind, the kernel picks 127.0.0.1 */
    src.sin_addr.s_addr = htonl(0xc0000201);
    fd = sl_h2sock_connect_from((struct sockaddr *)&sin, sizeof sin, (struct sockaddr *)&src,
                                sizeof src, &now);
    assert_true(fd >= 0);
    assert_int_equal(connect_outcome(fd, now), 0);
    len = sizeof from;
    afd = accept(lfd, (struct sockaddr *)&from, &len);
    assert_true(afd >= 0);
    assert_int_equal(ntohl(from.sin_addr.s_addr), 0x7f000001);
    close(afd);
    close(fd);
    close(lfd);
}

static void test_write_then_read_back(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    sl_h2c *c;
    assert_int_equal(sl_h2c_new(NULL, &c), 0);
    sl_buf out;
    sl_buf_init(&out, 0);
    assert_int_equal(sl_h2sock_write(c, sv[0], &out, 1 << 16), 0);
    assert_int_equal(out.len, 0); /* the socket took everything */
    char got[64];
    ssize_t n = recv(sv[1], got, sizeof got, 0);
    assert_true(n >= 24);
    assert_memory_equal(got, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    /* nothing to read yet, then the peer closes */
    uint8_t buf[256];
    assert_int_equal(sl_h2sock_read(c, sv[0], buf, sizeof buf, 4), 0);
    close(sv[1]);
    assert_int_equal(sl_h2sock_read(c, sv[0], buf, sizeof buf, 4), -ECONNRESET);
    sl_h2c_free(c, -ECANCELED);
    sl_buf_free(&out);
    close(sv[0]);
}

static void test_write_to_hung_up_peer_is_epipe(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_DFL);
    struct sockaddr_in sin;
    int lfd = listener(&sin);
    bool now;
    int fd = sl_h2sock_connect((struct sockaddr *)&sin, sizeof sin, &now);
    assert_true(fd >= 0);
    assert_int_equal(connect_outcome(fd, now), 0);
    int afd = accept(lfd, NULL, NULL);
    assert_true(afd >= 0);
    close(afd); /* the server hangs up */
    close(lfd);

    sl_h2c *c;
    assert_int_equal(sl_h2c_new(NULL, &c), 0);
    int err = 1;
    sl_h2c_req req = {.method = "GET", .authority = "a", .path = "/", .deadline = INT64_MAX};
    assert_int_equal(sl_h2c_submit(c, &req, on_done, &err), 0);
    sl_buf out;
    sl_buf_init(&out, 0);
    /* the first write may still be taken (the reset comes back after it); the ones after it
     * fail, and a plain write(2) here would have raised SIGPIPE and ended the process */
    int rc = 0;
    for (int i = 0; i < 50 && rc == 0; i++) {
        if (out.len == 0)
            assert_int_equal(sl_buf_append(&out, "more bytes", 10), 0);
        rc = sl_h2sock_write(c, fd, &out, 1 << 16);
        if (rc == 0) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            poll(&p, 1, 100); /* let the reset arrive */
        }
    }
    assert_true(rc == -EPIPE || rc == -ECONNRESET);
    rc = sl_h2sock_write(c, fd, &out, 1 << 16);
    assert_int_equal(rc, -EPIPE);
    struct sigaction sa;
    assert_int_equal(sigaction(SIGPIPE, NULL, &sa), 0);
    assert_ptr_equal(sa.sa_handler, SIG_DFL); /* and still alive */
    sl_h2c_free(c, -ECONNRESET);
    assert_int_equal(err, -ECONNRESET);
    sl_buf_free(&out);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect),
        cmocka_unit_test(test_connect_from),
        cmocka_unit_test(test_write_then_read_back),
        cmocka_unit_test(test_write_to_hung_up_peer_is_epipe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

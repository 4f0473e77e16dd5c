/* SPDX-License-Identifier: Apache-2.0 */
/* daemon/notify: the sd_notify datagrams arrive, whole and one per state, at a real AF_UNIX datagram
 * socket bound at a file path and in the abstract namespace; the addresses and watchdog variables
 * that are refused. The receiving socket is blocking: each send is read back with no wait. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/notify.h"

/* A datagram socket bound at name ("/path" or "@abstract"), as the service manager binds it. */
static int bind_dgram(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(a.sun_path, name, len);
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    if (name[0] == '@') {
        a.sun_path[0] = 0;
        alen--;
    }
    assert_int_equal(bind(fd, (struct sockaddr *)&a, alen), 0);
    return fd;
}

static void expect_datagram(int fd, const char *want)
{
    char buf[SL_NOTIFY_MAX + 16];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    assert_int_equal(n, (ssize_t)strlen(want));
    buf[n] = 0;
    assert_string_equal(buf, want);
}

static void test_path_socket_gets_each_state(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/sl-notify-%ld.sock", (long)getpid());
    unlink(path);
    int srv = bind_dgram(path);
    sl_notify n;
    assert_int_equal(sl_notify_open(&n, path), 0);
    assert_true(n.fd >= 0);
    assert_int_equal(sl_notify_send(&n, "READY=1\nSTATUS=serving"), 0);
    assert_int_equal(sl_notify_send(&n, "WATCHDOG=1"), 0);
    assert_int_equal(sl_notify_send(&n, "STOPPING=1"), 0);
    expect_datagram(srv, "READY=1\nSTATUS=serving");
    expect_datagram(srv, "WATCHDOG=1");
    expect_datagram(srv, "STOPPING=1");
    sl_notify_close(&n);
    assert_int_equal(n.fd, -1);
    sl_notify_close(&n); /* twice: a no-op */
    close(srv);
    unlink(path);
}

static void test_abstract_socket(void **state)
{
    (void)state;
    char name[64];
    snprintf(name, sizeof name, "@sl-notify-test-%ld", (long)getpid());
    int srv = bind_dgram(name);
    sl_notify n;
    assert_int_equal(sl_notify_open(&n, name), 0);
    assert_int_equal(sl_notify_send(&n, "RELOADING=1\nMONOTONIC_USEC=42"), 0);
    assert_int_equal(sl_notify_send(&n, "READY=1"), 0);
    expect_datagram(srv, "RELOADING=1\nMONOTONIC_USEC=42");
    expect_datagram(srv, "READY=1");
    sl_notify_close(&n);
    close(srv);
}

static void test_no_socket_is_a_noop(void **state)
{
    (void)state;
    sl_notify n;
    assert_int_equal(sl_notify_open(&n, NULL), 0);
    assert_int_equal(n.fd, -1);
    assert_int_equal(sl_notify_send(&n, "READY=1"), 0);
    assert_int_equal(sl_notify_open(&n, ""), 0);
    assert_int_equal(sl_notify_send(&n, "READY=1"), 0);
    sl_notify_close(&n);
}

static void test_bad_addresses(void **state)
{
    (void)state;
    sl_notify n;
    assert_int_equal(sl_notify_open(&n, "relative/path"), -EINVAL);
    assert_int_equal(n.fd, -1);
    assert_int_equal(sl_notify_open(&n, "@"), -EINVAL);
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = 0;
    assert_int_equal(sl_notify_open(&n, longp), -ENAMETOOLONG);
    assert_int_equal(n.fd, -1);
}

static void test_send_errors(void **state)
{
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/sl-notify-gone-%ld.sock", (long)getpid());
    unlink(path);
    sl_notify n;
    assert_int_equal(sl_notify_open(&n, path), 0); /* nobody listens there */
    assert_int_equal(sl_notify_send(&n, "READY=1"), -ENOENT);
    char *big = malloc(SL_NOTIFY_MAX + 2);
    memset(big, 'x', SL_NOTIFY_MAX + 1);
    big[SL_NOTIFY_MAX + 1] = 0;
    assert_int_equal(sl_notify_send(&n, big), -EMSGSIZE);
    free(big);
    sl_notify_close(&n);
}

static void test_watchdog_variables(void **state)
{
    (void)state;
    assert_int_equal(sl_notify_watchdog_usec(NULL, NULL, 10), 0);
    assert_int_equal(sl_notify_watchdog_usec("3000000", NULL, 10), 3000000);
    assert_int_equal(sl_notify_watchdog_usec("3000000", "10", 10), 3000000);
    assert_int_equal(sl_notify_watchdog_usec("3000000", "11", 10), 0); /* another process's */
    assert_int_equal(sl_notify_watchdog_usec("0", NULL, 10), 0);
    assert_int_equal(sl_notify_watchdog_usec("-5", NULL, 10), 0);
    assert_int_equal(sl_notify_watchdog_usec("12x", NULL, 10), 0);
    assert_int_equal(sl_notify_watchdog_usec("", NULL, 10), 0);
    assert_int_equal(sl_notify_watchdog_usec("99999999999999999999999", NULL, 10), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_socket_gets_each_state),
        cmocka_unit_test(test_abstract_socket),
        cmocka_unit_test(test_no_socket_is_a_noop),
        cmocka_unit_test(test_bad_addresses),
        cmocka_unit_test(test_send_errors),
        cmocka_unit_test(test_watchdog_variables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

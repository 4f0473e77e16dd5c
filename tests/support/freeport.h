/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A loopback TCP port nothing listens on right now, for the unit tests that start a real server
 * (etcdproc.h, tests/unit/redis/redisproc.h). Header-only; include after <cmocka.h>.
 */
#ifndef SLUICE_TESTS_FREEPORT_H
#define SLUICE_TESTS_FREEPORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int sl_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    close(fd);
    return ntohs(a.sin_port);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A real redis-server for the store's unit tests: a free loopback port, fork + exec of
 * redis-server with no persistence (killed with the test process: PR_SET_PDEATHSIG), a readiness
 * poll, stop, pause (SIGSTOP: a server that accepts and never answers) and resume; with `cluster`,
 * a Redis Cluster node (its config file under /tmp, named by its port; its bus on port + 10000,
 * so the port is chosen below 55536); `extra` adds arguments (e.g. a TLS port). Header-only;
 * include after <cmocka.h>. A test without redis-server installed skips (tests/support/skip.h).
 */
#ifndef SLUICE_TESTS_REDISPROC_H
#define SLUICE_TESTS_REDISPROC_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../support/freeport.h"
#include "sluice/clock.h"

#define SL_TEST_REDIS_BIN "/usr/bin/redis-server"

typedef struct sl_test_redis {
    pid_t pid; /* 0: not running */
    int port;
    int replica_of; /* a port: start as a replica of 127.0.0.1:<it>; 0 = a master */
    bool cluster;   /* --cluster-enabled yes */
    const char *const *extra; /* more arguments for redis-server, NULL-terminated; may be NULL */
    char addr[32]; /* 127.0.0.1:<port> */
} sl_test_redis;

static inline bool sl_test_redis_installed(void)
{
    return access(SL_TEST_REDIS_BIN, X_OK) == 0;
}

static inline bool sl_test_redis_answers(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        char buf[16] = {0};
        ok = write(fd, "PING\r\n", 6) == 6 && read(fd, buf, sizeof buf - 1) > 0 &&
             strncmp(buf, "+PONG", 5) == 0;
    }
    close(fd);
    return ok;
}

/* Start redis-server on p->port (chosen on the first start, kept for a restart) and wait until it
 * answers PING (at most 10 s). 0 or -1. */
static inline int sl_test_redis_start(sl_test_redis *p)
{
    if (!p->port) {
        do
            p->port = sl_test_free_port();
        while (p->cluster && p->port > 55535);
        snprintf(p->addr, sizeof p->addr, "127.0.0.1:%d", p->port);
    }
    char port[16];
    snprintf(port, sizeof port, "%d", p->port);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        char master[16];
        snprintf(master, sizeof master, "%d", p->replica_of);
        char conf[64];
        snprintf(conf, sizeof conf, "/tmp/sl-test-redis-nodes-%d.conf", p->port);
        unlink(conf);
        const char *argv[48] = {SL_TEST_REDIS_BIN, "--port", port, "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no"};
        int n = 9;
        if (p->cluster) {
            const char *more[] = {"--cluster-enabled", "yes", "--cluster-config-file", conf,
                                  "--cluster-node-timeout", "1000"};
            for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
                argv[n++] = more[i];
        } else if (p->replica_of) {
            argv[n++] = "--replicaof";
            argv[n++] = "127.0.0.1";
            argv[n++] = master;
        }
        for (int i = 0; p->extra && p->extra[i] && n < 47; i++)
            argv[n++] = p->extra[i];
        argv[n] = NULL;
        execv(SL_TEST_REDIS_BIN, (char *const *)argv);
        _exit(127);
    }
    p->pid = pid;
    int64_t deadline = sl_mono_ns() / 1000000 + 10000;
    while (!sl_test_redis_answers(p->port)) {
        if (sl_mono_ns() / 1000000 > deadline)
            return -1;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static inline void sl_test_redis_stop(sl_test_redis *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGCONT);
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
        if (p->cluster) {
            char conf[64];
            snprintf(conf, sizeof conf, "/tmp/sl-test-redis-nodes-%d.conf", p->port);
            unlink(conf);
        }
    }
    p->pid = 0;
}

static inline void sl_test_redis_pause(sl_test_redis *p, bool pause)
{
    kill(p->pid, pause ? SIGSTOP : SIGCONT);
}

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A real etcd for the unit tests that need one (config/test_etcd.c, config/test_killswitch.c):
 * free loopback ports, a temporary data directory, fork + exec of /usr/bin/etcd (killed with the
 * test process: PR_SET_PDEATHSIG), a readiness poll through sl_etcd, stop and cleanup. Its output
 * goes to <dir>.log, removed by sl_test_etcd_cleanup. Header-only (static inline, like skip.h);
 * include after <cmocka.h>. Links what config tests link (sl_etcd).
 */
#ifndef SLUICE_TESTS_ETCDPROC_H
#define SLUICE_TESTS_ETCDPROC_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctlplane/etcd.h"
#include "freeport.h"
#include "sluice/clock.h"

#define SL_TEST_ETCD_BIN "/usr/bin/etcd"

typedef struct sl_test_etcd {
    pid_t pid;           /* 0: not running */
    int client_port, peer_port;
    char dir[64];        /* data directory; "" before sl_test_etcd_init */
    char url[64];        /* http://127.0.0.1:<client_port> */
} sl_test_etcd;


static inline bool sl_test_etcd_installed(void)
{
    return access(SL_TEST_ETCD_BIN, X_OK) == 0;
}

/* Data directory from a mkdtemp template (e.g. "/tmp/sluice-etcd-XXXXXX"), ports and url.
 * 0, or -1 when the directory cannot be made. */
static inline int sl_test_etcd_init(sl_test_etcd *p, const char *dir_template)
{
    snprintf(p->dir, sizeof p->dir, "%s", dir_template);
    if (!mkdtemp(p->dir)) {
        p->dir[0] = '\0';
        return -1;
    }
    p->client_port = sl_test_free_port();
    p->peer_port = sl_test_free_port();
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%d", p->client_port);
    return 0;
}

/* Fork and exec etcd on p's ports and directory. 0, or -1 when fork fails. */
static inline int sl_test_etcd_start(sl_test_etcd *p)
{
    char client[64], peer[64], cluster[96], logpath[96];
    snprintf(client, sizeof client, "http://127.0.0.1:%d", p->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", p->peer_port);
    snprintf(cluster, sizeof cluster, "default=%s", peer);
    snprintf(logpath, sizeof logpath, "%s.log", p->dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(SL_TEST_ETCD_BIN, SL_TEST_ETCD_BIN, "--data-dir", p->dir, "--listen-client-urls",
              client, "--advertise-client-urls", client, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, (char *)NULL);
        _exit(127);
    }
    p->pid = pid;
    return 0;
}

/* Poll until etcd answers a range (it takes a second or two to elect itself leader), at most
 * timeout_ms. 0, or the last sl_etcd_range error. */
static inline int sl_test_etcd_wait_ready(const sl_test_etcd *p, int64_t timeout_ms)
{
    const char *eps[] = {p->url};
    sl_etcd_config cfg = {.endpoints = eps, .n_endpoints = 1, .connect_timeout_ms = 500,
                          .request_timeout_ms = 2000};
    sl_etcd *e = NULL;
    int rc = sl_etcd_new(&cfg, &e);
    if (rc != 0)
        return rc;
    int64_t deadline = sl_mono_ns() / 1000000 + timeout_ms;
    sl_etcd_kvs kvs;
    while ((rc = sl_etcd_range(e, "ready", 5, false, 0, false, &kvs)) != 0) {
        if (sl_mono_ns() / 1000000 > deadline)
            break;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc == 0)
        sl_etcd_kvs_free(&kvs);
    sl_etcd_free(e);
    return rc;
}

/* Stop etcd with sig and reap it; a no-op when it is not running. */
static inline void sl_test_etcd_stop(sl_test_etcd *p, int sig)
{
    if (p->pid <= 0)
        return;
    kill(p->pid, sig);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
}

static inline int sl_test_etcd_rm_entry(const char *path, const struct stat *sb, int flag,
                                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Remove the data directory and the log (after sl_test_etcd_stop). */
static inline void sl_test_etcd_cleanup(sl_test_etcd *p)
{
    if (!p->dir[0])
        return;
    nftw(p->dir, sl_test_etcd_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    char logpath[96];
    snprintf(logpath, sizeof logpath, "%s.log", p->dir);
    unlink(logpath);
}

#endif

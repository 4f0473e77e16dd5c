/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sluiced: the sluice daemon. A thin main over the embeddable node (include/sluice/node.h):
 * parse options (file < environment < flags), start the node, then wait for signals on this
 * thread. A start-up error is one log line (runtime/log.h, before anything is logged as
 * listening) and exit 2; --check-config reports every problem of the options and the files a start
 * would read (node/startcheck.h) and exits 0 or 2; --print-config prints the effective options
 * with the origin of each — SIGHUP reloads, SIGINT/SIGTERM drain gracefully (stop accepting, finish in-flight
 * calls) within --shutdown-timeout and exit 0.
 *
 * Signals are blocked before any thread starts, so every worker inherits the mask and only this
 * thread's sigtimedwait() receives them: no async-signal-safety concerns in the handlers.
 *
 * Core dumps are off unless --allow-core-dumps (set_dumpable: PR_SET_DUMPABLE 0).
 *
 * Under systemd (Type=notify, $NOTIFY_SOCKET set) it tells the manager its state (daemon/notify.h):
 * READY=1 once sl_node_start has returned (ports bound, quota file read), RELOADING=1 and READY=1
 * around a SIGHUP reload, STOPPING=1 when a drain begins; with $WATCHDOG_USEC it wakes every half
 * period and sends WATCHDOG=1 only if every worker loop ran the step posted at the previous wake
 * (sl_node_alive): a stuck loop stops the pings and systemd restarts the service.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "config/diag.h"
#include "daemon/notify.h"
#include "node/startcheck.h"
#include "runtime/log.h"
#include "sluice/node.h"

#ifndef SLUICE_VERSION /* set by CMake: VERSION, plus `git describe` in a checkout */
#define SLUICE_VERSION "unknown"
#endif

static uint64_t mono_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Tell the service manager (a no-op without $NOTIFY_SOCKET); the first failure is reported. */
static void tell(const sl_notify *nt, const char *state)
{
    static int reported;
    int rc = sl_notify_send(nt, state);
    if (rc && !reported) {
        reported = 1;
        fprintf(stderr, "sluiced: NOTIFY_SOCKET: %s (further failures not reported)\n",
                strerror(-rc));
    }
}

/* Wait for a signal; with a watchdog, ping it (every worker loop alive) each half period
 * meanwhile. The signal, or -1 on an error to retry. */
/* The next signal; -1 on an error; WAIT_FAILED once a role gave up for good (sl_node_failed: a
 * client-proxy that found no observer), checked at least every second. */
#define WAIT_FAILED (-2)
static int wait_signal(const sigset_t *set, sl_node *node, const sl_notify *nt, uint64_t wd_usec,
                       uint64_t *next_ping)
{
    for (;;) {
        uint64_t now = mono_usec(), left = 1000000u;
        if (wd_usec) {
            if (now >= *next_ping) {
                if (sl_node_alive(node) == 1)
                    tell(nt, "WATCHDOG=1");
                *next_ping = now + wd_usec / 2;
            }
            if (*next_ping - now < left)
                left = *next_ping - now;
        }
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000u),
                              .tv_nsec = (long)(left % 1000000u) * 1000};
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig > 0)
            return sig;
        if (errno != EAGAIN && errno != EINTR)
            return -1;
        if (sl_node_failed(node))
            return WAIT_FAILED;
    }
}

#ifdef SLUICE_NO_CURL
/* The static sluiced (make static) is linked without libcurl (packaging/static/nocurl.c): refuse
 * the options whose clients need it, saying why, instead of failing later on a client that cannot
 * exist. A parse error is left to sl_node_start to report. */
static int refuse_curl_options(sl_logger *lg, int argc, char **argv)
{
    sl_options o;
    memset(&o, 0, sizeof o); /* sl_config_parse frees what the options held */
    char err[1024];
    if (sl_config_parse(&o, argc, argv, NULL, err, sizeof err) != 0)
        return 0;
    const char *what = o.storage_addrs.n ? "--storage-addrs (etcd)"
                       : o.discovery == SL_DISCOVERY_ETCD ? "--discovery etcd"
                       : o.discovery == SL_DISCOVERY_K8S  ? "--discovery k8s"
                                                          : NULL;
    sl_config_free(&o);
    if (!what)
        return 0;
    sl_log_error(lg, "%s needs libcurl, which this statically linked sluiced is built without "
                 "(docs/operations.md \"Static build\"); use the dynamically linked sluiced",
                 what);
    return -1;
}
#endif

/* No core dumps unless --allow-core-dumps: the process holds tokens and keys, and a core file (or
 * a ptrace by another process of the same user) would show them. PR_SET_DUMPABLE 0 is the
 * process's choice, so the daemon makes it, never the library. Before any secret is read. A parse
 * error is left to sl_node_start to report (and the process stays undumpable meanwhile). */
static void set_dumpable(int argc, char **argv)
{
    sl_options o;
    memset(&o, 0, sizeof o); /* sl_config_parse frees what the options held */
    char err[512];
    bool allow = sl_config_parse(&o, argc, argv, NULL, err, sizeof err) == 0 && o.allow_core_dumps;
    sl_config_free(&o);
    if (!allow && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
        fprintf(stderr, "sluiced: prctl(PR_SET_DUMPABLE): %s (core dumps stay allowed)\n",
                strerror(errno));
}

/* Remove every `flag` (before "--") from argv; whether there was one. */
static bool take_flag(int *argc, char **argv, const char *flag)
{
    bool found = false;
    int w = 1;
    for (int r = 1; r < *argc; r++) {
        if (strcmp(argv[r], "--") == 0) {
            while (r < *argc)
                argv[w++] = argv[r++];
            break;
        }
        if (strcmp(argv[r], flag) == 0)
            found = true;
        else
            argv[w++] = argv[r];
    }
    argv[w] = NULL;
    *argc = w;
    return found;
}

/*
 * --check-config: the options from every source and then every file, directory and peer a start
 * would read (node/startcheck.h), each problem one error line; nothing bound, no thread started.
 * --print-config: the effective options as YAML, each with its origin, secrets redacted.
 * Exit 0, or 2 when something is wrong.
 */
static int check_or_print(sl_logger *lg, int argc, char **argv, bool print)
{
    const sl_opt_table *t = sl_config_daemon_table();
    char(*origin)[SL_OPT_ORIGIN_MAX] = calloc(t->nopts, sizeof *origin);
    if (!origin) {
        sl_log_error(lg, "out of memory");
        return 2;
    }
    sl_options o;
    memset(&o, 0, sizeof o);
    sl_diag d = {0};
    char err[1024];
    int rc = sl_config_check(&o, argc, argv, NULL, &d, origin, err, sizeof err);
    if (!print)
        sl_startcheck_run(&o, &d);
    size_t problems = sl_diag_count(&d);
    for (size_t i = 0; i < d.n; i++)
        sl_log_error(lg, "%s", d.lines[i]);
    if (d.dropped)
        sl_log_error(lg, "... and %zu more problems", d.dropped);
    if (rc != 0 && problems == 0) { /* not one the check words (out of memory) */
        sl_log_error(lg, "%s", err[0] ? err : strerror(-rc));
        problems = 1;
    }
    if (print && problems == 0)
        sl_opt_dump_origins(t, &o, (const char(*)[SL_OPT_ORIGIN_MAX])origin, stdout);
    else if (!print && problems == 0)
        sl_log_info(lg, "configuration OK: the options, files and directories a start reads are "
                        "all good");
    else if (!print)
        sl_log_error(lg, "configuration check failed: %zu problem%s", problems,
                     problems == 1 ? "" : "s");
    sl_diag_free(&d);
    sl_config_free(&o);
    free(origin);
    return problems ? 2 : 0;
}

/* The boot logger writes in the --log-format the options ask for, so that a start-up error is a
 * line like every other (a bad option's value leaves the default format). */
static void boot_format(sl_logger *lg, int argc, char **argv)
{
    sl_options o;
    memset(&o, 0, sizeof o);
    sl_diag d = {0};
    char err[256];
    (void)sl_config_check(&o, argc, argv, NULL, &d, NULL, err, sizeof err);
    sl_log_set_format(lg, (sl_log_format)o.log_format);
    sl_diag_free(&d);
    sl_config_free(&o);
}

int main(int argc, char **argv)
{
    /* Start-up errors are log lines (timestamp, level) on stderr, like everything after them. */
    sl_logger boot;
    sl_log_init(&boot, NULL, SL_LOG_INFO, NULL);
    bool check = take_flag(&argc, argv, "--check-config");
    bool print = take_flag(&argc, argv, "--print-config");
    switch (sl_opt_special(sl_config_daemon_table(), argc, argv)) {
    case 0:
        boot_format(&boot, argc, argv);
        break;
    case SL_OPT_HELP:
        sl_config_help(stdout);
        return 0;
    case SL_OPT_VERSION:
        printf("sluiced %s\n", SLUICE_VERSION);
        return 0;
    }
    /* A program may choose for its process: a write to a closed stderr pipe or socket is an EPIPE
     * error, never a kill. The library never sets this (it writes with MSG_NOSIGNAL or on threads
     * that block SIGPIPE), so an embedder's disposition stays theirs. */
#ifdef SLUICE_NO_CURL
    if (refuse_curl_options(&boot, argc, argv))
        return 2;
#endif
    set_dumpable(argc, argv); /* before any secret is read, by the check too */
    if (check || print)
        return check_or_print(&boot, argc, argv, print && !check);
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    sl_notify nt;
    int rc = sl_notify_open(&nt, getenv("NOTIFY_SOCKET"));
    if (rc)
        sl_log_warn(&boot, "NOTIFY_SOCKET: %s (not notifying)", strerror(-rc));
    uint64_t wd_usec = sl_notify_watchdog_usec(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"),
                                               (long)getpid());

    sl_node *node;
    char err[1024];
    rc = sl_node_start(argc - 1, argv + 1, &node, err, sizeof err);
    if (rc) {
        sl_log_error(&boot, "%s", err);
        char st[1100];
        snprintf(st, sizeof st, "STATUS=start failed: %s\nERRNO=%d", err, -rc);
        tell(&nt, st);
        sl_notify_close(&nt);
        return 2;
    }
    char st[128];
    snprintf(st, sizeof st, "READY=1\nSTATUS=serving on port %u\nMAINPID=%ld",
             (unsigned)sl_node_port(node), (long)getpid());
    tell(&nt, st);
    uint64_t next_ping = 0;
    bool failed = false;
    for (;;) {
        int sig = wait_signal(&set, node, &nt, wd_usec, &next_ping);
        if (sig == WAIT_FAILED) {
            failed = true; /* logged by the node; stop as on SIGTERM, exit 1 */
            tell(&nt, "STOPPING=1");
            sl_node_shutdown(node, 0);
            break;
        }
        if (sig < 0)
            continue;
        if (sig == SIGHUP) {
            snprintf(st, sizeof st, "RELOADING=1\nMONOTONIC_USEC=%llu",
                     (unsigned long long)mono_usec());
            tell(&nt, st);
            sl_node_reload(node);
            tell(&nt, "READY=1");
            continue;
        }
        tell(&nt, "STOPPING=1");
        sl_node_shutdown(node, 0); /* 0: the configured --shutdown-timeout */
        break;
    }
    rc = sl_node_wait(node);
    sl_node_free(node);
    sl_notify_close(&nt);
    return rc || failed ? 1 : 0;
}

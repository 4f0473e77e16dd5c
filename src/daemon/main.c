/*
 * sluiced: the sluice daemon. A thin main over the embeddable node (include/sluice/node.h):
 * parse options (file < environment < flags), start the node, then wait for signals on this
 * thread — SIGHUP reloads, SIGINT/SIGTERM drain gracefully (stop accepting, finish in-flight
 * calls) within --shutdown-timeout and exit 0.
 *
 * Signals are blocked before any thread starts, so every worker inherits the mask and only this
 * thread's sigtimedwait() receives them: no async-signal-safety concerns in the handlers.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "config/config.h"
#include "sluice/node.h"

#ifndef SLUICE_VERSION /* set by CMake: VERSION, plus `git describe` in a checkout */
#define SLUICE_VERSION "unknown"
#endif

int main(int argc, char **argv)
{
    switch (sl_opt_special(sl_config_daemon_table(), argc, argv)) {
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
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    sl_node *node;
    char err[512];
    int rc = sl_node_start(argc - 1, argv + 1, &node, err, sizeof err);
    if (rc) {
        fprintf(stderr, "sluiced: %s\n", err);
        return 2;
    }
    bool failed = false;
    for (;;) {
        /* a second at most between checks of a role that gave up (sl_node_failed) */
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig < 0 && sl_node_failed(node)) {
            failed = true;
            sl_node_shutdown(node, 0);
            break;
        }
        if (sig < 0)
            continue;
        if (sig == SIGHUP) {
            sl_node_reload(node);
            continue;
        }
        sl_node_shutdown(node, 0); /* 0: the configured --shutdown-timeout */
        break;
    }
    rc = sl_node_wait(node);
    sl_node_free(node);
    return rc || failed ? 1 : 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service manager's readiness protocol (systemd's sd_notify), written here rather than linked
 * from libsystemd (docs/architecture.md "What we write by hand"): a process tells its manager
 * what state it is in by sending one datagram of newline-separated VAR=value assignments
 * ("READY=1", "RELOADING=1", "STOPPING=1", "WATCHDOG=1", "STATUS=...") to the AF_UNIX datagram
 * socket named by $NOTIFY_SOCKET: a file-system path ("/run/systemd/notify") or, with a leading
 * '@', a name in the abstract namespace. With $WATCHDOG_USEC set (and $WATCHDOG_PID, when set,
 * naming this process) the manager expects "WATCHDOG=1" at least that often.
 *
 * The module takes the variables' values as arguments and never reads or changes the environment
 * itself: the program (sluiced's main) reads them, so the library keeps no process-wide state.
 * Without a socket every call is a no-op, so a program started by hand behaves as before.
 */
#ifndef SLUICE_DAEMON_NOTIFY_H
#define SLUICE_DAEMON_NOTIFY_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef struct sl_notify {
    int fd; /* -1: no manager to tell (every send is a no-op) */
    struct sockaddr_un addr;
    socklen_t addrlen;
} sl_notify;

/* Longest state string one send takes (a datagram; the manager reads far more). */
#define SL_NOTIFY_MAX 4096

/* Open a datagram socket towards socket_path, the value of $NOTIFY_SOCKET: "/path" or "@name".
 * NULL or "" leaves n disabled and returns 0. -EINVAL for another form, -ENAMETOOLONG when it
 * does not fit sockaddr_un, or the socket(2) error. */
int sl_notify_open(sl_notify *n, const char *socket_path);
/* Send state ("READY=1", "STATUS=...\nREADY=1", ...) as one datagram: 0, or a negative errno
 * (-EMSGSIZE above SL_NOTIFY_MAX). 0 and nothing sent when n is disabled. Never blocks. */
int sl_notify_send(const sl_notify *n, const char *state);
/* Close the socket (n disabled afterwards; a no-op when it already is). */
void sl_notify_close(sl_notify *n);

/* The watchdog interval in microseconds from the values of $WATCHDOG_USEC and $WATCHDOG_PID (each
 * may be NULL): 0 when there is none, when it is not a positive decimal number, or when pid names
 * another process than self. */
uint64_t sl_notify_watchdog_usec(const char *usec, const char *pid, long self);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for daemon/notify's parsers of what the service manager hands sluiced: the
 * $NOTIFY_SOCKET address and the $WATCHDOG_USEC / $WATCHDOG_PID values. The input is split at
 * its first two NUL bytes into (socket, usec, pid). Checked: no crash or overrun; an address is
 * taken only in its two forms ("/path", "@name") and only when it fits sockaddr_un, a refused one
 * leaves the notifier disabled; a watchdog interval is only ever the decimal value of usec, and
 * only when pid is absent or names this process.
 * A broken property traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/notify.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *buf = malloc(size + 3); /* three NULs: every part ends */
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = buf[size + 2] = 0;
    const char *sock = buf;
    const char *usec = sock + strlen(sock) + 1;
    const char *pid = usec <= buf + size ? usec + strlen(usec) + 1 : usec;

    sl_notify n;
    int rc = sl_notify_open(&n, sock);
    size_t len = strlen(sock);
    if (rc == 0 && len > 0) {
        CHECK(sock[0] == '/' || sock[0] == '@');
        CHECK(len < sizeof n.addr.sun_path);
        CHECK(n.fd >= 0);
    } else {
        CHECK(n.fd == -1);
    }
    sl_notify_close(&n);

    uint64_t v = sl_notify_watchdog_usec(usec, *pid ? pid : NULL, 4242);
    if (v) {
        CHECK(usec[0] >= '0' && usec[0] <= '9');
        CHECK(strtoull(usec, NULL, 10) == v);
        CHECK(!*pid || strtoull(pid, NULL, 10) == 4242);
    }
    free(buf);
    return 0;
}

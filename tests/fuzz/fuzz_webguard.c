/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for auth/webguard (the admin plane's Host, Origin and Content-Type checks):
 * the input is split at NUL bytes into a listener address, a method, Host, Origin and
 * Content-Type (a missing part is an absent header). Arbitrary bytes never crash or overrun, the
 * verdict is one of the four with a non-empty reason when refused, and the rules hold whatever
 * the bytes: a Unix socket never refuses on Host, a refusal on Content-Type only happens to a
 * state-changing call, and an exact "<scheme>://<listener address>" Origin with the listener's
 * own address as Host and JSON is refused at most on Host (an address that is not ip:port).
 * A broken property traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "auth/webguard.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *part[5] = {0};
    size_t len[5] = {0};
    const char *p = (const char *)data, *end = p + size;
    for (int i = 0; i < 5 && p <= end; i++) {
        const char *z = memchr(p, 0, (size_t)(end - p));
        part[i] = p;
        len[i] = z ? (size_t)(z - p) : (size_t)(end - p);
        p += len[i] + 1;
        if (!z)
            break;
    }
    char addr[80], method[16];
    snprintf(addr, sizeof addr, "%.*s", (int)(part[0] ? len[0] : 0), part[0] ? part[0] : "");
    snprintf(method, sizeof method, "%.*s", (int)(part[1] ? len[1] : 0), part[1] ? part[1] : "");
    sl_webguard_value v[3];
    for (int i = 0; i < 3; i++)
        v[i] = part[2 + i] ? (sl_webguard_value){part[2 + i], len[2 + i]}
                           : (sl_webguard_value){NULL, 0};
    for (int tls = 0; tls < 2; tls++) {
        for (int unix_sock = 0; unix_sock < 2; unix_sock++) {
            sl_webguard_listener l = {.addr = unix_sock ? NULL : addr, .tls = tls};
            const char *why = NULL;
            sl_webguard_verdict r = sl_webguard_check(&l, method, v[0], v[1], v[2], &why);
            CHECK(r >= SL_WEBGUARD_OK && r <= SL_WEBGUARD_BAD_CONTENT_TYPE && why);
            CHECK(r == SL_WEBGUARD_OK || why[0]);
            CHECK(!(unix_sock && r == SL_WEBGUARD_BAD_HOST));
            CHECK(!(r == SL_WEBGUARD_BAD_CONTENT_TYPE && !sl_webguard_changes_state(method)));
        }
        /* the listener's own call passes: its address as Host and in the Origin, JSON (for an
         * address spelled as an IP and a port: hex digits, dots, colons, brackets) */
        if (strspn(addr, "0123456789abcdefABCDEF.:[]") != strlen(addr))
            continue;
        char origin[96];
        snprintf(origin, sizeof origin, "%s://%s", tls ? "https" : "http", addr);
        sl_webguard_listener l = {.addr = addr, .tls = tls};
        sl_webguard_value host = {addr, strlen(addr)}, o = {origin, strlen(origin)},
                          ct = {"application/json", 16};
        const char *why;
        sl_webguard_verdict r = sl_webguard_check(&l, method, host, o, ct, &why);
        /* only an address that is not ip:port may be refused (then on its Host) */
        CHECK(r == SL_WEBGUARD_OK || r == SL_WEBGUARD_BAD_HOST);
    }
    return 0;
}

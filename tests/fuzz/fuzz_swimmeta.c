/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for a member's metadata and its `service` value (gossip/swimmeta): arbitrary
 * bytes are checked as metadata (sl_swimmeta_check) and as an address (sl_swimmeta_check_addr).
 * Metadata the check accepts reads back through sl_swimmeta_get: its service, if any, is itself a
 * valid address and parses as an ip:port the way the cluster's consumers take it; its role, if
 * any, is one of the three. Every value read fits its buffer and holds no newline. Writing a key
 * and a value with sl_swimmeta_put and reading it back gives the same value. The seed corpus
 * (tests/fuzz/corpus/fuzz_swimmeta/) holds what sluiced writes and near misses.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/addr.h"
#include "gossip/swimmeta.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *why = NULL;
    int ok = sl_swimmeta_check(data, size, &why) == 0;
    CHECK(ok || why != NULL);
    char v[512];
    int n = sl_swimmeta_get(data, size, "service", v, sizeof v);
    CHECK(n == -ENOENT || n == -EMSGSIZE ||
          (n >= 0 && (size_t)n < sizeof v && strlen(v) <= (size_t)n));
    CHECK(!(ok && n == -EMSGSIZE)); /* a valid value is at most SL_SWIMMETA_MAX_VALUE bytes */
    if (ok && n >= 0) {
        CHECK(strlen(v) == (size_t)n && n <= SL_SWIMMETA_MAX_VALUE);
        CHECK(sl_swimmeta_check_addr(v, (size_t)n) == 0);
        char host[64];
        unsigned short port;
        CHECK(sl_addr_split(v, host, sizeof host, &port) == 0 && port != 0);
        unsigned char ip[16];
        CHECK(inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1);
    }
    n = sl_swimmeta_get(data, size, "role", v, sizeof v);
    if (ok && n >= 0)
        CHECK(!strcmp(v, "limiter") || !strcmp(v, "proxy") || !strcmp(v, "observer"));
    if (n >= 0)
        CHECK(!memchr(v, '\n', (size_t)n));
    /* the input as an address */
    if (sl_swimmeta_check_addr((const char *)data, size) == 0) {
        CHECK(size >= 3 && size < 64);
        char a[64];
        memcpy(a, data, size);
        a[size] = '\0';
        CHECK(strlen(a) == size);
        char host[64];
        unsigned short port;
        CHECK(sl_addr_split(a, host, sizeof host, &port) == 0 && port != 0);
    }
    /* put, then get, of a value made of the input's printable bytes */
    char val[SL_SWIMMETA_MAX_VALUE + 1];
    size_t vl = 0;
    for (size_t i = 0; i < size && vl < SL_SWIMMETA_MAX_VALUE; i++)
        if (data[i] >= 0x20 && data[i] < 0x7f)
            val[vl++] = (char)data[i];
    val[vl] = '\0';
    uint8_t buf[300];
    int len = sl_swimmeta_put(buf, sizeof buf, 0, "role", "limiter");
    CHECK(len > 0);
    len = sl_swimmeta_put(buf, sizeof buf, (size_t)len, "zone", val);
    CHECK(len > 0);
    CHECK(sl_swimmeta_get(buf, (size_t)len, "zone", v, sizeof v) == (int)vl);
    CHECK(strcmp(v, val) == 0);
    return 0;
}

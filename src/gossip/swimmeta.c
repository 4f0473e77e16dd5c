/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimmeta: writing and reading the "key=value" lines of a member's metadata (see swimmeta.h).
 * The blob comes from the network: reading never trusts it to be NUL-terminated or well formed,
 * and gossip checks it (sl_swimmeta_check) before it takes a member in.
 */
#include "gossip/swimmeta.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

int sl_swimmeta_put(uint8_t *buf, size_t cap, size_t len, const char *key, const char *value)
{
    size_t kl = strlen(key), vl = strlen(value);
    if (!kl || strpbrk(key, "=\n") || strchr(value, '\n'))
        return -EINVAL;
    if (len > cap || cap - len < kl + vl + 2)
        return -EMSGSIZE;
    memcpy(buf + len, key, kl);
    buf[len + kl] = '=';
    memcpy(buf + len + kl + 1, value, vl);
    buf[len + kl + 1 + vl] = '\n';
    return (int)(len + kl + vl + 2);
}

int sl_swimmeta_get(const uint8_t *meta, size_t len, const char *key, char *out, size_t outlen)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < len;) {
        const uint8_t *nl = memchr(meta + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - meta) : len;
        if (e - i > kl && memcmp(meta + i, key, kl) == 0 && meta[i + kl] == '=') {
            size_t vl = e - i - kl - 1;
            if (vl + 1 > outlen)
                return -EMSGSIZE;
            memcpy(out, meta + i + kl + 1, vl);
            out[vl] = '\0';
            return (int)vl;
        }
        i = e + 1;
    }
    return -ENOENT;
}

int sl_swimmeta_check_addr(const char *addr, size_t len)
{
    char buf[64], ip[16];
    if (len < 3 || len >= sizeof buf)
        return -EINVAL;
    /* the bytes as they are: a NUL inside must not cut the text short of what is checked */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)addr[i] <= 0x20 || (unsigned char)addr[i] >= 0x7f)
            return -EINVAL;
    memcpy(buf, addr, len);
    buf[len] = '\0';
    char *colon = strrchr(buf, ':');
    if (!colon || !colon[1] || strlen(colon + 1) > 5)
        return -EINVAL;
    unsigned port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        port = port * 10 + (unsigned)(*p - '0');
    }
    if (port == 0 || port > 65535)
        return -EINVAL;
    *colon = '\0';
    if (buf[0] == '[') {
        size_t hl = strlen(buf);
        if (hl < 3 || buf[hl - 1] != ']')
            return -EINVAL;
        buf[hl - 1] = '\0';
        return inet_pton(AF_INET6, buf + 1, ip) == 1 ? 0 : -EINVAL;
    }
    return inet_pton(AF_INET, buf, ip) == 1 ? 0 : -EINVAL;
}

static int key_char(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int sl_swimmeta_check(const uint8_t *meta, size_t len, const char **why)
{
    static const char *const roles[] = {"limiter", "proxy", "observer"};
    int seen_service = 0, seen_role = 0;
    for (size_t i = 0; i < len;) {
        const uint8_t *nl = memchr(meta + i, '\n', len - i);
        size_t e = nl ? (size_t)(nl - meta) : len;
        const uint8_t *eq = memchr(meta + i, '=', e - i);
        if (!eq) {
            *why = "a metadata line without '='";
            return -EINVAL;
        }
        size_t kl = (size_t)(eq - (meta + i)), vl = e - i - kl - 1;
        if (!kl || kl > SL_SWIMMETA_MAX_KEY) {
            *why = "a metadata key empty or too long";
            return -EINVAL;
        }
        for (size_t j = 0; j < kl; j++)
            if (!key_char(meta[i + j])) {
                *why = "a metadata key not of [a-z0-9_-]";
                return -EINVAL;
            }
        if (vl > SL_SWIMMETA_MAX_VALUE) {
            *why = "a metadata value too long";
            return -EINVAL;
        }
        const uint8_t *v = eq + 1;
        for (size_t j = 0; j < vl; j++)
            if (v[j] < 0x20 || v[j] >= 0x7f) {
                *why = "a metadata value not printable ASCII";
                return -EINVAL;
            }
        if (kl == 7 && memcmp(meta + i, "service", 7) == 0) {
            if (seen_service++ || sl_swimmeta_check_addr((const char *)v, vl) < 0) {
                *why = "service is not one numeric ip:port";
                return -EINVAL;
            }
        } else if (kl == 4 && memcmp(meta + i, "role", 4) == 0) {
            int ok = 0;
            for (size_t r = 0; r < sizeof roles / sizeof *roles; r++)
                ok |= vl == strlen(roles[r]) && memcmp(v, roles[r], vl) == 0;
            if (seen_role++ || !ok) {
                *why = "role is not one of limiter, proxy, observer";
                return -EINVAL;
            }
        }
        /* a repeated other key: the reader takes the first; refuse the ambiguity */
        for (size_t k = 0; k < i;) {
            const uint8_t *nl2 = memchr(meta + k, '\n', i - k);
            size_t e2 = nl2 ? (size_t)(nl2 - meta) : i;
            if (e2 - k > kl && memcmp(meta + k, meta + i, kl) == 0 && meta[k + kl] == '=') {
                *why = "a metadata key twice";
                return -EINVAL;
            }
            k = e2 + 1;
        }
        i = e + 1;
    }
    return 0;
}

int sl_swimmeta_check_member(const char *addr, size_t addr_len, const uint8_t *meta,
                             size_t meta_len, const char **why)
{
    if (sl_swimmeta_check_addr(addr, addr_len) < 0) {
        *why = "the member's gossip address is not a numeric ip:port";
        return -EINVAL;
    }
    return sl_swimmeta_check(meta, meta_len, why);
}

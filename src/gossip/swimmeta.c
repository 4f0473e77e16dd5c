/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimmeta: writing and reading the "key=value" lines of a member's metadata (see swimmeta.h).
 * The blob comes from the network: reading never trusts it to be NUL-terminated or well formed.
 */
#include "gossip/swimmeta.h"

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

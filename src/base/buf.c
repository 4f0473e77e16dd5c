/* SPDX-License-Identifier: Apache-2.0 */
/* Growable, capped byte buffer (see buf.h). */
#include "base/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_buf_init(sl_buf *b, size_t cap)
{
    b->data = NULL;
    b->len = 0;
    b->alloc = 0;
    b->cap = cap ? cap : SL_BUF_DEFAULT_CAP;
}

void sl_buf_free(sl_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
}

void sl_buf_reset(sl_buf *b)
{
    b->len = 0;
}

int sl_buf_reserve(sl_buf *b, size_t extra)
{
    if (extra > b->cap || b->len > b->cap - extra)
        return -EMSGSIZE;
    size_t need = b->len + extra;
    if (need <= b->alloc)
        return 0;
    size_t n = b->alloc ? b->alloc : 256;
    while (n < need)
        n = n > SIZE_MAX / 2 ? need : n * 2;
    if (n > b->cap)
        n = b->cap;
    uint8_t *p = realloc(b->data, n);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->alloc = n;
    return 0;
}

int sl_buf_append(sl_buf *b, const void *p, size_t n)
{
    int rc = sl_buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int sl_buf_append_str(sl_buf *b, const char *s)
{
    return sl_buf_append(b, s, strlen(s));
}

int sl_buf_printf(sl_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n < sizeof tmp)
        return sl_buf_append(b, tmp, (size_t)n);
    int rc = sl_buf_reserve(b, (size_t)n + 1);
    if (rc)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void sl_buf_consume(sl_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

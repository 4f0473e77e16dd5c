/* SPDX-License-Identifier: Apache-2.0 */
/* NUL-terminated text builder over sl_buf (see strbuf.h). */
#include "base/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_strbuf_init(sl_strbuf *s, size_t cap)
{
    sl_buf_init(&s->b, cap);
    s->err = 0;
    s->fixed = false;
}

void sl_strbuf_init_fixed(sl_strbuf *s, char *mem, size_t size)
{
    /* alloc == cap: sl_buf_reserve refuses past it before it would ever realloc */
    s->b.data = (uint8_t *)mem;
    s->b.len = 0;
    s->b.alloc = size;
    s->b.cap = size;
    s->err = 0;
    s->fixed = true;
    if (size)
        mem[0] = '\0';
}

void sl_strbuf_free(sl_strbuf *s)
{
    if (s->fixed) {
        s->b.len = 0;
        if (s->b.alloc)
            s->b.data[0] = '\0';
    } else {
        sl_buf_free(&s->b);
    }
    s->err = 0;
}

void sl_strbuf_reset(sl_strbuf *s)
{
    s->b.len = 0;
    if (s->b.data && s->b.alloc)
        s->b.data[0] = '\0';
    s->err = 0;
}

/* Room for n more bytes plus the NUL. */
static int reserve(sl_strbuf *s, size_t n)
{
    if (s->err)
        return s->err;
    int rc = n == SIZE_MAX ? -EMSGSIZE : sl_buf_reserve(&s->b, n + 1);
    if (rc)
        s->err = rc;
    return rc;
}

int sl_strbuf_append(sl_strbuf *s, const char *p, size_t n)
{
    int rc = reserve(s, n);
    if (rc)
        return rc;
    if (n)
        memcpy(s->b.data + s->b.len, p, n);
    s->b.len += n;
    s->b.data[s->b.len] = '\0';
    return 0;
}

int sl_strbuf_puts(sl_strbuf *s, const char *str)
{
    return sl_strbuf_append(s, str, strlen(str));
}

int sl_strbuf_putc(sl_strbuf *s, char c)
{
    return sl_strbuf_append(s, &c, 1);
}

int sl_strbuf_vprintf(sl_strbuf *s, const char *fmt, va_list ap)
{
    if (s->err)
        return s->err;
    va_list again;
    va_copy(again, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    int rc;
    if (n < 0) {
        rc = s->err = -EINVAL;
    } else if ((size_t)n < sizeof tmp) {
        rc = sl_strbuf_append(s, tmp, (size_t)n);
    } else if ((rc = reserve(s, (size_t)n)) == 0) {
        vsnprintf((char *)s->b.data + s->b.len, (size_t)n + 1, fmt, again);
        s->b.len += (size_t)n;
    }
    va_end(again);
    return rc;
}

int sl_strbuf_printf(sl_strbuf *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = sl_strbuf_vprintf(s, fmt, ap);
    va_end(ap);
    return rc;
}

void sl_strbuf_truncate(sl_strbuf *s, size_t len)
{
    if (len < s->b.len) {
        s->b.len = len;
        s->b.data[len] = '\0';
    }
}

const char *sl_strbuf_str(const sl_strbuf *s)
{
    return s->b.data && s->b.alloc ? (const char *)s->b.data : "";
}

size_t sl_strbuf_len(const sl_strbuf *s)
{
    return s->b.len;
}

int sl_strbuf_error(const sl_strbuf *s)
{
    return s->err;
}

void sl_strbuf_clear_error(sl_strbuf *s)
{
    s->err = 0;
}

int sl_strbuf_take(sl_strbuf *s, char **out, size_t *len)
{
    int rc = reserve(s, 0); /* an empty builder hands over "" */
    char *text = NULL;
    size_t n = s->b.len;
    if (!rc) {
        if (s->fixed) {
            text = malloc(n + 1);
            if (!text)
                rc = -ENOMEM;
            else
                memcpy(text, s->b.data, n + 1);
        } else {
            s->b.data[n] = '\0';
            text = (char *)s->b.data;
            s->b.data = NULL;
            s->b.alloc = 0;
        }
    }
    sl_strbuf_free(s);
    if (rc)
        return rc;
    *out = text;
    if (len)
        *len = n;
    return 0;
}

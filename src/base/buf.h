/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_buf: a growable byte buffer with a hard cap. Codecs append into one; connections queue them.
 * Appends past `cap` fail with -EMSGSIZE instead of growing without bound (an attacker controls
 * most sizes that reach a codec).
 */
#ifndef SLUICE_BASE_BUF_H
#define SLUICE_BASE_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct sl_buf {
    uint8_t *data;
    size_t len;
    size_t alloc;
    size_t cap;  /* most bytes it may hold; 0 = SL_BUF_DEFAULT_CAP */
} sl_buf;

#define SL_BUF_DEFAULT_CAP ((size_t)64 << 20)

void sl_buf_init(sl_buf *b, size_t cap);
void sl_buf_free(sl_buf *b);
void sl_buf_reset(sl_buf *b);                          /* len = 0, keeps memory */
int sl_buf_reserve(sl_buf *b, size_t extra);           /* 0 or -ENOMEM / -EMSGSIZE */
int sl_buf_append(sl_buf *b, const void *p, size_t n); /* 0 or -ENOMEM / -EMSGSIZE */
int sl_buf_append_str(sl_buf *b, const char *s);
int sl_buf_printf(sl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remove the first n bytes. */
void sl_buf_consume(sl_buf *b, size_t n);

#endif

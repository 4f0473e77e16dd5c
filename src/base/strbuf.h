/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_strbuf: a NUL-terminated text builder with a byte cap, over sl_buf (which does the growing).
 * Appends are printf-style or raw; the first failure (-ENOMEM, or -EMSGSIZE past the cap) sticks,
 * so a builder can append a whole document and check once at the end. It can also write into
 * caller-owned storage (sl_strbuf_init_fixed) and then never allocates.
 *
 * The text is always NUL-terminated once anything was appended; sl_strbuf_str() gives "" before.
 */
#ifndef SLUICE_BASE_STRBUF_H
#define SLUICE_BASE_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

typedef struct sl_strbuf {
    sl_buf b;   /* b.len excludes the NUL; b.cap counts it */
    int err;    /* 0, or the first failure (sticky) */
    bool fixed; /* b.data is the caller's: never grown or freed */
} sl_strbuf;

/* A growable builder holding at most cap bytes including the NUL (0 = SL_BUF_DEFAULT_CAP). */
void sl_strbuf_init(sl_strbuf *s, size_t cap);
/* A builder over mem[0..size): no allocation, appends that do not fit fail with -EMSGSIZE. */
void sl_strbuf_init_fixed(sl_strbuf *s, char *mem, size_t size);
/* Release the memory (a fixed builder's storage is left alone); the builder is empty again. */
void sl_strbuf_free(sl_strbuf *s);
/* Empty the text and clear the error; keeps the memory. */
void sl_strbuf_reset(sl_strbuf *s);

/* Appends: 0, or the (sticky) error. */
int sl_strbuf_append(sl_strbuf *s, const char *p, size_t n);
int sl_strbuf_puts(sl_strbuf *s, const char *str);
int sl_strbuf_putc(sl_strbuf *s, char c);
int sl_strbuf_printf(sl_strbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sl_strbuf_vprintf(sl_strbuf *s, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Drop the text from byte `len` on (no-op when len >= the current length). */
void sl_strbuf_truncate(sl_strbuf *s, size_t len);

/* The text so far ("" when empty), its length, and the sticky error. */
const char *sl_strbuf_str(const sl_strbuf *s);
size_t sl_strbuf_len(const sl_strbuf *s);
int sl_strbuf_error(const sl_strbuf *s);
/* Forget the sticky error and go on appending. A failed append leaves the text as it was, so a
 * builder that may skip a piece that does not fit (and still take smaller ones) can do so. */
void sl_strbuf_clear_error(sl_strbuf *s);

/*
 * Hand the text to the caller: 0 and a malloc'd NUL-terminated string in *out (its length in *len
 * when len is not NULL; free() it), or the sticky error (nothing handed over). Either way the
 * builder is empty afterwards. A fixed builder hands over a malloc'd copy.
 */
int sl_strbuf_take(sl_strbuf *s, char **out, size_t *len);

#endif

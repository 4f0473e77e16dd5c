/* SPDX-License-Identifier: Apache-2.0 */
/* The problems of a configuration check (see diag.h). */
#include "config/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sl_diag_add(sl_diag *d, const char *fmt, ...)
{
    if (d->n >= SL_DIAG_MAX) {
        d->dropped++;
        return;
    }
    char buf[SL_DIAG_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = strdup(buf);
    if (!s) {
        d->dropped++;
        return;
    }
    d->lines[d->n++] = s;
}

size_t sl_diag_count(const sl_diag *d)
{
    return d->n + d->dropped;
}

void sl_diag_free(sl_diag *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->lines[i]);
    d->n = 0;
    d->dropped = 0;
}

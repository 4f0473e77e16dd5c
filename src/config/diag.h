/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_diag: the problems a configuration check found, kept in order, so that `sluiced
 * --check-config` reports every one at once instead of stopping at the first. Each problem is one
 * line of text that names what and where ("option 'listen-addr': port 99999 is out of range
 * 1-65535 (flag --listen-addr)"). Bounded: past SL_DIAG_MAX problems the rest are only counted.
 */
#ifndef SLUICE_CONFIG_DIAG_H
#define SLUICE_CONFIG_DIAG_H

#include <stddef.h>

#define SL_DIAG_MAX 64          /* problems kept; more are counted in `dropped` */
#define SL_DIAG_LINE_MAX 1024   /* bytes of one problem's text (longer is cut) */

typedef struct sl_diag {
    char *lines[SL_DIAG_MAX];
    size_t n;
    size_t dropped;
} sl_diag;

/* Add one problem (a copy of the text). Out of memory or past SL_DIAG_MAX it is counted. */
void sl_diag_add(sl_diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Problems found: kept and dropped. */
size_t sl_diag_count(const sl_diag *d);
/* Free the kept lines and empty d (a zeroed sl_diag is empty). */
void sl_diag_free(sl_diag *d);

#endif

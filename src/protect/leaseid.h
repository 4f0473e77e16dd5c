/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lease ids as clients see them: the codec of X-Lease-Id (/attempt, /release) and of the
 * "lease_id" metadata of Gubernator's CONCURRENCY items. Pure functions over strings.
 *
 *     <conc id: 16 hex> "." <fleet id: 16 hex> [ "." <resource, percent-encoded> ]
 *
 * with 16 zeros for "no such lease". The concurrency lease is the engine's id of a resource's
 * (or an item's) CONCURRENCY key, the fleet lease that of the fleet shedder. The resource is
 * carried when the id stays within SL_LEASEID_MAX bytes (clients keep 127), so that /release
 * needs nothing else; it is left out past that, and /release then needs X-Resource. A bare
 * "<conc>" (16 hex) is the engine's id alone, as a Gubernator owner answers it.
 */
#ifndef SLUICE_PROTECT_LEASEID_H
#define SLUICE_PROTECT_LEASEID_H

#include <stddef.h>
#include <stdint.h>

#include "core/concurrency.h"

#define SL_LEASEID_MAX 120
/* "<conc>.<fleet>" without a resource, NUL included. */
#define SL_LEASEID_PAIR_SIZE (2 * SL_CONC_ID_HEX + 2)

/* Format into out (NUL-terminated; cap > SL_LEASEID_PAIR_SIZE - 1); returns the length. The
 * resource (res, rlen; may be NULL) is added only with a concurrency lease and when it fits. */
size_t sl_leaseid_format(char *out, size_t cap, uint64_t conc, uint64_t fleet, const char *res,
                         size_t rlen);

/* Parse "<conc>", "<conc>.<fleet>" or "<conc>.<fleet>.<resource>" (blanks around are ignored);
 * the resource is decoded into resbuf (*rlen 0 when absent). 0 or -EINVAL (also when both ids
 * are zero, or the resource does not fit rescap). */
int sl_leaseid_parse(const char *s, size_t n, uint64_t *conc, uint64_t *fleet, char *resbuf,
                     size_t rescap, size_t *rlen);

/* One 16-hex id ("0000000000000000" is 0). 0 or -EINVAL. */
int sl_leaseid_parse_one(const char *s, uint64_t *id);

#endif

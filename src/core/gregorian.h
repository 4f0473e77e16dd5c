/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gregorian calendar intervals for DURATION_IS_GREGORIAN (Gubernator's behaviour): with that flag a
 * request's `duration` names an interval of the calendar (sl_gregorian: minute, hour, day, week,
 * month, year) instead of a number of milliseconds, and a limit resets at the interval's end.
 *
 * Times are epoch milliseconds in UTC (Gubernator uses the server's local zone; its servers run in
 * UTC, and a rate limiter whose windows move with a host's time zone setting helps no one). Weeks
 * are rejected with Gubernator's own message. Times before 1970 and far in the future work
 * (proleptic calendar, floor division); results saturate at the int64 range.
 */
#ifndef SLUICE_CORE_GREGORIAN_H
#define SLUICE_CORE_GREGORIAN_H

#include <stdint.h>

extern const char sl_greg_err_weeks[];   /* Gubernator's message for GregorianWeeks */
extern const char sl_greg_err_invalid[]; /* Gubernator's message for an unknown interval */

/* NULL if `kind` is a supported interval, else one of the errors above. */
const char *sl_greg_check(int64_t kind);

/* The interval of `kind` holding t: [*start, *end) in epoch ms. NULL or an error. */
const char *sl_greg_interval(int64_t t, int64_t kind, int64_t *start, int64_t *end);

/* Gubernator's GregorianExpiration: the last millisecond of the interval holding `now`. */
const char *sl_greg_expiration(int64_t now, int64_t kind, int64_t *out);

/* Gubernator's GregorianDuration: the whole length of the interval holding `now`, in ms (a month
 * or a year has its real length, 28..31 or 365/366 days). */
const char *sl_greg_duration(int64_t now, int64_t kind, int64_t *out);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gregorian calendar intervals (see gregorian.h). Fixed-length intervals (minute, hour, day) are
 * floor-aligned to the epoch, which in UTC is the calendar's own alignment; months and years go
 * through a days <-> civil date conversion (the standard era-of-400-years arithmetic, exact for the
 * proleptic Gregorian calendar over the whole int64 range of days).
 */
#include "core/gregorian.h"

#include "core/satmath.h"
#include "sluice/engine.h"

const char sl_greg_err_weeks[] = "`Duration = GregorianWeeks` not yet supported; consider making a PR!`";
const char sl_greg_err_invalid[] =
    "behavior DURATION_IS_GREGORIAN is set; but `Duration` is not a valid gregorian interval";

#define MS_MINUTE INT64_C(60000)
#define MS_HOUR INT64_C(3600000)
#define MS_DAY INT64_C(86400000)

/* Days from 1970-01-01 to y-m-d (m in 1..12). A 400-year era has 146097 days; counting years from
 * March puts the leap day last, so a day-of-year needs no leap test. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = sl_floor_div(y, 400);
    int64_t yoe = y - era * 400;                                   /* 0..399 */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* 0..365 */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* 0..146096 */
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m)
{
    z += 719468;
    int64_t era = sl_floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

const char *sl_greg_check(int64_t kind)
{
    switch (kind) {
    case SL_GREGORIAN_MINUTES:
    case SL_GREGORIAN_HOURS:
    case SL_GREGORIAN_DAYS:
    case SL_GREGORIAN_MONTHS:
    case SL_GREGORIAN_YEARS:
        return NULL;
    case SL_GREGORIAN_WEEKS:
        return sl_greg_err_weeks;
    default:
        return sl_greg_err_invalid;
    }
}

static void fixed_interval(int64_t t, int64_t len, int64_t *start, int64_t *end)
{
    *start = sl_sat_mul(sl_floor_div(t, len), len); /* below INT64_MIN only for t near it */
    *end = sl_sat_add(*start, len);
}

const char *sl_greg_interval(int64_t t, int64_t kind, int64_t *start, int64_t *end)
{
    const char *err = sl_greg_check(kind);
    if (err)
        return err;
    if (kind == SL_GREGORIAN_MINUTES) {
        fixed_interval(t, MS_MINUTE, start, end);
        return NULL;
    }
    if (kind == SL_GREGORIAN_HOURS) {
        fixed_interval(t, MS_HOUR, start, end);
        return NULL;
    }
    if (kind == SL_GREGORIAN_DAYS) {
        fixed_interval(t, MS_DAY, start, end);
        return NULL;
    }
    int64_t y;
    int m;
    civil_from_days(sl_floor_div(t, MS_DAY), &y, &m);
    int64_t d0, d1;
    if (kind == SL_GREGORIAN_MONTHS) {
        d0 = days_from_civil(y, m, 1);
        d1 = m == 12 ? days_from_civil(y + 1, 1, 1) : days_from_civil(y, m + 1, 1);
    } else {
        d0 = days_from_civil(y, 1, 1);
        d1 = days_from_civil(y + 1, 1, 1);
    }
    *start = sl_sat_mul(d0, MS_DAY);
    *end = sl_sat_mul(d1, MS_DAY);
    return NULL;
}

const char *sl_greg_expiration(int64_t now, int64_t kind, int64_t *out)
{
    int64_t start, end;
    const char *err = sl_greg_interval(now, kind, &start, &end);
    if (err)
        return err;
    *out = end == INT64_MAX ? end : end - 1;
    return NULL;
}

const char *sl_greg_duration(int64_t now, int64_t kind, int64_t *out)
{
    int64_t start, end;
    const char *err = sl_greg_interval(now, kind, &start, &end);
    if (err)
        return err;
    *out = sl_sat_sub(end, start);
    return NULL;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CSV time-series writer (see series.h). Per column, a prefix count of admissions over the key's
 * events turns every sample into one subtraction: admitted in (t - D, t] = pre[#events <= t] -
 * pre[#events <= t - D], the two positions advancing monotonically with t.
 */
#include "sim/series.h"

#include <errno.h>
#include <stdlib.h>

int sl_series_write(FILE *f, const sl_traffic *t, uint32_t key, int64_t duration, int64_t step_ms,
                    size_t ncols, const char *const *names, const uint8_t *const *dec)
{
    if (key >= t->nkeys || duration < 1 || step_ms < 1)
        return -EINVAL;
    if (t->span_ms / step_ms > SL_SERIES_MAX_ROWS)
        return -E2BIG;
    size_t nk = 0;
    for (size_t i = 0; i < t->n; i++)
        nk += t->ev[i].key == key;
    size_t *idx = malloc((nk ? nk : 1) * sizeof *idx);
    uint32_t *pre = malloc((nk + 1) * (ncols ? ncols : 1) * sizeof *pre);
    if (!idx || !pre) {
        free(idx);
        free(pre);
        return -ENOMEM;
    }
    for (size_t i = 0, j = 0; i < t->n; i++)
        if (t->ev[i].key == key)
            idx[j++] = i;
    for (size_t c = 0; c < ncols; c++) {
        uint32_t *p = pre + c * (nk + 1);
        p[0] = 0;
        for (size_t j = 0; j < nk; j++)
            p[j + 1] = p[j] + (dec[c][idx[j]] ? 1 : 0);
    }
    fprintf(f, "t_s");
    for (size_t c = 0; c < ncols; c++)
        fprintf(f, ",%s", names[c]);
    fputc('\n', f);
    size_t hi = 0, lo = 0;
    for (int64_t s = step_ms; s <= t->span_ms; s += step_ms) {
        while (hi < nk && t->ev[idx[hi]].t_ms <= s)
            hi++;
        while (lo < nk && t->ev[idx[lo]].t_ms <= s - duration)
            lo++;
        fprintf(f, "%.3f", (double)s / 1000.0);
        for (size_t c = 0; c < ncols; c++) {
            const uint32_t *p = pre + c * (nk + 1);
            fprintf(f, ",%u", p[hi] - p[lo]);
        }
        fputc('\n', f);
    }
    free(idx);
    free(pre);
    return ferror(f) ? -EIO : 0;
}

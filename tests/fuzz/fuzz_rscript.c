/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for redis/rscript's reading of a script call's answer: the first byte picks the
 * algorithm, the rest is the reply string, read record after record by sl_rscript_answer_read as
 * the store reads one. Every record inside the string is read (0 or -EPROTO) and none past it; an
 * answer read is an error the scripts give (out of range, lease not found) or a status under or
 * over the limit, with a lease id only for CONCURRENCY, no delay for CONCURRENCY, no reset_time
 * before 1970 with the engine's bounds; an answer refused leaves *resp zeroed. A broken property
 * traps; ASan catches reads past the input.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/concurrency.h"
#include "redis/rscript.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const int32_t alg = (int32_t)(data[0] % (SL_ALGORITHM_COUNT + 1));
    const char *buf = (const char *)data + 1;
    const size_t len = size - 1;
    sl_engine_config cfg;
    sl_engine_config_default(&cfg);
    const size_t rec = sl_rscript_answer_size(alg);
    CHECK((rec == 0) == (sl_rscript_of(alg) == NULL));
    const size_t n = rec ? len / rec : 0;
    for (size_t k = 0; k <= n; k++) {
        sl_response r;
        memset(&r, 0x5a, sizeof r);
        const int64_t t = (int64_t)(k * 1000) - 1000; /* one before 1970 */
        int rc = sl_rscript_answer_read(alg, buf, len, k, t, &cfg, &r);
        if (k == n) { /* past the last whole record */
            CHECK(rc == -EPROTO);
        }
        if (rc) {
            CHECK(rc == -EPROTO);
            CHECK(r.error == NULL && r.status == 0 && r.lease_id == 0 && r.limit == 0);
            continue;
        }
        if (r.error) {
            CHECK(r.error == sl_rscript_err_range || r.error == sl_conc_err_not_found);
            CHECK(r.lease_id == 0 && r.limit == 0);
            continue;
        }
        CHECK(r.status == SL_UNDER_LIMIT || r.status == SL_OVER_LIMIT);
        if (alg != SL_CONCURRENCY)
            CHECK(r.lease_id == 0);
        else
            CHECK(r.delay_ms == 0);
        if (t >= 0)
            CHECK(r.reset_time >= 0);
    }
    return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Interruptible waits for background threads (see stopwait.h). */
#include "runtime/stopwait.h"

#include <errno.h>

void sl_stopwait_deadline(struct timespec *ts, clockid_t clk, int64_t ms)
{
    clock_gettime(clk, ts);
    int64_t ns = ts->tv_nsec + (ms % 1000) * 1000000;
    ts->tv_sec += (time_t)(ms / 1000 + ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
}

bool sl_stopwait_ms(pthread_mutex_t *mu, pthread_cond_t *cv, clockid_t clk,
                    const atomic_bool *stop, int64_t ms)
{
    struct timespec ts;
    sl_stopwait_deadline(&ts, clk, ms);
    pthread_mutex_lock(mu);
    while (!atomic_load(stop))
        if (pthread_cond_timedwait(cv, mu, &ts) == ETIMEDOUT)
            break;
    bool stopped = atomic_load(stop);
    pthread_mutex_unlock(mu);
    return stopped;
}

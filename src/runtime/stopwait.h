/* SPDX-License-Identifier: Apache-2.0 */
/* Interruptible waits for background threads: sleep up to a number of milliseconds on a
 * condition variable, waking early when a stop flag is raised. One helper for the loops of
 * the membership watchers (cluster/members.c, ctlplane/k8s.c) and the etcd-watched sources
 * (config/watched.c), which each wrote the deadline arithmetic and the wait loop out again. */
#ifndef SLUICE_RUNTIME_STOPWAIT_H
#define SLUICE_RUNTIME_STOPWAIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* *ts = now on clock clk + ms (ms >= 0), normalised (0 <= tv_nsec < 1e9). */
void sl_stopwait_deadline(struct timespec *ts, clockid_t clk, int64_t ms);

/* Wait up to ms on cv (whose clock is clk: CLOCK_REALTIME unless set with
 * pthread_condattr_setclock) or until *stop is true. The caller must not hold mu; whoever
 * raises *stop does so under mu and broadcasts cv. Returns *stop. */
bool sl_stopwait_ms(pthread_mutex_t *mu, pthread_cond_t *cv, clockid_t clk,
                    const atomic_bool *stop, int64_t ms);

#endif

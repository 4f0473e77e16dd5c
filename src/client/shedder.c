/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_shedder (sluice/shed.h): the client library's worker-utilization shedder, for a service's own
 * worker pool. A thin owner of the same core sluiced runs per worker loop (runtime/shed.h), so a
 * service and sluiced shed with one logic and one set of knobs.
 */
#include <errno.h>
#include <stdlib.h>

#include "runtime/shed.h"
#include "sluice/shed.h"

struct sl_shedder {
    sl_shed core;
};

int sl_shedder_new(const sl_shedder_options *o, sl_shedder **out)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    sl_shedder_options d;
    if (!o) {
        sl_shedder_options_default(&d);
        o = &d;
    }
    if (sl_shedder_options_check(o, NULL))
        return -EINVAL;
    sl_shedder *s = malloc(sizeof *s);
    if (!s)
        return -ENOMEM;
    sl_shed_init(&s->core, o);
    *out = s;
    return 0;
}

void sl_shedder_free(sl_shedder *s)
{
    free(s);
}

int sl_shedder_observe(sl_shedder *s, int64_t now_ms, double utilization)
{
    return sl_shed_observe(&s->core, now_ms, utilization);
}

int sl_shedder_observe_workers(sl_shedder *s, int64_t now_ms, unsigned busy, unsigned total)
{
    double u = total ? (double)busy / (double)total : 0;
    return sl_shed_observe(&s->core, now_ms, u);
}

bool sl_shedder_admit(sl_shedder *s, sl_priority p)
{
    return sl_shed_admit(&s->core, p);
}

double sl_shedder_level(const sl_shedder *s)
{
    return sl_shed_level_milli(&s->core) / 1000.0;
}

double sl_shedder_fraction(const sl_shedder *s, sl_priority p)
{
    return sl_shed_fraction_at(sl_shed_level_milli(&s->core), p);
}

double sl_shedder_utilization(const sl_shedder *s)
{
    return sl_shed_util(&s->core);
}

void sl_shedder_stats_get(const sl_shedder *s, sl_shedder_stats *out)
{
    sl_shed_stats(&s->core, out);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kill -> shadow -> enforce ladder (see ladder.h): the table of limiters and the table of what
 * each switch mode does, used alike by /attempt and by Gubernator batches.
 */
#include "protect/ladder.h"

#include <stdio.h>
#include <string.h>

#define LIT(s) s, sizeof s - 1

/* One row per limiter: its metric label, the switch that governs it (with its length, from the
 * literal) and its token in the answer headers. */
static const struct {
    const char *name;
    const char *sw;
    size_t sw_len;
    const char *token;
} limiters[SL_LADDER_COUNT] = {
    [SL_LADDER_NONE] = {"none", NULL, 0, NULL},
    [SL_LADDER_RATE] = {"rate", NULL, 0, "rate"},
    [SL_LADDER_CONC] = {"concurrency", LIT("concurrency"), "concurrency"},
    [SL_LADDER_FLEET] = {"fleet", LIT("fleet"), "fleet"},
    [SL_LADDER_SHED] = {"shed", LIT("shed"), "shed"},
    [SL_LADDER_ALL] = {"all", LIT("*"), "*"},
};

/* What a switch mode does: whether the limiter runs, and what its rejection becomes. */
static const struct {
    bool runs;
    bool rejects;
    sl_ladder_event on_reject;
} rungs[3] = {
    [SL_KILLSWITCH_ENFORCE] = {true, true, SL_LADDER_REJECTED},
    [SL_KILLSWITCH_SHADOW] = {true, false, SL_LADDER_WOULD_REJECT},
    [SL_KILLSWITCH_KILLED] = {false, false, SL_LADDER_KILLSWITCH},
};

static const char *const event_names[SL_LADDER_EVENT_COUNT] = {"rejected", "would_reject",
                                                               "killswitch"};

const char *sl_ladder_name(sl_ladder_limiter lim)
{
    return (unsigned)lim < SL_LADDER_COUNT ? limiters[lim].name : "unknown";
}

const char *sl_ladder_switch(sl_ladder_limiter lim, size_t *len)
{
    if ((unsigned)lim >= SL_LADDER_COUNT) {
        *len = 0;
        return NULL;
    }
    *len = limiters[lim].sw_len;
    return limiters[lim].sw;
}

int sl_ladder_register_metrics(sl_metrics *m, sl_ladder_counters *c)
{
    memset(c, 0, sizeof *c);
    if (!m)
        return 0;
    sl_metrics_family *f;
    int rc = sl_metrics_counter_family(
        m, "sluice_protect_events_total",
        "Protection events by limiter (rate, concurrency, fleet, shed, all): rejected (429/503 or "
        "OVER_LIMIT), would_reject (shadow mode: admitted), killswitch (admitted by a switch).",
        "limiter,event", &f);
    if (rc)
        return rc;
    for (int l = SL_LADDER_RATE; l < SL_LADDER_COUNT; l++)
        for (int e = 0; e < SL_LADDER_EVENT_COUNT; e++) {
            const char *v[2] = {limiters[l].name, event_names[e]};
            c->c[l][e] = sl_metrics_counter_get(f, v, 2);
        }
    return 0;
}

void sl_ladder_init(sl_ladder *l, const sl_ladder_counters *counters)
{
    l->counters = counters;
    l->killed = 0;
    l->shadowed = 0;
}

sl_killswitch_mode sl_ladder_mode(const sl_killswitch_snap *s, const char *name, size_t len)
{
    if (sl_killswitch_snap_quiet(s))
        return SL_KILLSWITCH_ENFORCE;
    sl_killswitch_mode g = sl_killswitch_snap_global(s);
    sl_killswitch_mode m = sl_killswitch_snap_mode(s, name, len);
    return g > m ? g : m;
}

sl_killswitch_mode sl_ladder_mode_of(const sl_killswitch_snap *s, sl_ladder_limiter lim)
{
    size_t len;
    const char *sw = sl_ladder_switch(lim, &len);
    return sw ? sl_ladder_mode(s, sw, len) : SL_KILLSWITCH_ENFORCE;
}

void sl_ladder_count(const sl_ladder *l, sl_ladder_limiter lim, sl_ladder_event ev)
{
    if (l->counters && (unsigned)lim < SL_LADDER_COUNT)
        sl_metrics_counter_inc(l->counters->c[lim][ev]);
}

static void note(sl_ladder *l, sl_ladder_limiter lim, sl_ladder_event ev)
{
    if (ev == SL_LADDER_KILLSWITCH)
        l->killed |= (uint8_t)(1u << lim);
    else if (ev == SL_LADDER_WOULD_REJECT)
        l->shadowed |= (uint8_t)(1u << lim);
    sl_ladder_count(l, lim, ev);
}

bool sl_ladder_runs(sl_ladder *l, sl_ladder_limiter lim, sl_killswitch_mode m)
{
    if (rungs[m].runs)
        return true;
    note(l, lim, SL_LADDER_KILLSWITCH);
    return false;
}

bool sl_ladder_rejects(sl_ladder *l, sl_ladder_limiter lim, sl_killswitch_mode m)
{
    note(l, lim, rungs[m].on_reject);
    return rungs[m].rejects;
}

size_t sl_ladder_list(uint8_t set, char *buf, size_t cap)
{
    size_t o = 0;
    if (cap)
        buf[0] = 0;
    for (int i = SL_LADDER_RATE; i < SL_LADDER_COUNT; i++) {
        if (!(set & (1u << i)))
            continue;
        int n = snprintf(buf + o, cap - o, "%s%s", o ? ", " : "", limiters[i].token);
        if (n > 0 && (size_t)n < cap - o)
            o += (size_t)n;
    }
    return o;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The protection ladder's steps for one call (see plan.h). Each step is the same three
 * questions in the same order for every dialect, so that a switch, a shadow mode or a shed
 * counts the same whichever API the call came in by: does the limiter apply, does its switch
 * let it run (sl_ladder_runs), and when it rejects, does the rejection stand (sl_ladder_rejects).
 */
#include "protect/plan.h"

void sl_plan_start(sl_plan *pl, sl_protect *p, int worker)
{
    pl->p = p;
    pl->worker = worker;
    sl_protect_ladder(p, &pl->ladder);
    pl->ks = sl_protect_switches(p, worker);
    pl->global = sl_killswitch_snap_global(pl->ks);
}

void sl_plan_resume(sl_plan *pl, sl_protect *p, int worker, const sl_ladder *saved)
{
    pl->p = p;
    pl->worker = worker;
    pl->ladder = *saved;
    pl->ks = sl_protect_switches(p, worker);
    pl->global = sl_killswitch_snap_global(pl->ks);
}

bool sl_plan_all(sl_plan *pl)
{
    return sl_ladder_runs(&pl->ladder, SL_LADDER_ALL, pl->global);
}

sl_plan_verdict sl_plan_shed(sl_plan *pl, int prio)
{
    /* critical calls are never shed (Stripe's classes); "*" off admits before any step */
    if (!sl_protect_cfg(pl->p)->shed || prio == SL_PRIORITY_CRITICAL ||
        pl->global == SL_KILLSWITCH_KILLED)
        return SL_PLAN_PASS;
    sl_killswitch_mode m = sl_ladder_mode_of(pl->ks, SL_LADDER_SHED);
    if (!sl_ladder_runs(&pl->ladder, SL_LADDER_SHED, m) ||
        sl_protect_shed_admit(pl->p, pl->worker, (sl_priority)prio))
        return SL_PLAN_PASS;
    return sl_ladder_rejects(&pl->ladder, SL_LADDER_SHED, m) ? SL_PLAN_REJECT : SL_PLAN_SHADOW;
}

bool sl_plan_fleet(sl_plan *pl, sl_plan_lease *l)
{
    const sl_killswitch_fleet *fl = sl_killswitch_snap_fleet(pl->ks);
    if (!fl)
        return false;
    sl_killswitch_mode m = sl_ladder_mode_of(pl->ks, SL_LADDER_FLEET);
    if (!sl_ladder_runs(&pl->ladder, SL_LADDER_FLEET, m))
        return false;
    *l = (sl_plan_lease){.limit = sl_protect_fleet_limit(fl, 1), .duration_ms = fl->duration_ms,
                         .mode = m, .fleet = fl};
    return true;
}

bool sl_plan_conc(sl_plan *pl, const char *res, size_t len, sl_plan_lease *l)
{
    sl_killswitch_conc cc;
    if (!sl_killswitch_snap_concurrency(pl->ks, res, len, &cc))
        return false;
    sl_killswitch_mode m = sl_ladder_mode_of(pl->ks, SL_LADDER_CONC);
    if (!sl_ladder_runs(&pl->ladder, SL_LADDER_CONC, m))
        return false;
    *l = (sl_plan_lease){.limit = cc.limit, .duration_ms = cc.duration_ms, .mode = m};
    return true;
}

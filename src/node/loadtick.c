/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker shedder's load sampling on a libuv loop (see loadtick.h).
 */
#include "node/loadtick.h"

static void on_tick(uv_timer_t *timer)
{
    sl_loadtick *t = timer->data;
    uint64_t now = uv_hrtime();
    uint64_t idle = uv_metrics_idle_time(t->loop);
    if (t->last_ns && now > t->last_ns) {
        double elapsed = (double)(now - t->last_ns);
        double busy = 1.0 - (double)(idle - t->last_idle) / elapsed;
        if (busy < 0)
            busy = 0;
        if (busy > 1)
            busy = 1;
        sl_protect_observe(t->p, t->worker, (int64_t)(now / 1000000), busy);
    }
    t->last_ns = now;
    t->last_idle = idle;
}

void sl_loadtick_start(sl_loadtick *t, sl_protect *p, int worker, uv_loop_t *loop)
{
    const sl_protect_config *pc = sl_protect_cfg(p);
    if (!pc->shed || t->on || worker < 0 || worker >= sl_protect_workers(p))
        return;
    int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rc) {
        sl_log_warn(pc->log, "worker shedder off worker=%d: no loop idle time (%s)", worker,
                    uv_strerror(rc));
        return;
    }
    t->p = p;
    t->worker = worker;
    t->loop = loop;
    t->last_ns = 0;
    t->last_idle = 0;
    uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    uint64_t ms = pc->shed_interval_ms > 0 ? (uint64_t)pc->shed_interval_ms : 100;
    uv_timer_start(&t->timer, on_tick, ms, ms);
    uv_unref((uv_handle_t *)&t->timer);
    t->on = true;
}

void sl_loadtick_stop(sl_loadtick *t)
{
    if (!t->on)
        return;
    uv_timer_stop(&t->timer);
    uv_close((uv_handle_t *)&t->timer, NULL);
    t->on = false;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SWIM at scale on the fake transport and virtual clock of simnet.h (apart from test_swim.c so
 * each has its own time budget): in a 100-node cluster a killed node is declared dead by every
 * other node within a bound, measured for two probe intervals (the figures are printed:
 * docs/cluster.md); under 10 % random packet loss nobody is declared dead falsely over 10 minutes
 * of virtual time, and the cluster is whole again once the loss stops.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "simnet.h"

static int victim;

static int victim_dead_everywhere(sim *w)
{
    return sim_seen_as(w, victim, SL_MEMBER_DEAD) == sim_live(w);
}

/* kill one node of 100, measure until every other node has it dead */
static void kill_and_measure(unsigned probe_ms, uint64_t bound_ms)
{
    sim w;
    sl_swim_config c = {.probe_interval_ms = probe_ms, .probe_timeout_ms = probe_ms / 2};
    sim_init(&w, 100, &c, 7);
    sim_join_all(&w);
    sim_run(&w, 60000, sim_converged);
    assert_true(sim_converged(&w));
    sim_run(&w, 5000, NULL);
    uint64_t worst = 0, sum = 0;
    int runs = 3;
    for (int r = 0; r < runs; r++) {
        victim = 10 + 30 * r;
        sim_kill(&w, victim);
        uint64_t first_suspect = 0, t;
        for (t = 0; t < 120000 && !victim_dead_everywhere(&w); t += STEP) {
            sim_step(&w);
            if (!first_suspect && sim_seen_as(&w, victim, SL_MEMBER_SUSPECT))
                first_suspect = t;
        }
        assert_true(victim_dead_everywhere(&w));
        printf("# probe interval %u ms, 100 nodes: killed node-%d suspected after %llu ms, "
               "dead everywhere after %llu ms\n",
               probe_ms, victim, (unsigned long long)first_suspect, (unsigned long long)t);
        if (t > worst)
            worst = t;
        sum += t;
        assert_true(t <= bound_ms);
    }
    printf("# probe interval %u ms: mean %llu ms, worst %llu ms (bound %llu)\n", probe_ms,
           (unsigned long long)(sum / runs), (unsigned long long)worst,
           (unsigned long long)bound_ms);
    assert_int_equal(sim_false_deaths(&w), 0);
    sim_free(&w);
}

static void test_kill_detected(void **state)
{
    /* min suspicion = 4 * log10(100) * interval = 8 intervals, plus up to a probe round */
    kill_and_measure(1000, 30000);
    kill_and_measure(200, 6000);
}

static void test_loss_no_false_dead(void **state)
{
    sim w;
    sim_init(&w, 100, NULL, 3);
    sim_join_all(&w);
    sim_run(&w, 60000, sim_converged);
    assert_true(sim_converged(&w));
    w.loss = 0.10;
    uint64_t sent0 = w.sent, lost0 = w.lost;
    sim_run(&w, 600000, NULL);
    uint64_t susp = 0, refut = 0;
    unsigned lhm_max = 0;
    for (int i = 0; i < w.n; i++) {
        sl_swim_stats st;
        sl_swim_get_stats(w.node[i].s, &st);
        susp += st.suspicions;
        refut += st.refutations;
        if (st.lhm > lhm_max)
            lhm_max = st.lhm;
    }
    printf("# 10 %% loss, 100 nodes, 10 min virtual: %llu of %llu packets lost, %llu suspicions,"
           " %llu refutations, 0 false dead expected: %u\n",
           (unsigned long long)(w.lost - lost0), (unsigned long long)(w.sent - sent0),
           (unsigned long long)susp, (unsigned long long)refut, sim_false_deaths(&w));
    assert_true(susp > 0);  /* the loss was real: probes did fail */
    assert_int_equal(sim_false_deaths(&w), 0);
    /* suspicions still being refuted settle once the loss stops */
    w.loss = 0;
    sim_run(&w, 30000, sim_converged);
    assert_true(sim_converged(&w));
    assert_int_equal(sim_false_deaths(&w), 0);
    sim_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kill_detected),
        cmocka_unit_test(test_loss_no_false_dead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SWIM protocol tests on the fake transport and virtual clock of simnet.h: a 100-node cluster
 * converges through one seed; a partition heals; a suspected node refutes (also when every
 * gossiped copy of its suspicion missed it: the next probe carries it); a leaving node is seen
 * as left, not dead; a restarted node rejoins; a node that missed a join learns of the newcomer
 * from its first probe; the table and the relay queue stay bounded and bad packets are dropped
 * and counted. (Failure detection times and 10 % loss: test_swim_scale.c.)
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

static int victim_left_everywhere(sim *w)
{
    return sim_seen_as(w, victim, SL_MEMBER_LEFT) == sim_live(w);
}

static void test_converge_100(void **state)
{
    sim w;
    sim_init(&w, 100, NULL, 1);
    sim_join_all(&w);
    uint64_t t = sim_run(&w, 60000, sim_converged);
    assert_true(sim_converged(&w));
    printf("# 100 nodes joined through one seed: every node sees all 100 alive after %llu ms\n",
           (unsigned long long)t);
    /* metadata travelled with the member */
    sl_swim_member m;
    assert_int_equal(sl_swim_member_find(w.node[99].s, "node-42", &m), 0);
    assert_int_equal(m.meta_len, strlen("svc=10.0.0.42:1051"));
    assert_memory_equal(m.meta, "svc=10.0.0.42:1051", m.meta_len);
    assert_string_equal(m.addr, "10.0.0.42:7946");
    assert_int_equal(sim_false_deaths(&w), 0);
    sim_free(&w);
}

static void test_partition_heals(void **state)
{
    sim w;
    sl_swim_config c = {.pushpull_interval_ms = 10000};
    sim_init(&w, 20, &c, 5);
    sim_join_all(&w);
    sim_run(&w, 60000, sim_converged);
    assert_true(sim_converged(&w));
    for (int i = 10; i < 20; i++)
        w.node[i].group = 1;
    sim_run(&w, 60000, NULL);
    /* each half holds the other dead */
    assert_true(sim_seen_as(&w, 15, SL_MEMBER_DEAD) >= 10);
    assert_true(sim_seen_as(&w, 3, SL_MEMBER_DEAD) >= 10);
    for (int i = 10; i < 20; i++)
        w.node[i].group = 0;
    uint64_t t = sim_run(&w, 300000, sim_converged);
    assert_true(sim_converged(&w));
    printf("# 20 nodes split 10/10 for 60 s: whole again %llu ms after the partition healed\n",
           (unsigned long long)t);
    sim_free(&w);
}

/* A GOSSIP datagram saying node `who` (at incarnation inc) is suspected by node `by`. */
static size_t suspicion_pkt(sim *w, uint8_t *pkt, int who, uint32_t inc, int by)
{
    int len = sl_swimwire_put_head(pkt, SL_SWIMWIRE_MAX_UDP, SL_SWIMWIRE_GOSSIP, 0, 0, NULL, NULL,
                                   NULL);
    const char *name = w->node[who].name, *addr = w->node[who].addr, *from = w->node[by].name;
    sl_swimwire_update u = {.status = SL_MEMBER_SUSPECT, .incarnation = inc,
                            .name = {name, strlen(name)}, .addr = {addr, strlen(addr)},
                            .from = {from, strlen(from)}};
    len = sl_swimwire_put_update(pkt, SL_SWIMWIRE_MAX_UDP, (size_t)len, &u);
    assert_true(len > 0);
    return (size_t)len;
}

/* Node 2 is told node 1 is suspect; node 1 hears it and refutes with a higher incarnation. */
static void test_refutation(void **state)
{
    sim w;
    sim_init(&w, 5, NULL, 11);
    sim_join_all(&w);
    sim_run(&w, 30000, sim_converged);
    assert_true(sim_converged(&w));
    uint32_t inc0 = sl_swim_incarnation(w.node[1].s);
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
    size_t len = suspicion_pkt(&w, pkt, 1, inc0, 4);
    sl_swim_recv(w.node[2].s, w.node[4].addr, pkt, len, w.now);
    sl_swim_member m;
    assert_int_equal(sl_swim_member_find(w.node[2].s, "node-1", &m), 0);
    assert_int_equal(m.status, SL_MEMBER_SUSPECT);
    victim = 1;
    sim_run(&w, 20000, sim_converged);
    assert_true(sim_converged(&w));
    assert_true(sl_swim_incarnation(w.node[1].s) > inc0);
    sl_swim_stats st;
    sl_swim_get_stats(w.node[1].s, &st);
    assert_true(st.refutations >= 1);
    assert_int_equal(w.node[2].saw[1][SL_MEMBER_DEAD], 0);
    assert_int_equal(w.node[2].view[1], SL_MEMBER_ALIVE);
    sim_free(&w);
}

/* A suspect that missed every gossiped copy of its suspicion (the queue's λ·log N sends went out
 * while it was unreachable) must still hear it in time to refute: a probe of a suspect member
 * carries the suspicion. Node 2 is cut off for 2.5 s, long enough to be suspected and for the
 * gossip about it to run out, then the link heals: nobody may declare anybody dead. (Found by
 * tests/chaos/test_gossip_loss.py: under 10 % loss a few suspicions reached nobody's suspect.) */
static void test_suspect_hears_it_on_probe(void **state)
{
    sim w;
    sl_swim_config c = {.pushpull_interval_ms = 600000};
    sim_init(&w, 3, &c, 17);
    sim_join_all(&w);
    sim_run(&w, 30000, sim_converged);
    assert_true(sim_converged(&w));
    w.node[2].group = 1;
    victim = 2;
    sim_run(&w, 2500, NULL);
    assert_true(sim_seen_as(&w, 2, SL_MEMBER_SUSPECT) >= 1);
    w.node[2].group = 0;
    sim_run(&w, 30000, NULL);
    assert_int_equal(sim_false_deaths(&w), 0);
    assert_true(sim_converged(&w));
    sl_swim_stats st;
    sl_swim_get_stats(w.node[2].s, &st);
    assert_true(st.refutations >= 1);
    sim_free(&w);
}

/* The other half: the suspect refuted, but one member missed every copy of the refutation and
 * still holds it suspect at the old incarnation. Its probes and gossip carry that stale
 * suspicion; the suspect answers it by announcing its current incarnation again (first on the
 * ack), so the member clears the suspicion instead of declaring a live node dead. */
static void test_stale_suspicion_answered(void **state)
{
    sim w;
    sl_swim_config c = {.pushpull_interval_ms = 600000, .gossip_interval_ms = 50};
    sim_init(&w, 3, &c, 19);
    sim_join_all(&w);
    sim_run(&w, 30000, sim_converged);
    assert_true(sim_converged(&w));
    uint32_t inc0 = sl_swim_incarnation(w.node[1].s);
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
    size_t len = suspicion_pkt(&w, pkt, 1, inc0, 2);
    /* node 1 refutes while node 0 is cut off: every gossiped copy of the refutation misses it */
    w.node[0].group = 1;
    sl_swim_recv(w.node[1].s, w.node[2].addr, pkt, len, w.now);
    assert_int_equal(sl_swim_incarnation(w.node[1].s), inc0 + 1);
    sim_run(&w, 300, NULL);
    w.node[0].group = 0;
    sim_run(&w, 20, NULL);
    sl_swim_member m;
    assert_int_equal(sl_swim_member_find(w.node[0].s, "node-1", &m), 0);
    assert_int_equal(m.incarnation, inc0);
    /* now node 0 hears the old suspicion */
    sl_swim_recv(w.node[0].s, w.node[2].addr, pkt, len, w.now);
    assert_int_equal(sl_swim_member_find(w.node[0].s, "node-1", &m), 0);
    assert_int_equal(m.status, SL_MEMBER_SUSPECT);
    sim_run(&w, 60000, NULL);
    assert_int_equal(sim_false_deaths(&w), 0);
    assert_int_equal(sl_swim_member_find(w.node[0].s, "node-1", &m), 0);
    assert_int_equal(m.status, SL_MEMBER_ALIVE);
    assert_true(m.incarnation > inc0);
    assert_true(sim_converged(&w));
    sim_free(&w);
}

/* A join that every gossiped copy missed: node 1 is cut off while node 2 joins through node 0,
 * so it never hears of node 2, whose probes then reach it from a stranger. Node 1 exchanges
 * states with the prober at once instead of waiting for the next push/pull (600 s here). (Seen
 * by tests/chaos/test_gossip_loss.py: now and then a node listed a newcomer only at push/pull.) */
static void test_stranger_probe_pulls(void **state)
{
    sim w;
    sl_swim_config c = {.pushpull_interval_ms = 600000, .gossip_interval_ms = 50};
    sim_init(&w, 3, &c, 23);
    sim_join(&w, 1, 0);
    w.node[2].alive = 0;
    sim_run(&w, 30000, sim_converged);
    assert_true(sim_converged(&w));
    w.node[2].alive = 1;
    w.node[1].group = 1;
    sim_join(&w, 2, 0);
    sim_run(&w, 300, NULL);
    w.node[1].group = 0;
    sl_swim_member m;
    assert_int_not_equal(sl_swim_member_find(w.node[1].s, "node-2", &m), 0);
    uint64_t t = sim_run(&w, 30000, sim_converged);
    assert_true(sim_converged(&w));
    assert_true(t < 10000);
    assert_int_equal(sim_false_deaths(&w), 0);
    sim_free(&w);
}

static void test_leave(void **state)
{
    sim w;
    sim_init(&w, 10, NULL, 13);
    sim_join_all(&w);
    sim_run(&w, 30000, sim_converged);
    victim = 3;
    sl_swim_leave(w.node[3].s, w.now);
    sl_swim_member self;
    assert_int_equal(sl_swim_member_find(w.node[3].s, "node-3", &self), 0);
    assert_int_equal(self.status, SL_MEMBER_LEFT);
    /* the leaver keeps ticking for a moment, then stops */
    sim_run(&w, 1000, NULL);
    sim_kill(&w, 3);
    uint64_t t = 0;
    if (!victim_left_everywhere(&w))
        t = sim_run(&w, 10000, victim_left_everywhere);
    assert_true(victim_left_everywhere(&w));
    printf("# graceful leave, 10 nodes: left everywhere within %llu ms\n",
           (unsigned long long)(t + 1000));
    for (int i = 0; i < w.n; i++)
        assert_int_equal(w.node[i].saw[3][SL_MEMBER_DEAD], 0);
    sim_free(&w);
}

static int victim_alive_everywhere(sim *w)
{
    return sim_seen_as(w, victim, SL_MEMBER_ALIVE) == sim_live(w) - 1;
}

static void test_restart_rejoins(void **state)
{
    sim w;
    sim_init(&w, 10, NULL, 17);
    sim_join_all(&w);
    sim_run(&w, 30000, sim_converged);
    victim = 6;
    sim_kill(&w, 6);
    sim_run(&w, 60000, victim_dead_everywhere);
    assert_true(victim_dead_everywhere(&w));
    sim_restart(&w, 6, 0);
    uint64_t t = sim_run(&w, 30000, victim_alive_everywhere);
    assert_true(victim_alive_everywhere(&w));
    assert_true(sim_converged(&w));
    /* it had to refute its death: a higher incarnation than its first life */
    assert_true(sl_swim_incarnation(w.node[6].s) > 0);
    printf("# restarted node rejoined everywhere after %llu ms\n", (unsigned long long)t);
    sim_free(&w);
}

static void test_bounds_and_drops(void **state)
{
    sim w;
    sl_swim_config c = {.max_members = 4};
    sim_init(&w, 6, &c, 19);
    sim_join_all(&w);
    sim_run(&w, 30000, NULL);
    for (int i = 0; i < w.n; i++)
        assert_true(sl_swim_member_count(w.node[i].s) <= 4);
    sl_swim_stats st;
    sl_swim_get_stats(w.node[0].s, &st);
    assert_true(st.dropped[SL_SWIM_DROP_TABLE_FULL] > 0);

    sl_swim *s = w.node[0].s;
    uint8_t big[SL_SWIMWIRE_MAX_UDP + 10];
    memset(big, 0, sizeof big);
    sl_swim_recv(s, "x:1", big, sizeof big, w.now);
    uint8_t junk[] = "SW\x01\x63\0\0";
    sl_swim_recv(s, "x:1", junk, 6, w.now);
    uint8_t v2[] = "SW\x02\x01\0\0";
    sl_swim_recv(s, "x:1", v2, 6, w.now);
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
    int len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING, 9, 0, "someone-else",
                                   NULL, "node-1");
    sl_swim_recv(s, "x:1", pkt, (size_t)len, w.now);
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_ACK, 123456, 0, NULL, NULL, "node-1");
    sl_swim_recv(s, "x:1", pkt, (size_t)len, w.now);
    /* relays: more PING_REQs than the queue holds, for a member node 0 knows */
    sl_swim_member known = {0};
    for (size_t i = 0; i < sl_swim_member_count(s); i++)
        if (sl_swim_member_at(s, i, &known) == 0 && !known.is_self &&
            known.status == SL_MEMBER_ALIVE)
            break;
    assert_false(known.is_self);
    char kname[80], kaddr[80];
    snprintf(kname, sizeof kname, "%s", known.name);
    snprintf(kaddr, sizeof kaddr, "%s", known.addr);
    for (int i = 0; i < 100; i++) {
        len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING_REQ, (uint32_t)i, 0,
                                   kname, kaddr, "node-1");
        sl_swim_recv(s, "10.0.0.1:7946", pkt, (size_t)len, w.now);
    }
    /* a PING_REQ towards an address nobody holds, or a known name at another address: no relay */
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING_REQ, 7, 0, "node-99",
                               "10.9.9.9:7946", "node-1");
    sl_swim_recv(s, "10.0.0.1:7946", pkt, (size_t)len, w.now);
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING_REQ, 8, 0, kname,
                               "10.9.9.9:7946", "node-1");
    sl_swim_recv(s, "10.0.0.1:7946", pkt, (size_t)len, w.now);
    sl_swim_get_stats(s, &st);
    assert_int_equal(st.dropped[SL_SWIM_DROP_OVERSIZE], 1);
    assert_int_equal(st.dropped[SL_SWIM_DROP_MALFORMED], 1);
    assert_int_equal(st.dropped[SL_SWIM_DROP_VERSION], 1);
    assert_int_equal(st.dropped[SL_SWIM_DROP_WRONG_NODE], 1);
    assert_true(st.dropped[SL_SWIM_DROP_UNEXPECTED] >= 1);
    assert_int_equal(st.dropped[SL_SWIM_DROP_QUEUE_FULL], 100 - 64);
    assert_int_equal(st.dropped[SL_SWIM_DROP_UNKNOWN_TARGET], 2);
    /* a stream message as a datagram, a datagram as a stream */
    assert_true(sl_swim_recv_stream(s, "x:1", pkt, (size_t)len, w.now, NULL, NULL) < 0);
    sim_free(&w);
}

static int changes;
static void count_change(void *ctx, const sl_swim_member *m, int old)
{
    changes++;
}

static void test_api(void **state)
{
    sl_swim_config c = {.name = "a", .addr = "127.0.0.1:1", .cb = {.on_change = count_change}};
    sl_swim *s;
    char err[128];
    assert_int_equal(sl_swim_new(&c, 0, &s, err, sizeof err), 0);
    assert_int_equal(changes, 1);  /* ourselves */
    assert_int_equal(sl_swim_member_count(s), 1);
    sl_swim_member m;
    assert_int_equal(sl_swim_member_at(s, 0, &m), 0);
    assert_true(m.is_self);
    assert_string_equal(m.name, "a");
    assert_int_equal(sl_swim_member_at(s, 1, &m), -ENOENT);
    uint64_t v = sl_swim_version(s);
    assert_int_equal(sl_swim_set_meta(s, (const uint8_t *)"x", 1, 5), 0);
    assert_true(sl_swim_version(s) > v);
    assert_int_equal(sl_swim_incarnation(s), 1);
    uint8_t big[SL_SWIM_MAX_META + 1] = {0};
    assert_int_equal(sl_swim_set_meta(s, big, sizeof big, 5), -EINVAL);
    const char *bad[] = {"has space:1"};
    assert_int_equal(sl_swim_join(s, bad, 1, 5), -EINVAL);
    assert_string_equal(sl_member_status_name(SL_MEMBER_SUSPECT), "suspect");
    assert_string_equal(sl_swim_drop_name(SL_SWIM_DROP_DECRYPT), "decrypt");
    sl_swim_free(s);
    sl_swim_config bad_name = {.name = "", .addr = "x:1"};
    assert_int_equal(sl_swim_new(&bad_name, 0, &s, err, sizeof err), -EINVAL);
    sl_swim_config bad_meta = {.name = "a", .addr = "x:1", .meta = big, .meta_len = sizeof big};
    assert_int_equal(sl_swim_new(&bad_meta, 0, &s, err, sizeof err), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api),
        cmocka_unit_test(test_bounds_and_drops),
        cmocka_unit_test(test_refutation),
        cmocka_unit_test(test_suspect_hears_it_on_probe),
        cmocka_unit_test(test_stale_suspicion_answered),
        cmocka_unit_test(test_stranger_probe_pulls),
        cmocka_unit_test(test_leave),
        cmocka_unit_test(test_restart_rejoins),
        cmocka_unit_test(test_partition_heals),
        cmocka_unit_test(test_converge_100),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

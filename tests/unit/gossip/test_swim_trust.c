/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swim trust tests (fake transport and virtual clock, tests/unit/gossip/simnet.h): what a forger
 * who can send datagrams to members can and cannot do to the table. Incarnations saturate at
 * UINT32_MAX instead of wrapping; a DEAD at 0xFFFFFFFF does not keep a live member out; a forged
 * ALIVE moving a member to another address, or giving it other metadata, is contradicted by the
 * member itself; updates with a bad address or metadata (a service that is not a numeric ip:port)
 * are dropped with their whole packet and counted; a PING_REQ does not reflect to unknown
 * addresses; a ping from a stranger gets our own record, not the table; a sealed packet whose
 * source is not its sealed sender is dropped. Each of these failed on the code before them.
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

/* One GOSSIP datagram carrying one update. */
static size_t news(uint8_t *pkt, uint8_t status, uint32_t inc, const char *name, const char *addr,
                   const char *meta)
{
    int len = sl_swimwire_put_head(pkt, SL_SWIMWIRE_MAX_UDP, SL_SWIMWIRE_GOSSIP, 0, 0, NULL, NULL,
                                   NULL);
    sl_swimwire_update u = {.status = status, .incarnation = inc, .name = {name, strlen(name)},
                            .addr = {addr, strlen(addr)}, .from = {"", 0},
                            .meta = (const uint8_t *)meta, .meta_len = meta ? strlen(meta) : 0};
    len = sl_swimwire_put_update(pkt, SL_SWIMWIRE_MAX_UDP, (size_t)len, &u);
    assert_true(len > 0);
    return (size_t)len;
}

/* Node `to` hears the update from node `via`'s address (second-hand news). */
static void tell(sim *w, int to, int via, uint8_t status, uint32_t inc, const char *name,
                 const char *addr, const char *meta)
{
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
    size_t len = news(pkt, status, inc, name, addr, meta);
    sl_swim_recv(w->node[to].s, w->node[via].addr, pkt, len, w->now);
}

static int victim;

/* every other live node holds the victim alive at its own address */
static int victim_ok(sim *w)
{
    for (int i = 0; i < w->n; i++) {
        if (i == victim || !w->node[i].alive)
            continue;
        sl_swim_member m;
        if (sl_swim_member_find(w->node[i].s, w->node[victim].name, &m) != 0 ||
            m.status != SL_MEMBER_ALIVE || strcmp(m.addr, w->node[victim].addr) != 0)
            return 0;
    }
    return 1;
}

static void converged(sim *w, int n, uint64_t seed)
{
    sim_init(w, n, NULL, seed);
    sim_join_all(w);
    sim_run(w, 30000, sim_converged);
    assert_true(sim_converged(w));
}

/* A suspicion of ourselves at 0xFFFFFFFF: the refutation stays at 0xFFFFFFFF (it wrapped to 0,
 * which nobody took over the suspicion). */
static void test_incarnation_saturates(void **state)
{
    sim w;
    converged(&w, 4, 31);
    victim = 1;
    tell(&w, 1, 2, SL_MEMBER_SUSPECT, UINT32_MAX, "node-1", w.node[1].addr, NULL);
    assert_true(sl_swim_incarnation(w.node[1].s) == UINT32_MAX);
    /* leaving and new metadata at the ceiling stay there too */
    assert_int_equal(sl_swim_set_meta(w.node[1].s, (const uint8_t *)"svc=10.0.0.1:1052", 17,
                                      w.now), 0);
    assert_true(sl_swim_incarnation(w.node[1].s) == UINT32_MAX);
    sim_run(&w, 10000, NULL);
    assert_true(victim_ok(&w));
    sim_free(&w);
}

/* A forged DEAD at 0xFFFFFFFF, told to every other member again and again, does not keep a live
 * member out: it refutes at the ceiling, first-hand, and second-hand news at the ceiling cannot
 * undo that. (Before: its refutation wrapped to 0 and it stayed dead everywhere.) */
static void test_dead_at_ceiling_does_not_lock_out(void **state)
{
    sim w;
    converged(&w, 5, 37);
    victim = 1;
    for (int i = 2; i < 5; i++)
        tell(&w, i, i == 4 ? 3 : 4, SL_MEMBER_DEAD, UINT32_MAX, "node-1", w.node[1].addr, NULL);
    sl_swim_member m;
    assert_int_equal(sl_swim_member_find(w.node[2].s, "node-1", &m), 0);
    assert_int_equal(m.status, SL_MEMBER_DEAD);
    uint64_t t = sim_run(&w, 20000, victim_ok);
    assert_true(victim_ok(&w));
    assert_true(sl_swim_incarnation(w.node[1].s) == UINT32_MAX);
    printf("# DEAD at 0xFFFFFFFF: alive everywhere again after %llu ms\n", (unsigned long long)t);
    /* the forger keeps at it: second-hand DEAD/SUSPECT at the ceiling no longer count */
    for (int round = 0; round < 20; round++) {
        for (int i = 2; i < 5; i++) {
            tell(&w, i, 4 - (i == 4), SL_MEMBER_DEAD, UINT32_MAX, "node-1", w.node[1].addr, NULL);
            tell(&w, i, 4 - (i == 4), SL_MEMBER_SUSPECT, UINT32_MAX, "node-1", w.node[1].addr,
                 NULL);
            assert_true(victim_ok(&w));
        }
        sim_run(&w, 500, NULL);
        assert_true(victim_ok(&w));
    }
    /* and a real death at the ceiling is still found by the members' own probes */
    sim_kill(&w, 1);
    sim_run(&w, 60000, NULL);
    for (int i = 2; i < 5; i++) {
        assert_int_equal(sl_swim_member_find(w.node[i].s, "node-1", &m), 0);
        assert_int_equal(m.status, SL_MEMBER_DEAD);
    }
    sim_free(&w);
}

/* A forged ALIVE with the member's name, a higher incarnation and another address moves it on the
 * node told, but the member hears it and contradicts it: everyone holds the real address again.
 * The same at 0xFFFFFFFF, and with other metadata. (Before: the member ignored news about itself
 * while alive, and stayed moved everywhere.) */
static void test_forged_alive_is_contradicted(void **state)
{
    sim w;
    converged(&w, 5, 41);
    victim = 1;
    uint32_t inc = sl_swim_incarnation(w.node[1].s);
    tell(&w, 2, 4, SL_MEMBER_ALIVE, inc + 1, "node-1", "10.0.0.99:7946", "svc=10.0.0.99:1051");
    sl_swim_member m;
    assert_int_equal(sl_swim_member_find(w.node[2].s, "node-1", &m), 0);
    assert_string_equal(m.addr, "10.0.0.99:7946");
    uint64_t t = sim_run(&w, 20000, victim_ok);
    assert_true(victim_ok(&w));
    sl_swim_stats st;
    sl_swim_get_stats(w.node[1].s, &st);
    assert_true(st.refuted_news >= 1);
    printf("# forged ALIVE moving a member: back everywhere after %llu ms\n", (unsigned long long)t);

    tell(&w, 3, 4, SL_MEMBER_ALIVE, UINT32_MAX, "node-1", "10.0.0.98:7946", NULL);
    assert_int_equal(sl_swim_member_find(w.node[3].s, "node-1", &m), 0);
    assert_string_equal(m.addr, "10.0.0.98:7946");
    sim_run(&w, 20000, victim_ok);
    assert_true(victim_ok(&w));
    assert_true(sl_swim_incarnation(w.node[1].s) == UINT32_MAX);
    /* at the ceiling, a second-hand ALIVE can no longer move it at all */
    tell(&w, 3, 4, SL_MEMBER_ALIVE, UINT32_MAX, "node-1", "10.0.0.97:7946", NULL);
    assert_true(victim_ok(&w));

    /* other metadata at the same address */
    victim = 2;
    inc = sl_swim_incarnation(w.node[2].s);
    tell(&w, 3, 4, SL_MEMBER_ALIVE, inc + 5, "node-2", w.node[2].addr, "svc=10.0.0.66:1051");
    sim_run(&w, 20000, NULL);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sl_swim_member_find(w.node[i].s, "node-2", &m), 0);
        assert_int_equal(m.meta_len, strlen("svc=10.0.0.2:1051"));
        assert_memory_equal(m.meta, "svc=10.0.0.2:1051", m.meta_len);
    }
    assert_true(sl_swim_incarnation(w.node[2].s) > inc + 5);
    sim_free(&w);
}

/* Members with a bad gossip address or metadata are not taken, and their whole packet goes. */
static void test_meta_validated(void **state)
{
    sim w;
    converged(&w, 3, 43);
    sl_swim *s = w.node[0].s;
    size_t n0 = sl_swim_member_count(s);
    const char *bad_meta[] = {
        "service=127.0.0.1:19999x", "service=evil.example:1051", "service=10.0.0.1:0",
        "service=10.0.0.1:70000", "service=10.0.0.1", "role=admin", "service=10.0.0.1:1\nservice=10.0.0.2:1",
        "noequals", "Key=1", "x=\x01", "=1",
    };
    for (size_t i = 0; i < sizeof bad_meta / sizeof *bad_meta; i++)
        tell(&w, 0, 1, SL_MEMBER_ALIVE, 0, "fake", "10.0.0.50:7946", bad_meta[i]);
    tell(&w, 0, 1, SL_MEMBER_ALIVE, 0, "fake", "fake.example:7946", NULL);
    tell(&w, 0, 1, SL_MEMBER_ALIVE, 0, "fake", "10.0.0.50", NULL);
    sl_swim_member m;
    assert_int_equal(sl_swim_member_find(s, "fake", &m), -ENOENT);
    assert_int_equal(sl_swim_member_count(s), n0);
    sl_swim_stats st;
    sl_swim_get_stats(s, &st);
    assert_int_equal(st.dropped[SL_SWIM_DROP_META], sizeof bad_meta / sizeof *bad_meta + 2);

    /* one bad update spoils the packet: the good one beside it is not taken either */
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
    size_t len = news(pkt, SL_MEMBER_ALIVE, 0, "good", "10.0.0.51:7946", "service=10.0.0.51:1051");
    sl_swimwire_update u = {.status = SL_MEMBER_ALIVE, .name = {"bad", 3},
                            .addr = {"10.0.0.52:7946", 14}, .from = {"", 0},
                            .meta = (const uint8_t *)"service=x", .meta_len = 9};
    int r = sl_swimwire_put_update(pkt, sizeof pkt, len, &u);
    assert_true(r > 0);
    sl_swim_recv(s, w.node[1].addr, pkt, (size_t)r, w.now);
    assert_int_equal(sl_swim_member_find(s, "good", &m), -ENOENT);
    /* and the same over a stream */
    int sr = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PUSH, 0, 0, NULL, NULL, NULL);
    sr = sl_swimwire_put_update(pkt, sizeof pkt, (size_t)sr, &u);
    assert_int_equal(sl_swim_recv_stream(s, "10.0.0.1:5555", pkt, (size_t)sr, w.now, NULL, NULL),
                     -EBADMSG);
    /* the control: well-formed metadata is taken */
    tell(&w, 0, 1, SL_MEMBER_ALIVE, 0, "good", "10.0.0.51:7946",
         "service=10.0.0.51:1051\nrole=limiter\nzone=eu-1");
    assert_int_equal(sl_swim_member_find(s, "good", &m), 0);
    tell(&w, 0, 1, SL_MEMBER_ALIVE, 0, "good6", "[::1]:7946", "service=[::1]:1051\n");
    assert_int_equal(sl_swim_member_find(s, "good6", &m), 0);
    sim_free(&w);
}

/* --- a lone node with a capturing transport */

static int sends, streams;
static char last_to[80];
static size_t stream_updates;

static void cap_send(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    (void)ctx;
    (void)p;
    (void)len;
    sends++;
    snprintf(last_to, sizeof last_to, "%s", addr);
}

static void cap_stream(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    (void)ctx;
    (void)addr;
    sl_swimwire_msg msg;
    const char *why;
    assert_int_equal(sl_swimwire_decode(p, len, 1 << 20, &msg, &why), 0);
    streams++;
    stream_updates = msg.n_updates;
}

static void test_stranger_and_relay(void **state)
{
    sl_swim_config c = {.name = "me", .addr = "10.0.0.1:7946",
                        .cb = {NULL, cap_send, cap_stream, NULL, sim_check_member}};
    sl_swim *s;
    char err[128];
    assert_int_equal(sl_swim_new(&c, 1000, &s, err, sizeof err), 0);
    /* three members in the table */
    uint8_t pkt[SL_SWIMWIRE_MAX_UDP];
    for (int i = 2; i < 5; i++) {
        char name[16], addr[32];
        snprintf(name, sizeof name, "m%d", i);
        snprintf(addr, sizeof addr, "10.0.0.%d:7946", i);
        size_t len = news(pkt, SL_MEMBER_ALIVE, 0, name, addr, NULL);
        sl_swim_recv(s, addr, pkt, len, 1000);
    }
    assert_int_equal(sl_swim_member_count(s), 4);
    /* a stranger's ping: an ack, and a push of our own record only */
    int len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING, 5, 0, "me", NULL, "who");
    sends = streams = 0;
    sl_swim_recv(s, "192.0.2.7:9999", pkt, (size_t)len, 2000);
    assert_int_equal(streams, 1);
    assert_int_equal(stream_updates, 1);
    /* PING_REQ: relayed towards a known member at its address, never elsewhere */
    sends = 0;
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING_REQ, 6, 0, "m2", "10.0.0.2:7946",
                               "m3");
    sl_swim_recv(s, "10.0.0.3:7946", pkt, (size_t)len, 3000);
    assert_int_equal(sends, 1);
    assert_string_equal(last_to, "10.0.0.2:7946");
    sends = 0;
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING_REQ, 7, 0, "m2", "198.51.100.1:53",
                               "m3");
    sl_swim_recv(s, "10.0.0.3:7946", pkt, (size_t)len, 3000);
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING_REQ, 8, 0, "nobody",
                               "198.51.100.1:53", "m3");
    sl_swim_recv(s, "10.0.0.3:7946", pkt, (size_t)len, 3000);
    assert_int_equal(sends, 0);
    /* a sealed packet whose source is not its sealed sender */
    len = sl_swimwire_put_head(pkt, sizeof pkt, SL_SWIMWIRE_PING, 9, 0, "me", NULL, "m2");
    sl_swim_recv_sealed(s, "10.0.0.3:7946", "m3", pkt, (size_t)len, 3000);
    sl_swim_stats st;
    sl_swim_get_stats(s, &st);
    assert_int_equal(st.dropped[SL_SWIM_DROP_UNKNOWN_TARGET], 2);
    assert_int_equal(st.dropped[SL_SWIM_DROP_SENDER], 1);
    assert_int_equal(sends, 0);
    sl_swim_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incarnation_saturates),
        cmocka_unit_test(test_dead_at_ceiling_does_not_lock_out),
        cmocka_unit_test(test_forged_alive_is_contradicted),
        cmocka_unit_test(test_meta_validated),
        cmocka_unit_test(test_stranger_and_relay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

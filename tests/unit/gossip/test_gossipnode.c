/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gossipnode tests, over real loopback sockets (each wait is for an event, with a generous
 * deadline, never a fixed sleep): three nodes join through one seed; the gossip membership
 * source (cluster/members.c, kind gossip) reports the members' service addresses, and drops a
 * member that leaves gracefully, and lists limiters only (a proxy in the overlay is not a
 * Gubernator peer); the member table copy carries names, addresses and metadata;
 * nodes with a shared key ring hear each other and drop a node with another key (counted as
 * decrypt); a bad address or key ring file stops the start with a reason.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../support/freeport.h"

#include "gossip/gossipnode.h"
#include "cluster/members.h"
#include "gossip/swimmeta.h"

#define K1 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define K2 "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

typedef struct node {
    char gaddr[32], svc[32];
    uint8_t meta[SL_SWIM_MAX_META];
    int meta_len;
    sl_gossipnode *g;
} node;

static void start_role(node *n, int i, const char *seed, const char *ring, const char *role)
{
    snprintf(n->gaddr, sizeof n->gaddr, "127.0.0.1:%d", sl_test_free_port());
    snprintf(n->svc, sizeof n->svc, "10.9.0.%d:1051", i);
    n->meta_len = sl_swimmeta_put(n->meta, sizeof n->meta, 0, "service", n->svc);
    n->meta_len = sl_swimmeta_put(n->meta, sizeof n->meta, (size_t)n->meta_len, "role", role);
    const char *seeds[1] = {seed};
    sl_gossipnode_config c = {
        .addr = n->gaddr,
        .seeds = seeds,
        .n_seeds = seed ? 1 : 0,
        .keyring_file = ring,
        .meta = n->meta,
        .meta_len = (size_t)n->meta_len,
        .tun = {.probe_interval_ms = 100, .probe_timeout_ms = 50, .gossip_interval_ms = 20,
                .pushpull_interval_ms = 1000},
    };
    char err[256] = "";
    int rc = sl_gossipnode_start(&c, &n->g, err, sizeof err);
    if (rc)
        fail_msg("start: %s", err);
}

static void start(node *n, int i, const char *seed, const char *ring)
{
    start_role(n, i, seed, ring, "limiter");
}

typedef struct recorder {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char list[1024];
} recorder;

static void on_change(void *ud, const char *const *addrs, size_t n)
{
    recorder *r = ud;
    pthread_mutex_lock(&r->mu);
    r->list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        strcat(r->list, i ? "," : "");
        strcat(r->list, addrs[i]);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Wait (up to 10 s) until the recorded list is `want`. */
static bool wait_list(recorder *r, const char *want)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&r->mu);
    while (strcmp(r->list, want))
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts))
            break;
    bool ok = strcmp(r->list, want) == 0;
    if (!ok)
        fprintf(stderr, "list %s, want %s\n", r->list, want);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

/* Poll (every 10 ms, up to 10 s) until node g sees `alive` members alive. */
static bool wait_alive(sl_gossipnode *g, unsigned alive)
{
    for (int i = 0; i < 1000; i++) {
        sl_swim_stats st;
        sl_gossipnode_stats(g, &st);
        if (st.members[SL_MEMBER_ALIVE] == alive)
            return true;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void test_join_members_leave(void **state)
{
    node n[3];
    start(&n[0], 0, NULL, NULL);
    start(&n[1], 1, n[0].gaddr, NULL);
    start(&n[2], 2, n[0].gaddr, NULL);
    recorder r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, ""};
    sl_members_config mc = {.kind = SL_MEMBERS_GOSSIP, .gossip = n[1].g, .on_change = on_change,
                            .ud = &r};
    sl_members *m;
    assert_int_equal(sl_members_start(&mc, &m), 0);
    assert_true(wait_list(&r, "10.9.0.0:1051,10.9.0.1:1051,10.9.0.2:1051"));

    /* n[1]'s list is complete; n[2] may learn of n[1] a moment later */
    assert_true(wait_alive(n[2].g, 3));
    sl_gossipnode_member *v;
    uint64_t version = 0;
    int cnt = sl_gossipnode_members(n[2].g, &v, &version);
    assert_int_equal(cnt, 3);
    assert_true(version > 0);
    int selves = 0;
    for (int i = 0; i < cnt; i++) {
        char svc[64], role[16];
        assert_true(sl_swimmeta_get(v[i].meta, v[i].meta_len, "service", svc, sizeof svc) > 0);
        assert_true(sl_swimmeta_get(v[i].meta, v[i].meta_len, "role", role, sizeof role) > 0);
        assert_string_equal(role, "limiter");
        assert_string_equal(v[i].name, v[i].addr); /* the name defaults to the address */
        selves += v[i].is_self;
        if (v[i].is_self)
            assert_string_equal(svc, n[2].svc);
    }
    assert_int_equal(selves, 1);
    free(v);

    /* a graceful stop: LEFT reaches the others, the source drops its service address */
    sl_gossipnode_stop(n[2].g);
    assert_true(wait_list(&r, "10.9.0.0:1051,10.9.0.1:1051"));
    sl_swim_stats st;
    sl_gossipnode_stats(n[1].g, &st);
    assert_int_equal(st.members[SL_MEMBER_LEFT], 1);
    assert_int_equal(st.members[SL_MEMBER_DEAD], 0);
    /* The join and the leave can both finish (push/pull, piggybacked LEFT) before n[1]'s
     * first probe round: wait for one rather than assume it happened (up to 10 s). */
    for (int i = 0; i < 1000 && !(st.packets_received > 0 && st.bytes_sent > 0 &&
                                  st.probes_sent > 0); i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        sl_gossipnode_stats(n[1].g, &st);
    }
    assert_true(st.packets_received > 0 && st.bytes_sent > 0 && st.probes_sent > 0);
    /* stopped: the table is still readable */
    sl_gossipnode_stats(n[2].g, &st);
    assert_int_equal(st.members[SL_MEMBER_LEFT], 1);
    sl_members_stop(m);
    for (int i = 0; i < 3; i++)
        sl_gossipnode_free(n[i].g);
}

/* A proxy in the overlay is a member, not a Gubernator peer: the gossip source lists limiters. */
static void test_source_lists_limiters_only(void **state)
{
    node n[3];
    start(&n[0], 0, NULL, NULL);
    start_role(&n[1], 1, n[0].gaddr, NULL, "proxy");
    start(&n[2], 2, n[0].gaddr, NULL);
    assert_true(wait_alive(n[0].g, 3));
    recorder r = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, ""};
    sl_members_config mc = {.kind = SL_MEMBERS_GOSSIP, .gossip = n[0].g, .on_change = on_change,
                            .ud = &r};
    sl_members *m;
    assert_int_equal(sl_members_start(&mc, &m), 0);
    assert_true(wait_list(&r, "10.9.0.0:1051,10.9.0.2:1051"));
    sl_members_stop(m);
    for (int i = 0; i < 3; i++)
        sl_gossipnode_free(n[i].g);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_keyring(void **state)
{
    char ring[] = "/tmp/sl_gossip_ringXXXXXX", other[] = "/tmp/sl_gossip_otherXXXXXX";
    close(mkstemp(ring));
    close(mkstemp(other));
    write_file(ring, K1 "\n");
    write_file(other, K2 "\n");
    node n[3];
    start(&n[0], 0, NULL, ring);
    start(&n[1], 1, n[0].gaddr, ring);
    start(&n[2], 2, n[0].gaddr, other);
    assert_true(wait_alive(n[0].g, 2));
    assert_true(wait_alive(n[1].g, 2));
    sl_swim_stats st;
    /* the outsider keeps knocking (join retries): its packets do not open */
    for (int i = 0; i < 1000; i++) {
        sl_gossipnode_stats(n[0].g, &st);
        if (st.dropped[SL_SWIM_DROP_DECRYPT] > 0)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_true(st.dropped[SL_SWIM_DROP_DECRYPT] > 0);
    sl_gossipnode_stats(n[2].g, &st);
    assert_int_equal(st.members[SL_MEMBER_ALIVE], 1);
    /* the outsider learns K1 (second: it still seals with K2), the others K2: all meet */
    write_file(other, K2 "\n" K1 "\n");
    write_file(ring, K1 "\n" K2 "\n");
    char err[256];
    for (int i = 0; i < 3; i++)
        assert_int_equal(sl_gossipnode_reload_keyring(n[i].g, err, sizeof err), 0);
    for (int i = 0; i < 3; i++)
        assert_true(wait_alive(n[i].g, 3));
    /* a bad ring on reload keeps the current one */
    write_file(other, "short\n");
    assert_int_equal(sl_gossipnode_reload_keyring(n[2].g, err, sizeof err), -EINVAL);
    for (int i = 0; i < 3; i++)
        sl_gossipnode_free(n[i].g);
    unlink(ring);
    unlink(other);
}

static void test_bad_config(void **state)
{
    sl_gossipnode *g;
    char err[256];
    sl_gossipnode_config c = {.addr = "localhost:x"};
    assert_int_equal(sl_gossipnode_start(&c, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "not a numeric ip:port"));
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", sl_test_free_port());
    c = (sl_gossipnode_config){.addr = addr, .keyring_file = "/nonexistent/ring"};
    assert_true(sl_gossipnode_start(&c, &g, err, sizeof err) < 0);
    assert_non_null(strstr(err, "/nonexistent/ring"));
    const char *seeds[] = {"not an address"};
    c = (sl_gossipnode_config){.addr = addr, .seeds = seeds, .n_seeds = 1};
    assert_int_equal(sl_gossipnode_start(&c, &g, err, sizeof err), -EINVAL);
    /* authenticated by default: off loopback, no key ring is a refusal naming the options (it
     * happens before any socket is bound) */
    c = (sl_gossipnode_config){.addr = "192.0.2.1:7946"};
    assert_int_equal(sl_gossipnode_start(&c, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--gossip-keyring-file"));
    assert_non_null(strstr(err, "--gossip-insecure"));
    c = (sl_gossipnode_config){.addr = "[2001:db8::1]:7946"};
    assert_int_equal(sl_gossipnode_start(&c, &g, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "--gossip-keyring-file"));
    sl_gossipnode_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_join_members_leave),
        cmocka_unit_test(test_source_lists_limiters_only),
        cmocka_unit_test(test_keyring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

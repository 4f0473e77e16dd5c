/* SPDX-License-Identifier: Apache-2.0 */
/*
 * redis/rslots (Redis Cluster routing, sans-I/O): CRC16 against the Redis Cluster
 * specification's check value and known key slots, the hash-tag rules of the specification's
 * examples, the slot table read from CLUSTER SLOTS replies (given as RESP bytes and read by
 * hiredis's own reader, as the store receives them), bad replies refused and leaving the table
 * empty, the node bound, MOVED / ASK answers and what each does to the table, and the rate limit
 * on whole-table refreshes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "redis/rslots.h"

static unsigned slot_of(const char *k)
{
    return sl_rslots_key_slot(k, strlen(k));
}

static void test_crc16_vectors(void **state)
{
    (void)state;
    assert_int_equal(sl_rslots_crc16("123456789", 9), 0x31C3); /* the spec's check value */
    assert_int_equal(sl_rslots_crc16("", 0), 0);
    /* CLUSTER KEYSLOT of well-known keys */
    assert_int_equal(slot_of("foo"), 12182);
    assert_int_equal(slot_of("bar"), 5061);
    assert_int_equal(slot_of("hello"), 866);
    assert_int_equal(slot_of("123456789"), 0x31C3 & 16383);
}

static void test_hash_tags(void **state)
{
    (void)state;
    /* a tag: only what lies between the first '{' and the first '}' after it */
    assert_int_equal(slot_of("{user1000}.following"), slot_of("user1000"));
    assert_int_equal(slot_of("{user1000}.followers"), slot_of("user1000"));
    assert_int_equal(slot_of("foo{bar}{zap}"), slot_of("bar"));
    assert_int_equal(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    assert_int_equal(slot_of("x{foo}"), slot_of("foo"));
    /* an empty tag, or no '}' after the '{': the whole key */
    assert_int_equal(slot_of("foo{}{bar}"), sl_rslots_crc16("foo{}{bar}", 10) & 16383);
    assert_int_equal(slot_of("foo{bar"), sl_rslots_crc16("foo{bar", 7) & 16383);
    assert_int_equal(slot_of("}foo{"), sl_rslots_crc16("}foo{", 5) & 16383);
    /* the store's keys: sl:{len:name:key}, and the keys beside them, share a slot */
    assert_int_equal(slot_of("sl:{4:name:k1}"), slot_of("4:name:k1"));
    assert_int_equal(slot_of("sl:{4:name:k1}|log"), slot_of("sl:{4:name:k1}"));
    /* a key holding a '}' ends its tag there */
    assert_int_equal(slot_of("sl:{1:a:b}c}"), slot_of("1:a:b"));
}

/* Read RESP bytes with hiredis's reader (the caller frees the reply). */
static redisReply *resp(const char *bytes)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, bytes, strlen(bytes)), REDIS_OK);
    void *out = NULL;
    assert_int_equal(redisReaderGetReply(rd, &out), REDIS_OK);
    assert_non_null(out);
    redisReaderFree(rd);
    return out;
}

/* Three masters with one replica each, as redis-cli --cluster create makes them. */
static const char three[] =
    "*3\r\n"
    "*4\r\n:0\r\n:5460\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$4\r\naaaa\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7004\r\n$4\r\nbbbb\r\n"
    "*4\r\n:5461\r\n:10922\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$4\r\ncccc\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7005\r\n$4\r\ndddd\r\n"
    "*3\r\n:10923\r\n:16383\r\n"
    "*4\r\n$0\r\n\r\n:7002\r\n$4\r\neeee\r\n*0\r\n";

static void test_from_cluster_slots(void **state)
{
    (void)state;
    sl_rslots *t = malloc(sizeof *t);
    assert_non_null(t);
    sl_rslots_init(t, 1000);
    assert_null(sl_rslots_owner(t, 0));
    redisReply *r = resp(three);
    assert_int_equal(sl_rslots_from_reply(t, r, "10.0.0.9"), 0);
    freeReplyObject(r);
    assert_int_equal(t->n_nodes, 3);
    assert_int_equal(sl_rslots_owner(t, 0)->port, 7000);
    assert_int_equal(sl_rslots_owner(t, 5460)->port, 7000);
    assert_int_equal(sl_rslots_owner(t, 5461)->port, 7001);
    assert_int_equal(sl_rslots_owner(t, 10922)->port, 7001);
    assert_int_equal(sl_rslots_owner(t, 16383)->port, 7002);
    /* an empty host: the server that answered */
    assert_string_equal(sl_rslots_owner(t, 16383)->host, "10.0.0.9");
    assert_string_equal(sl_rslots_owner(t, 0)->host, "127.0.0.1");
    assert_null(sl_rslots_owner(t, 16384));
    /* a ranges left out stay unserved; a second reply replaces the first */
    r = resp("*1\r\n*3\r\n:100\r\n:200\r\n*2\r\n$3\r\n::1\r\n:7003\r\n");
    assert_int_equal(sl_rslots_from_reply(t, r, NULL), 0);
    freeReplyObject(r);
    assert_int_equal(t->n_nodes, 1);
    assert_null(sl_rslots_owner(t, 99));
    assert_string_equal(sl_rslots_owner(t, 150)->host, "::1");
    assert_null(sl_rslots_owner(t, 201));
    free(t);
}

static void test_bad_replies(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "-ERR This instance has cluster support disabled\r\n",
        ":5\r\n",
        "*1\r\n:1\r\n",
        "*1\r\n*2\r\n:0\r\n:1\r\n",                                           /* no master */
        "*1\r\n*3\r\n:10\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n",                  /* reversed */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n",               /* past 16383 */
        "*1\r\n*3\r\n:-1\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n",
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n:0\r\n",                   /* port 0 */
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n:65536\r\n",
        "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n:1\r\n:1\r\n",                        /* host a number */
        "*1\r\n*3\r\n$1\r\n0\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n",              /* start a string */
        "*2\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n:7\r\n",             /* a good one first */
    };
    sl_rslots *t = malloc(sizeof *t);
    assert_non_null(t);
    sl_rslots_init(t, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        redisReply *r = resp(bad[i]);
        assert_int_equal(sl_rslots_from_reply(t, r, "h"), -EPROTO);
        freeReplyObject(r);
        assert_int_equal(t->n_nodes, 0);
        for (unsigned s = 0; s < SL_RSLOTS_SLOTS; s++)
            assert_null(sl_rslots_owner(t, s));
    }
    assert_int_equal(sl_rslots_from_reply(t, NULL, "h"), -EPROTO);
    /* an unknown host and no server to stand for it */
    redisReply *r = resp("*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\n?\r\n:1\r\n");
    assert_int_equal(sl_rslots_from_reply(t, r, NULL), -EPROTO);
    assert_int_equal(sl_rslots_from_reply(t, r, "10.1.1.1"), 0);
    assert_string_equal(sl_rslots_owner(t, 3)->host, "10.1.1.1");
    freeReplyObject(r);
    free(t);
}

static void test_node_bound(void **state)
{
    (void)state;
    sl_rslots *t = malloc(sizeof *t);
    assert_non_null(t);
    sl_rslots_init(t, 0);
    for (int i = 0; i < SL_RSLOTS_NODES_MAX; i++)
        assert_int_equal(sl_rslots_node_add(t, "127.0.0.1", 9, 1000 + i), i);
    assert_int_equal(sl_rslots_node_add(t, "127.0.0.1", 9, 1000), 0); /* known: found */
    assert_int_equal(sl_rslots_node_add(t, "127.0.0.1", 9, 999), -ENOSPC);
    assert_int_equal(sl_rslots_node_add(t, "", 0, 1), -EINVAL);
    assert_int_equal(sl_rslots_node_add(t, "a", 1, 0), -EINVAL);
    char longhost[SL_RSLOTS_HOST_MAX];
    memset(longhost, 'h', sizeof longhost);
    assert_int_equal(sl_rslots_node_add(t, longhost, sizeof longhost, 1), -EINVAL);
    /* a reply naming more masters than the bound is refused */
    sl_rslots_init(t, 0);
    char *big = malloc(200 * 80);
    assert_non_null(big);
    int n = sprintf(big, "*%d\r\n", SL_RSLOTS_NODES_MAX + 1);
    for (int i = 0; i <= SL_RSLOTS_NODES_MAX; i++)
        n += sprintf(big + n, "*3\r\n:%d\r\n:%d\r\n*2\r\n$1\r\nh\r\n:%d\r\n", i, i, 2000 + i);
    redisReply *r = resp(big);
    assert_int_equal(sl_rslots_from_reply(t, r, NULL), -ENOSPC);
    assert_int_equal(t->n_nodes, 0);
    freeReplyObject(r);
    free(big);
    free(t);
}

static void test_redirect_parse(void **state)
{
    (void)state;
    sl_rslots_redirect rd;
    const char *m = "MOVED 3999 127.0.0.1:6381";
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_MOVED);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.host, "127.0.0.1");
    assert_int_equal(rd.port, 6381);
    m = "-ASK 16383 [::1]:7002";
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_ASK);
    assert_int_equal(rd.slot, 16383);
    assert_string_equal(rd.host, "::1");
    assert_int_equal(rd.port, 7002);
    m = "ASK 0 ::1:7002"; /* an IPv6 address unbracketed: the last ':' is the port's */
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_ASK);
    assert_string_equal(rd.host, "::1");
    m = "MOVED 7 :6380"; /* no host: the answering server's */
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_MOVED);
    assert_string_equal(rd.host, "");
    assert_int_equal(rd.port, 6380);
    static const char *const other[] = {
        "ERR unknown command", "NOSCRIPT No matching script", "MOVED", "MOVED 16384 a:1",
        "MOVED 12 a", "MOVED 12 a:", "MOVED 12 a:0", "MOVED 12 a:65536", "MOVED x a:1",
        "MOVED 12a b:1", "ASK 1 a:1x", "moved 1 a:1", "MOVED 123456 a:1", "MOVED  1 a:1",
        "TRYAGAIN Multiple keys request during rehashing of slot", "CLUSTERDOWN The cluster is down",
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        assert_int_equal(sl_rslots_redirect_parse(other[i], strlen(other[i]), &rd),
                         SL_RSLOTS_OTHER);
        assert_int_equal(rd.kind, SL_RSLOTS_OTHER);
    }
    /* a length that cuts the text short is respected */
    m = "MOVED 3999 127.0.0.1:6381";
    assert_int_equal(sl_rslots_redirect_parse(m, 19, &rd), SL_RSLOTS_OTHER);
    assert_int_equal(sl_rslots_redirect_parse(m, 22, &rd), SL_RSLOTS_MOVED);
    assert_int_equal(rd.port, 6);
}

static void test_redirect_apply(void **state)
{
    (void)state;
    sl_rslots *t = malloc(sizeof *t);
    assert_non_null(t);
    sl_rslots_init(t, 1000);
    redisReply *r = resp(three);
    assert_int_equal(sl_rslots_from_reply(t, r, "127.0.0.1"), 0);
    freeReplyObject(r);
    bool refresh;
    sl_rslots_redirect rd;
    /* ASK: the node is found, the table stays */
    const char *m = "ASK 100 127.0.0.1:7001";
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_ASK);
    assert_int_equal(sl_rslots_redirect_apply(t, &rd, "127.0.0.1", 0, &refresh), 1);
    assert_false(refresh);
    assert_int_equal(sl_rslots_owner(t, 100)->port, 7000);
    /* MOVED to a known node: the slot moves, a refresh is due the first time */
    m = "MOVED 100 127.0.0.1:7001";
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_MOVED);
    assert_int_equal(sl_rslots_redirect_apply(t, &rd, "127.0.0.1", 5000, &refresh), 1);
    assert_true(refresh);
    assert_int_equal(sl_rslots_owner(t, 100)->port, 7001);
    assert_int_equal(sl_rslots_owner(t, 101)->port, 7000);
    /* MOVED to a new node (host from the server answering): added; no refresh within 1 s */
    m = "MOVED 101 :7009";
    assert_int_equal(sl_rslots_redirect_parse(m, strlen(m), &rd), SL_RSLOTS_MOVED);
    assert_int_equal(sl_rslots_redirect_apply(t, &rd, "127.0.0.2", 5999, &refresh), 3);
    assert_false(refresh);
    assert_string_equal(sl_rslots_owner(t, 101)->host, "127.0.0.2");
    assert_int_equal(sl_rslots_owner(t, 101)->port, 7009);
    assert_int_equal(sl_rslots_redirect_apply(t, &rd, "127.0.0.2", 6000, &refresh), 3);
    assert_true(refresh);
    /* the refresh rate on its own */
    assert_false(sl_rslots_refresh_due(t, 6999));
    assert_true(sl_rslots_refresh_due(t, 7000));
    /* a table already refreshed keeps its rate across from_reply */
    r = resp(three);
    assert_int_equal(sl_rslots_from_reply(t, r, "127.0.0.1"), 0);
    freeReplyObject(r);
    assert_false(sl_rslots_refresh_due(t, 7500));
    /* not a redirection */
    rd.kind = SL_RSLOTS_OTHER;
    assert_int_equal(sl_rslots_redirect_apply(t, &rd, "h", 0, &refresh), -EINVAL);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_vectors),   cmocka_unit_test(test_hash_tags),
        cmocka_unit_test(test_from_cluster_slots), cmocka_unit_test(test_bad_replies),
        cmocka_unit_test(test_node_bound),      cmocka_unit_test(test_redirect_parse),
        cmocka_unit_test(test_redirect_apply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

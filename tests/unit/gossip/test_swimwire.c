/* SPDX-License-Identifier: Apache-2.0 */
/*
 * swimwire codec tests: every packet type round-trips; updates round-trip with their metadata;
 * every truncation of a valid packet, a trailing byte, a bad magic, another version, an unknown
 * type or status, an over-long name or metadata, a non-printable name and an oversized packet are
 * refused with the right error; the encoder refuses what does not fit and leaves the count alone.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gossip/swimwire.h"

static int build(uint8_t *buf, size_t cap)
{
    int len = sl_swimwire_put_head(buf, cap, SL_SWIMWIRE_PING_REQ, 77, 0, "node-b", "10.0.0.2:7946",
                                   "node-a");
    assert_true(len > 0);
    sl_swimwire_update u = {.status = SL_MEMBER_SUSPECT, .incarnation = 0xfffffffe,
                            .name = {"node-c", 6}, .addr = {"10.0.0.3:7946", 13},
                            .from = {"node-a", 6}};
    len = sl_swimwire_put_update(buf, cap, (size_t)len, &u);
    assert_true(len > 0);
    u = (sl_swimwire_update){.status = SL_MEMBER_ALIVE, .incarnation = 3, .name = {"d", 1},
                             .addr = {"[::1]:7946", 10}, .meta = (const uint8_t *)"\0role\xff", .meta_len = 6};
    len = sl_swimwire_put_update(buf, cap, (size_t)len, &u);
    assert_true(len > 0);
    return len;
}

static void test_roundtrip(void **state)
{
    uint8_t buf[SL_SWIMWIRE_MAX_UDP];
    int len = build(buf, sizeof buf);
    sl_swimwire_msg m;
    const char *err = NULL;
    assert_int_equal(sl_swimwire_decode(buf, (size_t)len, 0, &m, &err), 0);
    assert_int_equal(m.type, SL_SWIMWIRE_PING_REQ);
    assert_int_equal(m.seq, 77);
    assert_int_equal(m.target.len, 6);
    assert_memory_equal(m.target.p, "node-b", 6);
    assert_memory_equal(m.target_addr.p, "10.0.0.2:7946", 13);
    assert_memory_equal(m.source.p, "node-a", 6);
    assert_int_equal(m.n_updates, 2);
    const uint8_t *cur = m.updates;
    sl_swimwire_update u;
    sl_swimwire_next_update(&cur, &u);
    assert_int_equal(u.status, SL_MEMBER_SUSPECT);
    assert_int_equal(u.incarnation, 0xfffffffe);
    assert_memory_equal(u.from.p, "node-a", 6);
    assert_int_equal(u.meta_len, 0);
    sl_swimwire_next_update(&cur, &u);
    assert_int_equal(u.status, SL_MEMBER_ALIVE);
    assert_int_equal(u.name.len, 1);
    assert_int_equal(u.from.len, 0);
    assert_int_equal(u.meta_len, 6);
    assert_memory_equal(u.meta, "\0role\xff", 6);
    assert_ptr_equal(cur, m.end);

    static const sl_swimwire_type types[] = {SL_SWIMWIRE_PING, SL_SWIMWIRE_ACK, SL_SWIMWIRE_NACK,
                                             SL_SWIMWIRE_GOSSIP, SL_SWIMWIRE_PUSH, SL_SWIMWIRE_PULL};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        len = sl_swimwire_put_head(buf, sizeof buf, types[i], 5, 1, "t", NULL, "s");
        assert_true(len >= 6);
        assert_int_equal(sl_swimwire_decode(buf, (size_t)len, 0, &m, &err), 0);
        assert_int_equal(m.type, types[i]);
        assert_int_equal(m.n_updates, 0);
    }
}

static void test_refused(void **state)
{
    uint8_t buf[SL_SWIMWIRE_MAX_UDP + 1];
    int len = build(buf, sizeof buf);
    sl_swimwire_msg m;
    const char *err;
    for (int cut = 0; cut < len; cut++)
        assert_int_equal(sl_swimwire_decode(buf, (size_t)cut, 0, &m, &err), -EBADMSG);
    buf[len] = 0;
    assert_int_equal(sl_swimwire_decode(buf, (size_t)len + 1, 0, &m, &err), -EBADMSG);
    assert_string_equal(err, "trailing bytes");
    assert_int_equal(sl_swimwire_decode(buf, (size_t)len, 10, &m, &err), -EMSGSIZE);

    uint8_t c[SL_SWIMWIRE_MAX_UDP];
#define MUTATE(off, val, want, msg)                                              \
    do {                                                                         \
        memcpy(c, buf, (size_t)len);                                             \
        c[off] = (val);                                                          \
        assert_int_equal(sl_swimwire_decode(c, (size_t)len, 0, &m, &err), want); \
        if (msg)                                                                 \
            assert_string_equal(err, msg);                                       \
    } while (0)
    MUTATE(0, 'X', -EBADMSG, "not a gossip packet");
    MUTATE(2, 2, -EPROTONOSUPPORT, "unsupported version");
    MUTATE(3, 99, -EBADMSG, "unknown packet type");
    MUTATE(4, 0xff, -EBADMSG, "too many updates");
    MUTATE(10, 65, -EBADMSG, "name too long");     /* target length byte */
    MUTATE(10, 0, -EBADMSG, "empty name");
    MUTATE(11, ' ', -EBADMSG, "name not printable ASCII");
    /* the first update's status byte sits after head: 6 + 4 + 7 + 14 + 7 */
    MUTATE(38, 4, -EBADMSG, "unknown member status");

    /* metadata over its cap, encoded by hand */
    uint8_t meta[SL_SWIMWIRE_MAX_META + 1] = {0};
    sl_swimwire_update u = {.name = {"n", 1}, .addr = {"a", 1}, .meta = meta,
                            .meta_len = sizeof meta};
    len = sl_swimwire_put_head(buf, sizeof buf, SL_SWIMWIRE_GOSSIP, 0, 0, NULL, NULL, NULL);
    assert_int_equal(sl_swimwire_put_update(buf, sizeof buf, (size_t)len, &u), -EMSGSIZE);
    u.meta_len = SL_SWIMWIRE_MAX_META;
    int l2 = sl_swimwire_put_update(buf, sizeof buf, (size_t)len, &u);
    assert_true(l2 > 0);
    assert_int_equal(sl_swimwire_decode(buf, (size_t)l2, 0, &m, &err), 0);
    buf[l2 - SL_SWIMWIRE_MAX_META - 1] = 0x01;  /* length 256 -> 257 */
    assert_int_equal(sl_swimwire_decode(buf, (size_t)l2, 0, &m, &err), -EBADMSG);
    assert_string_equal(err, "metadata too long");
}

static void test_encoder_bounds(void **state)
{
    uint8_t buf[64];
    assert_int_equal(sl_swimwire_put_head(buf, 5, SL_SWIMWIRE_GOSSIP, 0, 0, NULL, NULL, NULL),
                     -EMSGSIZE);
    char longname[SL_SWIMWIRE_MAX_NAME + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(sl_swimwire_put_head(buf, sizeof buf, SL_SWIMWIRE_PING, 1, 0, longname,
                                          NULL, "s"),
                     -EMSGSIZE);
    int len = sl_swimwire_put_head(buf, sizeof buf, SL_SWIMWIRE_GOSSIP, 0, 0, NULL, NULL, NULL);
    sl_swimwire_update u = {.name = {"name", 4}, .addr = {"addr", 4}};
    int n = 0;
    for (;;) {
        int r = sl_swimwire_put_update(buf, sizeof buf, (size_t)len, &u);
        if (r < 0)
            break;
        len = r;
        n++;
    }
    assert_int_equal(n, (64 - 6) / (int)sl_swimwire_update_size(&u));
    sl_swimwire_msg m;
    assert_int_equal(sl_swimwire_decode(buf, (size_t)len, 0, &m, NULL), 0);
    assert_int_equal(m.n_updates, (unsigned)n);
}

/* The status byte on the wire, pinned by number: a reordered sl_member_status must not move it. */
static void test_status_bytes(void **state)
{
    (void)state;
    static const struct {
        sl_member_status st;
        uint8_t byte;
    } pins[] = {{SL_MEMBER_ALIVE, 0}, {SL_MEMBER_SUSPECT, 1}, {SL_MEMBER_DEAD, 2},
                {SL_MEMBER_LEFT, 3}};
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        uint8_t buf[128];
        int len = sl_swimwire_put_head(buf, sizeof buf, SL_SWIMWIRE_GOSSIP, 0, 0, NULL, NULL,
                                       NULL);
        assert_int_equal(len, SL_SWIMWIRE_HEADER); /* a gossip packet has no body */
        sl_swimwire_update u = {.status = pins[i].st, .incarnation = 1, .name = {"n", 1},
                                .addr = {"10.0.0.1:7946", 13}};
        len = sl_swimwire_put_update(buf, sizeof buf, (size_t)len, &u);
        assert_true(len > SL_SWIMWIRE_HEADER);
        assert_int_equal(buf[SL_SWIMWIRE_HEADER], pins[i].byte); /* an update opens with it */
        sl_swimwire_msg m;
        assert_int_equal(sl_swimwire_decode(buf, (size_t)len, 0, &m, NULL), 0);
        const uint8_t *cur = m.updates;
        sl_swimwire_next_update(&cur, &u);
        assert_int_equal(u.status, pins[i].st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_status_bytes),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_encoder_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

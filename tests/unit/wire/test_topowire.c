/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The observer's topology update codec (wire/topowire.h): a round trip through the gRPC frame,
 * proto3 defaults left out, unknown fields skipped, and hostile input refused whole: truncation,
 * a string over its cap or holding NUL, a status out of range, more members than the caller's
 * array. protobuf-c's code generated from proto/levee_topology.proto is the reference: it reads
 * what we encode, and we read what it encodes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "levee_topology.pb-c.h" /* protobuf-c's code from the same .proto: the reference */
#include "wire/grpc_frame.h"
#include "wire/topowire.h"

static sl_topowire_member mk(const char *name, const char *role, const char *svc,
                             sl_member_status st, uint32_t inc)
{
    sl_topowire_member m;
    memset(&m, 0, sizeof m);
    strcpy(m.mb.name, name);
    strcpy(m.mb.role, role);
    strcpy(m.mb.service, svc);
    strcpy(m.gossip, "10.0.0.1:7373");
    m.mb.status = st;
    m.incarnation = inc;
    return m;
}

static void test_round_trip(void **state)
{
    sl_topowire_member in[3] = {mk("l1", "limiter", "10.0.0.1:5454", SL_MEMBER_ALIVE, 0),
                                mk("l2", "limiter", "10.0.0.2:5454", SL_MEMBER_LEFT, 7),
                                mk("o1", "observer", "10.0.0.3:5454", SL_MEMBER_SUSPECT, 300)};
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_topowire_encode(&b, 42, true, in, 3), 0);
    sl_grpc_msg msg;
    const char *why;
    assert_int_equal(sl_grpc_frame_decode((const uint8_t *)b.data, b.len, 1 << 20, &msg, &why), 0);
    assert_int_equal(msg.frame_len, b.len);
    sl_topowire_update u;
    sl_topowire_member out[3];
    assert_int_equal(sl_topowire_decode(msg.data, msg.len, &u, out, 3), 0);
    assert_int_equal(u.version, 42);
    assert_true(u.full);
    assert_int_equal(u.n, 3);
    assert_memory_equal(out, in, sizeof in);
    assert_string_equal(sl_member_status_name(out[1].mb.status), "left");
    /* too many members for the caller's array */
    assert_int_equal(sl_topowire_decode(msg.data, msg.len, &u, out, 2), -E2BIG);
    /* every truncation is refused, never half applied */
    for (size_t n = 1; n < msg.len; n++) {
        int rc = sl_topowire_decode(msg.data, n, &u, out, 3);
        assert_true(rc == -EINVAL || (rc == 0 && u.n < 3));
    }
    sl_buf_free(&b);
}

static void test_heartbeat_and_defaults(void **state)
{
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_topowire_encode(&b, 0, false, NULL, 0), 0);
    assert_int_equal(b.len, SL_GRPC_HDR_LEN); /* an empty message */
    sl_topowire_update u;
    assert_int_equal(sl_topowire_decode(NULL, 0, &u, NULL, 0), 0);
    assert_int_equal(u.version, 0);
    assert_false(u.full);
    assert_int_equal(u.n, 0);
    sl_buf_free(&b);
}

static void test_hostile(void **state)
{
    sl_topowire_update u;
    sl_topowire_member out[2];
    /* unknown fields (varint 9, bytes 10) are skipped */
    const uint8_t unk[] = {0x48, 0x05, 0x52, 0x01, 'x', 0x08, 0x07};
    assert_int_equal(sl_topowire_decode(unk, sizeof unk, &u, out, 2), 0);
    assert_int_equal(u.version, 7);
    /* a status out of range */
    const uint8_t st[] = {0x1a, 0x02, 0x20, 0x09};
    assert_int_equal(sl_topowire_decode(st, sizeof st, &u, out, 2), -EINVAL);
    /* a role over its 16-byte cap */
    uint8_t role[2 + 2 + 17] = {0x1a, 19, 0x12, 17};
    memset(role + 4, 'r', 17);
    assert_int_equal(sl_topowire_decode(role, sizeof role, &u, out, 2), -EINVAL);
    /* a name holding NUL */
    const uint8_t nul[] = {0x1a, 0x04, 0x0a, 0x02, 'a', 0};
    assert_int_equal(sl_topowire_decode(nul, sizeof nul, &u, out, 2), -EINVAL);
    /* a group wire type */
    const uint8_t grp[] = {0x0b};
    assert_int_equal(sl_topowire_decode(grp, sizeof grp, &u, out, 2), -EINVAL);
    /* members with the wrong wire type */
    const uint8_t wt[] = {0x18, 0x01};
    assert_int_equal(sl_topowire_decode(wt, sizeof wt, &u, out, 2), 0); /* skipped as unknown */
}

static void test_long_strings_cut_on_encode(void **state)
{
    sl_topowire_member m = mk("l1", "limiter", "a:1", SL_MEMBER_ALIVE, 1);
    memset(m.mb.role, 'x', sizeof m.mb.role); /* not terminated: cut at the cap */
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_topowire_encode(&b, 1, false, &m, 1), 0);
    sl_topowire_update u;
    sl_topowire_member out;
    assert_int_equal(sl_topowire_decode((const uint8_t *)b.data + SL_GRPC_HDR_LEN,
                                        b.len - SL_GRPC_HDR_LEN, &u, &out, 1), 0);
    assert_int_equal(strlen(out.mb.role), SL_TOPOWIRE_MAX_ROLE);
    sl_buf_free(&b);
}

static void test_against_protobuf_c(void **state)
{
    sl_topowire_member in[2] = {mk("l1", "limiter", "10.0.0.1:5454", SL_MEMBER_DEAD, 9),
                                mk("o1", "observer", "10.0.0.3:5454", SL_MEMBER_ALIVE, 0)};
    sl_buf b;
    sl_buf_init(&b, 0);
    assert_int_equal(sl_topowire_encode(&b, 1234567890123ull, true, in, 2), 0);
    Sluice__Levee__V1__TopologyUpdate *u = sluice__levee__v1__topology_update__unpack(
        NULL, b.len - SL_GRPC_HDR_LEN, (const uint8_t *)b.data + SL_GRPC_HDR_LEN);
    assert_non_null(u);
    assert_true(u->version == 1234567890123ull);
    assert_true(u->full);
    assert_int_equal(u->n_members, 2);
    assert_string_equal(u->members[0]->name, "l1");
    assert_string_equal(u->members[0]->role, "limiter");
    assert_string_equal(u->members[0]->service, "10.0.0.1:5454");
    assert_string_equal(u->members[0]->gossip, "10.0.0.1:7373");
    assert_int_equal(u->members[0]->status, SLUICE__LEVEE__V1__MEMBER_STATUS__DEAD);
    assert_int_equal(u->members[0]->incarnation, 9);
    assert_int_equal(u->members[1]->status, SLUICE__LEVEE__V1__MEMBER_STATUS__ALIVE);
    /* and back: protobuf-c's encoding of it decodes to what we started from */
    size_t n = sluice__levee__v1__topology_update__get_packed_size(u);
    uint8_t *pk = malloc(n);
    sluice__levee__v1__topology_update__pack(u, pk);
    sl_topowire_update d;
    sl_topowire_member out[2];
    assert_int_equal(sl_topowire_decode(pk, n, &d, out, 2), 0);
    assert_true(d.full);
    assert_int_equal(d.n, 2);
    assert_memory_equal(out, in, sizeof in);
    free(pk);
    sluice__levee__v1__topology_update__free_unpacked(u, NULL);
    sl_buf_free(&b);
}

/* MemberStatus on the wire, both ways, for every status: an sl_member_status reordered must not
 * move a number protobuf-c (the .proto's reference) reads or writes. */
static void test_status_numbers(void **state)
{
    (void)state;
    static const struct {
        sl_member_status st;
        Sluice__Levee__V1__MemberStatus pb;
        int number;
    } pins[] = {{SL_MEMBER_ALIVE, SLUICE__LEVEE__V1__MEMBER_STATUS__ALIVE, 0},
                {SL_MEMBER_SUSPECT, SLUICE__LEVEE__V1__MEMBER_STATUS__SUSPECT, 1},
                {SL_MEMBER_DEAD, SLUICE__LEVEE__V1__MEMBER_STATUS__DEAD, 2},
                {SL_MEMBER_LEFT, SLUICE__LEVEE__V1__MEMBER_STATUS__LEFT, 3}};
    for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
        assert_int_equal(pins[i].pb, pins[i].number);
        sl_topowire_member in = mk("l1", "limiter", "10.0.0.1:5454", pins[i].st, 1);
        sl_buf b;
        sl_buf_init(&b, 0);
        assert_int_equal(sl_topowire_encode(&b, 1, false, &in, 1), 0);
        Sluice__Levee__V1__TopologyUpdate *u = sluice__levee__v1__topology_update__unpack(
            NULL, b.len - SL_GRPC_HDR_LEN, (const uint8_t *)b.data + SL_GRPC_HDR_LEN);
        assert_non_null(u);
        assert_int_equal(u->n_members, 1);
        assert_int_equal(u->members[0]->status, pins[i].pb);
        size_t n = sluice__levee__v1__topology_update__get_packed_size(u);
        uint8_t *pk = malloc(n);
        sluice__levee__v1__topology_update__pack(u, pk);
        sl_topowire_update d;
        sl_topowire_member out;
        assert_int_equal(sl_topowire_decode(pk, n, &d, &out, 1), 0);
        assert_int_equal(out.mb.status, pins[i].st);
        free(pk);
        sluice__levee__v1__topology_update__free_unpacked(u, NULL);
        sl_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_status_numbers),
        cmocka_unit_test(test_heartbeat_and_defaults),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_long_strings_cut_on_encode),
        cmocka_unit_test(test_against_protobuf_c),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for the gossip wire codec (gossip/swimwire) and the protocol behind it
 * (gossip/swim): arbitrary bytes are decoded; a packet the decoder accepts has every update
 * readable within its bounds, names of 1..64 printable bytes, metadata within its cap, and
 * re-encodes to the same bytes. Then the same bytes go to a live swim node as a datagram and as a
 * stream message, followed by ticks: nothing crashes, the member table stays within its bound and
 * every member reads back. A broken property traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gossip/swim.h"
#include "gossip/swimmeta.h"
#include "gossip/swimwire.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(sl_swimwire_str s, int may_empty)
{
    CHECK(s.len <= SL_SWIMWIRE_MAX_NAME);
    CHECK(may_empty || s.len > 0);
    for (size_t i = 0; i < s.len; i++)
        CHECK(s.p[i] > 0x20 && s.p[i] < 0x7f);
}

static void sink(void *ctx, const char *addr, const uint8_t *p, size_t len)
{
    CHECK(len <= SL_SWIMWIRE_MAX_UDP);
}

static void sink_stream(void *ctx, const char *addr, const uint8_t *p, size_t len) {}

/* half the runs check members as sluiced does, half take the metadata as opaque */
static int check_member(void *ctx, const char *addr, size_t alen, const uint8_t *meta, size_t mlen)
{
    const char *why;
    return sl_swimmeta_check_member(addr, alen, meta, mlen, &why);
}
static void sink_reply(void *ctx, const uint8_t *p, size_t len) {}

static void reencode(const uint8_t *data, size_t size, const sl_swimwire_msg *m)
{
    uint8_t *buf = malloc(size);
    CHECK(buf);
    char t[65] = "", ta[65] = "", s[65] = "";
    memcpy(t, m->target.p, m->target.len);
    memcpy(ta, m->target_addr.p, m->target_addr.len);
    memcpy(s, m->source.p, m->source.len);
    int len = sl_swimwire_put_head(buf, size, m->type, m->seq, m->flags, t, ta, s);
    CHECK(len > 0);
    const uint8_t *cur = m->updates;
    for (unsigned i = 0; i < m->n_updates; i++) {
        sl_swimwire_update u;
        sl_swimwire_next_update(&cur, &u);
        CHECK(u.status <= SL_MEMBER_LEFT);
        check_str(u.name, 0);
        check_str(u.addr, 0);
        check_str(u.from, 1);
        CHECK(u.meta_len <= SL_SWIMWIRE_MAX_META);
        CHECK(cur <= m->end);
        len = sl_swimwire_put_update(buf, size, (size_t)len, &u);
        CHECK(len > 0);
    }
    CHECK(cur == m->end);
    CHECK((size_t)len == size && memcmp(buf, data, size) == 0);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_swimwire_msg m;
    const char *err = NULL;
    if (sl_swimwire_decode(data, size, 1 << 20, &m, &err) == 0)
        reencode(data, size, &m);
    else
        CHECK(err != NULL);

    sl_swim_config c = {.name = "fuzz", .addr = "127.0.0.1:7946", .max_members = 16,
                        .cb = {NULL, sink, sink_stream, NULL,
                               size && (data[size - 1] & 1) ? check_member : NULL}};
    sl_swim *s;
    char e[128];
    CHECK(sl_swim_new(&c, 1000, &s, e, sizeof e) == 0);
    sl_swim_recv(s, "127.0.0.2:7946", data, size, 1000);
    sl_swim_recv_stream(s, "127.0.0.2:7946", data, size, 1001, sink_reply, NULL);
    for (uint64_t t = 1000; t < 80000; t += 500)
        sl_swim_tick(s, t);
    CHECK(sl_swim_member_count(s) <= 16);
    for (size_t i = 0; i < sl_swim_member_count(s); i++) {
        sl_swim_member mm;
        CHECK(sl_swim_member_at(s, i, &mm) == 0);
        CHECK(mm.meta_len <= SL_SWIM_MAX_META && strlen(mm.name) > 0);
    }
    sl_swim_free(s);
    return 0;
}

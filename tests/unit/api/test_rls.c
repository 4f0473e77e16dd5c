/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Envoy RLS adapter tests (api/rls): RateLimitRequest bytes (built here field by field, with
 * Envoy's numbers) decode into descriptors; descriptors plan into engine items against a
 * configuration (names, keys, hits, algorithm, replaces, unknown domains, overrides); answers
 * encode into a RateLimitResponse read back field by field; malformed input is refused with a
 * reason; outcomes count per domain and rule.
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

#include "api/rls.h"
#include "api/rlsmetrics.h"
#include "wire/grpc_frame.h"
#include "wire/pbwire.h"

static const char conf_text[] =
    "domain: shop\n"
    "descriptors:\n"
    "  - key: ip\n"
    "    rate_limit: {unit: minute, requests_per_unit: 3, name: per_ip}\n"
    "  - key: ldap\n"
    "    rate_limit: {unlimited: true}\n"
    "  - key: s\n"
    "    shadow_mode: true\n"
    "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
    "  - key: g\n"
    "    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra, burst: 2}\n"
    "  - key: a\n"
    "    rate_limit: {unit: day, requests_per_unit: 5, name: specific}\n"
    "  - key: b\n"
    "    rate_limit: {unit: day, requests_per_unit: 9, replaces: [{name: specific}]}\n"
    "  - key: f\n"
    "    value: x*\n"
    "    share_threshold: true\n"
    "    rate_limit: {unit: day, requests_per_unit: 2}\n";

/* ---- a tiny protobuf writer for requests ---- */

typedef struct msg {
    uint8_t b[4096];
    size_t n;
} msg;

static void put_varint(msg *m, uint64_t v)
{
    m->n = (size_t)(sl_pb_put_varint(m->b + m->n, v) - m->b);
}

static void put_bytes(msg *m, uint32_t field, const void *p, size_t n)
{
    put_varint(m, (uint64_t)field << 3 | 2);
    put_varint(m, n);
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void put_str(msg *m, uint32_t field, const char *s)
{
    put_bytes(m, field, s, strlen(s));
}

static void put_uint(msg *m, uint32_t field, uint64_t v)
{
    put_varint(m, (uint64_t)field << 3);
    put_varint(m, v);
}

/* A descriptor: "k=v" strings, then optional override and hits. */
static void put_desc(msg *req, const char *const *kv, size_t n, uint32_t rpu, uint32_t unit,
                     int64_t hits)
{
    msg d = {.n = 0};
    for (size_t i = 0; i < n; i++) {
        msg e = {.n = 0};
        const char *eq = strchr(kv[i], '=');
        put_bytes(&e, 1, kv[i], (size_t)(eq - kv[i]));
        if (eq[1])
            put_str(&e, 2, eq + 1);
        put_bytes(&d, 1, e.b, e.n);
    }
    if (rpu || unit) {
        msg o = {.n = 0};
        put_uint(&o, 1, rpu);
        put_uint(&o, 2, unit);
        put_bytes(&d, 2, o.b, o.n);
    }
    if (hits >= 0) {
        msg h = {.n = 0};
        if (hits)
            put_uint(&h, 1, (uint64_t)hits);
        put_bytes(&d, 3, h.b, h.n);
    }
    put_bytes(req, 2, d.b, d.n);
}

static sl_rlsconf *conf(void)
{
    sl_rlsconf *c;
    char err[256];
    assert_int_equal(sl_rlsconf_new(&c), 0);
    assert_int_equal(sl_rlsconf_add(c, "t.yaml", conf_text, strlen(conf_text), err, sizeof err), 0);
    return c;
}

static const sl_rls_config cfg = {.max_descriptors = 8, .max_entries = 4, .headers = true};

/* ---- decoding ---- */

static void test_parse(void **state)
{
    (void)state;
    sl_batch b;
    sl_batch_init(&b, 0);
    msg m = {.n = 0};
    put_str(&m, 1, "shop");
    put_uint(&m, 3, 7);
    put_uint(&m, 9, 1); /* unknown: skipped */
    const char *kv[] = {"ip=1.2.3.4", "path=/x"};
    put_desc(&m, kv, 2, 0, 0, -1);
    put_desc(&m, kv, 1, 5, 3, 4);
    put_desc(&m, kv, 0, 0, 0, 0);
    sl_rls_req r;
    const char *err;
    assert_int_equal(sl_rls_parse(&cfg, m.b, m.n, &b, &r, &err), 0);
    assert_int_equal(r.domain_len, 4);
    assert_memory_equal(r.domain, "shop", 4);
    assert_int_equal(r.hits_addend, 7);
    assert_int_equal(r.n, 3);
    assert_int_equal(r.descs[0].n, 2);
    assert_memory_equal(r.descs[0].entries[1].key, "path", 4);
    assert_memory_equal(r.descs[0].entries[1].value, "/x", 2);
    assert_false(r.descs[0].has_limit);
    assert_false(r.descs[0].has_hits);
    assert_true(r.descs[1].has_limit);
    assert_int_equal(r.descs[1].limit_rpu, 5);
    assert_int_equal(r.descs[1].limit_unit, 3);
    assert_true(r.descs[1].has_hits);
    assert_int_equal(r.descs[1].hits, 4);
    assert_int_equal(r.descs[2].n, 0);
    assert_true(r.descs[2].has_hits);
    assert_int_equal(r.descs[2].hits, 0);

    /* refused */
    static const struct { const char *bytes; size_t n; int rc; } bad[] = {
        {"\x0a\x05" "ab", 4, -EINVAL},                  /* truncated */
        {"\x08\x01", 2, -EINVAL},                        /* domain as a varint */
        {"\x0a\x02\xc3\x28", 4, -EINVAL},                /* domain not UTF-8 */
        {"\x12\x03\x0a\x01\x08", 5, -EINVAL},            /* entry's key as varint */
        {"\x12\x02\x10\x01", 4, -EINVAL},                /* override as varint */
        {"\x12\x04\x1a\x02\x08\xff", 6, -EINVAL},        /* hits value truncated */
        {"\x12\x04\x0a\x02\x0a\x00", 6, 0},              /* empty key: decodes */
        {"\x1a\x01\x00", 3, -EINVAL},                    /* hits_addend as bytes */
        {"\x0b", 1, -EINVAL},                            /* a group */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_batch_reset(&b);
        err = NULL;
        int rc = sl_rls_parse(&cfg, (const uint8_t *)bad[i].bytes, bad[i].n, &b, &r, &err);
        if (rc != bad[i].rc)
            fail_msg("case %zu: %d", i, rc);
        if (rc)
            assert_non_null(err);
    }
    /* bounds */
    msg many = {.n = 0};
    put_str(&many, 1, "shop");
    for (int i = 0; i < 9; i++)
        put_desc(&many, kv, 1, 0, 0, -1);
    sl_batch_reset(&b);
    assert_int_equal(sl_rls_parse(&cfg, many.b, many.n, &b, &r, &err), -E2BIG);
    const char *five[] = {"a=1", "b=2", "c=3", "d=4", "e=5"};
    msg wide = {.n = 0};
    put_desc(&wide, five, 5, 0, 0, -1);
    sl_batch_reset(&b);
    assert_int_equal(sl_rls_parse(&cfg, wide.b, wide.n, &b, &r, &err), -E2BIG);
    sl_batch_free(&b);
}

/* ---- planning ---- */

static sl_rls_call *begin(sl_rlsconf *c, const msg *m, sl_batch *b, int expect_rc)
{
    sl_rls_call *call = NULL;
    sl_grpc_status st;
    int rc = sl_rls_begin(&cfg, c, m->b, m->n, b, &call, &st);
    if (rc != expect_rc)
        fail_msg("begin: %d (%s)", rc, st.message);
    if (rc)
        assert_int_equal(st.code, SL_GRPC_INVALID_ARGUMENT);
    return call;
}

static void test_plan(void **state)
{
    (void)state;
    sl_rlsconf *c = conf();
    sl_batch b;
    sl_batch_init(&b, 0);
    msg m = {.n = 0};
    put_str(&m, 1, "shop");
    put_uint(&m, 3, 2);
    const char *d0[] = {"ip=1.2.3.4"}, *d1[] = {"ldap=x"}, *d2[] = {"nothing=1"},
               *d3[] = {"g=1"}, *d4[] = {"s=1"}, *d5[] = {"any=1"}, *d6[] = {"f=xyz"};
    put_desc(&m, d0, 1, 0, 0, -1);
    put_desc(&m, d1, 1, 0, 0, -1);
    put_desc(&m, d2, 1, 0, 0, -1);
    put_desc(&m, d3, 1, 0, 0, 5);
    put_desc(&m, d4, 1, 0, 0, 0);
    put_desc(&m, d5, 1, 7, 3, -1); /* override: 7 an hour */
    put_desc(&m, d6, 1, 0, 0, -1);
    sl_rls_call *call = begin(c, &m, &b, 0);
    assert_int_equal(b.n, 7);
    assert_int_equal(b.n_answered, 2); /* unlimited and no rule */
    assert_true(b.answered[1] && b.answered[2]);
    const sl_request *q = &b.reqs[0];
    assert_memory_equal(q->name, "rls:shop", q->name_len);
    assert_int_equal(q->name_len, 8);
    assert_string_equal(q->unique_key, "ip=1.2.3.4");
    assert_int_equal(q->hits, 2); /* the request's hits_addend */
    assert_int_equal(q->limit, 3);
    assert_int_equal(q->duration, 60000);
    assert_int_equal(q->algorithm, SL_FIXED_WINDOW);
    assert_int_equal(q->behavior, SL_COUNT_OVER_LIMIT);
    q = &b.reqs[3];
    assert_int_equal(q->algorithm, SL_GCRA);
    assert_int_equal(q->burst, 2);
    assert_int_equal(q->hits, 5); /* the descriptor's wins */
    assert_int_equal(q->behavior, 0);
    q = &b.reqs[4];
    assert_int_equal(q->hits, 0);
    assert_true(q->behavior & SL_SHADOW);
    q = &b.reqs[5];
    assert_int_equal(q->limit, 7);
    assert_int_equal(q->duration, 3600000);
    assert_string_equal(b.reqs[6].unique_key, "f=x*"); /* share_threshold */

    /* answers: 0 under, 3 over (gcra), 4 over (shadow), 5 under, 6 over */
    int64_t now = 1000000;
    for (size_t i = 0; i < b.n; i++)
        if (!b.answered[i])
            b.resps[i] = (sl_response){.status = SL_UNDER_LIMIT, .limit = b.reqs[i].limit,
                                       .remaining = 1, .reset_time = now + 1500};
    b.resps[3].status = b.resps[4].status = b.resps[6].status = SL_OVER_LIMIT;
    b.resps[3].remaining = b.resps[4].remaining = b.resps[6].remaining = 0;
    sl_buf out;
    sl_buf_init(&out, 0);
    sl_grpc_status st;
    assert_int_equal(sl_rls_encode(call, &b, now, &out, &st), 0);

    /* read it back */
    sl_pb_rd r = {out.data, out.data + out.len};
    uint32_t f = 0;
    unsigned wt = 0;
    uint64_t v = 0;
    int statuses = 0, headers = 0;
    uint64_t overall = 0, codes[8] = {0}, remaining[8] = {0}, rpu[8] = {0}, reset_s[8] = {0},
             reset_ns[8] = {0};
    char hv[3][32] = {{0}};
    while (r.p < r.end) {
        assert_true(sl_pb_key(&r, &f, &wt));
        if (f == 1) {
            assert_true(sl_pb_varint(&r, &overall));
            continue;
        }
        sl_pb_rd s = {0};
        assert_true(sl_pb_bytes(&r, &s));
        if (f == 3) {
            sl_pb_rd k = {0}, val = {0};
            assert_true(sl_pb_key(&s, &f, &wt) && f == 1 && sl_pb_bytes(&s, &k));
            assert_true(sl_pb_key(&s, &f, &wt) && f == 2 && sl_pb_bytes(&s, &val));
            memcpy(hv[headers], val.p, (size_t)(val.end - val.p));
            headers++;
            continue;
        }
        assert_int_equal(f, 2);
        int i = statuses++;
        while (s.p < s.end) {
            assert_true(sl_pb_key(&s, &f, &wt));
            if (f == 1 || f == 3) {
                assert_true(sl_pb_varint(&s, &v));
                if (f == 1)
                    codes[i] = v;
                else
                    remaining[i] = v;
            } else {
                sl_pb_rd sub = {0};
                assert_true(sl_pb_bytes(&s, &sub));
                while (sub.p < sub.end) {
                    uint32_t g = 0;
                    assert_true(sl_pb_key(&sub, &g, &wt));
                    if (wt == SL_PB_LEN) {
                        sl_pb_rd skip = {0};
                        assert_true(sl_pb_bytes(&sub, &skip));
                        continue;
                    }
                    assert_true(sl_pb_varint(&sub, &v));
                    if (f == 2 && g == 1)
                        rpu[i] = v;
                    if (f == 4 && g == 1)
                        reset_s[i] = v;
                    if (f == 4 && g == 2)
                        reset_ns[i] = v;
                }
            }
        }
    }
    assert_int_equal(statuses, 7);
    assert_int_equal(overall, 2);
    uint64_t want_codes[7] = {1, 1, 1, 2, 1, 1, 2};
    assert_memory_equal(codes, want_codes, sizeof want_codes);
    assert_int_equal(remaining[1], UINT32_MAX);
    assert_int_equal(remaining[2], 0);
    assert_int_equal(rpu[0], 3);
    assert_int_equal(rpu[2], 0);
    assert_int_equal(rpu[5], 7);
    assert_int_equal(reset_s[0], 1);
    assert_int_equal(reset_ns[0], 500000000);
    assert_int_equal(headers, 3);
    /* the headers come from an over-limit descriptor (its remaining 0) */
    assert_string_equal(hv[1], "0");
    assert_string_equal(hv[2], "2");

    /* metrics: outcomes by domain and rule */
    sl_metrics *mx;
    assert_int_equal(sl_metrics_new(NULL, &mx), 0);
    sl_rlsmetrics *rm;
    assert_int_equal(sl_rlsmetrics_new(mx, 32, &rm), 0);
    sl_rls_count(call, &b, rm);
    char *txt;
    size_t len;
    assert_int_equal(sl_metrics_render_prometheus(mx, &txt, &len), 0);
    assert_non_null(strstr(txt, "{domain=\"shop\",rule=\"per_ip\",outcome=\"ok\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"shop\",rule=\"g\",outcome=\"over_limit\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"shop\",rule=\"s\",outcome=\"shadow_over_limit\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"shop\",rule=\"ldap\",outcome=\"unlimited\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"shop\",rule=\"\",outcome=\"no_limit\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"shop\",rule=\"override\",outcome=\"ok\"} 1"));
    free(txt);
    sl_rlsmetrics_free(rm);
    sl_metrics_free(mx);

    /* an item that failed fails the call */
    b.resps[0].error = "owner unreachable";
    sl_buf_reset(&out);
    assert_int_equal(sl_rls_encode(call, &b, now, &out, &st), -EAGAIN);
    assert_int_equal(st.code, SL_GRPC_UNAVAILABLE);
    sl_rls_end(call);
    sl_buf_free(&out);
    sl_batch_free(&b);
    sl_rlsconf_unref(c);
}

static void test_replaces_unknown_domain_and_errors(void **state)
{
    (void)state;
    sl_rlsconf *c = conf();
    sl_batch b;
    sl_batch_init(&b, 0);
    const char *a[] = {"a=1"}, *bb[] = {"b=1"};
    msg m = {.n = 0};
    put_str(&m, 1, "shop");
    put_desc(&m, a, 1, 0, 0, -1);
    put_desc(&m, bb, 1, 0, 0, -1);
    sl_rls_call *call = begin(c, &m, &b, 0);
    assert_true(b.answered[0]);  /* replaced */
    assert_false(b.answered[1]); /* the replacing rule */
    sl_rls_end(call);

    msg u = {.n = 0};
    put_str(&u, 1, "nope");
    put_desc(&u, a, 1, 5, 1, -1);
    call = begin(c, &u, &b, 0);
    assert_int_equal(b.n_answered, 1); /* an unknown domain: no limit, even with an override */
    sl_buf out;
    sl_buf_init(&out, 0);
    sl_grpc_status st;
    assert_int_equal(sl_rls_encode(call, &b, 0, &out, &st), 0);
    static const uint8_t ok_no_limit[] = {0x08, 0x01, 0x12, 0x02, 0x08, 0x01};
    assert_int_equal(out.len, sizeof ok_no_limit);
    assert_memory_equal(out.data, ok_no_limit, sizeof ok_no_limit);
    sl_rls_end(call);
    /* no configuration at all: the same */
    call = begin(NULL, &m, &b, 0);
    assert_int_equal(b.n_answered, 2);
    sl_rls_end(call);

    msg e = {.n = 0};
    begin(c, &e, &b, -EINVAL); /* no domain */
    put_str(&e, 1, "shop");
    begin(c, &e, &b, -EINVAL); /* no descriptor */
    msg o = {.n = 0};
    put_str(&o, 1, "shop");
    put_desc(&o, a, 1, 5, 99, -1);
    begin(c, &o, &b, -EINVAL); /* override with an unknown unit */
    sl_buf_free(&out);
    sl_batch_free(&b);
    sl_rlsconf_unref(c);
}

static void test_metrics_guard(void **state)
{
    (void)state;
    sl_metrics *mx;
    assert_int_equal(sl_metrics_new(NULL, &mx), 0);
    sl_rlsmetrics *rm;
    assert_int_equal(sl_rlsmetrics_new(mx, 2, &rm), 0);
    const char *rules[3] = {"r1", "r2", "r3"};
    uint8_t oc[3] = {SL_RLS_OK, SL_RLS_OK, SL_RLS_OVER_LIMIT};
    sl_rlsmetrics_count(rm, "d", 1, rules, oc, 3);
    sl_rlsmetrics_count(rm, NULL, 0, rules, oc, 1);
    char *txt;
    size_t len;
    assert_int_equal(sl_metrics_render_prometheus(mx, &txt, &len), 0);
    assert_non_null(strstr(txt, "{domain=\"d\",rule=\"r1\",outcome=\"ok\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"d\",rule=\"r2\",outcome=\"ok\"} 1"));
    /* r3, then (_unknown, r1): past the two pairs */
    assert_non_null(strstr(txt, "{domain=\"other\",rule=\"other\",outcome=\"over_limit\"} 1"));
    assert_non_null(strstr(txt, "{domain=\"other\",rule=\"other\",outcome=\"ok\"} 1"));
    assert_null(strstr(txt, "r3"));
    free(txt);
    sl_rlsmetrics_free(rm);
    sl_metrics_free(mx);
    assert_int_equal(sl_rlsmetrics_new(NULL, 2, &rm), 0);
    assert_null(rm);
    sl_rlsmetrics_count(NULL, "d", 1, rules, oc, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_replaces_unknown_domain_and_errors),
        cmocka_unit_test(test_metrics_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for Levee's POST /attempt and POST /release as a node on its own decides them
 * (api/attempt.c over api/levee.c and protect/: a real engine, quota snapshot, switchboard with
 * concurrency limits and a fleet, metrics, one worker; a virtual clock that moves with the input):
 * the input's lines are the header values X-Resource, X-Prefix, X-Method, X-Req-Id, X-Max-Delay,
 * X-Priority, X-Concurrency and X-Lease-Id of an /attempt, then X-Lease-Id and X-Resource of a
 * /release (an absent line is an absent header, a line "-" too). Each lease id is also parsed
 * alone (protect/leaseid.c) and what parses formats back to an id that parses to the same leases.
 * Properties: every answer has a status of 200, 400, 404, 429, 500 or 503, at most
 * SL_ANSWER_MAX_HEADERS headers, each value free of CR, LF and NUL but X-Req-Id's (the request's
 * own value echoed: net/h1.c drops a value that would split the response, nghttp2 refuses one),
 * and a body ending in '\n'; an X-Lease-Id in an answer parses.
 * A broken property traps; ASan catches overruns and leaks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/attempt.h"
#include "api/levee.h"
#include "protect/leaseid.h"
#include "protect/protect.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T0 1700000000000LL

static sl_engine *engine;
static sl_quota_snap *snap;
static sl_levee_config lcfg;
static sl_killswitch *ks;
static sl_metrics *metrics;
static sl_protect *prot;
static sl_logger logger;
static int64_t now;
static sl_answer ans;

static const char board[] =
    "concurrency:\n"
    "  default: {limit: 20, duration: 10s}\n"
    "  key:\n"
    "    one: {limit: 1, duration: 10s}\n"
    "fleet: {capacity: 10, reserve: 0.2, duration: 30s}\n";
static const char *const quotas[] = {
    "/levee/limit/key_default={\"rate\":100,\"burst\":10}",
    "/levee/limit/key/api/quota={\"rate\":2,\"burst\":1}",
    "/levee/limit/key/api/sublimit/POST={\"rate\":1}",
    "/levee/limit/subkey_default/GET={\"rate\":50}",
    NULL,
};

static void setup(void)
{
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    ec.hash_seed = 1;
    CHECK(sl_engine_new(&ec, &engine) == 0);
    sl_levee_config_default(&lcfg);
    sl_quota_tree *t;
    CHECK(sl_quota_tree_new(0, &t) == 0);
    for (const char *const *q = quotas; *q; q++) {
        const char *eq = strchr(*q, '=');
        const char *err;
        CHECK(sl_quota_tree_apply_put(t, "/levee", *q, (size_t)(eq - *q), eq + 1, strlen(eq + 1),
                                      &err) == 0);
    }
    CHECK(sl_quota_snap_new(t, true, 1, 0, &snap) == 0);
    char path[] = "/tmp/fuzz-attempt-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, board, sizeof board - 1) == (ssize_t)(sizeof board - 1));
    close(fd);
    FILE *devnull = fopen("/dev/null", "w");
    CHECK(devnull != NULL);
    sl_log_init(&logger, devnull, SL_LOG_ERROR, "fuzz");
    sl_killswitch_config kc = {.conn.file = path, .conn.log = &logger};
    CHECK(sl_killswitch_new(&kc, &ks) == 0);
    unlink(path);
    CHECK(sl_metrics_new(NULL, &metrics) == 0);
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = engine;
    pc.switches = ks;
    pc.metrics = metrics;
    pc.log = &logger;
    pc.workers = 1;
    CHECK(sl_protect_new(&pc, &prot) == 0);
    now = T0;
}

static bool clean(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == '\r' || v[i] == '\n' || v[i] == '\0')
            return false;
    return true;
}

static void check_lease_id(const char *s, size_t n)
{
    uint64_t conc, fleet;
    char res[SL_LEASEID_MAX + 1];
    size_t rlen;
    if (sl_leaseid_parse(s, n, &conc, &fleet, res, sizeof res, &rlen) != 0)
        return;
    CHECK(conc || fleet);
    CHECK(rlen <= sizeof res);
    char back[SL_LEASEID_MAX + 64];
    size_t bl = sl_leaseid_format(back, sizeof back, conc, fleet, rlen ? res : NULL, rlen);
    CHECK(bl < sizeof back && back[bl] == 0);
    uint64_t c2, f2;
    char res2[SL_LEASEID_MAX + 1];
    size_t r2;
    CHECK(sl_leaseid_parse(back, bl, &c2, &f2, res2, sizeof res2, &r2) == 0);
    CHECK(c2 == conc && f2 == fleet);
    if (r2) /* the resource is carried when it fits */
        CHECK(r2 == rlen && !memcmp(res2, res, rlen));
}

static void check_answer(const sl_answer *a)
{
    CHECK(a->status == 200 || a->status == 400 || a->status == 404 || a->status == 429 ||
          a->status == 500 || a->status == 503);
    CHECK(a->n_headers <= SL_ANSWER_MAX_HEADERS);
    for (size_t i = 0; i < a->n_headers; i++) {
        const sl_answer_header *h = &a->headers[i];
        CHECK(h->name && h->name_len > 0 && h->value);
        CHECK(clean(h->name, h->name_len));
        /* X-Req-Id is the request's value echoed (the renderers drop a value that could split
         * the response); every value sluice writes is clean */
        if (!(h->name_len == 8 && !strncasecmp(h->name, "X-Req-Id", 8)))
            CHECK(clean(h->value, h->value_len));
        if (h->name_len == 10 && !strncasecmp(h->name, "X-Lease-Id", 10)) {
            uint64_t c, f;
            char res[SL_LEASEID_MAX + 1];
            size_t rl;
            CHECK(sl_leaseid_parse(h->value, h->value_len, &c, &f, res, sizeof res, &rl) == 0);
        }
    }
    if (a->body)
        CHECK(a->body_len > 0 && a->body[a->body_len - 1] == '\n');
}

/* The next line as a header value: NULL when absent or "-". */
static const char *field(const char **p, const char *end, size_t *len)
{
    if (*p >= end) {
        *len = 0;
        return NULL;
    }
    const char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    *len = (size_t)(e - s);
    if (*len == 1 && s[0] == '-') {
        *len = 0;
        return NULL;
    }
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!prot)
        setup();
    if (size < 1)
        return 0;
    now += (int64_t)(data[0] & 0x3f) * 250; /* up to 15.75 s between calls: leases expire */
    const char *p = (const char *)data + 1, *end = (const char *)data + size;
    sl_attempt_req q = {0};
    q.levee.resource = field(&p, end, &q.levee.resource_len);
    q.levee.prefix = field(&p, end, &q.levee.prefix_len);
    q.levee.method = field(&p, end, &q.levee.method_len);
    q.levee.req_id = field(&p, end, &q.levee.req_id_len);
    q.levee.max_delay = field(&p, end, &q.levee.max_delay_len);
    q.priority = field(&p, end, &q.priority_len);
    q.concurrency = field(&p, end, &q.concurrency_len);
    q.lease_id = field(&p, end, &q.lease_id_len);
    sl_attempt_release_req r = {0};
    r.lease_id = field(&p, end, &r.lease_id_len);
    r.resource = field(&p, end, &r.resource_len);
    r.req_id = q.levee.req_id;
    r.req_id_len = q.levee.req_id_len;

    sl_attempt_decide(prot, 0, &lcfg, snap, &q, now, &ans);
    check_answer(&ans);
    char got[SL_LEASEID_MAX + 1] = "";
    for (size_t i = 0; i < ans.n_headers; i++)
        if (ans.headers[i].name_len == 10 && !strncasecmp(ans.headers[i].name, "X-Lease-Id", 10) &&
            ans.headers[i].value_len < sizeof got) {
            memcpy(got, ans.headers[i].value, ans.headers[i].value_len);
            got[ans.headers[i].value_len] = 0;
        }
    if (q.lease_id)
        check_lease_id(q.lease_id, q.lease_id_len);
    if (r.lease_id)
        check_lease_id(r.lease_id, r.lease_id_len);

    sl_attempt_release(prot, &r, now, &ans);
    check_answer(&ans);
    if (data[0] & 0x40 && got[0]) { /* give back the lease just taken */
        /* (X-Resource too: an id leaves out a resource that does not fit) */
        sl_attempt_release_req back = {.lease_id = got, .lease_id_len = strlen(got),
                                       .resource = q.levee.resource,
                                       .resource_len = q.levee.resource_len};
        sl_attempt_release(prot, &back, now, &ans);
        check_answer(&ans);
        CHECK(ans.status == 200 || ans.status == 404);
    }
    return 0;
}

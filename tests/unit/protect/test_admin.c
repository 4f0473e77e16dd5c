/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's admin endpoint (protect/admin.c) over a real switchboard (admin calls only)
 * and protection service: POST in both forms and every bad body, the switch taking effect, GET
 * and HEAD with the switches, the fleet, the concurrency entries and each worker's shed level,
 * a full switchboard (507), another method (405) and no switchboard (503).
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

#include "protect/admin.h"

#define M(s) (s), strlen(s)

typedef struct fx {
    sl_engine *engine;
    sl_killswitch *ks;
    sl_protect *p;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    sl_engine_config ec;
    sl_engine_config_default(&ec);
    assert_int_equal(sl_engine_new(&ec, &f->engine), 0);
    sl_killswitch_config kc = {.max_entries = 3};
    assert_int_equal(sl_killswitch_new(&kc, &f->ks), 0);
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    pc.switches = f->ks;
    pc.workers = 2;
    pc.shed_opts.raise_after_ms = 0;
    pc.shed_opts.raise_step = 0.5;
    pc.shed_opts.smoothing = 1;
    assert_int_equal(sl_protect_new(&pc, &f->p), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sl_protect_free(f->p);
    sl_killswitch_free(f->ks);
    sl_engine_free(f->engine);
    free(f);
    return 0;
}

static int call(fx *f, const char *method, const char *body, char **out)
{
    sl_admin_response a;
    sl_admin_handle(f->p, method, (const uint8_t *)body, body ? strlen(body) : 0, &a);
    assert_non_null(a.body);
    assert_int_equal(a.body_len, strlen(a.body));
    assert_string_equal(a.content_type, "application/json");
    *out = a.body;
    return a.status;
}

static void expect(fx *f, const char *method, const char *body, int status, const char *has)
{
    char *out;
    assert_int_equal(call(f, method, body, &out), status);
    if (!strstr(out, has)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", out);
        free(out);
        fail_msg("'%s' lacks '%s'", msg, has);
    }
    free(out);
}

static sl_killswitch_mode mode(fx *f, const char *name)
{
    sl_killswitch_reader r = {0};
    sl_killswitch_mode m = sl_ladder_mode(sl_killswitch_read(f->ks, &r), M(name));
    sl_killswitch_reader_release(&r);
    return m;
}

static void test_post(void **state)
{
    fx *f = *state;
    expect(f, "POST", "{\"name\": \"search\", \"on\": true}", 200,
           "{\"name\":\"search\",\"mode\":\"killed\",\"origin\":\"admin\"}");
    assert_int_equal(mode(f, "search"), SL_KILLSWITCH_KILLED);
    expect(f, "POST", "{\"name\": \"search\", \"mode\": \"shadow\"}", 200, "\"mode\":\"shadow\"");
    assert_int_equal(mode(f, "search"), SL_KILLSWITCH_SHADOW);
    expect(f, "POST", "{\"name\": \"search\", \"on\": false}", 200, "\"mode\":\"enforce\"");
    assert_int_equal(mode(f, "search"), SL_KILLSWITCH_ENFORCE);
    static const char *const bad[] = {
        "", "[]", "nope", "{\"name\": 1, \"on\": true}", "{\"name\": \"a\"}",
        "{\"name\": \"a\", \"on\": 1}", "{\"name\": \"a\", \"mode\": \"maybe\"}",
        "{\"name\": \"a\", \"on\": true, \"mode\": \"on\"}", "{\"on\": true}",
        "{\"name\": \"\", \"on\": true}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect(f, "POST", bad[i], 400, "\"error\":");
    /* the switchboard holds 3 entries ("search", kept as an admin override, is one) */
    expect(f, "POST", "{\"name\": \"a\", \"on\": true}", 200, "\"a\"");
    expect(f, "POST", "{\"name\": \"b\", \"on\": true}", 200, "\"b\"");
    expect(f, "POST", "{\"name\": \"d\", \"on\": true}", 507, "too many switches");
    expect(f, "DELETE", NULL, 405, "use GET or POST");
}

static void test_get(void **state)
{
    fx *f = *state;
    for (int i = 0; i < 3; i++)
        sl_protect_observe(f->p, 1, 1000 + i * 100, 0.99);
    expect(f, "POST", "{\"name\": \"*\", \"mode\": \"shadow\"}", 200, "\"*\"");
    expect(f, "GET", NULL, 200, "\"source\":\"none\"");
    expect(f, "GET", NULL, 200, "{\"name\":\"*\",\"mode\":\"shadow\",\"origin\":\"admin\"}");
    expect(f, "GET", NULL, 200, "\"fleet\":null");
    expect(f, "GET", NULL, 200, "\"concurrency\":[]");
    expect(f, "GET", NULL, 200, "\"shed\":[{\"worker\":0,\"level\":0.0,");
    expect(f, "GET", NULL, 200, "{\"worker\":1,\"level\":1.5,");
    expect(f, "HEAD", NULL, 200, "\"switches\":[");
}

static void test_no_switchboard(void **state)
{
    fx *f = *state;
    sl_protect_config pc;
    sl_protect_config_default(&pc);
    pc.engine = f->engine;
    sl_protect *p;
    assert_int_equal(sl_protect_new(&pc, &p), 0);
    sl_admin_response a;
    sl_admin_handle(p, "GET", NULL, 0, &a);
    assert_int_equal(a.status, 503);
    assert_non_null(strstr(a.body, "no switchboard on this node"));
    free(a.body);
    sl_protect_free(p);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {T(test_post), T(test_get), T(test_no_switchboard)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for the option engine (config/opt.c) on its own: the duration syntax and its
 * shortest spelling, and a table over another program's struct, as the CLI's subcommands use it
 * (defaults, environment, flags, set, names, free). sluiced's table is tested in test_config.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/opt.h"

#define MS INT64_C(1000000)
#define SEC (1000 * MS)

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int64_t ns;
    } ok[] = {
        {"500us", 500000},       {"500\xc2\xb5s", 500000}, {"100ms", 100 * MS},
        {"5s", 5 * SEC},          {"1m", 60 * SEC},         {"2h", 7200 * SEC},
        {"1d", 86400 * SEC},      {"250", 250 * MS},        {"0", 0},
        {"1.5s", 1500 * MS},      {"1m30s", 90 * SEC},      {"1h2m3s4ms", 3723004 * MS},
        {"0.000000001s", 1},      {"7ns", 7},               {".5s", 500 * MS},
        {"1.s", SEC},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t ns = -1;
        assert_int_equal(sl_opt_parse_duration(ok[i].in, &ns), 0);
        assert_int_equal(ns, ok[i].ns);
    }
    static const char *const bad[] = {"", "s", "5x", "-1s", "+1s", "1 s", "5s ", "1.", "1..5s",
                                      "ms5", "5sec", "1e3ms"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ns;
        assert_int_equal(sl_opt_parse_duration(bad[i], &ns), -EINVAL);
    }
    int64_t ns;
    assert_int_equal(sl_opt_parse_duration("9999999999999999999h", &ns), -ERANGE);
    assert_int_equal(sl_opt_parse_duration("3000000h", &ns), -ERANGE);
    assert_int_equal(sl_opt_parse_duration("9223372036854776", &ns), -ERANGE); /* ms */

    char b[32];
    sl_opt_format_duration(500000, b, sizeof(b));
    assert_string_equal(b, "500us");
    sl_opt_format_duration(90 * SEC, b, sizeof(b));
    assert_string_equal(b, "90s");
    sl_opt_format_duration(7200 * SEC, b, sizeof(b));
    assert_string_equal(b, "2h");
    sl_opt_format_duration(0, b, sizeof(b));
    assert_string_equal(b, "0s");
    sl_opt_format_duration(1500001, b, sizeof(b));
    assert_string_equal(b, "1500001ns");
}

/* The engine over a table of another program's own struct, as the CLI could use it. */
struct cli_opts {
    char *addr;
    int64_t timeout_ns;
    sl_opt_list keys;
    bool json;
};

static void test_generic_table(void **state)
{
    (void)state;
    static const sl_opt opts[] = {
        {.name = "addr", .type = SL_OPT_STRING, .offset = offsetof(struct cli_opts, addr),
         .def = "127.0.0.1:5454", .help = "server"},
        {.name = "timeout", .type = SL_OPT_DURATION,
         .offset = offsetof(struct cli_opts, timeout_ns), .def = "1s", .help = "timeout"},
        {.name = "key", .short_name = 'k', .type = SL_OPT_LIST,
         .offset = offsetof(struct cli_opts, keys), .help = "keys"},
        {.name = "json", .type = SL_OPT_BOOL, .offset = offsetof(struct cli_opts, json),
         .help = "JSON output"},
    };
    const sl_opt_table t = {.program = "sluice check", .env_prefix = "SLUICE_CLI_",
                               .opts = opts, .nopts = 4};
    struct cli_opts c = {0};
    char err[256];
    assert_int_equal(sl_opt_defaults(&t, &c, err, sizeof(err)), 0);
    char *envp[] = {"SLUICE_CLI_TIMEOUT=250", NULL};
    assert_int_equal(sl_opt_load_env(&t, &c, envp, err, sizeof(err)), 0);
    char *argv[] = {"check", "-k", "a", "--key=b", "--json", NULL};
    assert_int_equal(sl_opt_load_args(&t, &c, 5, argv, err, sizeof(err)), 0);
    assert_string_equal(c.addr, "127.0.0.1:5454");
    assert_int_equal(c.timeout_ns, 250 * MS);
    assert_int_equal(c.keys.n, 2);
    assert_true(c.json);
    assert_int_equal(sl_opt_set(&t, &c, "timeout", "2s", "etcd /x", err, sizeof(err)), 0);
    assert_int_equal(c.timeout_ns, 2 * SEC);
    assert_int_equal(sl_opt_set(&t, &c, "timeout", "2", "etcd /x", err, sizeof(err)), 0);
    assert_int_equal(c.timeout_ns, 2 * MS);
    assert_int_equal(sl_opt_set(&t, &c, "timeout", "x", "etcd /x", err, sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "(etcd /x)"));
    assert_int_equal(sl_opt_set(&t, &c, "nope", "x", NULL, err, sizeof(err)), -EINVAL);
    char env[64];
    sl_opt_env_name(&t, &opts[1], env, sizeof(env));
    assert_string_equal(env, "SLUICE_CLI_TIMEOUT");
    assert_ptr_equal(sl_opt_find(&t, "json"), &opts[3]);
    assert_null(sl_opt_find(&t, "jso"));
    assert_null(sl_opt_find(&t, "jsonx"));
    sl_opt_free(&t, &c);
    assert_null(c.addr);
    assert_int_equal(c.keys.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_generic_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the option engine (config/opt.c) on its own: the duration syntax and its
 * shortest spelling, and a table over another program's struct, as the CLI's subcommands use it
 * (defaults, environment, flags, set, names, free), and a command's table (positional arguments,
 * optional values, repeatable lists, numbers, the command form of --help). sluiced's table is
 * tested in test_config.c. */
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

/* What a CLI command's table uses: positional arguments among the flags, strings that stay NULL
 * until given, a repeatable list without comma splitting, an optional value, numbers with bounds,
 * --version only where the table has it, and the command form of --help. */
struct cmd_opts {
    char *addr;
    char *factor;
    sl_opt_list md;
    double rate;
    bool json;
};

static const sl_opt cmd_opts_table[] = {
    {.name = "addr", .type = SL_OPT_STRING, .offset = offsetof(struct cmd_opts, addr),
     .nullable = true, .help = "server"},
    {.name = "factor", .type = SL_OPT_STRING, .offset = offsetof(struct cmd_opts, factor),
     .nullable = true, .optional_value = true, .metavar = "DF", .help = "group size"},
    {.name = "metadata", .type = SL_OPT_LIST, .offset = offsetof(struct cmd_opts, md),
     .repeat = true, .metavar = "K=V", .help = "an entry, repeatable"},
    {.name = "rate", .type = SL_OPT_DOUBLE, .offset = offsetof(struct cmd_opts, rate),
     .def = "2.5", .dmin = 0, .dmax = 1000, .help = "a rate that is long enough to be wrapped "
     "over two lines of the command's help text, at spaces"},
    {.name = "json", .type = SL_OPT_BOOL, .offset = offsetof(struct cmd_opts, json),
     .help = "JSON"},
};

static const sl_opt_table cmd_table = {
    .program = "sluice thing", .flags_only = true, .usage = "[options] get|set KEY",
    .about = "About it.\n", .epilog = "exit: 0 fine\n", .opts = cmd_opts_table, .nopts = 5,
};

static void test_command_table(void **state)
{
    (void)state;
    struct cmd_opts c = {0};
    char err[256];
    const char *pos[2];
    size_t npos = 9;
    assert_int_equal(sl_opt_defaults(&cmd_table, &c, err, sizeof err), 0);
    assert_null(c.addr);
    assert_null(c.factor);
    assert_int_equal(c.md.n, 0);
    assert_true(c.rate == 2.5);
    char *argv[] = {"thing", "set", "--metadata", "a=1,2", "api", "--factor", "4", "--metadata=b=",
                    "--rate", "1e2", NULL};
    assert_int_equal(sl_opt_parse_args(&cmd_table, &c, 10, argv, pos, 2, &npos, err, sizeof err), 0);
    assert_int_equal(npos, 2);
    assert_string_equal(pos[0], "set");
    assert_string_equal(pos[1], "api");
    assert_string_equal(c.factor, "4");
    assert_int_equal(c.md.n, 2);
    assert_string_equal(c.md.items[0], "a=1,2"); /* not split at the comma */
    assert_string_equal(c.md.items[1], "b=");
    assert_true(c.rate == 100);
    assert_null(c.addr);

    /* a bare optional value; "--" makes the rest positional; one positional too many */
    char *argv2[] = {"thing", "--factor", "get", "--", "--json", NULL};
    assert_int_equal(sl_opt_parse_args(&cmd_table, &c, 5, argv2, pos, 2, &npos, err, sizeof err), 0);
    assert_string_equal(c.factor, "");
    assert_int_equal(npos, 2);
    assert_string_equal(pos[1], "--json");
    assert_false(c.json);
    char *argv3[] = {"thing", "a", "b", "c", NULL};
    assert_int_equal(sl_opt_parse_args(&cmd_table, &c, 4, argv3, pos, 2, &npos, err, sizeof err),
                     -EINVAL);
    assert_string_equal(err, "unexpected argument 'c'");
    assert_int_equal(sl_opt_load_args(&cmd_table, &c, 2, argv3, err, sizeof err), -EINVAL);
    assert_string_equal(err, "unexpected argument 'a'");

    /* numbers and their bounds */
    assert_int_equal(sl_opt_set(&cmd_table, &c, "rate", "1001", "t", err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "out of range"));
    assert_int_equal(sl_opt_set(&cmd_table, &c, "rate", "nan", "t", err, sizeof err), -EINVAL);
    assert_int_equal(sl_opt_set(&cmd_table, &c, "rate", " 1", "t", err, sizeof err), -EINVAL);
    int64_t v;
    double d;
    assert_int_equal(sl_opt_parse_int("-42", &v), 0);
    assert_int_equal(v, -42);
    assert_int_equal(sl_opt_parse_int("4x", &v), -EINVAL);
    assert_int_equal(sl_opt_parse_double("0.25", &d), 0);
    assert_true(d == 0.25);
    assert_int_equal(sl_opt_parse_double("1e999", &d), -EINVAL);

    /* --help anywhere; --version is only a flag where the table has it */
    char *argv4[] = {"thing", "x", "--help", NULL};
    assert_int_equal(sl_opt_parse_args(&cmd_table, &c, 3, argv4, pos, 2, &npos, err, sizeof err),
                     SL_OPT_HELP);
    char *argv5[] = {"thing", "--version", NULL};
    assert_int_equal(sl_opt_parse_args(&cmd_table, &c, 2, argv5, pos, 2, &npos, err, sizeof err),
                     -EINVAL);
    assert_non_null(strstr(err, "unknown flag '--version'"));

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    sl_opt_help(&cmd_table, f);
    fclose(f);
    assert_true(strncmp(text, "usage: sluice thing [options] get|set KEY\n\nAbout it.\n", 49) == 0);
    assert_non_null(strstr(text, "--factor [DF]"));
    assert_non_null(strstr(text, "[default: 2.5]"));
    assert_null(strstr(text, "env "));          /* flags only */
    assert_null(strstr(text, "--version"));
    assert_non_null(strstr(text, "exit: 0 fine\n"));
    for (char *line = text; *line;) {           /* long help wraps */
        char *nl = strchr(line, '\n');
        assert_true(nl - line <= 100);
        line = nl + 1;
    }
    free(text);
    sl_opt_free(&cmd_table, &c);
    assert_null(c.factor);
    assert_int_equal(c.md.n, 0);
}

/* "Did you mean": the edit distance ('_' as '-', any case) and the nearest option over a table,
 * with the bound that keeps a far-off name from getting a suggestion. */
static void test_suggest(void **state)
{
    (void)state;
    assert_int_equal(sl_opt_edit_distance("listen_adr", "listen-addr"), 1);
    assert_int_equal(sl_opt_edit_distance("listen-addr", "listen-addr"), 0);
    assert_int_equal(sl_opt_edit_distance("LISTEN_ADDR", "listen-addr"), 0);
    assert_int_equal(sl_opt_edit_distance("", "abc"), 3);
    assert_int_equal(sl_opt_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(sl_opt_edit_distance("max-conns", "max-streams"), 6);
    static const sl_opt opts[] = {
        {.name = "listen-addr", .type = SL_OPT_STRING},
        {.name = "admin-addr", .type = SL_OPT_STRING},
        {.name = "max-conns", .type = SL_OPT_INT},
        {.name = "max-streams", .type = SL_OPT_INT},
        {.name = "tls-key", .type = SL_OPT_STRING},
    };
    const sl_opt_table t = {.program = "p", .opts = opts, .nopts = 5};
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"listen_adr", "listen-addr"},  {"lsiten-addr", "listen-addr"},
        {"admin_addr", NULL},            /* exact in snake case: found, not suggested */
        {"max-con", "max-conns"},        {"max_streem", "max-streams"},
        {"tls-kye", "tls-key"},          {"verbose", NULL}, /* nothing near */
        {"ab", NULL},                    /* 2 letters: any 1 edit is more than a third */
        {"tls", NULL},                   /* 4 edits from tls-key */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const sl_opt *o = sl_opt_suggest(&t, cases[i].in);
        if (cases[i].want == NULL) {
            if (o != NULL)
                fail_msg("'%s': suggested '%s', want none", cases[i].in, o->name);
        } else {
            assert_non_null(o);
            assert_string_equal(o->name, cases[i].want);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_generic_table),
        cmocka_unit_test(test_command_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

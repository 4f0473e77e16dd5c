/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for sluiced's configuration (config/config.c over the engine config/opt.c):
 * precedence (defaults < file < env < flags), every value type's syntax and errors through the real
 * table, the YAML file's rules, messages naming option and source, --help coverage and the dump
 * round trip. The engine alone is tested in test_opt.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/diag.h"

#define MS INT64_C(1000000)
#define SEC (1000 * MS)

static char *no_env[] = {NULL};

/* A temp file holding text; the path is written into path (32 bytes). */
static void write_file(char *path, const char *text)
{
    strcpy(path, "/tmp/sluice_cfg_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
}

static int parse(sl_options *o, char *err, int argc, char **argv, char **envp)
{
    memset(o, 0, sizeof(*o));
    return sl_config_parse(o, argc, argv, envp, err, 512);
}

#define ARGV(...) ((char *[]){"sluiced", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"sluiced", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, err, envp, ...) parse(o, err, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), envp)

static void test_defaults(void **state)
{
    (void)state;
    sl_options o;
    char err[512];
    assert_int_equal(parse(&o, err, 1, (char *[]){"sluiced", NULL}, no_env), 0);
    char host[256] = "";
    gethostname(host, sizeof(host));
    assert_string_equal(o.config, "");
    assert_string_equal(o.instance_id, host[0] ? host : "sluice");
    assert_string_equal(o.listen_addr, "127.0.0.1:5454");
    assert_int_equal(o.workers, sysconf(_SC_NPROCESSORS_ONLN));
    assert_false(o.verbose);
    assert_int_equal(o.max_conns, 10000);
    assert_int_equal(o.max_header_bytes, 16 * 1024);
    assert_int_equal(o.max_body_bytes, 1024 * 1024);
    assert_int_equal(o.idle_timeout_ns, 60 * SEC);
    assert_int_equal(o.read_timeout_ns, 10 * SEC);
    assert_int_equal(o.max_streams, 256);
    assert_int_equal(o.shutdown_timeout_ns, 5 * SEC);
    assert_int_equal(o.max_batch, 1000);
    assert_int_equal(o.gc_max_keys, 1000000);
    assert_int_equal(o.gc_period_ns, 1 * SEC);
    assert_int_equal(o.gc_collect_ns, 0); /* off by default: collecting resets a limit */
    assert_int_equal(o.gc_max_work, 10000);
    assert_int_equal(o.shards, 64);
    assert_int_equal(o.max_log_limit, 10000);
    assert_int_equal(o.max_sub_windows, 60);
    assert_false(o.standalone);
    assert_string_equal(o.storage_prefix, "/sluice");
    assert_int_equal(o.storage_addrs.n, 0);
    assert_string_equal(o.quota_file, "");
    assert_int_equal(o.no_quota, SL_NO_QUOTA_ERROR);
    assert_int_equal(o.storage_timeout_ns, 2 * SEC);
    assert_string_equal(o.graphite_addr, "");
    assert_int_equal(o.graphite_period_ns, 10 * SEC);
    assert_string_equal(o.graphite_prefix, "sluice");
    assert_int_equal(o.discovery, SL_DISCOVERY_NONE);
    assert_int_equal(o.peers.n, 0);
    assert_string_equal(o.dns_name, "");
    assert_int_equal(o.dns_period_ns, 5 * SEC);
    assert_string_equal(o.advertise_addr, "127.0.0.1:5454");
    assert_int_equal(o.peer_picker, SL_PICKER_RING);
    assert_int_equal(o.replicas, 512);
    assert_int_equal(o.batch_wait_ns, 500000);
    assert_int_equal(o.batch_limit, 1000);
    assert_int_equal(o.batch_timeout_ns, 500 * MS);
    assert_int_equal(o.global_sync_wait_ns, 100 * MS);
    assert_int_equal(o.global_batch_limit, 1000);
    assert_false(o.fail_open);
    assert_int_equal(o.peer_lease_ttl_ns, 5 * SEC);
    sl_config_free(&o);
    assert_null(o.listen_addr);
    sl_config_free(&o); /* twice is harmless */
}

static void test_precedence(void **state)
{
    (void)state;
    char path[32], err[512];
    write_file(path, "# comment\n"
                     "listen-addr: 10.0.0.1:1\n"
                     "max-conns: 11\n"
                     "max_streams: 12\n"          /* snake_case key */
                     "peers:\n  - a:1\n  - b:2\n"
                     "discovery: static\n"         /* a peer list needs it */
                     "verbose: yes\n"
                     "gc-period: 2h\n"
                     "graphite-prefix: fromfile\n");
    char cfg_env[64];
    snprintf(cfg_env, sizeof(cfg_env), "SLUICE_CONFIG=%s", path);
    char *envp[] = {cfg_env, "SLUICE_LISTEN_ADDR=10.0.0.2:2", "SLUICE_MAX_STREAMS=22",
                    "SLUICE_VERBOSE=false", "SLUICE_GRAPHITE_PREFIX=fromenv", "OTHER=1", NULL};
    sl_options o;
    assert_int_equal(PARSE(&o, err, envp, "--listen-addr", "10.0.0.3:3", "--verbose",
                           "--peers=c:3"),
                     0);
    assert_string_equal(o.config, path);                /* from env */
    assert_string_equal(o.listen_addr, "10.0.0.3:3");  /* file < env < flag */
    assert_int_equal(o.max_conns, 11);                  /* file only */
    assert_int_equal(o.max_streams, 22);                /* file < env */
    assert_true(o.verbose);                             /* file yes < env false < flag */
    assert_int_equal(o.gc_period_ns, 7200 * SEC);       /* file */
    assert_string_equal(o.graphite_prefix, "fromenv");  /* file < env */
    assert_int_equal(o.peers.n, 1);                     /* a flag list replaces the file's */
    assert_string_equal(o.peers.items[0], "c:3");
    assert_string_equal(o.advertise_addr, "10.0.0.3:3"); /* computed from the final listen-addr */
    sl_config_free(&o);

    /* --config on the command line beats SLUICE_CONFIG. */
    char path2[32];
    write_file(path2, "max-conns: 99\n");
    assert_int_equal(PARSE(&o, err, envp, "-c", path2), 0);
    assert_string_equal(o.config, path2);
    assert_int_equal(o.max_conns, 99);
    assert_int_equal(o.peers.n, 0);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, envp, "--config=" "/nonexistent/sluice.yaml"), -ENOENT);
    assert_non_null(strstr(err, "/nonexistent/sluice.yaml"));
    sl_config_free(&o);
    unlink(path);
    unlink(path2);

    /* A set but empty variable clears strings and lists, and is an error for other types. */
    char *empty_env[] = {"SLUICE_GRAPHITE_PREFIX=", "SLUICE_PEERS=", NULL};
    assert_int_equal(PARSE(&o, err, empty_env, "--verbose"), 0);
    assert_string_equal(o.graphite_prefix, "");
    assert_int_equal(o.peers.n, 0);
    sl_config_free(&o);
    char *empty_bool[] = {"SLUICE_VERBOSE=", NULL};
    assert_int_equal(PARSE(&o, err, empty_bool, "--verbose"), -EINVAL);
    assert_non_null(strstr(err, "(env SLUICE_VERBOSE)"));
    sl_config_free(&o);
}

static void test_process_environment(void **state)
{
    (void)state;
    /* envp NULL reads the process environment (this test runs in its own process). */
    setenv("SLUICE_MAX_CONNS", "77", 1);
    setenv("SLUICE_PEERS", " x:1, y:2 ,,z:3", 1);
    setenv("SLUICE_DISCOVERY", "STATIC", 1);
    sl_options o;
    char err[512];
    assert_int_equal(parse(&o, err, 1, (char *[]){"sluiced", NULL}, NULL), 0);
    assert_int_equal(o.max_conns, 77);
    assert_int_equal(o.discovery, SL_DISCOVERY_STATIC);
    assert_int_equal(o.peers.n, 3);
    assert_string_equal(o.peers.items[0], "x:1");
    assert_string_equal(o.peers.items[1], "y:2");
    assert_string_equal(o.peers.items[2], "z:3");
    sl_config_free(&o);
    /* Repeated list flags accumulate, replacing the environment's list. */
    assert_int_equal(PARSE(&o, err, NULL, "--peers", "p:1", "--peers", "q:2,r:3"), 0);
    assert_int_equal(o.peers.n, 3);
    assert_string_equal(o.peers.items[0], "p:1");
    assert_string_equal(o.peers.items[2], "r:3");
    sl_config_free(&o);
    setenv("SLUICE_MAX_CONNS", "lots", 1);
    assert_int_equal(parse(&o, err, 1, (char *[]){"sluiced", NULL}, NULL), -EINVAL);
    assert_string_equal(err, "option 'max-conns': invalid integer 'lots' (env SLUICE_MAX_CONNS)");
    sl_config_free(&o);
    unsetenv("SLUICE_MAX_CONNS");
    unsetenv("SLUICE_PEERS");
    unsetenv("SLUICE_DISCOVERY");
}

static void test_sizes_bools_ints(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        uint64_t v;
    } ok[] = {
        {"512", 512},          {"0", 0},           {"16KiB", 16384},      {"1MiB", 1048576},
        {"1mib", 1048576},     {"1k", 1024},       {"1K", 1024},          {"1KB", 1000},
        {"2GB", 2000000000},   {"2g", 2147483648}, {"3TiB", 3ull << 40},  {"7B", 7},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 1;
        assert_int_equal(sl_opt_parse_size(ok[i].in, &v), 0);
        assert_int_equal(v, ok[i].v);
    }
    static const char *const bad[] = {"", "MiB", "1.5MiB", "-1", "1 MiB", "1XB", "1Mi", "1KiBs"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v;
        assert_int_equal(sl_opt_parse_size(bad[i], &v), -EINVAL);
    }
    uint64_t v;
    assert_int_equal(sl_opt_parse_size("99999999999TiB", &v), -ERANGE);
    char b[32];
    sl_opt_format_size(16384, b, sizeof(b));
    assert_string_equal(b, "16KiB");
    sl_opt_format_size(1000, b, sizeof(b));
    assert_string_equal(b, "1000");
    sl_opt_format_size(0, b, sizeof(b));
    assert_string_equal(b, "0");

    bool t = false;
    const char *yes[] = {"true", "TRUE", "yes", "on", "1"}, *no[] = {"false", "No", "off", "0"};
    for (size_t i = 0; i < 5; i++) {
        t = false;
        assert_int_equal(sl_opt_parse_bool(yes[i], &t), 0);
        assert_true(t);
    }
    for (size_t i = 0; i < 4; i++) {
        t = true;
        assert_int_equal(sl_opt_parse_bool(no[i], &t), 0);
        assert_false(t);
    }
    assert_int_equal(sl_opt_parse_bool("maybe", &t), -EINVAL);
    assert_int_equal(sl_opt_parse_bool("", &t), -EINVAL);

    /* Integers and sizes through the option layer, with ranges. */
    sl_options o;
    char err[512];
    assert_int_equal(PARSE(&o, err, no_env, "--max-conns=+5", "--max-body-bytes", "2MiB"), 0);
    assert_int_equal(o.max_conns, 5);
    assert_int_equal(o.max_body_bytes, 2 << 20);
    sl_config_free(&o);
    const char *bad_ints[] = {"abc", "1e3", "5.0", "", "0x10"};
    for (size_t i = 0; i < 5; i++) {
        char flag[64];
        snprintf(flag, sizeof(flag), "--max-conns=%s", bad_ints[i]);
        assert_int_equal(PARSE(&o, err, no_env, flag), -EINVAL);
        char want[128];
        snprintf(want, sizeof(want), "option 'max-conns': invalid integer '%s' (flag --max-conns)",
                 bad_ints[i]);
        assert_string_equal(err, want);
        sl_config_free(&o);
    }
    assert_int_equal(PARSE(&o, err, no_env, "--max-conns", "99999999999999999999"), -EINVAL);
    assert_non_null(strstr(err, "too large"));
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--workers", "2000"), -EINVAL);
    assert_string_equal(err, "option 'workers': '2000' is out of range 0..1024 (flag --workers)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--max-header-bytes", "10"), -EINVAL);
    assert_string_equal(
        err, "option 'max-header-bytes': '10' is out of range 1KiB..16MiB (flag --max-header-bytes)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--idle-timeout", "0"), -EINVAL);
    assert_string_equal(err,
                        "option 'idle-timeout': '0' is out of range 1ms..24h (flag --idle-timeout)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--idle-timeout", "soon"), -EINVAL);
    assert_string_equal(err, "option 'idle-timeout': invalid duration 'soon' (e.g. 500us, 100ms, "
                             "5s, 1m, 2h) (flag --idle-timeout)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--batch-wait", "250us", "--shards", "128"), 0);
    assert_int_equal(o.batch_wait_ns, 250000);
    assert_int_equal(o.shards, 128);
    sl_config_free(&o);
}

static void test_enums_and_cross_checks(void **state)
{
    (void)state;
    sl_options o;
    char err[512];
    assert_int_equal(PARSE(&o, err, no_env, "--no-quota", "deny", "--peer-picker=HRW",
                           "--discovery", "dns", "--dns-name", "sluice.local"),
                     0);
    assert_int_equal(o.no_quota, SL_NO_QUOTA_DENY);
    assert_int_equal(o.peer_picker, SL_PICKER_HRW);
    assert_int_equal(o.discovery, SL_DISCOVERY_DNS);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--no-quota", "maybe"), -EINVAL);
    assert_string_equal(err, "option 'no-quota': invalid value 'maybe' (want one of: allow, deny, "
                             "error) (flag --no-quota)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--discovery", "static"), -EINVAL);
    assert_string_equal(err, "option 'peers': required with discovery=static");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--discovery", "dns"), -EINVAL);
    assert_string_equal(err, "option 'dns-name': required with discovery=dns");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--discovery", "etcd"), -EINVAL);
    assert_string_equal(err, "option 'storage-addrs': required with discovery=etcd");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--shards", "48"), -EINVAL);
    assert_string_equal(err, "option 'shards': 48 is not a power of two");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--standalone", "--discovery=static", "--peers=a:1"),
                     -EINVAL);
    assert_non_null(strstr(err, "option 'standalone'"));
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--listen-addr="), -EINVAL);
    assert_string_equal(err, "option 'listen-addr': must not be empty (flag --listen-addr)");
    sl_config_free(&o);
    /* Computed defaults stay overridable. */
    assert_int_equal(PARSE(&o, err, no_env, "--instance-id", "n7", "--workers", "3",
                           "--advertise-addr", "1.2.3.4:5"),
                     0);
    assert_string_equal(o.instance_id, "n7");
    assert_int_equal(o.workers, 3);
    assert_string_equal(o.advertise_addr, "1.2.3.4:5");
    sl_config_free(&o);
}

/* Peer authentication's options (docs/cluster.md "Peer authentication"): the defaults, what each
 * mode needs, the globals cap against the sender's batch, and a peer CA of its own. */
static void test_peer_auth_options(void **state)
{
    (void)state;
    sl_options o;
    char err[512];
    assert_int_equal(PARSE(&o, err, no_env, "--tls-cert", "c.pem", "--tls-key", "k.pem",
                           "--tls-ca", "ca.pem"),
                     0);
    assert_int_equal(o.peer_auth, SL_PEER_AUTH_AUTO);
    assert_int_equal(o.peer_auth_skew_ns, 30LL * 1000000000);
    assert_int_equal(o.peer_max_globals, 10000);
    assert_int_equal(o.peer_max_transfer_keys, 100000);
    assert_string_equal(o.peer_tls_cert, "c.pem"); /* the certificate still defaults */
    assert_string_equal(o.peer_tls_ca, "");        /* the client CA is not the peers' */
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--peer-auth", "secret"), -EINVAL);
    assert_string_equal(err, "option 'peer-auth': secret needs peer-secret-file");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--peer-auth", "mtls", "--peer-tls-ca", "ca.pem"),
                     -EINVAL);
    assert_non_null(strstr(err, "mtls needs peer TLS"));
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--peer-max-globals", "100",
                           "--global-batch-limit", "1000"),
                     -EINVAL);
    assert_non_null(strstr(err, "option 'peer-max-globals': 100 is below global-batch-limit"));
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--peer-auth-skew", "0s"), -EINVAL);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--peer-auth", "none", "--peer-secret-file", "s"), 0);
    assert_int_equal(o.peer_auth, SL_PEER_AUTH_NONE);
    assert_string_equal(o.peer_secret_file, "s");
    sl_config_free(&o);
}

static void test_flags(void **state)
{
    (void)state;
    sl_options o;
    char err[512];
    assert_int_equal(PARSE(&o, err, no_env, "-v", "--fail-open", "--standalone=true",
                           "--no-standalone"),
                     0);
    assert_true(o.verbose);
    assert_true(o.fail_open);
    assert_false(o.standalone);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--verbose=off"), 0);
    assert_false(o.verbose);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--verbose=sure"), -EINVAL);
    assert_non_null(strstr(err, "option 'verbose': invalid boolean 'sure'"));
    assert_non_null(strstr(err, "(flag --verbose)"));
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--no-verbose=1"), -EINVAL);
    assert_string_equal(err, "flag --no-verbose takes no value");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--no-max-conns"), -EINVAL);
    assert_string_equal(err,
                        "unknown flag '--no-max-conns': option 'max-conns' is not a boolean (see "
                        "--help)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--max-connz", "5"), -EINVAL);
    assert_string_equal(err,
                        "unknown flag '--max-connz': did you mean '--max-conns'? (see --help)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "-x"), -EINVAL);
    assert_string_equal(err, "unknown flag '-x' (see --help)");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--max-conns"), -EINVAL);
    assert_string_equal(err, "option 'max-conns': flag --max-conns needs a value");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "serve"), -EINVAL);
    assert_string_equal(err, "unexpected argument 'serve'");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--", "x"), -EINVAL);
    assert_string_equal(err, "unexpected argument 'x'");
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--verbose", "--"), 0);
    sl_config_free(&o);
    /* A value that looks like a flag is still the value of the flag before it. */
    assert_int_equal(PARSE(&o, err, no_env, "--instance-id", "--verbose"), 0);
    assert_string_equal(o.instance_id, "--verbose");
    assert_false(o.verbose);
    sl_config_free(&o);
    /* --help and --version win over everything else, even errors. */
    assert_int_equal(PARSE(&o, err, no_env, "--max-conns=bad", "--help"), SL_OPT_HELP);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "-h"), SL_OPT_HELP);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--version"), SL_OPT_VERSION);
    sl_config_free(&o);
    assert_int_equal(PARSE(&o, err, no_env, "--", "--help"), -EINVAL);
    sl_config_free(&o);
}

/* Load YAML text over defaults; returns the result, message in err. */
static int load_yaml(sl_options *o, const char *text, char *err)
{
    const sl_opt_table *t = sl_config_daemon_table();
    memset(o, 0, sizeof(*o));
    assert_int_equal(sl_opt_defaults(t, o, err, 512), 0);
    return sl_opt_load_yaml(t, o, text, strlen(text), "f.yaml", err, 512);
}

static void test_yaml_rules(void **state)
{
    (void)state;
    sl_options o;
    char err[512];
    static const struct {
        const char *yaml;
        const char *err;
    } bad[] = {
        {"listen-addr: a\nmax_connz: 5\n",
         "f.yaml:2: unknown option 'max_connz': did you mean 'max-conns'?"},
        {"max-conns: 1\nmax_conns: 2\n", "f.yaml:2: option 'max-conns' set twice (first at line 1)"},
        {"idle-timeout: 5s\nread-timeout:\n  a: 1\n",
         "f.yaml:3: option 'read-timeout' takes a duration, not a nested mapping"},
        {"max-conns: [1, 2]\n", "f.yaml:1: option 'max-conns' takes an integer, not a list"},
        {"peers: [[a]]\n", "f.yaml:1: option 'peers': list items must be scalars, not a list"},
        {"config: other.yaml\n", "f.yaml:1: option 'config' cannot be set in a file"},
        {"- a\n- b\n", "f.yaml:1: the file must be a mapping of option: value"},
        {"a: 1\n---\nb: 2\n", "f.yaml:1: unknown option 'a' (sluiced --help lists the options)"},
        {"max-conns: 1\n---\nmax-streams: 2\n", "f.yaml:2: only one YAML document is allowed"},
        {"max-conns: &a 1\nmax-streams: *a\n",
         "f.yaml:2: option 'max-streams' takes an integer, not an alias"},
        {"max-conns: 1\ninstance-id: \"abc\n", NULL}, /* unclosed quote */
        {"[1, 2]: 3\n", "f.yaml:1: keys must be option names, not a list"},
        {"\n\nmax-conns: ten\n", "option 'max-conns': invalid integer 'ten' (file f.yaml:3)"},
        {"max-conns:\n", "option 'max-conns': invalid integer '' (file f.yaml:1)"},
        {"peers: [a\n", NULL},
        {"\tmax-conns: 1\n", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        int rc = load_yaml(&o, bad[i].yaml, err);
        if (rc != -EINVAL || (bad[i].err && strcmp(err, bad[i].err) != 0))
            fail_msg("case %zu: rc %d, err '%s', want '%s'", i, rc, err,
                     bad[i].err ? bad[i].err : "(a YAML error)");
        if (bad[i].err == NULL)
            assert_true(strncmp(err, "f.yaml:", 7) == 0 && strstr(err, "invalid YAML") != NULL);
        sl_config_free(&o);
    }

    /* Accepted forms. */
    assert_int_equal(load_yaml(&o, "", err), 0);
    sl_config_free(&o);
    assert_int_equal(load_yaml(&o, "# only a comment\n", err), 0);
    sl_config_free(&o);
    assert_int_equal(load_yaml(&o, "---\n", err), 0);
    sl_config_free(&o);
    assert_int_equal(load_yaml(&o,
                               "---\n"
                               "instance-id: \"node 1\"\n"
                               "graphite-addr: ~\n"
                               "graphite_prefix: ''\n"
                               "storage-addrs: [\"http://a:2379\", http://b:2379]\n"
                               "peers: a:1, b:2\n"
                               "max-body-bytes: 4MiB\n"
                               "batch-wait: 1ms\n"
                               "fail-open: on\n"
                               "no-quota: allow\n"
                               "...\n",
                               err),
                     0);
    assert_string_equal(o.instance_id, "node 1");
    assert_string_equal(o.graphite_addr, "");
    assert_string_equal(o.graphite_prefix, "");
    assert_int_equal(o.storage_addrs.n, 2);
    assert_string_equal(o.storage_addrs.items[1], "http://b:2379");
    assert_int_equal(o.peers.n, 2);
    assert_string_equal(o.peers.items[1], "b:2");
    assert_int_equal(o.max_body_bytes, 4 << 20);
    assert_int_equal(o.batch_wait_ns, MS);
    assert_true(o.fail_open);
    assert_int_equal(o.no_quota, SL_NO_QUOTA_ALLOW);
    sl_config_free(&o);
    /* An empty sequence clears a list. */
    assert_int_equal(load_yaml(&o, "peers: []\n", err), 0);
    assert_int_equal(o.peers.n, 0);
    sl_config_free(&o);

    /* Errors through sl_config_parse carry the real path and line. */
    char path[32], want[128];
    write_file(path, "max-conns: 5\nshards: many\n");
    assert_int_equal(PARSE(&o, err, no_env, "--config", path), -EINVAL);
    snprintf(want, sizeof(want), "option 'shards': invalid integer 'many' (file %s:2)", path);
    assert_string_equal(err, want);
    sl_config_free(&o);
    unlink(path);
}

static void test_help_lists_every_option(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    sl_config_help(f);
    long n = ftell(f);
    char *s = malloc((size_t)n + 1);
    rewind(f);
    s[fread(s, 1, (size_t)n, f)] = '\0';
    fclose(f);
    const sl_opt_table *t = sl_config_daemon_table();
    assert_true(t->nopts >= 43);
    for (size_t i = 0; i < t->nopts; i++) {
        const sl_opt *o = &t->opts[i];
        char flag[96], env[96];
        char shortp[8] = "    ";
        if (o->short_name)
            snprintf(shortp, sizeof(shortp), "-%c, ", o->short_name);
        snprintf(flag, sizeof(flag), "%s--%s%s ", shortp, o->type == SL_OPT_BOOL ? "[no-]" : "",
                 o->name);
        sl_opt_env_name(t, o, env, sizeof(env));
        const char *at = strstr(s, flag);
        if (at == NULL)
            fail_msg("--help lacks %s", o->name);
        /* The help line follows, then the default and env var. */
        const char *meta = strstr(at, "[default: ");
        assert_non_null(meta);
        assert_non_null(strstr(meta, env));
        assert_true(strstr(meta, env) < strchr(meta, '\n'));
        assert_non_null(strstr(s, o->help));
        assert_non_null(strstr(s, o->group));
    }
    assert_non_null(strstr(s, "Usage: sluiced [options]"));
    assert_non_null(strstr(s, "  -c, --config FILE"));
    assert_non_null(strstr(s, "[default: 127.0.0.1:5454; env SLUICE_LISTEN_ADDR]"));
    assert_non_null(strstr(s, "[default: the number of CPUs; env SLUICE_WORKERS]"));
    assert_non_null(strstr(s, "--no-quota allow|deny|error"));
    assert_non_null(strstr(s, "[default: 16KiB; env SLUICE_MAX_HEADER_BYTES]"));
    assert_non_null(strstr(s, "\nQuotas (Levee):\n"));
    assert_non_null(strstr(s, "--help"));
    free(s);
}

/* sl_config_dump's text (malloc'd). */
static char *dump_text(const sl_options *o)
{
    char *d = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&d, &n);
    assert_non_null(f);
    sl_config_dump(o, f);
    fclose(f);
    return d;
}

static void test_dump_round_trip(void **state)
{
    (void)state;
    sl_options a, b;
    char err[512];
    assert_int_equal(PARSE(&a, err, no_env, "--instance-id", "q\"uo\\te", "--peers", "a:1,b:2",
                           "--batch-wait", "1500us", "--max-header-bytes", "1000000",
                           "--discovery", "static", "--no-quota", "deny", "-v"),
                     0);
    char *d1 = dump_text(&a), *d2;
    assert_non_null(strstr(d1, "instance-id: \"q\\\"uo\\\\te\"\n"));
    assert_non_null(strstr(d1, "batch-wait: 1500us\n"));
    assert_non_null(strstr(d1, "peers:\n  - \"a:1\"\n  - \"b:2\"\n"));
    assert_null(strstr(d1, "config:"));
    assert_int_equal(load_yaml(&b, d1, err), 0);
    d2 = dump_text(&b);
    assert_string_equal(d1, d2);
    free(d1);
    free(d2);
    sl_config_free(&a);
    sl_config_free(&b);
}

/* Found by fuzz_config (tests/fuzz/corpus/fuzz_config/nel): a value holding a character YAML
 * reads as a line break inside quotes (U+0085, U+2028, U+2029) was dumped raw and loaded back as
 * a space; a C1 control was dumped raw, which YAML refuses. The dump escapes them now. */
static void test_dump_round_trip_breaks(void **state)
{
    (void)state;
    static const char *const in[] = {
        "instance-id: \"a: b #&c\\N\\\"xkb 9nstance-id: limib #\"\n",
        "instance-id: \"\\L\\P\\uFEFF\\uFFFE\\uFFFF\\x80\\x9f\\N\\_x\"\n",
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        sl_options a, b;
        char err[512];
        assert_int_equal(load_yaml(&a, in[i], err), 0);
        char *d1 = dump_text(&a);
        assert_null(strstr(d1, "\xc2\x85"));
        assert_null(strstr(d1, "\xe2\x80\xa8"));
        assert_int_equal(load_yaml(&b, d1, err), 0);
        assert_string_equal(a.instance_id, b.instance_id);
        char *d2 = dump_text(&b);
        assert_string_equal(d1, d2);
        free(d1);
        free(d2);
        sl_config_free(&a);
        sl_config_free(&b);
    }
}

static void test_file_limits(void **state)
{
    (void)state;
    sl_options o;
    char err[512];
    const sl_opt_table *t = sl_config_daemon_table();
    memset(&o, 0, sizeof(o));
    assert_int_equal(sl_opt_defaults(t, &o, err, sizeof(err)), 0);
    assert_int_equal(sl_opt_load_file(t, &o, "/tmp", err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "not a regular file"));
    char path[32];
    write_file(path, "");
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 70000; i++)
        fputs("# padding padding\n", f); /* > 1 MiB */
    fclose(f);
    assert_int_equal(sl_opt_load_file(t, &o, path, err, sizeof(err)), -EFBIG);
    unlink(path);
    sl_config_free(&o);
}

/* A check (sluiced --check-config) reports every problem of every source, in order, the plain
 * parse only the first; and the origins say where each value came from (--print-config). */
static void test_check_reports_every_problem(void **state)
{
    (void)state;
    char path[32], err[512];
    write_file(path, "listen_adr: 127.0.0.1:1\n"       /* unknown, with a suggestion */
                     "max-conns: ten\n"                 /* a bad integer */
                     "admin-addr: \"[::1\"\n"           /* a bad address, found by finalize */
                     "nested:\n  a: 1\n"                /* unknown, and its value skipped */
                     "max-streams: 7\n");               /* still applied after all that */
    char cfg[64];
    snprintf(cfg, sizeof cfg, "SLUICE_CONFIG=%s", path);
    char *envp[] = {cfg, "SLUICE_MAX_BODY_BYTES=lots", "SLUICE_WORKERS=3", NULL};
    const sl_opt_table *t = sl_config_daemon_table();
    char(*origin)[SL_OPT_ORIGIN_MAX] = calloc(t->nopts, sizeof *origin);
    assert_non_null(origin);
    sl_options o;
    memset(&o, 0, sizeof o);
    sl_diag d = {0};
    int rc = sl_config_check(&o, ARGC("--listen-addr", "127.0.0.1:99999", "--tls-key", "k.pem",
                                      "--peers", "a:1", "--lsten-addr", "x", "--shards", "3"),
                             ARGV("--listen-addr", "127.0.0.1:99999", "--tls-key", "k.pem",
                                  "--peers", "a:1", "--lsten-addr", "x", "--shards", "3"),
                             envp, &d, origin, err, sizeof err);
    assert_int_equal(rc, -EINVAL);
    static const char *const want[] = {
        ":1: unknown option 'listen_adr': did you mean 'listen-addr'?",
        "option 'max-conns': invalid integer 'ten' (file ",
        ":4: unknown option 'nested' (sluiced --help lists the options)",
        "option 'max-body-bytes': invalid size 'lots'",
        "unknown flag '--lsten-addr': did you mean '--listen-addr'? (see --help)",
        "option 'listen-addr': port 99999 is out of range 1-65535 (flag --listen-addr)",
        "option 'admin-addr': '[::1' has no ']' after the IPv6 address (file ",
        "option 'peers': a peer list needs --discovery static",
        "option 'shards': 3 is not a power of two",
        ("option 'tls-key': --tls-key needs --tls-cert (the certificate of that key) "
         "(flag --tls-key)"),
    };
    for (size_t i = 0; i < d.n && i < sizeof want / sizeof want[0]; i++)
        if (!strstr(d.lines[i], want[i]))
            fail_msg("problem %zu: '%s', want '%s'", i, d.lines[i], want[i]);
    assert_int_equal(sl_diag_count(&d), sizeof want / sizeof want[0]);
    assert_non_null(strstr(err, want[0])); /* err: the first */
    assert_int_equal(o.max_streams, 7);    /* the sources went on past their problems */
    assert_int_equal(o.workers, 3);
    const sl_opt *ms = sl_opt_find(t, "max-streams"), *w = sl_opt_find(t, "workers");
    const sl_opt *id = sl_opt_find(t, "instance-id"), *mc = sl_opt_find(t, "max-conns");
    const sl_opt *tk = sl_opt_find(t, "tls-key");
    char want_file[64];
    snprintf(want_file, sizeof want_file, "file %s:6", path);
    assert_string_equal(origin[ms - t->opts], want_file);
    assert_string_equal(origin[w - t->opts], "env SLUICE_WORKERS");
    assert_string_equal(origin[tk - t->opts], "flag --tls-key");
    assert_string_equal(origin[mc - t->opts], "default"); /* its bad value was not taken */
    assert_string_equal(origin[id - t->opts], "computed: the host name");
    sl_diag_free(&d);
    sl_config_free(&o);
    /* The plain parse stops at the first. */
    memset(&o, 0, sizeof o);
    assert_int_equal(sl_config_parse(&o, ARGC("--shards", "3", "--tls-key", "k"),
                                     ARGV("--shards", "3", "--tls-key", "k"), no_env, err,
                                     sizeof err),
                     -EINVAL);
    assert_string_equal(err, "option 'shards': 3 is not a power of two");
    sl_config_free(&o);
    free(origin);
    unlink(path);
}

/* --print-config's dump: each origin as a comment, a secret option redacted, a URL's password
 * redacted, and the rest loads back. */
static void test_dump_origins_redacts(void **state)
{
    (void)state;
    typedef struct tgt {
        char *pass, *url, *plain;
        sl_opt_list urls;
    } tgt;
    static const sl_opt opts[] = {
        {.name = "pass", .type = SL_OPT_STRING, .offset = offsetof(tgt, pass), .secret = true},
        {.name = "url", .type = SL_OPT_STRING, .offset = offsetof(tgt, url)},
        {.name = "plain", .type = SL_OPT_STRING, .offset = offsetof(tgt, plain)},
        {.name = "urls", .type = SL_OPT_LIST, .offset = offsetof(tgt, urls)},
    };
    const sl_opt_table t = {.program = "x", .env_prefix = "X_", .opts = opts, .nopts = 4};
    tgt v;
    memset(&v, 0, sizeof v);
    char err[256];
    char origin[4][SL_OPT_ORIGIN_MAX];
    memset(origin, 0, sizeof origin);
    sl_opt_track tr = {.origin = origin};
    assert_int_equal(sl_opt_defaults_ex(&t, &v, &tr, err, sizeof err), 0);
    char *envp[] = {"X_PASS=hunter2", NULL};
    assert_int_equal(sl_opt_load_env_ex(&t, &v, envp, &tr, err, sizeof err), 0);
    char *argv[] = {"x", "--url", "redis://u:pw@10.0.0.1:6379/0", "--urls",
                    "http://a:b@h:1,http://h:2", "--plain", "a@b://c", NULL};
    assert_int_equal(sl_opt_load_args_ex(&t, &v, 7, argv, &tr, err, sizeof err), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    sl_opt_dump_origins(&t, &v, (const char(*)[SL_OPT_ORIGIN_MAX])origin, f);
    fclose(f);
    assert_string_equal(buf, "pass: \"<redacted>\"  # env X_PASS\n"
                             "url: \"redis://<redacted>@10.0.0.1:6379/0\"  # flag --url\n"
                             "plain: \"a@b://c\"  # flag --plain\n"
                             "urls:  # flag --urls\n"
                             "  - \"http://<redacted>@h:1\"\n"
                             "  - \"http://h:2\"\n");
    assert_null(strstr(buf, "hunter2"));
    assert_null(strstr(buf, "pw@"));
    free(buf);
    sl_opt_free(&t, &v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_reports_every_problem),
        cmocka_unit_test(test_dump_origins_redacts),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_peer_auth_options),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_process_environment),
        cmocka_unit_test(test_sizes_bools_ints),
        cmocka_unit_test(test_enums_and_cross_checks),
        cmocka_unit_test(test_flags),
        cmocka_unit_test(test_yaml_rules),
        cmocka_unit_test(test_help_lists_every_option),
        cmocka_unit_test(test_dump_round_trip),
        cmocka_unit_test(test_dump_round_trip_breaks),
        cmocka_unit_test(test_file_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

# SPDX-License-Identifier: Apache-2.0
"""The `sluice` CLI as a script sees it, against a real sluiced (and a real etcd for quota and
killswitch): --json on every command, one exit-code table (0 ok, 1 limited or refused, 2 usage,
3 unreachable or broken) for every case, SLUICE_ADDR / SLUICE_ADMIN_ADDR, `sluice status`,
the quota that rejected an attempt, check's item errors, top's missing admin port, and the bash
completion."""
import json
import os
import random
import re
import subprocess
import time

import pytest
from conftest import ROOT, SLUICE, free_port, secret_file
from etcdproc import EtcdProc

TOKEN = "cli-test-admin-token-0123456789abcdef"
# a slow sublimit (one POST per 10 s) under a generous main quota: the POST sublimit rejects
# while the first quota named in the headers ("api") still has room
QUOTAS = ("limit:\n  key:\n    api:\n      quota: {rate: 100, burst: 10}\n"
          "      sublimit:\n        POST: {rate: 0.1, burst: 0}\n")
COMPLETION = os.path.join(ROOT, "packaging", "bash-completion", "sluice")
MAN = os.path.join(ROOT, "man", "sluice.1")


def run(*args, env=None, timeout=30):
    e = dict(os.environ)
    for k in ("SLUICE_ADDR", "SLUICE_ADMIN_ADDR"):
        e.pop(k, None)
    e.update(env or {})
    return subprocess.run([SLUICE] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout, env=e)


def one_json(r):
    """the command's stdout is one JSON object"""
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1, (r.args, r.stdout, r.stderr)
    j = json.loads(lines[0])
    assert isinstance(j, dict), r.stdout
    return j


def commands():
    top = run("--help")
    assert top.returncode == 0
    cmds = re.findall(r"^  (\w+) ", top.stdout.split("commands:")[1].split("\n\n")[0], re.M)
    assert len(cmds) >= 9, top.stdout
    return cmds


def dead_addr():
    return "127.0.0.1:%d" % free_port()


@pytest.fixture(scope="module")
def etcd():
    e = EtcdProc().start()
    yield e
    e.close()


@pytest.fixture
def prefix(request):
    return "/cli-%s-%06d" % (re.sub(r"[^A-Za-z0-9]", "-", request.node.name),
                             random.randrange(1000000))


@pytest.fixture
def levee(node_factory, tmp_path):
    q = tmp_path / "quotas.yaml"
    q.write_text(QUOTAS)
    tok = secret_file(tmp_path / "admin.token", TOKEN + "\n")
    admin = "127.0.0.1:%d" % free_port()
    n = node_factory(["--workers", "1", "--standalone", "--quota-file", str(q),
                      "--admin-addr", admin, "--admin-token-file", tok])
    n.admin_addr, n.token_file = admin, tok
    return n


def check_args(node, *extra, limit=5, key="k"):
    return ["check", "--addr", node.addr, "--name", "cli", "--key", key, "--limit", limit,
            "--duration", "1m"] + list(extra)


# ---- the table ---------------------------------------------------------------------------------

def test_one_exit_table_in_help_and_man():
    top = run("--help").stdout
    table = top.split("exit status (every command):\n")[1]
    for code in ("0", "1", "2", "3"):
        assert re.search(r"^    %s  \S" % code, table, re.M), table
    assert "unreachable" in table and "usage" in table and "limited" in table
    man = open(MAN).read()
    section = man.split(".SH EXIT STATUS\n")[1].split(".SH ")[0]
    for code in ("0", "1", "2", "3"):
        assert ".B %s\n" % code in section, section
    assert "unreachable" in section and "usage error" in section
    assert "SLUICE_ADDR" in top and "SLUICE_ADMIN_ADDR" in top


def test_every_command_has_json():
    for cmd in commands():
        args = ["bench", "engine"] if cmd == "bench" else [cmd]
        r = run(*args, "--help")
        assert r.returncode == 0, (cmd, r.stderr)
        assert re.search(r"^\s+--\[no-\]json\b", r.stdout, re.M), "sluice %s: no --json" % cmd


# ---- --json and exit codes, command by command ---------------------------------------------------

def test_check_json_and_exit_codes(levee):
    r = run(*check_args(levee, "--json"))
    assert r.returncode == 0 and one_json(r)["status"] == "UNDER_LIMIT", r.stdout + r.stderr
    r = run(*check_args(levee, "--json", "--hits", "9"))
    assert r.returncode == 1 and one_json(r)["status"] == "OVER_LIMIT", r.stdout + r.stderr
    assert run(*check_args(levee)[:-2]).returncode == 2          # no --duration
    assert run(*check_args(levee, "--bogus")).returncode == 2
    r = run("check", "--addr", dead_addr(), "--name", "n", "--key", "k", "--limit", "1",
            "--duration", "1s", "--json")
    assert r.returncode == 3 and "error" in one_json(r), r.stdout


def test_check_item_error_is_an_error(levee):
    """an item the server refuses (an empty key) is an error with no status, exit 1"""
    r = run(*check_args(levee, key=""))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "UNDER_LIMIT" not in r.stdout and "status" not in r.stdout, r.stdout
    assert "refused the item" in r.stderr and "unique_key" in r.stderr, r.stderr
    r = run(*check_args(levee, "--json", key=""))
    j = one_json(r)
    assert r.returncode == 1 and "status" not in j, j
    assert "unique_key" in j["error"] and j["error_kind"] == "refused", j


def test_health_json_and_exit_codes(levee):
    r = run("health", "--addr", levee.addr, "--json")
    assert r.returncode == 0 and one_json(r)["status"] == "healthy", r.stdout + r.stderr
    assert run("health", "--addr", levee.addr, "--bogus").returncode == 2
    r = run("health", "--addr", dead_addr(), "--json")
    assert r.returncode == 3 and "error" in one_json(r)


def test_attempt_names_the_rejecting_quota(levee):
    """On a 429 from the POST sublimit, the attempt shows that quota and the server's reason,
    not the first quota of the headers ("api", limit 100)."""
    a = ["attempt", "--addr", levee.addr, "--resource", "api", "--method", "POST"]
    r = run(*a, "--json")
    assert r.returncode == 0 and one_json(r)["outcome"] == "accepted", r.stdout + r.stderr
    r = run(*a, "--json")
    j = one_json(r)
    assert r.returncode == 1 and j["outcome"] == "rejected", j
    assert j["rejected_by"]["name"] == "api/sublimit/POST", j
    assert j["rejected_by"]["remaining"] == 0 and j["limit"] != 100, j
    assert "api/sublimit/POST" in j["reason"], j
    r = run(*a)
    assert r.returncode == 1
    assert 'rejected by: "api/sublimit/POST"' in r.stdout, r.stdout
    assert re.search(r"^reason: .*rate limit exceeded for \"api/sublimit/POST\"", r.stdout,
                     re.M), r.stdout
    assert "limit 100" not in r.stdout, r.stdout
    r = run(*a, "--http2")
    assert r.returncode == 1 and 'rejected by: "api/sublimit/POST"' in r.stdout, r.stdout
    assert run("attempt", "--addr", levee.addr).returncode == 2            # no --resource
    r = run("attempt", "--addr", dead_addr(), "--resource", "api", "--json")
    assert r.returncode == 3 and one_json(r)["outcome"] == "failed"


def test_status(levee):
    r = run("status", "--admin-socket", levee.admin_socket)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^verdict: +healthy", out, re.M), out
    assert re.search(r"^version: +\S+", out, re.M), out
    assert re.search(r"^listen: +%s" % re.escape(levee.addr), out, re.M), out
    assert re.search(r"^peers: ", out, re.M) and re.search(r"^history: ", out, re.M), out
    assert re.search(r"^quotas: +file, loaded yes", out, re.M), out
    r = run("status", "--admin-socket", levee.admin_socket, "--json")
    j = one_json(r)
    assert r.returncode == 0 and j["health"]["healthy"] is True, j
    assert j["node"]["listen"] == levee.addr and "history" in j and "peers" in j, j
    # usage and unreachable
    assert run("status", "--admin-addr", "127.0.0.1").returncode == 2
    r = run("status", "--admin-socket", str(levee.admin_socket) + ".none")
    assert r.returncode == 3, r.stderr


def test_admin_commands_over_tcp_and_env(levee):
    """SLUICE_ADMIN_ADDR stands for --admin-addr; a missing token is refused (1); flags win."""
    env = {"SLUICE_ADMIN_ADDR": levee.admin_addr}
    r = run("status", "--admin-token-file", levee.token_file, "--json", env=env)
    assert r.returncode == 0 and one_json(r)["health"]["healthy"], r.stdout + r.stderr
    r = run("status", env=env)
    assert r.returncode == 1 and "401" in r.stderr, r.stderr       # refused: no token
    r = run("top", "--admin-token-file", levee.token_file, "--json", env=env)
    assert r.returncode == 0 and "limits" in one_json(r), r.stdout + r.stderr
    r = run("killswitch", "--node", "--json", "--admin-token-file", levee.token_file, "status",
            env=env)
    assert r.returncode == 0 and one_json(r)["switches"] == [], r.stdout + r.stderr
    # --admin-socket wins over the environment, even a wrong one
    r = run("status", "--admin-socket", levee.admin_socket, "--json",
            env={"SLUICE_ADMIN_ADDR": dead_addr()})
    assert r.returncode == 0, r.stderr
    # a port-less SLUICE_ADMIN_ADDR is a usage error naming the variable
    r = run("top", env={"SLUICE_ADMIN_ADDR": "127.0.0.1"})
    assert r.returncode == 2 and "SLUICE_ADMIN_ADDR" in r.stderr, r.stderr
    # a dead TCP admin listener: unreachable
    r = run("top", "--admin-token-file", levee.token_file, env={"SLUICE_ADMIN_ADDR": dead_addr()})
    assert r.returncode == 3, r.stderr


def test_sluice_addr(levee):
    env = {"SLUICE_ADDR": levee.addr}
    r = run("check", "--name", "n", "--key", "env", "--limit", "3", "--duration", "1m", "--json",
            env=env)
    assert r.returncode == 0 and one_json(r)["remaining"] == 2, r.stdout + r.stderr
    assert run("health", env=env).returncode == 0
    r = run("attempt", "--resource", "api", "--json", env=env)
    assert r.returncode == 0 and one_json(r)["outcome"] == "accepted", r.stdout + r.stderr
    # the flag wins
    r = run("health", "--addr", levee.addr, env={"SLUICE_ADDR": dead_addr()})
    assert r.returncode == 0, r.stderr
    r = run("health", "--timeout", "2s", env={"SLUICE_ADDR": dead_addr()})
    assert r.returncode == 3


def test_top_without_a_port_never_goes_to_port_80(levee):
    t0 = time.monotonic()
    r = run("top", "--admin-addr", "127.0.0.1", "--admin-token-file", levee.token_file,
            timeout=10)
    assert r.returncode == 2 and "HOST:PORT" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 5
    r = run("top", "--admin-socket", levee.admin_socket)
    assert r.returncode == 0 and "LIMIT" in r.stdout, r.stderr


def test_killswitch_node_json_and_exit_codes(levee):
    s = ["killswitch", "--node", "--admin-socket", levee.admin_socket]
    r = run(*s, "--json", "on", "api")
    assert r.returncode == 0 and one_json(r)["mode"] == "killed", r.stdout + r.stderr
    r = run(*s, "status")
    assert r.returncode == 0 and re.search(r"^api killed", r.stdout, re.M), r.stdout
    r = run(*s, "--json", "status")
    sw = one_json(r)["switches"]
    assert r.returncode == 0 and [x["name"] for x in sw] == ["api"], sw
    assert run(*s, "--json", "off", "api").returncode == 0
    assert run(*s, "on").returncode == 2                              # no NAME
    assert run(*s, "frobnicate", "x").returncode == 2
    r = run("killswitch", "--node", "--admin-socket", levee.admin_socket + ".none", "status")
    assert r.returncode == 3, r.stderr


def test_etcd_commands_json_and_exit_codes(etcd, prefix):
    st = ["--storage-addrs", etcd.url, "--storage-prefix", prefix]
    r = run("quota", "set", "api", "--rate", "10", "--burst", "2", "--json", *st)
    j = one_json(r)
    assert r.returncode == 0 and j["value"] == {"rate": 10, "burst": 2} and j["revision"] > 0, j
    r = run("quota", "get", "api", "--json", *st)
    assert r.returncode == 0 and one_json(r)["value"]["rate"] == 10, r.stdout
    r = run("quota", "list", "--json", *st)
    entries = one_json(r)["entries"]
    assert r.returncode == 0 and [e["path"] for e in entries] == ["limit/key/api/quota"], entries
    r = run("quota", "get", "absent", "--json", *st)
    assert r.returncode == 1 and one_json(r)["value"] is None             # not set: refused
    r = run("quota", "rm", "api", "--json", *st)
    assert r.returncode == 0 and one_json(r)["deleted"] is True
    assert run("quota", "rm", "api", *st).returncode == 1
    assert run("quota", "frobnicate", *st).returncode == 2
    assert run("quota", "set", "api", *st).returncode == 2                 # no value
    dead = ["--storage-addrs", "http://" + dead_addr(), "--timeout", "2s"]
    assert run("quota", "get", "api", *dead).returncode == 3
    # killswitch through etcd
    r = run("killswitch", "--json", "shadow", "api", *st)
    assert r.returncode == 0 and one_json(r)["mode"] == "shadow", r.stdout + r.stderr
    r = run("killswitch", "--json", "status", *st)
    j = one_json(r)
    assert r.returncode == 0 and j["switches"] == [{"name": "api", "mode": "shadow",
                                                     "origin": "etcd"}], j
    r = run("killswitch", "status", *st)
    assert r.returncode == 0 and r.stdout.strip() == "api shadow", r.stdout
    r = run("killswitch", "--json", "off", "api", *st)
    assert r.returncode == 0 and one_json(r)["mode"] == "enforce"
    assert run("killswitch", "status", *dead).returncode == 3


def test_sim_and_bench_json():
    r = run("sim", "--traffic", "constant", "--rate", "5", "--seconds", "2", "--limit", "3",
            "--duration", "1000", "--json")
    j = one_json(r)
    assert r.returncode == 0 and j["results"] and "scenario" in j, r.stdout[:500]
    assert run("sim", "--bogus").returncode == 2
    r = run("bench", "engine", "--keys", "1000", "--seconds", "0.2", "--json")
    j = one_json(r)
    assert r.returncode == 0 and j["decisions"] > 0, r.stdout
    assert run("bench", "engine", "--bogus").returncode == 2
    assert run("bench", "nosuch").returncode == 2


def test_usage_errors_exit_2():
    assert run().returncode == 2
    assert run("nosuch").returncode == 2
    for cmd in commands():
        args = ["bench", "engine"] if cmd == "bench" else [cmd]
        assert run(*args, "--no-such-flag").returncode == 2, cmd


# ---- bash completion ---------------------------------------------------------------------------

def bash(script):
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_completion_loads_and_lists_every_command():
    r = bash("source %s && complete -p sluice" % COMPLETION)
    assert r.returncode == 0 and "-F _sluice" in r.stdout and r.stdout.strip().endswith(" sluice"), \
        r.stdout + r.stderr
    r = bash("source %s; COMP_WORDS=(%s ''); COMP_CWORD=1; _sluice; printf '%%s\\n' "
             "\"${COMPREPLY[@]}\"" % (COMPLETION, SLUICE))
    offered = set(r.stdout.split())
    assert set(commands()) <= offered, (sorted(commands()), sorted(offered))
    assert offered - set(commands()) <= {"--help", "--version"}, offered
    # each command's options come from its --help: --json everywhere
    for cmd in commands():
        words = "%s bench engine --j" % SLUICE if cmd == "bench" else "%s %s --j" % (SLUICE, cmd)
        n = len(words.split()) - 1
        r = bash("source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _sluice; printf '%%s\\n' "
                 "\"${COMPREPLY[@]}\"" % (COMPLETION, words, n))
        assert "--json" in r.stdout.split(), (cmd, r.stdout, r.stderr)
    r = bash("source %s; COMP_WORDS=(%s killswitch ''); COMP_CWORD=2; _sluice; echo "
             "\"${COMPREPLY[@]}\"" % (COMPLETION, SLUICE))
    assert r.stdout.split() == ["on", "off", "shadow", "status"], r.stdout


def test_completion_is_installed():
    cm = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    assert "packaging/bash-completion/sluice" in cm and "bash-completion/completions" in cm
    deb = open(os.path.join(ROOT, "debian", "sluice.install")).read().split()
    assert "usr/share/bash-completion/completions/sluice" in deb


def test_check_item_the_server_could_not_decide_is_exit_3(node_factory):
    """An item whose owner (a static peer that never started) cannot be reached: an error, exit 3
    (broken), not a status and not 1."""
    port = free_port()
    me, dead = "127.0.0.1:%d" % port, dead_addr()
    n = node_factory(["--workers", "1", "--discovery", "static", "--peers", me + "," + dead,
                      "--batch-timeout", "300ms"], port=port)
    codes = {}
    for i in range(24):
        r = run(*check_args(n, "--json", key="owner-%d" % i))
        j = one_json(r)
        codes.setdefault(r.returncode, []).append(j)
    assert set(codes) <= {0, 3}, codes
    assert 0 in codes and 3 in codes, codes                  # both owners among 24 keys
    for j in codes[3]:
        assert "status" not in j and j["error_kind"] == "failed" and dead in j["error"], j
    r = run(*check_args(n, key="owner-%d" % next(
        i for i in range(24) if one_json(run(*check_args(n, "--json", "--hits", "0",
                                                         key="owner-%d" % i))).get("error"))))
    assert r.returncode == 3 and "could not decide" in r.stderr and "status" not in r.stdout, \
        r.stdout + r.stderr

# SPDX-License-Identifier: Apache-2.0
"""--store redis: stateless sluiced nodes over a real redis-server on a free loopback port (no
persistence). Gubernator's key cases of test_gubernator.py run again against a node on the Redis
store (the same test functions, not copies), and Levee's /attempt cases of test_levee.py and
test_delay.py on nodes started with --store redis (each on a Redis of its own, as the cases expect
one node's state); then what only the Redis store has: /attempt and the fleet as one count for
stateless nodes,: state that outlives every node, per-item errors or
--fail-open while Redis is away and its use again when it is back, key expiry, AUTH."""
import json
import os
import signal
import socket
import subprocess
import time

import grpc
import pytest

import test_gubernator as gub
import test_delay as dly
import test_fleet as flt
import test_levee as lev
from test_levee import etcd, prefix  # noqa: F401 (fixtures of the reused cases)
from conftest import BUILD, free_port, http, needs, wait_for

pytestmark = needs("redis-server")


class Redis:
    """One redis-server; start() again after stop() reuses its port (a Redis coming back)."""

    def __init__(self, extra=()):
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.extra = list(extra)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind",
                                      "127.0.0.1", "--save", "", "--appendonly", "no"] + self.extra,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(self.answers, 10), "redis-server did not start"
        return self

    def answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False

    def cmd(self, *args, auth=None):
        """One command through redis-cli (the reply as text)."""
        pre = ["--user", auth[0], "--pass", auth[1]] if auth else []
        return subprocess.run(["redis-cli", "-p", str(self.port), "--no-auth-warning"] + pre +
                              list(args), capture_output=True, text=True, timeout=10).stdout.strip()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def redis_server():
    r = Redis().start()
    yield r
    r.stop()


def redis_args(r, *more):
    return ["--workers", "2", "--store", "redis", "--redis-addrs", r.addr] + list(more)


@pytest.fixture
def redis_node(node_factory, redis_server):
    return node_factory(redis_args(redis_server))


def decide(node, key, hits=1, limit=3, duration=60000, **kw):
    body = {"requests": [dict(name="r", unique_key=key, hits=hits, limit=limit,
                              duration=duration, **kw)]}
    st, _, data = gub.post_json(node, body)
    assert st == 200
    return data["responses"][0]


def metric(node, name):
    _, _, body = http("GET", "http://%s/metrics" % node.addr)
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


# Gubernator's cases, unchanged, on the Redis store
GUBERNATOR_CASES = [
    gub.test_token_bucket_over_grpc,
    gub.test_leaky_bucket_and_peek,
    gub.test_responses_in_request_order_and_per_item_errors,
    gub.test_batch_of_1000_and_1001,
    gub.test_grpc_and_json_give_the_same_answers,
    gub.test_health_and_live,
]


@pytest.mark.parametrize("case", GUBERNATOR_CASES, ids=lambda c: c.__name__)
def test_gubernator_cases_on_redis(case, redis_node, redis_server, pb):
    case(redis_node, pb)
    if case is not gub.test_health_and_live:
        # the decisions were Redis's: keys are there, and the store counted them
        assert int(redis_server.cmd("DBSIZE")) > 0
        assert metric(redis_node, "sluice_redis_items_total") > 0


@pytest.fixture
def redis_node_factory(node_factory, redis_server):
    """node_factory, every node on the Redis store."""
    def make(args=(), env=None, start=True, port=None):
        return node_factory(list(args) + ["--store", "redis", "--redis-addrs", redis_server.addr],
                            env, start, port)
    return make


@pytest.fixture
def redis_each_node_factory(node_factory):
    """node_factory, every node on a Redis store of its own: Levee's single-node cases (some
    start a second node on the same resource names to compare options) see the state one node
    would have, now decided in Redis."""
    servers = []

    def make(args=(), env=None, start=True, port=None):
        r = Redis().start()
        servers.append(r)
        return node_factory(list(args) + ["--store", "redis", "--redis-addrs", r.addr], env,
                            start, port)
    make.servers = servers
    yield make
    for r in servers:
        r.stop()


LEVEE_FILE_CASES = [lev.test_quota_file_and_sighup_reload, lev.test_attempt_headers_always,
                    dly.test_attempt_max_delay, dly.test_attempt_max_delay_cut_by_option,
                    dly.test_attempt_hold_mode]
LEVEE_ETCD_CASES = [lev.test_lookup_levels_defaults_and_sublimits,
                    lev.test_429_headers_and_recovery_after_one_interval,
                    lev.test_http1_and_h2c_answer_alike, lev.test_bad_requests_and_req_id]


@pytest.mark.parametrize("case", LEVEE_FILE_CASES, ids=lambda c: c.__name__)
def test_levee_cases_with_redis_store(case, redis_each_node_factory, tmp_path):
    case(redis_each_node_factory, tmp_path)
    assert_decided_in_redis(redis_each_node_factory)


def assert_decided_in_redis(factory):
    """The quotas' state is in Redis (keys under the Levee namespace), not in the nodes."""
    keys = [k for r in factory.servers for k in r.cmd("KEYS", "sl:*levee*").split()]
    assert keys, "no Levee key in Redis"


@pytest.mark.parametrize("mode,status", [("allow", 200), ("deny", 429), ("error", 500)])
def test_levee_no_quota_modes_with_redis_store(redis_each_node_factory, tmp_path, mode, status):
    lev.test_no_quota_modes(redis_each_node_factory, tmp_path, mode, status)
    assert_decided_in_redis(redis_each_node_factory)


@pytest.mark.parametrize("case", LEVEE_ETCD_CASES, ids=lambda c: c.__name__)
def test_levee_etcd_cases_with_redis_store(case, redis_each_node_factory, etcd, prefix):
    case(redis_each_node_factory, etcd, prefix)
    assert_decided_in_redis(redis_each_node_factory)


def test_json_gateway_conventions_on_redis(redis_node, redis_server):
    gub.test_json_gateway_conventions(redis_node)
    assert redis_server.cmd("EXISTS", "sl:{4:test:x}") == "0"  # the name is "j"
    assert redis_server.cmd("EXISTS", "sl:{1:j:x}") == "1"


def evalsha_calls(r):
    for line in r.cmd("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0


def test_1000_items_are_10_script_calls(redis_node, redis_server):
    before = evalsha_calls(redis_server)
    body = {"requests": [{"name": "n", "unique_key": "b%d" % (i % 700), "hits": 1, "limit": 5,
                          "duration": 60000} for i in range(1000)]}
    st, _, data = gub.post_json(redis_node, body)
    assert st == 200
    rem = [int(r["remaining"]) for r in data["responses"]]
    assert rem[:700] == [4] * 700 and rem[700:] == [3] * 300  # repeated keys decided in order
    # --redis-batch-items 100: ten EVALSHA, one pipeline
    assert evalsha_calls(redis_server) - before == 10


def test_every_node_restarted_loses_no_state(node_factory, redis_server):
    a = node_factory(redis_args(redis_server))
    b = node_factory(redis_args(redis_server))
    # stateless nodes: hits through either count against the same limit
    assert decide(a, "shared")["remaining"] == "2"
    assert decide(b, "shared")["remaining"] == "1"
    for n in (a, b):
        n.kill()
    a2 = node_factory(redis_args(redis_server))
    b2 = node_factory(redis_args(redis_server))
    r = decide(a2, "shared")
    assert (r["status"], r["remaining"]) == ("UNDER_LIMIT", "0")
    r = decide(b2, "shared")
    assert (r["status"], r["remaining"]) == ("OVER_LIMIT", "0")


def test_redis_away_fails_closed_then_is_used_again(node_factory, redis_server):
    n = node_factory(redis_args(redis_server, "--redis-timeout", "200ms"))
    assert decide(n, "k")["remaining"] == "2"
    redis_server.stop()
    r = decide(n, "k")
    assert r["error"] == "redis store unavailable"
    assert wait_for(lambda: (metric(n, "sluice_redis_errors_total") or 0) >= 1, 5)
    # back (empty: no persistence) on the same port: used again without a restart
    redis_server.start()
    assert wait_for(lambda: decide(n, "k").get("error") == "", 10)
    assert int(redis_server.cmd("DBSIZE")) == 1
    logs = n.logs()
    assert "redis store: connected" in logs


def test_redis_away_fails_open(node_factory, redis_server):
    n = node_factory(redis_args(redis_server, "--fail-open", "--redis-timeout", "200ms"))
    assert decide(n, "k")["remaining"] == "2"
    redis_server.stop()
    t0 = time.time()
    answers = [decide(n, "k") for _ in range(40)]
    # the local engine decides: the limit still holds, locally
    assert [a["status"] for a in answers[:3]] == ["UNDER_LIMIT"] * 3
    assert answers[3]["status"] == "OVER_LIMIT"
    assert all(a["error"] == "" for a in answers)
    assert answers[0]["metadata"]["fail_open"] == "redis store unavailable"
    assert metric(n, "sluice_redis_fail_open_total") == 40
    # logged at most once a second per worker (plus the "suppressed" summaries)
    lines = [l for l in n.logs().splitlines() if "deciding locally" in l]
    assert 1 <= len(lines) <= 2 * (int(time.time() - t0) + 2)
    redis_server.start()
    assert wait_for(lambda: "fail_open" not in decide(n, "k2")["metadata"], 10)


def test_redis_that_stops_answering(node_factory, redis_server):
    n = node_factory(redis_args(redis_server, "--redis-timeout", "300ms"))
    assert decide(n, "slow")["remaining"] == "2"
    redis_server.proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.time()
        r = decide(n, "slow")
        assert r["error"] == "redis store unavailable"
        assert time.time() - t0 >= 0.3
    finally:
        redis_server.proc.send_signal(signal.SIGCONT)
    assert wait_for(lambda: decide(n, "slow2").get("error") == "", 10)
    assert metric(n, "sluice_redis_disconnects_total") >= 1


def test_keys_expire(redis_node, redis_server):
    decide(redis_node, "short", duration=1000)
    decide(redis_node, "gone", duration=1000, hits=-1, algorithm="FIXED_WINDOW")
    ttl = int(redis_server.cmd("PTTL", "sl:{1:r:short}"))
    assert 0 < ttl <= 61000  # the state's second plus the 60 s margin
    # a window whose count is back to 0 holds nothing
    assert redis_server.cmd("EXISTS", "sl:{1:r:gone}") == "0"
    assert int(redis_server.cmd("DBSIZE")) == 1
    # no key without an expiry
    assert redis_server.cmd("PTTL", "sl:{1:r:short}") != "-1"


def test_script_flush_is_reloaded(redis_node, redis_server):
    assert decide(redis_node, "f")["remaining"] == "2"
    assert redis_server.cmd("SCRIPT", "FLUSH") == "OK"
    assert decide(redis_node, "f")["remaining"] == "1"
    assert metric(redis_node, "sluice_redis_script_reloads_total") == 1


def test_auth_with_user_and_password_file(node_factory, tmp_path):
    r = Redis(["--user", "default", "off", "--user", "sluice", "on", ">s3cret", "~sl:*", "+@all"])
    r.start()
    try:
        pw = tmp_path / "pw"
        pw.write_text("s3cret\n")
        # a password others can read is refused at start, with the fix in the message
        loose = node_factory(redis_args(r, "--redis-user", "sluice", "--redis-password-file",
                                        str(pw)), start=False)
        loose.start(wait=False)
        assert loose.proc.wait(10) == 2
        assert "chmod 600" in loose.logs(), loose.logs()
        pw.chmod(0o600)
        n = node_factory(redis_args(r, "--redis-user", "sluice", "--redis-password-file", str(pw)))
        assert decide(n, "a")["remaining"] == "2"
        assert r.cmd("EXISTS", "sl:{1:r:a}", auth=("sluice", "s3cret")) == "1"
        bad = tmp_path / "bad"
        bad.write_text("nope")
        bad.chmod(0o600)
        m = node_factory(redis_args(r, "--redis-user", "sluice", "--redis-password-file", str(bad)))
        assert decide(m, "b")["error"] != ""
        assert wait_for(lambda: "AUTH" in m.logs(), 5)
    finally:
        r.stop()


def test_concurrency_leases(redis_node, redis_server):
    a = [decide(redis_node, "c", limit=2, algorithm="CONCURRENCY") for _ in range(3)]
    assert [r["status"] for r in a] == ["UNDER_LIMIT", "UNDER_LIMIT", "OVER_LIMIT"]
    lease = a[0]["metadata"]["lease_id"]
    assert redis_server.cmd("HEXISTS", "sl:{1:r:c}|leases", lease.split(".")[0]) == "1"
    r = decide(redis_node, "c", hits=-1, limit=2, algorithm="CONCURRENCY",
               metadata={"lease_id": lease})
    assert (r["error"], r["remaining"]) == ("", "1")
    r = decide(redis_node, "c", hits=-1, limit=2, algorithm="CONCURRENCY",
               metadata={"lease_id": lease})
    assert r["error"].startswith("lease not found")


def test_embedded_node_on_redis(redis_server, tmp_path):
    """examples/embedded.c with --store redis: its direct calls (sl_node_decide) and its gRPC calls
    count against the same key in Redis, as on the memory store (test_embedded.py)."""
    exe = os.path.join(BUILD, "bin", "example_embedded")
    out = subprocess.run([exe, "--store", "redis", "--redis-addrs", redis_server.addr,
                          "--admin-socket", str(tmp_path / "admin.sock")],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "ok"
    assert "direct  hit 11: status=OVER_LIMIT remaining=0" in lines
    assert int(redis_server.cmd("DBSIZE")) >= 1


def test_options_are_checked(node_factory):
    n = node_factory(["--store", "redis"], start=False)
    n.start(wait=False)
    assert n.proc.wait(10) != 0
    assert "redis-addrs" in n.logs()


# /attempt on stateless nodes: every decision in Redis, one count for the nodes together

def two_attempt_nodes(node_factory, redis_server, tmp_path, quotas, *more):
    q = tmp_path / "quotas.yaml"
    q.write_text(quotas)
    return [node_factory(redis_args(redis_server, "--quota-file", str(q), *more))
            for _ in range(2)]


def test_attempt_on_two_nodes_admits_the_quota_once(node_factory, redis_server, tmp_path):
    """Two sluiced --store redis behind a round-robin balancer: /attempt alternating between them
    admits burst + 1 in all (not twice that), with a sublimit, and the 429s are Levee's."""
    nodes = two_attempt_nodes(node_factory, redis_server, tmp_path,
                              "limit:\n  key:\n    api:\n      quota: {rate: 0.01, burst: 5}\n"
                              "      sublimit:\n        GET: {rate: 0.01, burst: 2}\n")
    cs = [lev.H1(n) for n in nodes]
    answers = [cs[i % 2].attempt("api") for i in range(14)]
    assert [a[0] for a in answers] == [200] * 6 + [429] * 8, [a[0] for a in answers]
    st, h, _ = answers[6]
    assert h["retry-after"] == "100" and lev.policy_names(h) == ["api"]
    assert metric(nodes[0], "sluice_redis_items_total") > 0
    assert metric(nodes[1], "sluice_redis_items_total") > 0
    for c in cs:
        c.close()


def test_attempt_sublimit_across_nodes_gives_back(node_factory, redis_server, tmp_path):
    nodes = two_attempt_nodes(node_factory, redis_server, tmp_path,
                              "limit:\n  key:\n    api:\n      quota: {rate: 0.01, burst: 5}\n"
                              "      sublimit:\n        GET: {rate: 0.01, burst: 1}\n")
    cs = [lev.H1(n) for n in nodes]
    gets = [cs[i % 2].attempt("api", method="GET")[0] for i in range(4)]
    assert gets == [200, 200, 429, 429]
    # the two GETs the sublimit rejected were given back to the main quota: 4 more POSTs pass
    posts = [cs[i % 2].attempt("api", method="POST")[0] for i in range(5)]
    assert posts == [200] * 4 + [429], posts
    for c in cs:
        c.close()


def test_attempt_redis_away_fails_closed_or_open(node_factory, redis_server, tmp_path):
    quotas = "limit:\n  key:\n    api:\n      quota: {rate: 0.01, burst: 1}\n"
    closed, = two_attempt_nodes(node_factory, redis_server, tmp_path, quotas,
                                "--redis-timeout", "200ms")[:1]
    q = tmp_path / "quotas.yaml"
    fo = node_factory(redis_args(redis_server, "--quota-file", str(q), "--fail-open",
                                 "--redis-timeout", "200ms"))
    c, o = lev.H1(closed), lev.H1(fo)
    assert c.attempt("api")[0] == 200
    redis_server.stop()
    st, _, body = c.attempt("api")
    assert (st, body) == (500, b"rate limiter error\n")
    assert metric(closed, "sluice_redis_errors_total") >= 1
    # --fail-open: this node's engine decides (its own burst + 1), counted
    assert [o.attempt("api")[0] for _ in range(3)] == [200, 200, 429]
    assert metric(fo, "sluice_redis_fail_open_total") >= 3
    redis_server.start()
    assert wait_for(lambda: c.attempt("api")[0] == 200, 10)
    c.close()
    o.close()


def test_attempt_fleet_is_one_count_in_redis(node_factory, redis_server, tmp_path):
    """test_fleet.py's fleet on stateless nodes: two --store redis nodes, each told capacity 10
    and reserve 0.2, admit 8 non-critical acquisitions in all; a lease given back on the other
    node frees a slot of the one fleet."""
    nodes = two_attempt_nodes(node_factory, redis_server, tmp_path, flt.QUOTAS)
    addrs = [n.addr for n in nodes]
    answers = [flt.attempt(addrs[i % 2], "search") for i in range(16)]
    ok = [(i, h) for i, (st, h, _) in enumerate(answers) if st == 200]
    assert len(ok) == 8, [a[0] for a in answers]
    assert all(st == 503 and h["ratelimit-policy"] == '"fleet";q=8'
               for st, h, _ in answers if st != 200)
    assert all("x-fleet" not in h for _, h, _ in answers)  # Redis decided
    assert redis_server.cmd("HLEN", "sl:{11:levee.fleet:noncritical}|leases") == "8"
    i, h = ok[0]
    assert flt.release(addrs[1 - i % 2], h["x-lease-id"])[0] == 200
    assert redis_server.cmd("HLEN", "sl:{11:levee.fleet:noncritical}|leases") == "7"
    assert flt.attempt(addrs[1], "search")[0] == 200
    assert flt.attempt(addrs[0], "search")[0] == 503
    # Gubernator callers count in the same fleet
    assert flt.acquire(addrs[0], "g")["status"] == "OVER_LIMIT"


def test_attempt_concurrency_is_one_count_in_redis(node_factory, redis_server, tmp_path):
    """test_fleet.py's concurrency limit on stateless nodes: two --store redis nodes with a
    concurrency limit of 4 admit 4 acquisitions in all; the leases are Redis's, released and
    renewed through either node."""
    nodes = two_attempt_nodes(node_factory, redis_server, tmp_path, flt.CONC_QUOTAS)
    addrs = [n.addr for n in nodes]
    leases = lambda: redis_server.cmd("HLEN", "sl:{10:levee.conc:search}|leases")  # noqa: E731
    ok = flt.check_one_concurrency_count(addrs)
    assert len(ok) == 4
    assert leases() == "4"  # released one, took one again
    # the last renewal, and a release: in Redis
    i, h = ok[1]
    assert flt.renew(addrs[1 - i % 2], h["x-lease-id"])[0] == 200
    assert flt.release(addrs[i % 2], h["x-lease-id"])[0] == 200
    assert leases() == "3"
    assert metric(nodes[0], "sluice_redis_items_total") > 0

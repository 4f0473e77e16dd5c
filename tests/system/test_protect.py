# SPDX-License-Identifier: Apache-2.0
"""Protection against real sluiced processes (docs/protection.md): concurrency leases over Levee's
/attempt and over the Gubernator API, the fleet shedder keeping a reserve for critical traffic, the
worker shedder ramping up under a real overload (wrk) and back down without flapping, shadow mode
(never rejects, but counts and logs), kill switches (quota file, admin listener, and etcd: obeyed
within 1 s by 3 nodes watching one real etcd), and the client library failing open when sluiced is
down (examples/middleware.c).

Real processes take real time: every wait polls with a deadline; durations are short (1-2 s)."""
import base64
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import time
import urllib.request

import grpc
import pytest

from conftest import (EXAMPLE_MIDDLEWARE, SLUICE, Middleware, built, free_port, http, needs, require,
                      wait_for)
from etcdproc import EtcdProc



# ---- helpers ---------------------------------------------------------------------------------

def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def attempt(node, resource, priority=None, acquire=False, method=None, req_id=None):
    h = {"X-Resource": resource}
    if priority:
        h["X-Priority"] = priority
    if acquire:
        h["X-Concurrency"] = "acquire"
    if method:
        h["X-Method"] = method
    if req_id:
        h["X-Req-Id"] = req_id
    return http("POST", "http://%s/attempt" % node.addr, b"", h)


def release(node, lease, resource=None):
    h = {"X-Lease-Id": lease}
    if resource:
        h["X-Resource"] = resource
    return http("POST", "http://%s/release" % node.addr, b"", h)


def get_rate_limits(node, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                           json.dumps({"requests": reqs}))
    assert status == 200, body
    return json.loads(body)["responses"]


def metric(node, name, labels=None):
    """The value of one series from /metrics (0 when absent)."""
    status, _, body = http("GET", "http://%s/metrics" % node.addr)
    assert status == 200
    want = ""
    if labels:
        want = "{" + ",".join('%s="%s"' % kv for kv in labels.items()) + "}"
    for line in body.decode().splitlines():
        if line.startswith(name + want + " "):
            return float(line.split()[-1])
    return 0.0


QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
  key:
    shadowed: {quota: {rate: 1, burst: 0}}
concurrency:
  default: {limit: 20, duration: 60s}
  key:
    short: {limit: 1, duration: 1500}
fleet: {capacity: 10, reserve: 0.2, duration: 60s}
killswitch:
  shadowed: shadow
"""


@pytest.fixture
def levee(node_factory, tmp_path):
    """A node with quotas; its admin API on its own socket (levee.admin(...))."""
    path = write(tmp_path, "quotas.yaml", QUOTAS)
    return node_factory(["--workers", "2", "--standalone", "--quota-file", path])


# ---- concurrency ----------------------------------------------------------------------------

def test_twenty_concurrent_acquisitions_then_429_and_release(levee):
    with concurrent.futures.ThreadPoolExecutor(20) as ex:
        results = list(ex.map(lambda i: attempt(levee, "search", "critical", acquire=True),
                              range(20)))
    assert [s for s, _, _ in results] == [200] * 20
    leases = [h["x-lease-id"] for _, h, _ in results]
    assert len(set(leases)) == 20
    assert all(re.fullmatch(r"[0-9a-f]{16}\.0{16}\.search", lease) for lease in leases)

    status, h, body = attempt(levee, "search", "critical", acquire=True)
    assert status == 429
    assert int(h["retry-after"]) >= 1
    assert h["ratelimit-policy"] == '"concurrency";q=20'
    assert h["ratelimit"].startswith('"concurrency";r=0;t=')
    assert b"concurrency limit reached: 20 calls in flight" in body

    # one release frees one slot
    assert release(levee, leases[5])[0] == 200
    status, h, _ = attempt(levee, "search", "critical", acquire=True)
    assert status == 200 and h["x-lease-id"]
    assert attempt(levee, "search", "critical", acquire=True)[0] == 429
    # a lease is released once; an unknown one is 404, a malformed one 400
    status, _, body = release(levee, leases[5])
    assert status == 404 and b"lease not found" in body
    assert release(levee, "not-a-lease")[0] == 400
    # the release works with the plain id plus X-Resource too
    plain = leases[6].split(".")[0] + "." + "0" * 16
    assert release(levee, plain, "search")[0] == 200
    assert attempt(levee, "search", "critical", acquire=True)[0] == 200
    assert metric(levee, "sluice_protect_events_total",
                  {"limiter": "concurrency", "event": "rejected"}) == 2


def test_unreleased_lease_frees_after_duration(levee):
    status, h, _ = attempt(levee, "short", "critical", acquire=True)
    assert status == 200
    t0 = time.time()
    status, h, _ = attempt(levee, "short", "critical", acquire=True)
    assert status == 429 and h["retry-after"] == "2"  # 1.5 s, rounded up
    assert wait_for(lambda: attempt(levee, "short", "critical", acquire=True)[0] == 200, 4, 0.05)
    waited = time.time() - t0
    assert 1.3 <= waited <= 2.5, waited


def test_concurrency_over_gubernator_api(levee):
    item = {"name": "jobs", "unique_key": "acct-1", "hits": 1, "limit": 2, "duration": 60000,
            "algorithm": "CONCURRENCY"}
    r = get_rate_limits(levee, [item, item, item])
    assert [x["status"] for x in r] == ["UNDER_LIMIT", "UNDER_LIMIT", "OVER_LIMIT"]
    ids = [x["metadata"]["lease_id"] for x in r[:2]]
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids) and ids[0] != ids[1]
    assert r[2]["metadata"]["reason"].startswith("concurrency limit reached")
    assert int(r[2]["reset_time"]) > 0
    rel = dict(item, hits=-1, metadata={"lease_id": ids[0]})
    r = get_rate_limits(levee, [rel, item])
    assert r[0]["error"] == "" and r[0]["remaining"] == "1"
    assert r[1]["status"] == "UNDER_LIMIT"
    r = get_rate_limits(levee, [rel])
    assert r[0]["error"].startswith("lease not found")
    r = get_rate_limits(levee, [dict(item, hits=-1)])
    assert "needs the lease id" in r[0]["error"]


def test_concurrency_over_grpc_with_the_fleet(levee, pb):
    g, _ = pb
    ch = grpc.insecure_channel(levee.addr)
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=g.GetRateLimitsReq.SerializeToString,
                         response_deserializer=g.GetRateLimitsResp.FromString)

    def item(hits, md):
        return g.RateLimitReq(name="grpc-jobs", unique_key="a", hits=hits, limit=100,
                              duration=60000, algorithm=6, metadata=md)

    # a non-critical acquisition also holds a fleet lease (capacity 10, reserve 20 %: 8)
    r = get(g.GetRateLimitsReq(requests=[item(1, {"priority": "get"}) for _ in range(9)]),
            timeout=5)
    ids = [x.metadata["lease_id"] for x in r.responses[:8]]
    assert all(re.fullmatch(r"[0-9a-f]{16}\.[0-9a-f]{16}", i) for i in ids), ids
    assert r.responses[8].status == g.OVER_LIMIT
    assert r.responses[8].metadata["reason"].startswith("shed: fleet capacity")
    assert r.responses[8].metadata["shed"] == "fleet"
    assert all("shed" not in x.metadata for x in r.responses[:8])
    # critical: no fleet lease, not shed
    r = get(g.GetRateLimitsReq(requests=[item(1, {"priority": "critical"})]), timeout=5)
    assert r.responses[0].status == g.UNDER_LIMIT
    assert re.fullmatch(r"[0-9a-f]{16}", r.responses[0].metadata["lease_id"])
    # releasing with the combined id frees both leases: a "get" fits again
    r = get(g.GetRateLimitsReq(requests=[item(-1, {"lease_id": ids[0]}),
                                         item(1, {"priority": "get"})]), timeout=5)
    assert r.responses[0].error == "" and r.responses[1].status == g.UNDER_LIMIT
    # the fleet switched off: non-critical acquisitions pass without a fleet lease
    assert levee.admin("POST", "/v1/admin/killswitch",
                json.dumps({"name": "fleet", "on": True}))[0] == 200
    r = get(g.GetRateLimitsReq(requests=[item(1, {"priority": "test"})]), timeout=5)
    assert r.responses[0].status == g.UNDER_LIMIT
    assert re.fullmatch(r"[0-9a-f]{16}", r.responses[0].metadata["lease_id"])
    ch.close()


# ---- fleet shedder --------------------------------------------------------------------------

def test_critical_traffic_passes_while_noncritical_fills_the_fleet(levee):
    # capacity 10, reserve 20 %: 8 non-critical calls in flight at most
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        first = list(ex.map(lambda i: attempt(levee, "r%d" % i, ("get", "post", "test")[i % 3],
                                              acquire=True), range(8)))
    assert [s for s, _, _ in first] == [200] * 8
    for prio in ("get", "post", "test"):
        status, h, body = attempt(levee, "more", prio, acquire=True)
        assert status == 503, (prio, status)
        assert h["ratelimit-policy"] == '"fleet";q=8' and int(h["retry-after"]) >= 1
        assert b"reserved for critical calls" in body
    # GET without X-Priority is non-critical too
    assert attempt(levee, "more", acquire=True, method="GET")[0] == 503
    # critical calls keep passing (they never use the fleet's non-critical share)
    for i in range(12):
        assert attempt(levee, "crit%d" % i, "critical", acquire=True)[0] == 200
    # one non-critical release makes room for exactly one more
    assert release(levee, first[0][1]["x-lease-id"])[0] == 200
    assert attempt(levee, "more", "get", acquire=True)[0] == 200
    assert attempt(levee, "more2", "get", acquire=True)[0] == 503
    assert metric(levee, "sluice_protect_events_total",
                  {"limiter": "fleet", "event": "rejected"}) == 5


# ---- worker shedder -------------------------------------------------------------------------

WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [[%s]]
"""


def shed_level(node):
    try:
        return metric(node, "sluice_shed_level", {"worker": "0"})
    except Exception:  # noqa: BLE001 - an overloaded node may answer slowly
        return None


def monotone_runs(values):
    """Number of direction changes in a sequence (plateaus ignored)."""
    dirs = []
    for a, b in zip(values, values[1:]):
        if b != a:
            d = 1 if b > a else -1
            if not dirs or dirs[-1] != d:
                dirs.append(d)
    return dirs


@needs("wrk")
def test_worker_shedder_ramps_up_and_down_without_flapping(node_factory, tmp_path):
    path = write(tmp_path, "quotas.yaml", QUOTAS)
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", path,
                         "--shed-target", "50", "--shed-low", "20", "--shed-interval", "50ms",
                         "--shed-raise-after", "300ms", "--shed-lower-after", "600ms",
                         "--shed-raise-step", "50", "--shed-lower-step", "50"])
    # the synthetic overload: wrk hammering GetRateLimits with 200-item batches (critical by
    # default, so the load itself is never shed and the overload lasts as long as wrk runs)
    items = [{"name": "load", "unique_key": "k%d" % i, "hits": 1, "limit": 1000000,
              "duration": 60000} for i in range(200)]
    script = write(tmp_path, "post.lua", WRK_SCRIPT % json.dumps({"requests": items}))
    wrk = subprocess.Popen(["wrk", "-t1", "-c16", "-d6s", "-s", script,
                            "http://%s/v1/GetRateLimits" % node.addr],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    levels, probes = [], {"critical": [], "post": [], "get": [], "test": []}
    t_end = time.time() + 6.5
    while wrk.poll() is None and time.time() < t_end:
        lv = shed_level(node)
        if lv is not None:
            levels.append(lv)
        for prio in probes:
            probes[prio].append(attempt(node, "probe", prio)[0])
        time.sleep(0.05)
    wrk.wait(10)
    loaded = list(levels)
    # the level rose to shed at least all test traffic, and never went down under the load
    assert max(loaded) >= 1.0, loaded
    assert monotone_runs(loaded) == [1], loaded
    assert 503 in probes["test"]
    assert all(s == 200 for s in probes["critical"]), probes["critical"]
    # test traffic was shed before (and at least as much as) the other classes
    shed = {p: probes[p].count(503) for p in probes}
    assert shed["test"] >= shed["get"] >= shed["post"] >= shed["critical"] == 0, shed
    # the load is gone: the level comes back down to 0, step by step, without going up again
    after = []
    assert wait_for(lambda: after.append(shed_level(node)) or after[-1] == 0, 15, 0.1), after
    after = [a for a in after if a is not None]
    assert monotone_runs(after) in ([], [-1]), after
    assert attempt(node, "probe", "test")[0] == 200
    status, h, body = http("GET", "http://%s/metrics" % node.addr)
    m = body.decode()
    assert 'sluice_shed_calls_total{priority="test",outcome="shed"}' in m
    assert "worker shed level raised" in node.logs()
    assert "worker shed level lowered" in node.logs()
    print("shed levels under load:", loaded)
    print("shed levels after load:", after)
    print("probes shed:", shed)


# ---- shadow mode ----------------------------------------------------------------------------

def test_shadow_mode_never_rejects_but_counts(levee):
    # "shadowed" allows 1 request per second and is in shadow mode in the quota file
    for i in range(30):
        status, h, _ = attempt(levee, "shadowed", req_id="dark-%d" % i)
        assert status == 200
    assert h.get("x-sluice-shadow") == "rate"
    n = metric(levee, "sluice_protect_events_total", {"limiter": "rate", "event": "would_reject"})
    assert n >= 28
    assert wait_for(lambda: "would_reject limiter=rate req_id=dark-" in levee.logs(), 2)
    # per request over the Gubernator API: behavior SHADOW (1 << 20)
    item = {"name": "dark", "unique_key": "k", "hits": 1, "limit": 1, "duration": 60000,
            "behavior": 1 << 20}
    r = get_rate_limits(levee, [item] * 5)
    assert all(x["status"] == "UNDER_LIMIT" for x in r)
    assert [x["metadata"].get("shadow") for x in r] == [None, "rate", "rate", "rate", "rate"]
    r = get_rate_limits(levee, [dict(item, behavior=0)])
    assert r[0]["status"] == "OVER_LIMIT" and r[0]["metadata"]["reason"] == "rate limit exceeded"
    assert metric(levee, "sluice_protect_events_total",
                  {"limiter": "rate", "event": "would_reject"}) >= n + 4


# ---- kill switches --------------------------------------------------------------------------

def test_kill_switch_admin_endpoint_and_cli(levee):
    item = {"name": "lim", "unique_key": "k", "hits": 1, "limit": 1, "duration": 60000}
    assert [x["status"] for x in get_rate_limits(levee, [item, item])] == \
        ["UNDER_LIMIT", "OVER_LIMIT"]
    out = subprocess.run([SLUICE, "killswitch", "on", "lim", "--admin-socket",
                          levee.admin_socket],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    r = get_rate_limits(levee, [item])[0]
    assert r["status"] == "UNDER_LIMIT" and r["metadata"]["killswitch"] == "on"
    status, _, body = levee.admin("GET", "/v1/admin/killswitch")
    assert status == 200
    j = json.loads(body)
    assert {"name": "lim", "mode": "killed", "origin": "admin"} in j["switches"]
    assert j["fleet"]["capacity"] == 10
    assert metric(levee, "sluice_killswitch", {"name": "lim", "mode": "killed",
                                               "origin": "admin"}) == 1
    # every limiter at once, over the JSON admin call
    status, _, _ = levee.admin("POST", "/v1/admin/killswitch",
                               json.dumps({"name": "*", "on": True}))
    assert status == 200
    for _ in range(5):
        status, h, _ = attempt(levee, "short", "test", acquire=True)
        assert status == 200 and h["x-sluice-killswitch"] == "*"
    assert levee.admin("POST", "/v1/admin/killswitch",
                       json.dumps({"name": "*", "on": False}))[0] == 200
    out = subprocess.run([SLUICE, "killswitch", "off", "lim", "--admin-socket",
                          levee.admin_socket],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert get_rate_limits(levee, [item])[0]["status"] == "OVER_LIMIT"
    assert levee.admin("POST", "/v1/admin/killswitch", "{}")[0] == 400


def test_kill_switch_on_a_key_covers_its_sublimits(node_factory, tmp_path):
    """README's example: `sluice killswitch on api` admits all of api, its sublimits (api/
    sublimit/DELETE) included; the key's own quota and the sublimit's name both switch it."""
    path = write(tmp_path, "q.yaml", "limit:\n  key:\n    api:\n      quota: {rate: 0.01, "
                 "burst: 5}\n      sublimit:\n        DELETE: {rate: 0.01, burst: 0}\n")
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", path])
    assert [attempt(node, "api", method="DELETE")[0] for _ in range(2)] == [200, 429]
    for name in ("api", "api/sublimit/DELETE"):
        out = subprocess.run([SLUICE, "killswitch", "on", name, "--admin-socket",
                              node.admin_socket], capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, out.stderr
        got = [attempt(node, "api", method="DELETE") for _ in range(3)]
        assert [g[0] for g in got] == [200] * 3, (name, got)
        assert got[-1][1].get("x-sluice-killswitch") == "rate"
        subprocess.run([SLUICE, "killswitch", "off", name, "--admin-socket", node.admin_socket],
                       capture_output=True, text=True, timeout=10)
        assert attempt(node, "api", method="DELETE")[0] == 429


def test_quota_file_switches_reload_on_sighup(node_factory, tmp_path):
    path = write(tmp_path, "quotas.yaml", QUOTAS)
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", path])
    assert attempt(node, "shadowed")[0] == 200
    assert attempt(node, "shadowed")[1].get("x-sluice-shadow") == "rate"
    write(tmp_path, "quotas.yaml", QUOTAS.replace("shadowed: shadow", "shadowed: off"))
    node.signal(signal.SIGHUP)
    assert wait_for(lambda: attempt(node, "shadowed")[0] == 429, 3)
    write(tmp_path, "quotas.yaml", QUOTAS.replace("shadowed: shadow", "shadowed: on"))
    node.signal(signal.SIGHUP)
    assert wait_for(lambda: attempt(node, "shadowed")[1].get("x-sluice-killswitch") == "rate", 3)


@pytest.fixture
def etcd():
    require("etcd")
    e = EtcdProc().start(timeout=15)
    yield e.url
    e.close()


def etcd_put(url, key, value):
    body = json.dumps({"key": base64.b64encode(key.encode()).decode(),
                       "value": base64.b64encode(value.encode()).decode()}).encode()
    with urllib.request.urlopen(urllib.request.Request(url + "/v3/kv/put", data=body,
                                                       method="POST"), timeout=2) as r:
        r.read()


def test_kill_switch_within_one_second_on_three_nodes(node_factory, etcd):
    prefix = "/ks%d" % free_port()
    nodes = [node_factory(["--workers", "1", "--standalone", "--storage-addrs", etcd,
                           "--storage-prefix", prefix]) for _ in range(3)]
    item = {"name": "payments", "unique_key": "acct", "hits": 1, "limit": 1, "duration": 600000}
    for n in nodes:
        assert [x["status"] for x in get_rate_limits(n, [item, item])] == \
            ["UNDER_LIMIT", "OVER_LIMIT"]

    def all_nodes(pred):
        return all(pred(get_rate_limits(n, [item])[0]) for n in nodes)

    def killed(r):
        return r["status"] == "UNDER_LIMIT" and r["metadata"].get("killswitch") == "on"

    def enforcing(r):
        return r["status"] == "OVER_LIMIT"

    t0 = time.time()
    out = subprocess.run([SLUICE, "killswitch", "on", "payments", "--storage-addrs", etcd,
                          "--storage-prefix", prefix], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert wait_for(lambda: all_nodes(killed), 1.0, 0.01), "not obeyed within 1 s"
    on_ms = (time.time() - t0) * 1000
    t0 = time.time()
    out = subprocess.run([SLUICE, "killswitch", "off", "payments", "--storage-addrs", etcd,
                          "--storage-prefix", prefix], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert wait_for(lambda: all_nodes(enforcing), 1.0, 0.01), "not obeyed within 1 s"
    off_ms = (time.time() - t0) * 1000
    # the global switch and shadow mode, written straight to etcd
    t0 = time.time()
    etcd_put(etcd, prefix + "/killswitch/*", "shadow")
    assert wait_for(lambda: all_nodes(lambda r: r["status"] == "UNDER_LIMIT" and
                                      r["metadata"].get("shadow") == "rate"), 1.0, 0.01)
    shadow_ms = (time.time() - t0) * 1000
    out = subprocess.run([SLUICE, "killswitch", "status", "--storage-addrs", etcd,
                          "--storage-prefix", prefix], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and "* shadow" in out.stdout, out.stdout
    print("kill switch on: %.0f ms, off: %.0f ms, global shadow: %.0f ms (3 nodes, CLI round trip "
          "included)" % (on_ms, off_ms, shadow_ms))


# ---- the client library fails open ----------------------------------------------------------

@built(EXAMPLE_MIDDLEWARE)
def test_client_fails_open_when_sluiced_is_down(node_factory, tmp_path):
    dead = "127.0.0.1:%d" % free_port()
    mw = Middleware(dead, "--resource", "demo", "--timeout", "300")
    try:
        for _ in range(3):
            status, h, body = mw.get()
            assert status == 200 and body == b"hello\n"
            assert h.get("x-sluice") == "failed-open"
    finally:
        mw.stop()
    # and with sluiced up it enforces: the quota of "demo" allows 1 request per second
    path = write(tmp_path, "quotas.yaml", "limit:\n  key:\n    demo: {quota: {rate: 1}}\n")
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", path])
    mw = Middleware(node.addr, "--resource", "demo", "--timeout", "300")
    try:
        statuses = [mw.get()[0] for _ in range(3)]
        assert statuses[0] == 200 and 429 in statuses, statuses
        status, h, _ = mw.get()
        assert "x-sluice" not in h
        # sluiced goes away: the service keeps serving, failing open
        node.stop()
        assert wait_for(lambda: mw.get()[1].get("x-sluice") == "failed-open", 5)
    finally:
        mw.stop()


def test_client_library_treats_shedding_as_a_rejection(levee):
    """A 503 from sluice's shedders (it carries RateLimit) is a decision: libsluice and the CLI
    report "rejected" and do not fail open; a lease taken is released through /release."""
    leases = []
    for i in range(8):
        out = subprocess.run([SLUICE, "attempt", "--addr", levee.addr, "--resource", "c%d" % i,
                              "--priority", "get", "--acquire", "--json"],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 0, out.stdout + out.stderr
        leases.append(json.loads(out.stdout)["lease_id"])
    for extra in ([], ["--http2"]):
        out = subprocess.run([SLUICE, "attempt", "--addr", levee.addr, "--resource", "c9",
                              "--priority", "get", "--acquire", "--json"] + extra,
                             capture_output=True, text=True, timeout=10)
        j = json.loads(out.stdout)
        assert out.returncode == 1 and j["outcome"] == "rejected", (extra, out.stdout)
        assert j["http_status"] == 503 and j["retry_after_ms"] >= 1000
    out = subprocess.run([SLUICE, "attempt", "--addr", levee.addr, "--release", leases[0],
                          "--http2", "--json"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and json.loads(out.stdout)["outcome"] == "released", out.stdout
    assert attempt(levee, "c9", "get", acquire=True)[0] == 200


# ---- one meaning of "shed" --------------------------------------------------------------------

def sluice_check(node, *extra):
    out = subprocess.run([SLUICE, "check", "--addr", node.addr, "--name", "jobs", "--key", "k",
                          "--limit", "100", "--duration", "60000", "--json"] + list(extra),
                         capture_output=True, text=True, timeout=10)
    return out.returncode, json.loads(out.stdout)


def test_fleet_shed_is_marked_for_the_client(levee):
    """An item the fleet shedder refuses carries metadata shed=fleet in both dialects, and
    libsluice reports it OVER_LIMIT (not failed open)."""
    for i in range(8):
        rc, j = sluice_check(levee, "--algorithm", "concurrency", "--metadata", "priority=get")
        assert rc == 0 and j["status"] == "UNDER_LIMIT", j
    rc, j = sluice_check(levee, "--algorithm", "concurrency", "--metadata", "priority=get")
    assert rc == 1 and j["status"] == "OVER_LIMIT" and j["metadata"]["shed"] == "fleet", j
    r = get_rate_limits(levee, [{"name": "jobs", "unique_key": "k", "hits": 1, "limit": 100,
                                 "duration": 60000, "algorithm": 6,
                                 "metadata": {"priority": "get"}}])
    assert r[0]["status"] == "OVER_LIMIT" and r[0]["metadata"]["shed"] == "fleet", r


def test_worker_shed_is_marked_in_both_dialects_and_the_client(node_factory, tmp_path, pb):
    """A call the worker shedder refuses says so in both dialects (gRPC UNAVAILABLE + trailer
    sluice-shed, HTTP 503 + header sluice-shed), and libsluice maps it to OVER_LIMIT with "shed"
    instead of failing open."""
    g, _ = pb
    path = write(tmp_path, "quotas.yaml", QUOTAS)
    # a worker shedder that rises at once under any load and never falls during the test
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", path,
                         "--shed-target", "1", "--shed-low", "0", "--shed-interval", "10ms",
                         "--shed-raise-after", "0", "--shed-lower-after", "1h",
                         "--shed-raise-step", "300", "--shed-smoothing", "100"])
    # load the worker (critical batches are never shed) until it sheds non-critical calls
    items = [{"name": "load", "unique_key": "k%d" % i, "hits": 1, "limit": 1000000,
              "duration": 60000} for i in range(500)]
    body = json.dumps({"requests": items})
    deadline = time.time() + 10
    while time.time() < deadline and (shed_level(node) or 0) < 3:
        http("POST", "http://%s/v1/GetRateLimits" % node.addr, body)
    assert shed_level(node) >= 3

    # gRPC: UNAVAILABLE with the trailer sluice-shed: worker and Retry-After
    ch = grpc.insecure_channel(node.addr)
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=g.GetRateLimitsReq.SerializeToString,
                         response_deserializer=g.GetRateLimitsResp.FromString)
    req = g.GetRateLimitsReq(requests=[g.RateLimitReq(name="jobs", unique_key="x", hits=1,
                                                      limit=10, duration=1000,
                                                      metadata={"priority": "test"})])
    with pytest.raises(grpc.RpcError) as e:
        get(req, timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    md = dict(e.value.trailing_metadata() or ()) or dict(e.value.initial_metadata() or ())
    assert md.get("sluice-shed") == "worker", md
    assert int(md["retry-after"]) >= 1
    assert "overloaded" in e.value.details()
    ch.close()
    # HTTP: 503 with the header
    status, h, _ = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                        json.dumps({"requests": [{"name": "jobs", "unique_key": "x", "hits": 1,
                                                  "limit": 10, "duration": 1000,
                                                  "metadata": {"priority": "get"}}]}))
    assert status == 503 and h["sluice-shed"] == "worker" and int(h["retry-after"]) >= 1
    # the client: OVER_LIMIT with shed=worker, not failed open (which would say UNDER_LIMIT)
    rc, j = sluice_check(node, "--metadata", "priority=test")
    assert rc == 1 and j["status"] == "OVER_LIMIT", j
    assert j["metadata"]["shed"] == "worker" and "overloaded" in j["metadata"]["reason"], j
    # whereas a sluiced nobody answers for is a transport failure (the client fails it open)
    dead = type("Dead", (), {"addr": "127.0.0.1:%d" % free_port()})()
    rc, j = sluice_check(dead, "--metadata", "priority=test")
    assert rc == 3 and "errno" in j, j
    # critical calls still pass
    rc, j = sluice_check(node, "--metadata", "priority=critical")
    assert rc == 0 and j["status"] == "UNDER_LIMIT", j
    # /attempt: the same 503, reported "rejected" by the client
    out = subprocess.run([SLUICE, "attempt", "--addr", node.addr, "--resource", "r",
                          "--priority", "test", "--http2", "--json"],
                         capture_output=True, text=True, timeout=10)
    j = json.loads(out.stdout)
    assert out.returncode == 1 and j["outcome"] == "rejected" and j["http_status"] == 503, j

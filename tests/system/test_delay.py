# SPDX-License-Identifier: Apache-2.0
"""Delay instead of reject against a real sluiced: Levee's /attempt with X-Max-Delay answers 200
with X-Delay-Ms while the wait fits (each slot reserved once), 429 beyond it, 400 on a bad value;
Gubernator items with metadata max_delay_ms answer UNDER_LIMIT with metadata delay_ms over JSON
and gRPC, and through a two-node static cluster (the owner decides, the delay comes back).

Rates are slow (10/s with a 60 s bucket for Gubernator) and assertions allow for the test's own
elapsed time, so a stalled machine cannot make them flaky."""
import json
import time

import grpc

from conftest import free_port, http


def write_yaml(path, text):
    with open(path, "w") as f:
        f.write(text)


def attempt(node, resource, max_delay=None):
    h = {"X-Resource": resource}
    if max_delay is not None:
        h["X-Max-Delay"] = max_delay
    st, hdrs, _ = http("POST", "http://%s/attempt" % node.addr, b"", h)
    return st, hdrs


def test_attempt_max_delay(node_factory, tmp_path):
    path = str(tmp_path / "q.yaml")
    # 1 per second, no burst: the waits are whole seconds minus the little time the test takes
    write_yaml(path, "limit:\n  key:\n    api:\n      quota: {rate: 1}\n")
    node = node_factory(["--standalone", "--workers", "2", "--quota-file", path])
    t0 = time.monotonic()
    st, h = attempt(node, "api", "10s")
    assert st == 200 and "x-delay-ms" not in h
    delays = []
    for _ in range(4):
        st, h = attempt(node, "api", "4500ms")
        assert st == 200, h
        delays.append(int(h["x-delay-ms"]))
    el = int((time.monotonic() - t0) * 1000) + 1
    # slot k is k seconds after the first: each delay is its own slot, none given twice
    for k, d in enumerate(delays, start=1):
        assert k * 1000 - el <= d <= k * 1000, (delays, el)
    assert delays == sorted(delays) and len(set(delays)) == 4
    # slot 5 is ~5 s away: more than asked -> 429 that reserved nothing
    st, h = attempt(node, "api", "4500")
    assert st == 429 and "x-delay-ms" not in h
    st, h = attempt(node, "api", "6s")
    assert st == 200 and 4000 < int(h["x-delay-ms"]) <= 5000
    # malformed, and no header: the old behaviour
    assert attempt(node, "api", "soon")[0] == 400
    assert attempt(node, "api")[0] == 429


def test_attempt_max_delay_cut_by_option(node_factory, tmp_path):
    path = str(tmp_path / "q.yaml")
    write_yaml(path, "limit:\n  key:\n    api:\n      quota: {rate: 1}\n")
    node = node_factory(["--standalone", "--workers", "1", "--quota-file", path,
                         "--attempt-max-delay", "0"])
    assert attempt(node, "api", "10s")[0] == 200
    assert attempt(node, "api", "10s")[0] == 429


def gub_item(key, **kw):
    it = {"name": "delay", "unique_key": key, "hits": "1", "limit": "10", "duration": "60000",
          "algorithm": 2}
    it.update(kw)
    return it


def get_json(addr, items):
    st, _, data = http("POST", "http://%s/v1/GetRateLimits" % addr,
                       json.dumps({"requests": items}), {"Content-Type": "application/json"})
    assert st == 200, data
    return json.loads(data)["responses"]


def check_gub_delays(addr, key):
    """GCRA 10 per minute (T = 6 s): the first passes, the next two wait ~6 s and ~12 s."""
    t0 = time.monotonic()
    r = get_json(addr, [gub_item(key, metadata={"max_delay_ms": "13000"})])[0]
    assert r["status"] == "UNDER_LIMIT" and "delay_ms" not in r["metadata"], r
    r1, r2, r3 = get_json(addr, [gub_item(key, metadata={"max_delay_ms": "13000"})
                                 for _ in range(3)])
    el = int((time.monotonic() - t0) * 1000) + 1
    assert r1["status"] == r2["status"] == "UNDER_LIMIT", (r1, r2)
    assert 6000 - el <= int(r1["metadata"]["delay_ms"]) <= 6000
    assert 12000 - el <= int(r2["metadata"]["delay_ms"]) <= 12000
    assert r3["status"] == "OVER_LIMIT" and "delay_ms" not in r3["metadata"], r3
    # no max_delay_ms: rejected as before
    r = get_json(addr, [gub_item(key)])[0]
    assert r["status"] == "OVER_LIMIT"


def test_gubernator_max_delay_json(node):
    check_gub_delays(node.addr, "json")
    r = get_json(node.addr, [gub_item("bad", metadata={"max_delay_ms": "-1"})])[0]
    assert "max_delay_ms" in r["error"]


def test_gubernator_max_delay_grpc(node, pb):
    g, _ = pb
    ch = grpc.insecure_channel(node.addr)
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=g.GetRateLimitsReq.SerializeToString,
                         response_deserializer=g.GetRateLimitsResp.FromString)
    req = [g.RateLimitReq(name="delay", unique_key="grpc", hits=1, limit=10, duration=60000,
                          algorithm=2, metadata={"max_delay_ms": "7000"}) for _ in range(3)]
    t0 = time.monotonic()
    a, b, c = get(g.GetRateLimitsReq(requests=req), timeout=5).responses
    el = int((time.monotonic() - t0) * 1000) + 1
    assert a.status == g.UNDER_LIMIT and "delay_ms" not in a.metadata
    assert b.status == g.UNDER_LIMIT and 6000 - el <= int(b.metadata["delay_ms"]) <= 6000
    assert c.status == g.OVER_LIMIT and "delay_ms" not in c.metadata
    ch.close()


def test_gubernator_max_delay_cluster(node_factory):
    addrs = ["127.0.0.1:%d" % free_port() for _ in range(2)]
    peers = ",".join(addrs)
    nodes = []
    for a in addrs:
        n = node_factory(["--workers", "1", "--discovery", "static", "--peers", peers],
                         start=False, port=int(a.split(":")[1]))
        nodes.append(n)
    for n in nodes:
        n.start()
    # find a key the second node owns, then ask the first: the owner's delay comes back
    other = None
    for i in range(200):
        r = get_json(nodes[0].addr, [gub_item("c%d" % i, hits="0")])[0]
        if r["metadata"].get("owner") == nodes[1].addr:
            other = "c%d" % i
            break
    assert other, "no key owned by the second node"
    check_gub_delays(nodes[0].addr, other)


def test_gubernator_lease_renewal(node):
    """A CONCURRENCY lease renewed (hits 0 with metadata lease_id) outlives its first duration;
    an unknown or expired lease is a clear error; a plain peek is still a peek."""
    item = {"name": "renew", "unique_key": "job", "hits": "1", "limit": "1", "duration": "1500",
            "algorithm": "CONCURRENCY"}
    r = get_json(node.addr, [item])[0]
    assert r["status"] == "UNDER_LIMIT", r
    lease = r["metadata"]["lease_id"]
    renew = dict(item, hits="0", metadata={"lease_id": lease})
    t0 = time.monotonic()
    for _ in range(3):  # 3 x 1 s > 1.5 s: alive only because it is renewed
        time.sleep(1.0)
        r = get_json(node.addr, [renew])[0]
        assert r["error"] == "" and r["remaining"] == "0", r
    assert time.monotonic() - t0 > 2.5
    assert get_json(node.addr, [item])[0]["status"] == "OVER_LIMIT"  # the slot is still held
    peek = get_json(node.addr, [dict(item, hits="0")])[0]
    assert peek["error"] == "" and peek["remaining"] == "0"
    r = get_json(node.addr, [dict(renew, metadata={"lease_id": "00000000000000ff"})])[0]
    assert r["error"].startswith("lease not found")
    r = get_json(node.addr, [dict(renew, metadata={"lease_id": "nope"})])[0]
    assert "lease_id" in r["error"]
    # left alone it expires: renewing then is the same clear error, and the slot is free
    time.sleep(1.7)
    assert get_json(node.addr, [renew])[0]["error"].startswith("lease not found")
    assert get_json(node.addr, [item])[0]["status"] == "UNDER_LIMIT"


RENEW_QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
concurrency:
  key:
    short: {limit: 1, duration: 1500}
"""


def test_attempt_lease_renewal(node_factory, tmp_path):
    """X-Concurrency: renew with X-Lease-Id keeps a 1.5 s lease for 3 s; unknown or expired
    leases are 404, a missing id 400."""
    path = str(tmp_path / "q.yaml")
    write_yaml(path, RENEW_QUOTAS)
    node = node_factory(["--workers", "2", "--standalone", "--quota-file", path])

    def post(h):
        return http("POST", "http://%s/attempt" % node.addr, b"", h)

    acq = {"X-Resource": "short", "X-Priority": "critical", "X-Concurrency": "acquire"}
    st, h, _ = post(acq)
    assert st == 200
    lease = h["x-lease-id"]
    renew = {"X-Concurrency": "renew", "X-Lease-Id": lease}
    for _ in range(3):
        time.sleep(1.0)
        st, _, body = post(renew)
        assert st == 200, body
    assert post(acq)[0] == 429  # still held after 3 s > 1.5 s
    st, _, body = post({"X-Concurrency": "renew", "X-Resource": "short"})
    assert st == 400 and b"X-Lease-Id" in body
    time.sleep(1.7)
    st, _, body = post(renew)
    assert st == 404 and b"lease not found" in body
    assert post(acq)[0] == 200


def test_attempt_hold_mode(node_factory, tmp_path):
    """X-Delay-Mode: hold: the answer comes after X-Delay-Ms (a timer on the worker loop); with
    --attempt-max-held 0 it comes at once, the caller told to wait."""
    path = str(tmp_path / "q.yaml")
    write_yaml(path, "limit:\n  key:\n    api:\n      quota: {rate: 1}\n")
    held = node_factory(["--standalone", "--workers", "1", "--quota-file", path])
    now = node_factory(["--standalone", "--workers", "1", "--quota-file", path,
                        "--attempt-max-held", "0"])
    hold = {"X-Resource": "api", "X-Max-Delay": "3s", "X-Delay-Mode": "hold"}
    for n, waits in ((held, True), (now, False)):
        assert http("POST", "http://%s/attempt" % n.addr, b"", hold)[0] == 200
        t0 = time.monotonic()
        st, h, _ = http("POST", "http://%s/attempt" % n.addr, b"", hold)
        took = time.monotonic() - t0
        assert st == 200 and 0 < int(h["x-delay-ms"]) <= 1000
        if waits:
            assert took >= int(h["x-delay-ms"]) / 1000.0 - 0.05, took
        else:
            assert took < 0.5, took

# SPDX-License-Identifier: Apache-2.0
"""The fleet usage shedder is one count for the whole cluster (issue 14, item 1): two real sluiced
nodes, each told capacity 10 and reserve 0.2, admit 8 non-critical CONCURRENCY calls in all, not
16, because every fleet lease is an item of one key decided by its owner. That holds for Gubernator
items, for Levee's POST /attempt, and for both together. With the owner gone, the other node falls
back to its share (8 / 2 = 4), and says so (metadata fleet=local; X-Fleet: local on /attempt)."""
import json
import re
import time

from conftest import free_port, http


QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
  key:
    slow: {quota: {rate: 2, burst: 0}}
concurrency:
  default: {limit: 100, duration: 60s}
fleet: {capacity: 10, reserve: 0.2, duration: 60s}
"""


def acquire(addr, key, priority="get"):
    item = {"name": "jobs", "unique_key": key, "hits": 1, "limit": 100, "duration": 60000,
            "algorithm": 6, "metadata": {"priority": priority}}
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr,
                           json.dumps({"requests": [item]}), timeout=10)
    assert status == 200, body
    return json.loads(body)["responses"][0]


def fleet_owner(addr):
    peek = {"name": "levee.fleet", "unique_key": "noncritical", "hits": 0, "limit": 8,
            "duration": 60000, "algorithm": 6}
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr,
                           json.dumps({"requests": [peek]}))
    assert status == 200, body
    return json.loads(body)["responses"][0]["metadata"]["owner"]


def attempt(addr, resource, priority="get", extra=None):
    h = {"X-Resource": resource, "X-Concurrency": "acquire", "X-Priority": priority}
    h.update(extra or {})
    return http("POST", "http://%s/attempt" % addr, "", h, timeout=10)


def release(addr, lease):
    return http("POST", "http://%s/release" % addr, "", {"X-Lease-Id": lease}, timeout=10)


def cluster(node_factory, tmp_path, quotas=QUOTAS):
    q = tmp_path / "quotas.yaml"
    q.write_text(quotas)
    addrs = ["127.0.0.1:%d" % free_port() for _ in range(2)]
    nodes = []
    for a in addrs:
        n = node_factory(["--workers", "2", "--listen-addr", a, "--quota-file", str(q),
                          "--discovery", "static", "--peers", ",".join(addrs), "--fail-open"],
                         port=int(a.rsplit(":", 1)[1]), start=False)
        n.addr = a
        nodes.append(n)
    for n in nodes:
        n.start()
    return nodes, addrs


def test_two_nodes_share_one_fleet_and_fall_back_to_their_share(node_factory, tmp_path):
    nodes, addrs = cluster(node_factory, tmp_path)

    # 16 non-critical calls, alternating between the nodes: 8 admitted in all
    answers = [acquire(addrs[i % 2], "k%d" % i) for i in range(16)]
    admitted = [a for a in answers if a["status"] == "UNDER_LIMIT"]
    shed = [a for a in answers if a["status"] == "OVER_LIMIT"]
    assert len(admitted) == 8, answers
    assert all(a["metadata"].get("shed") == "fleet" for a in shed), shed
    assert all("fleet" not in a["metadata"] for a in answers), answers  # the owner decided
    assert all(len(a["metadata"]["lease_id"]) == 33 for a in admitted)
    # both nodes admitted some: the count is shared, not split
    by_node = [sum(1 for i, a in enumerate(answers) if i % 2 == k and a["status"] == "UNDER_LIMIT")
               for k in range(2)]
    assert all(by_node), by_node
    # critical calls do not count and are not shed
    assert acquire(addrs[0], "crit", "critical")["status"] == "UNDER_LIMIT"
    # a lease released on either node frees a slot of the one fleet
    first = next(i for i, a in enumerate(answers) if a["status"] == "UNDER_LIMIT")
    rel = {"name": "jobs", "unique_key": "k%d" % first, "hits": -1, "limit": 100,
           "duration": 60000, "algorithm": 6,
           "metadata": {"lease_id": answers[first]["metadata"]["lease_id"]}}
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addrs[1 - first % 2],
                           json.dumps({"requests": [rel]}))
    assert status == 200 and not json.loads(body)["responses"][0].get("error"), body
    assert acquire(addrs[1], "again")["status"] == "UNDER_LIMIT"
    assert acquire(addrs[0], "again2")["status"] == "OVER_LIMIT"

    # the fleet key's owner goes away: the other node takes from its share, 4 of 8
    owner = fleet_owner(addrs[0])
    assert owner in addrs
    dead = addrs.index(owner)
    nodes[dead].stop()
    survivor = addrs[1 - dead]
    t0 = time.time()
    fallback = [acquire(survivor, "f%d" % i) for i in range(6)]
    ms = (time.time() - t0) * 1000 / len(fallback)
    ok = [a for a in fallback if a["status"] == "UNDER_LIMIT"]
    assert len(ok) == 4, fallback
    assert all(a["metadata"].get("fleet") == "local" for a in fallback), fallback
    assert all(a["metadata"].get("shed") == "fleet" for a in fallback[4:]), fallback
    print("fleet-wide: admitted %d of 16 (per node %s); owner down: %d of 6 admitted on the "
          "survivor (share 8/2), %.1f ms per call" % (len(admitted), by_node, len(ok), ms))


def test_attempt_shares_one_fleet_and_falls_back_to_its_share(node_factory, tmp_path):
    nodes, addrs = cluster(node_factory, tmp_path)

    # 16 non-critical /attempt acquires, alternating between the nodes: 8 admitted in all
    answers = [attempt(addrs[i % 2], "search") for i in range(16)]
    ok = [(i, h) for i, (st, h, _) in enumerate(answers) if st == 200]
    shed = [(st, h, b) for st, h, b in answers if st != 200]
    assert len(ok) == 8, [a[0] for a in answers]
    assert all(st == 503 and h["ratelimit-policy"] == '"fleet";q=8' and
               b.startswith(b"fleet capacity is reserved for critical calls: 8") for st, h, b in shed)
    assert all("x-fleet" not in h for _, h, _ in answers)  # the owner decided
    by_node = [sum(1 for i, _ in ok if i % 2 == k) for k in range(2)]
    assert all(by_node), by_node
    # critical calls take no fleet lease and are not shed
    st, h, _ = attempt(addrs[0], "search", "critical")
    assert st == 200 and h["x-lease-id"].split(".")[1] == "0" * 16
    # a lease released on the other node frees a slot of the one fleet
    i, h = ok[0]
    assert release(addrs[1 - i % 2], h["x-lease-id"])[0] == 200
    assert release(addrs[1 - i % 2], h["x-lease-id"])[0] == 404  # once
    assert attempt(addrs[1], "search")[0] == 200
    assert attempt(addrs[0], "search")[0] == 503

    # a held answer (X-Delay-Mode: hold) still goes out after the fleet's round trip
    owner = fleet_owner(addrs[0])
    other = addrs[1 - addrs.index(owner)]
    assert release(other, ok[1][1]["x-lease-id"])[0] == 200
    assert release(other, ok[2][1]["x-lease-id"])[0] == 200
    hold = {"X-Max-Delay": "2s", "X-Delay-Mode": "hold"}
    assert attempt(other, "slow", extra=hold)[0] == 200
    t0 = time.time()
    st, h, _ = attempt(other, "slow", extra=hold)
    waited = time.time() - t0
    assert st == 200 and 0 < int(h["x-delay-ms"]) <= 500 and waited >= 0.3, (h, waited)
    assert h["x-lease-id"].split(".")[1] != "0" * 16

    # the owner goes away: the survivor takes from its share, 4 of 8, and says so
    dead = addrs.index(owner)
    nodes[dead].stop()
    survivor = addrs[1 - dead]
    t0 = time.time()
    fallback = [attempt(survivor, "search") for _ in range(6)]
    ms = (time.time() - t0) * 1000 / len(fallback)
    assert [st for st, _, _ in fallback] == [200] * 4 + [503] * 2, fallback
    assert all(h.get("x-fleet") == "local" for _, h, _ in fallback), fallback
    assert fallback[4][1]["ratelimit-policy"] == '"fleet";q=4'
    # a lease of the share goes back here
    assert release(survivor, fallback[0][1]["x-lease-id"])[0] == 200
    assert attempt(survivor, "search")[0] == 200
    print("/attempt fleet-wide: admitted %d of 16 (per node %s); owner down: 4 of 6 on the "
          "survivor (share 8/2), %.1f ms per call" % (len(ok), by_node, ms))


def test_gubernator_and_attempt_callers_share_one_fleet(node_factory, tmp_path):
    nodes, addrs = cluster(node_factory, tmp_path)
    gub = [acquire(addrs[i % 2], "g%d" % i) for i in range(4)]
    att = [attempt(addrs[i % 2], "search") for i in range(4)]
    assert all(a["status"] == "UNDER_LIMIT" for a in gub), gub
    assert [st for st, _, _ in att] == [200] * 4
    # the fleet (8) is full, whichever dialect asks next
    a = acquire(addrs[1], "g9")
    assert a["status"] == "OVER_LIMIT" and a["metadata"]["shed"] == "fleet", a
    assert attempt(addrs[0], "search")[0] == 503
    # an /attempt lease released frees a slot a Gubernator caller then takes, and back
    assert release(addrs[0], att[1][1]["x-lease-id"])[0] == 200
    assert acquire(addrs[0], "g10")["status"] == "UNDER_LIMIT"
    assert attempt(addrs[1], "search")[0] == 503
    rel = {"name": "jobs", "unique_key": "g0", "hits": -1, "limit": 100, "duration": 60000,
           "algorithm": 6, "metadata": {"lease_id": gub[0]["metadata"]["lease_id"]}}
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addrs[1],
                           json.dumps({"requests": [rel]}))
    assert status == 200 and not json.loads(body)["responses"][0].get("error"), body
    assert attempt(addrs[1], "search")[0] == 200


# The resource's concurrency limit of /attempt is one count for the cluster too: its leases are
# items of the CONCURRENCY key levee.conc/<resource>, routed to its owner in the same batch as the
# fleet's (docs/protection.md "One count for the cluster").
CONC_QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
concurrency:
  default: {limit: 4, duration: 60s}
fleet: {capacity: 100, reserve: 0.2, duration: 60s}
"""


def conc_owner(addr, resource):
    peek = {"name": "levee.conc", "unique_key": resource, "hits": 0, "limit": 4,
            "duration": 60000, "algorithm": 6}
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr,
                           json.dumps({"requests": [peek]}))
    assert status == 200, body
    return json.loads(body)["responses"][0]["metadata"]["owner"]


def renew(addr, lease):
    return http("POST", "http://%s/attempt" % addr, "",
                {"X-Concurrency": "renew", "X-Lease-Id": lease}, timeout=10)


def check_one_concurrency_count(addrs, resource="search"):
    """8 acquires alternating between two nodes of concurrency limit 4 admit 4 in all; a lease
    released or renewed on the other node works there. Returns the admitted answers."""
    answers = [attempt(addrs[i % 2], resource) for i in range(8)]
    ok = [(i, h) for i, (st, h, _) in enumerate(answers) if st == 200]
    assert len(ok) == 4, [a[0] for a in answers]
    rejected = [(st, h, b) for st, h, b in answers if st != 200]
    assert all(st == 429 and h["ratelimit-policy"] == '"concurrency";q=4' and
               b.startswith(b"concurrency limit reached: 4 calls") for st, h, b in rejected)
    assert all("x-concurrency-source" not in h for _, h, _ in answers)  # the owner decided
    # every admitted call holds a fleet lease too: both went out in one batch
    assert all(h["x-lease-id"].split(".")[1] != "0" * 16 for _, h in ok)
    i, h = ok[0]
    other = addrs[1 - i % 2]
    st, rh, _ = renew(other, h["x-lease-id"])
    assert st == 200, (st, rh)
    assert release(other, h["x-lease-id"])[0] == 200
    assert release(other, h["x-lease-id"])[0] == 404  # once
    assert renew(other, h["x-lease-id"])[0] == 404
    assert attempt(addrs[1], resource)[0] == 200
    assert attempt(addrs[0], resource)[0] == 429
    return ok


def test_attempt_concurrency_is_one_count_and_falls_back_to_its_share(node_factory, tmp_path):
    nodes, addrs = cluster(node_factory, tmp_path, CONC_QUOTAS)
    ok = check_one_concurrency_count(addrs)
    by_node = [sum(1 for i, _ in ok if i % 2 == k) for k in range(2)]
    assert all(by_node), by_node

    # the key's owner goes away: the survivor takes from its share, floor(4 / 2) = 2, says so
    # and counts it
    owner = conc_owner(addrs[0], "search")
    dead = addrs.index(owner)
    nodes[dead].stop()
    survivor = addrs[1 - dead]
    t0 = time.time()
    fallback = [attempt(survivor, "search") for _ in range(3)]
    ms = (time.time() - t0) * 1000 / len(fallback)
    assert [st for st, _, _ in fallback] == [200, 200, 429], fallback
    assert all(h.get("x-concurrency-source") == "local" for _, h, _ in fallback), fallback
    assert fallback[2][1]["ratelimit-policy"] == '"concurrency";q=2'
    # a lease of the share is renewed and goes back here
    assert renew(survivor, fallback[0][1]["x-lease-id"])[0] == 200
    assert release(survivor, fallback[0][1]["x-lease-id"])[0] == 200
    assert attempt(survivor, "search")[0] == 200
    status, _, body = http("GET", "http://%s/metrics" % survivor)
    local = re.search(rb'sluice_leases_total\{event="local"\} (\d+)', body)
    assert local and int(local.group(1)) >= 4, body
    print("/attempt concurrency cluster-wide: admitted 4 of 8 (per node %s); owner down: 2 of 3 "
          "on the survivor (share 4/2), %.1f ms per call" % (by_node, ms))

"""The fleet usage shedder is one count for the whole cluster (issue 14, item 1): two real sluiced
nodes, each told capacity 10 and reserve 0.2, admit 8 non-critical Gubernator CONCURRENCY calls in
all, not 16, because every fleet lease is an item of one key decided by its owner. With the owner
gone, the other node falls back to its share (8 / 2 = 4), and says so (metadata fleet=local)."""
import json
import time

from conftest import free_port, http


QUOTAS = """
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


def test_two_nodes_share_one_fleet_and_fall_back_to_their_share(node_factory, tmp_path):
    q = tmp_path / "quotas.yaml"
    q.write_text(QUOTAS)
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

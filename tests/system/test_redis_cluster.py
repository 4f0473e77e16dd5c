# SPDX-License-Identifier: Apache-2.0
"""--store redis --redis-cluster: sluiced over a real Redis Cluster of 3 masters and 3 replicas
(6 redis-server processes on free loopback ports, each in its own directory, made a cluster by
redis-cli --cluster create). Gubernator's and Levee's (quota file) cases of test_redis.py run
again (the same functions),
a 1000-item call is spread over the 3 masters (each master's INFO commandstats), a slot migrated
by hand between two masters (ASK while it migrates, MOVED once it is moved), and a master
killed with -9 under load: its replica is promoted by the cluster itself (cluster-node-timeout
1000 ms), sluice follows the new topology; the errors meanwhile and the time to recover are
measured and printed (docs/store.md quotes them)."""
import os
import shutil
import signal
import subprocess
import threading
import time

import socket

import pytest

import test_gubernator as gub
import test_redis as tr
from conftest import free_port, needs, wait_for

pytestmark = needs("redis-server", "redis-cli")


def cluster_port():
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        p = free_port()
        if p + 10000 > 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 10000))
            return p
        except OSError:
            continue


class Cluster:
    """3 masters, 3 replicas; stop() kills every process left."""

    def __init__(self, tmp):
        self.nodes = []
        for i in range(6):
            d = os.path.join(tmp, "r%d" % i)
            os.makedirs(d)
            # no 5 s wait before a replica's first sync (a replica never synced cannot fail over)
            r = tr.Redis(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000",
                          "--repl-diskless-sync-delay", "0",
                          "--dir", d, "--cluster-config-file", os.path.join(d, "nodes.conf")])
            r.port = cluster_port()
            r.addr = "127.0.0.1:%d" % r.port
            self.nodes.append(r)

    def start(self):
        for r in self.nodes:
            r.start()
        out = subprocess.run(["redis-cli", "--cluster", "create"] + [r.addr for r in self.nodes] +
                             ["--cluster-replicas", "1", "--cluster-yes"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        assert wait_for(lambda: all(self.ok(r) for r in self.nodes), 20), "cluster not ok"
        assert wait_for(lambda: sum("master_link_status:up" in r.cmd("INFO", "replication")
                                    for r in self.nodes) == 3, 20), "replicas not in sync"
        return self

    @staticmethod
    def ok(r):
        return "cluster_state:ok" in r.cmd("CLUSTER", "INFO")

    def masters(self):
        """The live masters (Redis objects), by the role each reports."""
        return [r for r in self.nodes if r.proc.poll() is None and
                r.cmd("ROLE").splitlines()[:1] == ["master"]]

    def seeds(self):
        return ",".join(r.addr for r in self.nodes)

    def stop(self):
        for r in self.nodes:
            r.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(str(tmp_path_factory.mktemp("rcluster")))
    try:
        yield c.start()
    finally:
        c.stop()


def cluster_args(c, *more):
    return ["--workers", "2", "--store", "redis", "--redis-cluster",
            "--redis-addrs", c.seeds()] + list(more)


def ready(node):
    """The node has its topology: a decision answers without an error."""
    return lambda: not tr.decide(node, "ready-%d" % time.monotonic_ns()).get("error")


@pytest.fixture
def cluster_node(node_factory, cluster):
    n = node_factory(cluster_args(cluster))
    assert wait_for(ready(n), 10), n.logs()
    return n


@pytest.mark.parametrize("case", tr.GUBERNATOR_CASES, ids=lambda c: c.__name__)
def test_gubernator_cases_on_redis_cluster(case, cluster_node, cluster, pb):
    case(cluster_node, pb)
    if case is not gub.test_health_and_live:
        assert tr.metric(cluster_node, "sluice_redis_items_total") > 0
        assert tr.metric(cluster_node, "sluice_redis_topology_refreshes_total") >= 2  # 2 workers


@pytest.fixture
def cluster_node_factory(node_factory, cluster):
    """node_factory, every node on the cluster, emptied first (Levee's cases reuse names)."""
    for m in cluster.masters():
        m.cmd("FLUSHALL")

    def make(args=(), env=None, start=True, port=None):
        n = node_factory(list(args) + cluster_args(cluster)[2:], env, start, port)
        if start:
            assert wait_for(ready(n), 10), n.logs()
        return n
    return make


# test_redis.LEVEE_FILE_CASES but the two that start a second node on the same names to compare
# options (they need a store per node: test_redis gives each node its own redis-server)
LEVEE_SHARED_STORE_CASES = [c for c in tr.LEVEE_FILE_CASES
                            if c.__name__ not in ("test_attempt_headers_always",
                                                  "test_attempt_hold_mode")]


@pytest.mark.parametrize("case", LEVEE_SHARED_STORE_CASES, ids=lambda c: c.__name__)
def test_levee_cases_on_redis_cluster(case, cluster_node_factory, tmp_path):
    case(cluster_node_factory, tmp_path)


def test_1000_items_spread_over_the_masters(cluster_node, cluster):
    masters = cluster.masters()
    assert len(masters) == 3
    before = [tr.evalsha_calls(m) for m in masters]
    body = {"requests": [{"name": "spread", "unique_key": "b%d" % (i % 700), "hits": 1,
                          "limit": 5, "duration": 60000} for i in range(1000)]}
    st, _, data = gub.post_json(cluster_node, body)
    assert st == 200
    rem = [int(r["remaining"]) for r in data["responses"]]
    assert rem[:700] == [4] * 700 and rem[700:] == [3] * 300  # repeated keys decided in order
    calls = [tr.evalsha_calls(m) - b for m, b in zip(masters, before)]
    print("\nEVALSHA calls per master for 1000 items:", calls)
    # keys of one slot share a call: at most one call an item, and every master has its third
    assert sum(calls) <= 1000 and all(c > 200 for c in calls), calls
    # each key is where Redis Cluster itself puts it
    for m in masters:
        for k in ("b1", "b350", "b699"):
            key = "sl:{6:spread:%s}" % k
            if m.cmd("CLUSTER", "COUNTKEYSINSLOT", m.cmd("CLUSTER", "KEYSLOT", key)) != "0" and \
                    m.cmd("EXISTS", key) == "1":
                assert m.cmd("HGETALL", key) or m.cmd("TYPE", key) != "none"


def slot_owner(c, slot):
    """The live master serving slot (its Redis object), from CLUSTER NODES."""
    for line in c.masters()[0].cmd("CLUSTER", "NODES").splitlines():
        f = line.split()
        if "master" not in f[2] or "fail" in f[2]:
            continue
        for rng in f[8:]:
            lo, _, hi = rng.partition("-")
            if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                port = int(f[1].split("@")[0].rsplit(":", 1)[1])
                return next(r for r in c.nodes if r.port == port)
    return None


def test_ask_during_migration_then_moved(cluster_node, cluster):
    """A slot migrating from A to B: a new key there is ASKed to B (ASKING, then the script, on
    B); the slot then given to B: the next call, still sent to A, is MOVED to B and followed.
    The key's state stays whole throughout (limit 3: remaining 2, 1, 0)."""
    key = "sl:{1:r:migr}"
    slot = int(cluster.masters()[0].cmd("CLUSTER", "KEYSLOT", key))
    a = slot_owner(cluster, slot)
    b = next(m for m in cluster.masters() if m is not a)
    a_id, b_id = a.cmd("CLUSTER", "MYID"), b.cmd("CLUSTER", "MYID")
    redirects = tr.metric(cluster_node, "sluice_redis_redirects_total")
    assert b.cmd("CLUSTER", "SETSLOT", str(slot), "IMPORTING", a_id) == "OK"
    assert a.cmd("CLUSTER", "SETSLOT", str(slot), "MIGRATING", b_id) == "OK"
    r = tr.decide(cluster_node, "migr")
    assert not r.get("error") and r["remaining"] == "2", r
    assert b.cmd("CLUSTER", "COUNTKEYSINSLOT", str(slot)) == "1"  # written on B, after ASKING
    assert a.cmd("CLUSTER", "COUNTKEYSINSLOT", str(slot)) == "0"
    r = tr.decide(cluster_node, "migr")  # A still has no such key: ASK again, B's state used
    assert not r.get("error") and r["remaining"] == "1", r
    assert tr.metric(cluster_node, "sluice_redis_redirects_total") >= redirects + 2
    redirects = tr.metric(cluster_node, "sluice_redis_redirects_total")
    for m in cluster.masters():
        assert m.cmd("CLUSTER", "SETSLOT", str(slot), "NODE", b_id) == "OK"
    assert wait_for(lambda: slot_owner(cluster, slot) is b, 10)
    r = tr.decide(cluster_node, "migr")  # sent to A, MOVED to B
    assert not r.get("error") and r["remaining"] == "0", r
    assert tr.metric(cluster_node, "sluice_redis_redirects_total") >= redirects + 1
    r = tr.decide(cluster_node, "migr")
    assert not r.get("error") and r["status"] == "OVER_LIMIT", r


def test_master_killed_replica_promoted_sluice_follows(node_factory, tmp_path):
    c = Cluster(str(tmp_path)).start()
    try:
        n = node_factory(cluster_args(c, "--redis-timeout", "300ms"))
        assert wait_for(ready(n), 10), n.logs()
        log = []  # (monotonic time, items failed of 16)
        stop = threading.Event()

        def load():
            i = 0
            while not stop.is_set():
                body = {"requests": [{"name": "fo", "unique_key": "k%d" % ((i * 16 + j) % 4000),
                                      "hits": 1, "limit": 1000000, "duration": 600000}
                                     for j in range(16)]}
                i += 1
                try:
                    st, _, data = gub.post_json(n, body)
                    failed = 16 if st != 200 else sum(1 for r in data["responses"]
                                                       if r.get("error"))
                except OSError:
                    failed = 16
                log.append((time.monotonic(), failed))
                time.sleep(0.01)

        t = threading.Thread(target=load)
        t.start()
        time.sleep(1.0)
        victim = c.masters()[0]
        killed = time.monotonic()
        victim.proc.send_signal(signal.SIGKILL)
        victim.proc.wait()
        # the cluster promotes the replica by itself
        promoted = wait_for(lambda: len(c.masters()) == 3 and
                            all(Cluster.ok(r) for r in c.nodes if r.proc.poll() is None), 20)
        promoted_at = time.monotonic()
        time.sleep(3.0)
        stop.set()
        t.join()
        assert promoted, "no replica promoted"
        after = [(ts, f) for ts, f in log if ts >= killed]
        bad = [ts for ts, f in after if f]
        recovered = (bad[-1] - killed) if bad else 0.0
        print("\nfailover: after the kill %d calls of 16 items, %d with errors (%d items of %d); "
              "the cluster promoted the replica in %.2f s; sluice answered without errors again "
              "%.2f s after the kill" % (len(after), len(bad), sum(f for _, f in after),
                                         16 * len(after), promoted_at - killed, recovered))
        assert any(not f for ts, f in after if ts > promoted_at), "sluice did not recover"
        # once the cluster is whole again, sluice is too (the last second of load had no error)
        assert all(not f for ts, f in after if ts > promoted_at + 2.0), n.logs()
        assert tr.metric(n, "sluice_redis_topology_refreshes_total") > 2
    finally:
        c.stop()

# SPDX-License-Identifier: Apache-2.0
"""Multi-node system tests: 3-5 sluiced processes on loopback, one cluster per test, with each
discovery source - static --peers, DNS (a small DNS server of the test's own, dnsserver.py, reached
with --dns-server) and etcd (a real /usr/bin/etcd on free ports).

Checked: one key sent to every node admits exactly `limit` in total; every node names the same
owner; GLOBAL converges within one sync interval (plus loopback round trips) and stays within the
documented over-admission bound; a dead owner gives errors quickly (or, with --fail-open, local
answers that say so) and HealthCheck turns unhealthy; after kill -9 of an owner under load, calls
to the survivors succeed again within 2 s; a joining node takes over its share (and only keys
that move to it move); a graceful stop deregisters at once (etcd); PeersV1 answers a Gubernator
peer's gRPC call.
"""
import base64
import json
import os
import signal
import socket
import threading
import time
import urllib.request

import pytest

from conftest import free_port, http, machine_skip, peers_v1, require, require_module, wait_for
from etcdproc import EtcdProc
from dnsserver import DNSServer

GLOBAL = 2
NO_BATCHING = 1


# ---- helpers ------------------------------------------------------------------------------

def rl(key, hits=1, limit=10, duration=60000, behavior=0, name="rl"):
    return {"name": name, "unique_key": key, "hits": hits, "limit": limit,
            "duration": duration, "behavior": behavior}


def get_rate_limits(addr, reqs, timeout=5):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr,
                           json.dumps({"requests": reqs}), timeout=timeout)
    assert status == 200, body
    return json.loads(body)["responses"]


def health(addr):
    status, _, body = http("GET", "http://%s/v1/HealthCheck" % addr)
    return status, json.loads(body)


def owner_of(addr, key, name="rl"):
    r = get_rate_limits(addr, [rl(key, hits=0, name=name)])[0]
    return r.get("metadata", {}).get("owner")


def free_port_on(host):
    return free_port(host)


def start_nodes(node_factory, addrs, common):
    """Start one node per address (host:port), with `common(addr)` extra flags."""
    nodes = []
    for a in addrs:
        port = int(a.rsplit(":", 1)[1])
        n = node_factory(["--workers", "2", "--listen-addr", a] + list(common(a)), port=port,
                         start=False)
        n.addr = a
        nodes.append(n)
    for n in nodes:
        n.start()
    return nodes


def peer_count(addr):
    try:
        return health(addr)[1].get("peer_count")
    except Exception:  # noqa: BLE001 - a node being killed
        return None


# ---- static ------------------------------------------------------------------------------

def static_cluster(node_factory, n=3, extra=lambda a: []):
    addrs = ["127.0.0.1:%d" % free_port() for _ in range(n)]
    peers = ",".join(addrs)
    return start_nodes(node_factory, addrs,
                       lambda a: ["--discovery", "static", "--peers", peers] + extra(a))


def test_static_exact_limit_and_same_owner(node_factory):
    nodes = static_cluster(node_factory)
    # the same key on every node, 45 hits at once from 9 threads: exactly the limit passes
    results = []
    lock = threading.Lock()

    def hammer(n):
        for _ in range(5):
            r = get_rate_limits(n.addr, [rl("one-key", limit=10)])[0]
            with lock:
                results.append(r)

    threads = [threading.Thread(target=hammer, args=(nodes[i % 3],)) for i in range(9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 45
    assert all(r["error"] == "" for r in results)
    assert sum(1 for r in results if r["status"] == "UNDER_LIMIT") == 10
    assert len({r["metadata"]["owner"] for r in results}) == 1

    # every node names the same owner for each of 60 keys, and each node owns some
    owners = {}
    for n in nodes:
        resp = get_rate_limits(n.addr, [rl("k%d" % i, hits=0) for i in range(60)])
        owners[n.addr] = [r["metadata"]["owner"] for r in resp]
    assert owners[nodes[0].addr] == owners[nodes[1].addr] == owners[nodes[2].addr]
    counts = {a: owners[nodes[0].addr].count(a) for a in (n.addr for n in nodes)}
    assert all(c >= 8 for c in counts.values()), counts

    # a no-batching request is answered the same way
    r = get_rate_limits(nodes[1].addr, [rl("k1", hits=1, behavior=NO_BATCHING)])[0]
    assert r["error"] == "" and r["metadata"]["owner"] == owners[nodes[0].addr][1]

    for n in nodes:
        status, h = health(n.addr)
        assert status == 200 and h["status"] == "healthy" and h["peer_count"] == 3
        assert h["advertise_address"] == n.addr


def _first_only():
    """Flags for static_cluster: --fail-open on the first node only."""
    seen = []

    def extra(a):
        flags = ["--batch-timeout", "300ms"]
        if not seen:
            flags.append("--fail-open")
        seen.append(a)
        return flags
    return extra


def test_static_dead_peer_errors_fast_or_fails_open(node_factory):
    nodes = static_cluster(node_factory, extra=_first_only())
    victim = nodes[2]
    keys = [k for k in ("v%d" % i for i in range(300)) if owner_of(nodes[0].addr, k) == victim.addr]
    assert len(keys) >= 20
    victim.kill()
    t0 = time.time()
    strict = get_rate_limits(nodes[1].addr, [rl(k) for k in keys[:20]])
    assert time.time() - t0 < 1.0, "an error must come quickly, not at a timeout"
    for r in strict:
        assert "from peer %s" % victim.addr in r["error"], r
    lenient = get_rate_limits(nodes[0].addr, [rl(k) for k in keys[:20]])
    for r in lenient:
        assert r["error"] == "" and r["status"] == "UNDER_LIMIT", r
        assert r["metadata"]["owner"] == victim.addr and r["metadata"].get("fail_open"), r
    status, body = health(nodes[1].addr)
    assert status == 503 and victim.addr in body["message"], body


# ---- GLOBAL ------------------------------------------------------------------------------

def test_global_converges_within_one_sync_interval(node_factory):
    sync = 0.1
    nodes = static_cluster(node_factory, extra=lambda a: ["--global-sync-wait", "100ms"])
    owner = owner_of(nodes[0].addr, "gk")
    others = [n for n in nodes if n.addr != owner]
    # 30 hits on one non-owner: answered at once from its local copy, owner named
    resp = get_rate_limits(others[0].addr, [rl("gk", limit=1000, behavior=GLOBAL)] * 30)
    t_hits = time.time()
    assert all(r["error"] == "" and r["metadata"]["owner"] == owner for r in resp)
    assert resp[-1]["remaining"] == "970"

    def converged():
        rem = [get_rate_limits(n.addr, [rl("gk", hits=0, limit=1000, behavior=GLOBAL)])[0]
               ["remaining"] for n in nodes]
        return all(x == "970" for x in rem)

    assert wait_for(converged, 2.0, interval=0.005)
    took = time.time() - t_hits
    print("GLOBAL converged on 3 nodes %.0f ms after the hits (sync interval %.0f ms)" %
          (took * 1000, sync * 1000))
    # one sync interval, plus loopback round trips and this test's polling (HTTP, ~ms each).
    # Measured 111-119 ms on a quiet machine; the slack covers a 2-core machine busy with other
    # jobs (it failed 2 runs in 7 at +80 ms there) and still fails a sync that waits 3 intervals.
    assert took <= sync + 0.2, took


def test_global_over_admission_within_bound(node_factory):
    """Every node takes GLOBAL hits as fast as one client thread per node can send them, on a
    limit that does not refill during the test. The documented bound (docs/cluster.md):
    admitted <= limit + sum over non-owners of min(limit, rate_i * (sync_wait + slack))."""
    limit, sync, slack, secs = 300, 0.1, 0.05, 1.5
    nodes = static_cluster(node_factory, extra=lambda a: ["--global-sync-wait", "100ms"])
    owner = owner_of(nodes[0].addr, "hot")
    admitted = {n.addr: 0 for n in nodes}
    sent = {n.addr: 0 for n in nodes}
    stop = time.time() + secs

    def client(n):
        while time.time() < stop:
            r = get_rate_limits(n.addr, [rl("hot", limit=limit, behavior=GLOBAL)])[0]
            assert r["error"] == ""
            sent[n.addr] += 1
            if r["status"] == "UNDER_LIMIT":
                admitted[n.addr] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(admitted.values())
    rates = {a: sent[a] / secs for a in sent}
    bound = limit + sum(min(limit, rates[a] * (sync + slack)) for a in rates if a != owner)
    print("GLOBAL limit %d: admitted %d (%s), bound %.0f, rates/s %s" %
          (limit, total, admitted, bound, {a: round(r) for a, r in rates.items()}))
    assert total <= bound
    assert total >= 0.9 * limit


# ---- PeersV1 over gRPC, as a Gubernator peer calls it ---------------------------------------

def test_peers_v1_wire(node_factory, pb):
    grpc = require_module("grpc")
    gub, peers = pb
    nodes = static_cluster(node_factory)
    target = nodes[1]
    ch = grpc.insecure_channel(target.addr)
    get_peer, update, _ = peers_v1(ch, peers)
    # a peer sends keys it believes this node owns: decided here, never forwarded again
    keys = ["w%d" % i for i in range(30)]
    req = peers.GetPeerRateLimitsReq(requests=[
        gub.RateLimitReq(name="rl", unique_key=k, hits=1, limit=5, duration=60000) for k in keys])
    resp = get_peer(req, timeout=5)
    assert len(resp.rate_limits) == 30
    assert all(r.error == "" and r.remaining == 4 for r in resp.rate_limits)
    # the node's own engine holds all 30 now, whoever owns them by the ring
    again = get_peer(req, timeout=5)
    assert all(r.remaining == 3 for r in again.rate_limits)
    # an owner's broadcast lands in the local GLOBAL copy of a non-owner
    key = next(k for k in ("b%d" % i for i in range(100))
               if owner_of(target.addr, k) != target.addr)
    st = gub.RateLimitResp(status=0, limit=50, remaining=7, reset_time=int(time.time() * 1000) + 60000)
    update(peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
        key="rl_" + key, status=st, algorithm=0, duration=60000)]), timeout=5)
    r = get_rate_limits(target.addr, [rl(key, hits=0, limit=50, behavior=GLOBAL)])[0]
    assert r["remaining"] == "7", r
    ch.close()


# ---- DNS ----------------------------------------------------------------------------------

LOOPBACKS = ["127.0.0.11", "127.0.0.12", "127.0.0.13", "127.0.0.14"]


def common_port():
    for _ in range(50):
        p = free_port()
        try:
            for ip in LOOPBACKS:
                free_port_on(ip)  # the address exists
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind((ip, p))
            return p
        except OSError:
            continue
    machine_skip("no common free port on 127.0.0.11-14")


@pytest.fixture
def dns():
    d = DNSServer().start()
    yield d
    d.stop()


def keys_owned(addr, owner, n=400, prefix="j"):
    out = []
    for i in range(0, n, 100):
        resp = get_rate_limits(addr, [rl("%s%d" % (prefix, k), hits=0) for k in range(i, i + 100)])
        out += ["%s%d" % (prefix, i + j) for j, r in enumerate(resp)
                if r["metadata"]["owner"] == owner]
    return out


def owners_map(addr, n=400, prefix="j"):
    m = {}
    for i in range(0, n, 100):
        resp = get_rate_limits(addr, [rl("%s%d" % (prefix, k), hits=0) for k in range(i, i + 100)])
        for j, r in enumerate(resp):
            m["%s%d" % (prefix, i + j)] = r["metadata"]["owner"]
    return m


def check_join(nodes, newcomer, before):
    after = {n.addr: owners_map(n.addr) for n in nodes}
    first = after[nodes[0].addr]
    assert all(a == first for a in after.values()), "nodes disagree on owners after the join"
    moved = [k for k in first if first[k] != before[k]]
    assert all(first[k] == newcomer.addr for k in moved), "keys moved elsewhere than the joiner"
    share = len(moved) / len(first)
    print("join: %d of %d keys moved to the new node (%.1f%%, ideal %.1f%%)" %
          (len(moved), len(first), 100 * share, 100 / len(nodes)))
    assert 0.5 / len(nodes) < share < 1.6 / len(nodes)


def test_dns_discovery_join_and_leave(node_factory, dns):
    port = common_port()
    name = "peers.sluice.test"
    dns.set(name, LOOPBACKS[:3])
    addrs = ["%s:%d" % (ip, port) for ip in LOOPBACKS]
    flags = ["--discovery", "dns", "--dns-name", name, "--dns-server", dns.addr,
             "--dns-period", "200ms", "--batch-timeout", "300ms"]
    nodes = start_nodes(node_factory, addrs[:3], lambda a: flags)
    assert wait_for(lambda: all(peer_count(n.addr) == 3 for n in nodes), 5)
    before = owners_map(nodes[0].addr)
    assert owners_map(nodes[1].addr) == before == owners_map(nodes[2].addr)
    assert len(set(before.values())) == 3

    # a fourth node joins: in DNS, then up
    dns.set(name, LOOPBACKS)
    n4 = start_nodes(node_factory, addrs[3:], lambda a: flags)[0]
    nodes.append(n4)
    assert wait_for(lambda: all(peer_count(n.addr) == 4 for n in nodes), 5)
    check_join(nodes, n4, before)

    # node 2 dies (kill -9) under load and leaves DNS: survivors answer its keys again < 2 s
    victim = nodes[1]
    survivors = [n for n in nodes if n is not victim]
    keys = keys_owned(survivors[0].addr, victim.addr)[:20]
    assert keys
    recovered = run_kill_under_load(victim, survivors, keys,
                                    on_kill=lambda: dns.set(name, [LOOPBACKS[0]] + LOOPBACKS[2:]))
    print("dns: calls succeed again %.0f ms after kill -9" % (recovered * 1000))
    assert recovered < 2.0
    assert wait_for(lambda: all(peer_count(n.addr) == 3 for n in survivors), 2)


def run_kill_under_load(victim, survivors, keys, on_kill=None, secs_after=2.5):
    """Clients keep calling the survivors with the victim's keys; kill -9 the victim; return how
    long after the kill the calls succeeded again (every call from then on succeeded)."""
    stop = threading.Event()
    log = []  # (time, ok)
    lock = threading.Lock()

    def client(n, i):
        k = 0
        while not stop.is_set():
            key = keys[(i + k) % len(keys)]
            k += 1
            try:
                r = get_rate_limits(n.addr, [rl(key, limit=1000000)], timeout=3)[0]
                ok = r["error"] == ""
            except Exception:  # noqa: BLE001 - counted as a failure
                ok = False
            with lock:
                log.append((time.time(), ok))

    threads = [threading.Thread(target=client, args=(n, i)) for i, n in enumerate(survivors * 2)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # load is flowing
    t_kill = time.time()
    victim.kill()
    if on_kill:
        on_kill()
    time.sleep(secs_after)
    stop.set()
    for t in threads:
        t.join()
    before = [ok for t, ok in log if t < t_kill]
    assert before and all(before), "calls must succeed before the kill"
    after = [(t, ok) for t, ok in log if t >= t_kill]
    assert after and after[-1][1], "calls must succeed at the end"
    last_fail = max((t for t, ok in after if not ok), default=t_kill)
    return last_fail - t_kill


# ---- etcd ---------------------------------------------------------------------------------

@pytest.fixture
def etcd():
    require("etcd")
    e = EtcdProc(fast_election=True).start(timeout=10)
    yield e.url
    e.close()


def etcd_keys(url, prefix):
    b = prefix.encode()
    end = b[:-1] + bytes([b[-1] + 1])
    body = json.dumps({"key": base64.b64encode(b).decode(),
                       "range_end": base64.b64encode(end).decode()}).encode()
    req = urllib.request.Request(url + "/v3/kv/range", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=2) as r:
        kvs = json.loads(r.read()).get("kvs", [])
    return sorted(base64.b64decode(kv["key"]).decode() for kv in kvs)


def etcd_cluster(node_factory, url, n, prefix, ttl="1s"):
    addrs = ["127.0.0.1:%d" % free_port() for _ in range(n)]
    flags = ["--discovery", "etcd", "--storage-addrs", url, "--storage-prefix", prefix,
             "--peer-lease-ttl", ttl, "--batch-timeout", "300ms"]
    return start_nodes(node_factory, addrs, lambda a: flags), flags


def test_etcd_kill_owner_under_load_then_join(node_factory, etcd):
    prefix = "/sluice-test-%d" % os.getpid()
    nodes, flags = etcd_cluster(node_factory, etcd, 3, prefix)
    assert wait_for(lambda: all(peer_count(n.addr) == 3 for n in nodes), 5)
    assert etcd_keys(etcd, prefix + "/peers/") == sorted(prefix + "/peers/" + n.addr for n in nodes)
    before = owners_map(nodes[0].addr)
    assert owners_map(nodes[2].addr) == before

    # a fourth node joins and takes its share
    n4 = start_nodes(node_factory, ["127.0.0.1:%d" % free_port()], lambda a: flags)[0]
    nodes.append(n4)
    assert wait_for(lambda: all(peer_count(n.addr) == 4 for n in nodes), 5)
    check_join(nodes, n4, before)

    # kill -9 an owner under load: its lease expires (TTL 1 s), survivors take over
    victim = nodes[0]
    survivors = nodes[1:]
    keys = keys_owned(survivors[0].addr, victim.addr)[:20]
    assert keys
    recovered = run_kill_under_load(victim, survivors, keys)
    print("etcd: calls succeed again %.0f ms after kill -9 (lease TTL 1 s)" % (recovered * 1000))
    assert recovered < 2.0
    assert all(peer_count(n.addr) == 3 for n in survivors)
    assert prefix + "/peers/" + victim.addr not in etcd_keys(etcd, prefix + "/peers/")


def test_etcd_graceful_stop_deregisters(node_factory, etcd):
    prefix = "/sluice-test-g%d" % os.getpid()
    # a long lease: leaving within it proves the stop revoked the lease
    nodes, _ = etcd_cluster(node_factory, etcd, 3, prefix, ttl="10s")
    assert wait_for(lambda: all(peer_count(n.addr) == 3 for n in nodes), 5)
    leaver = nodes[2]
    t0 = time.time()
    leaver.signal(signal.SIGTERM)
    assert leaver.proc.wait(10) == 0
    assert wait_for(lambda: all(peer_count(n.addr) == 2 for n in nodes[:2]), 2)
    took = time.time() - t0
    print("graceful leave seen by the others after %.0f ms (lease TTL 10 s)" % (took * 1000))
    assert took < 2.0
    assert etcd_keys(etcd, prefix + "/peers/") == sorted(prefix + "/peers/" + n.addr
                                                         for n in nodes[:2])
    # the survivors own everything between them and agree
    assert owners_map(nodes[0].addr) == owners_map(nodes[1].addr)

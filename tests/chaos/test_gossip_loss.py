# SPDX-License-Identifier: Apache-2.0
"""SWIM gossip under 10 % random packet loss, on real sluiced processes (issue 13's "no false
dead over 2 minutes on loopback"): 5 or 8 nodes with --discovery gossip, each gossip UDP packet
dropped at random with probability 1/10 by an nftables rule, while a GetRateLimits workload runs.

Checked, with /metrics sampled every second on every node: no node ever counts a member dead
(sluice_gossip_members{status="dead"} stays 0) or lists fewer than all members alive or suspect;
the loss did happen (the rule's counters, and in the 2-minute run suspicions and refutations);
and every workload round — one fresh key, more hits than its limit, sent concurrently through
every node — admits exactly its limit with no error (owners did not move).

Isolation: the machine's loopback is shared with other tests, so nothing here touches the root
network namespace. The test makes a namespace of its own (`sl-gl-<pid>-<n>`), brings its loopback
up, and moves this thread into it (setns(2)) for the test's duration: the sluiced processes it
starts, the sockets it opens and the threads it spawns all live there, and the nftables table is
created inside it. Teardown moves the thread back and deletes the namespace, always. Needs root,
`ip` (iproute2) and `nft` (nftables); otherwise skipped with the reason.

The short run (15 s, 5 nodes) is part of `make test`; the 2-minute run (8 nodes) is marked slow
(`make chaos`). Probe interval 200 ms (timeout 100 ms, gossip every 50 ms): five times the
default probe rate, so 2 minutes here probe as much as 10 minutes at the default 1 s.
"""
import ctypes
import itertools
import json
import os
import subprocess
import threading
import time

import pytest

import chaoslib as cl

machine_skip, require = cl.sysconf.machine_skip, cl.sysconf.require

CLONE_NEWNET = 0x40000000
FAST = ["--gossip-probe-interval", "200ms", "--gossip-probe-timeout", "100ms",
        "--gossip-interval", "50ms", "--gossip-pushpull-interval", "10s"]
LOSS_MOD = 10  # drop one packet in LOSS_MOD, at random
_seq = itertools.count()


def _run(*args):
    return subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=10, check=False)


class NetNS:
    """A network namespace this thread sits in until leave(); nft rules are added inside it."""

    def __init__(self):
        self.name = "sl-gl-%d-%d" % (os.getpid(), next(_seq))
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.home = None

    def _setns(self, fd):
        if self.libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns")

    def enter(self):
        r = _run("ip", "netns", "add", self.name)
        if r.returncode != 0:
            return r.stdout.decode().strip() or "ip netns add failed"
        r = _run("ip", "netns", "exec", self.name, "ip", "link", "set", "lo", "up")
        if r.returncode != 0:
            return r.stdout.decode().strip() or "ip link set lo up failed"
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open("/run/netns/" + self.name, os.O_RDONLY)
        try:
            self._setns(fd)
        finally:
            os.close(fd)
        return None

    def leave(self):
        if self.home is not None:
            self._setns(self.home)
            os.close(self.home)
            self.home = None
        _run("ip", "netns", "del", self.name)

    def nft(self, *args):
        r = _run("ip", "netns", "exec", self.name, "nft", *args)
        assert r.returncode == 0, r.stdout.decode()
        return r.stdout.decode()

    def drop_udp(self, ports, mod):
        """Count every UDP datagram to `ports`, then drop one in `mod` of them at random."""
        dports = "{ %s }" % ", ".join(str(p) for p in ports)
        self.nft("add", "table", "inet", "sluiceloss")
        self.nft("add", "chain", "inet", "sluiceloss", "in",
                 "{ type filter hook input priority 0; policy accept; }")
        self.nft("add", "rule", "inet", "sluiceloss", "in", "udp", "dport", dports, "counter")
        self.nft("add", "rule", "inet", "sluiceloss", "in", "udp", "dport", dports,
                 "numgen", "random", "mod", str(mod), "==", "0", "counter", "drop")

    def counters(self):
        """(packets seen, packets dropped) by the two rules."""
        out = json.loads(self.nft("-j", "list", "chain", "inet", "sluiceloss", "in"))
        seen = []
        for item in out["nftables"]:
            for e in item.get("rule", {}).get("expr", []):
                if "counter" in e:
                    seen.append(e["counter"]["packets"])
        assert len(seen) == 2, out
        return seen[0], seen[1]


@pytest.fixture
def netns():
    if os.geteuid() != 0:
        machine_skip("needs root (a network namespace and nftables rules of the test's own)")
    require("ip", "nft")
    ns = NetNS()
    try:
        why = ns.enter()
        if why:
            machine_skip("no network namespace: " + why)
        yield ns
    finally:
        ns.leave()


def start_gossip_nodes(node_factory, n):
    """n sluiced inside the namespace, joined through the first; returns (nodes, gossip ports)."""
    gports = [cl.free_port() for _ in range(n)]
    nodes = []
    for i in range(n):
        port = cl.free_port()
        args = ["--workers", "2", "--listen-addr", "127.0.0.1:%d" % port, "--discovery", "gossip",
                "--gossip-addr", "127.0.0.1:%d" % gports[i]] + FAST
        if i:
            args += ["--gossip-seeds", "127.0.0.1:%d" % gports[0]]
        nodes.append(node_factory(args, port=port))
    return nodes, gports


def scrape(addr):
    """The gossip series of one node's /metrics, as {'name{labels}': value}."""
    out = {}
    for line in cl.metrics_text(addr).splitlines():
        if line.startswith("sluice_gossip_"):
            head, _, value = line.rpartition(" ")
            out[head] = float(value)
    return out


def rl(key, limit):
    return {"name": "loss", "unique_key": key, "hits": 1, "limit": limit, "duration": 600000}


class Workload:
    """Rounds until stopped: a fresh key, 3×limit hits from 6 threads spread over every node;
    each round must admit exactly `limit` with no error."""

    def __init__(self, nodes, limit=10):
        self.nodes, self.limit = nodes, limit
        self.stop = threading.Event()
        self.rounds, self.hits, self.bad = 0, 0, []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def one_round(self, r):
        key = "loss-%d" % r
        results, lock = [], threading.Lock()

        def worker(w):
            for j in range(self.limit // 2):
                addr = self.nodes[(w + j) % len(self.nodes)].addr
                try:
                    status, _, body = cl.http(
                        "POST", "http://%s/v1/GetRateLimits" % addr,
                        json.dumps({"requests": [rl(key, self.limit)]}), timeout=5)
                    resp = json.loads(body)["responses"][0] if status == 200 else {
                        "error": "HTTP %d" % status}
                except Exception as e:  # noqa: BLE001 - counted as a failure below
                    resp = {"error": repr(e)}
                with lock:
                    results.append(resp)

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errors = [x["error"] for x in results if x.get("error")]
        under = sum(1 for x in results if x.get("status", "UNDER_LIMIT") == "UNDER_LIMIT"
                    and not x.get("error"))
        self.rounds += 1
        self.hits += len(results)
        if errors or under != self.limit:
            self.bad.append((key, under, errors[:3]))

    def run(self):
        r = 0
        while not self.stop.is_set():
            self.one_round(r)
            r += 1
            self.stop.wait(0.2)


def run_loss(netns, node_factory, n, seconds, name):
    t0 = time.monotonic()
    nodes, gports = start_gossip_nodes(node_factory, n)
    assert cl.wait_until(lambda: [cl.peer_count(x.addr) for x in nodes] == [n] * n, 20), \
        [cl.peer_count(x.addr) for x in nodes]
    joined = time.monotonic() - t0
    before = [scrape(x.addr) for x in nodes]

    netns.drop_udp(gports, LOSS_MOD)
    work = Workload(nodes)
    work.thread.start()
    samples, max_dead, min_up, max_suspect, max_lhm = 0, 0, n, 0, 0.0
    dead_seen = []
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            tick = time.monotonic()
            for i, x in enumerate(nodes):
                m = scrape(x.addr)
                dead = m.get('sluice_gossip_members{status="dead"}')
                alive = m.get('sluice_gossip_members{status="alive"}', 0)
                suspect = m.get('sluice_gossip_members{status="suspect"}', 0)
                if dead:
                    dead_seen.append((round(tick - end + seconds, 1), i, dead))
                max_dead = max(max_dead, dead or 0)
                min_up = min(min_up, alive + suspect)
                max_suspect = max(max_suspect, suspect)
                max_lhm = max(max_lhm, m.get("sluice_gossip_health_multiplier", 0))
            samples += 1
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    finally:
        work.stop.set()
        work.thread.join(30)
    seen, dropped = netns.counters()
    after = [scrape(x.addr) for x in nodes]

    def moved(key):
        return int(sum(a.get(key, 0) - b.get(key, 0) for a, b in zip(after, before)))

    figures = {
        "nodes": n, "seconds": seconds, "probe_interval_ms": 200, "joined_s": round(joined, 2),
        "metric_samples": samples, "udp_packets": seen, "udp_dropped": dropped,
        "loss_pct": round(100.0 * dropped / seen, 1) if seen else 0.0,
        "probes": moved('sluice_gossip_probes_total{event="sent"}'),
        "probes_failed": moved('sluice_gossip_probes_total{event="failed"}'),
        "indirect": moved('sluice_gossip_probes_total{event="indirect"}'),
        "suspicions": moved('sluice_gossip_suspicions_total{event="suspected"}'),
        "refutations": moved('sluice_gossip_suspicions_total{event="refuted"}'),
        "false_dead": moved('sluice_gossip_suspicions_total{event="dead"}'),
        "max_dead_members": max_dead, "max_suspect_members": max_suspect,
        "max_lhm": max_lhm, "rounds": work.rounds, "hits": work.hits,
        "rounds_not_exact": len(work.bad),
    }
    cl.record(name, figures)
    print("# gossip, %d nodes, %d %% UDP loss for %d s (probe interval 200 ms): %d suspicions, "
          "%d refutations, %d false dead; %d rounds of GetRateLimits, %d not exact"
          % (n, 100 // LOSS_MOD, seconds, figures["suspicions"], figures["refutations"],
             figures["false_dead"], work.rounds, len(work.bad)))

    if max_dead or figures["false_dead"] or work.bad:
        # what each node saw change, with times (sluiced logs every status change)
        for i, x in enumerate(nodes):
            for line in x.logs().splitlines():
                if "gossip: member" in line:
                    print("node %d (%s): %s" % (i, x.addr, line))
    assert dropped > 0 and seen > dropped, (seen, dropped)
    assert max_dead == 0 and not dead_seen, dead_seen
    assert figures["false_dead"] == 0, figures
    assert min_up == n, figures
    assert all(cl.peer_count(x.addr) == n for x in nodes)
    assert work.rounds > 0 and not work.bad, work.bad
    return figures


def test_gossip_loss_short(netns, node_factory):
    # 15 s, 5 nodes: loss happens (the rule drops packets), nobody is declared dead, totals hold
    f = run_loss(netns, node_factory, 5, 15, "gossip_loss_15s")
    assert f["probes"] > 0


@pytest.mark.slow
def test_gossip_loss_two_minutes(netns, node_factory):
    # issue 13: 10 % random loss for 2 minutes on loopback, no false dead; suspicions happened
    # and were refuted (the loss was felt by the failure detector, not just by the counters)
    f = run_loss(netns, node_factory, 8, 120, "gossip_loss_2min")
    assert f["suspicions"] > 0 and f["refutations"] > 0, f

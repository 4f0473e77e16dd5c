# SPDX-License-Identifier: Apache-2.0
"""Levee's observer (sluiced --role observer) and the client-proxy following it, end to end on
loopback with real processes: the observer streams the overlay's topology over gRPC
(sluice.levee.v1.Topology/Watch: a full view, then changes, heartbeats), registers itself in etcd
under a lease (gone when it dies); a proxy with --observers (or the observers in etcd) feeds its
limiter list from one of them, moves to the other when that one is killed, moves traffic off a
limiter killed with -9, sends to a limiter that joins later without a restart, and exits with an
error when no observer answers. The slow 15-limiter run is marked `slow`."""
import threading
import time

import grpc
import pytest

from conftest import free_port, pb_modules
from test_levee import H1, etcd, metrics, prefix, put_quotas, wait_for  # noqa: F401

# fast failure detection: probe every 200 ms
FAST = ["--gossip-probe-interval", "200ms", "--gossip-probe-timeout", "100ms",
        "--gossip-interval", "50ms", "--gossip-pushpull-interval", "2s"]
WATCH = "/sluice.levee.v1.Topology/Watch"


def topo_pb():
    pb_modules()
    import levee_topology_pb2  # noqa: E402 (generated from proto/ by pb_modules)
    return levee_topology_pb2


def gaddr():
    return "127.0.0.1:%d" % free_port()


def observer(node_factory, name, seeds=(), extra=(), etcd=None, prefix=None):
    g = gaddr()
    args = ["--role", "observer", "--instance-id", name, "--observer-name", name,
            "--gossip-addr", g, "--gossip-name", name, "--workers", "1",
            "--observer-heartbeat", "200ms", "--admin-api=false"] + FAST
    if seeds:
        args += ["--gossip-seeds", ",".join(seeds)]
    if etcd:
        args += ["--storage-addrs", etcd.url, "--storage-prefix", prefix,
                 "--observer-lease-ttl", "2s"]
    n = node_factory(args + list(extra))
    n.gossip = g
    return n


def limiter(node_factory, etcd, prefix, name, seeds, extra=()):
    g = gaddr()
    n = node_factory(["--instance-id", name, "--gossip-name", name, "--gossip-addr", g,
                      "--gossip-seeds", ",".join(seeds), "--workers", "1",
                      "--storage-addrs", etcd.url, "--storage-prefix", prefix,
                      "--admin-api=false"] + FAST + list(extra))
    n.gossip = g
    n.name = name
    return n


def proxy(node_factory, etcd, prefix, observers, extra=()):
    args = ["--role", "proxy", "--workers", "2", "--storage-addrs", etcd.url,
            "--storage-prefix", prefix, "--proxy-probe-interval", "100ms",
            "--proxy-timeout", "1s", "--observer-timeout", "1s", "--admin-api=false"]
    if observers:
        args += ["--observers", ",".join(o.addr for o in observers)]
    return node_factory(args + list(extra))


class Watch:
    """A gRPC client of the observer's stream, collecting updates on a thread."""

    def __init__(self, node):
        pb = topo_pb()
        self.ch = grpc.insecure_channel(node.addr)
        call = self.ch.unary_stream(WATCH, request_serializer=lambda m: m.SerializeToString(),
                                    response_deserializer=pb.TopologyUpdate.FromString)
        self.stream = call(pb.WatchRequest(), timeout=60)
        self.updates = []
        self.error = None
        self.view = {}
        self.pb = pb
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for u in self.stream:
                if u.full:
                    self.view = {}
                for m in u.members:
                    self.view[m.name] = m
                self.updates.append((time.monotonic(), u))
        except grpc.RpcError as e:
            self.error = e

    def status(self, name):
        m = self.view.get(name)
        return self.pb.MemberStatus.Name(m.status) if m else None

    def close(self):
        self.stream.cancel()
        self.ch.close()


class Load:
    """Requests over 60 resources on one connection, on a thread, until stopped: every status
    that is not 200 is kept."""

    def __init__(self, node):
        self.node, self.bad = node, []
        self.done = threading.Event()
        self.t = threading.Thread(target=self._run)
        self.t.start()

    def _run(self):
        c = H1(self.node)
        i = 0
        while not self.done.is_set():
            st = c.attempt("load%d" % (i % 60))[0]
            if st != 200:
                self.bad.append(st)
            i += 1
        c.close()

    def stop(self):
        self.done.set()
        self.t.join()


def watchers(node):
    return metrics(node).get("sluice_observer_watchers", 0)


def attempts(node):
    m = metrics(node)
    return sum(v for k, v in m.items() if k.startswith("sluice_levee_attempts_total"))


def spread(c, n=60, tag="r"):
    """n requests over n resources: every status."""
    return [c.attempt("%s%d" % (tag, i))[0] for i in range(n)]


# ------------------------------------------------------------------------------ the stream

def test_watch_full_view_then_changes_and_heartbeats(node_factory, etcd, prefix):
    o = observer(node_factory, "obs-1")
    lims = [limiter(node_factory, etcd, prefix, "l%d" % i, [o.gossip]) for i in (1, 2)]
    w = Watch(o)
    try:
        wait_for(lambda: w.status("l1") == "ALIVE" and w.status("l2") == "ALIVE", timeout=10,
                 what="both limiters in the view")
        first = w.updates[0][1]
        assert first.full and first.version >= 1
        m = w.view["l1"]
        assert m.role == "limiter" and m.service == lims[0].addr and m.gossip == lims[0].gossip
        assert w.view["obs-1"].role == "observer"
        # heartbeats: empty updates every 200 ms
        n0 = len(w.updates)
        time.sleep(0.7)
        beats = [u for _, u in w.updates[n0:] if not u.members]
        assert len(beats) >= 2
        # a graceful stop is LEFT at once (no suspicion)
        v0 = w.updates[-1][1].version
        lims[1].stop()
        wait_for(lambda: w.status("l2") == "LEFT", timeout=5, what="l2 LEFT")
        changes = [u for _, u in w.updates if u.members and not u.full]
        assert changes and changes[-1].version > v0
        assert watchers(o) == 1
        mt = metrics(o)
        assert mt["sluice_observer_events_total"] >= 2
    finally:
        w.close()
    wait_for(lambda: watchers(o) == 0, timeout=5, what="watcher gone")


def test_registration_under_lease(node_factory, etcd, prefix):
    import json
    o = observer(node_factory, "obs-reg", etcd=etcd, prefix=prefix)
    key = prefix + "/observer/obs-reg"
    wait_for(lambda: etcd.get(key), timeout=5, what="registration")
    assert json.loads(etcd.get(key)) == {"gossip": o.gossip, "service": o.addr}
    o.kill()  # -9: the lease (2 s TTL) expires, the key goes with it
    t0 = time.monotonic()
    wait_for(lambda: not etcd.get(key), timeout=8, what="key gone with the lease")
    assert time.monotonic() - t0 < 6
    o2 = observer(node_factory, "obs-reg2", etcd=etcd, prefix=prefix)
    key2 = prefix + "/observer/obs-reg2"
    wait_for(lambda: etcd.get(key2), timeout=5, what="registration")
    assert o2.stop() == 0  # graceful: the lease is revoked at once
    assert not etcd.get(key2)


def test_proxy_exits_when_no_observer_answers(node_factory, etcd, prefix):
    p = node_factory(["--role", "proxy", "--observers", "127.0.0.1:%d" % free_port(),
                      "--observer-retry-window", "1s", "--admin-api=false"], start=False)
    p.start(wait=False)
    assert p.proc.wait(10) == 1
    assert "no observer answered" in p.logs()


# ------------------------------------------------------------------ the proxy follows them

def test_cluster_observer_failover_limiter_kill_and_join(node_factory, etcd, prefix):
    """3 limiters + 2 observers + 1 proxy following them."""
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100000, "burst": 100000}})
    o1 = observer(node_factory, "obs-1")
    o2 = observer(node_factory, "obs-2", seeds=[o1.gossip])
    seeds = [o1.gossip, o2.gossip]
    lims = [limiter(node_factory, etcd, prefix, "l%d" % i, seeds) for i in (1, 2, 3)]
    p = proxy(node_factory, etcd, prefix, [o1, o2])
    c = H1(p)
    wait_for(lambda: c.attempt("warm")[0] == 200, timeout=10, what="proxy answering")
    wait_for(lambda: all(attempts(x) > 0 for x in lims) or spread(c) and False, timeout=10,
             what="traffic on every limiter")
    assert set(spread(c)) == {200}
    # the observer the proxy follows
    wait_for(lambda: watchers(o1) + watchers(o2) == 1, timeout=5, what="one watcher")
    used, other = (o1, o2) if watchers(o1) == 1 else (o2, o1)

    # kill -9 that observer: requests keep being answered, the proxy moves to the other
    load = Load(p)
    try:
        used.kill()
        t0 = time.monotonic()
        wait_for(lambda: watchers(other) == 1, timeout=10, what="proxy on the other observer")
        reconnect_s = time.monotonic() - t0
        assert metrics(p)["sluice_proxy_observer_reconnects_total"] >= 1
        assert metrics(p)["sluice_proxy_observer_connected"] == 1

        # kill -9 a limiter: its share moves (the proxy's own failover, then the topology)
        w = Watch(other)
        victim = lims[2]
        victim.kill()
        t0 = time.monotonic()
        wait_for(lambda: w.status("l3") == "DEAD", timeout=10, what="l3 dead")
        dead_s = time.monotonic() - t0
        w.close()
        time.sleep(0.3)
        before = [attempts(x) for x in lims[:2]]
        assert set(spread(c, tag="after")) == {200}
        after = [attempts(x) for x in lims[:2]]
        assert sum(after) - sum(before) >= 60

        # a new limiter joins: it gets traffic with no restart of anything
        l4 = limiter(node_factory, etcd, prefix, "l4", [other.gossip])
        t0 = time.monotonic()
        wait_for(lambda: spread(c, n=30, tag="j") and attempts(l4) > 0, timeout=10,
                 what="traffic on the new limiter")
        join_s = time.monotonic() - t0
    finally:
        load.stop()
    assert not load.bad, "requests not answered 200 during the changes: %r" % load.bad[:10]
    print("observer reconnect %.2fs, limiter dead in the view %.2fs, join %.2fs"
          % (reconnect_s, dead_s, join_s))
    c.close()


def test_limiter_sigterm_proxy_stops_sending_first(node_factory, etcd, prefix):
    """SIGTERM on a limiter in the overlay: LEFT is gossiped, the observer streams it, the proxy
    marks it leaving at once, and the limiter keeps answering for --leave-drain before its port
    closes: no request fails and the proxy never had to fail a call over from it."""
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100000, "burst": 100000}})
    o = observer(node_factory, "obs-1")
    lims = [limiter(node_factory, etcd, prefix, "l%d" % i, [o.gossip]) for i in (1, 2, 3)]
    p = proxy(node_factory, etcd, prefix, [o])
    c = H1(p)
    wait_for(lambda: c.attempt("warm")[0] == 200, timeout=10, what="proxy answering")
    wait_for(lambda: all(attempts(x) > 0 for x in lims) or spread(c) and False, timeout=10,
             what="traffic on every limiter")
    load = Load(p)
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        assert lims[0].stop() == 0
        stopped_s = time.monotonic() - t0
        time.sleep(0.3)
    finally:
        load.stop()
    assert not load.bad, load.bad[:10]
    m = metrics(p)
    assert m.get('sluice_proxy_failovers_total{limiter="l1"}', 0) == 0
    print("limiter stop (LEFT + drain) %.2fs" % stopped_s)
    c.close()


@pytest.mark.slow
def test_15_limiters_kill_9_every_member_marks_dead(node_factory, etcd, prefix):
    """15 limiters + 2 observers + 2 proxies, probes every 500 ms: kill -9 one limiter under load;
    every member's view (the observers' streams, the limiters' metrics) says dead within 5 s,
    and the excess admitted on its keys stays within one member's burst (Levee's burst/DF)."""
    rate, burst, df = 1, 20, 3  # ~no refill during the test: admitted = burst per group
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": rate, "burst": burst},
                              "factor/default": str(df)})
    slow = ["--gossip-probe-interval", "500ms", "--gossip-probe-timeout", "200ms"]
    o1 = observer(node_factory, "obs-1", extra=slow)
    o2 = observer(node_factory, "obs-2", seeds=[o1.gossip], extra=slow)
    seeds = [o1.gossip, o2.gossip]
    lims = [limiter(node_factory, etcd, prefix, "l%02d" % i, seeds, extra=slow)
            for i in range(1, 16)]
    ps = [proxy(node_factory, etcd, prefix, [o1, o2]), proxy(node_factory, etcd, prefix, [o2, o1])]
    ws = [Watch(o1), Watch(o2)]
    wait_for(lambda: all(sum(1 for n in w.view if n.startswith("l")) == 15 for w in ws),
             timeout=20, what="15 limiters in both views")
    cs = [H1(p) for p in ps]
    for c in cs:
        wait_for(lambda: c.attempt("warm")[0] in (200, 429), timeout=10, what="proxy answering")
    keys = ["k%d" % i for i in range(40)]
    admitted = {k: 0 for k in keys}
    stop = threading.Event()

    def load(c):
        while not stop.is_set():
            for k in keys:
                if c.attempt(k)[0] == 200:
                    admitted[k] += 1
    ts = [threading.Thread(target=load, args=(c,)) for c in cs]
    started = time.monotonic()
    for t in ts:
        t.start()
    time.sleep(1.0)
    victim = lims[7]
    victim.kill()
    t0 = time.monotonic()
    try:
        # when each member first says dead: the observers' streams (timestamped as updates
        # arrive) and every limiter's gauge, polled side by side
        others = [x for x in lims if x is not victim]
        seen = {}

        def poll(x):
            while x.name not in seen and time.monotonic() - t0 < 15:
                if metrics(x).get('sluice_gossip_members{status="dead"}', 0) >= 1:
                    seen[x.name] = time.monotonic() - t0
                    return
                time.sleep(0.05)
        pollers = [threading.Thread(target=poll, args=(x,)) for x in others]
        for t in pollers:
            t.start()
        for t in pollers:
            t.join()
        wait_for(lambda: all(w.status(victim.name) == "DEAD" for w in ws), timeout=15,
                 what="both observers stream it dead")
        in_streams = [next(ts for ts, u in w.updates
                           if any(m.name == victim.name and m.status == 2 for m in u.members))
                      - t0 for w in ws]
        assert len(seen) == len(others), "not every limiter marked it dead"
        dead_s = max(list(seen.values()) + in_streams)
        time.sleep(1.0)
    finally:
        stop.set()
        for t in ts:
            t.join()
    for w in ws:
        w.close()
    # every key's group admits each member's burst (+1) and the refill; a member replaced by the
    # next by HRW starts with a full bucket: at most one member's burst + 1 more (Levee's
    # burst/DF, the burst there being the group's)
    steady = rate * (time.monotonic() - started) + df * (burst + 1)
    excess = max(admitted[k] - steady for k in keys)
    print("15 limiters: every member marked the killed one dead in %.2fs; max excess %.1f "
          "(bound: one member's burst + 1 = %d)" % (dead_s, excess, burst + 1))
    assert dead_s < 5.0
    assert excess <= burst + 1

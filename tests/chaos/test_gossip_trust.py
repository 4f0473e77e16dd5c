# SPDX-License-Identifier: Apache-2.0
"""Forged gossip against real sluiced processes on loopback (issue 25, "gossip without a key ring
trusts every datagram"): three nodes with --discovery gossip, an attacker on the same host that
can send them datagrams and open TCP connections to their gossip ports, and the datagrams it
sends written from the wire format (tests/chaos/gossipforge.py).

With a key ring (every node shares K1, the attacker does not have it): a forged ALIVE naming a
fake service, a forged ALIVE moving a real member, a DEAD at 0xFFFFFFFF, 1,024 fake members by
datagram and by push/pull, each unsealed or sealed with another key: all refused (counted as
decrypt), nothing changes; a sealed packet a member really sent, captured and sent again once the
member it announced is forgotten, is refused (counted as replay), and one sealed two minutes ago
as stale; forty connections held open on a node's gossip port do not keep a fourth node from
joining through it (push/pull slots are charged only after the first frame authenticates).

Without a key ring (loopback, the development opt-out): a forged ALIVE whose service is not a
numeric ip:port is refused (counted as meta); a forged ALIVE moving a real member is contradicted
by the member (its keys answer again from their owner within seconds); a DEAD at 0xFFFFFFFF sent
again and again does not keep a live member out (its refutation saturates, and second-hand news
at the ceiling no longer counts). What the opt-out cannot stop, a stranger announcing a member
with a valid numeric service, is what the key ring is for (docs/cluster.md "Gossip security").

"""
import json
import os
import socket
import tempfile
import threading
import time

import pytest

import chaoslib as cl
import gossipforge as gf

K1 = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
K_OTHER = "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"
FAST = ["--gossip-probe-interval", "200ms", "--gossip-probe-timeout", "100ms",
        "--gossip-interval", "50ms", "--gossip-pushpull-interval", "2s"]
MAX = 0xFFFFFFFF


@pytest.fixture
def keyring():
    d = tempfile.mkdtemp(prefix="sluice-gossip-trust-")
    path = os.path.join(d, "ring")
    with open(path, "w") as f:
        f.write(K1 + "\n")
    os.chmod(path, 0o600)
    yield path
    os.unlink(path)
    os.rmdir(d)


class Cluster:
    def __init__(self, node_factory, n=3, ring=None, extra=()):
        self.gaddrs = ["127.0.0.1:%d" % cl.free_port() for _ in range(n)]
        self.nodes = []
        self.ring = ring
        self.node_factory = node_factory
        self.extra = list(extra)
        for i in range(n):
            self.nodes.append(self._start(i))
        assert cl.wait_until(lambda: self.counts() == [n] * n, 15), self.counts()

    def _args(self, gaddr, seed):
        args = ["--workers", "2", "--discovery", "gossip", "--gossip-addr", gaddr] + FAST
        args += self.extra
        if seed:
            args += ["--gossip-seeds", seed]
        if self.ring:
            args += ["--gossip-keyring-file", self.ring]
        return args

    def _start(self, i):
        return self.node_factory(self._args(self.gaddrs[i], self.gaddrs[0] if i else None))

    def add(self, gaddr):
        return self.node_factory(self._args(gaddr, self.gaddrs[0]))

    def counts(self, nodes=None):
        return [cl.peer_count(x.addr) for x in (nodes or self.nodes)]

    def owners(self, node, keys):
        """each key's owner as node answers it, or an "error: ..." string"""
        reqs = [{"name": "trust", "unique_key": k, "hits": 0, "limit": 10, "duration": 600000}
                for k in keys]
        try:
            st, _, body = cl.http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                                  json.dumps({"requests": reqs}), timeout=5)
        except OSError as e:
            return ["error: %r" % e] * len(keys)
        if st != 200:
            return ["error: HTTP %d" % st] * len(keys)
        return [r["metadata"].get("owner") if not r.get("error") else "error: " + r["error"]
                for r in json.loads(body)["responses"]]


def dropped(node, reason):
    return cl.metric(node.addr, "sluice_gossip_dropped_total", {"reason": reason}) or 0


def holds(pred, secs, interval=0.1):
    """pred() stays true for secs (checked every interval); the first false answer fails."""
    deadline = time.time() + secs
    while time.time() < deadline:
        if not pred():
            return False
        time.sleep(interval)
    return True


def unused_addr():
    return "127.0.0.1:%d" % cl.free_port()


def forged_fake(service):
    return gf.packet(gf.GOSSIP, [gf.update(gf.ALIVE, 1, "fake-1", unused_addr(), "",
                                           "service=%s\nrole=limiter\n" % service)])


def forged_move(victim, inc=1000):
    return gf.packet(gf.GOSSIP, [gf.update(gf.ALIVE, inc, victim.addr, unused_addr(), "",
                                           "service=%s\nrole=limiter\n" % unused_addr())])


def forged_dead(victim, gaddr):
    return gf.packet(gf.GOSSIP, [gf.update(gf.DEAD, MAX, victim.addr, gaddr)])


def forms(pkt, ring):
    """the ways an attacker without the key can send pkt: plain, or sealed under another key"""
    return [pkt] + ([gf.seal(K_OTHER, "attacker", pkt)] if ring else [])


KEYS = ["trust-%d" % i for i in range(30)]


# ---- with a key ring: every forgery refused ----------------------------------------------------

def test_keyring_refuses_forged_alive_move_dead(node_factory, keyring):
    c = Cluster(node_factory, ring=keyring)
    n0, victim, n2 = c.nodes
    before = c.owners(n0, KEYS)
    assert not any(o.startswith("error") for o in before), before
    d0 = dropped(n0, "decrypt")
    forged = [forged_fake("127.0.0.1:19999"), forged_move(victim, MAX),
              forged_dead(victim, c.gaddrs[1])]
    for pkt in forged:
        for form in forms(pkt, keyring):
            for g in (c.gaddrs[0], c.gaddrs[2]):
                gf.send_udp(g, form)
    assert holds(lambda: c.counts() == [3, 3, 3] and c.owners(n0, KEYS) == before, 2), \
        (c.counts(), c.owners(n0, KEYS))
    assert dropped(n0, "decrypt") - d0 >= 6


def fake_updates(n, start=0):
    return [gf.update(gf.ALIVE, 0, "fill-%d" % i, "127.0.0.1:%d" % (20000 + i % 40000), "",
                      "service=127.0.0.1:%d\n" % (30000 + i % 30000))
            for i in range(start, start + n)]


def test_keyring_refuses_1024_member_fill(node_factory, keyring):
    c = Cluster(node_factory, ring=keyring)
    n0 = c.nodes[0]
    ups = fake_updates(1024)
    for i in range(0, len(ups), 18):  # datagrams of 18 updates fit 1400 bytes
        for form in forms(gf.packet(gf.GOSSIP, ups[i:i + 18]), keyring):
            gf.send_udp(c.gaddrs[0], form)
    push = gf.packet(gf.PUSH, ups)
    for form in forms(push, keyring):
        gf.send_tcp(c.gaddrs[0], gf.frame(form), timeout=1)
    members = lambda: cl.metric(n0.addr, "sluice_gossip_members", {"status": "alive"})  # noqa: E731
    assert holds(lambda: members() == 3 and c.counts() == [3, 3, 3], 2), (members(), c.counts())


def test_keyring_refuses_a_replayed_sealed_packet(node_factory, keyring):
    # a member really sealed this (the test holds the key): the first time it counts
    c = Cluster(node_factory, ring=keyring, extra=["--gossip-dead-keep", "1s"])
    n0 = c.nodes[0]
    ghost = gf.packet(gf.GOSSIP, [gf.update(gf.ALIVE, 0, "ghost", unused_addr(), "",
                                            "service=%s\nrole=limiter\n" % unused_addr())])
    captured = gf.seal(K1, "node-x", ghost)
    gf.send_udp(c.gaddrs[0], captured)
    assert cl.wait_until(lambda: cl.peer_count(n0.addr) == 4, 5), c.counts()
    # nobody answers the ghost's probes: dead, then forgotten after --gossip-dead-keep
    assert cl.wait_until(lambda: c.counts() == [3, 3, 3] and cl.metric(
        n0.addr, "sluice_gossip_members", {"status": "dead"}) == 0, 20), c.counts()
    r0 = dropped(n0, "replay")
    gf.send_udp(c.gaddrs[0], captured)  # the replay, well inside the 30 s window
    assert holds(lambda: c.counts() == [3, 3, 3], 2), c.counts()
    assert dropped(n0, "replay") == r0 + 1
    # sealed two minutes ago: outside the window
    s0 = dropped(n0, "stale")
    gf.send_udp(c.gaddrs[0], gf.seal(K1, "node-x", ghost, ts_ms=int(time.time() * 1000) - 120000))
    assert holds(lambda: c.counts() == [3, 3, 3], 1), c.counts()
    assert dropped(n0, "stale") == s0 + 1


def test_keyring_held_connections_do_not_lock_out_a_join(node_factory, keyring):
    c = Cluster(node_factory, ring=keyring)
    host, port = c.gaddrs[0].rsplit(":", 1)
    stop = threading.Event()
    opened = [0]

    def hold():
        socks = []
        try:
            while not stop.is_set():
                # keep 40 connections open, each having sent a header for 1000 bytes and no more
                socks = [s for s in socks if s.fileno() >= 0]
                while len(socks) < 40 and not stop.is_set():
                    try:
                        s = socket.create_connection((host, int(port)), timeout=1)
                        s.sendall(b"\x00\x00\x03\xe8")
                        s.setblocking(False)
                        socks.append(s)
                        opened[0] += 1
                    except OSError:
                        break
                for s in list(socks):
                    try:
                        if s.recv(1) == b"":
                            s.close()
                    except BlockingIOError:
                        pass
                    except OSError:
                        s.close()
                time.sleep(0.01)
        finally:
            for s in socks:
                s.close()

    t = threading.Thread(target=hold)
    t.start()
    try:
        time.sleep(0.5)
        joiner = c.add(unused_addr())
        everyone = c.nodes + [joiner]
        ok = cl.wait_until(lambda: c.counts(everyone) == [4] * 4, 15)
        assert ok, (c.counts(everyone), opened[0])
    finally:
        stop.set()
        t.join()
    assert opened[0] >= 40
    assert dropped(c.nodes[0], "queue_full") > 0


# ---- without a key ring (loopback): contradiction, saturation, validation hold ---------------

def test_no_keyring_refuses_a_fake_service_that_is_not_numeric(node_factory):
    c = Cluster(node_factory)
    n0 = c.nodes[0]
    m0 = dropped(n0, "meta")
    for svc in ["evil.example:19999", "127.0.0.1:19999x", "127.0.0.1:0", "127.0.0.1"]:
        for g in c.gaddrs:
            gf.send_udp(g, forged_fake(svc))
    assert holds(lambda: c.counts() == [3, 3, 3], 2), c.counts()
    assert dropped(n0, "meta") - m0 >= 4
    assert "no --gossip-keyring-file" in n0.logs()
    assert cl.metric(n0.addr, "sluice_gossip_trust_total", {"event": "unauthenticated"}) > 0


def test_no_keyring_forged_move_is_contradicted(node_factory):
    c = Cluster(node_factory)
    n0, victim, n2 = c.nodes
    before = c.owners(n0, KEYS)
    assert not any(o.startswith("error") for o in before), before
    assert victim.addr in before  # the victim owns some of the keys
    for inc in (1000, MAX):
        gf.send_udp(c.gaddrs[0], forged_move(victim, inc))
        t0 = time.time()
        ok = cl.wait_until(lambda: all(c.owners(x, KEYS) == before for x in c.nodes), 10)
        assert ok, [c.owners(x, KEYS) for x in c.nodes]
        print("# forged ALIVE moving a member (incarnation %#x), no key ring: every node "
              "answers its keys from it again after %.2f s" % (inc, time.time() - t0))
    assert cl.metric(victim.addr, "sluice_gossip_trust_total", {"event": "contradicted"}) >= 1


def test_no_keyring_dead_at_ceiling_does_not_lock_out(node_factory):
    c = Cluster(node_factory)
    n0, victim, n2 = c.nodes
    t0 = time.time()
    back, lost = None, []
    # the attacker keeps at it for 5 s: a DEAD at 0xFFFFFFFF to both others every 100 ms; the
    # victim is back everywhere within 1.5 s and stays listed while the attack goes on
    while time.time() - t0 < 5:
        for g in (c.gaddrs[0], c.gaddrs[2]):
            gf.send_udp(g, forged_dead(victim, c.gaddrs[1]))
        counts = c.counts()
        if counts == [3, 3, 3] and back is None:
            back = time.time() - t0
        if time.time() - t0 > 1.5 and counts != [3, 3, 3]:
            lost.append((round(time.time() - t0, 2), counts))
        time.sleep(0.1)
    assert back is not None and back < 1.5, (back, c.counts())
    assert lost == [], lost
    assert holds(lambda: c.counts() == [3, 3, 3], 1), c.counts()
    print("# DEAD at 0xFFFFFFFF every 100 ms for 5 s, no key ring: the victim listed everywhere "
          "again %.2f s after the attack began, and through the rest of it" % back)

# SPDX-License-Identifier: Apache-2.0
"""The nemesis soak (`make soak`, docs/cluster.md "The soak"): 5 sluiced nodes, each in its own
network namespace, joined by a bridge in a hub namespace that also holds etcd and the load
generator; discovery through etcd. A seeded nemesis injects overlapping faults while gen.py
records every decision; check.py then replays the record against bounds.py.

    soak.py [--seconds S] [--seed N] [--out DIR]      (root: ip netns, nftables)

Addresses 10.77.0.0/24 exist only inside the namespaces this script creates; it removes them at
the end (and any left by an earlier run)."""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
SLUICED = os.path.join(BUILD, "bin", "sluiced")
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
PY = "/usr/bin/python3"

N = 5
NET = "10.77.0."
HUB = "sk-hub"
CLIENT_IP = NET + "254"   # the generator's address (first on the bridge: the source address)
ETCD_IP = NET + "250"
PORT = 9000
LEASE_TTL = "2s"
SYNC_WAIT = "100ms"
PREFIX = "/soak"
# clock skew: every node runs under libfaketime (Debian's faketime), its offset read from a file
# of its own at most once a second; the nemesis writes "+2s" there and "+0" back. Only the real-
# time clock is skewed (NTP-like); CLOCK_MONOTONIC, which libuv's timers use, is left alone.
# Not under --state-dir: libfaketime 0.9.10 breaks pthread_cond_timedwait on a CLOCK_MONOTONIC
# condition variable (it returns at once), so the snapshot writer (node/statedir.c) writes the
# snapshot in a loop, hundreds of times a second (measured: a quarter of a core when idle).
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"


def ns(i):
    return "sk-n%d" % i


def node_ip(i):
    return NET + str(i + 1)


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def nsx(name, *args, check=True):
    return sh("ip", "netns", "exec", name, *args, check=check)


# ---------------------------------------------------------------------------- network
def net_down():
    for name in [HUB] + [ns(i) for i in range(N)]:
        sh("ip", "netns", "del", name, check=False)


def net_up():
    net_down()
    sh("ip", "netns", "add", HUB)
    nsx(HUB, "ip", "link", "set", "lo", "up")
    nsx(HUB, "ip", "link", "add", "br0", "type", "bridge")
    nsx(HUB, "ip", "addr", "add", CLIENT_IP + "/24", "dev", "br0")
    nsx(HUB, "ip", "addr", "add", ETCD_IP + "/24", "dev", "br0")
    nsx(HUB, "ip", "link", "set", "br0", "up")
    for i in range(N):
        sh("ip", "netns", "add", ns(i))
        nsx(ns(i), "ip", "link", "set", "lo", "up")
        nsx(HUB, "ip", "link", "add", "v%d" % i, "type", "veth", "peer", "name", "eth0",
            "netns", ns(i))
        nsx(HUB, "ip", "link", "set", "v%d" % i, "master", "br0", "up")
        nsx(ns(i), "ip", "addr", "add", node_ip(i) + "/24", "dev", "eth0")
        nsx(ns(i), "ip", "link", "set", "eth0", "up")
        # the nemesis' table: empty chains, rules added and flushed per fault
        nsx(ns(i), "nft", "add table inet soak")
        for hook in ("input", "output"):
            nsx(ns(i), "nft", "add chain inet soak %s { type filter hook %s priority 0 ; }"
                % (hook, hook))


def nft(i, rule):
    nsx(ns(i), "nft", rule)


def nft_block(i, ips, chain_tag):
    s = "{ %s }" % ", ".join(ips)
    nft(i, "add rule inet soak input ip saddr %s drop comment \"%s\"" % (s, chain_tag))
    nft(i, "add rule inet soak output ip daddr %s drop comment \"%s\"" % (s, chain_tag))


def nft_flush(i):
    nft(i, "flush chain inet soak input")
    nft(i, "flush chain inet soak output")


# ---------------------------------------------------------------------------- processes
class Etcd:
    def __init__(self, root):
        self.dir = os.path.join(root, "etcd")
        self.log = open(os.path.join(root, "etcd.log"), "a")
        self.url = "http://%s:2379" % ETCD_IP
        self.proc = None

    def start(self):
        peer = "http://%s:2380" % ETCD_IP
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", HUB, ETCD, "--name", "s", "--data-dir", self.dir,
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "s=" + peer, "--heartbeat-interval", "10",
             "--election-timeout", "100"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            r = nsx(HUB, "curl", "-s", "-m", "1", self.url + "/health", check=False)
            if '"health":"true"' in r.stdout:
                return
            time.sleep(0.1)
        raise RuntimeError("etcd did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def put(self, key, value):
        env = dict(os.environ, ETCDCTL_API="3")
        subprocess.run(["ip", "netns", "exec", HUB, "etcdctl", "--endpoints", self.url, "put",
                        key, value], check=True, capture_output=True, env=env, timeout=20)


class Node:
    def __init__(self, i, root):
        self.i = i
        self.addr = "%s:%d" % (node_ip(i), PORT)
        self.state_dir = os.path.join(root, "state%d" % i)
        self.skew_file = os.path.join(root, "skew%d" % i)
        self.faked = False
        os.makedirs(self.state_dir, exist_ok=True)
        self.cfg = os.path.join(root, "node%d.yaml" % i)
        with open(self.cfg, "w") as f:
            f.write("# SPDX-License-Identifier: Apache-2.0\nworkers: 1\n")
        self.log = open(os.path.join(root, "node%d.log" % i), "a")
        self.secret = os.path.join(root, "peer.secret")
        if not os.path.exists(self.secret):
            with open(self.secret, "w") as f:
                f.write(os.urandom(24).hex() + "\n")
            os.chmod(self.secret, 0o600)
        self.proc = None

    def args(self, etcd_url, with_state):
        a = [SLUICED, "--config", self.cfg, "--listen-addr", self.addr,
             "--discovery", "etcd", "--storage-addrs", etcd_url, "--storage-prefix", PREFIX,
             "--peer-secret-file", self.secret, "--peer-lease-ttl", LEASE_TTL, "--batch-timeout", "300ms",
             "--global-sync-wait", SYNC_WAIT, "--shutdown-timeout", "3s"]
        if with_state:
            a += ["--state-dir", self.state_dir, "--snapshot-period", "1s"]
        return a

    def start(self, etcd_url, with_state=False):
        self.log.write("---- start %s (state %s)\n" % (time.strftime("%T"), with_state))
        self.log.flush()
        self.proc = subprocess.Popen(["ip", "netns", "exec", ns(self.i)] +
                                     self.args(etcd_url, with_state),
                                     env=self.env(not with_state),
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def env(self, faked):
        e = dict(os.environ)
        # every namespace shares the file system: an admin socket of its own per node
        e["SLUICE_ADMIN_SOCKET"] = os.path.join(os.path.dirname(self.cfg), "admin%d.sock" % self.i)
        self.faked = faked and os.path.exists(FAKETIME_LIB)
        if self.faked:
            if not os.path.exists(self.skew_file):
                self.skew(0)
            e.update(LD_PRELOAD=FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE=self.skew_file,
                     FAKETIME_CACHE_DURATION="1", FAKETIME_DONT_FAKE_MONOTONIC="1")
        return e

    def skew(self, seconds):
        with open(self.skew_file + ".tmp", "w") as f:
            f.write("%+ds\n" % seconds)
        os.replace(self.skew_file + ".tmp", self.skew_file)

    def ready(self, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return False
            r = nsx(ns(self.i), "curl", "-s", "-m", "1", "http://%s/v1/LiveCheck" % self.addr,
                    check=False)
            if r.returncode == 0 and r.stdout:
                return True
            time.sleep(0.1)
        return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout):
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------------- keys
def make_keys(seed):
    """A few hundred keys: token bucket, token bucket GLOBAL and leaky bucket (Gubernator),
    GCRA quotas (Levee /attempt, a group of 2 nodes each)."""
    rng = random.Random(seed)
    keys = []
    for i in range(90):
        keys.append({"alg": "tb", "name": "soak_tb", "key": "k%d" % i,
                     "limit": rng.choice([4, 6, 10]), "duration": rng.choice([2000, 4000])})
    for i in range(10):   # hot: ~4 calls/s each, enough to show a window cut short
        keys.append({"alg": "tb", "name": "soak_hot", "key": "k%d" % i, "hot": True,
                     "limit": 2, "duration": 2000})
    for i in range(40):
        keys.append({"alg": "tbg", "name": "soak_tbg", "key": "k%d" % i,
                     "limit": rng.choice([6, 10]), "duration": 4000})
    for i in range(70):
        keys.append({"alg": "lb", "name": "soak_lb", "key": "k%d" % i,
                     "limit": rng.choice([4, 8]), "duration": rng.choice([2000, 4000])})
    for i in range(30):
        g = [i % N, (i + 1 + i // N) % N]
        if g[1] == g[0]:
            g[1] = (g[0] + 1) % N
        keys.append({"alg": "levee", "name": "lv%d" % i, "key": "", "rate": rng.choice([0.2, 0.4]),
                     "burst": rng.choice([1, 2]), "df": 2, "group": sorted(g)})
    return keys


# ---------------------------------------------------------------------------- nemesis
KINDS = ["kill", "kill_state", "pause", "isolate", "split", "drop", "etcd_stop", "sighup",
         "leave"] + (["skew"] if os.path.exists(FAKETIME_LIB) else [])


class Nemesis(threading.Thread):
    """Every 3-7 s (seeded), starts a fault of a seeded kind that lasts 2-8 s; at most two at
    once, and at most two nodes out (killed, paused, isolated or leaving) at a time. Writes
    each fault as it ends: {kind, nodes, start, end} (ms)."""

    def __init__(self, seed, nodes, etcd, seconds, faults_path):
        super().__init__(daemon=True)
        self.rng = random.Random(seed * 7919 + 1)
        self.nodes, self.etcd, self.seconds = nodes, etcd, seconds
        self.out = open(faults_path, "w")
        self.active = []   # (kind, nodes, end_time, undo)
        self.lock = threading.Lock()
        self.stopping = False

    def log(self, kind, nodes, start, end):
        self.out.write(json.dumps({"kind": kind, "nodes": nodes, "start": start * 1000,
                                   "end": end * 1000}) + "\n")
        self.out.flush()

    def pick(self, busy, k=1):
        free = [i for i in range(N) if i not in busy]
        if len(free) < k:
            return None
        return self.rng.sample(free, k)

    def start_fault(self):
        kinds = [k for k in KINDS if not (k == "etcd_stop" and
                                          any(a[0] == "etcd_stop" for a in self.active))]
        kind = self.rng.choice(kinds)
        t0 = time.time()   # before the fault is made: its first effect is at or after this
        dur = self.rng.uniform(2.0, 8.0)
        busy = self.busy_nodes()
        out_nodes = len(busy)
        etcd_url = self.etcd.url
        if kind in ("kill", "kill_state", "pause", "isolate", "leave") and out_nodes >= 2:
            kind = "sighup"
        if kind == "split" and busy:
            kind = "drop"
        if kind == "pause":
            dur = self.rng.uniform(3.0, 6.0)  # longer than the lease TTL (2 s)
        if kind == "skew":
            faked = {j for j in range(N) if self.nodes[j].faked}
            busy = busy | (set(range(N)) - faked)
        nodes = self.pick(busy if kind != "sighup" else set(), 1)
        if nodes is None:
            return
        n = self.nodes[nodes[0]]
        if kind in ("kill", "kill_state"):
            n.signal(signal.SIGKILL)
            n.wait(5)

            def undo(n=n, st=(kind == "kill_state")):
                n.start(etcd_url, with_state=st)
        elif kind == "pause":
            n.signal(signal.SIGSTOP)

            def undo(n=n):
                n.signal(signal.SIGCONT)
        elif kind == "isolate":
            others = [node_ip(j) for j in range(N) if j != n.i] + [ETCD_IP]
            nft_block(n.i, others, "isolate")

            def undo(n=n):
                nft_flush(n.i)
        elif kind == "split":
            side = self.rng.sample(range(N), 2)
            nodes = list(range(N))
            rest = [j for j in range(N) if j not in side]
            for j in side:
                nft_block(j, [node_ip(x) for x in rest], "split")

            def undo(side=side):
                for j in side:
                    nft_flush(j)
        elif kind == "drop":
            pct = self.rng.choice([10, 20, 30])
            nft(n.i, "add rule inet soak input numgen random mod 100 < %d drop" % pct)
            nft(n.i, "add rule inet soak output numgen random mod 100 < %d drop" % pct)

            def undo(n=n):
                nft_flush(n.i)
        elif kind == "etcd_stop":
            nodes = []
            self.etcd.stop()

            def undo():
                self.etcd.start()
        elif kind == "skew":
            n.skew(self.rng.choice([-3, -2, -1, 1, 2, 3]))

            def undo(n=n):
                n.skew(0)
        elif kind == "sighup":
            n.signal(signal.SIGHUP)
            dur = 0.0

            def undo():
                pass
        elif kind == "leave":
            n.signal(signal.SIGTERM)
            n.wait(10)

            def undo(n=n):
                n.start(etcd_url, with_state=False)
        self.active.append((kind, nodes, time.time() + dur, undo, t0))

    def end_due(self, force=False):
        keep = []
        for a in self.active:
            kind, nodes, end, undo, start = a
            if force or time.time() >= end:
                undo()
                self.log(kind, nodes, start, time.time())
            else:
                keep.append(a)
        self.active = keep

    def busy_nodes(self):
        s = set()
        for a in self.active:
            s.update(a[1])
        return s

    def run(self):
        t_end = time.time() + self.seconds
        nxt = time.time() + self.rng.uniform(3, 7)
        while not self.stopping and time.time() < t_end:
            self.end_due()
            # no new fault in the last 8 s: each one runs its whole course before the end
            if time.time() >= nxt and len(self.active) < 2 and t_end - time.time() > 8.0:
                self.start_fault()
                nxt = time.time() + self.rng.uniform(3, 7)
            time.sleep(0.05)
        self.end_due(force=True)
        self.out.close()


# ---------------------------------------------------------------------------- main
def pb_dir(root):
    d = os.path.join(root, "pb")
    os.makedirs(d, exist_ok=True)
    protos = [f for f in os.listdir(os.path.join(ROOT, "proto")) if f.endswith(".proto")]
    subprocess.check_call(["protoc", "--proto_path=" + os.path.join(ROOT, "proto"),
                           "--python_out=" + d] + protos)
    return d


def run(seconds, seed, out_dir, rate=120):
    os.makedirs(out_dir, exist_ok=True)
    root = os.path.join(out_dir, "run")   # etcd's data, the nodes' logs, state dirs, config
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    keys = make_keys(seed)
    nodes = []
    etcd = None
    gen = None
    try:
        net_up()
        etcd = Etcd(root)
        etcd.start()
        etcd.put(PREFIX + "/factor/default", "2")
        for k in keys:
            if k["alg"] == "levee":
                etcd.put("%s/limit/key/%s/quota" % (PREFIX, k["name"]),
                         json.dumps({"rate": k["rate"], "burst": k["burst"]}))
        nodes = [Node(i, root) for i in range(N)]
        for n in nodes:
            n.start(etcd.url, with_state=(n.i % 2 == 0))
        for n in nodes:
            if not n.ready():
                raise RuntimeError("node %d did not start:\n%s" % (n.i, open(n.log.name).read()))
        time.sleep(2.0)  # every node has read the full list
        plan = {"nodes": [n.addr for n in nodes], "keys": keys, "seconds": seconds, "rate": rate,
                "seed": seed, "pb_dir": pb_dir(root)}
        plan_path = os.path.join(out_dir, "plan.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        record = os.path.join(out_dir, "record.jsonl")
        faults = os.path.join(out_dir, "faults.jsonl")
        t0 = time.time()
        gen = subprocess.Popen(["ip", "netns", "exec", HUB, PY, os.path.join(HERE, "gen.py"),
                                plan_path, record])
        nem = Nemesis(seed, nodes, etcd, max(0.0, seconds - 4.0), faults)
        nem.start()
        nem.join()
        rc = gen.wait(seconds + 60)
        took = time.time() - t0
        crashed = []
        for n in nodes:
            if n.proc.poll() is not None and n.proc.returncode not in (0, -9, -15):
                crashed.append((n.i, n.proc.returncode))
        meta = {"seconds": seconds, "seed": seed, "took_s": took, "generator_rc": rc,
                "crashed": crashed, "lease_ttl": LEASE_TTL, "global_sync_wait": SYNC_WAIT,
                "logs": root}
        with open(os.path.join(out_dir, "meta.json"), "w") as f:
            json.dump(meta, f)
        return meta
    finally:
        if gen and gen.poll() is None:
            gen.kill()
        for n in nodes:
            if n.alive():
                n.signal(signal.SIGCONT)
                n.signal(signal.SIGTERM)
        for n in nodes:
            if n.proc:
                n.wait(10)
        if etcd:
            etcd.stop()
        net_down()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", 1)))
    ap.add_argument("--out", default=os.path.join(BUILD, "soak"))
    ap.add_argument("--rate", type=float, default=120.0, help="generator calls/s")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak.py: needs root (ip netns, nftables)")
    meta = run(a.seconds, a.seed, a.out, a.rate)
    sys.path.insert(0, HERE)
    import check
    sys.exit(check.main([a.out]))


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""Redis Sentinel (--redis-sentinel ADDRS --redis-master NAME): sluiced asks a sentinel where the
master is, decides there, and follows a failover: the master killed (the sentinels promote the
replica) and a failover asked of the sentinels while the old master lives on as a replica (its
writes refused: READONLY). Real redis-server processes, the sentinels in --sentinel mode."""
import os
import signal
import subprocess
import threading
import time

import test_gubernator as gub
from conftest import free_port, needs, wait_for
from test_redis import Redis, metric

pytestmark = needs("redis-server")


class Sentinels:
    """A master, its replica and three sentinels (quorum 2) watching them as 'm'."""

    def __init__(self, tmp):
        self.tmp = tmp
        # a full sync writes an RDB file even with --save "": in the test's directory, not the cwd
        os.makedirs(os.path.join(tmp, "m"))
        os.makedirs(os.path.join(tmp, "r"))
        self.master = Redis(["--dir", os.path.join(tmp, "m")]).start()
        self.replica = Redis(["--dir", os.path.join(tmp, "r"), "--replicaof", "127.0.0.1",
                              str(self.master.port)]).start()
        self.sentinels = []
        for i in range(3):
            port = free_port()
            conf = os.path.join(tmp, "sentinel%d.conf" % i)
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\nsentinel monitor m 127.0.0.1 %d 2\n"
                        "sentinel down-after-milliseconds m 1000\n"
                        "sentinel failover-timeout m 4000\n" % (port, self.master.port))
            p = subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            self.sentinels.append((port, p))
        assert wait_for(lambda: all(self.ask(p) for p, _ in self.sentinels), 10)
        assert wait_for(lambda: self.replica.cmd("INFO", "replication").find(
            "master_link_status:up") >= 0, 10)

    def ask(self, port):
        out = subprocess.run(["redis-cli", "-p", str(port), "SENTINEL", "get-master-addr-by-name",
                              "m"], capture_output=True, text=True, timeout=5).stdout.split()
        return out[1] if len(out) == 2 else None

    def addrs(self):
        return ",".join("127.0.0.1:%d" % p for p, _ in self.sentinels)

    def stop(self):
        for _, p in self.sentinels:
            p.kill()
            p.wait()
        self.master.stop()
        self.replica.stop()


def node_args(s, *more):
    return ["--workers", "2", "--store", "redis", "--redis-sentinel", s.addrs(),
            "--redis-master", "m", "--redis-timeout", "300ms"] + list(more)


def decide(n, key, hits=1, limit=1000000):
    st, _, data = gub.post_json(n, {"requests": [{"name": "s", "unique_key": key, "hits": hits,
                                                   "limit": limit, "duration": 600000}]})
    return data["responses"][0] if st == 200 else {"error": "HTTP %d" % st}


def under_load(n, during):
    """Calls of 8 items every 10 ms while during() runs: [(time, items failed)]."""
    log, stop = [], threading.Event()

    def load():
        i = 0
        while not stop.is_set():
            body = {"requests": [{"name": "s", "unique_key": "k%d" % ((i * 8 + j) % 500),
                                  "hits": 1, "limit": 1000000, "duration": 600000}
                                 for j in range(8)]}
            i += 1
            try:
                st, _, data = gub.post_json(n, body)
                failed = 8 if st != 200 else sum(1 for r in data["responses"] if r.get("error"))
            except OSError:
                failed = 8
            log.append((time.monotonic(), failed))
            time.sleep(0.01)

    t = threading.Thread(target=load)
    t.start()
    time.sleep(0.5)
    try:
        marks = during()
    finally:
        time.sleep(2.0)
        stop.set()
        t.join()
    return log, marks


def test_sentinel_names_the_master_and_a_failover_is_followed(node_factory, tmp_path):
    s = Sentinels(str(tmp_path))
    try:
        n = node_factory(node_args(s))
        assert wait_for(lambda: not decide(n, "warm").get("error"), 10), n.logs()
        # the decisions are the master's: its key is there, and the replica has it too
        assert decide(n, "counted", hits=3, limit=10)["remaining"] == "7"
        assert s.master.cmd("DBSIZE") != "0"

        def kill_master():
            killed = time.monotonic()
            s.master.proc.send_signal(signal.SIGKILL)
            s.master.proc.wait()
            promoted = wait_for(lambda: s.ask(s.sentinels[0][0]) == str(s.replica.port), 20)
            return killed, promoted, time.monotonic()

        log, (killed, promoted, promoted_at) = under_load(n, kill_master)
        assert promoted, "the sentinels did not promote the replica"
        after = [(ts, f) for ts, f in log if ts >= killed]
        bad = [ts for ts, f in after if f]
        print("\n# master killed: the sentinels promoted the replica %.2f s later; %d of %d calls "
              "after the kill had errors; sluice answered without errors again %.2f s after the "
              "kill" % (promoted_at - killed, len(bad), len(after),
                        (bad[-1] - killed) if bad else 0.0))
        assert all(not f for ts, f in after if ts > promoted_at + 1.5), n.logs()
        # the decisions are the new master's now (what it holds is Redis's replication's affair:
        # asynchronous, so a failover may lose the last writes)
        assert not decide(n, "after-failover").get("error")
        assert "sl:{1:s:after-failover}" in s.replica.cmd("KEYS", "*after-failover*")
        assert metric(n, "sluice_redis_errors_total") > 0  # the calls during the failover
    finally:
        s.stop()


def test_failover_asked_old_master_turns_replica(node_factory, tmp_path):
    """SENTINEL FAILOVER: the old master lives on as a replica, so writes there get READONLY;
    sluiced leaves it and asks the sentinels again."""
    s = Sentinels(str(tmp_path))
    try:
        n = node_factory(node_args(s))
        assert wait_for(lambda: not decide(n, "warm").get("error"), 10), n.logs()
        old = str(s.master.port)

        def failover():
            t0 = time.monotonic()
            subprocess.run(["redis-cli", "-p", str(s.sentinels[0][0]), "SENTINEL", "failover",
                            "m"], capture_output=True, timeout=5)
            moved = wait_for(lambda: s.ask(s.sentinels[0][0]) not in (None, old), 20)
            return t0, moved, time.monotonic()

        log, (t0, moved, moved_at) = under_load(n, failover)
        assert moved, "the sentinels did not fail over"
        after = [(ts, f) for ts, f in log if ts >= t0]
        bad = [ts for ts, f in after if f]
        print("\n# failover asked: the sentinels named the new master %.2f s later; %d of %d calls "
              "had errors" % (moved_at - t0, len(bad), len(after)))
        assert all(not f for ts, f in after if ts > moved_at + 1.5), n.logs()
        assert s.replica.cmd("ROLE").startswith("master")
        assert not decide(n, "after-failover").get("error")
        assert "after-failover" in s.replica.cmd("KEYS", "*after-failover*")
    finally:
        s.stop()


def test_sentinel_options_refused_together(node_factory):
    for args, why in [(["--redis-sentinel", "127.0.0.1:1"], "redis-master"),
                      (["--redis-sentinel", "127.0.0.1:1", "--redis-master", "m",
                        "--redis-addrs", "127.0.0.1:2"], "not both"),
                      (["--redis-sentinel", "127.0.0.1:1", "--redis-master", "m",
                        "--redis-cluster"], "not both")]:
        n = node_factory(["--store", "redis"] + args, start=False)
        n.start(wait=False)
        assert n.proc.wait(10) != 0
        assert why in n.logs(), n.logs()

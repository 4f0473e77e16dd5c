#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""sluice hand-off benchmark (issue 12): time and bytes to move the state of ~1M keys.

A real etcd and two sluiced nodes on this machine. Node B starts alone and takes N keys (default
1M, token buckets, over the JSON API). Then:

  a. join: node A joins; B hands the keys A now owns (about half) to A
  b. leave: B gets SIGTERM; it leaves etcd and pushes every key it still holds to A

The figures are B's own log lines, "hand-off done keys= bytes= calls= ms=" (bytes: key state
records on the wire, without the gRPC/HTTP/2 framing, which adds 5 + 9 bytes per 256 KiB call).
The reference, measured in the same run, is the time B takes to write the same keys as a snapshot
(B restarts once with --state-dir before A joins: a local walk + encode + write): the hand-off's
cost over a pure walk is the network and the receiver's merge.

Run with SLUICE_BUILD=<build dir> (default: build/). Needs /usr/bin/etcd. Takes ~1 min for 1M.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from state import SLUICED, fill, free_port  # noqa: E402  (bench/state.py)


def get(url, timeout=1):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def wait(pred, secs):
    end = time.time() + secs
    while time.time() < end:
        try:
            if pred():
                return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def peers(addr):
    return json.loads(get("http://%s/v1/HealthCheck" % addr)).get("peer_count")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1000000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="sluice-bench-handoff-")
    cport, pport = free_port(), free_port()
    url = "http://127.0.0.1:%d" % cport
    etcd = subprocess.Popen(["etcd", "--name", "b", "--data-dir", os.path.join(d, "etcd"),
                             "--listen-client-urls", url, "--advertise-client-urls", url,
                             "--listen-peer-urls", "http://127.0.0.1:%d" % pport,
                             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % pport,
                             "--initial-cluster", "b=http://127.0.0.1:%d" % pport],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = []
    try:
        assert wait(lambda: b"true" in get(url + "/health"), 10), "etcd did not start"
        common = ["--workers", "2", "--gc-max-keys", str(2 * a.keys), "--max-batch", "5000",
                  "--discovery", "etcd", "--storage-addrs", url, "--peer-lease-ttl", "2s",
                  "--shutdown-timeout", "120s"]
        ab, aa = "127.0.0.1:%d" % free_port(), "127.0.0.1:%d" % free_port()
        blog = open(os.path.join(d, "b.log"), "w+")
        b = subprocess.Popen([SLUICED, "--listen-addr", ab, "--state-dir", d] + common,
                             stdout=blog, stderr=subprocess.STDOUT)
        procs.append(b)
        assert wait(lambda: peers(ab) == 1, 10)
        t = time.time()
        fill(ab, a.keys)
        print("B took %d keys in %.1f s" % (a.keys, time.time() - t))
        # the reference: B restarts once, writing its keys to --state-dir and loading them back
        b.send_signal(signal.SIGTERM)
        b.wait(180)
        c1 = open(blog.name).read().count("hand-off done")
        b = subprocess.Popen([SLUICED, "--listen-addr", ab, "--state-dir", d] + common,
                             stdout=blog, stderr=subprocess.STDOUT)
        procs.append(b)
        assert wait(lambda: peers(ab) == 1, 60)
        # its first list (itself) walks the store once, sending nothing: wait for that walk
        assert wait(lambda: open(blog.name).read().count("hand-off done") > c1, 60)
        alog = open(os.path.join(d, "a.log"), "w+")
        n0 = open(blog.name).read().count("hand-off done")
        A = subprocess.Popen([SLUICED, "--listen-addr", aa] + common, stdout=alog,
                             stderr=subprocess.STDOUT)
        procs.append(A)
        assert wait(lambda: peers(ab) == 2 and peers(aa) == 2, 10)
        assert wait(lambda: open(blog.name).read().count("hand-off done") > n0, 120)
        b.send_signal(signal.SIGTERM)
        b.wait(180)
        text = open(blog.name).read()
        hs = re.findall(r"hand-off done keys=(\d+) bytes=(\d+) calls=(\d+) failed_keys=(\d+) "
                        r"ms=([\d.]+)", text)
        snap = re.findall(r"snapshot written keys=(\d+) bytes=(\d+) ms=([\d.]+) cpu_ms=([\d.]+)",
                          text)
        moved = 0
        for label, h in (("a. join", hs[-2]), ("b. leave", hs[-1])):
            keys, nbytes, calls, failed, ms = h
            moved += int(keys)
            print("%s: %s keys, %s bytes (%.1f bytes/key), %s calls, %s failed, %s ms "
                  "(%.0f keys/s)" % (label, keys, nbytes, int(nbytes) / max(1, int(keys)), calls,
                                     failed, ms, int(keys) / max(0.001, float(ms) / 1000)))
        print("total moved: %d keys" % moved)
        keys, _, ms, _ = snap[0]
        print("reference: B wrote its %s keys to a snapshot in %s ms (local walk, encode, write); "
              "join + leave / snapshot: %.2f" % (keys, ms, sum(float(h[4]) for h in hs[-2:])
                                                   / max(0.001, float(ms))))
        A.send_signal(signal.SIGTERM)
        A.wait(60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        etcd.terminate()
        etcd.wait(10)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()

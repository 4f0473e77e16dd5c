#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""sluice key-state benchmark (issue 12): the --state-dir snapshot of N keys (default 1M).

  a. snapshot write: N token-bucket keys filled over the JSON API, then SIGTERM; the figures are
     the node's own log line "snapshot written keys= bytes= ms=" (walk + encode + write + fsync)
  b. snapshot load: the node started again on that snapshot; "snapshot loaded keys= ms=" (the
     import into the store, after the whole-file validation) and the time from exec to the first
     LiveCheck answer, against the same time for an empty --state-dir (the reference, same run)

Run with SLUICE_BUILD=<build dir> (default: build/). Prints one line per figure.
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SLUICED = os.path.join(os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build")), "bin",
                       "sluiced")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(state_dir, port, log):
    t0 = time.time()
    p = subprocess.Popen([SLUICED, "--listen-addr", "127.0.0.1:%d" % port, "--workers", "2",
                          "--gc-max-keys", "2000000", "--max-batch", "5000",
                          "--state-dir", state_dir], stdout=log, stderr=subprocess.STDOUT)
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/v1/LiveCheck" % port, timeout=1):
                return p, time.time() - t0
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("sluiced exited")
            time.sleep(0.005)


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(120)


def fill(addr, keys, batch=5000):
    """Give the node at addr ("host:port") `keys` token-bucket keys, one hit each."""
    url = "http://%s/v1/GetRateLimits" % addr
    for base in range(0, keys, batch):
        reqs = [{"name": "b", "unique_key": "k%d" % i, "hits": 1, "limit": 10,
                 "duration": 3600000} for i in range(base, min(keys, base + batch))]
        body = json.dumps({"requests": reqs}).encode()
        req = urllib.request.Request(url, data=body, method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1000000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="sluice-bench-state-")
    empty = tempfile.mkdtemp(prefix="sluice-bench-empty-")
    logpath = os.path.join(d, "sluiced.log")
    with open(logpath, "w+") as log:
        port = free_port()
        p, _ = start(empty, port, log)
        stop(p)
        p, ref = start(empty, port, log)  # the reference: an empty state dir
        stop(p)
        p, _ = start(d, port, log)
        t = time.time()
        fill("127.0.0.1:%d" % port, a.keys)
        print("filled %d keys in %.1f s" % (a.keys, time.time() - t))
        stop(p)
        p, took = start(d, port, log)
        stop(p)
        log.seek(0)
        text = log.read()
    w = re.findall(r"snapshot written keys=(\d+) bytes=(\d+) ms=([\d.]+) cpu_ms=([\d.]+)", text)
    ld = re.findall(r"snapshot loaded keys=(\d+) expired=(\d+) bytes=(\d+) ms=([\d.]+) "
                    r"cpu_ms=([\d.]+)", text)
    keys, nbytes, ms, cpu = w[-2] if len(w) >= 2 else w[-1]
    print("a. snapshot write: %s keys, %s bytes (%.1f bytes/key), %s ms (%s ms CPU)"
          % (keys, nbytes, int(nbytes) / max(1, int(keys)), ms, cpu))
    print("b. snapshot load: %s keys in %s ms (%s ms CPU; validation included); start to ready "
          "%.0f ms vs %.0f ms with an empty state dir (ratio %.2f)"
          % (ld[-1][0], ld[-1][3], ld[-1][4], took * 1000, ref * 1000, took / ref))


if __name__ == "__main__":
    main()

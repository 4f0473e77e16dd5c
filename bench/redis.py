#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Redis store's benchmark (docs/store.md): sluiced --store redis against Redis itself running
the same token-bucket script, in one run, on one redis-server (free loopback port, no
persistence). Not part of make bench's default set: run it as `python3 bench/redis.py`.

  ref   redis-benchmark -P 16 calling EVALSHA of src/redis/lua/tokenbucket.lua directly
        (random keys): the script's own rate, what Redis can give any client
  r1    gRPC GetRateLimits through sluiced --store redis, 1 item per call (h2load -c64 -m10):
        calls/s, and the ratio to ref
  r1000 the same with 1000 items per call: decisions/s, and the ratio to ref
  lat   unloaded latency, one connection, one call at a time (HTTP/1.1 JSON, 1 item):
        --store memory vs --store redis, mean and p99

ref, r1 and r1000 are measured --rounds times, side by side in each round, ref first in one
round and last in the next (a shared machine's speed drifts by a third within minutes, and ref
and sluiced see the same drift only when measured side by side): each round's ratios are its
own, and the ratios reported are their medians. Prints one JSON object; the ratios are what to compare across machines.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as b  # noqa: E402  (free_port, wait_port, h2load, grpc_bodies, Sluiced, percentile)


class RedisServer:
    def __init__(self):
        self.port = b.free_port()
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind",
                                      "127.0.0.1", "--save", "", "--appendonly", "no"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        b.wait_port(self.port)

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port)] + list(args),
                              capture_output=True, text=True, check=True).stdout.strip()

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def reference(r, seconds):
    """redis-benchmark -P 16 calling the token-bucket script with sluiced's arguments."""
    # the script as the store sends it: the shared prelude, then the algorithm (CMakeLists.txt)
    lua = os.path.join(b.ROOT, "src", "store", "lua")
    with open(os.path.join(lua, "common", "prelude.lua")) as f:
        text = f.read()
    with open(os.path.join(lua, "tokenbucket.lua")) as f:
        text += f.read()
    sha = r.cli("SCRIPT", "LOAD", text)
    now = str(int(time.time() * 1000))
    # one argument per key, its numbers space-separated (redis/rscript.h):
    # hits limit duration t now margin reset drain | greg gexp_now gexp_t max_count
    item = " ".join(["1", "1000000000", "60000", now, now, "60000", "0", "0", "0", "0", "0",
                     "9007199254740992"])
    # one key, and "d" (no key twice), as the store sends a one-key call (redis/rscript.h)
    args = ["EVALSHA", sha, "1", "sl:{5:bench:key__rand_int__}", item, "d"]
    # about `seconds` worth at the reference figure (~100k/s), at least 100k calls
    n = max(100000, 100000 * seconds)
    cmd = ["redis-benchmark", "-p", str(r.port), "-P", "16", "-c", "50", "-n", str(n),
           "-r", "100000", "-q"] + args
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    m = re.findall(r"([\d.]+) requests per second", out)
    if not m:  # a script error leaves redis-benchmark without its summary line: say so
        raise RuntimeError("redis-benchmark gave no rate: " + out.replace("\r", "\n")[-500:])
    return {"ops_per_sec": float(m[-1]) if m else 0.0, "cmd": " ".join(cmd[:12]) + " EVALSHA ..."}


def unloaded(port, calls=500):
    """Mean and p99 (us) of one-at-a-time JSON calls on one keep-alive connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    lat = []
    for i in range(calls + 50):
        body = json.dumps({"requests": [{"name": "lat", "unique_key": "k%d" % (i % 100),
                                         "hits": 1, "limit": 1000000000, "duration": 60000}]})
        t0 = time.perf_counter()
        c.request("POST", "/v1/GetRateLimits", body, {"Content-Type": "application/json"})
        resp = c.getresponse()
        resp.read()
        if i >= 50:  # warm-up
            lat.append((time.perf_counter() - t0) * 1e6)
    c.close()
    return {"mean_us": sum(lat) / len(lat), "p99_us": b.percentile(lat, 99)}


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5, help="duration of each load run")
    ap.add_argument("--workers", type=int, default=2, help="sluiced worker count")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of ref, r1 and r1000 (the ratios reported are the medians)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    tmp = tempfile.mkdtemp(prefix="sluice-bench-redis-")
    bodies = b.grpc_bodies(tmp)
    res = {"cpus": os.cpu_count(), "workers": args.workers, "seconds": args.seconds,
           "rounds": []}
    r = RedisServer()
    sl = mem = None
    try:
        sl = b.Sluiced(tmp, args.workers, ["--store", "redis", "--redis-addrs",
                                           "127.0.0.1:%d" % r.port])
        url = "http://127.0.0.1:%d/pb.gubernator.V1/GetRateLimits" % sl.port
        hdr = ["content-type: application/grpc", "te: trailers"]
        for n in range(args.rounds):
            rd = {}

            def run_ref():
                r.cli("FLUSHALL")
                rd["ref"] = reference(r, args.seconds)

            def run_sluiced():
                r.cli("FLUSHALL")
                rd["r1"] = b.h2load(url, args.seconds, bodies[1], hdr, tmp=tmp)
                rd["r1000"] = b.h2load(url, args.seconds, bodies[1000], hdr, conns=4,
                                       streams=2, tmp=tmp)
                rd["r1000"]["decisions_per_sec"] = rd["r1000"]["rps"] * 1000
            # ref first in one round, sluiced first in the next: neither always runs on a
            # machine the other just warmed (or fragmented)
            for run in ((run_ref, run_sluiced) if n % 2 == 0 else (run_sluiced, run_ref)):
                run()
            ref = rd["ref"]["ops_per_sec"]
            rd["ratio_1item_calls_vs_ref"] = rd["r1"]["rps"] / ref if ref else 0
            rd["ratio_1000item_decisions_vs_ref"] = (rd["r1000"]["decisions_per_sec"] / ref
                                                     if ref else 0)
            res["rounds"].append(rd)
        res["lat_redis"] = unloaded(sl.port)
        sl.stop()
        sl = None
        mem = b.Sluiced(tmp, args.workers)
        res["lat_memory"] = unloaded(mem.port)
    finally:
        for s in (sl, mem):
            if s:
                s.stop()
        r.stop()
    for k in ("ratio_1item_calls_vs_ref", "ratio_1000item_decisions_vs_ref"):
        res[k] = median([rd[k] for rd in res["rounds"]])
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

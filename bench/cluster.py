#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""sluice cluster benchmarks. Like bench.py, every figure comes with a reference measured in the
same run on the same machine, and the ratio is what to track (docs/cluster.md, performance.md).

  a. forwarding overhead: gRPC GetRateLimits, 1 item per call, to node A for a key A owns (the
     reference, a local decision) and for a key node B owns (forwarded over PeersV1), BATCHING
     and NO_BATCHING; unloaded (1 connection, 1 stream) p50/p99, and under load (h2load -c64 -m10)
  b. batching under load: the forwarded case of (a) under load, BATCHING vs NO_BATCHING (the
     reference): peer calls/s and decisions per peer call, read from node A's /metrics
  c. 3 nodes vs 1 node (the reference): gRPC calls of 1000 items over 1000 keys, three h2load
     processes in parallel (one per node; all three on the single node), total decisions/s. All nodes and the load generators share this machine's
     CPUs (printed): on 2 cores a cluster cannot beat one node - the figure is the cost of the
     cluster's work (2/3 of the items forwarded), not a scaling claim
  d. GLOBAL accuracy: 3 nodes, one client thread per node sending single GLOBAL hits as fast as it
     can on a limit that does not refill; admitted / limit against the documented bound, for
     two sync intervals

Run with SLUICE_BUILD=<build dir> (default: build/). Needs h2load.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (h2load, grpc bodies, ports: the lead's harness)

GRPC_HDR = ["content-type: application/grpc", "te: trailers"]


class Node:
    def __init__(self, tmp, port, args):
        self.port = port
        self.addr = "127.0.0.1:%d" % port
        self.log = open(os.path.join(tmp, "sluiced-%d.log" % port), "w")
        # its own admin socket: the default path is one per machine
        self.proc = subprocess.Popen([os.path.join(B.BIN, "sluiced"), "--listen-addr", self.addr,
                                      "--admin-socket", os.path.join(tmp, "admin-%d.sock" % port)]
                                     + list(args), stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def cluster(tmp, n, workers, extra=()):
    ports = [B.free_port() for _ in range(n)]
    peers = ",".join("127.0.0.1:%d" % p for p in ports)
    args = ["--workers", str(workers)]
    if n > 1:
        args += ["--discovery", "static", "--peers", peers]
    nodes = [Node(tmp, p, args + list(extra)) for p in ports]
    for nd in nodes:
        B.wait_port(nd.port)
    return nodes


def post_json(addr, path, obj):
    req = urllib.request.Request("http://%s%s" % (addr, path), data=json.dumps(obj).encode(),
                                 method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def owner_of(addr, key):
    r = post_json(addr, "/v1/GetRateLimits", {"requests": [
        {"name": "bench", "unique_key": key, "hits": 0, "limit": 1, "duration": 60000}]})
    return r["responses"][0].get("metadata", {}).get("owner")


def metrics(addr):
    with urllib.request.urlopen("http://%s/metrics" % addr, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(sluice_peer_calls_total\{method="GetPeerRateLimits",result="(ok|error)"\}'
                     r'|sluice_peer_forwarded_items_total) (\S+)', line)
        if m:
            out[m.group(1).split("{")[0] + (":" + m.group(2) if m.group(2) else "")] = float(m.group(3))
    return out


def body_for(tmp, pb, key, behavior, n=1, name="b"):
    """A gRPC-framed GetRateLimitsReq with n items (key, or key0..key{n-1} when n > 1)."""
    import struct
    req = pb.GetRateLimitsReq()
    for i in range(n):
        r = req.requests.add()
        r.name = "bench"
        r.unique_key = key if n == 1 else "%s%d" % (key, i)
        r.hits = 1
        r.limit = 1000000000
        r.duration = 60000
        r.behavior = behavior
    msg = req.SerializeToString()
    p = os.path.join(tmp, "%s-%s-%d-%d.bin" % (name, key, behavior, n))
    with open(p, "wb") as f:
        f.write(struct.pack(">BI", 0, len(msg)) + msg)
    return p


def lat(r):
    return "p50 %6.0f us  p99 %6.0f us" % (r["p50_us"], r["p99_us"])


def bench_a_b(tmp, pb, seconds, results):
    nodes = cluster(tmp, 2, 1)
    a, b = nodes
    try:
        local_key = next(k for k in ("L%d" % i for i in range(1000)) if owner_of(a.addr, k) == a.addr)
        remote_key = next(k for k in ("R%d" % i for i in range(1000)) if owner_of(a.addr, k) == b.addr)
        url = "http://%s/pb.gubernator.V1/GetRateLimits" % a.addr
        bodies = {
            "local": body_for(tmp, pb, local_key, 0),
            "forwarded_batching": body_for(tmp, pb, remote_key, 0),
            "forwarded_no_batching": body_for(tmp, pb, remote_key, 1),
        }
        res = {}
        for label, body in bodies.items():
            idle = B.h2load(url, seconds, body, GRPC_HDR, conns=1, streams=1, tmp=tmp)
            m0 = metrics(a.addr)
            t0 = time.time()
            load = B.h2load(url, seconds, body, GRPC_HDR, conns=64, streams=10, tmp=tmp)
            el = time.time() - t0
            m1 = metrics(a.addr)
            calls = m1.get("sluice_peer_calls_total:ok", 0) - m0.get("sluice_peer_calls_total:ok", 0)
            items = (m1.get("sluice_peer_forwarded_items_total", 0)
                     - m0.get("sluice_peer_forwarded_items_total", 0))
            res[label] = {"idle": idle, "load": load, "peer_calls_per_sec": calls / el,
                          "items_per_peer_call": items / calls if calls else 0}
            print("   %-22s idle %s | load %8.0f calls/s %s | peer calls/s %8.0f, %.1f items/peer call"
                  % (label, lat(idle), load["rps"], lat(load), calls / el,
                     items / calls if calls else 0))
        loc, fb, fnb = res["local"], res["forwarded_batching"], res["forwarded_no_batching"]
        results["a_forwarding"] = {
            "local": loc, "forwarded_batching": fb, "forwarded_no_batching": fnb,
            "idle_p50_overhead_us_no_batching": fnb["idle"]["p50_us"] - loc["idle"]["p50_us"],
            "idle_p50_overhead_us_batching": fb["idle"]["p50_us"] - loc["idle"]["p50_us"],
            "load_throughput_ratio_batching": fb["load"]["rps"] / loc["load"]["rps"]
            if loc["load"]["rps"] else 0,
        }
        print("a. forwarding overhead, idle p50: +%.0f us (NO_BATCHING), +%.0f us (BATCHING, waits "
              "up to --batch-wait); under load forwarded/local throughput %.2f"
              % (results["a_forwarding"]["idle_p50_overhead_us_no_batching"],
                 results["a_forwarding"]["idle_p50_overhead_us_batching"],
                 results["a_forwarding"]["load_throughput_ratio_batching"]))
        results["b_batching"] = {
            "peer_calls_per_sec_batching": fb["peer_calls_per_sec"],
            "peer_calls_per_sec_no_batching": fnb["peer_calls_per_sec"],
            "items_per_call_batching": fb["items_per_peer_call"],
            "items_per_call_no_batching": fnb["items_per_peer_call"],
            "throughput_ratio": fb["load"]["rps"] / fnb["load"]["rps"] if fnb["load"]["rps"] else 0,
        }
        print("b. batching under load: %.1f items/peer call (NO_BATCHING %.1f), peer calls/s %.0f vs "
              "%.0f, client throughput ratio BATCHING/NO_BATCHING %.2f"
              % (fb["items_per_peer_call"], fnb["items_per_peer_call"], fb["peer_calls_per_sec"],
                 fnb["peer_calls_per_sec"], results["b_batching"]["throughput_ratio"]))
    finally:
        for nd in nodes:
            nd.stop()


def bench_c(tmp, pb, seconds, results, workers):
    body = body_for(tmp, pb, "key", 0, n=1000, name="c")

    def run(nodes):
        outs = [None] * len(nodes)

        def go(i):
            outs[i] = B.h2load("http://%s/pb.gubernator.V1/GetRateLimits" % nodes[i].addr, seconds,
                               body, GRPC_HDR, conns=4, streams=4, tmp=tmp)
        th = [threading.Thread(target=go, args=(i,)) for i in range(len(nodes))]
        for t in th:
            t.start()
        for t in th:
            t.join()
        return outs

    one = cluster(tmp, 1, workers)
    try:
        r1 = run(one * 3)  # as many load generators as in the 3-node run
    finally:
        for nd in one:
            nd.stop()
    three = cluster(tmp, 3, 1)
    try:
        r3 = run(three)
    finally:
        for nd in three:
            nd.stop()
    d1 = sum(r["rps"] for r in r1) * 1000
    d3 = sum(r["rps"] for r in r3) * 1000
    results["c_scaling"] = {"cpus": os.cpu_count(), "one_node_workers": workers,
                            "three_nodes_workers_each": 1, "one_node_decisions_per_sec": d1,
                            "three_nodes_decisions_per_sec": d3, "ratio": d3 / d1 if d1 else 0,
                            "one": r1, "three": r3}
    print("c. %d CPUs shared by nodes and load: 1 node (%d workers) %.2fM decisions/s, 3 nodes "
          "(1 worker each) %.2fM decisions/s: ratio %.2f"
          % (os.cpu_count(), workers, d1 / 1e6, d3 / 1e6, d3 / d1 if d1 else 0))


def bench_d(tmp, seconds, results):
    out = {}
    for sync_ms in (20, 100):
        nodes = cluster(tmp, 3, 1, ["--global-sync-wait", "%dms" % sync_ms])
        try:
            limit = 1000
            key = "hot%d" % sync_ms
            owner = owner_of(nodes[0].addr, key)
            admitted = {nd.addr: 0 for nd in nodes}
            sent = {nd.addr: 0 for nd in nodes}
            stop = time.time() + seconds

            def client(nd):
                body = {"requests": [{"name": "bench", "unique_key": key, "hits": 1,
                                      "limit": limit, "duration": 3600000, "behavior": "GLOBAL"}]}
                while time.time() < stop:
                    r = post_json(nd.addr, "/v1/GetRateLimits", body)["responses"][0]
                    sent[nd.addr] += 1
                    if r["status"] == "UNDER_LIMIT":
                        admitted[nd.addr] += 1

            th = [threading.Thread(target=client, args=(nd,)) for nd in nodes]
            for t in th:
                t.start()
            for t in th:
                t.join()
            total = sum(admitted.values())
            rates = {a: sent[a] / seconds for a in sent}
            stale = sync_ms / 1000.0 + 0.005
            bound = limit + sum(min(limit, rates[a] * stale) for a in rates if a != owner)
            out[sync_ms] = {"limit": limit, "admitted": total, "bound": bound,
                            "rates_per_sec": rates, "over_admission": (total - limit) / limit}
            print("d. GLOBAL sync %3d ms: limit %d, admitted %d (%+.1f%%), bound %.0f, %.0f hits/s "
                  "per node" % (sync_ms, limit, total, 100.0 * (total - limit) / limit, bound,
                                sum(rates.values()) / len(rates)))
        finally:
            for nd in nodes:
                nd.stop()
    results["d_global_accuracy"] = out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5, help="duration of each load run")
    ap.add_argument("--only", default="a,c,d", help="comma list: a (includes b), c, d")
    ap.add_argument("--workers", type=int, default=2, help="workers of the single-node reference")
    args = ap.parse_args()
    only = set(args.only.split(","))
    tmp = tempfile.mkdtemp(prefix="sluice-cbench-")
    results = {"cpus": os.cpu_count(), "seconds": args.seconds}
    try:
        pb = None
        if only & {"a", "b", "c"}:
            paths = B.grpc_bodies(tmp)  # also puts the generated modules on sys.path
            assert paths
            import gubernator_pb2 as pb
        if only & {"a", "b"}:
            bench_a_b(tmp, pb, args.seconds, results)
        if "c" in only:
            bench_c(tmp, pb, args.seconds, results, args.workers)
        if "d" in only:
            bench_d(tmp, min(args.seconds, 3), results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(HERE, "out"), exist_ok=True)
    with open(os.path.join(HERE, "out", "cluster.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

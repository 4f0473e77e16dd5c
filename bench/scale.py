#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The cluster's cost per node as it grows: a calculator, and its check against real clusters.

  bench/scale.py                      the table at 10, 100 and 1,000 nodes (docs/cluster.md)
  bench/scale.py --nodes 50 --global-keys 5000 ...   one configuration
  bench/scale.py --check              3- and 5-node clusters on this machine: measured against
                                      the model (GLOBAL calls per node, gossip datagrams per node)

What the model counts, per node and per second, from how the code works (docs/cluster.md):

- GLOBAL, G keys hot on every node (each has hits on every node every sync interval S), W
  workers each with its own sync (cluster/globalsync.c, one per worker):
  * hit batches: each worker sends, every S, one GetPeerRateLimits to each owner of keys it has
    hits for: (N-1)(1-(1-1/N)^G) owners, (N-1)/N * G records in all.
  * broadcasts: an owner broadcasts its changed keys (G/N of them) to every other peer with one
    UpdatePeerGlobals each, a tenth of an interval after peers' hits arrive, so up to
    min(10, N-1) times per S per worker: W * min(10, N-1) * (N-1) calls of G/N records.
    Calls grow as N (up to 10 N per interval); records as G, whatever N.
- Peer connections: one HTTP/2 connection per peer per worker, each way: 2 W (N-1).
- Gossip (SWIM, defaults): a probe each second (a ping out, its ack in; about as many pings in
  from others, acks out): 2 datagrams out per second whatever N; dissemination datagrams only
  while news is pending; a push/pull of the whole membership (N records) with one member every
  30 s, each way: about 2 N * member_bytes / 30 bytes a second, growing as N.
- Hand-off on a join (N -> N + 1), K keys in the cluster: each old node sends K / (N (N + 1))
  keys to the newcomer; the newcomer receives K / (N + 1). Per old node this falls as 1 / N^2.
"""
import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GLOBAL_RECORD_BYTES = 64   # a GLOBAL item or state on the peer wire, name and key short
CALL_OVERHEAD_BYTES = 60   # HEADERS (HPACK, warm), gRPC prefix, DATA and trailers of one call
MEMBER_BYTES = 80          # a member record in a push/pull (name, address, incarnation, meta)
PROBE_BYTES = 34           # a ping or an ack, plaintext (measured: 2 a second make 68 bytes)
KEYSTATE_BYTES = 96        # a key's state in a TransferKeys record


def model(n, workers=2, global_keys=1000, sync_s=0.1, keys=1_000_000):
    """Per node, per second (and the join's one-off hand-off)."""
    others = n - 1
    owners = others * (1 - (1 - 1 / n) ** global_keys) if n > 1 else 0
    hit_calls = workers * owners / sync_s
    hit_records = workers * others / n * global_keys / sync_s if n > 1 else 0
    rounds = min(10, others)
    bcast_calls = workers * rounds * others / sync_s
    bcast_records = workers * rounds * others * (global_keys / n) / sync_s
    glob_calls = hit_calls + bcast_calls
    glob_bytes = (glob_calls * CALL_OVERHEAD_BYTES +
                  (hit_records + bcast_records) * GLOBAL_RECORD_BYTES)
    return {
        "nodes": n,
        "global_calls_out": glob_calls,
        "global_hit_calls_out": hit_calls,
        "global_broadcast_calls_out": bcast_calls,
        "global_records_out": hit_records + bcast_records,
        "global_bytes_out": glob_bytes,
        "peer_connections": 2 * workers * others,
        "gossip_datagrams_out": 2.0 if n > 1 else 0.0,
        "gossip_bytes_out": (2 * PROBE_BYTES + 2 * n * MEMBER_BYTES / 30) if n > 1 else 0.0,
        "handoff_keys_sent_per_old_node": keys / (n * (n + 1)),
        "handoff_keys_received_by_new_node": keys / (n + 1),
    }


def fmt(v):
    if v >= 1e6:
        return "%.1fM" % (v / 1e6)
    if v >= 1e4:
        return "%.0fk" % (v / 1e3)
    return "%.0f" % v if v >= 10 else "%.1f" % v


def table(rows):
    cols = [("nodes", "nodes"), ("GLOBAL calls/s out", "global_calls_out"),
            ("of which broadcasts", "global_broadcast_calls_out"),
            ("GLOBAL records/s out", "global_records_out"),
            ("GLOBAL bytes/s out", "global_bytes_out"),
            ("peer connections", "peer_connections"),
            ("gossip datagrams/s out", "gossip_datagrams_out"),
            ("gossip bytes/s out", "gossip_bytes_out"),
            ("join: keys sent per old node", "handoff_keys_sent_per_old_node")]
    print("| " + " | ".join(c for c, _ in cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(fmt(r[k]) for _, k in cols) + " |")


# ---- the check against real clusters ------------------------------------------------------------

def scrape(addr):
    with urllib.request.urlopen("http://%s/metrics" % addr, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, val = line.rsplit(" ", 1)
        out[name] = float(val)
    return out


def global_check(tmp, n, workers, keys, seconds):
    import cluster as C
    nodes = C.cluster(tmp, n, workers, ["--global-sync-wait", "100ms"])
    stop = threading.Event()

    def load(nd):
        body = {"requests": [{"name": "g", "unique_key": "k%d" % i, "hits": 1,
                              "limit": 1000000000, "duration": 3600000, "behavior": 2}
                             for i in range(keys)]}
        while not stop.is_set():
            try:
                C.post_json(nd.addr, "/v1/GetRateLimits", body)
            except OSError:
                pass
            time.sleep(0.02)
    try:
        threads = [threading.Thread(target=load, args=(nd,)) for nd in nodes]
        for t in threads:
            t.start()
        time.sleep(1.0)
        m0 = [scrape(nd.addr) for nd in nodes]
        t0 = time.time()
        time.sleep(seconds)
        m1 = [scrape(nd.addr) for nd in nodes]
        el = time.time() - t0
        stop.set()
        for t in threads:
            t.join()

        def rate(name):
            return sum(m1[i].get(name, 0) - m0[i].get(name, 0) for i in range(n)) / n / el
        hits = rate('sluice_peer_calls_total{method="GetPeerRateLimits.global",result="ok"}')
        bc = rate('sluice_peer_calls_total{method="UpdatePeerGlobals",result="ok"}')
        return {"hit_calls_per_node": hits, "broadcast_calls_per_node": bc}
    finally:
        for nd in nodes:
            nd.stop()


def gossip_check(tmp, n, seconds):
    import cluster as C
    import bench as B
    ports = [B.free_port() for _ in range(n)]
    gports = [B.free_port() for _ in range(n)]
    nodes = []
    for i in range(n):
        args = ["--workers", "1", "--discovery", "gossip", "--gossip-addr",
                "127.0.0.1:%d" % gports[i], "--gossip-seeds", "127.0.0.1:%d" % gports[0]]
        nodes.append(C.Node(tmp, ports[i], args))
    try:
        for nd in nodes:
            B.wait_port(nd.port)
        time.sleep(3.0)  # joined, news spread
        m0 = [scrape(nd.addr) for nd in nodes]
        t0 = time.time()
        time.sleep(seconds)
        m1 = [scrape(nd.addr) for nd in nodes]
        el = time.time() - t0

        def rate(name):
            return sum(m1[i].get(name, 0) - m0[i].get(name, 0) for i in range(n)) / n / el
        return {"datagrams_out_per_node": rate('sluice_gossip_packets_total{direction="out"}'),
                "bytes_out_per_node": rate('sluice_gossip_bytes_total{direction="out"}')}
    finally:
        for nd in nodes:
            nd.stop()


def check(seconds):
    res = []
    with tempfile.TemporaryDirectory(prefix="sluice-scale-") as tmp:
        for n in (3, 5):
            keys = 50
            g = global_check(tmp, n, 1, keys, seconds)
            m = model(n, workers=1, global_keys=keys)
            gs = gossip_check(tmp, n, seconds)
            row = {"nodes": n, "global_keys": keys,
                   "hit_calls_measured": g["hit_calls_per_node"],
                   "hit_calls_model": m["global_hit_calls_out"],
                   "broadcast_calls_measured": g["broadcast_calls_per_node"],
                   "broadcast_calls_model_at_most": m["global_broadcast_calls_out"],
                   "gossip_datagrams_measured": gs["datagrams_out_per_node"],
                   "gossip_datagrams_model": m["gossip_datagrams_out"],
                   "gossip_bytes_measured": gs["bytes_out_per_node"],
                   "gossip_bytes_model": m["gossip_bytes_out"]}
            res.append(row)
            print("%d nodes, %d GLOBAL keys hot on every node, 1 worker, sync 100 ms, per node:\n"
                  "  GLOBAL hit calls/s   measured %6.1f  model %6.1f\n"
                  "  broadcast calls/s    measured %6.1f  model at most %6.1f\n"
                  "  gossip datagrams/s   measured %6.1f  model %6.1f\n"
                  "  gossip bytes/s       measured %6.0f  model %6.0f"
                  % (n, keys, row["hit_calls_measured"], row["hit_calls_model"],
                     row["broadcast_calls_measured"], row["broadcast_calls_model_at_most"],
                     row["gossip_datagrams_measured"], row["gossip_datagrams_model"],
                     row["gossip_bytes_measured"], row["gossip_bytes_model"]))
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, action="append", help="cluster sizes (repeatable)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--global-keys", type=int, default=1000)
    ap.add_argument("--sync", type=float, default=0.1, help="--global-sync-wait in seconds")
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys held in the cluster")
    ap.add_argument("--check", action="store_true", help="measure 3 and 5 nodes here")
    ap.add_argument("--seconds", type=int, default=8)
    a = ap.parse_args()
    if a.check:
        check(a.seconds)
        return
    rows = [model(n, a.workers, a.global_keys, a.sync, a.keys) for n in (a.nodes or [10, 100, 1000])]
    table(rows)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()

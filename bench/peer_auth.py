#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The cost of peer authentication (issue 25, docs/cluster.md "Peer authentication",
docs/performance.md). Two nodes on this machine; gRPC GetRateLimits of 1 item for a key node B
owns, sent to node A (so every call is forwarded over PeersV1), h2load -c64 -m10, NO_BATCHING
(each client call is one peer call: the worst case for a per-call cost). Four configurations, each
against its reference measured in the same run:

  plain      h2c, no peer credential (the loopback default: the caller's IP; what every node did
             before issue 25)                                                  - the reference
  secret     h2c, --peer-secret-file: every peer call signed (HMAC-SHA256), verified by B
  tls        TLS on both ports, peer TLS without a peer CA (nobody verified)  - the TLS reference
  mtls       TLS on both ports, --peer-tls-ca: peer mTLS, B checks A's certificate names a member
             and A checks B's certificate names B

Printed: calls/s and p50/p99 of each, and the ratios secret/plain, mtls/tls (the cost of the
check itself) and mtls/plain. Rounds alternate the configurations; the best round of each counts.
Also the CPU time both nodes spend per forwarded call (/proc/<pid>/stat over the run, divided by
the calls node A answered), which does not depend on what else shares the machine.
Run with SLUICE_BUILD=<build dir> (default: build/). Needs h2load and openssl.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402
import cluster as C  # noqa: E402  (Node, owner_of, metrics, body_for)

SECRET = b"bench-cluster-secret-0123456789abcdef\n"


def start(tmp, extra, tls):
    ports = [B.free_port(), B.free_port()]
    peers = ",".join("127.0.0.1:%d" % p for p in ports)
    args = ["--workers", "1", "--discovery", "static", "--peers", peers, "--admin-api=false"]
    nodes = [C.Node(tmp, p, args + list(extra)) for p in ports]
    for nd in nodes:
        B.wait_port(nd.port)
    time.sleep(0.3 if not tls else 0.6)
    return nodes


def owner(addr, key, ctx):
    import urllib.request
    req = urllib.request.Request("%s://%s/v1/GetRateLimits" % ("https" if ctx else "http", addr),
                                 data=json.dumps({"requests": [
                                     {"name": "bench", "unique_key": key, "hits": 0, "limit": 1,
                                      "duration": 60000}]}).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
        return json.loads(r.read())["responses"][0].get("metadata", {}).get("owner")


def cpu_of(nodes):
    """User + system CPU seconds both nodes used so far (load-independent, unlike calls/s)."""
    total = 0.0
    for nd in nodes:
        with open("/proc/%d/stat" % nd.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def calls_of(scheme, addr, ctx):
    """GetRateLimits calls node A answered OK so far."""
    import urllib.request
    with urllib.request.urlopen("%s://%s/metrics" % (scheme, addr), timeout=5, context=ctx) as m:
        for line in m.read().decode().splitlines():
            if line.startswith('sluice_calls_total{method="GetRateLimits",transport="grpc",'
                               'code="OK"}'):
                return float(line.split()[-1])
    return 0.0


def run_one(tmp, pb, label, extra, tls, seconds, cafile):
    import ssl
    ctx = None
    if tls:
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.check_hostname = False
    nodes = start(tmp, extra, tls)
    a, b = nodes
    try:
        deadline = time.time() + 10
        while True:
            try:
                key = next(k for k in ("R%d" % i for i in range(1000))
                           if owner(a.addr, k, ctx) == b.addr)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        body = C.body_for(tmp, pb, key, 1)  # NO_BATCHING: one peer call per client call
        url = "%s://%s/pb.gubernator.V1/GetRateLimits" % ("https" if tls else "http", a.addr)
        scheme = "https" if tls else "http"
        calls0, cpu0 = calls_of(scheme, a.addr, ctx), cpu_of(nodes)
        r = B.h2load(url, seconds, body, C.GRPC_HDR, conns=64, streams=10, tmp=tmp)
        calls, cpu = calls_of(scheme, a.addr, ctx) - calls0, cpu_of(nodes) - cpu0
        r["cpu_us_per_call"] = cpu * 1e6 / calls if calls else 0.0
        refused = 0
        import urllib.request
        with urllib.request.urlopen("%s://%s/metrics" % ("https" if tls else "http", b.addr),
                                    timeout=5, context=ctx) as m:
            for line in m.read().decode().splitlines():
                if line.startswith("sluice_peer_refused_total{") or \
                        line.startswith("sluice_peer_denied_total "):
                    refused += float(line.split()[-1])
        r["peer_refused"] = refused
        r["label"] = label
        return r
    finally:
        for nd in nodes:
            nd.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if not shutil.which("h2load"):
        sys.exit("peer_auth.py needs h2load (apt-get install nghttp2-client)")
    tmp = tempfile.mkdtemp(prefix="sluice-bench-peerauth-")
    try:
        B.grpc_bodies(tmp)  # protoc's Python modules into tmp, on sys.path
        import gubernator_pb2 as g
        secret = os.path.join(tmp, "peer-secret")
        with open(secret, "wb") as f:
            f.write(SECRET)
        os.chmod(secret, 0o600)
        cert, key = B.tls_cert(tmp)
        tls = ["--tls-cert", cert, "--tls-key", key]
        configs = [
            ("plain", [], False),
            ("secret", ["--peer-secret-file", secret], False),
            ("tls", tls, False),
            ("mtls", tls + ["--peer-tls-ca", cert], True),
        ]
        best = {}
        for rnd in range(args.rounds):
            for label, extra, _ in configs:
                r = run_one(tmp, g, label, extra, label in ("tls", "mtls"), args.seconds, cert)
                print("  round %d %-6s %8.0f calls/s  p50 %5.0f us  p99 %6.0f us  %5.1f us CPU "
                      "per call (both nodes)  failed %d  refused by B %d"
                      % (rnd + 1, label, r["rps"], r["p50_us"], r["p99_us"],
                         r["cpu_us_per_call"], r["failed"], r["peer_refused"]))
                if label not in best or r["rps"] > best[label]["rps"]:
                    best[label] = dict(r, cpu_best=min(r["cpu_us_per_call"],
                                                       best.get(label, r)["cpu_us_per_call"]))
                else:
                    best[label]["cpu_best"] = min(best[label]["cpu_best"], r["cpu_us_per_call"])
        ratio = {
            "secret_vs_plain": best["secret"]["rps"] / best["plain"]["rps"],
            "mtls_vs_tls": best["mtls"]["rps"] / best["tls"]["rps"],
            "mtls_vs_plain": best["mtls"]["rps"] / best["plain"]["rps"],
        }
        for k in ("plain", "secret", "tls", "mtls"):
            ratio["cpu_" + k] = best[k]["cpu_best"]
        ratio["cpu_secret_vs_plain"] = best["plain"]["cpu_best"] / best["secret"]["cpu_best"]
        ratio["cpu_mtls_vs_tls"] = best["tls"]["cpu_best"] / best["mtls"]["cpu_best"]
        print("peer-forwarded 1-item calls: plain %.0f/s, secret %.0f/s (%.2fx), tls %.0f/s, "
              "mtls %.0f/s (%.2fx of tls, %.2fx of plain); target >= 0.9x"
              % (best["plain"]["rps"], best["secret"]["rps"], ratio["secret_vs_plain"],
                 best["tls"]["rps"], best["mtls"]["rps"], ratio["mtls_vs_tls"],
                 ratio["mtls_vs_plain"]))
        print("CPU per forwarded call, both nodes (load-independent; lowest round): plain %.1f us, "
              "secret %.1f us (%.2fx the calls per CPU second), tls %.1f us, mtls %.1f us (%.2fx)"
              % (ratio["cpu_plain"], ratio["cpu_secret"], ratio["cpu_secret_vs_plain"],
                 ratio["cpu_tls"], ratio["cpu_mtls"], ratio["cpu_mtls_vs_tls"]))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"best": best, "ratio": ratio, "cpus": os.cpu_count()}, f, indent=1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

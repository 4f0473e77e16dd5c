#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""sluice benchmarks (make bench).

Each server benchmark runs sluiced and a reference nginx (`return 200;`) under the same load
generator in the same run, and prints the ratio sluiced/nginx with p50/p99 latencies. Absolute
numbers drift on shared machines; the ratios are what we track (docs/performance.md).

  a. gRPC GetRateLimits, 1 item per call (h2load, application/grpc body) vs nginx h2c return 200
  b. gRPC GetRateLimits, 1000 items per call: decisions/s
  c. HTTP/1.1 POST /v1/GetRateLimits (wrk) vs nginx HTTP/1.1 return 200
  d. Levee POST /attempt across 10,000 resources (wrk + Lua) vs nginx with the same script
  r. Envoy RLS ShouldRateLimit, 1 descriptor per call (h2load, application/grpc body) vs nginx h2c
     return 200 (docs/envoy.md)
  e. the engine in-process: sluice bench engine, 1 and 2 threads over 1,000,000 keys
  t. TLS (one certificate, made here with the openssl command, for both servers):
     t1. gRPC GetRateLimits, 1 item per call, over TLS (ALPN h2) vs nginx h2 over TLS return 200
     t2. TLS handshakes per second: every connection new, one request each (h2load -c N -n N,
         repeated), sluiced vs nginx
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD, "bin")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d never opened" % port)


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))
    return values[k]


class Nginx:
    """nginx `return 200`: HTTP/1.1 on h1, h2c on h2; with tls=(cert, key) instead h2 over TLS on
    `tls` (case t), with the certificate sluiced is given."""

    def __init__(self, tmp, tls=None):
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=tmp)
        self.h1 = free_port()
        self.h2 = free_port()
        self.tls = free_port()
        if tls:
            servers = f"""  server {{
    listen 127.0.0.1:{self.tls} ssl http2;
    ssl_certificate {tls[0]};
    ssl_certificate_key {tls[1]};
    location / {{ return 200 ""; }}
  }}
"""
            ports = [self.tls]
        else:
            servers = f"""  server {{
    listen 127.0.0.1:{self.h1};
    location / {{ return 200 ""; }}
  }}
  server {{
    listen 127.0.0.1:{self.h2} http2;
    location / {{ return 200 ""; }}
  }}
"""
            ports = [self.h1, self.h2]
        conf = os.path.join(self.dir, "nginx.conf")
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(conf, "w") as f:
            f.write(f"""{user}worker_processes 2;
daemon off;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {self.dir}/body;
  proxy_temp_path {self.dir}/proxy;
  fastcgi_temp_path {self.dir}/fastcgi;
  uwsgi_temp_path {self.dir}/uwsgi;
  scgi_temp_path {self.dir}/scgi;
  keepalive_requests 1000000;
  http2_max_requests 1000000;
{servers}}}
""")
        self.proc = subprocess.Popen(["nginx", "-c", conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for p in ports:
            wait_port(p)

    def stop(self):
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def tls_cert(tmp):
    """A self-signed P-256 certificate for 127.0.0.1/localhost: (cert, key) paths."""
    cert, key = os.path.join(tmp, "tls.pem"), os.path.join(tmp, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


def handshakes(url, seconds, conns=200):
    """New TLS connections per second: h2load runs of `conns` clients with one request each
    (so every request opens a connection and does a full handshake), repeated for `seconds`."""
    done = 0
    t0 = time.time()
    while time.time() - t0 < seconds:
        out = subprocess.run(["h2load", "-t1", "-c%d" % conns, "-n%d" % conns, url],
                             capture_output=True, text=True).stdout
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded", out)
        done += int(m.group(4)) if m else 0
    el = time.time() - t0
    return {"handshakes_per_sec": done / el if el else 0.0, "connections": done,
            "cmd": "h2load -t1 -c%d -n%d %s (repeated)" % (conns, conns, url)}


def tls_bench(tmp, seconds, workers, grpc_body):
    cert, key = tls_cert(tmp)
    ng = Nginx(tmp, tls=(cert, key))
    sl = Sluiced(tmp, workers, ["--standalone", "--tls-cert", cert, "--tls-key", key])
    grpc_hdr = ["content-type: application/grpc", "te: trailers"]
    try:
        ref = h2load("https://127.0.0.1:%d/" % ng.tls, seconds, grpc_body, tmp=tmp)
        got = h2load("https://127.0.0.1:%d/pb.gubernator.V1/GetRateLimits" % sl.port, seconds,
                     grpc_body, grpc_hdr, tmp=tmp)
        hs_ref = handshakes("https://127.0.0.1:%d/" % ng.tls, seconds)
        hs_got = handshakes("https://127.0.0.1:%d/v1/LiveCheck" % sl.port, seconds)
    finally:
        sl.stop()
        ng.stop()
    return {"grpc_1item": {"sluiced": got, "nginx_h2_tls": ref,
                           "ratio": got["rps"] / ref["rps"] if ref["rps"] else 0},
            "handshakes": {"sluiced": hs_got, "nginx": hs_ref,
                           "ratio": hs_got["handshakes_per_sec"] / hs_ref["handshakes_per_sec"]
                           if hs_ref["handshakes_per_sec"] else 0}}


class Sluiced:
    def __init__(self, tmp, workers, extra=()):
        self.port = free_port()
        self.log = open(os.path.join(tmp, "sluiced-%d.log" % self.port), "w")
        # its own admin socket: the default path is one per machine
        self.proc = subprocess.Popen([os.path.join(BIN, "sluiced"), "--listen-addr",
                                      "127.0.0.1:%d" % self.port, "--workers", str(workers),
                                      "--admin-socket",
                                      os.path.join(tmp, "admin-%d.sock" % self.port)]
                                     + list(extra), stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def h2load(url, seconds, data=None, headers=(), conns=64, streams=10, tmp="/tmp"):
    log = tempfile.mktemp(prefix="h2load-", dir=tmp)
    cmd = ["h2load", "-t1", "-c%d" % conns, "-m%d" % streams, "-D", str(seconds),
           "--warm-up-time=1", "--log-file=" + log]
    for h in headers:
        cmd += ["-H", h]
    if data:
        cmd += ["-d", data]
    cmd.append(url)
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    m = re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", out)
    rps = float(m.group(1)) if m else 0.0
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed", out)
    failed = int(m.group(5)) if m else -1
    lat = []
    statuses = {}
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3:
                    statuses[parts[1]] = statuses.get(parts[1], 0) + 1
                    lat.append(int(parts[2]))
        os.unlink(log)
    return {"rps": rps, "failed": failed, "p50_us": percentile(lat, 50), "p99_us": percentile(lat, 99),
            "statuses": statuses, "cmd": " ".join(cmd)}


def wrk(url, seconds, script=None, conns=64, threads=2):
    cmd = ["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % seconds, "--latency"]
    if script:
        cmd += ["-s", script]
    cmd.append(url)
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    rps = float(m.group(1)) if m else 0.0

    def lat(p):
        m = re.search(r"^\s+%d%%\s+([\d.]+)(us|ms|s)" % p, out, re.M)
        if not m:
            return float("nan")
        v = float(m.group(1))
        return v * {"us": 1, "ms": 1000, "s": 1000000}[m.group(2)]

    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    non2xx = int(m.group(1)) if m else 0
    return {"rps": rps, "p50_us": lat(50), "p99_us": lat(99), "non2xx": non2xx, "cmd": " ".join(cmd)}


def grpc_bodies(tmp):
    """gRPC-framed GetRateLimitsReq bodies with 1 and 1000 items (Python modules from protoc)."""
    pb_dir = os.path.join(tmp, "pb")
    os.makedirs(pb_dir, exist_ok=True)
    protos = [f for f in os.listdir(os.path.join(ROOT, "proto")) if f.endswith(".proto")]
    subprocess.check_call(["protoc", "--proto_path=" + os.path.join(ROOT, "proto"),
                           "--python_out=" + pb_dir] + protos)
    sys.path.insert(0, pb_dir)
    import gubernator_pb2 as g
    paths = {}
    for n in (1, 1000):
        req = g.GetRateLimitsReq()
        for i in range(n):
            r = req.requests.add()
            r.name = "bench"
            r.unique_key = "key%d" % i
            r.hits = 1
            r.limit = 1000000000
            r.duration = 60000
        msg = req.SerializeToString()
        p = os.path.join(tmp, "grpc%d.bin" % n)
        with open(p, "wb") as f:
            f.write(struct.pack(">BI", 0, len(msg)) + msg)
        paths[n] = p
    return paths


def rls_setup(tmp):
    """An --rls-config-dir with one domain, and gRPC-framed RateLimitRequests (written field by
    field: domain 1, descriptors 2 > entries 1 > key 1, value 2): "1" one descriptor with one
    limit, "2" one descriptor with two (rate_limits:), "3" three descriptors with one limit each
    (the all-or-nothing case, on a node with --rls-all-or-nothing)."""
    d = os.path.join(tmp, "rls")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "bench.yaml"), "w") as f:
        f.write("domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n"
                "      unit: second\n      requests_per_unit: 1000000000\n"
                "  - key: two\n    rate_limits:\n"
                "      - {unit: second, requests_per_unit: 1000000000}\n"
                "      - {unit: hour, requests_per_unit: 4000000000}\n"
                "  - key: api\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n"
                "  - key: route\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n")

    def field(num, b):
        return bytes([num << 3 | 2, len(b)]) + b

    def desc(k, v):
        return field(2, field(1, field(1, k) + field(2, v)))
    bodies = {"1": field(1, b"bench") + desc(b"user", b"key1"),
              "2": field(1, b"bench") + desc(b"two", b"key1"),
              "3": field(1, b"bench") + desc(b"user", b"key1") + desc(b"api", b"a") +
              desc(b"route", b"r")}
    paths = {}
    for name, msg in bodies.items():
        paths[name] = os.path.join(tmp, "rls%s.bin" % name)
        with open(paths[name], "wb") as f:
            f.write(struct.pack(">BI", 0, len(msg)) + msg)
    return d, paths


def engine_bench(seconds):
    """One call per decision (latency-bound: one random DRAM line per key) and batches of 64 (what a
    multi-item call uses: hashes and prefetches ahead), on 1 and 2 threads."""
    res = {}
    for batch in (1, 64):
        for t in (1, 2):
            out = subprocess.run([os.path.join(BIN, "sluice"), "bench", "engine", "--algorithm",
                                  "token_bucket", "--keys", "1000000", "--threads", str(t),
                                  "--seconds", str(seconds), "--batch", str(batch)],
                                 capture_output=True, text=True).stdout
            lines = [l for l in out.strip().splitlines() if l.startswith("{")]
            res[(batch, t)] = json.loads(lines[-1]) if lines else {}

    def scaling(batch):
        one, two = res[(batch, 1)], res[(batch, 2)]
        return (two.get("decisions_per_sec", 0) / one["decisions_per_sec"]) \
            if one.get("decisions_per_sec") else 0

    return {"batch1_threads1": res[(1, 1)], "batch1_threads2": res[(1, 2)],
            "batch64_threads1": res[(64, 1)], "batch64_threads2": res[(64, 2)],
            "scaling_2_over_1": scaling(1), "scaling_2_over_1_batch64": scaling(64)}


def fmt_lat(r):
    return "p50 %7.0f us  p99 %7.0f us" % (r["p50_us"], r["p99_us"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5, help="duration of each load run")
    ap.add_argument("--only", default="a,b,c,d,r,e,t", help="comma list of benchmarks to run")
    ap.add_argument("--workers", type=int, default=2, help="sluiced and nginx worker count")
    args = ap.parse_args()
    only = set(args.only.split(","))
    tmp = tempfile.mkdtemp(prefix="sluice-bench-")
    results = {"cpus": os.cpu_count(), "workers": args.workers, "seconds": args.seconds}
    nginx = sl = None
    try:
        if only & {"a", "b", "c", "d", "r", "r2", "r3"}:
            nginx = Nginx(tmp)
            quota = os.path.join(tmp, "quota.yaml")
            with open(quota, "w") as f:
                f.write("limit:\n  key_default: {rate: 1000000000, burst: 1000}\nfactor:\n  default: 1\n")
            rls_dir, rls_body = rls_setup(tmp)
            sl = Sluiced(tmp, args.workers, ["--standalone", "--quota-file", quota,
                                             "--rls-config-dir", rls_dir])
            base = "http://127.0.0.1:%d" % sl.port
        grpc_hdr = ["content-type: application/grpc", "te: trailers"]
        if only & {"a", "b", "t"}:
            bodies = grpc_bodies(tmp)
        if "a" in only:
            ref = h2load("http://127.0.0.1:%d/" % nginx.h2, args.seconds, bodies[1], tmp=tmp)
            got = h2load(base + "/pb.gubernator.V1/GetRateLimits", args.seconds, bodies[1], grpc_hdr, tmp=tmp)
            results["a_grpc_1item"] = {"sluiced": got, "nginx_h2c": ref,
                                       "ratio": got["rps"] / ref["rps"] if ref["rps"] else 0}
            print("a. gRPC 1 item/call   sluiced %9.0f calls/s (%s)  nginx h2c %9.0f req/s (%s)  ratio %.2f"
                  % (got["rps"], fmt_lat(got), ref["rps"], fmt_lat(ref), results["a_grpc_1item"]["ratio"]))
        if "b" in only:
            got = h2load(base + "/pb.gubernator.V1/GetRateLimits", args.seconds, bodies[1000], grpc_hdr,
                         conns=8, streams=4, tmp=tmp)
            results["b_grpc_1000items"] = {"sluiced": got, "decisions_per_sec": got["rps"] * 1000}
            print("b. gRPC 1000 items/call sluiced %9.0f calls/s = %.2fM decisions/s (%s)"
                  % (got["rps"], got["rps"] * 1000 / 1e6, fmt_lat(got)))
        if "c" in only:
            script = os.path.join(ROOT, "bench", "lua", "post_json.lua")
            ref = wrk("http://127.0.0.1:%d/v1/GetRateLimits" % nginx.h1, args.seconds, script)
            got = wrk(base + "/v1/GetRateLimits", args.seconds, script)
            results["c_http_json"] = {"sluiced": got, "nginx": ref,
                                      "ratio": got["rps"] / ref["rps"] if ref["rps"] else 0}
            print("c. HTTP/1.1 JSON       sluiced %9.0f req/s (%s)  nginx %9.0f req/s (%s)  ratio %.2f"
                  % (got["rps"], fmt_lat(got), ref["rps"], fmt_lat(ref), results["c_http_json"]["ratio"]))
        if "d" in only:
            script = os.path.join(ROOT, "bench", "lua", "attempt.lua")
            ref = wrk("http://127.0.0.1:%d/attempt" % nginx.h1, args.seconds, script)
            got = wrk(base + "/attempt", args.seconds, script)
            results["d_levee_attempt"] = {"sluiced": got, "nginx": ref,
                                          "ratio": got["rps"] / ref["rps"] if ref["rps"] else 0}
            print("d. Levee /attempt      sluiced %9.0f req/s (%s)  nginx %9.0f req/s (%s)  ratio %.2f"
                  % (got["rps"], fmt_lat(got), ref["rps"], fmt_lat(ref), results["d_levee_attempt"]["ratio"]))
        rls_path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
        if only & {"r", "r2", "r3"}:
            ref = h2load("http://127.0.0.1:%d/" % nginx.h2, args.seconds, rls_body["1"], tmp=tmp)
            one = h2load(base + rls_path, args.seconds, rls_body["1"], grpc_hdr, tmp=tmp)
            results["r_rls_1descriptor"] = {"sluiced": one, "nginx_h2c": ref,
                                            "ratio": one["rps"] / ref["rps"] if ref["rps"] else 0}
            print("r. RLS 1 descriptor/call sluiced %9.0f calls/s (%s)  nginx h2c %9.0f req/s (%s)  "
                  "ratio %.2f" % (one["rps"], fmt_lat(one), ref["rps"], fmt_lat(ref),
                                  results["r_rls_1descriptor"]["ratio"]))
        if "r2" in only:
            got = h2load(base + rls_path, args.seconds, rls_body["2"], grpc_hdr, tmp=tmp)
            results["r2_rls_2limits"] = {"sluiced": got, "one_limit": one,
                                         "ratio": got["rps"] / one["rps"] if one["rps"] else 0}
            print("r2. RLS 2 limits on 1 descriptor %9.0f calls/s (%s)  ratio to r %.2f"
                  % (got["rps"], fmt_lat(got), results["r2_rls_2limits"]["ratio"]))
        if "r3" in only:
            aon = Sluiced(tmp, args.workers, ["--standalone", "--rls-config-dir", rls_dir,
                                              "--rls-all-or-nothing"])
            try:
                got = h2load("http://127.0.0.1:%d" % aon.port + rls_path, args.seconds,
                             rls_body["3"], grpc_hdr, tmp=tmp)
            finally:
                aon.stop()
            results["r3_rls_all_or_nothing_3"] = {
                "sluiced": got, "one_limit": one,
                "ratio": got["rps"] / one["rps"] if one["rps"] else 0}
            print("r3. RLS all-or-nothing, 3 descriptors %9.0f calls/s (%s)  ratio to r %.2f"
                  % (got["rps"], fmt_lat(got), results["r3_rls_all_or_nothing_3"]["ratio"]))
        if "t" in only:
            t = tls_bench(tmp, args.seconds, args.workers, bodies[1])
            results["t_tls_grpc_1item"] = t["grpc_1item"]
            results["t_tls_handshakes"] = t["handshakes"]
            g, h = t["grpc_1item"], t["handshakes"]
            print("t1. TLS gRPC 1 item/call sluiced %9.0f calls/s (%s)  nginx h2 TLS %9.0f req/s (%s)  "
                  "ratio %.2f" % (g["sluiced"]["rps"], fmt_lat(g["sluiced"]), g["nginx_h2_tls"]["rps"],
                                  fmt_lat(g["nginx_h2_tls"]), g["ratio"]))
            print("t2. TLS handshakes       sluiced %9.0f conn/s  nginx %9.0f conn/s  ratio %.2f"
                  % (h["sluiced"]["handshakes_per_sec"], h["nginx"]["handshakes_per_sec"], h["ratio"]))
    finally:
        if sl:
            sl.stop()
        if nginx:
            nginx.stop()
    if "e" in only:
        e = engine_bench(min(args.seconds, 3))
        results["e_engine"] = e
        for b in (1, 64):
            t1 = e["batch%d_threads1" % b]
            sc = e["scaling_2_over_1" if b == 1 else "scaling_2_over_1_batch64"]
            print("e. engine token bucket, 1M keys, batch %-2d: 1 thread %.1f ns/decision "
                  "(cpu share %.2f), 2 threads %.2fx, %.1f bytes/key"
                  % (b, t1.get("ns_per_decision", float("nan")), t1.get("cpu_share", 0), sc,
                     t1.get("bytes_per_key", float("nan"))))
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(ROOT, "bench", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "out", "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    summary = {k: v.get("ratio", v.get("decisions_per_sec")) if isinstance(v, dict) else v
               for k, v in results.items() if k != "e_engine"}
    if "e_engine" in results:
        e = results["e_engine"]
        summary["e_engine_ns_batch1"] = e["batch1_threads1"].get("ns_per_decision")
        summary["e_engine_ns_batch64"] = e["batch64_threads1"].get("ns_per_decision")
        summary["e_engine_scaling_2_over_1"] = e["scaling_2_over_1"]
        summary["e_engine_bytes_per_key"] = e["batch1_threads1"].get("bytes_per_key")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Levee's client-proxy against nginx as the reference proxy, in one run (docs/levee.md, "The
client-proxy"). Two limiters (sluiced, 1 worker each, a quota file whose key_default never
rejects and whose factor/default is 2, so that each resource is spread over both) sit behind

  - sluiced --role proxy: HRW group + round robin over persistent h2c connections, and
  - nginx proxy_pass to the same two limiters: an HTTP/1.1 upstream with keepalive (nginx's
    proxy_pass speaks HTTP/1.x only to upstreams; round robin over the two),

both with the same worker count, and the same load generator drives both: wrk over HTTP/1.1,
POST /attempt with a random X-Resource of 10,000 (bench/lua/attempt.lua). The figure to track
is the ratio proxy/nginx (>= 1.0 is the issue's bar). Not a timed test: run by hand, e.g.
    SLUICE_BUILD=build bench/proxy.py --seconds 5
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (free ports, wrk, the nginx conventions)

QUOTAS = """limit:
  key_default: {rate: 100000000, burst: 1000000}
factor:
  default: 2
"""


def sluiced(tmp, name, args):
    log = open(os.path.join(tmp, name + ".log"), "w")
    return subprocess.Popen([os.path.join(B.BIN, "sluiced")] + args, stdout=log,
                            stderr=subprocess.STDOUT), log


def nginx_proxy(tmp, port, upstreams, workers):
    d = tempfile.mkdtemp(prefix="nginx-proxy-", dir=tmp)
    ups = "".join("    server %s;\n" % u for u in upstreams)
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""{user}worker_processes {workers};
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  keepalive_requests 1000000;
  upstream limiters {{
{ups}    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://limiters;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
""")
    return subprocess.Popen(["nginx", "-c", conf], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def stop(p):
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=1, help="proxy workers (both proxies)")
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    script = os.path.join(HERE, "lua", "attempt.lua")
    procs = []
    with tempfile.TemporaryDirectory(prefix="sluice-bench-proxy-") as tmp:
        qf = os.path.join(tmp, "quotas.yaml")
        with open(qf, "w") as f:
            f.write(QUOTAS)
        try:
            lims = []
            for i in range(2):
                port = B.free_port()
                lims.append("127.0.0.1:%d" % port)
                procs.append(sluiced(tmp, "l%d" % i, [
                    "--listen-addr", lims[-1], "--workers", "1", "--standalone",
                    "--quota-file", qf, "--admin-api=false"]))
                B.wait_port(port)
            pport, nport = B.free_port(), B.free_port()
            procs.append(sluiced(tmp, "proxy", [
                "--listen-addr", "127.0.0.1:%d" % pport, "--role", "proxy",
                "--workers", str(args.workers), "--quota-file", qf, "--admin-api=false",
                "--proxy-limiters", "l1=%s,l2=%s" % tuple(lims)]))
            B.wait_port(pport)
            ng = nginx_proxy(tmp, nport, lims, args.workers)
            procs.append((ng, None))
            B.wait_port(nport)
            time.sleep(0.3)
            ref = B.wrk("http://127.0.0.1:%d/attempt" % nport, args.seconds, script, args.conns)
            got = B.wrk("http://127.0.0.1:%d/attempt" % pport, args.seconds, script, args.conns)
            ratio = got["rps"] / ref["rps"] if ref["rps"] else float("nan")
            res = {"proxy": got, "nginx_proxy_pass": ref, "ratio": ratio,
                   "cpus": os.cpu_count(), "workers": args.workers}
            print("client-proxy /attempt  sluiced proxy %9.0f req/s (p50 %.0f us, p99 %.0f us, "
                  "non-2xx %d)  nginx proxy_pass %9.0f req/s (p50 %.0f us, p99 %.0f us, non-2xx %d)"
                  "  ratio %.2f" % (got["rps"], got["p50_us"], got["p99_us"], got["non2xx"],
                                    ref["rps"], ref["p50_us"], ref["p99_us"], ref["non2xx"],
                                    ratio))
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(res, f, indent=2)
        finally:
            for p, log in procs:
                stop(p)
                if log:
                    log.close()


if __name__ == "__main__":
    main()

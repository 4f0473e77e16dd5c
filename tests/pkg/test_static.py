# SPDX-License-Identifier: Apache-2.0
"""The statically linked sluiced (issue 16, item 6): `make static-test`.

Checked on build-static/bin/sluiced (SLUICE_STATIC_BUILD): `file` says "statically linked", `ldd`
says "not a dynamic executable" and the ELF has no program interpreter; it answers a Gubernator
JSON call and a Levee /attempt with a quota file over plain HTTP, and a call over TLS (the
statically linked OpenSSL, with a certificate made by the `openssl` command); it resolves a host
name (static glibc's getaddrinfo: the Graphite bridge pushes to localhost); and it refuses the
options that need libcurl, which the static build leaves out, with the reason.
"""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
import certs as certlib  # noqa: E402

STATIC = os.path.join(os.environ.get("SLUICE_STATIC_BUILD", os.path.join(ROOT, "build-static")),
                      "bin", "sluiced")
QUOTAS = os.path.join(ROOT, "docs", "deploy", "systemd", "quotas.yaml")

pytestmark = pytest.mark.skipif(not os.path.exists(STATIC), reason="run `make static` first")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Static:
    def __init__(self, tmp_path, *args):
        self.port = free_port()
        self.log = open(tmp_path / ("sluiced-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen([STATIC, "--listen-addr", "127.0.0.1:%d" % self.port,
                                      "--admin-socket", str(tmp_path / ("admin-%d.sock" % self.port)),
                                      "--workers", "2"] + list(args),
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def wait_port(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.logs()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("static sluiced did not listen:\n" + self.logs())

    def logs(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def request(conn, method, path, body=b"", headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.read()


def get_rate_limits(conn):
    body = json.dumps({"requests": [{"name": "static", "unique_key": "k", "hits": 1, "limit": 3,
                                     "duration": 60000}]})
    status, data = request(conn, "POST", "/v1/GetRateLimits", body,
                           {"Content-Type": "application/json"})
    assert status == 200, data
    return json.loads(data)["responses"][0]


def test_binary_is_static():
    out = subprocess.run(["file", "-L", STATIC], capture_output=True, text=True).stdout
    assert "statically linked" in out, out
    ldd = subprocess.run(["ldd", STATIC], capture_output=True, text=True)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr, ldd.stdout + ldd.stderr
    if shutil.which("readelf"):
        segs = subprocess.run(["readelf", "-lW", STATIC], capture_output=True, text=True).stdout
        assert "INTERP" not in segs and "DYNAMIC" not in segs
    v = subprocess.run([STATIC, "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.startswith("sluiced "), v.stdout


def test_static_sluiced_answers_calls(tmp_path):
    # a Graphite collector on loopback, named "localhost": static glibc resolves it
    graphite = socket.socket()
    graphite.bind(("127.0.0.1", 0))
    graphite.listen()
    graphite.settimeout(15)
    n = Static(tmp_path, "--quota-file", QUOTAS,
               "--graphite-addr", "localhost:%d" % graphite.getsockname()[1],
               "--graphite-period", "100ms")
    try:
        n.wait_port()
        conn = http.client.HTTPConnection("127.0.0.1", n.port, timeout=5)
        first = get_rate_limits(conn)
        assert first.get("status", "UNDER_LIMIT") == "UNDER_LIMIT" and int(first["remaining"]) == 2
        assert int(get_rate_limits(conn)["remaining"]) == 1
        status, _ = request(conn, "POST", "/attempt", b"", {"X-Resource": "api"})
        assert status == 200
        conn.close()
        pushed, _ = graphite.accept()
        pushed.settimeout(10)
        assert pushed.recv(4096).startswith(b"sluice.")
        pushed.close()
        assert n.stop() == 0, n.logs()
    finally:
        n.stop()
        graphite.close()


@pytest.mark.needs("openssl")
def test_static_sluiced_serves_tls(tmp_path):
    d = str(tmp_path)
    certlib.make_ca(d, "ca", "static test CA")
    certlib.make_leaf(d, "server", "localhost", "ca", "DNS:localhost,IP:127.0.0.1")
    n = Static(tmp_path, "--tls-cert", os.path.join(d, "server.pem"),
               "--tls-key", os.path.join(d, "server.key"))
    try:
        n.wait_port()
        ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.pem"))
        conn = http.client.HTTPSConnection("localhost", n.port, context=ctx, timeout=5)
        assert int(get_rate_limits(conn)["remaining"]) == 2
        conn.close()
        assert n.stop() == 0, n.logs()
    finally:
        n.stop()


@pytest.mark.parametrize("args", [
    ["--storage-addrs", "http://127.0.0.1:1"],
    ["--discovery", "k8s", "--k8s-service", "sluice"],
])
def test_options_needing_libcurl_are_refused(args):
    r = subprocess.run([STATIC, "--listen-addr", "127.0.0.1:0"] + args, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert "needs libcurl, which this statically linked sluiced is built without" in r.stderr, \
        r.stderr

# SPDX-License-Identifier: Apache-2.0
"""--listen-unix: the client API on Unix stream sockets too, for a sidecar on the same host (as
envoyproxy/ratelimit's GRPC_UDS and Gubernator's unix: targets): every dialect over HTTP/1.1 and
h2c, spoken by grpcio (a unix: target), curl --unix-socket (HTTP/1.1 and h2c) and Python's own
HTTP client; the files' mode, their removal at exit, and the refusals."""
import json
import os
import socket
import stat
import subprocess

import grpc

import test_gubernator as gub
from conftest import wait_for

BODY = {"requests": [{"name": "ux", "unique_key": "k", "hits": 1, "limit": 10,
                      "duration": 60000}]}


def curl(path, url, *more):
    out = subprocess.run(["curl", "-s", "--unix-socket", path] + list(more) + [url],
                         capture_output=True, text=True, timeout=10)
    return out.stdout


def test_every_dialect_on_a_unix_socket(node_factory, tmp_path, pb):
    a, b = str(tmp_path / "a.sock"), str(tmp_path / "b.sock")
    quotas = tmp_path / "q.yaml"
    quotas.write_text("limit:\n  key:\n    api:\n      quota: {rate: 0.01, burst: 1}\n")
    n = node_factory(["--workers", "2", "--listen-unix", "%s,%s" % (a, b),
                      "--quota-file", str(quotas)])
    assert stat.S_IMODE(os.stat(a).st_mode) == 0o660
    assert "unix=%s" % a in n.logs()
    # Gubernator over gRPC (grpcio's unix: target: HTTP/2 on the socket)
    g = pb[0]
    ch, get, health, _ = gub.stubs(pb, "unix:" + a)
    rq = g.GetRateLimitsReq(requests=[gub.item(g, name="ux", unique_key="k")])
    assert get(rq, timeout=5).responses[0].remaining == 9
    assert health(g.HealthCheckReq(), timeout=5).status == "healthy"
    ch.close()
    # the JSON gateway over HTTP/1.1 and h2c, on the other socket: the same counter as TCP's
    got = json.loads(curl(b, "http://x/v1/GetRateLimits", "-d", json.dumps(BODY)))
    assert got["responses"][0]["remaining"] == "8"
    got = json.loads(curl(b, "http://x/v1/GetRateLimits", "--http2-prior-knowledge", "-d",
                          json.dumps(BODY)))
    assert got["responses"][0]["remaining"] == "7"
    st, _, data = gub.post_json(n, BODY)
    assert data["responses"][0]["remaining"] == "6"
    # Levee's /attempt, the status in the answer line
    codes = [curl(a, "http://x/attempt", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                  "-H", "X-Resource: api") for _ in range(3)]
    assert codes == ["200", "200", "429"], codes
    # a plain socket client: Python's own HTTP/1.1 over the socket
    s = socket.socket(socket.AF_UNIX)
    s.connect(a)
    s.sendall(b"GET /v1/HealthCheck HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    reply = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        reply += chunk
    s.close()
    assert reply.startswith(b"HTTP/1.1 200"), reply[:80]
    # removed at exit
    n.stop()
    assert not os.path.exists(a) and not os.path.exists(b)


def test_mode_and_refusals(node_factory, tmp_path):
    p = str(tmp_path / "m.sock")
    n = node_factory(["--listen-unix", p, "--listen-unix-mode", "0600"])
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
    # a second sluiced on the same path: it is answering, so the start is refused
    other = node_factory(["--listen-unix", p], start=False)
    other.start(wait=False)
    assert other.proc.wait(10) == 2
    assert "listen-unix" in other.logs(), other.logs()
    n.stop()
    # a file that is not a socket is never removed
    f = tmp_path / "file"
    f.write_text("keep me")
    bad = node_factory(["--listen-unix", str(f)], start=False)
    bad.start(wait=False)
    assert bad.proc.wait(10) == 2
    assert f.read_text() == "keep me"
    for args, why in [(["--listen-unix-mode", "rw"], "octal"),
                      (["--listen-unix", "x" * 120], "1 to 107 bytes")]:
        m = node_factory(args, start=False)
        m.start(wait=False)
        assert m.proc.wait(10) == 2
        assert why in m.logs(), m.logs()
    assert wait_for(lambda: True, 1)

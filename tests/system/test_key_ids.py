# SPDX-License-Identifier: Apache-2.0
"""Issue 25, cluster key ids keyed with --cluster-hash-secret-file: two nodes with one secret agree
on every key's owner (a limit is exact over both) and log the same fingerprint; a too-short secret
is a start-up error that says how to make one; a clustered node without one warns."""
import json
import os
import re
import subprocess
import tempfile

from conftest import SLUICED, free_port, http


def rl(key, hits=1, limit=5):
    return {"name": "kid", "unique_key": key, "hits": hits, "limit": limit, "duration": 60000}


def call(addr, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr, json.dumps({"requests": reqs}))
    assert status == 200, body
    return json.loads(body)["responses"]


def secret_file(data):
    fd, path = tempfile.mkstemp(prefix="sluice-secret-")
    os.write(fd, data)
    os.close(fd)
    os.chmod(path, 0o600)
    return path


def pair(node_factory, extra):
    addrs = ["127.0.0.1:%d" % free_port() for _ in range(2)]
    nodes = []
    for a in addrs:
        n = node_factory(["--workers", "2", "--listen-addr", a, "--discovery", "static",
                          "--peers", ",".join(addrs)] + extra, port=int(a.rsplit(":", 1)[1]),
                         start=False)
        n.addr = a
        nodes.append(n)
    for n in nodes:
        n.start()
    return nodes


def test_keyed_ids_agree_between_nodes(node_factory):
    path = secret_file(b"a cluster secret of more than sixteen bytes\n")
    try:
        nodes = pair(node_factory, ["--cluster-hash-secret-file", path])
        admitted = 0
        for i in range(20):
            for key in ("k1", "k2", "k3"):
                r = call(nodes[i % 2].addr, [rl(key)])[0]
                admitted += r.get("status", "UNDER_LIMIT") == "UNDER_LIMIT"
        assert admitted == 3 * 5  # exactly each limit over both nodes: one owner per key
        prints = [re.findall(r"cluster key ids keyed\"? fingerprint=\"?([0-9a-f]{16})", n.logs())
                  for n in nodes]
        assert prints[0] and prints[0] == prints[1], prints
        assert "cluster key ids are unkeyed" not in nodes[0].logs()
    finally:
        os.unlink(path)


def test_short_secret_refused_and_unkeyed_warned(node_factory):
    path = secret_file(b"short\n")
    try:
        p = subprocess.run([SLUICED, "--listen-addr", "127.0.0.1:%d" % free_port(),
                            "--discovery", "static", "--peers", "127.0.0.1:1",
                            "--cluster-hash-secret-file", path],
                           capture_output=True, text=True, timeout=20)
        assert p.returncode == 2, p
        assert "--cluster-hash-secret-file" in p.stderr and "at least 16" in p.stderr, p.stderr
        assert "/dev/urandom" in p.stderr
    finally:
        os.unlink(path)
    nodes = pair(node_factory, [])
    assert "cluster key ids are unkeyed" in nodes[0].logs()

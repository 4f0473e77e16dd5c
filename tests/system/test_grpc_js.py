# SPDX-License-Identifier: Apache-2.0
"""Node's @grpc/grpc-js against a real sluiced (issue 26: the client that found a gzip channel
failing forever): a gzip channel's GetRateLimits works, a call sent with an expired deadline is not
counted, an unknown method on a stream never half-closed is answered at once, grpc.health.v1
Check and Watch, reflection lists the services. The client is tests/system/js/grpc_client.js,
its one dependency pinned in tests/system/js/package.json and package-lock.json; `npm ci` installs
it on the first run into the build directory (build/js/node_modules: out of the source tree, which
holds only what is ours), from npm's registry, one this machine and CI reach."""
import json
import os
import subprocess

import pytest

import shutil

from conftest import BUILD, ROOT, http, needs

JS = os.path.join(ROOT, "tests", "system", "js")

pytestmark = needs("node", "npm")


@pytest.fixture(scope="module")
def grpc_js():
    deps = os.path.join(BUILD, "js")
    os.makedirs(deps, exist_ok=True)
    fresh = False
    for f in ("package.json", "package-lock.json"):
        src, dst = os.path.join(JS, f), os.path.join(deps, f)
        if not os.path.exists(dst) or open(src, "rb").read() != open(dst, "rb").read():
            shutil.copyfile(src, dst)
            fresh = True
    if fresh or not os.path.isdir(os.path.join(deps, "node_modules", "@grpc", "grpc-js")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=deps,
                       check=True, capture_output=True, timeout=300)
    env = dict(os.environ, NODE_PATH=os.path.join(deps, "node_modules"))

    def run(addr, scenario):
        p = subprocess.run(["node", os.path.join(JS, "grpc_client.js"), addr, scenario],
                           capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        return json.loads(p.stdout)
    return run


@pytest.fixture
def node(node_factory):
    return node_factory(["--standalone", "--workers", "2", "--read-timeout", "20s"])


def test_gzip_channel(node, grpc_js):
    out = grpc_js(node.addr, "gzip")
    assert [c["code"] for c in out["calls"]] == [0, 0, 0], out
    assert [c["remaining"] for c in out["calls"]] == [9, 8, 7]


def expired_seen(node):
    _, _, body = http("GET", "http://%s/metrics" % node.addr)
    for line in body.decode().splitlines():
        if line.startswith("sluice_deadline_expired_total "):
            return float(line.split()[1])
    return 0


def test_expired_deadline_not_counted(node, grpc_js):
    # grpc-js sends an already-expired call on a connected channel, but on a loaded machine it
    # may fail it first; a few tries make sure one reached sluiced, and none was counted
    for _ in range(5):
        out = grpc_js(node.addr, "expired")
        assert out["expired"]["code"] == 4, out  # DEADLINE_EXCEEDED, at the client
        assert out["after"]["remaining"] == 10, out  # the hit of the expired call was not taken
        if expired_seen(node) >= 1:
            break
    assert expired_seen(node) >= 1  # it was sent, and refused


def test_unknown_method_answered_at_once(node, grpc_js):
    out = grpc_js(node.addr, "unknown")
    assert out["code"] == 12 and out["details"] == "unknown service or method", out
    assert out["ms"] < 3000, out  # not at --read-timeout (20 s)
    assert out["after"]["code"] == 0  # and the channel serves on


def test_health(node, grpc_js):
    out = grpc_js(node.addr, "health")
    assert out["overall"] == {"status": 1} and out["v1"] == {"status": 1}, out
    assert out["unknown"] == {"code": 5}  # NOT_FOUND
    assert out["watch"] == 1  # SERVING


def test_reflection(node, grpc_js):
    out = grpc_js(node.addr, "reflection")
    assert "pb.gubernator.V1" in out["services"], out
    assert "envoy.service.ratelimit.v3.RateLimitService" in out["services"]
    assert "grpc.health.v1.Health" in out["services"]

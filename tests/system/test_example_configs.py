# SPDX-License-Identifier: Apache-2.0
"""examples/modes/: a configuration for every mode, each checked by `sluiced --check-config` with
its secrets and certificates made here (mode 600, as the files' headers say), and booted where
its dependencies run in a test: standalone, a static cluster node, gossip with its key ring, etcd,
Redis, Envoy RLS, Levee's three roles, TLS and mutual TLS. A file this test does not know fails
it, so a new mode comes with its check."""
import os
import shutil
import subprocess

import pytest

from conftest import BUILD, ROOT, free_port, wait_for
from test_redis import Redis

MODES = os.path.join(ROOT, "examples", "modes")
SLUICED = os.path.join(BUILD, "bin", "sluiced")
BOOTS = {  # file -> what it needs to start here (None: --check-config only)
    "standalone.yaml": "",
    "static-cluster.yaml": "",
    "etcd.yaml": "etcd",
    "gossip.yaml": "",
    "kubernetes.yaml": None,  # an API server
    "redis.yaml": "redis",
    "redis-cluster.yaml": None,  # six redis-servers: tests/system/test_redis_cluster.py boots one
    "redis-sentinel.yaml": None,  # sentinels: tests/system/test_redis_sentinel.py boots them
    "envoy-rls.yaml": "",
    "levee-limiter.yaml": "",
    "levee-observer.yaml": "",
    "levee-proxy.yaml": "",
    "tls.yaml": "",
    "mtls.yaml": "",
}


def secret(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("modes"))
    for name in os.listdir(MODES):
        src = os.path.join(MODES, name)
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(d, name))
    shutil.copy(os.path.join(ROOT, "examples", "quotas.yaml"), d)
    s = os.path.join(d, "secrets")
    os.mkdir(s, 0o700)
    secret(os.path.join(s, "peer.secret"), "an-example-cluster-secret-0123456789\n")
    secret(os.path.join(s, "cluster.secret"), "an-example-key-id-secret-abcdefghijklmnop\n")
    secret(os.path.join(s, "gossip.keys"), "0123456789abcdef" * 4 + "\n")
    secret(os.path.join(s, "k8s.token"), "an-example-service-account-token\n")
    run = lambda *a: subprocess.run(list(a), cwd=s, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
        "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=example-ca")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-copy_extensions", "copy")
    for k in ("ca.key", "server.key"):
        os.chmod(os.path.join(s, k), 0o600)
    secret(os.path.join(s, "tokens.yaml"),
           "cert:localhost  example  demo_,requests_\nan-example-bearer-token-1234  app  demo_\n")
    return d


def test_every_example_is_known():
    files = sorted(f for f in os.listdir(MODES) if f.endswith(".yaml"))
    assert files == sorted(BOOTS), "examples/modes and this test disagree"


@pytest.mark.parametrize("name", sorted(BOOTS))
def test_example_passes_check_config(workdir, name):
    r = subprocess.run([SLUICED, "--check-config", "--config", name], cwd=workdir,
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, RUNTIME_DIRECTORY=workdir))
    assert r.returncode == 0, (name, r.stdout, r.stderr)


def boot(workdir, name, extra=()):
    port = free_port()
    admin = os.path.join(workdir, "admin-%d.sock" % port)
    args = [SLUICED, "--config", name, "--listen-addr", "127.0.0.1:%d" % port,
            "--admin-socket", admin] + list(extra)
    p = subprocess.Popen(args, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    ok = wait_for(lambda: p.poll() is not None or os.path.exists(admin), 15)
    alive = ok and p.poll() is None
    p.terminate()
    out = p.communicate(timeout=15)[0]
    assert alive, (name, out)
    assert p.returncode == 0, (name, out)
    return out


@pytest.mark.parametrize("name", sorted(n for n, need in BOOTS.items() if need == ""))
def test_example_boots(workdir, name):
    extra = []
    if name in ("gossip.yaml", "levee-limiter.yaml", "levee-observer.yaml"):
        g = "127.0.0.1:%d" % free_port()
        extra = ["--gossip-addr", g, "--gossip-seeds", g]
    if name == "static-cluster.yaml":  # this node's own address in the peer list
        port = free_port()
        out = subprocess.run([SLUICED, "--config", name, "--check-config",
                              "--listen-addr", "127.0.0.1:%d" % port,
                              "--peers", "127.0.0.1:%d,127.0.0.1:5464" % port],
                             cwd=workdir, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        return
    boot(workdir, name, extra)


def test_etcd_example_boots(workdir):
    from test_levee import EtcdProc
    e = EtcdProc().start(timeout=15)
    try:
        boot(workdir, "etcd.yaml", ["--storage-addrs", e.url])
    finally:
        e.close()


def test_redis_example_boots(workdir):
    r = Redis().start()
    try:
        boot(workdir, "redis.yaml", ["--redis-addrs", r.addr])
    finally:
        r.stop()

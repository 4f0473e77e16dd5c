# SPDX-License-Identifier: Apache-2.0
"""--store redis over TLS (--redis-tls): sluiced against a real redis-server that listens on a TLS
port only (--port 0 --tls-port N), with certificates made by certs.py. Decisions are Redis's and
correct (the Gubernator cases reused, not copied); the server's certificate is checked against
--redis-tls-ca and its IP SAN (or --redis-tls-server-name); a wrong CA or name gives per-item
errors (and counts); a Redis that requires client certificates (tls-auth-clients yes) takes
--redis-tls-cert / --redis-tls-key and refuses a node without them."""
import signal
import socket
import ssl
import subprocess

import pytest

import test_gubernator as gub
from certs import make_ca, make_leaf
from conftest import free_port, needs, wait_for
from test_redis import decide, metric

pytestmark = needs("redis-server", "openssl")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("redis-tls"))
    make_ca(d, "ca", "Redis Test CA")
    make_ca(d, "wrongca", "Some Other CA")
    make_leaf(d, "redis", "redis", "ca", "DNS:redis.test,IP:127.0.0.1")
    make_leaf(d, "client", "sluiced", "ca", "DNS:sluiced.test")
    return lambda name: "%s/%s" % (d, name)


class TlsRedis:
    """A redis-server on a TLS port only."""

    def __init__(self, certs, auth_clients=False):
        self.certs = certs
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no",
             "--tls-cert-file", certs("redis.pem"), "--tls-key-file", certs("redis.key"),
             "--tls-ca-cert-file", certs("ca.pem"),
             "--tls-auth-clients", "yes" if auth_clients else "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(lambda: self.cmd("PING") == b"+PONG", 10):
            self.stop()
            raise AssertionError("redis-server did not start on its TLS port")

    def cmd(self, *args):
        """One command over TLS (the client certificate shown); the raw reply's first line."""
        ctx = ssl.create_default_context(cafile=self.certs("ca.pem"))
        ctx.load_cert_chain(self.certs("client.pem"), self.certs("client.key"))
        req = b"*%d\r\n" % len(args) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args)
        try:
            with socket.create_connection(("127.0.0.1", self.port), 0.5) as raw:
                with ctx.wrap_socket(raw, server_hostname="redis.test") as s:
                    s.sendall(req)
                    return s.recv(256).split(b"\r\n")[0]
        except (OSError, ssl.SSLError):
            return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def tls_redis(certs):
    r = TlsRedis(certs)
    yield r
    r.stop()


@pytest.fixture
def mtls_redis(certs):
    r = TlsRedis(certs, auth_clients=True)
    yield r
    r.stop()


def tls_node(node_factory, r, *more):
    return node_factory(["--workers", "2", "--store", "redis", "--redis-addrs", r.addr,
                         "--redis-tls"] + list(more))


def every_worker_up(n, key, times=8):
    """`times` calls in a row decided by Redis, each on a new connection and so on any worker: every
    worker's own Redis connection is up (one worker may still be in its reconnect backoff when
    another has connected, e.g. right after a SIGHUP)."""
    return all(decide(n, key)["error"] == "" for _ in range(times))


def counts_down(n, key):
    """A token bucket of 3 decided by Redis: 2, 1, 0 left, then over the limit."""
    assert wait_for(lambda: every_worker_up(n, key + "-up"), 10)
    got = [decide(n, key) for _ in range(4)]
    assert [(a["error"], a["remaining"]) for a in got[:3]] == [("", "2"), ("", "1"), ("", "0")]
    assert got[3]["status"] == "OVER_LIMIT"


def test_decisions_over_tls(node_factory, tls_redis, certs, pb):
    """The certificate checked against --redis-tls-ca and the address's IP (an IP SAN)."""
    n = tls_node(node_factory, tls_redis, "--redis-tls-ca", certs("ca.pem"))
    counts_down(n, "tls")
    gub.test_batch_of_1000_and_1001(n, pb)
    assert int(tls_redis.cmd("DBSIZE")[1:]) > 1000  # the keys are in Redis
    assert metric(n, "sluice_redis_items_total") >= 1004
    assert metric(n, "sluice_redis_tls_failures_total") == 0
    assert metric(n, "sluice_redis_errors_total") == 0


def test_server_name(node_factory, tls_redis, certs):
    """--redis-tls-server-name: the name the certificate must carry instead of the IP."""
    n = tls_node(node_factory, tls_redis, "--redis-tls-ca", certs("ca.pem"),
                 "--redis-tls-server-name", "redis.test")
    counts_down(n, "named")
    m = tls_node(node_factory, tls_redis, "--redis-tls-ca", certs("ca.pem"),
                 "--redis-tls-server-name", "other.test")
    assert decide(m, "k")["error"] == "redis store unavailable"
    assert wait_for(lambda: (metric(m, "sluice_redis_tls_failures_total") or 0) >= 1, 5)


def test_wrong_ca_gives_per_item_errors(node_factory, tls_redis, certs):
    n = tls_node(node_factory, tls_redis, "--redis-tls-ca", certs("wrongca.pem"),
                 "--redis-timeout", "200ms")
    for key in ("a", "b"):
        assert decide(n, key)["error"] == "redis store unavailable"
    assert wait_for(lambda: (metric(n, "sluice_redis_errors_total") or 0) >= 2, 5)
    assert wait_for(lambda: (metric(n, "sluice_redis_tls_failures_total") or 0) >= 1, 5)
    assert "certificate verify failed" in n.logs()
    assert tls_redis.cmd("DBSIZE") == b":0"


def test_plain_node_on_a_tls_port_fails(node_factory, tls_redis):
    """Without --redis-tls the node speaks plain RESP to a TLS port: per-item errors."""
    n = node_factory(["--workers", "1", "--store", "redis", "--redis-addrs", tls_redis.addr,
                      "--redis-timeout", "200ms"])
    assert decide(n, "p")["error"] == "redis store unavailable"


def test_client_certificate(node_factory, mtls_redis, certs):
    """tls-auth-clients yes: a node showing --redis-tls-cert is served, one without is not."""
    n = tls_node(node_factory, mtls_redis, "--redis-tls-ca", certs("ca.pem"),
                 "--redis-tls-cert", certs("client.pem"), "--redis-tls-key", certs("client.key"))
    counts_down(n, "mtls")
    m = tls_node(node_factory, mtls_redis, "--redis-tls-ca", certs("ca.pem"),
                 "--redis-timeout", "200ms")
    assert decide(m, "anon")["error"] == "redis store unavailable"
    assert wait_for(lambda: (metric(m, "sluice_redis_errors_total") or 0) >= 1, 5)


def test_tls_options_are_checked(node_factory, certs, tls_redis):
    """A certificate without its key, or a CA file that does not load: sluiced does not start."""
    for more, why in ((["--redis-tls-cert", certs("client.pem")], "go together"),
                      (["--redis-tls-ca", certs("nonexistent.pem")], "CA bundle")):
        n = node_factory(["--store", "redis", "--redis-addrs", tls_redis.addr, "--redis-tls"] +
                         more, start=False)
        n.start(wait=False)
        assert n.proc.wait(10) != 0
        assert why in n.logs()


def test_sighup_reads_the_tls_files_again(node_factory, tls_redis, certs, tmp_path):
    """A CA bundle replaced and SIGHUP: the connections made after it verify against the new one."""
    ca = tmp_path / "redis-ca.pem"
    ca.write_bytes(open(certs("wrongca.pem"), "rb").read())
    n = tls_node(node_factory, tls_redis, "--redis-tls-ca", str(ca), "--redis-timeout", "200ms")
    assert decide(n, "r")["error"] == "redis store unavailable"
    ca.write_bytes(open(certs("ca.pem"), "rb").read())
    n.signal(signal.SIGHUP)
    assert wait_for(lambda: "Redis TLS files read again" in n.logs(), 5)
    assert wait_for(lambda: decide(n, "r2")["error"] == "", 10)
    counts_down(n, "after-reload")

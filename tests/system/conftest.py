# SPDX-License-Identifier: Apache-2.0
"""Fixtures for sluice system tests: real sluiced processes on free loopback ports, real gRPC
clients (python3-grpcio) using Python modules generated from proto/ by Debian's protoc."""
import http.client as httpclient
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import urllib.error

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import needs as _needs  # noqa: E402
from needs import (built, have, machine_skip, needs, require, require_built,  # noqa: E402,F401
                   require_module)
from needs import pytest_runtest_setup  # noqa: E402,F401  (reads the `needs` mark)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
SLUICED = os.path.join(BUILD, "bin", "sluiced")
SLUICE = os.path.join(BUILD, "bin", "sluice")
EXAMPLE_MIDDLEWARE = os.path.join(BUILD, "bin", "example_middleware")


_handed = set()  # ports free_port has handed out in this session, on any host


def free_port(host="127.0.0.1"):
    """A free TCP port on host that this session has not handed out before, nor one next to it (a
    test that takes port p and then p + 1 for a neighbour must not meet another test's node)."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            p = s.getsockname()[1]
        if not {p - 1, p, p + 1} & _handed:
            _handed.add(p)
            return p
    raise RuntimeError("no free port on %s away from those handed out" % host)


_pb_dir = None


def pb_modules():
    """Generate and import gubernator_pb2 / peers_pb2 from proto/ (once per session)."""
    global _pb_dir
    if _pb_dir is None:
        _pb_dir = tempfile.mkdtemp(prefix="sluice-pb-")
        protos = [f for f in os.listdir(os.path.join(ROOT, "proto")) if f.endswith(".proto")]
        subprocess.check_call(["protoc", "--proto_path=" + os.path.join(ROOT, "proto"),
                               "--python_out=" + _pb_dir] + protos)
        sys.path.insert(0, _pb_dir)
    import gubernator_pb2  # noqa: E402
    import peers_pb2  # noqa: E402
    return gubernator_pb2, peers_pb2


class Node:
    """One sluiced process. Its admin API is on a Unix socket of its own (self.admin_socket, in a
    temporary directory; call it with self.admin(...)) unless args name one or turn it off, or env
    gives it a $RUNTIME_DIRECTORY (then sluiced's default path there): sluiced's default path is
    one per machine."""

    def __init__(self, args=(), env=None, port=None):
        self.port = port or free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.args = ["--listen-addr", self.addr] + list(args)
        self.admin_socket = None
        if (env or {}).get("RUNTIME_DIRECTORY"):
            self.admin_socket = os.path.join(env["RUNTIME_DIRECTORY"], "admin.sock")
        elif not any(str(a).startswith("--admin-socket") or str(a) == "--admin-api=false"
                     for a in args):
            self.admin_socket = os.path.join(tempfile.mkdtemp(prefix="sluice-adm-"), "admin.sock")
            self.args += ["--admin-socket", self.admin_socket]
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.proc = None
        self.log_path = None

    def start(self, wait=True):
        fd, self.log_path = tempfile.mkstemp(prefix="sluiced-", suffix=".log")
        self.log = os.fdopen(fd, "w+")
        self.proc = subprocess.Popen([SLUICED] + self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=10.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("sluiced exited %s:\n%s" % (self.proc.returncode, self.logs()))
            try:
                with urllib.request.urlopen("http://%s/v1/LiveCheck" % self.addr, timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError("sluiced did not become ready:\n" + self.logs())

    def admin(self, method, path, body=None, headers=None, timeout=5):
        """A call to the node's admin socket: (status, headers dict (lower-case), body bytes); a
        body goes as application/json unless headers say otherwise."""
        h = dict(headers or {})
        if body is not None and not any(k.lower() == "content-type" for k in h):
            h["Content-Type"] = "application/json"
        return unix_http(self.admin_socket, method, path, body, h, timeout)

    def logs(self):
        if not self.log_path:
            return ""
        with open(self.log_path) as f:
            return f.read()

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=10.0):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log_path and os.path.exists(self.log_path):
            os.unlink(self.log_path)
            self.log_path = None
        return self.proc.returncode if self.proc else None

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def node_factory():
    nodes = []

    def make(args=(), env=None, start=True, port=None):
        n = Node(args, env, port)
        nodes.append(n)
        if start:
            n.start()
        return n

    yield make
    for n in nodes:
        n.stop()


@pytest.fixture
def node(node_factory):
    return node_factory(["--workers", "2"])


@pytest.fixture(scope="session")
def pb():
    return pb_modules()


def peers_v1(ch, peers):
    """PeersV1's methods on a gRPC channel, as a Gubernator peer calls them: (GetPeerRateLimits,
    UpdatePeerGlobals, TransferKeys); peers is the peers_pb2 module of pb, and TransferKeys sends
    and returns raw bytes."""
    get_peer = ch.unary_unary("/pb.gubernator.PeersV1/GetPeerRateLimits",
                              request_serializer=peers.GetPeerRateLimitsReq.SerializeToString,
                              response_deserializer=peers.GetPeerRateLimitsResp.FromString)
    update = ch.unary_unary("/pb.gubernator.PeersV1/UpdatePeerGlobals",
                            request_serializer=peers.UpdatePeerGlobalsReq.SerializeToString,
                            response_deserializer=peers.UpdatePeerGlobalsResp.FromString)
    transfer = ch.unary_unary("/pb.gubernator.PeersV1/TransferKeys",
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
    return get_peer, update, transfer


def http(method, url, body=None, headers=None, timeout=5):
    """Plain HTTP/1.1 request; returns (status, headers dict (lower-case), body bytes)."""
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


class _UnixConnection(httpclient.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def unix_http(sock_path, method, path, body=None, headers=None, timeout=5):
    """HTTP/1.1 over a Unix socket (a node's admin socket): (status, headers dict, body bytes)."""
    data = body.encode() if isinstance(body, str) else body
    c = _UnixConnection(sock_path, timeout)
    try:
        c.request(method, path, body=data, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def secret_file(path, text):
    """Write a token, key or secret file as sluiced wants it: the owner's alone (mode 0600)."""
    path = str(path)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    os.chmod(path, 0o600)
    return path


def wait_for(pred, timeout, interval=0.02):
    """Poll pred() until it is true or `timeout` seconds pass; its last answer."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


class Middleware:
    """examples/middleware.c (the fail-open client library in a tiny HTTP service) in front of a
    sluiced at sluice_addr; `extra` are its options (--resource, --timeout, --lease, ...)."""

    def __init__(self, sluice_addr, *extra):
        self.port = free_port()
        self.addr = "127.0.0.1:%d" % self.port
        self.proc = subprocess.Popen([EXAMPLE_MIDDLEWARE, "--listen", self.addr, "--sluice",
                                      sluice_addr] + list(extra),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return True
            except OSError:
                return False

        assert wait_for(up, 5), "example_middleware did not start"

    def get(self, path="/hello"):
        return http("GET", "http://%s%s" % (self.addr, path), timeout=10)

    def raw_get(self, path):
        """The response head as sent, to see every header line."""
        with socket.create_connection(("127.0.0.1", self.port), 5) as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path).encode())
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
        return data

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def pytest_configure(config):
    _needs.register(config)
    # `make test` runs the system tests without the ones marked slow; `make chaos` runs those.
    config.addinivalue_line("markers", "slow: a system test too slow or too load-sensitive for "
                                       "`make test` (runs under `make chaos`)")

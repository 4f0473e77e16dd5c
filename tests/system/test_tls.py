# SPDX-License-Identifier: Apache-2.0
"""TLS on the client port and between peers: gRPC over TLS (ALPN h2) and HTTP/1.1 over TLS,
client certificates required and refused (none, expired, another CA), plaintext sent to the TLS
port, a handshake that stalls, a SIGHUP reload of the certificate while an old connection stays
up, a 3-node cluster whose peers call each other over mutual TLS, and libsluice's client and the
sluice CLI calling a TLS port (right CA, wrong CA, name mismatch, client certificates). The certificates are made by
the `openssl` command in a temporary directory when the module starts."""
import ctypes
import errno
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import grpc
import pytest

from certs import key_csr, make_ca, make_leaf, ossl
from clientlib import CLIENT_LIB, Item as ClientItem, Request as ClientRequest
from conftest import free_port, needs, require_built, secret_file
from etcdproc import EtcdProc

pytestmark = needs("openssl")


@pytest.fixture(scope="module")
def certs():
    """ca, server (localhost, 127.0.0.1), server2 (the same names, a new key: for reload),
    client (CN client), node (CN peer.sluice.test: the peers'), expired (signed by ca, valid in
    2020), stranger (from wrongca)."""
    d = tempfile.mkdtemp(prefix="sluice-tls-")
    for ca, cn in (("ca", "Sluice Test CA"), ("wrongca", "Other CA")):
        make_ca(d, ca, cn)
    for name, cn, ca, san in (("server", "localhost", "ca", "DNS:localhost,IP:127.0.0.1"),
                              ("server2", "reloaded", "ca", "DNS:localhost,IP:127.0.0.1"),
                              ("client", "client", "ca", "DNS:client.test"),
                              ("node", "peer", "ca", "DNS:peer.sluice.test,DNS:localhost,IP:127.0.0.1"),
                              ("stranger", "stranger", "wrongca", "DNS:stranger.test")):
        make_leaf(d, name, cn, ca, san)
    # expired: `openssl ca` takes explicit dates
    key_csr(d, "expired", "expired")
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=c\n[c]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\n"
                "default_md=sha256\npolicy=p\n[p]\ncommonName=supplied\n")
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("1000\n")
    ossl(d, "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
         "-in", "expired.csr", "-out", "expired.pem", "-notext",
         "-startdate", "20200101000000Z", "-enddate", "20200102000000Z")
    yield lambda name: os.path.join(d, name)
    shutil.rmtree(d, ignore_errors=True)


def tls_args(certs, *extra):
    return ["--workers", "2", "--tls-cert", certs("server.pem"), "--tls-key", certs("server.key"),
            "--tls-handshake-timeout", "500ms"] + list(extra)


def ssl_ctx(certs, client=None, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=certs("ca.pem"))
    if client:
        ctx.load_cert_chain(certs(client + ".pem"), certs(client + ".key"))
    ctx.set_alpn_protocols(list(alpn))
    return ctx


def https(node, certs, path, client=None, method="GET", body=None, sock=None):
    """One HTTP/1.1 request over TLS (on sock if given, kept open); (status, body, tls socket)."""
    s = sock
    if s is None:
        raw = socket.create_connection(("127.0.0.1", node.port), timeout=5)
        s = ssl_ctx(certs, client).wrap_socket(raw, server_hostname="localhost")
    data = body.encode() if body else b""
    s.sendall(("%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n"
               "Content-Type: application/json\r\n\r\n" % (method, path, len(data))).encode() + data)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        assert chunk, "connection closed before the answer"
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(rest) < n:
        rest += s.recv(65536)
    return int(head.split()[1]), rest[:n], s


def wait_tls_ready(node, certs, client=None, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if node.proc.poll() is not None:
            raise RuntimeError("sluiced exited:\n" + node.logs())
        try:
            st, _, s = https(node, certs, "/v1/LiveCheck", client)
            s.close()
            if st == 200:
                return node
        except (OSError, ssl.SSLError):
            pass
        time.sleep(0.05)
    raise RuntimeError("sluiced did not become ready:\n" + node.logs())


def start_tls(node_factory, certs, *extra, client=None, port=None):
    n = node_factory(tls_args(certs, *extra), start=False, port=port)
    n.start(wait=False)
    return wait_tls_ready(n, certs, client)


def metric(node, certs, name, client=None):
    _, body, s = https(node, certs, "/metrics", client)
    s.close()
    m = re.search(r"^%s (\d+)" % re.escape(name), body.decode(), re.M)
    return int(m.group(1)) if m else None


def closed_quickly(sock, timeout=3.0):
    """The server closed: recv returns EOF (or a reset) within timeout."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def tls_channel(node, certs, client=None):
    """A gRPC channel over TLS to node (verified against ca.pem), with client's certificate."""
    key = chain = None
    if client:
        key = open(certs(client + ".key"), "rb").read()
        chain = open(certs(client + ".pem"), "rb").read()
    creds = grpc.ssl_channel_credentials(open(certs("ca.pem"), "rb").read(), key, chain)
    return grpc.secure_channel("localhost:%d" % node.port, creds)


def grpc_stubs(pb, node, certs, client=None):
    g, _ = pb
    ch = tls_channel(node, certs, client)
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=g.GetRateLimitsReq.SerializeToString,
                         response_deserializer=g.GetRateLimitsResp.FromString)
    return ch, get


def test_grpc_and_http1_over_tls(node_factory, certs, pb):
    g, _ = pb
    n = start_tls(node_factory, certs)
    ch, get = grpc_stubs(pb, n, certs)
    try:
        for i in range(3):
            r = get(g.GetRateLimitsReq(requests=[g.RateLimitReq(
                name="t", unique_key="k", hits=1, limit=2, duration=60000)]), timeout=5)
            assert r.responses[0].status == (0 if i < 2 else 1)
    finally:
        ch.close()
    body = json.dumps({"requests": [{"name": "t", "unique_key": "k", "hits": 0, "limit": 2,
                                     "duration": 60000}]})
    st, data, s = https(n, certs, "/v1/GetRateLimits", method="POST", body=body)
    assert st == 200 and json.loads(data)["responses"][0]["remaining"] == "0"
    assert s.selected_alpn_protocol() == "http/1.1"
    st, _, _ = https(n, certs, "/v1/LiveCheck", sock=s)  # keep-alive over the same session
    assert st == 200
    s.close()
    assert metric(n, certs, 'sluice_tls_handshakes_total{result="ok"}') >= 2


def test_client_certificates_required(node_factory, certs, pb):
    n = start_tls(node_factory, certs, "--tls-ca", certs("ca.pem"),
                  "--tls-client-auth", "require", client="client")
    for bad in (None, "expired", "stranger"):
        with pytest.raises((ssl.SSLError, OSError, AssertionError)):
            _, _, s = https(n, certs, "/v1/LiveCheck", client=bad)
            s.close()
    assert metric(n, certs, 'sluice_tls_handshakes_total{result="cert"}', "client") >= 3
    # gRPC with and without a client certificate
    g, _ = pb
    req = g.GetRateLimitsReq(requests=[g.RateLimitReq(name="t", unique_key="m", hits=1, limit=5,
                                                      duration=60000)])
    ch, get = grpc_stubs(pb, n, certs, "client")
    try:
        assert get(req, timeout=5).responses[0].remaining == 4
    finally:
        ch.close()
    ch, get = grpc_stubs(pb, n, certs)
    try:
        with pytest.raises(grpc.RpcError) as e:
            get(req, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        ch.close()
    assert n.proc.poll() is None


def test_plaintext_and_stalled_handshakes_close(node_factory, certs):
    n = start_tls(node_factory, certs)
    s = socket.create_connection(("127.0.0.1", n.port), timeout=5)
    s.sendall(b"GET /v1/LiveCheck HTTP/1.1\r\nHost: x\r\n\r\n")
    assert closed_quickly(s)
    s.close()
    # a client that connects and sends nothing, one that sends half a ClientHello
    t0 = time.time()
    idle = socket.create_connection(("127.0.0.1", n.port), timeout=5)
    half = socket.create_connection(("127.0.0.1", n.port), timeout=5)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    assert closed_quickly(idle) and closed_quickly(half)
    assert time.time() - t0 < 3.0  # --tls-handshake-timeout 500ms (checked on a coarse tick)
    idle.close()
    half.close()
    assert metric(n, certs, 'sluice_tls_handshakes_total{result="plaintext"}') == 1
    assert metric(n, certs, 'sluice_tls_events_total{event="timed_out"}') == 2
    st, _, s = https(n, certs, "/v1/LiveCheck")  # still serving
    assert st == 200
    s.close()


def test_sighup_reloads_certificate_old_connection_stays(node_factory, certs):
    d = tempfile.mkdtemp(prefix="sluice-tls-reload-")
    cert, key = os.path.join(d, "cur.pem"), os.path.join(d, "cur.key")
    shutil.copy(certs("server.pem"), cert)
    shutil.copy(certs("server.key"), key)
    n = node_factory(["--workers", "2", "--tls-cert", cert, "--tls-key", key], start=False)
    n.start(wait=False)
    wait_tls_ready(n, certs)
    st, _, old = https(n, certs, "/v1/LiveCheck")
    assert st == 200
    old_der = old.getpeercert(binary_form=True)
    shutil.copy(certs("server2.pem"), cert)
    shutil.copy(certs("server2.key"), key)
    n.signal(signal.SIGHUP)
    deadline = time.time() + 5
    while metric(n, certs, 'sluice_tls_events_total{event="reloaded"}') != 1:
        assert time.time() < deadline, n.logs()
        time.sleep(0.05)
    st, _, new = https(n, certs, "/v1/LiveCheck")
    assert st == 200
    assert new.getpeercert()["subject"] == ((("commonName", "reloaded"),),)
    assert new.getpeercert(binary_form=True) != old_der
    new.close()
    st, _, _ = https(n, certs, "/v1/LiveCheck", sock=old)  # the old session still answers
    assert st == 200
    old.close()
    # a broken file is refused and the current certificate kept
    with open(key, "w") as f:
        f.write("not a key\n")
    n.signal(signal.SIGHUP)
    deadline = time.time() + 5
    while "reload of the TLS certificate failed" not in n.logs():
        assert time.time() < deadline, n.logs()
        time.sleep(0.05)
    st, _, s = https(n, certs, "/v1/LiveCheck")
    assert st == 200
    s.close()
    shutil.rmtree(d, ignore_errors=True)


def test_cluster_over_mutual_tls(node_factory, certs, pb):
    """3 nodes, peers on mTLS (the node certificate, --tls-client-auth require): every node
    answers a key the same, wherever its owner is."""
    g, _ = pb
    ports = [free_port() for _ in range(3)]
    peers = ",".join("127.0.0.1:%d" % p for p in ports)
    nodes = []
    for p in ports:
        n = node_factory(["--workers", "2", "--discovery", "static", "--peers", peers,
                          "--tls-cert", certs("node.pem"), "--tls-key", certs("node.key"),
                          "--tls-ca", certs("ca.pem"), "--peer-tls-ca", certs("ca.pem"),
                          "--tls-client-auth", "require"],
                         start=False, port=p)
        n.start(wait=False)
        nodes.append(n)
    for n in nodes:
        wait_tls_ready(n, certs, "client")
    results = []
    chans = [grpc_stubs(pb, n, certs, "client") for n in nodes]
    try:
        for i in range(9):
            _, get = chans[i % 3]
            r = get(g.GetRateLimitsReq(requests=[g.RateLimitReq(
                name="c", unique_key="k%d" % j, hits=1, limit=3, duration=60000)
                for j in range(8)]), timeout=5)
            results.append(r.responses)
    finally:
        for ch, _ in chans:
            ch.close()
    for resps in results:
        assert all(r.error == "" for r in resps), [r.error for r in resps]
    # each key: 9 hits over 3 nodes against a limit of 3, owned by one node: 3 pass
    for j in range(8):
        col = [resps[j] for resps in results]
        assert sum(1 for r in col if r.status == 0) == 3
        assert len({r.metadata["owner"] for r in col}) == 1
    owners = {resps[j].metadata["owner"] for resps in results for j in range(8)}
    assert len(owners) >= 2  # some keys were forwarded to another node, over TLS
    # SIGHUP: the port's and the peers' certificates read again; forwarding goes on
    for n in nodes:
        n.signal(signal.SIGHUP)
    deadline = time.time() + 5
    while not all("reload: TLS certificate and key read again" in n.logs() for n in nodes):
        assert time.time() < deadline
        time.sleep(0.05)
    chans = [grpc_stubs(pb, n, certs, "client") for n in nodes]
    try:
        for i in range(3):
            _, get = chans[i]
            r = get(g.GetRateLimitsReq(requests=[g.RateLimitReq(
                name="c2", unique_key="k%d" % j, hits=1, limit=3, duration=60000)
                for j in range(8)]), timeout=5)
            assert all(x.error == "" and x.status == 0 for x in r.responses)
    finally:
        for ch, _ in chans:
            ch.close()
    for n in nodes:
        assert n.proc.poll() is None


@needs("etcd")
def test_etcd_over_mutual_tls(node_factory, certs):
    """etcd on https with client certificates required: the node registers itself through
    --storage-tls-ca/--storage-tls-cert/--storage-tls-key."""
    e = EtcdProc(fast_election=True, scheme="https", prefix="sluice-etcd-tls-",
                 extra_args=["--cert-file", certs("server.pem"), "--key-file", certs("server.key"),
                             "--client-cert-auth", "--trusted-ca-file", certs("ca.pem")])
    url = e.url
    ctx = ssl_ctx(certs, "client", alpn=("http/1.1",))
    prefix = "/sluice-tls-%d" % os.getpid()

    def keys():
        import base64
        import urllib.request
        b = (prefix + "/peers/").encode()
        end = b[:-1] + bytes([b[-1] + 1])
        body = json.dumps({"key": base64.b64encode(b).decode(),
                           "range_end": base64.b64encode(end).decode()}).encode()
        req = urllib.request.Request(url + "/v3/kv/range", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=2, context=ctx) as r:
            return [base64.b64decode(kv["key"]).decode()
                    for kv in json.loads(r.read()).get("kvs", [])]

    def ready():
        try:
            keys()
            return True
        except OSError:
            return False

    try:
        e.start(timeout=10, ready=ready)
        n = node_factory(["--workers", "1", "--discovery", "etcd", "--storage-addrs", url,
                          "--storage-prefix", prefix, "--peer-lease-ttl", "1s",
                          "--storage-tls-ca", certs("ca.pem"),
                          "--storage-tls-cert", certs("client.pem"),
                          "--storage-tls-key", certs("client.key")])
        deadline = time.time() + 5
        while keys() != [prefix + "/peers/" + n.addr]:
            assert time.time() < deadline, n.logs()
            time.sleep(0.05)
    finally:
        e.close()


def test_cli_attempt_over_tls(node_factory, certs, tmp_path):
    """`sluice attempt` speaks HTTPS with --tls-ca, and shows a client certificate with
    --tls-cert/--tls-key; without one a port that requires it answers nothing (exit 3). With
    --http2 the same over the client library's TLS."""
    from conftest import SLUICE
    quota = tmp_path / "quota.yaml"
    quota.write_text("limit:\n  key_default: {rate: 100, burst: 100}\nfactor:\n  default: 1\n")
    n = start_tls(node_factory, certs, "--quota-file", str(quota), "--tls-ca", certs("ca.pem"),
                  "--tls-client-auth", "require", client="client")
    base = [SLUICE, "attempt", "--addr", n.addr, "--resource", "api", "--tls-ca", certs("ca.pem")]
    mtls = ["--tls-cert", certs("client.pem"), "--tls-key", certs("client.key")]
    assert subprocess.run(base + mtls, capture_output=True).returncode == 0
    assert subprocess.run(base, capture_output=True).returncode == 3
    # --http2: the same through the client library, TLS with ALPN h2
    assert subprocess.run(base + mtls + ["--http2"], capture_output=True).returncode == 0
    assert subprocess.run(base + ["--http2"], capture_output=True).returncode == 3


def test_peer_with_a_certificate_from_another_ca_is_refused(node_factory, certs, pb):
    """Two nodes; B's certificate is from another CA: A refuses to forward to B (per-item errors
    for B's keys, A's own keys answered), and neither node falls over."""
    g, _ = pb
    pa, pb_ = free_port(), free_port()
    peers = "127.0.0.1:%d,127.0.0.1:%d" % (pa, pb_)
    common = ["--workers", "1", "--discovery", "static", "--peers", peers,
              "--batch-timeout", "300ms"]
    a = node_factory(common + ["--tls-cert", certs("node.pem"), "--tls-key", certs("node.key"),
                               "--tls-ca", certs("ca.pem"), "--peer-tls-ca", certs("ca.pem")],
                     start=False, port=pa)
    b = node_factory(common + ["--tls-cert", certs("stranger.pem"),
                               "--tls-key", certs("stranger.key"),
                               "--tls-ca", certs("wrongca.pem"),
                               "--peer-tls-ca", certs("wrongca.pem")], start=False, port=pb_)
    a.start(wait=False)
    b.start(wait=False)
    wait_tls_ready(a, certs)
    ch, get = grpc_stubs(pb, a, certs)
    try:
        r = get(g.GetRateLimitsReq(requests=[g.RateLimitReq(
            name="x", unique_key="k%d" % j, hits=1, limit=5, duration=60000)
            for j in range(16)]), timeout=5)
    finally:
        ch.close()
    owners = {x.metadata["owner"] for x in r.responses if x.error == ""}
    failed = [x for x in r.responses if x.error != ""]
    assert owners == {a.addr}      # only A's own keys were answered
    assert failed                  # B's keys could not be forwarded
    assert a.proc.poll() is None and b.proc.poll() is None


def test_client_identity_from_the_certificate(node_factory, certs, pb, tmp_path):
    """--client-tokens-file with a "cert:<name>" line: a client whose verified certificate has
    that name (client.test) is that identity, without a bearer token; a certificate the file
    does not name, and no certificate, fall back to bearer tokens (401 / UNAUTHENTICATED)."""
    g, _ = pb
    tokens = tmp_path / "tokens"
    secret_file(tokens, "cert:client.test  viacert  cert_,shared_\n"
                "tok-alpha-0123456789abcdef  alpha  alpha_\n")
    node = start_tls(node_factory, certs, "--standalone", "--tls-ca", certs("ca.pem"),
                     "--tls-client-auth", "request", "--client-tokens-file", str(tokens))

    def call(client, names, token=None):
        ch, get = grpc_stubs(pb, node, certs, client)
        md = [("authorization", "Bearer " + token)] if token else None
        try:
            r = get(g.GetRateLimitsReq(requests=[g.RateLimitReq(
                name=n, unique_key="k", hits=1, limit=10, duration=60000) for n in names]),
                timeout=5, metadata=md)
            return grpc.StatusCode.OK, r
        except grpc.RpcError as e:
            return e.code(), None
        finally:
            ch.close()

    code, r = call("client", ["cert_a", "shared_b"])
    assert code == grpc.StatusCode.OK and [x.remaining for x in r.responses] == [9, 9]
    assert call("client", ["cert_a", "alpha_a"])[0] == grpc.StatusCode.PERMISSION_DENIED
    # the certificate's identity wins over a token sent with it
    assert call("client", ["alpha_a"], "tok-alpha-0123456789abcdef")[0] == \
        grpc.StatusCode.PERMISSION_DENIED
    # no certificate: tokens as before
    assert call(None, ["cert_a"])[0] == grpc.StatusCode.UNAUTHENTICATED
    assert call(None, ["alpha_a"], "tok-alpha-0123456789abcdef")[0] == grpc.StatusCode.OK
    assert call(None, ["cert_a"], "tok-alpha-0123456789abcdef")[0] == \
        grpc.StatusCode.PERMISSION_DENIED
    # a valid certificate the file does not name (node: peer.sluice.test) is no identity
    assert call("node", ["cert_a"])[0] == grpc.StatusCode.UNAUTHENTICATED
    # a bearer token that spells the certificate line is no identity either
    assert call(None, ["cert_a"], "cert:client.test")[0] == grpc.StatusCode.UNAUTHENTICATED
    # the JSON gateway over HTTPS: 200 / 403 / 401
    body = json.dumps({"requests": [{"name": "cert_j", "unique_key": "k", "hits": 1,
                                     "limit": 10, "duration": 60000}]})
    for client, want in (("client", 200), (None, 401), ("node", 401)):
        st, _, s = https(node, certs, "/v1/GetRateLimits", client, method="POST", body=body)
        s.close()
        assert st == want, (client, st)
    out = json.dumps({"requests": [{"name": "x_j", "unique_key": "k", "hits": 1, "limit": 10,
                                    "duration": 60000}]})
    st, _, s = https(node, certs, "/v1/GetRateLimits", "client", method="POST", body=out)
    s.close()
    assert st == 403



# ---------------------------------------------------------------- the client library over TLS
# libsluice-client.so through ctypes (as test_lease_renew.py): only plain structs cross.


class ClientOptions(ctypes.Structure):
    _fields_ = [("timeout_ms", ctypes.c_int), ("connect_timeout_ms", ctypes.c_int),
                ("reconnect_backoff_ms", ctypes.c_int), ("fail_closed", ctypes.c_bool),
                ("max_sync_conns", ctypes.c_uint), ("max_async_pending", ctypes.c_uint),
                ("max_response_bytes", ctypes.c_size_t), ("breaker_timeouts", ctypes.c_int),
                ("breaker_cooldown_ms", ctypes.c_int), ("tls", ctypes.c_bool),
                ("tls_ca_file", ctypes.c_char_p), ("tls_cert_file", ctypes.c_char_p),
                ("tls_key_file", ctypes.c_char_p), ("tls_server_name", ctypes.c_char_p)]


class ClientResponse(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int32), ("limit", ctypes.c_int64),
                ("remaining", ctypes.c_int64), ("reset_time", ctypes.c_int64),
                ("retry_after", ctypes.c_int64), ("error", ctypes.c_char_p),
                ("lease_id", ctypes.c_uint64), ("delay_ms", ctypes.c_int64)]


class ClientResult(ctypes.Structure):
    _fields_ = [("resp", ClientResponse), ("metadata", ctypes.c_void_p),
                ("metadata_count", ctypes.c_size_t)]


class CheckReply(ctypes.Structure):
    _fields_ = [("err", ctypes.c_int), ("failed_open", ctypes.c_bool), ("shed", ctypes.c_bool),
                ("http_status", ctypes.c_int), ("grpc_status", ctypes.c_int),
                ("grpc_message", ctypes.c_char_p), ("count", ctypes.c_size_t),
                ("items", ctypes.POINTER(ClientResult)), ("priv_", ctypes.c_void_p)]


class ClientStats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "calls", "failed_open", "failed_closed", "timeouts", "transport_errors", "connects",
        "connect_failures", "async_pending", "async_rejected", "breaker_trips",
        "breaker_rejected", "breaker_probes", "shed")] + [
        ("breaker_open", ctypes.c_bool), ("tls_failures", ctypes.c_uint64)]


@pytest.fixture
def clientlib():
    require_built(CLIENT_LIB)
    L = ctypes.CDLL(CLIENT_LIB)
    vp = ctypes.c_void_p
    L.sl_client_options_default.argtypes = [ctypes.POINTER(ClientOptions)]
    L.sl_client_new.argtypes = [ctypes.c_char_p, ctypes.POINTER(ClientOptions), ctypes.POINTER(vp)]
    L.sl_client_free.argtypes = [vp]
    L.sl_client_check.argtypes = [vp, ctypes.POINTER(ClientItem), ctypes.c_size_t, ctypes.c_int,
                                  ctypes.POINTER(CheckReply)]
    L.sl_client_check_reply_free.argtypes = [ctypes.POINTER(CheckReply)]
    L.sl_client_stats_get.argtypes = [vp, ctypes.POINTER(ClientStats)]
    L.sl_client_tls_error.argtypes = [vp]
    L.sl_client_tls_error.restype = ctypes.c_char_p
    return L


class TlsClient:
    """One sl_client with TLS options; check() asks for one item and returns what came back."""

    def __init__(self, L, addr, ca=None, cert=None, key=None, server_name=None,
                 fail_closed=False):
        self.L = L
        o = ClientOptions()
        L.sl_client_options_default(ctypes.byref(o))
        o.timeout_ms = o.connect_timeout_ms = 3000
        o.reconnect_backoff_ms = 0
        o.fail_closed = fail_closed
        o.tls = True
        o.tls_ca_file = ca.encode() if ca else None
        o.tls_cert_file = cert.encode() if cert else None
        o.tls_key_file = key.encode() if key else None
        o.tls_server_name = server_name.encode() if server_name else None
        self.c = ctypes.c_void_p()
        rc = L.sl_client_new(addr.encode(), ctypes.byref(o), ctypes.byref(self.c))
        assert rc == 0, rc

    def check(self, key="k"):
        req = ClientRequest(name=b"tls", name_len=3, unique_key=key.encode(),
                            unique_key_len=len(key), hits=1, limit=10, duration=60000)
        item = ClientItem(req=req)
        r = CheckReply()
        rc = self.L.sl_client_check(self.c, ctypes.byref(item), 1, 3000, ctypes.byref(r))
        out = {"rc": rc, "err": r.err, "failed_open": r.failed_open,
               "status": r.items[0].resp.status, "remaining": r.items[0].resp.remaining}
        self.L.sl_client_check_reply_free(ctypes.byref(r))
        return out

    def stats(self):
        st = ClientStats()
        self.L.sl_client_stats_get(self.c, ctypes.byref(st))
        return st

    def tls_error(self):
        return self.L.sl_client_tls_error(self.c).decode()

    def close(self):
        self.L.sl_client_free(self.c)


def test_client_library_over_tls(node_factory, certs, clientlib):
    """The client library calls a TLS sluiced: with the right CA it gets real answers (the name
    checked is the address's IP, or --tls-server-name); with another CA, or a name the
    certificate does not carry, the handshake fails, the call fails open (fail-closed: denied
    with the error) and the TLS failure is counted with OpenSSL's reason."""
    n = start_tls(node_factory, certs)
    good = [TlsClient(clientlib, n.addr, ca=certs("ca.pem")),
            TlsClient(clientlib, n.addr, ca=certs("ca.pem"), server_name="localhost"),
            TlsClient(clientlib, "https://" + n.addr, ca=certs("ca.pem"))]
    try:
        for i, c in enumerate(good):
            r = c.check()
            assert r == {"rc": 0, "err": 0, "failed_open": False, "status": 0,
                         "remaining": 9 - i}, r
            st = c.stats()
            assert (st.connects, st.tls_failures, st.failed_open) == (1, 0, 0)
    finally:
        for c in good:
            c.close()

    bad = [TlsClient(clientlib, n.addr, ca=certs("wrongca.pem")),
           TlsClient(clientlib, n.addr, ca=certs("ca.pem"), server_name="elsewhere.test")]
    try:
        for c in bad:
            for _ in range(2):
                r = c.check()
                assert r["rc"] == 0 and r["failed_open"] and r["status"] == 0, r
                assert r["err"] == -errno.EKEYREJECTED, r
            st = c.stats()
            assert (st.failed_open, st.tls_failures, st.connects) == (2, 2, 0)
            assert st.transport_errors == 2 and st.shed == 0
            assert "certificate verify failed" in c.tls_error(), c.tls_error()
    finally:
        for c in bad:
            c.close()

    closed = TlsClient(clientlib, n.addr, ca=certs("wrongca.pem"), fail_closed=True)
    try:
        r = closed.check()
        assert r["rc"] == -errno.EKEYREJECTED and not r["failed_open"] and r["status"] == 1, r
        assert closed.stats().failed_closed == 1
    finally:
        closed.close()
    assert n.proc.poll() is None


def test_client_library_mutual_tls(node_factory, certs, clientlib):
    """A port that requires client certificates: the library's call with the client
    certificate is answered; without one, or with an expired one, it fails open and counts."""
    n = start_tls(node_factory, certs, "--tls-ca", certs("ca.pem"), "--tls-client-auth", "require",
                  client="client")
    with_cert = TlsClient(clientlib, n.addr, ca=certs("ca.pem"), cert=certs("client.pem"),
                          key=certs("client.key"))
    without = TlsClient(clientlib, n.addr, ca=certs("ca.pem"))
    expired = TlsClient(clientlib, n.addr, ca=certs("ca.pem"), cert=certs("expired.pem"),
                        key=certs("expired.key"))
    try:
        r = with_cert.check()
        assert r == {"rc": 0, "err": 0, "failed_open": False, "status": 0, "remaining": 9}, r
        for c in (without, expired):
            r = c.check()
            assert r["rc"] == 0 and r["failed_open"] and r["err"] == -errno.EKEYREJECTED, r
            st = c.stats()
            assert st.failed_open == 1 and st.tls_failures == 1, (st.failed_open, st.tls_failures)
            assert c.tls_error()
        # the refusals changed nothing: the next real answer counts one more hit only
        assert with_cert.check()["remaining"] == 8
    finally:
        for c in (with_cert, without, expired):
            c.close()
    # the server saw both refusals as certificate failures
    assert metric(n, certs, 'sluice_tls_handshakes_total{result="cert"}', "client") >= 2


def test_cli_check_and_health_over_tls(node_factory, certs):
    """`sluice check` and `sluice health` over TLS with --tls-ca (and --tls-server-name), mTLS
    with --tls-cert/--tls-key; a wrong CA is exit 3 with the TLS reason, never an answer."""
    from conftest import SLUICE
    n = start_tls(node_factory, certs, "--tls-ca", certs("ca.pem"), "--tls-client-auth", "require",
                  client="client")
    mtls = ["--tls-ca", certs("ca.pem"), "--tls-cert", certs("client.pem"),
            "--tls-key", certs("client.key")]
    check = [SLUICE, "check", "--addr", n.addr, "--name", "cli", "--key", "k", "--limit", "5",
             "--duration", "1m", "--json"]
    r = subprocess.run(check + mtls, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["remaining"] == 4
    r = subprocess.run(check + mtls + ["--tls-server-name", "localhost"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["remaining"] == 3, r.stderr
    r = subprocess.run([SLUICE, "health", "--addr", n.addr] + mtls, capture_output=True, text=True)
    assert r.returncode == 0 and "healthy" in r.stdout, r.stdout + r.stderr

    r = subprocess.run(check[:-1] + ["--tls-ca", certs("wrongca.pem"), "--tls-cert",
                                     certs("client.pem"), "--tls-key", certs("client.key")],
                       capture_output=True, text=True)
    assert r.returncode == 3 and "TLS handshake failed" in r.stderr, r.stderr
    r = subprocess.run(check[:-1] + ["--tls-ca", certs("ca.pem")], capture_output=True, text=True)
    assert r.returncode == 3 and "TLS handshake failed" in r.stderr, r.stderr
    r = subprocess.run(check + mtls + ["--tls-server-name", "elsewhere.test"],
                       capture_output=True, text=True)
    assert r.returncode == 3, r.stdout
    # a missing file is a usage error, before any connection
    r = subprocess.run(check + ["--tls-ca", certs("nope.pem")], capture_output=True, text=True)
    assert r.returncode == 2 and "TLS" in r.stderr, r.stderr


def test_admin_listener_off_loopback_speaks_tls(node_factory, certs, tmp_path):
    """An admin listener not on loopback (here 0.0.0.0) speaks TLS with the client port's
    certificate, and wants the token; the CLI reaches it with --admin-ca."""
    tok = secret_file(tmp_path / "admin.token", "tls-admin-token-0123456789abcdef\n")
    port = free_port()
    n = start_tls(node_factory, certs, "--admin-addr", "0.0.0.0:%d" % port,
                  "--admin-token-file", tok)
    assert 'msg="admin listening" addr=0.0.0.0:%d port=%d token=yes tls=yes' % (port, port) \
        in n.logs()

    from conftest import SLUICE
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    s = ssl_ctx(certs).wrap_socket(raw, server_hostname="localhost")
    s.sendall(b"GET /v1/admin/killswitch HTTP/1.1\r\nHost: localhost:%d\r\n"
              b"Authorization: Bearer tls-admin-token-0123456789abcdef\r\n\r\n" % port)
    assert s.recv(64).startswith(b"HTTP/1.1 200"), "the TLS admin listener did not answer"
    s.close()
    # plaintext: no answer (the TLS layer closes the connection)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as p:
        p.sendall(b"GET /v1/admin/killswitch HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert closed_quickly(p)
    out = subprocess.run([SLUICE, "killswitch", "on", "api", "--admin-addr", "localhost:%d" % port,
                          "--admin-ca", certs("ca.pem"), "--admin-token-file", tok],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    out = subprocess.run([SLUICE, "top", "--admin-addr", "localhost:%d" % port, "--json",
                          "--admin-ca", certs("ca.pem"), "--admin-token-file", tok],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0 and '"limits"' in out.stdout, out.stderr

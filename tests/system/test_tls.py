"""TLS on the client port and between peers: gRPC over TLS (ALPN h2) and HTTP/1.1 over TLS,
client certificates required and refused (none, expired, another CA), plaintext sent to the TLS
port, a handshake that stalls, a SIGHUP reload of the certificate while an old connection stays
up, and a 3-node cluster whose peers call each other over mutual TLS. The certificates are made by
the `openssl` command in a temporary directory when the module starts."""
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
from conftest import free_port, have
from etcdproc import EtcdProc

pytestmark = pytest.mark.skipif(not have("openssl"), reason="needs the openssl command")


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
                          "--tls-ca", certs("ca.pem"), "--tls-client-auth", "require"],
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


@pytest.mark.skipif(not have("etcd"), reason="etcd not installed")
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
    --tls-cert/--tls-key; without one a port that requires it answers nothing (exit 3)."""
    from conftest import SLUICE
    quota = tmp_path / "quota.yaml"
    quota.write_text("limit:\n  key_default: {rate: 100, burst: 100}\nfactor:\n  default: 1\n")
    n = start_tls(node_factory, certs, "--quota-file", str(quota), "--tls-ca", certs("ca.pem"),
                  "--tls-client-auth", "require", client="client")
    base = [SLUICE, "attempt", "--addr", n.addr, "--resource", "api", "--tls-ca", certs("ca.pem")]
    mtls = ["--tls-cert", certs("client.pem"), "--tls-key", certs("client.key")]
    assert subprocess.run(base + mtls, capture_output=True).returncode == 0
    assert subprocess.run(base, capture_output=True).returncode == 3
    assert subprocess.run(base + mtls + ["--http2"], capture_output=True).returncode == 2


def test_peer_with_a_certificate_from_another_ca_is_refused(node_factory, certs, pb):
    """Two nodes; B's certificate is from another CA: A refuses to forward to B (per-item errors
    for B's keys, A's own keys answered), and neither node falls over."""
    g, _ = pb
    pa, pb_ = free_port(), free_port()
    peers = "127.0.0.1:%d,127.0.0.1:%d" % (pa, pb_)
    common = ["--workers", "1", "--discovery", "static", "--peers", peers,
              "--batch-timeout", "300ms"]
    a = node_factory(common + ["--tls-cert", certs("node.pem"), "--tls-key", certs("node.key"),
                               "--tls-ca", certs("ca.pem")], start=False, port=pa)
    b = node_factory(common + ["--tls-cert", certs("stranger.pem"),
                               "--tls-key", certs("stranger.key"),
                               "--tls-ca", certs("wrongca.pem")], start=False, port=pb_)
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
    tokens.write_text("cert:client.test  viacert  cert_,shared_\n"
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

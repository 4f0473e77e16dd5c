# SPDX-License-Identifier: Apache-2.0
"""Issue 25, item 1: peers need a credential; an address is not one (docs/cluster.md, "Peer
authentication"). Against real sluiced processes on one host:

- a same-host client (grpcio, the published gubernator peers proto) calling every PeersV1 method
  on a 2-node cluster with a cluster secret: refused (UNAUTHENTICATED), counted by reason, no
  state changed. The issue's measured attacks: GetPeerRateLimits on the non-owner admitted 5 of 8
  on a limit of 5, and after 5 UpdatePeerGlobals a GLOBAL key with limit 5 admitted 100 of 100.
  The cluster itself still forwards and syncs with exact counts;
- the signature as docs/cluster.md describes it, made here in Python: a good one is taken, a wrong
  secret, an old time or a sender outside the peer list are refused;
- a signed TransferKeys whose key state expires far in the future, and an UpdatePeerGlobals over
  --peer-max-globals: INVALID_ARGUMENT, counted, nothing merged;
- the peer TLS client checks which peer it reached: a peer whose certificate (from the peers' CA)
  names another host is refused, its keys get per-item errors;
- --peer-auth none with --client-tokens-file no longer bypasses the tokens;
- Levee's client-proxy reaches its limiters over TLS with the peers' options, names checked;
- a cluster node off loopback without a credential does not start (exit 2, naming the option).

Each attack test fails on the code before issue 25 (the attacks succeed there)."""
import hashlib
import hmac
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

import pytest

import chaoslib as cl

sys.path.insert(0, os.path.join(cl.ROOT, "tests", "system"))
from certs import make_ca, make_leaf  # noqa: E402

GLOBAL = 2
SECRET = b"cluster-secret-0123456789abcdef"
PATH_GET = "/pb.gubernator.PeersV1/GetPeerRateLimits"
PATH_UPDATE = "/pb.gubernator.PeersV1/UpdatePeerGlobals"
PATH_TRANSFER = "/pb.gubernator.PeersV1/TransferKeys"


def grpc_mod():
    return cl.sysconf.require_module("grpc")


# ---- the signature, as docs/cluster.md "Peer authentication" describes it ----------------------

def framed(msg):
    return b"\x00" + struct.pack(">I", len(msg)) + msg


def signature(path, body, sender, ts_ms=None, secret=SECRET):
    ts = str(int(time.time() * 1000) if ts_ms is None else ts_ms)
    signed = (b"sluice-peer-v1\n" + path.encode() + b"\n" + ts.encode() + b"\n" +
              sender.encode() + b"\n" + hashlib.sha256(body).digest())
    mac = hmac.new(secret, signed, hashlib.sha256).hexdigest()
    return [("x-sluice-peer-auth", "v1 %s %s %s" % (ts, sender, mac))]


# ---- a cluster of two on 127.0.0.1 (the attacker shares their IP) ------------------------------

def two_nodes(node_factory, tmp_path, extra=()):
    secret = tmp_path / "peer-secret"
    secret.write_bytes(SECRET + b"\n")
    os.chmod(secret, 0o600)
    ports = [cl.free_port(), cl.free_port()]
    addrs = ["127.0.0.1:%d" % p for p in ports]
    nodes = []
    for p in ports:
        n = node_factory(["--workers", "2", "--admin-api=false", "--discovery", "static",
                          "--peers", ",".join(addrs), "--global-sync-wait", "50ms",
                          "--peer-secret-file", str(secret)] + list(extra),
                         port=p, start=False)
        nodes.append(n)
    for n in nodes:
        n.start()
    return nodes, secret


def gub(addr, reqs):
    st, _, body = cl.http("POST", "http://%s/v1/GetRateLimits" % addr,
                          cl.json.dumps({"requests": reqs}))
    assert st == 200, body
    return cl.json.loads(body)["responses"]


def item(name, key, hits=1, limit=5, behavior=0):
    return {"name": name, "unique_key": key, "hits": hits, "limit": limit, "duration": 60000,
            "behavior": behavior}


def owned_by(nodes, name, want, behavior=0):
    """A key of limit `name` whose owner is nodes[want]."""
    for i in range(500):
        k = "k%d" % i
        r = gub(nodes[0].addr, [item(name, k, hits=0, behavior=behavior)])[0]
        if r["metadata"]["owner"] == nodes[want].addr:
            return k
    raise AssertionError("no key owned by " + nodes[want].addr)


def refused(addr, reason):
    return int(cl.metric(addr, "sluice_peer_refused_total", {"reason": reason}) or 0)


def keystate_record(hash_, expire_at, now):
    """One key state record (core/keystate.h): a token bucket of limit 5 over 60 s, exhausted."""
    return (struct.pack("<BBBBHHII", 1, 0, 1, 0, 0, 0, 0, 0) + struct.pack("<Qq", hash_, expire_at)
            + struct.pack("<qqqqq", 5, 60000, 0, now, 0))


def transfer_req(records):
    """TransferKeysReq: field 1, bytes."""
    n, v = len(records), b""
    while True:
        b = n & 0x7F
        n >>= 7
        v += bytes([b | (0x80 if n else 0)])
        if not n:
            break
    return b"\x0a" + v + records


def test_peers_v1_from_a_same_host_client_is_refused(node_factory, pb, tmp_path):
    grpc = grpc_mod()
    g, peers = pb
    nodes, _ = two_nodes(node_factory, tmp_path)
    victim, owner = nodes[0], nodes[1]
    plain = owned_by(nodes, "p", 1)
    gkey = owned_by(nodes, "g", 1, GLOBAL)
    ch = grpc.insecure_channel(victim.addr)
    get_peer, update, transfer = cl.sysconf.peers_v1(ch, peers)
    # the attack 1: GetPeerRateLimits on the non-owner (5 of 8 admitted there before)
    admitted = 0
    for _ in range(8):
        try:
            r = get_peer(peers.GetPeerRateLimitsReq(requests=[g.RateLimitReq(
                name="p", unique_key=plain, hits=1, limit=5, duration=60000)]), timeout=5)
            admitted += r.rate_limits[0].status == 0
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
    assert admitted == 0
    # the attack 2: a GLOBAL key exhausted, then 5 UpdatePeerGlobals saying "5 left"
    got = 0
    for _ in range(20):
        got += gub(victim.addr, [item("g", gkey, behavior=GLOBAL)])[0]["status"] == "UNDER_LIMIT"
        if got == 5:
            break
    assert got == 5
    assert cl.wait_until(lambda: all(gub(n.addr, [item("g", gkey, hits=0, behavior=GLOBAL)])[0]
                                     ["remaining"] == "0" for n in nodes), 5.0)
    st = g.RateLimitResp(status=0, limit=5, remaining=5,
                         reset_time=int(time.time() * 1000) + 60000)
    burst = 0
    for _ in range(5):  # 5 updates, each followed by 20 hits: 100 hits in all
        with pytest.raises(grpc.RpcError) as e:
            update(peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
                key="g_" + gkey, status=st, algorithm=0, duration=60000)]), timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        burst += sum(gub(victim.addr, [item("g", gkey, behavior=GLOBAL)])[0]["status"] ==
                     "UNDER_LIMIT" for _ in range(20))
    # attack 3: TransferKeys of a state that would lock a key out for a year
    now = int(time.time() * 1000)
    with pytest.raises(grpc.RpcError) as e:
        transfer(transfer_req(keystate_record(12345, now + 365 * 86400000, now)), timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    ch.close()
    assert burst == 0, "UpdatePeerGlobals from a non-peer reopened a GLOBAL key"
    # counted: 8 + 5 + 1 calls without a signature, on the victim only
    assert refused(victim.addr, "unauthenticated") == 14
    assert int(cl.metric(victim.addr, "sluice_peer_denied_total") or 0) == 14
    assert refused(owner.addr, "unauthenticated") == 0
    # no state changed: the plain key still admits exactly 5 of 8, through either node
    rs = [gub(nodes[i % 2].addr, [item("p", plain)])[0] for i in range(8)]
    assert [r["status"] for r in rs] == ["UNDER_LIMIT"] * 5 + ["OVER_LIMIT"] * 3
    assert all(r["error"] == "" and r["metadata"]["owner"] == owner.addr for r in rs)
    # the cluster's own signed calls go on: forwarding with exact counts both ways
    for who in (0, 1):
        k = owned_by(nodes, "q", who)
        rs = [gub(nodes[1 - who].addr, [item("q", k, limit=3)])[0]["status"] for _ in range(4)]
        assert rs == ["UNDER_LIMIT"] * 3 + ["OVER_LIMIT"]
    assert refused(victim.addr, "bad_signature") == 0 and refused(owner.addr, "bad_signature") == 0
    cl.record("peers-v1-same-host", {"get_peer_admitted": admitted, "global_burst_admitted": burst,
                                     "refused": refused(victim.addr, "unauthenticated")})


def test_the_documented_signature(node_factory, pb, tmp_path):
    """A client that knows the secret and signs as docs/cluster.md says is a peer; a wrong secret,
    a time outside --peer-auth-skew, or a sender outside the peer list is not."""
    grpc = grpc_mod()
    g, peers = pb
    nodes, _ = two_nodes(node_factory, tmp_path, ["--peer-max-globals", "1000"])
    a, b = nodes
    ch = grpc.insecure_channel(a.addr)
    get_peer, update, transfer = cl.sysconf.peers_v1(ch, peers)
    req = peers.GetPeerRateLimitsReq(requests=[g.RateLimitReq(
        name="s", unique_key="x", hits=1, limit=5, duration=60000)])
    body = framed(req.SerializeToString())
    r = get_peer(req, timeout=5, metadata=signature(PATH_GET, body, b.addr))
    assert r.rate_limits[0].remaining == 4
    cases = [
        (signature(PATH_GET, body, b.addr, secret=b"another-secret-0123456789"),
         grpc.StatusCode.UNAUTHENTICATED, "bad_signature"),
        (signature(PATH_GET, body, b.addr, ts_ms=int(time.time() * 1000) - 120000),
         grpc.StatusCode.UNAUTHENTICATED, "skew"),
        (signature(PATH_UPDATE, body, b.addr), grpc.StatusCode.UNAUTHENTICATED, "bad_signature"),
        (signature(PATH_GET, body, "127.0.0.1:1"), grpc.StatusCode.PERMISSION_DENIED,
         "not_member"),
    ]
    for md, code, reason in cases:
        before = refused(a.addr, reason)
        with pytest.raises(grpc.RpcError) as e:
            get_peer(req, timeout=5, metadata=md)
        assert e.value.code() == code, reason
        assert refused(a.addr, reason) == before + 1
    # a signed TransferKeys: in bound, merged; a year out, refused whole (nothing merged)
    now = int(time.time() * 1000)
    ok = transfer_req(keystate_record(777, now + 60000, now))
    assert transfer(ok, timeout=5, metadata=signature(PATH_TRANSFER, framed(ok), b.addr)) == \
        b"\x08\x01"
    far = transfer_req(keystate_record(778, now + 60000, now) +
                       keystate_record(779, now + 365 * 86400000, now))
    with pytest.raises(grpc.RpcError) as e:
        transfer(far, timeout=5, metadata=signature(PATH_TRANSFER, framed(far), b.addr))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "expires" in e.value.details()
    assert refused(a.addr, "expiry") == 1
    # UpdatePeerGlobals: a reset a year out, and more globals than --peer-max-globals
    st = g.RateLimitResp(status=0, limit=5, remaining=5, reset_time=now + 365 * 86400000)
    m = peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
        key="g_x", status=st, algorithm=0, duration=60000)])
    with pytest.raises(grpc.RpcError) as e:
        update(m, timeout=5,
               metadata=signature(PATH_UPDATE, framed(m.SerializeToString()), b.addr))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    st.reset_time = now + 60000
    m = peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
        key="g_x%d" % i, status=st, algorithm=0, duration=60000) for i in range(1001)])
    with pytest.raises(grpc.RpcError) as e:
        update(m, timeout=5,
               metadata=signature(PATH_UPDATE, framed(m.SerializeToString()), b.addr))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused(a.addr, "too_many_globals") == 1 and refused(a.addr, "expiry") == 2
    ch.close()


def test_secret_rotation_on_sighup(node_factory, pb, tmp_path):
    """Rotation: both nodes take "new, old" on SIGHUP (signing with the new, accepting both),
    then "new" alone: forwarding works throughout, and the old secret is refused at the end."""
    grpc = grpc_mod()
    g, peers = pb
    nodes, secret = two_nodes(node_factory, tmp_path)
    new = b"rotated-secret-0123456789abcdef"

    def forwards(tag):
        k = owned_by(nodes, tag, 1)
        rs = [gub(nodes[0].addr, [item(tag, k, limit=2)])[0] for _ in range(3)]
        return [r["status"] for r in rs] == ["UNDER_LIMIT"] * 2 + ["OVER_LIMIT"]

    for i, text in enumerate((new + b"\n" + SECRET + b"\n", new + b"\n")):
        secret.write_bytes(text)
        for n in nodes:
            n.signal(signal.SIGHUP)
        assert cl.wait_until(lambda: all(n.logs().count("reload: peer secret read again") > i
                                         for n in nodes), 5.0)
        assert forwards("r%d" % i)
    ch = grpc.insecure_channel(nodes[0].addr)
    get_peer, _, _ = cl.sysconf.peers_v1(ch, peers)
    req = peers.GetPeerRateLimitsReq(requests=[g.RateLimitReq(
        name="s", unique_key="x", hits=1, limit=5, duration=60000)])
    body = framed(req.SerializeToString())
    with pytest.raises(grpc.RpcError) as e:
        get_peer(req, timeout=5, metadata=signature(PATH_GET, body, nodes[1].addr))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    r = get_peer(req, timeout=5, metadata=signature(PATH_GET, body, nodes[1].addr, secret=new))
    assert r.rate_limits[0].remaining == 4
    ch.close()


# ---- the peer TLS client checks the name -------------------------------------------------------

@pytest.fixture(scope="module")
def certs():
    cl.sysconf.require("openssl")
    d = tempfile.mkdtemp(prefix="sluice-ptrust-")
    make_ca(d, "ca", "Sluice Peer CA")
    make_leaf(d, "node", "node", "ca", "DNS:localhost,IP:127.0.0.1")
    make_leaf(d, "wrongname", "wrong.example", "ca", "DNS:wrong.example,IP:10.9.9.9")
    yield lambda name: os.path.join(d, name)
    shutil.rmtree(d, ignore_errors=True)


def test_peer_tls_server_with_the_wrong_name_is_refused(node_factory, certs):
    """Two nodes on mTLS from one CA; B's certificate names wrong.example (and 10.9.9.9), not the
    127.0.0.1 A calls: A refuses the connection, B's keys get per-item errors, A's own keys are
    answered; nothing was forwarded to B."""
    import ssl
    ports = [cl.free_port(), cl.free_port()]
    addrs = ["127.0.0.1:%d" % p for p in ports]
    common = ["--workers", "1", "--admin-api=false", "--discovery", "static",
              "--peers", ",".join(addrs), "--batch-timeout", "300ms",
              "--tls-ca", certs("ca.pem"), "--peer-tls-ca", certs("ca.pem")]
    a = node_factory(common + ["--tls-cert", certs("node.pem"), "--tls-key", certs("node.key")],
                     port=ports[0], start=False)
    b = node_factory(common + ["--tls-cert", certs("wrongname.pem"),
                               "--tls-key", certs("wrongname.key")], port=ports[1], start=False)
    a.start(wait=False)
    b.start(wait=False)
    ctx = ssl.create_default_context(cafile=certs("ca.pem"))
    ctx.check_hostname = False

    def call(node, reqs):
        import http.client
        deadline = time.time() + 10
        while True:
            try:
                c = http.client.HTTPSConnection("127.0.0.1", node.port, context=ctx, timeout=5)
                c.request("POST", "/v1/GetRateLimits", cl.json.dumps({"requests": reqs}),
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                body = r.read()
                c.close()
                assert r.status == 200, body
                return cl.json.loads(body)["responses"]
            except (OSError, ssl.SSLError):
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    rs = call(a, [item("x", "k%d" % j) for j in range(16)])
    ok = [r for r in rs if r["error"] == ""]
    failed = [r for r in rs if r["error"] != ""]
    assert {r["metadata"]["owner"] for r in ok} == {a.addr}
    assert failed, "A forwarded to a peer whose certificate names another host"
    assert a.proc.poll() is None and b.proc.poll() is None


# ---- client tokens are not bypassed through PeersV1 -------------------------------------------

def test_peer_auth_none_does_not_bypass_client_tokens(node_factory, pb, tmp_path):
    grpc = grpc_mod()
    g, peers = pb
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-alpha-0123456789abcdef alpha alpha_\n")
    os.chmod(tokens, 0o600)
    node = node_factory(["--workers", "1", "--peer-auth", "none",
                         "--client-tokens-file", str(tokens)])
    ch = grpc.insecure_channel(node.addr)
    get_peer, update, _ = cl.sysconf.peers_v1(ch, peers)
    req = peers.GetPeerRateLimitsReq(requests=[g.RateLimitReq(
        name="beta_x", unique_key="k", hits=1, limit=5, duration=60000)])
    with pytest.raises(grpc.RpcError) as e:
        get_peer(req, timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    # a token whose prefixes do not hold the name: refused too
    with pytest.raises(grpc.RpcError) as e:
        get_peer(req, timeout=5,
                 metadata=[("authorization", "Bearer tok-alpha-0123456789abcdef")])
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    st = g.RateLimitResp(status=0, limit=5, remaining=5,
                         reset_time=int(time.time() * 1000) + 60000)
    with pytest.raises(grpc.RpcError) as e:
        update(peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
            key="alpha_g_k", status=st, algorithm=0, duration=60000)]), timeout=5,
            metadata=[("authorization", "Bearer tok-alpha-0123456789abcdef")])
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # the token's own names are served, as a client call
    ok = peers.GetPeerRateLimitsReq(requests=[g.RateLimitReq(
        name="alpha_x", unique_key="k", hits=1, limit=5, duration=60000)])
    r = get_peer(ok, timeout=5, metadata=[("authorization", "Bearer tok-alpha-0123456789abcdef")])
    assert r.rate_limits[0].remaining == 4
    ch.close()


# ---- no credential off loopback: no start ------------------------------------------------------

def test_a_cluster_off_loopback_needs_a_peer_credential(node_factory, tmp_path):
    port = cl.free_port()
    args = [cl.SLUICED, "--listen-addr", "127.0.0.1:%d" % port, "--admin-api=false",
            "--discovery", "static", "--advertise-addr", "10.0.0.1:%d" % port,
            "--peers", "10.0.0.1:%d,10.0.0.2:%d" % (port, port)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=20)
    assert r.returncode == 2, r.stderr
    assert "--peer-secret-file" in r.stderr and "--peer-auth insecure" in r.stderr
    # the explicit opt-out starts, and says so
    n = node_factory(args[1:] + ["--peer-auth", "insecure"], port=port, start=False)
    n.args = args[1:] + ["--peer-auth", "insecure"]
    n.start()
    assert "--peer-auth insecure: PeersV1 is served to anyone" in n.logs()
    # a loopback-only cluster needs none, with a warning
    p2 = cl.free_port()
    m = node_factory(["--discovery", "static", "--admin-api=false",
                      "--peers", "127.0.0.1:%d,127.0.0.1:%d" % (p2, cl.free_port())], port=p2)
    assert "peer calls are not authenticated (a loopback-only cluster" in m.logs()


# ---- the proxy->limiter hop over TLS (issue 25 item 2) ------------------------------------------

def proxy_attempt(proxy):
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    try:
        c.request("POST", "/attempt", body=b"", headers={"X-Resource": "api", "X-Req-Id": "r1"})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def test_proxy_to_limiter_hop_over_tls(node_factory, certs):
    """A client-proxy with --peer-tls-ca relays /attempt to a TLS limiter whose certificate names
    its address (200 from the limiter), and refuses one whose certificate names another host (the
    limiter never sees the call)."""
    quotas = os.path.join(cl.ROOT, "examples", "quotas.yaml")
    good = node_factory(["--standalone", "--workers", "1", "--admin-api=false", "--quota-file",
                         quotas, "--tls-cert", certs("node.pem"), "--tls-key", certs("node.key")],
                        start=False)
    bad = node_factory(["--standalone", "--workers", "1", "--admin-api=false", "--quota-file",
                        quotas, "--tls-cert", certs("wrongname.pem"),
                        "--tls-key", certs("wrongname.key")], start=False)
    for n in (good, bad):
        n.start(wait=False)
    results = {}
    for name, lim in (("good", good), ("bad", bad)):
        proxy = node_factory(["--role", "proxy", "--workers", "1", "--admin-api=false",
                              "--proxy-limiters", "l1=" + lim.addr, "--proxy-timeout", "500ms",
                              "--peer-tls-ca", certs("ca.pem")])
        st = None
        deadline = time.time() + 10
        while time.time() < deadline:
            st = proxy_attempt(proxy)
            if st == 200 or name == "bad":
                break
            time.sleep(0.1)
        results[name] = st
        assert proxy.proc.poll() is None
    assert results["good"] == 200, results
    assert results["bad"] != 200, results

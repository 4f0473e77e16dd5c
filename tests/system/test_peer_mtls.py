# SPDX-License-Identifier: Apache-2.0
"""PeersV1 over mutual TLS (issue 11 item 3): three nodes on one IP (127.0.0.1), so that the
source-address rule could tell nobody apart; with a peer CA, PeersV1 is served only to a
connection whose verified client certificate names the host of a peer in the list. A client with
a certificate from the same CA that names another host, and a client with no certificate, are
refused UpdatePeerGlobals / GetPeerRateLimits / TransferKeys (PERMISSION_DENIED, counted), while the cluster's
own forwarding and GLOBAL sync go on."""
import json
import re
import shutil
import tempfile
import time

import grpc
import pytest

from certs import make_ca, make_leaf
from conftest import free_port, needs, peers_v1
from test_tls import https, tls_channel, wait_tls_ready

pytestmark = needs("openssl")

GLOBAL = 2


@pytest.fixture(scope="module")
def certs():
    """ca; node (the peers': DNS node.sluice.test and localhost, IP 127.0.0.1);
    outsider (same CA, CN 127.0.0.1, names outsider.test only)."""
    d = tempfile.mkdtemp(prefix="sluice-pmtls-")
    make_ca(d, "ca", "Sluice Test CA")
    make_leaf(d, "node", "node", "ca", "DNS:node.sluice.test,DNS:localhost,IP:127.0.0.1")
    make_leaf(d, "outsider", "127.0.0.1", "ca", "DNS:outsider.test")
    yield lambda name: d + "/" + name
    shutil.rmtree(d, ignore_errors=True)


def gub_json(node, certs, reqs):
    st, body, s = https(node, certs, "/v1/GetRateLimits", method="POST",
                        body=json.dumps({"requests": reqs}))
    s.close()
    assert st == 200, body
    return json.loads(body)["responses"]


def denied(node, certs):
    _, body, s = https(node, certs, "/metrics")
    s.close()
    m = re.search(r"^sluice_peer_denied_total (\d+)", body.decode(), re.M)
    return int(m.group(1)) if m else 0


def glimit(key, hits=1, limit=5):
    return {"name": "g", "unique_key": key, "hits": hits, "limit": limit, "duration": 60000,
            "behavior": GLOBAL}


def peer_stubs(pb, node, certs, client):
    _, peers = pb
    ch = tls_channel(node, certs, client)
    get_peer, update, transfer = peers_v1(ch, peers)
    return ch, get_peer, update, transfer


def test_peers_v1_needs_a_certificate_that_names_a_peer(node_factory, certs, pb):
    gub, peers = pb
    ports = [free_port() for _ in range(3)]
    addrs = ["127.0.0.1:%d" % p for p in ports]
    nodes = []
    for p in ports:
        n = node_factory(["--workers", "2", "--discovery", "static", "--peers", ",".join(addrs),
                          "--global-sync-wait", "50ms", "--admin-api=false",
                          "--tls-cert", certs("node.pem"), "--tls-key", certs("node.key"),
                          "--tls-ca", certs("ca.pem"), "--peer-tls-ca", certs("ca.pem")],
                         start=False, port=p)
        n.addr = "127.0.0.1:%d" % p
        n.start(wait=False)
        nodes.append(n)
    for n in nodes:
        wait_tls_ready(n, certs)
    by_addr = {n.addr: n for n in nodes}
    key = next(k for k in ("k%d" % i for i in range(200))
               if gub_json(nodes[0], certs, [glimit(k, hits=0)])[0]["metadata"]["owner"]
               != addrs[1])
    owner = gub_json(nodes[0], certs, [glimit(key, hits=0)])[0]["metadata"]["owner"]
    victim = next(n for n in nodes if n.addr != owner)
    st = gub.RateLimitResp(status=0, limit=5, remaining=5,
                           reset_time=int(time.time() * 1000) + 60000)
    # a certificate from the peers' CA (CN 127.0.0.1, but no SAN naming a peer), and none at all:
    # both connect from a peer's IP, both are refused
    for client in ("outsider", None):
        ch, get_peer, update, transfer = peer_stubs(pb, victim, certs, client)
        try:
            for _ in range(3):
                with pytest.raises(grpc.RpcError) as e:
                    update(peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
                        key="g_" + key, status=st, algorithm=0, duration=60000)]), timeout=5)
                assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
            with pytest.raises(grpc.RpcError) as e:
                get_peer(peers.GetPeerRateLimitsReq(requests=[gub.RateLimitReq(
                    name="g", unique_key=key, hits=1, limit=5, duration=60000)]), timeout=5)
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
            # TransferKeys (also open to the previous peer list's members) by the same rule
            with pytest.raises(grpc.RpcError) as e:
                transfer(b"", timeout=5)
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        finally:
            ch.close()
    assert denied(victim, certs) == 10
    # the limit holds through the victim: 5 of at most 100 admitted (the owner decides)
    admitted = 0
    for _ in range(100):
        admitted += gub_json(victim, certs, [glimit(key)])[0]["status"] == "UNDER_LIMIT"
        if admitted == 5:
            break
    assert admitted == 5
    # GLOBAL sync between the nodes (their own UpdatePeerGlobals, over mTLS) goes on
    deadline = time.time() + 3
    while not all(gub_json(n, certs, [glimit(key, hits=0)])[0]["remaining"] == "0" for n in nodes):
        assert time.time() < deadline, "the owner's state did not reach every node"
        time.sleep(0.02)
    # forwarding (GetPeerRateLimits between the nodes) goes on: a plain key owned elsewhere
    def plain(k, hits=1):
        return {"name": "p", "unique_key": k, "hits": hits, "limit": 3, "duration": 60000}
    pkey = next(k for k in ("p%d" % i for i in range(200))
                if gub_json(victim, certs, [plain(k, 0)])[0]["metadata"]["owner"] != victim.addr)
    rs = [gub_json(victim, certs, [plain(pkey)])[0] for _ in range(4)]
    assert [r["status"] for r in rs] == ["UNDER_LIMIT"] * 3 + ["OVER_LIMIT"]
    assert all(r["error"] == "" for r in rs)
    assert rs[0]["metadata"]["owner"] != victim.addr
    assert denied(victim, certs) == 10
    assert all(denied(n, certs) == 0 for n in nodes if n is not victim)
    assert all(n.proc.poll() is None for n in by_addr.values())

# SPDX-License-Identifier: Apache-2.0
"""Who may do what, against real sluiced processes (issue 11, docs/operations.md "Access"): each
finding of the issue reproduced and shown fixed.

- admin off the public port: POST /v1/admin/killswitch on the client port is a 404 and switches
  nothing; the admin socket (--admin-socket, mode 0600) serves it by default, a TCP admin listener
  only when --admin-addr is given, always with the bearer token (no token file: refused at start),
  a non-loopback one only with TLS; the CLI follows (--admin-socket by default, --admin-addr,
  --admin-token-file).
- peers prove who they are: a cluster on 127.0.0.2-4 (each node's peer calls leave from its own
  advertised IP), an ordinary client on 127.0.0.1: its UpdatePeerGlobals / GetPeerRateLimits are
  PERMISSION_DENIED and counted, while the cluster's own forwarding and GLOBAL sync keep working.
- who is asking: with --client-tokens-file, GetRateLimits (JSON and gRPC) and /attempt need a
  known bearer token (401 / UNAUTHENTICATED) and names / resources inside its prefixes (403 /
  PERMISSION_DENIED for the whole call, nothing drained); probes and /metrics need none."""
import json
import os
import re
import signal
import socket
import stat
import subprocess
import time

import pytest

from conftest import (SLUICE, free_port, http, machine_skip, peers_v1, require_module,
                      secret_file, wait_for)

ITEM = {"name": "lim", "unique_key": "k", "hits": 1, "limit": 1, "duration": 60000}
TOKEN = "s3cret-admin-token-0123456789"


def get_rate_limits(node, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                           json.dumps({"requests": reqs}))
    assert status == 200, body
    return [r["status"] for r in json.loads(body)["responses"]]


JSON = {"Content-Type": "application/json"}


def killswitch(addr, on, headers=None):
    return http("POST", "http://%s/v1/admin/killswitch" % addr,
                json.dumps({"name": "*", "on": on}), dict(JSON, **(headers or {})))


def metric(addr, name, headers=None):
    status, _, body = http("GET", "http://%s/metrics" % addr, headers=headers)
    assert status == 200
    return [line for line in body.decode().splitlines()
            if line.startswith(name + " ") or line.startswith(name + "{")]


# ---- admin off the public port ----------------------------------------------------------------

def test_killswitch_on_the_client_port_is_gone(node_factory, tmp_path):
    admin = "127.0.0.1:%d" % free_port()
    tok = secret_file(tmp_path / "admin.token", TOKEN + "\n")
    good = {"Authorization": "Bearer " + TOKEN}
    node = node_factory(["--workers", "1", "--admin-addr", admin, "--admin-token-file", tok])
    assert get_rate_limits(node, [ITEM, ITEM]) == ["UNDER_LIMIT", "OVER_LIMIT"]
    # the attack of the issue: no credential, client port, every limiter off
    status, _, _ = killswitch(node.addr, True)
    assert status == 404
    assert http("GET", "http://%s/v1/admin/killswitch" % node.addr)[0] == 404
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    # /metrics stays on the client port, read-only
    assert http("GET", "http://%s/metrics" % node.addr)[0] == 200
    assert http("POST", "http://%s/metrics" % node.addr, "")[0] == 405
    # the admin listener does it (with its token)
    assert killswitch(admin, True, good)[0] == 200
    assert get_rate_limits(node, [ITEM]) == ["UNDER_LIMIT"]
    status, _, body = http("GET", "http://%s/v1/admin/killswitch" % admin, headers=good)
    assert status == 200 and json.loads(body)["switches"][0]["name"] == "*"
    assert killswitch(admin, False, good)[0] == 200
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    # the admin listener serves nothing else
    assert http("POST", "http://%s/v1/GetRateLimits" % admin, "{}",
                dict(JSON, **good))[0] == 404


def test_admin_is_on_a_unix_socket_by_default(node_factory):
    node = node_factory(["--workers", "1"])
    mode = os.stat(node.admin_socket).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    assert 'msg="admin listening" socket=%s' % node.admin_socket in node.logs()
    assert 'msg="admin listening" addr=' not in node.logs()  # no TCP listener without admin-addr
    assert node.admin("GET", "/v1/admin/killswitch")[0] == 200
    assert get_rate_limits(node, [ITEM, ITEM]) == ["UNDER_LIMIT", "OVER_LIMIT"]
    assert node.admin("POST", "/v1/admin/killswitch", json.dumps({"name": "*", "on": True}))[0] \
        == 200
    assert get_rate_limits(node, [ITEM]) == ["UNDER_LIMIT"]
    # the CLI finds it (--admin-socket; by default sluiced's own default path)
    out = subprocess.run([SLUICE, "killswitch", "off", "*", "--admin-socket", node.admin_socket],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    out = subprocess.run([SLUICE, "top", "--admin-socket", node.admin_socket, "--json"],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 0 and '"limits"' in out.stdout, out.stderr
    # a second node on the same socket: a start-up error naming it; the first keeps it
    other = node_factory(["--workers", "1", "--admin-socket", node.admin_socket], start=False)
    other.start(wait=False)
    assert other.proc.wait(10) == 2
    assert "admin-socket %s: another sluiced is listening there" % node.admin_socket \
        in other.logs()
    assert node.admin("GET", "/v1/admin/killswitch")[0] == 200
    # gone with the node
    node.stop()
    assert not os.path.exists(node.admin_socket)


def test_tcp_admin_needs_a_token_and_a_taken_address_fails(node_factory, tmp_path):
    admin = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--admin-addr", admin], start=False)
    node.start(wait=False)
    assert node.proc.wait(10) == 2
    assert "admin-addr %s: an admin listener on TCP needs --admin-token-file" % admin \
        in node.logs()
    tok = secret_file(tmp_path / "admin.token", TOKEN + "\n")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = "127.0.0.1:%d" % s.getsockname()[1]
        node = node_factory(["--workers", "1", "--admin-addr", taken,
                             "--admin-token-file", tok], start=False)
        node.start(wait=False)
        assert node.proc.wait(10) == 2
        assert "listen on admin-addr %s: Address already in use" % taken in node.logs()
    # `sluice top --admin-addr HOST` without a port: an error, never port 80
    out = subprocess.run([SLUICE, "top", "--admin-addr", "127.0.0.1"], capture_output=True,
                         text=True, timeout=10)
    assert out.returncode == 2 and "is not HOST:PORT" in out.stderr, out.stderr


def test_admin_api_false_has_no_admin_listener(node_factory, tmp_path):
    admin = "127.0.0.1:%d" % free_port()
    tok = secret_file(tmp_path / "admin.token", TOKEN + "\n")
    sock = str(tmp_path / "admin.sock")
    node = node_factory(["--workers", "1", "--admin-addr", admin, "--admin-token-file", tok,
                         "--admin-socket", sock, "--admin-api=false"])
    try:
        status = http("GET", "http://%s/v1/admin/killswitch" % admin, timeout=2)[0]
    except OSError:
        status = None
    assert status is None and not os.path.exists(sock)
    assert killswitch(node.addr, True)[0] == 404


def test_admin_token(node_factory, tmp_path):
    tok = secret_file(tmp_path / "admin.token", TOKEN + "\n")
    admin = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--admin-addr", admin,
                         "--admin-token-file", str(tok)])
    assert 'msg="admin listening" addr=%s port=%s token=yes tls=no' % (admin, admin.split(":")[1]) \
        in node.logs()
    assert get_rate_limits(node, [ITEM, ITEM]) == ["UNDER_LIMIT", "OVER_LIMIT"]
    # on TCP every call needs the token
    status, h, _ = killswitch(admin, True)
    assert status == 401 and h["www-authenticate"] == "Bearer"
    assert killswitch(admin, True, {"Authorization": "Bearer " + TOKEN[:-1] + "x"})[0] == 401
    assert killswitch(admin, True, {"Authorization": "Bearer " + TOKEN[:-1]})[0] == 401
    assert killswitch(admin, True, {"Authorization": "Basic " + TOKEN})[0] == 401
    assert http("GET", "http://%s/metrics" % admin)[0] == 401
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    good = {"Authorization": "Bearer " + TOKEN}
    assert killswitch(admin, True, good)[0] == 200
    assert get_rate_limits(node, [ITEM]) == ["UNDER_LIMIT"]
    lines = metric(admin, "sluice_admin_requests_total", good)
    assert 'sluice_admin_requests_total{outcome="unauthorized"} 5' in lines, lines
    # the CLI: without the token refused, with it obeyed
    out = subprocess.run([SLUICE, "killswitch", "off", "*", "--admin-addr", admin],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 1 and "unauthorized" in out.stderr
    out = subprocess.run([SLUICE, "killswitch", "off", "*", "--admin-addr", admin,
                          "--admin-token-file", str(tok)], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0, out.stderr
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    out = subprocess.run([SLUICE, "killswitch", "status", "--json", "--admin-addr", admin,
                          "--admin-token-file", str(tok)], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0 and '"switches":[]' in out.stdout, out.stdout
    # the node does not log the refused calls one by one
    assert node.logs().count("unauthorized") == 0
    # the socket asks for no token: its mode is the credential
    assert node.admin("GET", "/v1/admin/killswitch")[0] == 200


def test_admin_off_loopback_needs_a_token_and_tls(node_factory, tmp_path):
    node = node_factory(["--workers", "1", "--admin-addr", "0.0.0.0:%d" % free_port()],
                        start=False)
    node.start(wait=False)
    assert node.proc.wait(10) == 2
    assert "needs --admin-token-file" in node.logs()
    short = secret_file(tmp_path / "short.token", "abc\n")
    node = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % free_port(),
                         "--admin-token-file", str(short)], start=False)
    node.start(wait=False)
    assert node.proc.wait(10) != 0
    assert "shorter than 16 bytes" in node.logs()
    tok = secret_file(tmp_path / "admin.token", TOKEN)
    port = free_port()
    node = node_factory(["--workers", "1", "--admin-addr", "0.0.0.0:%d" % port,
                         "--admin-token-file", str(tok)], start=False)
    node.start(wait=False)
    assert node.proc.wait(10) == 2
    assert "admin-addr 0.0.0.0:%d is not loopback: it needs TLS" % port in node.logs()


def test_metrics_addr(node_factory):
    maddr = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--metrics-addr", maddr])
    status, _, body = http("GET", "http://%s/metrics" % maddr)
    assert status == 200 and b"sluice_calls_total" in body
    assert killswitch(maddr, True)[0] == 404
    assert http("GET", "http://%s/metrics" % node.addr)[0] == 200


# ---- peers prove who they are -----------------------------------------------------------------

GLOBAL = 2


def free_port_on(host):
    return free_port(host)


def cluster_on_own_ips(node_factory, extra=()):
    try:
        addrs = ["%s:%d" % (ip, free_port_on(ip)) for ip in ("127.0.0.2", "127.0.0.3", "127.0.0.4")]
    except OSError:
        machine_skip("127.0.0.2-4 are not usable here")
    nodes = []
    for a in addrs:
        n = node_factory(["--workers", "2", "--listen-addr", a, "--admin-api=false",
                          "--discovery", "static", "--peers", ",".join(addrs),
                          "--global-sync-wait", "50ms"] + list(extra),
                         port=int(a.rsplit(":", 1)[1]), start=False)
        n.addr = a
        nodes.append(n)
    for n in nodes:
        n.start()
    return nodes


def glimit(key, hits=1, limit=5):
    return {"name": "g", "unique_key": key, "hits": hits, "limit": limit, "duration": 60000,
            "behavior": GLOBAL}


def gub_json(addr, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr,
                           json.dumps({"requests": reqs}))
    assert status == 200, body
    return json.loads(body)["responses"]


def peers_stubs(addr, pb):
    grpc = require_module("grpc")
    _, peers = pb
    ch = grpc.insecure_channel(addr)
    get_peer, update, _ = peers_v1(ch, peers)
    return grpc, ch, get_peer, update


def denied_count(addr):
    status, _, body = http("GET", "http://%s/metrics" % addr)
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith("sluice_peer_denied_total "):
            return int(float(line.split()[1]))
    return 0


def test_peer_globals_from_a_non_peer_are_refused(node_factory, pb):
    gub, peers = pb
    nodes = cluster_on_own_ips(node_factory)
    addrs = [n.addr for n in nodes]
    # a GLOBAL key owned by one node, looked at from another
    key = next(k for k in ("k%d" % i for i in range(200))
               if gub_json(addrs[0], [glimit(k, hits=0)])[0]["metadata"]["owner"] != addrs[1])
    owner = gub_json(addrs[0], [glimit(key, hits=0)])[0]["metadata"]["owner"]
    victim = next(a for a in addrs if a != owner)
    grpc, ch, get_peer, update = peers_stubs(victim, pb)
    # the attack of the issue: an ordinary client (127.0.0.1) writes the victim's GLOBAL copy
    st = gub.RateLimitResp(status=0, limit=5, remaining=5,
                           reset_time=int(time.time() * 1000) + 60000)
    for _ in range(5):
        with pytest.raises(grpc.RpcError) as e:
            update(peers.UpdatePeerGlobalsReq(globals=[peers.UpdatePeerGlobal(
                key="g_" + key, status=st, algorithm=0, duration=60000)]), timeout=5)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as e:
        get_peer(peers.GetPeerRateLimitsReq(requests=[gub.RateLimitReq(
            name="g", unique_key=key, hits=1, limit=5, duration=60000)]), timeout=5)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    ch.close()
    assert denied_count(victim) == 6
    # the limit holds: 5 of 100 admitted through the victim (the owner decides, synced back)
    admitted = 0
    for _ in range(100):
        r = gub_json(victim, [glimit(key)])[0]
        admitted += r["status"] == "UNDER_LIMIT"
        if admitted == 5:
            break
    assert admitted == 5
    # the owner's state reaches the others: the cluster's own UpdatePeerGlobals still work
    assert wait_for(lambda: all(gub_json(a, [glimit(key, hits=0)])[0]["remaining"] == "0"
                                for a in addrs), 3.0)
    over = sum(gub_json(victim, [glimit(key)])[0]["status"] == "OVER_LIMIT" for _ in range(20))
    assert over == 20
    # forwarding (GetPeerRateLimits between the nodes) works: a plain key owned elsewhere
    plain = {"name": "p", "unique_key": key, "hits": 1, "limit": 3, "duration": 60000}
    rs = [gub_json(victim, [plain])[0] for _ in range(4)]
    assert [r["status"] for r in rs] == ["UNDER_LIMIT"] * 3 + ["OVER_LIMIT"]
    assert all(r["error"] == "" for r in rs)
    assert denied_count(victim) == 6 and all(denied_count(a) == 0 for a in addrs if a != victim)


def test_peer_auth_none_serves_anyone(node_factory, pb):
    gub, peers = pb
    node = node_factory(["--workers", "1", "--peer-auth", "none"])
    grpc, ch, get_peer, _ = peers_stubs(node.addr, pb)
    r = get_peer(peers.GetPeerRateLimitsReq(requests=[gub.RateLimitReq(
        name="g", unique_key="x", hits=1, limit=5, duration=60000)]), timeout=5)
    assert r.rate_limits[0].remaining == 4
    ch.close()
    node = node_factory(["--workers", "1"])  # standalone: no peer at all
    grpc, ch, get_peer, _ = peers_stubs(node.addr, pb)
    with pytest.raises(grpc.RpcError) as e:
        get_peer(peers.GetPeerRateLimitsReq(requests=[gub.RateLimitReq(
            name="g", unique_key="x", hits=1, limit=5, duration=60000)]), timeout=5)
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    ch.close()


# ---- who is asking ----------------------------------------------------------------------------

TOKENS = """# token                         name      prefixes
tok-alpha-0123456789abcdef      alpha     alpha_,shared_
tok-beta-0123456789abcdef       beta      beta_,api
tok-root-0123456789abcdef       ops       *
"""
QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
"""


def test_identities(node_factory, tmp_path, pb):
    gub, _ = pb
    tokens = tmp_path / "tokens"
    secret_file(tokens, TOKENS)
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(QUOTAS)
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", str(quotas),
                         "--client-tokens-file", str(tokens)])
    url = "http://%s/v1/GetRateLimits" % node.addr

    def call(names, token=None):
        h = {"Authorization": "Bearer " + token} if token else {}
        reqs = [{"name": n, "unique_key": "k", "hits": 1, "limit": 10, "duration": 60000}
                for n in names]
        return http("POST", url, json.dumps({"requests": reqs}), h)

    # the finding of the issue: anyone reads and drains any key. Now: no token, no answer
    assert call(["alpha_x"])[0] == 401
    assert call(["alpha_x"], "tok-unknown-0123456789abcdef")[0] == 401
    assert call(["alpha_x"], "tok-alpha-0123456789abcdeX")[0] == 401
    status, _, body = call(["alpha_x", "shared_y"], "tok-alpha-0123456789abcdef")
    assert status == 200 and all(r["status"] == "UNDER_LIMIT"
                                 for r in json.loads(body)["responses"])
    # beta may not drain alpha's key: the whole call is refused, nothing is counted
    status, _, body = call(["beta_ok", "alpha_x"], "tok-beta-0123456789abcdef")
    assert status == 403 and b"item 1" in body
    status, _, body = call(["alpha_x"], "tok-root-0123456789abcdef")
    assert json.loads(body)["responses"][0]["remaining"] == "8"  # alpha's 1 + ops' 1, not beta's
    # gRPC: UNAUTHENTICATED / PERMISSION_DENIED
    grpc = require_module("grpc")
    ch = grpc.insecure_channel(node.addr)
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=gub.GetRateLimitsReq.SerializeToString,
                         response_deserializer=gub.GetRateLimitsResp.FromString)
    req = gub.GetRateLimitsReq(requests=[gub.RateLimitReq(name="beta_q", unique_key="k", hits=1,
                                                          limit=5, duration=60000)])
    with pytest.raises(grpc.RpcError) as e:
        get(req, timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.RpcError) as e:
        get(req, timeout=5, metadata=[("authorization", "Bearer tok-alpha-0123456789abcdef")])
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    r = get(req, timeout=5, metadata=[("authorization", "Bearer tok-beta-0123456789abcdef")])
    assert r.responses[0].remaining == 4
    ch.close()
    # Levee /attempt: 401 without a token, 403 outside the prefixes, allowed inside
    attempt = "http://%s/attempt" % node.addr
    assert http("POST", attempt, b"", {"X-Resource": "api"})[0] == 401
    beta = {"Authorization": "Bearer tok-beta-0123456789abcdef"}
    assert http("POST", attempt, b"", dict(beta, **{"X-Resource": "other"}))[0] == 403
    assert http("POST", attempt, b"", dict(beta, **{"X-Resource": "api"}))[0] == 200
    assert http("POST", attempt, b"", dict(beta, **{"X-Resource": "api-admin"}))[0] == 200
    # probes and metrics need no token
    assert http("GET", "http://%s/v1/HealthCheck" % node.addr)[0] == 200
    status, _, body = http("GET", "http://%s/metrics" % node.addr)
    assert status == 200
    assert b'code="UNAUTHENTICATED"' in body and b'code="PERMISSION_DENIED"' in body
    # nothing logged per refused call
    assert "tok-" not in node.logs()
    assert node.logs().count("\n") < 10, node.logs()


def test_identities_file_errors(node_factory, tmp_path):
    bad = tmp_path / "tokens"
    bad.write_text("tok-alpha-0123456789abcdef alpha alpha_\n")
    os.chmod(bad, 0o644)
    # readable by others: refused at start, with the fix
    node = node_factory(["--workers", "1", "--client-tokens-file", str(bad)], start=False)
    node.start(wait=False)
    assert node.proc.wait(10) == 2
    assert "readable by group or others (mode 0644)" in node.logs()
    assert "chmod 600 %s" % bad in node.logs()
    secret_file(bad, "short alpha alpha_\n")
    node = node_factory(["--workers", "1", "--client-tokens-file", str(bad)], start=False)
    node.start(wait=False)
    assert node.proc.wait(10) != 0
    assert "line 1: a token must be 16..512 bytes" in node.logs()
    assert "short" not in node.logs().split("line 1")[1]


def wait_log(node, text, count=1, timeout=5.0):
    assert wait_for(lambda: node.logs().count(text) >= count, timeout), node.logs()


def test_sighup_reloads_tokens_and_admin_token(node_factory, tmp_path):
    """SIGHUP reads --client-tokens-file and --admin-token-file again: the new tokens work, the
    old ones stop working; a bad file is logged and the current tokens stay."""
    tokens = tmp_path / "tokens"
    secret_file(tokens, TOKENS)
    admin_tok = tmp_path / "admin.token"
    secret_file(admin_tok, TOKEN + "\n")
    admin = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "2", "--standalone", "--client-tokens-file", str(tokens),
                         "--admin-addr", admin, "--admin-token-file", str(admin_tok)])
    url = "http://%s/v1/GetRateLimits" % node.addr

    def call(name, token):
        reqs = [{"name": name, "unique_key": "k", "hits": 1, "limit": 1000, "duration": 60000}]
        return http("POST", url, json.dumps({"requests": reqs}),
                    {"Authorization": "Bearer " + token})[0]

    def admin_status(token):
        return http("GET", "http://%s/v1/admin/killswitch" % admin, None,
                    {"Authorization": "Bearer " + token})[0]

    new_admin = "admin-token-after-reload-0123456789"
    assert call("alpha_x", "tok-alpha-0123456789abcdef") == 200
    assert call("gamma_x", "tok-gamma-0123456789abcdef") == 401
    assert admin_status(TOKEN) == 200 and admin_status(new_admin) == 401
    # new files: alpha's token is gone, gamma's is new; a new admin token
    tokens.write_text("tok-gamma-0123456789abcdef gamma gamma_\n")
    admin_tok.write_text(new_admin + "\n")
    node.signal(signal.SIGHUP)
    wait_log(node, "reload: client identities read again\" count=1")
    wait_log(node, "reload: admin token read again")
    # every worker: several connections (each call is a new one)
    for _ in range(6):
        assert call("gamma_x", "tok-gamma-0123456789abcdef") == 200
        assert call("alpha_x", "tok-alpha-0123456789abcdef") == 401
    assert call("alpha_x", "tok-gamma-0123456789abcdef") == 403
    assert admin_status(new_admin) == 200 and admin_status(TOKEN) == 401
    # bad files: logged (without the tokens), the current ones stay
    tokens.write_text("short gamma gamma_\n")
    admin_tok.write_text("short\n")
    node.signal(signal.SIGHUP)
    wait_log(node, "reload of the client tokens file failed, keeping the current identities")
    wait_log(node, "reload of the admin token failed, keeping the current one")
    assert "line 1: a token must be 16..512 bytes" in node.logs()
    assert call("gamma_x", "tok-gamma-0123456789abcdef") == 200
    assert admin_status(new_admin) == 200
    assert "tok-gamma" not in node.logs() and new_admin not in node.logs()
    assert node.proc.poll() is None

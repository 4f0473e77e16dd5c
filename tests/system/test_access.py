"""Who may do what, against real sluiced processes (issue 11, docs/operations.md "Access"): each
finding of the issue reproduced and shown fixed.

- admin off the public port: POST /v1/admin/killswitch on the client port is a 404 and switches
  nothing; the admin listener (--admin-addr) serves it, with a bearer token when one is configured
  (required on loopback too then), and a non-loopback admin address without a token is refused at
  startup; the CLI follows (--admin-addr, --admin-token-file)."""
import json
import subprocess

from conftest import SLUICE, free_port, http

ITEM = {"name": "lim", "unique_key": "k", "hits": 1, "limit": 1, "duration": 60000}
TOKEN = "s3cret-admin-token-0123456789"


def get_rate_limits(node, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                           json.dumps({"requests": reqs}))
    assert status == 200, body
    return [r["status"] for r in json.loads(body)["responses"]]


def killswitch(addr, on, headers=None):
    return http("POST", "http://%s/v1/admin/killswitch" % addr,
                json.dumps({"name": "*", "on": on}), headers)


def metric(addr, name, headers=None):
    status, _, body = http("GET", "http://%s/metrics" % addr, headers=headers)
    assert status == 200
    return [line for line in body.decode().splitlines()
            if line.startswith(name + " ") or line.startswith(name + "{")]


# ---- admin off the public port ----------------------------------------------------------------

def test_killswitch_on_the_client_port_is_gone(node_factory):
    admin = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--admin-addr", admin])
    assert get_rate_limits(node, [ITEM, ITEM]) == ["UNDER_LIMIT", "OVER_LIMIT"]
    # the attack of the issue: no credential, client port, every limiter off
    status, _, _ = killswitch(node.addr, True)
    assert status == 404
    assert http("GET", "http://%s/v1/admin/killswitch" % node.addr)[0] == 404
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    # /metrics stays on the client port, read-only
    assert http("GET", "http://%s/metrics" % node.addr)[0] == 200
    assert http("POST", "http://%s/metrics" % node.addr, "")[0] == 405
    # the admin listener does it (loopback, no token configured)
    assert killswitch(admin, True)[0] == 200
    assert get_rate_limits(node, [ITEM]) == ["UNDER_LIMIT"]
    status, _, body = http("GET", "http://%s/v1/admin/killswitch" % admin)
    assert status == 200 and json.loads(body)["switches"][0]["name"] == "*"
    assert killswitch(admin, False)[0] == 200
    assert get_rate_limits(node, [ITEM]) == ["OVER_LIMIT"]
    # the admin listener serves nothing else
    assert http("POST", "http://%s/v1/GetRateLimits" % admin, "{}")[0] == 404


def test_default_admin_addr_is_loopback_client_port_plus_one(node_factory):
    port = free_port()
    node = node_factory(["--workers", "1"], port=port)
    assert http("GET", "http://127.0.0.1:%d/v1/admin/killswitch" % (port + 1))[0] == 200
    assert "admin listening addr=127.0.0.1:%d" % (port + 1) in node.logs()


def test_admin_api_false_has_no_admin_port(node_factory):
    admin = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--admin-addr", admin, "--admin-api=false"])
    try:
        status = http("GET", "http://%s/v1/admin/killswitch" % admin, timeout=2)[0]
    except OSError:
        status = None
    assert status is None
    assert killswitch(node.addr, True)[0] == 404


def test_admin_token(node_factory, tmp_path):
    tok = tmp_path / "admin.token"
    tok.write_text(TOKEN + "\n")
    admin = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--admin-addr", admin,
                         "--admin-token-file", str(tok)])
    assert get_rate_limits(node, [ITEM, ITEM]) == ["UNDER_LIMIT", "OVER_LIMIT"]
    # a token file makes the token required on loopback too
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
    out = subprocess.run([SLUICE, "killswitch", "status", "--admin-addr", admin,
                          "--admin-token-file", str(tok)], capture_output=True, text=True,
                         timeout=10)
    assert out.returncode == 0 and '"switches":[]' in out.stdout, out.stdout
    # the node does not log the refused calls one by one
    assert node.logs().count("unauthorized") == 0


def test_admin_off_loopback_needs_a_token(node_factory, tmp_path):
    node = node_factory(["--workers", "1", "--admin-addr", "0.0.0.0:%d" % free_port()],
                        start=False)
    node.start(wait=False)
    assert node.proc.wait(10) != 0
    assert "not loopback: it needs --admin-token-file" in node.logs()
    short = tmp_path / "short.token"
    short.write_text("abc\n")
    node = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % free_port(),
                         "--admin-token-file", str(short)], start=False)
    node.start(wait=False)
    assert node.proc.wait(10) != 0
    assert "shorter than 16 bytes" in node.logs()
    tok = tmp_path / "admin.token"
    tok.write_text(TOKEN)
    port = free_port()
    node = node_factory(["--workers", "1", "--admin-addr", "0.0.0.0:%d" % port,
                         "--admin-token-file", str(tok)])
    assert killswitch("127.0.0.1:%d" % port, True)[0] == 401
    assert killswitch("127.0.0.1:%d" % port, True,
                      {"Authorization": "Bearer " + TOKEN})[0] == 200


def test_metrics_addr(node_factory):
    maddr = "127.0.0.1:%d" % free_port()
    node = node_factory(["--workers", "1", "--metrics-addr", maddr])
    status, _, body = http("GET", "http://%s/metrics" % maddr)
    assert status == 200 and b"sluice_calls_total" in body
    assert killswitch(maddr, True)[0] == 404
    assert http("GET", "http://%s/metrics" % node.addr)[0] == 200

# SPDX-License-Identifier: Apache-2.0
"""sluiced serves Levee's POST /attempt: quotas from a real etcd (started per module) or a quota
file, every lookup level, the 429 and its headers, live reload, an etcd outage, endpoint failover,
HTTP/1.1 and h2c alike, bad requests, no-quota modes, the `sluice quota` and `sluice attempt` CLIs,
and bounded memory under a flood of distinct resources.

Quotas meant to be exhausted use slow rates (one request per 10 s) so that a stall of the test
machine cannot refill them mid-check; tests wait for changes by polling with generous deadlines."""
import http.client as httpclient
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import SLUICE, free_port, http
from etcdproc import EtcdProc

ETCDCTL = shutil.which("etcdctl") or "/usr/bin/etcdctl"
CURL = shutil.which("curl") or "/usr/bin/curl"


# ---------------------------------------------------------------------------------------- etcd

class Etcd(EtcdProc):
    """One real etcd (etcdproc.EtcdProc: can be killed and started again on the same ports and
    data), written through etcdctl."""

    def ctl(self, *args):
        env = dict(os.environ, ETCDCTL_API="3")
        return subprocess.run([ETCDCTL, "--endpoints", self.url, "--command-timeout=5s"] +
                              list(args), env=env, check=True, capture_output=True, text=True,
                              timeout=20).stdout

    def put(self, key, value):
        self.ctl("put", key, value if isinstance(value, str) else json.dumps(value))

    def delete(self, key):
        self.ctl("del", key)

    def get(self, key):
        out = self.ctl("get", key, "--print-value-only")
        return out.strip()


@pytest.fixture(scope="module")
def etcd():
    e = Etcd().start()
    yield e
    e.close()


@pytest.fixture
def prefix(request):
    """An etcd root of this test's own."""
    name = re.sub(r"[^A-Za-z0-9]", "-", request.node.name)
    return "/lv-%s-%06d" % (name, random.randrange(1000000))


def put_quotas(etcd, prefix, tree):
    for k, v in tree.items():
        etcd.put(prefix + "/" + k, v)


def levee_node(node_factory, etcd, prefix, *extra, endpoints=None):
    return node_factory(["--standalone", "--workers", "2",
                         "--storage-addrs", endpoints or etcd.url,
                         "--storage-prefix", prefix] + list(extra))


# -------------------------------------------------------------------------------- requests

class H1:
    """A keep-alive HTTP/1.1 connection for /attempt."""

    def __init__(self, node):
        self.node = node
        self.conn = httpclient.HTTPConnection("127.0.0.1", node.port, timeout=10)

    def attempt(self, resource=None, prefix=None, method=None, req_id=None, verb="POST",
                extra=None):
        h = {}
        for name, v in (("X-Resource", resource), ("X-Prefix", prefix), ("X-Method", method),
                        ("X-Req-Id", req_id)):
            if v is not None:
                h[name] = v
        h.update(extra or {})
        self.conn.request(verb, "/attempt", body=b"" if verb == "POST" else None, headers=h)
        r = self.conn.getresponse()
        body = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        if hdrs.get("connection", "").lower() == "close":
            self.conn.close()
            self.conn = httpclient.HTTPConnection("127.0.0.1", self.node.port, timeout=10)
        return r.status, hdrs, body

    def close(self):
        self.conn.close()


def attempt_h2(node, resource=None, prefix=None, method=None, req_id=None):
    """POST /attempt over h2c (prior knowledge) with curl."""
    cmd = [CURL, "-s", "-i", "--http2-prior-knowledge", "-X", "POST", "--max-time", "10",
           "http://%s/attempt" % node.addr]
    for name, v in (("X-Resource", resource), ("X-Prefix", prefix), ("X-Method", method),
                    ("X-Req-Id", req_id)):
        if v is not None:
            cmd += ["-H", "%s: %s" % (name, v)]
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=20).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0].startswith("HTTP/2 "), lines[0]
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


def exhaust(c, resource, prefix=None, method=None, limit=60):
    """Attempt until the first 429; (number accepted before it, the 429's headers)."""
    for i in range(limit):
        st, h, body = c.attempt(resource, prefix, method)
        if st == 429:
            return i, h
        assert st == 200, (st, body)
    raise AssertionError("no 429 after %d attempts" % limit)


def pipelined(node, resources, conns=2, chunk=1000):
    """Send POST /attempt for each resource, pipelined over a few connections; statuses and the
    headers of one 429 (if any) returned in order of the resources per connection."""
    parts = [resources[i::conns] for i in range(conns)]
    results = [None] * conns

    def run(idx):
        s = socket.create_connection(("127.0.0.1", node.port), timeout=30)
        statuses, first429 = [], None
        buf = b""
        for off in range(0, len(parts[idx]), chunk):
            batch = parts[idx][off:off + chunk]
            s.sendall(b"".join(b"POST /attempt HTTP/1.1\r\nHost: t\r\nX-Resource: %s\r\n"
                               b"Content-Length: 0\r\n\r\n" % r.encode() for r in batch))
            got = 0
            while got < len(batch):
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    d = s.recv(1 << 20)
                    assert d, "connection closed"
                    buf += d
                    continue
                head = buf[:end].decode("latin-1")
                m = re.search(r"(?im)^content-length:\s*(\d+)", head)
                blen = int(m.group(1)) if m else 0
                if len(buf) < end + 4 + blen:
                    d = s.recv(1 << 20)
                    assert d, "connection closed"
                    buf += d
                    continue
                buf = buf[end + 4 + blen:]
                status = int(head.split(" ", 2)[1])
                statuses.append(status)
                if status == 429 and first429 is None:
                    first429 = {k.strip().lower(): v.strip() for k, _, v in
                                (ln.partition(":") for ln in head.split("\r\n")[1:])}
                got += 1
        s.close()
        results[idx] = (statuses, first429)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    statuses, first429 = [], None
    for r in results:
        assert r is not None, "a pipelining thread failed"
        statuses += r[0]
        first429 = first429 or r[1]
    return statuses, first429


def metrics(node):
    st, _, body = http("GET", "http://%s/metrics" % node.addr)
    assert st == 200
    out = {}
    for ln in body.decode().splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", ln)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def wait_for(pred, timeout=10.0, step=0.02, what="condition"):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


# Structured Field list of strings with integer parameters (draft-ietf-httpapi-ratelimit-headers).
SF_ITEM = r'"(?:[^"\\]|\\.)*"(?:;[a-z*][a-z0-9_.*-]*=-?\d+)*'
SF_LIST = re.compile(r"^%s(?:, %s)*$" % (SF_ITEM, SF_ITEM))


def sf_items(value):
    """'"a";q=1;w=2, "b";r=0' -> [("a", {"q": 1, "w": 2}), ("b", {"r": 0})] (checked syntax)."""
    assert SF_LIST.match(value), "not a structured-field list: %r" % value
    items = []
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"((?:;[a-z*][a-z0-9_.*-]*=-?\d+)*)', value):
        params = dict((k, int(v)) for k, v in re.findall(r";([a-z*][a-z0-9_.*-]*)=(-?\d+)",
                                                          m.group(2)))
        items.append((re.sub(r"\\(.)", r"\1", m.group(1)), params))
    return items


def policy_names(h):
    return [n for n, _ in sf_items(h["ratelimit-policy"])]


# ----------------------------------------------------------------------------------- tests

SLOW = {"rate": 0.1}  # one request per 10 s: never refills during a check


def q(burst, rate=0.1):
    return {"rate": rate, "burst": burst}


def test_lookup_levels_defaults_and_sublimits(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {
        "limit/key_default": q(1),
        "limit/key/lvl1/v1/GET/quota": q(2),          # R/P/M
        "limit/key/lvl1/GET/quota": q(5),
        "limit/key/lvl1/quota": q(7),
        "limit/key/lvl2/GET/quota": q(3),             # R/M
        "limit/key/lvl2/quota": q(7),
        "limit/key/lvl3/quota": q(4),                 # R
        "limit/key/sub1/quota": q(10),
        "limit/key/sub1/sublimit/POST": q(1),         # key sublimit
        "limit/subkey_default/DELETE": q(0),          # subkey_default
        "limit/key/sub3/quota": q(5),
        "limit/key/sub3/sublimit/DELETE": q(2),       # a key's sublimit beats subkey_default
        "limit/key/df/quota": q(0, rate=0.2),
        "factor/key/df": "2",                         # DF 2: the rate is halved
    })
    node = levee_node(node_factory, etcd, prefix)
    c = H1(node)

    n, h = exhaust(c, "lvl1", "v1", "GET")
    assert (n, policy_names(h)) == (3, ["lvl1/v1/GET"])
    assert sf_items(h["ratelimit-policy"])[0][1] == {"q": 1, "w": 10, "sluice-burst": 2}
    # X-Prefix is a path: "/v1/" is "v1", the same bucket
    assert c.attempt("lvl1", "/v1/", "GET")[0] == 429

    n, h = exhaust(c, "lvl2", "v9", "GET")                 # no lvl2/v9/GET: R/M
    assert (n, policy_names(h)) == (4, ["lvl2/GET"])

    n, h = exhaust(c, "lvl3", "v1", "GET")                 # neither R/P/M nor R/M: R
    assert (n, policy_names(h)) == (5, ["lvl3"])

    n, h = exhaust(c, "lvl4", "v1")                        # nothing for lvl4: key_default,
    assert (n, policy_names(h)) == (2, ["lvl4"])
    n, h = exhaust(c, "lvl5")                              # ... a bucket per resource
    assert (n, policy_names(h)) == (2, ["lvl5"])

    # key sublimit: (R, M) capped at 2 whatever the prefix; a rejected request costs the main
    # quota nothing (its hit is given back)
    n, h = exhaust(c, "sub1", None, "POST")
    assert (n, policy_names(h)) == (2, ["sub1", "sub1/sublimit/POST"])
    rl = dict(sf_items(h["ratelimit"]))
    assert rl["sub1/sublimit/POST"]["r"] == 0
    assert rl["sub1"]["r"] == 9  # burst + 1 - the two taken: the third's hit was given back
    assert c.attempt("sub1", "v7", "POST")[0] == 429
    n, h = exhaust(c, "sub1")
    assert (n, policy_names(h)) == (9, ["sub1"])

    # subkey_default with key_default as the main quota
    n, h = exhaust(c, "sub2", None, "DELETE")
    assert (n, policy_names(h)) == (1, ["sub2", "subkey_default/DELETE"])
    n, h = exhaust(c, "sub3", None, "DELETE")
    assert (n, policy_names(h)) == (3, ["sub3", "sub3/sublimit/DELETE"])

    # group size: 0.2/s over DF 2 is 0.1/s per limiter
    n, h = exhaust(c, "df")
    assert n == 1
    assert sf_items(h["ratelimit-policy"])[0][1]["q"] == 1
    assert sf_items(h["ratelimit-policy"])[0][1]["w"] == 10
    c.close()


def test_429_headers_and_recovery_after_one_interval(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/burst/quota": {"rate": 1, "burst": 2}})
    node = levee_node(node_factory, etcd, prefix)
    c = H1(node)
    t0 = time.time()
    for _ in range(3):
        st, h, body = c.attempt("burst", req_id="r-ok")
        assert (st, body) == (200, b"")
        assert h["x-req-id"] == "r-ok"
        assert "ratelimit" not in h and "retry-after" not in h
    st, h, body = c.attempt("burst", req_id="r-429")
    assert st == 429 and body.startswith(b"rate limit exceeded") and len(body) < 200
    assert h["x-req-id"] == "r-429"
    assert h["retry-after"] == "1"
    assert sf_items(h["ratelimit-policy"]) == [("burst", {"q": 1, "w": 1, "sluice-burst": 2})]
    assert sf_items(h["ratelimit"]) == [("burst", {"r": 0, "t": 1})]
    assert c.attempt("burst")[0] == 429  # rejected requests cost nothing, and give nothing
    # one emission interval (1 s) after the first request one more passes, then 429 again
    st = wait_for(lambda: c.attempt("burst")[0] == 200 and time.time(), timeout=5, step=0.05,
                  what="a 200 after one interval")
    assert st - t0 >= 0.95
    assert c.attempt("burst")[0] == 429
    c.close()


def test_live_reload_within_one_second(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/live/quota": {"rate": 0}})
    node = levee_node(node_factory, etcd, prefix)
    c = H1(node)
    st, h, _ = c.attempt("live")
    assert st == 429  # rate 0 blocks
    assert sf_items(h["ratelimit-policy"])[0][1]["q"] == 0

    for value, want in (({"rate": 100, "burst": 10}, 200), ({"rate": 0}, 429)):
        etcd.put(prefix + "/limit/key/live/quota", value)
        t = time.time()
        wait_for(lambda: c.attempt("live")[0] == want, timeout=5, what="the change")
        assert time.time() - t < 1.0
    # deleted: no quota and no key_default -> --no-quota (error by default)
    etcd.delete(prefix + "/limit/key/live/quota")
    t = time.time()
    wait_for(lambda: c.attempt("live")[0] == 500, timeout=5, what="the deletion")
    assert time.time() - t < 1.0
    st, _, body = c.attempt("live")
    assert body == b"no quota for resource\n"
    m = metrics(node)
    assert m['sluice_quota_source_connected{source="etcd"}'] == 1, node.logs()
    assert m['sluice_quota_source_updates_total{source="etcd"}'] >= 3
    c.close()


def test_etcd_outage_keeps_serving_then_recovers(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/out/quota": {"rate": 1000, "burst": 100},
                              "limit/key/blk/quota": {"rate": 0}})
    node = levee_node(node_factory, etcd, prefix)
    c = H1(node)
    assert c.attempt("out")[0] == 200
    assert c.attempt("blk")[0] == 429
    try:
        etcd.kill()
        wait_for(lambda: metrics(node)['sluice_quota_source_connected{source="etcd"}'] == 0,
                 timeout=20, what="the source to notice")
        # the last quotas keep deciding
        for _ in range(20):
            assert c.attempt("out")[0] == 200
        assert c.attempt("blk")[0] == 429
        st, _, body = http("GET", "http://%s/v1/HealthCheck" % node.addr)
        assert st == 200, body  # degraded, not down: decisions go on
        health_in_outage = json.loads(body)
        assert health_in_outage["status"] == "healthy"
        assert "etcd watch lost" in node.logs() or "etcd unavailable" in node.logs()
    finally:
        if etcd.proc.poll() is not None:
            etcd.start()
    wait_for(lambda: metrics(node)['sluice_quota_source_connected{source="etcd"}'] == 1,
             timeout=30, step=0.1, what="the watch to come back")
    assert metrics(node)['sluice_quota_source_reconnects_total{source="etcd"}'] >= 1
    etcd.put(prefix + "/limit/key/blk/quota", {"rate": 1000, "burst": 100})
    wait_for(lambda: c.attempt("blk")[0] == 200, timeout=5, what="a change after the outage")
    st, _, body = http("GET", "http://%s/v1/HealthCheck" % node.addr)
    assert st == 200 and "disconnected" not in json.loads(body).get("message", "")
    c.close()
    # HealthCheck says the node runs on the last known quotas while etcd is away
    assert "disconnected" in health_in_outage.get("message", ""), health_in_outage


def test_dead_first_endpoint_fails_over(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/fo/quota": {"rate": 0}})
    dead = "http://127.0.0.1:%d" % free_port()
    node = levee_node(node_factory, etcd, prefix, endpoints=dead + "," + etcd.url)
    c = H1(node)
    assert c.attempt("fo")[0] == 429  # loaded from the second endpoint
    etcd.put(prefix + "/limit/key/fo/quota", {"rate": 100, "burst": 5})
    wait_for(lambda: c.attempt("fo")[0] == 200, timeout=5, what="the watch on the live endpoint")
    m = metrics(node)
    assert m['sluice_quota_source_failovers_total{source="etcd"}'] >= 1
    assert m['sluice_quota_source_connected{source="etcd"}'] == 1
    c.close()


def test_http1_and_h2c_answer_alike(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/h1/quota": q(2), "limit/key/h2/quota": q(2),
                              "limit/key/h1/sublimit/PUT": q(1),
                              "limit/key/h2/sublimit/PUT": q(1)})
    node = levee_node(node_factory, etcd, prefix)
    c = H1(node)
    keep = ("x-req-id", "retry-after", "ratelimit-policy", "ratelimit", "content-type")

    def norm(res, name):
        st, h, body = res
        hh = {k: v.replace('"%s' % name, '"R') for k, v in h.items() if k in keep}
        return st, hh, body.replace(b'"%s"' % name.encode(), b'"R"') if name else body

    seq = [(None, None), ("v1", "PUT"), (None, "PUT"), (None, None), (None, None), (None, None)]
    for i, (p, m) in enumerate(seq):
        a = norm(c.attempt("h1", p, m, req_id="id-%d" % i), "h1")
        b = norm(attempt_h2(node, "h2", p, m, req_id="id-%d" % i), "h2")
        assert a == b, (i, a, b)
    assert [norm(c.attempt("h1"), "h1")[0], norm(attempt_h2(node, "h2"), "h2")[0]] == [429, 429]
    # malformed and failed answers alike too
    assert norm(c.attempt(None, req_id="x"), "") == norm(attempt_h2(node, None, req_id="x"), "")
    c.close()


def test_bad_requests_and_req_id(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/ok/quota": q(5)})
    node = levee_node(node_factory, etcd, prefix)
    c = H1(node)
    st, h, body = c.attempt(None, req_id="no-res")
    assert (st, body, h["x-req-id"]) == (400, b"missing X-Resource header\n", "no-res")
    st, h, body = c.attempt("", req_id="empty")          # an empty header is absent
    assert st == 400
    st, h, body = c.attempt("ok", verb="GET")
    assert st == 405
    st, h, body = c.attempt("ok", req_id="big", extra={"X-Padding": "a" * 20000})
    assert st == 431
    c = H1(node)
    st, h, body = c.attempt("x" * 3000, "p" * 3000)      # together over 2048 bytes
    assert st == 400
    st, h, body = c.attempt("nope", req_id="r-500")      # no quota, mode error
    assert (st, h["x-req-id"], body) == (500, "r-500", b"no quota for resource\n")
    st, h, body = c.attempt("ok", req_id="r-200")
    assert (st, h["x-req-id"]) == (200, "r-200")
    m = metrics(node)
    assert m['sluice_levee_attempts_total{outcome="malformed"}'] >= 3
    assert m['sluice_levee_attempts_total{outcome="failed"}'] >= 1
    c.close()


def write_yaml(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def test_quota_file_and_sighup_reload(node_factory, tmp_path):
    path = str(tmp_path / "quotas.yaml")
    write_yaml(path, "limit:\n  key:\n    f:\n      quota: {rate: 0}\n")
    node = node_factory(["--standalone", "--workers", "2", "--quota-file", path])
    c = H1(node)
    assert c.attempt("f")[0] == 429
    assert c.attempt("g")[0] == 500  # no key_default
    write_yaml(path, "limit:\n  key_default: {rate: 0.1, burst: 1}\n  key:\n"
                     "    f:\n      quota: {rate: 100, burst: 10}\n")
    assert c.attempt("f")[0] == 429  # not before the signal
    node.signal(signal.SIGHUP)
    wait_for(lambda: c.attempt("f")[0] == 200, timeout=5, what="the reload")
    n, h = exhaust(c, "g")
    assert (n, policy_names(h)) == (2, ["g"])
    # a bad file is refused and the quotas in use stay
    write_yaml(path, "limit:\n  key:\n    f:\n      quota: {rate: 0, brust: 1}\n")
    node.signal(signal.SIGHUP)
    wait_for(lambda: "reload failed" in node.logs(), timeout=5, what="the refusal")
    assert c.attempt("f")[0] == 200
    c.close()


@pytest.mark.parametrize("mode,status", [("allow", 200), ("deny", 429), ("error", 500)])
def test_no_quota_modes(node_factory, tmp_path, mode, status):
    path = str(tmp_path / "q.yaml")
    write_yaml(path, "limit:\n  key:\n    known:\n      quota: {rate: 100}\n")
    node = node_factory(["--standalone", "--workers", "1", "--quota-file", path,
                         "--no-quota", mode])
    c = H1(node)
    st, h, body = c.attempt("unknown", req_id="nq")
    assert st == status
    assert h["x-req-id"] == "nq"
    if mode == "deny":
        assert h["retry-after"] == "1"
        assert "ratelimit" not in h and "ratelimit-policy" not in h
    if mode == "error":
        assert body == b"no quota for resource\n"
    assert c.attempt("known")[0] == 200
    c.close()


def test_quota_cli_rps_rule_applied_by_node(node_factory, etcd, prefix):
    node = levee_node(node_factory, etcd, prefix)
    base = [SLUICE, "quota", "--storage-addrs", etcd.url, "--storage-prefix", prefix]
    subprocess.run(base + ["set", "cli", "--rate", "0"], check=True, capture_output=True,
                   timeout=20)
    c = H1(node)
    wait_for(lambda: c.attempt("cli")[0] == 429, timeout=5, what="rate 0")
    subprocess.run(base + ["set", "cli", "--rps", "6000", "--group-size", "4"], check=True,
                   capture_output=True, timeout=20)
    assert json.loads(etcd.get(prefix + "/limit/key/cli/quota")) == {"rate": 6600, "burst": 165}
    wait_for(lambda: c.attempt("cli")[0] == 200, timeout=5, what="the new quota")
    out = subprocess.run(base + ["get", "cli"], check=True, capture_output=True, text=True,
                         timeout=20).stdout
    assert "6600" in out and "165" in out
    # A pipelined burst outruns 6600/s; the 429 names the quota the node applied.
    statuses, h = pipelined(node, ["cli"] * 3000, conns=1, chunk=3000)
    assert statuses.count(200) >= 166 and statuses.count(429) > 0
    assert sf_items(h["ratelimit-policy"]) == [("cli", {"q": 6600, "w": 1,
                                                        "sluice-burst": 165})]
    c.close()


def test_attempt_cli_exit_codes(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/ok/quota": q(20, rate=100),
                              "limit/key/no/quota": {"rate": 0}})
    node = levee_node(node_factory, etcd, prefix)

    def run(*args):
        return subprocess.run([SLUICE, "attempt"] + list(args), capture_output=True, text=True,
                              timeout=30)

    for extra in ([], ["--http2"]):
        assert run("--addr", node.addr, "--resource", "ok", *extra).returncode == 0
        r = run("--addr", node.addr, "--resource", "no", *extra)
        assert r.returncode == 1, r.stdout + r.stderr
        assert run("--addr", node.addr, "--resource", "unknown", *extra).returncode == 3  # 500
    assert run("--addr", node.addr).returncode == 2                      # usage: no --resource
    assert run("--addr", node.addr, "--resource", "ok", "--bogus").returncode == 2
    dead = "127.0.0.1:%d" % free_port()
    assert run("--addr", dead, "--resource", "ok", "--timeout", "2000").returncode == 3
    r = run("--addr", node.addr, "--resource", "no", "--req-id", "cli-1", "--json")
    assert r.returncode == 1
    j = json.loads(r.stdout)
    assert j["outcome"] == "rejected" and j["http_status"] == 429


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    raise AssertionError("no VmRSS")


def test_flood_of_distinct_resources_stays_bounded(node_factory, tmp_path):
    """200k distinct X-Resource values against --gc-max-keys 10000: keys never exceed the cap,
    the rest are evicted (counted) and the process does not grow with the flood."""
    path = str(tmp_path / "q.yaml")
    # one request per 100 s per resource: no key expires during the test, so only the cap bounds
    write_yaml(path, "limit:\n  key_default: {rate: 0.01, burst: 0}\n")
    node = node_factory(["--standalone", "--workers", "2", "--quota-file", path,
                         "--gc-max-keys", "10000"])
    statuses, _ = pipelined(node, ["warm-%d" % i for i in range(20000)])
    assert statuses.count(200) == 20000
    rss_warm = rss_kib(node.proc.pid)
    t = time.time()
    statuses, _ = pipelined(node, ["flood-%d" % i for i in range(200000)])
    took = time.time() - t
    assert statuses.count(200) == 200000  # every resource is new: all admitted
    rss_end = rss_kib(node.proc.pid)
    m = metrics(node)
    keys = m['sluice_keys{kind="keys"}']
    # burst 0: every key is at its limit after its hit, so evictions count as evicted_limited
    evicted = (m['sluice_keys_removed_total{reason="evicted"}'] +
               m['sluice_keys_removed_total{reason="evicted_limited"}'])
    assert keys <= 10000
    assert evicted >= 220000 - 10000
    assert rss_end - rss_warm < 16 * 1024, (rss_warm, rss_end)
    assert rss_end < 128 * 1024
    print("flood: 200k distinct resources in %.2fs, keys %d, evicted %d, rss %d -> %d KiB"
          % (took, keys, evicted, rss_warm, rss_end))


def test_idle_keys_collected(node_factory, tmp_path):
    """--gc-period / --gc-collect: keys without hits for gc-collect go at the next collection
    (counted as collected), keys still in use stay."""
    path = str(tmp_path / "q.yaml")
    write_yaml(path, "limit:\n  key_default: {rate: 0.01, burst: 1000}\n")
    node = node_factory(["--standalone", "--workers", "2", "--quota-file", path,
                         "--gc-period", "200ms", "--gc-collect", "2s"])
    statuses, _ = pipelined(node, ["idle-%d" % i for i in range(1000)] +
                            ["busy-%d" % i for i in range(10)])
    assert statuses.count(200) == 1010
    assert metrics(node)['sluice_keys{kind="keys"}'] == 1010
    c = H1(node)
    t = time.time()

    def collected():
        for i in range(10):  # keep the busy keys busy
            assert c.attempt("busy-%d" % i)[0] == 200
        return metrics(node)['sluice_keys{kind="keys"}'] == 10

    wait_for(collected, timeout=15, step=0.2, what="the idle keys to be collected")
    assert time.time() - t >= 1.0  # not before they were idle 2 s (minus the time to send them)
    m = metrics(node)
    assert m['sluice_keys_removed_total{reason="collected"}'] == 1000
    assert m['sluice_keys_removed_total{reason="evicted"}'] == 0
    c.close()


def test_attempt_headers_always(node_factory, tmp_path):
    """--attempt-headers always: a 200 carries RateLimit-Policy and RateLimit too; the 429 is
    unchanged; the default (rejections) keeps 200s bare."""
    path = str(tmp_path / "q.yaml")
    write_yaml(path, "limit:\n  key:\n    hdr:\n      quota: {rate: 0.1, burst: 2}\n")
    node = node_factory(["--standalone", "--workers", "1", "--quota-file", path,
                         "--attempt-headers", "always"])
    c = H1(node)
    seen = []
    for _ in range(3):
        st, h, body = c.attempt("hdr")
        assert (st, body) == (200, b"")
        assert "retry-after" not in h
        assert sf_items(h["ratelimit-policy"]) == [("hdr", {"q": 1, "w": 10, "sluice-burst": 2})]
        (name, params), = sf_items(h["ratelimit"])
        assert name == "hdr" and 1 <= params["t"] <= 30
        seen.append(params["r"])
    assert seen == [2, 1, 0]
    st, h, _ = c.attempt("hdr")
    assert st == 429 and h["retry-after"] == "10"
    assert sf_items(h["ratelimit"]) == [("hdr", {"r": 0, "t": 10})]
    c.close()
    plain = node_factory(["--standalone", "--workers", "1", "--quota-file", path])
    c = H1(plain)
    st, h, _ = c.attempt("hdr")
    assert st == 200 and "ratelimit" not in h and "ratelimit-policy" not in h
    c.close()

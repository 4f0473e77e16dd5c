# SPDX-License-Identifier: Apache-2.0
"""The admin status page (docs/operations.md, "Status page") in a real headless browser: Debian's
chromium driven by chromedriver's W3C WebDriver HTTP API over urllib (no selenium package).

Two sluiced nodes in a static cluster whose peer list also names a third address where nothing
listens, a quota file with a shadow switch, and some traffic: rejections, would-be rejections
(one on a key that is markup, `<img src=x onerror=alert(1)>`), calls forwarded to the live peer
and to the dead one. Then the page on the first node's admin port: it loads with no console
message at all (no script error, no CSP violation, no failed load), every figure it shows equals
what the JSON endpoints give (/v1/admin/status, /v1/admin/top, /v1/admin/killswitch), the markup
key shows as text and no element came from it, and a screenshot is written (into docs/img/status.png
when SLUICE_UPDATE_SCREENSHOT=1). With an admin token, the page is served without it and asks for
it; its data endpoint wants it like every admin call.
"""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, free_port, http, needs, secret_file, wait_for

CHROMIUM = os.environ.get("SLUICE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SLUICE_CHROMEDRIVER", "/usr/bin/chromedriver")
XSS = "<img src=x onerror=alert(1)>"
TOKEN = "status-page-token-0123456789abcdef"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C WebDriver element reference key

pytestmark = needs(CHROMIUM, CHROMEDRIVER)

QUOTAS = """
limit:
  key_default: {rate: 0.5, burst: 3}
killswitch:
  dark-launch: shadow
  old-api: on
"""


class Browser:
    """One chromium session through chromedriver (W3C WebDriver over HTTP)."""

    def __init__(self):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.profile = tempfile.mkdtemp(prefix="sluice-chromium-")
        self.driver = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.sid = None
        if not wait_for(self._up, 10, 0.05):
            self.close()
            raise RuntimeError("chromedriver did not start")
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--user-data-dir=" + self.profile,
                "--window-size=1280,1400"]
        caps = {"browserName": "chrome",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
                "goog:loggingPrefs": {"browser": "ALL"}}
        self.sid = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})[
            "sessionId"]

    def _up(self):
        try:
            with urllib.request.urlopen(self.base + "/status", timeout=1) as r:
                return json.loads(r.read())["value"].get("ready", False)
        except (OSError, ValueError):
            return False

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            raise AssertionError("WebDriver %s %s: %s" % (method, path, e.read()[:500]))

    def session(self, method, path, body=None):
        return self._call(method, "/session/%s%s" % (self.sid, path), body)

    def go(self, url):
        self.session("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.session("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css):
        ref = self.session("POST", "/element", {"using": "css selector", "value": css})
        assert ELEMENT in ref, ref
        return ref[ELEMENT]

    def type(self, css, text):
        self.session("POST", "/element/%s/value" % self.find(css), {"text": text})

    def click(self, css):
        self.session("POST", "/element/%s/click" % self.find(css), {})

    def console(self):
        """Console and network messages since the last call."""
        return self.session("POST", "/se/log", {"type": "browser"})

    def screenshot(self):
        return base64.b64decode(self.session("GET", "/screenshot"))

    def wait_polls(self, n, timeout=10):
        """Wait until the page has rendered n more answers of /v1/admin/status."""
        def polls():
            return int(self.js("return document.body.dataset.polls || '0'"))
        start = polls()
        assert wait_for(lambda: polls() >= start + n, timeout, 0.1), "the page stopped polling"

    def close(self):
        if self.sid:
            try:
                self._call("DELETE", "/session/" + self.sid)
            except (AssertionError, OSError):
                pass
        self.driver.terminate()
        try:
            self.driver.wait(10)
        except subprocess.TimeoutExpired:
            self.driver.kill()
            self.driver.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


# What the page shows, read from its DOM: the figures by their data-k path, and each table's rows
# as lists of cell texts.
DOM = """
const rows = id => [...document.getElementById(id).rows].map(r => [...r.cells].map(c => c.textContent));
const figs = {};
document.querySelectorAll('[data-k]').forEach(e => { figs[e.dataset.k] = e.textContent; });
return {figs: figs, peers: rows('peers'), shed: rows('shed'), switches: rows('switches'),
        limits: rows('limits'), keys: rows('keys'), imgs: document.querySelectorAll('img').length,
        health: document.getElementById('health').textContent,
        instance: document.getElementById('instance').textContent,
        login: getComputedStyle(document.getElementById('login')).display,
        banner: document.getElementById('banner').textContent};
"""


def admin_json(addr, path, token=TOKEN):
    h = {"Authorization": "Bearer " + token} if token else {}
    status, _, body = http("GET", "http://%s%s" % (addr, path), headers=h)
    assert status == 200, body
    return json.loads(body)


def gub(addr, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % addr,
                           json.dumps({"requests": reqs}))
    assert status == 200, body
    return json.loads(body)["responses"]


def test_status_page_shows_what_the_endpoints_give(browser, node_factory, tmp_path):
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(QUOTAS)
    addrs = ["127.0.0.1:%d" % free_port() for _ in range(3)]  # the third: nothing listens
    peers = ",".join(addrs)
    nodes = []
    tok = secret_file(tmp_path / "admin.token", TOKEN + "\n")
    for a in addrs[:2]:
        admin = "127.0.0.1:%d" % free_port()
        n = node_factory(["--workers", "2", "--discovery", "static", "--peers", peers,
                          "--quota-file", str(quotas), "--admin-addr", admin,
                          "--admin-token-file", tok, "--instance-id", "node-%d" % len(nodes)],
                         port=int(a.rsplit(":", 1)[1]))
        n.admin_addr = admin
        nodes.append(n)
    a = nodes[0]

    # traffic: rejections (limit 3), would-be rejections in shadow mode, keys owned by the live
    # peer and by the dead one (answered with errors), and /attempt on a resource that is markup
    # (over its quota: the limit and the key are both the markup)
    item = {"name": "checkout", "hits": 1, "limit": 3, "duration": 60000}
    dark = {"name": "dark-launch", "hits": 1, "limit": 1, "duration": 60000}

    def burst(i):
        gub(a.addr, [dict(item, unique_key="user-%d" % (i % 3))] * (i % 5 + 1) +
            [dict(dark, unique_key="user-%d" % (i % 4))] * 2 +
            [dict(item, name="spread", unique_key="k%d" % (i % 40))])
        http("POST", "http://%s/attempt" % a.addr, b"", {"X-Resource": XSS})

    for i in range(12):
        burst(i)
    top = admin_json(a.admin_addr, "/v1/admin/top")
    assert any(k["key"] == XSS for x in top["limits"] for k in x["keys"]), top
    # steady traffic on keys owned by the live nodes (the dead one would slow it down), some of
    # them over their limit: the chart moves while the page loads
    browse = {"name": "browse", "hits": 1, "limit": 10 ** 9, "duration": 60000}
    search = {"name": "search", "hits": 1, "limit": 50, "duration": 60000}
    cand = [dict(browse, unique_key="page-%d" % j) for j in range(60)] + \
        [dict(search, unique_key="query-%d" % j) for j in range(30)]
    owners = [r.get("metadata", {}).get("owner") for r in gub(a.addr, [dict(c, hits=0)
                                                                      for c in cand])]
    live = [c for c, o in zip(cand, owners) if o in addrs[:2] and c["name"] == "browse"]
    mine = [c for c, o in zip(cand, owners) if o == a.addr and c["name"] == "search"]
    assert mine, owners
    stop = threading.Event()

    def steady():
        i = 0
        while not stop.wait(0.02):
            gub(a.addr, live + [mine[0]] * 3)
            i += 1
    traffic = threading.Thread(target=steady)
    traffic.start()
    try:
        status_page_checks(browser, a, addrs, quotas, stop, traffic, tmp_path)
    finally:
        stop.set()
        traffic.join()


def status_page_checks(browser, a, addrs, quotas, stop, traffic, tmp_path):
    # the page, and its headers: served without a token, under a strict CSP
    url = "http://%s/status" % a.admin_addr
    status, h, body = http("GET", url)
    assert status == 200 and h["content-type"] == "text/html; charset=utf-8"
    csp = h["content-security-policy"]
    nonce = csp.split("'nonce-", 1)[1].split("'", 1)[0]
    assert "default-src 'self'" in csp and "script-src 'nonce-%s'" % nonce in csp
    assert "unsafe" not in csp and ('<script nonce="%s">' % nonce).encode() in body
    assert h["x-content-type-options"] == "nosniff" and h["cache-control"] == "no-store"
    assert http("GET", "http://%s/" % a.admin_addr)[0] == 200
    assert http("POST", url, b"", {"Content-Type": "application/json"})[0] == 405
    assert http("POST", url, b"")[0] == 403  # a form's POST: refused before anything else
    assert http("GET", "http://%s/status" % a.addr)[0] == 404  # never on the client port

    browser.console()  # start from an empty log
    browser.go(url)
    # over TCP the page asks for the admin token (kept in the tab), then polls with it
    assert wait_for(lambda: browser.js(DOM)["login"] == "block", 5, 0.1)
    browser.type("#token", TOKEN)
    browser.click("#login button")
    browser.wait_polls(4)  # three rates in the chart
    png = browser.screenshot()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10000
    (tmp_path / "status.png").write_bytes(png)
    if os.environ.get("SLUICE_UPDATE_SCREENSHOT") == "1":
        with open(os.path.join(ROOT, "docs", "img", "status.png"), "wb") as f:
            f.write(png)
    assert float(browser.js("return document.getElementById('rate-under').textContent")) > 0
    stop.set()  # the traffic stops: the counters stand still from the next answer on
    traffic.join()
    browser.wait_polls(2)
    shown = browser.js(DOM)
    doc = admin_json(a.admin_addr, "/v1/admin/status")
    top = admin_json(a.admin_addr, "/v1/admin/top")
    board = admin_json(a.admin_addr, "/v1/admin/killswitch")
    log = browser.console()
    assert log == [], log  # no script error, CSP violation or failed load

    # the node and its peers with their health
    assert shown["instance"] == doc["node"]["instance"] == "node-0"
    assert shown["figs"]["node.workers"] == "2"
    assert shown["health"] == ("healthy" if doc["health"]["healthy"] else "unhealthy") \
        == "unhealthy"
    assert [r[:3] for r in shown["peers"]] == [
        [p["addr"], "this node" if p["self"] else "peer", "healthy" if p["healthy"] else "failing"]
        for p in doc["peers"]]
    row = {r[0]: r for r in shown["peers"]}
    assert sorted(row) == sorted(addrs)
    assert row[a.addr][1:3] == ["this node", "healthy"]
    assert row[addrs[1]][1:4] == ["peer", "healthy", ""]
    dead = [p for p in doc["peers"] if p["addr"] == addrs[2]][0]
    assert row[addrs[2]][2] == "failing" and not dead["healthy"]
    assert row[addrs[2]][3].startswith(dead["error"] + " at ") and dead["error"]
    # the decisions (cumulative; the traffic has stopped)
    for k in ("under_limit", "over_limit", "errors", "keys", "forwarded"):
        assert shown["figs"]["decisions." + k] == str(doc["decisions"][k]), k
    assert doc["decisions"]["over_limit"] > 0 and doc["decisions"]["forwarded"] > 0
    # the shed level of each worker and the switches in force, as /v1/admin/killswitch says
    assert [r[:2] for r in shown["shed"]] == [[str(w["worker"]), "%.2f" % w["level"]]
                                             for w in board["shed"]]
    assert sorted(r for r in shown["switches"]) == sorted(
        [s["name"], s["mode"], s["origin"]] for s in board["switches"])
    assert ["dark-launch", "shadow", "source"] in shown["switches"]
    assert ["old-api", "killed", "source"] in shown["switches"]
    # the quota source
    q = doc["quotas"]
    assert q["mode"] == "file" and q["loaded"] and q["endpoint"] == str(quotas)
    for k in ("mode", "entries", "generation", "loads", "load_errors"):
        assert shown["figs"]["quotas." + k] == str(q[k]), k
    # the top: each row as /v1/admin/top gives it, the markup key as text
    rows = {(x["limit"], x["event"]): x for x in top["limits"]}
    assert len(shown["limits"]) == len(rows)
    for limit, event, total, busiest in shown["limits"]:
        x = rows[(limit, event)]
        assert total == str(x["total"]) and busiest == x["keys"][0]["key"]
    want = sorted([k["key"], x["limit"], x["event"], str(k["count"]), str(k["error"])]
                  for x in top["limits"] for k in x["keys"])
    assert sorted(shown["keys"]) == want
    assert [x for x in shown["keys"] if x[0] == XSS and x[1] == XSS and x[2] == "rejected"]
    assert [x for x in shown["limits"] if x[0] == XSS and x[3] == XSS]
    assert shown["imgs"] == 0  # the key made no element; an alert would have failed the calls
    assert browser.js("return document.title") == "sluice status"


def test_status_page_with_an_admin_token(browser, node_factory, tmp_path):
    tok = tmp_path / "admin.token"
    secret_file(tok, TOKEN + "\n")
    admin = "127.0.0.1:%d" % free_port()
    n = node_factory(["--workers", "1", "--standalone", "--admin-addr", admin,
                      "--admin-token-file", str(tok)])
    gub(n.addr, [{"name": "n", "unique_key": "k", "hits": 1, "limit": 1, "duration": 60000}] * 2)
    # the page holds no data: served without the token; its data wants it
    assert http("GET", "http://%s/status" % admin)[0] == 200
    assert http("GET", "http://%s/v1/admin/status" % admin)[0] == 401
    doc = admin_json(admin, "/v1/admin/status", TOKEN)
    assert doc["decisions"]["over_limit"] == 1 and doc["peers"] == []

    browser.console()
    browser.go("http://%s/status" % admin)
    assert wait_for(lambda: browser.js(DOM)["login"] == "block", 5, 0.1)
    assert browser.js(DOM)["banner"] == "This admin listener wants its token."
    browser.type("#token", "wrong-token-wrong-token-wrong-tok")
    browser.click("#login button")
    assert wait_for(lambda: browser.js(DOM)["banner"] == "The admin token was refused.", 5, 0.1)
    assert browser.js("return sessionStorage.length") == 0  # a refused token is not kept
    # the one 401 is the only message
    log = browser.console()
    assert len(log) == 1 and "401" in log[0]["message"], log
    browser.type("#token", TOKEN)
    browser.click("#login button")
    browser.wait_polls(2)
    shown = browser.js(DOM)
    assert shown["login"] == "none" and shown["banner"] == ""
    assert shown["figs"]["decisions.over_limit"] == "1"
    assert shown["figs"]["decisions.under_limit"] == "1"
    assert [r[1:3] for r in shown["peers"]] == [["this node (standalone)", "healthy"]]
    assert browser.console() == []

# SPDX-License-Identifier: Apache-2.0
"""Who is limited (docs/protection.md, "Who is limited"): a dark launch - a limit in shadow mode -
names the keys it would hit at GET /v1/admin/top (behind the admin token) and in `sluice top`;
sluice_limit_events_total carries the limit name, and names past --metrics-max-names count as
"other". Real sluiced processes, a few dozen requests each."""
import json
import subprocess

from conftest import SLUICE, free_port, http, secret_file

TOKEN = "top-secret-token-0123456789abcdef"

QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
  key:
    dark-quota: {quota: {rate: 0.1, burst: 1}}
killswitch:
  dark-quota: shadow
  dark-launch: shadow
"""


def get_rate_limits(node, reqs):
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                           json.dumps({"requests": reqs}))
    assert status == 200, body
    return json.loads(body)["responses"]


def metric(node, name, labels):
    _, _, body = http("GET", "http://%s/metrics" % node.addr)
    want = name + "{" + ",".join('%s="%s"' % kv for kv in labels.items()) + "} "
    for line in body.decode().splitlines():
        if line.startswith(want):
            return float(line.split()[-1])
    return 0.0


def top(node, query="", token=TOKEN):
    h = {"Authorization": "Bearer " + token} if token else {}
    return http("GET", "http://%s/v1/admin/top%s" % (node.admin_addr, query), headers=h)


def node_with(node_factory, tmp_path, *extra):
    q = tmp_path / "quotas.yaml"
    q.write_text(QUOTAS)
    tok = tmp_path / "admin.token"
    secret_file(tok, TOKEN + "\n")
    admin = "127.0.0.1:%d" % free_port()
    n = node_factory(["--workers", "2", "--standalone", "--quota-file", str(q),
                      "--admin-addr", admin, "--admin-token-file", str(tok)] + list(extra))
    n.admin_addr = admin
    n.token_file = str(tok)
    return n


def entry(doc, limit, event):
    found = [x for x in doc["limits"] if x["limit"] == limit and x["event"] == event]
    assert len(found) == 1, doc
    return found[0]


def test_dark_launch_names_the_keys_it_would_hit(node_factory, tmp_path):
    node = node_with(node_factory, tmp_path)
    # a Gubernator limit in shadow mode (killswitch "dark-launch: shadow"): 1 call per minute
    item = {"name": "dark-launch", "hits": 1, "limit": 1, "duration": 60000}
    heavy = get_rate_limits(node, [dict(item, unique_key="user-heavy")] * 20)
    light = get_rate_limits(node, [dict(item, unique_key="user-light")] * 4)
    calm = get_rate_limits(node, [dict(item, unique_key="user-calm")])
    assert all(x["status"] == "UNDER_LIMIT" for x in heavy + light + calm)  # nobody rejected
    # /attempt: a quota in shadow mode
    for _ in range(6):
        st, h, _ = http("POST", "http://%s/attempt" % node.addr, b"",
                        {"X-Resource": "dark-quota"})
        assert st == 200
    assert h.get("x-sluice-shadow") == "rate"

    # the admin endpoint wants the token
    assert top(node, token=None)[0] == 401
    assert top(node, token="wrong-token-wrong-token-wrong-tok")[0] == 401
    st, h, body = top(node)
    assert st == 200 and h["content-type"].startswith("application/json")
    doc = json.loads(body)
    assert doc["k"] == 32 and doc["half_life_ms"] == 60000
    gub = entry(doc, "dark-launch", "would_reject")
    assert gub["total"] == 19 + 3
    assert [(k["key"], k["count"], k["error"]) for k in gub["keys"]] == \
        [("user-heavy", 19, 0), ("user-light", 3, 0)]  # user-calm never went over
    att = entry(doc, "dark-quota", "would_reject")
    # burst 1: two pass, the other four would be rejected
    assert att["total"] == 4 and att["keys"] == [{"key": "dark-quota", "count": 4, "error": 0}]
    assert not [x for x in doc["limits"] if x["event"] == "rejected"]
    # one limit, one key
    doc = json.loads(top(node, "?limit=dark-launch&n=1")[2])
    assert [x["limit"] for x in doc["limits"]] == ["dark-launch"]
    assert [k["key"] for k in doc["limits"][0]["keys"]] == ["user-heavy"]
    assert top(node, "?n=0")[0] == 400

    # per-limit labels
    assert metric(node, "sluice_limit_events_total",
                  {"limit": "dark-launch", "event": "would_reject"}) == 22
    assert metric(node, "sluice_limit_events_total",
                  {"limit": "dark-quota", "event": "would_reject"}) == 4

    # the CLI: a table, and the JSON as it is
    out = subprocess.run([SLUICE, "top", "--admin-addr", node.admin_addr, "--admin-token-file",
                          node.token_file], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    rows = [ln.split() for ln in out.stdout.splitlines()]
    assert rows[0][:4] == ["LIMIT", "EVENT", "TOTAL", "KEY"]
    assert ["dark-launch", "would_reject", "22", "user-heavy", "19", "0"] in rows
    assert ["dark-launch", "would_reject", "22", "user-light", "3", "0"] in rows
    out = subprocess.run([SLUICE, "top", "--admin-addr", node.admin_addr, "--admin-token-file",
                          node.token_file, "--json", "--limit", "dark-quota"],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert [x["limit"] for x in json.loads(out.stdout)["limits"]] == ["dark-quota"]
    out = subprocess.run([SLUICE, "top", "--admin-addr", node.admin_addr],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 1 and ("401" in out.stderr or "unauthorized" in out.stderr)


def test_enforced_rejections_and_the_cardinality_guard(node_factory, tmp_path):
    node = node_with(node_factory, tmp_path, "--metrics-max-names", "1", "--top-keys", "2")
    item = {"hits": 1, "limit": 1, "duration": 60000}
    r = get_rate_limits(node, [dict(item, name="first", unique_key="a")] * 3 +
                        [dict(item, name="second", unique_key="b")] * 2 +
                        [dict(item, name="third", unique_key="c")] * 2)
    assert [x["status"] for x in r].count("OVER_LIMIT") == 2 + 1 + 1
    assert metric(node, "sluice_limit_events_total", {"limit": "first", "event": "rejected"}) == 2
    assert metric(node, "sluice_limit_events_total", {"limit": "other", "event": "rejected"}) == 2
    assert metric(node, "sluice_limit_events_total", {"limit": "second", "event": "rejected"}) == 0
    doc = json.loads(top(node)[2])
    assert doc["k"] == 2
    assert entry(doc, "first", "rejected")["keys"] == [{"key": "a", "count": 2, "error": 0}]
    other = entry(doc, "other", "rejected")
    assert other["total"] == 2
    assert sorted(k["key"] for k in other["keys"]) == ["b", "c"]

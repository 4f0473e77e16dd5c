# SPDX-License-Identifier: Apache-2.0
"""The operations kit (docs/ops/): the Prometheus alert rules pass `promtool test rules`
(tests/ops/alerts_test.yml), where every alert has a case that fires and one that does not, and
promtool fails them when a rule is broken; every alert has a description and a runbook section in
docs/operations.md; the Grafana dashboard is valid, has panels for each part and names the
alerts; every series the rules and the dashboard name is registered in src/ and is one sluiced
exports — in a real sluiced's /metrics or in docs/operations.md's metric table (families that
appear only in a cluster, with TLS, Redis, etcd...)."""
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
from conftest import SLUICED, Node  # noqa: E402
from needs import require, require_built  # noqa: E402
from test_docs import anchors  # noqa: E402  (GitHub's heading slugs)

RULES = os.path.join(ROOT, "docs", "ops", "sluice-alerts.yml")
DASHBOARD = os.path.join(ROOT, "docs", "ops", "sluice-dashboard.json")
TESTS = os.path.join(HERE, "alerts_test.yml")
PROMTOOL = shutil.which("promtool")

SERIES = re.compile(r"\bsluice_[a-z0-9_]+")
# series Prometheus makes itself, not sluiced: the scrape's health
PROMETHEUS_SERIES = re.compile(r"\bup\{")


def base_name(series):
    """A histogram's _bucket/_sum/_count series belong to its family."""
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix):
            return series[: -len(suffix)]
    return series


def documented_families():
    text = open(os.path.join(ROOT, "docs", "operations.md")).read()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    names = set()
    for line in section.splitlines():
        if line.startswith("| `sluice_"):
            names.update(re.findall(r"`(sluice_[a-z0-9_]+)`", line.split("|")[1]))
    return names


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Families a real sluiced serves (with quotas, so the quota source series appear) plus the
    documented ones."""
    require_built(SLUICED)
    q = tmp_path_factory.mktemp("ops") / "quotas.yaml"
    q.write_text("limit:\n  key:\n    demo: {quota: {rate: 1}}\n")
    node = Node(["--workers", "1", "--standalone", "--quota-file", str(q)]).start()
    try:
        with urllib.request.urlopen("http://%s/metrics" % node.addr, timeout=5) as r:
            body = r.read().decode()
    finally:
        node.stop()
    served = {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", body, re.M)}
    assert "sluice_calls_total" in served and "sluice_decisions_total" in served, served
    docs = documented_families()
    assert len(docs) > 30, docs
    return served | docs


def registered_in_source():
    """Every sluice_* name a string literal in src/ holds (the registrations)."""
    names = set()
    for d, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if f.endswith(".c"):
                names.update(re.findall(r'"(sluice_[a-z0-9_]+)', open(os.path.join(d, f)).read()))
    return names


def rules():
    import yaml
    doc = yaml.safe_load(open(RULES))
    return [r for g in doc["groups"] for r in g["rules"]]


def rule_exprs():
    return [(r["alert"], r["expr"]) for r in rules()]


def dashboard_exprs():
    d = json.load(open(DASHBOARD))
    out = []
    for p in d["panels"]:
        for t in p["targets"]:
            out.append((p["title"], t["expr"]))
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            out.append((v["name"], q["query"]))
    return out


def test_alert_rules_pass_promtool():
    require("promtool")
    out = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run([PROMTOOL, "test", "rules", TESTS], capture_output=True, text=True,
                         cwd=HERE)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_promtool_catches_a_broken_rule(tmp_path):
    """The tests can fail: a rule whose threshold no longer fires where the test expects."""
    require("promtool")
    (tmp_path / "docs" / "ops").mkdir(parents=True)
    (tmp_path / "tests" / "ops").mkdir(parents=True)
    rules = open(RULES).read()
    assert "> 0.25" in rules
    (tmp_path / "docs" / "ops" / "sluice-alerts.yml").write_text(rules.replace("> 0.25", "> 0.75"))
    shutil.copy(TESTS, tmp_path / "tests" / "ops" / "alerts_test.yml")
    out = subprocess.run([PROMTOOL, "test", "rules", "alerts_test.yml"], capture_output=True,
                         text=True, cwd=tmp_path / "tests" / "ops")
    assert out.returncode != 0, out.stdout
    assert "SluiceRejectingMuch" in out.stdout + out.stderr


def test_every_alert_has_a_test():
    tested = set(re.findall(r"alertname: (\w+)", open(TESTS).read()))
    assert {name for name, _ in rule_exprs()} <= tested


def test_every_alert_fires_and_does_not_fire():
    """Each alert has an eval_time where it must fire and one where it must not."""
    import yaml
    fires, quiet = set(), set()
    for group in yaml.safe_load(open(TESTS))["tests"]:
        for case in group["alert_rule_test"]:
            (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {name for name, _ in rule_exprs()}
    assert names - fires == set(), "alerts no case makes fire"
    assert names - quiet == set(), "alerts no case checks quiet"


def test_every_alert_has_a_description_and_a_runbook():
    sections = anchors(os.path.join(ROOT, "docs", "operations.md"))
    assert "runbooks" in sections
    for r in rules():
        ann = r.get("annotations", {})
        assert len(ann.get("description", "")) > 40, r["alert"]
        url = ann.get("runbook_url", "")
        page, _, anchor = url.partition("#")
        assert page == "docs/operations.md" and anchor == r["alert"].lower(), (r["alert"], url)
        assert anchor in sections, "%s: no runbook section %s in docs/operations.md" % (
            r["alert"], anchor)


def test_alerts_cover_the_parts():
    """issue 26: target down, Redis errors and fail-open, RLS config load errors,
    evicted_limited, TLS certificate failures, paused accepts"""
    exprs = " ".join(e for _, e in rule_exprs())
    for needle in ("up{", "sluice_redis_errors_total", "sluice_redis_fail_open_total",
                   "sluice_rls_config_load_errors_total", 'reason="evicted_limited"',
                   'sluice_tls_handshakes_total{result="cert"}', "sluice_redis_tls_failures_total",
                   "sluice_accept_paused_total",
                   # issue 25's: the peer API refusing calls, gossip failing its checks, the
                   # request-memory bound at work
                   "sluice_peer_refused_total", "sluice_gossip_dropped_total",
                   "sluice_request_memory_events_total"):
        assert needle in exprs, needle


def test_dashboard_is_valid():
    d = json.load(open(DASHBOARD))
    assert d["uid"] and d["title"] and d["schemaVersion"] >= 30
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), ids
    cells = {}
    for p in d["panels"]:
        assert p["type"] in ("timeseries", "stat", "gauge", "table", "row"), p["title"]
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}", p["title"]
        g = p["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and g["x"] >= 0 and g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "%s overlaps %s" % (p["title"], cells[(x, y)])
                cells[(x, y)] = p["title"]
    # panels for each part (issue 26: Envoy RLS, Redis, gossip, TLS)
    exprs = " ".join(e for _, e in dashboard_exprs())
    for family in ("sluice_rls_descriptors_total", "sluice_rls_config_load_errors_total",
                   "sluice_redis_errors_total", "sluice_redis_fail_open_total",
                   "sluice_gossip_members", "sluice_gossip_probes_total",
                   "sluice_tls_handshakes_total", "sluice_accept_paused_total"):
        assert family in exprs, family
    # each alert on sluice's series is named by a panel's description, and only real alerts are
    named = set()
    for p in d["panels"]:
        named.update(re.findall(r"\bSluice[A-Z]\w+", p.get("description", "")))
    alerts = {name for name, expr in rule_exprs() if SERIES.search(expr)}
    assert alerts - named == set(), "alerts no panel names"
    assert named - {name for name, _ in rule_exprs()} == set(), "panels name unknown alerts"


@pytest.mark.parametrize("which", ["alerts", "dashboard"])
def test_expressions_name_only_exported_series(exported, which):
    exprs = rule_exprs() if which == "alerts" else dashboard_exprs()
    assert len(exprs) >= 10
    source = registered_in_source()
    for where, expr in exprs:
        names = {base_name(s) for s in SERIES.findall(expr)}
        assert names or PROMETHEUS_SERIES.search(expr), "%s: %r names no sluice series" % (
            where, expr)
        unknown = names - exported
        assert not unknown, "%s: %s not exported by sluiced" % (where, sorted(unknown))
        unregistered = names - source
        assert not unregistered, "%s: %s registered nowhere in src/" % (where, sorted(unregistered))


def test_the_check_catches_an_unknown_series(exported):
    names = {base_name(s) for s in SERIES.findall('rate(sluice_decision_total[5m])')}
    assert names - exported == {"sluice_decision_total"}

# SPDX-License-Identifier: Apache-2.0
"""The operations kit (docs/ops/): the Prometheus alert rules pass `promtool test rules`
(tests/ops/alerts_test.yml), and promtool fails them when a rule is broken; every series the
rules and the Grafana dashboard name is one sluiced exports — in a real sluiced's /metrics or in
docs/operations.md's metric table (families that appear only in a cluster, with TLS, etcd...)."""
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

RULES = os.path.join(ROOT, "docs", "ops", "sluice-alerts.yml")
DASHBOARD = os.path.join(ROOT, "docs", "ops", "sluice-dashboard.json")
TESTS = os.path.join(HERE, "alerts_test.yml")
PROMTOOL = shutil.which("promtool")

SERIES = re.compile(r"\bsluice_[a-z0-9_]+")


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


def rule_exprs():
    import yaml
    doc = yaml.safe_load(open(RULES))
    return [(r["alert"], r["expr"]) for g in doc["groups"] for r in g["rules"]]


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


@pytest.mark.parametrize("which", ["alerts", "dashboard"])
def test_expressions_name_only_exported_series(exported, which):
    exprs = rule_exprs() if which == "alerts" else dashboard_exprs()
    assert len(exprs) >= 10
    for where, expr in exprs:
        names = {base_name(s) for s in SERIES.findall(expr)}
        assert names, "%s: %r names no sluice series" % (where, expr)
        unknown = names - exported
        assert not unknown, "%s: %s not exported by sluiced" % (where, sorted(unknown))


def test_the_check_catches_an_unknown_series(exported):
    names = {base_name(s) for s in SERIES.findall('rate(sluice_decision_total[5m])')}
    assert names - exported == {"sluice_decision_total"}

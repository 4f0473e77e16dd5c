# SPDX-License-Identifier: Apache-2.0
"""The soak in `make test`: the checker on made-up records (it must flag an overshoot, a false
rejection, and accept what a fault's bound allows), the bounds table against docs/cluster.md,
and the 60-second profile of the nemesis soak (root: network namespaces and nftables)."""
import json
import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
import bounds  # noqa: E402
import check  # noqa: E402
from needs import machine_skip, require, require_module  # noqa: E402

T0 = 1_700_000_000_000.0


def plan(*keys):
    return {"nodes": ["a", "b", "c", "d", "e"], "keys": list(keys)}


TB = {"alg": "tb", "name": "t", "key": "k", "limit": 4, "duration": 2000}


def tb_rows(n_adm, n_rej=0, reset=T0 + 2000, node=0, start=T0 + 10):
    rows = [[0, start + i, start + i + 2, 1, node, reset, "g"] for i in range(n_adm)]
    rows += [[0, start + 100 + i, start + 102 + i, 0, node, reset, "g"] for i in range(n_rej)]
    return rows


def test_checker_passes_the_limit():
    rep = check.check(plan(TB), tb_rows(4, 3), [])
    assert rep["violations"] == [] and rep["decisions"] == 7


def test_checker_flags_one_admission_too_many():
    rep = check.check(plan(TB), tb_rows(5), [])
    assert [v["type"] for v in rep["violations"]] == ["overshoot"]
    assert rep["violations"][0]["admitted"] == 5 and rep["violations"][0]["allowed"] == 4


def test_checker_counts_a_second_owners_fresh_window():
    # the old owner admitted 4 (reset at +2000); a new owner starts afresh at +500 and admits 4
    rows = tb_rows(4) + tb_rows(4, reset=T0 + 2500, node=1, start=T0 + 500)
    assert check.check(plan(TB), rows, [])["violations"]
    kill = [{"kind": "kill", "nodes": [0], "start": T0, "end": T0 + 400}]
    rep = check.check(plan(TB), rows, kill)
    assert rep["violations"] == []
    assert rep["max_overshoot"]["kill"] == 4
    # beyond what the fault allows (3 L = 12 extra): flagged, naming the fault
    rows += tb_rows(13, reset=T0 + 2600, node=2, start=T0 + 550)
    v = check.check(plan(TB), rows, kill)["violations"]
    assert v and v[0]["faults"] and v[0]["faults"][0].startswith("kill[0]")


def test_checker_flags_a_false_rejection():
    rep = check.check(plan(TB), tb_rows(2, 1), [])
    assert [v["type"] for v in rep["violations"]] == ["false_rejection"]
    # under a fault it is not a false rejection
    f = [{"kind": "isolate", "nodes": [0], "start": T0, "end": T0 + 100}]
    assert check.check(plan(TB), tb_rows(2, 1), f)["violations"] == []


def test_checker_leaky_and_gcra_windows():
    lb = {"alg": "lb", "name": "l", "key": "k", "limit": 4, "duration": 2000}
    # burst 4 (+1 rounding) + refill 4 per 2 s: 10 in one 2 s window is too many
    rows = [[0, T0 + i * 10, T0 + i * 10 + 1, 1, 0, 0, "j"] for i in range(10)]
    assert check.check(plan(lb), rows, [])["violations"]
    assert check.check(plan(lb), rows[:8], [])["violations"] == []
    lv = {"alg": "levee", "name": "lv", "key": "", "rate": 1.0, "burst": 1, "df": 2,
          "group": [0, 1]}
    # 2 limiters x (burst 1 + 1) + 1/s x 4 s = 8 allowed in a 4 s window
    rows = [[0, T0 + i * 100, T0 + i * 100 + 1, 1, i % 2, 0, "a"] for i in range(9)]
    assert check.check(plan(lv), rows, [])["violations"]
    assert check.check(plan(lv), rows[:8], [])["violations"] == []


def test_bounds_table_matches_docs():
    text = open(os.path.join(ROOT, "docs", "cluster.md")).read()
    sec = text[text.index("## The soak"):]
    table = sec[sec.index("**The bounds**"):sec.index("GLOBAL keys add")]
    rows = dict(re.findall(r"^\| `(\w+)` \| (\d+) L \|", table, re.M))
    assert {k: int(v) for k, v in rows.items()} == {k: v[0] for k, v in bounds.BOUNDS.items()}
    assert ("%g s" % bounds.GRACE_S) in sec


def test_soak_60s():
    if os.geteuid() != 0:
        machine_skip("the soak needs root (ip netns, nftables)")
    require("ip", "nft", "etcd", "etcdctl", "curl", "protoc", "faketime")
    require_module("grpc")
    if not os.path.exists("/run/netns") and os.system("ip netns list >/dev/null 2>&1") != 0:
        machine_skip("no network namespaces")
    import soak
    out = os.path.join(soak.BUILD, "soak-60")
    seed = int(os.environ.get("SOAK_SEED", 60))
    soak.run(60, seed, out)
    rc = check.main([out])
    rep = json.load(open(os.path.join(out, "report.json")))
    assert rc == 0, rep["violations"][:20]
    assert rep["decisions"] > 3000
    assert rep["faults_total"] >= 6
    assert rep["availability"].get("none", 1.0) >= 0.99

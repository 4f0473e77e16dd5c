# SPDX-License-Identifier: Apache-2.0
"""`sluice sim --open-loop` run as a user would (Criteo's figures): the CSV has a row per sample
with the true count and one column per estimator; the numbers are the ones the estimators must
give (the log is the truth, the fixed window forgets at every minute, the leaky bucket lets 60 a
minute through under exactly 2/s against 100 a minute); the table and the JSON agree; bad
combinations are refused. A few seconds of CPU, no servers."""
import csv
import json
import subprocess

from conftest import SLUICE


def run(*args):
    return subprocess.run([SLUICE, "sim", *args], capture_output=True, text=True, timeout=60)


def test_open_loop_constant(tmp_path):
    out = tmp_path / "ol.csv"
    p = run("--open-loop", "--traffic", "constant", "--rate", "2", "--seconds", "1200",
            "--algorithms", "fixed_window,sliding_window:5,sliding_log,leaky_bucket",
            "--csv", str(out), "--csv-step", "1000")
    assert p.returncode == 0, p.stderr
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["t_s", "true", "fixed_window", "sliding_window:5", "sliding_log",
                       "leaky_bucket_backlog", "leaky_bucket_admitted"]
    data = [[float(x) for x in r] for r in rows[1:]]
    assert len(data) == 1200
    assert [r[0] for r in data[:3]] == [1.0, 2.0, 3.0]
    for t, true, fixed, sub5, log, backlog, admitted in data:
        assert log == true
        assert 0 <= fixed <= true
        if 60 < t < 1200:  # the last sample has no request of its own (the run ends before it)
            assert true == 120
            assert abs(sub5 - true) <= true / 5
        if t % 60 == 0:
            assert fixed <= 1  # a new minute: only the request dated at the edge
        if t % 60 == 59 and t > 60:
            assert fixed >= 118
    # Backlog: 2/s against a drain of 100/60 per second, 20 more every minute.
    assert abs(data[-1][5] - 400) <= 3
    # Past t = 300 s the bucket (full at the start) has run dry: 60 a minute get through.
    assert all(r[6] == 60 for r in data if 400 <= r[0] < 1200)

    lines = p.stdout.strip().splitlines()
    js = json.loads(lines[-1])
    assert js["scenario"]["mode"] == "open-loop"
    assert js["scenario"]["traffic"] == "constant"
    cols = {c["column"]: c for c in js["open_loop"]}
    assert set(cols) == set(rows[0][2:])
    assert cols["sliding_log"]["whole"]["mae"] == 0
    assert cols["fixed_window"]["steady"]["bias"] < -55
    lb = cols["leaky_bucket_admitted"]
    assert lb["kind"] == "admitted" and abs(lb["steady"]["mean_est"] - 60) < 0.1
    assert lb["steady"]["samples"] == 600
    table = [ln for ln in lines if ln.startswith("| ")]
    assert len(table) == 1 + len(cols)  # the header, then a row per column
    assert any(ln.startswith("| leaky_bucket_admitted | admitted |") for ln in table)


def test_open_loop_poisson_is_deterministic(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    args = ["--open-loop", "--traffic", "poisson", "--rate", "2", "--seconds", "300",
            "--seed", "3", "--csv-step", "5000"]
    pa, pb = run(*args, "--csv", str(a)), run(*args, "--csv", str(b))
    assert pa.returncode == 0 and pb.returncode == 0, pa.stderr + pb.stderr
    assert a.read_bytes() == b.read_bytes() and pa.stdout == pb.stdout
    rows = list(csv.DictReader(a.open()))
    assert len(rows) == 60
    assert all(r["sliding_log"] == r["true"] for r in rows)
    # The default algorithm list: every estimator, buckets twice.
    for name in ("token_bucket", "gcra_backlog", "gcra_admitted", "sliding_window:60"):
        assert name in rows[0]


def test_open_loop_refuses_other_studies():
    p = run("--open-loop", "--split", "2")
    assert p.returncode == 2 and "--open-loop" in p.stderr
    p = run("--open-loop", "--seconds", "1", "--csv-step", "5000")
    assert p.returncode == 2 and "shorter than --csv-step" in p.stderr  # a usage error

# SPDX-License-Identifier: Apache-2.0
"""The soak's checker: replays a record (gen.py) against the faults (soak.py) and the bounds
(bounds.py), prints every violation, writes DIR/report.json, exits 1 on any violation.

    check.py DIR        (DIR holds plan.json, record.jsonl, faults.jsonl, meta.json)

Windows, per algorithm (times are the one host clock: every namespace shares it):
- token bucket (plain and GLOBAL): a window is [reset_time - duration, reset_time) of an answer.
  Counted in it: every admission that carried that reset_time, plus every admission with another
  reset_time (a second owner's fresh window, a GLOBAL copy's) sent and answered inside it.
  Allowed: L + the bounds of the faults in force (+ the GLOBAL accuracy bound for GLOBAL keys).
  No false rejection: a rejection in a window with no fault in force must follow L admissions
  (or admissions plus failed calls, which may have spent a hit) of that window.
- leaky bucket and Levee GCRA: tumbling windows of W from the start; an admission answered in
  the window was decided at most its latency before it, so allowed: burst + rate x (W + the
  window's largest latency) + the faults' bounds (unit: the burst).
"""
import bisect
import collections
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bounds  # noqa: E402

LEVEE_W_MS = 4000.0


def load(d):
    plan = json.load(open(os.path.join(d, "plan.json")))
    rec = [json.loads(x) for x in open(os.path.join(d, "record.jsonl")) if x.strip()]
    faults = [json.loads(x) for x in open(os.path.join(d, "faults.jsonl")) if x.strip()]
    mp = os.path.join(d, "meta.json")
    meta = json.load(open(mp)) if os.path.exists(mp) else {}
    return plan, rec, faults, meta


class Faults:
    def __init__(self, faults):
        self.f = sorted(faults, key=lambda x: x["start"])
        self.grace = bounds.GRACE_S * 1000

    def in_force(self, a, b, grace=True):
        """faults whose [start, end (+ grace)] overlaps [a, b]"""
        g = self.grace if grace else 0
        return [x for x in self.f if x["start"] <= b and x["end"] + g >= a]

    def extra(self, a, b):
        return sum(bounds.fault_bound(x["kind"]) for x in self.in_force(a, b))


def describe(fs):
    return ["%s%s@%.1fs" % (x["kind"], x["nodes"], x["start"] / 1000) for x in fs]


def hits_in_t(rs, a, b, nn):
    """per node, the most hits sent to it within any GLOBAL_T_S of [a, b)"""
    T = bounds.GLOBAL_T_S * 1000
    out = []
    for i in range(nn):
        ts = sorted(r[1] for r in rs if r[4] == i and a - T <= r[1] < b)
        best, j = 0, 0
        for k, t in enumerate(ts):
            while ts[j] < t - T:
                j += 1
            best = max(best, k - j + 1)
        out.append(best)
    return out


def check(plan, rec, faults):
    keys = plan["keys"]
    nn = len(plan["nodes"])
    F = Faults(faults)
    t_start = min(r[1] for r in rec) if rec else 0
    t_end = max(r[2] for r in rec) if rec else 0
    per_key = collections.defaultdict(list)
    for r in rec:
        per_key[r[0]].append(r)
    violations = []
    over = collections.defaultdict(float)   # kind -> worst overshoot: admissions over the
    #                                         fault-free allowance, in windows it is in force
    windows = 0

    alone = collections.defaultdict(float)  # the same, in windows with only that kind in force
    worst = []                               # the largest overshoots, for the report

    def note(kinds, excess, key=None, alg=None, window=None):
        for k in kinds or ["none"]:
            over[k] = max(over[k], excess)
        if len(kinds) <= 1:
            k = kinds[0] if kinds else "none"
            alone[k] = max(alone[k], excess)
        if excess > 0:
            worst.append((excess, key, alg, window, kinds))

    for ki, rs in per_key.items():
        k = keys[ki]
        if k["alg"] in ("tb", "tbg"):
            L, D = k["limit"], k["duration"]
            adm = [r for r in rs if r[3] == 1 and r[5] > 0]
            groups = collections.defaultdict(list)
            for r in adm:
                groups[r[5]].append(r)
            errors = sorted(r[1] for r in rs if r[3] == -1)
            rejected = collections.defaultdict(list)
            for r in rs:
                if r[3] == 0 and r[5] > 0:
                    rejected[r[5]].append(r)
            for R in set(groups) | set(rejected):
                a, b = R - D, R
                own = groups.get(R, [])
                others = [r for R2, g in groups.items() if R2 != R for r in g
                          if r[1] >= a and r[2] < b]
                n = len(own) + len(others)
                fs = F.in_force(a, b)
                allowed = L + L * sum(bounds.fault_bound(x["kind"]) for x in fs)
                base = L
                if k["alg"] == "tbg":
                    g = bounds.global_bound(L, hits_in_t(rs, a, b, nn))
                    allowed += g
                    base += g
                if own or others:
                    windows += 1
                    note(sorted({x["kind"] for x in fs}), n - base,
                         "%s_%s" % (k["name"], k["key"]), k["alg"], [a, b])
                nodes = sorted({r[4] for r in own + others})
                if n > allowed:
                    violations.append({"type": "overshoot", "key": "%s_%s" % (k["name"], k["key"]),
                                       "alg": k["alg"], "window": [a, b], "limit": L,
                                       "admitted": n, "allowed": allowed, "faults": describe(fs),
                                       "nodes": nodes})
                rj = rejected.get(R, [])
                if rj and k["alg"] == "tb" and not fs and len(own) < L:
                    errs = sum(1 for t in errors if a - 2500 <= t < b)
                    if len(own) + errs < L:
                        violations.append({"type": "false_rejection",
                                           "key": "%s_%s" % (k["name"], k["key"]), "alg": k["alg"],
                                           "window": [a, b], "limit": L, "admitted": len(own),
                                           "rejected": len(rj), "faults": [],
                                           "nodes": sorted({r[4] for r in rj})})
        else:
            if k["alg"] == "lb":
                W, unit, rate = float(k["duration"]), k["limit"], k["limit"] / k["duration"]
                burst = k["limit"] + 1      # the bucket's L, +1 for the engine's rounding
            else:
                W, rate = LEVEE_W_MS, k["rate"] / 1000.0
                unit = burst = k["df"] * (k["burst"] + 1)   # DF limiters, burst + 1 each
            adm = sorted((r for r in rs if r[3] == 1), key=lambda r: r[2])
            wins = collections.defaultdict(list)
            for r in adm:
                wins[int((r[2] - t_start) // W)].append(r)
            for w, g in wins.items():
                a = t_start + w * W
                b = a + W
                lat = max(r[2] - r[1] for r in g)
                fs = F.in_force(a - lat, b)
                base = burst + rate * (W + lat)
                allowed = base + unit * sum(bounds.fault_bound(x["kind"]) for x in fs)
                windows += 1
                note(sorted({x["kind"] for x in fs}), len(g) - base,
                     "%s_%s" % (k["name"], k["key"]), k["alg"], [a, b])
                if len(g) > allowed:
                    violations.append({"type": "overshoot", "key": "%s_%s" % (k["name"], k["key"]),
                                       "alg": k["alg"], "window": [a, b], "limit": burst,
                                       "admitted": len(g), "allowed": round(allowed, 1),
                                       "faults": describe(fs),
                                       "nodes": sorted({r[4] for r in g})})

    # availability: share of decisions answered, by the faults active between sent and answered
    # (none: no fault active nor in its grace time; grace: only in some fault's grace time)
    tot = collections.Counter()
    ok = collections.Counter()
    for r in rec:
        act = {x["kind"] for x in F.in_force(r[1], r[2], grace=False)}
        if not act and not F.in_force(r[1], r[2]):
            act = {"none"}
        elif not act:
            act = {"grace"}
        for kind in act:
            tot[kind] += 1
            ok[kind] += r[3] != -1
    availability = {kind: round(ok[kind] / tot[kind], 4) for kind in tot}

    # recovery: from a fault's end until the start of the first second (sliding in steps of
    # 100 ms) in which 99 % of the calls sent are answered; not measured (counted as
    # overlapped) when another fault is active meanwhile
    sent = sorted((r[1], r[3] != -1) for r in rec)
    times = [x[0] for x in sent]
    okc = [0]
    for _, good in sent:
        okc.append(okc[-1] + good)
    rec_ms = collections.defaultdict(list)
    overlapped = collections.Counter()
    for x in faults:
        if x["end"] <= x["start"] + 100:   # instantaneous (a SIGHUP): nothing to recover from
            continue
        t = None
        w = x["end"]
        while w + 1000 <= t_end:
            i, j = bisect.bisect_left(times, w), bisect.bisect_left(times, w + 1000)
            if j > i and okc[j] - okc[i] >= 0.99 * (j - i):
                t = w - x["end"]
                break
            w += 100
        if t is None:
            continue
        others = [y for y in F.in_force(x["end"], x["end"] + t + 1000, grace=False)
                  if y is not x and y["end"] > y["start"] + 100]
        if others:
            overlapped[x["kind"]] += 1
        else:
            rec_ms[x["kind"]].append(t)
    recovery = {k: {"median_ms": round(statistics.median(v)), "max_ms": round(max(v)),
                    "n": len(v)} for k, v in rec_ms.items()}
    for k, n in overlapped.items():
        recovery.setdefault(k, {})["overlapped"] = n

    kinds = collections.Counter(x["kind"] for x in faults)
    decided = sum(1 for r in rec if r[3] != -1)
    return {
        "violations": violations,
        "decisions": len(rec),
        "answered": decided,
        "windows_checked": windows,
        "seconds": round((t_end - t_start) / 1000, 1),
        "faults": dict(kinds),
        "faults_total": sum(kinds.values()),
        "availability": availability,
        "max_overshoot": {k: round(v, 1) for k, v in sorted(over.items())},
        "max_overshoot_alone": {k: round(v, 1) for k, v in sorted(alone.items())},
        "worst_windows": [{"overshoot": round(e, 1), "key": key, "alg": alg, "window": w,
                           "faults": ks}
                          for e, key, alg, w, ks in sorted(worst, key=lambda x: -x[0])[:20]],
        "recovery": recovery,
        "bounds": {k: v[0] for k, v in bounds.BOUNDS.items()},
        "grace_s": bounds.GRACE_S,
    }


def main(argv):
    d = argv[0]
    plan, rec, faults, meta = load(d)
    rep = check(plan, rec, faults)
    rep["meta"] = meta
    if meta.get("crashed"):
        rep["violations"].append({"type": "crash", "nodes": meta["crashed"]})
    if not rec:
        rep["violations"].append({"type": "no_decisions"})
    with open(os.path.join(d, "report.json"), "w") as f:
        json.dump(rep, f, indent=1)
    for v in rep["violations"]:
        print("VIOLATION %s" % json.dumps(v))
    print("soak: %d decisions (%d answered) in %.0f s, %d windows, %d faults %s, "
          "%d violations" % (rep["decisions"], rep["answered"], rep["seconds"],
                             rep["windows_checked"], rep["faults_total"], rep["faults"],
                             len(rep["violations"])))
    print("availability %s" % rep["availability"])
    print("max_overshoot %s" % rep["max_overshoot"])
    print("max_overshoot_alone %s" % rep["max_overshoot_alone"])
    print("recovery %s" % rep["recovery"])
    print("report: %s" % os.path.join(d, "report.json"))
    return 1 if rep["violations"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

# SPDX-License-Identifier: Apache-2.0
"""What Envoy's rate-limit users ask of RLS and upstream does not give (docs/envoy.md "sluice's
extensions"): several limits on one descriptor (rate_limits:), windows of any number of units
(unit_multiplier), upstream's own counting of rejected hits, and all-or-nothing calls
(--rls-all-or-nothing, or envoyproxy/ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true),
on one node and across a 3-node cluster. Each case takes (make, confdir) so that
test_rls_redis.py runs it with --store redis too."""
import threading
import time

from conftest import free_port
import pytest

from test_rls import OK, OVER, Rls, confdir, write  # noqa: F401 (confdir: a fixture)


@pytest.fixture
def make(node_factory):
    return node_factory


def node(make, confdir, text, *more, env=None):
    write(confdir, "d.yaml", text)
    n = make(["--workers", "2", "--rls-config-dir", confdir] + list(more), env)
    return n, Rls(n.addr)


def test_rejected_hits_count_as_upstream_counts_them(make, confdir):
    n, c = node(make, confdir, """
        domain: d
        descriptors:
          - key: k
            rate_limit: {unit: hour, requests_per_unit: 10}
        """)
    d = {"entries": [("k", "v")], "hits": 8}
    assert c.ask("d", d).overall_code == OK
    r = c.ask("d", dict(d, hits=5))
    assert r.overall_code == OVER and r.statuses[0].limit_remaining == 0
    # upstream's counter holds 13 now: a look (hits_addend 0) is over the limit as well
    r = c.ask("d", dict(d, hits=0))
    assert r.overall_code == OVER, r
    assert r.statuses[0].limit_remaining == 0
    c.close()


def test_unit_multiplier_windows(make, confdir):
    n, c = node(make, confdir, """
        domain: d
        descriptors:
          - key: k
            rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 3}
        """)
    now = time.time()
    if 300 - now % 300 < 5:  # not across a window edge
        time.sleep(300 - now % 300 + 0.2)
        now = time.time()
    codes = [c.ask("d", [("k", "v")]) for _ in range(4)]
    assert [r.overall_code for r in codes] == [OK, OK, OK, OVER]
    st = codes[0].statuses[0]
    assert st.current_limit.requests_per_unit == 3
    # the window is 5 minutes aligned to the epoch, as upstream aligns its one-unit windows
    expect = 300 - now % 300
    assert abs(st.duration_until_reset.seconds - expect) <= 2, (st.duration_until_reset, expect)
    c.close()


SEVERAL = """
    domain: d
    descriptors:
      - key: k
        rate_limits:
          - {unit: hour, requests_per_unit: 10, name: broad}
          - {unit: day, requests_per_unit: 4, name: tight}
    """


def test_several_limits_on_one_descriptor(make, confdir):
    n, c = node(make, confdir, SEVERAL)
    d = {"entries": [("k", "v")], "hits": 3}
    r = c.ask("d", d)
    assert r.overall_code == OK
    st = r.statuses[0]  # the tightest: remaining 1 of 4, not 7 of 10
    assert (st.current_limit.name, st.limit_remaining) == ("tight", 1)
    r = c.ask("d", d)  # tight says no: broad gives its 3 back
    assert r.overall_code == OVER and r.statuses[0].current_limit.name == "tight"
    assert c.ask("d", dict(d, hits=1)).overall_code == OK  # tight 4 of 4, broad 4 of 10
    # tight is spent: every call is refused by it and gives broad back; were broad counted, it
    # would reach 10 on the 6th and answer for the 7th
    for _ in range(7):
        r = c.ask("d", dict(d, hits=1))
        assert r.overall_code == OVER
        assert r.statuses[0].current_limit.name == "tight", r
    r = c.ask("d", dict(d, hits=0))
    assert r.statuses[0].current_limit.name == "tight"
    c.close()


TWO = """
    domain: d
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
      - key: api
        rate_limit: {unit: hour, requests_per_unit: 100}
    """


def remaining_broad(c):
    return c.ask("d", {"entries": [("api", "x")], "hits": 0}).statuses[0].limit_remaining


def test_call_counted_as_upstream_without_all_or_nothing(make, confdir):
    n, c = node(make, confdir, TWO)
    call = ([("user", "a")], [("api", "x")])
    assert [c.ask("d", *call).overall_code for _ in range(3)] == [OK, OK, OVER]
    assert remaining_broad(c) == 97  # the refused call drained the broad limit too
    c.close()


def test_all_or_nothing_call_from_upstreams_variable(make, confdir):
    n, c = node(make, confdir, TWO, env={"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})
    call = ([("user", "a")], [("api", "x")])
    assert [c.ask("d", *call).overall_code for _ in range(3)] == [OK, OK, OVER]
    r = c.ask("d", *call)
    assert r.overall_code == OVER
    assert r.statuses[1].code == OK and r.statuses[1].limit_remaining == 98  # not taken
    assert remaining_broad(c) == 98
    c.close()


def test_all_or_nothing_across_three_nodes(node_factory, confdir):
    """Users with 3 calls an hour each and one shared limit of 1000, through 3 nodes (keys owned
    all over the cluster), from 6 threads: the shared limit ends holding exactly the calls that
    were admitted, and every user is admitted exactly 3 times."""
    write(confdir, "d.yaml", """
        domain: d
        descriptors:
          - key: user
            rate_limit: {unit: hour, requests_per_unit: 3}
          - key: api
            rate_limit: {unit: hour, requests_per_unit: 1000}
        """)
    ports = [free_port() for _ in range(3)]
    peers = ",".join("127.0.0.1:%d" % p for p in ports)
    nodes = [node_factory(["--workers", "2", "--rls-config-dir", confdir, "--discovery",
                           "static", "--peers", peers, "--rls-all-or-nothing"],
                          port=p, start=False) for p in ports]
    for n in nodes:
        n.start(wait=False)
    for n in nodes:
        n.wait_ready()
    users = ["u%d" % i for i in range(20)]
    admitted = {u: 0 for u in users}
    lock = threading.Lock()

    def run(t):
        c = Rls(nodes[t % 3].addr)
        for i in range(6):
            for u in users[t % 2::2]:
                r = c.ask("d", [("user", u)], [("api", "x")])
                with lock:
                    admitted[u] += r.overall_code == OK
        c.close()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 3 threads x 6 rounds = 18 calls per user; at most 3 admitted, and (the limit being per
    # hour, the give-backs of refused calls done before the next round) exactly 3
    assert admitted == {u: 3 for u in users}, admitted
    c = Rls(nodes[0].addr)
    ok = False
    for _ in range(50):  # the last give-backs are fire and forget: let them land
        if remaining_broad(c) == 1000 - 3 * len(users):
            ok = True
            break
        time.sleep(0.05)
    assert ok, remaining_broad(c)
    print("# all-or-nothing, 3 nodes, 6 threads, %d calls: %d admitted, shared limit holds "
          "exactly those" % (18 * len(users), 3 * len(users)))
    c.close()


def test_several_limits_config_errors(node_factory, confdir):
    for bad, why in [
        ("rate_limit: {unit: hour, requests_per_unit: 1}\n    rate_limits: "
         "[{unit: day, requests_per_unit: 2}]", "not both"),
        ("rate_limits: [{unlimited: true}, {unit: day, requests_per_unit: 2}]", "unlimited"),
        ("rate_limit: {unit: hour, requests_per_unit: 1, unit_multiplier: 0}", "at least 1"),
    ]:
        write(confdir, "d.yaml", "domain: d\ndescriptors:\n  - key: k\n    %s\n" % bad)
        n = node_factory(["--rls-config-dir", confdir], start=False)
        n.start(wait=False)
        assert n.proc.wait(10) != 0
        assert why in n.logs(), n.logs()


def test_post_json_as_upstream_answers_it(make, confdir):
    """envoyproxy/ratelimit's POST /json: a protojson RateLimitRequest, answered with a protojson
    RateLimitResponse (parsed here by protobuf's own json_format), 200 / 429 / 400."""
    import json
    import urllib.error
    import urllib.request

    from google.protobuf import json_format

    from test_rls import rls_pb
    n, c = node(make, confdir, """
        domain: d
        descriptors:
          - key: k
            rate_limit: {unit: hour, requests_per_unit: 2, name: two}
        """, "--rls-response-headers")
    pb = rls_pb()
    rq = pb.RateLimitRequest(domain="d")
    e = rq.descriptors.add().entries.add()
    e.key, e.value = "k", "v"
    body = json_format.MessageToJson(rq).encode()

    def post(data):
        r = urllib.request.Request("http://%s/json" % n.addr, data=data, method="POST")
        try:
            with urllib.request.urlopen(r, timeout=5) as f:
                return f.status, f.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    got = [post(body) for _ in range(3)]
    assert [g[0] for g in got] == [200, 200, 429]
    first = json_format.Parse(got[0][1], pb.RateLimitResponse())
    assert first.overall_code == OK
    st = first.statuses[0]
    assert (st.current_limit.requests_per_unit, st.current_limit.name, st.limit_remaining) == \
        (2, "two", 1)
    assert 0 < st.duration_until_reset.seconds <= 3600
    assert {h.key for h in first.response_headers_to_add} >= {"RateLimit-Remaining"}
    last = json_format.Parse(got[2][1], pb.RateLimitResponse())
    assert last.overall_code == OVER and last.statuses[0].code == OVER
    # the gRPC dialect shares the counter
    assert c.ask("d", [("k", "v")]).overall_code == OVER
    # proto field names, an override and a descriptor hits_addend as a string
    other = {"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "w"}],
                                             "limit": {"requests_per_unit": 5, "unit": "MINUTE"},
                                             "hits_addend": "4"}]}
    st_, b = post(json.dumps(other).encode())
    assert st_ == 200, b
    assert json.loads(b)["statuses"][0]["limitRemaining"] == 1
    for bad in [b"nope", b'{"domain": 3}', b'{"domain": "d", "descriptors": [{"x": 1}]}',
                b'{"domain": "d", "descriptors": [{"limit": {"unit": "FORTNIGHT"}}]}']:
        code, msg = post(bad)
        assert code == 400, (bad, code, msg)
    c.close()


def test_quota_mode_near_limit_metadata_and_header_names(make, confdir):
    """quota_mode reports instead of rejecting (the call is refused only when every quota-mode
    descriptor is over, as upstream decides); near-limit counted per rule at NEAR_LIMIT_RATIO;
    dynamic_metadata names the descriptors over or near; header names from upstream's
    variables."""
    from google.protobuf import json_format
    from test_redis import metric
    n, c = node(make, confdir, """
        domain: d
        descriptors:
          - key: soft
            quota_mode: true
            rate_limit: {unit: hour, requests_per_unit: 1, name: soft}
          - key: soft2
            quota_mode: true
            rate_limit: {unit: hour, requests_per_unit: 5}
          - key: hard
            rate_limit: {unit: hour, requests_per_unit: 10, name: hard}
        """, env={"NEAR_LIMIT_RATIO": "0.5", "RESPONSE_DYNAMIC_METADATA": "true",
                  "LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_REMAINING_HEADER": "X-Left"})
    soft, soft2, hard = [("soft", "a")], [("soft2", "a")], [("hard", "a")]
    assert c.ask("d", soft, soft2).overall_code == OK
    r = c.ask("d", soft, soft2)  # soft is over; soft2 (2 of 5) is not: the call passes
    assert r.overall_code == OK
    assert [s.code for s in r.statuses] == [OVER, OK]
    assert "X-Left" in {h.key for h in r.response_headers_to_add}
    md = json_format.MessageToDict(r.dynamic_metadata)
    assert md["domain"] == "d"
    assert [(d["index"], d["rule"], d["state"], d["quota_mode"]) for d in md["descriptors"]] == \
        [(0, "soft", "over_limit", True)]
    # alone, soft is every quota-mode descriptor of the call: refused
    assert c.ask("d", soft).overall_code == OVER
    # hard: 6 of 10 used is past 0.5 -> near; the metadata and the metric say so
    for _ in range(5):
        c.ask("d", hard)
    r = c.ask("d", hard)
    assert r.overall_code == OK
    md = json_format.MessageToDict(r.dynamic_metadata)
    assert [(d["rule"], d["state"], d["remaining"]) for d in md["descriptors"]] == \
        [("hard", "near_limit", 4)]
    assert metric(n, 'sluice_rls_descriptors_total{domain="d",rule="hard",outcome="near_limit"}') \
        == 1  # the 6th only: 5 of 10 is not past 0.5
    c.close()


KUADRANT = "/kuadrant.service.ratelimit.v1.RateLimitService/"


def test_kuadrant_check_then_report_tokens(make, confdir):
    """Kuadrant/limitador's CheckRateLimit and Report on the same port and rules: a gateway checks
    before a request (nothing counted) and charges the real usage after it, two counters on one
    user (input and output tokens of an LLM call), seen by ShouldRateLimit too."""
    n, c = node(make, confdir, """
        domain: llm
        descriptors:
          - key: user
            descriptors:
              - key: tokens
                value: input
                rate_limit: {unit: hour, requests_per_unit: 1000, name: input}
              - key: tokens
                value: output
                rate_limit: {unit: hour, requests_per_unit: 2000, name: output}
        """)
    pb = c.pb

    def call(method, *descs):
        rq = pb.RateLimitRequest(domain="llm")
        for which, hits in descs:
            d = rq.descriptors.add()
            for k, v in (("user", "ann"), ("tokens", which)):
                e = d.entries.add()
                e.key, e.value = k, v
            if hits is not None:
                d.hits_addend.value = hits
        m = c.ch.unary_unary(KUADRANT + method, request_serializer=pb.RateLimitRequest.SerializeToString,
                             response_deserializer=pb.RateLimitResponse.FromString)
        return m(rq, timeout=5)

    both = (("input", None), ("output", None))
    for _ in range(3):  # a check counts nothing
        r = call("CheckRateLimit", *both)
        assert r.overall_code == OK
        assert [s.limit_remaining for s in r.statuses] == [1000, 2000]
    r = call("Report", ("input", 600), ("output", 1500))
    assert r.overall_code == OK
    assert [s.limit_remaining for s in r.statuses] == [400, 500]
    assert call("CheckRateLimit", ("input", 400), ("output", 1)).overall_code == OK
    assert call("CheckRateLimit", ("input", 401)).overall_code == OVER
    # a report charges past the limit: usage already happened
    r = call("Report", ("input", 500), ("output", 100))
    assert r.overall_code == OK
    r = call("CheckRateLimit", *both)
    assert r.overall_code == OVER
    assert [s.code for s in r.statuses] == [OVER, OK]
    assert r.statuses[1].limit_remaining == 400
    # ShouldRateLimit decides on the same counters
    r = c.ask("llm", [("user", "ann"), ("tokens", "input")])
    assert r.overall_code == OVER
    c.close()

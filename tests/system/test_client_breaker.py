# SPDX-License-Identifier: Apache-2.0
"""libsluice as a service uses it, through examples/middleware.c against a real sluiced (issue 14,
item 7): critical routes, leases taken and released, sluice's body and headers kept on a
rejection (no empty header), and the circuit breaker: with sluiced SIGSTOPped (it accepts, never
answers), calls cost the timeout only until the breaker opens, then return at once."""
import os
import signal
import time

import pytest

from conftest import EXAMPLE_MIDDLEWARE, Middleware, built, http, wait_for


pytestmark = built(EXAMPLE_MIDDLEWARE)

QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
concurrency:
  default: {limit: 50, duration: 60s}
fleet: {capacity: 10, reserve: 0.2, duration: 60s}
"""


def metric(node, name, labels):
    status, _, body = http("GET", "http://%s/metrics" % node.addr)
    assert status == 200
    want = name + "{" + ",".join('%s="%s"' % kv for kv in labels.items()) + "} "
    for line in body.decode().splitlines():
        if line.startswith(want):
            return float(line.split()[-1])
    return 0.0


def test_middleware_critical_routes_leases_and_sluice_body(node_factory, tmp_path):
    q = tmp_path / "quotas.yaml"
    q.write_text(QUOTAS)
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", str(q)])
    mw = Middleware(node.addr, "--resource", "svc", "--timeout", "1000", "--lease",
                    "--critical", "/pay")
    try:
        # every request takes a lease and gives it back once answered
        for _ in range(5):
            status, h, body = mw.get("/hello")
            assert status == 200 and body == b"hello\n" and "x-sluice" not in h
        # (an acquire takes a concurrency and a fleet lease: both are counted)
        acquired = metric(node, "sluice_leases_total", {"event": "acquired"})
        assert acquired >= 5
        assert wait_for(lambda: metric(node, "sluice_leases_total",
                                       {"event": "released"}) == acquired, 5)

        # hold the fleet's non-critical share (8 of 10) from outside
        held = []
        for i in range(8):
            st, h, _ = http("POST", "http://%s/attempt" % node.addr, b"",
                            {"X-Resource": "other%d" % i, "X-Priority": "get",
                             "X-Concurrency": "acquire"})
            assert st == 200
            held.append(h["x-lease-id"])
        # a non-critical route is shed: 503, sluice's own body and RateLimit fields
        status, h, body = mw.get("/hello")
        assert status == 503, (status, body)
        assert body.startswith(b"fleet capacity is reserved for critical calls"), body
        assert int(h["retry-after"]) >= 1
        assert h.get("ratelimit") and h.get("ratelimit-policy")
        # a shed is sluice's decision, never a failure to fail open on (docs/protection.md)
        assert h.get("x-sluice") != "failed-open", h
        head = mw.raw_get("/hello").split(b"\r\n\r\n")[0].split(b"\r\n")[1:]
        for line in head:
            name, _, value = line.partition(b":")
            assert value.strip(), "empty header %r" % name
        # a critical route still gets through (the reserve), with its lease released after
        before = metric(node, "sluice_leases_total", {"event": "released"})
        status, _, body = mw.get("/pay/now")
        assert status == 200 and body == b"hello\n"
        assert wait_for(lambda: metric(node, "sluice_leases_total",
                                       {"event": "released"}) >= before + 1, 5)
    finally:
        mw.stop()


def test_breaker_makes_a_hung_sluiced_cheap(node_factory, tmp_path):
    q = tmp_path / "quotas.yaml"
    q.write_text(QUOTAS)
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", str(q)])
    # default breaker: 5 timeouts in a row open it for 1 s
    mw = Middleware(node.addr, "--resource", "demo", "--timeout", "400")
    try:
        status, h, _ = mw.get()
        assert status == 200 and "x-sluice" not in h
        node.signal(signal.SIGSTOP)  # accepts (the kernel does), never answers
        try:
            t0 = time.time()
            for _ in range(5):
                status, h, _ = mw.get()
                assert status == 200 and h.get("x-sluice") == "failed-open"
            tripping = time.time() - t0
            assert tripping >= 5 * 0.4 * 0.9  # each of these paid the timeout
            t0 = time.time()
            for _ in range(10):
                status, h, _ = mw.get()
                assert status == 200 and h.get("x-sluice") == "failed-open"
            fast = time.time() - t0
            # 10 more calls would cost 4 s at the timeout; with the breaker open they do not wait
            # (at most one of them is the probe after the 1 s cool-down)
            assert fast < 2.0, fast
        finally:
            node.signal(signal.SIGCONT)
        # sluiced answers again: after the cool-down the probe closes the breaker
        assert wait_for(lambda: "x-sluice" not in mw.get()[1], 10)
    finally:
        mw.stop()

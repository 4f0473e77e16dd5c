# SPDX-License-Identifier: Apache-2.0
"""Issue 25, memory: many connections each holding an unfinished request body. Every connection
stays within its own budget (--max-conn-body-bytes, --max-body-bytes), so before the global bound
400 connections held ~360 MB between them; with --max-request-memory the node keeps its buffered
request bytes (the metric) and its RSS near the bound by refusing new requests (503) and closing
the connections holding the most, and a good client is still served."""
import select
import socket

import chaoslib as cl

BOUND = 32 << 20
HELD = 900 * 1000          # of a 1,000,000-byte body: under --max-body-bytes (1 MiB)
CONNS_PER_ATTACKER = 100
REFILL = 5                 # connections an attacker opens again per 0.2 s (the machine is shared:
                           # the attackers' own CPU must leave some for the server and the client)


def _gone(s):
    """The server closed (or answered 503 and closed) this connection."""
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        return False
    try:
        return not s.recv(65536) or True
    except OSError:
        return True


def holders(addr, stats):
    host, port = addr.rsplit(":", 1)
    head = (b"POST /v1/GetRateLimits HTTP/1.1\r\nHost: chaos\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n")
    chunk = b"x" * HELD

    def attack(stop, i):
        socks = []
        try:
            while not stop.is_set():
                # keep CONNS_PER_ATTACKER connections holding HELD bytes each; replace closed ones
                alive = []
                for s in socks:
                    if _gone(s):
                        s.close()
                    else:
                        alive.append(s)
                socks = alive
                room = CONNS_PER_ATTACKER if len(socks) == 0 else REFILL
                while len(socks) < CONNS_PER_ATTACKER and room > 0 and not stop.is_set():
                    room -= 1
                    try:
                        s = socket.create_connection((host, int(port)), timeout=2)
                        s.sendall(head + chunk)
                        socks.append(s)
                        stats["sent"] = stats.get("sent", 0) + 1
                    except OSError:
                        stats["refused"] = stats.get("refused", 0) + 1
                        break
                stop.wait(0.2)
        finally:
            for s in socks:
                s.close()
    return attack


def test_partial_bodies_bounded(node_factory):
    node = node_factory(["--workers", "2", "--max-request-memory", str(BOUND),
                         "--read-timeout", "60s"])
    cl.warm(node)
    rss0 = cl.rss_bytes(node.proc.pid)
    stats = {}
    seen = {}

    def check(n):
        seen["closed"] = cl.metric(n.addr, "sluice_request_memory_events_total",
                                   {"event": "closed"}) or 0
        seen["refused"] = cl.metric(n.addr, "sluice_request_memory_events_total",
                                    {"event": "refused"}) or 0
        seen["used"] = cl.metric(n.addr, "sluice_request_memory_bytes", {"kind": "used"})
        seen["peak"] = cl.metric(n.addr, "sluice_request_memory_bytes", {"kind": "peak"})
        seen["limit"] = cl.metric(n.addr, "sluice_request_memory_bytes", {"kind": "limit"})

    # 4 attackers x 100 connections x 900 KB = 360 MB asked to be held; the bound is 32 MiB
    f = cl.run_attack(node, holders(node.addr, stats), n=4, name="partial-bodies", seconds=2.0,
                      warmup=2.0, max_rss=rss0 + (128 << 20), check=check)
    f.update({k: int(v) for k, v in seen.items()})
    f["rss_over_start_mib"] = round((f["rss_peak_mib"] * 2**20 - rss0) / 2**20, 1)
    cl.record("partial-bodies-memory", f)
    assert seen["limit"] == BOUND
    assert seen["closed"] > 0, seen
    assert seen["used"] <= BOUND + 2 * 2 * (64 << 10) + (1 << 20), seen
    assert stats.get("sent", 0) * HELD > 4 * BOUND, stats  # far more was offered than held
    assert f["ratio"] >= 0.5

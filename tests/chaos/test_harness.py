# SPDX-License-Identifier: Apache-2.0
"""The chaos harness itself (tests/chaos/chaoslib.py): the good client measures a rate, the
/proc readings see connections come and go, and run_attack passes on an attack sluice has
always held (slowloris: connections that trickle a request's headers)."""
import time

import chaoslib as cl


def test_measures_and_counts(node):
    r = cl.measure_rate(node.addr, 0.5)
    assert r["ok"] > 0 and r["errors"] == 0 and r["rate"] > 0
    pid, port = node.proc.pid, int(node.addr.rsplit(":", 1)[1])
    assert cl.rss_bytes(pid) > 0
    cl.warm(node)
    fds0 = cl.fd_count(pid)
    socks = [cl.connect(node.addr) for _ in range(5)]
    assert cl.wait_until(lambda: cl.tcp_conns(port) == 5 and cl.fd_count(pid) == fds0 + 5, 5)
    assert cl.metric(node.addr, "sluice_connections_open") >= 5
    for s in socks:
        s.close()
    assert cl.wait_until(lambda: cl.tcp_conns(port) == 0 and cl.fd_count(pid) == fds0, 5)


def slowloris(stop, i):
    socks = []
    try:
        for _ in range(25):
            s = cl.connect(cl.slowloris_addr)
            s.sendall(b"POST /v1/GetRateLimits HTTP/1.1\r\n")
            socks.append(s)
        while not stop.is_set():
            for s in socks:
                try:
                    s.sendall(b"X-a: b\r\n")
                except OSError:
                    pass
            stop.wait(0.2)
    finally:
        for s in socks:
            s.close()


def test_run_attack_slowloris(node):
    cl.slowloris_addr = node.addr
    f = cl.run_attack(node, slowloris, n=4, name="slowloris", seconds=1.5)
    assert f["conns_peak"] >= 100

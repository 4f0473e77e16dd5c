# SPDX-License-Identifier: Apache-2.0
"""sluiced --graphite-addr pushes its metrics to a Graphite collector (a Python listener here) in
the plaintext protocol with tags, over UDP and TCP, every --graphite-period."""
import re
import socket
import threading
import time

import pytest

from conftest import http

LINE = re.compile(r"^([A-Za-z0-9_.:-]+)((?:;[A-Za-z0-9_.:-]+=[^;~ ][^; ]*)*) (\S+) (\d+)$")


class Collector:
    """A Graphite plaintext listener on 127.0.0.1:0 collecting lines (UDP datagrams or TCP
    streams) and counting datagrams, connections and oversized datagrams."""

    def __init__(self, proto, port=0):
        self.proto = proto
        self.lines = []
        self.datagrams = 0
        self.max_datagram = 0
        self.bad_datagrams = 0  # not ending at a line boundary
        self.connections = 0
        self.lock = threading.Lock()
        self.stopped = False
        kind = socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
        self.sock = socket.socket(socket.AF_INET, kind)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.sock.settimeout(0.2)
        if proto == "tcp":
            self.sock.listen(4)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def add(self, text):
        with self.lock:
            self.lines.extend(ln for ln in text.split("\n") if ln)

    def run(self):
        while not self.stopped:
            try:
                if self.proto == "udp":
                    d = self.sock.recv(65536)
                    with self.lock:
                        self.datagrams += 1
                        self.max_datagram = max(self.max_datagram, len(d))
                        if not d.endswith(b"\n"):
                            self.bad_datagrams += 1
                    self.add(d.decode())
                else:
                    conn, _ = self.sock.accept()
                    with self.lock:
                        self.connections += 1
                    threading.Thread(target=self.read_stream, args=(conn,), daemon=True).start()
            except socket.timeout:
                continue
            except OSError:
                return

    def read_stream(self, conn):
        buf = b""
        conn.settimeout(0.2)
        while not self.stopped:
            try:
                d = conn.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            buf += d
            text, _, rest = buf.rpartition(b"\n")
            buf = rest
            if text:
                self.add(text.decode())
        conn.close()

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def close(self):
        self.stopped = True
        self.thread.join(2)
        self.sock.close()


def parse(line):
    m = LINE.match(line)
    assert m, "not a tagged plaintext line: %r" % line
    tags = dict(t.split("=", 1) for t in m.group(2).split(";") if t)
    return m.group(1), tags, float(m.group(3)), int(m.group(4))


def wait_lines(col, pred, timeout=15.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = [p for p in (parse(ln) for ln in col.snapshot()) if pred(p)]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("no matching line among %d received" % len(col.snapshot()))


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_graphite_push(node_factory, tmp_path, proto):
    quotas = tmp_path / "q.yaml"
    quotas.write_text("limit:\n  key_default: {rate: 100, burst: 10}\n")
    col = Collector(proto)
    try:
        node = node_factory(["--standalone", "--workers", "2", "--quota-file", str(quotas),
                             "--instance-id", "gr-%s" % proto,
                             "--graphite-addr", "127.0.0.1:%d/%s" % (col.port, proto),
                             "--graphite-period", "200ms", "--graphite-prefix", "lv.test"])
        for _ in range(3):
            st, _, _ = http("POST", "http://%s/attempt" % node.addr, b"", {"X-Resource": "g"})
            assert st == 200
        t0 = time.time()
        # the three accepted attempts show up, tagged with the outcome and the instance
        found = wait_lines(col, lambda p: p[0] == "lv.test.sluice_levee_attempts_total" and
                           p[1].get("outcome") == "accepted" and p[2] == 3)
        name, tags, value, ts = found[0]
        assert tags["instance"] == "gr-%s" % proto
        assert abs(ts - time.time()) < 60
        assert time.time() - t0 < 5  # within a few periods
        lines = [parse(ln) for ln in col.snapshot()]  # every line parses and is tagged
        assert all(t.get("instance") == "gr-%s" % proto for _, t, _, _ in lines)
        # sluiced's own families, and the process_* ones named as Prometheus' client libraries do
        assert all(n.startswith(("lv.test.sluice_", "lv.test.process_")) for n, _, _, _ in lines)
        names = {n for n, _, _, _ in lines}
        assert "lv.test.sluice_keys" in names
        assert "lv.test.sluice_call_duration_seconds_bucket" in names
        # pushes go on, every 200 ms
        n1 = len(col.snapshot())
        deadline = time.time() + 10
        while len(col.snapshot()) < 3 * n1 and time.time() < deadline:
            time.sleep(0.05)
        assert len(col.snapshot()) >= 3 * n1
        if proto == "udp":
            assert col.max_datagram <= 1400
            assert col.datagrams > 1
            assert col.bad_datagrams == 0
        else:
            assert col.connections == 1  # one connection kept across pushes
        st, _, body = http("GET", "http://%s/metrics" % node.addr)
        assert re.search(r'(?m)^sluice_graphite_pushes_total\{result="ok"\} [1-9]', body.decode())
        t = time.time()
        assert node.stop() == 0
        assert time.time() - t < 5
    finally:
        col.close()


def test_graphite_tcp_collector_restart(node_factory, tmp_path):
    """The collector goes away and comes back on the same port: pushes resume on a new
    connection, failures in between are counted."""
    col = Collector("tcp")
    port = col.port
    node = node_factory(["--standalone", "--workers", "1",
                         "--graphite-addr", "127.0.0.1:%d" % port,  # no suffix: TCP
                         "--graphite-period", "200ms"])
    wait_lines(col, lambda p: p[0] == "sluice.sluice_keys")
    col.close()
    time.sleep(0.1)

    def failed():
        _, _, body = http("GET", "http://%s/metrics" % node.addr)
        m = re.search(r'(?m)^sluice_graphite_pushes_total\{result="failed"\} (\d+)', body.decode())
        return int(m.group(1)) if m else 0

    deadline = time.time() + 10
    while failed() == 0 and time.time() < deadline:
        time.sleep(0.05)
    assert failed() > 0
    # a new collector on the same port
    col2 = Collector("tcp", port)
    try:
        # the reconnect backoff starts at 1 s and doubles; allow a few rounds
        wait_lines(col2, lambda p: p[0] == "sluice.sluice_keys", timeout=30)
    finally:
        col2.close()

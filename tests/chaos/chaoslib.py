# SPDX-License-Identifier: Apache-2.0
"""The chaos suite's shared harness: run one attack against a real sluiced while a well-behaved
client is measured, and check what issue 11 asks of every attack — the server stays up, its RSS
stays bounded, the good client keeps at least half of its unloaded rate, and once the attackers
leave no connection or file descriptor is left behind.

Pieces (each usable alone):
  - the system tests' fixtures (node_factory, node, pb) and Node, loaded from
    tests/system/conftest.py under a name of its own, so both suites run in one pytest session;
  - GoodClient / measure_rate: a keep-alive HTTP/1.1 JSON client (or gRPC) in a child process
    (the attackers' threads and the GIL cannot slow it down), bounded in time, reporting ok/s;
  - rss_bytes, fd_count, socket_count, tcp_conns, metric: what the server holds, from /proc and
    from /metrics;
  - Attackers: n threads running attack(stop, i) until stopped, each closing what it opened;
  - raw HTTP/1.1 and HTTP/2 bytes (h1_request, h2_frame, hpack_literal, h2_headers, ...) for
    attacks no client library would send;
  - run_attack: the whole measurement and its assertions; the figures go to the test's output and,
    when SLUICE_CHAOS_REPORT names a file, one JSON line each (docs/operations.md shows them).

Everything is bounded in time: no helper blocks longer than its timeout argument.
"""
import importlib.util
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def _load_system_conftest():
    name = "sluice_system_conftest"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "tests", "system",
                                                                    "conftest.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


sysconf = _load_system_conftest()
Node = sysconf.Node
node_factory = sysconf.node_factory
node = sysconf.node
pb = sysconf.pb
free_port = sysconf.free_port
http = sysconf.http
SLUICED = sysconf.SLUICED

# ---- what the server holds ------------------------------------------------------------------


def rss_bytes(pid):
    """Resident set size of a process, in bytes (0 once it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def fd_count(pid):
    """Open file descriptors of a process (-1 once it is gone)."""
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def socket_count(pid):
    """Open socket descriptors of a process."""
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:"):
                    n += 1
            except OSError:
                pass
    except OSError:
        return -1
    return n


_TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "03": "SYN_RECV", "04": "FIN_WAIT1",
               "05": "FIN_WAIT2", "06": "TIME_WAIT", "07": "CLOSE", "08": "CLOSE_WAIT",
               "09": "LAST_ACK", "0A": "LISTEN", "0B": "CLOSING"}


def tcp_conns(port, states=("ESTABLISHED", "CLOSE_WAIT", "FIN_WAIT1", "FIN_WAIT2", "LAST_ACK",
                            "CLOSING", "SYN_RECV")):
    """Server-side TCP connections on a local port (loopback, IPv4 and IPv6), by state."""
    n = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    lport = int(parts[1].rsplit(":", 1)[1], 16)
                    if lport == port and _TCP_STATES.get(parts[3]) in states:
                        n += 1
        except OSError:
            pass
    return n


def metrics_text(addr, timeout=2.0):
    with urllib.request.urlopen("http://%s/metrics" % addr, timeout=timeout) as r:
        return r.read().decode()


def metric(addr, name, labels=None, timeout=2.0):
    """One sample of the Prometheus text at http://addr/metrics (summed over series matching
    `labels`, a dict), or None when absent or unreachable."""
    try:
        text = metrics_text(addr, timeout)
    except OSError:
        return None
    total, seen = 0.0, False
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        mname = head.split("{", 1)[0]
        if mname != name:
            continue
        if labels and not all('%s="%s"' % kv in head for kv in labels.items()):
            continue
        total += float(value)
        seen = True
    return total if seen else None


def peer_count(addr):
    """The peer count a node's /v1/HealthCheck reports, or None (a node being killed)."""
    try:
        _, _, body = http("GET", "http://%s/v1/HealthCheck" % addr, timeout=2)
        return json.loads(body).get("peer_count")
    except Exception:  # noqa: BLE001 - reported as None, asserted by the caller
        return None


def is_up(node, timeout=2.0):
    """The process runs and answers LiveCheck."""
    if node.proc.poll() is not None:
        return False
    try:
        st, _, _ = http("GET", "http://%s/v1/LiveCheck" % node.addr, timeout=timeout)
        return st == 200
    except OSError:
        return False


def warm(node, conns=16):
    """Open and use `conns` connections one after another, so that every worker has served one
    (a loop opens a few descriptors of its own with its first connection: libuv's reserve) and
    fd counts taken afterwards are stable."""
    for _ in range(conns):
        try:
            http("GET", "http://%s/v1/LiveCheck" % node.addr, timeout=2)
        except OSError:
            pass
    time.sleep(0.2)


def wait_until(pred, timeout, interval=0.05):
    """Poll pred() until true or timeout; returns its last value."""
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v or time.time() >= deadline:
            return v
        time.sleep(interval)


# ---- the well-behaved client ----------------------------------------------------------------

GOOD_BODY = json.dumps({"requests": [{"name": "chaos_good", "unique_key": "good", "hits": 1,
                                      "limit": 1000000000, "duration": 60000}]}).encode()


def _good_http(host, port, seconds, timeout):
    req = (b"POST /v1/GetRateLimits HTTP/1.1\r\nHost: chaos\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(GOOD_BODY)) + GOOD_BODY
    ok = errors = 0
    end = time.time() + seconds
    s = None
    while time.time() < end:
        try:
            if s is None:
                s = socket.create_connection((host, port), timeout=timeout)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.settimeout(max(0.01, min(timeout, end - time.time())))
            s.sendall(req)
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                buf += chunk
            head, _, rest = buf.partition(b"\r\n\r\n")
            clen = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    clen = int(v)
            while len(rest) < clen:
                chunk = s.recv(65536)
                if not chunk:
                    raise ConnectionError("closed")
                rest += chunk
            if head.startswith(b"HTTP/1.1 200"):
                ok += 1
            else:
                errors += 1
            if b"connection: close" in head.lower():
                s.close()
                s = None
        except (OSError, ValueError):
            errors += 1
            if s is not None:
                s.close()
            s = None
            time.sleep(0.01)
    if s is not None:
        s.close()
    return ok, errors


def _good_grpc(host, port, seconds, timeout):
    import grpc
    g, _ = sysconf.pb_modules()
    ch = grpc.insecure_channel("%s:%d" % (host, port))
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=g.GetRateLimitsReq.SerializeToString,
                         response_deserializer=g.GetRateLimitsResp.FromString)
    req = g.GetRateLimitsReq(requests=[g.RateLimitReq(name="chaos_good", unique_key="good", hits=1,
                                                      limit=1000000000, duration=60000)])
    ok = errors = 0
    end = time.time() + seconds
    while time.time() < end:
        try:
            get(req, timeout=max(0.01, min(timeout, end - time.time())))
            ok += 1
        except grpc.RpcError:
            errors += 1
            time.sleep(0.01)
    ch.close()
    return ok, errors


class GoodClient:
    """A well-behaved client in a child process: `mode` "http" (keep-alive HTTP/1.1 JSON
    GetRateLimits, reconnecting after errors) or "grpc"; runs `seconds`, each call bounded by
    `timeout`. start() returns at once; result() waits and returns a dict with ok, errors,
    seconds and rate (ok per second)."""

    def __init__(self, addr, seconds=2.0, mode="http", timeout=1.0):
        self.addr, self.seconds, self.mode, self.timeout = addr, seconds, mode, timeout
        self.proc = None

    def start(self):
        host, port = self.addr.rsplit(":", 1)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "good", self.mode,
                                      host, port, str(self.seconds), str(self.timeout)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return self

    def result(self):
        try:
            out, err = self.proc.communicate(timeout=self.seconds + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        if self.proc.returncode != 0:
            raise RuntimeError("good client failed: %s" % err.decode(errors="replace"))
        return json.loads(out)


def measure_rate(addr, seconds=2.0, mode="http", timeout=1.0):
    """Run a GoodClient for `seconds`; its result dict."""
    return GoodClient(addr, seconds, mode, timeout).start().result()


# ---- attackers ------------------------------------------------------------------------------


class Attackers:
    """n threads each running attack(stop, i) — a function that loops until the threading.Event
    `stop` is set and closes every socket it opened before returning. Exceptions end that thread
    only (kept in .errors). Use as a context manager or start()/stop()."""

    def __init__(self, attack, n=4):
        self.attack, self.n = attack, n
        self.stop_event = threading.Event()
        self.threads = []
        self.errors = []

    def _run(self, i):
        try:
            self.attack(self.stop_event, i)
        except Exception as e:  # noqa: BLE001 - an attacker may fail in any way; keep the reason
            self.errors.append(repr(e))

    def start(self):
        for i in range(self.n):
            t = threading.Thread(target=self._run, args=(i,), daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def stop(self, timeout=10.0):
        self.stop_event.set()
        deadline = time.time() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.time()))
        return not any(t.is_alive() for t in self.threads)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def connect(addr, timeout=5.0):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def drain(sock, limit=1 << 20):
    """Read what is there without blocking (up to `limit` bytes); b"" also when closed."""
    sock.setblocking(False)
    got = b""
    try:
        while len(got) < limit:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        pass
    finally:
        sock.setblocking(True)
    return got


def is_closed(sock, timeout=1.0):
    """True when the peer has closed the connection (EOF or reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


# ---- raw protocol bytes ---------------------------------------------------------------------


def h1_request(method="POST", path="/v1/GetRateLimits", body=GOOD_BODY, headers=None):
    hdrs = {"Host": "chaos", "Content-Type": "application/json"}
    if body is not None:
        hdrs["Content-Length"] = str(len(body))
    hdrs.update(headers or {})
    head = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in hdrs.items())
    return head.encode() + b"\r\n" + (body or b"")


H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, \
    CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8
SETTINGS_HEADER_TABLE_SIZE, SETTINGS_ENABLE_PUSH, SETTINGS_MAX_CONCURRENT_STREAMS, \
    SETTINGS_INITIAL_WINDOW_SIZE, SETTINGS_MAX_FRAME_SIZE, SETTINGS_MAX_HEADER_LIST_SIZE = \
    range(1, 7)
ENHANCE_YOUR_CALM = 0xb


def h2_frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", ftype, flags,
                                                             sid & 0x7fffffff) + payload


def h2_settings(**kw):
    """SETTINGS with ids given by name: h2_settings(INITIAL_WINDOW_SIZE=0)."""
    ids = {"HEADER_TABLE_SIZE": 1, "ENABLE_PUSH": 2, "MAX_CONCURRENT_STREAMS": 3,
           "INITIAL_WINDOW_SIZE": 4, "MAX_FRAME_SIZE": 5, "MAX_HEADER_LIST_SIZE": 6}
    return h2_frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", ids[k], v) for k, v in kw.items()))


def h2_window_update(sid, inc):
    return h2_frame(WINDOW_UPDATE, 0, sid, struct.pack(">I", inc))


def _hpack_int(value, prefix_bits, first):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = bytearray([first | limit])
    value -= limit
    while value >= 128:
        out.append((value & 0x7f) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """A literal header field without indexing, new name, no Huffman coding."""
    name = name.encode() if isinstance(name, str) else name
    value = value.encode() if isinstance(value, str) else value
    return (b"\x00" + _hpack_int(len(name), 7, 0) + name + _hpack_int(len(value), 7, 0) + value)


def hpack_block(headers):
    return b"".join(hpack_literal(k, v) for k, v in headers)


def grpc_headers(path="/pb.gubernator.V1/GetRateLimits", extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "chaos"),
            ("content-type", "application/grpc"), ("te", "trailers")] + list(extra)


def json_headers(path="/v1/GetRateLimits", body_len=len(GOOD_BODY), extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "chaos"),
            ("content-type", "application/json"), ("content-length", str(body_len))] + list(extra)


def h2_headers(sid, headers, end_stream=False):
    return h2_frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), sid,
                    hpack_block(headers))


def h2_data(sid, data, end_stream=True):
    return h2_frame(DATA, END_STREAM if end_stream else 0, sid, data)


def grpc_message(payload):
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def h2_frames(data):
    """Split bytes into (type, flags, sid, payload) tuples; the incomplete tail is dropped."""
    out, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if i + 9 + n > len(data):
            break
        out.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7fffffff,
                    data[i + 9:i + 9 + n]))
        i += 9 + n
    return out


def h2_goaway_code(data):
    """The error code of the first GOAWAY in `data`, or None."""
    for ftype, _, _, payload in h2_frames(data):
        if ftype == GOAWAY and len(payload) >= 8:
            return struct.unpack(">I", payload[4:8])[0]
    return None


def h2_header_frames(sid, block, end_stream=False, max_frame=16384):
    """A header block as HEADERS + CONTINUATION frames of at most max_frame bytes."""
    parts = [block[i:i + max_frame] for i in range(0, len(block), max_frame)] or [b""]
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        flags = (END_HEADERS if last else 0)
        if i == 0:
            out.append(h2_frame(HEADERS, flags | (END_STREAM if end_stream else 0), sid, part))
        else:
            out.append(h2_frame(CONTINUATION, flags, sid, part))
    return b"".join(out)


def batch_body(items, prefix="chaos"):
    """A GetRateLimits JSON body of `items` items (distinct keys)."""
    return json.dumps({"requests": [{"name": prefix, "unique_key": "k%d" % i, "hits": 1,
                                     "limit": 1000000, "duration": 60000}
                                    for i in range(items)]}).encode()


class H2Conn:
    """A raw HTTP/2 connection for attacks: sends the preface and `settings`, reads whatever the
    server sends (frames parsed, GOAWAY and closing noted, PINGs not answered) and tracks the
    server's connection-level receive window so DATA stays within it."""

    def __init__(self, addr, settings=None, timeout=5.0):
        self.sock = connect(addr, timeout)
        self.buf = b""
        self.closed = False
        self.goaway = None
        self.send_window = 65535
        self.frames = 0
        self.sock.sendall(H2_PREFACE + h2_settings(**(settings or {})))

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def poll(self, wait=0.0):
        """Read what arrived (waiting up to `wait` s for the first bytes); parse frames."""
        if self.closed:
            return
        self.sock.settimeout(wait if wait > 0 else 0.0001)
        try:
            while True:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    self.closed = True
                    break
                self.buf += chunk
                self.sock.settimeout(0.0001)
        except (socket.timeout, BlockingIOError):
            pass
        except OSError:
            self.closed = True
        frames = h2_frames(self.buf)
        used = sum(9 + len(f[3]) for f in frames)
        self.buf = self.buf[used:]
        for ftype, flags, sid, payload in frames:
            self.frames += 1
            if ftype == GOAWAY and len(payload) >= 8 and self.goaway is None:
                self.goaway = struct.unpack(">I", payload[4:8])[0]
            elif ftype == WINDOW_UPDATE and sid == 0 and len(payload) == 4:
                self.send_window += struct.unpack(">I", payload)[0] & 0x7fffffff
            elif ftype == SETTINGS and not flags & ACK:
                self.send(h2_frame(SETTINGS, ACK, 0))

    def send_data(self, sid, data, end_stream=True, wait=2.0):
        """DATA within the server's connection window (waits for WINDOW_UPDATE up to `wait`)."""
        deadline = time.time() + wait
        while len(data) > self.send_window and not self.closed and time.time() < deadline:
            self.poll(0.05)
        if len(data) > self.send_window or self.closed:
            return False
        self.send_window -= len(data)
        ok = True
        for i in range(0, len(data), 16384):
            part = data[i:i + 16384]
            ok = ok and self.send(h2_data(sid, part, end_stream and i + 16384 >= len(data)))
        return ok

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def cpu_seconds(pid):
    """User + system CPU time a process used so far, in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


# ---- the whole measurement ------------------------------------------------------------------


def record(name, figures):
    """Print the figures and append them to $SLUICE_CHAOS_REPORT (one JSON line) if set."""
    line = json.dumps(dict(figures, attack=name), sort_keys=True)
    print("chaos: " + line)
    path = os.environ.get("SLUICE_CHAOS_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def _attack_once(node, attack, n, name, seconds, warmup, mode, settle, fd_slack, check):
    """One measured round of run_attack: figures, plus what the assertions need."""
    pid = node.proc.pid
    port = int(node.addr.rsplit(":", 1)[1])
    assert is_up(node)
    warm(node)
    fds0 = fd_count(pid)
    before = measure_rate(node.addr, seconds, mode)
    rss0 = rss_bytes(pid)
    peak = {"rss": rss0, "fds": fds0, "conns": 0}
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            peak["rss"] = max(peak["rss"], rss_bytes(pid))
            peak["fds"] = max(peak["fds"], fd_count(pid))
            peak["conns"] = max(peak["conns"], tcp_conns(port))
            sampling.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    attackers = Attackers(attack, n).start()
    try:
        time.sleep(warmup)
        during = measure_rate(node.addr, seconds, mode)
        up_during = node.proc.poll() is None
        if check:
            check(node)
    finally:
        stopped = attackers.stop()
        sampling.set()
        sampler.join(2)
    assert stopped, "attackers did not stop"
    assert up_during, "sluiced died during %s:\n%s" % (name, node.logs()[-4000:])
    wait_until(lambda: fd_count(pid) <= fds0 + fd_slack and tcp_conns(port) == 0, settle)
    fds_after, conns_after = fd_count(pid), tcp_conns(port)
    # The unloaded rate is measured before and after the attack and averaged: the machine's own
    # load drifts, and the good client must also be served again once the attackers left.
    after = measure_rate(node.addr, seconds, mode) if node.proc.poll() is None else {"rate": 0}
    unloaded = (before["rate"] + after["rate"]) / 2
    return {
        "before_rps": round(before["rate"], 1),
        "after_rps": round(after["rate"], 1),
        "unloaded_rps": round(unloaded, 1),
        "during_rps": round(during["rate"], 1),
        "ratio": round(during["rate"] / unloaded, 2) if unloaded else 0.0,
        "rss_before_mib": round(rss0 / 2**20, 1),
        "rss_peak_mib": round(peak["rss"] / 2**20, 1),
        "fds_before": fds0, "fds_peak": peak["fds"], "fds_after": fds_after,
        "conns_peak": peak["conns"], "conns_after": conns_after,
        "attacker_errors": len(attackers.errors),
    }, peak["rss"]


def run_attack(node, attack, n=4, name="attack", seconds=2.0, warmup=0.5, mode="http",
               min_ratio=0.5, max_rss=512 << 20, settle=10.0, fd_slack=0, check=None, tries=2):
    """Measure the good client unloaded, then during `n` Attackers(attack) (after `warmup` s),
    then stop the attackers, check for leaks and measure it again (unloaded: the mean of before
    and after). Asserts: the server stays up, its peak RSS stays below `max_rss` bytes, the good
    client's rate during the attack is >= min_ratio x unloaded (min_ratio None: not checked),
    and within `settle` s after the attackers left the server's fd count is back to its count
    before (+ fd_slack) and no TCP connection is left on its port. `check(node)`, if given, runs
    while the attack is still on (e.g. a metric must have moved).

    The test machines are shared and their load drifts, so a round whose only failure is the
    rate ratio is run again, up to `tries` rounds in all (every round must pass every other
    assertion). Returns the figures of the last round (dict), with "rounds"."""
    for rnd in range(1, tries + 1):
        figures, rss_peak = _attack_once(node, attack, n, name, seconds, warmup, mode, settle,
                                         fd_slack, check)
        figures["rounds"] = rnd
        record(name, figures)
        assert is_up(node), "sluiced not answering after %s:\n%s" % (name, node.logs()[-4000:])
        assert figures["before_rps"] > 0, "good client got nothing unloaded: %r" % figures
        assert figures["after_rps"] > 0, "good client got nothing after %s" % name
        assert rss_peak <= max_rss, "RSS peaked at %d bytes > %d" % (rss_peak, max_rss)
        assert figures["fds_after"] <= figures["fds_before"] + fd_slack, \
            "fds %d after %s, %d before" % (figures["fds_after"], name, figures["fds_before"])
        assert figures["conns_after"] == 0, \
            "%d connections left after %s" % (figures["conns_after"], name)
        if min_ratio is None or figures["ratio"] >= min_ratio:
            return figures
    raise AssertionError("good client at %.0f/s during %s vs %.0f/s unloaded (%d rounds)"
                         % (figures["during_rps"], name, figures["unloaded_rps"], tries))


# ---- the good client's child process --------------------------------------------------------

if __name__ == "__main__" and len(sys.argv) == 7 and sys.argv[1] == "good":
    _, _, _mode, _host, _port, _secs, _tmo = sys.argv
    _t0 = time.time()
    _fn = _good_grpc if _mode == "grpc" else _good_http
    _ok, _errors = _fn(_host, int(_port), float(_secs), float(_tmo))
    _dt = time.time() - _t0
    print(json.dumps({"ok": _ok, "errors": _errors, "seconds": round(_dt, 3),
                      "rate": _ok / _dt if _dt > 0 else 0.0}))

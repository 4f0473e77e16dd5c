# SPDX-License-Identifier: Apache-2.0
"""Start-up errors that say what and where (issue 26's first bullet): sluiced run with each bad
input prints one log line (timestamp, level=error) naming the option or the file and line, the
reason in plain words and the fix when there is one, exits 2, and binds nothing: the client and
admin ports are held by the test while it runs, so a sluiced that got as far as binding would
fail with "address in use" instead. Then --check-config (every problem at once, nothing bound,
exit 0 or 2) and --print-config (each option's origin, secrets redacted)."""
import json
import os
import re
import signal
import socket
import subprocess
import textwrap
import time

import pytest

from conftest import SLUICED, free_port, needs

TS = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"
PLAIN = re.compile(r"^%s level=(\w+) (?:instance=\S+ )?(.*)$" % TS)
LOGFMT = re.compile(r'^ts=%s level=(\w+) (?:\S+=\S+ )*?msg="((?:[^"\\]|\\.)*)"' % TS)


def log_line(line):
    """(level, message) of one log line, in the log module's formats (the plain one, logfmt,
    JSON: the errors go through it, whichever it writes), or None"""
    m = PLAIN.match(line)
    if m:
        return m.group(1), m.group(2)
    m = LOGFMT.match(line)
    if m:
        return m.group(1), re.sub(r"\\(.)", r"\1", m.group(2))
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if isinstance(obj, dict) and re.match(TS, str(obj.get("ts", obj.get("time", "")))):
        return obj.get("level"), obj.get("msg")
    return None


def error_msg(line):
    """the message of an error log line, or None"""
    lm = log_line(line)
    return lm[1] if lm and lm[0] == "error" else None


class Held:
    """The client port and the admin port (client + 1) bound and listening by the test."""

    def __init__(self):
        for _ in range(50):  # another process may hold port + 1: try another pair
            self.port = free_port()
            self.socks = []
            try:
                for p in (self.port, self.port + 1):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    self.socks.append(s)
                    s.bind(("127.0.0.1", p))
                    s.listen(1)
                break
            except OSError:
                self.close()
        else:
            raise RuntimeError("no two free adjacent ports")
        self.addr = "127.0.0.1:%d" % self.port

    def close(self):
        for s in self.socks:
            s.close()


@pytest.fixture
def held():
    h = Held()
    yield h
    h.close()


def run(args, env=None, timeout=20):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([SLUICED] + list(args), capture_output=True, text=True, env=e,
                          timeout=timeout)


def refused(held, args, want, env=None):
    """sluiced with args (on the held port) exits 2 with one error line containing want, and
    nothing before it: no listening line, no address in use."""
    r = run(["--listen-addr", held.addr] + list(args), env)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    msg = error_msg(lines[0])
    assert msg, "not an error log line: %r" % lines[0]
    assert want in msg, "%r not in %r" % (want, msg)
    assert "listening" not in r.stderr and "in use" not in r.stderr, r.stderr
    return msg


# --- the quota file -------------------------------------------------------------------------------

BAD_QUOTAS = [
    # (file text, what the message must say: the path and line are prefixed by the test)
    ("limit:\n  key:\n    api:\n      quota: {rate: fast, burst: 1}\n",
     "line 4: rate is not a number: 'fast'"),
    ("limit:\n  kee:\n    api: {quota: {rate: 1, burst: 1}}\n",
     "line 2: unknown field under limit"),
    ("limits:\n  key: {}\n", "line 1: unknown top-level field"),
    ("limit:\n  key:\n    api:\n      quota: {rate: 1, burst: [1]\n", "line "),
    ("- a\n- b\n", "line 1"),
]


@pytest.mark.parametrize("text,want", BAD_QUOTAS)
def test_bad_quota_file_says_file_line_and_reason(held, tmp_path, text, want):
    q = tmp_path / "live.yaml"
    q.write_text(text)
    msg = refused(held, ["--quota-file", str(q)], "option 'quota-file': %s: " % q)
    assert want in msg, msg
    assert "Invalid argument" not in msg


def test_missing_quota_file_prints_its_path(held):
    refused(held, ["--quota-file", "/nonexistent/quotas.yaml"],
            "option 'quota-file': /nonexistent/quotas.yaml: No such file or directory")


def test_start_up_prints_what_sighup_prints(held, tmp_path):
    """The detailed message SIGHUP logs for a bad quota file is the one start-up prints."""
    q = tmp_path / "live.yaml"
    q.write_text("limit:\n  key:\n    api:\n      quota: {rate: 5, burst: 1}\n")
    port = free_port()
    p = subprocess.Popen([SLUICED, "--listen-addr", "127.0.0.1:%d" % port, "--workers", "1",
                          "--quota-file", str(q)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 10
        buf = ""
        while "listening" not in buf and time.time() < deadline:
            buf += p.stderr.readline()
        assert "listening" in buf, buf
        q.write_text(BAD_QUOTAS[0][0])
        p.send_signal(signal.SIGHUP)
        line = ""
        while "reload failed" not in line and time.time() < deadline + 10:
            line = p.stderr.readline()
        assert "reload failed" in line, line
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    start = refused(held, ["--quota-file", str(q)], "option 'quota-file': ")
    detail = start.split("option 'quota-file': ", 1)[1]
    assert "line 4: rate is not a number: 'fast'" in detail
    assert detail in line, (detail, line)


# --- TLS files --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pems(tmp_path_factory):
    d = tmp_path_factory.mktemp("pems")
    for name in ("a", "b"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=" + name,
                        "-keyout", str(d / (name + ".key")), "-out", str(d / (name + ".pem"))],
                       check=True, capture_output=True)
    (d / "junk.pem").write_text("this is not a certificate\n")
    os.chmod(d / "junk.pem", 0o600)  # a key file must be its owner's alone (checked first)
    return d


@needs("openssl")
def test_tls_files_in_plain_words(held, pems):
    key, cert, other = str(pems / "a.key"), str(pems / "a.pem"), str(pems / "b.key")
    junk = str(pems / "junk.pem")
    refused(held, ["--tls-cert", "/nonexistent.pem", "--tls-key", key],
            "option 'tls-cert': certificate /nonexistent.pem: no such file")
    refused(held, ["--tls-cert", junk, "--tls-key", key],
            "option 'tls-cert': certificate %s: not PEM" % junk)
    refused(held, ["--tls-cert", cert, "--tls-key", junk],
            "option 'tls-key': key %s: not PEM" % junk)
    refused(held, ["--tls-cert", cert, "--tls-key", other],
            "option 'tls-key': key %s does not match the certificate %s" % (other, cert))
    refused(held, ["--tls-cert", cert, "--tls-key", key, "--tls-ca", "/nonexistent-ca.pem"],
            "option 'tls-ca': CA bundle /nonexistent-ca.pem: no such file")


def test_tls_key_alone(held):
    refused(held, ["--tls-key", "server.key"], "option 'tls-key': --tls-key needs --tls-cert")
    refused(held, ["--tls-cert", "server.pem"], "option 'tls-cert': --tls-cert needs --tls-key")


# --- options and values ------------------------------------------------------------------------

def test_port_out_of_range(held):
    r = run(["--listen-addr", "127.0.0.1:99999"])
    assert r.returncode == 2
    assert error_msg(r.stderr.strip())
    assert "option 'listen-addr': port 99999 is out of range 1-65535 (flag --listen-addr)" \
        in r.stderr, r.stderr


def test_errors_in_the_chosen_log_format(held):
    """--log-format json: the start-up error is a JSON object like every other line."""
    r = run(["--log-format", "json", "--listen-addr", "127.0.0.1:99999"])
    assert r.returncode == 2
    obj = json.loads(r.stderr.strip())
    assert obj["level"] == "error" and "port 99999 is out of range 1-65535" in obj["msg"], obj


def test_port_in_use_before_anything_listens(held):
    """The client port taken: said before the admin port is built (nothing logged as
    listening), as a log line, exit 2."""
    r = run(["--listen-addr", held.addr, "--admin-addr", "127.0.0.1:%d" % free_port()])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and error_msg(lines[0]), r.stderr
    assert "option 'listen-addr': %s: the port is in use" % held.addr in lines[0]


def test_listen_addr_must_be_an_ip(held):
    r = run(["--listen-addr", "myhost:5454"])
    assert r.returncode == 2
    assert "option 'listen-addr': 'myhost' is not an IP address" in r.stderr, r.stderr


def test_unknown_option_did_you_mean(held, tmp_path):
    refused(held, ["--listen_adr", "127.0.0.1:1"],
            "unknown flag '--listen_adr': did you mean '--listen-addr'?")
    cfg = tmp_path / "sluiced.yaml"
    cfg.write_text("workers: 1\nlisten_adr: 127.0.0.1:1\n")
    refused(held, ["--config", str(cfg)],
            "%s:2: unknown option 'listen_adr': did you mean 'listen-addr'?" % cfg)
    refused(held, ["--discovery", "statc"], "want one of: none, static, dns, etcd, k8s, gossip")


def test_rls_file_names_directory_file_and_units(held, tmp_path):
    d = tmp_path / "rls"
    d.mkdir()
    (d / "edge.yaml").write_text(textwrap.dedent("""\
        domain: edge
        descriptors:
          - key: k
            rate_limit:
              unit: fortnight
              requests_per_unit: 1
        """))
    refused(held, ["--rls-config-dir", str(d)],
            "option 'rls-config-dir': %s/edge.yaml: line 5: invalid rate limit unit 'fortnight' "
            "(want one of: second, minute, hour, day, week, month, year)" % d)


def test_peers_that_cannot_work(held, tmp_path):
    refused(held, ["--discovery", "static", "--peers", "foo"],
            "option 'peers': 'foo' has no port (want host:port, e.g. foo:5454)")
    refused(held, ["--discovery", "static", "--peers", "%s,nosuch.invalid:5454" % held.addr],
            "option 'peers': peer 'nosuch.invalid:5454' does not resolve")
    cfg = tmp_path / "sluiced.yaml"
    cfg.write_text("peers:\n  - %s\n" % held.addr)
    refused(held, ["--config", str(cfg)],
            "option 'peers': a peer list needs --discovery static")
    other = "127.0.0.1:%d" % free_port()
    refused(held, ["--discovery", "static", "--peers", other],
            "option 'peers': this node (%s) is not in the peer list (%s): add it, or set "
            "--advertise-addr" % (held.addr, other))


def test_advertise_addr_names_the_node_in_its_list(node_factory):
    """The same list with --advertise-addr naming the node's entry starts."""
    port = free_port()
    me = "localhost:%d" % port
    n = node_factory(["--workers", "1", "--discovery", "static", "--peers", me,
                      "--advertise-addr", me], port=port)
    assert n.proc.poll() is None


# --- --check-config and --print-config ----------------------------------------------------------

def test_check_config_reports_every_problem(held, tmp_path):
    q = tmp_path / "live.yaml"
    q.write_text(BAD_QUOTAS[0][0])
    cfg = tmp_path / "sluiced.yaml"
    cfg.write_text("max-conns: ten\nlisten_adr: 127.0.0.1:1\nquota-file: %s\n" % q)
    r = run(["--check-config", "--config", str(cfg), "--listen-addr", held.addr, "--tls-key",
             "k.pem", "--discovery", "static", "--peers", "foo,%s" % held.addr,
             "--rls-config-dir", str(tmp_path / "none")])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert all(error_msg(l) for l in lines), r.stderr
    for want in ("option 'max-conns': invalid integer 'ten' (file %s:1)" % cfg,
                 "%s:2: unknown option 'listen_adr': did you mean 'listen-addr'?" % cfg,
                 "option 'tls-key': --tls-key needs --tls-cert",
                 "option 'peers': 'foo' has no port",
                 "option 'quota-file': %s: line 4: rate is not a number: 'fast'" % q,
                 "option 'rls-config-dir': %s" % (tmp_path / "none"),
                 "configuration check failed: 6 problems"):
        assert sum(want in l for l in lines) == 1, (want, r.stderr)
    assert len(lines) == 7, r.stderr
    assert "in use" not in r.stderr and "listening" not in r.stderr


def test_check_config_good_binds_nothing(held, tmp_path):
    """A good configuration on a port someone else holds: the check says OK (a start could not
    bind), and exits 0."""
    q = tmp_path / "quotas.yaml"
    q.write_text("limit:\n  key:\n    api:\n      quota: {rate: 5, burst: 1}\n")
    r = run(["--check-config", "--listen-addr", held.addr, "--quota-file", str(q)])
    assert r.returncode == 0, r.stderr
    last = log_line(r.stderr.strip().splitlines()[-1])
    assert last and last[0] == "info" and "configuration OK" in last[1], r.stderr
    r = run(["--listen-addr", held.addr, "--quota-file", str(q)])
    assert r.returncode == 2 and "in use" in r.stderr, r.stderr  # the port really is held


def test_print_config_sources_and_redaction(tmp_path):
    cfg = tmp_path / "sluiced.yaml"
    cfg.write_text("# options\nmax-streams: 7\nverbose: true\n")
    r = run(["--print-config", "--config", str(cfg), "--workers", "3"],
            env={"SLUICE_MAX_CONNS": "5",
                 "SLUICE_STORAGE_ADDRS": "http://root:s3cret@127.0.0.1:2379"})
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for want in ('workers: 3  # flag --workers',
                 'max-conns: 5  # env SLUICE_MAX_CONNS',
                 'max-streams: 7  # file %s:2' % cfg,
                 'verbose: true  # file %s:3' % cfg,
                 'listen-addr: "127.0.0.1:5454"  # default',
                 'advertise-addr: "127.0.0.1:5454"  # computed: listen-addr',
                 '  - "http://<redacted>@127.0.0.1:2379"'):
        assert want in out.splitlines(), (want, out)
    assert "s3cret" not in out
    assert re.search(r"^instance-id: .*  # computed: the host name$", out, re.M), out
    # what it prints loads back: as a config file it starts the same checks cleanly
    back = tmp_path / "back.yaml"
    back.write_text(out.replace("http://<redacted>@", "http://"))
    r2 = run(["--print-config", "--config", str(back)])
    assert r2.returncode == 0, r2.stderr
    assert "max-conns: 5  # file %s:" % back in r2.stdout
    r3 = run(["--print-config", "--max-conns", "ten"])
    assert r3.returncode == 2 and "option 'max-conns': invalid integer 'ten'" in r3.stderr
    assert r3.stdout == ""

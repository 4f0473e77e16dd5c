# SPDX-License-Identifier: Apache-2.0
"""sluiced's logs as machines read them (issue 26, item 3): every line real logfmt (or one JSON
object with --log-format json), the first naming version, commit and listeners, IPv6 addresses
bracketed, --log-level, and journald's priority prefixes when stderr is $JOURNAL_STREAM."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time

from conftest import SLUICED, free_port

# one logfmt pair: key=value, the value bare (no space, '=', '"') or quoted with JSON's escapes
PAIR = r'[A-Za-z_][\w.-]*=(?:"(?:[^"\\]|\\.)*"|[^\s="]+)'
LINE = re.compile(r"^(?:<[3467]>)?%s(?: %s)*$" % (PAIR, PAIR))


def logfmt(line):
    out = {}
    for m in re.finditer(r'([A-Za-z_][\w.-]*)=("(?:[^"\\]|\\.)*"|[^\s="]+)', line):
        v = m.group(2)
        out[m.group(1)] = json.loads(v) if v.startswith('"') else v
    return out


def run(args, env=None, seconds=1.5):
    """Start sluiced, let it run, stop it: its stderr lines."""
    fd, path = tempfile.mkstemp(prefix="sluiced-logs-")
    with os.fdopen(fd, "w") as f:
        e = dict(os.environ, **(env(path) if callable(env) else (env or {})))
        # the admin socket in a runtime directory of the test's (the default path is one per
        # machine)
        e.setdefault("RUNTIME_DIRECTORY", tempfile.mkdtemp(prefix="sluice-run-"))
        p = subprocess.Popen([SLUICED] + args, stdout=f, stderr=f, env=e)
        time.sleep(seconds)
        p.send_signal(signal.SIGTERM)
        p.wait(15)
    with open(path) as f:
        lines = f.read().splitlines()
    os.unlink(path)
    return lines


def test_logfmt_lines_and_first_line():
    port = free_port()
    lines = run(["--standalone", "--listen-addr", "127.0.0.1:%d" % port, "--workers", "1"])
    assert lines, lines
    assert all(LINE.match(ln) for ln in lines), [ln for ln in lines if not LINE.match(ln)]
    first = logfmt(lines[0])
    assert first["msg"] == "sluiced started" and first["level"] == "info"
    assert first["version"] and re.fullmatch(r"[0-9a-f]{12}|unknown", first["commit"])
    assert first["addr"] == "127.0.0.1:%d" % port and first["admin_socket"].endswith("/admin.sock")
    assert "admin_port" not in first  # no TCP admin listener without --admin-addr
    assert {"ts", "level", "msg"} <= set(logfmt(lines[-1]))


def test_ipv6_bracketed_json_and_level():
    port = free_port()  # a free port on 127.0.0.1; ::1 is another address, free there too

    lines = run(["--standalone", "--listen-addr", "[::1]:%d" % port, "--workers", "1",
                 "--log-format", "json"])
    docs = [json.loads(ln) for ln in lines]  # one object a line, each parses
    assert docs[0]["msg"] == "sluiced started" and docs[0]["addr"] == "[::1]:%d" % port
    assert isinstance(docs[0]["workers"], int)
    quiet = run(["--standalone", "--listen-addr", "127.0.0.1:%d" % free_port(), "--workers", "1",
                 "--log-level", "warn"])
    assert not any("level=info" in ln for ln in quiet), quiet


def test_journald_priorities():
    def env(path):
        st = os.stat(path)
        return {"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)}
    lines = run(["--standalone", "--listen-addr", "127.0.0.1:%d" % free_port(), "--workers", "1"],
                env=env)
    assert lines and all(ln.startswith(("<6>ts=", "<4>ts=", "<3>ts=", "<7>ts=")) for ln in lines)
    assert lines[0].startswith("<6>ts=") and 'msg="sluiced started"' in lines[0]
    # another stream named: no prefix
    plain = run(["--standalone", "--listen-addr", "127.0.0.1:%d" % free_port(), "--workers", "1"],
                env={"JOURNAL_STREAM": "1:2"})
    assert plain and all(ln.startswith("ts=") for ln in plain)

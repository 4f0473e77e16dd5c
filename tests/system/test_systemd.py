# SPDX-License-Identifier: Apache-2.0
"""sluiced under systemd (issue 16, item 4): the sd_notify protocol seen from the service manager's
side, and the unit file.

The test plays the manager: it binds an AF_UNIX datagram socket (a file path, or a name in the
abstract namespace), starts sluiced with NOTIFY_SOCKET naming it, and reads what arrives. Checked:
READY=1 is the first message and arrives only once the client port answers and the quota file is
loaded (POST /attempt decides at once); with WATCHDOG_USEC, WATCHDOG=1 pings keep coming; a
SIGHUP brings RELOADING=1 (with MONOTONIC_USEC) then READY=1; SIGTERM brings STOPPING=1 and a
clean exit. Without WATCHDOG_USEC (or with WATCHDOG_PID naming another process) no ping is sent.
The unit (packaging/systemd/sluiced.service.in) passes `systemd-analyze verify`, and
`systemd-analyze security --offline` rates it at most 2.0 ("OK"); neither needs a running systemd.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import ROOT, SLUICED, needs
from test_install import attempt  # POST /attempt with X-Resource: its status

UNIT_IN = os.path.join(ROOT, "packaging", "systemd", "sluiced.service.in")
QUOTAS = os.path.join(ROOT, "docs", "deploy", "systemd", "quotas.yaml")


class Manager:
    """The service manager's end of NOTIFY_SOCKET."""

    def __init__(self, tmp_path, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "sluice-test-notify-%d-%d" % (os.getpid(), time.monotonic_ns())
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.address = str(tmp_path / "notify.sock")
            self.sock.bind(self.address)

    def next(self, timeout=10.0, skip_watchdog=True):
        """The next message as a dict (skipping WATCHDOG=1 pings unless asked not to)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "no notification within %.1fs" % timeout
            self.sock.settimeout(left)
            data = self.sock.recv(65536).decode()
            msg = dict(line.split("=", 1) for line in data.split("\n") if line)
            if skip_watchdog and msg == {"WATCHDOG": "1"}:
                continue
            return msg

    def close(self):
        self.sock.close()


def start(mgr, tmp_path, env_extra=None):
    env = dict(os.environ)
    for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(k, None)
    env["NOTIFY_SOCKET"] = mgr.address
    env.update(env_extra or {})
    log = open(tmp_path / "sluiced.log", "w+")
    # port 0: the port is learnt from READY's STATUS, so nothing else could have told the test
    proc = subprocess.Popen([SLUICED, "--listen-addr", "127.0.0.1:0", "--workers", "2",
                             "--admin-socket", str(tmp_path / "admin.sock"), "--quota-file",
                             QUOTAS],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, log


def stop(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def ready_port(msg):
    assert msg.get("READY") == "1", msg
    m = re.fullmatch(r"serving on port (\d+)", msg.get("STATUS", ""))
    assert m, msg
    return int(m.group(1))


def test_notify_lifecycle_with_watchdog(tmp_path):
    mgr = Manager(tmp_path)
    proc, log = start(mgr, tmp_path, {"WATCHDOG_USEC": "200000"})  # a ping every 100 ms
    try:
        first = mgr.next(skip_watchdog=False)
        port = ready_port(first)  # READY=1 comes first, before any ping
        assert first["MAINPID"] == str(proc.pid)
        # at READY the port answers and the quotas are loaded: /attempt decides (no 500)
        assert attempt("127.0.0.1:%d" % port, "api") == 200
        pings = 0
        while pings < 3:
            assert mgr.next(skip_watchdog=False) == {"WATCHDOG": "1"}
            pings += 1
        proc.send_signal(signal.SIGHUP)
        msg = mgr.next()
        assert msg["RELOADING"] == "1" and int(msg["MONOTONIC_USEC"]) > 0, msg
        assert mgr.next() == {"READY": "1"}
        assert attempt("127.0.0.1:%d" % port, "api") == 200
        proc.send_signal(signal.SIGTERM)
        assert mgr.next() == {"STOPPING": "1"}
        assert proc.wait(15) == 0
    finally:
        stop(proc)
        mgr.close()
        log.close()


def test_notify_abstract_socket_without_watchdog(tmp_path):
    mgr = Manager(tmp_path, abstract=True)
    # WATCHDOG_PID names another process: the watchdog is not sluiced's, so no ping
    proc, log = start(mgr, tmp_path, {"WATCHDOG_USEC": "100000", "WATCHDOG_PID": "1"})
    try:
        port = ready_port(mgr.next(skip_watchdog=False))
        assert attempt("127.0.0.1:%d" % port, "api") == 200
        proc.send_signal(signal.SIGHUP)
        # nothing between READY and RELOADING: no ping was sent (at 100 ms, several would be)
        msg = mgr.next(skip_watchdog=False)
        assert msg["RELOADING"] == "1", msg
        assert mgr.next(skip_watchdog=False) == {"READY": "1"}
        proc.send_signal(signal.SIGTERM)
        assert mgr.next(skip_watchdog=False) == {"STOPPING": "1"}
        assert proc.wait(15) == 0
    finally:
        stop(proc)
        mgr.close()
        log.close()


def test_start_failure_is_reported(tmp_path):
    mgr = Manager(tmp_path)
    env = dict(os.environ, NOTIFY_SOCKET=mgr.address)
    r = subprocess.run([SLUICED, "--listen-addr", "not-an-address"], env=env,
                       capture_output=True, timeout=30)
    try:
        assert r.returncode == 2
        msg = mgr.next(timeout=1)
        assert "READY" not in msg and msg["STATUS"].startswith("start failed"), msg
        assert int(msg["ERRNO"]) > 0
    finally:
        mgr.close()


def unit_for(tmp_path):
    """The unit with ExecStart at this build's sluiced, and a man path that has sluiced(8)."""
    text = open(UNIT_IN).read().replace("@SLUICE_SBINDIR@", os.path.dirname(SLUICED))
    unit = tmp_path / "sluiced.service"
    unit.write_text(text)
    man8 = tmp_path / "man" / "man8"
    man8.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "man", "sluiced.8"), man8)
    return unit, text


@needs("systemd-analyze", "man")
def test_unit_verifies_and_is_sandboxed(tmp_path):
    unit, text = unit_for(tmp_path)
    for line in ("Type=notify", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID",
                 "DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes",
                 "CapabilityBoundingSet=\n", "StateDirectory=sluice",
                 "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
                 "SystemCallFilter=@system-service", "MemoryDenyWriteExecute=yes",
                 "--config /etc/sluice/sluiced.yaml"):
        assert line in text, line
    env = dict(os.environ, MANPATH=str(tmp_path / "man"), SYSTEMD_LOG_LEVEL="notice")
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout + r.stderr == "", r.stdout + r.stderr
    r = subprocess.run(["systemd-analyze", "security", "--offline=true", "--no-pager",
                        str(unit)], env=env, capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for sluiced.service: ([0-9.]+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= 2.0, r.stdout

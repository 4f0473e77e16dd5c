# SPDX-License-Identifier: Apache-2.0
"""What sluiced does with the secrets it holds (docs/operations.md "Hygiene"), against a real
sluiced: no core dump unless --allow-core-dumps (PR_SET_DUMPABLE 0, set by the daemon), and
token, key ring and TLS key files that group or others can read refused at start with the fix in
the message."""
import glob
import json
import os
import resource
import signal
import subprocess
import tempfile
import time

from conftest import SLUICED, free_port, http, machine_skip, wait_for

TOKEN = "hygiene-token-0123456789abcdef"


def crash(tmp_path, *args):
    """Start sluiced in tmp_path with core dumps allowed by the limit, abort it: the core files
    it left there."""
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    with open("/proc/sys/fs/suid_dumpable") as f:
        suid = f.read().strip()
    if pattern.startswith("|") or "/" in pattern or suid != "0":
        machine_skip("core_pattern %r / suid_dumpable %s: cores do not land in the working "
                     "directory" % (pattern, suid))
    port = free_port()

    def unlimited():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    log = open(os.path.join(str(tmp_path), "log"), "w+")
    proc = subprocess.Popen([SLUICED, "--listen-addr", "127.0.0.1:%d" % port, "--workers", "1",
                             "--gc-max-keys", "1000", "--max-memory", "8MiB", "--admin-socket",
                             os.path.join(str(tmp_path), "admin.sock")] + list(args),
                            cwd=str(tmp_path), preexec_fn=unlimited, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: 'msg="sluiced started"' in open(log.name).read(), 10), \
            open(log.name).read()
        proc.send_signal(signal.SIGABRT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.2)
    return glob.glob(os.path.join(str(tmp_path), "core*"))


def test_no_core_dump_unless_allowed(tmp_path):
    off = tmp_path / "off"
    on = tmp_path / "on"
    off.mkdir()
    on.mkdir()
    assert crash(off) == []
    cores = crash(on, "--allow-core-dumps")
    assert cores, "the control run (--allow-core-dumps) left no core: the check proves nothing"
    for c in cores:
        os.unlink(c)


def start_fails(*args):
    out = subprocess.run([SLUICED, "--listen-addr", "127.0.0.1:%d" % free_port(), "--workers",
                          "1", "--admin-socket", os.path.join(tempfile.mkdtemp(), "a.sock")] +
                         list(args), capture_output=True, text=True, timeout=20)
    return out.returncode, out.stderr


def test_secret_files_others_can_read_are_refused(tmp_path):
    tok = tmp_path / "admin.token"
    tok.write_text(TOKEN + "\n")
    ring = tmp_path / "ring"
    ring.write_text("00" * 32 + "\n")
    for mode in (0o644, 0o640, 0o604):
        os.chmod(tok, mode)
        rc, err = start_fails("--admin-addr", "127.0.0.1:%d" % free_port(),
                              "--admin-token-file", str(tok))
        assert rc == 2 and "chmod 600 %s" % tok in err, err
        assert "mode %04o" % mode in err and TOKEN not in err
        os.chmod(ring, mode)
        rc, err = start_fails("--gossip-addr", "127.0.0.1:%d" % free_port(),
                              "--gossip-keyring-file", str(ring))
        assert rc == 2 and "chmod 600 %s" % ring in err, err
    # the owner's alone: accepted (the control)
    os.chmod(ring, 0o600)
    os.chmod(tok, 0o400)
    port = free_port()
    sock = os.path.join(str(tmp_path), "admin.sock")
    proc = subprocess.Popen([SLUICED, "--listen-addr", "127.0.0.1:%d" % free_port(), "--workers",
                             "1", "--admin-socket", sock, "--admin-addr", "127.0.0.1:%d" % port,
                             "--admin-token-file", str(tok)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: os.path.exists(sock), 10)
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(10)


def test_snapshot_authenticated_with_the_cluster_secret(node_factory, tmp_path):
    """With --peer-secret-file the --state-dir snapshot carries an HMAC under a key derived from
    the secret: the same secret loads it, another one (or none written) does not."""
    s1 = tmp_path / "s1"
    s2 = tmp_path / "s2"
    for p, text in ((s1, "snapshot-secret-one-0123456789\n"),
                    (s2, "snapshot-secret-two-0123456789\n")):
        p.write_text(text)
        os.chmod(p, 0o600)
    state = str(tmp_path / "state")
    os.mkdir(state)
    item = {"name": "n", "unique_key": "k", "hits": 1, "limit": 5, "duration": 600000}

    def node(secret):
        return node_factory(["--workers", "1", "--state-dir", state, "--peer-secret-file",
                             str(secret)])

    n = node(s1)
    st, _, body = http("POST", "http://%s/v1/GetRateLimits" % n.addr,
                       json.dumps({"requests": [item] * 3}))
    assert st == 200
    n.stop()
    with open(os.path.join(state, "sluice.snapshot"), "rb") as f:
        data = f.read()
    assert data[-40:-32] == b"SLMAC1\0\0"  # the trailer with the tag
    n = node(s1)
    assert 'msg="snapshot loaded" keys=1' in n.logs(), n.logs()
    n.stop()
    n = node(s2)
    assert "not authenticated by the cluster secret" in n.logs(), n.logs()
    assert "snapshot loaded" not in n.logs()
    n.stop()
    # a rotation: the new secret first, the old one second; the snapshot of the old one loads
    n = node(s1)
    n.stop()
    s2.write_text("snapshot-secret-two-0123456789\nsnapshot-secret-one-0123456789\n")
    n = node(s2)
    assert 'msg="snapshot loaded" keys=' in n.logs(), n.logs()
    n.stop()

# SPDX-License-Identifier: Apache-2.0
"""The Debian packages (issue 16, item 5) installed into a fresh Debian 12 root: `make deb-test`.

A minimal bookworm root is made once by debootstrap (from the apt mirror this machine uses,
read from /etc/apt/sources.list*) with the packages' run-time dependencies, and cached as a
tarball under build/debroot/; every run unpacks a fresh copy of it. Into it go the built
sluice, libsluice0.1 and libsluice-client0.1 .debs (apt-get, so their Depends are resolved),
then, chrooted: `sluiced --version` and `sluice --version` give the release; the conffile, the
unit and its enablement are in place; sluiced started with the packaged /etc/sluice/sluiced.yaml
(and a free port) tells READY=1 on a notify socket inside the root, and the packaged `sluice check`
gets a decision from it over gRPC; SIGTERM stops it cleanly. The packages are removed and purged
again. Root only (chroot, mount); a minute or so with the cache, several without.
"""
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("SLUICE_BUILD", os.path.join(ROOT, "build"))
DEBS = os.environ.get("SLUICE_DEB_DIR", os.path.join(BUILD, "deb"))
CACHE = os.path.join(BUILD, "debroot")
SUITE = "bookworm"
# what the packages' Depends name at run time (debian/control's ${shlibs:Depends}), so that
# installing them needs no download
RUNTIME = ["libuv1", "libnghttp2-14", "libprotobuf-c1", "libyaml-0-2", "libjansson4", "libxxhash0",
           "libssl3", "libcurl4"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="chroot and mount need root"),
    pytest.mark.needs("debootstrap"),
]


def mirror():
    """The Debian archive this machine's apt uses (not the security one)."""
    texts = []
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*")):
        if path.endswith((".list", ".sources")) and os.path.isfile(path):
            with open(path) as f:
                texts.append(f.read())
    for text in texts:
        for m in re.finditer(r"^(?:URIs:\s*|deb\s+(?:\[[^]]*\]\s+)?)(\S+)", text, re.M):
            uri = m.group(1)
            if "debian" in uri and "security" not in uri:
                return uri
    return "http://deb.debian.org/debian"


def base_tarball():
    tar = os.path.join(CACHE, "%s-minbase.tar" % SUITE)
    if os.path.exists(tar):
        return tar
    os.makedirs(CACHE, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="debootstrap-", dir=CACHE)
    try:
        subprocess.run(["debootstrap", "--variant=minbase", "--include=" + ",".join(RUNTIME),
                        SUITE, tmp, mirror()], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=1800)
        subprocess.run(["tar", "-C", tmp, "-cf", tar + ".part", "."], check=True)
        os.rename(tar + ".part", tar)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tar


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def root():
    tar = base_tarball()
    r = tempfile.mkdtemp(prefix="root-", dir=CACHE)
    subprocess.run(["tar", "-C", r, "-xf", tar], check=True)
    proc = os.path.join(r, "proc")
    subprocess.run(["mount", "-t", "proc", "proc", proc], check=True)
    try:
        yield r
    finally:
        subprocess.run(["umount", "-l", proc])
        shutil.rmtree(r, ignore_errors=True)


def chroot(r, *cmd, check=True):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "DEBIAN_FRONTEND": "noninteractive"}
    p = subprocess.run(["chroot", r] + list(cmd), env=env, capture_output=True, text=True,
                       timeout=300)
    if check:
        assert p.returncode == 0, "%s: %s%s" % (" ".join(cmd), p.stdout, p.stderr)
    return p


def test_packages_install_and_serve_in_fresh_bookworm(root):
    debs = {name: glob.glob(os.path.join(DEBS, "%s_*.deb" % name))
            for name in ("sluice", "libsluice0.1", "libsluice-client0.1")}
    for name, found in debs.items():
        assert len(found) == 1, "%s: run `make deb` first (%s)" % (name, DEBS)
    os.makedirs(os.path.join(root, "tmp", "debs"))
    for found in debs.values():
        shutil.copy(found[0], os.path.join(root, "tmp", "debs"))
    inside = ["/tmp/debs/" + os.path.basename(f[0]) for f in debs.values()]
    chroot(root, "apt-get", "install", "-y", "--no-install-recommends", *inside)

    version = open(os.path.join(ROOT, "VERSION")).read().strip()
    assert chroot(root, "sluiced", "--version").stdout.strip() == "sluiced " + version
    assert chroot(root, "sluice", "--version").stdout.strip() == "sluice " + version
    assert chroot(root, "dpkg-query", "-W", "-f=${Conffiles}", "sluice").stdout.strip() \
        .startswith("/etc/sluice/sluiced.yaml")
    assert os.path.exists(os.path.join(root, "lib/systemd/system/sluiced.service"))
    # dh_installsystemd's postinst enabled it (no systemd runs in a chroot, so nothing started)
    assert os.path.lexists(os.path.join(root,
                                        "etc/systemd/system/multi-user.target.wants/sluiced.service"))
    assert os.path.exists(os.path.join(root, "usr/lib/x86_64-linux-gnu/libsluice.so.0.1"))

    # sluiced from the package with the packaged config, as the unit starts it (plus a free
    # port and a scratch state directory: no systemd here to make /var/lib/sluice)
    port = free_port()
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(os.path.join(root, "run", "sluice-notify.sock"))
    notify.settimeout(30)
    os.makedirs(os.path.join(root, "tmp", "state"))
    env = {"PATH": "/usr/sbin:/usr/bin", "NOTIFY_SOCKET": "/run/sluice-notify.sock"}
    log = open(os.path.join(root, "tmp", "sluiced.log"), "w+")
    daemon = subprocess.Popen(["chroot", root, "/usr/sbin/sluiced", "--config",
                               "/etc/sluice/sluiced.yaml", "--listen-addr", "127.0.0.1:%d" % port,
                               "--admin-socket", "/tmp/admin.sock", "--state-dir", "/tmp/state",
                               "--workers", "2"],
                              env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        msg = notify.recv(4096).decode()
        assert "READY=1" in msg.split("\n"), msg
        r = chroot(root, "sluice", "check", "--addr", "127.0.0.1:%d" % port, "--name", "deb",
                   "--key", "k1", "--limit", "5", "--duration", "1m", "--json")
        answer = json.loads(r.stdout)
        assert answer["status"] == "UNDER_LIMIT" and answer["remaining"] == 4, r.stdout
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(30) == 0
        assert os.path.exists(os.path.join(root, "tmp", "state", "sluice.snapshot"))
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        notify.close()
        log.seek(0)
        print(log.read())
        log.close()

    chroot(root, "apt-get", "purge", "-y", "sluice", "libsluice0.1", "libsluice-client0.1")
    assert not os.path.exists(os.path.join(root, "usr/sbin/sluiced"))
    assert not os.path.exists(os.path.join(root, "etc/sluice/sluiced.yaml"))

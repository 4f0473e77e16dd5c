# SPDX-License-Identifier: Apache-2.0
"""The OCI image (issue 26, item 8; docs/operations.md "Container image").

packaging/image/build.sh (what `make image` runs) builds the image from the programs of
`make build` into a temporary directory; `umoci unpack` (rootless when not root) turns it into a
runtime bundle. Checked: the image configuration (non-root user, entrypoint, command, exposed
port, labels), the root filesystem (the user in /etc/passwd, the CA bundle, no shell, nothing
runnable but the two programs and the loader), the OCI archive, and the manifests in
docs/deploy naming this version's image. Then the bundle's process (its arguments with the
command replaced, as a Kubernetes `args:` does; its user, environment and working directory) is
started chrooted into the unpacked root filesystem, so that only what the image holds is loaded:
it answers /v1/HealthCheck, the image's `sluice health` reaches it, and SIGTERM stops it with 0.

The same for the image of the static sluiced (IMAGE_STATIC=1, `make image-static-test`) when
`make static` has built it (SLUICE_STATIC_BUILD, default build-static): sluiced alone, no loader,
no library, no CLI.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import BUILD, ROOT, SLUICED, free_port, http, machine_skip, needs  # noqa: E402
from needs import require_built  # noqa: E402

VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
STATIC_BUILD = os.environ.get("SLUICE_STATIC_BUILD", os.path.join(ROOT, "build-static"))
SCRIPT = os.path.join(ROOT, "packaging", "image", "build.sh")
UID = 65532

pytestmark = needs("umoci")


def blob(layout, digest):
    algo, hexd = digest.split(":")
    with open(os.path.join(layout, "blobs", algo, hexd), "rb") as f:
        return f.read()


class Image:
    def __init__(self, static, out, tag, layout, bundle):
        self.static, self.out, self.tag, self.layout, self.bundle = static, out, tag, layout, bundle


@pytest.fixture(scope="module", params=["dynamic", "static"])
def image(request, tmp_path_factory):
    static = request.param == "static"
    if static:
        if not os.path.exists(os.path.join(STATIC_BUILD, "bin", "sluiced")):
            pytest.skip("the static image needs `make static` (make image-static-test)")
        build, tag, name = STATIC_BUILD, VERSION + "-static", "sluice-static"
    else:
        require_built(SLUICED)
        build, tag, name = BUILD, VERSION, "sluice"
    out = tmp_path_factory.mktemp("image")
    t0 = time.monotonic()
    env = dict(os.environ, IMAGE_STATIC="1" if static else "0")
    run = subprocess.run(["bash", SCRIPT, build, str(out), tag, "https://example.invalid/sluice"],
                         capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    print("image built in %.1f s: %s" % (time.monotonic() - t0, run.stdout.strip()))
    layout = out / name
    bundle = out / "bundle"
    cmd = ["umoci", "unpack"]
    if os.geteuid() != 0:
        cmd.append("--rootless")
    run = subprocess.run(cmd + ["--image", "%s:%s" % (layout, tag), str(bundle)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return Image(static, out, tag, layout, bundle)


def image_config(layout, tag):
    index = json.loads(open(os.path.join(layout, "index.json")).read())
    refs = [m for m in index["manifests"]
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
    assert len(refs) == 1, index
    manifest = json.loads(blob(layout, refs[0]["digest"]))
    assert len(manifest["layers"]) == 1, manifest
    return json.loads(blob(layout, manifest["config"]["digest"]))


def test_image_config(image):
    layout, bundle = image.layout, image.bundle
    cfg = image_config(str(layout), image.tag)
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout
    assert cfg["os"] == "linux" and cfg["architecture"] == arch.strip()
    c = cfg["config"]
    assert c["User"] == "%d:%d" % (UID, UID)
    assert c["Entrypoint"] == ["/usr/bin/sluiced"]
    assert c["Cmd"] == ["--listen-addr", "0.0.0.0:5454"]
    assert set(c["ExposedPorts"]) == {"5454/tcp"}
    assert c["WorkingDir"] == "/var/lib/sluice"
    labels = c["Labels"]
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.source"] == "https://example.invalid/sluice"
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", labels["org.opencontainers.image.revision"])
    # what a runtime would run (umoci's runtime bundle)
    proc = json.load(open(bundle / "config.json"))["process"]
    assert proc["user"]["uid"] == UID and proc["user"]["gid"] == UID
    assert proc["args"] == ["/usr/bin/sluiced", "--listen-addr", "0.0.0.0:5454"]
    assert "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt" in proc["env"]


def test_image_root_filesystem(image):
    out, bundle = image.out, image.bundle
    rfs = bundle / "rootfs"
    passwd = (rfs / "etc" / "passwd").read_text()
    assert re.search(r"^sluice:x:%d:%d:" % (UID, UID), passwd, re.M), passwd
    assert re.search(r"^sluice:x:%d:" % UID, (rfs / "etc" / "group").read_text(), re.M)
    assert (rfs / "etc" / "ssl" / "certs" / "ca-certificates.crt").stat().st_size > 10000
    assert (rfs / "usr" / "lib" / "ssl" / "cert.pem").resolve(strict=False).name == \
        "ca-certificates.crt"
    for sh in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "usr/bin/busybox"):
        assert not os.path.lexists(rfs / sh), sh
    # nothing runnable but the programs and the loader (libraries are not executable)
    runnable = set()
    for d, _, files in os.walk(rfs):
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p) and os.stat(p).st_mode & 0o111:
                runnable.add(os.path.relpath(p, rfs))
    loader = {p for p in runnable if re.fullmatch(r"usr/lib(64)?/(\w+-linux-gnu/)?ld-linux[\w.-]*", p)}
    libs = [f for _, _, files in os.walk(rfs) for f in files if ".so" in f]
    if image.static:
        assert runnable == {"usr/bin/sluiced"} and libs == [], (runnable, libs)
        assert (rfs / "usr" / "share" / "doc" / "libssl-dev" / "copyright").exists()
    else:
        assert len(loader) == 1 and runnable - loader == {"usr/bin/sluiced", "usr/bin/sluice"}, \
            runnable
        assert (rfs / "usr" / "share" / "doc" / "libc6" / "copyright").exists()
    assert (rfs / "usr" / "share" / "doc" / "node-llhttp" / "copyright").exists()
    st = os.stat(rfs / "var" / "lib" / "sluice")
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (UID, UID)
    assert (rfs / "usr" / "share" / "doc" / "sluice" / "LICENSE").exists()
    # the OCI archive is the layout as one tar (oci-archive:, podman load, ctr images import)
    with tarfile.open(out / ("sluice-%s.oci.tar" % image.tag)) as t:
        names = set(t.getnames())
    assert {"./oci-layout", "./index.json"} <= names, sorted(names)[:10]


def test_manifests_name_this_version():
    deploy = os.path.join(ROOT, "docs", "deploy")
    manifests = [f for f in os.listdir(deploy) if re.fullmatch(r"k8s.*\.yaml", f)]
    assert len(manifests) >= 2, manifests
    for f in manifests:
        images = re.findall(r"^\s*image:\s*(\S+)", open(os.path.join(deploy, f)).read(), re.M)
        assert images == ["sluice:%s" % VERSION], (f, images)


def test_image_entrypoint_starts(image):
    """The entrypoint, chrooted into the unpacked image as its user: only the image's loader and
    libraries are loaded, so a library missing from the image fails here."""
    bundle = image.bundle
    if os.geteuid() != 0:
        machine_skip("chroot into the unpacked image needs root")
    rfs = str(bundle / "rootfs")
    proc = json.load(open(bundle / "config.json"))["process"]
    env = dict(e.split("=", 1) for e in proc["env"])
    port = free_port()
    # the command replaced (a Kubernetes `args:`): loopback only in tests; the admin listener at
    # its default, inside the image
    args = [proc["args"][0], "--listen-addr", "127.0.0.1:%d" % port, "--workers", "1"]
    uid, gid = proc["user"]["uid"], proc["user"]["gid"]
    cwd = proc["cwd"]

    def enter():
        os.chroot(rfs)
        os.chdir(cwd)
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    log = open(bundle / "sluiced.log", "w+")
    p = subprocess.Popen(args, env=env, preexec_fn=enter, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        status = None
        while time.monotonic() < deadline:
            assert p.poll() is None, "sluiced exited %s:\n%s" % (p.returncode, open(log.name).read())
            try:
                status, _, body = http("GET", "http://127.0.0.1:%d/v1/HealthCheck" % port)
                break
            except OSError:
                time.sleep(0.1)
        assert status == 200, open(log.name).read()
        assert json.loads(body)["status"] == "healthy", body
        if not image.static:
            # the image's CLI, in the image too
            cli = subprocess.run(["/usr/bin/sluice", "health", "--addr", "127.0.0.1:%d" % port],
                                 env=env, preexec_fn=enter, capture_output=True, text=True,
                                 timeout=30)
            assert cli.returncode == 0 and "healthy" in cli.stdout, cli.stdout + cli.stderr
        # it runs as the image's user
        with open("/proc/%d/status" % p.pid) as f:
            uids = re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1)
        assert int(uids) == UID
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0, open(log.name).read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        log.close()

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
it answers /v1/HealthCheck, the image's `sluice health` reaches it, and SIGTERM stops it with 0;
TLS to Redis without --redis-tls-ca trusts the image's CA bundle and nothing else.

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


class Chrooted:
    """The bundle's process (its user, environment and working directory) chrooted into the
    unpacked root filesystem, so that only what the image holds is loaded; `args` replace the
    image's command (as a Kubernetes `args:` does)."""

    def __init__(self, image, *args):
        if os.geteuid() != 0:
            machine_skip("chroot into the unpacked image needs root")
        bundle = image.bundle
        self.rfs = str(bundle / "rootfs")
        proc = json.load(open(bundle / "config.json"))["process"]
        self.env = dict(e.split("=", 1) for e in proc["env"])
        self.uid, self.gid, self.cwd = proc["user"]["uid"], proc["user"]["gid"], proc["cwd"]
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        # loopback only in tests; the admin listener at its default, inside the image
        argv = [proc["args"][0], "--listen-addr", "127.0.0.1:%d" % self.port, "--workers", "1"]
        self.log = open(bundle / ("sluiced-%d.log" % self.port), "w+")
        self.p = subprocess.Popen(argv + list(args), env=self.env, preexec_fn=self.enter,
                                  stdout=self.log, stderr=subprocess.STDOUT)

    def enter(self):
        os.chroot(self.rfs)
        os.chdir(self.cwd)
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)

    def logs(self):
        self.log.seek(0)
        return self.log.read()

    def health(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.p.poll() is None, "sluiced exited %s:\n%s" % (self.p.returncode, self.logs())
            try:
                status, _, body = http("GET", self.url + "/v1/HealthCheck")
                return status, json.loads(body)
            except OSError:
                time.sleep(0.1)
        raise AssertionError("sluiced in the image did not answer:\n" + self.logs())

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        return self.p.returncode


def test_image_entrypoint_starts(image):
    """The entrypoint, chrooted into the unpacked image as its user: a library missing from the
    image fails here."""
    node = Chrooted(image)
    try:
        status, body = node.health()
        assert status == 200 and body["status"] == "healthy", (body, node.logs())
        if not image.static:
            # the image's CLI, in the image too
            cli = subprocess.run(["/usr/bin/sluice", "health", "--addr", "127.0.0.1:%d" % node.port],
                                 env=node.env, preexec_fn=node.enter, capture_output=True,
                                 text=True, timeout=30)
            assert cli.returncode == 0 and "healthy" in cli.stdout, cli.stdout + cli.stderr
        # it runs as the image's user
        with open("/proc/%d/status" % node.p.pid) as f:
            uids = re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1)
        assert int(uids) == UID
        node.p.send_signal(signal.SIGTERM)
        assert node.p.wait(30) == 0, node.logs()
    finally:
        node.stop()


def decide_on_redis(node):
    body = json.dumps({"requests": [{"name": "image", "unique_key": "ca", "hits": 1, "limit": 5,
                                     "duration": 60000}]})
    status, _, data = http("POST", node.url + "/v1/GetRateLimits", body)
    assert status == 200, data
    return json.loads(data)["responses"][0]


@needs("redis-server", "openssl")
def test_image_trusts_its_ca_bundle(image, tmp_path):
    """TLS to Redis without --redis-tls-ca verifies against the image's CA bundle: with the test
    CA added to the image's /etc/ssl/certs/ca-certificates.crt the decision is Redis's; with the
    image's bundle as built (Debian's CAs only) the same call is a per-item error."""
    from certs import make_ca, make_leaf
    from test_redis_tls import TlsRedis
    d = str(tmp_path)
    make_ca(d, "ca", "Image Test CA")
    make_leaf(d, "redis", "redis", "ca", "DNS:redis.test,IP:127.0.0.1")
    make_leaf(d, "client", "sluiced", "ca", "DNS:sluiced.test")
    redis = TlsRedis(lambda name: os.path.join(d, name))
    bundle = image.bundle / "rootfs" / "etc" / "ssl" / "certs" / "ca-certificates.crt"
    original = bundle.read_bytes()
    args = ("--store", "redis", "--redis-addrs", redis.addr, "--redis-tls", "--redis-timeout", "2s")
    try:
        untrusted = Chrooted(image, *args)
        try:
            untrusted.health()
            item = decide_on_redis(untrusted)
            assert item.get("error"), item
            _, _, m = http("GET", untrusted.url + "/metrics")
            fails = re.search(r"^sluice_redis_tls_failures_total (\S+)", m.decode(), re.M)
            assert fails and float(fails.group(1)) > 0, m.decode()[-2000:]
        finally:
            untrusted.stop()
        bundle.write_bytes(original + open(os.path.join(d, "ca.pem"), "rb").read())
        trusted = Chrooted(image, *args)
        try:
            trusted.health()
            item = decide_on_redis(trusted)
            assert not item.get("error") and item["status"] == "UNDER_LIMIT", (item, trusted.logs())
            assert item["remaining"] in ("4", 4), item
        finally:
            trusted.stop()
    finally:
        bundle.write_bytes(original)
        redis.stop()

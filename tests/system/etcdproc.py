# SPDX-License-Identifier: Apache-2.0
"""One real etcd for the system tests (test_cluster, test_protect, test_state through test_cluster's
fixture, test_levee, test_tls): free loopback ports, data and log in a temporary directory, started,
polled until healthy, and stopped or killed; it can be started again on the same ports and data."""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

from conftest import free_port

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


class EtcdProc:
    """fast_election: 10 ms heartbeats and a 100 ms election timeout (etcd's smallest lease TTL is
    1.5 election timeouts, so 1 s leases need it). scheme "https" with extra_args giving the
    certificate flags serves clients over TLS; ready() then needs the caller's own probe."""

    def __init__(self, fast_election=False, scheme="http", extra_args=(), prefix="sluice-etcd-"):
        self.root = tempfile.mkdtemp(prefix=prefix)
        self.dir = os.path.join(self.root, "data")
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = "%s://127.0.0.1:%d" % (scheme, self.client_port)
        self.args = list(extra_args)
        if fast_election:
            self.args += ["--heartbeat-interval", "10", "--election-timeout", "100"]
        self.proc = None
        self.log = open(os.path.join(self.root, "etcd.log"), "a")

    def healthy(self):
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return json.loads(r.read()).get("health") == "true"
        except Exception:  # noqa: BLE001
            return False

    def start(self, timeout=20.0, ready=None):
        """Start etcd and wait until ready() (default: /health says true); raise if it exits or
        is not ready within timeout seconds."""
        peer = "http://127.0.0.1:%d" % self.peer_port
        self.proc = subprocess.Popen(
            [ETCD, "--name", "t", "--data-dir", self.dir,
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "t=" + peer] + self.args,
            stdout=self.log, stderr=subprocess.STDOUT)
        ready = ready or self.healthy
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("etcd exited %s" % self.proc.returncode)
            if ready():
                return self
            time.sleep(0.05)
        raise RuntimeError("etcd did not start")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout=10):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self):
        """Stop and remove the data and the log."""
        self.stop()
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

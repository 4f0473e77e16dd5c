# SPDX-License-Identifier: Apache-2.0
"""What a Python test needs from the machine, and what happens when it is not there.

A test that needs a program or a Python module says so with `@needs("etcd", "openssl")` (a mark,
also usable as `pytestmark`) or calls `require("redis-server")` / `require_module("grpc")` inside a
fixture. When the thing is missing:

- with CI=true (as CI and `make fresh-test` run), the test FAILS, naming the Debian package that
  brings it: a missing install step in scripts/install-deps.sh must not pass as a skip;
- otherwise (a developer's partial machine) it is skipped with the same words, which pytest's
  summary (`-rs`) lists.

Skips that depend on the machine rather than on a package (extra loopback addresses, no root, a
kernel without network namespaces) use `machine_skip(reason)`: a skip in CI too, with its reason
in the summary.

The conftests import this module (tests/system, tests/chaos, tests/pkg) and with it the hook that
reads the `needs` mark. PACKAGES is the one table of program -> Debian package; the kind of
scripts/install-deps.sh that installs each is in that script (`test` unless said).
"""
import importlib
import os
import shutil

import pytest

# program (or absolute path) -> the Debian package that installs it
PACKAGES = {
    "etcd": "etcd-server",
    "etcdctl": "etcd-client",
    "redis-server": "redis-server",
    "redis-cli": "redis-tools",
    "openssl": "openssl",
    "promtool": "prometheus",
    "wrk": "wrk",
    "curl": "curl",
    "systemd-analyze": "systemd",
    "man": "man-db",
    "groff": "groff-base",
    "protoc": "protobuf-compiler",
    "ip": "iproute2",
    "nft": "nftables",
    "readelf": "binutils",
    "file": "file",
    "umoci": "umoci",
    "git": "git",
    "cmake": "cmake",
    "pkg-config": "pkg-config",
    "cc": "build-essential",
    "/usr/bin/chromium": "chromium",
    "/usr/bin/chromedriver": "chromium-driver",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
    "debootstrap": "debootstrap",
    "nginx": "nginx-light",
    "h2load": "nghttp2-client",
    "node": "nodejs",
    "npm": "npm",
}

# Python module -> Debian package (for /usr/bin/python3)
MODULES = {
    "grpc": "python3-grpcio",
    "google.protobuf": "python3-protobuf",
    "yaml": "python3-yaml",
    "cryptography": "python3-cryptography",
}


def in_ci():
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _missing(what, package):
    why = "%s is not installed: apt-get install %s (scripts/install-deps.sh installs it)" % (
        what, package)
    if in_ci():
        pytest.fail("CI=true and " + why, pytrace=False)
    pytest.skip(why)


def have(tool):
    if os.path.isabs(tool):
        return os.access(tool, os.X_OK)
    return shutil.which(tool) is not None


def require(*tools):
    """Fail (CI) or skip (elsewhere) unless every program is there."""
    for tool in tools:
        if not have(tool):
            _missing("`%s`" % tool, PACKAGES.get(tool) or PACKAGES.get(os.path.basename(tool))
                     or "the package that has " + tool)


def require_module(name):
    """The module, imported; fail (CI) or skip (elsewhere) when it cannot be."""
    try:
        return importlib.import_module(name)
    except ImportError:
        _missing("Python module %s (for /usr/bin/python3)" % name,
                 MODULES.get(name, "python3-" + name.split(".")[0]))


def require_built(path, what=None):
    """A file `make build` makes (a library, an example): fail (CI) or skip (elsewhere)."""
    if not os.path.exists(path):
        why = "%s is not built (%s): `make build` builds it" % (what or os.path.basename(path), path)
        if in_ci():
            pytest.fail("CI=true and " + why, pytrace=False)
        pytest.skip(why)


def built(path, what=None):
    """A mark: the test needs a file `make build` makes."""
    return pytest.mark.built(path, what)


def needs(*tools):
    """A mark: the test needs these programs (checked at set-up by pytest_runtest_setup)."""
    unknown = [t for t in tools if t not in PACKAGES and os.path.basename(t) not in PACKAGES]
    if unknown:
        raise ValueError("tests/support/needs.py: no package known for %s" % unknown)
    return pytest.mark.needs(*tools)


def machine_skip(reason):
    """A skip that no package mends (the machine lacks it): a skip in CI too, reason shown."""
    pytest.skip("this machine: " + reason)


# -- hooks, imported into the conftests --------------------------------------------------------

def register(config):
    """Called from each conftest's pytest_configure."""
    config.addinivalue_line("markers", "needs(*tools): programs the test needs (tests/support/needs.py)")
    config.addinivalue_line("markers", "built(path, what): a file make build makes, which the test needs")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        require(*mark.args)
    for mark in item.iter_markers("built"):
        require_built(*mark.args)

# SPDX-License-Identifier: Apache-2.0
"""What an operator gets besides the build tree (issue 16): --version on both programs (from git, or
from the VERSION file in a tarball without .git), the man pages sluiced(8) and sluice(1) (rendered
without a groff warning, and listing exactly the options --help lists), and the deployment examples
under docs/deploy/ (every sluiced option they use exists, and sluiced runs with their options: the
Kubernetes DNS example as one pod, the systemd example as three nodes on loopback). The install itself and the examples
built out of tree against it are the ctest test_install (tests/link/install.sh)."""
import os
import re
import shutil
import subprocess
import tempfile

import http.client

import pytest
import yaml

from conftest import BUILD, ROOT, free_port

SLUICED = os.path.join(BUILD, "bin", "sluiced")
SLUICE = os.path.join(BUILD, "bin", "sluice")
MAN = os.path.join(ROOT, "man")
DEPLOY = os.path.join(ROOT, "docs", "deploy")


def run(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def release():
    with open(os.path.join(ROOT, "VERSION")) as f:
        return f.read().strip()


# --- version ---------------------------------------------------------------------------------

@pytest.mark.parametrize("prog,name", [(SLUICED, "sluiced"), (SLUICE, "sluice")])
def test_version(prog, name):
    r = run(prog, "--version")
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(name + r" (\S+)\n", r.stdout)
    assert m, r.stdout
    ver = m.group(1)
    assert ver == release() or ver.startswith(release() + "-"), ver
    if os.path.exists(os.path.join(ROOT, ".git")) and shutil.which("git"):
        # `git describe` at configure time: a commit of this repository (HEAD then)
        m = re.search(r"-g([0-9a-f]{7,})(?:-dirty)?$", ver)
        assert m, ver
        assert run("git", "-C", ROOT, "cat-file", "-e", m.group(1) + "^{commit}").returncode == 0


def test_version_from_tarball_without_git():
    """A source tree without .git (an unpacked tarball) configures with VERSION as the version."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "sluice-" + release())
        shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "build*", "__pycache__"))
        r = subprocess.run(["cmake", "-S", src, "-B", os.path.join(tmp, "b")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "sluice version %s (SONAME version" % release() in r.stdout, r.stdout


# --- man pages -------------------------------------------------------------------------------

HELP_OPT = re.compile(r"^ {1,8}(?:-\w, )?(--\S+)")


def norm(opt):
    return opt.replace("--[no-]", "--")


def help_options(text):
    """the options a --help text defines (its option lines, not options it mentions)"""
    return {norm(m.group(1)) for m in map(HELP_OPT.match, text.splitlines()) if m}


def man_options(roff):
    """the options a man page section defines: the tags of its .TP paragraphs"""
    opts = set()
    lines = roff.splitlines()
    for i, l in enumerate(lines[:-1]):
        if l == ".TP":
            tag = lines[i + 1].replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
            tag = tag.replace("\\fI", "")
            m = re.match(r"(?:-\w, )?(--\S+)", tag)
            if m:
                opts.add(norm(m.group(1)))
    return opts


def read(path):
    with open(path) as f:
        return f.read()


@pytest.mark.parametrize("page", ["sluiced.8", "sluice.1"])
def test_man_page_renders_without_warnings(page):
    r = run("groff", "-man", "-ww", "-z", os.path.join(MAN, page))
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "", r.stderr


def test_sluiced_man_page_lists_every_option():
    r = run(SLUICED, "--help")
    assert r.returncode == 0
    in_help = help_options(r.stdout)
    in_man = man_options(read(os.path.join(MAN, "sluiced.8")))
    assert len(in_help) > 50
    assert in_help - in_man == set(), "in --help, not in sluiced.8"
    assert in_man - in_help == set(), "in sluiced.8, not in --help"


def sluice_commands():
    r = run(SLUICE, "--help")
    assert r.returncode == 0
    cmds = []
    for l in r.stdout.split("commands:")[1].splitlines():
        m = re.match(r"^  (\w+) ", l)
        if m:
            cmds.append(m.group(1))
    assert len(cmds) >= 7, r.stdout
    return cmds


def test_sluice_man_page_lists_every_command_and_option():
    roff = read(os.path.join(MAN, "sluice.1"))
    sections = dict(re.findall(r'^\.SS "sluice (\w+)"\n(.*?)(?=^\.S[SH] )', roff, re.M | re.S))
    cmds = sluice_commands()
    assert sorted(sections) == sorted(cmds)
    commands_list = roff.split(".SH COMMANDS\n")[1].split(".SH ")[0]
    for cmd in cmds:
        assert ".B %s\n" % cmd in commands_list, cmd
        r = run(SLUICE, cmd, "--help")
        assert r.returncode == 0, (cmd, r.stderr)
        in_help = help_options(r.stdout) - {"--help"}
        in_man = man_options(sections[cmd])
        assert in_help, cmd
        assert in_help - in_man == set(), "sluice %s: in --help, not in sluice.1" % cmd
        assert in_man - in_help == set(), "sluice %s: in sluice.1, not in --help" % cmd
    # --help and --version without a command
    top = man_options(roff.split(".SH OPTIONS\n")[1].split(".SH ")[0])
    assert {"--help", "--version"} <= top


# --- deployment examples ----------------------------------------------------------------------

def sluiced_option_names():
    return {o[2:] for o in help_options(run(SLUICED, "--help").stdout)}


def k8s_args(path):
    """every --flag in a sluiced container's args in a Kubernetes manifest"""
    flags = []
    with open(path) as f:
        for doc in yaml.safe_load_all(f):
            if not doc or doc.get("kind") != "Deployment":
                continue
            for c in doc["spec"]["template"]["spec"]["containers"]:
                flags += [a for a in c.get("args", []) + c.get("command", []) if a.startswith("--")]
    return flags


def test_deploy_examples_use_only_existing_options():
    known = sluiced_option_names()
    assert "listen-addr" in known and "dns-name" in known
    used = {}
    for name in sorted(os.listdir(DEPLOY)):
        if name.endswith(".yaml"):
            flags = k8s_args(os.path.join(DEPLOY, name))
            assert flags, name
            used[name] = {f[2:].split("=")[0] for f in flags}
    sysd = os.path.join(DEPLOY, "systemd")
    nodes = [n for n in sorted(os.listdir(sysd)) if re.fullmatch(r"node\d\.yaml", n)]
    assert len(nodes) == 3
    for name in nodes:
        with open(os.path.join(sysd, name)) as f:
            cfg = yaml.safe_load(f)
        used["systemd/" + name] = {k.replace("_", "-") for k in cfg}
        assert len(cfg["peers"]) == 3 and cfg["discovery"] == "static"
    unit = read(os.path.join(ROOT, "packaging", "systemd", "sluiced.service.in"))  # the real unit
    execs = re.findall(r"^ExecStart=(.*)$", unit, re.M)
    assert len(execs) == 1
    used["systemd/sluiced.service"] = {f[2:].split("=")[0] for f in execs[0].split()
                                       if f.startswith("--")}
    for where, opts in used.items():
        assert opts - known == set(), "%s uses unknown options" % where
    # the DNS example really uses DNS discovery and a quota file from its ConfigMap
    assert {"discovery", "dns-name", "quota-file"} <= used["k8s-dns.yaml"]


def test_k8s_manifests_are_sandboxed():
    """Every container of every Deployment in docs/deploy/k8s*.yaml runs as non-root, on a
    read-only root file system, without privilege escalation or capabilities, under the
    runtime's default seccomp profile, with a writable runtime directory for the admin socket."""
    files = sorted(f for f in os.listdir(DEPLOY) if f.startswith("k8s") and f.endswith(".yaml"))
    assert files
    for name in files:
        deps = [d for d in deployment(os.path.join(DEPLOY, name)) if d["kind"] == "Deployment"]
        assert deps, name
        for d in deps:
            pod = d["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
            vols = {v["name"]: v for v in pod.get("volumes", [])}
            for c in pod["containers"]:
                sc = c["securityContext"]
                assert sc["runAsNonRoot"] is True and sc["allowPrivilegeEscalation"] is False
                assert sc["readOnlyRootFilesystem"] is True, name
                assert sc["capabilities"]["drop"] == ["ALL"], name
                assert sc["seccompProfile"]["type"] == "RuntimeDefault", name
                run = [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/run/sluice"]
                assert run and "emptyDir" in vols[run[0]["name"]], name


def deployment(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    return docs


def attempt(addr, resource):
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        c.request("POST", "/attempt", body=b"", headers={"X-Resource": resource})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def pairs(args):
    """["--a", "x", "--b", "y"] -> [("a", "x"), ("b", "y")]"""
    assert len(args) % 2 == 0 and all(a.startswith("--") for a in args[0::2]), args
    return [(a[2:], v) for a, v in zip(args[0::2], args[1::2])]


def test_k8s_dns_example_runs(node_factory, tmp_path):
    """One pod of docs/deploy/k8s-dns.yaml, its addresses on loopback: it starts with the
    Deployment's options and the ConfigMap's quotas, and answers /attempt by them."""
    docs = deployment(os.path.join(DEPLOY, "k8s-dns.yaml"))
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    dep = next(d for d in docs if d["kind"] == "Deployment")
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(cm["data"]["quotas.yaml"])
    port = free_port()
    secret = tmp_path / "peer-secret"
    secret.write_text("deploy-example-secret-0123456789\n")
    os.chmod(secret, 0o600)
    args = []
    for k, v in pairs(dep["spec"]["template"]["spec"]["containers"][0]["args"]):
        if k == "listen-addr":
            continue  # the node factory gives it
        v = {"advertise-addr": "127.0.0.1:%d" % port, "dns-name": "127.0.0.1",
             "quota-file": str(quotas), "peer-secret-file": str(secret)}.get(k, v)
        args += ["--" + k, v]
    n = node_factory(args, port=port)
    assert attempt(n.addr, "api") == 200
    statuses = [attempt(n.addr, "other") for _ in range(12)]
    assert statuses.count(429) >= 1, statuses  # key_default: rate 10, burst 5


def test_systemd_example_runs_three_nodes(node_factory, tmp_path):
    """docs/deploy/systemd's three node files, with 10.0.0.N:1051 moved to loopback ports and the
    paths to a scratch directory: three nodes start as one cluster and answer /attempt."""
    sysd = os.path.join(DEPLOY, "systemd")
    ports = [free_port() for _ in range(3)]
    addrs = {"10.0.0.%d:1051" % (i + 1): "127.0.0.1:%d" % p for i, p in enumerate(ports)}
    quotas = tmp_path / "quotas.yaml"
    shutil.copy(os.path.join(sysd, "quotas.yaml"), quotas)
    secret = tmp_path / "peer-secret"
    secret.write_text("deploy-example-secret-0123456789\n")
    os.chmod(secret, 0o600)
    nodes = []
    for i in range(3):
        with open(os.path.join(sysd, "node%d.yaml" % (i + 1))) as f:
            cfg = yaml.safe_load(f)
        cfg["advertise-addr"] = addrs[cfg["advertise-addr"]]
        cfg["peers"] = [addrs[p] for p in cfg["peers"]]
        cfg["quota-file"] = str(quotas)
        cfg["peer-secret-file"] = str(secret)
        cfg["state-dir"] = str(tmp_path / ("state%d" % i))
        assert "admin-addr" not in cfg  # the admin API on the unit's runtime directory socket
        del cfg["listen-addr"]  # the node factory gives it
        path = tmp_path / ("node%d.yaml" % i)
        path.write_text(yaml.safe_dump(cfg))
        nodes.append(node_factory(["--config", str(path)], port=ports[i], start=False))
    for n in nodes:
        n.start(wait=False)
    for n in nodes:
        n.wait_ready()
    for n in nodes:
        assert attempt(n.addr, "api") == 200

# SPDX-License-Identifier: Apache-2.0
"""The README's and the docs' command examples, run as written against a real sluiced started as `make run`
starts it (`--config examples/sluiced.yaml`), so that an example that stops working fails CI:
every `$ ` line of the README's "Examples" section that talks to the local node (localhost:5454,
127.0.0.1:5454, or the node's admin socket), with only the port swapped for a free one, and the
hints `make run` prints (scripts/run.sh). A `...` placeholder line is completed from the line
before it."""
import os
import re
import shlex
import subprocess

from conftest import BUILD, ROOT, free_port

LOCAL = re.compile(r"(localhost|127\.0\.0\.1):5454")


def shell_lines(text):
    """The commands of `$ ` lines (continuations joined, comments cut)."""
    out, cur = [], None
    for line in text.splitlines():
        s = line.rstrip()
        if cur is not None:
            cur += " " + s.strip().rstrip("\\")
            if not s.endswith("\\"):
                out.append(cur)
                cur = None
            continue
        if s.startswith("$ "):
            body = s[2:]
            if body.endswith("\\"):
                cur = body.rstrip("\\")
            else:
                out.append(body)
    return [re.sub(r"\s+#.*$", "", c).strip() for c in out]


def readme_examples():
    text = open(os.path.join(ROOT, "README.md")).read()
    sect = text.split("\n## Examples\n", 1)[1].split("\n## ", 1)[0]
    cmds, prev = [], None
    for c in shell_lines(sect):
        if "..." in c and prev:  # "sluice check ... --json": the line before's arguments
            head = c.split("...")[0].strip()
            if prev.startswith(head):
                c = prev + c.split("...", 1)[1]
        prev = c
        local = LOCAL.search(c) or re.search(r"build/bin/sluice (top|killswitch --node)", c)
        if local:
            cmds.append(c)
    return cmds


def run_hints():
    text = open(os.path.join(ROOT, "scripts", "run.sh")).read()
    block = text.split("<<'MSG'\n", 1)[1].split("\nMSG\n", 1)[0]
    cmds, cur = [], ""
    for line in block.splitlines()[1:]:
        s = line.strip()
        cur = (cur + " " + s.rstrip("\\")).strip() if cur else s.rstrip("\\").strip()
        if not s.endswith("\\"):
            cmds.append(re.sub(r"\s+#.*$", "", cur))
            cur = ""
    return [c for c in cmds if c]


def run_against(cmds, tmp_path):
    port = free_port()
    env = dict(os.environ, RUNTIME_DIRECTORY=str(tmp_path))
    p = subprocess.Popen([os.path.join(BUILD, "bin", "sluiced"), "--config",
                          "examples/sluiced.yaml", "--listen-addr", "127.0.0.1:%d" % port],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        import test_gubernator  # noqa: F401  (conftest's helpers)
        from conftest import wait_for
        import socket

        def up():
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False
        assert wait_for(up, 10)
        ran = []
        for c in cmds:
            line = LOCAL.sub(lambda m: "%s:%d" % (m.group(1), port), c)
            r = subprocess.run(line, shell=True, cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=20)
            # 0 ok; 1 limited or refused (an /attempt the example's quota rejects): both are
            # answers; 2 (usage) and 3 (unreachable) are broken examples
            assert r.returncode in (0, 1), (line, r.returncode, r.stdout, r.stderr)
            assert r.stdout.strip() or r.returncode == 0, (line, r.stderr)
            ran.append(shlex.split(line)[0])
        return ran
    finally:
        p.terminate()
        p.wait(10)


def test_readme_examples_run(tmp_path):
    cmds = readme_examples()
    assert len(cmds) >= 8, cmds
    ran = run_against(cmds, tmp_path)
    print("# %d README examples ran against a real sluiced" % len(ran))


def test_make_run_hints_run(tmp_path):
    cmds = run_hints()
    assert len(cmds) >= 5, cmds
    run_against(cmds, tmp_path)


def doc_lines(path, starts):
    """Command lines in docs/<path>'s code blocks that start with one of `starts` (continuations
    joined, comments cut)."""
    out, cur, in_code = [], None, False
    for line in open(os.path.join(ROOT, "docs", path)).read().splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            continue
        s = line.strip()
        if cur is not None:
            cur += " " + s.rstrip("\\").strip()
            if not s.endswith("\\"):
                out.append(cur)
                cur = None
        elif s.startswith(starts):
            if s.endswith("\\"):
                cur = s.rstrip("\\").strip()
            else:
                out.append(re.sub(r"\s+#.*$", "", s))
    return out


def test_levee_quota_examples_run_against_etcd():
    """docs/levee.md's `sluice quota` examples, as written, against a real etcd: each answers 0,
    and `get` finds what `set` wrote."""
    from needs import require
    require("etcd")
    from etcdproc import EtcdProc
    cmds = [c for c in doc_lines("levee.md", ("sluice quota ",)) if "..." not in c]
    assert len(cmds) >= 8, cmds
    e = EtcdProc().start(timeout=15)
    try:
        sluice = os.path.join(BUILD, "bin", "sluice")
        for c in cmds:
            argv = shlex.split(c)
            argv = [sluice, "quota", "--storage-addrs", e.url] + argv[2:]
            r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
            assert r.returncode == 0, (c, r.stdout, r.stderr)
    finally:
        e.close()


def test_docs_curl_examples_run(tmp_path):
    """The curl examples of docs/levee.md and docs/envoy.md against a node with the example
    quotas and an RLS rule for their domain (port swapped)."""
    rls = tmp_path / "rls"
    rls.mkdir()
    (rls / "shop.yaml").write_text("domain: shop\ndescriptors:\n  - key: remote_address\n"
                                   "    rate_limit: {unit: minute, requests_per_unit: 60}\n")
    cmds = doc_lines("levee.md", ("curl ",)) + doc_lines("envoy.md", ("curl ",))
    cmds = [c for c in cmds if re.search(r"(localhost|127\.0\.0\.1):(5454|8081)", c)]
    assert len(cmds) >= 2, cmds
    port = free_port()
    env = dict(os.environ, RUNTIME_DIRECTORY=str(tmp_path))
    p = subprocess.Popen([os.path.join(BUILD, "bin", "sluiced"), "--config",
                          "examples/sluiced.yaml", "--listen-addr", "127.0.0.1:%d" % port,
                          "--rls-config-dir", str(rls)], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import socket
        from conftest import wait_for

        def up():
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False
        assert wait_for(up, 10)
        for c in cmds:
            line = re.sub(r"(localhost|127\.0\.0\.1):(5454|8081)", r"\1:%d" % port, c)
            r = subprocess.run(line + " -o /dev/null -w '%{http_code}'", shell=True, cwd=ROOT,
                               capture_output=True, text=True, timeout=20)
            assert r.returncode == 0 and r.stdout in ("200", "429"), (line, r.stdout, r.stderr)
    finally:
        p.terminate()
        p.wait(10)

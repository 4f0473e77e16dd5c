# SPDX-License-Identifier: Apache-2.0
"""The README's command examples, run as written against a real sluiced started as `make run`
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

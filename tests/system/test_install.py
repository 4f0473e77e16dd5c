"""What an operator gets besides the build tree (issue 16): --version on both programs (from git, or
from the VERSION file in a tarball without .git), the man pages sluiced(8) and sluice(1) (rendered
without a groff warning, and listing exactly the options --help lists). The install itself and the examples
built out of tree against it are the ctest test_install (tests/link/install.sh)."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

from conftest import BUILD, ROOT

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

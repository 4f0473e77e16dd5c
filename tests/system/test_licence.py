# SPDX-License-Identifier: Apache-2.0
"""sluice's licence (issue 23): Apache-2.0 in LICENSE, NOTICE for the interface definitions that
describe other projects' APIs, an SPDX line in every source file, a machine-readable (DEP-5)
debian/copyright that covers every file, and the licence named in the README and the man pages."""
import fnmatch
import os
import re
import subprocess

from conftest import ROOT

SPDX = re.compile(r"SPDX-License-Identifier: (\S+)")
# the files that are source (code, build, configuration): each opens with an SPDX line
SOURCE_EXT = (".c", ".h", ".py", ".sh", ".lua", ".proto", ".cmake", ".yaml", ".yml", ".gp", ".in",
              ".html", ".conf")
SOURCE_NAMES = ("CMakeLists.txt", "Makefile", ".ci/run", "debian/rules", "man/sluiced.8",
                "man/sluice.1")
NOT_SOURCE = ("tests/fuzz/corpus/",)  # fuzz inputs: bytes, not text of ours to annotate


def tracked_files():
    if os.path.isdir(os.path.join(ROOT, ".git")):
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-co", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout
        return sorted(set(f for f in out.split("\n") if f and os.path.isfile(os.path.join(ROOT, f))))
    files = []
    for d, subdirs, names in os.walk(ROOT):
        subdirs[:] = [s for s in subdirs if not s.startswith(("build", "."))]
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return sorted(files)


def is_source(path):
    if path.startswith(NOT_SOURCE):
        return False
    return path.endswith(SOURCE_EXT) or path in SOURCE_NAMES


def spdx_of(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        head = [f.readline() for _ in range(3)]
    for line in head:
        m = SPDX.search(line)
        if m:
            return m.group(1).rstrip("*/-> ")
    return None


def test_licence_file_is_apache_2():
    text = open(os.path.join(ROOT, "LICENSE")).read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    debian = "/usr/share/common-licenses/Apache-2.0"  # base-files: on every Debian machine
    if os.path.exists(debian):
        assert text.split() == open(debian).read().split(), "LICENSE is not the Apache-2.0 text"
    notice = open(os.path.join(ROOT, "NOTICE")).read()
    assert notice.startswith("sluice\nCopyright ") and "Apache License, Version 2.0" in notice


def test_every_source_file_has_an_spdx_line():
    files = [f for f in tracked_files() if is_source(f)]
    assert len(files) > 400, "found only %d source files" % len(files)
    missing = [f for f in files if spdx_of(f) is None]
    assert missing == [], "no SPDX-License-Identifier in the first three lines: %s" % missing
    others = {f: spdx_of(f) for f in files if spdx_of(f) != "Apache-2.0"}
    # only the stand-ins for Protocol Buffers' well-known types are under Google's licence
    assert all(f.startswith("proto/envoy/google/protobuf/") and lic == "BSD-3-Clause"
               for f, lic in others.items()), others


def dep5():
    """debian/copyright as paragraphs of {field: value} (continuation lines joined)."""
    paras, cur, key = [], {}, None
    for line in open(os.path.join(ROOT, "debian", "copyright")).read().split("\n"):
        if not line.strip():
            if cur:
                paras.append(cur)
            cur, key = {}, None
        elif line[0] in " \t":
            assert key, "a continuation line before any field: %r" % line
            cur[key] += "\n" + line.strip()
        else:
            key, _, value = line.partition(":")
            assert _, "not a field: %r" % line
            assert key not in cur, "field %s twice in one paragraph" % key
            cur[key] = value.strip()
    if cur:
        paras.append(cur)
    return paras


def test_debian_copyright_is_dep5_and_covers_every_file():
    paras = dep5()
    header = paras[0]
    assert header["Format"] == "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    assert header["Upstream-Name"] == "sluice"
    files_paras = [p for p in paras[1:] if "Files" in p]
    licences = {p["License"].split("\n")[0]: p["License"] for p in paras[1:] if "Files" not in p}
    assert files_paras and files_paras[0]["Files"] == "*"
    for p in files_paras:
        assert p.get("Copyright"), p
        short = p["License"].split("\n")[0]
        assert short in licences and "\n" in licences[short], "no text for licence %s" % short
    assert "Apache-2.0" in licences and "/usr/share/common-licenses/Apache-2.0" in licences["Apache-2.0"]

    # DEP-5: the last Files paragraph that matches a file gives its licence; it must be the one
    # the file's own SPDX line names, and every pattern must match something
    files = tracked_files()
    for p in files_paras:
        for pattern in p["Files"].split():
            assert any(fnmatch.fnmatch(f, pattern) for f in files), "matches nothing: " + pattern
    for f in files:
        if not is_source(f):
            continue
        governing = [p for p in files_paras
                     if any(fnmatch.fnmatch(f, pat) for pat in p["Files"].split())][-1]
        assert governing["License"].split("\n")[0] == spdx_of(f), f


def test_readme_and_man_pages_name_the_licence():
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "## Licence" in readme and "Apache License, Version 2.0" in readme
    for page in ("sluiced.8", "sluice.1"):
        roff = open(os.path.join(ROOT, "man", page)).read()
        section = roff.split(".SH COPYRIGHT\n", 1)[1].split(".SH ", 1)[0]
        assert "Apache" in section and "License, Version 2.0" in section, page

# SPDX-License-Identifier: Apache-2.0
"""The docs stay true to the code, checked mechanically over README.md and every docs/**/*.md:
- every --option they mention exists: in `sluiced --help`, or in the `sluice <cmd> --help` of the
  command it is written after (same line, a command line continued with a backslash, or a table
  about that command); prose about options, in sluiced or some sluice command; every `sluice X`
  they run is a command; every SLUICE_* variable is read by something;
- docs/operations.md's options table lists every sluiced option, with --help's defaults, and so
  does every "option | default" table; its metrics table lists every registered family, and it
  names the files that register them;
- every sluice_* metric they name is a family the source registers;
- every relative link points to an existing file and, for an anchor into a Markdown file, to an
  existing heading (GitHub's slugs); every repository path in a code span exists;
- every HTTP endpoint they name is one the routers (node/service.c, node/adminsrv.c) serve, and
  docs/api.md names every one of those;
- docs/architecture.md's layer table names exactly each layer's modules; README.md links every
  docs/*.md and names only make targets the Makefile has.
Deliberate mentions of other programs' options, or of words that only look like metrics,
endpoints or paths, are in the allowlists below, each with its reason. Only --help is run: fast."""
import glob
import os
import re
import subprocess

import pytest

from conftest import BUILD, ROOT

SLUICED = os.path.join(BUILD, "bin", "sluiced")
SLUICE = os.path.join(BUILD, "bin", "sluice")

DOCS = [os.path.join(ROOT, "README.md")] + sorted(
    glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))

# --- allowlists: (doc file relative to ROOT, mention) -> reason ----------------------------------

# options that are not sluiced's nor sluice's, in lines the context rules below cannot attribute
OTHER_OPTIONS = {
    ("docs/operations.md", "--print-requires-private"): "pkg-config's, in a command line split over two lines",
    ("docs/operations.md", "--static"): "pkg-config's, in a code span begun on the line before",
    ("docs/operations.md", "--flag"): "a placeholder: how boolean flags are written",
    ("docs/operations.md", "--no-flag"): "a placeholder: how boolean flags are written",
    ("docs/operations.md", "--without-gssapi"): "libcurl's configure options (a static libcurl)",
    ("docs/operations.md", "--disable-ldap"): "libcurl's configure options (a static libcurl)",
    ("docs/operations.md", "--without-librtmp"): "libcurl's configure options (a static libcurl)",
    ("docs/performance.md", "--only"): "bench/bench.py's (the benchmark driver), not sluice's",
    ("docs/cluster.md", "--check"): "bench/scale.py's (the scale calculator), not sluice's",
    ("docs/protection.md", "--critical"): "examples/middleware.c's own option",
    ("docs/protection.md", "--lease"): "examples/middleware.c's own option",
    ("README.md", "--listen"): "--listen_adr, the misspelt flag of a did-you-mean example",
    ("docs/operations.md", "--listen"): "--listen_adr, the misspelt flag of a did-you-mean example",
}

# sluice_* words in the docs that are not metric families
NOT_METRICS = {
    ("docs/protection.md", "sluice_client"): "a CMake library target, not a metric",
}

# repository paths in the docs that a run creates
GENERATED_PATHS = {
    ("docs/performance.md", "bench/out/results.json"): "written by make bench",
}

# endpoint-looking paths in the docs that sluiced does not serve, on purpose
NOT_ENDPOINTS = {
    ("docs/envoy.md", "/healthcheck"): "envoyproxy/ratelimit's endpoint, in the migration table",
    ("docs/levee.md", "/sluice"): "the default etcd root (--storage-prefix), not a URL path",
    ("docs/levee.md", "/levee"): "Levee's usual etcd root, not a URL path",
    ("docs/levee.md", "/quota"): "the suffix of a key quota's etcd key",
    ("docs/levee.md", "/udp"): "a --graphite-addr suffix",
    ("docs/levee.md", "/tcp"): "a --graphite-addr suffix",
}

# programs whose options a doc line may show: an option after one of these words (and before any
# sluice/sluiced) belongs to it, not to sluice
OTHER_PROGRAMS = ("curl", "cmake", "ctest", "pytest", "python3", "make", "redis-server",
                  "redis-cli", "etcd", "etcdctl", "wrk", "h2load", "nginx", "gubernator",
                  "envoy", "ratelimit", "git", "promtool", "openssl", "kubectl", "docker",
                  "grpcurl", "ghz", "groff", "apt-get", "systemctl", "gnuplot", "valgrind",
                  "perf", "ss", "dig", "gcc", "clang", "cc", "pkg-config", "lintian",
                  "dpkg-buildpackage", "journalctl", "tc", "nc", "socat", "chromium",
                  "debootstrap", "apt")


def rel(path):
    return os.path.relpath(path, ROOT)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout


HELP_OPT = re.compile(r"^ {1,8}(?:-\w, )?--(\[no-\])?([a-z0-9][a-z0-9-]*)")


def help_options(text):
    """{name: is_boolean} for the option lines of a --help text (--[no-]x is a boolean)"""
    out = {}
    for line in text.splitlines():
        m = HELP_OPT.match(line)
        if m:
            out[m.group(2)] = bool(m.group(1))
    return out


_cli = None


def cli():
    """(sluiced's options, {sluice command: its options}), each {name: is_boolean}"""
    global _cli
    if _cli is None:
        daemon = help_options(run(SLUICED, "--help"))
        top = run(SLUICE, "--help")
        cmds = {}
        for line in top.split("commands:")[1].splitlines():
            m = re.match(r"^  (\w+) ", line)
            if m:
                cmds[m.group(1)] = help_options(run(SLUICE, m.group(1), "--help"))
        common = help_options(top.split("commands:")[0])
        common.update({"help": False, "version": False})
        for opts in cmds.values():
            opts.update(common)
        assert len(daemon) > 50 and len(cmds) >= 7, (len(daemon), sorted(cmds))
        _cli = daemon, cmds
    return _cli


def known(opt, opts):
    """whether --opt is one of opts, as itself or as the --no- form of a boolean; --x-* is
    a family: some option begins with x-"""
    if opt.endswith("-*"):
        return any(o.startswith(opt[:-1]) for o in opts)
    if opt in opts:
        return True
    return opt.startswith("no-") and opts.get(opt[3:]) is True


def doc_lines(path):
    """(line number, line, in a code block) for each line of a Markdown file"""
    fence = False
    for n, line in enumerate(read(path).splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        yield n, line, fence


# --- options -------------------------------------------------------------------------------------

OPT = re.compile(r"(?<![\w-])--(?:\[no-\])?([a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:-\*)?)")
# sluiced or sluice <cmd> anywhere; another program only where a command starts (line start,
# after $, a backquote, a pipe, ; or &&), so that prose ("make sure", "envoy.md") is not one
CONTEXT = re.compile(r"(?<![\w.-])(sluiced|sluice(?: +(\w+))?)(?![\w-])"
                     r"|(?:^|[`$(;|&])\s*(?:\S*/)?(%s) "
                     % "|".join(re.escape(p) for p in OTHER_PROGRAMS))


POSSESSIVE = re.compile(r"(?<![\w.-])(?:%s)(?:'s)? `?$" % "|".join(re.escape(p) for p in OTHER_PROGRAMS))


def option_owner(before, cmds, carried, others_from=0):
    """which program the text before an option puts it under: "sluiced", a sluice command,
    None (another program's), or the context carried from a continued command line. Another
    program counts only from others_from on (the code span the option is in), or when the
    option directly follows its possessive ("etcd's `--client-cert-auth`")"""
    owner = carried
    if POSSESSIVE.search(before):
        return None
    for m in CONTEXT.finditer(before):
        word = m.group(1)
        if word is None:
            if m.start() >= others_from:
                owner = None
        elif word == "sluiced":
            owner = "sluiced"
        elif word.startswith("sluice") and not word.startswith("sluiced"):
            cmd = m.group(2)
            if cmd in cmds:
                owner = cmd
            # "sluice" alone (the project's name, or sluice --help): keep what came before
    return owner


def option_mentions():
    """(doc, line number, option, owner) for each --option in the docs. The owner is what the
    line names before the option ("sluiced", a sluice command, None for another program), what a
    command line continued with a backslash named, the command a table of options is about, or
    "any" (prose about options: the option must exist in sluiced or some sluice command)"""
    _, cmds = cli()
    out = []
    for path in DOCS:
        carried = "any"
        table_owner = None
        for n, line, code in doc_lines(path):
            # a table of one sluice command's options: its header row names the command
            if line.startswith("|"):
                m = re.match(r"\|\s*`?sluice (\w+)", line)
                if m and m.group(1) in cmds and table_owner is None:
                    table_owner = m.group(1)
            else:
                table_owner = None
            start = carried if code else (table_owner or "any")
            for m in OPT.finditer(line):
                before = line[:m.start()]
                span = before.rfind("`") if before.count("`") % 2 else len(before)
                owner = option_owner(before, cmds, start, 0 if code else span)
                out.append((rel(path), n, m.group(1), owner))
            if code and line.rstrip().endswith("\\"):
                carried = option_owner(line, cmds, start)
            else:
                carried = "any"
    return out


def test_every_option_in_the_docs_exists():
    daemon, cmds = cli()
    anywhere = dict(daemon)
    for opts in cmds.values():
        anywhere.update(opts)
    wrong = []
    for doc, n, opt, owner in option_mentions():
        if owner is None or (doc, "--" + opt) in OTHER_OPTIONS:
            continue
        opts = {"sluiced": daemon, "any": anywhere}.get(owner) or cmds[owner]
        if not known(opt, opts):
            wrong.append("%s:%d: --%s (%s)" % (doc, n, opt,
                                               owner if owner in ("sluiced", "any") else "sluice " + owner))
    assert wrong == [], "options the docs mention that --help does not have:\n" + "\n".join(wrong)


def test_allowlisted_options_are_still_mentioned():
    mentioned = {(doc, "--" + opt) for doc, _, opt, _ in option_mentions()}
    assert set(OTHER_OPTIONS) - mentioned == set()


def test_every_sluice_command_in_the_docs_exists():
    """`sluice X ...` in a code span, or a code block's line running sluice X: X is a command"""
    _, cmds = cli()
    wrong = []
    for path in DOCS:
        for n, line, code in doc_lines(path):
            spans = [line] if code else re.findall(r"`([^`]+)`", line)
            for span in spans:
                pat = r"(?:^|[\s$(/;|&])sluice +([a-z][\w-]*)" if code else r"^(?:\S*/)?sluice +([a-z][\w-]*)"
                for m in re.finditer(pat, span):
                    if m.group(1) not in cmds:
                        wrong.append("%s:%d: sluice %s" % (rel(path), n, m.group(1)))
    assert wrong == [], "sluice commands the CLI does not have:\n" + "\n".join(wrong)


def test_every_environment_variable_in_the_docs_exists():
    """SLUICE_X in the docs: a sluiced option's variable (--help's "env SLUICE_X"), or one the
    tests, the benchmarks or the scripts read"""
    known_env = set(re.findall(r"env (SLUICE_[A-Z0-9_]+)", run(SLUICED, "--help")))
    for d in ("tests", "bench", "scripts"):
        for path in glob.glob(os.path.join(ROOT, d, "**", "*.*"), recursive=True):
            if path.endswith((".py", ".sh", ".c", ".h")) and path != os.path.abspath(__file__):
                known_env |= set(re.findall(r"SLUICE_[A-Z0-9_]+", read(path)))
    known_env |= set(re.findall(r"SLUICE_[A-Z0-9_]+", read(os.path.join(ROOT, "Makefile"))))
    wrong = []
    for path in DOCS:
        for n, line, _ in doc_lines(path):
            for name in re.findall(r"\b(SLUICE_[A-Z0-9_]*[A-Z0-9])\b", line):
                if name not in known_env:
                    wrong.append("%s:%d: %s" % (rel(path), n, name))
    assert wrong == [], "environment variables nothing reads:\n" + "\n".join(wrong)


def operations_table_options():
    """the option names in docs/operations.md's options table (| Group | Options |)"""
    text = read(os.path.join(ROOT, "docs", "operations.md"))
    m = re.search(r"^\| Group \| Options \|\n((?:\|.*\n)+)", text, re.M)
    assert m, "docs/operations.md: no | Group | Options | table"
    names = set()
    for row in m.group(1).splitlines()[1:]:
        names |= set(re.findall(r"`([a-z][a-z0-9]*(?:-[a-z0-9]+)*)`", row))
    return names


def test_every_sluiced_option_is_in_the_operations_table():
    daemon, _ = cli()
    missing = sorted(set(daemon) - operations_table_options() - {"help", "version", "config"})
    assert missing == [], "sluiced options missing from docs/operations.md's table: %s" % missing


def help_defaults(text):
    """{option: its "[default: X; env ...]" text} of a --help text"""
    out, cur = {}, None
    for line in text.splitlines():
        m = HELP_OPT.match(line)
        if m:
            cur = m.group(2)
        m = re.search(r"\[default: (.*?); env ", line)
        if m and cur:
            out[cur] = m.group(1)
            cur = None
    return out


def test_operations_table_defaults_match_help():
    """a number or boolean right after an option's name in the table is its default"""
    defaults = help_defaults(run(SLUICED, "--help"))
    text = read(os.path.join(ROOT, "docs", "operations.md"))
    table = re.search(r"^\| Group \| Options \|\n((?:\|.*\n)+)", text, re.M).group(1)
    pairs = re.findall(r"`([a-z][a-z0-9-]*)` (\d[\w.^]*%?|true|false)(?=[\s,;)|])", table)
    assert len(pairs) > 30
    wrong = []
    for name, value in pairs:
        want = value.rstrip("%")
        if re.fullmatch(r"(\d+)\^(\d+)", want):
            want = str(int(want.split("^")[0]) ** int(want.split("^")[1]))
        if defaults.get(name) != want:
            wrong.append("%s: table %s, --help %s" % (name, value, defaults.get(name)))
    assert wrong == [], "docs/operations.md's defaults differ from --help:\n" + "\n".join(wrong)


def option_default_tables():
    """(doc, line, option, stated default) from every table whose first two columns are
    "option" and "default": an option cell may list several (`--a` / `--b`), its default cell
    then lists theirs in the same order"""
    out = []
    for path in DOCS:
        cols = None
        for n, line, code in doc_lines(path):
            if code or not line.startswith("|"):
                cols = None
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cols is None:
                cols = [c.lower() for c in cells]
                continue
            if cols[:2] != ["option", "default"] or set(cells[0]) <= set("-: "):
                continue
            opts = re.findall(r"`(?:--)?([a-z][a-z0-9-]*)`", cells[0])
            values = re.split(r" / |, ", cells[1])
            if len(opts) == len(values):
                out += [(rel(path), n, o, v.strip()) for o, v in zip(opts, values)]
    return out


def test_option_tables_defaults_match_help():
    """in an option | default table, a default written as one word (a number, a size, a
    duration, a boolean, a choice, `--another-option`) is the one --help gives; words and "–"
    (none) are the doc's"""
    defaults = help_defaults(run(SLUICED, "--help"))
    rows = option_default_tables()
    assert len(rows) > 30
    wrong = ["%s:%d: --%s: doc %s, --help %s" % (doc, n, o, v, defaults.get(o))
             for doc, n, o, v in rows
             if re.fullmatch(r"`?[\w/$:.-]+`?", v) and defaults.get(o) != v.strip("`")]
    assert wrong == [], "option tables whose defaults differ from --help:\n" + "\n".join(wrong)


# --- metrics -------------------------------------------------------------------------------------

def registered_metrics():
    """every sluice_* family name the source registers (a string literal in src/)"""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True):
        names |= set(re.findall(r'"(sluice_[a-z0-9_]+)"', read(path)))
    assert len(names) > 50
    return names


def metric_mentions():
    out = []
    for path in DOCS:
        for n, line, _ in doc_lines(path):
            for m in re.finditer(r"(?<![\w.-])(sluice_[a-z0-9_]+)", line):
                out.append((rel(path), n, m.group(1)))
    return out


def test_every_metric_in_the_docs_is_registered():
    families = registered_metrics()
    wrong = []
    for doc, n, name in metric_mentions():
        if (doc, name) in NOT_METRICS:
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in families and base not in families:
            wrong.append("%s:%d: %s" % (doc, n, name))
    assert wrong == [], "metrics the docs name that the code does not register:\n" + "\n".join(wrong)


def test_operations_names_the_files_that_register_metrics():
    text = read(os.path.join(ROOT, "docs", "operations.md"))
    m = re.search(r"Every family sluiced registers \(the registration calls are in (.*?)\):",
                  text, re.S)
    assert m
    named = set(re.findall(r"`([\w/]+\.c)`", m.group(1)))
    registering = set()
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True):
        if re.search(r'"sluice_[a-z0-9_]+"', read(path)):
            registering.add(os.path.relpath(path, os.path.join(ROOT, "src")))
    assert named == registering


def test_every_registered_metric_is_in_the_operations_table():
    text = read(os.path.join(ROOT, "docs", "operations.md"))
    table = "\n".join(l for l in text.splitlines() if l.startswith("| `sluice_"))
    documented = set(re.findall(r"`(sluice_[a-z0-9_]+)`", table))
    assert registered_metrics() - documented == set()


# --- links ---------------------------------------------------------------------------------------

def slug(heading):
    """GitHub's anchor for a heading: links and emphasis reduced to their text, lower case,
    punctuation dropped (but - and _), spaces to -"""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    for _, line, code in doc_lines(path):
        m = re.match(r"^#{1,6} +(.*?) *#*$", line)
        if m and not code:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else "%s-%d" % (s, k))
    return out


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?: \"[^\"]*\")?\)")


def test_every_relative_link_resolves():
    wrong = []
    for path in DOCS:
        for n, line, code in doc_lines(path):
            if code:
                continue
            # code spans are not links
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = m.group(1)
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue
                file, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
                where = "%s:%d: %s" % (rel(path), n, target)
                if not os.path.exists(dest):
                    wrong.append(where + " (no such file)")
                elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                    wrong.append(where + " (no such heading)")
    assert wrong == [], "broken links:\n" + "\n".join(wrong)


def test_readme_links_every_doc():
    readme = read(os.path.join(ROOT, "README.md"))
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", readme))
    docs = {rel(p) for p in glob.glob(os.path.join(ROOT, "docs", "*.md"))}
    assert docs - linked == set(), "docs README.md does not link"


def test_architecture_lists_every_module():
    """docs/architecture.md's layer table: each layer's row names exactly its modules (a module
    is a .c, or a header alone, in src/<layer>/)"""
    rows = {}
    for _, line, code in doc_lines(os.path.join(ROOT, "docs", "architecture.md")):
        m = re.match(r"^\| `(\w+)`[^|]*\| (.*?) \| ", line)
        if m and not code and os.path.isdir(os.path.join(ROOT, "src", m.group(1))):
            cell = m.group(2)
            while re.search(r"\([^()]*\)", cell):  # what a module is, in parentheses
                cell = re.sub(r"\([^()]*\)", "", cell)
            rows.setdefault(m.group(1), set()).update(re.findall(r"`(\w+)`", cell))
    assert len(rows) >= 10
    wrong = []
    for layer, named in sorted(rows.items()):
        d = os.path.join(ROOT, "src", layer)
        sources = {f[:-2] for f in os.listdir(d) if f.endswith(".c")}
        headers = {f[:-2] for f in os.listdir(d) if f.endswith(".h")}
        if sources - named:
            wrong.append("%s: not in its row: %s" % (layer, sorted(sources - named)))
        if named - sources - headers:
            wrong.append("%s: no such module: %s" % (layer, sorted(named - sources - headers)))
    assert wrong == [], "\n".join(wrong)


TOP_DIRS = ("src", "tests", "include", "examples", "scripts", "bench", "docs", "man", "proto",
            "pkgconfig")
LAYERS = tuple(d for d in os.listdir(os.path.join(ROOT, "src")))


def path_mentions():
    """(doc, line, path) for each code span that is a repository path (`src/...`, `tests/...`,
    ... or a source file under src/ named from its layer, `node/service.c`; * globs allowed)"""
    out = []
    tops = r"(?:%s)/[\w./*+-]*[\w*/]" % "|".join(TOP_DIRS)
    layers = r"(?:%s)/[\w*]+\.[ch]" % "|".join(LAYERS)
    for path in DOCS:
        for n, line, code in doc_lines(path):
            if code:
                continue
            for span in re.findall(r"`([^`\s]+)`", line):
                span = span.split("#")[0].split(":")[0]
                if re.fullmatch(tops, span) or re.fullmatch(layers, span):
                    out.append((rel(path), n, span))
    return out


def test_every_repository_path_in_the_docs_exists():
    wrong = []
    for doc, n, p in path_mentions():
        if (doc, p) in GENERATED_PATHS:
            continue
        if not (glob.glob(os.path.join(ROOT, p)) or glob.glob(os.path.join(ROOT, "src", p))):
            wrong.append("%s:%d: %s" % (doc, n, p))
    assert wrong == [], "files the docs name that do not exist:\n" + "\n".join(wrong)


# --- HTTP endpoints -------------------------------------------------------------------------------

ROUTERS = [os.path.join(ROOT, "src", "node", f) for f in ("service.c", "adminsrv.c")]


def served_paths():
    """the paths the routers (node/service.c, node/adminsrv.c) compare against: their string
    literals, and the *PATH* macros they use, wherever those are defined in src/"""
    macros = {}
    for path in glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True):
        macros.update(re.findall(r'^#define (\w+) +"(/[^"]*)"', read(path), re.M))
    paths = set()
    for path in ROUTERS:
        text = read(path)
        paths |= set(re.findall(r'"(/[A-Za-z][\w.]*(?:/[\w.]+)*/?)"', text))
        paths |= {v for k, v in macros.items() if re.search(r"\b%s\b" % k, text)}
    return paths


def is_served(path, served):
    if path.endswith("/*"):
        return any(p.startswith(path[:-1]) and len(p) > len(path) - 1 for p in served)
    return path in served


ENDPOINT = re.compile(
    r"(?:\b(?:GET|POST|PUT|DELETE|HEAD) +|https?://[\w.\[\]:<>-]+(?=/)|`)"
    r"(/(?:v1/[\w/]*\w|pb\.gubernator\.\w+/(?:\w+|\*)?|envoy\.service\.[\w.]+/\w+|kuadrant\.service\.[\w.]+/\w+|grpc\.[\w.]+/\w+|[a-z]+))(?=[\s`?'\"),.;:]|$)")


def endpoint_mentions():
    out = []
    for path in DOCS:
        for n, line, _ in doc_lines(path):
            for m in ENDPOINT.finditer(line):
                out.append((rel(path), n, m.group(1)))
    return out


def test_every_endpoint_in_the_docs_is_served():
    served = served_paths()
    assert {"/attempt", "/metrics", "/status", "/v1/GetRateLimits"} <= served
    wrong = ["%s:%d: %s" % (doc, n, p) for doc, n, p in endpoint_mentions()
             if not is_served(p, served) and (doc, p) not in NOT_ENDPOINTS]
    assert wrong == [], "endpoints the docs name that sluiced does not route:\n" + "\n".join(wrong)


def test_api_doc_lists_every_served_endpoint():
    """docs/api.md, the wire API, names every path the routers serve"""
    in_api = {p for doc, _, p in endpoint_mentions() if doc == "docs/api.md"}
    missing = sorted(p for p in served_paths() if p not in in_api and not p.endswith("/"))
    assert missing == [], "served, not in docs/api.md: %s" % missing


# --- make targets ----------------------------------------------------------------------------------

def test_readme_make_targets_exist():
    makefile = read(os.path.join(ROOT, "Makefile"))
    targets = set(re.findall(r"^([a-z][\w-]*(?: [a-z][\w-]*)*):(?!=)", makefile, re.M))
    targets = {t for group in targets for t in group.split()}
    named = set(re.findall(r"(?<![\w-])make ([a-z][\w-]*)", read(os.path.join(ROOT, "README.md"))))
    assert {"run", "test"} <= named
    assert named - targets == set(), "README.md names make targets the Makefile lacks"


# --- the allowlists stay honest --------------------------------------------------------------------

@pytest.mark.parametrize("allow,mentions", [
    ("NOT_METRICS", lambda: {(d, x) for d, _, x in metric_mentions()}),
    ("NOT_ENDPOINTS", lambda: {(d, x) for d, _, x in endpoint_mentions()}),
    ("GENERATED_PATHS", lambda: {(d, x) for d, _, x in path_mentions()}),
])
def test_allowlists_name_real_mentions(allow, mentions):
    assert set(globals()[allow]) - mentions() == set()

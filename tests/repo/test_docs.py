"""The docs against the code: README.md and docs/ name only flags a binary's --help lists, link
only to files and headings that exist, and name only results files and figures that
run_all.sh or plots/ write.

How the docs tie a flag to a binary (the convention this test enforces):
- A command, in a fenced block (continued lines joined, `#` comments dropped) or in an inline
  code span that starts with a word other than a flag, is split into shell words. A `--flag`
  belongs to the last known binary named before it in that command (`build/bin/zb_zero`,
  `./run_all.sh`, `tools/ab.sh`, `plots/compare.py`, ...: KNOWN below). Flags before any known
  binary (mpirun's, srun's, cmake's) are not checked. After `--`, tools/ab.sh's words go to
  run_all.sh; between `tools/cluster.sh run` and `--` they are mpirun's.
- An inline code span that starts with `--` (`--params=N`) belongs to the section's binary:
  the one binary named in the nearest heading above it that names exactly one, unless a
  comment `<!-- binary: NAME -->` in the section names it. In a section with no binary, such
  a flag must be in the --help of at least one known binary.
- `--help` passes everywhere (this test runs it), `--no-X` where `--X` is listed, and
  `--benchmark_X` where the help lists `--benchmark_*`.

Results files are inline code spans that are a bare file name ending in .json or .md
(`zero.json`, `trace_<stage>.json`; `<...>` stands for any name); figures are the inline code
spans in the first column of a table whose first header cell is `figure`.
"""
import fnmatch
import functools
import glob
import importlib.util
import os
import re
import shlex
import subprocess

import pytest

ROOT = os.path.abspath(os.environ.get("ZB_ROOT", os.path.join(os.path.dirname(__file__), "..", "..")))
BIN = os.environ.get("ZB_BIN", os.path.join(ROOT, "build", "bin"))

# Binary name (a word's last path component) -> the command that prints its --help.
KNOWN = {name: [os.path.join(BIN, name)] for name in (
    "zb_collectives", "zb_zero", "zb_predict", "zb_optimizer", "zb_plan", "zb_pipeline", "zb_offload")}
KNOWN["run_all.sh"] = ["bash", os.path.join(ROOT, "run_all.sh")]
for _tool in ("ab.sh", "cluster.sh", "gpu_check.sh", "gpu_bundle.sh", "bare_build.sh"):
    KNOWN[_tool] = ["bash", os.path.join(ROOT, "tools", _tool)]
for _py in ("torch_adam.py", "predict_accuracy.py"):
    KNOWN[_py] = ["python3", os.path.join(ROOT, "tools", _py)]
for _py in ("zbplot.py", "summary.py", "compare.py", "ab/ab.py"):
    KNOWN[os.path.basename(_py)] = ["python3", os.path.join(ROOT, "plots", _py)]
# Words after which a binary's words belong to another (None: to a tool this test does not check).
HANDS_OVER = {"ab.sh": {"--": "run_all.sh"}, "cluster.sh": {"run": None, "--": None}}

FENCE = re.compile(r"^(\s*)(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
MARKER = re.compile(r"<!--\s*binary:\s*(\S+)\s*-->")
SPAN = re.compile(r"(`+)(.+?)\1")
FLAG = re.compile(r"^--([A-Za-z0-9][A-Za-z0-9_-]*)")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
IMG_SRC = re.compile(r"<img[^>]*\ssrc=\"([^\"]+)\"", re.I)
FILE_NAME = re.compile(r"^[A-Za-z0-9_<>*-]+\.(json|md)$")
NAMED_FILE = re.compile(r"[A-Za-z0-9_<>*{}$-]+\.(?:json|md)\b")
KEPT_NAME = re.compile(r"^[a-z][a-z0-9_]*(\*[a-z0-9_]*)?\.(json|md)$")
SEPARATORS = {";", "&&", "||", "|", "&"}


def doc_files():
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.isfile(f)]


def rel(path):
    return os.path.relpath(path, ROOT)


def known(word):
    name = word.rstrip("/").rsplit("/", 1)[-1]
    return name if name in KNOWN else None


def split_lines(text):
    """(prose lines, fenced command lines): fences removed from the prose, continuations joined."""
    prose, commands, fence, pending = [], [], None, ""
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)
            prose.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            elif line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
            else:
                commands.append(pending + line)
                pending = ""
            prose.append("")
        else:
            prose.append(line)
    return prose, commands


def words(command):
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:  # an unbalanced quote in console output: plain words will do
        return command.split()


def command_flags(command):
    """[(binary, flag)] of one command line, by the convention above."""
    out, owner, checked = [], None, False
    for w in words(command):
        if w in SEPARATORS:
            owner, checked = None, False
        elif known(w):
            owner, checked = known(w), True
        elif checked and owner in HANDS_OVER and w in HANDS_OVER[owner]:
            owner = HANDS_OVER[owner][w]
            checked = owner is not None
        elif checked and FLAG.match(w):
            out.append((owner, "--" + FLAG.match(w).group(1)))
    return out


def doc_flags(path):
    """[(where, binary or None, flag)] for every flag the file names."""
    text = open(path, encoding="utf-8").read()
    prose, commands = split_lines(text)
    found = [(f"{rel(path)}: {c.strip()[:60]}", b, f) for c in commands for b, f in command_flags(c)]
    stack = []  # [(level, binary)] along the heading path
    for n, line in enumerate(prose, 1):
        h = HEADING.match(line)
        if h:
            level = len(h.group(1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            named = {known(w) for w in re.findall(r"[\w./-]+", h.group(2)) if known(w)}
            stack.append((level, named.pop() if len(named) == 1 else (stack[-1][1] if stack else None)))
            continue
        m = MARKER.search(line)
        if m and stack:
            stack[-1] = (stack[-1][0], known(m.group(1)))
        for _, span in SPAN.findall(line):
            where = f"{rel(path)}:{n}: `{span}`"
            if span.startswith("--"):
                section = stack[-1][1] if stack else None
                found += [(where, section, "--" + FLAG.match(w).group(1)) for w in span.split() if FLAG.match(w)]
            else:
                found += [(where, b, f) for b, f in command_flags(span)]
    return found


@functools.lru_cache(maxsize=None)
def help_text(binary):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(KNOWN[binary] + ["--help"], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert r.returncode == 0, f"{binary} --help exited {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"
    return r.stdout + r.stderr


def listed(flag, text):
    def has(f):
        return re.search(re.escape(f) + r"(?![A-Za-z0-9_-])", text) is not None
    if has(flag) or (flag.startswith("--no-") and has("--" + flag[5:])):
        return True
    return any(flag.startswith(p) for p in re.findall(r"(--[A-Za-z0-9_-]+)\*", text))


def stale_flags(found):
    """The (where, problem) of each flag its binary's --help does not list."""
    bad = []
    for where, binary, flag in found:
        if flag == "--help":
            continue
        if binary is None:
            if not any(listed(flag, help_text(b)) for b in KNOWN):
                bad.append((where, f"{flag} is in no binary's --help"))
        elif not listed(flag, help_text(binary)):
            bad.append((where, f"{flag} is not in {binary} --help"))
    return bad


def github_slugs(path):
    slugs, seen = set(), {}
    prose, _ = split_lines(open(path, encoding="utf-8").read())
    for line in prose:
        h = HEADING.match(line)
        if h:
            base = re.sub(r"[^\w\- ]", "", h.group(2).strip().lower()).replace(" ", "-")
            n = seen.get(base, 0)
            seen[base] = n + 1
            slugs.add(base if n == 0 else f"{base}-{n}")
    return slugs


def broken_links(path):
    prose, _ = split_lines(open(path, encoding="utf-8").read())
    text = SPAN.sub("", "\n".join(prose))
    bad = []
    for target in LINK.findall(text) + REF_DEF.findall(text) + IMG_SRC.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(dest):
            bad.append(f"{rel(path)}: {target}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in github_slugs(dest):
            bad.append(f"{rel(path)}: {target}: no heading #{anchor} in {rel(dest)}")
    return bad


@functools.lru_cache(maxsize=None)
def run_table():
    """The run table, through its own loader (tools/run_table.py)."""
    module = os.path.join(ROOT, "tools", "run_table.py")
    spec = importlib.util.spec_from_file_location("run_table", module)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.load()


def sources(*patterns):
    return "\n".join(open(p, encoding="utf-8").read()
                     for pat in patterns for p in sorted(glob.glob(os.path.join(ROOT, pat))))


@functools.lru_cache(maxsize=None)
def written_files():
    """Names of results files: the run table's, and the names run_all.sh and plots/ write
    themselves (summary.md, compare.md, ...)."""
    names = set(run_table().outputs())
    names |= set(NAMED_FILE.findall(sources("run_all.sh", "tools/run_*.sh", "tools/run_*.py", "plots/*.py",
                                             "plots/ab/*.py")))
    # Placeholders as *; names made of variables or a bare * (`$label.json`, `*.json`) name nothing.
    return {pattern(n) for n in names if KEPT_NAME.match(pattern(n))}


@functools.lru_cache(maxsize=None)
def drawn_figures():
    """Figure names plots/ draws: literal save() stems, and `stem = "prefix" + ...` as prefix*."""
    code = sources("plots/*.py", "plots/ab/*.py")
    names = set(re.findall(r"save\(\s*\w+\s*,\s*\w+\s*,\s*\"([a-z0-9_]+)\"", code))
    names |= {p + "*" for p in re.findall(r"\bstem\s*=\s*\"([a-z0-9_]+)\"\s*\+", code)}
    return names | set(run_table().figures())


def pattern(name):
    return re.sub(r"<[^>]*>", "*", name)


def matches(name, names):
    p = pattern(name)
    return any(p == n or fnmatch.fnmatchcase(p, n) or fnmatch.fnmatchcase(n, p) for n in names)


def doc_results_files(path):
    prose, _ = split_lines(open(path, encoding="utf-8").read())
    return [(n, s) for n, line in enumerate(prose, 1) for _, s in SPAN.findall(line) if FILE_NAME.match(s)]


def doc_figures(path):
    """Names in the first column of every table whose first header cell is `figure`."""
    names, in_table = [], False
    prose, _ = split_lines(open(path, encoding="utf-8").read())
    for n, line in enumerate(prose, 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[0].lower() == "figure":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            names += [(n, s) for _, s in SPAN.findall(cells[0])]
    return names


DOCS = doc_files()


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_every_flag_the_docs_name_is_in_its_binarys_help(path):
    bad = stale_flags(doc_flags(path))
    assert not bad, "\n".join(f"{w}: {p}" for w, p in bad)


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_every_relative_link_and_image_resolves(path):
    bad = broken_links(path)
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_every_results_file_and_figure_named_is_written(path):
    bad = [f"{rel(path)}:{n}: {name}: no run writes it" for n, name in doc_results_files(path)
           if not matches(name, written_files())]
    bad += [f"{rel(path)}:{n}: {name}: plots/ draws no such figure" for n, name in doc_figures(path)
            if not matches(name, drawn_figures())]
    assert not bad, "\n".join(bad)


def test_the_results_page_names_every_figure_drawn():
    named = {pattern(n) for _, n in doc_figures(os.path.join(ROOT, "docs", "results.md"))}
    missing = sorted(f for f in drawn_figures() if not any(f == n or fnmatch.fnmatchcase(n, f) for n in named))
    assert not missing, f"docs/results.md has no row for the figures {missing}"


def test_the_results_page_names_every_results_file():
    named = {pattern(n) for _, n in doc_results_files(os.path.join(ROOT, "docs", "results.md"))}
    wanted = run_table().outputs()
    missing = [f for f in wanted if pattern(f) not in named and not any(fnmatch.fnmatchcase(n, f) for n in named)]
    assert not missing, f"docs/results.md has no row for {missing}"


def test_readme_is_a_front_door():
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert len(text.splitlines()) <= 300, "README.md is over 300 lines: move the detail into docs/"
    _, commands = split_lines(text)
    firsts = {c.split("#")[0].strip() for c in commands}
    assert {"./run_all.sh", "./run_tests.sh"} <= firsts, "README.md lost a Quick-start command"


def test_the_checks_themselves_catch_what_they_look_for(tmp_path):
    # Each check fails on a planted fault, so a passing run means something.
    assert command_flags("mpirun -np 2 --bind-to none build/bin/zb_zero --stages=z3 --no-check") == [
        ("zb_zero", "--stages"), ("zb_zero", "--no-check")]
    assert command_flags("tools/ab.sh --pairs=6 HEAD -- --quick") == [("ab.sh", "--pairs"), ("run_all.sh", "--quick")]
    assert command_flags("tools/cluster.sh run --mca btl tcp -- zb_zero --layers=2") == [("zb_zero", "--layers")]
    page = tmp_path / "page.md"
    page.write_text("# zb_zero: a page\n\n`--no-such-flag=1` and `--params=N`\n\n## zb_plan\n\n`--dp=8`\n"
                    "\n[gone](missing.md) [here](#zb_plan) [not here](#nowhere)\n"
                    "\n| figure | shows |\n|---|---|\n| `no_such_figure` | x |\n\n`no_such_file.json`\n")
    found = doc_flags(str(page))
    assert [(b, f) for _, b, f in found] == [("zb_zero", "--no-such-flag"), ("zb_zero", "--params"), ("zb_plan", "--dp")]
    assert not listed("--no-such-flag", "  --params=X  parameters\n  --check  ...")
    assert listed("--no-check", "  --check  compare") and listed("--benchmark_filter", "[--benchmark_* flags]")
    assert [b.split(": ")[1] for b in broken_links(str(page))] == ["missing.md", "#nowhere"]
    assert doc_figures(str(page)) == [(13, "no_such_figure")] and not matches("no_such_figure", drawn_figures())
    assert doc_results_files(str(page)) == [(15, "no_such_file.json")] and not matches("no_such_file.json", written_files())
    assert matches("trace_<stage>.json", written_files()) and matches("timeline_<stage>", drawn_figures())

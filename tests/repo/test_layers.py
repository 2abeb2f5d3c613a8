"""The layering as docs/design.md's table states it, checked apart from CMake's own check: every
#include "..." of every row's folder names a folder that row may include, each library links
exactly the folders its row uses, and both checkers fail on an upward include."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.environ.get("ZB_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)  # ours; <...> are libraries
HEADER = "| folder | what lives there | uses |"
ROW = re.compile(r"^\| `([^`]+)` \|.*\|([^|]*)\|$")


def read_table(root=ROOT):
    """[(folder, [folders its row uses])] in table order, bottom first."""
    rows, inside = [], False
    with open(os.path.join(root, "docs", "design.md"), encoding="utf-8") as f:
        for line in f.read().splitlines():
            if line.startswith(HEADER):
                inside = True
            elif inside and line.startswith("|---"):
                continue
            elif inside and line.startswith("|"):
                m = ROW.match(line)
                assert m, f"a row of the layer table is not | `folder` | text | uses |: {line}"
                rows.append((m.group(1), re.findall(r"`([^`]+)`", m.group(2))))
            elif inside:
                break
    assert rows, "docs/design.md has no layer table"
    return rows


def may_include(rows):
    """folder -> every folder it may include: itself, what it uses, and what those may include."""
    may = {}
    for folder, uses in rows:
        for u in uses:
            assert u in may, f"{folder} uses {u}, which is no row above it"
        may[folder] = {folder}.union(*(may[u] for u in uses))
    return may


def layer_of(path, folders):
    """The longest folder of the table that `path` lies in, or None."""
    hits = [f for f in folders if path.startswith(f + "/")]
    return max(hits, key=len) if hits else None


def violations(root, rows):
    """Lines 'file: includes "x"' for every include the table does not allow."""
    may = may_include(rows)
    out = []
    for folder in may:
        base = os.path.join(root, folder)
        assert os.path.isdir(base), f"the layer table names {folder}, which is no folder"
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if not name.endswith((".h", ".cc", ".cu")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                if layer_of(path, may) != folder:
                    continue  # a row of its own
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    if "/" not in inc:
                        if not os.path.exists(os.path.join(dirpath, inc)):
                            out.append(f'{path}: includes "{inc}", which is no file beside it')
                        continue
                    target = layer_of(inc, may)
                    if target not in may[folder]:
                        out.append(f'{path}: includes "{inc}" ({target or "no folder of the table"})')
    return out


def test_the_table_reads_bottom_to_top_with_every_harness_folder_once():
    rows = read_table()
    folders = [f for f, _ in rows]
    assert len(folders) == len(set(folders))
    harness = sorted(f"harness/{e}" for e in os.listdir(os.path.join(ROOT, "harness"))
                     if os.path.isdir(os.path.join(ROOT, "harness", e)))
    assert sorted(f for f in folders if f.startswith("harness/")) == harness
    loose = [e for e in os.listdir(os.path.join(ROOT, "harness"))
             if os.path.isfile(os.path.join(ROOT, "harness", e)) and e != "CMakeLists.txt"]
    assert loose == [], "harness/ holds files outside its folders"
    may_include(rows)  # every row names only rows above it


def test_every_include_is_one_the_table_allows():
    assert violations(ROOT, read_table()) == []


def test_no_folder_holds_more_than_25_sources():
    for top in ("harness", "kernels", "bench", "tests/unit"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            n = sum(name.endswith((".h", ".cc", ".cu")) for name in names)
            assert n <= 25, f"{os.path.relpath(dirpath, ROOT)} holds {n} sources"


def zb_layer_calls():
    """folder -> (uses, text of the call) for every zb_layer(...) in the CMakeLists."""
    calls = {}
    for cm in ("harness/CMakeLists.txt", "kernels/CMakeLists.txt"):
        with open(os.path.join(ROOT, cm), encoding="utf-8") as f:
            text = f.read()
        for m in re.finditer(r"zb_layer\(([^)]*)\)", text):
            words = m.group(1).split()
            uses = words[words.index("USES") + 1:] if "USES" in words else []
            if "LIBS" in uses:
                uses = uses[:uses.index("LIBS")]
            calls[words[0]] = uses
    return calls


def library(folder):
    return "zb_" + folder.replace("/", "_")


def test_each_library_links_exactly_the_folders_its_row_uses():
    rows = read_table()
    calls = zb_layer_calls()
    built = [f for f, _ in rows if f.startswith("harness/") or f == "kernels"]
    assert sorted(calls) == sorted(built)
    for folder, uses in rows:
        if folder in calls:
            assert calls[folder] == uses, folder
    # No layer library is linked by hand beside zb_layer (the aggregate zb_harness aside).
    layer_libs = {library(f) for f in built}
    for cm in ("harness/CMakeLists.txt", "kernels/CMakeLists.txt", "bench/CMakeLists.txt",
               "tests/CMakeLists.txt"):
        with open(os.path.join(ROOT, cm), encoding="utf-8") as f:
            for m in re.finditer(r"target_link_libraries\(([^)]*)\)", f.read()):
                words = m.group(1).split()
                linked = layer_libs.intersection(words[1:])
                top = library(rows[[f for f, _ in rows].index("harness/driver")][0])
                assert not linked or (words[0] == "zb_harness" and linked == {top}), m.group(0)


def upward_tree(tmp_path):
    """A copy of the sources with one upward include added: the stage table including the ZeRO step."""
    for part in ("docs", "harness", "kernels", "bench", "tests/unit", "cmake"):
        shutil.copytree(os.path.join(ROOT, part), tmp_path / part)
    victim = tmp_path / "harness" / "stage" / "stage.cc"
    victim.write_text('#include "harness/zero/zero_step.h"\n' + victim.read_text())
    return tmp_path


def test_this_checker_fails_on_an_upward_include(tmp_path):
    root = upward_tree(tmp_path)
    assert violations(str(root), read_table(str(root))) == [
        'harness/stage/stage.cc: includes "harness/zero/zero_step.h" (harness/zero)']


def test_the_cmake_check_fails_on_an_upward_include_naming_file_and_include(tmp_path):
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("no cmake on PATH")
    clean = subprocess.run([cmake, f"-DZB_ROOT={ROOT}", "-P", os.path.join(ROOT, "cmake", "layers.cmake")],
                           capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr
    root = upward_tree(tmp_path)
    bad = subprocess.run([cmake, f"-DZB_ROOT={root}", "-P", str(root / "cmake" / "layers.cmake")],
                         capture_output=True, text=True)
    assert bad.returncode != 0
    assert 'harness/stage/stage.cc: includes "harness/zero/zero_step.h"' in bad.stderr

"""The GPU check's nccl-tests path where no GPU is: the bundle builds nccl-tests' three programs
from a source tree as nccl-tests' own Makefile is driven (here a stand-in Makefile that records
what it was given), its option is in the usage, and the figures say what was predicted from
nccl-tests' JSON beside what was predicted from zerobench's own sweep, or in one line that
nccl-tests was not given."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")


def run(*cmd):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, cwd=ROOT)


def predictions(path, error):
    rows = [{"name": f"zero/stage:{s}/params:64000000", "run_name": f"zero/stage:{s}/params:64000000",
             "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1, "iterations": 1,
             "real_time": 1.0, "cpu_time": 1.0, "time_unit": "ms", "comm_s_predicted": 0.002 * (1 + error),
             "comm_s_measured": 0.002, "comm_error": error} for s in ("dp", "z3")]
    path.write_text(json.dumps({"context": {}, "benchmarks": rows}))


def test_the_usage_names_the_nccl_tests_folder():
    r = run(os.path.join(TOOLS, "gpu_check.sh"), "--help")
    assert r.returncode == 0
    assert "--nccl-tests=DIR" in r.stdout and "ZB_NCCL_TESTS" in r.stdout
    assert "all_reduce_perf, reduce_scatter_perf and" in r.stdout
    assert "gpu_bundle.sh --nccl-tests-src=SRC" in r.stdout


# A stand-in for nccl-tests' src/Makefile: each program it is asked for is a C program that
# prints the make variables it was built with, so the test sees what the bundle passed. FAIL
# makes the build fail; SCRIPT makes a program that is no ELF file (strip then fails).
STAND_IN_MAKEFILE = """\
os.build:
\t@mkdir -p $(BUILDDIR)/os
$(BUILDDIR)/%_perf: os.build
\t@if [ -n "$(FAIL)" ]; then echo "stand-in.cu(1): error: $(FAIL)"; exit 1; fi
\t@printf '#include <stdio.h>\\nint main(void){puts("%s|$(CUDARTLIB)|$(NVCC_GENCODE)|$(NCCL_HOME)|$(NVCC)|$(CUDA_HOME)|$(MPI)|$(DSO)");return 0;}\\n' $* >$@.c
\t@cc -g -o $@ $@.c
\t@if [ -n "$(SCRIPT)" ]; then printf '#!/bin/sh\\n' >$@; fi
"""
SM90 = "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"


def stand_in_source(path, fail="", script=False):
    (path / "src").mkdir(parents=True)
    (path / "src" / "common.h").write_text('#define NCCL_TESTS_VERSION "9.8.7"\n')
    (path / "src" / "all_reduce.cu").write_text("// stand-in\n")
    head = (f"FAIL = {fail}\n" if fail else "") + ("SCRIPT = 1\n" if script else "")
    (path / "src" / "Makefile").write_text(head + STAND_IN_MAKEFILE)
    return path


def complete_bundle(path, earlier=None):
    """A bundle folder the script takes as made (its MANIFEST names the current recipe), so that
    only the nccl-tests step runs and nothing is downloaded; `earlier`: a nccl-tests/ BUILD."""
    recipe = re.search(r"^recipe=(\d+)", open(os.path.join(TOOLS, "gpu_bundle.sh")).read(), re.M).group(1)
    path.mkdir()
    (path / "MANIFEST").write_text(f"recipe {recipe}\nmade by the test\n")
    if earlier:
        (path / "nccl-tests").mkdir()
        (path / "nccl-tests" / "BUILD").write_text(earlier)
    return path


def toolchain(tmp):
    """A stand-in nvcc (it only says its release) and NCCL header, so that the step runs with no
    CUDA toolkit; the Makefile above never calls nvcc. Also MPI=1 and DSO=1 in the environment,
    which the script's own settings must win over."""
    cuda, nccl = tmp / "cuda", tmp / "nccl"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.99'\n")
    (cuda / "bin" / "nvcc").chmod(0o755)
    (nccl / "include").mkdir(parents=True)
    (nccl / "include" / "nccl.h").write_text("#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n")
    env = dict(os.environ, PATH=f"{cuda / 'bin'}:{os.environ['PATH']}", NCCL_HOME=str(nccl), MPI="1", DSO="1")
    return cuda, nccl, env


def bundle_run(bundle, src, env, *more):
    return subprocess.run([os.path.join(TOOLS, "gpu_bundle.sh"), f"--out={bundle}", f"--nccl-tests-src={src}",
                           *more], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


needs_build_tools = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("cc", "make", "strip", "readelf")),
    reason="the stand-in build needs cc, make, strip and readelf")


@needs_build_tools
def test_the_bundle_builds_the_three_programs_for_sm90_with_the_runtime_linked_in(tmp_path):
    cuda, nccl, env = toolchain(tmp_path)
    bundle = complete_bundle(tmp_path / "bundle")
    src = stand_in_source(tmp_path / "nccl-tests")
    r = bundle_run(bundle, src, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "building nccl-tests 9.8.7 from" in r.stdout
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        prog = bundle / "nccl-tests" / f"{op}_perf"
        said = subprocess.run([prog], capture_output=True, text=True, timeout=10).stdout.strip().split("|")
        assert said == [op, "cudart_static", SM90, str(nccl), str(cuda / "bin" / "nvcc"), str(cuda), "0", "0"]
        assert ".debug_info" not in subprocess.run(["readelf", "-S", prog], capture_output=True, text=True).stdout
    build = (bundle / "nccl-tests" / "BUILD").read_text().splitlines()
    assert build[0].startswith("source sha256:") and build[1].startswith(f"nccl-tests 9.8.7 from {src}")
    assert build[2] == "nvcc 12.4, sm_90, NCCL headers 2.21.5"
    assert not list(bundle.glob("nccl-tests.tmp.*"))
    again = bundle_run(bundle, src, env)
    assert again.returncode == 0 and f"reusing {bundle}/nccl-tests (source {build[0][7:]};" in again.stdout
    # Any file of the source changed: built again.
    (src / "src" / "all_reduce.cu").write_text("// stand-in, changed\n")
    changed = bundle_run(bundle, src, env)
    assert changed.returncode == 0 and "building nccl-tests" in changed.stdout
    assert (bundle / "nccl-tests" / "BUILD").read_text().splitlines()[0] != build[0]


@needs_build_tools
@pytest.mark.parametrize("how,force", [("make", False), ("make", True), ("strip", False)])
def test_a_failed_nccl_tests_build_says_why_in_one_line_and_keeps_the_last_good_one(tmp_path, how, force):
    _, _, env = toolchain(tmp_path)
    bundle = complete_bundle(tmp_path / "bundle", earlier="source an-earlier-one\n")
    src = stand_in_source(tmp_path / "nccl-tests", fail="no such NCCL symbol" if how == "make" else "",
                          script=how == "strip")
    if force:
        # --force makes the whole bundle again, so here its downloads are needed as well.
        pytest.importorskip("pip")
    r = bundle_run(bundle, src, env, *(["--force"] if force else []))
    if force and "downloading" in r.stdout and r.returncode == 1 and "building nccl-tests" not in r.stdout:
        pytest.skip(f"the bundle itself could not be made here: {r.stderr.strip()}")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    want = ("building nccl-tests failed: ", "no such NCCL symbol") if how == "make" else (
        "strip of nccl-tests' all_reduce_perf failed: ",)
    assert len(lines) == 1 and all(w in lines[0] for w in want), lines
    assert (bundle / "nccl-tests" / "BUILD").read_text() == "source an-earlier-one\n"
    assert not list(bundle.glob("nccl-tests.tmp.*")) and not list(tmp_path.glob("bundle.tmp.*"))


def test_a_source_that_is_not_nccl_tests_exits_2_before_anything_is_made(tmp_path):
    r = run(os.path.join(TOOLS, "gpu_bundle.sh"), f"--out={tmp_path / 'bundle'}", f"--nccl-tests-src={tmp_path}")
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and f"--nccl-tests-src={tmp_path}" in r.stderr
    assert not (tmp_path / "bundle").exists()


def test_figures_of_both_predictions_or_one_line_without_nccl_tests(tmp_path):
    res, logs = tmp_path / "results", tmp_path / "logs"
    res.mkdir()
    logs.mkdir()
    predictions(res / "predict.json", 0.05)
    r = run(sys.executable, os.path.join(TOOLS, "gpu_summary.py"), res, logs)
    out = r.stdout.splitlines()
    assert "predict from zb_collectives z3: comm 2.100 ms predicted, 2.000 measured (comm_error +0.050)" in out
    assert ("predict from nccl-tests: n/a (nccl-tests not given: see the nccl_tests line above)" in out)
    predictions(res / "predict_nccl_tests.json", -0.08)
    out = run(sys.executable, os.path.join(TOOLS, "gpu_summary.py"), res, logs).stdout.splitlines()
    assert "predict from nccl-tests dp: comm 1.840 ms predicted, 2.000 measured (comm_error -0.080)" in out
    # With --explain's counters, the line says what the difference is made of.
    data = json.loads((res / "predict.json").read_text())
    for b in data["benchmarks"]:
        b.update(explain_collective_s=0.0004, explain_late_start_s=-0.00005, explain_handoff_s=0.0)
    (res / "predict.json").write_text(json.dumps(data))
    out = run(sys.executable, os.path.join(TOOLS, "gpu_summary.py"), res, logs).stdout.splitlines()
    assert ("predict from zb_collectives z3: comm 2.100 ms predicted, 2.000 measured (comm_error +0.050); "
            "explained: collectives +0.400 ms, late starts -0.050 ms, hand-offs +0.000 ms") in out

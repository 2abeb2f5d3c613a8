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
# prints the make variables it was built with, so the test sees what the bundle passed.
STAND_IN_MAKEFILE = """\
os.build:
\t@mkdir -p $(BUILDDIR)/os
$(BUILDDIR)/%_perf: os.build
\t@if [ -n "$(FAIL)" ]; then echo "stand-in.cu(1): error: $(FAIL)"; exit 1; fi
\t@printf '#include <stdio.h>\\nint main(void){puts("%s|$(CUDARTLIB)|$(NVCC_GENCODE)|$(NCCL_HOME)");return 0;}\\n' $* >$@.c
\t@cc -g -o $@ $@.c
"""


def stand_in_source(path, fail=""):
    (path / "src").mkdir(parents=True)
    (path / "src" / "common.h").write_text('#define NCCL_TESTS_VERSION "9.8.7"\n')
    (path / "src" / "all_reduce.cu").write_text("// stand-in\n")
    (path / "src" / "Makefile").write_text((f"FAIL = {fail}\n" if fail else "") + STAND_IN_MAKEFILE)
    return path


def complete_bundle(path):
    """A bundle folder the script takes as made (its MANIFEST names the current recipe), so that
    only the nccl-tests step runs and nothing is downloaded."""
    recipe = re.search(r"^recipe=(\d+)", open(os.path.join(TOOLS, "gpu_bundle.sh")).read(), re.M).group(1)
    path.mkdir()
    (path / "MANIFEST").write_text(f"recipe {recipe}\nmade by the test\n")
    return path


nvcc_and_nccl = pytest.mark.skipif(
    not (shutil.which("nvcc") or os.access("/usr/local/cuda/bin/nvcc", os.X_OK))
    or not any(os.path.isfile(os.path.join(d, "include", "nccl.h")) for d in ("/usr/local/cuda", "/usr")),
    reason="the nccl-tests step needs nvcc and nccl.h (the CUDA toolkit with NCCL)")


@nvcc_and_nccl
def test_the_bundle_builds_the_three_programs_for_sm90_with_the_runtime_linked_in(tmp_path):
    bundle = complete_bundle(tmp_path / "bundle")
    src = stand_in_source(tmp_path / "nccl-tests")
    r = run(os.path.join(TOOLS, "gpu_bundle.sh"), f"--out={bundle}", f"--nccl-tests-src={src}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "building nccl-tests 9.8.7 from" in r.stdout
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        prog = bundle / "nccl-tests" / f"{op}_perf"
        said = subprocess.run([prog], capture_output=True, text=True, timeout=10).stdout.strip().split("|")
        assert said[:3] == [op, "cudart_static",
                            "-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90"]
        assert os.path.isfile(os.path.join(said[3], "include", "nccl.h"))
        assert ".debug_info" not in subprocess.run(["readelf", "-S", prog], capture_output=True, text=True).stdout
    build = (bundle / "nccl-tests" / "BUILD").read_text().splitlines()
    assert build[0].startswith("source sha256:") and build[1].startswith(f"nccl-tests 9.8.7 from {src}")
    assert ", sm_90, NCCL headers " in build[2]
    assert not list(bundle.glob("nccl-tests.tmp.*"))
    again = run(os.path.join(TOOLS, "gpu_bundle.sh"), f"--out={bundle}", f"--nccl-tests-src={src}")
    assert again.returncode == 0 and f"reusing {bundle}/nccl-tests (source {build[0][7:]};" in again.stdout


@nvcc_and_nccl
def test_a_failed_nccl_tests_build_says_why_in_one_line_and_keeps_the_last_good_one(tmp_path):
    bundle = complete_bundle(tmp_path / "bundle")
    (bundle / "nccl-tests").mkdir()
    (bundle / "nccl-tests" / "BUILD").write_text("source an-earlier-one\n")
    src = stand_in_source(tmp_path / "nccl-tests", fail="no such NCCL symbol")
    r = run(os.path.join(TOOLS, "gpu_bundle.sh"), f"--out={bundle}", f"--nccl-tests-src={src}")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "building nccl-tests failed: " in lines[0] and "no such NCCL symbol" in lines[0]
    assert (bundle / "nccl-tests" / "BUILD").read_text() == "source an-earlier-one\n"
    assert not list(bundle.glob("nccl-tests.tmp.*"))


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

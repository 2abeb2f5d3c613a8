"""The bare GPU machine, emulated: the system's MPI, Google Benchmark and GoogleTest hidden in a
private mount namespace, the CPU configuration built from tools/gpu_bundle.sh's bundle alone,
a one-rank zb_zero of every stage run from it, with and without mpirun, and unit tests built
against the bundle's GoogleTest."""
import json
import os
import subprocess

import pytest

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
# Beside the build that runs the tests, so a clean build starts the emulation from nothing; the
# bundle itself stays in the repository (gpu_bundle/), reused while its recipe holds.
BUILD = os.path.join(os.path.dirname(os.environ.get("ZB_BIN") or os.path.join(ROOT, "build", "bin")),
                     "bare_build")


def test_cpu_build_and_one_rank_zero_from_the_bundle_alone():
    r = subprocess.run([os.path.join(ROOT, "tools", "bare_build.sh"), f"--build={BUILD}"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    out = r.stdout + r.stderr
    if r.returncode == 77:
        pytest.skip(out.strip().splitlines()[-1])
    assert r.returncode == 0, out
    assert "bare_build: hid " in out
    # Configured against the bundle: its MPI and its Google Benchmark, nothing of the system's.
    assert "bare_build: zerobench: MPI " in out and "/gpu_bundle/openmpi/lib/libmpi.so" in out
    ldd = [line for line in out.splitlines() if "=>" in line]
    assert len(ldd) == 2 and all("/gpu_bundle/" in line for line in ldd), ldd
    for launch in ("singleton", "mpirun"):
        with open(os.path.join(BUILD, f"zero_{launch}.json"), encoding="utf-8") as f:
            rows = json.load(f)["benchmarks"]
        stages = {b["name"].split("/")[1]: b for b in rows}
        assert sorted(stages) == ["stage:dp", "stage:z1", "stage:z2", "stage:z3"], launch
        assert all(b["ranks"] == 1 and b["wrong"] == 0 for b in stages.values()), launch
    # GoogleTest came from the bundle too: the unit tests built against it ran and passed.
    assert "zb_unit_tests (GoogleTest from the bundle): [  PASSED  ]" in out, out

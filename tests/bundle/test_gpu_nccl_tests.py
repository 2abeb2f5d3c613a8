"""The GPU check's nccl-tests path where no GPU is: its option is in the usage, and the figures
say what was predicted from nccl-tests' JSON beside what was predicted from zerobench's own
sweep, or in one line that nccl-tests was not given."""
import json
import os
import subprocess
import sys

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

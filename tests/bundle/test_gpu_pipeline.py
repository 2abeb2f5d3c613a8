"""The GPU check's pipeline figures from a crafted pipeline.json: one line per stage and M."""
import json
import os
import subprocess
import sys

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))


def test_gpu_summary_prints_the_pipeline_rows(tmp_path):
    res, logs = tmp_path / "results", tmp_path / "logs"
    res.mkdir()
    logs.mkdir()
    rows = []
    for stage, grads in (("dp", 2.0), ("z2", 2.0625)):
        name = f"pipeline/stage:{stage}/params:64000000/microbatches:8/chunks:2/pp:2"
        rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                     "repetition_index": 0, "threads": 1, "iterations": 3, "real_time": 1.0,
                     "cpu_time": 1.0, "time_unit": "ms", "bytes_per_param_measured": 16.0625,
                     "bytes_per_param_formula": 16.0, "grad_bytes_per_param_measured": grads,
                     "grad_bytes_per_param_formula": grads, "step_s": 0.0125,
                     "exposed_comm_s": 0.001, "tail_comm_s": 0.0005, "wrong": 0})
    (res / "pipeline.json").write_text(json.dumps({"context": {}, "benchmarks": rows}))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_summary.py"), str(res), str(logs)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ("pipeline z2 M=8: bytes/param measured 16.062 formula 16.000, grad bytes/param measured "
            "2.062 formula 2.062; step 12.50 ms, exposed 1.00 ms, tail 0.50 ms; wrong 0") in r.stdout.splitlines()
    # Without the file one line says so.
    (res / "pipeline.json").unlink()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_summary.py"), str(res), str(logs)],
                       capture_output=True, text=True, timeout=60)
    assert "pipeline ZeRO-2: n/a (no pipeline.json: its check failed or did not run)" in r.stdout

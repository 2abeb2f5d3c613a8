"""The GPU check's offload figures from a crafted offload.json: one line per family and slots."""
import json
import os
import subprocess
import sys

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))


def summary(res, logs):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_summary.py"), str(res), str(logs)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_gpu_summary_prints_the_offload_rows(tmp_path):
    res, logs = tmp_path / "results", tmp_path / "logs"
    res.mkdir()
    logs.mkdir()
    rows = []
    for name in ("offload_grads/params:256000000/layers:16/microbatches:4/chunks:4/slots:2/optimizer_on:host/"
                 "grad:bf16/compute:spin:10000",
                 "offload_weights/params:256000000/layers:16/slots:2/compute:spin:10000"):
        rows.append({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                     "repetition_index": 0, "threads": 1, "iterations": 3, "real_time": 1.0,
                     "cpu_time": 1.0, "time_unit": "ms", "device_bytes_per_param_measured": 1.0004,
                     "device_bytes_per_param_formula": 1.0, "d2h_GBps": 21.5, "h2d_GBps": 22.25,
                     "copy_limit_GBps": 25.0, "hidden_frac": 0.985, "wrong": 0})
    (res / "offload.json").write_text(json.dumps({"context": {}, "benchmarks": rows}))
    lines = summary(res, logs)
    assert ("offload_grads slots=2 optimizer on host: device bytes/param measured 1.0004 formula 1.0000; "
            "d2h 21.5 GB/s, alone 25.0 GB/s; hidden 0.98; wrong 0") in lines, lines
    assert ("offload_weights slots=2 optimizer on -: device bytes/param measured 1.0004 formula 1.0000; "
            "h2d 22.2 GB/s, alone 25.0 GB/s; hidden 0.98; wrong 0") in lines, lines
    (res / "offload.json").unlink()
    assert "offload through slots: n/a (no offload.json: its check failed or did not run)" in summary(res, logs)

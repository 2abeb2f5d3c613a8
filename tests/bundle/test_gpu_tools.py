"""The GPU check's tools where no GPU is: gpu_check.sh refuses in one line, bad options exit 2,
NCCL is found where PyTorch's package keeps it, and the figures come out of crafted results."""
import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")


def run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, **kw)


def gpu_visible():
    smi = shutil.which("nvidia-smi")
    return bool(smi and run(smi, "-L").stdout.strip()) or bool(
        os.path.isdir("/proc/driver/nvidia/gpus") and os.listdir("/proc/driver/nvidia/gpus"))


@pytest.mark.skipif(gpu_visible(), reason="this machine has a GPU, so the check would run")
def test_gpu_check_without_gpu_says_so_in_one_line(tmp_path):
    r = run(os.path.join(TOOLS, "gpu_check.sh"), f"--out={tmp_path}")
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 1, r.stdout + r.stderr
    assert len(lines) == 1 and "no GPU visible" in lines[0], lines
    assert (tmp_path / "summary.txt").read_text().strip() == lines[0]


@pytest.mark.parametrize("tool,option", [("gpu_check.sh", "--frobnicate"), ("gpu_check.sh", "--budget=10"),
                                         ("gpu_check.sh", "--only=nccl zero"),
                                         ("gpu_bundle.sh", "--frobnicate"),
                                         ("bare_build.sh", "--bundle")])
def test_bad_option_exits_2_with_one_line(tool, option):
    r = run(os.path.join(TOOLS, tool), option)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and option in r.stderr


def test_find_nccl_takes_the_python_package_when_the_toolkit_has_none(tmp_path):
    cmake = shutil.which("cmake")
    r = run(cmake, f"-DZB_ROOT={ROOT}", f"-DZB_PYTHON={sys.executable}", f"-DWORK={tmp_path}",
            "-P", os.path.join(ROOT, "tests", "bundle", "find_nccl_test.cmake"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Python package: NCCL 2.28.9 from the nvidia-nccl Python package" in r.stdout
    assert f"{tmp_path}/site/nvidia/nccl/lib/libnccl.so.2" in r.stdout


def row(name, **counters):
    r = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
         "repetition_index": 0, "threads": 1, "iterations": 5, "real_time": 1.0,
         "cpu_time": 1.0, "time_unit": "ms"}
    r.update(counters)
    return r


def write(path, rows):
    path.write_text(json.dumps({"context": {}, "benchmarks": rows}))


def test_gpu_summary_figures_from_crafted_results(tmp_path):
    res, logs = tmp_path / "results", tmp_path / "logs"
    res.mkdir()
    logs.mkdir()
    big = 256 << 20
    write(res / "collectives.json", [
        row(f"{op}/bytes:{b}/dtype:bf16", ranks=1, algbw_GBps=a, busbw_GBps=0.0, wrong=0,
            overhead_ratio=small if b == 1024 else 1.0 + small / 100, bare_repeat_ratio=1.01,
            ours_repeat_ratio=small / 2)
        for op, a, small in (("all_reduce", 1500.0, 2.0), ("all_gather", 1400.0, 3.0)) for b in (1024, big)])
    write(res / "zero.json", [
        row(f"zero/stage:{s}/params:64000000/layers:16/optimizer:adam/grad:bf16",
            bytes_per_param_measured=16.25, bytes_per_param_formula=16.0, bytes_per_param_accounted=16.0,
            wrong=0) for s in ("dp", "z1", "z2", "z3")])
    write(res / "optimizer.json", [
        row(f"adam/params:{p}/grad:{g}/impl:cuda", GBps=3800.0, limit_GBps=4000.0,
            frac_of_limit=0.95) for p in (16 << 20, big) for g in ("bf16", "fp32")])
    (logs / "torch_adam_bf16.log").write_text(
        "# torch_adam: ...\n# params ...\n"
        f"{16 << 20:>9} 0.2 1000.0 0.2 1000.0 3800.0 3.800\n"
        f"{big:>9} 3.0 2500.0 2.9 2400.0 3800.0 1.520\n")
    r = run(sys.executable, os.path.join(TOOLS, "gpu_summary.py"), res, logs)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "nccl all_reduce     256 MiB bf16: algbw 1.5e+03 GB/s, busbw 0 GB/s, wrong 0" in out
    assert any(line.startswith("  (one rank: busbw is 0") for line in out)
    # Ratios 1.02, 1.03, 2 and 3: the upper middle of four, and the worst named with its size and
    # its calls against themselves.
    assert ("overhead (time through zerobench / bare NCCL call): median 2, highest 3 "
            "(all_gather, 1024 B; against itself: bare 1.01, ours 1.5), over 4 sizes") in out
    assert ("zero z2: bytes/param measured 16.250 formula 16.000 (x1.0156), accounted 16.000, "
            "wrong 0") in out
    assert ("adam 256M bf16 grads: 3.8e+03 GB/s, frac_of_limit 0.95 of 4e+03 GB/s; "
            "torch 2500.0 GB/s, ours/torch 1.520") in out
    assert any(line.startswith("adam 256M fp32 grads:") and "torch n/a (no log)" in line
               for line in out)
    # overlap.json was never written: one line says so, and the rest still printed.
    assert "overlap with gemm compute: n/a (no overlap.json: its check failed or did not run)" in out


def test_gpu_estimate_is_the_plan_of_8_gpus_scaled_by_this_gpus_runs(tmp_path):
    """The 8-GPU figure is run_all.sh's own plan for nccl at 8 ranks (one cost model), and the
    scaled figure is that times the check's measured over modelled seconds."""
    runs = tmp_path / "runs.tsv"
    r = run(sys.executable, os.path.join(TOOLS, "gpu_estimate.py"), runs)
    assert r.returncode == 0, r.stderr
    assert "no GPU run of this check passed" in r.stdout
    plan = run(sys.executable, os.path.join(TOOLS, "run_all.py"), "--plan", "--np=8", "--backend=nccl",
               f"--out={tmp_path / 'out'}")
    total = next(line for line in plan.stderr.splitlines() if line.strip().startswith("total"))
    sys.path.insert(0, TOOLS)
    import gpu_estimate
    import run_table
    fam = gpu_estimate.default_run_s(run_table.load(), 8)
    assert gpu_estimate.fmt(sum(fam.values())) in r.stdout
    minutes, seconds = int(total.split()[-4]), int(total.split()[-2])
    assert abs(minutes * 60 + seconds - sum(fam.values())) < 1, (total, fam)

    runs.write_text("zero\t40\tzb_zero\t--params=64e6 --layers=16 --iters=5 --warmup=2\n")
    r = run(sys.executable, os.path.join(TOOLS, "gpu_estimate.py"), runs)
    import run_cost
    table = run_table.load()
    _, model = run_cost.estimate("zb_zero", "--params=64e6 --layers=16 --iters=5 --warmup=2".split(),
                                 "single", 1, 1, table.machine["nccl"], table.cost)
    k = float(r.stdout.split("runs took ")[1].split("x")[0])
    assert abs(k - 40 / model) <= 0.005 + 1e-9, r.stdout
    assert gpu_estimate.fmt(sum(fam.values()) * 40 / model) in r.stdout
    runs.write_text("zero\t40\n")
    r = run(sys.executable, os.path.join(TOOLS, "gpu_estimate.py"), runs)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_gpu_estimate_times_each_benchmark_from_the_stamped_rows(tmp_path):
    """A row's stamp less the one before is one benchmark's time; the first starts at the line
    before the table's head (printed with the first row); aggregate rows end no benchmark."""
    (tmp_path / "runs.tsv").write_text("zero\t12\tzb_zero\t--model=gpt:layers=2,hidden=64 --iters=5 --warmup=2\n")
    rule = "-" * 40
    (tmp_path / "nccl_zero.times").write_text("\n".join([
        "0.500\tRunning build-gpu/bin/zb_zero", "1.000\tworld_size: 1",
        f"4.000\t{rule}", "4.000\tBenchmark    Time   CPU   Iterations", f"4.000\t{rule}",
        "4.000\tzero/stage:dp/params:1000000/layers:2/manual_time   1 ms",
        "7.500\tzero/stage:z1/params:1000000/layers:2/manual_time   1 ms",
        "7.500\tzero/stage:z1/params:1000000/layers:2/manual_time_median   1 ms",
        "10.000\tzero/stage:z2/params:1000000/layers:2/manual_time   1 ms",
        "10.100\t# bytes/param measured: a note under the table",
        "10.100\tzero_own_table      1  none   16.0/16.0  (the binary's own table, not a row)"]) + "\n")
    sys.path.insert(0, TOOLS)
    import gpu_estimate
    import run_cost
    import run_table
    assert gpu_estimate.benchmark_seconds(tmp_path / "nccl_zero.times") == [3.0, 3.5, 2.5]
    r = run(sys.executable, os.path.join(TOOLS, "gpu_estimate.py"), tmp_path / "runs.tsv")
    assert r.returncode == 0, r.stderr
    # The model is priced at the parameters and layers the rows name, not the default 16e6.
    table = run_table.load()
    words = "--model=gpt:layers=2,hidden=64 --iters=5 --warmup=2 --params=1000000 --layers=2".split()
    each = run_cost.per_benchmark("zb_zero", words, "single", 1, 1, table.machine["nccl"], table.cost)
    _, model = run_cost.estimate("zb_zero", words, "single", 1, 1, table.machine["nccl"], table.cost)
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("zero:"))
    assert line.strip() == (f"zero: model {model:.1f} s at one rank, took 12 s; a benchmark: model "
                            f"{statistics.median(each):.2f} s, took 3.00 s (medians of {len(each)} and 3)"), line

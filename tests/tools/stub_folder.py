"""A fake binary folder for the runner's tests: every zb_* binary of the run table as a small
script that prints a Google Benchmark console table of ZB_STUB_ROWS benchmarks (with their
repetitions and aggregates) and writes a results JSON of the same benchmarks, plus a fake
mpirun that drops its own options and runs the program once, and a fake nvidia-smi that lists
ZB_STUB_GPUS GPUs."""

import os
import sys

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import run_table  # noqa: E402

STUB = r'''#!/usr/bin/env python3
import json, os, sys
name = os.path.basename(sys.argv[0])
args = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "") for a in sys.argv[1:] if a.startswith("--"))
with open(os.environ["ZB_STUB_CALLS"], "a") as f:
    f.write(name + " " + " ".join(sys.argv[1:]) + "\n")
if os.environ.get("ZB_STUB_LAUNCHES"):  # who ran it under an environment launch, and its rendezvous
    with open(os.environ["ZB_STUB_LAUNCHES"], "a") as f:
        f.write(f"{name} {os.environ.get('RANK', '-')} {os.environ.get('ZB_RENDEZVOUS_ID', '-')}\n")
if "show-backend" in args:
    print(os.environ.get("ZB_STUB_BACKEND", "mpi"))
    sys.exit(0)
if name in os.environ.get("ZB_STUB_FAIL", "").split(","):
    print("----------------------------------------\nlauncher banner\n----------------------------------------")
    print(f"{name}: error: planted failure", file=sys.stderr)
    sys.exit(1)
reps = int(args.get("benchmark_repetitions", "1"))
print("Benchmark            Time             CPU   Iterations UserCounters...")
print("-" * 70)
for i in range(int(os.environ.get("ZB_STUB_ROWS", "2"))):
    for r in range(reps):
        print(f"{name}/case:{i}/manual_time      1.5 us          2.0 us            3 wrong=0")
    if reps > 1:
        for agg in ("mean", "median", "stddev"):
            print(f"{name}/case:{i}/manual_time_{agg}      1.5 us          2.0 us            3 wrong=0")
        print(f"{name}/case:{i}/manual_time_cv      1.00 %          1.00 %            3 wrong=0")
if os.environ.get("ZB_STUB_SPLIT_ROW"):  # another process's output inside a row, as under mpirun
    print(f"{name}/case:0/manu[vm:1234] a line of another process")
    print("al_time      1.5 us          2.0 us            3 wrong=0")
print()
print(f"# {name}: a table of its own after the run")
print("stage   bytes/param formula   measured")
print("dp      16.000                16.000")
if args.get("json"):  # the console's benchmarks, once each
    rows = [{"name": f"{name}/case:{i}/manual_time", "run_name": f"{name}/case:{i}/manual_time",
             "run_type": "iteration", "repetitions": 1, "repetition_index": 0, "threads": 1,
             "iterations": 3, "real_time": 1.5, "cpu_time": 2.0, "time_unit": "us", "wrong": 0}
            for i in range(int(os.environ.get("ZB_STUB_ROWS", "2")))]
    with open(args["json"], "w") as f:
        json.dump({"context": {"executable": name, "collective_algorithms": "library defaults"},
                   "benchmarks": rows}, f)
'''

MPIRUN = r'''#!/usr/bin/env bash
# A fake mpirun: its own options dropped, the program run once.
while (($#)); do
  case $1 in
    -np|--bind-to) shift 2 ;;
    --mca) shift 3 ;;
    -x) shift 2 ;;
    --oversubscribe) shift ;;
    *) break ;;
  esac
done
exec "$@"
'''

NVIDIA_SMI = r'''#!/usr/bin/env bash
# A fake nvidia-smi with ZB_STUB_GPUS GPUs of 80 GiB.
n=${ZB_STUB_GPUS:-0}
case "$*" in
  -L) for ((i = 0; i < n; i++)); do echo "GPU $i: Fake GPU (UUID: GPU-$i)"; done ;;
  *memory.total*) for ((i = 0; i < n; i++)); do echo "$i, Fake GPU, 81920, 00000000:0$i:00.0"; done ;;
  *driver_version*) for ((i = 0; i < n; i++)); do echo "550.1"; done ;;
  *) exit 0 ;;
esac
'''


def make(folder):
    """bin/ with every binary of the table and path/ with mpirun and nvidia-smi; returns both."""
    bin_dir, path_dir = os.path.join(folder, "bin"), os.path.join(folder, "path")
    os.makedirs(bin_dir)
    os.makedirs(path_dir)
    for binary in sorted({r.binary for r in run_table.load().runs}):
        write(os.path.join(bin_dir, binary), STUB)
    write(os.path.join(path_dir, "mpirun"), MPIRUN)
    write(os.path.join(path_dir, "nvidia-smi"), NVIDIA_SMI)
    return bin_dir, path_dir


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)

"""tools/predict_accuracy.py refuses bad input before it runs anything: one line, exit 2; and
its one-node table predicts from the files --keep kept (--from) without measuring anything; and
it launches the ranks bound as --bind says."""
import argparse
import json
import os
import stat
import subprocess
import sys

import pytest

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "predict_accuracy.py")

BAD = [(["one-node", "--ranks=2,x"], "--ranks=2,x"),
       (["one-node", "--ranks=1"], "counts of 2 or more"),
       (["causes", "--reps=0"], "--reps 1 or more"),
       (["causes", "--reps=many"], "--reps"),
       (["sideways"], "sideways"),
       (["links", "--rates=1,x"], "--rates=1,x"),
       (["links", "--rates=1,0"], "above 0"),
       (["more-ranks", "--sweep-gbps=-1"], "above 0"),
       (["quantized", "--bracket=1"], "--bracket=1: a factor above 1"),
       (["quantized", "--bracket=x"], "--bracket"),
       (["one-node", "--sweep-flags=footprint=8M"], "each starting with --"),
       (["causes", "--bind=socket"], "--bind=socket: auto, none or core"),
       (["one-node", "--bin=/no/such/dir"], "holds no zb_predict"),
       (["causes", "--keep=/tmp/x"], "one-node's, not causes's"),
       (["one-node", "--keep=/tmp/x", "--from=/tmp"], "one or the other"),
       (["one-node", "--from=/no/such/dir"], "--from=/no/such/dir: no such folder"),
       (["one-node", "--from=/tmp", "--sweep-flags=--footprint=8M"], "--from measures nothing"),
       (["one-node", "--tries=0"], "--tries=0: 1 or more"),
       (["one-node", "--from=/tmp", "--tries=2"], "not with --from"),
       (["causes", "--tries=2"], "not with --from or another table"),
       (["one-node", "--host-tries=0"], "--host-tries=0: 1 or more"),
       (["one-node", "--from=/tmp", "--host-tries=2"], "not with --from"),
       (["links", "--host-tries=2"], "not with --from or another table")]


def test_bad_input_is_one_line_and_exit_2():
    failures = []
    for args, want in BAD:
        proc = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)
        lines = proc.stderr.splitlines()
        if proc.returncode != 2 or proc.stdout or len(lines) != 1 or want not in lines[0] or \
                not lines[0].startswith("predict_accuracy.py: "):
            failures.append(f"{args}: rc {proc.returncode}, stderr {proc.stderr!r}")
    assert not failures


# A zb_predict that measures nothing either: per stage the errors it is given, exposed_error
# by which --kernels it got (none, the copy without rank_spread, the rates as kept); the second
# repetition's sweep and step ran at two host speeds, and its comm_error is 0.25, not 0.05;
# exposed_per_comm is 2.0 for dp in the first and NaN (next to nothing exposed) in the second,
# NaN for z1 in the first and 1.0 in the second.
STUB = """#!/usr/bin/env python3
import json, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
kernels = args.get("kernels", "")
exposed = 0.30 if "rates_" in kernels else 0.20 if kernels else 0.10
steady = not args["sweep"].endswith("_1.json")
stages = ["dp", "z1"]
per_comm = {"dp": 2.0 if steady else float("nan"), "z1": float("nan") if steady else 1.0}
json.dump({"context": {}, "benchmarks": [{"name": f"zero/stage:{s}/manual_time", "comm_error": 0.05 if steady else 0.25,
    "host_steady": 1 if steady else 0, "exposed_per_comm": per_comm[s],
    "exposed_comm_s_measured": 0.004, "exposed_comm_s_predicted": 0.004 * (1 + exposed), "exposed_error": exposed, "exposed_error_s": exposed * 0.004,
    "skew_wait_s_measured": 0.001, "skew_wait_s_predicted": 0.0005, "step_s_predicted": 0.011}
    for s in stages]}, open(args["json"], "w"))
"""


def test_from_predicts_from_the_kept_files_without_measuring(tmp_path):
    bin_dir, kept = tmp_path / "bin", tmp_path / "kept"
    bin_dir.mkdir()
    kept.mkdir()
    stub = bin_dir / "zb_predict"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    for rep in range(2):
        (kept / f"sweep_2_{rep}.json").write_text('{"context": {}, "benchmarks": []}')
        (kept / f"rates_2_{rep}.json").write_text(
            '{"context": {}, "benchmarks": [{"name": "adam/params:1", "rank_spread": 0.1}]}')
        context = {"mpi_yield_when_idle": "on (asked for)"} if rep else {}
        (kept / f"zero_2_{rep}.json").write_text(json.dumps({"context": context, "benchmarks": [
            {"name": f"zero/stage:{s}/manual_time", "step_s": 0.010} for s in ("dp", "z1")]}))
    # No zb_collectives, zb_zero or zb_optimizer in the folder: a measurement would fail.
    proc = subprocess.run([sys.executable, TOOL, "one-node", "--ranks=2", "--reps=2", f"--from={kept}",
                           f"--bin={bin_dir}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 2 |")]
    exposed = "| 4.000 [4.000, 4.000] | 5.200 [5.200, 5.200]"
    rest = "| +10.0% | +20.0% | +30.0% | +1.200 | 1.000 / 0.500 | +10.0%"
    # Every repetition, then only those whose sweep and step ran at one host speed; per comm the
    # median of the finite ones, "-" where there are none.
    every, steady = {"dp": "2.00", "z1": "1.00"}, {"dp": "2.00", "z1": "-"}
    assert rows == [f"| 2 | {s} | 2 | +15.0% [+5.0%, +25.0%] {exposed} | {every[s]} {rest} | comm exposed |"
                    for s in ("dp", "z1")] + \
                   [f"| 2 | {s} | 1 | +5.0% [+5.0%, +5.0%] {exposed} | {steady[s]} {rest} | exposed |"
                    for s in ("dp", "z1")], \
        proc.stdout
    # How the steps' MPI waited, from each kept step's context (an older file has none).
    assert "# 2 ranks: the steps' mpi_yield_when_idle: not recorded; on (asked for)" in proc.stdout.splitlines()
    # A repetition the folder does not hold is one line and exit 2, before the table starts.
    proc = subprocess.run([sys.executable, TOOL, "one-node", "--ranks=2", "--reps=3", f"--from={kept}",
                           f"--bin={bin_dir}"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and not proc.stdout and len(proc.stderr.splitlines()) == 1, proc
    assert "no sweep_2_2.json" in proc.stderr, proc.stderr


# Stand-ins that measure nothing, for --tries: each sweep counts itself in the folder's
# `sweeps`, and the predictor finds the host steady after an even count (comm_error 5%, else
# 50%): with more than one try every repetition's first ran at two host speeds, its second at
# one; with one, the first repetition ran at two and the second at one.
MEASURE = """#!/usr/bin/env python3
import json, os, sys
if os.environ.get("OMPI_COMM_WORLD_RANK", "0") != "0":
    sys.exit(0)
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
name = os.path.basename(sys.argv[0])
with open(os.path.join(os.path.dirname(sys.argv[0]), "calls"), "a") as log:
    log.write(" ".join([name, *sys.argv[1:]]) + "\\n")
context = {}
if name == "zb_collectives":
    count = os.path.join(os.path.dirname(sys.argv[0]), "sweeps")
    n = (int(open(count).read()) if os.path.exists(count) else 0) + 1
    open(count, "w").write(str(n))
    context = {"sweeps": n}
rows = [{"name": f"zero/stage:{s}/manual_time", "step_s": 0.010} for s in ("dp", "z1")] if name == "zb_zero" else []
json.dump({"context": context, "benchmarks": rows}, open(args["json"], "w"))
"""

TRIED = """#!/usr/bin/env python3
import json, sys
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a)
steady = json.load(open(args["sweep"]))["context"]["sweeps"] % 2 == 0
json.dump({"context": {}, "benchmarks": [{"name": f"zero/stage:{s}/manual_time", "comm_error": 0.05 if steady else 0.5,
    "host_steady": 1 if steady else 0, "exposed_comm_s_measured": 0.004, "exposed_comm_s_predicted": 0.004,
    "exposed_error": 0.0, "exposed_error_s": 0.0, "skew_wait_s_measured": 0.001, "skew_wait_s_predicted": 0.001,
    "step_s_predicted": 0.010} for s in ("dp", "z1")]}, open(args["json"], "w"))
"""


def stand_ins(tmp_path):
    """A folder of the stand-ins above, in place of zerobench's binaries."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("zb_collectives", MEASURE), ("zb_zero", MEASURE), ("zb_optimizer", MEASURE),
                       ("zb_predict", TRIED)):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


@pytest.mark.parametrize("tries,counts,comm,steady", [(1, "1, 1", "+27.5%", 1), (3, "2, 2", "+5.0%", 2)])
def test_tries_measures_a_repetition_again_until_the_host_held_one_speed(tmp_path, tries, counts, comm, steady):
    bin_dir = stand_ins(tmp_path)
    proc = subprocess.run([sys.executable, TOOL, "one-node", "--ranks=2", "--reps=2", f"--tries={tries}",
                           f"--bin={bin_dir}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"# 2 ranks: measured this many times a repetition (--tries={tries}): {counts}" in proc.stdout, proc.stdout
    # The table is of the last try of each repetition.
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| 2 | dp |")]
    assert rows[0].startswith(f"| 2 | dp | 2 | {comm} "), rows
    assert rows[1].startswith(f"| 2 | dp | {steady} | +5.0% "), rows


@pytest.mark.parametrize("host_tries,flag", [(1, None), (4, "--host-tries=4")])
def test_host_tries_reaches_the_sweep_the_steps_and_the_kernels(tmp_path, host_tries, flag):
    """--host-tries is the sweep's, the steps' and the kernels' own flag, handed on as given;
    at 1 (every repetition once) the commands are the default run's, without it."""
    bin_dir = stand_ins(tmp_path)
    proc = subprocess.run([sys.executable, TOOL, "one-node", "--ranks=2", "--reps=1", f"--host-tries={host_tries}",
                           f"--bin={bin_dir}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    calls = (bin_dir / "calls").read_text().splitlines()
    for name in ("zb_collectives", "zb_zero", "zb_optimizer"):
        args = [c.split()[1:] for c in calls if c.split()[0] == name]
        assert len(args) == 1, calls
        assert [a for a in args[0] if a.startswith("--host-tries")] == ([flag] if flag else []), (name, args)


@pytest.mark.parametrize("bind,ranks,want", [
    ("auto", 1, "none"), ("auto", 2, "core:overload-allowed"), ("none", 2, "none"),
    ("core", 1, "core"), ("core", 2, "core:overload-allowed"),
])
def test_the_ranks_are_launched_as_bind_says(monkeypatch, bind, ranks, want):
    # Cores counted as 1: auto binds only ranks that outnumber them, as run_all.sh does.
    sys.path.insert(0, os.path.dirname(TOOL))
    import predict_accuracy_common as common
    ran = []
    monkeypatch.setattr(common.os, "cpu_count", lambda: 1)
    monkeypatch.setattr(common.subprocess, "run",
                        lambda cmd, **kw: ran.append(cmd) or subprocess.CompletedProcess(cmd, 0, "", ""))
    common.run(argparse.Namespace(bin="/b", bind=bind), ranks, "zb_zero", ["--x"])
    assert ran == [["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", want, "/b/zb_zero", "--x"]]

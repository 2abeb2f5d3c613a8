"""./run_all.sh driven through a fake binary folder (tests/tools/stub_folder.py), a fake mpirun,
nvidia-smi and srun: bad options in one line with exit 2, the help's run sizes, the plan before
the first benchmark, the progress lines, the manifest's estimate and actual per family and its
hardware, a failed run, the estimate learned from the last run, --show-backend and the srun
plugin probe. No real benchmark runs, so this takes seconds."""

import json
import os
import subprocess

import pytest

import stub_folder

ROOT = stub_folder.ROOT
RUN_ALL = os.path.join(ROOT, "run_all.sh")


@pytest.fixture
def stubs(tmp_path):
    bin_dir, path_dir = stub_folder.make(str(tmp_path / "stubs"))
    env = dict(os.environ, PATH=f"{path_dir}:{os.environ['PATH']}", ZB_STUB_CALLS=str(tmp_path / "calls"))
    for k in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_NPROCS", "ZB_SRUN_MPI"):
        env.pop(k, None)
    return bin_dir, path_dir, env


def run_all(args, env, timeout=300):
    return subprocess.run([RUN_ALL] + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def manifest(out):
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("arg", [
    "--nope", "quick", "--np=0", "--np=x", "--repetitions=-1", "--backend=cuda", "--srun-mpi=PMI X",
    "--out=", "--only=", "--only=zero,plot", "--compare=/no/such/folder", "--gate=", "--gate=some",
    "--threshold=", "--threshold=-1", "--tolerance=x", "--tolerance=m=-1", "--bin=", "--bin=/no/such",
    "--extra-args=zero_wires=--x", "--extra-args=plan", "--plan-runs=2", "--full=1",
])
def test_a_bad_option_is_one_line_and_exit_2(arg, stubs):
    r = run_all(["--quick", arg], stubs[2])
    assert r.returncode == 2, (arg, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("run_all.sh: "), r.stderr
    assert r.stdout == ""


def test_two_run_sizes_are_refused(stubs):
    r = run_all(["--quick", "--full"], stubs[2])
    assert r.returncode == 2 and "two run sizes" in r.stderr


def test_an_unwritable_out_stops_before_anything_runs(stubs):
    # /proc takes no new folders: the run must stop at once, not after building and running.
    r = run_all(["--quick", "--out=/proc/zb_no_such"], stubs[2])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0], r.stderr


def test_help_documents_the_three_run_sizes(stubs):
    r = run_all(["-h"], stubs[2])
    assert r.returncode == 0 and r.stderr == ""
    for words in ("(none)             the default", "--quick            CI-sized", "--full             sized for a paper",
                  "within 5 minutes on a 2-core CPU machine", "--plan", "--only=A,B"):
        assert words in r.stdout, words


def test_a_run_is_counted_from_its_json_where_a_split_row_adds_a_name(stubs, tmp_path):
    # Each stub prints one row cut in two by another process's line; the second half reads as
    # a third benchmark on the console. The manifest counts the two its JSON holds.
    bin_dir, _, env = stubs
    out = str(tmp_path / "split")
    r = run_all([f"--bin={bin_dir}", "--no-figures", "--only=zero", f"--out={out}"], dict(env, ZB_STUB_SPLIT_ROW="1"))
    assert r.returncode == 0, r.stderr
    runs = {x["name"]: x for x in manifest(out)["runs"]}
    assert runs["zero"]["status"] == "ok" and runs["zero"]["benchmarks_done"] == 2, runs["zero"]


def test_the_plan_then_progress_then_estimate_beside_actual(stubs, tmp_path):
    bin_dir, _, env = stubs
    out = str(tmp_path / "runs" / "first")
    r = run_all([f"--bin={bin_dir}", "--no-figures", f"--out={out}"], env)
    assert r.returncode == 0, r.stderr
    err = r.stderr.splitlines()
    plan = next(i for i, line in enumerate(err) if "] plan: " in line)
    first_done = next(i for i, line in enumerate(err) if ": done in " in line)
    assert plan < first_done
    assert "no earlier default run here to learn from" in err[plan]
    assert [line.split("] ")[1].split()[0] for line in err[plan + 2:plan + 10]] == \
        ["collectives", "zero", "predict", "sweep", "optimizer", "pipeline", "offload", "plan"]
    # Not a terminal: plain progress lines, the first as the first run starts.
    progress = [line for line in err if "] progress: " in line]
    assert progress and progress[0].endswith(" left") and "collectives 0/" in progress[0]
    assert any("time per family: estimate and actual" in line for line in err[first_done:])
    m = manifest(out)
    assert m["size"] == "default" and m["quick"] is False and m["backend"] == "mpi"
    assert m["backend_chosen_by"] == "auto: no GPU visible"
    assert set(m["families"]) == {"collectives", "zero", "predict", "sweep", "optimizer", "pipeline",
                                  "offload", "plan"}
    for fam, f in m["families"].items():
        assert f["estimate_s"] > 0 and f["actual_s"] >= 0 and f["complete"] is True, fam
        assert f["estimate_s"] == pytest.approx(f["model_s"], abs=0.05), fam  # nothing learned yet
    runs = {x["name"]: x for x in m["runs"]}
    assert runs["zero"]["benchmarks_done"] == 2 and runs["zero"]["benchmarks_planned"] == 6
    assert runs["zero_wire"]["settings"].startswith("--mca btl tcp,self")
    # Each optional file the earlier runs wrote adds its flag: the measured step, the kernels' rates.
    assert runs["predict"]["command"].endswith(f"--measured={out}/zero.json --kernels={out}/quantize_rates.json")
    assert m["hardware"]["host_memory_bytes"] > 0 and m["hardware"]["gpus"] == []

    # The next run of the same kind scales its estimate by what this one found (clamped).
    again = str(tmp_path / "runs" / "second")
    r = run_all([f"--bin={bin_dir}", "--no-figures", f"--out={again}", "--only=zero,plan"], env)
    assert r.returncode == 0, r.stderr
    assert "scaled per family by first on this host" in r.stderr
    m2 = manifest(again)
    assert m2["estimate"]["learned_from"] == out
    assert set(m2["families"]) == {"zero", "plan"}
    ratio = m2["estimate"]["scaled_by"]["zero"]
    assert ratio == pytest.approx(min(max(m["families"]["zero"]["actual_s"] / m["families"]["zero"]["model_s"],
                                          0.25), 4.0), rel=1e-2)
    assert m2["families"]["zero"]["estimate_s"] == pytest.approx(m2["families"]["zero"]["model_s"] * ratio, rel=0.02)


def test_a_failed_run_is_reported_and_its_dependants_skipped(stubs, tmp_path):
    bin_dir, _, env = stubs
    out = str(tmp_path / "out")
    env = dict(env, ZB_STUB_FAIL="zb_collectives")
    r = run_all([f"--bin={bin_dir}", "--no-figures", "--quick", f"--out={out}", "--only=collectives,predict"], env)
    assert r.returncode == 1
    assert "collectives: FAILED after" in r.stderr and "zb_collectives: error: planted failure" in r.stderr
    assert "launcher banner" not in r.stderr  # the boxed banner is left out of the tail
    assert "predict: skipped: no predict_sweep.json" in r.stderr
    runs = {x["name"]: x for x in manifest(out)["runs"]}
    assert runs["collectives"]["status"] == "failed" and runs["predict"]["status"] == "skipped"
    assert manifest(out)["families"]["collectives"]["complete"] is False


@pytest.mark.parametrize("family,said,skips", [
    ("zero", "zero_wire: skipped: one rank moves nothing over a wire", "(skips zero_wire, zero_quantized)"),
    # The quantized prediction fits its links from collectives over more than one rank.
    ("predict", "predict_quantized: skipped: needs 2 ranks or more", "(skips predict_quantized)"),
])
def test_one_rank_skips_what_needs_more(stubs, tmp_path, family, said, skips):
    bin_dir, _, env = stubs
    out = str(tmp_path / "out")
    r = run_all([f"--bin={bin_dir}", "--no-figures", "--quick", "--np=1", f"--out={out}", f"--only={family}"], env)
    assert r.returncode == 0, r.stderr
    assert said in r.stderr
    assert skips in r.stderr  # already in the plan


@pytest.mark.parametrize("extra,bind", [(0, "--bind-to none"), (2, "--oversubscribe --bind-to core:overload-allowed")])
def test_cpu_ranks_are_bound_only_where_they_outnumber_the_cores(stubs, tmp_path, extra, bind):
    bin_dir, _, env = stubs
    out = str(tmp_path / "out")
    ranks = (os.cpu_count() or 2) + extra
    r = run_all([f"--bin={bin_dir}", "--no-figures", "--quick", f"--np={ranks}", f"--out={out}",
                 "--only=collectives"], env)
    assert r.returncode == 0, r.stderr
    command = {x["name"]: x for x in manifest(out)["runs"]}["collectives"]["command"]
    assert f"mpirun -np {ranks} {bind} " in command, command


def test_gpus_ask_the_binaries_for_the_backend(stubs, tmp_path):
    bin_dir, _, env = stubs
    out = str(tmp_path / "out")
    env = dict(env, ZB_STUB_GPUS="2", ZB_STUB_BACKEND="nccl")
    r = run_all([f"--bin={bin_dir}", "--no-figures", "--quick", f"--out={out}", "--only=zero"], env)
    assert r.returncode == 0, r.stderr
    m = manifest(out)
    assert m["backend"] == "nccl" and m["ranks"] == 2
    assert m["backend_chosen_by"] == "auto: zb_collectives --show-backend"
    assert [g["memory_total_bytes"] for g in m["hardware"]["gpus"]] == [81920 * 1048576] * 2
    runs = {x["name"]: x for x in m["runs"]}
    assert "--compute=gemm:512" in runs["zero"]["command"] and "--bind-to" not in runs["zero"]["command"]
    assert runs["zero_wire"]["settings"] == "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket"
    assert " -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_NET " in runs["zero_wire"]["command"]


def test_a_backend_the_binaries_cannot_name_stops_the_run(stubs, tmp_path):
    bin_dir, _, env = stubs
    env = dict(env, ZB_STUB_GPUS="1", ZB_STUB_BACKEND="cuda?")
    r = run_all([f"--bin={bin_dir}", "--quick", f"--out={tmp_path / 'out'}"], env)
    assert r.returncode == 1 and "give --backend" in r.stderr


def test_under_slurm_the_first_plugin_that_starts_two_ranks_is_used(stubs, tmp_path):
    bin_dir, path_dir, env = stubs
    # srun --mpi=list offers pmix (which fails to start here) and pmi2 (which works).
    stub_folder.write(os.path.join(path_dir, "srun"), """#!/usr/bin/env bash
if [[ $1 == --mpi=list ]]; then printf 'MPI plugin types are...\\n\\tnone\\n\\tpmi2\\n\\tpmix\\n'; exit 0; fi
[[ $1 == --mpi=pmix ]] && exit 1
shift 3
exec "$@"
""")
    env = dict(env, SLURM_JOB_ID="42", SLURM_NTASKS="2")
    out = str(tmp_path / "out")
    r = run_all([f"--bin={bin_dir}", "--no-figures", "--quick", f"--out={out}", "--only=zero"], env)
    assert r.returncode == 0, r.stderr
    m = manifest(out)
    assert m["launcher"] == "srun --mpi=pmi2 -n 2" and m["slurm"]["pmi"] == "pmi2"
    assert m["slurm"]["pmi_chosen_by"] == "first of srun --mpi=list that started a two-rank job"
    # Socket runs under srun carry their settings in the environment.
    runs = {x["name"]: x for x in m["runs"]}
    assert runs["zero_wire"]["command"].startswith("env OMPI_MCA_btl=tcp,self ")


def test_plan_only_runs_nothing(stubs, tmp_path):
    bin_dir, _, env = stubs
    r = run_all(["--plan", "--full", f"--out={tmp_path / 'out'}", "--plan-runs=16"], env)
    assert r.returncode == 0, r.stderr
    assert "full run" in r.stderr and "x 16 runs of the suite" in r.stderr
    assert not (tmp_path / "out").exists()
    assert not os.path.exists(env["ZB_STUB_CALLS"])

"""./run_all.sh started once per rank from the environment (as torchrun or a Kubernetes job start
it), on fake binaries (tests/tools/stub_folder.py): every rank runs each ranked benchmark itself,
with no launcher and the run's label as its rendezvous id; the one-process runs are rank 0's,
without the launcher's variables; rank 0 alone writes the results folder; options that do not fit
such a launch are one line and exit 2."""

import json
import os
import subprocess

import pytest

import stub_folder

ROOT = stub_folder.ROOT
RUN_ALL = os.path.join(ROOT, "run_all.sh")
LAUNCH = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
          "SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_STEP_ID", "OMPI_COMM_WORLD_RANK",
          "PMIX_RANK", "PMI_RANK", "ZB_SRUN_MPI", "ZB_RENDEZVOUS_ID")


@pytest.fixture
def stubs(tmp_path):
    bin_dir, path_dir = stub_folder.make(str(tmp_path / "stubs"))
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH}
    env.update(PATH=f"{path_dir}:{os.environ['PATH']}", ZB_STUB_CALLS=str(tmp_path / "calls"),
               ZB_STUB_LAUNCHES=str(tmp_path / "launches"))
    return bin_dir, env, tmp_path


def rank_env(env, rank, size):
    return dict(env, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank),
                LOCAL_WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1", MASTER_PORT="29999")


def test_every_rank_runs_each_benchmark_and_rank_0_writes(stubs):
    bin_dir, env, tmp = stubs
    out, scratch = tmp / "results", tmp / "scratch"
    scratch.mkdir()
    env = dict(env, TMPDIR=str(scratch))
    procs = [subprocess.Popen([RUN_ALL, "--quick", "--no-figures", f"--bin={bin_dir}", f"--out={out}"],
                              cwd=ROOT, env=rank_env(env, r, 2), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    done = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], done
    assert done[1] == ("", ""), "rank 1 is silent"
    assert "started by torchrun" in done[0][1]
    with open(out / "manifest.json") as f:
        m = json.load(f)
    assert m["launcher"] == "torchrun (every rank runs run_all.sh)"
    assert m["backend"] == "gloo" and m["ranks"] == 2
    runs = {r["name"]: r for r in m["runs"]}
    with open(tmp / "launches") as f:
        launches = [line.split() for line in f]
    import run_table
    table = run_table.load().runs
    for run in table:
        who = sorted((rank, rid) for name, rank, rid in launches if name == run.binary and rid in (run.label, "-")
                     and (rid == run.label or run.launch == "single"))
        if run.launch == "single":
            # Rank 0 alone, without the launcher's variables, once per single run of this binary
            # (a single launch names no run).
            singles = sum(r.binary == run.binary and r.launch == "single" for r in table)
            assert who.count(("-", "-")) == singles, (run.label, who)
        else:
            assert who.count(("0", run.label)) == 1 and who.count(("1", run.label)) == 1, (run.label, who)
            assert not runs[run.label]["command"].startswith(("mpirun", "srun")), runs[run.label]["command"]
            assert "--backend=gloo" in runs[run.label]["command"]
    assert os.listdir(scratch) == [], "rank 1 removes its folder"


@pytest.mark.parametrize("args,text", [
    (["--quick"], "give --bin=DIR"),
    (["--quick", "--np=3", "--bin=."], "--np=3 contradicts the 2 ranks torchrun started"),
    (["--quick", "--backend=mpi", "--bin=."], "--backend=mpi needs an MPI launcher"),
])
def test_options_that_do_not_fit_an_environment_launch_are_one_line(stubs, args, text):
    _, env, _ = stubs
    r = subprocess.run([RUN_ALL, *args], cwd=ROOT, env=rank_env(env, 0, 2), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run_all.sh: ") and text in lines[0], r.stderr


def test_a_rank_variable_that_is_not_a_number_is_one_line(stubs):
    bin_dir, env, _ = stubs
    r = subprocess.run([RUN_ALL, "--quick", f"--bin={bin_dir}"], cwd=ROOT, env=dict(rank_env(env, 0, 2), RANK="x"),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "RANK='x'" in r.stderr

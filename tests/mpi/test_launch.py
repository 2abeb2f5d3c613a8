"""Launching without mpirun: plain processes given torchrun's or Slurm's variables meet at a TCP
rendezvous and measure what mpirun's ranks measure (gloo backend), gloo runs under mpirun too,
and every failure of a launch (a variable missing or contradicting another, an unreachable
rendezvous, a rank that never arrives) ends in one line per process, with no hang."""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from zbrun import ENV, benchmarks, binary, run_json, stderr_lines

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plots"))
from compare_rules import EXACT as COMPARED_EXACT  # noqa: E402  the regression gate's exact metrics

# No MPI launcher's variables may leak in from a test runner started under one.
PLAIN = {k: v for k, v in ENV.items()
         if not k.startswith(("OMPI_COMM_WORLD", "PMIX_", "PMI_", "SLURM_")) and
         k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                   "MASTER_PORT")}

gloo = pytest.mark.skipif(
    subprocess.run([binary("zb_collectives"), "--backend=gloo", "--show-backend"], env=PLAIN,
                   capture_output=True, text=True).returncode != 0,
    reason="this build has no Gloo (libgloo-dev absent at configure time)")

EXACT = ["bytes", "ranks", "wrong", "wire_bytes_formula", "inter_node_bytes_formula",
         "intra_node_bytes_formula"]
SIZES = ["--min-bytes=1001", "--max-bytes=256K", "--step-factor=256", "--iters=2", "--warmup=1"]


def ephemeral_low():
    """The lowest port the kernel hands out for bind(0) and outgoing connections."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="utf-8") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A port free now and outside the ephemeral range. One the kernel picked (bind to 0) is
    closed again before rank 0 listens on it, and in that gap another test's connection could
    take it as its own ephemeral port: that once failed a launch with "Address already in use"."""
    top = min(ephemeral_low(), 65536)
    for _ in range(200):
        port = random.randrange(max(1024, top - 12000), top)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def torchrun_env(rank, size, port, **extra):
    env = dict(PLAIN, RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    env.update(extra)
    return env


def launch(envs, program, args, timeout=120):
    """Starts one plain process per environment; returns their CompletedProcess-like results."""
    procs = [subprocess.Popen([binary(program), *args], env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for e in envs]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def env_json(envs, program, args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        procs = launch(envs, program, [*args, f"--json={path}"])
        for p in procs:
            assert p.returncode == 0, f"rc {p.returncode}\n{p.stdout}\n{p.stderr}"
        assert all(p.stdout == "" for p in procs[1:]), "only rank 0 prints"
        with open(path) as f:
            return json.load(f)


@gloo
@pytest.mark.parametrize("launcher", ["torchrun", "slurm"])
def test_plain_processes_measure_what_mpirun_measures(launcher):
    # Three plain processes with a launcher's variables, the gloo backend, against mpirun's
    # three ranks with the MPI backend: every exact metric equal, nothing wrong, and the bytes
    # measured at the sockets within 2% of the formula at 256 KiB (Gloo's headers on top).
    mpi, _ = run_json(3, "zb_collectives", [*SIZES, "--backend=mpi"])
    port = free_port()
    if launcher == "torchrun":
        envs = [torchrun_env(r, 3, port) for r in range(3)]
    else:
        envs = [dict(PLAIN, SLURM_PROCID=str(r), SLURM_NTASKS="3", SLURM_LOCALID=str(r),
                     SLURM_STEP_ID="0", SLURM_JOB_ID="7", SLURM_STEP_NODELIST="localhost",
                     MASTER_PORT=str(port)) for r in range(3)]
    env = env_json(envs, "zb_collectives", [*SIZES, "--backend=gloo"])
    assert env["context"]["launch"] == launcher and env["context"]["backend"] == "gloo"
    assert env["context"]["world_size"] == "3" and env["context"]["nodes_from"] == "host names"
    want, got = benchmarks(mpi), benchmarks(env)
    assert sorted(want) == sorted(got)
    for name in want:
        for c in EXACT:
            assert got[name][c] == want[name][c], (name, c)
        assert got[name]["wrong"] == 0
    big = [n for n in got if got[n]["bytes"] >= 256 * 1024 - 2]  # padded to 3 ranks
    assert len(big) == 3
    for name in big:
        b = got[name]
        assert b["wire_bytes_formula"] <= b["wire_bytes_measured"] <= 1.02 * b["wire_bytes_formula"], name


@gloo
def test_gloo_under_mpirun_matches_the_mpi_backend():
    args = ["--min-bytes=64K", "--max-bytes=64K", "--iters=2", "--warmup=1"]
    mpi, _ = run_json(2, "zb_collectives", [*args, "--backend=mpi"])
    glo, _ = run_json(2, "zb_collectives", [*args, "--backend=gloo"])
    assert glo["context"]["launch"] == "mpi" and glo["context"]["backend"] == "gloo"
    want, got = benchmarks(mpi), benchmarks(glo)
    assert sorted(want) == sorted(got)
    for name in want:
        for c in EXACT:
            assert got[name][c] == want[name][c], (name, c)


# zb_zero's exact metrics, but for resident-memory growth: measured, and each library's own.
ZERO = ["--params=100000", "--layers=2", "--bucket-mb=0.1", "--iters=1", "--warmup=0",
        "--stages=z2,z3"]


def same_exact(want, got):
    assert sorted(want) == sorted(got)
    for name in want:
        assert got[name]["wrong"] == 0, name
        for c in sorted(COMPARED_EXACT - {"bytes_per_param_measured"}):
            if c in want[name]:
                assert got[name][c] == want[name][c], (name, c)


@gloo
def test_zb_zero_from_the_environment_matches_mpirun():
    mpi, _ = run_json(2, "zb_zero", [*ZERO, "--backend=mpi"])
    port = free_port()
    env = env_json([torchrun_env(r, 2, port) for r in range(2)], "zb_zero", [*ZERO, "--backend=gloo"])
    same_exact(benchmarks(mpi), benchmarks(env))


def torchrun():
    """torchrun from $ZB_TORCHRUN (a virtual environment's, say) or PATH; None when absent."""
    path = os.environ.get("ZB_TORCHRUN") or shutil.which("torchrun")
    return path if path and os.access(path, os.X_OK) else None


@gloo
@pytest.mark.skipif(torchrun() is None, reason="no torchrun (pip install torch in a virtual environment "
                    "and set ZB_TORCHRUN=<venv>/bin/torchrun)")
def test_torchrun_starts_zb_zero_as_mpirun_does():
    mpi, _ = run_json(2, "zb_zero", [*ZERO, "--backend=mpi"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        p = subprocess.run([torchrun(), "--nproc-per-node=2", f"--master-port={free_port()}", "--no-python",
                            binary("zb_zero"), *ZERO, "--backend=gloo", f"--json={path}"], env=PLAIN,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        with open(path) as f:
            got = json.load(f)
    assert got["context"]["launch"] == "torchrun"
    same_exact(benchmarks(mpi), benchmarks(got))


def one_line_each(procs, rc, text):
    for p in procs:
        lines = stderr_lines(p)
        assert p.returncode == rc and len(lines) <= 1, f"rc {p.returncode}: {p.stderr}"
    said = [stderr_lines(p)[0] for p in procs if stderr_lines(p)]
    assert len(said) >= 1 and all(line.startswith("zb_collectives: ") for line in said), said
    assert any(text in line for line in said), said
    return said


ARGS = ["--min-bytes=4K", "--max-bytes=4K", "--iters=1", "--warmup=0", "--backend=gloo",
        "--timeout=2"]


@pytest.mark.parametrize("drop,text", [("WORLD_SIZE", "WORLD_SIZE is not set"),
                                       ("MASTER_ADDR", "MASTER_ADDR is not set")])
def test_a_missing_variable_is_one_line_and_exit_2(drop, text):
    # Rank 0 says it (every rank of a real job reads the same variables, and only rank 0 prints).
    env = torchrun_env(0, 2, free_port())
    del env[drop]
    one_line_each(launch([env], "zb_collectives", ARGS, timeout=30), 2, text)


@gloo
def test_ranks_whose_variables_contradict_each_other_end_with_exit_2():
    port = free_port()
    procs = launch([torchrun_env(0, 2, port), torchrun_env(1, 3, port, LOCAL_WORLD_SIZE="2", LOCAL_RANK="1")],
                   "zb_collectives", ARGS, timeout=30)
    one_line_each(procs, 2, "rank 1 (127.0.0.1) says the job has 3 ranks, rank 0 says 2")


@gloo
def test_an_unreachable_rendezvous_ends_after_the_timeout():
    procs = launch([torchrun_env(1, 2, free_port())], "zb_collectives", ARGS, timeout=30)
    said = one_line_each(procs, 1, "could not reach the rendezvous at 127.0.0.1:")
    assert "within 2 s" in said[0]


@gloo
def test_a_rank_that_never_arrives_ends_the_job_naming_how_many_did():
    # A world of 3 where ranks 0 and 1 start: rank 0 names who came, rank 1 leaves quietly.
    port = free_port()
    procs = launch([torchrun_env(0, 3, port), torchrun_env(1, 3, port)], "zb_collectives", ARGS,
                   timeout=30)
    said = one_line_each(procs, 1, "did not complete within 2 s: 2 of 3 ranks arrived (rank 2 had not)")
    assert len(said) == 1, said


def test_show_launch_names_the_launcher_without_starting_anything():
    def show(env):
        p = subprocess.run([binary("zb_collectives"), "--show-launch"], env=env, capture_output=True,
                           text=True, timeout=30)
        return p.returncode, p.stdout
    assert show(PLAIN) == (0, "none 0 1\n")
    assert show(torchrun_env(0, 4, 1234)) == (0, "torchrun 0 4\n")
    assert show(torchrun_env(2, 4, 1234)) == (0, "")  # only rank 0 prints
    assert show(dict(PLAIN, OMPI_COMM_WORLD_RANK="0")) == (0, "mpi 0 0\n")

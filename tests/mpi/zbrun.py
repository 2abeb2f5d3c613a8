"""Launching zerobench binaries under mpirun for the multi-rank tests."""
import json
import math
import os
import subprocess
import tempfile

BIN = os.environ.get("ZB_BIN", os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))

# Open MPI refuses root without these; more ranks than cores needs --oversubscribe.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")

# Socket transport and the ring algorithms: what makes measured wire bytes comparable.
TCP_RING = ["--mca", "btl", "tcp,self", "--mca", "pml", "ob1",
            "--mca", "coll_tuned_use_dynamic_rules", "1",
            "--mca", "coll_tuned_allreduce_algorithm", "4",
            "--mca", "coll_tuned_reduce_scatter_algorithm", "3",
            "--mca", "coll_tuned_allgather_algorithm", "4"]


def binary(name):
    return os.path.join(BIN, name)


def mpirun(np, program, args, mca=(), timeout=600, env=None):
    """Runs `program` on `np` ranks (in ENV, or `env`); returns the CompletedProcess."""
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", *mca, binary(program), *args]
    return subprocess.run(cmd, env=env or ENV, capture_output=True, text=True, timeout=timeout)


def run_json(np, program, args, mca=(), expect_rc=0, timeout=600, env=None):
    """Runs with --json into a temporary file and returns (json, process)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        proc = mpirun(np, program, [*args, f"--json={path}"], mca=mca, timeout=timeout, env=env)
        assert proc.returncode == expect_rc, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        data = None
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
        return data, proc


def benchmarks(data):
    """name without the /iterations:... suffix -> benchmark entry (iteration rows only)."""
    out = {}
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        out[b["run_name"].split("/iterations:")[0]] = b
    return out


def drawn_and_candidates(trace):
    """A --trace file's drawn step, as its slowest rank's exposed time (us), and the exposed
    times of the candidates it was chosen from, in the order they ran."""
    drawn = max(e["args"]["exposed_us"] for e in trace["traceEvents"]
                if e["ph"] == "M" and e["name"] == "process_name")
    return drawn, trace["zerobench"]["candidates_exposed_us"]


def is_nan(x):
    return isinstance(x, float) and math.isnan(x)


def run_single(program, args, timeout=60):
    """Runs one process without mpirun (MPI's singleton start)."""
    return subprocess.run([binary(program), *args], env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def stderr_lines(proc):
    return [l for l in proc.stderr.splitlines() if l.strip()]


# MPI_Init fails loudly under this environment (no such transport), so a process that exits 2
# with one line under it has checked its flags without starting MPI.
NO_MPI = dict(ENV, OMPI_MCA_pml="zb_no_such_pml")


def bad_flag_failures(program, table, timeout=60):
    """Runs `program` once per row of `table`, each a list of arguments or (arguments, text the
    line must hold), without a launcher and with MPI unable to start; returns a description of
    every row that did not exit 2 with exactly one line on stderr, "<program>: ...", and nothing
    on stdout. One test per table: each row is still its own process, and every failing row is
    named."""
    failures = []
    for row in table:
        args, want = (row, "") if isinstance(row, list) else row
        proc = subprocess.run([binary(program), *args], env=NO_MPI, capture_output=True, text=True,
                              timeout=timeout)
        lines = stderr_lines(proc)
        one_line = len(lines) == 1 and lines[0].startswith(f"{program}: ") and want in lines[0]
        if proc.returncode != 2 or proc.stdout or not one_line:
            failures.append(f"{' '.join(args)}: rc {proc.returncode}, "
                            f"stdout {proc.stdout[:200]!r}, stderr {proc.stderr[-500:]!r}")
    return failures

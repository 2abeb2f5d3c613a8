"""./run_all.sh inside a real Slurm allocation: a single-node Slurm (munged, slurmctld, slurmd with
a generated configuration, in a network namespace of its own) is started by
tests/slurm/local_slurm.sh, and `salloc -n 2` runs what proves the launcher path: one run of
each launch kind (all ranks; the socket transport, whose settings srun passes in the
environment) at the allocation's 2 ranks through srun with a PMI plugin that starts Open MPI
(Slurm's default, none, cannot). The whole quick suite runs in tests/plots/test_quick_run.py,
and the plugin probe's order in tests/tools/. Skipped with the reason where Slurm cannot be
installed or started as root. The same Slurm starts a benchmark with srun --mpi=none (no PMI,
no MPI: the ranks meet at the step's first host) and the gloo backend, whose exact metrics equal
mpirun's with the MPI backend."""

import json
import os
import subprocess

import pytest

ROOT = os.environ.get("ZB_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("ZB_BIN") or os.path.join(ROOT, "build", "bin")
HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "local_slurm.sh")
RANKED = ("collectives", "zero_wire", "zero", "zero_quantized")  # ranks launch and wire launch


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("starting slurmctld, slurmd and munged needs root")
    if not all(os.access(os.path.join(BIN, b), os.X_OK) for b in ("zb_zero", "zb_collectives")):
        pytest.skip(f"{BIN} lacks zb_zero or zb_collectives: build first (tools/build.sh build)")
    where = str(tmp_path_factory.mktemp("slurm") / "slurm")  # local_slurm.sh makes it
    r = subprocess.run([HELPER, "up", where], capture_output=True, text=True, timeout=600)
    if r.returncode == 3:
        pytest.skip(r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0, r.stdout + r.stderr
    yield where
    subprocess.run([HELPER, "down", where], capture_output=True, text=True, timeout=120)


def test_run_all_in_an_allocation_launches_every_kind_at_its_rank_count(slurm, tmp_path):
    out = tmp_path / "results"
    # One repetition: the rank count is the question here, not the spread of the timings.
    r = subprocess.run([HELPER, "exec", slurm, "--", "salloc", "-n", "2",
                        os.path.join(ROOT, "run_all.sh"), "--quick", "--repetitions=1", "--only=collectives,zero",
                        "--no-figures", f"--bin={BIN}", f"--out={out}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["ranks"] == 2
    assert m["slurm"]["ntasks"] == "2" and m["slurm"]["job_id"]
    # A plugin that started a two-rank job was found and used; the default, none, cannot.
    assert m["slurm"]["pmi"] not in ("", "none"), m["slurm"]
    assert m["launcher"].startswith(f"srun --mpi={m['slurm']['pmi']} -n 2")
    runs = {x["name"]: x for x in m["runs"]}
    assert sorted(runs) == sorted(RANKED)
    assert runs["zero_wire"]["command"].startswith("env OMPI_MCA_btl=tcp,self ")
    for name in RANKED:
        assert runs[name]["status"] == "ok", runs[name]
        assert runs[name]["command"].startswith("srun") or " srun " in runs[name]["command"]
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["context"]["world_size"] == "2", name
        rows = [b for b in doc["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
        assert rows, name
        for b in rows:
            assert b["ranks"] == 2, (name, b["name"])
    assert f"srun --mpi={m['slurm']['pmi']}" in r.stderr


def test_srun_without_pmi_measures_what_mpirun_measures(slurm, tmp_path):
    sys_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mpi")
    import sys
    sys.path.insert(0, sys_path)
    from zbrun import benchmarks, run_json
    probe = subprocess.run([os.path.join(BIN, "zb_collectives"), "--backend=gloo", "--show-backend"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("this build has no Gloo")
    args = ["--min-bytes=1001", "--max-bytes=64K", "--step-factor=64", "--iters=2", "--warmup=1"]
    mpi, _ = run_json(2, "zb_collectives", [*args, "--backend=mpi"])
    path = tmp_path / "srun.json"
    r = subprocess.run([HELPER, "exec", slurm, "--", "salloc", "-n", "2", "srun", "-n", "2", "--mpi=none",
                        os.path.join(BIN, "zb_collectives"), *args, "--backend=gloo", "--timeout=60",
                        f"--json={path}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = json.loads(path.read_text())
    assert doc["context"]["launch"] == "slurm" and doc["context"]["world_size"] == "2"
    want, got = benchmarks(mpi), benchmarks(doc)
    assert sorted(want) == sorted(got)
    for name in want:
        for c in ("bytes", "ranks", "wrong", "wire_bytes_formula", "inter_node_bytes_formula"):
            assert got[name][c] == want[name][c], (name, c)

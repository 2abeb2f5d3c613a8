#!/usr/bin/env python3
"""The runner behind ./run_all.sh: reads tools/run_table.toml, installs and builds unless --bin is
given, prints the plan, launches every run with a progress line, records each in manifest.json
with its estimate and actual time, then draws the figures, writes summary.md and compares."""

import os
import platform
import socket
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import run_all_options  # noqa: E402
import run_cost  # noqa: E402
import run_launch  # noqa: E402
import run_manifest  # noqa: E402
import run_progress  # noqa: E402
import run_table  # noqa: E402
import run_exec  # noqa: E402
from run_exec import Runner, log, log_tail  # noqa: E402


def die2(msg):
    print(f"run_all.sh: {msg}", file=sys.stderr)
    return 2


def results_folder(o):
    """--out, or results/<UTC stamp>_<host>, created now: a path that cannot be written fails
    before anything is installed, built or run."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = o.out or os.path.join(ROOT, "results", f"{stamp}_{socket.gethostname().split('.')[0]}")
    try:
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    except OSError:
        return None
    return os.path.abspath(out) if os.access(os.path.join(out, "logs"), os.W_OK) else None


def plan(table, o, launch_info, out, bin_dir):
    """[Planned] for the selected runs, the estimate scaled by what this host's last run of the
    same kind found; and the sentence saying where the estimate came from."""
    backend, ranks, wire_note = launch_info
    column = run_launch.table_backend(backend)
    machine = table.machine[column]
    ratios, source = run_manifest.learned_ratios(os.path.dirname(out), out, platform.node(), o.size,
                                                 backend, ranks)
    reps = o.repetitions or table.repetitions[o.size]
    planned = []
    for run in table.runs:
        if o.only and run.family not in o.only:
            continue
        words = run.argv(o.size, column, out) + o.extra.get(run.label, [])
        count, total = run_cost.estimate(run.binary, words, run.launch, ranks, reps if run.repetitions else 1,
                                         machine, table.cost)
        each = run_cost.per_benchmark(run.binary, words, run.launch, ranks, reps if run.repetitions else 1,
                                      machine, table.cost)
        k = ratios.get(run.family, 1.0)
        skip = ""
        if bin_dir and not os.access(os.path.join(bin_dir, run.binary), os.X_OK):
            skip = f"{os.path.join(bin_dir, run.binary)} not built"
        elif run.launch == "wire" and wire_note:
            skip = wire_note
        elif ranks < run.min_ranks:
            skip = f"needs {run.min_ranks} ranks or more"
        planned.append(run_progress.Planned(run.label, run.family, count, (total - sum(each)) * k,
                                            [t * k for t in each], skip))
    if source:
        note = (f"cost model of tools/run_table.toml for {backend}, {ranks} ranks, scaled per family by "
                f"{os.path.basename(source)} on this host")
    else:
        note = f"cost model of tools/run_table.toml for {backend}, {ranks} ranks; no earlier {o.size} run here to learn from"
    return planned, ratios, source, note


def install_and_build():
    if subprocess.run([os.path.join(HERE, "install_deps.sh")]).returncode != 0:
        return None
    log("building (build/)")
    if subprocess.run([os.path.join(HERE, "build.sh"), os.path.join(ROOT, "build")], cwd=ROOT).returncode != 0:
        log("build failed")
        return None
    return os.path.join(ROOT, "build", "bin")


def check_env_launch(o, started):
    """Under an environment launch (run_all.sh started once per rank): what the options may not
    ask for there, as one line; "" when they fit."""
    who = f"started by {started.kind} as rank {started.rank} of {started.size}"
    if not o.bin_dir and not o.plan:
        return f"{who}: give --bin=DIR (every rank runs the binaries there; all building at once would collide)"
    if o.np and o.np != started.size:
        return f"--np={o.np} contradicts the {started.size} ranks {started.kind} started"
    if o.backend == "mpi":
        return f"--backend=mpi needs an MPI launcher, and run_all.sh was {who}: use gloo, nccl or auto"
    return ""


def rank_only(out, planned, table):
    """A rank other than 0 of an environment launch leaves the one-process runs to rank 0."""
    for p in planned:
        if table.run(p.label).launch == "single" and not p.skip:
            p.skip = "rank 0 runs it"
    return planned


def post(o, out, failures):
    """Figures, summary.md, and the comparison; returns (failures, compare_failed)."""
    py = sys.executable
    t0 = time.monotonic()
    if not o.figures:
        log("figures: skipped (--no-figures)")
    else:
        with open(os.path.join(out, "logs", "figures.log"), "w") as f:
            rc = subprocess.run([py, os.path.join(ROOT, "plots", "zbplot.py"), out], stdout=f,
                                stderr=subprocess.STDOUT).returncode
        text = run_manifest.read(os.path.join(out, "logs", "figures.log"))
        if rc == 0:
            drawn = sum(1 for line in text.splitlines() if line.startswith("zbplot: wrote"))
            log(f"figures: done in {time.monotonic() - t0:.1f} s -> figures/ ({drawn} figures)")
        else:
            log("figures: FAILED; last lines of logs/figures.log:")
            log_tail(os.path.join(out, "logs", "figures.log"))
            failures += 1
    with open(os.path.join(out, "logs", "summary.log"), "w") as f:
        rc = subprocess.run([py, os.path.join(ROOT, "plots", "summary.py"), out], stdout=f,
                            stderr=subprocess.STDOUT).returncode
    if rc == 0:
        print(flush=True)
        sys.stdout.write(run_manifest.read(os.path.join(out, "summary.md")))
        sys.stdout.flush()
    else:
        log("summary.md: FAILED; last lines of logs/summary.log:")
        log_tail(os.path.join(out, "logs", "summary.log"))
        failures += 1
    compare_failed = False
    if o.compare:
        # Only what was given: compare.py's defaults (plots/compare_rules.py) are this script's.
        rules = ([f"--gate={o.gate}"] if o.gate else []) + ([f"--threshold={o.threshold}"] if o.threshold else [])
        rules += [f"--tolerance={m}={r}" for m, r in o.tolerance.items()]
        clog = os.path.join(out, "logs", "compare.log")
        with open(clog, "w") as f:
            rc = subprocess.run([py, os.path.join(ROOT, "plots", "compare.py"), o.compare, out] + rules
                                + [f"--markdown={os.path.join(out, 'compare.md')}"], stdout=f,
                                stderr=subprocess.STDOUT).returncode
        md = os.path.join(out, "compare.md")
        if os.path.isfile(md) and rc != 2:
            print(flush=True)
            sys.stdout.write(run_manifest.read(md))
            sys.stdout.flush()
        else:
            log_tail(clog)
        last = (run_manifest.read(clog).strip().splitlines() or [""])[-1]
        if rc == 0:
            log(f"compare with {o.compare}: {last}")
        elif rc == 1:
            log(f"compare with {o.compare}: {last}; see compare.md")
            compare_failed = True
        else:
            log(f"compare with {o.compare}: could not compare (exit {rc}); see logs/compare.log")
            compare_failed = True
    return failures, compare_failed


def main(argv):
    try:
        table = run_table.load()
    except run_table.TableError as e:
        return die2(f"tools/run_table.toml: {e}")
    try:
        o = run_all_options.parse(argv, table, os.environ)
    except run_all_options.Usage as e:
        return die2(str(e))
    if o.help:
        sys.stdout.write(run_all_options.usage(table))
        return 0
    try:
        started = run_launch.env_launch(os.environ)
    except run_launch.LaunchError as e:
        return die2(str(e))
    why = check_env_launch(o, started) if started else ""
    if why:
        return die2(why)
    helper = started is not None and started.rank > 0 and not o.plan
    if helper:  # silent (rank 0 speaks), its logs in a folder of its own, removed at the end
        run_exec.Display.current = run_exec.Display(open(os.devnull, "w"), False)
        out = tempfile.mkdtemp(prefix=f"zb_rank{started.rank}_")
        os.makedirs(os.path.join(out, "logs"))
    else:
        out = results_folder(o) if not o.plan else os.path.abspath(o.out or os.path.join(ROOT, "results", "plan"))
    if out is None:
        return die2(f"--out: cannot create a writable folder {o.out or 'under results/'}")
    t_start = time.monotonic()
    gpus, cores = run_launch.gpu_count(), os.cpu_count() or 2
    slurm = run_launch.slurm_active(os.environ) and started is None  # inside a step: no srun
    if started is not None and o.backend == "auto":
        o.backend = "nccl" if gpus else "gloo"  # no MPI: the binaries' own choice from the environment
    if started is not None:
        o.np = started.size
    if o.plan:
        bin_dir = o.bin_dir or os.path.join(ROOT, "build", "bin")
        try:
            backend, how = run_launch.resolve_backend(o.backend, gpus, bin_dir)
        except run_launch.LaunchError:
            backend, how = ("nccl" if gpus else "mpi"), f"guessed from {gpus} GPU(s): nothing built to ask"
        ranks = run_launch.rank_count(o.np, backend, gpus, cores, o.size, slurm, os.environ)
        planned, _, _, note = plan(table, o, (backend, ranks, "" if ranks > 1 else "one rank"), out,
                                   o.bin_dir)
        print(f"run_all.sh --plan: backend {backend} ({how}), {ranks} ranks, {o.size} run", file=sys.stderr)
        for line in run_progress.plan_lines(planned, note, o.plan_runs):
            print(line, file=sys.stderr)
        return 0

    if o.bin_dir:
        bin_dir = o.bin_dir
        log(f"binaries from {bin_dir} (not building)")
    else:
        bin_dir = install_and_build()
        if bin_dir is None:
            return 1
    try:
        backend, how = run_launch.resolve_backend(o.backend, gpus, bin_dir)
    except run_launch.LaunchError as e:
        log(str(e))
        return 1
    ranks = run_launch.rank_count(o.np, backend, gpus, cores, o.size, slurm, os.environ)
    srun_mpi, srun_from = o.srun_mpi, o.srun_mpi_from
    if slurm and not srun_mpi:
        srun_mpi, srun_from = run_launch.probe_srun_plugin(bin_dir, ranks)
    launch = run_launch.make_launch(bin_dir, backend, ranks, cores, slurm, srun_mpi, started)

    # A reused folder: drop what this runner writes, so nothing stale passes for this run's.
    stale = [r.json for r in table.runs if r.json] + ["manifest.json", "summary.md", "compare.md"]
    for name in stale + [n for n in os.listdir(out) if n.startswith("trace_") and n.endswith(".json")]:
        try:
            os.remove(os.path.join(out, name))
        except FileNotFoundError:
            pass
    planned, ratios, source, note = plan(table, o, (backend, ranks, launch.wire_note), out, bin_dir)
    if helper:
        runner = Runner(table, o, launch, out, rank_only(out, planned, table), o.repetitions or table.repetitions[o.size])
        runner.run_all()
        shutil.rmtree(out, ignore_errors=True)
        return 1 if runner.failures else 0
    size_note = "" if o.size == "default" else f", {o.size}"
    slurm_note = f", Slurm job {os.environ.get('SLURM_JOB_ID')}, srun --mpi={srun_mpi} ({srun_from})" if slurm else ""
    if started is not None:
        slurm_note += f", started by {started.kind}: every rank runs each benchmark, rank 0 writes"
    log(f"{ranks} ranks, backend {backend} ({how}), {gpus} GPU(s), {cores} cores{size_note}{slurm_note}; "
        f"results in {out}")
    for line in run_progress.plan_lines(planned, note):
        log(line)

    reps = o.repetitions or table.repetitions[o.size]
    runner = Runner(table, o, launch, out, planned, reps)
    runner.run_all()
    actual = {label: r["seconds"] for label, r in runner.records.items() if r["status"] != "skipped"}
    for line in run_progress.summary_lines(planned, actual):
        log(line)

    fams = {}
    for p in planned:
        rec = runner.records.get(p.label)
        if rec is None or rec["status"] == "skipped":
            continue
        f = fams.setdefault(p.family, {"benchmarks": 0, "done": 0, "model_s": 0.0, "estimate_s": 0.0,
                                       "actual_s": 0.0, "complete": True})
        f["benchmarks"] += p.benchmarks
        f["done"] += rec["benchmarks_done"]
        f["estimate_s"] += round(p.estimate_s, 2)
        f["model_s"] += round(p.estimate_s / ratios.get(p.family, 1.0), 2)
        f["actual_s"] += rec["seconds"]
        f["complete"] = f["complete"] and rec["status"] == "ok"
    for f in fams.values():
        for key in ("model_s", "estimate_s", "actual_s"):
            f[key] = round(f[key], 2)
    fields = {
        "run_all": " ".join(["./run_all.sh"] + o.argv),
        "size": o.size,
        "quick": o.size == "quick",
        "backend": backend,
        "backend_chosen_by": how,
        "ranks": ranks,
        "repetitions": reps,
        "launcher": " ".join(launch.launcher) or f"{started.kind} (every rank runs run_all.sh)",
        "slurm": None if not slurm else {
            "job_id": os.environ.get("SLURM_JOB_ID", ""),
            "nodes": os.environ.get("SLURM_JOB_NUM_NODES", os.environ.get("SLURM_NNODES", "")),
            "ntasks": os.environ.get("SLURM_NTASKS", os.environ.get("SLURM_NPROCS", "")),
            "pmi": srun_mpi, "pmi_chosen_by": srun_from},
        "estimate": {"model": "tools/run_table.toml (tools/run_cost.py)",
                     "scaled_by": {k: round(v, 3) for k, v in ratios.items()},
                     "learned_from": source,
                     "ratio_limits": list(run_manifest.RATIO_LIMITS)},
        "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "benchmark_seconds": round(sum(actual.values()), 1),
    }
    failures = runner.failures
    try:
        run_manifest.write(out, run_manifest.build(out, bin_dir, fields, list(runner.records.values()), fams, gpus))
    except OSError as e:
        log(f"manifest.json: FAILED ({e})")
        failures += 1
    failures, compare_failed = post(o, out, failures)
    elapsed = round(time.monotonic() - t_start)
    if failures or compare_failed:
        what = f"{failures} failure(s)" + (", comparison failed" if compare_failed else "")
        log(f"finished in {elapsed} s: {what}; results in {out}")
        return 1
    log(f"all done in {elapsed} s: {out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # ^C reaches the runs too (one process group); say so and stop
        log("interrupted")
        sys.exit(130)

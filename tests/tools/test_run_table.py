"""tools/run_table.toml through tools/run_table.py: it validates, every run has arguments for every
run size and backend, --quick is the committed baseline's configuration, a malformed table is
refused in one line, the figures are the ones plots/ draws, and the cost model sizes the default
run within its budgets and counts the benchmarks the baseline's binaries registered."""

import copy
import glob
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import run_cost  # noqa: E402
import run_table  # noqa: E402

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

BASELINE = os.path.join(ROOT, "results", "baselines", "quick_cpu_2ranks")
TABLE = run_table.load()


def doc():
    with open(run_table.PATH, "rb") as f:
        return tomllib.load(f)


def test_the_table_validates_from_the_command_line():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "run_table.py"), "check"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "run_table.py"), "families"],
                       capture_output=True, text=True)
    assert r.stdout.split() == TABLE.families()


def test_run_alls_help_fits_a_terminal_and_sets_every_results_file_apart():
    import run_all_options
    lines = run_all_options.usage(TABLE).splitlines()
    assert [line for line in lines if len(line) > 100] == []  # a terminal's width, generated lists included
    for name in [r.json for r in TABLE.runs if r.json]:
        at = [i for i, line in enumerate(lines) if line.startswith(f"  {name}")]
        assert len(at) == 1, name
        rest = lines[at[0]][len(name) + 2:]
        # the description starts past the name, after a gap, or on the next line
        assert rest.startswith(" ") or (rest == "" and lines[at[0] + 1].startswith(" " * 21)), lines[at[0]]


def test_every_run_has_arguments_for_every_size_and_backend():
    assert TABLE.sizes == ("quick", "default", "full") and TABLE.backends == ("mpi", "nccl")
    for run in TABLE.runs:
        for size in TABLE.sizes:
            for backend in TABLE.backends:
                words = run.argv(size, backend, "/results")
                assert words and all(w.startswith("--") for w in words), (run.label, size, backend)
                assert not any("{" in w for w in words), (run.label, size, backend)


def test_every_family_runs_in_every_size():
    assert TABLE.families() == ["collectives", "zero", "predict", "sweep", "optimizer", "pipeline",
                                "offload", "plan"]
    for size in TABLE.sizes:
        for backend in TABLE.backends:
            counted = {}
            for run in TABLE.runs:
                n, _ = run_cost.estimate(run.binary, run.argv(size, backend, "/r"), run.launch, 2, 1,
                                         TABLE.machine[backend], TABLE.cost)
                counted[run.family] = counted.get(run.family, 0) + n
            assert all(counted[f] > 0 for f in TABLE.families()), (size, backend, counted)


def effective(words):
    """Flags as a binary reads them (the last one wins), paths reduced to their file names and the
    old binary suffixes of parameter counts (256K) written out, --strategies as --stages."""
    out = {}
    for w in words:
        name, _, value = w[2:].partition("=")
        if name in ("json", "backend", "benchmark_repetitions"):
            continue
        if name in ("min-params", "max-params", "step-params") and value[-1:] in "KMG":
            value = str(int(float(value[:-1]) * 1024 ** " KMG".index(value[-1])))
        if "/" in value:
            value = os.path.basename(value)
        out["stages" if name == "strategies" else name] = value
    return out


def test_the_predictors_sweep_spreads_its_collectives_over_the_models_weights():
    # On CPUs the gathers and reductions are timed on one buffer (0) and spread over the model's
    # BF16 weights per rank, 2 bytes a parameter, and the gathers also over four times that, past
    # their reuse distance: zb_predict prices a gather from the spread at its buffer's reuse
    # distance, a reduction from one buffer, and in the round with communication alone an
    # in-place one from the spread.
    for size in TABLE.sizes:
        model = dict(w[2:].split("=", 1) for w in TABLE.run("zero").argv(size, "mpi", "/r") if "=" in w)
        sweep = dict(w[2:].split("=", 1) for w in TABLE.run("predict_sweep").argv(size, "mpi", "/r") if "=" in w)
        assert sweep["footprint-ops"] == "all_gather,all_reduce,reduce_scatter", size
        one, weights = (0 if f == "0" else int(f[:-1]) * 1024 ** " KMG".index(f[-1])
                        for f in sweep["footprint"].split(","))
        assert one == 0, size
        assert weights == pytest.approx(2 * float(model["params"]), rel=0.05), size
        f = sweep["gather-footprint"]
        assert int(f[:-1]) * 1024 ** " KMG".index(f[-1]) == 4 * weights, size


@pytest.mark.skipif(not os.path.isfile(os.path.join(BASELINE, "manifest.json")), reason="no baseline")
def test_quick_is_the_committed_baselines_configuration():
    with open(os.path.join(BASELINE, "manifest.json")) as f:
        base = {r["name"]: r for r in json.load(f)["runs"]}
    assert sorted(base) == sorted(TABLE.labels())
    for run in TABLE.runs:
        cmd = base[run.label]["command"].split()
        binary = next(i for i, w in enumerate(cmd) if os.path.basename(w) == run.binary)
        theirs = effective(cmd[binary + 1:])
        ours = effective(run.argv("quick", "mpi", "/r") + [w for _, t in run.optional for w in t.split()])
        assert ours == theirs, run.label
        assert ("--bind-to" in cmd) == (run.launch != "single"), run.label
        assert ("--mca" in cmd) == (run.launch == "wire"), run.label


@pytest.mark.skipif(not os.path.isfile(os.path.join(BASELINE, "manifest.json")), reason="no baseline")
def test_the_cost_model_counts_the_benchmarks_the_baseline_ran():
    for run in TABLE.runs:
        if not run.json or run.json == "plan.json":
            continue
        with open(os.path.join(BASELINE, run.json)) as f:
            rows = json.load(f)["benchmarks"]
        names = {b["run_name"] for b in rows if b.get("run_type", "iteration") == "iteration"}
        n, _ = run_cost.estimate(run.binary, run.argv("quick", "mpi", "/r"), run.launch, 2, 3,
                                 TABLE.machine["mpi"], TABLE.cost)
        assert n == len(names), run.label


def total(size, backend, ranks):
    reps = TABLE.repetitions[size]
    return sum(run_cost.estimate(r.binary, r.argv(size, backend, "/r"), r.launch, ranks,
                                 reps if r.repetitions else 1, TABLE.machine[backend], TABLE.cost)[1]
               for r in TABLE.runs)


def test_the_default_run_is_sized_by_the_cost_model():
    # Within the budgets with room for the model's error: 5 minutes on 2 CPU ranks, 10 on 8 GPUs.
    assert total("default", "mpi", 2) <= 0.8 * 300
    assert total("default", "nccl", 8) <= 0.7 * 600
    # The full run is the paper-sized one, the quick run the smallest.
    for backend, ranks in (("mpi", 2), ("nccl", 8)):
        assert total("quick", backend, ranks) < total("default", backend, ranks) < total("full", backend, ranks)


def test_a_slower_host_lengthens_each_run_and_a_trace_adds_steps():
    # A host ten times slower at set-up and checks (host_Bps) makes every run longer; --trace,
    # an untimed step and the traced one after the timed steps, adds the same either way, since
    # a trace repeats neither.
    for label in ("zero", "pipeline"):
        r = TABLE.run(label)
        argv = [a for a in r.argv("default", "mpi", "/r") if not a.startswith("--trace")]

        def est(host_scale, extra):
            machine = dict(TABLE.machine["mpi"], host_Bps=TABLE.machine["mpi"]["host_Bps"] * host_scale)
            return run_cost.estimate(r.binary, argv + extra, r.launch, 2, 1, machine, TABLE.cost)[1]
        trace = ["--trace=/r/t.json"]
        assert est(0.1, []) > est(1, []), label
        added = [est(scale, trace) - est(scale, []) for scale in (1, 0.1)]
        assert added[0] > 0 and added[0] == pytest.approx(added[1], rel=1e-9), (label, added)


def test_the_model_matches_the_full_runs_times_measured_here():
    # Today's default (now --full) on this 2-core machine, per run, as issue 22 measured it.
    measured = {"collectives": 99, "zero_wire": 175, "zero": 312, "zero_sweep": 1888, "optimizer": 536}
    for label, seconds in measured.items():
        r = TABLE.run(label)
        _, est = run_cost.estimate(r.binary, r.argv("full", "mpi", "/r"), r.launch, 2, TABLE.repetitions["full"],
                                   TABLE.machine["mpi"], TABLE.cost)
        assert 0.67 < est / seconds < 1.5, (label, est, seconds)


def test_the_model_matches_a_gpu_checks_runs():
    # tools/gpu_check.sh on one H200 (2026-12-04), whole runs at one rank: nearly all host work
    # (set-up, references, checks), which host_Bps and the quantized check's factor price.
    measured = {
        ("zb_zero", "--params=64e6 --layers=16 --iters=5 --warmup=2"): 20,
        ("zb_zero", "--params=16e6 --layers=16 --stages=z2,z3,zpp --quantize-weights=int8,fp8 "
                    "--quantize-grads=int4 --iters=3 --warmup=1"): 14,
        ("zb_optimizer", "--min-params=16777216 --max-params=268435456 --step-factor=4 "
                         "--step-params=67108864 --iters=10 --warmup=3"): 59,
    }
    for (binary, args), seconds in measured.items():
        _, est = run_cost.estimate(binary, args.split(), "single", 1, 1, TABLE.machine["nccl"], TABLE.cost)
        assert 0.67 < est / seconds < 1.5, (binary, args, est, seconds)


def figure_stems():
    """The figures plots/fig_*.py save, by the stem they pass to save()."""
    stems = set()
    for path in glob.glob(os.path.join(ROOT, "plots", "fig_*.py")):  # plots/ab/ draws ab.sh's own
        with open(path) as f:
            stems |= set(re.findall(r"save\(fig, outdir, \"([a-z_]+)\"", f.read()))
    return stems


def test_the_tables_figures_are_the_ones_plots_draws():
    named = {f for f in TABLE.figures() if "*" not in f and not f.startswith("timeline")}
    assert named == figure_stems()
    for run in TABLE.runs:
        for trace in run.traces:
            stem = "timeline" + trace[len("trace"):-len(".json")]
            assert stem in run.figures, (run.label, stem)


def broken(path, value):
    """The table's document with one key set (value None: removed)."""
    d = copy.deepcopy(doc())
    *parents, last = path
    node = d
    for p in parents:
        node = node[p]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return d


@pytest.mark.parametrize("path,value,words", [
    (("run", 0, "args", "default"), None, "args needs exactly the sizes"),
    (("run", 1, "args", "quick", "nccl"), None, "args.quick needs exactly the backends"),
    (("run", 2, "args", "full", "mpi"), "{modle} --iters=3", "unknown placeholder {modle}"),
    (("run", 0, "launch"), "all", "launch must be one of"),
    (("run", 11, "label"), "collectives", "labels used twice"),
    (("run", 0, "json"), "busbw.json", "json must be 'collectives.json' or empty"),
    (("run", 4, "needs"), ["nothing.json"], "needs nothing.json"),
    (("run", 0, "args", "quick", "mpi"), "min-bytes=1K", "every word is a --flag"),
    (("run", 0, "colour"), "red", "unknown keys"),
    (("run", 0, "min_ranks"), 0, "min_ranks must be a whole number of 1 or more"),
    (("repetitions", "default"), 0, "repetitions needs a whole number"),
    (("machine", "mpi", "link_Bps"), -1, "machine.mpi.link_Bps must be a number > 0"),
    (("run", 0, "binary"), "zb_nothing", "no cost model for binary zb_nothing"),
    (("sizes",), ["quick", "full"], "sizes must be"),
])
def test_a_malformed_table_is_refused_in_one_line(path, value, words):
    with pytest.raises(run_table.TableError) as e:
        run_table.parse(broken(path, value))
    assert words in str(e.value) and "\n" not in str(e.value)

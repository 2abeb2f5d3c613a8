"""What the predictor's accuracy tables share (tools/predict_accuracy.py): the default run's
configuration as the run table gives it, the launch of a binary (mpirun, tools/cluster.sh or one
process), a results file's rows per stage, and the summary's tolerances."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "plots"), os.path.join(ROOT, "tools")]
import run_launch  # noqa: E402  (how run_all.sh binds CPU ranks)
import run_table  # noqa: E402  (the runs' own arguments: one fact in one place)
import tolerances  # noqa: E402  (the summary's own bars)

STAGES = ["dp", "z1", "z2", "z3", "hsdp", "hpz"]


def table_argv(label, size="default", drop=()):
    """Run `label`'s arguments on CPUs as tools/run_table.toml gives them for `size`, with the
    size's repetitions where the run takes them (as run_all.sh adds them), less the flags
    named in `drop` (the results files run_all.sh names, a trace)."""
    table = run_table.load()
    run = table.run(label)
    reps = table.repetitions[size] if run.repetitions else 1
    words = run.argv(size, "mpi", "") + ([f"--benchmark_repetitions={reps}"] if reps > 1 else [])
    return [w for w in words if not w.startswith(tuple(f"{d}=" for d in drop))]


# The default run's configuration on CPUs, which the one-node table holds the predictor to:
# its sweep, zb_zero's step and zb_predict's model of it.
SWEEP = table_argv("predict_sweep")
ZERO = table_argv("zero", drop=("--trace",))
PREDICTED = table_argv("predict", drop=("--sweep",))
# The kernels' rates as the default run takes them (zb_predict --kernels prices each backward's
# synthetic gradient and the optimizer's update with them).
KERNEL_RATES = table_argv("quantize_rates")
# The simulated cluster the link, more-ranks and quantized tables run on (predict_accuracy_cluster.py).
CLUSTER = os.path.join(ROOT, "tools", "cluster.sh")
CLUSTER_NAME = "zbacc"
# Open MPI's ring algorithms (as docs/cluster.md runs them): the predictor prices rings, and
# at 4 ranks Open MPI would otherwise pick recursive forms that keep part of the data in a node.
RINGS = ["--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "coll_tuned_allreduce_algorithm", "4",
         "--mca", "coll_tuned_reduce_scatter_algorithm", "3", "--mca", "coll_tuned_allgather_algorithm", "4"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")


def die(msg):
    print(f"predict_accuracy.py: {msg}", file=sys.stderr)
    sys.exit(2)


def run(a, ranks, program, args, cluster=False):
    """`program` of a.bin with `args`: under tools/cluster.sh, under mpirun at `ranks` (bound as
    --bind says: auto as run_all.sh binds them, none never, core each to a core), or as one
    process (`ranks` 0)."""
    cmd = [os.path.join(a.bin, program), *args]
    if cluster:
        cmd = [CLUSTER, "run", f"--name={CLUSTER_NAME}", *RINGS, "--", *cmd]
    elif ranks:
        cores = os.cpu_count() or 1
        bind = {"auto": run_launch.cpu_binding(ranks, cores), "none": "none",
                "core": "core" if ranks <= cores else run_launch.cpu_binding(ranks, cores)}[a.bind]
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", bind, *cmd]
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        print(f"predict_accuracy.py: {' '.join(cmd)} failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}",
              file=sys.stderr)
        sys.exit(1)


def rows(path):
    """stage -> its benchmark (iteration rows; the median row where there are aggregates)."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for b in doc["benchmarks"]:
        if b.get("run_type", "iteration") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        for part in b["name"].split("/"):
            if part.startswith("stage:"):
                out[part[6:]] = b
    return out


def within(comm_err, exposed_err, exposed_err_s, exposed_measured_s):
    comm_ok = abs(comm_err) <= tolerances.PREDICTION_COMM_REL
    small = exposed_measured_s < tolerances.PREDICTION_EXPOSED_SMALL_S
    exposed_ok = abs(exposed_err) <= tolerances.PREDICTION_EXPOSED_REL or (
        small and abs(exposed_err_s) <= tolerances.PREDICTION_EXPOSED_ABS_S)
    return comm_ok, exposed_ok


def without_rank_spread(rates, path):
    """A copy of zb_optimizer's results with every rank_spread dropped: the ranks priced alike."""
    with open(rates) as f:
        doc = json.load(f)
    for b in doc["benchmarks"]:
        b.pop("rank_spread", None)
    with open(path, "w") as f:
        json.dump(doc, f)

"""run_all.sh's options and usage text, both built from tools/run_table.toml: the run sizes, the
families --only takes and the labels --extra-args takes are the table's."""

import os
import re
import sys
import textwrap
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plots"))
import compare_rules  # noqa: E402


class Usage(Exception):
    """A bad option: the one line run_all.sh prints before exiting 2."""


@dataclass
class Options:
    size: str = "default"
    np: int = 0
    srun_mpi: str = ""
    srun_mpi_from: str = ""
    backend: str = "auto"
    out: str = ""
    repetitions: int = 0
    only: list = field(default_factory=list)
    compare: str = ""
    gate: str = ""
    threshold: str = ""
    tolerance: dict = field(default_factory=dict)
    bin_dir: str = ""
    extra: dict = field(default_factory=dict)
    figures: bool = True
    plan: bool = False
    plan_runs: int = 1
    help: bool = False
    argv: list = field(default_factory=list)


def usage(table):
    def indented(text, first=" " * 21):  # filled under the descriptions' column
        return textwrap.fill(text, 95, initial_indent=first, subsequent_indent=" " * 21)

    def entry(name, about):  # a name too long for the column gets a line of its own
        return indented(about, f"  {name:<19}") if len(name) < 19 else f"  {name}\n" + indented(about)

    files = "\n".join(entry(r.json, r.about) for r in table.runs if r.json)
    only = entry("--only=A,B", f"run only these families: {', '.join(table.families())}")
    tol = ", ".join(f"{k}={v}" for k, v in compare_rules.DEFAULT_TOLERANCES.items())
    defaults = indented(f"plots/compare_rules.py: gate {compare_rules.DEFAULT_GATE}, threshold "
                        f"{compare_rules.DEFAULT_THRESHOLD}, {tol})")
    labels = indented(f"({', '.join(table.labels())}), for example")
    reps = table.repetitions
    return f"""usage: ./run_all.sh [options]

Installs what is missing (tools/install_deps.sh) and builds zerobench (build/), unless --bin is
given; then runs every benchmark on the hardware present (NCCL with one rank per GPU when GPUs
are visible and the build has CUDA, else MPI on the CPUs), draws the figures and prints
summary.md. Before the first benchmark it prints the plan (each family, its benchmarks and
their estimated time), while it runs one progress line, and at the end the estimate beside the
actual time per family. Results go to results/<UTC stamp>_<host>/:
{files}
  trace_*.json       a traced step of every rank: trace_<stage>.json per stage (zero.json's
                     run) and trace_pipeline_z2.json
  manifest.json      revision, command lines, versions, hardware, algorithm settings, and per
                     family the estimated and the actual time
  logs/ figures/ summary.md (and compare.md with --compare)

Run sizes (arguments of each in tools/run_table.toml):
  (none)             the default: every family, sized by the table's cost model to benchmark
                     within 5 minutes on a 2-core CPU machine and 10 minutes on 8 GPUs;
                     {reps['default']} repetitions
  --quick            CI-sized: small models and sizes, few iterations (about a minute of
                     benchmarks on 2 cores; the committed baseline's configuration); with the
                     mpi backend it launches 2 ranks unless --np is given; {reps['quick']} repetitions
  --full             sized for a paper: large models, long sweeps, {reps['full']} repetitions (over an
                     hour on 2 cores)

options:
  --np=N             ranks to launch (default: one per GPU, or one per core, 2..8, on CPUs;
                     under Slurm the allocation's tasks)
  --srun-mpi=PLUGIN  under Slurm: srun's --mpi plugin (default: $ZB_SRUN_MPI, else the first
                     of pmix, pmix_v*, pmi2 in `srun --mpi=list` with which a two-rank MPI
                     job starts, else none)
  --backend=B        auto | mpi | nccl | gloo (default auto: mpi without a GPU; with one, what
                     the binaries' --show-backend says, nccl when the build has CUDA; started
                     from the environment, gloo without a GPU); gloo is sized as mpi
  --out=DIR          results folder (default results/<UTC stamp>_<host>)
  --repetitions=N    repeat every Google Benchmark benchmark N times (default per run size,
                     above): figures and summary.md show the median and the spread
{only}
  --compare=DIR      compare this run with a baseline results folder (for example
                     results/baselines/<name>) through plots/compare.py; writes compare.md
                     into the results folder, prints it, and exits 1 on a regression
  --gate=G           exact: fail only when an exact metric differs (wrong elements, volumes,
                     memory, counts); all: also fail when a timing is worse than --threshold
  --threshold=X      relative change of a timing counted as a regression
  --tolerance=M=REL  compare the measured counter M as exact within a relative REL;
                     repeatable, REL 0 makes M bit-exact
                     (defaults of these three, shared with plots/compare.py, are in
{defaults}
  --bin=DIR          run the binaries in DIR (for example another revision's build/bin) and
                     neither install nor build; tools/ab.sh runs both sides this way
  --extra-args=L=ARGS  append ARGS (split on spaces) to the command of the run labelled L only
{labels}
                     --extra-args=collectives=--fault-slow=all_reduce:0.2; repeatable
  --no-figures       draw no figures (tools/ab.sh: its many small runs need only the JSON)
  --plan             print the plan and its estimate, then exit: nothing is installed, built
                     or run (the backend is guessed from the GPUs when it cannot be asked)
  --plan-runs=K      with --plan: the suite run K times (tools/ab.sh: pairs x sides)
  -h, --help         this text

Progress goes to stderr: the plan, a line as each run ends, and the progress line (rewritten
in place on a terminal, a plain line at most every 10 s otherwise). The estimate comes from the
cost model in tools/run_table.toml, scaled per family by actual/estimate of the newest earlier
run of the same size, backend and ranks on this host (under the --out folder's parent). A
benchmark that fails is reported with the tail of its log and the others still run; the exit
code is 1 if any benchmark, the figures or the comparison failed, 2 for a bad option.
Under Slurm (SLURM_JOB_ID set and srun present) ranks are launched with srun --mpi=PLUGIN,
as many as the allocation has tasks (SLURM_NTASKS, else nodes x GPUs per node); the plugin
and how it was chosen go to manifest.json. Elsewhere mpirun. Started itself once per rank
(torchrun, a Kubernetes job, srun --mpi=none: RANK and WORLD_SIZE, or SLURM_PROCID and
SLURM_STEP_ID, set), every rank runs each benchmark directly with --bin (required), rank 0
alone runs the one-process runs and writes the results folder.
"""


NUMBER = re.compile(r"^([0-9]+([.][0-9]*)?|[.][0-9]+)$")


def parse(argv, table, env):
    """Options from run_all.sh's arguments; Usage(one line) on a bad one."""
    o = Options(argv=list(argv))
    o.srun_mpi = env.get("ZB_SRUN_MPI", "")
    o.srun_mpi_from = "ZB_SRUN_MPI" if o.srun_mpi else ""
    sizes = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        if arg in ("-h", "--help"):
            o.help = True
        elif arg in ("--quick", "--full"):
            sizes.append(arg[2:])
        elif arg == "--no-figures":
            o.figures = False
        elif arg == "--plan":
            o.plan = True
        elif not eq:
            raise Usage(f"unknown option '{arg}' (see --help)")
        elif name == "--np":
            o.np = positive(value, "--np")
        elif name == "--plan-runs":
            o.plan_runs = positive(value, "--plan-runs")
        elif name == "--repetitions":
            o.repetitions = positive(value, "--repetitions")
        elif name == "--backend":
            if value not in ("auto", "mpi", "nccl", "gloo"):
                raise Usage(f"--backend must be auto, mpi, nccl or gloo, not '{value}'")
            o.backend = value
        elif name == "--srun-mpi":
            if value and not re.match(r"^[a-z0-9_]+$", value):
                raise Usage(f"--srun-mpi must be a plugin name such as pmix, not '{value}'")
            o.srun_mpi, o.srun_mpi_from = value, "--srun-mpi"
        elif name == "--out":
            if not value:
                raise Usage("--out needs a folder")
            o.out = value
        elif name == "--only":
            known = table.families()
            names = [x for x in value.split(",") if x]
            if not names:
                raise Usage(f"--only needs names (known: {' '.join(known)})")
            for x in names:
                if x not in known:
                    raise Usage(f"--only: unknown benchmark '{x}' (known: {' '.join(known)})")
            o.only = names
        elif name == "--compare":
            if not os.path.isdir(value):
                raise Usage(f"--compare: '{value}' is not a results folder")
            o.compare = os.path.abspath(value)
        elif name == "--gate":
            if value not in ("exact", "all"):
                raise Usage("--gate needs exact or all" if not value else f"--gate must be exact or all, not '{value}'")
            o.gate = value
        elif name == "--threshold":
            if not NUMBER.match(value):
                raise Usage("--threshold needs a number" if not value else
                            f"--threshold must be a number >= 0, not '{value}'")
            o.threshold = value
        elif name == "--tolerance":
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", value)
            if not m or not NUMBER.match(m.group(2)):
                raise Usage(f"--tolerance must be METRIC=REL with REL a number >= 0, not '{value}'")
            o.tolerance[m.group(1)] = m.group(2)
        elif name == "--bin":
            if not value:
                raise Usage("--bin needs a folder")
            if not os.path.isdir(value):
                raise Usage(f"--bin: '{value}' is not a folder")
            o.bin_dir = os.path.abspath(value)
        elif name == "--extra-args":
            label, eq2, words = value.partition("=")
            if not eq2 or label not in table.labels():
                raise Usage(f"--extra-args must be LABEL=ARGS with LABEL one of {' '.join(table.labels())}, "
                            f"not '{value}'")
            o.extra.setdefault(label, []).extend(words.split())
        else:
            raise Usage(f"unknown option '{arg}' (see --help)")
    if len(set(sizes)) > 1:
        raise Usage("--quick and --full are two run sizes: give one")
    if sizes:
        o.size = sizes[0]
    if o.plan_runs > 1 and not o.plan:
        raise Usage("--plan-runs goes with --plan")
    return o


def positive(value, name):
    if not re.match(r"^[1-9][0-9]*$", value):
        raise Usage(f"{name} must be a positive integer, not '{value}'")
    return int(value)

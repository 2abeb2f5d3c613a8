"""How run_all.py launches: the hardware it sees, the backend the binaries resolve, the rank count,
the launcher (srun under Slurm with a PMI plugin that starts a two-rank job, else mpirun; or none
when torchrun, a Kubernetes job or a Slurm step without PMI started every rank of run_all.sh
itself), the socket transport's settings for measured volumes, and one run's command line."""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

# Open MPI's tcp BTL with its ring algorithms, so measured bytes compare with the ring ideal.
RING_MCA = [("btl", "tcp,self"), ("pml", "ob1"), ("coll_tuned_use_dynamic_rules", "1"),
            ("coll_tuned_allreduce_algorithm", "4"), ("coll_tuned_reduce_scatter_algorithm", "3"),
            ("coll_tuned_allgather_algorithm", "4")]
NCCL_SOCKETS = [("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"), ("NCCL_NET", "Socket")]


class LaunchError(Exception):
    """The suite cannot start here; one line."""


# The variables of an MPI launcher, and those an environment launch sets, as the binaries read
# them (harness/driver/launch.cc decides; this only tells run_all.sh which way it was started).
MPI_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
ENV_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                   "SLURM_PROCID", "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID", "ZB_RENDEZVOUS_ID")


@dataclass
class EnvLaunch:
    """run_all.sh itself started once per rank by torchrun, a Kubernetes job or srun without PMI."""
    kind: str   # torchrun or slurm
    rank: int
    size: int


def env_launch(env):
    """The environment launch that started this process, or None (mpirun, srun with PMI, or
    nothing: run_all.sh launches the ranks itself). LaunchError for a rank or size that is not a
    number (the binaries would refuse it with the same variable named)."""
    if any(env.get(n) for n in MPI_RANK_VARS):
        return None
    if env.get("RANK") or env.get("WORLD_SIZE"):
        kind, rank_var, size_var = "torchrun", "RANK", "WORLD_SIZE"
    elif env.get("SLURM_PROCID") and env.get("SLURM_STEP_ID"):
        kind, rank_var, size_var = "slurm", "SLURM_PROCID", "SLURM_NTASKS"
    else:
        return None
    try:
        rank, size = int(env.get(rank_var, "")), int(env.get(size_var, ""))
    except ValueError:
        raise LaunchError(f"started by {kind} with {rank_var}={env.get(rank_var, '')!r} and "
                          f"{size_var}={env.get(size_var, '')!r}: both must be whole numbers") from None
    if not 0 <= rank < size:
        raise LaunchError(f"started by {kind} with {rank_var}={rank} and {size_var}={size}: "
                          f"{rank_var} must be below {size_var}")
    return EnvLaunch(kind=kind, rank=rank, size=size)


def table_backend(backend):
    """The run table's column for a backend: gloo runs on CPUs, sized as the mpi backend."""
    return "mpi" if backend == "gloo" else backend


def gpu_count():
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))


def resolve_backend(asked, gpus, bin_dir):
    """auto: mpi without a GPU; with one, what the binaries resolve --backend=auto to (nccl when
    the build has CUDA), asked through --show-backend. (backend, how it was chosen)."""
    if asked != "auto":
        return asked, "--backend"
    if gpus == 0:
        return "mpi", "auto: no GPU visible"
    probe = next((os.path.join(bin_dir, b) for b in ("zb_collectives", "zb_zero")
                  if os.access(os.path.join(bin_dir, b), os.X_OK)), None)
    if probe is None:
        raise LaunchError(f"--backend=auto: no zb_collectives or zb_zero in {bin_dir} to ask; give --backend")
    try:
        r = subprocess.run([probe, "--show-backend"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        raise LaunchError(f"--backend=auto: {probe} --show-backend failed ({e}); give --backend") from None
    word = r.stdout.strip()
    if r.returncode != 0 or word not in ("mpi", "nccl"):
        raise LaunchError(f"--backend=auto: {probe} --show-backend said {word or r.stderr.strip()[:80]!r} "
                          f"(exit {r.returncode}); give --backend")
    return word, f"auto: {os.path.basename(probe)} --show-backend"


def slurm_active(env):
    return bool(env.get("SLURM_JOB_ID")) and shutil.which("srun") is not None


def rank_count(np, backend, gpus, cores, size, slurm, env):
    """--np, else the Slurm allocation's tasks (or nodes x GPUs), else one per GPU, else 2 for
    --quick (the baseline's rank count: exact metrics depend on N), else one per core, 2..8."""
    if np:
        return np
    if slurm:
        n = env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS")
        if n:
            return int(n)
        if backend == "nccl":
            return int(env.get("SLURM_JOB_NUM_NODES") or 1) * max(gpus, 1)
    if backend == "nccl":
        return max(gpus, 1)
    if size == "quick":
        return 2
    return min(max(cores, 2), 8)


def srun_plugins(listing):
    """Candidate PMI plugins from `srun --mpi=list`: pmix, then pmix_v*, then pmi2."""
    names = []
    for line in listing.splitlines():
        m = re.match(r"^[ \t]+([a-z0-9_]+)$", line)
        if m:
            names.append(m.group(1))
        if "pmix plugin versions available:" in line:
            names += [x.strip() for x in line.split("available:", 1)[1].replace(",", " ").split()]
    return ([p for p in names if p == "pmix"] + [p for p in names if p.startswith("pmix_v")]
            + [p for p in names if p == "pmi2"])


def probe_srun_plugin(bin_dir, np):
    """Slurm's default MpiDefault=none cannot start Debian's Open MPI: the first listed plugin
    with which a two-rank job really starts. (plugin, how it was chosen)."""
    try:
        listing = subprocess.run(["srun", "--mpi=list"], capture_output=True, text=True, timeout=60)
        text = listing.stdout + listing.stderr
    except (OSError, subprocess.SubprocessError):
        text = ""
    probe = os.path.join(bin_dir, "zb_collectives")
    for p in srun_plugins(text):
        if not os.access(probe, os.X_OK):
            break
        cmd = ["srun", f"--mpi={p}", "-n", str(min(np, 2)), probe, "--backend=mpi", "--ops=all_reduce",
               "--min-bytes=1K", "--max-bytes=1K", "--iters=1", "--warmup=0", "--no-bare"]
        try:
            ok = subprocess.run(cmd, capture_output=True, timeout=120).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        if ok:
            return p, "first of srun --mpi=list that started a two-rank job"
    return "none", "none of srun --mpi=list started a two-rank job"


@dataclass
class Launch:
    """Everything a run's command line needs, decided once per suite."""
    bin_dir: str
    backend: str
    ranks: int
    launcher: list
    slurm: bool = False
    wire_env: list = field(default_factory=list)   # NAME=VALUE set for socket runs
    wire_args: list = field(default_factory=list)  # launcher options for socket runs
    wire_note: str = ""                            # why socket runs are skipped, when they are
    env: dict = field(default_factory=dict)        # set for every run
    started: EnvLaunch = None                      # run_all.sh itself started once per rank

    def environment(self, run, base):
        """The environment a run gets. Under an environment launch every rank runs each ranked
        run directly, the run's label telling consecutive rendezvous apart; a single run is rank
        0's alone, without the launcher's variables (so it does not wait for the others)."""
        env = dict(base, **self.env)
        if self.started is None:
            return env
        if run.launch == "single":
            return {k: v for k, v in env.items() if k not in ENV_LAUNCH_VARS}
        env["ZB_RENDEZVOUS_ID"] = run.label
        return env

    def settings(self, launch):
        """Algorithm settings a run was given on its command line (for the manifest)."""
        if launch != "wire":
            return ""
        return " ".join(self.wire_env) or " ".join(self.wire_args)

    def command(self, run, words, json_path, repetitions, extra):
        """The whole command line of a run: launcher, binary, common flags, its words, extras."""
        binary = os.path.join(self.bin_dir, run.binary)
        own = [f"--json={json_path}"] if run.json else []
        if run.launch == "single":
            return [binary] + own + words + extra
        reps = [f"--benchmark_repetitions={repetitions}"] if run.repetitions and repetitions > 1 else []
        prefix, opts = [], []
        if run.launch == "wire":
            prefix = ["env"] + self.wire_env if self.wire_env else []
            opts = self.wire_args
        return (prefix + self.launcher + opts + [binary, f"--backend={self.backend}"] + own + reps + words
                + extra)


def cpu_binding(ranks, cores):
    """mpirun's --bind-to for `ranks` CPU ranks on one host of `cores` (run_all.sh's mpirun
    launch is one host's; under Slurm srun places the ranks). Where the ranks fit the cores,
    none: a rank's compute thread and its communication thread each want a core, and the
    scheduler places them. Where the ranks outnumber the cores, each rank and its threads are
    kept to one core, the ranks dealt round the cores: zb_predict's replay comes closer to
    their exposed communication so (docs/measurements.md, "Ranks that outnumber the cores,
    bound")."""
    return "core:overload-allowed" if ranks > cores else "none"


def make_launch(bin_dir, backend, ranks, cores, slurm, srun_mpi, started=None):
    """The launcher and socket settings; CPU ranks bound as cpu_binding says. `started`: an
    environment launch, under which every rank runs each benchmark itself, with no launcher."""
    env = {}
    if started is not None:
        launch = Launch(bin_dir=bin_dir, backend=backend, ranks=ranks, launcher=[], started=started)
        if ranks < 2:
            launch.wire_note = "one rank moves nothing over a wire"
        elif backend == "nccl":
            launch.wire_env = [f"{k}={v}" for k, v in NCCL_SOCKETS]
        return launch  # gloo's TCP pairs are the socket transport already
    if slurm:
        launcher = ["srun", f"--mpi={srun_mpi}", "-n", str(ranks)]
    else:
        launcher = ["mpirun", "-np", str(ranks)]
        if ranks > cores:
            launcher.append("--oversubscribe")
        if backend == "mpi":
            launcher += ["--bind-to", cpu_binding(ranks, cores)]
        if os.geteuid() == 0:
            env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    launch = Launch(bin_dir=bin_dir, backend=backend, ranks=ranks, launcher=launcher, slurm=slurm, env=env)
    if ranks < 2:
        launch.wire_note = "one rank moves nothing over a wire"
    elif backend == "nccl":
        launch.wire_env = [f"{k}={v}" for k, v in NCCL_SOCKETS]
        if not slurm:  # mpirun passes its environment only to local ranks; -x exports it to every node
            launch.wire_args = [w for k, _ in NCCL_SOCKETS for w in ("-x", k)]
    elif slurm:
        launch.wire_env = [f"OMPI_MCA_{k}={v}" for k, v in RING_MCA]
    else:
        launch.wire_args = [w for k, v in RING_MCA for w in ("--mca", k, v)]
    return launch

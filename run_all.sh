#!/usr/bin/env bash
# run_all.sh: builds if needed, detects the hardware, runs the zerobench suite, and writes
# results/<UTC stamp>_<host>/ with one JSON per benchmark, manifest.json and the figures.
set -uo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"

usage() {
  cat <<'USAGE'
usage: ./run_all.sh [options]

Builds zerobench if needed, runs every benchmark on the hardware present (NCCL with one
rank per GPU when GPUs are visible, else MPI on the CPUs) and writes
results/<UTC stamp>_<host>/: <benchmark>.json (Google Benchmark JSON), manifest.json,
logs/ and figures/.

options:
  --quick            CI-sized run: small sizes and few iterations (well under a minute here)
  --np=N             ranks to launch (default: one per GPU, or one per core, 2..8, on CPUs)
  --backend=B        auto | mpi | nccl (default auto: nccl when a GPU is visible)
  --out=DIR          results folder (default results/<UTC stamp>_<host>)
  --only=A,B         run only these benchmarks: collectives
  -h, --help         this text

Under Slurm (SLURM_JOB_ID set and srun present) ranks are launched with srun, else mpirun.
USAGE
}

quick=0 np="" backend=auto out="" only=""
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    --np=*) np=${arg#*=} ;;
    --backend=*) backend=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --only=*) only=${arg#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_all.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
all_benches=(collectives)
[[ -z $np || $np =~ ^[1-9][0-9]*$ ]] || { echo "run_all.sh: --np must be a positive integer, not '$np'" >&2; exit 2; }
[[ $backend =~ ^(auto|mpi|nccl)$ ]] || { echo "run_all.sh: --backend must be auto, mpi or nccl, not '$backend'" >&2; exit 2; }
if [[ -n $only ]]; then
  for b in ${only//,/ }; do
    [[ " ${all_benches[*]} " == *" $b "* ]] || { echo "run_all.sh: --only: unknown benchmark '$b' (known: ${all_benches[*]})" >&2; exit 2; }
  done
fi
selected() { [[ -z $only || ",$only," == *",$1,"* ]]; }

log() { printf '[run_all %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

tools/install_deps.sh || exit 1
log "building (build/)"
tools/build.sh build || { log "build failed"; exit 1; }
bin=$root/build/bin

# Hardware: GPUs through nvidia-smi; the build decides whether NCCL is available.
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [[ $backend == auto ]]; then
  backend=mpi
  ((gpus > 0)) && grep -q 'ZB_CUDA_ENABLED:INTERNAL=ON\|NCCL_LIBRARY:FILEPATH=/' build/CMakeCache.txt && backend=nccl
fi
cores=$(nproc 2>/dev/null || echo 2)
if [[ -z $np ]]; then
  if [[ $backend == nccl ]]; then np=$gpus; else np=$((cores < 2 ? 2 : (cores > 8 ? 8 : cores))); fi
fi

launch=()
if [[ -n ${SLURM_JOB_ID:-} ]] && command -v srun >/dev/null 2>&1; then
  launch=(srun -n "$np")
else
  launch=(mpirun -np "$np")
  ((np > cores)) && launch+=(--oversubscribe)
  if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
fi

stamp=$(date -u +%Y%m%dT%H%M%SZ)
host=$(hostname -s 2>/dev/null || hostname)
out=${out:-results/${stamp}_${host}}
mkdir -p "$out/logs" || { echo "run_all.sh: cannot create $out" >&2; exit 1; }
log "$np ranks, backend $backend, $gpus GPU(s), $cores cores; results in $out"

failures=0
commands=()
# run_bench NAME ARGS...: one benchmark, its JSON in $out/NAME.json, its log in logs/.
run_bench() {
  local name=$1
  shift
  local cmd=("${launch[@]}" "$bin/zb_$name" --backend="$backend" --json="$out/$name.json" "$@")
  commands+=("${cmd[*]}")
  local t0=$SECONDS
  log "$name: ${cmd[*]}"
  if "${cmd[@]}" >"$out/logs/$name.log" 2>&1; then
    log "$name: done in $((SECONDS - t0)) s"
  else
    log "$name: FAILED after $((SECONDS - t0)) s (see $out/logs/$name.log)"
    tail -n 5 "$out/logs/$name.log" >&2
    failures=$((failures + 1))
  fi
}

if selected collectives; then
  if ((quick)); then
    run_bench collectives --min-bytes=1K --max-bytes=1M --step-factor=4 --iters=5 --warmup=2
  elif [[ $backend == nccl ]]; then
    run_bench collectives --min-bytes=1K --max-bytes=1G --step-factor=2 --iters=20 --warmup=5
  else
    run_bench collectives --min-bytes=1K --max-bytes=64M --step-factor=2 --iters=10 --warmup=3
  fi
fi

python3 - "$out/manifest.json" "$backend" "$np" "$gpus" "$quick" "${commands[@]}" <<'PY'
import json, os, platform, subprocess, sys, tempfile
path, backend, np, gpus, quick, *commands = sys.argv[1:]
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""
manifest = {
    "revision": sh("git", "rev-parse", "HEAD"),
    "dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
    "host": platform.node(), "backend": backend, "ranks": int(np), "gpus": int(gpus),
    "quick": quick == "1", "commands": commands,
    "versions": {"mpirun": sh("mpirun", "--version").splitlines()[0] if sh("mpirun", "--version") else "",
                 "nvidia_smi": sh("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader")},
    "algorithm_settings": {k: v for k, v in os.environ.items() if k.startswith(("OMPI_MCA_coll", "OMPI_MCA_btl", "OMPI_MCA_pml", "NCCL_"))},
}
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
with os.fdopen(fd, "w") as f:
    json.dump(manifest, f, indent=2)
os.replace(tmp, path)
PY

# The summary: each benchmark's own closing table.
if [[ -f $out/logs/collectives.log ]]; then
  sed -n '/^# zb_collectives/,$p' "$out/logs/collectives.log"
fi

if ((failures)); then
  log "$failures benchmark(s) failed; results so far are in $out"
  exit 1
fi
log "all done: $out"

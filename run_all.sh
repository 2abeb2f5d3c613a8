#!/usr/bin/env bash
# run_all.sh: builds if needed, detects the hardware, runs the whole zerobench suite and
# writes results/<UTC stamp>_<host>/: one JSON per benchmark, manifest.json, logs/, figures/
# and summary.md; optionally compares the run with a baseline (exit 1 on a regression).
set -uo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root"

usage() {
  cat <<'USAGE'
usage: ./run_all.sh [options]

Builds zerobench if needed, runs every benchmark on the hardware present (NCCL with one
rank per GPU when GPUs are visible, else MPI on the CPUs), draws the figures and prints
summary.md. Results go to results/<UTC stamp>_<host>/:
  collectives.json   zb_collectives: all_reduce, reduce_scatter, all_gather over a size sweep
  zero_wire.json     zb_zero, every stage over sockets with ring algorithms: volumes
                     measured at the sockets (skipped with one rank, or one GPU)
  zero.json          zb_zero, every stage on the fastest transport, with compute and
                     overlap: time, exposed communication, memory; trace_<stage>.json timelines
  zero_sweep.json    zb_zero --compute-sweep: exposed communication against compute
  predict_sweep.json zb_collectives through the communication thread, back to back and each
                     waited for (--serial): what the step's collectives cost as the step issues them
  predict.json       zb_predict: each stage of zero.json predicted from predict_sweep.json,
                     with the error against what zero.json measured
  optimizer.json     zb_optimizer: kernels against the memory-bandwidth limit, step per stage
  plan.json          zb_plan: memory per GPU against N = 1..1024 for a 7e9-parameter model
  pipeline_wire.json zb_pipeline, dp, z1 and z2 over M micro-batches, over sockets with ring
                     algorithms: volumes measured at the sockets (skipped like zero_wire)
  pipeline.json      zb_pipeline on the fastest transport with compute: memory, gradient
                     memory, time, exposed and tail communication; trace_pipeline_z2.json
  offload.json       zb_offload: gradients out and weights in through 1, 2 and 3 device slots
                     with compute per chunk above the hide condition: device memory, copy
                     bandwidth against a copy alone, exposed copies, hidden fraction
  offload_sweep.json zb_offload --compute-sweep: gradients' hidden fraction against compute
  manifest.json      revision, command lines, versions, hardware, algorithm settings
  logs/ figures/ summary.md (and compare.md with --compare)

options:
  --quick            CI-sized run: small models and sizes, few iterations (about 2 minutes on
                     2 cores); with the mpi backend it launches 2 ranks unless --np is given
  --np=N             ranks to launch (default: one per GPU, or one per core, 2..8, on CPUs;
                     under Slurm the allocation's tasks)
  --srun-mpi=PLUGIN  under Slurm: srun's --mpi plugin (default: $ZB_SRUN_MPI, else the first
                     of pmix, pmix_v*, pmi2 in `srun --mpi=list` with which a two-rank MPI
                     job starts, else none)
  --backend=B        auto | mpi | nccl (default auto: nccl when a GPU is visible and the
                     build has CUDA)
  --out=DIR          results folder (default results/<UTC stamp>_<host>)
  --repetitions=N    repeat every Google Benchmark benchmark N times (default 5, or 3 with
                     --quick): figures and summary.md show the median and the spread
  --only=A,B         run only these: collectives, zero (both zb_zero runs), predict (needs
                     zero), sweep, optimizer, plan, pipeline (all three zb_pipeline runs),
                     offload (both zb_offload runs)
  --compare=DIR      compare this run with a baseline results folder (for example
                     results/baselines/<name>) through plots/compare.py; writes compare.md
                     into the results folder, prints it, and exits 1 on a regression
  --gate=G           exact: fail only when an exact metric differs (wrong, volume_psi,
                     bytes_per_param, params, ranks, wire_bytes_ideal, ...); all: also fail
                     when a timing is worse than --threshold
  --threshold=X      relative change of a timing counted as a regression
  --tolerance=M=REL  compare the measured counter M as exact within a relative REL;
                     repeatable, REL 0 makes M bit-exact
                     (defaults of these three, shared with plots/compare.py, are in
                     plots/compare_rules.py: gate exact, threshold 0.1, bytes_per_param=0.005,
                     volume_psi_measured=0.01)
  --bin=DIR          run the binaries in DIR (for example another revision's build/bin) and
                     neither install nor build; tools/ab.sh runs both sides this way
  --extra-args=L=ARGS  append ARGS (split on spaces) to the command of the run labelled L
                     (collectives, zero_wire, zero, predict_sweep, predict, zero_sweep, optimizer,
                     plan, pipeline_wire, pipeline, pipeline_trace, offload, offload_sweep) only, for
                     example --extra-args=collectives=--fault-slow=all_reduce:0.2; repeatable
  --no-figures       draw no figures (tools/ab.sh: its many small runs need only the JSON)
  -h, --help         this text

Progress goes to stderr, one line per benchmark with its elapsed time. A benchmark that
fails is reported with the tail of its log and the others still run; the exit code is 1
if any benchmark, the figures or the comparison failed, 2 for a bad option.
Under Slurm (SLURM_JOB_ID set and srun present) ranks are launched with srun --mpi=PLUGIN,
as many as the allocation has tasks (SLURM_NTASKS, else nodes x GPUs per node); the plugin
and how it was chosen go to manifest.json. Elsewhere mpirun.
USAGE
}

die2() { echo "run_all.sh: $*" >&2; exit 2; }

quick=0 no_figures=0 np="" backend=auto out="" only="" compare="" gate="" threshold="" reps="" bin_dir=""
srun_mpi=${ZB_SRUN_MPI:-}
srun_mpi_from=${ZB_SRUN_MPI:+ZB_SRUN_MPI}
declare -A tolerance=() extra=()
all_labels=(collectives zero_wire zero predict_sweep predict zero_sweep optimizer plan pipeline_wire pipeline
            pipeline_trace offload offload_sweep)
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    --no-figures) no_figures=1 ;;
    --np=*) np=${arg#*=} ;;
    --backend=*) backend=${arg#*=} ;;
    --srun-mpi=*) srun_mpi=${arg#*=} srun_mpi_from=--srun-mpi ;;
    --out=*) out=${arg#*=} ;;
    --only=*) only=${arg#*=} ;;
    --repetitions=*) reps=${arg#*=} ;;
    --compare=*) compare=${arg#*=} ;;
    --gate=*) gate=${arg#*=}; [[ -n $gate ]] || die2 "--gate needs exact or all" ;;
    --threshold=*) threshold=${arg#*=}; [[ -n $threshold ]] || die2 "--threshold needs a number" ;;
    --bin=*) bin_dir=${arg#*=}; [[ -n $bin_dir ]] || die2 "--bin needs a folder" ;;
    --extra-args=*)
      t=${arg#*=}
      [[ " ${all_labels[*]} " == *" ${t%%=*} "* && $t == *=* ]] \
        || die2 "--extra-args must be LABEL=ARGS with LABEL one of ${all_labels[*]}, not '$t'"
      extra[${t%%=*}]+=" ${t#*=}" ;;
    --tolerance=*)
      t=${arg#*=}
      [[ $t =~ ^[A-Za-z_][A-Za-z0-9_]*=([0-9]+([.][0-9]*)?|[.][0-9]+)$ ]] \
        || die2 "--tolerance must be METRIC=REL with REL a number >= 0, not '$t'"
      tolerance[${t%%=*}]=${t#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) die2 "unknown option '$arg' (see --help)" ;;
  esac
done
all_benches=(collectives zero predict sweep optimizer plan pipeline offload)
[[ -z $np || $np =~ ^[1-9][0-9]*$ ]] || die2 "--np must be a positive integer, not '$np'"
[[ -z $reps || $reps =~ ^[1-9][0-9]*$ ]] || die2 "--repetitions must be a positive integer, not '$reps'"
reps=${reps:-$( ((quick)) && echo 3 || echo 5)}
[[ $backend =~ ^(auto|mpi|nccl)$ ]] || die2 "--backend must be auto, mpi or nccl, not '$backend'"
[[ -z $srun_mpi || $srun_mpi =~ ^[a-z0-9_]+$ ]] || die2 "--srun-mpi must be a plugin name such as pmix, not '$srun_mpi'"
[[ -z $gate || $gate =~ ^(exact|all)$ ]] || die2 "--gate must be exact or all, not '$gate'"
[[ -z $threshold || $threshold =~ ^[0-9]+([.][0-9]*)?$|^[.][0-9]+$ ]] || die2 "--threshold must be a number >= 0, not '$threshold'"
[[ -z $bin_dir || -d $bin_dir ]] || die2 "--bin: '$bin_dir' is not a folder"
[[ -n $out || $* != *--out=* ]] || die2 "--out needs a folder"
if [[ $* == *--only=* ]]; then
  [[ -n $only ]] || die2 "--only needs names (known: ${all_benches[*]})"
  for b in ${only//,/ }; do
    [[ " ${all_benches[*]} " == *" $b "* ]] || die2 "--only: unknown benchmark '$b' (known: ${all_benches[*]})"
  done
fi
if [[ $* == *--compare=* ]]; then
  [[ -d $compare ]] || die2 "--compare: '$compare' is not a results folder"
  compare=$(cd "$compare" && pwd)
fi
selected() { [[ -z $only || ",$only," == *",$1,"* ]]; }

# The results folder first: a path that cannot be written fails now, not after the run.
stamp=$(date -u +%Y%m%dT%H%M%SZ)
host=$(hostname -s 2>/dev/null || hostname)
out=${out:-results/${stamp}_${host}}
mkdir -p "$out/logs" 2>/dev/null && [[ -w $out/logs ]] || die2 "--out: cannot create a writable folder $out"
out=$(cd "$out" && pwd)

log() { printf '[run_all %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
t_start=$SECONDS

if [[ -n $bin_dir ]]; then
  bin=$(cd "$bin_dir" && pwd)
  log "binaries from $bin (not building)"
else
  tools/install_deps.sh || exit 1
  log "building (build/)"
  tools/build.sh build || { log "build failed"; exit 1; }
  bin=$root/build/bin
fi

# Hardware: GPUs through nvidia-smi; the build decides whether NCCL is available.
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [[ $backend == auto ]]; then
  backend=mpi
  ((gpus > 0)) && grep -q 'ZB_CUDA_ENABLED:INTERNAL=ON\|NCCL_LIBRARY:FILEPATH=/' "$bin/../CMakeCache.txt" && backend=nccl
fi
cores=$(nproc 2>/dev/null || echo 2)
slurm=0
[[ -n ${SLURM_JOB_ID:-} ]] && command -v srun >/dev/null 2>&1 && slurm=1
# Under Slurm the allocation says how many ranks: its tasks, else its nodes times the GPUs
# of a node (this node's count stands for the others').
if [[ -z $np ]] && ((slurm)); then
  np=${SLURM_NTASKS:-${SLURM_NPROCS:-}}
  if [[ -z $np ]] && [[ $backend == nccl ]]; then np=$(( ${SLURM_JOB_NUM_NODES:-1} * (gpus > 0 ? gpus : 1) )); fi
fi
if [[ -z $np ]]; then
  if [[ $backend == nccl ]]; then np=$((gpus > 0 ? gpus : 1))
  elif ((quick)); then np=2  # the baseline's rank count: exact metrics depend on N
  else np=$((cores < 2 ? 2 : (cores > 8 ? 8 : cores))); fi
fi

# Launcher. On CPUs a rank's compute thread and its communication thread each need a core,
# so MPI ranks are not bound to one.
launch=()
if ((slurm)); then
  # Slurm's default MpiDefault=none cannot start Debian's Open MPI: name a PMI plugin. The
  # user's choice, else the first one listed with which a two-rank job really starts.
  if [[ -z $srun_mpi ]]; then
    srun_mpi=none srun_mpi_from="none of srun --mpi=list started a two-rank job"
    plugins=$(srun --mpi=list 2>&1 | awk '/^[ \t]+[a-z0-9_]+$/ {print $1} /pmix plugin versions available:/ {
      sub(/.*available: */, ""); gsub(/,/, " "); print}')
    for p in $(printf '%s\n' $plugins | grep -x 'pmix') $(printf '%s\n' $plugins | grep '^pmix_v') \
             $(printf '%s\n' $plugins | grep -x 'pmi2'); do
      [[ -x $bin/zb_collectives ]] || break
      if timeout 120 srun --mpi="$p" -n "$((np < 2 ? np : 2))" "$bin/zb_collectives" --backend=mpi \
           --ops=all_reduce --min-bytes=1K --max-bytes=1K --iters=1 --warmup=0 --no-bare >/dev/null 2>&1; then
        srun_mpi=$p srun_mpi_from="first of srun --mpi=list that started a two-rank job"
        break
      fi
    done
  fi
  launch=(srun --mpi="$srun_mpi" -n "$np")
else
  launch=(mpirun -np "$np")
  ((np > cores)) && launch+=(--oversubscribe)
  [[ $backend == mpi ]] && launch+=(--bind-to none)
  if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
fi

# Socket transport for measured volumes. MPI: Open MPI's tcp BTL with its ring algorithms,
# so measured bytes compare with the ring ideal; NCCL: its socket transport.
wire_env=() wire_mca=() wire_note=""
ring_mca=(btl tcp,self pml ob1 coll_tuned_use_dynamic_rules 1 coll_tuned_allreduce_algorithm 4
          coll_tuned_reduce_scatter_algorithm 3 coll_tuned_allgather_algorithm 4)
if ((np < 2)); then
  wire_note="one rank moves nothing over a wire"
elif [[ $backend == nccl ]]; then
  wire_env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket)
  # mpirun passes its environment only to local ranks; -x exports it to every node.
  ((slurm)) || wire_mca=(-x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_NET)
elif ((slurm)); then
  for ((i = 0; i < ${#ring_mca[@]}; i += 2)); do wire_env+=("OMPI_MCA_${ring_mca[i]}=${ring_mca[i + 1]}"); done
else
  for ((i = 0; i < ${#ring_mca[@]}; i += 2)); do wire_mca+=(--mca "${ring_mca[i]}" "${ring_mca[i + 1]}"); done
fi

# A reused folder: drop what this script writes, so nothing stale passes for this run's.
rm -f "$out"/{collectives,zero_wire,zero,predict_sweep,predict,zero_sweep,optimizer,plan,manifest,pipeline_wire,pipeline,offload,offload_sweep}.json "$out"/trace_*.json \
  "$out"/summary.md "$out"/compare.md
runs_tsv=$out/logs/runs.tsv
: >"$runs_tsv"
log "$np ranks, backend $backend, $gpus GPU(s), $cores cores$( ((quick)) && echo ', quick')$( ((slurm)) \
  && echo ", Slurm job $SLURM_JOB_ID, srun --mpi=$srun_mpi ($srun_mpi_from)");" "results in $out"

failures=0
# shellcheck source=tools/run_all_lib.sh
source tools/run_all_lib.sh
rep_args=()
((reps > 1)) && rep_args=(--benchmark_repetitions="$reps")

# Sizes of every family, quick (CI and the baseline) or full, per backend.
# shellcheck source=tools/run_all_sizes.sh
source tools/run_all_sizes.sh

selected collectives && mpi_bench collectives zb_collectives "${coll[@]}"

if selected zero; then
  if [[ -n $wire_note ]]; then
    skip zero_wire "$wire_note"
  elif [[ ! -x $bin/zb_zero ]]; then
    skip zero_wire "$bin/zb_zero not built"
  else
    prefix=()
    ((${#wire_env[@]})) && prefix=(env "${wire_env[@]}")
    extra_for zero_wire
    run_bench zero_wire zero_wire.json "${wire_env[*]:-${wire_mca[*]}}" \
      "${prefix[@]}" "${launch[@]}" "${wire_mca[@]}" "$bin/zb_zero" --backend="$backend" \
      --json="$out/zero_wire.json" "${rep_args[@]}" "${model[@]}" "${zero_iters[@]}" "${more[@]}"
  fi
  mpi_bench zero zb_zero "${model[@]}" "${zero_iters[@]}" "${compute[@]}" --overlap=on \
    --trace="$out/trace.json"
fi

# The step predicted from a sweep of its own collectives, timed as the step issues them
# (through the communication thread, back to back and each waited for), for the model and
# compute zero.json measured;
# GEMM compute has no model, so on GPUs only the communication is predicted.
if selected predict; then
  if [[ ! -x $bin/zb_predict ]]; then
    skip predict "$bin/zb_predict not built"
  else
    mpi_bench predict_sweep zb_collectives --progress=thread --serial --min-bytes=64K \
      --max-bytes="$predict_max" --step-factor=2 --iters=$( ((quick)) && echo 5 || echo 10) --warmup=2
    predict_compute=("${compute[@]}")
    [[ ${compute[0]} == --compute=gemm* ]] && predict_compute=(--compute=none)
    measured=()
    [[ -f $out/zero.json ]] && measured=(--measured="$out/zero.json")
    extra_for predict
    [[ -f $out/predict_sweep.json ]] && run_bench predict predict.json "" "$bin/zb_predict" \
      --sweep="$out/predict_sweep.json" "${model[@]}" "${predict_compute[@]}" --overlap=on \
      "${measured[@]}" --json="$out/predict.json" "${more[@]}"
  fi
fi

selected sweep && mpi_bench zero_sweep zb_zero "${model[@]}" "${sweep[@]}" "${sweep_kind[@]}" --overlap=on

selected optimizer && mpi_bench optimizer zb_optimizer "${opt_args[@]}"


if selected pipeline; then
  # Volumes and memory need neither repetitions, nor many steps, nor the split timings.
  wire_bench pipeline_wire zb_pipeline "${pipe[@]}" --iters=1 --warmup=0 --no-split --benchmark_repetitions=1
  mpi_bench pipeline zb_pipeline "${pipe[@]}" "${pipe_timed[@]}" "${compute[@]}"
  # One traced z2 step at M = 4: the reduce-scatters between backward chunks (no JSON).
  if [[ -x $bin/zb_pipeline ]]; then
    run_bench pipeline_trace "" "" "${launch[@]}" "$bin/zb_pipeline" --backend="$backend" \
      "${pipe[@]}" --microbatches=4 --strategies=z2 --iters=1 --warmup=1 "${compute[@]}" \
      --trace="$out/trace_pipeline_z2.json"
  fi
fi

if selected offload; then
  mpi_bench offload zb_offload "${offload[@]}" --slots=1,2,3 "${offload_compute[@]}"
  mpi_bench offload_sweep zb_offload "${offload[@]}" --offload=grads --slots=1,2,3 "${offload_sweep[@]}"
fi

if selected plan; then
  if [[ -x $bin/zb_plan ]]; then
    # Runs nothing on the hardware: one process, no launcher.
    extra_for plan
    run_bench plan plan.json "" "$bin/zb_plan" --params=7e9 --dp=1,2,4,8,16,32,64,128,256,512,1024 \
      --json="$out/plan.json" "${more[@]}"
  else
    skip plan "$bin/zb_plan not built"
  fi
fi

python3 plots/manifest.py "$out" --runs="$runs_tsv" --backend="$backend" --ranks="$np" --gpus="$gpus" \
  --quick="$quick" --launcher="${launch[*]}" --argv="$*" \
  --slurm-pmi="$( ((slurm)) && echo "$srun_mpi")" --slurm-pmi-from="$srun_mpi_from" \
  || { log "manifest.json: FAILED"; failures=$((failures + 1)); }

t0=$(now_us)
if ((no_figures)); then
  log "figures: skipped (--no-figures)"
elif python3 plots/zbplot.py "$out" >"$out/logs/figures.log" 2>&1; then
  drawn=$(grep -c '^zbplot: wrote' "$out/logs/figures.log")
  log "figures: done in $(since "$t0") s -> figures/ ($drawn figures)"
else
  log "figures: FAILED; last lines of logs/figures.log:"
  log_tail "$out/logs/figures.log"
  failures=$((failures + 1))
fi

if python3 plots/summary.py "$out" >"$out/logs/summary.log" 2>&1; then
  echo
  cat "$out/summary.md"
else
  log "summary.md: FAILED; last lines of logs/summary.log:"
  log_tail "$out/logs/summary.log"
  failures=$((failures + 1))
fi

compare_failed=0
if [[ -n $compare ]]; then
  # Only what was given: compare.py's defaults (plots/compare_rules.py) are this script's.
  rule_args=()
  [[ -n $gate ]] && rule_args+=(--gate="$gate")
  [[ -n $threshold ]] && rule_args+=(--threshold="$threshold")
  for m in "${!tolerance[@]}"; do rule_args+=(--tolerance="$m=${tolerance[$m]}"); done
  python3 plots/compare.py "$compare" "$out" "${rule_args[@]}" \
    --markdown="$out/compare.md" >"$out/logs/compare.log" 2>&1
  rc=$?
  if [[ -f $out/compare.md ]] && ((rc != 2)); then
    echo
    cat "$out/compare.md"
  else
    log_tail "$out/logs/compare.log"
  fi
  case $rc in
    0) log "compare with $compare: $(tail -n 1 "$out/logs/compare.log")" ;;
    1) log "compare with $compare: $(tail -n 1 "$out/logs/compare.log"); see compare.md"; compare_failed=1 ;;
    *) log "compare with $compare: could not compare (exit $rc); see logs/compare.log"; compare_failed=1 ;;
  esac
fi

if ((failures || compare_failed)); then
  what="$failures failure(s)$( ((compare_failed)) && echo ', comparison failed')"
  log "finished in $((SECONDS - t_start)) s: $what; results in $out"
  exit 1
fi
log "all done in $((SECONDS - t_start)) s: $out"

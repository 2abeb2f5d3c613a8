#!/usr/bin/env bash
# One prepared run of every GPU path on a machine with one GPU, bare or not: builds the CUDA
# configuration (from a bundle of tools/gpu_bundle.sh where the machine has no MPI, Google
# Benchmark or GoogleTest), runs each path at one rank, prints PASS/FAIL per check and then the
# figures, and leaves summary.txt, logs.tar.gz and results.tar.gz in the output folder.
# Installs nothing. Finishes within --budget (default 420 s, 7 minutes) on one GPU: whole runs on
# an H200 took 312 and 358 s (2026-12-04, docs/measurements.md), and a 15-minute lease then keeps
# room for an --only rerun. What it has done is packed into the output folder after every
# check, so a run stopped from outside (a device limit shorter than the budget) still leaves
# its logs and results.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

usage() {
  cat <<'USAGE'
usage: tools/gpu_check.sh [--bundle=DIR] [--out=DIR] [--budget=S] [--build-only] [--nccl-tests=DIR]
                          [--only=LIST]

  --bundle=DIR   take MPI, Google Benchmark and GoogleTest from DIR (made by
                 tools/gpu_bundle.sh); default gpu_bundle/ when it exists, else the system's
  --out=DIR      where summary.txt, logs.tar.gz and results.tar.gz go (default $OUT, else
                 /tmp/zb_gpu_check)
  --budget=S     seconds the whole check may take (default 420; 1800 with --build-only): each check stops at
                 its own limit or when the budget runs out, and checks left when it is
                 spent FAIL as not run; give the device's limit less about 30 s
  --build-only   configure, build and check the sm_90 code, without a GPU
  --nccl-tests=DIR
                 a folder holding nccl-tests' all_reduce_perf, reduce_scatter_perf and
                 all_gather_perf (default $ZB_NCCL_TESTS, else the bundle's nccl-tests/, which
                 tools/gpu_bundle.sh --nccl-tests-src=SRC builds): they run at one GPU with -J
                 on the NCCL zerobench was built with, and zb_predict predicts the stages from
                 their JSON. Without any, the check says so in one SKIP line
  --only=LIST    run only the checks named (comma-separated, as the summary names them, e.g.
                 --only=nccl_overlap,nccl_offload to rerun two that failed); configure, build,
                 sm90_sass and mpi_singleton always run, and each check left out says SKIP
                 (nccl-tests' three are nccl_tests_all_reduce, _reduce_scatter and _all_gather).
                 A check that reads another's results (nccl_predict reads nccl_collectives'
                 and nccl_zero's) needs that one named too; a name no check ran under fails
Exit 0 when every check passed, 1 otherwise (no GPU: one line saying so), 2 for a bad option.
USAGE
}

bundle="" out=${OUT:-/tmp/zb_gpu_check} build_only=0 budget="" nccl_tests=${ZB_NCCL_TESTS:-} only=
for arg in "$@"; do
  case $arg in
    --nccl-tests=*) nccl_tests=${arg#*=} ;;
    --bundle=*) bundle=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --budget=*) budget=${arg#*=} ;;
    --build-only) build_only=1 ;;
    --only=*) only=${arg#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_check.sh: unknown option '$arg' (allowed: --bundle=DIR, --out=DIR, --budget=S, --build-only, --nccl-tests=DIR, --only=LIST, --help)" >&2; exit 2 ;;
  esac
done
budget=${budget:-$((build_only ? 1800 : 420))}  # a build alone, on a machine without a GPU, may be slow
[[ $budget =~ ^[0-9]+$ ]] && ((budget >= 30)) \
  || { echo "gpu_check.sh: --budget=$budget: expected a whole number of seconds, at least 30" >&2; exit 2; }
[[ -z $only || $only =~ ^[a-z0-9_]+(,[a-z0-9_]+)*$ ]] \
  || { echo "gpu_check.sh: --only=$only: expected check names separated by commas" >&2; exit 2; }
mkdir -p "$out" || { echo "gpu_check.sh: cannot make the output folder '$out'" >&2; exit 2; }
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# Before anything else: without a GPU there is nothing to check.
gpu=""
if command -v nvidia-smi >/dev/null; then
  gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
fi
if [[ -z $gpu ]] && compgen -G '/proc/driver/nvidia/gpus/*' >/dev/null; then
  gpu="$(ls /proc/driver/nvidia/gpus | wc -l) GPU(s) listed by the driver (nvidia-smi absent or silent)"
fi
if [[ -z $gpu ]] && ((!build_only)); then
  say "gpu_check: no GPU visible (nvidia-smi lists none, /proc/driver/nvidia/gpus is empty): nothing to check"
  exit 1
fi

work=$(mktemp -d /tmp/zb_gpu_check.XXXXXX)
logs=$work/logs res=$work/results
mkdir -p "$logs" "$res"
fails=0 t_start=$SECONDS
fail_now() {  # an environment that cannot build: one line, then pack what there is
  say "FAIL $1"
  fails=$((fails + 1))
  finish
}
pack() {  # what there is so far, into the output folder: each tarball whole or not at all
  local t
  for t in logs results; do
    tar -C "$work" -czf "$out/.$t.tar.gz" "$t" 2>/dev/null && mv -f "$out/.$t.tar.gz" "$out/$t.tar.gz"
  done
}
finish() {
  # A name --only gave that no check carries (misspelt, or never reached) must not pass as run.
  local name
  for name in ${only//,/ }; do
    if [[ " $named " != *" $name "* ]]; then
      say "FAIL $name (named by --only, but no check of that name ran)"
      fails=$((fails + 1))
    fi
  done
  pack
  say "gpu_check: $fails failure(s) in $((SECONDS - t_start)) s; $out holds summary.txt, logs.tar.gz, results.tar.gz"
  rm -rf "$work"
  exit $((fails > 0))
}
# Stopped from outside (a device limit shorter than the budget, ^C): say so and pack.
trap 'say "FAIL gpu_check (stopped by a signal after $((SECONDS - t_start)) s)"; fails=$((fails + 1)); finish' TERM INT
limit=150
# check NAME COMMAND...: runs it (at most $limit s, and no further than the budget), logs it,
# prints the verdict and returns the command's status. Once the budget is spent a check is not
# started: it fails as not run. A check --only leaves out says SKIP and returns 1 (nothing
# that needs its results follows), without counting as a failure.
always="configure build sm90_sass mpi_singleton" named=""
# stamp LOG TIMES: copies its input to LOG and, to TIMES, each line after the seconds since it
# started: a benchmark's row is printed as it ends, so the gaps are what each benchmark took,
# setup and check included (what the run table's cost model prices).
stamp() {
  local t0=${EPOCHREALTIME/./} line us
  : >"$2"
  while IFS= read -r line || [[ -n $line ]]; do
    printf '%s\n' "$line"
    us=$((${EPOCHREALTIME/./} - t0))
    printf '%d.%03d\t%s\n' $((us / 1000000)) $((us / 1000 % 1000)) "$line" >>"$2"
  done >"$1"
}
check() {
  local name=$1 t0=$SECONDS rc left=$((budget - (SECONDS - t_start) - 10))
  shift
  if [[ -n $only && ",$only," != *",$name,"* && " $always " != *" $name "* ]]; then
    say "SKIP $name (not in --only)"
    return 1
  fi
  named+=" $name"
  if ((left < 5)); then
    say "FAIL $name (not run: the check's $budget s budget is spent)"
    fails=$((fails + 1))
    return 1
  fi
  local cap=$((left < limit ? left : limit))
  timeout -k 5 "$cap" "$@" 2>&1 | stamp "$logs/$name.log" "$logs/$name.times"
  rc=${PIPESTATUS[0]}
  check_s=$((SECONDS - t0))
  if ((rc == 0)); then
    say "PASS $name ($((SECONDS - t0)) s)"
  else
    local why="exit $rc"
    ((rc == 124 || rc == 137)) && why="stopped after $cap s"
    say "FAIL $name ($((SECONDS - t0)) s, $why): see logs/$name.log"
    tail -n 15 "$logs/$name.log"
    fails=$((fails + 1))
  fi
  pack
  return $rc
}

# --- The machine: each thing the build needs, found or named as missing in one line. ---------
say "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n), $(uname -m), $( (. /etc/os-release && echo "$PRETTY_NAME") 2>/dev/null)"
say "env gpu: ${gpu:-none (--build-only)}"
version_ge() { [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1) == "$2" ]]; }

if [[ -z $bundle && -f $root/gpu_bundle/MANIFEST ]]; then
  bundle=$root/gpu_bundle
fi
if [[ -n $bundle ]]; then
  # shellcheck source=tools/bundle_env.sh
  source tools/bundle_env.sh "$bundle" 2>"$logs/bundle.log" \
    || fail_now "bundle: $(cat "$logs/bundle.log")"
  say "env bundle: $zb_bundle ($(sed -n 2p "$zb_bundle/MANIFEST"))"
  if [[ -z $nccl_tests && -f $zb_bundle/nccl-tests/BUILD ]]; then nccl_tests=$zb_bundle/nccl-tests; fi
else
  zb_bundle_cmake_args=()
  say "env bundle: none; using the system's MPI, Google Benchmark and GoogleTest"
fi

# CMakeLists.txt needs 3.24; the GPU machine may have an older system cmake and a newer one
# in Python's cmake package.
cmake_bin="" cmake_seen=""
for c in $(type -ap cmake) "$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null)"; do
  [[ -x $c ]] || continue
  v=$("$c" --version 2>/dev/null | awk 'NR == 1 {print $3}')
  cmake_seen+=" $c=$v"
  if version_ge "$v" 3.24; then cmake_bin=$c; break; fi
done
[[ -n $cmake_bin ]] || fail_now "env cmake: need 3.24 or newer, found:${cmake_seen:- none}"
say "env cmake: $cmake_bin $v"

nvcc=$(command -v nvcc || true)
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -n $nvcc ]] || fail_now "env nvcc: not on PATH nor in /usr/local/cuda/bin"
say "env nvcc: $nvcc, $("$nvcc" --version | grep -o 'release [0-9.]*')"

cxx=$(command -v g++ || command -v c++ || true)
[[ -n $cxx ]] || fail_now "env c++: neither g++ nor c++ on PATH (nvcc needs a host compiler too)"
export OMPI_CXX=$cxx  # the bundle's mpicxx asks for c++ otherwise
say "env c++: $cxx, $("$cxx" --version | head -n 1)"

generator=()
if ! command -v make >/dev/null; then
  command -v ninja >/dev/null || fail_now "env build tool: neither make nor ninja on PATH"
  generator=(-G Ninja)
fi

command -v mpicxx >/dev/null || fail_now "env mpi: no mpicxx (pass --bundle=DIR, made by tools/gpu_bundle.sh)"
say "env mpi: $(command -v mpicxx), $(mpicxx --showme:version 2>&1 | head -n 1)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 7))'; then
  say "env python3: $(python3 -c 'import sys; print(sys.executable, sys.version.split()[0])'), torch $(timeout 60 python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo 'not importable')"
else
  say "env python3: none of 3.7 or newer: the torch comparison and the figures will be missing"
fi

# --- Build: sm_90 only (SASS and PTX), which is what this machine runs, in half the time. ----
# --fresh: what configure finds (the bundle, NCCL) is found anew and printed on every run.
check configure "$cmake_bin" --fresh -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DZB_CUDA=ON \
  -DBUILD_TESTING=ON -DZB_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" "${generator[@]}" \
  "${zb_bundle_cmake_args[@]}"
cp build-gpu/CMakeFiles/CMake*.log build-gpu/CMakeFiles/CMakeConfigureLog.yaml "$logs/" 2>/dev/null
grep -h '^-- zerobench:' "$logs/configure.log" | sed 's/^-- zerobench: /env found: /' | tee -a "$summary"
[[ -f build-gpu/CMakeCache.txt ]] || fail_now "configure: no build-gpu/CMakeCache.txt; nothing can build"
# Keep going past a target that fails to compile: the others still build and run (run_path
# skips a binary the build lacks), where make would stop at the first.
keep_going=(-k)
((${#generator[@]})) && keep_going=(-k 0)
limit=240 check build "$cmake_bin" --build build-gpu -j "$(nproc 2>/dev/null || echo 4)" -- "${keep_going[@]}"
bin=build-gpu/bin
[[ -x $bin/zb_zero ]] || fail_now "build: no $bin/zb_zero; nothing more can run"

# Hopper machine code in the binaries, not only PTX for the driver to compile at start-up.
cuobjdump=$(command -v cuobjdump || echo "$(dirname "$nvcc")/cuobjdump")
if [[ -x $cuobjdump ]]; then
  check sm90_sass bash -c "'$cuobjdump' --list-elf --list-ptx $bin/zb_zero && '$cuobjdump' --list-elf $bin/zb_zero | grep -q 'sm_90'"
else
  say "SKIP sm90_sass: no cuobjdump on PATH or beside nvcc"
fi
((build_only)) && finish

# MPI alone, on the CPU: a program started without mpirun (an Open MPI singleton, relocated
# when it comes from the bundle) must come up before anything on the GPU can.
check mpi_singleton "$bin/zb_zero" --backend=mpi --params=100003 --layers=2 --iters=1 --warmup=0 \
  --stages=dp
# CUDA kernels against their CPU references (the unit tests skip these without a GPU): first of
# the GPU checks, the one a short budget must not lose.
if [[ -x $bin/zb_unit_tests ]]; then
  check cuda_unit_tests "$bin/zb_unit_tests" --gtest_filter='*Cuda*:*CUDA*:*Gpu*:*GPU*'
else
  say "SKIP cuda_unit_tests: this build has no zb_unit_tests"
fi

# --- The GPU paths, at one rank on the nccl backend. A later path is one more line here, and
# one function in tools/gpu_summary.py for its figures. --------------------------------------
run_path() {  # run_path NAME PROGRAM ARGS...: results/NAME.json; SKIP when the build lacks it
  local name=$1 prog=$2
  shift 2
  if [[ ! -x $bin/$prog ]]; then
    say "SKIP $name: this build has no $prog"
    return
  fi
  check "nccl_$name" "$bin/$prog" --backend=nccl --timeout=60 --json="$res/$name.json" "$@" \
    && printf '%s\t%s\t%s\t%s\n' "$name" "$check_s" "$prog" "$*" >>"$logs/runs.tsv"
}

# Every size of every op checked element by element, out of place and in place (NCCL's two
# forms, as a step's buckets reduce); --serial also times each one waited for, which the
# prediction below takes the hand-off of a blocking wait from.
run_path collectives zb_collectives --min-bytes=1K --max-bytes=256M --step-factor=4 --iters=10 --warmup=3 --serial --placement=out,in
# NCCL without MPI: one rank launched from torchrun's variables (the TCP control plane, NCCL's
# unique id handed out on it, the GPU from LOCAL_RANK), every element checked.
if [[ -x $bin/zb_collectives ]]; then
  check nccl_env_launch env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK -u PMI_RANK RANK=0 WORLD_SIZE=1 \
    LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 bash -c "'$bin/zb_collectives' --backend=nccl --timeout=60 \
    --min-bytes=1K --max-bytes=1M --step-factor=32 --iters=3 --warmup=1 --json='$work/env_launch.json' \
    && grep -q '\"launch\": \"torchrun\"' '$work/env_launch.json'"
fi
# The hierarchical all-reduce: the node and cross-node communicators ncclCommSplit makes, and
# NCCL's in-place reduce-scatter, all-reduce and all-gather on them, every element checked.
run_path hier zb_collectives --ops=hier_all_reduce --min-bytes=1K --max-bytes=256M --step-factor=16 \
  --iters=10 --warmup=3
# A training step of every stage (hsdp and hpz on the split communicators): device memory from
# cudaMemGetInfo, the final state checked bit for bit against the reference.
# Its round with communication alone traced (results/trace_comm_STAGE.json), for --explain.
run_path zero zb_zero --params=64e6 --layers=16 --iters=5 --warmup=2 --trace="$res/trace_comm.json" \
  --trace-round=comm
# The same steps predicted from the collective sweep above (one GPU: NCCL's own copies), held
# against what was measured (results/predict.json has comm_error per stage), and lined up
# against that trace: logs/nccl_predict.log names where each stage's difference comes from.
run_path predict zb_predict --sweep="$res/collectives.json" --params=64e6 --layers=16 \
  --measured="$res/zero.json" --explain
# The same steps predicted from nccl-tests' own sweeps (-J JSON) at one GPU: its programs as
# the bundle carries them (tools/gpu_bundle.sh --nccl-tests-src) or as the user points at them,
# loading the NCCL zerobench was built with. nccl-tests times no hand-off: zb_predict's
# --handoff-us default stands in, and its output says so.
nccl_ops=(all_reduce reduce_scatter all_gather)
if [[ -n $nccl_tests ]]; then
  missing=""
  for op in "${nccl_ops[@]}"; do [[ -x $nccl_tests/${op}_perf ]] || missing+=" ${op}_perf"; done
  if [[ -n $missing ]]; then
    say "FAIL nccl_tests: $nccl_tests lacks$missing"
    fails=$((fails + 1))
  else
    say "env nccl-tests: $nccl_tests$([[ -f $nccl_tests/BUILD ]] && echo " ($(sed -n 2p "$nccl_tests/BUILD" | cut -d, -f1); $(sed -n 3p "$nccl_tests/BUILD"))")"
    # Joined only where both parts exist: an empty entry would search the working folder.
    nccl_lib=$(sed -n 's/^NCCL_LIBRARY:[A-Z]*=//p' build-gpu/CMakeCache.txt)
    nccl_path=${nccl_lib:+$(dirname "$nccl_lib")}
    nccl_path=$nccl_path${nccl_path:+${LD_LIBRARY_PATH:+:}}${LD_LIBRARY_PATH:-}
    sweeps=()
    for op in "${nccl_ops[@]}"; do
      rm -f "$res/nccl_$op.json"  # -J never overwrites: it would write nccl_$op.json.0
      check "nccl_tests_$op" env LD_LIBRARY_PATH="$nccl_path" \
        "$nccl_tests/${op}_perf" -b 1K -e 256M -f 4 -g 1 -d bfloat16 -J "$res/nccl_$op.json"
      sweeps+=("$res/nccl_$op.json")
    done
    run_path predict_nccl_tests zb_predict --sweep="$(IFS=,; echo "${sweeps[*]}")" --params=64e6 --layers=16 \
      --measured="$res/zero.json"
  fi
else
  say "SKIP nccl_tests: no nccl-tests programs: make the bundle with tools/gpu_bundle.sh --nccl-tests-src=SRC (a nccl-tests checkout), or pass --nccl-tests=DIR or ZB_NCCL_TESTS=DIR naming a folder with all_reduce_perf, reduce_scatter_perf and all_gather_perf"
fi
# Every stage overlapped with cuBLAS GEMM compute, ordered by CUDA events between the compute
# and communication streams, checked against the reference; a trace per stage.
run_path overlap zb_zero --model=gpt:layers=4,hidden=1024,vocab=32000 --compute=gemm:4096 \
  --prefetch=1 --iters=5 --warmup=2 --trace="$res/trace.json"
# Optimizer kernels (impl:cuda) from 16M to 256M parameters against a device-to-device copy,
# and the optimizer step of every stage, checked bit for bit.
run_path optimizer zb_optimizer --min-params=16777216 --max-params=268435456 --step-factor=4 \
  --step-params=67108864 --iters=10 --warmup=3
# The quantization kernels (impl:cuda: INT8 and INT4 blocks, FP8 with a tensor scale, qgZ's
# dequantize-reduce-requantize) against the same copy limit, each checked against its reference.
run_path quantize zb_optimizer --parts=quantize --min-params=16777216 --max-params=67108864 --step-factor=4 \
  --iters=10 --warmup=3
# ZeRO++ and FP8 in the step: quantize and dequantize on the compute stream before and after each
# gather and gradient hop, the final state held to the interval the error bounds allow.
run_path zero_quantized zb_zero --params=16e6 --layers=16 --stages=z2,z3,zpp --quantize-weights=int8,fp8 \
  --quantize-grads=int4 --iters=3 --warmup=1
# dp, z1 and pipeline ZeRO-2 over 2 and 8 micro-batches of 2 chunks with GEMM compute: the
# accumulation kernels and the stream waits of the pipeline step, checked bit for bit.
run_path pipeline zb_pipeline --params=64e6 --layers=16 --pp=2 --chunks=2 --microbatches=2,8 \
  --compute=gemm:1024 --iters=3 --warmup=1
# Gradients out and weights in through 1, 2 and 3 slots: pinned host memory, the copy engine's
# own stream with events against compute, the CPU optimizer on the host shard and the GPU one
# on the copied-back shard, each checked bit for bit; device memory from cudaMemGetInfo.
run_path offload zb_offload --params=128e6 --layers=16 --chunks=4 --microbatches=4 --slots=1,2,3 \
  --compute=spin:20000 --iters=3 --warmup=1 --trace="$res/trace_offload.json"
run_path offload_device zb_offload --params=64e6 --layers=8 --chunks=4 --microbatches=2 --slots=2 \
  --offload=grads --optimizer-on=device --iters=3 --warmup=1

# PyTorch's fused AdamW doing the same work at the same sizes: ours/torch (> 1: ours faster).
# Without nccl_optimizer's results (--only left it out), torch's side alone.
ours=()
[[ -f $res/optimizer.json ]] && ours=(--ours="$res/optimizer.json")
for grad in bf16 fp32; do
  check "torch_adam_$grad" python3 tools/torch_adam.py --no-install --device=cuda --sizes=16777216,67108864,268435456 --grad-dtype=$grad \
    "${ours[@]}"
  # torch_adam exits 0 where it cannot compare (no torch, no CUDA in it): the PASS above is then
  # no comparison, and this line says so.
  grep -m 1 'torch_adam: skipped' "$logs/torch_adam_$grad.log" 2>/dev/null | sed "s/^/note torch_adam_$grad: /" | tee -a "$summary"
done

say "figures:"
if command -v python3 >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info < (3, 7))'; then
  python3 tools/gpu_summary.py "$res" "$logs" 2>&1 | sed 's/^/  /' | tee -a "$summary"
  # What these sizes imply for the default run on an 8-GPU node, and how far the run table's
  # cost model was from this GPU's own runs.
  say "estimate:"
  python3 tools/gpu_estimate.py "$logs/runs.tsv" 2>&1 | sed 's/^/  /' | tee -a "$summary"
else
  say "  n/a: no python3 of 3.7 or newer"
fi
finish

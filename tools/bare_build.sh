#!/usr/bin/env bash
# Proves here, without a GPU machine, that a bundle from tools/gpu_bundle.sh is all zerobench
# needs beyond a compiler and CMake: in a private mount namespace it hides the system's MPI,
# Google Benchmark and GoogleTest, builds the CPU configuration from the bundle alone and runs
# a one-rank zb_zero of every stage, started both without mpirun and with the bundle's mpirun.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'USAGE'
usage: tools/bare_build.sh [--bundle=DIR] [--build=DIR] [--build-only]

Needs root and `unshare -m` (a private mount namespace, where empty folders and /dev/null are
bound over every file of the system's Open MPI, Google Benchmark and GoogleTest packages).
Makes or reuses the bundle (default gpu_bundle/), configures the CPU build in DIR (default
build-bare/) with -DZB_CUDA=OFF -DBUILD_TESTING=ON, builds zb_zero and zb_unit_tests, runs
zb_zero at one rank on every stage, checked against the reference, and a few of the unit
tests (GoogleTest from the bundle). Exit 0 when every stage ends with wrong 0 and they pass,
1 on any failure, 2 for a bad option, 77 when this machine cannot hide the packages (the
reason on one line). --build-only stops after the build (./run_tests.sh builds this way before
the tests, so that the test's own run only finds the build current and runs it).
USAGE
}

bundle=$root/gpu_bundle build=$root/build-bare inside=0 only=
for arg in "$@"; do
  case $arg in
    --bundle=*) bundle=${arg#*=} ;;
    --build=*) build=${arg#*=} ;;
    --build-only) only=--build-only ;;
    --inside) inside=1 ;;  # internal: the second half, already in the namespace
    -h|--help) usage; exit 0 ;;
    *) echo "bare_build.sh: unknown option '$arg' (allowed: --bundle=DIR, --build=DIR, --build-only, --help)" >&2; exit 2 ;;
  esac
done
say() { echo "bare_build: $*"; }
fail() { echo "bare_build: FAIL: $*"; exit 1; }

# The packages whose files are hidden, where installed.
packages=(openmpi-bin libopenmpi-dev libopenmpi3 openmpi-common mpich libmpich-dev libmpich12
          libbenchmark-dev libbenchmark1debian libgtest-dev libgmock-dev googletest nlohmann-json3-dev)

under() {  # under PATH DIR...: PATH lies inside one of the DIRs
  local path=$1 d
  shift
  for d in "$@"; do [[ $path == "$d"/* ]] && return 0; done
  return 1
}

hide_system_copies() {
  local empty pkg path real n=0
  local -a files=() dirs=() installed=()
  empty=$(mktemp -d)
  for pkg in "${packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 && installed+=("$pkg")
  done
  if ((${#installed[@]} == 0)); then
    echo "bare_build: skipped: none of ${packages[*]} is installed, so hiding them would prove nothing"
    exit 77
  fi
  # Whole folders named after the packages (headers, CMake configs, Open MPI's tree); every
  # other file one by one, through its real path so that links and their targets go together.
  while read -r path; do
    [[ $path == /usr/share/doc/* || $path == /usr/share/man/* || $path == /usr/share/lintian/* ]] && continue
    if [[ -d $path && ! -L $path ]]; then
      [[ ${path##*/} =~ ^(openmpi|gtest|gmock|googletest|googlemock|benchmark|GTest|mpich|nlohmann|nlohmann_json)$ ]] \
        && ! under "$path" "${dirs[@]}" && dirs+=("$path")
    elif real=$(realpath -e "$path" 2>/dev/null); then
      files+=("$real")
    fi
  done < <(dpkg -L "${installed[@]}" 2>/dev/null | sort -u)
  for path in "${dirs[@]}"; do
    mount --bind "$empty" "$path" || fail "cannot bind an empty folder over $path"
    n=$((n + 1))
  done
  for path in $(printf '%s\n' "${files[@]}" | sort -u); do
    under "$path" "${dirs[@]}" && continue
    mount --bind /dev/null "$path" || fail "cannot bind /dev/null over $path"
    n=$((n + 1))
  done
  say "hid ${#dirs[@]} folders and $((n - ${#dirs[@]})) files of ${installed[*]}"
  # The proof that nothing of theirs is left to find.
  local tool
  for tool in mpicxx mpicc mpirun mpiexec; do
    # A hidden program is still named by PATH, through its links, but is now empty.
    path=$(command -v "$tool") && [[ -s $path ]] && fail "$tool is still on PATH after hiding: $path"
  done
  for path in /usr/include/benchmark/benchmark.h /usr/include/gtest/gtest.h /usr/include/nlohmann/json.hpp \
              /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h /usr/include/x86_64-linux-gnu/mpi/mpi.h; do
    [[ -s $path ]] && fail "$path is still readable after hiding"
  done
  return 0
}

if ((!inside)); then
  [[ $(id -u) == 0 ]] || { echo "bare_build: skipped: needs root to bind over system files"; exit 77; }
  command -v unshare >/dev/null && unshare -m --propagation private true 2>/dev/null \
    || { echo "bare_build: skipped: unshare -m (a private mount namespace) is refused here"; exit 77; }
  command -v dpkg >/dev/null || { echo "bare_build: skipped: no dpkg, so the system's packages cannot be listed"; exit 77; }
  "$root/tools/gpu_bundle.sh" --out="$bundle" || fail "tools/gpu_bundle.sh failed"
  exec unshare -m --propagation private "$0" --inside --bundle="$bundle" --build="$build" ${only:+"$only"}
fi

hide_system_copies
# shellcheck source=tools/bundle_env.sh
source "$root/tools/bundle_env.sh" "$bundle" || fail "no usable bundle at $bundle"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$build"
# --fresh: discovery starts from nothing every time, so a cache from an unhidden configure
# cannot stand in for the bundle.
# With the tests: the GPU check builds and runs zb_unit_tests, so GoogleTest must come from the
# bundle as well.
cmake --fresh -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DZB_CUDA=OFF -DBUILD_TESTING=ON \
  "${zb_bundle_cmake_args[@]}" >"$build/configure.log" 2>&1 \
  || { tail -n 30 "$build/configure.log"; fail "configure from the bundle failed"; }
grep '^-- zerobench:' "$build/configure.log" | sed 's/^-- /bare_build: /'
cmake --build "$build" --target zb_zero zb_unit_tests -j "$(nproc 2>/dev/null || echo 2)" >"$build/build.log" 2>&1 \
  || { tail -n 30 "$build/build.log"; fail "building zb_zero and zb_unit_tests from the bundle failed"; }
say "built $build/bin/zb_zero; its MPI and Google Benchmark resolve to:"
ldd "$build/bin/zb_zero" | grep -E 'libmpi|libbenchmark' | sed 's/^\s*/bare_build:   /'
ldd "$build/bin/zb_zero" | grep -E 'libmpi|libbenchmark' | grep -vq "$bundle" \
  && fail "zb_zero links an MPI or Google Benchmark outside the bundle"
[[ -n $only ]] && { say "built (--build-only: nothing run)"; exit 0; }

zero_args=(--params=1000003 --layers=4 --bucket-mb=1 --iters=2 --warmup=1 --stages=dp,z1,z2,z3)
verify() {  # verify JSON LAUNCH: every stage present, each with wrong 0
  python3 - "$1" "$2" <<'PY' || exit 1
import json, sys
path, how = sys.argv[1], sys.argv[2]
# Names are zero/stage:S/params:...; one row per stage.
rows = {dict(seg.partition(":")[::2] for seg in b["name"].split("/")[1:]).get("stage"): b
        for b in json.load(open(path))["benchmarks"]}
line = ", ".join(f"{s} wrong {rows[s].get('wrong', 'missing'):g}" if s in rows else f"{s} missing"
                 for s in ("dp", "z1", "z2", "z3"))
ok = all(s in rows and rows[s].get("wrong") == 0 for s in ("dp", "z1", "z2", "z3"))
print(f"bare_build: zb_zero, one rank, {how}: {line}: {'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
}
"$build/bin/zb_zero" "${zero_args[@]}" --json="$build/zero_singleton.json" >"$build/zero_singleton.log" 2>&1 \
  || { tail -n 20 "$build/zero_singleton.log"; fail "zb_zero without mpirun failed"; }
grep -A 5 '^# stage' "$build/zero_singleton.log" | sed 's/^/bare_build:   /'
verify "$build/zero_singleton.json" "started without mpirun"
mpirun -np 1 "$build/bin/zb_zero" "${zero_args[@]}" --json="$build/zero_mpirun.json" \
  >"$build/zero_mpirun.log" 2>&1 \
  || { tail -n 20 "$build/zero_mpirun.log"; fail "zb_zero under the bundle's mpirun -np 1 failed"; }
verify "$build/zero_mpirun.json" "under the bundle's mpirun -np 1"
# GoogleTest from the bundle: the unit tests of the formulas and the flags, which need no MPI.
"$build/bin/zb_unit_tests" --gtest_filter='StateFormula*:Flags*:PipelineFormula*' >"$build/unit_tests.log" 2>&1 \
  || { tail -n 20 "$build/unit_tests.log"; fail "zb_unit_tests built from the bundle failed"; }
say "zb_unit_tests (GoogleTest from the bundle): $(grep -E '^\[  PASSED  \]' "$build/unit_tests.log"): PASS"
say "PASS: the CPU configuration built and ran from $bundle alone"

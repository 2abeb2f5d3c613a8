#!/usr/bin/env bash
# Installs what zerobench needs to build, test and plot; where it cannot (not root, not
# Debian/Ubuntu) it names each missing package and the command that installs it.
# Shared by run_all.sh, run_tests.sh and .ci/run, so either may be the first command.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

missing=()
have() { command -v "$1" >/dev/null 2>&1; }
have cmake || missing+=(cmake)
have g++ || missing+=(g++)
have make || missing+=(make)
have git || missing+=(git)
{ have mpirun && have mpicxx; } || missing+=(openmpi-bin libopenmpi-dev)
[[ -f /usr/include/benchmark/benchmark.h ]] || missing+=(libbenchmark-dev)
[[ -f /usr/include/gtest/gtest.h ]] || missing+=(libgtest-dev)
[[ -f /usr/include/nlohmann/json.hpp ]] || missing+=(nlohmann-json3-dev)
# Gloo (the gloo backend) is optional: asked for only where the distribution has the package.
[[ -f /usr/include/gloo/config.h ]] || { have apt-cache && apt-cache show libgloo-dev >/dev/null 2>&1 \
  && missing+=(libgloo-dev); }
have python3 || missing+=(python3 python3-pip)
# ccache is optional, asked for only where root can install it: with it the two builds, the
# bare build's test and A/B worktrees share compiled objects (CMakeLists.txt).
have ccache || { [[ $(id -u) == 0 ]] && have apt-cache && apt-cache show ccache >/dev/null 2>&1 \
  && missing+=(ccache); }

if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]] && have apt-get; then
    echo "zerobench: installing ${missing[*]}" >&2
    apt-get update -qq >&2 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 || {
      echo "zerobench: apt-get install ${missing[*]} failed" >&2
      exit 1
    }
  else
    echo "zerobench: missing ${missing[*]}; install with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if ! python3 -c 'import matplotlib, numpy, scipy, pytest' >/dev/null 2>&1; then
  echo "zerobench: installing the plots' Python packages (plots/requirements.txt)" >&2
  python3 -m pip install -q -r "$root/plots/requirements.txt" >&2 || {
    echo "zerobench: missing Python packages; install with: python3 -m pip install -r plots/requirements.txt" >&2
    exit 1
  }
fi
exit 0

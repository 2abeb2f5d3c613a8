#!/usr/bin/env bash
# Configures (once) and builds one build directory; incremental, so cheap when up to date.
# Usage: tools/build.sh BUILD_DIR [cmake -D options...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: tools/build.sh BUILD_DIR [cmake options]}
shift
jobs=$(nproc 2>/dev/null || echo 2)
if [[ ! -f $dir/CMakeCache.txt ]]; then
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >&2
fi
cmake --build "$dir" -j "$jobs" >&2
